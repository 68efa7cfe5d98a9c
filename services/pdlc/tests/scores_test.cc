// Context scores per profile, cluster scores and stability (pure core).
#include <catch2/catch.hpp>

#include "pdlc/core/scores.h"

namespace codeco::pdlc {
namespace {

NodeContext Node(std::string name, double cpu, double watts_per_core, double carbon) {
  NodeContext c;
  c.node = std::move(name);
  c.cpu_capacity_millicores = 4000;
  c.memory_capacity_bytes = 8e9;
  c.cpu_used_fraction = cpu;
  c.memory_used_fraction = 0.5;
  c.watts_per_core = watts_per_core;
  c.carbon_g_per_kwh = carbon;
  return c;
}

const NodeScore& Find(const std::vector<NodeScore>& scores, const std::string& node) {
  for (const auto& s : scores) {
    if (s.node == node) return s;
  }
  FAIL("no score for " << node);
  return scores.front();
}

TEST_CASE("greenness prefers the node with less energy per core and cleaner power") {
  ScoringCriteria criteria;
  std::vector<NodeContext> nodes = {Node("coal", 0.2, 30, 700), Node("hydro", 0.2, 10, 50),
                                    Node("mixed", 0.2, 20, 300)};
  const auto scores = ScoreNodes(nodes, ProfileWeights(ScoringProfile::kGreenness), criteria);
  REQUIRE(scores.size() == 3);
  CHECK(Find(scores, "hydro").score > Find(scores, "mixed").score);
  CHECK(Find(scores, "mixed").score > Find(scores, "coal").score);
  // Absolute scales: the reference scores 50, whatever else is scored.
  CHECK(Find(scores, "hydro").components.at("energy") == Approx(50));
  CHECK(Find(scores, "coal").components.at("energy") == Approx(25));
  CHECK(Find(scores, "mixed").components.at("carbon") == Approx(50));
  CHECK(Find(scores, "hydro").components.at("cpu_headroom") == Approx(80));
  // Weighted mean of the components.
  const auto& h = Find(scores, "hydro");
  CHECK(h.score == Approx(0.45 * 50 + 0.35 * 100.0 * 300 / 350 + 0.2 * 80));
}

TEST_CASE("absolute criteria score a node the same in any company so clusters compare") {
  ScoringCriteria criteria;
  const auto weights = ProfileWeights(ScoringProfile::kGreenness);
  const NodeContext green = Node("green", 0.2, 10, 50);
  const double alone = ScoreNodes({green}, weights, criteria).front().score;
  const double among_dirty = Find(ScoreNodes({green, Node("coal", 0.2, 30, 700)}, weights, criteria), "green").score;
  const double among_clean = Find(ScoreNodes({green, Node("sun", 0.2, 2, 20)}, weights, criteria), "green").score;
  CHECK(alone == Approx(among_dirty));
  CHECK(alone == Approx(among_clean));
  // A negative measurement is no measurement.
  const auto bad = ScoreNodes({Node("bad", 0.2, -1, 50)}, weights, criteria).front();
  CHECK(bad.components.count("energy") == 0);
}

TEST_CASE("a forecast load counts in the headroom and a node without room scores 0") {
  ScoringCriteria criteria;
  NodeContext busy = Node("busy", 0.3, 10, 100);
  busy.cpu_forecast_fraction = 0.9;  // forecast to saturate
  NodeContext calm = Node("calm", 0.3, 10, 100);
  calm.cpu_forecast_fraction = 0.3;
  const auto scores = ScoreNodes({busy, calm}, ProfileWeights(ScoringProfile::kLatency), criteria,
                                 WorkloadRequests{.cpu_millicores = 1000});
  CHECK(Find(scores, "busy").score == 0);  // 4000 x 10 % free < 1000 millicores
  CHECK(Find(scores, "calm").score > 50);
  CHECK(Find(scores, "calm").components.at("cpu_headroom") == Approx(70));
  // Latency is unknown on both: left out and said so.
  CHECK(Find(scores, "calm").components.count("latency") == 0);
  CHECK(Find(scores, "calm").notes.front() == "latency: no data");
}

TEST_CASE("resilience counts failures restarts and forecast spread and a node not ready scores 0") {
  ScoringCriteria criteria;
  NodeContext flaky = Node("flaky", 0.2, 10, 100);
  flaky.failures = 2;
  flaky.restarts = 4;
  flaky.forecast_spread = 0.2;
  NodeContext steady = Node("steady", 0.2, 10, 100);
  steady.forecast_spread = 0.02;
  NodeContext down = Node("down", 0.2, 10, 100);
  down.ready = false;
  const auto scores = ScoreNodes({flaky, steady, down}, ProfileWeights(ScoringProfile::kResilience), criteria);
  CHECK(Find(scores, "flaky").components.at("failure") == Approx(100 * std::pow(0.5, 3)));
  CHECK(Find(scores, "steady").score > Find(scores, "flaky").score + 30);
  CHECK(Find(scores, "down").score == 0);
}

TEST_CASE("custom weights are validated and registered metrics become criteria") {
  ScoringCriteria criteria;
  REQUIRE(criteria.RegisterMetric("gpu_free", {.metric = "gpu_free_count", .higher_is_better = true}).ok());
  CHECK(criteria.RegisterMetric("gpu_free", {.metric = "x"}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(criteria.RegisterMetric("Bad Name", {.metric = "x"}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(criteria.RegisterMetric("energy", {.metric = "x"}).code() == absl::StatusCode::kInvalidArgument);

  auto unknown = ValidateWeights({{"gpu", 1}}, criteria);
  CHECK(std::string(unknown.message()).find("custom_weights[\"gpu\"]: not a criterion (known: carbon") == 0);
  CHECK(std::string(ValidateWeights({{"energy", -1}}, criteria).message()).find("custom_weights[\"energy\"]") == 0);
  CHECK(!ValidateWeights({{"energy", std::nan("")}}, criteria).ok());
  CHECK(!ValidateWeights({{"energy", 0}}, criteria).ok());
  CHECK(!ValidateWeights({}, criteria).ok());
  REQUIRE(ValidateWeights({{"gpu_free", 3}, {"energy", 1}}, criteria).ok());

  NodeContext a = Node("a", 0.1, 10, 100), b = Node("b", 0.1, 20, 100);
  a.metrics["gpu_free_count"] = 0;
  b.metrics["gpu_free_count"] = 4;
  const auto scores = ScoreNodes({a, b}, {{"gpu_free", 3}, {"energy", 1}}, criteria);
  // Metric criteria are min-max across the nodes: gpu 100 or 0 (x 3); energy
  // is absolute: 50 at 10 W per core, 33.3 at 20 (x 1).
  CHECK(Find(scores, "b").score == Approx((3 * 100 + 100.0 / 3) / 4));
  CHECK(Find(scores, "a").score == Approx(50.0 / 4));
}

TEST_CASE("the cluster score weights nodes by capacity") {
  std::vector<NodeContext> nodes = {Node("big", 0, 10, 1), Node("small", 0, 10, 1)};
  nodes[0].cpu_capacity_millicores = 3000;
  nodes[1].cpu_capacity_millicores = 1000;
  std::vector<NodeScore> scores(2);
  scores[0].score = 80;
  scores[1].score = 40;
  CHECK(ClusterScore(nodes, scores) == Approx(70));
  nodes[1].cpu_capacity_millicores = 0;  // unknown: equal weights
  CHECK(ClusterScore(nodes, scores) == Approx(60));
  CHECK(ClusterScore({}, {}) == 0);
}

TEST_CASE("stability falls as a score swings and recovers as it settles") {
  ScoreHistory history(4);
  CHECK(history.Stability("greenness", "n1") == 1);
  history.Record("greenness", "n1", 50);
  CHECK(history.Record("greenness", "n1", 50) == 1);
  history.Record("greenness", "n1", 10);
  const double swinging = history.Record("greenness", "n1", 90);
  CHECK(swinging < 0.2);
  for (int i = 0; i < 4; ++i) history.Record("greenness", "n1", 70);
  CHECK(history.Stability("greenness", "n1") == 1);
  history.Record("greenness", "gone", 1);
  history.Retain({"n1"});
  CHECK(history.Stability("greenness", "gone") == 1);  // forgotten
}

}  // namespace
}  // namespace codeco::pdlc
