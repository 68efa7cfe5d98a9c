#pragma once
// The carbon-aware scheduler (docs/carbon.md): for a delay-tolerant job,
// the generic tuple (cpu, memory, duration, deadline, regions within its
// latency bound), choose the region and the start time that minimise the
// forecast carbon intensity over its run, times its energy, so that it ends
// by its deadline. Jobs run without interruption. The caller decides which
// regions are eligible (latency to the origin, residency) and gives each its
// forecast; calling again with newer forecasts before the chosen start is
// the day-2 re-evaluation.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace codeco::acm {

/// Electrical power of a job, after Cloud Carbon Footprint's coefficients
/// (average of min and max watts per vCPU across providers, per GiB of
/// memory, and a data centre's PUE).
struct JobPowerModel {
  /// Watts per CPU core at average utilization.
  double watts_per_core = 2.12;
  /// Watts per GiB of memory.
  double watts_per_gib = 0.392;
  /// Power usage effectiveness of the data centre.
  double pue = 1.135;
};

/// A delay-tolerant job.
struct CarbonJob {
  /// CPU cores and memory (GiB) it holds while it runs.
  double cpu_cores = 1;
  double memory_gib = 1;
  /// How long it runs; positive.
  absl::Duration duration = absl::Hours(1);
  /// Earliest start.
  absl::Time release = absl::UnixEpoch();
  /// Latest end.
  absl::Time deadline = absl::UnixEpoch();
};

/// Energy of `job` over its whole run, in kWh.
double JobEnergyKwh(const CarbonJob& job, const JobPowerModel& power);

/// A region the job may run in, with the intensity it expects there.
struct CarbonRegionOption {
  /// The region's name.
  std::string region;
  /// Start of the first interval of `g_per_kwh`.
  absl::Time first = absl::UnixEpoch();
  /// Length of each interval; positive.
  absl::Duration step = absl::Minutes(30);
  /// Expected intensity (gCO2eq/kWh) of each interval from `first` on: a
  /// forecast, or the real series for the perfect-knowledge optimum.
  std::vector<double> g_per_kwh;
};

/// Where and when to run a job.
struct CarbonChoice {
  /// The chosen option's region.
  std::string region;
  /// When the job starts.
  absl::Time start = absl::UnixEpoch();
  /// Expected mean intensity over the run, gCO2eq/kWh.
  double mean_g_per_kwh = 0;
  /// Expected emissions of the run, grams CO2eq.
  double grams = 0;
};

/// Mean of `option`'s intensity over [from, to), time-weighted; -1 when the
/// span is empty or not inside the option's intervals.
double MeanIntensity(const CarbonRegionOption& option, absl::Time from, absl::Time to);

/// Chooses among `options` (listed in order of preference: a later start or
/// a later option must be more than 0.1 % cleaner to win) the region and
/// start, at `now` or later and
/// no earlier than the job's release, at which the job's expected emissions
/// are lowest and it ends by its deadline. Candidate starts are the earliest
/// one and each interval boundary after it that the option's intensities
/// cover for the whole run. INVALID_ARGUMENT names `duration` (not positive)
/// or `deadline` (the job cannot end by it from `now`) or `options` (none,
/// or none covering a whole run before the deadline).
absl::StatusOr<CarbonChoice> ChooseRegionAndStart(const CarbonJob& job, absl::Time now,
                                                  const std::vector<CarbonRegionOption>& options,
                                                  const JobPowerModel& power = {});

}  // namespace codeco::acm
