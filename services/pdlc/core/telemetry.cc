#include "pdlc/core/telemetry.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "codeco/common/status.h"

namespace codeco::pdlc {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == ':' || c == '/' || c == '@';
}

// Printable excerpt of untrusted text for an error message.
std::string Excerpt(absl::string_view text) {
  std::string out;
  for (char c : text.substr(0, 40)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (text.size() > 40) out += "...";
  return out;
}

// Smallest multiple of kBucketMs >= time_ms (time_ms >= 0).
int64_t AlignUp(int64_t time_ms) {
  const int64_t start = BucketStart(time_ms);
  return start == time_ms ? start : start + kBucketMs;
}

}  // namespace

const char* SubjectKindName(SubjectKind kind) {
  switch (kind) {
    case SubjectKind::kNode:
      return "node";
    case SubjectKind::kPod:
      return "pod";
    case SubjectKind::kLink:
      return "link";
  }
  return "unknown";
}

std::optional<SubjectKind> ParseSubjectKind(absl::string_view name) {
  if (name == "node") return SubjectKind::kNode;
  if (name == "pod") return SubjectKind::kPod;
  if (name == "link") return SubjectKind::kLink;
  return std::nullopt;
}

absl::Status ValidateTelemetryName(absl::string_view name, size_t max_bytes,
                                   const std::string& field) {
  if (name.empty()) return InvalidFieldError(field, "must not be empty");
  if (name.size() > max_bytes) {
    return InvalidFieldError(field, absl::StrCat("longer than ", max_bytes, " bytes (", name.size(),
                                                 "): \"", Excerpt(name), "\""));
  }
  for (size_t i = 0; i < name.size(); ++i) {
    if (!IsNameChar(name[i])) {
      return InvalidFieldError(field,
                               absl::StrCat("byte ", i, " of \"", Excerpt(name),
                                            "\" is not a letter, digit or one of - . _ : / @"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTelemetrySample(const TelemetrySample& sample, const TelemetryLimits& limits,
                                     const std::string& field) {
  if (ParseSubjectKind(SubjectKindName(sample.kind)) != sample.kind) {
    return InvalidFieldError(field + ".kind", "unknown subject kind");
  }
  RETURN_IF_ERROR(
      ValidateTelemetryName(sample.subject, limits.max_subject_bytes, field + ".subject"));
  RETURN_IF_ERROR(ValidateTelemetryName(sample.metric, limits.max_metric_bytes, field + ".metric"));
  if (sample.time_ms < 0 || sample.time_ms > kMaxTelemetryTimeMs) {
    return InvalidFieldError(
        field + ".time_ms",
        absl::StrCat("must be in [0, ", kMaxTelemetryTimeMs, "], got ", sample.time_ms));
  }
  if (!std::isfinite(sample.value)) {
    return InvalidFieldError(field + ".value", absl::StrCat("must be finite, got ", sample.value));
  }
  return absl::OkStatus();
}

absl::Status ValidateTelemetryBatch(absl::string_view batch_id,
                                    const std::vector<TelemetrySample>& samples,
                                    const TelemetryLimits& limits) {
  RETURN_IF_ERROR(ValidateTelemetryName(batch_id, limits.max_batch_id_bytes, "batch_id"));
  if (samples.size() > limits.max_batch_samples) {
    return InvalidFieldError(
        "samples", absl::StrCat("holds ", samples.size(), " samples, more than the limit of ",
                                limits.max_batch_samples));
  }
  constexpr size_t kListed = 5;
  std::vector<std::string> lines;
  size_t bad = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    absl::Status status =
        ValidateTelemetrySample(samples[i], limits, absl::StrCat("samples[", i, "]"));
    if (status.ok()) continue;
    if (++bad <= kListed) lines.emplace_back(status.message());
  }
  if (bad == 0) return absl::OkStatus();
  if (bad > kListed) lines.push_back(absl::StrCat("... and ", bad - kListed, " more bad samples"));
  return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
}

void TelemetryBucket::Add(double value) {
  if (count == 0) {
    min = max = value;
  } else {
    min = std::min(min, value);
    max = std::max(max, value);
  }
  sum += value;
  ++count;
}

std::vector<TelemetryBucket> FoldIntoBuckets(const std::vector<TimedValue>& samples) {
  std::vector<TimedValue> sorted = samples;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const TimedValue& a, const TimedValue& b) { return a.time_ms < b.time_ms; });
  std::vector<TelemetryBucket> out;
  for (const TimedValue& sample : sorted) {
    const int64_t start = BucketStart(sample.time_ms);
    if (out.empty() || out.back().start_ms != start) out.push_back({.start_ms = start});
    out.back().Add(sample.value);
  }
  return out;
}

std::vector<TelemetryBucket> MergeBuckets(const std::vector<TelemetryBucket>& stored,
                                          const std::vector<TelemetryBucket>& from_raw) {
  std::vector<TelemetryBucket> out;
  out.reserve(stored.size() + from_raw.size());
  size_t i = 0, j = 0;
  while (i < stored.size() || j < from_raw.size()) {
    if (j == from_raw.size() || (i < stored.size() && stored[i].start_ms < from_raw[j].start_ms)) {
      out.push_back(stored[i++]);
    } else {
      if (i < stored.size() && stored[i].start_ms == from_raw[j].start_ms) ++i;
      out.push_back(from_raw[j++]);
    }
  }
  return out;
}

absl::Status ValidateRetentionPolicy(const RetentionPolicy& policy) {
  if (policy.raw_retention <= absl::ZeroDuration()) {
    return InvalidFieldError("raw_retention", "must be positive");
  }
  if (policy.downsample_after < absl::ZeroDuration() ||
      policy.downsample_after > policy.raw_retention) {
    return InvalidFieldError(
        "downsample_after",
        absl::StrCat("must be in [0, raw_retention = ", absl::FormatDuration(policy.raw_retention),
                     "], got ", absl::FormatDuration(policy.downsample_after)));
  }
  if (policy.downsampled_retention < policy.raw_retention) {
    return InvalidFieldError("downsampled_retention",
                             absl::StrCat("must be at least raw_retention = ",
                                          absl::FormatDuration(policy.raw_retention), ", got ",
                                          absl::FormatDuration(policy.downsampled_retention)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TelemetryBucket>> ReadBuckets(const TelemetryStore& store,
                                                         const SeriesKey& series, int64_t from_ms,
                                                         int64_t to_ms) {
  from_ms = AlignUp(std::max<int64_t>(from_ms, 0));
  if (to_ms <= from_ms) return std::vector<TelemetryBucket>();
  // Whole buckets: the last one starting before to_ms ends here.
  const int64_t raw_end = BucketStart(to_ms - 1) + kBucketMs;
  ASSIGN_OR_RETURN(std::vector<TelemetryBucket> stored,
                   store.ReadDownsampled(series, from_ms, to_ms));
  ASSIGN_OR_RETURN(std::vector<TimedValue> raw, store.ReadRaw(series, from_ms, raw_end));
  return MergeBuckets(stored, FoldIntoBuckets(raw));
}

double MinMaxScale::Normalise(double value) const {
  return constant() ? 0.0 : (value - min) / (max - min);
}

double MinMaxScale::Denormalise(double normalised) const {
  return constant() ? min : min + normalised * (max - min);
}

NormalisedWindow NormaliseMinMax(const std::vector<TimedValue>& samples, int64_t now_ms,
                                 absl::Duration window) {
  NormalisedWindow out;
  const int64_t window_ms = absl::ToInt64Milliseconds(window);
  const int64_t after = now_ms - window_ms;
  bool first = true;
  for (const TimedValue& sample : samples) {
    if (sample.time_ms <= after || sample.time_ms > now_ms) continue;
    if (first) {
      out.scale.min = out.scale.max = sample.value;
      first = false;
    } else {
      out.scale.min = std::min(out.scale.min, sample.value);
      out.scale.max = std::max(out.scale.max, sample.value);
    }
    out.samples.push_back(sample);
  }
  std::stable_sort(out.samples.begin(), out.samples.end(),
                   [](const TimedValue& a, const TimedValue& b) { return a.time_ms < b.time_ms; });
  for (TimedValue& sample : out.samples) sample.value = out.scale.Normalise(sample.value);
  return out;
}

std::vector<UsageSeries> BucketsToUsageSeries(const std::string& node,
                                              const std::vector<TelemetryBucket>& cpu,
                                              const std::vector<TelemetryBucket>& memory,
                                              const UsageSeriesOptions& options) {
  std::vector<UsageSeries> out;
  int64_t next_start = -1;  // Start the current part's next sample must have.
  size_t i = 0, j = 0;
  while (i < cpu.size() && j < memory.size()) {
    if (cpu[i].start_ms < memory[j].start_ms) {
      ++i;
      continue;
    }
    if (memory[j].start_ms < cpu[i].start_ms) {
      ++j;
      continue;
    }
    const int64_t start = cpu[i].start_ms;
    if (out.empty() || start != next_start) {
      UsageSeries part;
      part.node = node;
      part.part = static_cast<int>(out.size()) + 1;
      part.first_minute = start / 60'000;
      out.push_back(std::move(part));
    }
    out.back().cpu_percent.push_back(cpu[i].mean() * options.cpu_scale);
    out.back().mem_percent.push_back(memory[j].mean() * options.memory_scale);
    next_start = start + kBucketMs;
    ++i;
    ++j;
  }
  return out;
}

absl::StatusOr<std::vector<UsageSeries>> ReadUsageSeries(const TelemetryStore& store,
                                                         const std::string& node, int64_t from_ms,
                                                         int64_t to_ms,
                                                         const UsageSeriesOptions& options) {
  // Buckets that end at or before to_ms start before its grid point.
  const int64_t last_end = BucketStart(std::max<int64_t>(to_ms, 0));
  ASSIGN_OR_RETURN(
      std::vector<TelemetryBucket> cpu,
      ReadBuckets(store, {SubjectKind::kNode, node, options.cpu_metric}, from_ms, last_end));
  ASSIGN_OR_RETURN(
      std::vector<TelemetryBucket> memory,
      ReadBuckets(store, {SubjectKind::kNode, node, options.memory_metric}, from_ms, last_end));
  return BucketsToUsageSeries(node, cpu, memory, options);
}

std::vector<TelemetryMapping> DefaultTelemetryMappings() {
  return {
      {.query = "instance:node_cpu:rate1m",
       .kind = SubjectKind::kNode,
       .metric = kNodeCpuMetric,
       .subject_label = "node"},
      {.query = "instance:node_memory:avg1m",
       .kind = SubjectKind::kNode,
       .metric = kNodeMemoryMetric,
       .subject_label = "node"},
      {.query = "pod:container_cpu:rate1m",
       .kind = SubjectKind::kPod,
       .metric = kPodCpuMetric,
       .subject_label = "pod",
       .namespace_label = "namespace"},
      {.query = "pod:container_memory_working_set:avg1m",
       .kind = SubjectKind::kPod,
       .metric = kPodMemoryMetric,
       .subject_label = "pod",
       .namespace_label = "namespace"},
      {.query = "node:kube_pod_container_status_restarts:increase1h",
       .kind = SubjectKind::kNode,
       .metric = kNodeRestartsMetric,
       .subject_label = "node"},
  };
}

absl::Status ValidateTelemetryMappings(const std::vector<TelemetryMapping>& mappings,
                                       const TelemetryLimits& limits) {
  std::vector<std::string> lines;
  for (size_t i = 0; i < mappings.size(); ++i) {
    const TelemetryMapping& m = mappings[i];
    const std::string field = absl::StrCat("mappings[", i, "]");
    if (m.query.empty()) lines.push_back(field + ".query: must not be empty");
    if (absl::Status metric =
            ValidateTelemetryName(m.metric, limits.max_metric_bytes, field + ".metric");
        !metric.ok()) {
      lines.emplace_back(metric.message());
    }
    if (m.subject_label.empty()) lines.push_back(field + ".subject_label: must not be empty");
  }
  if (lines.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
}

MappedSamples MapToTelemetry(const TelemetryMapping& mapping,
                             const std::vector<LabelledSample>& results,
                             const TelemetryLimits& limits) {
  MappedSamples out;
  out.samples.reserve(results.size());
  for (const LabelledSample& result : results) {
    if (!std::isfinite(result.value)) {
      ++out.non_finite;
      continue;
    }
    auto subject = result.labels.find(mapping.subject_label);
    if (subject == result.labels.end() || subject->second.empty()) {
      ++out.missing_label;
      continue;
    }
    TelemetrySample sample{.kind = mapping.kind,
                           .subject = subject->second,
                           .metric = mapping.metric,
                           .time_ms = result.time_ms,
                           .value = result.value};
    if (!mapping.namespace_label.empty()) {
      auto ns = result.labels.find(mapping.namespace_label);
      if (ns == result.labels.end() || ns->second.empty()) {
        ++out.missing_label;
        continue;
      }
      sample.subject = absl::StrCat(ns->second, "/", subject->second);
    }
    if (!ValidateTelemetrySample(sample, limits, "sample").ok()) {
      ++out.invalid_name;
      continue;
    }
    out.samples.push_back(std::move(sample));
  }
  return out;
}

std::string PullBatchId(const TelemetryMapping& mapping, int64_t time_ms, size_t part) {
  // The query text is free-form PromQL: its hash (with what the samples become)
  // keeps the id within the name charset and length.
  const uint64_t hash = StableHash(absl::StrCat(mapping.query, "\n", SubjectKindName(mapping.kind),
                                                "\n", mapping.metric, "\n", mapping.subject_label,
                                                "\n", mapping.namespace_label));
  return absl::StrFormat("pull:%016x:%d:%d", hash, time_ms, part);
}

absl::Status PullReport::status() const {
  for (const SeriesPullReport& s : series) {
    if (!s.status.ok()) {
      return absl::Status(s.status.code(), absl::StrCat(s.query, ": ", s.status.message()));
    }
  }
  return absl::OkStatus();
}

size_t PullReport::stored() const {
  size_t total = 0;
  for (const SeriesPullReport& s : series) total += s.stored;
  return total;
}

TelemetryScraper::TelemetryScraper(const TelemetrySource& source, TelemetryStore& store,
                                   std::vector<TelemetryMapping> mappings, TelemetryLimits limits)
    : source_(source), store_(store), mappings_(std::move(mappings)), limits_(limits) {}

PullReport TelemetryScraper::Pull(int64_t time_ms) {
  PullReport report;
  for (size_t m = 0; m < mappings_.size(); ++m) {
    const TelemetryMapping& mapping = mappings_[m];
    SeriesPullReport& out = report.series.emplace_back();
    out.query = mapping.query;
    out.status = ValidateTelemetryMappings({mapping}, limits_);
    if (!out.status.ok()) continue;
    absl::StatusOr<InstantQueryResult> answer = source_.QueryInstant(mapping.query, time_ms);
    if (!answer.ok()) {
      out.status = answer.status();
      continue;
    }
    MappedSamples mapped = MapToTelemetry(mapping, answer->samples, limits_);
    out.answered = answer->samples.size();
    out.skipped =
        answer->non_finite_skipped + mapped.non_finite + mapped.missing_label + mapped.invalid_name;
    const size_t per_batch = std::max<size_t>(limits_.max_batch_samples, 1);
    bool all_duplicate = true;
    size_t part = 0;
    // At least one batch, empty when the query answered nothing: the pull is recorded.
    for (size_t begin = 0;; begin += per_batch, ++part) {
      const size_t end = std::min(mapped.samples.size(), begin + per_batch);
      std::vector<TelemetrySample> batch(mapped.samples.begin() + begin,
                                         mapped.samples.begin() + end);
      absl::StatusOr<AppendResult> appended =
          store_.Append(PullBatchId(mapping, time_ms, part), batch);
      if (!appended.ok()) {
        out.status = appended.status();
        all_duplicate = false;
        break;
      }
      out.stored += appended->stored;
      out.skipped += appended->expired;
      all_duplicate = all_duplicate && appended->duplicate;
      if (end == mapped.samples.size()) break;
    }
    out.duplicate = all_duplicate;
  }
  return report;
}

}  // namespace codeco::pdlc
