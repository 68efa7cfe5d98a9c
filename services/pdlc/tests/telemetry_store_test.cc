// The telemetry store (over an in-memory KvStore and over RocksDB in a
// scratch directory), retention and downsampling, normalisation, the
// conversion to UsageSeries and the mapping of Prometheus results.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codeco/common/kv_store.h"
#include "codeco/common/rocksdb_kv_store.h"
#include "pdlc/core/telemetry.h"
#include "pdlc/store/kv_telemetry_store.h"

namespace codeco::pdlc {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMinute = 60'000;
// A time on the 5-minute grid in 2023.
const int64_t kT0 = BucketStart(1'700'000'000'000);

// A TelemetryStore over either backend; RocksDB in a scratch directory
// removed with the object.
struct Backend {
  explicit Backend(bool rocksdb, KvTelemetryStoreOptions options = {})
      : rocksdb(rocksdb), options(options) {
    if (rocksdb) {
      std::string name = (fs::temp_directory_path() / "codeco-pdlc-telemetry-XXXXXX").string();
      REQUIRE(mkdtemp(name.data()) != nullptr);
      dir = name;
    }
    Open();
  }
  ~Backend() {
    store.reset();
    kv.reset();
    if (!dir.empty()) {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  }
  void Open() {
    if (rocksdb) {
      absl::StatusOr<std::unique_ptr<KvStore>> opened =
          OpenRocksDbKvStore({.path = (dir / "db").string(),
                              .column_families = {kTelemetryColumnFamily},
                              .sync = false});
      INFO(opened.status());
      REQUIRE(opened.ok());
      kv = std::move(*opened);
    } else {
      kv = NewInMemoryKvStore({kTelemetryColumnFamily});
    }
    absl::StatusOr<std::unique_ptr<TelemetryStore>> made = NewKvTelemetryStore(*kv, options);
    INFO(made.status());
    REQUIRE(made.ok());
    store = std::move(*made);
  }
  // Closes the database and opens it again (RocksDB only).
  void Reopen() {
    store.reset();
    kv.reset();
    Open();
  }

  const bool rocksdb;
  const KvTelemetryStoreOptions options;
  fs::path dir;
  std::unique_ptr<KvStore> kv;
  std::unique_ptr<TelemetryStore> store;
};

TelemetrySample Sample(std::string subject, std::string metric, int64_t time_ms, double value,
                       SubjectKind kind = SubjectKind::kNode) {
  return {.kind = kind,
          .subject = std::move(subject),
          .metric = std::move(metric),
          .time_ms = time_ms,
          .value = value};
}

AppendResult MustAppend(TelemetryStore& store, const std::string& id,
                        const std::vector<TelemetrySample>& samples) {
  absl::StatusOr<AppendResult> result = store.Append(id, samples);
  INFO(result.status());
  REQUIRE(result.ok());
  return *result;
}

std::vector<TimedValue> MustReadRaw(const TelemetryStore& store, const SeriesKey& key, int64_t from,
                                    int64_t to) {
  absl::StatusOr<std::vector<TimedValue>> read = store.ReadRaw(key, from, to);
  INFO(read.status());
  REQUIRE(read.ok());
  return *read;
}

std::vector<TelemetryBucket> MustReadDownsampled(const TelemetryStore& store, const SeriesKey& key,
                                                 int64_t from, int64_t to) {
  absl::StatusOr<std::vector<TelemetryBucket>> read = store.ReadDownsampled(key, from, to);
  INFO(read.status());
  REQUIRE(read.ok());
  return *read;
}

RetentionReport MustRetain(TelemetryStore& store, const RetentionPolicy& policy, int64_t now) {
  absl::StatusOr<RetentionReport> report = store.ApplyRetention(policy, now);
  INFO(report.status());
  REQUIRE(report.ok());
  return *report;
}

const SeriesKey kCpu{SubjectKind::kNode, "n1", kNodeCpuMetric};

// One sample a minute for `minutes` minutes from kT0, value = minute index.
std::vector<TelemetrySample> Minutes(const std::string& subject, const std::string& metric,
                                     int minutes) {
  std::vector<TelemetrySample> out;
  for (int m = 0; m < minutes; ++m) out.push_back(Sample(subject, metric, kT0 + m * kMinute, m));
  return out;
}

TEST_CASE("Telemetry store stores a batch id once") {
  const bool rocksdb = GENERATE(false, true);
  INFO((rocksdb ? "rocksdb" : "in-memory"));
  Backend backend(rocksdb);
  TelemetryStore& store = *backend.store;

  AppendResult first = MustAppend(store, "pull:1", Minutes("n1", kNodeCpuMetric, 3));
  CHECK_FALSE(first.duplicate);
  CHECK(first.stored == 3);
  // A retry with the same id (even with other values) stores nothing.
  std::vector<TelemetrySample> changed = Minutes("n1", kNodeCpuMetric, 4);
  for (TelemetrySample& s : changed) s.value += 100;
  AppendResult retry = MustAppend(store, "pull:1", changed);
  CHECK(retry.duplicate);
  CHECK(retry.stored == 0);
  CHECK(MustReadRaw(store, kCpu, 0, kMaxTelemetryTimeMs) ==
        std::vector<TimedValue>{{kT0, 0}, {kT0 + kMinute, 1}, {kT0 + 2 * kMinute, 2}});
  // Another id with a sample at a stored time replaces it.
  MustAppend(store, "pull:2", {Sample("n1", kNodeCpuMetric, kT0 + kMinute, 7.5)});
  CHECK(MustReadRaw(store, kCpu, kT0 + kMinute, kT0 + 2 * kMinute) ==
        std::vector<TimedValue>{{kT0 + kMinute, 7.5}});
  // An empty batch records its id.
  CHECK_FALSE(MustAppend(store, "pull:empty", {}).duplicate);
  CHECK(MustAppend(store, "pull:empty", {}).duplicate);
}

TEST_CASE("Telemetry store reads half-open time ranges of one series") {
  const bool rocksdb = GENERATE(false, true);
  INFO((rocksdb ? "rocksdb" : "in-memory"));
  Backend backend(rocksdb);
  TelemetryStore& store = *backend.store;
  std::vector<TelemetrySample> batch = Minutes("n1", kNodeCpuMetric, 10);
  // Neighbours in key order: a subject the name prefixes, a longer metric, another kind.
  for (TelemetrySample s : Minutes("n1x", kNodeCpuMetric, 10)) batch.push_back(s);
  for (TelemetrySample s : Minutes("n1", std::string(kNodeCpuMetric) + "2", 10)) batch.push_back(s);
  for (TelemetrySample s : Minutes("n1", kNodeCpuMetric, 10)) {
    s.kind = SubjectKind::kPod;
    batch.push_back(s);
  }
  // Unsorted input is fine.
  std::reverse(batch.begin(), batch.end());
  MustAppend(store, "b", batch);

  CHECK(MustReadRaw(store, kCpu, kT0 + 2 * kMinute, kT0 + 5 * kMinute) ==
        std::vector<TimedValue>{
            {kT0 + 2 * kMinute, 2}, {kT0 + 3 * kMinute, 3}, {kT0 + 4 * kMinute, 4}});
  CHECK(MustReadRaw(store, kCpu, 0, kMaxTelemetryTimeMs).size() == 10);
  CHECK(MustReadRaw(store, kCpu, kT0 + 2 * kMinute + 1, kT0 + 3 * kMinute + 1) ==
        std::vector<TimedValue>{{kT0 + 3 * kMinute, 3}});
  CHECK(MustReadRaw(store, kCpu, kT0 + 5 * kMinute, kT0 + 5 * kMinute).empty());
  CHECK(MustReadRaw(store, kCpu, kT0 + 5 * kMinute, kT0).empty());
  CHECK(MustReadRaw(store, {SubjectKind::kLink, "n1", kNodeCpuMetric}, 0, kMaxTelemetryTimeMs)
            .empty());
  // A bad series name is refused, not scanned.
  absl::StatusOr<std::vector<TimedValue>> bad =
      store.ReadRaw({SubjectKind::kNode, std::string("n1\0x", 4), kNodeCpuMetric}, 0, 1);
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("series.subject"));
}

TEST_CASE("Telemetry store caps what one read returns") {
  KvTelemetryStoreOptions options;
  options.max_read_points = 5;
  Backend backend(false, options);
  MustAppend(*backend.store, "b", Minutes("n1", kNodeCpuMetric, 6));
  CHECK(MustReadRaw(*backend.store, kCpu, kT0, kT0 + 5 * kMinute).size() == 5);
  absl::StatusOr<std::vector<TimedValue>> read =
      backend.store->ReadRaw(kCpu, kT0, kT0 + 6 * kMinute);
  CHECK(read.status().code() == absl::StatusCode::kResourceExhausted);
}

TEST_CASE("Telemetry store lists subjects and their metrics") {
  const bool rocksdb = GENERATE(false, true);
  INFO((rocksdb ? "rocksdb" : "in-memory"));
  Backend backend(rocksdb);
  TelemetryStore& store = *backend.store;
  MustAppend(store, "b1",
             {Sample("n2", kNodeMemoryMetric, kT0, 0.5), Sample("n1", kNodeCpuMetric, kT0, 0.1),
              Sample("n1", kNodeMemoryMetric, kT0, 0.2),
              Sample("default/web-0", kPodCpuMetric, kT0, 0.3, SubjectKind::kPod),
              Sample("edge-a/edge-b", "latency_ms", kT0, 3, SubjectKind::kLink)});
  absl::StatusOr<std::vector<TelemetrySubject>> nodes = store.ListSubjects(SubjectKind::kNode);
  REQUIRE(nodes.ok());
  REQUIRE(nodes->size() == 2);
  CHECK((*nodes)[0].name == "n1");
  CHECK((*nodes)[0].metrics == std::vector<std::string>{kNodeCpuMetric, kNodeMemoryMetric});
  CHECK((*nodes)[1].name == "n2");
  CHECK((*nodes)[1].metrics == std::vector<std::string>{kNodeMemoryMetric});
  absl::StatusOr<std::vector<TelemetrySubject>> all = store.ListSubjects(std::nullopt);
  REQUIRE(all.ok());
  REQUIRE(all->size() == 4);
  // Ordered by kind byte (link 'l', node 'n', pod 'p'), then name.
  CHECK((*all)[0].kind == SubjectKind::kLink);
  CHECK((*all)[0].name == "edge-a/edge-b");
  CHECK((*all)[3].kind == SubjectKind::kPod);
  CHECK((*all)[3].name == "default/web-0");
}

TEST_CASE("Telemetry store refuses bad input naming the sample index") {
  const bool rocksdb = GENERATE(false, true);
  INFO((rocksdb ? "rocksdb" : "in-memory"));
  KvTelemetryStoreOptions options;
  options.limits.max_batch_samples = 10;
  Backend backend(rocksdb, options);
  TelemetryStore& store = *backend.store;

  auto error_of = [&](const std::string& id, const std::vector<TelemetrySample>& samples) {
    absl::StatusOr<AppendResult> result = store.Append(id, samples);
    REQUIRE_FALSE(result.ok());
    CHECK(result.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(result.status().message());
  };
  std::vector<TelemetrySample> batch = Minutes("n1", kNodeCpuMetric, 4);
  batch[2].value = std::nan("");
  CHECK_THAT(error_of("b", batch), Catch::StartsWith("samples[2].value: must be finite"));
  batch[2].value = std::numeric_limits<double>::infinity();
  CHECK_THAT(error_of("b", batch), Catch::StartsWith("samples[2].value: must be finite"));
  batch[2].value = 1;
  batch[1].subject = "bad name";
  CHECK_THAT(error_of("b", batch), Catch::StartsWith("samples[1].subject: byte 3"));
  batch[1].subject = std::string(300, 'a');
  CHECK_THAT(error_of("b", batch), Catch::StartsWith("samples[1].subject: longer than 253"));
  batch[1].subject = "n1";
  batch[3].metric = "";
  CHECK_THAT(error_of("b", batch), Catch::StartsWith("samples[3].metric: must not be empty"));
  batch[3].metric = kNodeCpuMetric;
  batch[0].time_ms = -1;
  CHECK_THAT(error_of("b", batch), Catch::StartsWith("samples[0].time_ms: must be in"));
  batch[0].time_ms = kT0;
  batch[0].kind = static_cast<SubjectKind>(9);
  CHECK_THAT(error_of("b", batch), Catch::StartsWith("samples[0].kind"));
  batch[0].kind = SubjectKind::kNode;
  CHECK_THAT(error_of("bad id", batch), Catch::StartsWith("batch_id: byte 3"));
  CHECK_THAT(error_of("", batch), Catch::StartsWith("batch_id: must not be empty"));
  CHECK_THAT(error_of("b", Minutes("n1", kNodeCpuMetric, 11)),
             Catch::StartsWith("samples: holds 11 samples, more than the limit of 10"));
  // Many bad samples: the first five are listed, then a count.
  std::vector<TelemetrySample> all_bad = Minutes("n1", kNodeCpuMetric, 8);
  for (TelemetrySample& s : all_bad) s.value = std::nan("");
  const std::string message = error_of("b", all_bad);
  CHECK_THAT(message, Catch::Contains("samples[4].value"));
  CHECK_THAT(message, !Catch::Contains("samples[5].value"));
  CHECK_THAT(message, Catch::EndsWith("... and 3 more bad samples"));
  // Nothing of a refused batch was written, and its id is still free.
  CHECK(MustReadRaw(store, kCpu, 0, kMaxTelemetryTimeMs).empty());
  absl::StatusOr<std::vector<TelemetrySubject>> subjects = store.ListSubjects(std::nullopt);
  REQUIRE(subjects.ok());
  CHECK(subjects->empty());
  CHECK(MustAppend(store, "b", Minutes("n1", kNodeCpuMetric, 4)).stored == 4);
}

TEST_CASE("Telemetry retention folds 5-minute means and drops old data") {
  const bool rocksdb = GENERATE(false, true);
  INFO((rocksdb ? "rocksdb" : "in-memory"));
  // Small write batches so retention crosses page and batch boundaries.
  KvTelemetryStoreOptions options;
  options.retention_batch_mutations = 7;
  Backend backend(rocksdb, options);
  TelemetryStore& store = *backend.store;
  // One sample a minute for an hour: value = minute.
  MustAppend(store, "hour", Minutes("n1", kNodeCpuMetric, 60));
  const RetentionPolicy policy{.raw_retention = absl::Minutes(30),
                               .downsample_after = absl::Minutes(20),
                               .downsampled_retention = absl::Minutes(50)};
  const int64_t now = kT0 + 60 * kMinute;

  RetentionReport report = MustRetain(store, policy, now);
  // Folded: [0, 40) min, 8 buckets of 5 samples; raw < 30 min dropped; buckets < 10 min dropped.
  CHECK(report.raw_folded == 40);
  CHECK(report.buckets_written == 8);
  CHECK(report.raw_dropped == 30);
  CHECK(report.buckets_dropped == 2);
  CHECK(report.series_removed == 0);
  CHECK(report.batches_forgotten == 0);

  std::vector<TelemetryBucket> buckets = MustReadDownsampled(store, kCpu, 0, kMaxTelemetryTimeMs);
  REQUIRE(buckets.size() == 6);
  for (size_t i = 0; i < buckets.size(); ++i) {
    const int first_minute = 10 + 5 * static_cast<int>(i);
    INFO("bucket " << i);
    CHECK(buckets[i].start_ms == kT0 + first_minute * kMinute);
    CHECK(buckets[i].count == 5);
    CHECK(buckets[i].mean() == Approx(first_minute + 2));  // mean of m..m+4
    CHECK(buckets[i].min == first_minute);
    CHECK(buckets[i].max == first_minute + 4);
  }
  std::vector<TimedValue> raw = MustReadRaw(store, kCpu, 0, kMaxTelemetryTimeMs);
  REQUIRE(raw.size() == 30);
  CHECK(raw.front().time_ms == kT0 + 30 * kMinute);

  // Merged view: stored buckets before raw, raw-folded after; every mean right.
  absl::StatusOr<std::vector<TelemetryBucket>> merged = ReadBuckets(store, kCpu, 0, now);
  REQUIRE(merged.ok());
  REQUIRE(merged->size() == 10);
  for (size_t i = 0; i < merged->size(); ++i) {
    CHECK((*merged)[i].start_ms == kT0 + (10 + 5 * static_cast<int64_t>(i)) * kMinute);
    CHECK((*merged)[i].mean() == Approx(12 + 5.0 * static_cast<double>(i)));
  }

  // A second run at the same time changes nothing.
  RetentionReport again = MustRetain(store, policy, now);
  CHECK(again.raw_folded == 0);
  CHECK(again.buckets_written == 0);
  CHECK(again.raw_dropped == 0);
  CHECK(again.buckets_dropped == 0);

  // A late sample in a folded bucket (35..40 min) is refolded; one before the
  // raw cut-off is skipped as expired.
  AppendResult late = MustAppend(store, "late",
                                 {Sample("n1", kNodeCpuMetric, kT0 + 36 * kMinute + 30'000, 100),
                                  Sample("n1", kNodeCpuMetric, kT0 + 12 * kMinute, 5)});
  CHECK(late.stored == 1);
  CHECK(late.expired == 1);
  RetentionReport refold = MustRetain(store, policy, now);
  CHECK(refold.buckets_written == 1);
  std::vector<TelemetryBucket> late_bucket =
      MustReadDownsampled(store, kCpu, kT0 + 35 * kMinute, kT0 + 40 * kMinute);
  REQUIRE(late_bucket.size() == 1);
  CHECK(late_bucket[0].count == 6);
  CHECK(late_bucket[0].mean() == Approx((35 + 36 + 37 + 38 + 39 + 100) / 6.0));
  CHECK(late_bucket[0].max == 100);

  // Much later: raw and buckets all past retention, the series and batch ids go.
  RetentionReport end = MustRetain(store, policy, now + 200 * kMinute);
  CHECK(end.raw_dropped == 31);
  CHECK(end.buckets_dropped == 10);  // 10..35 folded first, 40..55 folded now
  CHECK(end.series_removed == 1);
  CHECK(end.batches_forgotten == 2);
  absl::StatusOr<std::vector<TelemetrySubject>> subjects = store.ListSubjects(std::nullopt);
  REQUIRE(subjects.ok());
  CHECK(subjects->empty());
  // Forgotten ids are accepted again; their samples are expired by now.
  AppendResult replay = MustAppend(store, "hour", Minutes("n1", kNodeCpuMetric, 60));
  CHECK_FALSE(replay.duplicate);
  CHECK(replay.expired == 60);
}

TEST_CASE("Telemetry retention without downsampling only drops") {
  Backend backend(false);
  TelemetryStore& store = *backend.store;
  MustAppend(store, "hour", Minutes("n1", kNodeCpuMetric, 60));
  RetentionReport report = MustRetain(store,
                                      {.raw_retention = absl::Minutes(30),
                                       .downsample_after = absl::ZeroDuration(),
                                       .downsampled_retention = absl::Minutes(30)},
                                      kT0 + 60 * kMinute);
  CHECK(report.raw_folded == 0);
  CHECK(report.raw_dropped == 30);
  CHECK(MustReadDownsampled(store, kCpu, 0, kMaxTelemetryTimeMs).empty());
}

TEST_CASE("Telemetry retention policy is checked") {
  CHECK(ValidateRetentionPolicy({}).ok());
  CHECK_THAT(
      std::string(ValidateRetentionPolicy({.raw_retention = absl::ZeroDuration()}).message()),
      Catch::StartsWith("raw_retention"));
  CHECK_THAT(std::string(ValidateRetentionPolicy(
                             {.raw_retention = absl::Hours(1), .downsample_after = absl::Hours(2)})
                             .message()),
             Catch::StartsWith("downsample_after"));
  CHECK_THAT(std::string(ValidateRetentionPolicy({.raw_retention = absl::Hours(2),
                                                  .downsample_after = absl::Hours(1),
                                                  .downsampled_retention = absl::Hours(1)})
                             .message()),
             Catch::StartsWith("downsampled_retention"));
  Backend backend(false);
  CHECK(
      backend.store->ApplyRetention({.raw_retention = absl::ZeroDuration()}, kT0).status().code() ==
      absl::StatusCode::kInvalidArgument);
}

TEST_CASE("Min-max normalisation over a recent window") {
  std::vector<TimedValue> samples;
  for (int m = 0; m < 10; ++m) samples.push_back({kT0 + m * kMinute, 10.0 + m});
  // The last 5 minutes: minutes 5..9, values 15..19.
  NormalisedWindow window = NormaliseMinMax(samples, kT0 + 9 * kMinute, absl::Minutes(5));
  CHECK(window.scale.min == 15);
  CHECK(window.scale.max == 19);
  CHECK_FALSE(window.scale.constant());
  REQUIRE(window.samples.size() == 5);
  CHECK(window.samples.front().time_ms == kT0 + 5 * kMinute);
  CHECK(window.samples.front().value == 0);
  CHECK(window.samples[2].value == Approx(0.5));
  CHECK(window.samples.back().value == 1);
  CHECK(window.scale.Denormalise(0.5) == Approx(17));
  CHECK(window.scale.Normalise(window.scale.Denormalise(0.25)) == Approx(0.25));

  // A constant window maps to 0 and says so; denormalising gives the constant back.
  std::vector<TimedValue> flat = {{kT0, 0.4}, {kT0 + kMinute, 0.4}, {kT0 + 2 * kMinute, 0.4}};
  NormalisedWindow constant = NormaliseMinMax(flat, kT0 + 2 * kMinute, absl::Hours(1));
  CHECK(constant.scale.constant());
  REQUIRE(constant.samples.size() == 3);
  for (const TimedValue& s : constant.samples) CHECK(s.value == 0);
  CHECK(constant.scale.Denormalise(0.7) == 0.4);

  // Nothing in the window.
  NormalisedWindow empty = NormaliseMinMax(samples, kT0 - kMinute, absl::Minutes(5));
  CHECK(empty.samples.empty());
  CHECK(empty.scale.min == 0);
  CHECK(empty.scale.max == 0);
}

TEST_CASE("Stored samples become UsageSeries split at a missing bucket") {
  const bool rocksdb = GENERATE(false, true);
  INFO((rocksdb ? "rocksdb" : "in-memory"));
  Backend backend(rocksdb);
  TelemetryStore& store = *backend.store;
  // Buckets 0..3 and 5..7 (minutes 0..19 and 25..39) hold two samples each;
  // bucket 4 has none: a gap. CPU 0.2/0.4 (mean 0.3), memory 0.5/0.7 (0.6).
  std::vector<TelemetrySample> batch;
  for (int bucket = 0; bucket < 8; ++bucket) {
    if (bucket == 4) continue;
    const int64_t start = kT0 + bucket * 5 * kMinute;
    batch.push_back(Sample("n1", kNodeCpuMetric, start + kMinute, 0.2));
    batch.push_back(Sample("n1", kNodeCpuMetric, start + 3 * kMinute, 0.4));
    batch.push_back(Sample("n1", kNodeMemoryMetric, start, 0.5));
    batch.push_back(Sample("n1", kNodeMemoryMetric, start + 4 * kMinute + 59'999, 0.7));
  }
  // Another node's data does not leak in.
  batch.push_back(Sample("n2", kNodeCpuMetric, kT0, 0.9));
  MustAppend(store, "b", batch);

  // to = minute 37: bucket 7 (35..40) is still filling and left out.
  absl::StatusOr<std::vector<UsageSeries>> series =
      ReadUsageSeries(store, "n1", kT0, kT0 + 37 * kMinute);
  INFO(series.status());
  REQUIRE(series.ok());
  REQUIRE(series->size() == 2);
  const UsageSeries& first = (*series)[0];
  CHECK(first.node == "n1");
  CHECK(first.part == 1);
  CHECK(first.first_minute == kT0 / kMinute);
  REQUIRE(first.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(first.cpu_percent[i] == Approx(30));
    CHECK(first.mem_percent[i] == Approx(60));
  }
  const UsageSeries& second = (*series)[1];
  CHECK(second.part == 2);
  CHECK(second.first_minute == kT0 / kMinute + 25);
  CHECK(second.size() == 2);

  // The same after downsampling folded the older buckets (merged view).
  MustRetain(store,
             {.raw_retention = absl::Minutes(25),
              .downsample_after = absl::Minutes(20),
              .downsampled_retention = absl::Hours(1)},
             kT0 + 45 * kMinute);
  CHECK(MustReadRaw(store, kCpu, 0, kT0 + 20 * kMinute).empty());
  absl::StatusOr<std::vector<UsageSeries>> after =
      ReadUsageSeries(store, "n1", kT0, kT0 + 37 * kMinute);
  REQUIRE(after.ok());
  REQUIRE(after->size() == 2);
  CHECK((*after)[0].size() == 4);
  CHECK((*after)[0].cpu_percent[3] == Approx(30));
  CHECK((*after)[1].size() == 2);

  // A bucket with CPU but no memory splits too.
  std::vector<TelemetryBucket> cpu = {{.start_ms = 0, .count = 1, .sum = 0.1},
                                      {.start_ms = kBucketMs, .count = 1, .sum = 0.2},
                                      {.start_ms = 2 * kBucketMs, .count = 1, .sum = 0.3}};
  std::vector<TelemetryBucket> memory = {cpu[0], cpu[2]};
  std::vector<UsageSeries> split = BucketsToUsageSeries("n3", cpu, memory);
  REQUIRE(split.size() == 2);
  CHECK(split[0].size() == 1);
  CHECK(split[1].first_minute == 10);
  CHECK(split[1].cpu_percent[0] == Approx(30));
}

TEST_CASE("Telemetry store keeps everything across a reopen") {
  Backend backend(true);
  MustAppend(*backend.store, "hour", Minutes("n1", kNodeCpuMetric, 60));
  MustAppend(*backend.store, "pod",
             {Sample("default/web-0", kPodMemoryMetric, kT0, 1e9, SubjectKind::kPod)});
  const RetentionPolicy policy{.raw_retention = absl::Minutes(30),
                               .downsample_after = absl::Minutes(20),
                               .downsampled_retention = absl::Minutes(50)};
  MustRetain(*backend.store, policy, kT0 + 60 * kMinute);
  const std::vector<TimedValue> raw = MustReadRaw(*backend.store, kCpu, 0, kMaxTelemetryTimeMs);
  const std::vector<TelemetryBucket> buckets =
      MustReadDownsampled(*backend.store, kCpu, 0, kMaxTelemetryTimeMs);
  absl::StatusOr<std::vector<TelemetrySubject>> subjects_before =
      backend.store->ListSubjects(std::nullopt);
  REQUIRE(subjects_before.ok());

  backend.Reopen();
  TelemetryStore& store = *backend.store;
  CHECK(MustReadRaw(store, kCpu, 0, kMaxTelemetryTimeMs) == raw);
  std::vector<TelemetryBucket> reopened = MustReadDownsampled(store, kCpu, 0, kMaxTelemetryTimeMs);
  REQUIRE(reopened.size() == buckets.size());
  for (size_t i = 0; i < buckets.size(); ++i) {
    CHECK(reopened[i].start_ms == buckets[i].start_ms);
    CHECK(reopened[i].count == buckets[i].count);
    CHECK(reopened[i].sum == buckets[i].sum);
  }
  absl::StatusOr<std::vector<TelemetrySubject>> subjects = store.ListSubjects(std::nullopt);
  REQUIRE(subjects.ok());
  CHECK(subjects->size() == subjects_before->size());
  // Batch ids, the raw cut-off and the fold watermark survive too.
  CHECK(MustAppend(store, "hour", {}).duplicate);
  CHECK(MustAppend(store, "old", {Sample("n1", kNodeCpuMetric, kT0, 1)}).expired == 1);
  CHECK(MustRetain(store, policy, kT0 + 60 * kMinute).raw_folded == 0);
}

TEST_CASE("Telemetry store needs its column family") {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore({"other"});
  absl::StatusOr<std::unique_ptr<TelemetryStore>> store = NewKvTelemetryStore(*kv);
  CHECK(store.status().code() == absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("Prometheus results map to telemetry samples") {
  const std::vector<TelemetryMapping> mappings = DefaultTelemetryMappings();
  REQUIRE(ValidateTelemetryMappings(mappings).ok());
  const TelemetryMapping& pod_cpu = mappings[2];
  REQUIRE(pod_cpu.query == "pod:container_cpu:rate1m");
  std::vector<LabelledSample> results = {
      {.labels = {{"namespace", "default"}, {"pod", "web-0"}, {"node", "n1"}},
       .time_ms = kT0,
       .value = 0.25},
      {.labels = {{"pod", "web-1"}}, .time_ms = kT0, .value = 0.5},  // no namespace
      {.labels = {{"namespace", "default"}, {"pod", "bad pod"}}, .time_ms = kT0, .value = 1},
      {.labels = {{"namespace", "default"}, {"pod", "web-2"}},
       .time_ms = kT0,
       .value = std::numeric_limits<double>::infinity()},
  };
  MappedSamples mapped = MapToTelemetry(pod_cpu, results);
  REQUIRE(mapped.samples.size() == 1);
  CHECK(mapped.samples[0].kind == SubjectKind::kPod);
  CHECK(mapped.samples[0].subject == "default/web-0");
  CHECK(mapped.samples[0].metric == kPodCpuMetric);
  CHECK(mapped.samples[0].time_ms == kT0);
  CHECK(mapped.samples[0].value == 0.25);
  CHECK(mapped.missing_label == 1);
  CHECK(mapped.invalid_name == 1);
  CHECK(mapped.non_finite == 1);

  // Node restarts: the per-node recorded series, stored under the node's name.
  REQUIRE(mappings.size() == 5);
  const TelemetryMapping& restarts = mappings[4];
  CHECK(restarts.query == "node:kube_pod_container_status_restarts:increase1h");
  CHECK(restarts.kind == SubjectKind::kNode);
  CHECK(restarts.namespace_label.empty());
  MappedSamples restart_samples = MapToTelemetry(
      restarts, {{.labels = {{"cluster", "c1"}, {"node", "n1"}}, .time_ms = kT0, .value = 2.5}});
  REQUIRE(restart_samples.samples.size() == 1);
  CHECK(restart_samples.samples[0].kind == SubjectKind::kNode);
  CHECK(restart_samples.samples[0].subject == "n1");
  CHECK(restart_samples.samples[0].metric == kNodeRestartsMetric);
  CHECK(restart_samples.samples[0].value == 2.5);

  // Batch ids: stable, distinct per mapping, time and part, valid names.
  CHECK(PullBatchId(pod_cpu, kT0) == PullBatchId(pod_cpu, kT0));
  CHECK(PullBatchId(pod_cpu, kT0) != PullBatchId(mappings[3], kT0));
  CHECK(PullBatchId(pod_cpu, kT0) != PullBatchId(pod_cpu, kT0 + 1));
  CHECK(PullBatchId(pod_cpu, kT0, 0) != PullBatchId(pod_cpu, kT0, 1));
  CHECK(ValidateTelemetryName(PullBatchId(pod_cpu, kT0, 3), 200, "id").ok());

  std::vector<TelemetryMapping> bad = {{.query = "", .metric = "x y", .subject_label = ""}};
  const std::string message(ValidateTelemetryMappings(bad).message());
  CHECK_THAT(message, Catch::Contains("mappings[0].query"));
  CHECK_THAT(message, Catch::Contains("mappings[0].metric"));
  CHECK_THAT(message, Catch::Contains("mappings[0].subject_label"));
}

// The TelemetrySource test double: answers from a table, fails on unknown
// queries. (The real source, Prometheus, is exercised in prometheus_client_test.)
class TableSource final : public TelemetrySource {
 public:
  std::map<std::string, std::vector<LabelledSample>> answers;
  absl::StatusOr<InstantQueryResult> QueryInstant(const std::string& query,
                                                  int64_t time_ms) const override {
    auto it = answers.find(query);
    if (it == answers.end()) return absl::UnavailableError("no such query");
    InstantQueryResult result;
    for (LabelledSample s : it->second) {
      s.time_ms = time_ms;
      result.samples.push_back(std::move(s));
    }
    return result;
  }
};

TEST_CASE("Telemetry scraper splits big answers into batches and isolates failures") {
  Backend backend(false);
  TableSource source;
  for (int i = 0; i < 7; ++i) {
    source.answers["instance:node_cpu:rate1m"].push_back(
        {.labels = {{"node", "n" + std::to_string(i)}}, .value = 0.1 * i});
  }
  TelemetryLimits limits;
  limits.max_batch_samples = 3;
  std::vector<TelemetryMapping> mappings = DefaultTelemetryMappings();
  mappings.resize(2);  // node CPU (answered) and node memory (fails)
  TelemetryScraper scraper(source, *backend.store, mappings, limits);
  PullReport report = scraper.Pull(kT0);
  REQUIRE(report.series.size() == 2);
  CHECK(report.series[0].status.ok());
  CHECK(report.series[0].answered == 7);
  CHECK(report.series[0].stored == 7);
  CHECK_FALSE(report.series[0].duplicate);
  CHECK(report.series[1].status.code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(report.status().message()),
             Catch::StartsWith("instance:node_memory:avg1m: no such query"));
  CHECK(report.stored() == 7);
  CHECK(MustReadRaw(*backend.store, {SubjectKind::kNode, "n6", kNodeCpuMetric}, kT0, kT0 + 1) ==
        std::vector<TimedValue>{{kT0, 0.1 * 6}});
  // The same pull again is stored once.
  PullReport again = scraper.Pull(kT0);
  CHECK(again.series[0].duplicate);
  CHECK(again.stored() == 0);
}

}  // namespace
}  // namespace codeco::pdlc
