#include "pdlc/cli/eval_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <memory>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "pdlc/core/forecast_evaluation.h"
#include "pdlc/core/lstm_forecaster.h"

namespace codeco::pdlc {
namespace {

constexpr char kUsage[] =
    "usage: codeco-pdlc eval (--train A.csv --test B.csv | --trace T.csv [--test-share 0.5])\n"
    "                        [--threshold 75,80] [--margins 0-20] [--format text|json]\n"
    "                        [--epochs N] [--hidden N] [--layers N] [--max-windows N] [--seed N]\n"
    "  Trains persistence, a linear autoregressive model and the LSTM on the training\n"
    "  trace, scores each on the test trace and prints MAPE per horizon and the breach\n"
    "  table (recall, precision, false alarms per node-day) per threshold and margin.\n"
    "  CSV columns: vm,minute,cpu_percent,mem_percent and optionally group; 5-minute\n"
    "  samples. With a group column (VMs of one job, nodes of one cluster) the\n"
    "  topology-aware LSTM, which also reads its group's other nodes, is scored too.\n"
    "  --trace splits one trace by a hash of the VM name (--test-share of the VMs tested).\n";

struct EvalArgs {
  std::string train_path, test_path, trace_path;
  double test_share = 0.5;
  std::vector<double> thresholds = {75, 80};
  std::vector<double> margins;
  bool json = false;
  int epochs = -1;
  int hidden = -1;
  int layers = -1;
  int64_t max_windows = -1;
  uint64_t seed = 1;
};

bool ParseList(const std::string& text, std::vector<double>* out) {
  out->clear();
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> range = absl::StrSplit(part, '-');
    double lo = 0, hi = 0;
    if (range.size() == 1 && absl::SimpleAtod(range[0], &lo)) {
      out->push_back(lo);
    } else if (range.size() == 2 && absl::SimpleAtod(range[0], &lo) && absl::SimpleAtod(range[1], &hi) &&
               lo <= hi && hi - lo <= 1000) {
      for (double v = lo; v <= hi + 1e-9; v += 1) out->push_back(v);
    } else {
      return false;
    }
  }
  for (double v : *out) {
    if (!(v >= 0 && v <= 1000)) return false;
  }
  return !out->empty();
}

// Parses args; on a bad one writes why to err and returns false.
bool ParseArgs(const std::vector<std::string>& args, EvalArgs* a, std::ostream& err) {
  for (int v = 0; v <= 20; ++v) a->margins.push_back(v);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--help" || flag == "-h") {
      err << kUsage;
      return false;
    }
    if (i + 1 >= args.size()) {
      err << "codeco-pdlc eval: " << flag << " needs a value\n" << kUsage;
      return false;
    }
    const std::string& value = args[++i];
    bool ok = true;
    if (flag == "--train") a->train_path = value;
    else if (flag == "--test") a->test_path = value;
    else if (flag == "--trace") a->trace_path = value;
    else if (flag == "--test-share") ok = absl::SimpleAtod(value, &a->test_share) && a->test_share > 0 && a->test_share < 1;
    else if (flag == "--threshold") ok = ParseList(value, &a->thresholds);
    else if (flag == "--margins") ok = ParseList(value, &a->margins);
    else if (flag == "--format") { ok = value == "text" || value == "json"; a->json = value == "json"; }
    else if (flag == "--epochs") ok = absl::SimpleAtoi(value, &a->epochs) && a->epochs >= 1 && a->epochs <= 1000;
    else if (flag == "--hidden") ok = absl::SimpleAtoi(value, &a->hidden) && a->hidden >= 1 && a->hidden <= 1024;
    else if (flag == "--layers") ok = absl::SimpleAtoi(value, &a->layers) && a->layers >= 1 && a->layers <= 8;
    else if (flag == "--max-windows") ok = absl::SimpleAtoi(value, &a->max_windows) && a->max_windows >= 0;
    else if (flag == "--seed") ok = absl::SimpleAtoi(value, &a->seed);
    else {
      err << "codeco-pdlc eval: unknown flag " << flag << "\n" << kUsage;
      return false;
    }
    if (!ok) {
      err << "codeco-pdlc eval: " << flag << ": bad value \"" << value << "\"\n";
      return false;
    }
  }
  const bool pair = !a->train_path.empty() || !a->test_path.empty();
  if (pair == !a->trace_path.empty() || (pair && (a->train_path.empty() || a->test_path.empty()))) {
    err << "codeco-pdlc eval: give --train and --test, or --trace\n" << kUsage;
    return false;
  }
  return true;
}

absl::StatusOr<std::vector<UsageSeries>> LoadTrace(const std::string& path, const char* flag,
                                                   std::vector<std::string>* warnings) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, ": cannot open ", path));
  std::vector<std::string> local;
  auto series = ParseUsageTrace(in, &local);
  if (!series.ok()) return absl::Status(series.status().code(), absl::StrCat(flag, " ", path, ": ", series.status().message()));
  for (auto& w : local) warnings->push_back(absl::StrCat(flag, " ", path, ": ", w));
  return series;
}

struct ModelResult {
  std::string name;
  double train_seconds = 0;
  double inference_us_per_forecast = 0;
  MetricEvaluation cpu, mem;
};

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

nlohmann::json ToJson(const MetricEvaluation& e) {
  nlohmann::json j;
  j["metric"] = UsageMetricName(e.metric);
  for (size_t h = 0; h < kHorizonCount; ++h) {
    j["mape"].push_back({{"horizon_minutes", kHorizonSteps[h] * kSampleStepMinutes},
                         {"mape_percent", e.horizons[h].mape_percent},
                         {"mae_points", e.horizons[h].mae_points},
                         {"samples", e.horizons[h].samples}});
  }
  auto row_json = [](const BreachRow& r) {
    nlohmann::json row = {{"threshold_percent", r.threshold_percent}, {"breaches", r.breaches},
                          {"detected", r.detected}, {"alarms", r.alarms}, {"false_alarms", r.false_alarms},
                          {"recall", r.recall}, {"precision", r.precision},
                          {"false_alarms_per_node_day", r.false_alarms_per_node_day}};
    if (r.min_confidence >= 0) {
      row["min_confidence"] = r.min_confidence;
    } else {
      row["margin_points"] = r.margin_points;
    }
    return row;
  };
  j["breaches"] = nlohmann::json::array();
  for (const auto& r : e.breaches) j["breaches"].push_back(row_json(r));
  j["breaches_by_confidence"] = nlohmann::json::array();
  for (const auto& r : e.breaches_by_confidence) j["breaches_by_confidence"].push_back(row_json(r));
  return j;
}

void PrintText(const std::vector<ModelResult>& results, const EvalArgs& a, size_t train_nodes, size_t test_nodes,
               size_t origins, double node_days, std::ostream& out) {
  char line[256];
  out << "trained on " << train_nodes << " series, tested on " << test_nodes << " series (" << origins
      << " forecast origins, " << std::fixed << std::setprecision(1) << node_days << " node-days)\n\n";
  for (UsageMetric metric : {UsageMetric::kCpu, UsageMetric::kMemory}) {
    out << "MAPE (%) of " << UsageMetricName(metric) << " by horizon\n";
    std::snprintf(line, sizeof line, "  %-16s %8s %8s %8s %8s %8s\n", "model", "5 min", "10 min", "15 min", "20 min", "30 min");
    out << line;
    for (const auto& r : results) {
      const auto& e = metric == UsageMetric::kCpu ? r.cpu : r.mem;
      std::snprintf(line, sizeof line, "  %-16s %8.2f %8.2f %8.2f %8.2f %8.2f\n", r.name.c_str(),
                    e.horizons[0].mape_percent, e.horizons[1].mape_percent, e.horizons[2].mape_percent,
                    e.horizons[3].mape_percent, e.horizons[4].mape_percent);
      out << line;
    }
    out << "\n";
  }
  for (UsageMetric metric : {UsageMetric::kCpu, UsageMetric::kMemory}) {
    for (double threshold : a.thresholds) {
      out << "Breaches of " << UsageMetricName(metric) << " >= " << threshold
          << " %, alarmed 5 min ahead (recall / precision / false alarms per node-day)\n";
      std::snprintf(line, sizeof line, "  %-7s", "margin");
      out << line;
      for (const auto& r : results) {
        std::snprintf(line, sizeof line, " | %-24s", r.name.c_str());
        out << line;
      }
      out << "\n";
      for (double margin : a.margins) {
        std::snprintf(line, sizeof line, "  %-7.1f", margin);
        out << line;
        for (const auto& r : results) {
          const auto& e = metric == UsageMetric::kCpu ? r.cpu : r.mem;
          for (const auto& row : e.breaches) {
            if (row.threshold_percent != threshold || row.margin_points != margin) continue;
            std::snprintf(line, sizeof line, " | %6.2f%% %6.2f%% %8.3f", 100 * row.recall, 100 * row.precision,
                          row.false_alarms_per_node_day);
            out << line;
          }
        }
        out << "\n";
      }
      for (const auto& r : results) {
        const auto& e = metric == UsageMetric::kCpu ? r.cpu : r.mem;
        bool header = false;
        for (const auto& row : e.breaches_by_confidence) {
          if (row.threshold_percent != threshold) continue;
          if (!header) {
            out << "  " << r.name << ", alarm when P(next >= " << threshold << " %) >= confidence:\n";
            header = true;
          }
          std::snprintf(line, sizeof line, "  %-7.2f | %6.2f%% %6.2f%% %8.3f\n", row.min_confidence, 100 * row.recall,
                        100 * row.precision, row.false_alarms_per_node_day);
          out << line;
        }
      }
      const auto& first = metric == UsageMetric::kCpu ? results.front().cpu : results.front().mem;
      for (const auto& row : first.breaches) {
        if (row.threshold_percent == threshold) {
          out << "  (" << row.breaches << " breaches)\n";
          break;
        }
      }
      out << "\n";
    }
  }
  // What a user chooses by: each model's gain over the linear baseline, and
  // the best recall each reaches at most one false alarm per node-day.
  const ModelResult* baseline = nullptr;
  for (const auto& r : results) {
    if (r.name == "autoregressive") baseline = &r;
  }
  out << "Summary\n";
  for (const auto& r : results) {
    if (baseline == nullptr || &r == baseline) continue;
    for (UsageMetric metric : {UsageMetric::kCpu, UsageMetric::kMemory}) {
      const auto& e = metric == UsageMetric::kCpu ? r.cpu : r.mem;
      const auto& b = metric == UsageMetric::kCpu ? baseline->cpu : baseline->mem;
      out << "  " << r.name << " " << UsageMetricName(metric) << " MAPE change vs autoregressive:";
      for (size_t h = 0; h < kHorizonCount; ++h) {
        const double gain = b.horizons[h].mape_percent > 0
                                ? 100.0 * (1.0 - e.horizons[h].mape_percent / b.horizons[h].mape_percent)
                                : 0.0;
        std::snprintf(line, sizeof line, " %+.1f%%", -gain);
        out << line;
      }
      out << " (5/10/15/20/30 min)\n";
    }
  }
  for (UsageMetric metric : {UsageMetric::kCpu, UsageMetric::kMemory}) {
    for (double threshold : a.thresholds) {
      for (const auto& r : results) {
        const auto& e = metric == UsageMetric::kCpu ? r.cpu : r.mem;
        const BreachRow* best = nullptr;
        for (const auto* rows : {&e.breaches, &e.breaches_by_confidence}) {
          for (const auto& row : *rows) {
            if (row.threshold_percent != threshold || row.false_alarms_per_node_day > 1.0) continue;
            if (best == nullptr || row.recall > best->recall) best = &row;
          }
        }
        if (best == nullptr) continue;
        if (best->breaches == 0) {
          out << "  " << r.name << " " << UsageMetricName(metric) << " >= " << threshold << " %: no breach in the test trace\n";
          continue;
        }
        std::snprintf(line, sizeof line, "  %s %s >= %g %%: best recall at <= 1 false alarm per node-day %.1f%% (%s %g)\n",
                      r.name.c_str(), UsageMetricName(metric), threshold, 100 * best->recall,
                      best->min_confidence >= 0 ? "confidence" : "margin",
                      best->min_confidence >= 0 ? best->min_confidence : best->margin_points);
        out << line;
      }
    }
  }
  out << "\n";
  out << "Cost\n";
  for (const auto& r : results) {
    std::snprintf(line, sizeof line, "  %-16s training %8.2f s   inference %8.2f us per node forecast\n", r.name.c_str(),
                  r.train_seconds, r.inference_us_per_forecast);
    out << line;
  }
}

}  // namespace

int RunEvalCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  EvalArgs a;
  if (!ParseArgs(args, &a, err)) return 2;
  std::vector<std::string> warnings;
  std::vector<UsageSeries> train, test;
  if (!a.trace_path.empty()) {
    auto all = LoadTrace(a.trace_path, "--trace", &warnings);
    if (!all.ok()) {
      err << "codeco-pdlc eval: " << all.status().message() << "\n";
      return 1;
    }
    SplitByNode(std::move(*all), 1.0 - a.test_share, &train, &test);
  } else {
    auto tr = LoadTrace(a.train_path, "--train", &warnings);
    auto te = tr.ok() ? LoadTrace(a.test_path, "--test", &warnings) : tr;
    if (!te.ok()) {
      err << "codeco-pdlc eval: " << te.status().message() << "\n";
      return 1;
    }
    train = std::move(*tr);
    test = std::move(*te);
  }
  for (const auto& w : warnings) err << "warning: " << w << "\n";

  LstmOptions lstm_options;
  lstm_options.seed = a.seed;
  if (a.epochs > 0) lstm_options.epochs = a.epochs;
  if (a.hidden > 0) lstm_options.hidden_units = a.hidden;
  if (a.layers > 0) lstm_options.layers = a.layers;
  if (a.max_windows >= 0) lstm_options.max_training_windows = static_cast<size_t>(a.max_windows);
  std::vector<std::unique_ptr<UsageForecaster>> models;
  models.push_back(std::make_unique<PersistenceForecaster>());
  models.push_back(std::make_unique<AutoregressiveForecaster>(lstm_options.window));
  models.push_back(std::make_unique<LstmForecaster>(lstm_options));
  // The topology-aware LSTM, when the traces say which nodes are neighbours.
  // A test node's neighbours are every other node of its group, trained on or
  // not: at a forecast, what they did up to then is known.
  const auto grouped = [](const std::vector<UsageSeries>& v) {
    return std::any_of(v.begin(), v.end(), [](const UsageSeries& s) { return !s.group.empty(); });
  };
  std::vector<UsageSeries> test_neighbors;
  if (grouped(train) || grouped(test)) {
    LstmOptions topology = lstm_options;
    topology.read_neighbors = true;
    models.push_back(std::make_unique<LstmForecaster>(topology));
    std::vector<UsageSeries> everyone = test;
    everyone.insert(everyone.end(), train.begin(), train.end());
    test_neighbors = NeighborMeans(everyone);
    test_neighbors.resize(test.size());
  } else {
    err << "note: no group column, so the topology-aware LSTM (lstm-topology) is not run\n";
  }

  // Every model is scored on the same origins: those the longest window allows.
  size_t window = 1;
  for (const auto& m : models) window = std::max(window, m->window());
  const std::vector<ForecastOrigin> origins =
      OriginsOf(test, window, test_neighbors.empty() ? nullptr : &test_neighbors);
  if (origins.empty()) {
    err << "codeco-pdlc eval: --test: no series has more than " << window << " samples, nothing to score\n";
    return 1;
  }
  BreachTableSpec spec{a.thresholds, a.margins};
  std::vector<ModelResult> results;
  for (const auto& model : models) {
    ModelResult r;
    r.name = model->name();
    const auto t0 = std::chrono::steady_clock::now();
    if (absl::Status s = model->Train(train); !s.ok()) {
      err << "codeco-pdlc eval: --train: " << s.message() << "\n";
      return 1;
    }
    const auto t1 = std::chrono::steady_clock::now();
    const std::vector<UsageForecast> forecasts = model->Predict(origins);
    const auto t2 = std::chrono::steady_clock::now();
    r.train_seconds = Seconds(t1 - t0);
    r.inference_us_per_forecast = 1e6 * Seconds(t2 - t1) / static_cast<double>(origins.size());
    r.cpu = ScoreForecasts(origins, forecasts, UsageMetric::kCpu, spec);
    r.mem = ScoreForecasts(origins, forecasts, UsageMetric::kMemory, spec);
    results.push_back(std::move(r));
  }

  if (a.json) {
    nlohmann::json j;
    j["train_series"] = train.size();
    j["test_series"] = test.size();
    j["origins"] = origins.size();
    j["node_days"] = NodeDays(origins);
    j["sample_minutes"] = kSampleStepMinutes;
    j["warnings"] = warnings;
    for (const auto& r : results) {
      j["models"].push_back({{"name", r.name},
                             {"train_seconds", r.train_seconds},
                             {"inference_us_per_forecast", r.inference_us_per_forecast},
                             {"metrics", {ToJson(r.cpu), ToJson(r.mem)}}});
    }
    out << j.dump(2) << "\n";
  } else {
    PrintText(results, a, train.size(), test.size(), origins.size(), NodeDays(origins), out);
  }
  return 0;
}

}  // namespace codeco::pdlc
