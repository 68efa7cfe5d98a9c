#include "pdlc/core/forecast_evaluation.h"

#include <cmath>

namespace codeco::pdlc {

double NodeDays(const std::vector<ForecastOrigin>& origins) {
  return static_cast<double>(origins.size()) * kSampleStepMinutes / (24.0 * 60.0);
}

MetricEvaluation ScoreForecasts(const std::vector<ForecastOrigin>& origins,
                                const std::vector<UsageForecast>& forecasts, UsageMetric metric,
                                const BreachTableSpec& spec) {
  MetricEvaluation out;
  out.metric = metric;
  std::array<double, kHorizonCount> ape_sum{}, ae_sum{};
  std::array<size_t, kHorizonCount> ape_count{}, ae_count{};
  for (size_t i = 0; i < origins.size() && i < forecasts.size(); ++i) {
    const auto& v = MetricValues(*origins[i].series, metric);
    const auto& f = forecasts[i].values(metric);
    for (size_t h = 0; h < kHorizonCount; ++h) {
      const size_t at = origins[i].end - 1 + kHorizonSteps[h];
      if (at >= v.size()) break;
      const double error = std::abs(v[at] - f[h]);
      ae_sum[h] += error;
      ++ae_count[h];
      if (v[at] > 0) {
        ape_sum[h] += error / v[at];
        ++ape_count[h];
      }
    }
  }
  for (size_t h = 0; h < kHorizonCount; ++h) {
    out.horizons[h].samples = ape_count[h];
    out.horizons[h].mape_percent = ape_count[h] ? 100.0 * ape_sum[h] / static_cast<double>(ape_count[h]) : 0;
    out.horizons[h].mae_points = ae_count[h] ? ae_sum[h] / static_cast<double>(ae_count[h]) : 0;
  }

  const double node_days = NodeDays(origins);
  // Counts one row; `alarm_at(i)` says whether origin i raises an alarm.
  auto count_row = [&](BreachRow row, auto alarm_at) {
    for (size_t i = 0; i < origins.size() && i < forecasts.size(); ++i) {
      const auto& v = MetricValues(*origins[i].series, metric);
      const double last = v[origins[i].end - 1];
      if (last >= row.threshold_percent) continue;  // already over: no breach to foresee
      const bool breach = v[origins[i].end] >= row.threshold_percent;
      const bool alarm = alarm_at(i);
      row.breaches += breach;
      row.alarms += alarm;
      row.detected += breach && alarm;
      row.false_alarms += alarm && !breach;
    }
    row.recall = row.breaches ? static_cast<double>(row.detected) / static_cast<double>(row.breaches) : 1.0;
    row.precision = row.alarms ? static_cast<double>(row.alarms - row.false_alarms) / static_cast<double>(row.alarms) : 1.0;
    row.false_alarms_per_node_day = node_days > 0 ? static_cast<double>(row.false_alarms) / node_days : 0;
    return row;
  };
  bool has_spread = false;
  for (const auto& f : forecasts) {
    const auto& spread = metric == UsageMetric::kCpu ? f.cpu_log_spread : f.mem_log_spread;
    if (spread[0] > 0) {
      has_spread = true;
      break;
    }
  }
  for (double threshold : spec.thresholds_percent) {
    for (double margin : spec.margins_points) {
      BreachRow row;
      row.threshold_percent = threshold;
      row.margin_points = margin;
      out.breaches.push_back(count_row(row, [&](size_t i) {
        return forecasts[i].values(metric)[0] >= threshold - margin;
      }));
    }
    if (!has_spread) continue;
    for (double confidence : spec.confidences) {
      BreachRow row;
      row.threshold_percent = threshold;
      row.min_confidence = confidence;
      out.breaches_by_confidence.push_back(count_row(row, [&](size_t i) {
        return ExceedanceProbability(forecasts[i], metric, 0, threshold) >= confidence;
      }));
    }
  }
  return out;
}

const BreachRow* FirstRowWithRecall(const std::vector<BreachRow>& rows, double threshold_percent,
                                    double min_recall) {
  for (const auto& row : rows) {
    if (row.threshold_percent == threshold_percent && row.recall >= min_recall) return &row;
  }
  return nullptr;
}

}  // namespace codeco::pdlc
