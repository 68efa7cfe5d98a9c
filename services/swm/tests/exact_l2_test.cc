// CBC as the L2 strategy of small clusters: on a tight cluster the exact L2
// places a batch the heuristic's greedy order cannot (bin packing, and a
// channel whose bound keeps two workloads on one node), the Coordinator with
// it produces a plan that passes VerifyPlacement, and large clusters or
// batches go to the heuristic.
#include "swm/milp/exact_l2.h"

#include <catch2/catch.hpp>

#include "fixtures.h"
#include "swm/core/solve.h"

namespace codeco::swm {
namespace {

using test::kGi;
using test::MakeCluster;
using test::MakeWorkload;

L2Request RequestFor(const Application& app, const Cluster& cluster) {
  L2Request req{.app = &app, .cluster = cluster, .allow_defer = false};
  for (const Workload& w : app.workloads) req.pending.push_back(w.name);
  return req;
}

// Two 1-CPU nodes and four workloads that fit only as {600, 400} + {500, 500}.
Application Packing() {
  return Application{.name = "pack",
                     .workloads = {MakeWorkload("a", 600), MakeWorkload("b", 500),
                                   MakeWorkload("c", 500), MakeWorkload("d", 400)}};
}

TEST_CASE("the exact L2 packs a batch the greedy L2 cannot") {
  PluginRegistry registry = NewDefaultRegistry();
  Application app = Packing();
  Cluster cluster = MakeCluster("x", 2, 1000, 8 * kGi);

  InProcessL2Solver greedy(registry, nullptr);
  auto g = greedy.Solve(RequestFor(app, cluster));
  REQUIRE(g.ok());
  INFO("greedy placed " << g->node_of.size());
  CHECK(g->node_of.size() < 4);  // the premise: greedy leaves one out

  milp::ExactL2Solver exact(registry, nullptr);
  auto e = exact.Solve(RequestFor(app, cluster));
  REQUIRE(e.ok());
  CHECK(exact.exact_solves() == 1);
  REQUIRE(e->node_of.size() == 4);
  CHECK(e->unfit.empty());
  std::map<std::string, int64_t> used;
  for (const auto& [w, node] : e->node_of) {
    used[node] += app.workloads[app.WorkloadIndex(w)].requests.cpu_millis;
  }
  for (const auto& [node, cpu] : used) CHECK(cpu <= 1000);

  // Through the coordinator: everything placed, and the plan checks out.
  Federation fed;
  fed.AddCluster(cluster);
  Coordinator with_exact(exact, registry, nullptr);
  auto placed = with_exact.Place(app, fed, {});
  REQUIRE(placed.ok());
  CHECK(placed->unplaced.empty());
  CHECK(VerifyPlacement(app, fed, *placed).ok());
  Coordinator with_greedy(greedy, registry, nullptr,
                          CoordinatorOptions{.max_attempts = 1, .polish_rounds = 0});
  auto greedy_placed = with_greedy.Place(app, fed, {});
  REQUIRE(greedy_placed.ok());
  CHECK(!greedy_placed->unplaced.empty());
}

TEST_CASE("the exact L2 keeps a tightly bound channel on one node") {
  PluginRegistry registry = NewDefaultRegistry();
  // a and b must share a node (50 us < the cluster's 100 us); c is large.
  Application app{
      .name = "tight",
      .workloads = {MakeWorkload("c", 700), MakeWorkload("a", 500), MakeWorkload("b", 500)},
      .channels = {Channel{.name = "ab", .from = "a", .to = "b", .max_delay_ns = 50'000}}};
  Cluster cluster = MakeCluster("x", 2, 1000, 8 * kGi);
  InProcessL2Solver greedy(registry, nullptr);
  auto g = greedy.Solve(RequestFor(app, cluster));
  REQUIRE(g.ok());
  INFO("greedy placed " << g->node_of.size());
  CHECK(g->node_of.size() < 3);

  milp::ExactL2Solver exact(registry, nullptr);
  auto e = exact.Solve(RequestFor(app, cluster));
  REQUIRE(e.ok());
  REQUIRE(e->node_of.size() == 3);
  CHECK(e->node_of.at("a") == e->node_of.at("b"));
  CHECK(e->node_of.at("c") != e->node_of.at("a"));
}

TEST_CASE("large clusters and batches go to the heuristic") {
  PluginRegistry registry = NewDefaultRegistry();
  Application app = Packing();
  milp::ExactL2Solver exact(registry, nullptr, milp::ExactL2Options{.max_nodes = 1});
  auto e = exact.Solve(RequestFor(app, MakeCluster("x", 2, 1000, 8 * kGi)));
  REQUIRE(e.ok());
  CHECK(exact.exact_solves() == 0);
  milp::ExactL2Solver small_batches(registry, nullptr, milp::ExactL2Options{.max_workloads = 3});
  REQUIRE(small_batches.Solve(RequestFor(app, MakeCluster("x", 2, 1000, 8 * kGi))).ok());
  CHECK(small_batches.exact_solves() == 0);
  milp::ExactL2Solver off(registry, nullptr, milp::ExactL2Options{.max_nodes = 0});
  REQUIRE(off.Solve(RequestFor(app, MakeCluster("x", 2, 1000, 8 * kGi))).ok());
  CHECK(off.exact_solves() == 0);
}

}  // namespace
}  // namespace codeco::swm
