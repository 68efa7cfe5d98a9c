#pragma once
// The advisor: PDLC's core loop over one cluster. From the telemetry store it
// reads each node's latest usage and 5-minute history, forecasts CPU and
// memory with the cluster's model, raises breach advisories with a
// confidence, and answers recommendations (node and cluster scores per
// performance profile, with the forecasts and advisories behind them).
// Pure: time is passed in, storage and the model are ports.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "codeco/common/listeners.h"
#include "pdlc/core/forecaster.h"
#include "pdlc/core/scores.h"
#include "pdlc/core/telemetry.h"

namespace codeco::pdlc {

/// How the advisor reads, forecasts and warns.
struct AdvisorOptions {
  /// The cluster this PDLC serves.
  std::string cluster;
  /// A sample older than this is not "now": the node's current usage is unknown.
  int64_t freshness_ms = 5 * 60'000;
  /// History read for a forecast, milliseconds (enough for the model's window).
  int64_t forecast_history_ms = 3 * 3600'000;
  /// History read to train the model, milliseconds.
  int64_t training_history_ms = 7 * 24 * 3600'000LL;
  /// Default breach threshold, percent of capacity (per profile in thresholds).
  double breach_threshold_percent = 80;
  /// Threshold per profile name ("greenness", ...), overriding the default.
  std::map<std::string, double> profile_thresholds_percent;
  /// A node's failures are its ready-to-not-ready transitions seen by
  /// Refresh in this window, milliseconds.
  int64_t failure_window_ms = 3600'000;
  /// A forecast starts only from a series whose last bucket ended at most
  /// this long before now (older data is no basis for "the next 5 minutes").
  int64_t max_forecast_staleness_ms = 10 * 60'000;
  /// An advisory is raised when the probability of reaching the threshold at
  /// some horizon is at least this (models without a spread: forecast >= S).
  double min_advisory_confidence = 0.3;
};

/// One node's forecast as served: the usage series it was made from ended at
/// `origin_ms`.
struct NodeForecast {
  /// Node name.
  std::string node;
  /// End of the last 5-minute bucket the forecast started from, Unix ms.
  int64_t origin_ms = 0;
  /// The forecast, percent of capacity.
  UsageForecast forecast;
};

/// A breach advisory: a metric of a node is forecast to reach a threshold.
struct BreachAdvisory {
  /// Node name.
  std::string node;
  /// The metric.
  UsageMetric metric = UsageMetric::kCpu;
  /// Threshold, percent.
  double threshold_percent = 0;
  /// Forecast value at the first horizon reaching it, percent.
  double predicted_percent = 0;
  /// Time from the forecast origin to that horizon, milliseconds.
  int64_t time_to_breach_ms = 0;
  /// Probability of the breach at that horizon, 0-1.
  double confidence = 0;
};

/// What GetRecommendation asks.
struct RecommendationQuery {
  /// The profile.
  ScoringProfile profile = ScoringProfile::kLatency;
  /// Weights when the profile is kCustom.
  std::map<std::string, double> custom_weights;
  /// Only these nodes (empty = all).
  std::vector<std::string> nodes;
  /// Resources a candidate workload needs.
  WorkloadRequests requests;
  /// Horizon index of kHorizonSteps the scores use for forecast usage.
  size_t horizon = 0;
};

/// The advisor's answer.
struct RecommendationResult {
  /// Cluster name.
  std::string cluster;
  /// The profile.
  ScoringProfile profile = ScoringProfile::kLatency;
  /// Node scores, by node name.
  std::vector<NodeScore> node_scores;
  /// Cluster score, 0-100.
  double cluster_score = 0;
  /// Stability of the cluster score, 0-1.
  double stability = 1;
  /// The forecasts behind the scores.
  std::vector<NodeForecast> forecasts;
  /// Breach advisories for the profile's threshold.
  std::vector<BreachAdvisory> advisories;
  /// The model that made the forecasts ("none" before any training).
  std::string model_version;
  /// When it was computed, Unix ms.
  int64_t generated_ms = 0;
};

/// PDLC's core loop over one cluster. Thread-safe: Refresh and Train take
/// turns (usually on one background thread) while Recommend serves calls.
/// Each Refresh records every built-in profile's scores, so stability says
/// how steady a score was across refreshes, however often it is asked for.
class Advisor {
 public:
  /// An advisor over `store` (not owned, outlives it) with `model` (owned; may
  /// be null: no forecasts, scores from current usage only).
  Advisor(const TelemetryStore& store, std::unique_ptr<UsageForecaster> model, AdvisorOptions options);

  /// Replaces the node inventory (capacity, readiness, energy, cost: what the
  /// cluster's registry and LMS say), reads every node's latest usage and
  /// recomputes the forecasts as of `now_ms`. Nodes without enough recent
  /// history get no forecast. A node's failures are counted from its
  /// readiness across refreshes (AdvisorOptions::failure_window_ms), added
  /// to what the inventory says.
  absl::Status Refresh(std::vector<NodeContext> inventory, int64_t now_ms);

  /// Trains the model on every inventory node's history up to `now_ms`;
  /// `version` names the new model. FAILED_PRECONDITION when the history is
  /// too short (the previous model stays).
  absl::Status Train(int64_t now_ms, const std::string& version);

  /// Scores for `query` as of the last Refresh. INVALID_ARGUMENT (naming the
  /// field) for bad custom weights or unknown nodes.
  absl::StatusOr<RecommendationResult> Recommend(const RecommendationQuery& query, int64_t now_ms);

  /// The latest forecasts, by node.
  std::vector<NodeForecast> Forecasts() const;

  /// The node inventory of the last Refresh, with each node's latest usage.
  std::vector<NodeContext> Nodes() const;

  /// Registers a criterion over a metric (see ScoringCriteria::RegisterMetric).
  absl::Status RegisterCriterion(const std::string& name, MetricCriterion criterion);

  /// The threshold used for `profile`, percent.
  double ThresholdFor(ScoringProfile profile) const;

  /// Refreshes completed so far (0 before the first): a watcher compares it
  /// with the count it last served.
  uint64_t refresh_count() const;

  /// Called after every Refresh, on the refreshing thread, outside the
  /// advisor's locks (a listener may call Recommend).
  Listeners& refreshed() { return refreshed_; }

 private:
  std::vector<BreachAdvisory> AdvisoriesFor(double threshold_percent) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The history subject of the cluster score.
  std::string ClusterSubject() const;

  const TelemetryStore& store_;
  const AdvisorOptions options_;
  // Held by Refresh and Train for their whole run: the model is used by one
  // of them at a time, while Recommend (under mu_ only) never waits for a
  // training run.
  absl::Mutex model_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::unique_ptr<UsageForecaster> model_ ABSL_GUARDED_BY(model_mu_);
  bool model_trained_ ABSL_GUARDED_BY(model_mu_) = false;
  mutable absl::Mutex mu_;
  std::string model_version_ ABSL_GUARDED_BY(mu_) = "none";
  std::vector<NodeContext> nodes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, NodeForecast> forecasts_ ABSL_GUARDED_BY(mu_);
  uint64_t refresh_count_ ABSL_GUARDED_BY(mu_) = 0;
  Listeners refreshed_;
  ScoringCriteria criteria_ ABSL_GUARDED_BY(mu_);
  ScoreHistory history_ ABSL_GUARDED_BY(mu_);
  // Readiness at the last Refresh and the times each node went not ready.
  std::map<std::string, bool> was_ready_ ABSL_GUARDED_BY(model_mu_);
  std::map<std::string, std::vector<int64_t>> failure_times_ ABSL_GUARDED_BY(model_mu_);
};

}  // namespace codeco::pdlc
