#include "netma/server/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace codeco::netma {
namespace {

constexpr size_t kMaxRequestBytes = 8192;
constexpr int kReadTimeoutMs = 5000;

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    default:
      return "Error";
  }
}

void WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& listen,
                                                              HttpHandler handler) {
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError("alto_listen: must be host:port, not " + listen);
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  int port = 0;
  try {
    port = std::stoi(listen.substr(colon + 1));
  } catch (...) {
    return absl::InvalidArgumentError("alto_listen: bad port in " + listen);
  }
  sockaddr_storage storage{};
  socklen_t len = 0;
  int family = AF_INET;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    family = AF_INET6;
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof(sockaddr_in6);
  } else {
    return absl::InvalidArgumentError("alto_listen: host must be a numeric address: " + listen);
  }
  std::unique_ptr<HttpServer> server(new HttpServer());
  server->handler_ = std::move(handler);
  server->listen_fd_ = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (server->listen_fd_ < 0) return absl::InternalError("socket failed");
  int one = 1;
  ::setsockopt(server->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(server->listen_fd_, reinterpret_cast<sockaddr*>(&storage), len) != 0 ||
      ::listen(server->listen_fd_, 64) != 0) {
    return absl::UnavailableError(
        absl::StrCat("alto_listen: cannot listen on ", listen, ": ", std::strerror(errno)));
  }
  ::getsockname(server->listen_fd_, reinterpret_cast<sockaddr*>(&storage), &len);
  int bound = ntohs(family == AF_INET ? v4->sin_port : v6->sin6_port);
  server->address_ = absl::StrCat(listen.substr(0, colon), ":", bound);
  if (::pipe2(server->wake_pipe_, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  server->thread_ = std::thread([s = server.get()] { s->Serve(); });
  return server;
}

HttpServer::~HttpServer() {
  if (thread_.joinable()) {
    char byte = 1;
    (void)!::write(wake_pipe_[1], &byte, 1);
    thread_.join();
  }
  for (int fd : {listen_fd_, wake_pipe_[0], wake_pipe_[1]}) {
    if (fd >= 0) ::close(fd);
  }
}

void HttpServer::Serve() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    int n = ::poll(fds, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || (fds[1].revents & POLLIN)) return;
    if (fds[0].revents & POLLIN) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      HandleConnection(fd);
      ::close(fd);
    }
  }
}

void HttpServer::HandleConnection(int fd) {
  std::string request;
  absl::Time deadline = absl::Now() + absl::Milliseconds(kReadTimeoutMs);
  while (request.find("\r\n\r\n") == std::string::npos) {
    if (request.size() > kMaxRequestBytes) return;
    int left = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (left <= 0) return;
    pollfd pfd = {fd, POLLIN, 0};
    if (::poll(&pfd, 1, left) <= 0) return;
    char buf[2048];
    ssize_t got = ::recv(fd, buf, sizeof(buf), 0);
    if (got <= 0) return;
    request.append(buf, static_cast<size_t>(got));
  }
  HttpResponse response;
  size_t line_end = request.find("\r\n");
  std::string line = request.substr(0, line_end);
  size_t sp1 = line.find(' ');
  size_t sp2 = line.find(' ', sp1 == std::string::npos ? 0 : sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos) {
    response = {400, "text/plain", "bad request line\n"};
  } else if (line.substr(0, sp1) != "GET") {
    response = {405, "text/plain", "only GET is served\n"};
  } else {
    std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    response = handler_(target.substr(0, target.find('?')));
  }
  std::string out = absl::StrCat("HTTP/1.1 ", response.status, " ", Reason(response.status),
                                 "\r\nContent-Type: ", response.content_type,
                                 "\r\nContent-Length: ", response.body.size(),
                                 "\r\nConnection: close\r\n\r\n", response.body);
  WriteAll(fd, out);
}

}  // namespace codeco::netma
