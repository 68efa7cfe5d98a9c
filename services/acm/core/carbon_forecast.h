#pragma once
// Carbon-intensity forecasters for the carbon-aware scheduler
// (docs/carbon.md). A forecaster sees a region's past only: Forecast takes
// the intervals observed so far and answers for the ones after them, so it
// cannot be trained on the future it is scored on.
//
// - DayAgoForecaster: each interval as it was at the same time of day on the
//   last observed day. The baseline to beat.
// - SeasonalRegressionForecaster: one least-squares model per region and
//   horizon over the latest value and its trend, the same time of day on the
//   last day, a week earlier and over the last week, the last day's mean, the
//   latest value's usual level and its change since yesterday, the target's
//   time of day (harmonics) and today's departure times the time of day it
//   is seen, all scaled by the region's weekly mean; a ridge pulls it toward day-ago while samples
//   are few. Trained online on every interval observed, with older samples
//   forgotten (half-life), and solved again once a day. A region with too
//   little history of its own is forecast by the generic model, the same
//   regression pooled over every region.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace codeco::acm {

/// A forecast of the intervals right after a region's history.
struct CarbonForecast {
  /// gCO2eq/kWh; [0] is the interval right after the history.
  std::vector<double> g_per_kwh;
  /// The model that answered: "regional", "generic", "day-ago" or
  /// "persistence" (less than a day of history).
  std::string model;
};

/// Forecasts a region's carbon intensity from its past alone.
class CarbonForecaster {
 public:
  virtual ~CarbonForecaster() = default;
  /// Short name for reports.
  virtual std::string Name() const = 0;
  /// Forecasts the `horizon` intervals after `history`, the region's
  /// intensities so far at `step` each, oldest first. A region's histories
  /// must grow from call to call (a shorter one starts the region afresh).
  /// INVALID_ARGUMENT for an empty history, a horizon out of range or a step
  /// that does not divide a day.
  virtual absl::StatusOr<CarbonForecast> Forecast(const std::string& region,
                                                  absl::Span<const double> history,
                                                  absl::Duration step, int horizon) = 0;
};

/// Most intervals one forecast may cover.
inline constexpr int kMaxCarbonHorizon = 7 * 24 * 4;

/// Repeats the last observed day.
class DayAgoForecaster final : public CarbonForecaster {
 public:
  std::string Name() const override { return "day-ago"; }
  absl::StatusOr<CarbonForecast> Forecast(const std::string& region,
                                          absl::Span<const double> history, absl::Duration step,
                                          int horizon) override;
};

/// Settings of the seasonal regression.
struct SeasonalRegressionOptions {
  /// Horizons modelled; a longer forecast repeats the last one's model.
  int max_horizon = 192;
  /// Samples older than this count half (exponential forgetting).
  absl::Duration half_life = absl::Hours(24 * 90);
  /// History a region needs before its own model answers (else the generic one).
  absl::Duration regional_after = absl::Hours(24 * 7);
  /// Training the generic model needs before it answers (else day-ago).
  absl::Duration generic_after = absl::Hours(24 * 2);
  /// How often the models are solved again from their sums.
  absl::Duration refit_every = absl::Hours(24);
};

/// Checks `options`; INVALID_ARGUMENT naming the field.
absl::Status ValidateSeasonalRegressionOptions(const SeasonalRegressionOptions& options);

/// The learned forecaster: per-region regression with a pooled fallback.
class SeasonalRegressionForecaster final : public CarbonForecaster {
 public:
  /// `options` must pass ValidateSeasonalRegressionOptions.
  explicit SeasonalRegressionForecaster(SeasonalRegressionOptions options = {});
  std::string Name() const override { return "seasonal-regression"; }
  absl::StatusOr<CarbonForecast> Forecast(const std::string& region,
                                          absl::Span<const double> history, absl::Duration step,
                                          int horizon) override;

  /// Number of features of the regression (bias included).
  static constexpr int kFeatures = 15;

 private:
  // Decayed sums of one least-squares problem: XᵀX, Xᵀy and the sample weight.
  struct Sums {
    double xtx[kFeatures][kFeatures] = {};
    double xty[kFeatures] = {};
    double weight = 0;
    void Add(const double (&x)[kFeatures], double y, double decay);
  };
  // One model per horizon, with the weights last solved.
  struct Model {
    std::vector<Sums> sums;
    std::vector<std::vector<double>> weights;  // empty until solved
    int64_t solved_at = -1;                    // training step of the last solve
  };
  struct Region {
    int64_t trained = 0;         // history intervals whose targets were added
    int64_t steps = 0;           // of them, those that trained the model
    std::vector<double> prefix;  // prefix sums of the history
    Model model;
  };

  void Train(Region& region, absl::Span<const double> history, int64_t per_day);
  static void Solve(Model& model);
  Model& Ready(Model& model, int64_t now, int64_t refit_steps);

  SeasonalRegressionOptions options_;
  absl::Duration step_ = absl::ZeroDuration();  // fixed by the first call
  std::map<std::string, Region> regions_;
  Model generic_;
  int64_t generic_steps_ = 0;  // training steps fed to the generic model
};

}  // namespace codeco::acm
