#include "swm/core/solve.h"

#include <catch2/catch.hpp>

#include "swm/tests/fixtures.h"

namespace codeco::swm {
namespace {

using test::Connect;
using test::kGi;
using test::kMs;
using test::MakeCluster;
using test::MakeWorkload;

// An L2 solver that records calls, can fail a cluster, or lie about nodes.
class ScriptedL2 final : public L2Solver {
 public:
  explicit ScriptedL2(L2Solver& real) : real_(real) {}
  absl::StatusOr<L2Result> Solve(const L2Request& req) override {
    visited.push_back(req.cluster.name);
    unvisited_seen.push_back(req.unvisited.size());
    if (req.cluster.name == down) return absl::UnavailableError("cluster away");
    absl::StatusOr<L2Result> r = real_.Solve(req);
    if (r.ok() && req.cluster.name == liar) {
      for (const std::string& w : req.pending) r->node_of[w] = req.cluster.nodes[0].name;
    }
    return r;
  }
  std::vector<std::string> visited;
  std::vector<size_t> unvisited_seen;
  std::string down;
  std::string liar;

 private:
  L2Solver& real_;
};

struct Env {
  PluginRegistry registry = NewDefaultRegistry();
  InMemoryRecommendationSource recs;
  InProcessL2Solver inproc{registry, &recs};
  ScriptedL2 l2{inproc};
  Coordinator coord{l2, registry, &recs};
};

Federation ThreeSites() {
  Federation fed;
  fed.AddCluster(MakeCluster("edge", 2, 2000, 4 * kGi));
  fed.AddCluster(MakeCluster("metro", 2, 4000, 8 * kGi));
  fed.AddCluster(MakeCluster("cloud", 4, 8000, 32 * kGi));
  Connect(fed, "edge", "metro", 2 * kMs, 1'000'000'000);
  Connect(fed, "metro", "cloud", 10 * kMs, 1'000'000'000);
  Connect(fed, "edge", "cloud", 15 * kMs, 100'000'000);
  return fed;
}

TEST_CASE("coordinator places an application with every channel inside its bound") {
  Env env;
  Federation fed = ThreeSites();
  Application app{.name = "shop",
                  .workloads = {MakeWorkload("front", 500), MakeWorkload("cart", 1000),
                                MakeWorkload("db", 2000, 4)},
                  .channels = {{.name = "fc",
                                .from = "front",
                                .to = "cart",
                                .min_bandwidth_bps = 1'000'000,
                                .max_delay_ns = 3 * kMs},
                               {.name = "cd",
                                .from = "cart",
                                .to = "db",
                                .min_bandwidth_bps = 1'000'000,
                                .max_delay_ns = 12 * kMs}}};
  app.workloads[0].origin_cluster = "edge";
  app.workloads[0].max_latency_to_origin_ns = kMs;
  auto r = env.coord.Place(app, fed, {});
  REQUIRE(r.ok());
  CHECK(r->unplaced.empty());
  CHECK(r->placements.at("front").cluster == "edge");
  CHECK(r->visit_order.front() == "edge");  // nearest to the origin first
  REQUIRE(r->channels.size() == 2);
  for (const ChannelResult& ch : r->channels) CHECK(ch.satisfied);
  CHECK(VerifyPlacement(app, fed, *r).ok());
}

TEST_CASE("coordinator reports a readable reason per unplaced workload") {
  Env env;
  Federation fed = ThreeSites();
  Application app{.name = "big",
                  .workloads = {MakeWorkload("huge", 100000), MakeWorkload("ok", 100)}};
  auto r = env.coord.Place(app, fed, {});
  REQUIRE(r.ok());
  CHECK(r->placements.count("ok") == 1);
  REQUIRE(r->unplaced.count("huge") == 1);
  CHECK(r->unplaced.at("huge").find("insufficient cpu") != std::string::npos);
}

TEST_CASE("an unplaced workload's reason names the near miss first and groups the same reason") {
  Env env;
  Federation fed;
  fed.AddCluster(MakeCluster("edge", 2, 2000, 4 * kGi));
  fed.AddCluster(MakeCluster("metro-a", 2, 4000, 8 * kGi));
  fed.AddCluster(MakeCluster("metro-b", 2, 4000, 8 * kGi));
  Connect(fed, "edge", "metro-a", 2 * kMs, 1'000'000'000);
  Connect(fed, "edge", "metro-b", 2 * kMs, 1'000'000'000);
  Connect(fed, "metro-a", "metro-b", 2 * kMs, 1'000'000'000);
  Workload sensor = MakeWorkload("sensor", 3000);
  sensor.data_locality = "edge";
  Application app{.name = "pinned", .workloads = {sensor}};
  auto r = env.coord.Place(app, fed, {});
  REQUIRE(r.ok());
  REQUIRE(r->unplaced.count("sensor") == 1);
  const std::string& why = r->unplaced.at("sensor");
  INFO(why);
  // Edge, where its data lives, is the one that matters: first, on its own.
  CHECK_THAT(why, Catch::StartsWith("no cluster fits: edge: 2 nodes: insufficient cpu"));
  CHECK_THAT(why, Catch::Contains("metro-a, metro-b: 2 nodes: its data lives in \"edge\""));
  // Every attempt visits every cluster; each is named once all the same.
  CHECK(why.find("metro-a", why.find("metro-a") + 1) == std::string::npos);
  CHECK(why.find("more") == std::string::npos);
}

TEST_CASE("coordinator rejects bad input with field paths and writes nothing") {
  Env env;
  Federation fed = ThreeSites();
  Application app{.name = "x", .workloads = {MakeWorkload("a", 1)}};
  auto r = env.coord.Place(app, fed, {"edge", "mars"});
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(r.status().message()).find("neighborhood[1]: unknown cluster") !=
        std::string::npos);
  app.profile = "nope";
  r = env.coord.Place(app, fed, {});
  CHECK(std::string(r.status().message()).find("profile: unknown profile") != std::string::npos);
  app.profile = "";
  app.workloads[0].requests.cpu_millis = -5;
  CHECK(env.coord.Place(app, fed, {}).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(env.l2.visited.empty());
}

TEST_CASE("clusters with recommendations are visited first") {
  Env env;
  Federation fed = ThreeSites();
  Application app{
      .name = "rec", .workloads = {MakeWorkload("a", 100)}, .performance_profile = "latency"};
  env.recs.Set("rec", "latency", Recommendations{.cluster_scores = {{"cloud", 10}, {"metro", 90}}});
  auto r = env.coord.Place(app, fed, {});
  REQUIRE(r.ok());
  CHECK(r->visit_order == std::vector<std::string>{"metro", "cloud", "edge"});
  CHECK(r->placements.at("a").cluster == "metro");
}

TEST_CASE("the neighborhood auction's winner is visited before every recommendation") {
  Env env;
  Federation fed = ThreeSites();
  Application app{
      .name = "won", .workloads = {MakeWorkload("a", 100)}, .performance_profile = "greenness"};
  env.recs.Set("won", "greenness",
               Recommendations{.cluster_scores = {{"cloud", 10}, {"metro", 90}},
                               .advised_cluster = "cloud"});
  auto r = env.coord.Place(app, fed, {});
  REQUIRE(r.ok());
  CHECK(r->visit_order == std::vector<std::string>{"cloud", "metro", "edge"});
  // A winner outside the neighborhood changes nothing.
  env.recs.Set("won", "greenness",
               Recommendations{.cluster_scores = {{"cloud", 10}, {"metro", 90}},
                               .advised_cluster = "mars"});
  r = env.coord.Place(app, fed, {});
  REQUIRE(r.ok());
  CHECK(r->visit_order.front() == "metro");
}

TEST_CASE("L2 solves see only the lookahead of unvisited clusters as aggregates") {
  Env env;
  Federation fed;
  for (int i = 0; i < 20; ++i) fed.AddCluster(MakeCluster("c" + std::to_string(i), 1, 100, kGi));
  Application app{.name = "a", .workloads = {MakeWorkload("w", 1000)}};
  auto r = env.coord.Place(app, fed, {});
  REQUIRE(r.ok());
  CHECK(r->unplaced.size() == 1);
  // Each of the 3 attempts: 20 visits, then 20 reconsideration visits.
  REQUIRE(env.l2.unvisited_seen.size() == 120);
  CHECK(env.l2.unvisited_seen[0] == 8);
  CHECK(env.l2.unvisited_seen[19] == 0);
  CHECK(env.l2.unvisited_seen[20] == 0);
}

TEST_CASE("an unavailable cluster is skipped - a lying L2 answer is rejected at merge") {
  Env env;
  Federation fed = ThreeSites();
  Application app{.name = "a", .workloads = {MakeWorkload("w", 500)}};
  app.workloads[0].preferred_clusters = {"edge"};
  env.l2.down = "edge";
  auto r = env.coord.Place(app, fed, {});
  REQUIRE(r.ok());
  CHECK(r->placements.at("w").cluster != "edge");

  Env env2;
  env2.l2.liar = "edge";
  Federation full = ThreeSites();
  for (Node& n : full.MutableCluster("edge")->nodes) n.allocated = n.capacity;
  Application two{.name = "b", .workloads = {MakeWorkload("w", 500)}};
  two.workloads[0].origin_cluster = "edge";
  r = env2.coord.Place(two, full, {});
  REQUIRE(r.ok());
  CHECK(r->placements.at("w").cluster != "edge");
  CHECK(VerifyPlacement(two, full, *r).ok());
}

TEST_CASE("reconsideration relaxes soft constraints only") {
  Env env;
  Federation fed;
  Cluster c = MakeCluster("only", 1, 1000, 8 * kGi);
  c.nodes[0].allocated = {850, 0, 0};  // above the 90 % safety threshold once placed
  fed.AddCluster(c);
  Application app{.name = "a", .workloads = {MakeWorkload("w", 100)}};
  auto r = env.coord.Place(app, fed, {});
  REQUIRE(r.ok());
  CHECK(r->placements.count("w") == 1);  // soft threshold relaxed
  Application hard{.name = "b", .workloads = {MakeWorkload("w", 100)}};
  hard.workloads[0].allowed_countries = {"DE"};  // hard: never relaxed
  r = env.coord.Place(hard, fed, {});
  REQUIRE(r.ok());
  CHECK(r->unplaced.at("w").find("country \"FR\" not allowed") != std::string::npos);
}

TEST_CASE("ApplyPlacement consumes node capacity and link bandwidth") {
  Env env;
  Federation fed;
  fed.AddCluster(MakeCluster("a", 1, 1000, 8 * kGi));
  fed.AddCluster(MakeCluster("b", 1, 1000, 8 * kGi));
  Connect(fed, "a", "b", kMs, 1000);
  Application app{.name = "x",
                  .workloads = {MakeWorkload("p", 800), MakeWorkload("q", 800)},
                  .channels = {{.name = "pq", .from = "p", .to = "q", .min_bandwidth_bps = 700}}};
  auto r = env.coord.Place(app, fed, {});
  REQUIRE(r.ok());
  REQUIRE(r->unplaced.empty());
  ApplyPlacement(app, *r, fed);
  CHECK(fed.FindCluster("a")->nodes[0].allocated.cpu_millis == 800);
  CHECK(fed.FindCluster("b")->nodes[0].allocated.cpu_millis == 800);
  const std::string& from = r->placements.at("p").cluster;
  const std::string& to = r->placements.at("q").cluster;
  CHECK(fed.FindLink(from, to)->free_bandwidth_bps[0] == 300);
  // A second copy cannot fit any more: its channel would exceed the link.
  Application again = app;
  again.name = "y";
  auto r2 = env.coord.Place(again, fed, {});
  REQUIRE(r2.ok());
  CHECK(r2->placements.size() + r2->unplaced.size() == 2);
  CHECK(VerifyPlacement(again, fed, *r2).ok());
}

}  // namespace
}  // namespace codeco::swm
