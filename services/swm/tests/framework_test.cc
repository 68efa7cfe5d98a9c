#include "swm/core/framework.h"

#include <catch2/catch.hpp>

#include "swm/core/plugins.h"
#include "swm/tests/fixtures.h"

namespace codeco::swm {
namespace {

using test::Connect;
using test::kGi;
using test::kMs;
using test::MakeCluster;
using test::MakeWorkload;
using test::ProfileWith;

// Runs `profile` at node level over `cluster` for `w` with `placed` peers.
struct NodeRun {
  Federation fed;
  Application app;
  std::unique_ptr<Framework> fw;
  PluginRegistry registry = NewDefaultRegistry();

  NodeRun(Federation f, Application a, const Profile& p, RecommendationSource* recs = nullptr)
      : fed(std::move(f)), app(std::move(a)) {
    auto made = Framework::Create(p, registry, recs);
    REQUIRE(made.ok());
    fw = std::move(*made);
  }
  Selection Run(const std::string& cluster, const std::string& workload,
                const std::map<std::string, Placement>& placed = {}, bool relax = false) {
    Cluster* c = fed.MutableCluster(cluster);
    CycleState state(app, fed, c, relax);
    for (const auto& [w, p] : placed) state.Bind(w, p);
    ClusterAggregate agg = AggregateOf(*c);
    std::vector<Candidate> cands;
    for (size_t i = 0; i < c->nodes.size(); ++i) {
      cands.push_back(Candidate{Level::kNode, &agg, &c->nodes[i], static_cast<int>(i)});
    }
    auto sel = fw->Select(state, app.workloads[app.WorkloadIndex(workload)], cands);
    REQUIRE(sel.ok());
    return *sel;
  }
  Selection RunClusters(const std::string& workload,
                        const std::map<std::string, Placement>& placed = {}) {
    CycleState state(app, fed, nullptr, false);
    for (const auto& [w, p] : placed) state.Bind(w, p);
    std::vector<ClusterAggregate> aggs;
    for (const Cluster& c : fed.clusters()) aggs.push_back(AggregateOf(c));
    std::vector<Candidate> cands;
    for (const ClusterAggregate& a : aggs) cands.push_back(Candidate{Level::kCluster, &a});
    auto sel = fw->Select(state, app.workloads[app.WorkloadIndex(workload)], cands);
    REQUIRE(sel.ok());
    return *sel;
  }
};

Application OneWorkloadApp(Workload w) {
  return Application{.name = "app", .workloads = {std::move(w)}};
}

TEST_CASE("model validation names every bad field") {
  Application app{.name = "a",
                  .workloads = {MakeWorkload("x", 100), MakeWorkload("x", -1)},
                  .channels = {{.name = "c", .from = "x", .to = "y", .max_delay_ns = -1}}};
  app.workloads[0].availability_kpi = 101;
  absl::Status st = app.Validate();
  REQUIRE(st.code() == absl::StatusCode::kInvalidArgument);
  std::string msg(st.message());
  CHECK(msg.find("workloads[1].name: duplicate") != std::string::npos);
  CHECK(msg.find("workloads[1].requests.cpu_millis") != std::string::npos);
  CHECK(msg.find("workloads[0].availability_kpi") != std::string::npos);
  CHECK(msg.find("channels[0].to: unknown workload \"y\"") != std::string::npos);
  CHECK(msg.find("channels[0].max_delay_ns") != std::string::npos);

  Federation fed;
  fed.AddCluster(MakeCluster("a", 1, 1000, kGi));
  fed.AddLink(Link{.from = "a", .to = "zz"});
  CHECK(std::string(fed.Validate().message()).find("links[0].to: unknown cluster") !=
        std::string::npos);
}

TEST_CASE("path latency is 0 on a node intra in a cluster single hop across") {
  Federation fed;
  fed.AddCluster(MakeCluster("a", 2, 1000, kGi, "eu", "FR", 100));
  fed.AddCluster(MakeCluster("b", 1, 1000, kGi, "eu", "FR", 200));
  fed.AddCluster(MakeCluster("c", 1, 1000, kGi, "eu", "FR", 300));
  fed.AddLink(Link{.from = "a", .to = "b", .latency_ns = 1000});
  CHECK(PathLatencyNs(fed, {"a", "a-n0"}, {"a", "a-n0"}) == 0);
  CHECK(PathLatencyNs(fed, {"a", "a-n0"}, {"a", "a-n1"}) == 100);
  CHECK(PathLatencyNs(fed, {"a", "a-n0"}, {"b", "b-n0"}) == 1300);
  CHECK_FALSE(PathLatencyNs(fed, {"b", "b-n0"}, {"a", "a-n0"}).has_value());
  CHECK_FALSE(PathLatencyNs(fed, {"a", "a-n0"}, {"c", "c-n0"}).has_value());
}

TEST_CASE("framework rejects unknown plugins and bad arguments with field paths") {
  PluginRegistry reg = NewDefaultRegistry();
  Profile p = ProfileWith({{.name = "NoSuchPlugin"},
                           {.name = "FreeCapacity", .args = {{"alpha", 2}}},
                           {.name = "WorstFit", .args = {{"bogus", 1}}}});
  auto fw = Framework::Create(p, reg, nullptr);
  REQUIRE(fw.status().code() == absl::StatusCode::kInvalidArgument);
  std::string msg(fw.status().message());
  CHECK(msg.find("plugins[2].name: unknown plugin") != std::string::npos);
  CHECK(msg.find("plugins[3].args: alpha must be in [0, 1]") != std::string::npos);
  CHECK(msg.find("plugins[4].args: unknown argument \"bogus\"") != std::string::npos);
  for (const char* name : {"codeco", "mck8s-worst-fit", "mck8s-best-fit", "mck8s-traffic-aware",
                           "mck8s-cluster-affinity", "lcm-two-tier"}) {
    auto profile = BuiltinProfile(name);
    REQUIRE(profile.ok());
    CHECK(Framework::Create(*profile, reg, nullptr).ok());
  }
  CHECK(BuiltinProfile("nope").status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("NodeResourcesFit says why nothing fits") {
  Federation fed;
  Cluster c = MakeCluster("a", 3, 1000, 2 * kGi);
  c.nodes[2].capacity.memory_bytes = kGi / 2;
  c.nodes[2].capacity.cpu_millis = 4000;
  fed.AddCluster(c);
  NodeRun run(fed, OneWorkloadApp(MakeWorkload("w", 2000)), ProfileWith({}));
  Selection sel = run.Run("a", "w");
  CHECK(sel.best == -1);
  CHECK(sel.reason == "2 nodes: insufficient cpu; 1 node: insufficient memory");
}

TEST_CASE("WorstFit spreads BestFit packs") {
  Federation fed;
  Cluster c = MakeCluster("a", 2, 4000, 8 * kGi);
  c.nodes[0].allocated = {3000, 6 * kGi, 0};
  fed.AddCluster(c);
  NodeRun worst(fed, OneWorkloadApp(MakeWorkload("w", 500)), ProfileWith({{.name = "WorstFit"}}));
  CHECK(worst.Run("a", "w").best == 1);
  NodeRun best(fed, OneWorkloadApp(MakeWorkload("w", 500)), ProfileWith({{.name = "BestFit"}}));
  CHECK(best.Run("a", "w").best == 0);
}

TEST_CASE("FreeCapacity weighs CPU against memory with alpha") {
  Federation fed;
  Cluster c = MakeCluster("a", 2, 4000, 8 * kGi);
  c.nodes[0].allocated = {3000, 0, 0};     // memory-rich
  c.nodes[1].allocated = {0, 6 * kGi, 0};  // CPU-rich
  fed.AddCluster(c);
  auto app = OneWorkloadApp(MakeWorkload("w", 100));
  NodeRun cpu(fed, app, ProfileWith({{.name = "FreeCapacity", .args = {{"alpha", 0.0}}}}));
  CHECK(cpu.Run("a", "w").best == 1);
  NodeRun mem(fed, app, ProfileWith({{.name = "FreeCapacity", .args = {{"alpha", 1.0}}}}));
  CHECK(mem.Run("a", "w").best == 0);
  NodeRun half(fed, app, ProfileWith({{.name = "FreeCapacity"}}));
  Selection sel = half.Run("a", "w");
  // (1-a)*cpu_free + a*mem_free: node0 = .5*25 + .5*100, node1 = .5*100 + .5*25.
  CHECK(sel.scores[0] == Approx(62.5));
  CHECK(sel.scores[1] == Approx(62.5));
}

TEST_CASE("FreeCapacity spreads services and packs jobs unless pack_jobs is 0") {
  Federation fed;
  Cluster c = MakeCluster("a", 3, 2000, 4 * kGi);
  c.nodes[0].allocated = {1500, 2 * kGi, 0};  // half a CPU left
  c.nodes[1].allocated = {500, kGi, 0};
  fed.AddCluster(c);
  Workload service = MakeWorkload("w", 500);
  Workload job = service;
  job.run_to_completion = true;
  Profile spread_all = ProfileWith({{.name = "FreeCapacity", .args = {{"pack_jobs", 0}}}});
  Profile default_args = ProfileWith({{.name = "FreeCapacity"}});
  // A service goes to the empty node; so does a job when packing is off.
  CHECK(NodeRun(fed, OneWorkloadApp(service), default_args).Run("a", "w").best == 2);
  CHECK(NodeRun(fed, OneWorkloadApp(job), spread_all).Run("a", "w").best == 2);
  // A job fills the node it leaves fullest, and the empty node stays whole.
  Selection packed = NodeRun(fed, OneWorkloadApp(job), default_args).Run("a", "w");
  CHECK(packed.best == 0);
  CHECK(packed.scores[2] < packed.scores[1]);
  PluginRegistry reg = NewDefaultRegistry();
  auto bad = Framework::Create(ProfileWith({{.name = "FreeCapacity", .args = {{"pack_jobs", 2}}}}),
                               reg, nullptr);
  REQUIRE(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(bad.status().message()).find("pack_jobs must be 0 or 1") != std::string::npos);
}

TEST_CASE("SafetyThreshold keeps nearly-full nodes out unless relaxed") {
  Federation fed;
  Cluster c = MakeCluster("a", 1, 1000, 8 * kGi);
  c.nodes[0].allocated = {850, 0, 0};
  fed.AddCluster(c);
  NodeRun run(
      fed, OneWorkloadApp(MakeWorkload("w", 100)),
      ProfileWith({{.name = "SafetyThreshold", .soft = true, .args = {{"threshold", 0.9}}}}));
  Selection strict = run.Run("a", "w");
  CHECK(strict.best == -1);
  CHECK(strict.reason.find("safety threshold of 90%") != std::string::npos);
  CHECK(run.Run("a", "w", {}, /*relax=*/true).best == 0);
}

TEST_CASE("AllowedLocations and OriginLatency are hard constraints") {
  Federation fed;
  fed.AddCluster(MakeCluster("paris", 1, 4000, 8 * kGi, "eu", "FR"));
  fed.AddCluster(MakeCluster("berlin", 1, 4000, 8 * kGi, "eu", "DE"));
  fed.AddCluster(MakeCluster("ny", 1, 4000, 8 * kGi, "us", "US"));
  Connect(fed, "paris", "berlin", 8 * kMs, 1'000'000'000);
  Connect(fed, "paris", "ny", 40 * kMs, 1'000'000'000);
  Workload w = MakeWorkload("w", 100);
  w.allowed_countries = {"FR", "DE", "US"};
  w.allowed_regions = {"eu"};
  w.origin_cluster = "paris";
  w.max_latency_to_origin_ns = 5 * kMs;
  NodeRun run(fed, OneWorkloadApp(w),
              ProfileWith({{.name = "AllowedLocations"}, {.name = "OriginLatency"}}));
  Selection sel = run.RunClusters("w");
  CHECK(sel.best == 0);
  CHECK(sel.scores[1] < 0);  // berlin: 8 ms + intra > 5 ms
  CHECK(sel.scores[2] < 0);  // ny: region us not allowed
}

TEST_CASE("data locality keeps a workload in the cluster or region of its data") {
  Federation fed;
  fed.AddCluster(MakeCluster("paris", 1, 4000, 8 * kGi, "eu", "FR"));
  fed.AddCluster(MakeCluster("berlin", 1, 4000, 8 * kGi, "eu", "DE"));
  fed.AddCluster(MakeCluster("ny", 1, 4000, 8 * kGi, "us", "US"));
  Workload w = MakeWorkload("w", 100);
  w.data_locality = "berlin";
  NodeRun by_cluster(fed, OneWorkloadApp(w), ProfileWith({{.name = "AllowedLocations"}}));
  Selection sel = by_cluster.RunClusters("w");
  CHECK(sel.scores[0] < 0);
  CHECK(sel.scores[1] >= 0);
  CHECK(sel.scores[2] < 0);
  w.data_locality = "eu";
  NodeRun by_region(fed, OneWorkloadApp(w), ProfileWith({{.name = "AllowedLocations"}}));
  sel = by_region.RunClusters("w");
  CHECK(sel.scores[0] >= 0);
  CHECK(sel.scores[1] >= 0);
  CHECK(sel.scores[2] < 0);
}

TEST_CASE("ChannelConstraints checks latency single hop and bandwidth against placed peers") {
  Federation fed;
  fed.AddCluster(MakeCluster("a", 2, 4000, 8 * kGi));
  fed.AddCluster(MakeCluster("b", 1, 4000, 8 * kGi));
  fed.AddCluster(MakeCluster("c", 1, 4000, 8 * kGi));
  Connect(fed, "a", "b", 2 * kMs, 100);
  Application app{.name = "app",
                  .workloads = {MakeWorkload("x", 100), MakeWorkload("y", 100)},
                  .channels = {{.name = "xy",
                                .from = "x",
                                .to = "y",
                                .min_bandwidth_bps = 150,
                                .max_delay_ns = 3 * kMs}}};
  NodeRun run(fed, app, ProfileWith({}));
  std::map<std::string, Placement> placed{{"x", {"a", "a-n0"}}};
  CHECK(run.Run("a", "y", placed).best >= 0);  // same cluster: fine
  Selection b = run.Run("b", "y", placed);     // 150 bps > 100 free
  CHECK(b.best == -1);
  CHECK(b.reason.find("link a -> b: needs 150bps, 100bps free") != std::string::npos);
  Selection c = run.Run("c", "y", placed);
  CHECK(c.reason.find("no direct link a -> c") != std::string::npos);
  run.app.channels[0].min_bandwidth_bps = 50;
  CHECK(run.Run("b", "y", placed).best == 0);
  run.app.channels[0].max_delay_ns = kMs;
  CHECK(run.Run("b", "y", placed).reason.find("latency 2200000ns > max 1000000ns") !=
        std::string::npos);
}

TEST_CASE("ClusterAffinity substitutes nearest-first and bounds bursting") {
  Federation fed;
  for (const char* n : {"home", "near", "far"}) fed.AddCluster(MakeCluster(n, 1, 4000, 8 * kGi));
  Connect(fed, "home", "near", 1 * kMs, 1000);
  Connect(fed, "home", "far", 9 * kMs, 1000);
  Workload w = MakeWorkload("w", 100);
  w.preferred_clusters = {"home"};
  NodeRun sub(fed, OneWorkloadApp(w), ProfileWith({{.name = "ClusterAffinity"}}));
  Selection s = sub.RunClusters("w");
  CHECK(s.best == 0);
  CHECK(s.scores[1] > s.scores[2]);  // near ranks above far
  // The preferred cluster is full: bursting goes to the nearest one.
  sub.fed.MutableCluster("home")->nodes[0].allocated = {4000, 0, 0};
  sub.fw = std::move(*Framework::Create(
      ProfileWith({{.name = "ClusterAffinity", .args = {{"burst_radius_ns", 5 * kMs}}}}),
      sub.registry, nullptr));
  s = sub.RunClusters("w");
  CHECK(s.best == 1);
  CHECK(s.scores[2] < 0);  // beyond the burst radius
  NodeRun strict(fed, OneWorkloadApp(w),
                 ProfileWith({{.name = "ClusterAffinity", .args = {{"substitute", 0}}}}));
  s = strict.RunClusters("w");
  CHECK(s.best == 0);
  CHECK(s.scores[1] < 0);
}

TEST_CASE("NumberOfLocations caps the clusters a service spans") {
  Federation fed;
  for (const char* n : {"a", "b", "c"}) fed.AddCluster(MakeCluster(n, 1, 4000, 8 * kGi));
  Application app{
      .name = "app",
      .workloads = {MakeWorkload("r0", 100), MakeWorkload("r1", 100), MakeWorkload("r2", 100)}};
  for (auto& w : app.workloads) w.service = "web";
  NodeRun run(fed, app, ProfileWith({{.name = "NumberOfLocations", .args = {{"max", 2}}}}));
  std::map<std::string, Placement> placed{{"r0", {"a", "a-n0"}}, {"r1", {"b", "b-n0"}}};
  Selection s = run.RunClusters("r2", placed);
  CHECK(s.scores[0] >= 0);
  CHECK(s.scores[1] >= 0);
  CHECK(s.scores[2] < 0);
}

TEST_CASE("TrafficAware BatchColocation and ChannelLatency pull peers together") {
  Federation fed;
  for (const char* n : {"a", "b"}) fed.AddCluster(MakeCluster(n, 2, 4000, 8 * kGi));
  Connect(fed, "a", "b", kMs, 1'000'000);
  Application app{
      .name = "app",
      .workloads = {MakeWorkload("x", 100), MakeWorkload("y", 100), MakeWorkload("z", 100)},
      .channels = {{.name = "xz", .from = "x", .to = "z", .min_bandwidth_bps = 10},
                   {.name = "yz", .from = "y", .to = "z", .min_bandwidth_bps = 1000}}};
  std::map<std::string, Placement> placed{{"x", {"a", "a-n0"}}, {"y", {"b", "b-n1"}}};
  NodeRun traffic(fed, app, ProfileWith({{.name = "TrafficAware"}}));
  CHECK(traffic.RunClusters("z", placed).best == 1);
  NodeRun batch(fed, app, ProfileWith({{.name = "BatchColocation"}}));
  placed["w"] = {"a", "a-n1"};
  batch.app.workloads.push_back(MakeWorkload("w", 100));
  CHECK(batch.RunClusters("z", placed).best == 0);
  NodeRun latency(fed, app, ProfileWith({{.name = "ChannelLatency"}}));
  placed.erase("w");
  Selection s = latency.Run("b", "z", placed);
  CHECK(s.best == 1);  // same node as y: 0 to y
}

TEST_CASE("Recommendation scores come from the PDLC port - none is valid") {
  Federation fed;
  fed.AddCluster(MakeCluster("a", 2, 4000, 8 * kGi));
  fed.AddCluster(MakeCluster("b", 2, 4000, 8 * kGi));
  InMemoryRecommendationSource recs;
  Application app = OneWorkloadApp(MakeWorkload("w", 100));
  app.performance_profile = "latency";
  NodeRun run(fed, app, ProfileWith({{.name = "Recommendation"}}), &recs);
  Selection none = run.RunClusters("w");
  CHECK(none.best == 0);
  CHECK(none.scores[0] == 0);
  CHECK(none.scores[1] == 0);
  recs.Set("app", "latency",
           Recommendations{.cluster_scores = {{"b", 80}}, .node_scores = {{{"a", "a-n1"}, 90}}});
  NodeRun run2(fed, app, ProfileWith({{.name = "Recommendation"}}), &recs);
  CHECK(run2.RunClusters("w").best == 1);
  CHECK(run2.Run("a", "w").best == 1);
}

TEST_CASE("KpiOrder and ChannelOrder sort the queue") {
  PluginRegistry reg = NewDefaultRegistry();
  Application app{.name = "app",
                  .workloads = {MakeWorkload("a", 1), MakeWorkload("b", 1), MakeWorkload("c", 1),
                                MakeWorkload("d", 1)}};
  app.workloads[2].availability_kpi = 99;
  app.workloads[1].availability_kpi = 50;
  auto kpi = Framework::Create(ProfileWith({{.name = "KpiOrder"}}), reg, nullptr);
  REQUIRE(kpi.ok());
  CHECK((*kpi)->QueueOrder(app) == std::vector<int>{2, 1, 0, 3});
  app.channels = {{.name = "ad", .from = "a", .to = "d"}};
  auto ch = Framework::Create(ProfileWith({{.name = "ChannelOrder"}}), reg, nullptr);
  REQUIRE(ch.ok());
  CHECK((*ch)->QueueOrder(app) == std::vector<int>{2, 1, 0, 3});
  app.channels = {{.name = "cd", .from = "c", .to = "d"}};
  CHECK((*ch)->QueueOrder(app) == std::vector<int>{2, 3, 1, 0});
  auto two = Framework::Create(ProfileWith({{.name = "KpiOrder"}, {.name = "ChannelOrder"}}), reg,
                               nullptr);
  CHECK(two.status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Reserve claims node capacity and bandwidth - Unreserve is idempotent - Permit vetoes") {
  Federation fed;
  fed.AddCluster(MakeCluster("a", 2, 4000, 8 * kGi));
  fed.AddCluster(MakeCluster("b", 1, 4000, 8 * kGi));
  Connect(fed, "a", "b", kMs, 1000);
  Application app{
      .name = "app",
      .workloads = {MakeWorkload("x", 100), MakeWorkload("y", 1000), MakeWorkload("y2", 100)},
      .channels = {{.name = "xy", .from = "y", .to = "x", .min_bandwidth_bps = 600}}};
  app.workloads[1].service = "svc";
  app.workloads[2].service = "svc";
  app.workloads[2].availability_kpi = 99;
  PluginRegistry reg = NewDefaultRegistry();
  auto fw = Framework::Create(ProfileWith({{.name = "HighAvailabilitySpread"}}), reg, nullptr);
  REQUIRE(fw.ok());
  Cluster* a = fed.MutableCluster("a");
  CycleState state(app, fed, a, false);
  state.Bind("x", {"b", "b-n0"});
  ClusterAggregate agg = AggregateOf(*a);
  Candidate n0{Level::kNode, &agg, &a->nodes[0], 0};
  REQUIRE((*fw)->ReserveAndPermit(state, app.workloads[1], n0).ok());
  CHECK(a->nodes[0].allocated.cpu_millis == 1000);
  CHECK(state.UsedBandwidth("a", "b", ServiceClass::kBestEffort) == 600);
  CHECK(state.FreeBandwidth("a", "b", ServiceClass::kBestEffort) == 400);
  // Reserving again is a no-op.
  REQUIRE((*fw)->ReserveAndPermit(state, app.workloads[1], n0).ok());
  CHECK(a->nodes[0].allocated.cpu_millis == 1000);
  (*fw)->Unreserve(state, app.workloads[1], n0);
  (*fw)->Unreserve(state, app.workloads[1], n0);
  CHECK(a->nodes[0].allocated.cpu_millis == 0);
  CHECK(state.UsedBandwidth("a", "b", ServiceClass::kBestEffort) == 0);
  // Permit: a 99 % replica must not share a node with its sibling.
  REQUIRE((*fw)->ReserveAndPermit(state, app.workloads[1], n0).ok());
  state.Bind("y", {"a", "a-n0"});
  PluginStatus st = (*fw)->ReserveAndPermit(state, app.workloads[2], n0);
  CHECK(st.unschedulable());
  CHECK(st.reason() == "another replica of svc is on node a-n0");
  CHECK(a->nodes[0].allocated.cpu_millis == 1000);  // y2's claim was given back
  Candidate n1{Level::kNode, &agg, &a->nodes[1], 1};
  CHECK((*fw)->ReserveAndPermit(state, app.workloads[2], n1).ok());
}

}  // namespace
}  // namespace codeco::swm
