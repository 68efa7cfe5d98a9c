#include "pdlc/store/kv_telemetry_store.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "codeco/common/status.h"

namespace codeco::pdlc {
namespace {

constexpr char kVersion = '\x01';
constexpr char kRaw = 'R';
constexpr char kBucket = 'D';
constexpr char kDirty = 'X';
constexpr char kSeries = 'S';
constexpr char kBatch = 'B';
constexpr char kRawCutoffKey[] = "Mraw_cutoff";

// ---- Encoding ---------------------------------------------------------------

void AppendU64(std::string* out, uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

void AppendU32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

uint64_t ReadU64(std::string_view in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}

uint32_t ReadU32(std::string_view in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}

void AppendF64(std::string* out, double v) { AppendU64(out, std::bit_cast<uint64_t>(v)); }
double ReadF64(std::string_view in) { return std::bit_cast<double>(ReadU64(in)); }

char KindByte(SubjectKind kind) {
  switch (kind) {
    case SubjectKind::kNode:
      return 'n';
    case SubjectKind::kPod:
      return 'p';
    case SubjectKind::kLink:
      return 'l';
  }
  return '?';
}

std::optional<SubjectKind> KindFromByte(char c) {
  switch (c) {
    case 'n':
      return SubjectKind::kNode;
    case 'p':
      return SubjectKind::kPod;
    case 'l':
      return SubjectKind::kLink;
  }
  return std::nullopt;
}

// <kind><subject>0x00<metric>
std::string SeriesId(const SeriesKey& key) {
  std::string out(1, KindByte(key.kind));
  out += key.subject;
  out.push_back('\0');
  out += key.metric;
  return out;
}

// The prefix of the timed keys of `series` in key space `space` ('R', 'D', 'X').
std::string TimedPrefix(char space, const std::string& series) {
  std::string out(1, space);
  out += series;
  out.push_back('\0');
  return out;
}

std::string TimedKey(const std::string& prefix, int64_t time_ms) {
  std::string out = prefix;
  AppendU64(&out, static_cast<uint64_t>(time_ms));
  return out;
}

// The time at the end of a timed key (its prefix already matched).
int64_t KeyTime(std::string_view key) {
  return static_cast<int64_t>(ReadU64(key.substr(key.size() - 8)));
}

std::string EncodeRaw(double value) {
  std::string out(1, kVersion);
  AppendF64(&out, value);
  return out;
}

std::string EncodeBucket(const TelemetryBucket& bucket) {
  std::string out(1, kVersion);
  AppendU32(&out, bucket.count);
  AppendF64(&out, bucket.sum);
  AppendF64(&out, bucket.min);
  AppendF64(&out, bucket.max);
  return out;
}

std::string EncodeTime(int64_t time_ms) {
  std::string out(1, kVersion);
  AppendU64(&out, static_cast<uint64_t>(time_ms));
  return out;
}

absl::Status Corrupt(std::string_view what, std::string_view key) {
  std::string printable;
  for (char c : key) printable += (c >= 0x20 && c < 0x7f) ? c : '.';
  return absl::DataLossError(absl::StrCat("telemetry: cannot decode ",
                                          absl::string_view(what.data(), what.size()), " at key ",
                                          printable));
}

absl::StatusOr<double> DecodeRaw(std::string_view value, std::string_view key) {
  if (value.size() != 9 || value[0] != kVersion) return Corrupt("raw sample", key);
  return ReadF64(value.substr(1));
}

absl::StatusOr<TelemetryBucket> DecodeBucket(std::string_view value, std::string_view key) {
  if (value.size() != 29 || value[0] != kVersion) return Corrupt("bucket", key);
  TelemetryBucket bucket;
  bucket.start_ms = KeyTime(key);
  bucket.count = ReadU32(value.substr(1));
  bucket.sum = ReadF64(value.substr(5));
  bucket.min = ReadF64(value.substr(13));
  bucket.max = ReadF64(value.substr(21));
  return bucket;
}

// A leading i64 after the version byte: a watermark, a cut-off or a batch's newest time.
absl::StatusOr<int64_t> DecodeTime(std::string_view value, std::string_view key) {
  if (value.size() < 9 || value[0] != kVersion) return Corrupt("record", key);
  return static_cast<int64_t>(ReadU64(value.substr(1)));
}

// ---- Retention helpers --------------------------------------------------------

// Groups mutations into batches of at most `limit`, written as they fill.
class ChunkedWriter {
 public:
  ChunkedWriter(KvStore& store, size_t limit) : store_(store), limit_(limit) {}
  absl::Status Put(std::string key, std::string value) {
    batch_.Put(kTelemetryColumnFamily, std::move(key), std::move(value));
    return MaybeFlush();
  }
  absl::Status Delete(std::string key) {
    batch_.Delete(kTelemetryColumnFamily, std::move(key));
    return MaybeFlush();
  }
  absl::Status Flush() {
    if (batch_.empty()) return absl::OkStatus();
    absl::Status status = store_.Write(batch_);
    batch_ = KvWriteBatch();
    return status;
  }

 private:
  absl::Status MaybeFlush() {
    return batch_.mutations().size() >= limit_ ? Flush() : absl::OkStatus();
  }
  KvStore& store_;
  const size_t limit_;
  KvWriteBatch batch_;
};

// One page of keys and values copied out of a scan, so the caller may write
// between pages (a store may hold a lock while it scans).
struct Page {
  std::vector<std::pair<std::string, std::string>> entries;
  bool more = false;
};

absl::StatusOr<Page> ScanPage(const KvStore& store, const std::string& prefix,
                              const std::string& start_after, size_t limit) {
  Page page;
  KvScanOptions options;
  options.prefix = prefix;
  options.start_after = start_after;
  options.limit = limit;
  RETURN_IF_ERROR(store.Scan(kTelemetryColumnFamily, options,
                             [&](std::string_view key, std::string_view value) {
                               page.entries.emplace_back(key, value);
                               return true;
                             }));
  page.more = page.entries.size() == limit;
  return page;
}

// The key to start a scan of `prefix` after so that the first key visited
// has time >= from_ms.
std::string StartAfter(const std::string& prefix, int64_t from_ms) {
  return from_ms > 0 ? TimedKey(prefix, from_ms - 1) : std::string();
}

class KvTelemetryStore final : public TelemetryStore {
 public:
  KvTelemetryStore(KvStore& store, const KvTelemetryStoreOptions& options, int64_t raw_cutoff)
      : store_(store), options_(options), raw_cutoff_(raw_cutoff) {}

  absl::StatusOr<AppendResult> Append(const std::string& batch_id,
                                      const std::vector<TelemetrySample>& samples) override {
    RETURN_IF_ERROR(ValidateTelemetryBatch(batch_id, samples, options_.limits));
    const std::string batch_key = std::string(1, kBatch) + batch_id;
    absl::MutexLock lock(&mu_);
    absl::StatusOr<std::string> seen = store_.Get(kTelemetryColumnFamily, batch_key);
    if (seen.ok()) return AppendResult{.duplicate = true};
    if (!absl::IsNotFound(seen.status())) return seen.status();

    AppendResult result;
    KvWriteBatch batch;
    // Fold watermark per series of the batch; new series get an index entry.
    std::map<std::string, int64_t> watermarks;
    int64_t newest = -1;
    for (const TelemetrySample& sample : samples) {
      if (sample.time_ms < raw_cutoff_) {
        ++result.expired;
        continue;
      }
      const std::string series = SeriesId({sample.kind, sample.subject, sample.metric});
      auto [it, inserted] = watermarks.emplace(series, 0);
      if (inserted) {
        const std::string index_key = std::string(1, kSeries) + series;
        absl::StatusOr<std::string> index = store_.Get(kTelemetryColumnFamily, index_key);
        if (index.ok()) {
          ASSIGN_OR_RETURN(it->second, DecodeTime(*index, index_key));
        } else if (absl::IsNotFound(index.status())) {
          batch.Put(kTelemetryColumnFamily, index_key, EncodeTime(0));
        } else {
          return index.status();
        }
      }
      if (sample.time_ms < it->second) {
        // Its bucket was folded already: recompute it at the next retention run.
        batch.Put(kTelemetryColumnFamily,
                  TimedKey(TimedPrefix(kDirty, series), BucketStart(sample.time_ms)), "");
      }
      batch.Put(kTelemetryColumnFamily, TimedKey(TimedPrefix(kRaw, series), sample.time_ms),
                EncodeRaw(sample.value));
      newest = std::max(newest, sample.time_ms);
      ++result.stored;
    }
    std::string record = EncodeTime(newest);
    AppendU32(&record, static_cast<uint32_t>(result.stored));
    batch.Put(kTelemetryColumnFamily, batch_key, std::move(record));
    RETURN_IF_ERROR(store_.Write(batch));
    return result;
  }

  absl::StatusOr<std::vector<TimedValue>> ReadRaw(const SeriesKey& series, int64_t from_ms,
                                                  int64_t to_ms) const override {
    std::vector<TimedValue> out;
    RETURN_IF_ERROR(ScanRange(kRaw, series, from_ms, to_ms,
                              [&](std::string_view key, std::string_view value) -> absl::Status {
                                ASSIGN_OR_RETURN(double v, DecodeRaw(value, key));
                                out.push_back({KeyTime(key), v});
                                return absl::OkStatus();
                              }));
    return out;
  }

  absl::StatusOr<std::vector<TelemetryBucket>> ReadDownsampled(const SeriesKey& series,
                                                               int64_t from_ms,
                                                               int64_t to_ms) const override {
    std::vector<TelemetryBucket> out;
    RETURN_IF_ERROR(ScanRange(kBucket, series, from_ms, to_ms,
                              [&](std::string_view key, std::string_view value) -> absl::Status {
                                ASSIGN_OR_RETURN(TelemetryBucket bucket, DecodeBucket(value, key));
                                out.push_back(bucket);
                                return absl::OkStatus();
                              }));
    return out;
  }

  absl::StatusOr<std::vector<TelemetrySubject>> ListSubjects(
      std::optional<SubjectKind> kind) const override {
    std::vector<TelemetrySubject> out;
    KvScanOptions options;
    options.prefix = std::string(1, kSeries);
    if (kind.has_value()) options.prefix.push_back(KindByte(*kind));
    absl::Status bad;
    RETURN_IF_ERROR(
        store_.Scan(kTelemetryColumnFamily, options, [&](std::string_view key, std::string_view) {
          const size_t zero = key.find('\0');
          std::optional<SubjectKind> k = key.size() > 2 ? KindFromByte(key[1]) : std::nullopt;
          if (!k.has_value() || zero == std::string_view::npos || zero < 3) {
            bad = Corrupt("series index", key);
            return false;
          }
          std::string_view subject = key.substr(2, zero - 2);
          if (out.empty() || out.back().kind != *k || out.back().name != subject) {
            out.push_back({.kind = *k, .name = std::string(subject)});
          }
          out.back().metrics.emplace_back(key.substr(zero + 1));
          return true;
        }));
    RETURN_IF_ERROR(bad);
    return out;
  }

  absl::StatusOr<RetentionReport> ApplyRetention(const RetentionPolicy& policy,
                                                 int64_t now_ms) override {
    RETURN_IF_ERROR(ValidateRetentionPolicy(policy));
    if (now_ms < 0 || now_ms > kMaxTelemetryTimeMs) {
      return InvalidFieldError("now_ms", absl::StrCat("out of range: ", now_ms));
    }
    auto cut = [&](absl::Duration age) {
      return BucketStart(std::max<int64_t>(0, now_ms - absl::ToInt64Milliseconds(age)));
    };
    const bool downsample = policy.downsample_after > absl::ZeroDuration();
    const int64_t fold_before = downsample ? cut(policy.downsample_after) : 0;
    const int64_t bucket_cutoff = cut(policy.downsampled_retention);
    absl::MutexLock run(&retention_mu_);
    RetentionReport report;

    // 1. The raw cut-off first: from now on Append skips samples it would drop,
    //    so every bucket at or after it keeps all its raw samples.
    int64_t raw_cutoff;
    {
      absl::MutexLock lock(&mu_);
      const int64_t wanted = cut(policy.raw_retention);
      if (wanted > raw_cutoff_) {
        RETURN_IF_ERROR(store_.Put(kTelemetryColumnFamily, kRawCutoffKey, EncodeTime(wanted)));
        raw_cutoff_ = wanted;
      }
      raw_cutoff = raw_cutoff_;
    }

    // 2. Per series: fold, recompute marked buckets, move the watermark, then
    //    drop. A run cut short leaves the watermark behind the buckets written,
    //    and the next run folds them again from the same raw samples.
    const std::string index_prefix(1, kSeries);
    std::string after;
    for (;;) {
      ASSIGN_OR_RETURN(Page page, ScanPage(store_, index_prefix, after, kIndexPage));
      for (const auto& [key, value] : page.entries) {
        absl::MutexLock lock(&mu_);
        RETURN_IF_ERROR(
            RetainSeries(key, downsample, fold_before, raw_cutoff, bucket_cutoff, &report));
      }
      if (!page.more) break;
      after = page.entries.back().first;
    }

    // 3. Batch ids whose samples are all past raw retention.
    const std::string batch_prefix(1, kBatch);
    after.clear();
    for (;;) {
      ASSIGN_OR_RETURN(Page page, ScanPage(store_, batch_prefix, after, kIndexPage));
      KvWriteBatch forget;
      for (const auto& [key, value] : page.entries) {
        ASSIGN_OR_RETURN(int64_t newest, DecodeTime(value, key));
        if (newest < raw_cutoff) forget.Delete(kTelemetryColumnFamily, key);
      }
      report.batches_forgotten += forget.mutations().size();
      RETURN_IF_ERROR(store_.Write(forget));
      if (!page.more) break;
      after = page.entries.back().first;
    }
    return report;
  }

 private:
  static constexpr size_t kIndexPage = 1000;

  // Visits the keys of `series` in `space` with time in [from_ms, to_ms).
  absl::Status ScanRange(
      char space, const SeriesKey& series, int64_t from_ms, int64_t to_ms,
      const std::function<absl::Status(std::string_view, std::string_view)>& visit) const {
    RETURN_IF_ERROR(CheckSeries(series));
    from_ms = std::max<int64_t>(from_ms, 0);
    if (to_ms <= from_ms) return absl::OkStatus();
    KvScanOptions options;
    options.prefix = TimedPrefix(space, SeriesId(series));
    options.start_after = StartAfter(options.prefix, from_ms);
    absl::Status status;
    size_t visited = 0;
    RETURN_IF_ERROR(store_.Scan(
        kTelemetryColumnFamily, options, [&](std::string_view key, std::string_view value) {
          if (KeyTime(key) >= to_ms) return false;
          if (++visited > options_.max_read_points) {
            status = absl::ResourceExhaustedError(
                absl::StrCat("telemetry: more than ", options_.max_read_points,
                             " points in the range; read a shorter one"));
            return false;
          }
          status = visit(key, value);
          return status.ok();
        }));
    return status;
  }

  absl::Status CheckSeries(const SeriesKey& series) const {
    if (ParseSubjectKind(SubjectKindName(series.kind)) != series.kind) {
      return InvalidFieldError("series.kind", "unknown subject kind");
    }
    RETURN_IF_ERROR(
        ValidateTelemetryName(series.subject, options_.limits.max_subject_bytes, "series.subject"));
    return ValidateTelemetryName(series.metric, options_.limits.max_metric_bytes, "series.metric");
  }

  // Retention of the series whose index key is `index_key`.
  absl::Status RetainSeries(const std::string& index_key, bool downsample, int64_t fold_before,
                            int64_t raw_cutoff, int64_t bucket_cutoff, RetentionReport* report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // Read again under the lock: Append may have changed it since the page was read.
    absl::StatusOr<std::string> index = store_.Get(kTelemetryColumnFamily, index_key);
    if (absl::IsNotFound(index.status())) return absl::OkStatus();
    if (!index.ok()) return index.status();
    ASSIGN_OR_RETURN(const int64_t watermark, DecodeTime(*index, index_key));
    const std::string series = index_key.substr(1);
    const std::string raw_prefix = TimedPrefix(kRaw, series);
    const std::string bucket_prefix = TimedPrefix(kBucket, series);
    const std::string dirty_prefix = TimedPrefix(kDirty, series);
    const size_t page_size = options_.retention_batch_mutations;
    ChunkedWriter writer(store_, page_size);

    // Fold [watermark, fold_before) into new buckets.
    if (downsample && fold_before > watermark) {
      std::optional<TelemetryBucket> current;
      std::string after = StartAfter(raw_prefix, watermark);
      bool done = false;
      while (!done) {
        ASSIGN_OR_RETURN(Page page, ScanPage(store_, raw_prefix, after, page_size));
        for (const auto& [key, value] : page.entries) {
          const int64_t time = KeyTime(key);
          if (time >= fold_before) {
            done = true;
            break;
          }
          ASSIGN_OR_RETURN(double v, DecodeRaw(value, key));
          if (current.has_value() && current->start_ms != BucketStart(time)) {
            RETURN_IF_ERROR(
                writer.Put(TimedKey(bucket_prefix, current->start_ms), EncodeBucket(*current)));
            ++report->buckets_written;
            current.reset();
          }
          if (!current.has_value()) current = TelemetryBucket{.start_ms = BucketStart(time)};
          current->Add(v);
          ++report->raw_folded;
        }
        if (!page.more) break;
        after = page.entries.back().first;
      }
      if (current.has_value()) {
        RETURN_IF_ERROR(
            writer.Put(TimedKey(bucket_prefix, current->start_ms), EncodeBucket(*current)));
        ++report->buckets_written;
      }
    }

    // Recompute the buckets late samples fell into (their raw samples are all
    // still there: Append skips samples before the raw cut-off, which is on
    // the grid).
    for (std::string after;;) {
      ASSIGN_OR_RETURN(Page page, ScanPage(store_, dirty_prefix, after, page_size));
      for (const auto& [key, value] : page.entries) {
        const int64_t start = KeyTime(key);
        TelemetryBucket bucket{.start_ms = start};
        KvScanOptions options;
        options.prefix = raw_prefix;
        options.start_after = StartAfter(raw_prefix, start);
        absl::Status decoded;
        RETURN_IF_ERROR(store_.Scan(kTelemetryColumnFamily, options,
                                    [&](std::string_view raw_key, std::string_view raw_value) {
                                      if (KeyTime(raw_key) >= start + kBucketMs) return false;
                                      absl::StatusOr<double> v = DecodeRaw(raw_value, raw_key);
                                      if (!v.ok()) {
                                        decoded = v.status();
                                        return false;
                                      }
                                      bucket.Add(*v);
                                      return true;
                                    }));
        RETURN_IF_ERROR(decoded);
        if (bucket.count > 0) {
          RETURN_IF_ERROR(writer.Put(TimedKey(bucket_prefix, start), EncodeBucket(bucket)));
          ++report->buckets_written;
        }
        RETURN_IF_ERROR(writer.Delete(key));
      }
      if (!page.more) break;
      after = page.entries.back().first;
    }

    // The watermark, written with (after) the buckets it covers.
    const int64_t new_watermark = std::max(watermark, downsample ? fold_before : watermark);
    if (new_watermark != watermark) {
      RETURN_IF_ERROR(writer.Put(index_key, EncodeTime(new_watermark)));
    }
    RETURN_IF_ERROR(writer.Flush());

    // Drop what is past retention.
    ASSIGN_OR_RETURN(size_t raw_dropped, DropBefore(raw_prefix, raw_cutoff, &writer));
    ASSIGN_OR_RETURN(size_t buckets_dropped, DropBefore(bucket_prefix, bucket_cutoff, &writer));
    RETURN_IF_ERROR(writer.Flush());
    report->raw_dropped += raw_dropped;
    report->buckets_dropped += buckets_dropped;

    // Forget a series with nothing left.
    ASSIGN_OR_RETURN(bool has_raw, HasAny(raw_prefix));
    ASSIGN_OR_RETURN(bool has_buckets, HasAny(bucket_prefix));
    if (!has_raw && !has_buckets) {
      RETURN_IF_ERROR(store_.Delete(kTelemetryColumnFamily, index_key));
      ++report->series_removed;
    }
    return absl::OkStatus();
  }

  // Deletes the keys under `prefix` with time < `before`; how many.
  absl::StatusOr<size_t> DropBefore(const std::string& prefix, int64_t before,
                                    ChunkedWriter* writer) {
    size_t dropped = 0;
    std::string after;
    for (;;) {
      ASSIGN_OR_RETURN(Page page,
                       ScanPage(store_, prefix, after, options_.retention_batch_mutations));
      for (const auto& [key, value] : page.entries) {
        if (KeyTime(key) >= before) return dropped;
        RETURN_IF_ERROR(writer->Delete(key));
        ++dropped;
      }
      if (!page.more) return dropped;
      // Deletes may not be written yet: continue after the last key seen.
      after = page.entries.back().first;
    }
  }

  absl::StatusOr<bool> HasAny(const std::string& prefix) const {
    ASSIGN_OR_RETURN(Page page, ScanPage(store_, prefix, "", 1));
    return !page.entries.empty();
  }

  KvStore& store_;
  const KvTelemetryStoreOptions options_;
  // Serialises retention runs.
  absl::Mutex retention_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // Held by Append and by retention for one series at a time, so an append
  // never interleaves with the fold of a series it writes to.
  absl::Mutex mu_;
  int64_t raw_cutoff_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<TelemetryStore>> NewKvTelemetryStore(
    KvStore& store, const KvTelemetryStoreOptions& options) {
  const std::vector<std::string> families = store.ColumnFamilies();
  if (std::find(families.begin(), families.end(), kTelemetryColumnFamily) == families.end()) {
    return absl::FailedPreconditionError(absl::StrCat("telemetry store: the KvStore has no \"",
                                                      kTelemetryColumnFamily, "\" column family"));
  }
  if (options.max_read_points == 0 || options.retention_batch_mutations == 0 ||
      options.limits.max_batch_samples == 0 || options.limits.max_subject_bytes == 0 ||
      options.limits.max_metric_bytes == 0 || options.limits.max_batch_id_bytes == 0) {
    return absl::InvalidArgumentError("telemetry store: limits must be positive");
  }
  int64_t raw_cutoff = 0;
  absl::StatusOr<std::string> cutoff = store.Get(kTelemetryColumnFamily, kRawCutoffKey);
  if (cutoff.ok()) {
    ASSIGN_OR_RETURN(raw_cutoff, DecodeTime(*cutoff, kRawCutoffKey));
  } else if (!absl::IsNotFound(cutoff.status())) {
    return cutoff.status();
  }
  return std::unique_ptr<TelemetryStore>(new KvTelemetryStore(store, options, raw_cutoff));
}

}  // namespace codeco::pdlc
