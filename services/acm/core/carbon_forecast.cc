#include "acm/core/carbon_forecast.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "acm/core/carbon_series.h"
#include "codeco/common/status.h"

namespace codeco::acm {
namespace {

// Intervals per day at `step`, or an error when `step` does not divide a day.
absl::StatusOr<int64_t> IntervalsPerDay(absl::Duration step) {
  if (step <= absl::ZeroDuration()) return InvalidFieldError("step", "must be positive");
  absl::Duration rem;
  int64_t per_day = absl::IDivDuration(absl::Hours(24), step, &rem);
  if (rem != absl::ZeroDuration() || per_day < 1) {
    return InvalidFieldError("step",
                             absl::StrCat(absl::FormatDuration(step), " does not divide a day"));
  }
  return per_day;
}

absl::Status CheckRequest(absl::Span<const double> history, int horizon) {
  if (history.empty()) return InvalidFieldError("history", "is empty");
  if (horizon < 1 || horizon > kMaxCarbonHorizon) {
    return InvalidFieldError("horizon", absl::StrCat("must be in 1..", kMaxCarbonHorizon));
  }
  return absl::OkStatus();
}

// Strength of the ridge toward day-ago: this many samples' worth, plus this
// share of the samples seen.
constexpr double kPriorSamples = 24;
constexpr double kPriorShare = 0.02;
// The feature holding the same time of day on the last day.
constexpr int kSameTimeLastDay = 2;

// The same time of day as interval `origin + h`, on the last day observed
// when the forecast is made at `origin`.
int64_t SameTimeLastDay(int64_t origin, int h, int64_t per_day) {
  return origin + h - (h / per_day + 1) * per_day;
}

// The regression's inputs for a forecast made knowing y[0, origin) of the
// interval origin + h, scaled by the last week's mean (returned in `scale`).
// Needs origin >= MinOrigin(per_day).
int64_t MinOrigin(int64_t per_day) { return 7 * per_day + 1; }
void Features(absl::Span<const double> y, const std::vector<double>& prefix, int64_t origin, int h,
              int64_t per_day, double (&x)[SeasonalRegressionForecaster::kFeatures],
              double& scale) {
  auto mean = [&](int64_t from, int64_t to) {
    return (prefix[static_cast<size_t>(to)] - prefix[static_cast<size_t>(from)]) /
           static_cast<double>(to - from);
  };
  scale = std::max(mean(origin - 7 * per_day, origin), 1.0);
  const int64_t last_day = SameTimeLastDay(origin, h, per_day);
  double week = 0;
  for (int64_t j = 0; j < 7; ++j) week += y[static_cast<size_t>(last_day - j * per_day)];
  const double latest = y[static_cast<size_t>(origin - 1)];
  x[0] = 1;
  x[1] = latest / scale;
  x[2] = y[static_cast<size_t>(last_day)] / scale;
  x[3] = week / 7 / scale;
  x[4] = mean(origin - per_day, origin) / scale;
  x[5] = (latest - y[static_cast<size_t>(origin - 1 - per_day)]) / scale;
  // The same time a week before the target (weekdays differ from weekends).
  const int64_t per_week = 7 * per_day;
  x[6] = y[static_cast<size_t>(origin + h - (h / per_week + 1) * per_week)] / scale;
  // The latest value's usual level (its time of day over the last week), so
  // that today's departure from it can carry forward.
  double usual = 0;
  for (int64_t j = 1; j <= 7; ++j) usual += y[static_cast<size_t>(origin - 1 - j * per_day)];
  x[7] = usual / 7 / scale;
  // The trend over the last two intervals.
  x[8] = (latest - y[static_cast<size_t>(origin - 3)]) / scale;
  // The target's time of day, as daily and half-daily harmonics: one model
  // serves every origin, and these let it tell a forecast of the morning
  // ramp from one of the midday dip. The phase is the history's own (its
  // first interval is 0); a linear model absorbs any fixed offset.
  const double tod =
      2 * M_PI * static_cast<double>((origin + h) % per_day) / static_cast<double>(per_day);
  x[9] = std::sin(tod);
  x[10] = std::cos(tod);
  x[11] = std::sin(2 * tod);
  x[12] = std::cos(2 * tod);
  // How long today's departure from the usual level lasts depends on when
  // it is seen (wind at night, sun at noon).
  const double now_tod =
      2 * M_PI * static_cast<double>(origin % per_day) / static_cast<double>(per_day);
  x[13] = std::sin(now_tod) * (x[1] - x[7]);
  x[14] = std::cos(now_tod) * (x[1] - x[7]);
}

CarbonForecast DayAgo(absl::Span<const double> history, int64_t per_day, int horizon) {
  CarbonForecast f;
  f.g_per_kwh.resize(static_cast<size_t>(horizon));
  const auto n = static_cast<int64_t>(history.size());
  if (n < per_day) {
    f.model = "persistence";
    std::fill(f.g_per_kwh.begin(), f.g_per_kwh.end(), history.back());
    return f;
  }
  f.model = "day-ago";
  for (int h = 0; h < horizon; ++h) {
    f.g_per_kwh[static_cast<size_t>(h)] =
        history[static_cast<size_t>(SameTimeLastDay(n, h, per_day))];
  }
  return f;
}

}  // namespace

absl::StatusOr<CarbonForecast> DayAgoForecaster::Forecast(const std::string& /*region*/,
                                                          absl::Span<const double> history,
                                                          absl::Duration step, int horizon) {
  RETURN_IF_ERROR(CheckRequest(history, horizon));
  ASSIGN_OR_RETURN(int64_t per_day, IntervalsPerDay(step));
  return DayAgo(history, per_day, horizon);
}

absl::Status ValidateSeasonalRegressionOptions(const SeasonalRegressionOptions& o) {
  if (o.max_horizon < 1 || o.max_horizon > kMaxCarbonHorizon) {
    return InvalidFieldError("max_horizon", absl::StrCat("must be in 1..", kMaxCarbonHorizon));
  }
  if (o.half_life <= absl::ZeroDuration())
    return InvalidFieldError("half_life", "must be positive");
  if (o.regional_after < absl::ZeroDuration()) {
    return InvalidFieldError("regional_after", "must not be negative");
  }
  if (o.generic_after < absl::ZeroDuration()) {
    return InvalidFieldError("generic_after", "must not be negative");
  }
  if (o.refit_every <= absl::ZeroDuration()) {
    return InvalidFieldError("refit_every", "must be positive");
  }
  return absl::OkStatus();
}

SeasonalRegressionForecaster::SeasonalRegressionForecaster(SeasonalRegressionOptions options)
    : options_(options) {
  generic_.sums.resize(static_cast<size_t>(options_.max_horizon));
}

void SeasonalRegressionForecaster::Sums::Add(const double (&x)[kFeatures], double y, double decay) {
  for (int i = 0; i < kFeatures; ++i) {
    for (int j = 0; j < kFeatures; ++j) xtx[i][j] = xtx[i][j] * decay + x[i] * x[j];
    xty[i] = xty[i] * decay + x[i] * y;
  }
  weight = weight * decay + 1;
}

void SeasonalRegressionForecaster::Train(Region& region, absl::Span<const double> history,
                                         int64_t per_day) {
  const auto n = static_cast<int64_t>(history.size());
  auto& prefix = region.prefix;
  if (prefix.empty()) prefix.push_back(0);
  for (auto i = static_cast<int64_t>(prefix.size()) - 1; i < n; ++i) {
    prefix.push_back(prefix.back() + history[static_cast<size_t>(i)]);
  }
  if (region.model.sums.empty())
    region.model.sums.resize(static_cast<size_t>(options_.max_horizon));
  const double decay =
      std::exp2(-absl::ToDoubleSeconds(step_) / absl::ToDoubleSeconds(options_.half_life));
  const int64_t min_origin = MinOrigin(per_day);
  double x[kFeatures];
  double scale = 1;
  for (int64_t target = region.trained; target < n; ++target) {
    if (target < min_origin) continue;
    for (int h = 0; h < options_.max_horizon; ++h) {
      const int64_t origin = target - h;
      if (origin < min_origin) break;
      Features(history, prefix, origin, h, per_day, x, scale);
      const double y = history[static_cast<size_t>(target)] / scale;
      region.model.sums[static_cast<size_t>(h)].Add(x, y, decay);
      generic_.sums[static_cast<size_t>(h)].Add(x, y, decay);
    }
    ++region.steps;
    ++generic_steps_;
  }
  region.trained = n;
}

void SeasonalRegressionForecaster::Solve(Model& model) {
  model.weights.assign(model.sums.size(), {});
  for (size_t h = 0; h < model.sums.size(); ++h) {
    const Sums& s = model.sums[h];
    if (s.weight <= 0) continue;
    // Ridge toward the day-ago forecast (weight 1 on the same time of the
    // last day): it holds a model trained on a few days near day-ago and
    // fades as samples accumulate.
    double a[kFeatures][kFeatures + 1];
    const double ridge = kPriorSamples + kPriorShare * s.weight;
    for (int i = 0; i < kFeatures; ++i) {
      for (int j = 0; j < kFeatures; ++j) a[i][j] = s.xtx[i][j] + (i == j ? ridge : 0);
      a[i][kFeatures] = s.xty[i] + (i == kSameTimeLastDay ? ridge : 0);
    }
    bool singular = false;
    for (int c = 0; c < kFeatures && !singular; ++c) {
      int pivot = c;
      for (int r = c + 1; r < kFeatures; ++r) {
        if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
      }
      if (std::abs(a[pivot][c]) < 1e-300) {
        singular = true;
        break;
      }
      for (int k = 0; k <= kFeatures; ++k) std::swap(a[c][k], a[pivot][k]);
      for (int r = 0; r < kFeatures; ++r) {
        if (r == c) continue;
        const double f = a[r][c] / a[c][c];
        for (int k = c; k <= kFeatures; ++k) a[r][k] -= f * a[c][k];
      }
    }
    if (singular) continue;
    std::vector<double> w(kFeatures);
    for (int i = 0; i < kFeatures; ++i) w[static_cast<size_t>(i)] = a[i][kFeatures] / a[i][i];
    model.weights[h] = std::move(w);
  }
}

SeasonalRegressionForecaster::Model& SeasonalRegressionForecaster::Ready(Model& model, int64_t now,
                                                                         int64_t refit_steps) {
  if (model.weights.empty() || now - model.solved_at >= refit_steps) {
    Solve(model);
    model.solved_at = now;
  }
  return model;
}

absl::StatusOr<CarbonForecast> SeasonalRegressionForecaster::Forecast(
    const std::string& region_name, absl::Span<const double> history, absl::Duration step,
    int horizon) {
  RETURN_IF_ERROR(CheckRequest(history, horizon));
  ASSIGN_OR_RETURN(int64_t per_day, IntervalsPerDay(step));
  if (step_ == absl::ZeroDuration()) step_ = step;
  if (step != step_) {
    return InvalidFieldError(
        "step", absl::StrCat("this forecaster was trained at ", absl::FormatDuration(step_)));
  }
  Region& region = regions_[region_name];
  if (static_cast<int64_t>(history.size()) < region.trained) region = Region{};
  Train(region, history, per_day);

  const int64_t origin = static_cast<int64_t>(history.size());
  if (origin < MinOrigin(per_day)) return DayAgo(history, per_day, horizon);
  const int64_t refit_steps = std::max<int64_t>(1, WholeSteps(options_.refit_every, step));
  Model* model = nullptr;
  std::string name;
  if (region.steps >= WholeSteps(options_.regional_after, step)) {
    model = &Ready(region.model, region.steps, refit_steps);
    name = "regional";
  } else if (generic_steps_ >= WholeSteps(options_.generic_after, step)) {
    model = &Ready(generic_, generic_steps_, refit_steps);
    name = "generic";
  } else {
    return DayAgo(history, per_day, horizon);
  }
  CarbonForecast f;
  f.model = name;
  f.g_per_kwh.resize(static_cast<size_t>(horizon));
  double x[kFeatures];
  double scale = 1;
  for (int h = 0; h < horizon; ++h) {
    const auto& w = model->weights[static_cast<size_t>(std::min(h, options_.max_horizon - 1))];
    if (w.empty()) {  // this horizon's model did not solve: day-ago for it
      f.g_per_kwh[static_cast<size_t>(h)] =
          history[static_cast<size_t>(SameTimeLastDay(origin, h, per_day))];
      continue;
    }
    Features(history, region.prefix, origin, h, per_day, x, scale);
    double v = 0;
    for (int i = 0; i < kFeatures; ++i) v += w[static_cast<size_t>(i)] * x[i];
    f.g_per_kwh[static_cast<size_t>(h)] = std::max(0.0, v * scale);
  }
  return f;
}

}  // namespace codeco::acm
