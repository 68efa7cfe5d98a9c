// The advisor over a real telemetry store (in memory): current usage,
// forecasts from stored history, breach advisories with a confidence, and
// recommendations per profile.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>

#include "codeco/common/kv_store.h"
#include "pdlc/core/advisor.h"
#include "pdlc/store/kv_telemetry_store.h"

namespace codeco::pdlc {
namespace {

constexpr int64_t kMinute = 60'000;

// A model that forecasts the last value plus a fixed rise per horizon step,
// with a fixed spread: enough to check what the advisor does with forecasts.
class RisingForecaster : public UsageForecaster {
 public:
  RisingForecaster(double rise_per_step, double spread) : rise_(rise_per_step), spread_(spread) {}
  std::string name() const override { return "rising"; }
  size_t window() const override { return 3; }
  absl::Status Train(const std::vector<UsageSeries>& history) override {
    trained_on = history.size();
    for (const auto& h : history) trained_groups.insert(h.group);
    return history.empty() ? absl::FailedPreconditionError("no history") : absl::OkStatus();
  }
  std::vector<UsageForecast> Predict(const std::vector<ForecastOrigin>& origins) const override {
    std::vector<UsageForecast> out(origins.size());
    for (size_t i = 0; i < origins.size(); ++i) {
      if (origins[i].neighbors != nullptr) {
        neighbor_cpu[origins[i].series->node] = origins[i].neighbors->cpu_percent[origins[i].end - 1];
      }
      for (size_t h = 0; h < kHorizonCount; ++h) {
        out[i].cpu_percent[h] = origins[i].series->cpu_percent[origins[i].end - 1] + rise_ * kHorizonSteps[h];
        out[i].mem_percent[h] = origins[i].series->mem_percent[origins[i].end - 1];
        out[i].cpu_log_spread[h] = spread_;
        out[i].mem_log_spread[h] = spread_;
      }
    }
    return out;
  }
  size_t trained_on = 0;
  // The groups of the series Train saw.
  std::set<std::string> trained_groups;
  // node -> the latest neighbour mean CPU its last Predict saw.
  mutable std::map<std::string, double> neighbor_cpu;

 private:
  double rise_, spread_;
};

struct Fixture {
  Fixture() : kv(NewInMemoryKvStore({"telemetry"})) {
    auto s = NewKvTelemetryStore(*kv);
    REQUIRE(s.ok());
    store = std::move(*s);
  }
  // One sample per minute of cpu and memory fractions for `node` over [from, to).
  void Fill(const std::string& node, int64_t from_ms, int64_t to_ms, double cpu, double mem) {
    std::vector<TelemetrySample> batch;
    for (int64_t t = from_ms; t < to_ms; t += kMinute) {
      batch.push_back({SubjectKind::kNode, node, kNodeCpuMetric, t, cpu});
      batch.push_back({SubjectKind::kNode, node, kNodeMemoryMetric, t, mem});
    }
    REQUIRE(store->Append(node + std::to_string(from_ms), batch).ok());
  }
  std::unique_ptr<KvStore> kv;
  std::unique_ptr<TelemetryStore> store;
};

NodeContext Inventory(std::string name, double watts_per_core) {
  NodeContext c;
  c.node = std::move(name);
  c.cpu_capacity_millicores = 4000;
  c.memory_capacity_bytes = 8e9;
  c.watts_per_core = watts_per_core;
  c.carbon_g_per_kwh = 200;
  return c;
}

TEST_CASE("the advisor scores current usage and forecasts from stored history") {
  Fixture f;
  const int64_t now = 1'000 * 5 * kMinute;  // on the 5-minute grid
  f.Fill("hot", now - 60 * kMinute, now, 0.70, 0.40);
  f.Fill("cool", now - 60 * kMinute, now, 0.10, 0.20);
  auto model = std::make_unique<RisingForecaster>(4.0, 0.05);
  RisingForecaster* raw_model = model.get();
  Advisor advisor(*f.store, std::move(model), {.cluster = "edge-1"});

  // Before training: no forecasts, scores from current usage.
  REQUIRE(advisor.Refresh({Inventory("hot", 10), Inventory("cool", 20)}, now).ok());
  CHECK(advisor.Forecasts().empty());
  auto before = advisor.Recommend({.profile = ScoringProfile::kLatency}, now);
  REQUIRE(before.ok());
  CHECK(before->model_version == "none");
  REQUIRE(before->node_scores.size() == 2);
  CHECK(before->node_scores[0].components.at("cpu_headroom") == Approx(30));
  CHECK(before->node_scores[1].components.at("cpu_headroom") == Approx(90));

  REQUIRE(advisor.Train(now, "v1").ok());
  CHECK(raw_model->trained_on == 2);
  // A cluster's nodes are each other's neighbours, for a topology-aware model.
  CHECK(raw_model->trained_groups == std::set<std::string>{"edge-1"});
  REQUIRE(advisor.Refresh({Inventory("hot", 10), Inventory("cool", 20)}, now).ok());
  const auto forecasts = advisor.Forecasts();
  REQUIRE(forecasts.size() == 2);
  CHECK(forecasts[0].node == "cool");
  CHECK(forecasts[1].forecast.cpu_percent[0] == Approx(74));
  CHECK(forecasts[1].origin_ms == now);  // the last complete bucket ends now
  // Each forecast read the other node as its neighbours.
  CHECK(raw_model->neighbor_cpu.at("hot") == Approx(10));
  CHECK(raw_model->neighbor_cpu.at("cool") == Approx(70));

  auto rec = advisor.Recommend({.profile = ScoringProfile::kLatency, .horizon = 4}, now);
  REQUIRE(rec.ok());
  CHECK(rec->model_version == "v1");
  CHECK(rec->cluster == "edge-1");
  // The 30-minute forecast (70 + 6 x 4 = 94 %) is what the headroom sees.
  CHECK(rec->node_scores[0].components.at("cpu_headroom") == Approx(6));
  // hot crosses 80 % at 10 minutes (78 at 5, 82 at 10) with probability >= 0.5.
  REQUIRE(rec->advisories.size() == 1);
  CHECK(rec->advisories[0].node == "hot");
  CHECK(rec->advisories[0].metric == UsageMetric::kCpu);
  CHECK(rec->advisories[0].time_to_breach_ms <= 10 * kMinute);
  CHECK(rec->advisories[0].confidence >= 0.3);

  // Greenness prefers the node with less energy per core.
  auto green = advisor.Recommend({.profile = ScoringProfile::kGreenness}, now);
  REQUIRE(green.ok());
  CHECK(green->node_scores[0].node == "hot");
  CHECK(green->node_scores[0].components.at("energy") == Approx(50));  // 10 W per core
  CHECK(green->node_scores[1].components.at("energy") == Approx(100.0 / 3));
}

TEST_CASE("the advisor refuses bad queries with the field and keeps stability across refreshes") {
  Fixture f;
  const int64_t now = 2'000 * 5 * kMinute;
  f.Fill("n1", now - 30 * kMinute, now, 0.5, 0.5);
  Advisor advisor(*f.store, nullptr, {.cluster = "c"});
  REQUIRE(advisor.Refresh({Inventory("n1", 10)}, now).ok());
  auto unknown = advisor.Recommend({.profile = ScoringProfile::kLatency, .nodes = {"nope"}}, now);
  CHECK(std::string(unknown.status().message()).find("nodes: \"nope\" is not a node of cluster c") == 0);
  auto weights = advisor.Recommend({.profile = ScoringProfile::kCustom, .custom_weights = {{"bogus", 1}}}, now);
  CHECK(std::string(weights.status().message()).find("custom_weights[\"bogus\"]") == 0);
  CHECK(advisor.Train(now, "v").code() == absl::StatusCode::kFailedPrecondition);  // no model

  // Asking many times does not change stability; refreshes with a swinging load do.
  for (int i = 0; i < 5; ++i) REQUIRE(advisor.Recommend({.profile = ScoringProfile::kLatency}, now).ok());
  CHECK(advisor.Recommend({.profile = ScoringProfile::kLatency}, now)->node_scores[0].stability == 1);
  for (int i = 0; i < 4; ++i) {
    const int64_t t = now + (i + 1) * kMinute;
    f.Fill("n1", t - kMinute + 1, t, i % 2 ? 0.05 : 0.95, 0.5);
    REQUIRE(advisor.Refresh({Inventory("n1", 10)}, t).ok());
  }
  const auto swinging = advisor.Recommend({.profile = ScoringProfile::kLatency}, now + 4 * kMinute);
  REQUIRE(swinging.ok());
  CHECK(swinging->node_scores[0].stability < 0.5);
  CHECK(swinging->stability < 0.5);
  const auto custom = advisor.Recommend({.profile = ScoringProfile::kCustom, .custom_weights = {{"cpu_headroom", 1}}},
                                        now + 4 * kMinute);
  REQUIRE(custom.ok());
  CHECK(custom->node_scores[0].stability < 0.5);
}

TEST_CASE("failures are counted from readiness across refreshes and expire") {
  Fixture f;
  const int64_t now = 4'000 * 5 * kMinute;
  Advisor advisor(*f.store, nullptr, {.cluster = "c", .failure_window_ms = 60 * kMinute});
  NodeContext n = Inventory("n1", 10);
  auto failure_score = [&](int64_t t) {
    auto rec = advisor.Recommend({.profile = ScoringProfile::kResilience}, t);
    REQUIRE(rec.ok());
    return rec->node_scores[0].components.at("failure");
  };
  REQUIRE(advisor.Refresh({n}, now).ok());
  CHECK(failure_score(now) == 100);
  n.ready = false;
  REQUIRE(advisor.Refresh({n}, now + kMinute).ok());
  REQUIRE(advisor.Refresh({n}, now + 2 * kMinute).ok());  // still down: one failure
  n.ready = true;
  REQUIRE(advisor.Refresh({n}, now + 3 * kMinute).ok());
  CHECK(failure_score(now + 3 * kMinute) == 50);
  n.ready = false;
  REQUIRE(advisor.Refresh({n}, now + 4 * kMinute).ok());
  n.ready = true;
  REQUIRE(advisor.Refresh({n}, now + 5 * kMinute).ok());
  CHECK(failure_score(now + 5 * kMinute) == 25);
  REQUIRE(advisor.Refresh({n}, now + 62 * kMinute).ok());  // the first has left the window
  CHECK(failure_score(now + 62 * kMinute) == 50);
  REQUIRE(advisor.Refresh({n}, now + 65 * kMinute).ok());
  CHECK(failure_score(now + 65 * kMinute) == 100);
}

TEST_CASE("a node with stale telemetry has unknown usage") {
  Fixture f;
  const int64_t now = 3'000 * 5 * kMinute;
  f.Fill("old", now - 60 * kMinute, now - 30 * kMinute, 0.9, 0.9);
  Advisor advisor(*f.store, std::make_unique<RisingForecaster>(1.0, 0.05),
                  {.cluster = "c", .freshness_ms = 5 * kMinute, .max_forecast_staleness_ms = 10 * kMinute});
  REQUIRE(advisor.Refresh({Inventory("old", 10)}, now).ok());
  REQUIRE(advisor.Train(now, "v1").ok());
  REQUIRE(advisor.Refresh({Inventory("old", 10)}, now).ok());
  CHECK(advisor.Forecasts().empty());  // its series ended 30 minutes ago: no forecast from it
  auto rec = advisor.Recommend({.profile = ScoringProfile::kLatency}, now);
  REQUIRE(rec.ok());
  CHECK(rec->node_scores[0].components.count("cpu_headroom") == 0);
  CHECK(rec->node_scores[0].notes.size() >= 2);
  // The same history seen 25 minutes earlier is recent enough.
  REQUIRE(advisor.Refresh({Inventory("old", 10)}, now - 25 * kMinute).ok());
  CHECK(advisor.Forecasts().size() == 1);
}

TEST_CASE("stored container restarts lower a node's resilience score") {
  Fixture f;
  const int64_t now = 5'000 * 5 * kMinute;
  for (const char* node : {"flaky", "steady", "stale"}) f.Fill(node, now - 10 * kMinute, now, 0.5, 0.5);
  // The recording rule's hourly increase, as the scraper stores it: 3.6
  // restarts round to 4 (a failure's worth); a negative value counts 0; a
  // sample older than the freshness window counts nothing.
  REQUIRE(f.store
              ->Append("restarts", {{SubjectKind::kNode, "flaky", kNodeRestartsMetric, now - 2 * kMinute, 1},
                                    {SubjectKind::kNode, "flaky", kNodeRestartsMetric, now - kMinute, 3.6},
                                    {SubjectKind::kNode, "steady", kNodeRestartsMetric, now - kMinute, -0.4},
                                    {SubjectKind::kNode, "stale", kNodeRestartsMetric, now - 20 * kMinute, 8}})
              .ok());
  Advisor advisor(*f.store, nullptr, {.cluster = "c", .freshness_ms = 5 * kMinute});
  REQUIRE(advisor.Refresh({Inventory("flaky", 10), Inventory("steady", 10), Inventory("stale", 10)}, now).ok());
  auto rec = advisor.Recommend({.profile = ScoringProfile::kResilience}, now);
  REQUIRE(rec.ok());
  std::map<std::string, NodeScore> by_node;
  for (const NodeScore& s : rec->node_scores) by_node[s.node] = s;
  REQUIRE(by_node.size() == 3);
  // 100 x 0.5^(restarts / 4): the latest sample, 4 restarts, halves it.
  CHECK(by_node.at("flaky").components.at("failure") == Approx(50));
  CHECK(by_node.at("steady").components.at("failure") == Approx(100));
  CHECK(by_node.at("stale").components.at("failure") == Approx(100));
  // Same usage otherwise: the restarts alone make flaky the least resilient.
  CHECK(by_node.at("flaky").score < by_node.at("steady").score);
  CHECK(by_node.at("steady").score == Approx(by_node.at("stale").score));
  // Weights failure .45, cpu and memory headroom .15 each (50 apiece; no
  // forecast, so no stability): (.45 x 50 + .3 x 50) / .75 and (.45 x 100 + .3 x 50) / .75.
  CHECK(by_node.at("flaky").score == Approx(50));
  CHECK(by_node.at("steady").score == Approx(80));
}

}  // namespace
}  // namespace codeco::pdlc
