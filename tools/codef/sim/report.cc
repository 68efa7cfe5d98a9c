#include "report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "codeco/common/status.h"
#include "svg_plot.h"

namespace codeco::codef {
namespace {

constexpr double kJoulesPerKwh = 3.6e6;

// One CSV file with its columns found by header name.
class CsvTable {
 public:
  // Reads `text`; `required` columns must be in the header.
  static absl::StatusOr<CsvTable> Parse(const std::string& file, const std::string& text,
                                        const std::vector<std::string>& required) {
    CsvTable table;
    table.file_ = file;
    std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
    if (lines.empty()) return absl::InvalidArgumentError(absl::StrCat(file, ": empty file"));
    std::vector<std::string> header = absl::StrSplit(lines[0], ',');
    for (size_t i = 0; i < header.size(); ++i) table.column_[header[i]] = i;
    for (const std::string& name : required) {
      if (table.column_.count(name) == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(file, ":1: missing column \"", name, "\" (header: ", lines[0], ")"));
      }
    }
    for (size_t i = 1; i < lines.size(); ++i) {
      std::vector<std::string> cells = absl::StrSplit(lines[i], ',');
      if (cells.size() != header.size()) {
        return absl::InvalidArgumentError(absl::StrCat(file, ":", i + 1, ": ", cells.size(),
                                                       " cells, the header has ", header.size()));
      }
      table.rows_.push_back(std::move(cells));
    }
    return table;
  }

  size_t rows() const { return rows_.size(); }
  const std::string& Text(size_t row, const std::string& column) const {
    return rows_[row][column_.at(column)];
  }
  absl::StatusOr<double> Number(size_t row, const std::string& column) const {
    double value = 0;
    const std::string& cell = Text(row, column);
    if (!absl::SimpleAtod(cell, &value) || !std::isfinite(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(file_, ":", row + 2, ": column ", column, ": not a number: \"", cell, "\""));
    }
    return value;
  }
  absl::StatusOr<int64_t> Integer(size_t row, const std::string& column) const {
    int64_t value = 0;
    const std::string& cell = Text(row, column);
    if (!absl::SimpleAtoi(cell, &value)) {
      return absl::InvalidArgumentError(absl::StrCat(file_, ":", row + 2, ": column ", column,
                                                     ": not a whole number: \"", cell, "\""));
    }
    return value;
  }

 private:
  std::string file_;
  std::map<std::string, size_t> column_;
  std::vector<std::vector<std::string>> rows_;
};

void NoteCluster(RecordedRun& run, const std::string& cluster) {
  if (std::find(run.clusters.begin(), run.clusters.end(), cluster) == run.clusters.end()) {
    run.clusters.push_back(cluster);
  }
}

std::string Fixed(double v, int decimals) { return absl::StrFormat("%.*f", decimals, v); }

std::string Duration(double seconds) {
  if (seconds >= 3600) return absl::StrFormat("%.2f h (%.0f s)", seconds / 3600, seconds);
  if (seconds >= 60) return absl::StrFormat("%.1f min (%.0f s)", seconds / 60, seconds);
  return absl::StrFormat("%.1f s", seconds);
}

std::string Energy(double joules) {
  if (joules >= kJoulesPerKwh) return absl::StrFormat("%.3f kWh", joules / kJoulesPerKwh);
  if (joules >= 3600) return absl::StrFormat("%.1f Wh", joules / 3600);
  return absl::StrFormat("%.0f J", joules);
}

}  // namespace

std::string Percent(double share) { return absl::StrFormat("%.1f %%", 100 * share); }

absl::StatusOr<RecordedRun> ReadRecordedRun(const std::map<std::string, std::string>& files) {
  RecordedRun run;
  if (auto it = files.find("pending_pods.csv"); it != files.end()) {
    ASSIGN_OR_RETURN(CsvTable table,
                     CsvTable::Parse(it->first, it->second,
                                     {"time_s", "pending", "unplaced", "placed",
                                      "unplaced_cpu_millicores", "placed_cpu_millicores"}));
    for (size_t r = 0; r < table.rows(); ++r) {
      PendingSample s;
      ASSIGN_OR_RETURN(double t, table.Number(r, "time_s"));
      ASSIGN_OR_RETURN(int64_t pending, table.Integer(r, "pending"));
      ASSIGN_OR_RETURN(int64_t unplaced, table.Integer(r, "unplaced"));
      ASSIGN_OR_RETURN(int64_t placed, table.Integer(r, "placed"));
      ASSIGN_OR_RETURN(int64_t unplaced_cpu, table.Integer(r, "unplaced_cpu_millicores"));
      ASSIGN_OR_RETURN(int64_t placed_cpu, table.Integer(r, "placed_cpu_millicores"));
      s.time_s = t;
      s.pending = pending;
      s.unplaced = unplaced;
      s.placed = placed;
      s.unplaced_cpu_millicores = unplaced_cpu;
      s.placed_cpu_millicores = placed_cpu;
      run.pending.push_back(s);
    }
    run.has_pending = true;
  }
  if (auto it = files.find("node_usage.csv"); it != files.end()) {
    ASSIGN_OR_RETURN(CsvTable table,
                     CsvTable::Parse(it->first, it->second,
                                     {"time_s", "cluster", "cpu_requested_millicores",
                                      "cpu_allocatable_millicores"}));
    for (size_t r = 0; r < table.rows(); ++r) {
      const std::string& cluster = table.Text(r, "cluster");
      ASSIGN_OR_RETURN(double t, table.Number(r, "time_s"));
      ASSIGN_OR_RETURN(int64_t requested, table.Integer(r, "cpu_requested_millicores"));
      ASSIGN_OR_RETURN(int64_t allocatable, table.Integer(r, "cpu_allocatable_millicores"));
      NoteCluster(run, cluster);
      std::vector<ClusterSample>& series = run.cpu[cluster];
      if (series.empty() || series.back().time_s != t) series.push_back({.time_s = t});
      series.back().cpu_requested_millicores += requested;
      series.back().cpu_allocatable_millicores += allocatable;
    }
    run.has_cpu = true;
  }
  if (auto it = files.find("node_energy.csv"); it != files.end()) {
    ASSIGN_OR_RETURN(CsvTable table,
                     CsvTable::Parse(it->first, it->second, {"time_s", "cluster", "watts"}));
    for (size_t r = 0; r < table.rows(); ++r) {
      const std::string& cluster = table.Text(r, "cluster");
      ASSIGN_OR_RETURN(double t, table.Number(r, "time_s"));
      ASSIGN_OR_RETURN(double watts, table.Number(r, "watts"));
      NoteCluster(run, cluster);
      auto& series = run.watts[cluster];
      if (series.empty() || series.back().first != t) series.push_back({t, 0.0});
      series.back().second += watts;
    }
    run.has_energy = true;
  }
  return run;
}

RunSummary Summarize(const RecordedRun& run) {
  RunSummary summary;
  for (const PendingSample& s : run.pending) {
    double live = static_cast<double>(s.unplaced + s.placed);
    double live_cpu = static_cast<double>(s.unplaced_cpu_millicores + s.placed_cpu_millicores);
    double share = live > 0 ? static_cast<double>(s.unplaced) / live : 0;
    double cpu_share = live_cpu > 0 ? static_cast<double>(s.unplaced_cpu_millicores) / live_cpu : 0;
    double not_running = live > 0 ? static_cast<double>(s.pending) / live : 0;
    summary.pending_share_peak = std::max(summary.pending_share_peak, share);
    summary.pending_cpu_share_peak = std::max(summary.pending_cpu_share_peak, cpu_share);
    summary.not_running_share_peak = std::max(summary.not_running_share_peak, not_running);
    summary.pending_share_mean += share;
    summary.pending_cpu_share_mean += cpu_share;
    summary.not_running_share_mean += not_running;
    summary.unplaced_peak = std::max(summary.unplaced_peak, s.unplaced);
    summary.last_time_s = std::max(summary.last_time_s, s.time_s);
    ++summary.samples;
  }
  if (summary.samples > 0) {
    summary.pending_share_mean /= summary.samples;
    summary.pending_cpu_share_mean /= summary.samples;
    summary.not_running_share_mean /= summary.samples;
  }
  for (const std::string& name : run.clusters) {
    ClusterSummary c{.name = name};
    if (auto it = run.cpu.find(name); it != run.cpu.end() && !it->second.empty()) {
      for (const ClusterSample& s : it->second) {
        double share = s.cpu_allocatable_millicores > 0
                           ? static_cast<double>(s.cpu_requested_millicores) /
                                 static_cast<double>(s.cpu_allocatable_millicores)
                           : 0;
        c.cpu_allocated_mean += share;
        c.cpu_allocated_peak = std::max(c.cpu_allocated_peak, share);
        summary.last_time_s = std::max(summary.last_time_s, s.time_s);
      }
      c.cpu_allocated_mean /= static_cast<double>(it->second.size());
    }
    if (auto it = run.watts.find(name); it != run.watts.end() && !it->second.empty()) {
      const auto& w = it->second;
      for (size_t i = 0; i < w.size(); ++i) {
        c.watts_mean += w[i].second;
        if (i > 0)
          c.energy_joules += (w[i].second + w[i - 1].second) / 2 * (w[i].first - w[i - 1].first);
      }
      c.watts_mean /= static_cast<double>(w.size());
      summary.energy_joules += c.energy_joules;
      summary.last_time_s = std::max(summary.last_time_s, w.back().first);
    }
    summary.clusters.push_back(c);
  }
  return summary;
}

std::map<std::string, std::string> BuildReport(const ReportContext& context, const RecordedRun& run,
                                               const RunSummary& summary) {
  std::map<std::string, std::string> files;
  std::string md = absl::StrCat("# CODEF report: ", context.scenario, "\n\n");
  absl::StrAppend(&md, "## Summary\n\n| | |\n|---|---|\n");
  absl::StrAppend(&md, "| scenario | ", context.scenario, " |\n");
  absl::StrAppend(&md, "| mode | ", context.mode, " |\n");
  if (!context.policy.empty()) absl::StrAppend(&md, "| policy | ", context.policy, " |\n");
  absl::StrAppend(&md, "| duration ", context.mode == "simulate" ? "simulated" : "recorded", " | ",
                  Duration(context.duration_s), " |\n");
  absl::StrAppend(&md, "| wall time | ",
                  context.wall_s.has_value() ? absl::StrFormat("%.2f s", *context.wall_s) : "-",
                  " |\n");
  absl::StrAppend(&md, "| tasks | ", context.tasks.has_value() ? absl::StrCat(*context.tasks) : "-",
                  " |\n");
  for (const auto& [name, value] : context.extra_rows) {
    absl::StrAppend(&md, "| ", name, " | ", value, " |\n");
  }
  if (run.has_pending) {
    absl::StrAppend(&md, "| samples | ", summary.samples, " |\n");
    absl::StrAppend(&md, "| pending pods (waiting for a node), peak / mean | ",
                    Percent(summary.pending_share_peak), " / ", Percent(summary.pending_share_mean),
                    " (at most ", summary.unplaced_peak, " waiting) |\n");
    absl::StrAppend(&md, "| pending CPU (requests waiting for a node), peak / mean | ",
                    Percent(summary.pending_cpu_share_peak), " / ",
                    Percent(summary.pending_cpu_share_mean), " |\n");
    absl::StrAppend(&md, "| pods not running yet (incl. starting), peak / mean | ",
                    Percent(summary.not_running_share_peak), " / ",
                    Percent(summary.not_running_share_mean), " |\n");
  } else {
    absl::StrAppend(&md, "| pending pods | not recorded (pending_pods) |\n");
  }
  absl::StrAppend(&md, "| energy (all nodes) | ",
                  run.has_energy ? Energy(summary.energy_joules) : "not recorded (node_energy)",
                  " |\n");

  absl::StrAppend(&md, "\n## Clusters\n\n");
  if (summary.clusters.empty()) {
    absl::StrAppend(&md, "No node_usage or node_energy recorded.\n");
  } else {
    absl::StrAppend(&md,
                    "| cluster | CPU allocated, mean | CPU allocated, peak | mean power | energy "
                    "|\n|---|---|---|---|---|\n");
    for (const ClusterSummary& c : summary.clusters) {
      absl::StrAppend(&md, "| ", c.name, " | ", run.has_cpu ? Percent(c.cpu_allocated_mean) : "-",
                      " | ", run.has_cpu ? Percent(c.cpu_allocated_peak) : "-", " | ",
                      run.has_energy ? absl::StrFormat("%.1f W", c.watts_mean) : "-", " | ",
                      run.has_energy ? Energy(c.energy_joules) : "-", " |\n");
    }
    absl::StrAppend(&md,
                    "\nCPU allocated = CPU requested by the pods bound to the cluster's nodes / "
                    "their allocatable CPU; energy integrates the sampled node power.\n");
  }

  absl::StrAppend(&md, "\n## Plots\n\n");
  const std::string minutes = "time (min)";
  if (run.has_pending) {
    LinePlot plot{.title = "Pending pods", .x_label = minutes, .y_label = "pods"};
    PlotSeries unplaced{.label = "waiting for a node"};
    PlotSeries not_running{.label = "not running yet"};
    PlotSeries placed{.label = "bound (running or starting)"};
    for (const PendingSample& s : run.pending) {
      double t = s.time_s / 60;
      unplaced.points.push_back({t, static_cast<double>(s.unplaced)});
      not_running.points.push_back({t, static_cast<double>(s.pending)});
      placed.points.push_back({t, static_cast<double>(s.placed)});
    }
    plot.series = {unplaced, not_running, placed};
    files["pending_pods.svg"] = RenderLinePlot(plot);
    absl::StrAppend(&md, "![Pending pods over time](pending_pods.svg)\n\n");
  }
  if (run.has_cpu) {
    LinePlot plot{.title = "CPU allocated per cluster",
                  .x_label = minutes,
                  .y_label = "CPU requested / allocatable (%)",
                  .y_min = 0,
                  .y_max = 100};
    for (const std::string& name : run.clusters) {
      auto it = run.cpu.find(name);
      if (it == run.cpu.end()) continue;
      PlotSeries series{.label = name};
      for (const ClusterSample& s : it->second) {
        double share = s.cpu_allocatable_millicores > 0
                           ? 100.0 * static_cast<double>(s.cpu_requested_millicores) /
                                 static_cast<double>(s.cpu_allocatable_millicores)
                           : 0;
        series.points.push_back({s.time_s / 60, share});
      }
      plot.series.push_back(std::move(series));
    }
    files["cpu_allocation.svg"] = RenderLinePlot(plot);
    absl::StrAppend(&md, "![CPU allocated per cluster over time](cpu_allocation.svg)\n\n");
  }
  if (run.has_energy) {
    LinePlot plot{.title = "Node power per cluster", .x_label = minutes, .y_label = "watts"};
    for (const std::string& name : run.clusters) {
      auto it = run.watts.find(name);
      if (it == run.watts.end()) continue;
      PlotSeries series{.label = name};
      for (const auto& [t, w] : it->second) series.points.push_back({t / 60, w});
      plot.series.push_back(std::move(series));
    }
    files["node_power.svg"] = RenderLinePlot(plot);
    absl::StrAppend(&md, "![Node power per cluster over time](node_power.svg)\n\n");
  }
  if (!run.has_pending && !run.has_cpu && !run.has_energy) {
    absl::StrAppend(&md, "Nothing to plot: record pending_pods, node_usage or node_energy.\n\n");
  }

  absl::StrAppend(&md, "## Events\n\n");
  if (context.events.empty()) absl::StrAppend(&md, "No fault on the timeline.\n");
  for (const std::string& e : context.events) absl::StrAppend(&md, "- ", e, "\n");
  if (!context.notes.empty()) {
    absl::StrAppend(&md, "\n## Notes\n\n");
    for (const std::string& n : context.notes) absl::StrAppend(&md, "- ", n, "\n");
  }
  absl::StrAppend(&md, "\n## Files\n\n");
  for (const std::string& f : context.csv_files) {
    absl::StrAppend(&md, "- [", f, "](", f, ")\n");
  }
  files["report.md"] = md;
  return files;
}

std::string ComparePolicies(const std::vector<std::pair<std::string, RunSummary>>& runs) {
  std::string md =
      "| policy | pending pods, peak / mean | pending CPU, peak / mean | mean CPU allocated "
      "per cluster | energy |\n|---|---|---|---|---|\n";
  for (const auto& [policy, s] : runs) {
    std::vector<std::string> alloc;
    for (const ClusterSummary& c : s.clusters) {
      alloc.push_back(absl::StrCat(c.name, " ", Fixed(100 * c.cpu_allocated_mean, 0), " %"));
    }
    absl::StrAppend(&md, "| ", policy, " | ", Percent(s.pending_share_peak), " / ",
                    Percent(s.pending_share_mean), " | ", Percent(s.pending_cpu_share_peak), " / ",
                    Percent(s.pending_cpu_share_mean), " | ", absl::StrJoin(alloc, ", "), " | ",
                    Energy(s.energy_joules), " |\n");
  }
  return md;
}

}  // namespace codeco::codef
