#include "swm/milp/milp.h"

#include <catch2/catch.hpp>

#include "swm/testing/instances.h"
#include "swm/tests/fixtures.h"

namespace codeco::swm {
namespace {

using test::Connect;
using test::kGi;
using test::kMs;
using test::MakeCluster;
using test::MakeWorkload;

struct Heuristic {
  PluginRegistry registry = NewDefaultRegistry();
  InProcessL2Solver l2{registry, nullptr};
  Coordinator coord{l2, registry, nullptr};
};

// A sanitizer build checks memory, not placement quality, and CBC runs ten
// times slower under AddressSanitizer: there every fifth seed is solved,
// and only the invariant (never better than the optimum) is checked.
#ifdef CODECO_SANITIZER
constexpr uint64_t kSeedStride = 5;
#else
constexpr uint64_t kSeedStride = 1;
#endif

// Solves the random instances of seeds [first, last] (every kSeedStride-th)
// with CBC and with the heuristic, requires the heuristic never better than
// the optimum and returns on how many it found the optimum.
int CompareWithOptimum(uint64_t first, uint64_t last) {
  Heuristic h;
  int equal = 0;
  for (uint64_t seed = first; seed <= last; seed += kSeedStride) {
    testing::InstanceOptions opts;
    opts.clusters = 3;
    opts.min_nodes = 1;
    opts.max_nodes = 3;
    opts.workloads = 4 + static_cast<int>(seed % 3);
    opts.channels = 2 + static_cast<int>(seed % 4);
    testing::Instance inst = testing::RandomInstance(seed, opts);
    INFO("seed " << seed);
    auto exact = milp::SolveExact(inst.app, inst.federation);
    REQUIRE(exact.ok());
    REQUIRE(exact->optimal);
    PlacementResult as_result{.placements = exact->placements};
    REQUIRE(VerifyPlacement(inst.app, inst.federation, as_result).ok());
    auto heur = h.coord.Place(inst.app, inst.federation, {});
    REQUIRE(heur.ok());
    double hv = milp::PlacementObjective(inst.app, inst.federation, heur->placements);
    REQUIRE(hv <= exact->objective + 1e-6);
    if (hv >= exact->objective - 1e-6) ++equal;
  }
  return equal;
}

// Requires that the heuristic found the optimum on at least a fifth of the
// 50 seeds from `first` (checked on the full range only).
void ExpectOftenOptimal(uint64_t first) {
  const int optimal = CompareWithOptimum(first, first + 49);
  if (kSeedStride == 1) CHECK(optimal >= 50 / 5);
}

// 150 seeded instances in three test cases of 50, so that each stays well
// inside the test timeout. Measured: optimal on 12, 20 and 23 of the 50 of
// each range (55 of 150; seeded, deterministic). Fewer than a fifth of a
// range means the heuristic regressed.
TEST_CASE("the heuristic is never better than the CBC optimum on seeds 1 to 50") {
  ExpectOftenOptimal(1);
}

TEST_CASE("the heuristic is never better than the CBC optimum on seeds 51 to 100") {
  ExpectOftenOptimal(51);
}

TEST_CASE("the heuristic is never better than the CBC optimum on seeds 101 to 150") {
  ExpectOftenOptimal(101);
}

TEST_CASE("heuristic and CBC agree on trivial instances") {
  Heuristic h;
  Federation fed;
  fed.AddCluster(MakeCluster("a", 2, 4000, 8 * kGi));
  fed.AddCluster(MakeCluster("b", 2, 4000, 8 * kGi));
  Connect(fed, "a", "b", 3 * kMs, 1'000'000'000);
  // Two peers that fit together on one node: both put them side by side.
  Application app{.name = "t",
                  .workloads = {MakeWorkload("x", 1000), MakeWorkload("y", 1000)},
                  .channels = {{.name = "xy",
                                .from = "x",
                                .to = "y",
                                .min_bandwidth_bps = 1000,
                                .max_delay_ns = 10 * kMs}}};
  auto exact = milp::SolveExact(app, fed);
  REQUIRE(exact.ok());
  CHECK(exact->objective == Approx(2 * milp::kPlacedWeight));
  auto heur = h.coord.Place(app, fed, {});
  REQUIRE(heur.ok());
  CHECK(milp::PlacementObjective(app, fed, heur->placements) == Approx(exact->objective));
  // Nothing fits: both place nothing.
  Application none{.name = "n", .workloads = {MakeWorkload("z", 99999)}};
  exact = milp::SolveExact(none, fed);
  REQUIRE(exact.ok());
  CHECK(exact->placements.empty());
  heur = h.coord.Place(none, fed, {});
  REQUIRE(heur.ok());
  CHECK(heur->placements.empty());
}

TEST_CASE("the MILP respects channel bounds single hop and link bandwidth") {
  Federation fed;
  fed.AddCluster(MakeCluster("a", 1, 1000, 8 * kGi));
  fed.AddCluster(MakeCluster("b", 1, 1000, 8 * kGi));
  fed.AddCluster(MakeCluster("c", 1, 1000, 8 * kGi));
  Connect(fed, "a", "b", 2 * kMs, 100);
  Application app{
      .name = "t",
      .workloads = {MakeWorkload("x", 800), MakeWorkload("y", 800), MakeWorkload("z", 800)},
      .channels = {{.name = "xy", .from = "x", .to = "y", .min_bandwidth_bps = 60},
                   {.name = "yz", .from = "y", .to = "z", .min_bandwidth_bps = 60}}};
  // Each node holds one workload; c has no links, so y cannot talk to a peer
  // on c, and x, y, z cannot all be placed: the optimum places two.
  auto exact = milp::SolveExact(app, fed);
  REQUIRE(exact.ok());
  PlacementResult r{.placements = exact->placements};
  CHECK(VerifyPlacement(app, fed, r).ok());
  CHECK(exact->placements.size() == 2);
  CHECK(exact->optimal);
}

}  // namespace
}  // namespace codeco::swm
