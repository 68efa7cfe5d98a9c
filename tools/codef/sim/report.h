#pragma once
// The experiment report of a CODEF run: reads the Recorder's CSV files back
// (pending_pods.csv, node_usage.csv, node_energy.csv; any may be missing),
// summarizes them (pending shares, CPU allocation per cluster, energy) and
// writes report.md with a summary table plus SVG line plots as separate
// files: pending pods over time, CPU allocation per cluster, node power per
// cluster. Works the same on simulate-mode results and on what
// `codef --record` wrote in emulate mode. Pure: text in, text out.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace codeco::codef {

/// One row of pending_pods.csv.
struct PendingSample {
  /// Seconds since the start.
  double time_s = 0;
  /// Pods not running yet (unplaced + bound but starting).
  int64_t pending = 0;
  /// Pods waiting for a node.
  int64_t unplaced = 0;
  /// Pods bound to a node and not finished.
  int64_t placed = 0;
  /// CPU requests of the unplaced pods, millicores.
  int64_t unplaced_cpu_millicores = 0;
  /// CPU requests of the placed pods, millicores.
  int64_t placed_cpu_millicores = 0;
};

/// One cluster at one sample time (sums over its nodes).
struct ClusterSample {
  /// Seconds since the start.
  double time_s = 0;
  /// CPU requested by bound pods, millicores.
  int64_t cpu_requested_millicores = 0;
  /// Allocatable CPU, millicores.
  int64_t cpu_allocatable_millicores = 0;
};

/// The time series of a recorded run.
struct RecordedRun {
  /// pending_pods.csv rows, in time order.
  std::vector<PendingSample> pending;
  /// Clusters in the order they first appear in node_usage.csv, then node_energy.csv.
  std::vector<std::string> clusters;
  /// Per cluster, node_usage.csv summed over its nodes, in time order.
  std::map<std::string, std::vector<ClusterSample>> cpu;
  /// Per cluster, (time_s, watts) from node_energy.csv summed over its nodes.
  std::map<std::string, std::vector<std::pair<double, double>>> watts;
  /// Which files were present.
  bool has_pending = false;
  /// node_usage.csv was present.
  bool has_cpu = false;
  /// node_energy.csv was present.
  bool has_energy = false;
};

/// Parses the Recorder's files (file name -> text). Columns are found by
/// header name, so extra columns are fine; INVALID_ARGUMENT naming the file,
/// line and column for a missing column or a bad number.
absl::StatusOr<RecordedRun> ReadRecordedRun(const std::map<std::string, std::string>& files);

/// Figures of one cluster.
struct ClusterSummary {
  /// Cluster name.
  std::string name;
  /// Mean and peak of CPU requested / allocatable over the samples (0-1).
  double cpu_allocated_mean = 0;
  /// Peak of the same.
  double cpu_allocated_peak = 0;
  /// Mean power of its nodes, watts.
  double watts_mean = 0;
  /// Energy of its nodes over the run (trapezoids between samples), joules.
  double energy_joules = 0;
};

/// Figures of a whole run.
struct RunSummary {
  /// Number of pending_pods.csv samples.
  int samples = 0;
  /// Time of the last sample, seconds.
  double last_time_s = 0;
  /// Share of live pods waiting for a node, unplaced / (unplaced + placed):
  /// peak and mean over the samples (0-1).
  double pending_share_peak = 0;
  /// Mean of the same.
  double pending_share_mean = 0;
  /// The same share counted in requested CPU.
  double pending_cpu_share_peak = 0;
  /// Mean of the same.
  double pending_cpu_share_mean = 0;
  /// Share of live pods not running yet, pending / (unplaced + placed).
  double not_running_share_peak = 0;
  /// Mean of the same.
  double not_running_share_mean = 0;
  /// Most pods waiting for a node at once.
  int64_t unplaced_peak = 0;
  /// Per cluster, in RecordedRun::clusters order.
  std::vector<ClusterSummary> clusters;
  /// Energy of every node, joules.
  double energy_joules = 0;
};

/// Summarizes a recorded run.
RunSummary Summarize(const RecordedRun& run);

/// What the report says about the run besides the recorded series.
struct ReportContext {
  /// Scenario name.
  std::string scenario;
  /// "simulate" or "emulate".
  std::string mode;
  /// Placement policy (simulate mode), empty if not known.
  std::string policy;
  /// Length of the run (simulated or recorded), seconds.
  double duration_s = 0;
  /// Wall-clock time the run took, seconds (unset = not known).
  std::optional<double> wall_s;
  /// Tasks in the scenario's task stream (unset = none or not known).
  std::optional<int64_t> tasks;
  /// More rows for the summary table (name, value).
  std::vector<std::pair<std::string, std::string>> extra_rows;
  /// Fault timeline lines.
  std::vector<std::string> events;
  /// Remarks (e.g. parts of the scenario not simulated).
  std::vector<std::string> notes;
  /// The CSV files of the run, listed at the end.
  std::vector<std::string> csv_files;
};

/// report.md and its plots: file name -> content. Always "report.md"; plus
/// "pending_pods.svg", "cpu_allocation.svg" and "node_power.svg" when the
/// series behind them were recorded.
std::map<std::string, std::string> BuildReport(const ReportContext& context, const RecordedRun& run,
                                               const RunSummary& summary);

/// A Markdown table comparing runs of the same scenario under several
/// policies: one row per (policy, summary), in order.
std::string ComparePolicies(const std::vector<std::pair<std::string, RunSummary>>& runs);

/// "12.3 %" for 0.123.
std::string Percent(double share);

}  // namespace codeco::codef
