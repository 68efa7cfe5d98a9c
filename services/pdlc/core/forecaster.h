#pragma once
// Usage forecasters: from the last samples of a node's CPU and memory, the
// utilisation at 5, 10, 15, 20 and 30 minutes. Every model answers the same
// interface, so the evaluator, the breach advisories and the service treat
// the LSTM and the baselines it must beat alike.

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "pdlc/core/usage_series.h"

namespace codeco::pdlc {

/// Number of forecast horizons.
inline constexpr size_t kHorizonCount = 5;
/// The horizons, in samples ahead: 5, 10, 15, 20 and 30 minutes.
inline constexpr std::array<int, kHorizonCount> kHorizonSteps = {1, 2, 3, 4, 6};
/// The longest horizon, in samples.
inline constexpr int kMaxHorizonSteps = 6;

/// A point to forecast from: the samples of `series` before `end` are known,
/// the last of them is `end - 1`.
struct ForecastOrigin {
  /// The node's series (not owned; outlives the call).
  const UsageSeries* series = nullptr;
  /// One past the last known sample.
  size_t end = 0;
  /// The mean of the node's neighbours' series, aligned sample by sample
  /// with `series` (see NeighborMeans; not owned). Null: not known, and a
  /// model that reads neighbours reads the node's own series instead.
  const UsageSeries* neighbors = nullptr;
};

/// A node's forecast CPU and memory utilisation, percent, per horizon of
/// kHorizonSteps.
struct UsageForecast {
  /// CPU, by horizon.
  std::array<double, kHorizonCount> cpu_percent{};
  /// Memory, by horizon.
  std::array<double, kHorizonCount> mem_percent{};
  /// How uncertain each CPU forecast is: the scale of a Laplace distribution
  /// of the value's LogLevel around the forecast's. 0 = the model does not say.
  std::array<double, kHorizonCount> cpu_log_spread{};
  /// The same for memory.
  std::array<double, kHorizonCount> mem_log_spread{};

  /// The forecast of `metric`, by horizon.
  const std::array<double, kHorizonCount>& values(UsageMetric metric) const {
    return metric == UsageMetric::kCpu ? cpu_percent : mem_percent;
  }
};

/// log(percent + 0.5): the scale forecast spreads are on (relative, and
/// finite at 0 %). Negative percentages count as 0.
double LogLevel(double percent);

/// The inverse of LogLevel, never below 0 %.
double FromLogLevel(double log_level);

/// The probability that `metric` reaches `threshold_percent` at horizon index
/// `horizon`, from the forecast's Laplace spread; a forecast without a spread
/// gives 1 when the forecast reaches the threshold and 0 otherwise.
double ExceedanceProbability(const UsageForecast& forecast, UsageMetric metric, size_t horizon,
                             double threshold_percent);

/// A forecasting model. Train, then Predict; Predict is const and may run on
/// several threads at once.
class UsageForecaster {
 public:
  virtual ~UsageForecaster() = default;
  /// Short name used in reports and metrics, e.g. "lstm".
  virtual std::string name() const = 0;
  /// Samples of history a forecast needs; origins with fewer are not asked.
  virtual size_t window() const = 0;
  /// Fits the model on every window the series hold. FAILED_PRECONDITION when
  /// they hold too few windows to fit it.
  virtual absl::Status Train(const std::vector<UsageSeries>& history) = 0;
  /// Forecasts from each origin (each has at least window() samples before it).
  virtual std::vector<UsageForecast> Predict(const std::vector<ForecastOrigin>& origins) const = 0;
};

/// Tomorrow is today: every horizon repeats the last sample. The floor every
/// other model must beat.
class PersistenceForecaster : public UsageForecaster {
 public:
  std::string name() const override { return "persistence"; }
  size_t window() const override { return 1; }
  absl::Status Train(const std::vector<UsageSeries>&) override { return absl::OkStatus(); }
  std::vector<UsageForecast> Predict(const std::vector<ForecastOrigin>& origins) const override;
};

/// A linear autoregressive model: for each metric and horizon h, the value h
/// samples ahead is an intercept plus a weighted sum of the last `order`
/// samples of that metric (direct multi-step regression), fitted by least
/// squares with a small ridge term on all training windows pooled.
class AutoregressiveForecaster : public UsageForecaster {
 public:
  /// A model over the last `order` samples (>= 1).
  explicit AutoregressiveForecaster(size_t order = 12) : order_(order) {}
  std::string name() const override { return "autoregressive"; }
  size_t window() const override { return order_; }
  absl::Status Train(const std::vector<UsageSeries>& history) override;
  std::vector<UsageForecast> Predict(const std::vector<ForecastOrigin>& origins) const override;

 private:
  size_t order_;
  // coefficients_[metric][horizon]: intercept first, then the weight of the
  // latest sample, the one before it, and so on.
  std::array<std::array<std::vector<double>, kHorizonCount>, 2> coefficients_;
};

/// Every origin in `series` from which `model_window` samples are known and at
/// least one future sample exists, in series order. With `neighbors` (one per
/// series, aligned, as NeighborMeans makes them) each origin points at its
/// series' neighbours.
std::vector<ForecastOrigin> OriginsOf(const std::vector<UsageSeries>& series, size_t model_window,
                                      const std::vector<UsageSeries>* neighbors = nullptr);

}  // namespace codeco::pdlc
