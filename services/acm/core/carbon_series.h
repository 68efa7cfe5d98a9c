#pragma once
// A grid region's carbon intensity (gCO2eq/kWh) on a uniform time grid: the
// input of the carbon forecasters and of the carbon-aware scheduler
// (docs/carbon.md). Published series come at mixed steps (Germany every 15
// minutes, Great Britain at 15 or 30); ParseCarbonCsv reads one and resamples
// it, time-weighted, onto the step the scheduler works in.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace codeco::acm {

/// One region's carbon intensity: interval i is [start + i·step, start + (i+1)·step)
/// and holds the mean intensity over it.
struct CarbonSeries {
  /// The region the intensities belong to (a cluster maps to it by label).
  std::string region;
  /// Start of the first interval (UTC).
  absl::Time start = absl::UnixEpoch();
  /// Length of every interval; positive.
  absl::Duration step = absl::Minutes(30);
  /// Mean intensity of each interval, gCO2eq/kWh.
  std::vector<double> g_per_kwh;

  /// End of the last interval.
  absl::Time end() const { return start + step * static_cast<int64_t>(g_per_kwh.size()); }
  /// The interval holding `t`, or -1 when `t` lies outside the series.
  int64_t IndexAt(absl::Time t) const;
  /// Start of interval `index` (which may lie past the end).
  absl::Time TimeOf(int64_t index) const { return start + step * index; }
  /// How many intervals are over by `t`: the history a forecast made at `t`
  /// may read (0 before the series, all of them after it).
  int64_t IntervalsBefore(absl::Time t) const;
};

/// How many whole `step`s fit in `d` (rounded toward zero). Use it rather
/// than absl::IDivDuration with a null remainder, which this Abseil rejects.
int64_t WholeSteps(absl::Duration d, absl::Duration step);

/// Limits on a series read from outside.
struct CarbonCsvLimits {
  /// Largest file accepted.
  size_t max_bytes = 64u << 20;
  /// Longest gap between two samples that is bridged (the earlier sample
  /// holds until the later one); a longer one is an error.
  absl::Duration max_gap = absl::Hours(6);
  /// Highest intensity accepted (the dirtiest grids stay under 1,200).
  double max_g_per_kwh = 5000;
};

/// What ParseCarbonCsv found besides the series.
struct CarbonCsvReport {
  /// Data rows read.
  int64_t rows = 0;
  /// Samples that held for longer than the most common step between samples
  /// (bridged gaps).
  int64_t bridged_gaps = 0;
};

/// Reads "Time,Carbon Intensity" CSV text (a header line, then one row per
/// sample: a UTC time "YYYY-MM-DD HH:MM:SS" or RFC 3339, and the intensity
/// from that time until the next sample) and resamples it onto `step`: the
/// result starts at the first multiple of `step` since the Unix epoch at or
/// after the first sample and ends with the last interval the samples cover
/// in full (the last sample holds for the most common step). Each interval's
/// value is the time-weighted mean of the samples over it. INVALID_ARGUMENT
/// names `source`, the line and the column for a bad time, a bad or negative
/// intensity, times out of order or a gap over `limits.max_gap`; also when
/// the text is over `limits.max_bytes` or covers no whole interval.
absl::StatusOr<CarbonSeries> ParseCarbonCsv(absl::string_view text, std::string region,
                                            absl::Duration step, absl::string_view source,
                                            const CarbonCsvLimits& limits = {},
                                            CarbonCsvReport* report = nullptr);

/// ParseCarbonCsv on the file at `path` (NOT_FOUND when it cannot be read).
absl::StatusOr<CarbonSeries> LoadCarbonCsv(const std::string& path, std::string region,
                                           absl::Duration step, const CarbonCsvLimits& limits = {},
                                           CarbonCsvReport* report = nullptr);

}  // namespace codeco::acm
