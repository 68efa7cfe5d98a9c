#include "swm/core/solve.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <limits>
#include <map>
#include <set>

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
    pending_seen.insert(pending_seen.end(), req.pending.begin(), req.pending.end());
    for (const ClusterAggregate& a : req.others) others_seen.insert(a.name);
    if (req.cluster.name == down) return absl::UnavailableError("cluster away");
    absl::StatusOr<L2Result> r = real_.Solve(req);
    if (r.ok() && req.cluster.name == liar) {
      for (const std::string& w : req.pending) r->node_of[w] = req.cluster.nodes[0].name;
    }
    return r;
  }
  std::vector<std::string> visited;
  std::vector<size_t> unvisited_seen;
  std::vector<std::string> pending_seen;  // every request's pending workloads
  std::set<std::string> others_seen;      // every cluster sent as an aggregate
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

TEST_CASE("a workload placed before its data-pinned peer goes only where the peer can reach") {
  // The sensor's data is at the edge, which has no room for the fusion; the
  // cloud is recommended (visited first) but too far for their channel.
  // Without looking ahead, the fusion would take the cloud, the sensor would
  // then fail its channel, and the application would be refused.
  Env env;
  Federation fed;
  fed.AddCluster(MakeCluster("edge", 1, 1000, 2 * kGi));
  fed.AddCluster(MakeCluster("metro", 2, 8000, 16 * kGi));
  fed.AddCluster(MakeCluster("cloud", 4, 8000, 32 * kGi));
  Connect(fed, "edge", "metro", 5 * kMs, 1'000'000'000);
  Connect(fed, "edge", "cloud", 12 * kMs, 1'000'000'000);
  Connect(fed, "metro", "cloud", 3 * kMs, 1'000'000'000);
  Application app{.name = "fusion-app",
                  .workloads = {MakeWorkload("fusion", 3000), MakeWorkload("sensor", 250)},
                  .channels = {{.name = "readings",
                                .from = "sensor",
                                .to = "fusion",
                                .max_delay_ns = 8 * kMs}},
                  .performance_profile = "latency"};
  app.workloads[1].data_locality = "edge";
  env.recs.Set("fusion-app", "latency",
               Recommendations{.cluster_scores = {{"cloud", 90}, {"metro", 10}}});
  auto r = env.coord.Place(app, fed, {});
  REQUIRE(r.ok());
  INFO("unplaced: " << (r->unplaced.empty() ? "" : r->unplaced.begin()->second));
  CHECK(r->unplaced.empty());
  CHECK(r->placements.at("sensor").cluster == "edge");
  CHECK(r->placements.at("fusion").cluster == "metro");
  CHECK(VerifyPlacement(app, fed, *r).ok());

  // When no cluster with room is near enough, the reason says which bound.
  fed = Federation();
  fed.AddCluster(MakeCluster("edge", 1, 1000, 2 * kGi));
  fed.AddCluster(MakeCluster("cloud", 4, 8000, 32 * kGi));
  Connect(fed, "edge", "cloud", 12 * kMs, 1'000'000'000);
  r = env.coord.Place(app, fed, {});
  REQUIRE(r.ok());
  REQUIRE(r->unplaced.count("fusion") == 1);
  CHECK_THAT(r->unplaced.at("fusion"), Catch::Contains("channel readings"));
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

// ---- Pinned workloads (a migration places some, the others stay) ----

bool Seen(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

TEST_CASE("pinned workloads stay where they run and only the others are placed") {
  Env env;
  Federation fed;
  Cluster only = MakeCluster("only", 2, 1000, 8 * kGi);
  only.nodes[0].allocated = only.nodes[0].capacity;  // full: pinned "a" runs there
  only.nodes[1].allocated = {500, kGi, 0};           // pinned "b" runs there
  fed.AddCluster(only);
  Application app{.name = "m",
                  .workloads = {MakeWorkload("a", 1000), MakeWorkload("b", 500),
                                MakeWorkload("c", 500)}};
  const std::map<std::string, Placement> pinned{{"a", {"only", "only-n0"}},
                                                {"b", {"only", "only-n1"}}};
  auto r = env.coord.Place(app, fed, {}, pinned);
  REQUIRE(r.ok());
  INFO((r->unplaced.empty() ? "" : r->unplaced.begin()->second));
  // "c" fits next to "b" only if neither pinned one is counted a second time.
  CHECK(r->unplaced.empty());
  REQUIRE(r->placements.size() == 3);
  CHECK(r->placements.at("a").node == "only-n0");
  CHECK(r->placements.at("b").node == "only-n1");
  CHECK(r->placements.at("c").node == "only-n1");
  CHECK_FALSE(env.l2.pending_seen.empty());
  CHECK_FALSE(Seen(env.l2.pending_seen, "a"));
  CHECK_FALSE(Seen(env.l2.pending_seen, "b"));
}

TEST_CASE("when every workload is pinned the result just lists them") {
  Env env;
  Federation fed = ThreeSites();
  Application app{.name = "m",
                  .workloads = {MakeWorkload("a", 100), MakeWorkload("b", 100)},
                  .channels = {{.name = "ab", .from = "a", .to = "b", .min_bandwidth_bps = 10}}};
  const std::map<std::string, Placement> pinned{{"a", {"edge", "edge-n0"}},
                                                {"b", {"cloud", "cloud-n3"}}};
  auto r = env.coord.Place(app, fed, {"metro"}, pinned);
  REQUIRE(r.ok());
  REQUIRE(r->placements.size() == 2);
  for (const auto& [name, p] : pinned) {
    CHECK(r->placements.at(name).cluster == p.cluster);
    CHECK(r->placements.at(name).node == p.node);
  }
  CHECK(r->unplaced.empty());
  CHECK(r->l2_calls == 0);
  REQUIRE(r->channels.size() == 1);
  CHECK(r->channels[0].path == std::vector<std::string>{"edge", "cloud"});
  CHECK(r->channels[0].satisfied);
}

TEST_CASE("a channel to a pinned peer bounds where the placed end may go") {
  Env env;
  Federation fed = ThreeSites();
  Application app{.name = "m",
                  .workloads = {MakeWorkload("api", 100), MakeWorkload("db", 1000)},
                  .channels = {{.name = "q",
                                .from = "api",
                                .to = "db",
                                .min_bandwidth_bps = 1'000'000,
                                .max_delay_ns = kMs}}};
  app.workloads[0].preferred_clusters = {"edge"};  // soft: the bound wins
  const std::map<std::string, Placement> pinned{{"db", {"cloud", "cloud-n2"}}};

  SECTION("only the pinned peer's cluster is within the bound") {
    auto r = env.coord.Place(app, fed, {}, pinned);
    REQUIRE(r.ok());
    CHECK(r->unplaced.empty());
    CHECK(r->placements.at("api").cluster == "cloud");
    CHECK(r->placements.at("db").node == "cloud-n2");
    REQUIRE(r->channels.size() == 1);
    CHECK(r->channels[0].satisfied);
  }
  SECTION("a neighborhood without the pinned cluster still sees it as context") {
    app.channels[0].max_delay_ns = 11 * kMs;  // metro -> cloud 10.2 ms; edge -> cloud 15.2 ms
    auto r = env.coord.Place(app, fed, {"edge", "metro"}, pinned);
    REQUIRE(r.ok());
    CHECK(r->unplaced.empty());
    CHECK(r->placements.at("api").cluster == "metro");
    CHECK(env.l2.others_seen.count("cloud") == 1);
    CHECK(std::count(env.l2.visited.begin(), env.l2.visited.end(), "cloud") == 0);
    REQUIRE(r->channels.size() == 1);
    CHECK(r->channels[0].path == std::vector<std::string>{"metro", "cloud"});
    CHECK(r->channels[0].expected_latency_ns == 10 * kMs + 200'000);
  }
  SECTION("a bound no visited cluster meets leaves the workload unplaced with a reason") {
    auto r = env.coord.Place(app, fed, {"edge", "metro"}, pinned);
    REQUIRE(r.ok());
    CHECK(r->placements.count("api") == 0);
    CHECK(r->placements.at("db").cluster == "cloud");
    REQUIRE(r->unplaced.count("api") == 1);
    CHECK(r->unplaced.count("db") == 0);
    INFO(r->unplaced.at("api"));
    CHECK_THAT(r->unplaced.at("api"), Catch::Contains("channel q: latency"));
    // Every retry queues only the unpinned workload.
    CHECK(std::count(env.l2.pending_seen.begin(), env.l2.pending_seen.end(), "api") > 2);
    CHECK_FALSE(Seen(env.l2.pending_seen, "db"));
  }
}

TEST_CASE("bandwidth to a pinned peer is counted for the placed workloads") {
  Env env;
  Federation fed = ThreeSites();
  Application app{.name = "m",
                  .workloads = {MakeWorkload("x", 100), MakeWorkload("y", 100),
                                MakeWorkload("db", 100)},
                  .channels = {{.name = "xd",
                                .from = "x",
                                .to = "db",
                                .min_bandwidth_bps = 600'000'000,
                                .max_delay_ns = 11 * kMs},
                               {.name = "yd",
                                .from = "y",
                                .to = "db",
                                .min_bandwidth_bps = 600'000'000,
                                .max_delay_ns = 11 * kMs}}};
  // Only metro is within the bound, and its 1 Gb/s link to cloud carries one channel.
  auto r = env.coord.Place(app, fed, {"edge", "metro"}, {{"db", {"cloud", "cloud-n0"}}});
  REQUIRE(r.ok());
  REQUIRE(r->placements.size() == 2);
  REQUIRE(r->unplaced.size() == 1);
  const std::string& left = r->unplaced.begin()->first;
  CHECK(left != "db");
  INFO(r->unplaced.begin()->second);
  CHECK_THAT(r->unplaced.begin()->second, Catch::Contains("link metro -> cloud"));
  CHECK(VerifyPlacement(app, fed, *r).ok());
}

TEST_CASE("a channel between two pinned workloads takes no bandwidth again") {
  Env env;
  Federation fed = ThreeSites();
  // The caller's federation already holds "ad"'s 900 Mb/s on metro -> cloud.
  Application app{.name = "m",
                  .workloads = {MakeWorkload("a", 100), MakeWorkload("b", 100),
                                MakeWorkload("d", 100)},
                  .channels = {{.name = "ad", .from = "a", .to = "d", .min_bandwidth_bps = 900},
                               {.name = "bd",
                                .from = "b",
                                .to = "d",
                                .min_bandwidth_bps = 200,
                                .max_delay_ns = 11 * kMs}}};
  fed.MutableLink("metro", "cloud")->free_bandwidth_bps[0] = 100 + 200;  // 900 of 1200 used
  auto r = env.coord.Place(app, fed, {"metro"},
                           {{"a", {"metro", "metro-n0"}}, {"d", {"cloud", "cloud-n0"}}});
  REQUIRE(r.ok());
  CHECK(r->unplaced.empty());
  CHECK(r->placements.at("b").cluster == "metro");
}

TEST_CASE("a bad pinned entry is rejected naming its key") {
  Env env;
  Federation fed = ThreeSites();
  Application app{.name = "m", .workloads = {MakeWorkload("w", 100), MakeWorkload("v", 100)}};
  auto r = env.coord.Place(app, fed, {}, {{"ghost", {"edge", "edge-n0"}}});
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(r.status().message()),
             Catch::Contains("pinned[\"ghost\"]: unknown workload \"ghost\""));
  r = env.coord.Place(app, fed, {}, {{"w", {"edge", "edge-n9"}}, {"v", {"mars", "m-n0"}}});
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  const std::string msg(r.status().message());
  CHECK_THAT(msg, Catch::Contains("pinned[\"w\"].node: unknown node \"edge-n9\""));
  CHECK_THAT(msg, Catch::Contains("pinned[\"v\"].cluster: unknown cluster \"mars\""));
  CHECK(env.l2.visited.empty());
}

TEST_CASE("polish moves a placed workload next to its peer but never a pinned one") {
  Env env;
  Federation fed = ThreeSites();
  // Metro is visited first and takes "a"; "b" can only go to edge, where its
  // data lives. Polish then pulls "a" from metro next to "b".
  Application app{.name = "m",
                  .workloads = {MakeWorkload("a", 100), MakeWorkload("b", 100)},
                  .channels = {{.name = "ab", .from = "a", .to = "b", .min_bandwidth_bps = 10}},
                  .performance_profile = "latency"};
  app.workloads[1].data_locality = "edge";
  env.recs.Set("m", "latency",
               Recommendations{.cluster_scores = {{"metro", 90}, {"edge", 10}, {"cloud", 10}}});
  Coordinator unpolished{env.l2, env.registry, &env.recs, CoordinatorOptions{.polish_rounds = 0}};
  auto raw = unpolished.Place(app, fed, {});
  REQUIRE(raw.ok());
  REQUIRE(raw->unplaced.empty());
  REQUIRE(raw->placements.at("a").cluster == "metro");
  REQUIRE(raw->placements.at("b").cluster == "edge");
  auto polished = env.coord.Place(app, fed, {});
  REQUIRE(polished.ok());
  CHECK(polished->placements.at("a").cluster == "edge");  // polish moved it

  auto r = env.coord.Place(app, fed, {}, {{"a", raw->placements.at("a")}});
  REQUIRE(r.ok());
  CHECK(r->unplaced.empty());
  CHECK(r->placements.at("a").cluster == "metro");
  CHECK(r->placements.at("a").node == raw->placements.at("a").node);
  CHECK(r->placements.at("b").cluster == "edge");
}

// ---- numberOfLocations and bursting (mck8s) ----

// `count` replicas of service "web" of `cpu` millicores, spread over at most
// `locations` clusters, bursting or not.
Application SpreadService(int count, int64_t cpu, int locations, bool bursting) {
  Application app{.name = "mcd"};
  for (int i = 0; i < count; ++i) {
    Workload w = MakeWorkload("web-" + std::to_string(i), cpu);
    w.service = "web";
    w.max_locations = locations;
    w.bursting = bursting;
    app.workloads.push_back(w);
  }
  return app;
}

// Four one-node clusters of 1 CPU each, at distinct distances.
Federation FourSmallSites() {
  Federation fed;
  for (const char* name : {"a", "b", "c", "d"}) fed.AddCluster(MakeCluster(name, 1, 1000, 8 * kGi));
  Connect(fed, "a", "b", 1 * kMs, 1'000'000'000);
  Connect(fed, "a", "c", 5 * kMs, 1'000'000'000);
  Connect(fed, "b", "c", 6 * kMs, 1'000'000'000);
  Connect(fed, "a", "d", 20 * kMs, 1'000'000'000);
  Connect(fed, "b", "d", 21 * kMs, 1'000'000'000);
  Connect(fed, "c", "d", 22 * kMs, 1'000'000'000);
  return fed;
}

// Replicas per cluster.
std::map<std::string, int> Spread(const PlacementResult& r) {
  std::map<std::string, int> out;
  for (const auto& [w, at] : r.placements) ++out[at.cluster];
  return out;
}

TEST_CASE("numberOfLocations spreads a service over that many clusters and no more") {
  Env env;
  Federation fed = ThreeSites();
  for (int locations : {1, 2, 3}) {
    auto r = env.coord.Place(SpreadService(5, 200, locations, false), fed, {});
    REQUIRE(r.ok());
    INFO("numberOfLocations " << locations);
    CHECK(r->unplaced.empty());
    CHECK(Spread(*r).size() == static_cast<size_t>(locations));
  }
  // Fewer replicas than locations: one cluster each.
  auto r = env.coord.Place(SpreadService(2, 200, 3, false), fed, {});
  REQUIRE(r.ok());
  CHECK(Spread(*r).size() == 2);
}

TEST_CASE("without bursting what the numberOfLocations clusters cannot hold stays unplaced") {
  Env env;
  Federation fed = FourSmallSites();
  auto r = env.coord.Place(SpreadService(6, 500, 2, false), fed, {});
  REQUIRE(r.ok());
  CHECK(r->placements.size() == 4);
  CHECK(Spread(*r).size() == 2);
  REQUIRE(r->unplaced.size() == 2);
  for (const auto& [w, reason] : r->unplaced) {
    INFO(reason);
    CHECK(reason.find("numberOfLocations 2: service web already runs in") != std::string::npos);
    CHECK(reason.find("bursting is off") != std::string::npos);
  }
}

TEST_CASE("with bursting a replica goes to the nearest other cluster once the chosen are full") {
  Env env;
  Federation fed = FourSmallSites();
  auto r = env.coord.Place(SpreadService(6, 500, 2, true), fed, {});
  REQUIRE(r.ok());
  INFO((r->unplaced.empty() ? "" : r->unplaced.begin()->second));
  REQUIRE(r->unplaced.empty());
  std::map<std::string, int> spread = Spread(*r);
  REQUIRE(spread.size() == 3);
  // Each holds two (one node of 1 CPU); the third is the nearest of the
  // others to the two chosen first.
  for (const auto& [c, n] : spread) CHECK(n == 2);
  std::string nearest;
  int64_t best = std::numeric_limits<int64_t>::max();
  std::set<std::string> first_two;
  for (const char* w : {"web-0", "web-1"}) first_two.insert(r->placements.at(w).cluster);
  REQUIRE(first_two.size() == 2);
  for (const char* other : {"a", "b", "c", "d"}) {
    if (first_two.count(other)) continue;
    for (const std::string& from : first_two) {
      const Link* l = fed.FindLink(from, other);
      if (l != nullptr && l->latency_ns < best) {
        best = l->latency_ns;
        nearest = other;
      }
    }
  }
  CHECK(spread.count(nearest) == 1);
  CHECK(spread.at(nearest) == 2);
}

TEST_CASE("LocationSpreadRefusal: spread first then only where the service runs unless bursting") {
  Application app = SpreadService(3, 100, 2, false);
  const Workload& w = app.workloads[2];
  std::map<std::string, Placement> placed{{"web-0", {"a", "a-n0"}}};
  // One location so far: a second one first, then a shared one.
  CHECK(LocationSpreadRefusal(app, placed, w, "a", true, false).find("spreads to") !=
        std::string::npos);
  CHECK(LocationSpreadRefusal(app, placed, w, "a", false, false).empty());
  CHECK(LocationSpreadRefusal(app, placed, w, "b", true, false).empty());
  placed["web-1"] = {"b", "b-n0"};
  CHECK(LocationSpreadRefusal(app, placed, w, "a", true, false).empty());
  CHECK(LocationSpreadRefusal(app, placed, w, "c", true, false) ==
        "numberOfLocations 2: service web already runs in a, b and bursting is off");
  CHECK(LocationSpreadRefusal(app, placed, w, "c", false, true).empty());
  // Its own place is not counted; nor is a rule without a number.
  placed["web-2"] = {"c", "c-n0"};
  CHECK(LocationSpreadRefusal(app, placed, w, "c", false, false).find("already runs in a, b") !=
        std::string::npos);
  Application free = SpreadService(3, 100, 0, false);
  CHECK(LocationSpreadRefusal(free, placed, free.workloads[2], "d", true, false).empty());
}

}  // namespace
}  // namespace codeco::swm
