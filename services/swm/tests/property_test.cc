#include <catch2/catch.hpp>

#include "codeco/common/clock.h"
#include "swm/core/execution.h"
#include "swm/core/solve.h"
#include "swm/testing/instances.h"

namespace codeco::swm {
namespace {

// Every committed plan meets every channel's latency and bandwidth and every
// node's capacity, over thousands of seeded random instances and profiles.
TEST_CASE("every committed plan is feasible on random instances") {
  PluginRegistry registry = NewDefaultRegistry();
  InProcessL2Solver l2(registry, nullptr);
  Coordinator coord(l2, registry, nullptr);
  const char* profiles[] = {"codeco",
                            "mck8s-worst-fit",
                            "mck8s-best-fit",
                            "mck8s-traffic-aware",
                            "mck8s-cluster-affinity",
                            "lcm-two-tier"};
  int placed = 0, unplaced = 0, channels_checked = 0;
  for (uint64_t seed = 1; seed <= 2000; ++seed) {
    testing::InstanceOptions opts;
    opts.clusters = 2 + static_cast<int>(seed % 6);
    opts.workloads = 3 + static_cast<int>(seed % 10);
    opts.channels = static_cast<int>(seed % 12);
    opts.profile = profiles[seed % 6];
    testing::Instance inst = testing::RandomInstance(seed, opts);
    if (seed % 5 == 0) {
      inst.app.workloads[0].preferred_clusters = {"c0"};
      inst.app.workloads[0].origin_cluster = "c1";
      inst.app.workloads[0].max_latency_to_origin_ns = 4'000'000;
    }
    INFO("seed " << seed);
    auto result = coord.Place(inst.app, inst.federation, {});
    REQUIRE(result.ok());
    REQUIRE(result->placements.size() + result->unplaced.size() == inst.app.workloads.size());
    REQUIRE(VerifyPlacement(inst.app, inst.federation, *result).ok());
    for (const ChannelResult& ch : result->channels) {
      REQUIRE(ch.satisfied);
      ++channels_checked;
    }
    for (const auto& [w, why] : result->unplaced) REQUIRE_FALSE(why.empty());
    placed += static_cast<int>(result->placements.size());
    unplaced += static_cast<int>(result->unplaced.size());

    // Commit it for real against per-cluster runtimes holding the same state.
    SimulatedClock clock;
    std::map<std::string, std::unique_ptr<InMemoryPodRuntime>> runtimes;
    std::map<std::string, std::unique_ptr<LocalClusterExecutor>> executors;
    std::map<std::string, ClusterExecutor*> by_name;
    for (const Cluster& c : inst.federation.clusters()) {
      auto rt = std::make_unique<InMemoryPodRuntime>(c.nodes);
      for (const Node& n : c.nodes) {  // pre-existing load as one pod per node
        REQUIRE(rt->CreatePod(PodInfo{"existing-" + n.name, n.name, n.allocated}).ok());
      }
      executors[c.name] = std::make_unique<LocalClusterExecutor>(clock, *rt);
      by_name[c.name] = executors[c.name].get();
      runtimes[c.name] = std::move(rt);
    }
    AssignmentPlan plan = BuildPlan(inst.app, *result, 1);
    PlanExecutor exec(by_name, absl::Seconds(30));
    REQUIRE(exec.Execute(plan).ok());
    REQUIRE(plan.phase == PlanPhase::kDone);
    for (auto& [name, rt] : runtimes) {
      absl::StatusOr<std::vector<Node>> nodes = rt->ListNodes();
      REQUIRE(nodes.ok());
      std::vector<Node> list = *std::move(nodes);
      for (const Node& n : list) REQUIRE(n.capacity.Fits(n.allocated));
    }
    ApplyPlacement(inst.app, *result, inst.federation);
    for (const Link& l : inst.federation.links()) {
      REQUIRE(l.free_bandwidth_bps[0] >= 0);
      REQUIRE(l.free_bandwidth_bps[1] >= 0);
    }
  }
  CHECK(placed > 0);
  CHECK(unplaced > 0);  // the generator makes some instances infeasible
  CHECK(channels_checked > 1000);
}

}  // namespace
}  // namespace codeco::swm
