#include "pdlc/core/advisor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"

namespace codeco::pdlc {
namespace {

// The latest raw sample of a node's metric inside the freshness window.
std::optional<double> Latest(const TelemetryStore& store, const std::string& node, const char* metric,
                             int64_t now_ms, int64_t freshness_ms) {
  auto raw = store.ReadRaw({SubjectKind::kNode, node, metric}, std::max<int64_t>(0, now_ms - freshness_ms), now_ms + 1);
  if (!raw.ok() || raw->empty()) return std::nullopt;
  return raw->back().value;
}

// Puts the forecast at horizon index `horizon` into what `node` is scored on.
void ApplyForecast(const UsageForecast& forecast, size_t horizon, NodeContext& node) {
  node.cpu_forecast_fraction = forecast.cpu_percent[horizon] / 100.0;
  node.memory_forecast_fraction = forecast.mem_percent[horizon] / 100.0;
  node.forecast_spread = forecast.cpu_log_spread[horizon];
}

}  // namespace

Advisor::Advisor(const TelemetryStore& store, std::unique_ptr<UsageForecaster> model, AdvisorOptions options)
    : store_(store), options_(std::move(options)), model_(std::move(model)) {}

absl::Status Advisor::Refresh(std::vector<NodeContext> inventory, int64_t now_ms) {
  absl::MutexLock model_lock(&model_mu_);
  // Reads happen outside mu_: the store is thread-safe.
  std::vector<std::vector<UsageSeries>> histories(inventory.size());
  for (size_t i = 0; i < inventory.size(); ++i) {
    NodeContext& node = inventory[i];
    if (auto cpu = Latest(store_, node.node, kNodeCpuMetric, now_ms, options_.freshness_ms)) {
      node.cpu_used_fraction = *cpu;
    }
    if (auto mem = Latest(store_, node.node, kNodeMemoryMetric, now_ms, options_.freshness_ms)) {
      node.memory_used_fraction = *mem;
    }
    // Restarts in the last hour, as the recording rule's increase() gave them
    // (fractional): rounded, never negative; without a fresh sample the
    // inventory's count (0) stays.
    if (auto restarts = Latest(store_, node.node, kNodeRestartsMetric, now_ms, options_.freshness_ms)) {
      node.restarts =
          static_cast<int>(std::clamp(std::round(*restarts), 0.0, double{std::numeric_limits<int>::max()}));
    }
    auto series = ReadUsageSeries(store_, node.node, now_ms - options_.forecast_history_ms, now_ms);
    if (!series.ok()) return series.status();
    histories[i] = std::move(*series);
    // Failures: transitions to not ready, within the window.
    auto& times = failure_times_[node.node];
    auto was = was_ready_.find(node.node);
    if (was != was_ready_.end() && was->second && !node.ready) times.push_back(now_ms);
    was_ready_[node.node] = node.ready;
    std::erase_if(times, [&](int64_t t) { return t < now_ms - options_.failure_window_ms; });
    node.failures += static_cast<int>(times.size());
  }
  // Nodes that left are forgotten.
  std::set<std::string> present;
  for (const auto& n : inventory) present.insert(n.node);
  std::erase_if(was_ready_, [&](const auto& e) { return !present.count(e.first); });
  std::erase_if(failure_times_, [&](const auto& e) { return !present.count(e.first); });

  std::map<std::string, NodeForecast> forecasts;
  if (model_ != nullptr && model_trained_) {
    // Each node's latest part, and the mean of the cluster's other nodes
    // beside it (a topology-aware model reads it; the others ignore it).
    std::vector<UsageSeries> latest;
    std::vector<size_t> owner;
    for (size_t i = 0; i < inventory.size(); ++i) {
      if (histories[i].empty()) continue;
      const UsageSeries& last = histories[i].back();
      const int64_t end_ms = (last.first_minute + static_cast<int64_t>(last.size()) * kSampleStepMinutes) * 60'000;
      if (last.size() < model_->window() || end_ms < now_ms - options_.max_forecast_staleness_ms) continue;
      latest.push_back(last);
      latest.back().group = options_.cluster;
      owner.push_back(i);
    }
    const std::vector<UsageSeries> neighbors = NeighborMeans(latest);
    std::vector<ForecastOrigin> origins;
    for (size_t k = 0; k < latest.size(); ++k) {
      origins.push_back({&latest[k], latest[k].size(), &neighbors[k]});
    }
    const std::vector<UsageForecast> predicted = model_->Predict(origins);
    for (size_t k = 0; k < origins.size(); ++k) {
      NodeContext& node = inventory[owner[k]];
      const UsageSeries& s = *origins[k].series;
      NodeForecast f;
      f.node = node.node;
      f.origin_ms = (s.first_minute + static_cast<int64_t>(s.size()) * kSampleStepMinutes) * 60'000;
      f.forecast = predicted[k];
      forecasts[node.node] = f;
    }
  }
  for (NodeContext& node : inventory) {
    auto it = forecasts.find(node.node);
    if (it == forecasts.end()) continue;
    ApplyForecast(it->second.forecast, 0, node);
  }
  std::vector<std::string> names;
  for (const auto& n : inventory) names.push_back(n.node);
  names.push_back(ClusterSubject());
  {
    absl::MutexLock lock(&mu_);
    history_.Retain(names);
    // Stability is about the scores over time, so every built-in profile is
    // recorded once per refresh.
    for (ScoringProfile profile : kBuiltInProfiles) {
      const std::vector<NodeScore> scores = ScoreNodes(inventory, ProfileWeights(profile), criteria_);
      for (const NodeScore& s : scores) history_.Record(ScoringProfileName(profile), s.node, s.score);
      history_.Record(ScoringProfileName(profile), ClusterSubject(), ClusterScore(inventory, scores));
    }
    nodes_ = std::move(inventory);
    forecasts_ = std::move(forecasts);
    ++refresh_count_;
  }
  refreshed_.Notify();
  return absl::OkStatus();
}

uint64_t Advisor::refresh_count() const {
  absl::MutexLock lock(&mu_);
  return refresh_count_;
}

absl::Status Advisor::Train(int64_t now_ms, const std::string& version) {
  absl::MutexLock model_lock(&model_mu_);
  if (model_ == nullptr) return absl::FailedPreconditionError("no model configured");
  std::vector<std::string> names;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& n : nodes_) names.push_back(n.node);
  }
  std::vector<UsageSeries> history;
  for (const auto& name : names) {
    auto series = ReadUsageSeries(store_, name, now_ms - options_.training_history_ms, now_ms);
    if (!series.ok()) return series.status();
    for (auto& s : *series) {
      s.group = options_.cluster;  // a cluster's nodes are each other's neighbours
      history.push_back(std::move(s));
    }
  }
  RETURN_IF_ERROR(model_->Train(history));
  model_trained_ = true;
  absl::MutexLock lock(&mu_);
  model_version_ = version;
  return absl::OkStatus();
}

double Advisor::ThresholdFor(ScoringProfile profile) const {
  auto it = options_.profile_thresholds_percent.find(ScoringProfileName(profile));
  return it == options_.profile_thresholds_percent.end() ? options_.breach_threshold_percent : it->second;
}

std::vector<BreachAdvisory> Advisor::AdvisoriesFor(double threshold) const {
  std::vector<BreachAdvisory> out;
  for (const NodeContext& node : nodes_) {
    auto it = forecasts_.find(node.node);
    if (it == forecasts_.end()) continue;
    const UsageForecast& f = it->second.forecast;
    for (UsageMetric metric : {UsageMetric::kCpu, UsageMetric::kMemory}) {
      const double now = metric == UsageMetric::kCpu ? node.cpu_used_fraction : node.memory_used_fraction;
      if (std::isfinite(now) && now * 100 >= threshold) continue;  // over already: not ahead
      for (size_t h = 0; h < kHorizonCount; ++h) {
        const double p = ExceedanceProbability(f, metric, h, threshold);
        if (p < options_.min_advisory_confidence) continue;
        out.push_back({node.node, metric, threshold, f.values(metric)[h],
                       int64_t{kHorizonSteps[h]} * kSampleStepMinutes * 60'000, p});
        break;
      }
    }
  }
  return out;
}

std::string Advisor::ClusterSubject() const { return "cluster/" + options_.cluster; }

absl::StatusOr<RecommendationResult> Advisor::Recommend(const RecommendationQuery& query, int64_t now_ms) {
  absl::ReaderMutexLock lock(&mu_);
  std::map<std::string, double> weights = ProfileWeights(query.profile);
  if (query.profile == ScoringProfile::kCustom) {
    RETURN_IF_ERROR(ValidateWeights(query.custom_weights, criteria_));
    weights = query.custom_weights;
  }
  if (query.horizon >= kHorizonCount) {
    return absl::InvalidArgumentError(absl::StrCat("horizon: index ", query.horizon, " out of range"));
  }
  std::vector<NodeContext> nodes;
  if (query.nodes.empty()) {
    nodes = nodes_;
  } else {
    std::set<std::string> wanted(query.nodes.begin(), query.nodes.end());
    for (const auto& n : nodes_) {
      if (wanted.erase(n.node)) nodes.push_back(n);
    }
    if (!wanted.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("nodes: \"", *wanted.begin(), "\" is not a node of cluster ",
                                                     options_.cluster));
    }
  }
  // Scores use the forecast at the asked horizon.
  for (NodeContext& node : nodes) {
    auto it = forecasts_.find(node.node);
    if (it == forecasts_.end()) continue;
    ApplyForecast(it->second.forecast, query.horizon, node);
  }
  RecommendationResult result;
  result.cluster = options_.cluster;
  result.profile = query.profile;
  result.generated_ms = now_ms;
  result.model_version = model_version_;
  result.node_scores = ScoreNodes(nodes, weights, criteria_, query.requests);
  // A custom profile has no history of its own: it is as steady as the
  // built-in profiles' scores of the node are together (the least steady).
  auto stability_of = [&](const std::string& subject) {
    if (query.profile != ScoringProfile::kCustom) return history_.Stability(ScoringProfileName(query.profile), subject);
    double least = 1;
    for (ScoringProfile p : kBuiltInProfiles) {
      least = std::min(least, history_.Stability(ScoringProfileName(p), subject));
    }
    return least;
  };
  for (NodeScore& s : result.node_scores) s.stability = stability_of(s.node);
  result.cluster_score = ClusterScore(nodes, result.node_scores);
  result.stability = stability_of(ClusterSubject());
  for (const NodeContext& node : nodes) {
    auto it = forecasts_.find(node.node);
    if (it != forecasts_.end()) result.forecasts.push_back(it->second);
  }
  std::set<std::string> scored;
  for (const auto& n : nodes) scored.insert(n.node);
  for (auto& a : AdvisoriesFor(ThresholdFor(query.profile))) {
    if (scored.count(a.node)) result.advisories.push_back(std::move(a));
  }
  return result;
}

std::vector<NodeForecast> Advisor::Forecasts() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<NodeForecast> out;
  for (const auto& [_, f] : forecasts_) out.push_back(f);
  return out;
}

absl::Status Advisor::RegisterCriterion(const std::string& name, MetricCriterion criterion) {
  absl::MutexLock lock(&mu_);
  return criteria_.RegisterMetric(name, std::move(criterion));
}

std::vector<NodeContext> Advisor::Nodes() const {
  absl::ReaderMutexLock lock(&mu_);
  return nodes_;
}

}  // namespace codeco::pdlc
