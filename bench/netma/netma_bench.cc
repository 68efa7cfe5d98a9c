// NetMA benchmarks.
//
//  BM_ProbeOverhead: bytes one link's probes put on the wire (counted by a TCP
//    forwarder between prober and peer), per probe cycle of the default
//    schedule (bulk_every probes, one of them with a bulk sample), and the
//    resulting bytes per second per link at the default interval. Arg: bulk_every
//    (6 = the default schedule, 0 = RTT probes only).
//  BM_ProbeRound20Peers: CPU (user + system, whole process minus the peers,
//    which run in a forked child) of one probe round over 20 peers: the core
//    picks the due probes, the gRPC prober measures them in parallel, the core
//    records them and the view builds the four cost maps. The CPU share at
//    the default interval is cpu_per_round / interval.
//  BM_CoreOnly20Peers: the same round with an in-memory prober: core cost alone.
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "codeco/common/kv_store.h"
#include "codeco/common/server.h"
#include "netma/core/monitor.h"
#include "netma/core/view.h"
#include "netma/server/grpc_prober.h"
#include "netma/server/netma_service.h"
#include "netma/store/kv_virtual_link_repository.h"

namespace codeco::netma {
namespace {

constexpr int kPeers = 20;
std::vector<std::string> g_peer_addresses;

// Serves kPeers NetMAs on loopback (plaintext) until `stop_fd` closes.
[[noreturn]] void RunPeers(int ready_fd, int stop_fd) {
  std::vector<std::unique_ptr<KvStore>> stores;
  std::vector<std::unique_ptr<NetmaServer>> services;
  std::vector<std::unique_ptr<GrpcServer>> servers;
  std::string addresses;
  for (int i = 0; i < kPeers; ++i) {
    stores.push_back(NewInMemoryKvStore({kVirtualLinksColumnFamily}));
    NetmaServerOptions options;
    options.cluster = "peer-" + std::to_string(i);
    options.run_loop = false;
    options.channels.insecure = true;
    auto service = NetmaServer::Create(options, *stores.back(), RealClock::Default(), nullptr);
    if (!service.ok()) _exit(1);
    GrpcServerOptions server_options;
    server_options.service = "netma";
    server_options.insecure = true;
    server_options.services = {service->get()};
    auto server = GrpcServer::Start(server_options);
    if (!server.ok()) _exit(1);
    addresses += (*server)->address() + "\n";
    services.push_back(std::move(*service));
    servers.push_back(std::move(*server));
  }
  (void)!write(ready_fd, addresses.data(), addresses.size());
  close(ready_fd);
  char byte;
  while (read(stop_fd, &byte, 1) > 0) {
  }
  _exit(0);
}

// A TCP forwarder on loopback that counts the bytes passing both ways.
class CountingForwarder {
 public:
  explicit CountingForwarder(const std::string& target) {
    target_port_ = std::stoi(target.substr(target.rfind(':') + 1));
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(listen_fd_, 4);
    socklen_t len = sizeof(addr);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    address_ = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    if (pipe(wake_) != 0) std::abort();
    thread_ = std::thread([this] { Run(); });
  }
  ~CountingForwarder() {
    (void)!write(wake_[1], "x", 1);
    thread_.join();
    close(listen_fd_);
    close(wake_[0]);
    close(wake_[1]);
  }
  const std::string& address() const { return address_; }
  int64_t bytes() const { return bytes_.load(); }

 private:
  void Run() {
    int client = -1, upstream = -1;
    while (true) {
      std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
      if (client >= 0) fds.push_back({client, POLLIN, 0});
      if (upstream >= 0) fds.push_back({upstream, POLLIN, 0});
      if (poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[0].revents) break;
      if (fds[1].revents & POLLIN) {
        if (client >= 0) close(client);
        if (upstream >= 0) close(upstream);
        client = accept(listen_fd_, nullptr, nullptr);
        upstream = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = htons(static_cast<uint16_t>(target_port_));
        connect(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
        continue;
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
        int from = fds[i].fd;
        int to = from == client ? upstream : client;
        char buf[65536];
        ssize_t n = read(from, buf, sizeof(buf));
        if (n <= 0) {
          close(client);
          close(upstream);
          client = upstream = -1;
          break;
        }
        bytes_ += n;
        for (ssize_t off = 0; off < n;) {
          ssize_t w = write(to, buf + off, static_cast<size_t>(n - off));
          if (w <= 0) break;
          off += w;
        }
      }
    }
    if (client >= 0) close(client);
    if (upstream >= 0) close(upstream);
  }

  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  int target_port_ = 0;
  std::string address_;
  std::atomic<int64_t> bytes_{0};
  std::thread thread_;
};

double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

void BM_ProbeOverhead(benchmark::State& state) {
  CountingForwarder forwarder(g_peer_addresses[0]);
  auto channels = PeerChannels::Create({.insecure = true});
  if (!channels.ok()) std::abort();
  GrpcProber prober(**channels, "");
  MonitorOptions defaults;
  defaults.probe.bulk_every = static_cast<int>(state.range(0));  // 6 is the default
  ProbeScheduler scheduler(defaults.probe);
  SimulatedClock clock;
  scheduler.SetPeers({{"peer-0", forwarder.address()}}, clock.Now());
  // Warm the channel up (connection setup is paid once, not per probe).
  (void)prober.Probe({{"peer-0", forwarder.address()}, 0, absl::Seconds(5)});
  int64_t probes = 0;
  int64_t start_bytes = forwarder.bytes();
  for (auto _ : state) {
    for (const ProbeTask& task : scheduler.TakeDue(clock.Now())) {
      auto result = prober.Probe(task);
      if (!result.ok()) state.SkipWithError("probe failed");
      ++probes;
    }
    clock.Advance(defaults.probe.interval);
  }
  // Let the forwarder see the last bytes (bounded wait for the count to settle).
  int64_t last = -1;
  for (int i = 0; i < 100 && last != forwarder.bytes(); ++i) {
    last = forwarder.bytes();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  double bytes = static_cast<double>(forwarder.bytes() - start_bytes);
  double per_probe = bytes / static_cast<double>(probes);
  state.counters["wire_bytes_per_probe"] = per_probe;
  state.counters["bytes_per_second_per_link"] =
      per_probe / absl::ToDoubleSeconds(defaults.probe.interval);
  state.counters["bulk_bytes"] = static_cast<double>(defaults.probe.bulk_bytes);
  state.counters["bulk_every"] = defaults.probe.bulk_every;
}
// Six probes per cycle: iterations a multiple of bulk_every (6).
BENCHMARK(BM_ProbeOverhead)->Arg(6)->Arg(0)->Iterations(60)->Unit(benchmark::kMillisecond);

std::vector<Peer> Peers(bool real) {
  std::vector<Peer> peers;
  for (int i = 0; i < kPeers; ++i) {
    peers.push_back({"peer-" + std::to_string(i), real ? g_peer_addresses[i] : "127.0.0.1:1"});
  }
  return peers;
}

// Measures any prober and the core around it.
class InstantProber final : public Prober {
 public:
  absl::StatusOr<Result> Probe(const ProbeTask& task) override {
    Result r;
    r.rtt = absl::Microseconds(100 + task.peer.cluster.size());
    r.bulk_bytes = task.bulk_bytes;
    r.bulk_duration = absl::Milliseconds(1);
    r.wire_bytes = 300 + task.bulk_bytes;
    return r;
  }
};

void ProbeRound(benchmark::State& state, Prober& prober, bool parallel) {
  SimulatedClock clock(absl::FromUnixSeconds(1'000'000));
  MonitorOptions options;
  auto monitor = NetworkMonitor::Create("self", options, clock).value();
  monitor->SetPeers(Peers(parallel));
  Federation federation("self", FederationOptions{}, clock);
  NetworkView view(*monitor, federation, ViewOptions{}, clock);
  clock.Advance(options.probe.interval);  // all peers due
  double cpu_start = ProcessCpuSeconds();
  int64_t rounds = 0;
  for (auto _ : state) {
    std::vector<ProbeTask> tasks = monitor->TakeDueProbes();
    std::vector<absl::StatusOr<Prober::Result>> results(tasks.size(), absl::UnknownError(""));
    if (parallel) {
      std::vector<std::thread> threads;
      for (size_t i = 0; i < tasks.size(); ++i) {
        threads.emplace_back([&, i] { results[i] = prober.Probe(tasks[i]); });
      }
      for (auto& t : threads) t.join();
    } else {
      for (size_t i = 0; i < tasks.size(); ++i) results[i] = prober.Probe(tasks[i]);
    }
    for (size_t i = 0; i < tasks.size(); ++i) monitor->RecordResult(tasks[i], results[i]);
    for (auto metric : {v1::COST_METRIC_DELAY, v1::COST_METRIC_BANDWIDTH, v1::COST_METRIC_LOSS,
                        v1::COST_METRIC_ENERGY}) {
      v1::GetCostMapRequest request;
      request.set_metric(metric);
      benchmark::DoNotOptimize(view.CostMap(request));
    }
    benchmark::DoNotOptimize(monitor->Attributes());
    if (tasks.size() != static_cast<size_t>(kPeers)) state.SkipWithError("not every peer was due");
    clock.Advance(options.probe.interval);
    ++rounds;
  }
  double cpu = (ProcessCpuSeconds() - cpu_start) / static_cast<double>(rounds);
  state.counters["process_cpu_seconds_per_round"] = cpu;
  state.counters["cpu_share_at_default_interval"] =
      cpu / absl::ToDoubleSeconds(options.probe.interval);
}

void BM_ProbeRound20Peers(benchmark::State& state) {
  auto channels = PeerChannels::Create({.insecure = true});
  if (!channels.ok()) std::abort();
  GrpcProber prober(**channels, "");
  ProbeRound(state, prober, true);
}
BENCHMARK(BM_ProbeRound20Peers)->Iterations(60)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_CoreOnly20Peers(benchmark::State& state) {
  InstantProber prober;
  ProbeRound(state, prober, false);
}
BENCHMARK(BM_CoreOnly20Peers)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace codeco::netma

int main(int argc, char** argv) {
  // The peers live in a child forked before any gRPC state exists here.
  int ready[2], stop[2];
  if (pipe(ready) != 0 || pipe(stop) != 0) return 1;
  pid_t child = fork();
  if (child == 0) {
    close(ready[0]);
    close(stop[1]);
    codeco::netma::RunPeers(ready[1], stop[0]);
  }
  close(ready[1]);
  close(stop[0]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(ready[0], buf, sizeof(buf))) > 0;)
    text.append(buf, static_cast<size_t>(n));
  close(ready[0]);
  for (size_t pos = 0, nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    codeco::netma::g_peer_addresses.push_back(text.substr(pos, nl - pos));
  }
  int rc = 1;
  if (codeco::netma::g_peer_addresses.size() == static_cast<size_t>(codeco::netma::kPeers)) {
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    rc = 0;
  } else {
    std::fprintf(stderr, "netma_bench: peers did not start\n");
  }
  close(stop[1]);
  waitpid(child, nullptr, 0);
  return rc;
}
