// SendHttp and StreamHttpLines against a stand-in server: a one-thread
// HTTP/1.1 server on 127.0.0.1 (plain, or TLS through OpenSSL with an
// optional required client certificate) that records what it was sent and
// answers through a handler that writes raw bytes, so a test can send
// chunks in pieces, keep a stream open or never answer. Certificates are
// made with the openssl CLI in a scratch directory for each test.
#include "codeco/common/http_client.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "test_pki.h"

namespace codeco {
namespace {

namespace fs = std::filesystem;

// A directory of its own for one test, removed at its end.
struct Scratch {
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "http_client_test.XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  fs::path path;
};

// Certificates: a CA, a server certificate for 127.0.0.1 and a client
// certificate (CN "tester") it signed, and an unrelated CA.
struct Pki : testing::TestPki {
  explicit Pki(const fs::path& dir) : TestPki(dir) {
    Ca("ca");
    Ca("other-ca");
    Leaf("server", "/CN=server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
         "ca");
    Leaf("tester", "/CN=tester", "extendedKeyUsage=clientAuth\n", "ca");
  }
};

// One request the stand-in saw.
struct Request {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string client_cn;  // CN of the verified client certificate
};

// One accepted connection, plain or TLS.
class Conn {
 public:
  Conn(int fd, SSL* ssl, int wake) : fd_(fd), ssl_(ssl), wake_(wake) {}

  bool Write(absl::string_view data) {
    while (!data.empty()) {
      const int n = ssl_ != nullptr
                        ? SSL_write(ssl_, data.data(), static_cast<int>(data.size()))
                        : static_cast<int>(send(fd_, data.data(), data.size(), MSG_NOSIGNAL));
      if (n <= 0) return false;
      data.remove_prefix(n);
    }
    return true;
  }

  // Reads what is there; 0 at the end of the stream or an error.
  int Read(char* buffer, int size) {
    return ssl_ != nullptr ? SSL_read(ssl_, buffer, size)
                           : static_cast<int>(recv(fd_, buffer, size, 0));
  }

  // Sends a whole answer and closes the connection afterwards.
  void Respond(int status, const std::string& content_type, const std::string& body) {
    std::string head = absl::StrCat("HTTP/1.1 ", status, status == 200 ? " OK" : " Other", "\r\n");
    if (!content_type.empty()) absl::StrAppend(&head, "Content-Type: ", content_type, "\r\n");
    Write(
        absl::StrCat(head, "Content-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body));
  }

  // Starts a chunked 200 answer.
  void StartChunked(const std::string& content_type) {
    Write(absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: ", content_type,
                       "\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"));
  }
  bool Chunk(absl::string_view data) {
    return Write(absl::StrCat(absl::Hex(data.size()), "\r\n", data, "\r\n"));
  }
  void EndChunked() { Write("0\r\n\r\n"); }

  // Waits until the client closes the connection or the server stops.
  void WaitForClose() {
    for (;;) {
      pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_, POLLIN, 0}};
      if (poll(fds, 2, 10000) <= 0) return;
      if (fds[1].revents != 0) return;
      char buffer[256];
      if (Read(buffer, sizeof buffer) <= 0) return;
    }
  }

 private:
  int fd_;
  SSL* ssl_;
  int wake_;
};

// TLS settings of a stand-in.
struct Tls {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;  // "" = no client certificate asked for
};

// The stand-in server: one connection at a time on a thread, until it goes
// out of scope.
class TestServer {
 public:
  using Handler = std::function<void(const Request&, Conn&)>;

  explicit TestServer(Handler handler, const Tls* tls = nullptr) : handler_(std::move(handler)) {
    if (tls != nullptr) {
      ctx_ = SSL_CTX_new(TLS_server_method());
      REQUIRE(ctx_ != nullptr);
      REQUIRE(SSL_CTX_use_certificate_file(ctx_, tls->cert_file.c_str(), SSL_FILETYPE_PEM) == 1);
      REQUIRE(SSL_CTX_use_PrivateKey_file(ctx_, tls->key_file.c_str(), SSL_FILETYPE_PEM) == 1);
      if (!tls->client_ca_file.empty()) {
        REQUIRE(SSL_CTX_load_verify_locations(ctx_, tls->client_ca_file.c_str(), nullptr) == 1);
        SSL_CTX_set_client_CA_list(ctx_, SSL_load_client_CA_file(tls->client_ca_file.c_str()));
        SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
      }
    }
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listener_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    REQUIRE(bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(listen(listener_, 8) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
    REQUIRE(pipe2(wake_, O_CLOEXEC) == 0);
    thread_ = std::thread([this] { Serve(); });
  }

  ~TestServer() {
    const char stop = 's';
    (void)!write(wake_[1], &stop, 1);
    thread_.join();
    close(listener_);
    close(wake_[0]);
    close(wake_[1]);
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
  }

  /// "http(s)://127.0.0.1:<port>".
  std::string url() const {
    return absl::StrCat(ctx_ != nullptr ? "https" : "http", "://127.0.0.1:", port_);
  }

  /// The requests read so far.
  std::vector<Request> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void Serve() {
    for (;;) {
      pollfd fds[2] = {{listener_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) continue;
      if (fds[1].revents != 0) return;
      const int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      // A client that stops talking does not hold the test up for long.
      timeval limit{10, 0};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      SSL* ssl = nullptr;
      if (ctx_ != nullptr) {
        ssl = SSL_new(ctx_);
        SSL_set_fd(ssl, fd);
        if (SSL_accept(ssl) != 1) {
          ERR_clear_error();
          SSL_free(ssl);
          close(fd);
          continue;
        }
      }
      Conn conn(fd, ssl, wake_[0]);
      Answer(ssl, conn);
      if (ssl != nullptr) {
        SSL_shutdown(ssl);
        ERR_clear_error();
        SSL_free(ssl);
      }
      close(fd);
    }
  }

  void Answer(SSL* ssl, Conn& conn) {
    Request request;
    if (ssl != nullptr) {
      X509* peer = SSL_get1_peer_certificate(ssl);
      if (peer != nullptr && SSL_get_verify_result(ssl) == X509_V_OK) {
        char cn[256] = {};
        X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof cn);
        request.client_cn = cn;
      }
      X509_free(peer);
    }
    std::string in;
    char buffer[4096];
    size_t head_end = std::string::npos;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos && in.size() < (64 << 10)) {
      const int n = conn.Read(buffer, sizeof buffer);
      if (n <= 0) return;
      in.append(buffer, n);
    }
    if (head_end == std::string::npos) return;
    std::vector<std::string> lines = absl::StrSplit(in.substr(0, head_end), "\r\n");
    std::vector<std::string> first = absl::StrSplit(lines[0], ' ');
    if (first.size() != 3) return;
    request.method = first[0];
    request.target = first[1];
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t colon = lines[i].find(':');
      if (colon == std::string::npos) continue;
      request.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
          std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    }
    size_t length = 0;
    if (auto it = request.headers.find("content-length"); it != request.headers.end()) {
      (void)absl::SimpleAtoi(it->second, &length);
    }
    while (in.size() - head_end - 4 < length) {
      const int n = conn.Read(buffer, sizeof buffer);
      if (n <= 0) return;
      in.append(buffer, n);
    }
    request.body = in.substr(head_end + 4, length);
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(request);
    }
    handler_(request, conn);
  }

  Handler handler_;
  SSL_CTX* ctx_ = nullptr;
  int listener_ = -1;
  int wake_[2] = {-1, -1};
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<Request> requests_;
};

TestServer::Handler Answers(int status, std::string content_type, std::string body) {
  return [=](const Request&, Conn& conn) { conn.Respond(status, content_type, body); };
}

HttpRequest Get(const std::string& url) {
  HttpRequest request;
  request.url = url;
  request.timeout = absl::Seconds(10);
  return request;
}

// A port nothing listens on (bound, then closed).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  close(fd);
  return ntohs(addr.sin_port);
}

// Collects the lines of a stream.
struct Lines {
  HttpLineHandler Handler() {
    return [this](std::string_view line) {
      got.emplace_back(line);
      return true;
    };
  }
  std::vector<std::string> got;
};

const std::function<bool()> kNeverCancelled = [] { return false; };

TEST_CASE("SendHttp GET sends the headers and returns status body and Content-Type") {
  TestServer server(Answers(200, "application/json; charset=utf-8", R"({"ok":true})"));
  HttpRequest request = Get(server.url() + "/api/v1/things?x=1");
  request.headers = {{"Accept", "application/json"}, {"Authorization", "Bearer s3cret"}};
  absl::StatusOr<HttpAnswer> answer = SendHttp(request, "test");
  REQUIRE(answer.ok());
  CHECK(answer->status == 200);
  CHECK(answer->body == R"({"ok":true})");
  CHECK(answer->content_type == "application/json; charset=utf-8");
  const std::vector<Request> seen = server.requests();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].method == "GET");
  CHECK(seen[0].target == "/api/v1/things?x=1");
  CHECK(seen[0].headers.at("accept") == "application/json");
  CHECK(seen[0].headers.at("authorization") == "Bearer s3cret");
  CHECK(seen[0].headers.count("content-type") == 0);
  CHECK(seen[0].body.empty());
}

TEST_CASE("SendHttp sends POST PUT PATCH and DELETE with their bodies") {
  TestServer server(Answers(200, "text/plain", "done"));
  for (const std::string method : {"POST", "PUT", "PATCH", "DELETE"}) {
    INFO(method);
    HttpRequest request = Get(server.url() + "/obj");
    request.method = method;
    request.body = absl::StrCat(R"({"method":")", method, R"("})");
    request.content_type = "application/merge-patch+json";
    absl::StatusOr<HttpAnswer> answer = SendHttp(request, "test");
    REQUIRE(answer.ok());
    CHECK(answer->body == "done");
    const Request seen = server.requests().back();
    CHECK(seen.method == method);
    CHECK(seen.body == request.body);
    CHECK(seen.headers.at("content-type") == "application/merge-patch+json");
    CHECK(seen.headers.count("expect") == 0);
  }
  // A body-less DELETE and a POST with no Content-Type.
  HttpRequest del = Get(server.url() + "/obj");
  del.method = "DELETE";
  REQUIRE(SendHttp(del, "test").ok());
  CHECK(server.requests().back().method == "DELETE");
  CHECK(server.requests().back().body.empty());
  HttpRequest post = Get(server.url() + "/obj");
  post.method = "POST";
  post.body = "a=b";
  REQUIRE(SendHttp(post, "test").ok());
  CHECK(server.requests().back().body == "a=b");
  CHECK(server.requests().back().headers.count("content-type") == 0);
}

TEST_CASE("SendHttp returns non-2xx answers as answers") {
  TestServer server(Answers(503, "", "overloaded"));
  absl::StatusOr<HttpAnswer> answer = SendHttp(Get(server.url()), "test");
  REQUIRE(answer.ok());
  CHECK(answer->status == 503);
  CHECK(answer->body == "overloaded");
  CHECK(answer->content_type.empty());
}

TEST_CASE("SendHttp cuts off an answer over max_response_bytes") {
  SECTION("with Content-Length") {
    TestServer server(Answers(200, "text/plain", std::string(1000, 'x')));
    HttpRequest request = Get(server.url());
    request.max_response_bytes = 100;
    absl::StatusOr<HttpAnswer> answer = SendHttp(request, "test");
    CHECK(answer.status().code() == absl::StatusCode::kResourceExhausted);
    CHECK(absl::StartsWith(answer.status().message(), "test " + server.url()));
  }
  SECTION("chunked") {
    TestServer server([](const Request&, Conn& conn) {
      conn.StartChunked("text/plain");
      for (int i = 0; i < 10 && conn.Chunk(std::string(100, 'x')); ++i) {
      }
      conn.EndChunked();
    });
    HttpRequest request = Get(server.url());
    request.max_response_bytes = 250;
    CHECK(SendHttp(request, "test").status().code() == absl::StatusCode::kResourceExhausted);
  }
}

TEST_CASE("SendHttp is UNAVAILABLE when nothing listens") {
  absl::StatusOr<HttpAnswer> answer =
      SendHttp(Get(absl::StrCat("http://127.0.0.1:", FreePort(), "/")), "test");
  CHECK(answer.status().code() == absl::StatusCode::kUnavailable);
  CHECK(absl::StrContains(answer.status().message(), "cannot connect"));
}

TEST_CASE("SendHttp is DEADLINE_EXCEEDED when the server never answers") {
  TestServer server([](const Request&, Conn& conn) { conn.WaitForClose(); });
  HttpRequest request = Get(server.url());
  request.timeout = absl::Milliseconds(300);
  absl::StatusOr<HttpAnswer> answer = SendHttp(request, "test");
  CHECK(answer.status().code() == absl::StatusCode::kDeadlineExceeded);
}

TEST_CASE("SendHttp refuses bad requests with INVALID_ARGUMENT") {
  HttpRequest request = Get("http://127.0.0.1:1/");
  SECTION("method") {
    request.method = "BREW";
    absl::StatusOr<HttpAnswer> answer = SendHttp(request, "test");
    CHECK(answer.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(absl::StrContains(answer.status().message(), "method"));
  }
  SECTION("url") {
    request.url = "ftp://127.0.0.1/";
    CHECK(SendHttp(request, "test").status().code() == absl::StatusCode::kInvalidArgument);
  }
  SECTION("client certificate without key") {
    request.client_cert_pem = "-----BEGIN CERTIFICATE-----\n";
    CHECK(SendHttp(request, "test").status().code() == absl::StatusCode::kInvalidArgument);
  }
  SECTION("client key without certificate") {
    request.client_key_file = "/nonexistent.key";
    CHECK(SendHttp(request, "test").status().code() == absl::StatusCode::kInvalidArgument);
  }
  SECTION("header with a line break") {
    request.headers = {{"X-A", "b\r\nX-Injected: c"}};
    CHECK(SendHttp(request, "test").status().code() == absl::StatusCode::kInvalidArgument);
  }
  SECTION("streaming too") {
    request.method = "GET ";
    Lines lines;
    CHECK(StreamHttpLines(request, "test", lines.Handler(), kNeverCancelled).status().code() ==
          absl::StatusCode::kInvalidArgument);
  }
}

TEST_CASE("SendHttp verifies the https server with ca_pem or ca_file") {
  Scratch scratch;
  Pki pki(scratch.path);
  Tls tls{pki.Path("server.crt"), pki.Path("server.key"), ""};
  TestServer server(Answers(200, "text/plain", "secure"), &tls);
  HttpRequest request = Get(server.url() + "/");
  SECTION("ca_pem") {
    request.ca_pem = pki.Pem("ca.crt");
    absl::StatusOr<HttpAnswer> answer = SendHttp(request, "test");
    REQUIRE(answer.ok());
    CHECK(answer->body == "secure");
  }
  SECTION("ca_file") {
    request.ca_file = pki.Path("ca.crt");
    absl::StatusOr<HttpAnswer> answer = SendHttp(request, "test");
    REQUIRE(answer.ok());
    CHECK(answer->body == "secure");
  }
  SECTION("the wrong CA as PEM") {
    request.ca_pem = pki.Pem("other-ca.crt");
    absl::StatusOr<HttpAnswer> answer = SendHttp(request, "test");
    CHECK(answer.status().code() == absl::StatusCode::kUnavailable);
    CHECK(absl::StrContains(answer.status().message(), "TLS"));
  }
  SECTION("the wrong CA as a file") {
    request.ca_file = pki.Path("other-ca.crt");
    CHECK(SendHttp(request, "test").status().code() == absl::StatusCode::kUnavailable);
  }
}

TEST_CASE("SendHttp presents a client certificate given as PEM text or files") {
  Scratch scratch;
  Pki pki(scratch.path);
  Tls tls{pki.Path("server.crt"), pki.Path("server.key"), pki.Path("ca.crt")};
  TestServer server(Answers(200, "text/plain", "hello tester"), &tls);
  HttpRequest request = Get(server.url() + "/");
  request.ca_pem = pki.Pem("ca.crt");
  SECTION("PEM text") {
    request.client_cert_pem = pki.Pem("tester.crt");
    request.client_key_pem = pki.Pem("tester.key");
    absl::StatusOr<HttpAnswer> answer = SendHttp(request, "test");
    REQUIRE(answer.ok());
    CHECK(answer->body == "hello tester");
    REQUIRE(server.requests().size() == 1);
    CHECK(server.requests()[0].client_cn == "tester");
  }
  SECTION("files") {
    request.client_cert_file = pki.Path("tester.crt");
    request.client_key_file = pki.Path("tester.key");
    REQUIRE(SendHttp(request, "test").ok());
    REQUIRE(server.requests().size() == 1);
    CHECK(server.requests()[0].client_cn == "tester");
  }
  SECTION("none: the server refuses") {
    absl::StatusOr<HttpAnswer> answer = SendHttp(request, "test");
    CHECK(answer.status().code() == absl::StatusCode::kUnavailable);
    CHECK(server.requests().empty());
  }
}

TEST_CASE("StreamHttpLines delivers lines split across chunks in order") {
  TestServer server([](const Request&, Conn& conn) {
    conn.StartChunked("application/json");
    for (const char* piece : {"{\"a\":1}\n{\"b", "\":2}\r\n", "\n{\"c\":", "3}\n{\"d\":4", "}"}) {
      if (!conn.Chunk(piece)) return;
    }
    conn.EndChunked();
  });
  Lines lines;
  absl::StatusOr<HttpAnswer> answer =
      StreamHttpLines(Get(server.url() + "/watch"), "test", lines.Handler(), kNeverCancelled);
  REQUIRE(answer.ok());
  CHECK(answer->status == 200);
  CHECK(answer->content_type == "application/json");
  CHECK(answer->body.empty());
  CHECK(lines.got ==
        std::vector<std::string>{R"({"a":1})", R"({"b":2})", "", R"({"c":3})", R"({"d":4})"});
}

TEST_CASE("StreamHttpLines delivers a last line without its newline") {
  TestServer server(Answers(200, "text/plain", "one\ntwo\nthree"));
  Lines lines;
  absl::StatusOr<HttpAnswer> answer =
      StreamHttpLines(Get(server.url()), "test", lines.Handler(), nullptr);
  REQUIRE(answer.ok());
  CHECK(lines.got == std::vector<std::string>{"one", "two", "three"});
}

TEST_CASE("StreamHttpLines stops with OK when the handler says so") {
  TestServer server([](const Request&, Conn& conn) {
    conn.StartChunked("text/plain");
    conn.Chunk("1\n2\n3\n");
    conn.WaitForClose();  // the stream stays open: only the client ends it
  });
  std::vector<std::string> got;
  absl::StatusOr<HttpAnswer> answer = StreamHttpLines(
      Get(server.url()), "test",
      [&](std::string_view line) {
        got.emplace_back(line);
        return got.size() < 2;
      },
      kNeverCancelled);
  REQUIRE(answer.ok());
  CHECK(answer->status == 200);
  CHECK(got == std::vector<std::string>{"1", "2"});
}

TEST_CASE("StreamHttpLines ends an open stream with CANCELLED once cancelled") {
  TestServer server([](const Request&, Conn& conn) {
    conn.StartChunked("text/plain");
    conn.Chunk("first\n");
    conn.WaitForClose();
  });
  std::atomic<bool> first_seen{false};
  HttpRequest request = Get(server.url());
  request.timeout = absl::Seconds(60);  // far beyond the generous bound below
  const absl::Time start = absl::Now();
  absl::StatusOr<HttpAnswer> answer = StreamHttpLines(
      request, "test",
      [&](std::string_view line) {
        first_seen = line == "first";
        return true;
      },
      [&] { return first_seen.load(); });
  CHECK(answer.status().code() == absl::StatusCode::kCancelled);
  CHECK(first_seen.load());
  CHECK(absl::Now() - start < absl::Seconds(30));
}

TEST_CASE("StreamHttpLines notices cancellation while the stream is idle") {
  TestServer server([](const Request&, Conn& conn) {
    conn.StartChunked("text/plain");
    conn.Chunk("first\n");
    conn.WaitForClose();
  });
  // True from 250 ms after the first line: nothing arrives by then, so only
  // the client's own polling while idle can end the stream.
  absl::Time first_seen = absl::InfiniteFuture();
  HttpRequest request = Get(server.url());
  request.timeout = absl::Seconds(60);
  const absl::Time start = absl::Now();
  absl::StatusOr<HttpAnswer> answer = StreamHttpLines(
      request, "test",
      [&](std::string_view) {
        first_seen = absl::Now();
        return true;
      },
      [&] { return absl::Now() - first_seen > absl::Milliseconds(250); });
  CHECK(answer.status().code() == absl::StatusCode::kCancelled);
  CHECK(absl::Now() - start < absl::Seconds(30));
}

TEST_CASE("StreamHttpLines is DEADLINE_EXCEEDED when the stream outlasts the timeout") {
  TestServer server([](const Request&, Conn& conn) {
    conn.StartChunked("text/plain");
    conn.Chunk("first\n");
    conn.WaitForClose();
  });
  HttpRequest request = Get(server.url());
  request.timeout = absl::Milliseconds(300);
  Lines lines;
  absl::StatusOr<HttpAnswer> answer =
      StreamHttpLines(request, "test", lines.Handler(), kNeverCancelled);
  CHECK(answer.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(lines.got == std::vector<std::string>{"first"});
}

TEST_CASE("StreamHttpLines refuses a line over max_response_bytes") {
  TestServer server([](const Request&, Conn& conn) {
    conn.StartChunked("text/plain");
    if (!conn.Chunk("short\n")) return;
    for (int i = 0; i < 10 && conn.Chunk(std::string(10, 'x')); ++i) {
    }
    conn.Chunk("\n");
    conn.EndChunked();
  });
  HttpRequest request = Get(server.url());
  request.max_response_bytes = 32;
  Lines lines;
  absl::StatusOr<HttpAnswer> answer =
      StreamHttpLines(request, "test", lines.Handler(), kNeverCancelled);
  CHECK(answer.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(lines.got == std::vector<std::string>{"short"});
}

TEST_CASE("StreamHttpLines returns a non-2xx answer whole and calls no handler") {
  TestServer server(Answers(404, "application/json", "{\"reason\":\"NotFound\"}\nmore\n"));
  bool called = false;
  absl::StatusOr<HttpAnswer> answer = StreamHttpLines(
      Get(server.url() + "/missing"), "test",
      [&](std::string_view) {
        called = true;
        return true;
      },
      kNeverCancelled);
  REQUIRE(answer.ok());
  CHECK(answer->status == 404);
  CHECK(answer->body == "{\"reason\":\"NotFound\"}\nmore\n");
  CHECK(answer->content_type == "application/json");
  CHECK_FALSE(called);
}

TEST_CASE("StreamHttpLines streams over https with a client certificate") {
  Scratch scratch;
  Pki pki(scratch.path);
  Tls tls{pki.Path("server.crt"), pki.Path("server.key"), pki.Path("ca.crt")};
  TestServer server(
      [](const Request&, Conn& conn) {
        conn.StartChunked("application/json");
        conn.Chunk("a\nb");
        conn.Chunk("c\n");
        conn.EndChunked();
      },
      &tls);
  HttpRequest request = Get(server.url());
  request.ca_pem = pki.Pem("ca.crt");
  request.client_cert_pem = pki.Pem("tester.crt");
  request.client_key_pem = pki.Pem("tester.key");
  Lines lines;
  absl::StatusOr<HttpAnswer> answer =
      StreamHttpLines(request, "test", lines.Handler(), kNeverCancelled);
  REQUIRE(answer.ok());
  CHECK(lines.got == std::vector<std::string>{"a", "bc"});
  CHECK(server.requests().at(0).client_cn == "tester");
}

}  // namespace
}  // namespace codeco
