// The kubelet driver against a stand-in kubelet: a one-thread HTTPS server on
// loopback (OpenSSL) that, like the kubelet, asks for a client certificate,
// answers 401 without one its CA signed and 403 to a user it does not
// authorize, and answers POST /checkpoint/{ns}/{pod}/{container} the way
// kubelet's server.go does (404 "pod does not exist" / "container X does not
// exist", 500 with the runtime's text, 200 {"items":["<archive>"]} after
// writing the archive). The CA, the kubelet's and the clients' certificates
// are made with the openssl CLI in a scratch directory for each test.
#include "checkpointer/drivers/kubelet_driver.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "checkpointer/image/oci_image.h"
#include "checkpointer/tests/test_registry.h"
#include "test_pki.h"

namespace codeco::checkpointer {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::Scratch;

void Write(const fs::path& p, const std::string& contents) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << contents;
}

// The user the stand-in kubelet authorizes for nodes/checkpoint (kubeadm's
// apiserver-kubelet-client certificate).
constexpr char kAuthorizedUser[] = "kube-apiserver-kubelet-client";

// Certificates made with the openssl CLI: a CA; the kubelet's serving
// certificate for 127.0.0.1; clients the CA signed (authorized and not);
// and a rogue CA with a client of its own.
struct Pki : codeco::testing::TestPki {
  explicit Pki(const fs::path& dir) : TestPki(dir) {
    Ca("ca");
    Ca("rogue-ca");
    Leaf("kubelet", "/CN=kubelet", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
         "ca");
    const std::string client_ext = "extendedKeyUsage=clientAuth\n";
    Leaf("client", absl::StrCat("/O=system:masters/CN=", kAuthorizedUser), client_ext, "ca");
    Leaf("intruder", "/CN=intruder", client_ext, "ca");
    Leaf("rogue-client", absl::StrCat("/CN=", kAuthorizedUser), client_ext, "rogue-ca");
  }
};

// One request the stand-in saw.
struct Request {
  std::string method;
  // Path and query, "/checkpoint/default/redis-0/redis?timeout=30".
  std::string target;
  // The verified client certificate's common name; empty without one.
  std::string user;
};

// One answer.
struct Response {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

// The stand-in kubelet: serves one connection at a time on a thread, until
// it goes out of scope.
class FakeKubelet {
 public:
  using Handler = std::function<Response(const Request&)>;

  FakeKubelet(const Pki& pki, Handler handler) : handler_(std::move(handler)) {
    ctx_ = SSL_CTX_new(TLS_server_method());
    REQUIRE(ctx_ != nullptr);
    REQUIRE(SSL_CTX_use_certificate_file(ctx_, pki.Path("kubelet.crt").c_str(), SSL_FILETYPE_PEM) ==
            1);
    REQUIRE(SSL_CTX_use_PrivateKey_file(ctx_, pki.Path("kubelet.key").c_str(), SSL_FILETYPE_PEM) ==
            1);
    REQUIRE(SSL_CTX_load_verify_locations(ctx_, pki.Path("ca.crt").c_str(), nullptr) == 1);
    SSL_CTX_set_client_CA_list(ctx_, SSL_load_client_CA_file(pki.Path("ca.crt").c_str()));
    // Like the kubelet (tls.RequestClientCert): a certificate is asked for,
    // the handshake goes on without one or with one that does not verify,
    // and the request is then answered 401.
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, [](int, X509_STORE_CTX*) { return 1; });

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

  ~FakeKubelet() {
    const char stop = 's';
    (void)!write(wake_[1], &stop, 1);
    thread_.join();
    close(listener_);
    close(wake_[0]);
    close(wake_[1]);
    SSL_CTX_free(ctx_);
  }

  /// "https://127.0.0.1:<port>".
  std::string url() const { return absl::StrCat("https://127.0.0.1:", port_); }

  /// The requests answered so far.
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
      SSL* ssl = SSL_new(ctx_);
      SSL_set_fd(ssl, fd);
      if (SSL_accept(ssl) == 1) Answer(ssl);
      ERR_clear_error();
      SSL_free(ssl);
      close(fd);
    }
  }

  void Answer(SSL* ssl) {
    Request request;
    X509* peer = SSL_get1_peer_certificate(ssl);
    if (peer != nullptr && SSL_get_verify_result(ssl) == X509_V_OK) {
      char cn[256] = {};
      X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof cn);
      request.user = cn;
    }
    X509_free(peer);

    // The head, then as many body bytes as Content-Length says (ignored).
    std::string in;
    char buffer[4096];
    size_t head_end = std::string::npos;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos && in.size() < (64 << 10)) {
      const int n = SSL_read(ssl, buffer, sizeof buffer);
      if (n <= 0) return;
      in.append(buffer, n);
    }
    if (head_end == std::string::npos) return;
    std::vector<std::string> lines = absl::StrSplit(in.substr(0, head_end), "\r\n");
    std::vector<std::string> first = absl::StrSplit(lines[0], ' ');
    if (first.size() != 3) return;
    request.method = first[0];
    request.target = first[1];
    size_t length = 0;
    for (const std::string& line : lines) {
      if (absl::StartsWithIgnoreCase(line, "content-length:")) {
        (void)absl::SimpleAtoi(line.substr(15), &length);
      }
    }
    while (in.size() - head_end - 4 < length) {
      const int n = SSL_read(ssl, buffer, sizeof buffer);
      if (n <= 0) return;
      in.append(buffer, n);
    }

    Response response;
    if (request.user.empty()) {
      response = {401, "Unauthorized", "text/plain"};
    } else if (request.user != kAuthorizedUser) {
      response = {403,
                  absl::StrCat("Forbidden (user=", request.user,
                               ", verb=create, resource=nodes, subresource=checkpoint)"),
                  "text/plain"};
    } else {
      response = handler_(request);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(request);
    }
    const char* reason = response.status == 200   ? "OK"
                         : response.status == 401 ? "Unauthorized"
                         : response.status == 403 ? "Forbidden"
                         : response.status == 404 ? "Not Found"
                         : response.status == 500 ? "Internal Server Error"
                                                  : "Other";
    const std::string out = absl::StrCat("HTTP/1.1 ", response.status, " ", reason,
                                         "\r\nContent-Type: ", response.content_type,
                                         "\r\nContent-Length: ", response.body.size(),
                                         "\r\nConnection: close\r\n\r\n", response.body);
    SSL_write(ssl, out.data(), static_cast<int>(out.size()));
    SSL_shutdown(ssl);
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

// What the stand-in kubelet runs: pod default/redis-0 with container redis.
// A checkpoint writes `archive` under `node_root` the way CRI-O names it.
struct Node {
  fs::path node_root;
  std::string archive_contents = "checkpoint archive: memory pages, rootfs diff, spec";

  static constexpr char kArchive[] =
      "/var/lib/kubelet/checkpoints/checkpoint-redis-0_default-redis-2024-02-29T18:28:17Z.tar";

  Response Checkpoint(const Request& r) const {
    const std::string path = r.target.substr(0, r.target.find('?'));
    std::vector<std::string> parts = absl::StrSplit(path, '/');  // "", checkpoint, ns, pod, c
    if (r.method != "POST" || parts.size() != 5 || parts[1] != "checkpoint") {
      return {404, "404 page not found", "text/plain"};
    }
    if (parts[2] != "default" || parts[3] != "redis-0") {
      return {404, "pod does not exist", "text/plain"};
    }
    if (parts[4] != "redis") {
      return {404, absl::StrCat("container ", parts[4], " does not exist"), "text/plain"};
    }
    Write(node_root / fs::path(kArchive).relative_path(), archive_contents);
    return {200, absl::StrCat("{\"items\":[\"", kArchive, "\"]}")};
  }
};

ContainerTarget Redis0(const std::string& container = "redis") {
  ContainerTarget t;
  t.cluster = "k8s-a";
  t.node = "node-a";
  t.pod_namespace = "default";
  t.pod = "redis-0";
  t.container = container;
  t.image = "redis:7";
  return t;
}

KubeletCheckpointDriver::Options DriverOptions(const Pki& pki, const std::string& url,
                                               const fs::path& node_root) {
  KubeletCheckpointDriver::Options o;
  o.kubernetes = true;
  o.node_urls = {{"node-a", url}};
  o.client_cert_file = pki.Path("client.crt");
  o.client_key_file = pki.Path("client.key");
  o.ca_file = pki.Path("ca.crt");
  o.node_root = node_root;
  o.request_timeout = absl::Seconds(30);
  return o;
}

TEST_CASE("kubelet driver copies the checkpoint archive and records it") {
  Scratch scratch;
  Pki pki(scratch.path);
  Node node{scratch.path / "node"};
  FakeKubelet kubelet(pki, [&](const Request& r) { return node.Checkpoint(r); });
  KubeletCheckpointDriver::Options options = DriverOptions(pki, kubelet.url(), node.node_root);
  options.checkpoint_timeout = absl::Milliseconds(29'500);  // sent rounded up
  const fs::path original = node.node_root / fs::path(Node::kArchive).relative_path();

  SECTION("the kubelet's archive stays by default") {
    KubeletCheckpointDriver driver(options);
    const fs::path dir = scratch.path / "dumps" / "one";
    absl::StatusOr<StateDump> dump = driver.Checkpoint(Redis0(), dir);
    INFO(dump.status());
    REQUIRE(dump.ok());
    CHECK(dump->directory == dir);
    CHECK(ReadFile(dir / "checkpoint.tar") == node.archive_contents);
    CHECK(dump->bytes == static_cast<int64_t>(node.archive_contents.size()));
    CHECK(dump->facts.at(kDriverFact) == "kubelet");
    CHECK(dump->facts.at(kKubeletArchiveFact) == Node::kArchive);
    CHECK(dump->facts.at(kKubeletArchiveDigestFact) == DigestOf(node.archive_contents));
    CHECK(dump->facts.at(kKubeletSourceFact) == "node-a/default/redis-0/redis");
    CHECK(fs::exists(original));

    std::vector<Request> seen = kubelet.requests();
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].method == "POST");
    CHECK(seen[0].target == "/checkpoint/default/redis-0/redis?timeout=30");
    CHECK(seen[0].user == kAuthorizedUser);

    // A second checkpoint into the same directory is refused before the
    // kubelet is asked.
    absl::StatusOr<StateDump> again = driver.Checkpoint(Redis0(), dir);
    CHECK(again.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK(kubelet.requests().size() == 1);
  }
  SECTION("the kubelet's archive is removed when the options say so") {
    options.remove_kubelet_archive = true;
    KubeletCheckpointDriver driver(options);
    absl::StatusOr<StateDump> dump = driver.Checkpoint(Redis0(), scratch.path / "dump");
    INFO(dump.status());
    REQUIRE(dump.ok());
    CHECK(ReadFile(scratch.path / "dump" / "checkpoint.tar") == node.archive_contents);
    CHECK_FALSE(fs::exists(original));
  }
}

TEST_CASE("kubelet driver names the pod or container the kubelet does not know") {
  Scratch scratch;
  Pki pki(scratch.path);
  Node node{scratch.path / "node"};
  FakeKubelet kubelet(pki, [&](const Request& r) { return node.Checkpoint(r); });
  KubeletCheckpointDriver driver(DriverOptions(pki, kubelet.url(), node.node_root));
  const fs::path dir = scratch.path / "dump";

  absl::StatusOr<StateDump> dump = driver.Checkpoint(Redis0("sidecar"), dir);
  INFO(dump.status());
  CHECK(dump.status().code() == absl::StatusCode::kNotFound);
  CHECK(absl::StrContains(dump.status().message(), "node-a"));
  CHECK(absl::StrContains(dump.status().message(), "default/redis-0/sidecar"));
  CHECK(absl::StrContains(dump.status().message(), "container sidecar does not exist"));
  CHECK_FALSE(fs::exists(dir));

  ContainerTarget ghost = Redis0();
  ghost.pod = "ghost";
  dump = driver.Checkpoint(ghost, dir);
  CHECK(dump.status().code() == absl::StatusCode::kNotFound);
  CHECK(absl::StrContains(dump.status().message(), "default/ghost/redis"));
  CHECK(absl::StrContains(dump.status().message(), "pod does not exist"));
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("kubelet driver passes the runtime's failure text through") {
  Scratch scratch;
  Pki pki(scratch.path);
  std::mutex mu;
  std::string text;
  FakeKubelet kubelet(pki, [&](const Request&) {
    std::lock_guard<std::mutex> lock(mu);
    return Response{500, text, "text/plain"};
  });
  KubeletCheckpointDriver driver(DriverOptions(pki, kubelet.url(), scratch.path / "node"));

  {
    std::lock_guard<std::mutex> lock(mu);
    text =
        "checkpointing of default/redis-0/redis failed (rpc error: code = Unknown desc = "
        "failed to checkpoint container: CRIU checkpointing failed -52: Function not implemented)";
  }
  absl::StatusOr<StateDump> dump = driver.Checkpoint(Redis0(), scratch.path / "dump");
  INFO(dump.status());
  CHECK(dump.status().code() == absl::StatusCode::kInternal);
  CHECK(absl::StrContains(dump.status().message(), "HTTP 500"));
  CHECK(absl::StrContains(dump.status().message(), "CRIU checkpointing failed -52"));
  CHECK_FALSE(fs::exists(scratch.path / "dump"));

  // A long text is cut to about 512 bytes, and says how long it was.
  {
    std::lock_guard<std::mutex> lock(mu);
    text = "runtime: " + std::string(5000, 'x');
  }
  dump = driver.Checkpoint(Redis0(), scratch.path / "dump");
  INFO(dump.status());
  CHECK(dump.status().code() == absl::StatusCode::kInternal);
  CHECK(dump.status().message().size() < 800);
  CHECK(absl::StrContains(dump.status().message(), "runtime: xxx"));
  CHECK(absl::StrContains(dump.status().message(), "(5009 bytes)"));
}

TEST_CASE("kubelet driver is refused without a client certificate the kubelet accepts") {
  Scratch scratch;
  Pki pki(scratch.path);
  Node node{scratch.path / "node"};
  FakeKubelet kubelet(pki, [&](const Request& r) { return node.Checkpoint(r); });
  KubeletCheckpointDriver::Options options = DriverOptions(pki, kubelet.url(), node.node_root);

  SECTION("no certificate") {
    options.client_cert_file.clear();
    options.client_key_file.clear();
    absl::StatusOr<StateDump> dump =
        KubeletCheckpointDriver(options).Checkpoint(Redis0(), scratch.path / "dump");
    INFO(dump.status());
    CHECK(dump.status().code() == absl::StatusCode::kUnauthenticated);
    CHECK(absl::StrContains(dump.status().message(), "HTTP 401: Unauthorized"));
    CHECK(absl::StrContains(dump.status().message(), "default/redis-0/redis"));
  }
  SECTION("a certificate another CA signed") {
    options.client_cert_file = pki.Path("rogue-client.crt");
    options.client_key_file = pki.Path("rogue-client.key");
    absl::StatusOr<StateDump> dump =
        KubeletCheckpointDriver(options).Checkpoint(Redis0(), scratch.path / "dump");
    INFO(dump.status());
    CHECK(dump.status().code() == absl::StatusCode::kUnauthenticated);
  }
  SECTION("a user without the right to checkpoint") {
    options.client_cert_file = pki.Path("intruder.crt");
    options.client_key_file = pki.Path("intruder.key");
    absl::StatusOr<StateDump> dump =
        KubeletCheckpointDriver(options).Checkpoint(Redis0(), scratch.path / "dump");
    INFO(dump.status());
    CHECK(dump.status().code() == absl::StatusCode::kPermissionDenied);
    CHECK(absl::StrContains(dump.status().message(), "user=intruder"));
  }
  SECTION("a kubelet whose certificate does not verify against the CA file") {
    options.ca_file = pki.Path("rogue-ca.crt");
    absl::StatusOr<StateDump> dump =
        KubeletCheckpointDriver(options).Checkpoint(Redis0(), scratch.path / "dump");
    INFO(dump.status());
    CHECK(dump.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK(absl::StrContains(dump.status().message(), "CA file"));
  }
  SECTION("a client key file that does not exist") {
    options.client_key_file = pki.Path("missing.key");
    absl::StatusOr<StateDump> dump =
        KubeletCheckpointDriver(options).Checkpoint(Redis0(), scratch.path / "dump");
    INFO(dump.status());
    CHECK(dump.status().code() == absl::StatusCode::kFailedPrecondition);
  }
  CHECK_FALSE(fs::exists(node.node_root));  // nothing was checkpointed
  CHECK_FALSE(fs::exists(scratch.path / "dump"));
}

TEST_CASE("kubelet driver reports an answer that is not the archive list") {
  Scratch scratch;
  Pki pki(scratch.path);
  std::mutex mu;
  std::string body;
  FakeKubelet kubelet(pki, [&](const Request&) {
    std::lock_guard<std::mutex> lock(mu);
    return Response{200, body};
  });
  KubeletCheckpointDriver driver(DriverOptions(pki, kubelet.url(), scratch.path / "node"));

  const std::vector<std::string> odd = {
      "",
      "<html>proxy error</html>",
      "{\"items\":",
      "[\"/var/lib/kubelet/checkpoints/a.tar\"]",
      "{}",
      "{\"items\":\"/var/lib/kubelet/checkpoints/a.tar\"}",
      "{\"items\":[]}",
      "{\"items\":[42]}",
      "{\"items\":[null]}",
      "{\"items\":[\"checkpoints/a.tar\"]}",
      "{\"items\":[\"/var/lib/kubelet/../../../etc/shadow\"]}",
      std::string(100'000, '['),
  };
  for (const std::string& answer : odd) {
    {
      std::lock_guard<std::mutex> lock(mu);
      body = answer;
    }
    absl::StatusOr<StateDump> dump = driver.Checkpoint(Redis0(), scratch.path / "dump");
    INFO("answer: " << answer.substr(0, 80) << "\nstatus: " << dump.status());
    CHECK(dump.status().code() == absl::StatusCode::kInternal);
    CHECK(absl::StrContains(dump.status().message(), "want {\"items\":[\"<archive path>\"]}"));
    CHECK(absl::StrContains(dump.status().message(), "default/redis-0/redis"));
    CHECK_FALSE(fs::exists(scratch.path / "dump"));
  }

  // Well-formed, but the archive is not on this disk (another node's).
  {
    std::lock_guard<std::mutex> lock(mu);
    body = "{\"items\":[\"/var/lib/kubelet/checkpoints/elsewhere.tar\"]}";
  }
  absl::StatusOr<StateDump> dump = driver.Checkpoint(Redis0(), scratch.path / "dump");
  INFO(dump.status());
  CHECK(dump.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(dump.status().message(), "elsewhere.tar is not on this disk"));
  CHECK_FALSE(fs::exists(scratch.path / "dump"));
}

TEST_CASE("kubelet driver says UNAVAILABLE when the kubelet is down") {
  Scratch scratch;
  Pki pki(scratch.path);
  std::string url;
  {
    FakeKubelet kubelet(pki, [](const Request&) { return Response{500, "unused"}; });
    url = kubelet.url();
  }  // stopped: nothing listens on its port any more
  KubeletCheckpointDriver driver(DriverOptions(pki, url, scratch.path / "node"));
  absl::StatusOr<StateDump> dump = driver.Checkpoint(Redis0(), scratch.path / "dump");
  INFO(dump.status());
  CHECK(dump.status().code() == absl::StatusCode::kUnavailable);
  CHECK(absl::StrContains(dump.status().message(), "kubelet of node node-a"));
  CHECK(absl::StrContains(dump.status().message(), url));
  CHECK_FALSE(fs::exists(scratch.path / "dump"));
}

TEST_CASE("kubelet driver handles only targets of Kubernetes nodes it may reach") {
  KubeletCheckpointDriver::Options options;
  CHECK_FALSE(KubeletCheckpointDriver(options).Handles(Redis0()));
  options.kubernetes = true;
  CHECK(KubeletCheckpointDriver(options).Handles(Redis0()));
  ContainerTarget no_pod = Redis0();
  no_pod.pod.clear();
  CHECK_FALSE(KubeletCheckpointDriver(options).Handles(no_pod));
  options.local_node = "node-b";
  CHECK_FALSE(KubeletCheckpointDriver(options).Handles(Redis0()));
  options.local_node = "node-a";
  CHECK(KubeletCheckpointDriver(options).Handles(Redis0()));

  options.node_urls = {{"node-a", "https://10.0.0.5:10250/"}};
  KubeletCheckpointDriver driver(options);
  CHECK(driver.name() == "kubelet");
  CHECK(*driver.KubeletUrl("node-a") == "https://10.0.0.5:10250");
  CHECK(*driver.KubeletUrl("node-b.example") == "https://node-b.example:10250");
  CHECK(driver.KubeletUrl("").status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(driver.KubeletUrl("a/../b").status().code() == absl::StatusCode::kInvalidArgument);
  options.url_template = "http://{node}:10255";
  CHECK(KubeletCheckpointDriver(options).KubeletUrl("node-c").status().code() ==
        absl::StatusCode::kInvalidArgument);

  // Crash-consistent: nothing to lift, nothing to stop.
  CHECK(driver.Resume(Redis0()).ok());
  CHECK(driver.Retire(Redis0()).ok());
}

TEST_CASE("kubelet driver verifies that the restored container runs") {
  Scratch scratch;
  Pki pki(scratch.path);
  const std::string pods = R"({"kind":"PodList","apiVersion":"v1","metadata":{},"items":[
    {"metadata":{"name":"redis-0","namespace":"default"},
     "status":{"phase":"Running","containerStatuses":[
       {"name":"redis","state":{"running":{"startedAt":"2024-02-29T18:30:00Z"}}},
       {"name":"exporter","state":{"waiting":{"reason":"CrashLoopBackOff","message":"back-off 5m0s"}}},
       {"name":"init","state":{"terminated":{"reason":"Error","exitCode":137}}},
       "odd", 42, {"name":7}]}},
    {"metadata":{"name":"redis-1","namespace":"default"},"status":{}},
    "not a pod", {"metadata":[]}]})";
  FakeKubelet kubelet(pki, [&](const Request& r) {
    if (r.method == "GET" && r.target == "/pods") return Response{200, pods};
    return Response{404, "404 page not found", "text/plain"};
  });
  KubeletCheckpointDriver driver(DriverOptions(pki, kubelet.url(), scratch.path / "node"));
  const std::map<std::string, std::string> facts = {{kDriverFact, "kubelet"}};

  absl::Status st = driver.Verify(Redis0(), facts);
  INFO(st);
  CHECK(st.ok());
  st = driver.Verify(Redis0("exporter"), facts);
  CHECK(st.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(st.message(), "waiting (CrashLoopBackOff: back-off 5m0s)"));
  st = driver.Verify(Redis0("init"), facts);
  CHECK(st.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(absl::StrContains(st.message(), "terminated (Error, exit code 137)"));
  st = driver.Verify(Redis0("sidecar"), facts);
  CHECK(st.code() == absl::StatusCode::kNotFound);
  CHECK(absl::StrContains(st.message(), "sidecar"));
  ContainerTarget other = Redis0();
  other.pod = "redis-1";
  st = driver.Verify(other, facts);
  CHECK(st.code() == absl::StatusCode::kNotFound);
  other.pod = "redis-9";
  st = driver.Verify(other, facts);
  CHECK(st.code() == absl::StatusCode::kNotFound);
  CHECK(absl::StrContains(st.message(), "no pod default/redis-9"));
  st = driver.Verify(Redis0(), {{kDriverFact, "criu"}});
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace codeco::checkpointer
