// forecast_bench: PDLC's forecasting figures (issue 11).
//
// Part 1, cost at scale: 1,000 nodes' 6-hour series in a RocksDB telemetry
// store; the advisor's training time, one scrape-to-score cycle (a pull's
// samples appended, every node refreshed and forecast, a recommendation
// scored), inference per node and the process's resident memory.
// Part 2, accuracy: `codeco-pdlc eval` on the shared development traces
// (../shared/data/traces/gcd-vms-dev.csv, split by VM), MAPE per horizon and
// the breach tables, printed next to the stateful-LCM study's Tables 3 and 4.
//
//   forecast_bench [--quick] [--trace FILE] [--nodes N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "codeco/common/rocksdb_kv_store.h"
#include "pdlc/cli/eval_command.h"
#include "pdlc/core/advisor.h"
#include "pdlc/core/lstm_forecaster.h"
#include "pdlc/store/kv_telemetry_store.h"

namespace {

using codeco::pdlc::kNodeCpuMetric;
using codeco::pdlc::kNodeMemoryMetric;
using codeco::pdlc::SubjectKind;
using codeco::pdlc::TelemetrySample;

long RssKib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return 0;
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void PrintStudy() {
  std::printf(
      "\nThe stateful-LCM study (seed 003), GWA-T-13 Materna, LSTM, window 10-12, next 5 minutes:\n"
      "  Table 3: MAPE 8.96 %% (CPU), 9.72 %% (memory); inference 0.049 s / 0.046 s per prediction\n"
      "  Table 4: threshold exceedances detected 5 min early 94.63 %% (CPU), 96.73 %% (memory),\n"
      "           S = 75-80 %%; false alarms not reported. Its 'detected' counts a forecast >= S\n"
      "           before the real value reaches S; codeco's recall counts crossings (a sample >= S\n"
      "           after one < S) alarmed one sample ahead, and reports the false alarms beside it.\n");
}

int CostAtScale(int nodes, bool quick) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("codeco-forecast-bench-" + std::to_string(getpid()));
  codeco::RocksDbOptions db_options;
  db_options.path = dir.string();
  db_options.column_families = {"telemetry"};
  db_options.sync = false;
  auto kv = codeco::OpenRocksDbKvStore(db_options);
  if (!kv.ok()) {
    std::fprintf(stderr, "rocksdb: %s\n", std::string(kv.status().message()).c_str());
    return 1;
  }
  auto store = codeco::pdlc::NewKvTelemetryStore(**kv);
  if (!store.ok()) return 1;
  const long rss_start = RssKib();

  // 6 hours of one sample a minute per node: a daily wave with noise, per node phase.
  constexpr int64_t kMinute = 60'000;
  const int64_t hours = 6;
  const int64_t now = 100'000 * 5 * kMinute;
  std::mt19937 rng(11);
  std::normal_distribution<double> noise(0, 0.03);
  std::vector<codeco::pdlc::NodeContext> inventory;
  const auto fill0 = std::chrono::steady_clock::now();
  for (int n = 0; n < nodes; ++n) {
    const std::string node = "node-" + std::to_string(n);
    std::vector<TelemetrySample> batch;
    const double phase = 0.37 * n, level = 0.2 + 0.5 * (n % 7) / 7.0;
    for (int64_t t = now - hours * 60 * kMinute; t < now; t += kMinute) {
      const double x = 2 * M_PI * static_cast<double>(t) / (24.0 * 60 * kMinute) + phase;
      batch.push_back({SubjectKind::kNode, node, kNodeCpuMetric, t, std::clamp(level + 0.15 * std::sin(x) + noise(rng), 0.0, 1.0)});
      batch.push_back({SubjectKind::kNode, node, kNodeMemoryMetric, t, std::clamp(level + 0.05 * std::cos(x), 0.0, 1.0)});
    }
    if (!(*store)->Append("fill-" + node, batch).ok()) return 1;
    codeco::pdlc::NodeContext c;
    c.node = node;
    c.cpu_capacity_millicores = 4000;
    c.memory_capacity_bytes = 16e9;
    c.watts_per_core = 5 + n % 11;
    c.carbon_g_per_kwh = 50 + 10 * (n % 30);
    inventory.push_back(c);
  }
  const double fill_s = SecondsSince(fill0);
  const long rss_filled = RssKib();

  codeco::pdlc::LstmOptions lstm;
  if (quick) {
    lstm.epochs = 2;
    lstm.max_training_windows = 10'000;
  }
  codeco::pdlc::Advisor advisor(**store, std::make_unique<codeco::pdlc::LstmForecaster>(lstm),
                                {.cluster = "bench", .training_history_ms = hours * 3600'000});
  if (!advisor.Refresh(inventory, now).ok()) return 1;
  const auto train0 = std::chrono::steady_clock::now();
  if (absl::Status s = advisor.Train(now, "bench"); !s.ok()) {
    std::fprintf(stderr, "train: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  const double train_s = SecondsSince(train0);

  // One scrape-to-score cycle: a pull's samples, then refresh and score.
  std::vector<double> cycles;
  for (int cycle = 0; cycle < 5; ++cycle) {
    const int64_t t = now + (cycle + 1) * kMinute;
    std::vector<TelemetrySample> pull;
    for (int n = 0; n < nodes; ++n) {
      const std::string node = "node-" + std::to_string(n);
      pull.push_back({SubjectKind::kNode, node, kNodeCpuMetric, t, 0.5});
      pull.push_back({SubjectKind::kNode, node, kNodeMemoryMetric, t, 0.5});
    }
    const auto c0 = std::chrono::steady_clock::now();
    if (!(*store)->Append("pull-" + std::to_string(t), pull).ok()) return 1;
    if (!advisor.Refresh(inventory, t).ok()) return 1;
    auto rec = advisor.Recommend({.profile = codeco::pdlc::ScoringProfile::kGreenness}, t);
    if (!rec.ok()) return 1;
    cycles.push_back(SecondsSince(c0));
  }
  std::sort(cycles.begin(), cycles.end());
  const long rss_end = RssKib();
  fs::remove_all(dir);

  std::printf("== advisor at %d nodes (6 h of 1-minute samples each, RocksDB store)\n", nodes);
  std::printf("  fill %.1f s (%d samples)\n", fill_s, nodes * static_cast<int>(hours) * 60 * 2);
  std::printf("  training (LSTM, %d epochs, <= %zu windows): %.1f s, %.1f ms per node\n", lstm.epochs,
              lstm.max_training_windows, train_s, 1000 * train_s / nodes);
  std::printf("  scrape-to-score (append a pull, refresh and forecast every node, score): median %.0f ms, max %.0f ms; %.2f ms per node\n",
              1000 * cycles[cycles.size() / 2], 1000 * cycles.back(), 1000 * cycles[cycles.size() / 2] / nodes);
  std::printf("  RSS: %.1f MiB at start, %.1f MiB with the series stored, %.1f MiB after training and scoring\n",
              rss_start / 1024.0, rss_filled / 1024.0, rss_end / 1024.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string trace = std::string(CODECO_SOURCE_DIR) + "/../shared/data/traces/gcd-vms-dev.csv";
  int nodes = 1000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else if (std::strcmp(argv[i], "--trace") == 0 && i + 1 < argc) trace = argv[++i];
    else if (std::strcmp(argv[i], "--nodes") == 0 && i + 1 < argc) nodes = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: forecast_bench [--quick] [--trace FILE] [--nodes N]\n");
      return 2;
    }
  }
  if (!std::filesystem::exists(trace)) {
    std::fprintf(stderr, "forecast_bench: no trace at %s (give --trace)\n", trace.c_str());
    return 2;
  }
  // Cost first, so its resident memory is not the evaluation's.
  if (int rc = CostAtScale(nodes, quick); rc != 0) return rc;
  std::printf("\n== codeco-pdlc eval --trace %s --threshold 75,80%s\n", trace.c_str(),
              quick ? " --epochs 2 --max-windows 10000" : "");
  std::vector<std::string> args = {"--trace", trace, "--threshold", "75,80"};
  if (quick) args.insert(args.end(), {"--epochs", "2", "--max-windows", "10000"});
  std::fflush(stdout);
  if (int rc = codeco::pdlc::RunEvalCommand(args, std::cout, std::cerr); rc != 0) return rc;
  PrintStudy();
  return 0;
}
