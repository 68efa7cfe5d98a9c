#include "pdlc/core/forecaster.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace codeco::pdlc {
namespace {

constexpr UsageMetric kMetrics[] = {UsageMetric::kCpu, UsageMetric::kMemory};

// Solves the symmetric positive definite system a x = b in place (Cholesky);
// false when a is not positive definite.
bool SolveSpd(std::vector<double> a, std::vector<double> b, size_t n, std::vector<double>* x) {
  for (size_t j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (size_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    if (!(d > 0)) return false;
    const double l = std::sqrt(d);
    a[j * n + j] = l;
    for (size_t i = j + 1; i < n; ++i) {
      double s = a[i * n + j];
      for (size_t k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = s / l;
    }
  }
  for (size_t i = 0; i < n; ++i) {  // L y = b
    double s = b[i];
    for (size_t k = 0; k < i; ++k) s -= a[i * n + k] * b[k];
    b[i] = s / a[i * n + i];
  }
  for (size_t i = n; i-- > 0;) {  // L^T x = y
    double s = b[i];
    for (size_t k = i + 1; k < n; ++k) s -= a[k * n + i] * b[k];
    b[i] = s / a[i * n + i];
  }
  *x = std::move(b);
  return true;
}

}  // namespace

namespace {
// Keeps the log finite at 0 % without bending it much above a few percent.
constexpr double kLogLevelOffset = 0.5;
}  // namespace

double LogLevel(double percent) { return std::log(std::max(percent, 0.0) + kLogLevelOffset); }

double FromLogLevel(double log_level) { return std::max(0.0, std::exp(log_level) - kLogLevelOffset); }

double ExceedanceProbability(const UsageForecast& forecast, UsageMetric metric, size_t horizon,
                             double threshold_percent) {
  const double value = forecast.values(metric)[horizon];
  const double spread = (metric == UsageMetric::kCpu ? forecast.cpu_log_spread : forecast.mem_log_spread)[horizon];
  if (!(spread > 0)) return value >= threshold_percent ? 1.0 : 0.0;
  const double z = LogLevel(threshold_percent);
  const double mu = LogLevel(value);
  return z >= mu ? 0.5 * std::exp(-(z - mu) / spread) : 1.0 - 0.5 * std::exp(-(mu - z) / spread);
}

std::vector<ForecastOrigin> OriginsOf(const std::vector<UsageSeries>& series, size_t model_window,
                                      const std::vector<UsageSeries>* neighbors) {
  std::vector<ForecastOrigin> origins;
  const size_t window = std::max<size_t>(model_window, 1);
  for (size_t i = 0; i < series.size(); ++i) {
    const UsageSeries& s = series[i];
    const UsageSeries* around = nullptr;
    if (neighbors != nullptr && i < neighbors->size() && (*neighbors)[i].size() == s.size()) {
      around = &(*neighbors)[i];
    }
    for (size_t end = window; end < s.size(); ++end) origins.push_back({&s, end, around});
  }
  return origins;
}

std::vector<UsageForecast> PersistenceForecaster::Predict(const std::vector<ForecastOrigin>& origins) const {
  std::vector<UsageForecast> out(origins.size());
  for (size_t i = 0; i < origins.size(); ++i) {
    const auto& o = origins[i];
    out[i].cpu_percent.fill(o.series->cpu_percent[o.end - 1]);
    out[i].mem_percent.fill(o.series->mem_percent[o.end - 1]);
  }
  return out;
}

absl::Status AutoregressiveForecaster::Train(const std::vector<UsageSeries>& history) {
  if (order_ == 0) return absl::InvalidArgumentError("autoregressive: order must be at least 1");
  const size_t n = order_ + 1;
  for (size_t m = 0; m < 2; ++m) {
    for (size_t h = 0; h < kHorizonCount; ++h) {
      const size_t steps = kHorizonSteps[h];
      std::vector<double> xtx(n * n, 0.0), xty(n, 0.0);
      std::vector<double> row(n);
      size_t rows = 0;
      for (const auto& s : history) {
        const auto& v = MetricValues(s, kMetrics[m]);
        for (size_t end = order_; end + steps - 1 < v.size(); ++end) {
          row[0] = 1.0;
          for (size_t k = 0; k < order_; ++k) row[k + 1] = v[end - 1 - k];
          const double y = v[end - 1 + steps];
          for (size_t i = 0; i < n; ++i) {
            xty[i] += row[i] * y;
            for (size_t j = 0; j <= i; ++j) xtx[i * n + j] += row[i] * row[j];
          }
          ++rows;
        }
      }
      if (rows < n * 4) {
        return absl::FailedPreconditionError(absl::StrCat(
            "autoregressive: ", rows, " training windows for horizon ", steps * kSampleStepMinutes,
            " min, need at least ", n * 4, " (series longer than ", order_ + steps, " samples)"));
      }
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < i; ++j) xtx[j * n + i] = xtx[i * n + j];
      }
      // A ridge term scaled to the data keeps collinear lags (flat series) solvable;
      // the intercept is not shrunk.
      double trace = 0;
      for (size_t i = 1; i < n; ++i) trace += xtx[i * n + i];
      const double ridge = 1e-6 * trace / static_cast<double>(order_) + 1e-9;
      for (size_t i = 1; i < n; ++i) xtx[i * n + i] += ridge;
      std::vector<double> beta;
      if (!SolveSpd(xtx, xty, n, &beta)) {
        return absl::FailedPreconditionError(
            absl::StrCat("autoregressive: the training windows of ", UsageMetricName(kMetrics[m]),
                         " do not determine the model (all series constant?)"));
      }
      coefficients_[m][h] = std::move(beta);
    }
  }
  return absl::OkStatus();
}

std::vector<UsageForecast> AutoregressiveForecaster::Predict(const std::vector<ForecastOrigin>& origins) const {
  std::vector<UsageForecast> out(origins.size());
  for (size_t i = 0; i < origins.size(); ++i) {
    const auto& o = origins[i];
    for (size_t m = 0; m < 2; ++m) {
      const auto& v = MetricValues(*o.series, kMetrics[m]);
      auto& target = m == 0 ? out[i].cpu_percent : out[i].mem_percent;
      for (size_t h = 0; h < kHorizonCount; ++h) {
        const auto& beta = coefficients_[m][h];
        if (beta.empty()) {  // untrained: the persistence answer
          target[h] = v[o.end - 1];
          continue;
        }
        double y = beta[0];
        for (size_t k = 0; k < order_; ++k) y += beta[k + 1] * v[o.end - 1 - k];
        target[h] = std::max(0.0, y);
      }
    }
  }
  return out;
}

}  // namespace codeco::pdlc
