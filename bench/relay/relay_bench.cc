// Accuracy of the CODEF link emulator (issue #3 acceptance: a round trip
// through the emulator is within 10 % or 1 ms of the configured RTT for 2 to
// 30 ms).
//
//  1. RTT: grpc.health.v1.Health/Check from cluster 2 (127.0.2.1) to a server
//     in cluster 3 (127.0.3.1) through cluster 2's relay, with both directions
//     at RTT/2; sequential calls on one channel; mean, p50, p99 and the error
//     of the mean against the configured RTT. The "0 ms" row is the relay's
//     and gRPC's own overhead; "direct" is the call without the relay.
//  2. The same for a raw TCP ping-pong through a tunnel (the relay alone).
//  3. Throughput: a bulk TCP transfer through the relay to a sink in cluster 3
//     under a bandwidth cap, measured from the first byte sent to the last
//     byte received.
//
// Usage: relay_bench [--quick] [--samples=N] [--realtime]
//   --realtime  sets LinkEmulatorOptions::realtime_priority (relay threads
//               under SCHED_FIFO), for a machine busy with other work.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "codeco/common/server.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "tools/codef/relay/link_emulator.h"

namespace codeco::codef {
namespace {

using grpc::health::v1::Health;

struct Stats {
  double mean_ms = 0;
  double p50_ms = 0;
  double p99_ms = 0;
};

Stats Summarize(std::vector<double> samples_ms) {
  std::sort(samples_ms.begin(), samples_ms.end());
  Stats s;
  for (double v : samples_ms) s.mean_ms += v;
  s.mean_ms /= static_cast<double>(samples_ms.size());
  auto at = [&](double q) {
    size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(samples_ms.size()))) - 1;
    return samples_ms[std::min(i, samples_ms.size() - 1)];
  };
  s.p50_ms = at(0.50);
  s.p99_ms = at(0.99);
  return s;
}

bool Check(Health::Stub& stub) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  return stub.Check(&context, request, &response).ok();
}

std::vector<double> MeasureRtts(Health::Stub& stub, int samples) {
  for (int i = 0; i < 20; ++i) Check(stub);  // warm up (connection, HTTP/2 windows)
  std::vector<double> out;
  out.reserve(static_cast<size_t>(samples));
  for (int i = 0; i < samples; ++i) {
    const absl::Time start = absl::Now();
    if (!Check(stub)) {
      std::fprintf(stderr, "health check failed\n");
      std::exit(1);
    }
    out.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
  }
  return out;
}

void Die(const char* what) {
  std::perror(what);
  std::exit(1);
}

int Dial(const std::string& host_port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  const size_t colon = host_port.rfind(':');
  inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &addr.sin_addr);
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(host_port.substr(colon + 1))));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) Die("connect");
  return fd;
}

// A TCP server in cluster 3 that drains every connection and counts bytes.
class Sink {
 public:
  Sink() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.3.1", &addr.sin_addr);
    socklen_t len = sizeof addr;
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        listen(listen_fd_, 16) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      Die("sink");
    }
    address_ = "127.0.3.1:" + std::to_string(ntohs(addr.sin_port));
    thread_ = std::thread([this] {
      int fd;
      while ((fd = accept(listen_fd_, nullptr, nullptr)) >= 0) {
        std::vector<char> buf(1 << 16);
        ssize_t n;
        while ((n = recv(fd, buf.data(), buf.size(), 0)) > 0) received_ += n;
        close(fd);
      }
    });
  }
  ~Sink() {
    shutdown(listen_fd_, SHUT_RDWR);
    thread_.join();
    close(listen_fd_);
  }
  const std::string& address() const { return address_; }
  int64_t received() const { return received_.load(); }

 private:
  int listen_fd_;
  std::string address_;
  std::atomic<int64_t> received_{0};
  std::thread thread_;
};

// A TCP echo server in cluster 3 (one connection at a time).
class Echo {
 public:
  Echo() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.3.1", &addr.sin_addr);
    socklen_t len = sizeof addr;
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        listen(listen_fd_, 16) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      Die("echo");
    }
    address_ = "127.0.3.1:" + std::to_string(ntohs(addr.sin_port));
    thread_ = std::thread([this] {
      int fd;
      while ((fd = accept(listen_fd_, nullptr, nullptr)) >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        char buf[4096];
        ssize_t n;
        while ((n = recv(fd, buf, sizeof buf, 0)) > 0) send(fd, buf, n, MSG_NOSIGNAL);
        close(fd);
      }
    });
  }
  ~Echo() {
    shutdown(listen_fd_, SHUT_RDWR);
    thread_.join();
    close(listen_fd_);
  }
  const std::string& address() const { return address_; }

 private:
  int listen_fd_;
  std::string address_;
  std::thread thread_;
};

// Opens a tunnel through `relay` to `target`; returns the socket.
int Tunnel(const std::string& relay, const std::string& target) {
  int fd = Dial(relay);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const std::string connect = "CONNECT " + target + " HTTP/1.1\r\n\r\n";
  send(fd, connect.data(), connect.size(), MSG_NOSIGNAL);
  std::string answer;
  char c;
  while (answer.find("\r\n\r\n") == std::string::npos && recv(fd, &c, 1, 0) == 1) answer += c;
  if (answer.rfind("HTTP/1.1 200", 0) != 0) Die("CONNECT refused");
  return fd;
}

// Round trips of a 64-byte message through an open tunnel to the echo server.
std::vector<double> MeasurePingPong(int fd, int samples) {
  char message[64] = {};
  std::vector<double> out;
  for (int i = 0; i < samples + 20; ++i) {
    const absl::Time start = absl::Now();
    if (send(fd, message, sizeof message, MSG_NOSIGNAL) != sizeof message) Die("send");
    size_t got = 0;
    while (got < sizeof message) {
      ssize_t n = recv(fd, message + got, sizeof message - got, 0);
      if (n <= 0) Die("recv");
      got += static_cast<size_t>(n);
    }
    if (i >= 20) out.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
  }
  return out;
}

// Sends `bytes` through `relay` to the sink; returns the achieved bits/s.
double Transfer(const std::string& relay, Sink& sink, int64_t bytes) {
  int fd = Dial(relay);
  const std::string connect = "CONNECT " + sink.address() + " HTTP/1.1\r\n\r\n";
  send(fd, connect.data(), connect.size(), MSG_NOSIGNAL);
  std::string answer;
  char c;
  while (answer.find("\r\n\r\n") == std::string::npos && recv(fd, &c, 1, 0) == 1) answer += c;
  if (answer.rfind("HTTP/1.1 200", 0) != 0) Die("CONNECT refused");
  const int64_t before = sink.received();
  std::vector<char> block(1 << 16, 'x');
  const absl::Time start = absl::Now();
  int64_t sent = 0;
  while (sent < bytes) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(bytes - sent, block.size()));
    ssize_t w = send(fd, block.data(), n, MSG_NOSIGNAL);
    if (w <= 0) Die("send");
    sent += w;
  }
  const absl::Time deadline = start + absl::Seconds(120);
  while (sink.received() - before < bytes && absl::Now() < deadline) {
    absl::SleepFor(absl::Microseconds(200));
  }
  const absl::Duration took = absl::Now() - start;
  close(fd);
  return static_cast<double>(bytes) * 8.0 / absl::ToDoubleSeconds(took);
}

int Main(int argc, char** argv) {
  bool quick = false;
  bool realtime = false;
  int samples = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--realtime") {
      realtime = true;
    } else if (arg.rfind("--samples=", 0) == 0) {
      samples = std::stoi(arg.substr(10));
    } else {
      std::fprintf(stderr, "usage: relay_bench [--quick] [--samples=N] [--realtime]\n");
      return 2;
    }
  }
  if (samples <= 0) samples = quick ? 50 : 500;
  const double transfer_seconds = quick ? 0.5 : 3.0;

  LinkEmulatorOptions emulator_options;
  emulator_options.realtime_priority = realtime;
  LinkEmulator emulator(emulator_options);
  auto relay2 = emulator.AddCluster("c2", "127.0.2.1", "127.0.2.1:0");
  auto relay3 = emulator.AddCluster("c3", "127.0.3.1", "127.0.3.1:0");
  if (!relay2.ok() || !relay3.ok()) Die("AddCluster");
  GrpcServerOptions options;
  options.service = "bench";
  options.listen = "127.0.3.1:0";
  options.insecure = true;
  auto server = GrpcServer::Start(options);
  if (!server.ok()) Die("GrpcServer");

  grpc::ChannelArguments args;
  args.SetString("grpc.http_proxy", "http://" + *relay2);
  auto via_relay = Health::NewStub(
      grpc::CreateCustomChannel((*server)->address(), grpc::InsecureChannelCredentials(), args));
  auto direct = Health::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));

  std::printf("## RTT through the relay (%d sequential Health/Check calls per row%s)\n\n", samples,
              realtime ? ", relay threads SCHED_FIFO" : "");
  std::printf(
      "| configured RTT | mean | p50 | p99 | error of mean | mean within 10%% or 1 ms "
      "| error of p50 | p50 within 10%% or 1 ms |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  Stats base = Summarize(MeasureRtts(*direct, samples));
  std::printf("| direct, no relay | %.3f ms | %.3f ms | %.3f ms | | | | |\n", base.mean_ms,
              base.p50_ms, base.p99_ms);
  bool mean_within_all = true;
  bool p50_within_all = true;
  for (int rtt_ms : {0, 2, 5, 10, 20, 30}) {
    const int64_t one_way_ns = static_cast<int64_t>(rtt_ms) * 500'000;
    if (!emulator.SetLink("c2", "c3", {.one_way_latency_ns = one_way_ns}).ok() ||
        !emulator.SetLink("c3", "c2", {.one_way_latency_ns = one_way_ns}).ok()) {
      Die("SetLink");
    }
    Stats s = Summarize(MeasureRtts(*via_relay, samples));
    const double tolerance = std::max(0.1 * rtt_ms, 1.0);
    const double mean_error = s.mean_ms - rtt_ms;
    const double p50_error = s.p50_ms - rtt_ms;
    const bool mean_within = std::abs(mean_error) <= tolerance;
    const bool p50_within = std::abs(p50_error) <= tolerance;
    if (rtt_ms > 0) {
      mean_within_all = mean_within_all && mean_within;
      p50_within_all = p50_within_all && p50_within;
    }
    auto verdict = [&](bool within) { return rtt_ms == 0 ? "(overhead)" : within ? "yes" : "NO"; };
    auto percent = [&](double error) { return rtt_ms > 0 ? 100.0 * error / rtt_ms : 0.0; };
    std::printf(
        "| %d ms | %.3f ms | %.3f ms | %.3f ms | %+.3f ms (%+.1f %%) | %s | %+.3f ms (%+.1f %%) "
        "| %s |\n",
        rtt_ms, s.mean_ms, s.p50_ms, s.p99_ms, mean_error, percent(mean_error),
        verdict(mean_within), p50_error, percent(p50_error), verdict(p50_within));
    std::fflush(stdout);
  }
  std::printf("\nRTT accuracy for 2-30 ms: mean %s, p50 %s\n\n", mean_within_all ? "PASS" : "FAIL",
              p50_within_all ? "PASS" : "FAIL");

  std::printf("## RTT of a raw TCP ping-pong (64 bytes) through the relay, %d samples\n\n",
              samples);
  std::printf("| configured RTT | mean | p50 | p99 | error of p50 |\n|---|---|---|---|---|\n");
  {
    Echo echo;
    int fd = Tunnel(*relay2, echo.address());
    for (int rtt_ms : {0, 2, 5, 10, 20, 30}) {
      const int64_t one_way_ns = static_cast<int64_t>(rtt_ms) * 500'000;
      if (!emulator.SetLink("c2", "c3", {.one_way_latency_ns = one_way_ns}).ok() ||
          !emulator.SetLink("c3", "c2", {.one_way_latency_ns = one_way_ns}).ok()) {
        Die("SetLink");
      }
      Stats s = Summarize(MeasurePingPong(fd, samples));
      std::printf("| %d ms | %.3f ms | %.3f ms | %.3f ms | %+.3f ms |\n", rtt_ms, s.mean_ms,
                  s.p50_ms, s.p99_ms, s.p50_ms - rtt_ms);
      std::fflush(stdout);
    }
    close(fd);
  }
  std::printf("\n");

  std::printf("## Throughput through the relay (bulk TCP, %.1f s worth of data at the cap)\n\n",
              transfer_seconds);
  std::printf("| cap | one-way latency | bytes | achieved | of cap |\n|---|---|---|---|---|\n");
  Sink sink;
  struct Row {
    int64_t cap_bps;
    int64_t one_way_ms;
  };
  for (Row row : {Row{10'000'000, 0}, Row{100'000'000, 0}, Row{100'000'000, 10}, Row{0, 0}}) {
    if (!emulator
             .SetLink(
                 "c2", "c3",
                 {.one_way_latency_ns = row.one_way_ms * 1'000'000, .bandwidth_bps = row.cap_bps})
             .ok() ||
        !emulator.SetLink("c3", "c2", {.one_way_latency_ns = row.one_way_ms * 1'000'000}).ok()) {
      Die("SetLink");
    }
    const int64_t bytes = row.cap_bps > 0 ? static_cast<int64_t>(row.cap_bps / 8 * transfer_seconds)
                                          : static_cast<int64_t>(200e6 * transfer_seconds);
    const double bps = Transfer(*relay2, sink, bytes);
    if (row.cap_bps > 0) {
      std::printf("| %lld Mbps | %lld ms | %lld | %.2f Mbps | %.1f %% |\n",
                  static_cast<long long>(row.cap_bps / 1'000'000),
                  static_cast<long long>(row.one_way_ms), static_cast<long long>(bytes), bps / 1e6,
                  100.0 * bps / static_cast<double>(row.cap_bps));
    } else {
      std::printf("| unlimited | %lld ms | %lld | %.2f Mbps | |\n",
                  static_cast<long long>(row.one_way_ms), static_cast<long long>(bytes), bps / 1e6);
    }
    std::fflush(stdout);
  }
  (*server)->Shutdown(absl::ZeroDuration());
  emulator.Shutdown();
  return mean_within_all ? 0 : 1;
}

}  // namespace
}  // namespace codeco::codef

int main(int argc, char** argv) { return codeco::codef::Main(argc, argv); }
