#pragma once
// Scoring forecasts against what happened: MAPE per horizon and the breach
// table (recall, precision, false alarms per node-day across alarm margins),
// defined so figures compare with the stateful-LCM study's Tables 3 and 4.
//
// Definitions, for a threshold S and a margin M (percentage points):
//   - a breach is a sample >= S whose previous sample was < S;
//   - an alarm is raised at a sample < S when the 5-minute forecast made there
//     is >= S - M;
//   - recall is the share of breaches with an alarm at the sample before them
//     (detected one sample, 5 minutes, ahead);
//   - a false alarm is an alarm whose next sample is < S (no breach follows);
//   - precision is the share of alarms that are not false;
//   - false alarms per node-day divide by the evaluated samples x 5 min / 1 day.
// Only samples with a full model window before them count, so every model is
// scored on the same samples.

#include <array>
#include <string>
#include <vector>

#include "pdlc/core/forecaster.h"

namespace codeco::pdlc {

/// Mean absolute percentage error at one horizon.
struct HorizonError {
  /// MAPE, percent.
  double mape_percent = 0;
  /// Mean absolute error, percentage points.
  double mae_points = 0;
  /// Samples scored (actual values of 0 are left out of MAPE).
  size_t samples = 0;
};

/// One row of a breach table: one threshold and one alarm rule, a margin or
/// a confidence.
struct BreachRow {
  /// Threshold S, percent.
  double threshold_percent = 0;
  /// Alarm margin M, percentage points (rows by margin).
  double margin_points = 0;
  /// Rows by confidence: an alarm is raised at a sample < S when the forecast's
  /// probability of reaching S at the next sample is at least this
  /// (ExceedanceProbability); -1 on rows by margin.
  double min_confidence = -1;
  /// Breaches in the scored samples.
  size_t breaches = 0;
  /// Breaches alarmed one sample ahead.
  size_t detected = 0;
  /// Alarms raised.
  size_t alarms = 0;
  /// Alarms not followed by a breach.
  size_t false_alarms = 0;
  /// detected / breaches (1 when there is no breach).
  double recall = 0;
  /// (alarms - false_alarms) / alarms (1 when there is no alarm).
  double precision = 0;
  /// false_alarms per node-day of scored samples.
  double false_alarms_per_node_day = 0;
};

/// How one model did on one metric.
struct MetricEvaluation {
  /// The metric.
  UsageMetric metric = UsageMetric::kCpu;
  /// Errors by horizon of kHorizonSteps.
  std::array<HorizonError, kHorizonCount> horizons{};
  /// One row per threshold and margin, thresholds outer.
  std::vector<BreachRow> breaches;
  /// One row per threshold and confidence, thresholds outer; empty when the
  /// forecasts carry no spread.
  std::vector<BreachRow> breaches_by_confidence;
};

/// What the breach tables cover.
struct BreachTableSpec {
  /// Thresholds S, percent.
  std::vector<double> thresholds_percent = {80};
  /// Margins M, percentage points.
  std::vector<double> margins_points = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  /// Confidences for the rows by confidence.
  std::vector<double> confidences = {0.5, 0.4, 0.3, 0.2, 0.15, 0.1, 0.07, 0.05, 0.03, 0.02, 0.01};
};

/// Scores `forecasts` (one per origin, in the same order) of `metric`.
/// Origins must come from OriginsOf (each series' origins consecutive).
MetricEvaluation ScoreForecasts(const std::vector<ForecastOrigin>& origins,
                                const std::vector<UsageForecast>& forecasts, UsageMetric metric,
                                const BreachTableSpec& spec);

/// Node-days of scored samples: origins x 5 min / 1440 min.
double NodeDays(const std::vector<ForecastOrigin>& origins);

/// The smallest margin of `rows` (one threshold) whose recall is at least
/// `min_recall`, or nullptr when none reaches it.
const BreachRow* FirstRowWithRecall(const std::vector<BreachRow>& rows, double threshold_percent,
                                    double min_recall);

}  // namespace codeco::pdlc
