// Applies per second sustained end to end on the five-site federation
// (issue 10): `codecoctl up` brings the emulated federation up (mTLS, the
// real service binaries), then --workers clients each loop
//   ApplyApplication (examples/cams/front-back.yaml, renamed) → poll
//   GetApplication until RUNNING → DeleteApplication
// for --minutes. Every 10 s it prints how many applications reached Running
// in the window and the resident memory (VmRSS) of the hub's services and
// the largest managed-cluster service; at the end, the sustained rate, the
// apply→Running latency percentiles, failures, and each hub service's RSS
// growth from the first sample after warm-up to the last, with what its
// /metrics says the memory is: malloc's heap in use, freed memory malloc
// keeps, and the RocksDB store's memtables and block cache.
//
//   apply_rate_bench [--quick] [--minutes N] [--workers N] [--scenario FILE] [--keep]
//                    [--hub-replicas N [--failovers K]]
//
// --hub-replicas N: the hub's ACM and SWM as N replicas on a three-member
// etcd (codecoctl up --hub-replicas). --failovers K: after the applies, K
// times in turn for the hub ACM and SWM, the leading replica is killed with
// SIGKILL and the time until the service's address answers a health check
// again is measured, on a new connection and on a long-lived channel with
// gRPC's default reconnect backoff (the killed replica is then restarted as
// a standby).
//
// --quick: one minute. Default: 10 minutes, 8 workers. Wall-clock time is
// read here (a benchmark, not the core). Needs the build's bin/ (codef and
// the service binaries) next to codecoctl. --keep keeps the run's data and
// logs (every RPC's duration is in the services' logs).

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <curl/curl.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cli.h"
#include "codeco/acm/v1/acm_service.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "run_state.h"

namespace codeco::ctl {
namespace {

namespace acm = codeco::acm::v1;
namespace fs = std::filesystem;

struct Settings {
  absl::Duration duration = absl::Minutes(10);
  int workers = 8;
  bool keep = false;  // keep the run's data and logs
  int hub_replicas = 1;  // replicas of the hub ACM and SWM (state in etcd when > 1)
  int failovers = 0;     // leader kills measured after the applies
  std::string scenario =
      std::string(CODECO_SOURCE_DIR) + "/examples/scenarios/grid5000-five-sites.yaml";
};

// examples/cams/front-back.yaml (two services, one channel) as application `name`.
// The file is read once, not on every apply.
std::string Cam(const std::string& name) {
  static const std::string kTemplate = [] {
    std::ifstream in(std::string(CODECO_SOURCE_DIR) + "/examples/cams/front-back.yaml");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }();
  return absl::StrReplaceAll(kTemplate, {{"front-back", name}});
}

// Resident memory of `pid`, KiB; 0 when it is gone.
long RssKib(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return 0;
}

// What a service's /metrics says about its memory, MiB (zeros when it
// does not answer).
struct Memory {
  double heap_in_use = 0;
  double heap_free_held = 0;
  double store = 0;  // memtables + block cache + table readers
  double memtables = 0;
  double block_cache = 0;
};

// The body of GET `url` ("" on failure).
std::string HttpGet(const std::string& url) {
  std::string body;
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return body;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 5L);
  curl_easy_setopt(
      curl, CURLOPT_WRITEFUNCTION, +[](char* data, size_t size, size_t count, void* out) {
        static_cast<std::string*>(out)->append(data, size * count);
        return size * count;
      });
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  if (curl_easy_perform(curl) != CURLE_OK) body.clear();
  curl_easy_cleanup(curl);
  return body;
}

// Reads the memory gauges of the service `name` ("hub/acm") from `url`.
Memory ScrapeMemory(const std::string& name, const std::string& url) {
  const std::string service = name.substr(name.find('/') + 1);
  const std::string body = HttpGet(url);
  Memory out;
  std::istringstream lines(body);
  std::string line;
  const std::string heap = "codeco_" + service + "_heap_bytes{state=\"";
  const std::string store = "codeco_" + service + "_store_memory_bytes{";
  while (std::getline(lines, line)) {
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    const double mib = std::atof(line.c_str() + space + 1) / (1 << 20);
    if (line.rfind(heap + "in_use", 0) == 0) out.heap_in_use = mib;
    if (line.rfind(heap + "free_held", 0) == 0) out.heap_free_held = mib;
    if (line.rfind(store, 0) == 0) out.store += mib;
    if (line.rfind(store + "part=\"memtables\"", 0) == 0) out.memtables = mib;
    if (line.rfind(store + "part=\"block_cache\"", 0) == 0) out.block_cache = mib;
  }
  return out;
}

// A context with `timeout` (codecoctl's, without a --timeout flag).
std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout) {
  return ContextWithTimeout(Args{}, timeout);
}

// Counters shared by the workers and the sampler.
struct Tally {
  std::atomic<long> running{0};
  std::atomic<long> failed{0};
  std::atomic<long> refused{0};
  std::mutex mu;
  std::vector<double> latency_ms;  // apply → Running
};

// One client's loop until `end`.
void Work(acm::AcmService::Stub& stub, int worker, absl::Time end, Tally& tally) {
  for (long n = 0; absl::Now() < end; ++n) {
    const std::string name = absl::StrCat("rate-", worker, "-", n);
    acm::ApplyApplicationRequest apply;
    apply.set_cam_yaml(Cam(name));
    acm::ApplyApplicationResponse applied;
    const absl::Time start = absl::Now();
    grpc::Status status = stub.ApplyApplication(Context(absl::Seconds(30)).get(), apply, &applied);
    if (!status.ok()) {
      ++tally.refused;
      std::fprintf(stderr, "apply %s: %s\n", name.c_str(), status.error_message().c_str());
      absl::SleepFor(absl::Milliseconds(200));
      continue;
    }
    bool running = false;
    while (absl::Now() < end + absl::Minutes(1)) {
      acm::GetApplicationRequest get;
      get.set_name(name);
      acm::GetApplicationResponse got;
      if (stub.GetApplication(Context(absl::Seconds(10)).get(), get, &got).ok()) {
        acm::ApplicationPhase phase = got.application().status().phase();
        if (phase == acm::APPLICATION_PHASE_RUNNING) {
          running = true;
          break;
        }
        if (phase == acm::APPLICATION_PHASE_FAILED) break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    if (running) {
      const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
      ++tally.running;
      std::lock_guard<std::mutex> lock(tally.mu);
      tally.latency_ms.push_back(ms);
    } else {
      ++tally.failed;
    }
    acm::DeleteApplicationRequest del;
    del.set_name(name);
    acm::DeleteApplicationResponse deleted;
    stub.DeleteApplication(Context(absl::Seconds(30)).get(), del, &deleted);
  }
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

// The pid and name of the replica of `service` ("hub/acm") that leads now:
// alive, and its output since it started says it serves; pid 0 when none.
std::pair<int, std::string> Leader(const RunState& state, const std::string& service) {
  for (const RunProcess& p : state.processes) {
    if (p.name != service && p.name.rfind(service + "-", 0) != 0) continue;
    std::ifstream in(state.run_dir + "/logs/" + absl::StrReplaceAll(p.name, {{"/", "-"}}) +
                     ".out");
    std::stringstream out;
    out << in.rdbuf();
    if (kill(p.pid, 0) == 0 && out.str().find(" listening on ") != std::string::npos) {
      return {p.pid, p.name};
    }
  }
  return {0, ""};
}

// Kills the leading hub ACM or SWM `count` times (in turn) and prints how
// long its address took to answer a health check again. False when a
// service found no new leader within a minute.
bool MeasureFailovers(int count) {
  std::printf("\nfailover: SIGKILL of the leading replica -> its address serves again\n");
  std::vector<double> seconds, client_seconds;
  for (int k = 0; k < count; ++k) {
    const std::string service = k % 2 == 0 ? "hub/acm" : "hub/swm";
    auto state = LoadRunState();
    if (!state.ok()) return false;
    const std::string address = service == "hub/acm" ? state->acm : state->swm;
    auto [pid, name] = Leader(*state, service);
    if (pid == 0) {
      std::printf("%s: no leader\n", service.c_str());
      return false;
    }
    // Two clients probe: a new connection each time (when the new leader
    // serves) and one long-lived channel with gRPC's default reconnect
    // backoff (when a client that was connected to the dead leader is back).
    auto long_lived = ChannelTo(address, Args{});
    if (!long_lived.ok()) return false;
    auto long_lived_health = grpc::health::v1::Health::NewStub(*long_lived);
    auto serving = [](grpc::health::v1::Health::Stub& stub) {
      grpc::health::v1::HealthCheckResponse response;
      return stub.Check(Context(absl::Milliseconds(200)).get(),
                        grpc::health::v1::HealthCheckRequest(), &response)
                 .ok() &&
             response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
    };
    if (!serving(*long_lived_health)) return false;
    const absl::Time killed = absl::Now();
    kill(pid, SIGKILL);
    std::optional<absl::Duration> fresh_after, long_lived_after;
    while ((!fresh_after || !long_lived_after) && absl::Now() - killed < absl::Minutes(2)) {
      if (!fresh_after) {
        auto fresh = ChannelTo(address, Args{});
        if (fresh.ok() && serving(*grpc::health::v1::Health::NewStub(*fresh))) {
          fresh_after = absl::Now() - killed;
        }
      }
      if (!long_lived_after && serving(*long_lived_health)) long_lived_after = absl::Now() - killed;
      absl::SleepFor(absl::Milliseconds(50));
    }
    if (!fresh_after || !long_lived_after) {
      std::printf("%-8s killed %s (pid %d): no leader serves after 2 min\n", service.c_str(),
                  name.c_str(), pid);
      return false;
    }
    std::printf("%-8s killed %s (pid %d): new leader serves after %.2f s; "
                "a long-lived client is back after %.2f s\n",
                service.c_str(), name.c_str(), pid, absl::ToDoubleSeconds(*fresh_after),
                absl::ToDoubleSeconds(*long_lived_after));
    seconds.push_back(absl::ToDoubleSeconds(*fresh_after));
    client_seconds.push_back(absl::ToDoubleSeconds(*long_lived_after));
    // Back as a standby for the next round.
    Args restart;
    restart.positional = {name};
    if (RunRestart(restart) != 0) return false;
  }
  for (auto* series : {&seconds, &client_seconds}) {
    std::sort(series->begin(), series->end());
    std::printf("%s s: min %.2f  median %.2f  max %.2f over %zu\n",
                series == &seconds ? "new leader serves" : "long-lived client back",
                series->front(), (*series)[series->size() / 2], series->back(), series->size());
  }
  return true;
}

int Run(const Settings& settings) {
  if (Cam("x").empty()) {
    std::fprintf(stderr, "apply_rate_bench: cannot read %s/examples/cams/front-back.yaml\n",
                 CODECO_SOURCE_DIR);
    return 1;
  }
  // A private CODECO_HOME: never touches a federation the user runs.
  char home_template[] = "/tmp/codeco-rate-XXXXXX";
  const char* home = mkdtemp(home_template);
  if (home == nullptr) return 1;
  setenv("CODECO_HOME", home, 1);
  setenv("CODECO_BIN_DIR", CODECO_BIN_DIR, /*overwrite=*/0);
  Args up;
  up.flags = {{"scenario", settings.scenario}, {"no-prometheus", "true"}};
  if (settings.hub_replicas > 1) up.flags["hub-replicas"] = absl::StrCat(settings.hub_replicas);
  if (RunUp(up) != 0) return 1;
  int code = 0;
  {
    auto state = LoadRunState();
    auto channel = state.ok() ? ChannelTo(state->acm, Args{}) : state.status();
    if (!channel.ok()) {
      std::fprintf(stderr, "%s\n", std::string(channel.status().message()).c_str());
      RunDown(Args{});
      return 1;
    }
    auto stub = acm::AcmService::NewStub(*channel);
    // Wait for every managed cluster's agent.
    size_t expected = 0;
    for (const auto& p : state->processes) {
      if (p.name.size() > 4 && p.name.substr(p.name.size() - 4) == "/acm" &&
          p.name != "hub/acm") {
        ++expected;
      }
    }
    for (absl::Time until = absl::Now() + absl::Minutes(2); absl::Now() < until;) {
      acm::ListClustersResponse clusters;
      size_t ready = 0;
      if (stub->ListClusters(Context(absl::Seconds(10)).get(), acm::ListClustersRequest(), &clusters)
              .ok()) {
        for (const auto& c : clusters.clusters()) {
          ready += c.health() == acm::CLUSTER_HEALTH_READY && c.role() == acm::CLUSTER_ROLE_MC;
        }
      }
      if (ready >= expected) break;
      absl::SleepFor(absl::Milliseconds(300));
    }

    std::printf("\napply_rate_bench: %d workers for %s on %s\n", settings.workers,
                absl::FormatDuration(settings.duration).c_str(), settings.scenario.c_str());
    std::printf("%6s %9s %8s %12s %12s %12s %16s %14s %15s\n", "t_s", "running", "per_s",
                "hub_acm_MiB", "hub_swm_MiB", "hub_netma_MiB", "max_mc_svc_MiB",
                "acm_heap_MiB", "acm_store_MiB");
    Tally tally;
    const absl::Time start = absl::Now();
    const absl::Time end = start + settings.duration;
    std::vector<std::thread> workers;
    for (int w = 0; w < settings.workers; ++w) {
      workers.emplace_back([&, w] { Work(*stub, w, end, tally); });
    }
    // Sample every 10 s.
    std::map<std::string, std::vector<long>> rss;  // hub process -> samples, KiB
    std::map<std::string, std::vector<Memory>> memory;  // hub process -> samples
    long previous = 0;
    for (absl::Time next = start + absl::Seconds(10); next <= end; next += absl::Seconds(10)) {
      absl::SleepFor(next - absl::Now());
      long now_running = tally.running.load();
      long max_mc = 0;
      for (const auto& p : state->processes) {
        long kib = RssKib(p.pid);
        if (p.name.rfind("hub/", 0) == 0) {
          rss[p.name].push_back(kib);
          memory[p.name].push_back(ScrapeMemory(p.name, p.http));
        } else if (p.name != "codef") max_mc = std::max(max_mc, kib);
      }
      auto last = [&](const char* name) {
        auto it = rss.find(name);
        return it == rss.end() || it->second.empty() ? 0.0 : it->second.back() / 1024.0;
      };
      const Memory acm_memory = memory["hub/acm"].empty() ? Memory{} : memory["hub/acm"].back();
      std::printf("%6.0f %9ld %8.1f %12.1f %12.1f %12.1f %16.1f %14.1f %15.1f\n",
                  absl::ToDoubleSeconds(next - start), now_running,
                  (now_running - previous) / 10.0, last("hub/acm"), last("hub/swm"),
                  last("hub/netma"), max_mc / 1024.0, acm_memory.heap_in_use, acm_memory.store);
      std::fflush(stdout);
      previous = now_running;
    }
    for (auto& t : workers) t.join();
    const double seconds = absl::ToDoubleSeconds(settings.duration);
    std::vector<double> latency;
    {
      std::lock_guard<std::mutex> lock(tally.mu);
      latency = tally.latency_ms;
    }
    std::printf("\nRunning: %ld in %.0f s = %.2f applies/s sustained (goal >= 17/s)\n",
                tally.running.load(), seconds, tally.running.load() / seconds);
    std::printf("apply -> Running latency ms: p50 %.0f  p90 %.0f  p99 %.0f\n",
                Percentile(latency, 0.5), Percentile(latency, 0.9), Percentile(latency, 0.99));
    std::printf("not Running: %ld, apply refused: %ld\n", tally.failed.load(),
                tally.refused.load());
    // Growth from the sample after one minute of warm-up (the first sample
    // in runs of two minutes or less), and over the second half of the run
    // (RocksDB's block cache and memtables fill to their budget first).
    for (const auto& [name, samples] : rss) {
      if (samples.empty()) continue;
      size_t from = samples.size() > 12 ? 6 : 0;
      size_t half = samples.size() / 2;
      long peak = *std::max_element(samples.begin(), samples.end());
      std::printf("%-10s RSS %.1f -> %.1f MiB (peak %.1f); second half %.1f -> %.1f MiB\n",
                  name.c_str(), samples[from] / 1024.0, samples.back() / 1024.0, peak / 1024.0,
                  samples[half] / 1024.0, samples.back() / 1024.0);
      const std::vector<Memory>& parts = memory[name];
      if (parts.size() != samples.size()) continue;
      auto show = [&](const char* what, double Memory::*field) {
        std::printf("%-10s   %-15s %.1f -> %.1f MiB; second half %.1f -> %.1f MiB\n", "",
                    what, parts[from].*field, parts.back().*field, parts[half].*field,
                    parts.back().*field);
      };
      show("heap in use", &Memory::heap_in_use);
      show("heap free held", &Memory::heap_free_held);
      show("store", &Memory::store);
      show("  memtables", &Memory::memtables);
      show("  block cache", &Memory::block_cache);
    }
    if (tally.running.load() == 0) code = 1;
    if (settings.failovers > 0 && !MeasureFailovers(settings.failovers)) code = 1;
  }
  RunDown(Args{});
  if (settings.keep) {
    std::printf("run data and logs kept in %s\n", home);
  } else {
    fs::remove_all(home);
  }
  return code;
}

}  // namespace
}  // namespace codeco::ctl

int main(int argc, char** argv) {
  codeco::ctl::Settings settings;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--quick") {
      settings.duration = absl::Minutes(1);
    } else if (arg == "--minutes") {
      settings.duration = absl::Minutes(std::atof(value().c_str()));
    } else if (arg == "--workers") {
      settings.workers = std::max(1, std::atoi(value().c_str()));
    } else if (arg == "--keep") {
      settings.keep = true;
    } else if (arg == "--scenario") {
      settings.scenario = value();
    } else if (arg == "--hub-replicas") {
      settings.hub_replicas = std::max(1, std::atoi(value().c_str()));
    } else if (arg == "--failovers") {
      settings.failovers = std::max(0, std::atoi(value().c_str()));
    } else {
      std::fprintf(stderr,
                   "usage: apply_rate_bench [--quick] [--minutes N] [--workers N] "
                   "[--scenario FILE] [--keep] [--hub-replicas N [--failovers K]]\n");
      return 2;
    }
  }
  if (settings.failovers > 0 && settings.hub_replicas < 2) {
    std::fprintf(stderr, "apply_rate_bench: --failovers needs --hub-replicas 2 or 3\n");
    return 2;
  }
  if (settings.duration <= absl::ZeroDuration()) {
    std::fprintf(stderr, "apply_rate_bench: --minutes must be positive\n");
    return 2;
  }
  return codeco::ctl::Run(settings);
}
