#include "acm/core/carbon_scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "acm/core/carbon_series.h"
#include "codeco/common/status.h"

namespace codeco::acm {
namespace {

// How much cleaner a later start or a later option must be to be chosen.
constexpr double kMinRelativeGain = 1e-3;

// The integral of an option's piecewise-constant intensity from its first
// interval to any time inside it (g/kWh × seconds), through prefix sums.
class Cumulative {
 public:
  explicit Cumulative(const CarbonRegionOption& option) : option_(option) {
    prefix_.reserve(option.g_per_kwh.size() + 1);
    prefix_.push_back(0);
    for (double v : option.g_per_kwh) prefix_.push_back(prefix_.back() + v);
    step_s_ = absl::ToDoubleSeconds(option.step);
  }
  absl::Time end() const {
    return option_.first + option_.step * static_cast<int64_t>(option_.g_per_kwh.size());
  }
  bool Covers(absl::Time from, absl::Time to) const {
    return option_.step > absl::ZeroDuration() && from >= option_.first && to <= end() && from < to;
  }
  // Requires first <= t <= end().
  double At(absl::Time t) const {
    absl::Duration rem;
    const int64_t i = absl::IDivDuration(t - option_.first, option_.step, &rem);
    const auto n = static_cast<int64_t>(option_.g_per_kwh.size());
    if (i >= n) return prefix_.back() * step_s_;
    return prefix_[static_cast<size_t>(i)] * step_s_ +
           option_.g_per_kwh[static_cast<size_t>(i)] * absl::ToDoubleSeconds(rem);
  }
  double Mean(absl::Time from, absl::Time to) const {
    return (At(to) - At(from)) / absl::ToDoubleSeconds(to - from);
  }

 private:
  const CarbonRegionOption& option_;
  std::vector<double> prefix_;
  double step_s_ = 0;
};

}  // namespace

double JobEnergyKwh(const CarbonJob& job, const JobPowerModel& power) {
  const double watts =
      (job.cpu_cores * power.watts_per_core + job.memory_gib * power.watts_per_gib) * power.pue;
  return watts * absl::ToDoubleHours(job.duration) / 1000.0;
}

double MeanIntensity(const CarbonRegionOption& option, absl::Time from, absl::Time to) {
  Cumulative c(option);
  return c.Covers(from, to) ? c.Mean(from, to) : -1;
}

absl::StatusOr<CarbonChoice> ChooseRegionAndStart(const CarbonJob& job, absl::Time now,
                                                  const std::vector<CarbonRegionOption>& options,
                                                  const JobPowerModel& power) {
  if (job.duration <= absl::ZeroDuration()) {
    return InvalidFieldError("duration", "must be positive");
  }
  const absl::Time earliest = std::max(now, job.release);
  const absl::Time latest = job.deadline - job.duration;  // latest start
  if (earliest > latest) {
    return InvalidFieldError(
        "deadline",
        absl::StrCat("the job cannot end by ", absl::FormatTime(job.deadline), ": it needs ",
                     absl::FormatDuration(job.duration), " from ", absl::FormatTime(earliest)));
  }
  if (options.empty()) return InvalidFieldError("options", "no region is eligible");
  const double kwh = JobEnergyKwh(job, power);
  bool found = false;
  CarbonChoice best;
  for (const CarbonRegionOption& option : options) {
    if (option.step <= absl::ZeroDuration()) continue;
    Cumulative cum(option);
    // The earliest start, then each interval boundary after it.
    absl::Time start = earliest;
    while (start <= latest) {
      const absl::Time end = start + job.duration;
      if (end > cum.end()) break;
      if (cum.Covers(start, end)) {
        const double mean = cum.Mean(start, end);
        // A later start or a later option must be more than 0.1 % cleaner:
        // a forecast's noise does not hold a job back or move it.
        if (!found || mean < best.mean_g_per_kwh * (1 - kMinRelativeGain)) {
          found = true;
          best = {option.region, start, mean, mean * kwh};
        }
      }
      const int64_t i = WholeSteps(start - option.first, option.step);
      absl::Time next = option.first + option.step * (i + 1);
      if (start < option.first) next = option.first;
      start = next;
    }
  }
  if (!found) {
    return InvalidFieldError("options", absl::StrCat("no region's intensities cover a ",
                                                     absl::FormatDuration(job.duration),
                                                     " run that ends by the deadline"));
  }
  return best;
}

}  // namespace codeco::acm
