// Traces, the forecasters and their scoring (pure core, no sockets).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <set>
#include <sstream>

#include "pdlc/core/forecast_evaluation.h"
#include "pdlc/core/lstm_forecaster.h"

namespace codeco::pdlc {
namespace {

absl::StatusOr<std::vector<UsageSeries>> Parse(const std::string& csv, std::vector<std::string>* warnings = nullptr) {
  std::istringstream in(csv);
  return ParseUsageTrace(in, warnings);
}

UsageSeries MakeSeries(std::string node, std::vector<double> cpu, std::vector<double> mem = {}) {
  UsageSeries s;
  s.node = std::move(node);
  if (mem.empty()) mem.assign(cpu.size(), 10.0);
  s.cpu_percent = std::move(cpu);
  s.mem_percent = std::move(mem);
  return s;
}

// A daily-shaped series with noise: what a model with memory can learn and
// persistence cannot.
UsageSeries Wave(std::string node, size_t samples, double phase, std::mt19937* rng) {
  std::normal_distribution<double> noise(0, 1.0);
  std::vector<double> cpu, mem;
  for (size_t t = 0; t < samples; ++t) {
    const double x = 2 * M_PI * (static_cast<double>(t) / 24.0) + phase;
    cpu.push_back(45 + 30 * std::sin(x) + noise(*rng));
    mem.push_back(40 + 10 * std::cos(x) + 0.3 * noise(*rng));
  }
  return MakeSeries(std::move(node), cpu, mem);
}

TEST_CASE("a trace parses into contiguous series per node") {
  std::vector<std::string> warnings;
  auto series = Parse(
      "vm,minute,cpu_percent,mem_percent,extra\n"
      "b,5,2.5,3,x\n"
      "a,0,1,2,x\r\n"
      "b,0,2,3,x\n"
      "b,20,4,5,x\n"
      "\n"
      "b,25,6,7,x\n",
      &warnings);
  REQUIRE(series.ok());
  REQUIRE(series->size() == 3);
  CHECK((*series)[0].node == "a");
  CHECK((*series)[1].node == "b");
  CHECK((*series)[1].part == 1);
  CHECK((*series)[1].cpu_percent == std::vector<double>{2, 2.5});
  CHECK((*series)[2].node == "b");
  CHECK((*series)[2].part == 2);  // the gap at minutes 10 and 15 splits b
  CHECK((*series)[2].first_minute == 20);
  CHECK((*series)[2].mem_percent == std::vector<double>{5, 7});
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("extra") != std::string::npos);
}

TEST_CASE("a bad trace is refused with the line and the column") {
  auto error_of = [](const std::string& csv) { return std::string(Parse(csv).status().message()); };
  CHECK(error_of("") .find("empty") != std::string::npos);
  CHECK(error_of("vm,minute,cpu_percent\n").find("mem_percent: missing from the header") != std::string::npos);
  CHECK(error_of("vm,minute,cpu_percent,mem_percent\na,0,x,1\n") == "line 2: cpu_percent: not a number: \"x\"");
  CHECK(error_of("vm,minute,cpu_percent,mem_percent\na,0,1,-3\n").find("line 2: mem_percent: must be a percentage") == 0);
  CHECK(error_of("vm,minute,cpu_percent,mem_percent\na,3,1,1\n").find("line 2: minute: 3 is not on the 5-minute") == 0);
  CHECK(error_of("vm,minute,cpu_percent,mem_percent\na,0,1,1\na,0,2,2\n").find("line 3: minute: minute 0 of vm a already given on line 2") == 0);
  CHECK(error_of("vm,minute,cpu_percent,mem_percent\na,0,1\n").find("line 2: has 3 columns") == 0);
  CHECK(error_of("vm,minute,cpu_percent,mem_percent\n,0,1,1\n") == "line 2: vm: is empty");
  CHECK(error_of("vm,vm,minute,cpu_percent,mem_percent\n").find("vm: column appears twice") != std::string::npos);
  CHECK(error_of("vm,minute,cpu_percent,mem_percent\na,0,nan,1\n").find("cpu_percent: must be a percentage") != std::string::npos);
  std::string long_line = "vm,minute,cpu_percent,mem_percent\n" + std::string(10000, 'a') + ",0,1,1\n";
  CHECK(error_of(long_line).find("line 2: longer than 4096 bytes") == 0);
  std::istringstream many("vm,minute,cpu_percent,mem_percent\na,0,1,1\na,5,1,1\na,10,1,1\n");
  TraceLimits limits;
  limits.max_samples = 2;
  CHECK(std::string(ParseUsageTrace(many, nullptr, limits).status().message()).find("more than 2 samples") !=
        std::string::npos);
}

TEST_CASE("the split by node is stable and keeps a node's parts together") {
  std::vector<UsageSeries> all;
  for (int i = 0; i < 200; ++i) {
    all.push_back(MakeSeries("vm" + std::to_string(i), {1, 2}));
    all.push_back(MakeSeries("vm" + std::to_string(i), {3, 4}));
    all.back().part = 2;
  }
  std::vector<UsageSeries> a1, b1, a2, b2;
  SplitByNode(all, 0.5, &a1, &b1);
  SplitByNode(all, 0.5, &a2, &b2);
  REQUIRE(a1.size() == a2.size());
  for (size_t i = 0; i < a1.size(); ++i) CHECK(a1[i].node == a2[i].node);
  CHECK(a1.size() > 120);
  CHECK(b1.size() > 120);
  std::set<std::string> in_a;
  for (const auto& s : a1) in_a.insert(s.node);
  for (const auto& s : b1) CHECK(in_a.count(s.node) == 0);
}

TEST_CASE("persistence repeats the last sample at every horizon") {
  std::vector<UsageSeries> series = {MakeSeries("n", {1, 2, 3, 4}, {5, 6, 7, 8})};
  PersistenceForecaster model;
  auto forecasts = model.Predict(OriginsOf(series, 2));
  REQUIRE(forecasts.size() == 2);  // origins end at 2 and 3
  for (double v : forecasts[0].cpu_percent) CHECK(v == 2);
  for (double v : forecasts[1].mem_percent) CHECK(v == 7);
}

TEST_CASE("the autoregressive model recovers a known linear process") {
  // x[t] = 10 + 0.6 x[t-1] + 0.2 x[t-2] + noise: the one-step model is that.
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 0.5);
  std::vector<UsageSeries> history;
  for (int n = 0; n < 20; ++n) {
    std::vector<double> x = {40, 45};
    for (int t = 2; t < 300; ++t) x.push_back(10 + 0.6 * x[t - 1] + 0.2 * x[t - 2] + noise(rng));
    history.push_back(MakeSeries("n" + std::to_string(n), x));
  }
  AutoregressiveForecaster model(2);
  REQUIRE(model.Train(history).ok());
  UsageSeries probe = MakeSeries("p", {30, 60});
  auto f = model.Predict({{&probe, 2}});
  CHECK(f[0].cpu_percent[0] == Approx(10 + 0.6 * 60 + 0.2 * 30).epsilon(0.02));
  // Far ahead it tends to the process mean 10 / (1 - 0.8) = 50.
  CHECK(std::abs(f[0].cpu_percent[4] - 50) < std::abs(60 - 50));
}

TEST_CASE("the autoregressive model refuses too little history") {
  AutoregressiveForecaster model(12);
  auto status = model.Train({MakeSeries("n", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14})});
  CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(status.message()).find("training windows") != std::string::npos);
}

// A forecaster that answers fixed values, to check the scoring rules alone.
class FixedForecaster : public UsageForecaster {
 public:
  explicit FixedForecaster(std::vector<double> next) : next_(std::move(next)) {}
  std::string name() const override { return "fixed"; }
  size_t window() const override { return 1; }
  absl::Status Train(const std::vector<UsageSeries>&) override { return absl::OkStatus(); }
  std::vector<UsageForecast> Predict(const std::vector<ForecastOrigin>& origins) const override {
    std::vector<UsageForecast> out(origins.size());
    for (size_t i = 0; i < origins.size(); ++i) out[i].cpu_percent.fill(next_[origins[i].end - 1]);
    return out;
  }

 private:
  std::vector<double> next_;  // forecast made at each sample
};

TEST_CASE("breaches alarms recall and false alarms follow the stated definitions") {
  // Samples:     0   1   2   3   4   5   6   7
  // cpu:        50  79  81  70  85  60  79  82   (S = 80)
  // Breaches at 2 (79 -> 81), 4 (70 -> 85) and 7 (79 -> 82); samples 2 and 4
  // are over S already, so no alarm is scored there. Forecast made at each
  // sample for the next one:
  std::vector<UsageSeries> series = {MakeSeries("n", {50, 79, 81, 70, 85, 60, 79, 82})};
  FixedForecaster model({78, 80, 90, 75, 90, 77, 70, 0});
  const auto origins = OriginsOf(series, 1);
  const auto forecasts = model.Predict(origins);
  BreachTableSpec spec{{80}, {0, 3, 5}};
  const MetricEvaluation e = ScoreForecasts(origins, forecasts, UsageMetric::kCpu, spec);
  REQUIRE(e.breaches.size() == 3);
  // Margin 0: alarms where forecast >= 80 at a sample < 80: sample 1 (80, breach next).
  CHECK(e.breaches[0].breaches == 3);
  CHECK(e.breaches[0].alarms == 1);
  CHECK(e.breaches[0].detected == 1);
  CHECK(e.breaches[0].false_alarms == 0);
  // Margin 3 (>= 77): samples 0 (78, next 79: false), 1 (true), 5 (77, next 79: false).
  CHECK(e.breaches[1].alarms == 3);
  CHECK(e.breaches[1].detected == 1);
  CHECK(e.breaches[1].false_alarms == 2);
  CHECK(e.breaches[1].precision == Approx(1.0 / 3));
  // Margin 5 (>= 75): adds sample 3 (75, next 85: detected).
  CHECK(e.breaches[2].detected == 2);
  CHECK(e.breaches[2].recall == Approx(2.0 / 3));
  // 7 origins of 5 minutes.
  CHECK(e.breaches[2].false_alarms_per_node_day == Approx(2 / (7 * 5.0 / 1440)));
  // MAPE at 5 minutes: mean |actual - forecast| / actual over samples 1..7.
  const std::vector<double> actual = {79, 81, 70, 85, 60, 79, 82};
  const std::vector<double> made = {78, 80, 90, 75, 90, 77, 70};
  double sum = 0;
  for (size_t i = 0; i < actual.size(); ++i) sum += std::abs(actual[i] - made[i]) / actual[i];
  CHECK(e.horizons[0].mape_percent == Approx(100 * sum / 7));
  CHECK(e.horizons[0].samples == 7);
  CHECK(e.breaches_by_confidence.empty());  // fixed forecasts carry no spread
  CHECK(FirstRowWithRecall(e.breaches, 80, 0.6) == &e.breaches[2]);
  CHECK(FirstRowWithRecall(e.breaches, 80, 0.9) == nullptr);
}

TEST_CASE("the exceedance probability follows the forecast's Laplace spread") {
  UsageForecast f;
  f.cpu_percent.fill(70);
  CHECK(ExceedanceProbability(f, UsageMetric::kCpu, 0, 80) == 0);  // no spread: a step
  CHECK(ExceedanceProbability(f, UsageMetric::kCpu, 0, 70) == 1);
  f.cpu_log_spread.fill(0.1);
  CHECK(ExceedanceProbability(f, UsageMetric::kCpu, 0, 70) == Approx(0.5));
  const double p80 = ExceedanceProbability(f, UsageMetric::kCpu, 0, 80);
  CHECK(p80 == Approx(0.5 * std::exp(-(std::log(80.5) - std::log(70.5)) / 0.1)));
  CHECK(ExceedanceProbability(f, UsageMetric::kCpu, 0, 60) > 0.5);
  f.cpu_log_spread.fill(0.3);
  CHECK(ExceedanceProbability(f, UsageMetric::kCpu, 0, 80) > p80);  // wider: likelier

  // Rows by confidence use it: one origin below S with a spread.
  std::vector<UsageSeries> series = {MakeSeries("n", {70, 85})};
  const auto origins = OriginsOf(series, 1);
  const BreachTableSpec spec{{80}, {0}, {0.5, 0.01}};
  const auto e = ScoreForecasts(origins, {f}, UsageMetric::kCpu, spec);
  REQUIRE(e.breaches_by_confidence.size() == 2);
  CHECK(e.breaches_by_confidence[0].min_confidence == 0.5);
  CHECK(e.breaches_by_confidence[0].detected == 0);
  CHECK(e.breaches_by_confidence[1].detected == 1);
  CHECK(e.breaches_by_confidence[1].recall == 1);
}

TEST_CASE("the LSTM learns a pattern persistence cannot and beats both baselines") {
  std::mt19937 rng(3);
  std::vector<UsageSeries> train, test;
  for (int n = 0; n < 12; ++n) train.push_back(Wave("t" + std::to_string(n), 160, n * 0.5, &rng));
  for (int n = 0; n < 4; ++n) test.push_back(Wave("s" + std::to_string(n), 100, n * 0.9 + 0.2, &rng));
  LstmOptions options;
  options.epochs = 25;
  options.hidden_units = 16;
  options.batch_size = 64;
  options.learning_rate = 1e-2;
  LstmForecaster lstm(options);
  PersistenceForecaster persistence;
  AutoregressiveForecaster ar(options.window);
  REQUIRE(lstm.Train(train).ok());
  REQUIRE(ar.Train(train).ok());
  CHECK(lstm.last_training_windows() == 12 * (160 - 12 - 5));
  const auto origins = OriginsOf(test, options.window);
  const BreachTableSpec spec{{80}, {0}};
  const auto l = ScoreForecasts(origins, lstm.Predict(origins), UsageMetric::kCpu, spec);
  const auto p = ScoreForecasts(origins, persistence.Predict(origins), UsageMetric::kCpu, spec);
  INFO("lstm 30-min MAPE " << l.horizons[4].mape_percent << ", persistence " << p.horizons[4].mape_percent);
  CHECK(l.horizons[4].mape_percent < 0.6 * p.horizons[4].mape_percent);
  CHECK(l.horizons[0].mape_percent < p.horizons[0].mape_percent);
  // The spread is learnt: every forecast carries one, in a sane range.
  const auto forecasts = lstm.Predict(origins);
  for (const auto& f : forecasts) {
    CHECK(f.cpu_log_spread[0] > 0);
    CHECK(f.cpu_log_spread[0] < 1);
  }
}

TEST_CASE("LSTM weights round-trip and the same seed gives the same model") {
  std::mt19937 rng(5);
  std::vector<UsageSeries> train;
  for (int n = 0; n < 4; ++n) train.push_back(Wave("t" + std::to_string(n), 120, n, &rng));
  LstmOptions options;
  options.epochs = 2;
  options.hidden_units = 8;
  options.batch_size = 32;
  LstmForecaster a(options), b(options), c(options);
  REQUIRE(a.Train(train).ok());
  REQUIRE(b.Train(train).ok());
  CHECK(a.Weights() == b.Weights());
  const auto origins = OriginsOf(train, options.window);
  REQUIRE(c.SetWeights(a.Weights()).ok());
  const auto fa = a.Predict(origins), fc = c.Predict(origins);
  for (size_t i = 0; i < origins.size(); ++i) CHECK(fa[i].cpu_percent == fc[i].cpu_percent);
  CHECK(c.SetWeights({1, 2, 3}).code() == absl::StatusCode::kInvalidArgument);
  auto bad = a.Weights();
  bad[3] = std::nanf("");
  CHECK(c.SetWeights(bad).code() == absl::StatusCode::kInvalidArgument);
  CHECK(c.Train({MakeSeries("short", {1, 2, 3})}).code() == absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace codeco::pdlc

namespace codeco::pdlc {
namespace {

TEST_CASE("a group column names neighbours and NeighborMeans averages the others") {
  std::vector<std::string> warnings;
  auto parsed = Parse(
      "vm,minute,cpu_percent,mem_percent,group\n"
      "a,0,10,1,job\na,5,20,2,job\nb,0,30,3,job\nb,5,40,4,job\nc,0,50,5,job\n"
      "d,0,70,7,\nd,5,80,8,\n",
      &warnings);
  REQUIRE(parsed.ok());
  CHECK(warnings.empty());  // group is a known column
  REQUIRE(parsed->size() == 4);
  CHECK((*parsed)[0].group == "job");
  CHECK((*parsed)[3].group.empty());
  const std::vector<UsageSeries> means = NeighborMeans(*parsed);
  REQUIRE(means.size() == 4);
  // a at minute 0: b and c; at minute 5: b alone.
  CHECK(means[0].cpu_percent[0] == Approx(40));
  CHECK(means[0].cpu_percent[1] == Approx(40));
  CHECK(means[0].mem_percent[1] == Approx(4));
  // c at minute 0: a and b.
  CHECK(means[2].cpu_percent[0] == Approx(20));
  // d has no group: its own samples stand in.
  CHECK(means[3].cpu_percent == (*parsed)[3].cpu_percent);

  auto moved = Parse("vm,minute,cpu_percent,mem_percent,group\na,0,1,1,x\na,5,1,1,y\n");
  REQUIRE_FALSE(moved.ok());
  CHECK_THAT(std::string(moved.status().message()),
             Catch::Contains("line 3: group") && Catch::Contains("on line 2"));
}

TEST_CASE("the topology-aware LSTM reads a neighbour whose load a node follows") {
  // Each pair: a leader whose load jumps between random levels, and a
  // follower that repeats the leader three samples later. Only a model that
  // reads the neighbour can foresee the follower's jumps.
  std::mt19937 rng(11);
  auto pair = [&rng](const std::string& name, size_t samples, std::vector<UsageSeries>* out) {
    std::uniform_real_distribution<double> level(15, 85);
    std::normal_distribution<double> noise(0, 0.5);
    std::vector<double> leader;
    double now = level(rng);
    for (size_t t = 0; t < samples + 3; ++t) {
      if (t % 6 == 0) now = level(rng);
      leader.push_back(now + noise(rng));
    }
    std::vector<double> follower(leader.begin(), leader.begin() + samples);
    leader.erase(leader.begin(), leader.begin() + 3);
    UsageSeries l = MakeSeries(name + "-leader", leader);
    UsageSeries f = MakeSeries(name + "-follower", follower);
    l.group = f.group = name;
    out->push_back(std::move(l));
    out->push_back(std::move(f));
  };
  std::vector<UsageSeries> train, test;
  for (int n = 0; n < 10; ++n) pair("t" + std::to_string(n), 150, &train);
  for (int n = 0; n < 3; ++n) pair("s" + std::to_string(n), 100, &test);
  LstmOptions options;
  options.epochs = 20;
  options.hidden_units = 16;
  options.batch_size = 64;
  options.learning_rate = 1e-2;
  LstmForecaster plain(options);
  options.read_neighbors = true;
  LstmForecaster topology(options);
  CHECK(topology.name() == "lstm-topology");
  REQUIRE(plain.Train(train).ok());
  REQUIRE(topology.Train(train).ok());
  // Scored on the followers only.
  std::vector<UsageSeries> followers;
  const std::vector<UsageSeries> all_means = NeighborMeans(test);
  std::vector<UsageSeries> means;
  for (size_t i = 0; i < test.size(); ++i) {
    if (test[i].node.find("follower") == std::string::npos) continue;
    followers.push_back(test[i]);
    means.push_back(all_means[i]);
  }
  const BreachTableSpec spec{{80}, {0}};
  const auto with = OriginsOf(followers, options.window, &means);
  const auto without = OriginsOf(followers, options.window);
  REQUIRE(with[0].neighbors != nullptr);
  const auto t = ScoreForecasts(with, topology.Predict(with), UsageMetric::kCpu, spec);
  const auto p = ScoreForecasts(without, plain.Predict(without), UsageMetric::kCpu, spec);
  INFO("5-min MAPE: topology-aware " << t.horizons[0].mape_percent << " %, plain "
                                     << p.horizons[0].mape_percent << " %");
  CHECK(t.horizons[0].mape_percent < 0.6 * p.horizons[0].mape_percent);
  // Without neighbours the variant still answers, from the node's own series.
  const auto alone = topology.Predict(without);
  REQUIRE(alone.size() == without.size());
  for (const auto& f : alone) CHECK(std::isfinite(f.cpu_percent[0]));
}

}  // namespace
}  // namespace codeco::pdlc
