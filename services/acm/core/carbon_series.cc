#include "acm/core/carbon_series.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "codeco/common/status.h"

namespace codeco::acm {

int64_t WholeSteps(absl::Duration d, absl::Duration step) {
  absl::Duration rem;
  return absl::IDivDuration(d, step, &rem);
}

int64_t CarbonSeries::IntervalsBefore(absl::Time t) const {
  if (t <= start) return 0;
  return std::min<int64_t>(WholeSteps(t - start, step), static_cast<int64_t>(g_per_kwh.size()));
}

int64_t CarbonSeries::IndexAt(absl::Time t) const {
  if (t < start || t >= end()) return -1;
  return WholeSteps(t - start, step);
}

namespace {

struct Sample {
  absl::Time at;
  double value;
  int64_t line;
};

bool ParseSampleTime(absl::string_view text, absl::Time& out) {
  std::string err;
  std::string s(absl::StripAsciiWhitespace(text));
  return absl::ParseTime("%Y-%m-%d %H:%M:%S", s, absl::UTCTimeZone(), &out, &err) ||
         absl::ParseTime(absl::RFC3339_full, s, absl::UTCTimeZone(), &out, &err);
}

// Multiples of `step` since the Unix epoch, rounded up or down.
absl::Time AlignUp(absl::Time t, absl::Duration step) {
  absl::Duration rem;
  int64_t n = absl::IDivDuration(t - absl::UnixEpoch(), step, &rem);
  if (rem < absl::ZeroDuration()) --n;  // before the epoch: IDiv truncates toward zero
  absl::Time down = absl::UnixEpoch() + step * n;
  return down == t ? t : down + step;
}
absl::Time AlignDown(absl::Time t, absl::Duration step) {
  absl::Time up = AlignUp(t, step);
  return up == t ? t : up - step;
}

}  // namespace

absl::StatusOr<CarbonSeries> ParseCarbonCsv(absl::string_view text, std::string region,
                                            absl::Duration step, absl::string_view source,
                                            const CarbonCsvLimits& limits,
                                            CarbonCsvReport* report) {
  const std::string where(source);
  if (step <= absl::ZeroDuration()) return InvalidFieldError("step", "must be positive");
  if (text.size() > limits.max_bytes) {
    return InvalidFieldError(
        where, absl::StrCat("is ", text.size(), " bytes, over the limit of ", limits.max_bytes));
  }
  std::vector<Sample> samples;
  int64_t line_no = 0;
  bool header_seen = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<absl::string_view> cols = absl::StrSplit(line, ',');
    const std::string at = absl::StrCat(where, ":", line_no);
    absl::Time t;
    if (!header_seen && samples.empty() && !ParseSampleTime(cols[0], t)) {
      header_seen = true;  // the header names the columns; nothing else is read from it
      continue;
    }
    if (cols.size() != 2) {
      return InvalidFieldError(
          at, absl::StrCat("has ", cols.size(), " columns; want 2 (Time,Carbon Intensity)"));
    }
    if (!ParseSampleTime(cols[0], t)) {
      return InvalidFieldError(
          absl::StrCat(at, ": Time"),
          absl::StrCat("\"", cols[0], "\" is not a time such as 2020-01-01 00:30:00"));
    }
    double v = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(cols[1]), &v) || !std::isfinite(v) || v < 0 ||
        v > limits.max_g_per_kwh) {
      return InvalidFieldError(absl::StrCat(at, ": Carbon Intensity"),
                               absl::StrCat("\"", cols[1], "\" is not an intensity in 0..",
                                            limits.max_g_per_kwh, " gCO2eq/kWh"));
    }
    if (!samples.empty() && t <= samples.back().at) {
      return InvalidFieldError(absl::StrCat(at, ": Time"),
                               absl::StrCat("is not after line ", samples.back().line, "'s time"));
    }
    if (!samples.empty() && t - samples.back().at > limits.max_gap) {
      return InvalidFieldError(
          absl::StrCat(at, ": Time"),
          absl::StrCat("leaves a gap of ", absl::FormatDuration(t - samples.back().at),
                       " after line ", samples.back().line, ", over the ",
                       absl::FormatDuration(limits.max_gap), " bridged"));
    }
    samples.push_back({t, v, line_no});
  }
  if (samples.empty()) return InvalidFieldError(where, "has no samples");

  // The most common spacing is the series' own step: the last sample holds
  // for it, and a sample holding longer bridged a gap.
  std::map<absl::Duration, int64_t> spacing;
  for (size_t i = 1; i < samples.size(); ++i) ++spacing[samples[i].at - samples[i - 1].at];
  absl::Duration own_step = step;
  int64_t best = 0;
  for (const auto& [d, n] : spacing) {
    if (n > best) own_step = d, best = n;
  }
  int64_t bridged = 0;
  for (size_t i = 1; i < samples.size(); ++i) {
    if (samples[i].at - samples[i - 1].at > own_step) ++bridged;
  }

  CarbonSeries series;
  series.region = std::move(region);
  series.step = step;
  series.start = AlignUp(samples.front().at, step);
  const absl::Time covered_end = AlignDown(samples.back().at + own_step, step);
  if (covered_end <= series.start) {
    return InvalidFieldError(
        where, absl::StrCat("covers no whole ", absl::FormatDuration(step), " interval"));
  }
  const int64_t bins = WholeSteps(covered_end - series.start, step);
  std::vector<double> weighted(static_cast<size_t>(bins), 0.0);
  const double step_s = absl::ToDoubleSeconds(step);
  for (size_t i = 0; i < samples.size(); ++i) {
    absl::Time from = std::max(samples[i].at, series.start);
    absl::Time to = std::min(i + 1 < samples.size() ? samples[i + 1].at : samples[i].at + own_step,
                             covered_end);
    while (from < to) {
      int64_t b = WholeSteps(from - series.start, step);
      absl::Time bin_end = series.TimeOf(b + 1);
      absl::Time upto = std::min(bin_end, to);
      weighted[static_cast<size_t>(b)] += samples[i].value * absl::ToDoubleSeconds(upto - from);
      from = upto;
    }
  }
  series.g_per_kwh.reserve(weighted.size());
  for (double w : weighted) series.g_per_kwh.push_back(w / step_s);
  if (report != nullptr) {
    report->rows = static_cast<int64_t>(samples.size());
    report->bridged_gaps = bridged;
  }
  return series;
}

absl::StatusOr<CarbonSeries> LoadCarbonCsv(const std::string& path, std::string region,
                                           absl::Duration step, const CarbonCsvLimits& limits,
                                           CarbonCsvReport* report) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  if (static_cast<uint64_t>(size) > limits.max_bytes) {
    return InvalidFieldError(
        path, absl::StrCat("is ", size, " bytes, over the limit of ", limits.max_bytes));
  }
  in.seekg(0);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), size);
  return ParseCarbonCsv(text, std::move(region), step, path, limits, report);
}

}  // namespace codeco::acm
