#pragma once
// Context scores: what PDLC knows about each node (usage now and forecast,
// energy, carbon, failures, latency, cost) turned into per-criterion scores
// 0-100, weighted per performance profile into node and cluster scores with a
// stability indicator. PDLC only advises: SWM reads these scores through its
// recommendation port and decides alone.

#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace codeco::pdlc {

/// "Unknown" for every optional measurement of NodeContext.
inline constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();

/// What PDLC knows about one node when it scores it. Fractions are 0-1;
/// measurements left at kUnknown leave their criterion out of the score.
struct NodeContext {
  /// Node name.
  std::string node;
  /// False when the node is not ready: it scores 0.
  bool ready = true;
  /// CPU capacity, millicores (weights the cluster score; 0 = unknown).
  double cpu_capacity_millicores = 0;
  /// Memory capacity, bytes.
  double memory_capacity_bytes = 0;
  /// CPU busy now.
  double cpu_used_fraction = kUnknown;
  /// Memory used now.
  double memory_used_fraction = kUnknown;
  /// CPU busy at the scoring horizon, as forecast.
  double cpu_forecast_fraction = kUnknown;
  /// Memory used at the scoring horizon, as forecast.
  double memory_forecast_fraction = kUnknown;
  /// The CPU forecast's spread (UsageForecast::cpu_log_spread); 0 = unknown.
  double forecast_spread = 0;
  /// Watts one more busy core costs on this node (its energy profile:
  /// (max - idle) / cores); lower is greener.
  double watts_per_core = kUnknown;
  /// Carbon intensity of the node's supply, gCO2eq/kWh.
  double carbon_g_per_kwh = kUnknown;
  /// Price of one core-hour, any currency (the same for every node scored).
  double cost_per_core_hour = kUnknown;
  /// Latency to the cluster's gateway or the workload's origin, milliseconds.
  double latency_ms = kUnknown;
  /// Times the node went not ready in the scoring window.
  int failures = 0;
  /// Container restarts on the node in the scoring window.
  int restarts = 0;
  /// Further measurements by registered metric name (see ScoringCriteria).
  std::map<std::string, double> metrics;
};

/// A criterion built from a registered metric: min-max normalised across the
/// nodes scored together, higher or lower being better.
struct MetricCriterion {
  /// Metric name in NodeContext::metrics.
  std::string metric;
  /// True when a higher value scores higher.
  bool higher_is_better = true;
};

/// The values that score 50 on the absolute criteria (energy, carbon,
/// latency, cost): a value v scores 100 x ref / (ref + v), so 0 scores 100
/// and twice the reference 33. One scale in every cluster, so that SWM can
/// compare the cluster scores of different clusters' PDLCs.
inline constexpr double kReferenceWattsPerCore = 10;      ///< Watts per busy core.
inline constexpr double kReferenceCarbonGPerKwh = 300;    ///< gCO2eq/kWh (about the EU's mean).
inline constexpr double kReferenceLatencyMs = 10;         ///< Milliseconds.
inline constexpr double kReferenceCostPerCoreHour = 0.05; ///< Price of a core-hour.

/// The criteria a profile may weigh. Built in: cpu_headroom, memory_headroom,
/// energy, carbon, latency, failure, stability, cost; more are registered from
/// metrics (RegisterMetric).
class ScoringCriteria {
 public:
  /// The built-in criteria only.
  ScoringCriteria();
  /// Adds criterion `name` over a metric; INVALID_ARGUMENT when the name is
  /// taken or not a lower-case identifier of at most 63 characters.
  absl::Status RegisterMetric(const std::string& name, MetricCriterion criterion);
  /// Whether `name` is a criterion.
  bool Has(const std::string& name) const;
  /// Every criterion name, sorted.
  std::vector<std::string> Names() const;
  /// Registered metric criteria by name.
  const std::map<std::string, MetricCriterion>& metric_criteria() const { return metric_criteria_; }

 private:
  std::map<std::string, MetricCriterion> metric_criteria_;
};

/// The built-in profiles, as named in the API (codeco.common.v1.PerformanceProfile).
enum class ScoringProfile { kLatency, kGreenness, kResilience, kCost, kCustom };

/// The profiles with weights of their own (all but kCustom), in API order:
/// what a refresh records and what WatchRecommendations streams by default.
inline constexpr ScoringProfile kBuiltInProfiles[] = {ScoringProfile::kLatency, ScoringProfile::kGreenness,
                                                      ScoringProfile::kResilience, ScoringProfile::kCost};

/// "latency", "greenness", "resilience", "cost" or "custom".
const char* ScoringProfileName(ScoringProfile profile);

/// The weights of a built-in profile (kCustom has none).
std::map<std::string, double> ProfileWeights(ScoringProfile profile);

/// Checks custom weights: every key a criterion of `criteria`, every weight
/// finite and >= 0, at least one > 0. Errors name the key, e.g.
/// `custom_weights["gpu"]: not a criterion (known: carbon, cost, ...)`.
absl::Status ValidateWeights(const std::map<std::string, double>& weights, const ScoringCriteria& criteria);

/// A node's score for one profile.
struct NodeScore {
  /// Node name.
  std::string node;
  /// Weighted score 0-100 (0 for a node not ready or unable to fit the workload).
  double score = 0;
  /// How steady the node's score has been (ScoreHistory), 0-1.
  double stability = 1;
  /// Score of each criterion that could be computed, 0-100.
  std::map<std::string, double> components;
  /// Why the score is 0 or a criterion was left out, if it was.
  std::vector<std::string> notes;
};

/// Resources a candidate workload needs; nodes without room for it score 0.
struct WorkloadRequests {
  /// CPU, millicores (0 = ignore).
  double cpu_millicores = 0;
  /// Memory, bytes (0 = ignore).
  double memory_bytes = 0;
};

/// Scores `nodes` with `weights` (already validated). Criteria whose inputs
/// are unknown on a node are left out of that node's weighted mean (the other
/// weights renormalised) and named in its notes. Energy, carbon, latency and
/// cost are on absolute scales (kReferenceWattsPerCore, ...); registered
/// metric criteria are min-max normalised across the nodes scored (the best
/// 100, the worst 0, all equal 100), so they rank nodes within one cluster.
std::vector<NodeScore> ScoreNodes(const std::vector<NodeContext>& nodes, const std::map<std::string, double>& weights,
                                  const ScoringCriteria& criteria, const WorkloadRequests& requests = {});

/// The cluster's score: node scores weighted by CPU capacity (equal weights
/// when capacities are unknown); 0 when no node is scored.
double ClusterScore(const std::vector<NodeContext>& nodes, const std::vector<NodeScore>& scores);

/// Recent scores per (profile key, subject), to say how steady each is.
/// Stability is 1 - (standard deviation of the recent scores / 25), clamped to
/// 0-1: a score swinging by 25 points or more is not stable at all.
class ScoreHistory {
 public:
  /// Keeps the last `depth` scores of each subject (at least 2).
  explicit ScoreHistory(size_t depth = 12) : depth_(depth < 2 ? 2 : depth) {}
  /// Records `score` and returns the subject's stability including it.
  double Record(const std::string& profile_key, const std::string& subject, double score);
  /// The subject's stability now (1 with fewer than two scores).
  double Stability(const std::string& profile_key, const std::string& subject) const;
  /// Forgets subjects not in `keep` (nodes that left).
  void Retain(const std::vector<std::string>& keep);

 private:
  size_t depth_;
  std::map<std::pair<std::string, std::string>, std::deque<double>> scores_;
};

}  // namespace codeco::pdlc
