#pragma once
// Usage series: the CPU and memory utilisation of one node (or VM) sampled at
// a fixed step, the unit PDLC forecasts and scores breaches on, and the CSV
// trace format users bring to `codeco-pdlc eval`.

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace codeco::pdlc {

/// The sampling step every model and every breach figure assumes, minutes.
inline constexpr int kSampleStepMinutes = 5;

/// One node's utilisation, oldest sample first. Samples are contiguous: a gap
/// in the source splits a node into several series (see ParseUsageTrace).
struct UsageSeries {
  /// Node or VM name.
  std::string node;
  /// 1 for the node's first contiguous run of samples, 2 for the run after
  /// its first gap, and so on.
  int part = 1;
  /// Minute of the first sample (trace time, not wall time).
  int64_t first_minute = 0;
  /// The node's neighbourhood: nodes of the same non-empty group are
  /// neighbours (a cluster's nodes, the VMs of one job). Empty: none known.
  std::string group;
  /// CPU utilisation, percent of the node's capacity (0-100, may exceed 100
  /// when a trace counts bursts above the share).
  std::vector<double> cpu_percent;
  /// Memory utilisation, percent of the node's capacity.
  std::vector<double> mem_percent;

  /// Number of samples.
  size_t size() const { return cpu_percent.size(); }
};

/// Which utilisation a figure is about.
enum class UsageMetric { kCpu, kMemory };

/// "cpu" or "memory".
const char* UsageMetricName(UsageMetric metric);

/// The samples of `metric` in `series`.
const std::vector<double>& MetricValues(const UsageSeries& series, UsageMetric metric);

/// Limits that keep a trace of any size or shape from exhausting memory.
struct TraceLimits {
  /// Longest accepted line, bytes.
  size_t max_line_bytes = 4096;
  /// Most samples accepted in one trace (all nodes together).
  size_t max_samples = 50'000'000;
};

/// Reads a CSV trace with the header `vm,minute,cpu_percent,mem_percent`
/// and optionally `group` (the node's neighbourhood, the same on every row of
/// a node; columns in any order, extra columns ignored and named in `warnings`),
/// rows in any order. Samples are `kSampleStepMinutes` apart; a missing sample
/// splits the node's series, a minute that is not on the step grid or appears
/// twice for one node is an error. Errors name the line and the column, e.g.
/// `line 12: cpu_percent: not a number: "x"`. Series come out ordered by node.
absl::StatusOr<std::vector<UsageSeries>> ParseUsageTrace(std::istream& in,
                                                         std::vector<std::string>* warnings = nullptr,
                                                         const TraceLimits& limits = {});

/// For each series of `series`, a series aligned with it (same first_minute
/// and size) whose every sample is the mean of its neighbours' samples at that
/// minute: the other series of its group. Where no neighbour has a sample (no
/// group, or none covers that minute) the series' own sample stands in, so a
/// model reading neighbours learns nothing false from their absence.
std::vector<UsageSeries> NeighborMeans(const std::vector<UsageSeries>& series);

/// FNV-1a of `text`: the same on every run, machine and standard library
/// (std::hash is not), for splits and ids that must be reproducible.
uint64_t StableHash(absl::string_view text);

/// Splits series into two sets by a stable hash of the node name: about
/// `first_share` of the nodes land in the first set. The same name always lands
/// on the same side, so a split is reproducible across runs and machines.
void SplitByNode(std::vector<UsageSeries> series, double first_share,
                 std::vector<UsageSeries>* first, std::vector<UsageSeries>* second);

}  // namespace codeco::pdlc
