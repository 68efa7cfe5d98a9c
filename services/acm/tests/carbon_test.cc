// The carbon series reader, the forecasters and the carbon-aware scheduler
// (services/acm/core/carbon_*.h), on small series written here.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "acm/core/carbon_forecast.h"
#include "acm/core/carbon_scheduler.h"
#include "acm/core/carbon_series.h"

namespace codeco::acm {
namespace {

absl::Time At(const char* text) {
  absl::Time t;
  std::string err;
  REQUIRE(absl::ParseTime("%Y-%m-%d %H:%M", text, absl::UTCTimeZone(), &t, &err));
  return t;
}

// A day-shaped series, low at 03:00 and high at 15:00, whose daily level
// drifts on an 11-day cycle of amplitude `drift`.
std::vector<double> DailyPattern(int days, int per_day, double drift) {
  std::vector<double> y;
  for (int d = 0; d < days; ++d) {
    const double level = 250 + drift * std::sin(2 * M_PI * d / 11.0);
    for (int i = 0; i < per_day; ++i) {
      const double phase = 2 * M_PI * (i - per_day / 8.0) / per_day;
      y.push_back(level - 80 * std::cos(phase));
    }
  }
  return y;
}

double MeanAbsError(const std::vector<double>& forecast, const std::vector<double>& actual,
                    size_t from) {
  double sum = 0;
  for (size_t h = 0; h < forecast.size(); ++h) sum += std::abs(forecast[h] - actual[from + h]);
  return sum / static_cast<double>(forecast.size());
}

TEST_CASE("A carbon CSV at 15 minutes is resampled to 30-minute means", "[carbon]") {
  const std::string csv =
      "Time,Carbon Intensity\n"
      "2020-01-01 00:00:00,100\n"
      "2020-01-01 00:15:00,200\n"
      "2020-01-01 00:30:00,300\n"
      "2020-01-01 00:45:00,500\n"
      "2020-01-01 01:00:00,50\n"
      "2020-01-01 01:15:00,50\n";
  CarbonCsvReport report;
  auto s = ParseCarbonCsv(csv, "de", absl::Minutes(30), "de.csv", {}, &report);
  REQUIRE(s.ok());
  CHECK(s->region == "de");
  CHECK(s->start == At("2020-01-01 00:00"));
  REQUIRE(s->g_per_kwh.size() == 3);
  CHECK(s->g_per_kwh[0] == Approx(150));
  CHECK(s->g_per_kwh[1] == Approx(400));
  CHECK(s->g_per_kwh[2] == Approx(50));
  CHECK(report.rows == 6);
  CHECK(report.bridged_gaps == 0);
  CHECK(s->IndexAt(At("2020-01-01 00:45")) == 1);
  CHECK(s->IndexAt(At("2020-01-01 01:30")) == -1);
  CHECK(s->end() == At("2020-01-01 01:30"));
}

TEST_CASE("A carbon CSV with mixed steps and a missing sample is bridged", "[carbon]") {
  // 30-minute samples, then 15-minute ones, then a missing quarter hour.
  const std::string csv =
      "Time,Carbon Intensity\r\n"
      "2020-01-01 00:10:00,90\r\n"  // before the first whole interval: skipped
      "2020-01-01 00:30:00,100\r\n"
      "2020-01-01 01:00:00,200\r\n"
      "2020-01-01 01:15:00,400\r\n"
      "2020-01-01 01:30:00,300\r\n"
      "2020-01-01 02:00:00,10\r\n"
      "2020-01-01 02:15:00,30\r\n";
  CarbonCsvReport report;
  auto s = ParseCarbonCsv(csv, "gb", absl::Minutes(30), "gb.csv", {}, &report);
  REQUIRE(s.ok());
  CHECK(s->start == At("2020-01-01 00:30"));
  REQUIRE(s->g_per_kwh.size() == 4);
  CHECK(s->g_per_kwh[0] == Approx(100));
  CHECK(s->g_per_kwh[1] == Approx(300));
  CHECK(s->g_per_kwh[2] == Approx(300));  // 01:30 held for 30 minutes
  CHECK(s->g_per_kwh[3] == Approx(20));
  // The most common spacing is 15 minutes: 00:10→00:30, 00:30→01:00 and
  // 01:30→02:00 each held longer.
  CHECK(report.bridged_gaps == 3);
}

TEST_CASE("A bad carbon CSV is refused naming the line and the column", "[carbon]") {
  auto parse = [](const std::string& body, CarbonCsvLimits limits = {}) {
    return ParseCarbonCsv("Time,Carbon Intensity\n" + body, "fr", absl::Minutes(30), "fr.csv",
                          limits);
  };
  auto bad_time = parse("2020-01-01 00:00:00,10\nyesterday,20\n");
  REQUIRE(bad_time.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(bad_time.status().message(), "fr.csv:3: Time"));

  auto negative = parse("2020-01-01 00:00:00,-4\n");
  CHECK(absl::StrContains(negative.status().message(), "fr.csv:2: Carbon Intensity"));
  auto not_a_number = parse("2020-01-01 00:00:00,nan\n");
  CHECK(absl::StrContains(not_a_number.status().message(), "Carbon Intensity"));
  auto columns = parse("2020-01-01 00:00:00,1,2\n");
  CHECK(absl::StrContains(columns.status().message(), "fr.csv:2: has 3 columns"));

  auto backwards = parse("2020-01-01 01:00:00,10\n2020-01-01 00:30:00,10\n");
  CHECK(absl::StrContains(backwards.status().message(), "is not after line 2"));

  auto gap = parse("2020-01-01 00:00:00,10\n2020-01-02 00:00:00,10\n");
  CHECK(absl::StrContains(gap.status().message(), "leaves a gap of 24h"));

  auto too_short = parse("2020-01-01 00:10:00,10\n");
  CHECK(absl::StrContains(too_short.status().message(), "covers no whole 30m interval"));

  CarbonCsvLimits small;
  small.max_bytes = 10;
  auto too_big = parse("2020-01-01 00:00:00,10\n", small);
  CHECK(absl::StrContains(too_big.status().message(), "over the limit of 10"));

  auto empty = ParseCarbonCsv("", "fr", absl::Minutes(30), "fr.csv");
  CHECK(absl::StrContains(empty.status().message(), "fr.csv: has no samples"));
  CHECK(LoadCarbonCsv("/nonexistent/carbon.csv", "fr", absl::Minutes(30)).status().code() ==
        absl::StatusCode::kNotFound);
}

TEST_CASE("Mutated carbon CSVs parse or are refused and never crash", "[carbon]") {
  std::string seed = "Time,Carbon Intensity\n";
  for (int i = 0; i < 48; ++i) {
    seed +=
        absl::StrCat("2020-01-01 ", i / 4 < 10 ? "0" : "", i / 4, ":",
                     (i % 4) * 15 == 0 ? "00" : absl::StrCat((i % 4) * 15), ":00,", 100 + i, "\n");
  }
  REQUIRE(ParseCarbonCsv(seed, "de", absl::Minutes(30), "de.csv").ok());
  const std::string alphabet = ",:-. \n\r0123456789eE+nai";
  std::mt19937 rng(20261127);
  int parsed = 0, refused = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string doc = seed;
    const int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits && !doc.empty(); ++e) {
      const size_t at = rng() % doc.size();
      if (rng() % 2) {
        doc[at] = alphabet[rng() % alphabet.size()];
      } else {
        doc.erase(at, 1 + rng() % 24);
      }
    }
    auto s = ParseCarbonCsv(doc, "de", absl::Minutes(30), "de.csv");
    if (s.ok()) {
      ++parsed;
      for (double v : s->g_per_kwh) REQUIRE((v >= 0 && std::isfinite(v)));
    } else {
      REQUIRE(s.status().code() == absl::StatusCode::kInvalidArgument);
      ++refused;
    }
  }
  CHECK(parsed > 0);
  CHECK(refused > 0);
}

TEST_CASE("The day-ago forecaster repeats the last observed day", "[carbon]") {
  DayAgoForecaster f;
  std::vector<double> y = DailyPattern(2, 4, 10);  // 6-hour intervals
  auto r = f.Forecast("de", y, absl::Hours(6), 6);
  REQUIRE(r.ok());
  CHECK(r->model == "day-ago");
  for (int h = 0; h < 6; ++h) CHECK(r->g_per_kwh[static_cast<size_t>(h)] == y[4 + h % 4]);

  auto short_history = f.Forecast("de", absl::MakeConstSpan(y).subspan(0, 2), absl::Hours(6), 3);
  REQUIRE(short_history.ok());
  CHECK(short_history->model == "persistence");
  CHECK(short_history->g_per_kwh == std::vector<double>(3, y[1]));

  CHECK(absl::StrContains(f.Forecast("de", {}, absl::Hours(6), 3).status().message(), "history"));
  CHECK(absl::StrContains(f.Forecast("de", y, absl::Hours(6), 0).status().message(), "horizon"));
  CHECK(absl::StrContains(f.Forecast("de", y, absl::Hours(7), 3).status().message(),
                          "step: 7h does not divide a day"));
}

TEST_CASE("The seasonal regression beats day-ago once trained and falls back before", "[carbon]") {
  const int per_day = 24;
  // The level drifts from day to day, which day-ago misses.
  const std::vector<double> y = DailyPattern(60, per_day, 60);
  SeasonalRegressionOptions options;
  options.max_horizon = 48;
  SeasonalRegressionForecaster learned(options);
  DayAgoForecaster day_ago;
  const absl::Duration step = absl::Hours(1);

  // Too little history for features: day-ago answers.
  auto early = learned.Forecast("de", absl::MakeConstSpan(y).subspan(0, 3 * per_day), step, 24);
  REQUIRE(early.ok());
  CHECK(early->model == "day-ago");

  double learned_error = 0, day_ago_error = 0;
  std::string model;
  for (size_t known = 10 * per_day; known + 48 <= y.size(); known += per_day / 2) {
    auto history = absl::MakeConstSpan(y).subspan(0, known);
    auto a = learned.Forecast("de", history, step, 48);
    auto b = day_ago.Forecast("de", history, step, 48);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    if (known >= 30 * per_day) {
      learned_error += MeanAbsError(a->g_per_kwh, y, known);
      day_ago_error += MeanAbsError(b->g_per_kwh, y, known);
      model = a->model;
    }
  }
  CHECK(model == "regional");
  CHECK(learned_error < 0.85 * day_ago_error);

  // A region new to the forecaster borrows the generic model.
  const std::vector<double> other = DailyPattern(9, per_day, 60);
  auto borrowed = learned.Forecast("fr", other, step, 24);
  REQUIRE(borrowed.ok());
  CHECK(borrowed->model == "generic");
  CHECK(MeanAbsError(borrowed->g_per_kwh, DailyPattern(10, per_day, 60), 9 * per_day) <
        MeanAbsError(day_ago.Forecast("fr", other, step, 24)->g_per_kwh,
                     DailyPattern(10, per_day, 60), 9 * per_day));

  CHECK(absl::StrContains(learned.Forecast("de", y, absl::Minutes(30), 4).status().message(),
                          "trained at 1h"));
}

TEST_CASE("The seasonal regression's forecast depends on the past only", "[carbon]") {
  const int per_day = 24;
  std::vector<double> a = DailyPattern(30, per_day, 15);
  std::vector<double> b = a;
  for (size_t i = 20 * per_day; i < b.size(); ++i) b[i] *= 3;  // a different future
  SeasonalRegressionForecaster fa, fb;
  for (size_t known = 8 * per_day; known <= 20 * per_day; known += per_day) {
    auto ra = fa.Forecast("de", absl::MakeConstSpan(a).subspan(0, known), absl::Hours(1), 24);
    auto rb = fb.Forecast("de", absl::MakeConstSpan(b).subspan(0, known), absl::Hours(1), 24);
    REQUIRE(ra.ok());
    REQUIRE(rb.ok());
    CHECK(ra->g_per_kwh == rb->g_per_kwh);
  }
  // A shorter history starts the region afresh instead of failing.
  auto restarted =
      fa.Forecast("de", absl::MakeConstSpan(a).subspan(0, 9 * per_day), absl::Hours(1), 24);
  REQUIRE(restarted.ok());
  CHECK(restarted->g_per_kwh.size() == 24);
  CHECK_FALSE(ValidateSeasonalRegressionOptions({.max_horizon = 0}).ok());
  CHECK(absl::StrContains(
      ValidateSeasonalRegressionOptions({.half_life = absl::ZeroDuration()}).message(),
      "half_life"));
}

CarbonRegionOption Option(const std::string& region, absl::Time first, std::vector<double> values) {
  return {region, first, absl::Hours(1), std::move(values)};
}

TEST_CASE("The scheduler picks the cleanest window that ends by the deadline", "[carbon]") {
  const absl::Time t0 = At("2020-03-01 00:00");
  CarbonJob job;
  job.duration = absl::Hours(2);
  job.release = t0;
  job.deadline = t0 + absl::Hours(5);
  job.cpu_cores = 4;
  job.memory_gib = 8;
  // Cleanest two hours: 02:00-04:00 (mean 100).
  std::vector<CarbonRegionOption> home = {Option("de", t0, {300, 300, 100, 100, 300, 20, 20})};
  auto c = ChooseRegionAndStart(job, t0, home);
  REQUIRE(c.ok());
  CHECK(c->region == "de");
  CHECK(c->start == t0 + absl::Hours(2));
  CHECK(c->mean_g_per_kwh == Approx(100));
  const double kwh = (4 * 2.12 + 8 * 0.392) * 1.135 * 2 / 1000;
  CHECK(JobEnergyKwh(job, {}) == Approx(kwh));
  CHECK(c->grams == Approx(100 * kwh));

  // A cleaner region within reach wins; ties keep the earlier option.
  home.push_back(Option("fr", t0, {50, 50, 50, 50, 50, 50, 50}));
  home.push_back(Option("gb", t0, {50, 50, 50, 50, 50, 50, 50}));
  c = ChooseRegionAndStart(job, t0, home);
  REQUIRE(c.ok());
  CHECK(c->region == "fr");
  CHECK(c->start == t0);

  // Re-evaluated later, the choice starts no earlier than now; a start off
  // the grid is weighed by the fractions of the intervals it covers.
  c = ChooseRegionAndStart(job, t0 + absl::Minutes(150), {home[0]});
  REQUIRE(c.ok());
  CHECK(c->start == t0 + absl::Minutes(150));
  CHECK(c->mean_g_per_kwh == Approx((0.5 * 100 + 1 * 100 + 0.5 * 300) / 2));
  CHECK(MeanIntensity(home[0], t0, t0 + absl::Minutes(90)) == Approx(300));
  CHECK(MeanIntensity(home[0], t0 - absl::Hours(1), t0) == -1);
}

TEST_CASE("The scheduler refuses a job it cannot place naming the field", "[carbon]") {
  const absl::Time t0 = At("2020-03-01 00:00");
  CarbonJob job;
  job.duration = absl::Hours(2);
  job.release = t0;
  job.deadline = t0 + absl::Hours(1);
  std::vector<CarbonRegionOption> home = {Option("de", t0, {1, 2, 3})};
  auto late = ChooseRegionAndStart(job, t0, home);
  CHECK(absl::StrContains(late.status().message(), "deadline: the job cannot end by"));

  job.deadline = t0 + absl::Hours(10);
  auto none = ChooseRegionAndStart(job, t0, {});
  CHECK(absl::StrContains(none.status().message(), "options: no region is eligible"));
  job.duration = absl::Hours(4);  // longer than the 3 hours forecast
  auto uncovered = ChooseRegionAndStart(job, t0, home);
  CHECK(absl::StrContains(uncovered.status().message(), "options: no region's intensities"));
  job.duration = absl::ZeroDuration();
  CHECK(absl::StrContains(ChooseRegionAndStart(job, t0, home).status().message(), "duration"));
}

}  // namespace
}  // namespace codeco::acm
