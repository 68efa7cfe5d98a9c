// Placement benchmarks: speed, the stateful-LCM simulation, the optimality
// gap against CBC, the mck8s workload (run by CODEF's simulate mode on the
// five-site scenario). Prints one summary table per section.
//
//   placement_bench [--quick] [--section=speed|lcm|gap|mck8s|all]
//
// Wall-clock time is read here (a benchmark, not the core).

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "report.h"
#include "scenario.h"
#include "simulation.h"
#include "swm/core/solve.h"
#include "swm/milp/milp.h"
#include "swm/testing/instances.h"

namespace codeco::swm {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;
constexpr int64_t kMs = 1'000'000;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

struct Engine {
  PluginRegistry registry = NewDefaultRegistry();
  InProcessL2Solver l2{registry, nullptr};
  Coordinator coord{l2, registry, nullptr};
};

// ---------------------------------------------------------------- speed ---

Federation SpeedFederation(int clusters, int nodes, int links_per_cluster, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Federation fed;
  for (int c = 0; c < clusters; ++c) {
    Cluster cl{.name = absl::StrCat("c", c),
               .labels = {.region = "eu", .country = "FR"},
               .intra_latency_ns = 100'000};
    for (int n = 0; n < nodes; ++n) {
      Node node{.name = absl::StrCat("c", c, "-n", n), .capacity = {16000, 64 * kGi, 0}};
      node.allocated = {static_cast<int64_t>(std::uniform_int_distribution<int>(0, 8000)(rng)), 0,
                        0};
      cl.nodes.push_back(node);
    }
    fed.AddCluster(std::move(cl));
  }
  for (int c = 0; c < clusters; ++c) {
    for (int k = 0; k < links_per_cluster; ++k) {
      int d = std::uniform_int_distribution<int>(0, clusters - 1)(rng);
      if (d == c) continue;
      Link l{.from = absl::StrCat("c", c),
             .to = absl::StrCat("c", d),
             .latency_ns = std::uniform_int_distribution<int64_t>(1, 20)(rng) * kMs,
             .free_bandwidth_bps = {10'000'000'000, 1'000'000'000}};
      fed.AddLink(l);
      std::swap(l.from, l.to);
      fed.AddLink(l);
    }
  }
  return fed;
}

void RunSpeed(bool quick) {
  Engine e;
  std::printf("\n## Speed (in process, one thread)\n\n");
  // Single-pod placements over 1,000 clusters x 10 nodes, applied one after another.
  Federation fed = SpeedFederation(1000, 10, 5, 1);
  int pods = quick ? 300 : 3000;
  std::mt19937_64 rng(2);
  int placed = 0;
  absl::Time start = absl::Now();
  for (int i = 0; i < pods; ++i) {
    Application app{
        .name = absl::StrCat("pod", i),
        .workloads = {
            {.name = "w",
             .service = "w",
             .requests = {std::uniform_int_distribution<int64_t>(100, 1000)(rng), kGi / 4, 0}}}};
    auto r = e.coord.Place(app, fed, {});
    if (!r.ok()) {
      std::printf("error: %s\n", std::string(r.status().message()).c_str());
      return;
    }
    placed += static_cast<int>(r->placements.size());
    ApplyPlacement(app, *r, fed);
  }
  double secs = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf("| case | runs | result |\n|---|---|---|\n");
  std::printf(
      "| single-pod placements, 1,000 clusters x 10 nodes | %d (%d placed) | %.0f pods/s |\n", pods,
      placed, pods / secs);

  // A 20-workload, 10-channel application over a 100-cluster neighborhood.
  Federation hood = SpeedFederation(100, 10, 10, 3);
  int runs = quick ? 50 : 500;
  std::vector<double> ms;
  int unplaced = 0;
  for (int i = 0; i < runs; ++i) {
    testing::InstanceOptions o{.clusters = 1,
                               .workloads = 20,
                               .channels = 10,
                               .max_cpu_request = 2000,
                               .max_memory_request = 2 * kGi,
                               .max_channel_bandwidth_bps = 50'000'000,
                               .min_channel_delay_ns = 5 * kMs,
                               .max_channel_delay_ns = 40 * kMs};
    Application app = testing::RandomInstance(1000 + i, o).app;
    absl::Time t0 = absl::Now();
    auto r = e.coord.Place(app, hood, {});
    ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
    if (r.ok()) unplaced += static_cast<int>(r->unplaced.size());
  }
  std::printf(
      "| 20 workloads + 10 channels, 100-cluster neighborhood | %d | p50 %.2f ms, p99 %.2f ms"
      " (%d workloads unplaced in all) |\n",
      runs, Percentile(ms, 0.5), Percentile(ms, 0.99), unplaced);
}

// ------------------------------------------------------------------ LCM ---

// The stateful-LCM study's simulation: 100 clusters of 5-10 identical nodes
// with 20-80 % free CPU and memory; inter-cluster latency 1-5 (ms here) on a
// random graph, shortest path where no direct link; 0.1 inside a cluster, 0
// on the same node. Applications are DAGs of microservices.
struct LcmWorld {
  Federation fed;
  std::vector<std::vector<double>> dist;  // cluster x cluster, ms
};

LcmWorld MakeLcmWorld(uint64_t seed, int clusters) {
  std::mt19937_64 rng(seed);
  LcmWorld w;
  for (int c = 0; c < clusters; ++c) {
    Cluster cl{.name = absl::StrCat("c", c), .intra_latency_ns = 100'000};
    int nodes = std::uniform_int_distribution<int>(5, 10)(rng);
    for (int n = 0; n < nodes; ++n) {
      Node node{.name = absl::StrCat("c", c, "-n", n), .capacity = {8000, 32 * kGi, 0}};
      double fc = std::uniform_real_distribution<double>(0.2, 0.8)(rng);
      double fm = std::uniform_real_distribution<double>(0.2, 0.8)(rng);
      node.allocated = {static_cast<int64_t>((1 - fc) * 8000),
                        static_cast<int64_t>((1 - fm) * 32 * kGi), 0};
      cl.nodes.push_back(node);
    }
    w.fed.AddCluster(std::move(cl));
  }
  const double kInf = std::numeric_limits<double>::infinity();
  w.dist.assign(clusters, std::vector<double>(clusters, kInf));
  for (int c = 0; c < clusters; ++c) w.dist[c][c] = 0;
  for (int c = 0; c < clusters; ++c) {  // a ring keeps it connected, plus random chords
    std::vector<int> peers{(c + 1) % clusters};
    for (int k = 0; k < 3; ++k)
      peers.push_back(std::uniform_int_distribution<int>(0, clusters - 1)(rng));
    for (int d : peers) {
      if (d == c) continue;
      double lat = static_cast<double>(std::uniform_int_distribution<int>(1, 5)(rng));
      w.dist[c][d] = std::min(w.dist[c][d], lat);
      w.dist[d][c] = std::min(w.dist[d][c], lat);
    }
  }
  for (int k = 0; k < clusters; ++k) {
    for (int i = 0; i < clusters; ++i) {
      for (int j = 0; j < clusters; ++j) {
        w.dist[i][j] = std::min(w.dist[i][j], w.dist[i][k] + w.dist[k][j]);
      }
    }
  }
  // The study's latency model: every pair reachable at its shortest-path latency.
  for (int i = 0; i < clusters; ++i) {
    for (int j = 0; j < clusters; ++j) {
      if (i == j) continue;
      w.fed.AddLink(Link{.from = absl::StrCat("c", i),
                         .to = absl::StrCat("c", j),
                         .latency_ns = static_cast<int64_t>(w.dist[i][j] * kMs),
                         .free_bandwidth_bps = {int64_t{1} << 40, int64_t{1} << 40}});
    }
  }
  return w;
}

Application MakeDagApp(uint64_t seed, int services) {
  std::mt19937_64 rng(seed);
  Application app{.name = absl::StrCat("dag", services, "-", seed)};
  for (int i = 0; i < services; ++i) {
    app.workloads.push_back(
        Workload{.name = absl::StrCat("ms", i),
                 .service = absl::StrCat("ms", i),
                 .requests = {std::uniform_int_distribution<int64_t>(100, 1000)(rng),
                              std::uniform_int_distribution<int64_t>(128, 2048)(rng) << 20, 0},
                 .availability_kpi = std::uniform_int_distribution<int>(50, 100)(rng)});
  }
  for (int i = 1; i < services; ++i) {  // a random DAG: one parent each plus extra edges
    int parent = std::uniform_int_distribution<int>(0, i - 1)(rng);
    app.channels.push_back({.name = absl::StrCat("e", app.channels.size()),
                            .from = absl::StrCat("ms", parent),
                            .to = absl::StrCat("ms", i)});
    if (i > 2 && std::uniform_real_distribution<double>(0, 1)(rng) < 0.3) {
      int other = std::uniform_int_distribution<int>(0, i - 1)(rng);
      if (other != parent) {
        app.channels.push_back({.name = absl::StrCat("e", app.channels.size()),
                                .from = absl::StrCat("ms", other),
                                .to = absl::StrCat("ms", i)});
      }
    }
  }
  return app;
}

struct Outcome {
  double ms = 0;
  double latency = 0;        // sum over edges, abstract units (ms)
  double cluster_share = 0;  // clusters used / clusters
  int unplaced = 0;
};

Outcome Evaluate(const LcmWorld& w, const Application& app,
                 const std::map<std::string, Placement>& p, double ms) {
  Outcome o{.ms = ms};
  std::set<std::string> used;
  for (const auto& [name, pl] : p) used.insert(pl.cluster);
  o.cluster_share = static_cast<double>(used.size()) / static_cast<double>(w.fed.clusters().size());
  o.unplaced = static_cast<int>(app.workloads.size() - p.size());
  for (const Channel& ch : app.channels) {
    auto a = p.find(ch.from), b = p.find(ch.to);
    if (a == p.end() || b == p.end()) continue;
    o.latency += static_cast<double>(PathLatencyNs(w.fed, a->second, b->second).value_or(0)) / kMs;
  }
  return o;
}

double NodeScore(const Node& n, double alpha) {
  Resources f = n.Free();
  return (1 - alpha) * static_cast<double>(f.cpu_millis) /
             static_cast<double>(n.capacity.cpu_millis) +
         alpha * static_cast<double>(f.memory_bytes) / static_cast<double>(n.capacity.memory_bytes);
}

bool UnderThreshold(const Node& n, const Resources& req, double t) {
  Resources used = n.allocated + req;
  return static_cast<double>(used.cpu_millis) <= t * static_cast<double>(n.capacity.cpu_millis) &&
         static_cast<double>(used.memory_bytes) <= t * static_cast<double>(n.capacity.memory_bytes);
}

std::vector<int> KpiOrder(const Application& app) {
  std::vector<int> order(app.workloads.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return app.workloads[a].availability_kpi > app.workloads[b].availability_kpi;
  });
  return order;
}

// The study's two-tier: the RO sends the batch to the cluster with the best
// Cscore; the cluster manager puts each microservice on its best-Nscore node
// under the safety threshold (any node if all are above it); what is left
// goes to the next cluster.
std::map<std::string, Placement> TwoTier(Federation fed, const Application& app) {
  const double alpha = 0.5, threshold = 0.9;
  std::vector<Cluster*> order;
  for (const Cluster& c : fed.clusters()) order.push_back(fed.MutableCluster(c.name));
  auto cscore = [&](const Cluster* c) {
    Resources cap = c->Capacity(), free = c->Free();
    return (1 - alpha) * static_cast<double>(free.cpu_millis) /
               static_cast<double>(cap.cpu_millis) +
           alpha * static_cast<double>(free.memory_bytes) / static_cast<double>(cap.memory_bytes);
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](const Cluster* a, const Cluster* b) { return cscore(a) > cscore(b); });
  std::map<std::string, Placement> out;
  std::vector<int> pending = KpiOrder(app);
  for (Cluster* c : order) {
    std::vector<int> left;
    for (int wi : pending) {
      const Resources& req = app.workloads[wi].requests;
      Node* best = nullptr;
      bool best_under = false;
      for (Node& n : c->nodes) {
        if (!n.Free().Fits(req)) continue;
        bool under = UnderThreshold(n, req, threshold);
        if (best == nullptr || (under && !best_under) ||
            (under == best_under && NodeScore(n, alpha) > NodeScore(*best, alpha))) {
          best = &n;
          best_under = under;
        }
      }
      if (best == nullptr) {
        left.push_back(wi);
        continue;
      }
      best->allocated += req;
      out[app.workloads[wi].name] = Placement{c->name, best->name};
    }
    pending = std::move(left);
    if (pending.empty()) break;
  }
  return out;
}

std::map<std::string, Placement> BestNodeAnywhere(Federation fed, const Application& app) {
  std::map<std::string, Placement> out;
  for (int wi : KpiOrder(app)) {
    const Resources& req = app.workloads[wi].requests;
    Node* best = nullptr;
    std::string cluster;
    for (const Cluster& c : fed.clusters()) {
      for (Node& n : fed.MutableCluster(c.name)->nodes) {
        if (n.Free().Fits(req) && (best == nullptr || NodeScore(n, 0.5) > NodeScore(*best, 0.5))) {
          best = &n;
          cluster = c.name;
        }
      }
    }
    if (best == nullptr) continue;
    best->allocated += req;
    out[app.workloads[wi].name] = Placement{cluster, best->name};
  }
  return out;
}

std::map<std::string, Placement> RandomPlacement(Federation fed, const Application& app,
                                                 uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::map<std::string, Placement> out;
  for (const Workload& w : app.workloads) {
    std::vector<std::pair<std::string, int>> fits;
    for (const Cluster& c : fed.clusters()) {
      for (size_t i = 0; i < c.nodes.size(); ++i) {
        if (c.nodes[i].Free().Fits(w.requests)) fits.push_back({c.name, static_cast<int>(i)});
      }
    }
    if (fits.empty()) continue;
    auto [cn, ni] = fits[std::uniform_int_distribution<size_t>(0, fits.size() - 1)(rng)];
    Node& n = fed.MutableCluster(cn)->nodes[ni];
    n.allocated += w.requests;
    out[w.name] = Placement{cn, n.name};
  }
  return out;
}

void RunLcm(bool quick) {
  Engine e;
  std::printf("\n## Stateful-LCM simulation (100 clusters of 5-10 nodes, 20-80 %% free)\n\n");
  std::printf(
      "| microservices | strategy | sched time (ms) | total app latency | clusters used | unplaced "
      "|\n");
  std::printf("|---|---|---|---|---|---|\n");
  int seeds = quick ? 2 : 20;
  for (int size : {50, 100, 150}) {
    std::map<std::string, std::vector<Outcome>> by;
    for (int s = 0; s < seeds; ++s) {
      LcmWorld w = MakeLcmWorld(100 + s, 100);
      Application app = MakeDagApp(500 + s, size);
      absl::Time t0 = absl::Now();
      auto r = e.coord.Place(app, w.fed, {});
      double ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
      if (!r.ok()) {
        std::printf("error: %s\n", std::string(r.status().message()).c_str());
        return;
      }
      by["codeco"].push_back(Evaluate(w, app, r->placements, ms));
      t0 = absl::Now();
      auto tt = TwoTier(w.fed, app);
      by["two-tier (study)"].push_back(
          Evaluate(w, app, tt, absl::ToDoubleMilliseconds(absl::Now() - t0)));
      t0 = absl::Now();
      auto bn = BestNodeAnywhere(w.fed, app);
      by["best node anywhere"].push_back(
          Evaluate(w, app, bn, absl::ToDoubleMilliseconds(absl::Now() - t0)));
      t0 = absl::Now();
      auto rnd = RandomPlacement(w.fed, app, 900 + s);
      by["random"].push_back(Evaluate(w, app, rnd, absl::ToDoubleMilliseconds(absl::Now() - t0)));
    }
    for (const char* name : {"codeco", "two-tier (study)", "best node anywhere", "random"}) {
      std::vector<double> ms, lat, share, un;
      for (const Outcome& o : by[name]) {
        ms.push_back(o.ms);
        lat.push_back(o.latency);
        share.push_back(o.cluster_share);
        un.push_back(o.unplaced);
      }
      std::printf("| %d | %s | %.2f | %.1f | %.1f %% | %.1f |\n", size, name, Mean(ms), Mean(lat),
                  100 * Mean(share), Mean(un));
    }
  }
  std::printf(
      "\n(averaged over %d seeds; latency in the study's abstract units: 1-5 between "
      "clusters, 0.1 inside one, 0 on one node)\n",
      seeds);
}

// ------------------------------------------------------------------ gap ---

void RunGap(bool quick) {
  Engine e;
  std::printf("\n## Optimality gap against CBC (small instances)\n\n");
  std::printf(
      "| instances | workloads | heuristic optimal | fewer placed | mean placed (heur / opt)"
      " | mean extra latency when all placed (ms) | mean CBC time (ms) | mean heuristic time (ms) "
      "|\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  int seeds = quick ? 20 : 200;
  for (int workloads : {4, 6, 8}) {
    int optimal = 0, fewer = 0, both_all = 0;
    double placed_h = 0, placed_o = 0, extra = 0, cbc_ms = 0, heur_ms = 0;
    for (int s = 1; s <= seeds; ++s) {
      testing::InstanceOptions o{.clusters = 3,
                                 .min_nodes = 1,
                                 .max_nodes = 3,
                                 .workloads = workloads,
                                 .channels = workloads};
      testing::Instance inst = testing::RandomInstance(7000 + s, o);
      absl::Time t0 = absl::Now();
      auto exact = milp::SolveExact(inst.app, inst.federation);
      cbc_ms += absl::ToDoubleMilliseconds(absl::Now() - t0);
      t0 = absl::Now();
      auto heur = e.coord.Place(inst.app, inst.federation, {});
      heur_ms += absl::ToDoubleMilliseconds(absl::Now() - t0);
      if (!exact.ok() || !heur.ok()) {
        std::printf("error\n");
        return;
      }
      double hv = milp::PlacementObjective(inst.app, inst.federation, heur->placements);
      if (hv >= exact->objective - 1e-6) ++optimal;
      placed_h += static_cast<double>(heur->placements.size());
      placed_o += static_cast<double>(exact->placements.size());
      if (heur->placements.size() < exact->placements.size()) {
        ++fewer;
      } else if (exact->placements.size() == inst.app.workloads.size()) {
        ++both_all;
        extra += exact->objective - hv;
      }
    }
    std::printf("| %d | %d | %.1f %% | %.1f %% | %.2f / %.2f | %.2f | %.1f | %.2f |\n", seeds,
                workloads, 100.0 * optimal / seeds, 100.0 * fewer / seeds, placed_h / seeds,
                placed_o / seeds, both_all ? extra / both_all : 0.0, cbc_ms / seeds,
                heur_ms / seeds);
  }
}

// ---------------------------------------------------------------- mck8s ---

// The mck8s workload in CODEF simulate mode (tools/codef/sim): the five-site
// Grid'5000 scenario of that study, examples/scenarios/grid5000-five-sites.yaml,
// is the source of truth for the clusters (clusters 1 and 5: five workers of
// 4 CPU / 16 GB; clusters 2-4: five of 2 CPU / 4 GB; 70 CPUs) and for the
// task stream (1,126 Google-trace-like tasks over 60 minutes with the study's
// location split). Each policy runs the same trace under a virtual clock;
// pending pods are retried every scheduling tick and sampled at each tick.
void RunMck8s(bool quick) {
  const std::string path = std::string(PLACEMENT_BENCH_SCENARIO_DIR) + "/grid5000-five-sites.yaml";
  absl::StatusOr<codef::Scenario> scenario = codef::LoadScenarioFile(path);
  if (!scenario.ok() || !scenario->workloads.task_stream.has_value()) {
    std::printf("error: %s: %s\n", path.c_str(),
                scenario.ok() ? "no workloads.task_stream"
                              : std::string(scenario.status().message()).c_str());
    return;
  }
  const codef::TaskStreamSpec& stream = *scenario->workloads.task_stream;
  const absl::Duration tick = quick ? absl::Seconds(60) : absl::Seconds(10);
  const absl::Duration window = absl::Nanoseconds(stream.start_ns + stream.window_ns);
  // One sample per scheduling tick over the arrival window, as the study measures.
  scenario->record.interval_ns = absl::ToInt64Nanoseconds(tick);
  scenario->record.metrics = {"pending_pods", "node_usage"};

  struct Row {
    const char* name;
    const char* policy;
  };
  const Row rows[] = {
      {"KubeFed-like (preferred cluster, no capacity check)", codef::kKubefedPolicy},
      {"mck8s cluster-affinity + bursting", "mck8s-cluster-affinity"},
      {"mck8s worst-fit", "mck8s-worst-fit"},
      {"mck8s best-fit", "mck8s-best-fit"},
      {"codeco", "codeco"}};
  std::vector<std::string> lines;
  codef::DemandFloor floor;
  std::vector<std::string> sites;
  double capacity_cpus = 0;
  for (const Row& r : rows) {
    codef::SimulationOptions options{.policy = r.policy,
                                     .tick = tick,
                                     .duration = window,
                                     .keep_metrics = scenario->record.metrics};
    absl::Time t0 = absl::Now();
    absl::StatusOr<codef::SimulationResult> result =
        codef::RunSimulation(*scenario, options, nullptr);
    double wall_s = absl::ToDoubleSeconds(absl::Now() - t0);
    if (!result.ok()) {
      std::printf("error: %s: %s\n", r.policy, std::string(result.status().message()).c_str());
      return;
    }
    absl::StatusOr<codef::RecordedRun> run = codef::ReadRecordedRun(result->csv);
    if (!run.ok()) {
      std::printf("error: %s\n", std::string(run.status().message()).c_str());
      return;
    }
    codef::RunSummary s = codef::Summarize(*run);
    if (sites.empty()) {
      sites = result->placement_clusters;
      capacity_cpus = static_cast<double>(result->placement_capacity_millicores) / 1000;
      floor = codef::ComputeDemandFloor(result->generated_tasks,
                                        result->placement_capacity_millicores, tick, window);
    }
    std::string alloc;
    for (const std::string& site : sites) {
      for (const codef::ClusterSummary& c : s.clusters) {
        if (c.name == site) {
          absl::StrAppend(&alloc, alloc.empty() ? "" : "/",
                          absl::StrFormat("%.0f", 100 * c.cpu_allocated_mean));
        }
      }
    }
    lines.push_back(absl::StrFormat(
        "| %s | %.1f %% | %.1f %% | %.1f %% | %.1f %% | %s %% | %.2f s |", r.name,
        100 * s.pending_share_peak, 100 * s.pending_share_mean, 100 * s.pending_cpu_share_peak,
        100 * s.pending_cpu_share_mean, alloc, wall_s));
  }
  std::printf(
      "\n## mck8s workload (CODEF simulate mode, %s: %lld tasks over %s, %s, %.0f CPUs)\n\n",
      "examples/scenarios/grid5000-five-sites.yaml", static_cast<long long>(stream.count),
      absl::FormatDuration(window).c_str(), absl::StrJoin(sites, "/").c_str(), capacity_cpus);
  std::printf("peak CPU demand %.1f CPUs (capacity %.0f); scheduling tick %s\n\n",
              floor.peak_demand_cpus, capacity_cpus, absl::FormatDuration(tick).c_str());
  std::printf(
      "| policy | peak pending pods | mean pending pods | peak pending CPU | mean pending CPU"
      " | mean CPU allocated %s | simulate wall time |\n|---|---|---|---|---|---|---|\n",
      absl::StrJoin(sites, "/").c_str());
  for (const std::string& line : lines) std::printf("%s\n", line.c_str());
  std::printf(
      "| physical floor (CPU demand beyond %.0f CPUs) | - | - | %.1f %% | %.1f %% | - | - |\n",
      capacity_cpus, 100 * floor.floor_peak, 100 * floor.floor_mean);
}

}  // namespace
}  // namespace codeco::swm

int main(int argc, char** argv) {
  bool quick = false;
  std::string section = "all";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strncmp(argv[i], "--benchmark_min_time=", 21) == 0) {
      quick = true;  // what scripts/dev.sh bench --quick passes to every bench binary
    } else if (std::strncmp(argv[i], "--section=", 10) == 0) {
      section = argv[i] + 10;
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--section=speed|lcm|gap|mck8s|all]\n", argv[0]);
      return 2;
    }
  }
  std::printf("# placement_bench%s\n", quick ? " --quick" : "");
  if (section == "all" || section == "speed") codeco::swm::RunSpeed(quick);
  if (section == "all" || section == "lcm") codeco::swm::RunLcm(quick);
  if (section == "all" || section == "gap") codeco::swm::RunGap(quick);
  if (section == "all" || section == "mck8s") codeco::swm::RunMck8s(quick);
  return 0;
}
