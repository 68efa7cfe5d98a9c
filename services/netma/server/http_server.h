#pragma once
// A small blocking HTTP/1.1 server for GET requests, enough to serve ALTO
// documents: one accept thread, one request per connection (Connection:
// close), bounded request size and read time. prometheus-cpp's exposer
// cannot serve custom handlers, hence this.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace codeco::netma {

/// What a handler answers.
struct HttpResponse {
  /// Status code, e.g. 200.
  int status = 200;
  /// Content-Type header.
  std::string content_type = "text/plain";
  /// Body.
  std::string body;
};

/// Answers a GET for `path` (without the query string).
using HttpHandler = std::function<HttpResponse(const std::string& path)>;

/// A running HTTP server.
class HttpServer {
 public:
  /// Binds `listen` (host:port, numeric IPv4 or IPv6 host; port 0 picks a free
  /// port) and serves `handler` on a thread of its own.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& listen,
                                                           HttpHandler handler);
  /// Stops accepting and joins the thread.
  ~HttpServer();

  /// The bound address, host:port with the real port.
  const std::string& address() const { return address_; }

 private:
  HttpServer() = default;
  void Serve();
  void HandleConnection(int fd);

  HttpHandler handler_;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  std::string address_;
  std::thread thread_;
};

}  // namespace codeco::netma
