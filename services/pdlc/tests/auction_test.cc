// The auction's pure parts: a cluster's bid from its advisor's scores and
// forecasts, and the ranking that names the winner.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "codeco/common/kv_store.h"
#include "pdlc/core/auction.h"
#include "pdlc/store/kv_telemetry_store.h"

namespace codeco::pdlc {
namespace {

constexpr int64_t kMinute = 60'000;

// Forecasts a fixed CPU level per node at every horizon, with a narrow spread.
class FixedForecaster : public UsageForecaster {
 public:
  explicit FixedForecaster(std::map<std::string, double> cpu_percent)
      : cpu_percent_(std::move(cpu_percent)) {}
  std::string name() const override { return "fixed"; }
  size_t window() const override { return 3; }
  absl::Status Train(const std::vector<UsageSeries>&) override { return absl::OkStatus(); }
  std::vector<UsageForecast> Predict(const std::vector<ForecastOrigin>& origins) const override {
    std::vector<UsageForecast> out(origins.size());
    for (size_t i = 0; i < origins.size(); ++i) {
      const double cpu = cpu_percent_.at(origins[i].series->node);
      out[i].cpu_percent.fill(cpu);
      out[i].mem_percent.fill(20);
      out[i].cpu_log_spread.fill(0.02);
      out[i].mem_log_spread.fill(0.02);
    }
    return out;
  }

 private:
  std::map<std::string, double> cpu_percent_;
};

NodeContext Node(std::string name, double watts_per_core) {
  NodeContext c;
  c.node = std::move(name);
  c.cpu_capacity_millicores = 4000;
  c.memory_capacity_bytes = 8e9;
  c.watts_per_core = watts_per_core;
  c.carbon_g_per_kwh = 200;
  return c;
}

// An advisor over two nodes: "green" (5 W per core) at 40 % CPU now and
// "brown" (20 W per core) at 30 %, with `forecast` CPU levels once trained.
struct Cluster {
  explicit Cluster(std::map<std::string, double> forecast, bool trained = true)
      : kv(NewInMemoryKvStore({"telemetry"})) {
    auto s = NewKvTelemetryStore(*kv);
    REQUIRE(s.ok());
    store = std::move(*s);
    for (auto [node, cpu] : {std::pair{"green", 0.40}, {"brown", 0.30}}) {
      std::vector<TelemetrySample> batch;
      for (int64_t t = now - 60 * kMinute; t < now; t += kMinute) {
        batch.push_back({SubjectKind::kNode, node, kNodeCpuMetric, t, cpu});
        batch.push_back({SubjectKind::kNode, node, kNodeMemoryMetric, t, 0.2});
      }
      REQUIRE(store->Append(node, batch).ok());
    }
    advisor = std::make_unique<Advisor>(
        *store, std::make_unique<FixedForecaster>(std::move(forecast)),
        AdvisorOptions{.cluster = "edge-1"});
    if (trained) REQUIRE(advisor->Train(now, "v1").ok());
    REQUIRE(advisor->Refresh({Node("green", 5), Node("brown", 20)}, now).ok());
  }
  const int64_t now = 1'000 * 5 * kMinute;
  std::unique_ptr<KvStore> kv;
  std::unique_ptr<TelemetryStore> store;
  std::unique_ptr<Advisor> advisor;
};

TEST_CASE("a bid follows the profile score now and turns away from a node forecast to fill up") {
  const AuctionWorkload workload{.name = "shop/web",
                                 .cpu_millicores = 400,
                                 .memory_bytes = 1e9,
                                 .profile = ScoringProfile::kGreenness};
  // Steady forecasts: the greener node is the one the cluster bids with.
  Cluster steady({{"green", 40}, {"brown", 30}});
  auto calm = DecideBid(*steady.advisor, workload, steady.now);
  REQUIRE(calm.ok());
  CHECK(calm->node == "green");
  CHECK(calm->value > 0);
  CHECK(calm->breach_probability < 0.01);
  CHECK(calm->offered_cpu_millicores == Approx(4000 * 0.6));
  CHECK(calm->reason.empty());

  // green forecast at 75 % in 15 minutes: with 10 % more it crosses 80 %.
  Cluster filling({{"green", 75}, {"brown", 30}});
  auto wary = DecideBid(*filling.advisor, workload, filling.now);
  REQUIRE(wary.ok());
  CHECK(wary->node == "brown");
  CHECK(wary->breach_probability < 0.01);
  CHECK(wary->value > 0);

  // Every node forecast past the threshold: the cluster bids 0, saying why.
  Cluster full({{"green", 85}, {"brown", 85}});
  auto none = DecideBid(*full.advisor, workload, full.now);
  REQUIRE(none.ok());
  CHECK(none->value == Approx(0).margin(1e-9));
  CHECK_FALSE(none->reason.empty());
}

TEST_CASE("without forecasts a bid reads current usage and a workload too big for any node bids 0") {
  Cluster untrained({{"green", 99}, {"brown", 99}}, /*trained=*/false);
  auto fits = DecideBid(*untrained.advisor,
                        {.name = "a", .cpu_millicores = 400, .profile = ScoringProfile::kLatency},
                        untrained.now);
  REQUIRE(fits.ok());
  CHECK(fits->value > 0);  // the 99 % forecasts were never made
  auto huge = DecideBid(*untrained.advisor,
                        {.name = "b", .cpu_millicores = 64000, .profile = ScoringProfile::kLatency},
                        untrained.now);
  REQUIRE(huge.ok());
  CHECK(huge->value == 0);
  CHECK_THAT(huge->reason, Catch::Contains("no node has room"));
}

TEST_CASE("a bid refuses a custom profile and negative requests naming the field") {
  Cluster c({{"green", 40}, {"brown", 30}});
  auto custom = DecideBid(*c.advisor, {.name = "a", .profile = ScoringProfile::kCustom}, c.now);
  REQUIRE(custom.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(custom.status().message()),
             Catch::Contains("workload.performance_profile"));
  auto negative = DecideBid(*c.advisor, {.name = "a", .cpu_millicores = -1}, c.now);
  REQUIRE(negative.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(negative.status().message()), Catch::Contains("cpu_millicores"));
}

TEST_CASE("bids rank by value then stability then cluster and a zero bid never wins") {
  std::vector<RankedBid> bids = {
      {"b", 50, 0.9}, {"a", 50, 0.9}, {"c", 70, 0.5}, {"d", 50, 1.0}};
  CHECK(RankBids(bids) == "c");
  REQUIRE(bids.size() == 4);
  CHECK(bids[1].cluster == "d");
  CHECK(bids[2].cluster == "a");
  CHECK(bids[3].cluster == "b");
  std::vector<RankedBid> zeros = {{"a", 0, 1}, {"b", 0, 1}};
  CHECK(RankBids(zeros).empty());
  std::vector<RankedBid> empty;
  CHECK(RankBids(empty).empty());
}

}  // namespace
}  // namespace codeco::pdlc
