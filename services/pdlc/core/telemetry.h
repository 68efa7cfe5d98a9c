#pragma once
// PDLC's telemetry data path, the pure part: the samples PDLC keeps (per node,
// pod or link usage read from Prometheus), the storage port they go through
// (TelemetryStore, with retention and 5-minute downsampling), min-max
// normalisation, the conversion to the UsageSeries the forecasters read, and
// the mapping of labelled Prometheus results to samples together with the
// scraper that runs one pull through two ports (TelemetrySource, TelemetryStore).
//
// No I/O and no clock here: every time is passed in, in Unix milliseconds.
// Implementations of the ports: KvTelemetryStore (store/kv_telemetry_store.h)
// and PrometheusClient (server/prometheus_client.h).

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "pdlc/core/usage_series.h"

namespace codeco::pdlc {

// ---------------------------------------------------------------------------
// Samples

/// What a sample is about.
enum class SubjectKind { kNode, kPod, kLink };

/// "node", "pod" or "link".
const char* SubjectKindName(SubjectKind kind);

/// The kind named `name` ("node", "pod" or "link"); nullopt for anything else.
std::optional<SubjectKind> ParseSubjectKind(absl::string_view name);

// Metric names PDLC stores, with their units.
/// Node CPU busy, fraction of the node's CPU (0..1).
inline constexpr char kNodeCpuMetric[] = "cpu_fraction";
/// Node memory used, fraction of the node's memory (0..1).
inline constexpr char kNodeMemoryMetric[] = "memory_fraction";
/// Container restarts of the node's pods in the hour before the sample
/// (count >= 0, possibly fractional: Prometheus' increase() extrapolates).
/// The advisor reads its latest fresh sample as NodeContext::restarts.
inline constexpr char kNodeRestartsMetric[] = "restarts_1h";
/// Pod CPU used, cores.
inline constexpr char kPodCpuMetric[] = "cpu_cores";
/// Pod memory working set, bytes.
inline constexpr char kPodMemoryMetric[] = "memory_bytes";

/// One measurement of one metric of one subject.
struct TelemetrySample {
  /// Node, pod or link.
  SubjectKind kind = SubjectKind::kNode;
  /// The node name, "<namespace>/<pod>" for a pod, the link's name for a link.
  std::string subject;
  /// Metric name, e.g. kNodeCpuMetric.
  std::string metric;
  /// Unix time of the measurement, milliseconds.
  int64_t time_ms = 0;
  /// The measured value (finite).
  double value = 0;
};

/// One stored series: a subject's metric.
struct SeriesKey {
  /// Node, pod or link.
  SubjectKind kind = SubjectKind::kNode;
  /// Subject name (see TelemetrySample::subject).
  std::string subject;
  /// Metric name.
  std::string metric;

  /// Series order: kind, subject, metric.
  friend auto operator<=>(const SeriesKey&, const SeriesKey&) = default;
};

/// A point of one series.
struct TimedValue {
  /// Unix time, milliseconds.
  int64_t time_ms = 0;
  /// The value.
  double value = 0;

  /// Equal when time and value are.
  friend bool operator==(const TimedValue&, const TimedValue&) = default;
};

/// Bounds on what a store accepts, so no input can grow a key or a batch
/// without limit.
struct TelemetryLimits {
  /// Longest subject name, bytes. Default 253 (a DNS name; "<ns>/<pod>" fits
  /// for Kubernetes' 63-byte namespaces and pod names).
  size_t max_subject_bytes = 253;
  /// Longest metric name, bytes. Default 128.
  size_t max_metric_bytes = 128;
  /// Longest batch id, bytes. Default 200.
  size_t max_batch_id_bytes = 200;
  /// Most samples in one appended batch. Default 100 000.
  size_t max_batch_samples = 100'000;
};

/// Latest accepted sample time, ms: 9999-12-31T23:59:59.999Z. Earliest: 0.
inline constexpr int64_t kMaxTelemetryTimeMs = 253'402'300'799'999;

/// OK when `name` can be a subject, metric or batch id name: 1..`max_bytes`
/// bytes of ASCII letters, digits and `- . _ : / @`. INVALID_ARGUMENT
/// starting with `field` otherwise.
absl::Status ValidateTelemetryName(absl::string_view name, size_t max_bytes,
                                   const std::string& field);

/// OK when `sample` has valid names, a time in [0, kMaxTelemetryTimeMs] and a
/// finite value; INVALID_ARGUMENT whose message starts with `field` (e.g.
/// "samples[3]") and names the bad member, e.g. "samples[3].value: must be
/// finite, got nan".
absl::Status ValidateTelemetrySample(const TelemetrySample& sample, const TelemetryLimits& limits,
                                     const std::string& field);

/// Checks a whole batch: its id, its size against `limits.max_batch_samples`
/// and each sample. INVALID_ARGUMENT naming the batch id or the index of the
/// first bad samples (up to five are listed, then how many more there are).
absl::Status ValidateTelemetryBatch(absl::string_view batch_id,
                                    const std::vector<TelemetrySample>& samples,
                                    const TelemetryLimits& limits);

// ---------------------------------------------------------------------------
// The 5-minute grid

/// Width of a downsampling bucket: kSampleStepMinutes, in milliseconds.
inline constexpr int64_t kBucketMs = int64_t{kSampleStepMinutes} * 60'000;

/// Start of the 5-minute bucket holding `time_ms` (time_ms >= 0).
inline int64_t BucketStart(int64_t time_ms) { return time_ms - time_ms % kBucketMs; }

/// Aggregate of the samples of one series in one 5-minute bucket.
struct TelemetryBucket {
  /// Bucket start, Unix ms, a multiple of kBucketMs; covers [start, start + kBucketMs).
  int64_t start_ms = 0;
  /// Samples folded in (>= 1 in any stored bucket).
  uint32_t count = 0;
  /// Their sum.
  double sum = 0;
  /// Their minimum.
  double min = 0;
  /// Their maximum.
  double max = 0;

  /// sum / count (0 for an empty bucket).
  double mean() const { return count == 0 ? 0 : sum / count; }
  /// Adds one sample.
  void Add(double value);
};

/// Folds `samples` (any order) into their 5-minute buckets, ordered by start.
std::vector<TelemetryBucket> FoldIntoBuckets(const std::vector<TimedValue>& samples);

/// One bucket list ordered by start from `stored` (downsampled buckets) and
/// `from_raw` (buckets folded from raw samples); where both hold a start the
/// one from raw wins, since raw samples are complete for every bucket they
/// are still kept for (see TelemetryStore::ApplyRetention).
std::vector<TelemetryBucket> MergeBuckets(const std::vector<TelemetryBucket>& stored,
                                          const std::vector<TelemetryBucket>& from_raw);

// ---------------------------------------------------------------------------
// The storage port

/// What Append did.
struct AppendResult {
  /// True when the batch id was stored before: nothing was written again.
  bool duplicate = false;
  /// Samples written.
  size_t stored = 0;
  /// Samples skipped because they are older than what retention already
  /// dropped (they would be dropped by its next run anyway).
  size_t expired = 0;
};

/// How long data is kept. Raw samples are folded into 5-minute buckets once
/// `downsample_after` old (the raw samples stay until `raw_retention`), raw
/// samples older than `raw_retention` are dropped, and buckets older than
/// `downsampled_retention` are dropped. Cut-offs are aligned down to the
/// 5-minute grid, so a bucket is always folded from all its raw samples.
struct RetentionPolicy {
  /// X: raw samples older than this are dropped. Must be > 0. Default 2 days.
  absl::Duration raw_retention = absl::Hours(48);
  /// Y: raw samples older than this are folded into 5-minute buckets; 0 turns
  /// downsampling off. Must be <= raw_retention. Default 1 hour.
  absl::Duration downsample_after = absl::Hours(1);
  /// Z: buckets older than this are dropped. Must be >= raw_retention.
  /// Default 35 days.
  absl::Duration downsampled_retention = absl::Hours(24 * 35);
};

/// OK when `policy` is consistent (see its fields); INVALID_ARGUMENT naming
/// the field otherwise.
absl::Status ValidateRetentionPolicy(const RetentionPolicy& policy);

/// What one ApplyRetention run did.
struct RetentionReport {
  /// Raw samples folded into new buckets.
  size_t raw_folded = 0;
  /// Buckets written (new ones and ones recomputed after late samples).
  size_t buckets_written = 0;
  /// Raw samples dropped.
  size_t raw_dropped = 0;
  /// Buckets dropped.
  size_t buckets_dropped = 0;
  /// Series left with no data and forgotten.
  size_t series_removed = 0;
  /// Batch ids forgotten (their samples are all past raw retention).
  size_t batches_forgotten = 0;
};

/// A subject and the metrics stored for it.
struct TelemetrySubject {
  /// Node, pod or link.
  SubjectKind kind = SubjectKind::kNode;
  /// Subject name.
  std::string name;
  /// Its metrics, sorted.
  std::vector<std::string> metrics;
};

/// Where samples are kept. Implementations are thread-safe.
class TelemetryStore {
 public:
  virtual ~TelemetryStore() = default;

  /// Stores `samples` atomically under `batch_id`: a batch id seen before
  /// stores nothing and answers `duplicate`, so a retried batch is stored
  /// once. A sample with the (series, time) of a stored one replaces it.
  /// INVALID_ARGUMENT (see ValidateTelemetryBatch) when the batch is bad.
  virtual absl::StatusOr<AppendResult> Append(const std::string& batch_id,
                                              const std::vector<TelemetrySample>& samples) = 0;

  /// The raw samples of `series` with time in [from_ms, to_ms), oldest first.
  /// RESOURCE_EXHAUSTED when there are more than the store reads at once.
  virtual absl::StatusOr<std::vector<TimedValue>> ReadRaw(const SeriesKey& series, int64_t from_ms,
                                                          int64_t to_ms) const = 0;

  /// The downsampled buckets of `series` starting in [from_ms, to_ms),
  /// oldest first.
  virtual absl::StatusOr<std::vector<TelemetryBucket>> ReadDownsampled(const SeriesKey& series,
                                                                       int64_t from_ms,
                                                                       int64_t to_ms) const = 0;

  /// The subjects with stored data (only those of `kind` when set), ordered
  /// by kind then name.
  virtual absl::StatusOr<std::vector<TelemetrySubject>> ListSubjects(
      std::optional<SubjectKind> kind) const = 0;

  /// Applies `policy` as of `now_ms`: folds, then drops (see RetentionPolicy).
  /// Idempotent; safe to interrupt (a rerun completes the work).
  virtual absl::StatusOr<RetentionReport> ApplyRetention(const RetentionPolicy& policy,
                                                         int64_t now_ms) = 0;
};

/// The 5-minute means of `series` for the buckets starting in [from_ms,
/// to_ms): stored buckets merged with buckets folded from raw samples (see
/// MergeBuckets), ordered by start.
absl::StatusOr<std::vector<TelemetryBucket>> ReadBuckets(const TelemetryStore& store,
                                                         const SeriesKey& series, int64_t from_ms,
                                                         int64_t to_ms);

// ---------------------------------------------------------------------------
// Normalisation and usage series

/// The range a min-max normalisation maps onto [0, 1].
struct MinMaxScale {
  /// Smallest value of the window.
  double min = 0;
  /// Largest value of the window.
  double max = 0;

  /// True when min == max: every value of the window was the same.
  bool constant() const { return max == min; }
  /// (value - min) / (max - min); 0 for a constant window (whatever the
  /// value), as scikit-learn's MinMaxScaler does.
  double Normalise(double value) const;
  /// The inverse of Normalise: min + normalised * (max - min) (min for a
  /// constant window).
  double Denormalise(double normalised) const;
};

/// A window of samples normalised to [0, 1].
struct NormalisedWindow {
  /// The window's range (both 0 when the window is empty).
  MinMaxScale scale;
  /// The samples of the window, values normalised, oldest first.
  std::vector<TimedValue> samples;
};

/// Min-max normalisation of a subject's recent window: the samples of
/// `samples` with time in (now_ms - window, now_ms] scaled by their own min
/// and max. A constant window maps every value to 0 (scale.constant() tells
/// it apart from a real minimum); an empty window gives no samples.
NormalisedWindow NormaliseMinMax(const std::vector<TimedValue>& samples, int64_t now_ms,
                                 absl::Duration window);

/// How stored metrics become a UsageSeries.
struct UsageSeriesOptions {
  /// Metric read as CPU. Default kNodeCpuMetric.
  std::string cpu_metric = kNodeCpuMetric;
  /// Metric read as memory. Default kNodeMemoryMetric.
  std::string memory_metric = kNodeMemoryMetric;
  /// Factor from the stored CPU value to percent. Default 100 (fraction -> %).
  double cpu_scale = 100;
  /// Factor from the stored memory value to percent. Default 100.
  double memory_scale = 100;
};

/// UsageSeries of `node` on the 5-minute grid from its CPU and memory
/// buckets (each ordered by start): one sample per bucket start present in
/// both lists, the bucket means times the scales. A start missing from either
/// list splits the series (parts 1, 2, ...), as ParseUsageTrace does;
/// first_minute is the Unix minute of the part's first bucket.
std::vector<UsageSeries> BucketsToUsageSeries(const std::string& node,
                                              const std::vector<TelemetryBucket>& cpu,
                                              const std::vector<TelemetryBucket>& memory,
                                              const UsageSeriesOptions& options = {});

/// The UsageSeries of `node` from `store`, for the complete buckets inside
/// [from_ms, to_ms): those starting at or after from_ms rounded up to the
/// grid and ending at or before to_ms (so the bucket still filling at
/// to_ms = now is left out).
absl::StatusOr<std::vector<UsageSeries>> ReadUsageSeries(const TelemetryStore& store,
                                                         const std::string& node, int64_t from_ms,
                                                         int64_t to_ms,
                                                         const UsageSeriesOptions& options = {});

// ---------------------------------------------------------------------------
// From Prometheus results to samples

/// One sample of an instant query: a labelled value.
struct LabelledSample {
  /// The series' labels (with __name__ when the result keeps it).
  std::map<std::string, std::string> labels;
  /// Evaluation time, Unix ms.
  int64_t time_ms = 0;
  /// The value (finite: sources skip NaN and infinities).
  double value = 0;
};

/// One series of a range query.
struct LabelledSeries {
  /// The series' labels.
  std::map<std::string, std::string> labels;
  /// Its points, oldest first (finite values only).
  std::vector<TimedValue> points;
};

/// What an instant query answered.
struct InstantQueryResult {
  /// The samples with finite values.
  std::vector<LabelledSample> samples;
  /// Samples left out because their value was NaN or infinite.
  size_t non_finite_skipped = 0;
  /// Warnings the source returned with the answer.
  std::vector<std::string> warnings;
};

/// A source of labelled samples (Prometheus' HTTP API in production).
class TelemetrySource {
 public:
  virtual ~TelemetrySource() = default;
  /// Evaluates the PromQL `query` at `time_ms`.
  virtual absl::StatusOr<InstantQueryResult> QueryInstant(const std::string& query,
                                                          int64_t time_ms) const = 0;
};

/// How one queried series becomes samples.
struct TelemetryMapping {
  /// PromQL to query, usually a recorded series name, possibly with a
  /// selector, e.g. `instance:node_cpu:rate1m{cluster="edge-1"}`.
  std::string query;
  /// Kind of the subjects.
  SubjectKind kind = SubjectKind::kNode;
  /// Metric name the samples are stored under.
  std::string metric;
  /// Label whose value names the subject, e.g. "node" or "pod".
  std::string subject_label;
  /// When set, the label whose value prefixes the subject name as
  /// "<value>/<subject>" (e.g. "namespace" for pods). Default: none.
  std::string namespace_label;
};

/// The series CODECO's recording rules produce, in this order:
/// instance:node_cpu:rate1m and instance:node_memory:avg1m per node
/// (fractions), pod:container_cpu:rate1m (cores) and
/// pod:container_memory_working_set:avg1m (bytes) per "<namespace>/<pod>",
/// and node:kube_pod_container_status_restarts:increase1h per node
/// (container restarts in the last hour, stored as kNodeRestartsMetric).
std::vector<TelemetryMapping> DefaultTelemetryMappings();

/// OK when every mapping has a query, a valid metric name and a subject
/// label; INVALID_ARGUMENT naming "mappings[i].<field>" otherwise.
absl::Status ValidateTelemetryMappings(const std::vector<TelemetryMapping>& mappings,
                                       const TelemetryLimits& limits = {});

/// Samples mapped from one query result.
struct MappedSamples {
  /// The samples, in result order.
  std::vector<TelemetrySample> samples;
  /// Results without the subject (or namespace) label.
  size_t missing_label = 0;
  /// Results whose value was not finite.
  size_t non_finite = 0;
  /// Results whose subject name the store would refuse (charset, length).
  size_t invalid_name = 0;
};

/// Maps `results` of `mapping`'s query to samples, skipping (and counting)
/// those a store would refuse, so one odd label does not block a pull.
MappedSamples MapToTelemetry(const TelemetryMapping& mapping,
                             const std::vector<LabelledSample>& results,
                             const TelemetryLimits& limits = {});

/// The batch id of part `part` of a pull of `mapping` at `time_ms`: the
/// same pull retried gets the same ids, so it is stored once.
std::string PullBatchId(const TelemetryMapping& mapping, int64_t time_ms, size_t part = 0);

/// What one pull did for one mapping.
struct SeriesPullReport {
  /// The mapping's query.
  std::string query;
  /// OK, or why the query or the append failed.
  absl::Status status;
  /// Samples the query answered (finite ones).
  size_t answered = 0;
  /// Samples written to the store.
  size_t stored = 0;
  /// Samples skipped: non-finite, missing label, invalid name or expired.
  size_t skipped = 0;
  /// True when every batch of this pull had been stored before.
  bool duplicate = false;
};

/// What one pull did.
struct PullReport {
  /// One entry per mapping, in mapping order.
  std::vector<SeriesPullReport> series;

  /// OK when every mapping succeeded, else the first failure prefixed with
  /// its query.
  absl::Status status() const;
  /// Samples written, all mappings together.
  size_t stored() const;
};

/// Runs pulls: for each mapping, an instant query at the pull time, the
/// mapping, and appends to the store in batches of at most
/// limits.max_batch_samples, with ids from PullBatchId. Thread-compatible.
class TelemetryScraper {
 public:
  /// A scraper reading `source` into `store` (both not owned, outliving it).
  /// Check `ValidateTelemetryMappings(mappings)` first: Pull reports bad
  /// mappings as failures.
  TelemetryScraper(const TelemetrySource& source, TelemetryStore& store,
                   std::vector<TelemetryMapping> mappings, TelemetryLimits limits = {});

  /// One pull at `time_ms`. A failing mapping does not stop the others.
  PullReport Pull(int64_t time_ms);

  /// The mappings it pulls.
  const std::vector<TelemetryMapping>& mappings() const { return mappings_; }

 private:
  const TelemetrySource& source_;
  TelemetryStore& store_;
  std::vector<TelemetryMapping> mappings_;
  TelemetryLimits limits_;
};

}  // namespace codeco::pdlc
