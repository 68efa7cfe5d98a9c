// The link emulator end to end on loopback: two clusters (127.0.2.1 and
// 127.0.3.1), a gRPC server in cluster 3, and a client in cluster 2 whose
// channel uses cluster 2's relay as its HTTP CONNECT proxy. Timing asserts
// only bounds that the emulation guarantees (a 10 ms link cannot answer in
// less than 20 ms) or generous ones.
#include "tools/codef/relay/link_emulator.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "codeco/common/server.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace codeco::codef {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

constexpr int64_t kMs = 1'000'000;

std::shared_ptr<grpc::Channel> ChannelVia(const std::string& relay, const std::string& target) {
  grpc::ChannelArguments args;
  args.SetString("grpc.http_proxy", "http://" + relay);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

grpc::Status Check(const std::shared_ptr<grpc::Channel>& channel, absl::Duration deadline) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  HealthCheckRequest request;
  HealthCheckResponse response;
  return Health::NewStub(channel)->Check(&context, request, &response);
}

// Calls until one succeeds or `within` passes.
bool EventuallySucceeds(const std::shared_ptr<grpc::Channel>& channel, absl::Duration within) {
  const absl::Time deadline = absl::Now() + within;
  while (absl::Now() < deadline) {
    if (Check(channel, absl::Seconds(2)).ok()) return true;
  }
  return false;
}

struct Federation {
  Federation() {
    auto relay = emulator.AddCluster("c2", "127.0.2.1", "127.0.2.1:0");
    REQUIRE(relay.ok());
    relay2 = *relay;
    relay = emulator.AddCluster("c3", "127.0.3.1", "127.0.3.1:0");
    REQUIRE(relay.ok());
    GrpcServerOptions options;
    options.service = "target";
    options.listen = "127.0.3.1:0";
    options.insecure = true;
    auto started = GrpcServer::Start(options);
    REQUIRE(started.ok());
    server = std::move(*started);
  }
  void SetRoundTrip(int64_t one_way_ns) {
    REQUIRE(emulator.SetLink("c2", "c3", {.one_way_latency_ns = one_way_ns}).ok());
    REQUIRE(emulator.SetLink("c3", "c2", {.one_way_latency_ns = one_way_ns}).ok());
  }

  LinkEmulator emulator;
  std::string relay2;
  std::unique_ptr<GrpcServer> server;
};

// A plain TCP connection to `host_port`, or -1.
int Dial(const std::string& host_port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  const size_t colon = host_port.rfind(':');
  inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &addr.sin_addr);
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(host_port.substr(colon + 1))));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads until `fd` has delivered `marker` (returns all read), EOF or `deadline`.
std::string ReadUntil(int fd, const std::string& marker, absl::Time deadline) {
  std::string got;
  char buf[4096];
  while (got.find(marker) == std::string::npos) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) break;
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left_ms)) <= 0) continue;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

bool SendAll(int fd, const std::string& data) {
  return send(fd, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
}

// A TCP server in cluster 3 that counts the bytes it receives.
struct Sink {
  Sink() {
    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.3.1", &addr.sin_addr);
    REQUIRE(bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(listen(listen_fd, 4) == 0);
    socklen_t len = sizeof addr;
    getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
    address = "127.0.3.1:" + std::to_string(ntohs(addr.sin_port));
    thread = std::thread([this] {
      sockaddr_in peer{};
      socklen_t peer_len = sizeof peer;
      int fd = accept(listen_fd, reinterpret_cast<sockaddr*>(&peer), &peer_len);
      if (fd < 0) return;
      char ip[INET_ADDRSTRLEN] = "";
      inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof ip);
      {
        absl::MutexLock lock(&mu);
        peer_ip = ip;
      }
      char buf[65536];
      ssize_t n;
      while ((n = recv(fd, buf, sizeof buf, 0)) > 0) received += n;
      close(fd);
    });
  }
  ~Sink() {
    shutdown(listen_fd, SHUT_RDWR);
    thread.join();
    close(listen_fd);
  }
  int listen_fd;
  std::string address;
  std::atomic<int64_t> received{0};
  absl::Mutex mu;
  std::string peer_ip ABSL_GUARDED_BY(mu);  // as the sink saw the relay's connection
  std::thread thread;
};

TEST_CASE("a gRPC call through the relay pays the configured round trip") {
  Federation f;
  f.SetRoundTrip(10 * kMs);
  auto channel = ChannelVia(f.relay2, f.server->address());
  REQUIRE(Check(channel, absl::Seconds(10)).ok());  // connects through the relay
  REQUIRE(f.emulator.Stats("c2")->tunnels_opened == 1);
  for (int i = 0; i < 5; ++i) {
    const absl::Time start = absl::Now();
    REQUIRE(Check(channel, absl::Seconds(10)).ok());
    const absl::Duration rtt = absl::Now() - start;
    CHECK(rtt >= absl::Milliseconds(20));
    CHECK(rtt < absl::Milliseconds(200));
  }
  // Conditions change at run time on the open connection.
  f.SetRoundTrip(40 * kMs);
  const absl::Time start = absl::Now();
  REQUIRE(Check(channel, absl::Seconds(10)).ok());
  CHECK(absl::Now() - start >= absl::Milliseconds(80));
  REQUIRE(f.emulator.Stats("c2")->tunnels_opened == 1);
}

TEST_CASE("grpc.enable_http_proxy = 0 bypasses the relay") {
  Federation f;
  f.SetRoundTrip(10 * kMs);
  grpc::ChannelArguments args;
  args.SetString("grpc.http_proxy", "http://" + f.relay2);
  args.SetInt("grpc.enable_http_proxy", 0);
  auto channel =
      grpc::CreateCustomChannel(f.server->address(), grpc::InsecureChannelCredentials(), args);
  REQUIRE(Check(channel, absl::Seconds(10)).ok());
  REQUIRE(f.emulator.Stats("c2")->tunnels_opened == 0);
}

TEST_CASE("a cut link fails calls by their deadline and healing restores them") {
  Federation f;
  f.SetRoundTrip(5 * kMs);
  auto channel = ChannelVia(f.relay2, f.server->address());
  REQUIRE(Check(channel, absl::Seconds(10)).ok());

  REQUIRE(f.emulator.SetLink("c2", "c3", {.one_way_latency_ns = 5 * kMs, .cut = true}).ok());
  REQUIRE(f.emulator.GetLink("c2", "c3")->cut);
  grpc::Status cut = Check(channel, absl::Seconds(1));
  REQUIRE((cut.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
           cut.error_code() == grpc::StatusCode::UNAVAILABLE));
  // A new connection cannot get through either.
  auto fresh = ChannelVia(f.relay2, f.server->address());
  grpc::Status fresh_cut = Check(fresh, absl::Seconds(1));
  REQUIRE((fresh_cut.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
           fresh_cut.error_code() == grpc::StatusCode::UNAVAILABLE));

  REQUIRE(f.emulator.SetLink("c2", "c3", {.one_way_latency_ns = 5 * kMs}).ok());
  REQUIRE(EventuallySucceeds(channel, absl::Seconds(30)));
  REQUIRE(EventuallySucceeds(fresh, absl::Seconds(30)));
}

TEST_CASE("a partitioned cluster is unreachable until healed") {
  Federation f;
  f.SetRoundTrip(2 * kMs);
  auto channel = ChannelVia(f.relay2, f.server->address());
  REQUIRE(Check(channel, absl::Seconds(10)).ok());
  REQUIRE(f.emulator.SetPartitioned("c3", true).ok());
  grpc::Status cut = Check(channel, absl::Seconds(1));
  REQUIRE((cut.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
           cut.error_code() == grpc::StatusCode::UNAVAILABLE));
  REQUIRE(f.emulator.SetPartitioned("c3", false).ok());
  REQUIRE(EventuallySucceeds(channel, absl::Seconds(30)));
  REQUIRE(f.emulator.SetPartitioned("nope", true).code() == absl::StatusCode::kNotFound);
}

TEST_CASE("a CONNECT over a cut link stalls until the link heals") {
  Federation f;
  REQUIRE(f.emulator.SetPartitioned("c2", true).ok());
  int fd = Dial(f.relay2);
  REQUIRE(fd >= 0);
  REQUIRE(SendAll(fd, "CONNECT " + f.server->address() + " HTTP/1.1\r\n\r\n"));
  // No answer while cut (the relay only answers once the link is up).
  REQUIRE(ReadUntil(fd, "\r\n\r\n", absl::Now() + absl::Milliseconds(300)).empty());
  REQUIRE(f.emulator.SetPartitioned("c2", false).ok());
  const std::string answer = ReadUntil(fd, "\r\n\r\n", absl::Now() + absl::Seconds(10));
  REQUIRE(answer.rfind("HTTP/1.1 200", 0) == 0);
  close(fd);
}

TEST_CASE("unknown destinations and bad requests are refused") {
  Federation f;
  struct Case {
    std::string request;
    std::string status;
  };
  const Case cases[] = {
      {"CONNECT 127.0.9.1:80 HTTP/1.1\r\nHost: 127.0.9.1:80\r\n\r\n", "HTTP/1.1 403"},
      {"CONNECT localhost:80 HTTP/1.1\r\n\r\n", "HTTP/1.1 403"},
      {"GET / HTTP/1.1\r\n\r\n", "HTTP/1.1 400"},
      {"CONNECT nocolon HTTP/1.1\r\n\r\n", "HTTP/1.1 400"},
  };
  for (const Case& c : cases) {
    int fd = Dial(f.relay2);
    REQUIRE(fd >= 0);
    REQUIRE(SendAll(fd, c.request));
    const std::string answer = ReadUntil(fd, "\r\n\r\n", absl::Now() + absl::Seconds(10));
    CHECK(answer.rfind(c.status, 0) == 0);
    close(fd);
  }
  REQUIRE(f.emulator.Stats("c2")->requests_refused == 4);

  // Through gRPC: a target outside every cluster fails fast.
  auto channel = ChannelVia(f.relay2, "127.0.9.1:1");
  REQUIRE(Check(channel, absl::Seconds(5)).error_code() == grpc::StatusCode::UNAVAILABLE);
}

TEST_CASE("channel traffic passes a relay only through an installed virtual link") {
  Federation f;
  f.SetRoundTrip(10 * kMs);
  const std::string endpoint = "shop-db-0.c3:6379";
  auto open = [&](const std::string& target) {
    int fd = Dial(f.relay2);
    REQUIRE(fd >= 0);
    REQUIRE(SendAll(fd, "CONNECT " + target + " HTTP/1.1\r\n\r\n"));
    return fd;
  };
  // No virtual link: refused, so a missing link is a failure, not a silent success.
  int fd = open(endpoint);
  CHECK(ReadUntil(fd, "\r\n\r\n", absl::Now() + absl::Seconds(10)).rfind("HTTP/1.1 403", 0) == 0);
  close(fd);
  CHECK(f.emulator.Stats("c2")->channels_refused == 1);

  REQUIRE(f.emulator.PutVirtualLink({"vl-1", "c2", "c3", endpoint}).ok());
  fd = open(endpoint);
  const absl::Time start = absl::Now();
  REQUIRE(ReadUntil(fd, "\r\n\r\n", absl::Now() + absl::Seconds(10)).rfind("HTTP/1.1 200", 0) ==
          0);
  // The emulated endpoint echoes; the bytes cross the 10 ms link both ways.
  const absl::Time sent = absl::Now();
  REQUIRE(SendAll(fd, "PING readings\n"));
  CHECK(ReadUntil(fd, "PING readings\n", absl::Now() + absl::Seconds(10)) == "PING readings\n");
  CHECK(absl::Now() - sent >= absl::Milliseconds(20));
  CHECK(absl::Now() - start >= absl::Milliseconds(40));  // handshake round trip + echo
  close(fd);
  CHECK(f.emulator.Stats("c2")->channel_tunnels_opened == 1);
  // Another endpoint, or the same one from another cluster, has no link.
  fd = open("shop-db-1.c3:6379");
  CHECK(ReadUntil(fd, "\r\n\r\n", absl::Now() + absl::Seconds(10)).rfind("HTTP/1.1 403", 0) == 0);
  close(fd);

  // Removed: refused again. Bad routes are refused with the field named.
  REQUIRE(f.emulator.DeleteVirtualLink("vl-1").ok());
  CHECK(absl::IsNotFound(f.emulator.DeleteVirtualLink("vl-1")));
  fd = open(endpoint);
  CHECK(ReadUntil(fd, "\r\n\r\n", absl::Now() + absl::Seconds(10)).rfind("HTTP/1.1 403", 0) == 0);
  close(fd);
  absl::Status bad = f.emulator.PutVirtualLink({"vl-2", "c2", "nowhere", "x:1"});
  CHECK(absl::IsInvalidArgument(bad));
  CHECK_THAT(std::string(bad.message()), Catch::Contains("target_cluster"));
  CHECK(absl::IsInvalidArgument(f.emulator.PutVirtualLink({"vl-3", "c2", "c2", "x:1"})));
  CHECK(absl::IsInvalidArgument(f.emulator.PutVirtualLink({"vl-4", "c2", "c3", "noport"})));
  CHECK(f.emulator.VirtualLinks().empty());
}

TEST_CASE("a bandwidth cap stretches a bulk transfer") {
  Federation f;
  // 1 Mbps: 100 kB minus the 16 KiB bucket needs at least 0.66 s.
  REQUIRE(f.emulator.SetLink("c2", "c3", {.bandwidth_bps = 1'000'000}).ok());
  Sink sink;
  int fd = Dial(f.relay2);
  REQUIRE(fd >= 0);
  REQUIRE(SendAll(fd, "CONNECT " + sink.address + " HTTP/1.1\r\n\r\n"));
  REQUIRE(ReadUntil(fd, "\r\n\r\n", absl::Now() + absl::Seconds(10)).rfind("HTTP/1.1 200", 0) == 0);
  constexpr int64_t kBytes = 100'000;
  const absl::Time start = absl::Now();
  REQUIRE(SendAll(fd, std::string(kBytes, 'x')));
  const absl::Time deadline = start + absl::Seconds(30);
  while (sink.received.load() < kBytes && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));  // polling a condition, with a deadline
  }
  const absl::Duration took = absl::Now() - start;
  REQUIRE(sink.received.load() == kBytes);
  {
    absl::MutexLock lock(&sink.mu);
    REQUIRE(sink.peer_ip == "127.0.2.1");  // the source cluster's address
  }
  CHECK(took >= absl::Milliseconds(660));
  CHECK(took < absl::Seconds(10));
  close(fd);
}

TEST_CASE("shutdown closes open tunnels and later clusters are refused") {
  Federation f;
  Sink sink;
  int fd = Dial(f.relay2);
  REQUIRE(fd >= 0);
  REQUIRE(SendAll(fd, "CONNECT " + sink.address + " HTTP/1.1\r\n\r\n"));
  REQUIRE(ReadUntil(fd, "\r\n\r\n", absl::Now() + absl::Seconds(10)).rfind("HTTP/1.1 200", 0) == 0);
  f.emulator.Shutdown();
  // The tunnel is closed: the client reads EOF.
  char byte;
  pollfd pfd{fd, POLLIN, 0};
  REQUIRE(poll(&pfd, 1, 10000) == 1);
  REQUIRE(recv(fd, &byte, 1, 0) == 0);
  close(fd);
  REQUIRE(f.emulator.AddCluster("c4", "127.0.4.1", "127.0.4.1:0").status().code() ==
          absl::StatusCode::kFailedPrecondition);
  f.emulator.Shutdown();  // idempotent
}

TEST_CASE("AddCluster validates its arguments") {
  LinkEmulator emulator;
  REQUIRE(emulator.AddCluster("c2", "127.0.2.1", "127.0.2.1").status().code() ==
          absl::StatusCode::kInvalidArgument);
  REQUIRE(emulator.AddCluster("c2", "not-an-ip", "127.0.2.1:0").status().code() ==
          absl::StatusCode::kInvalidArgument);
  auto relay = emulator.AddCluster("c2", "127.0.2.1", "127.0.2.1:0");
  REQUIRE(relay.ok());
  REQUIRE(*emulator.RelayAddress("c2") == *relay);
  REQUIRE(emulator.AddCluster("c2", "127.0.5.1", "127.0.5.1:0").status().code() ==
          absl::StatusCode::kAlreadyExists);
  REQUIRE(emulator.AddCluster("c5", "127.0.2.1", "127.0.5.1:0").status().code() ==
          absl::StatusCode::kAlreadyExists);
  REQUIRE(emulator.SetLink("c2", "c9", {}).code() == absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace codeco::codef
