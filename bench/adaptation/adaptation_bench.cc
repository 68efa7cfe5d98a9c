// Runtime adaptation benchmarks (issue 13), run by CODEF's simulate mode
// under a virtual clock:
//
//   adaptation_bench [--quick]
//
// Cloud bursting on the mck8s workload: the five-site Grid'5000 scenario
// (examples/scenarios/grid5000-five-sites.yaml: 1,126 tasks over 60 minutes
// on 70 CPUs, peak demand about 115 CPUs) with its Nancy cloud provisioned on
// demand instead of standing by. Each row runs the whole scenario (90
// minutes: the study waits 30 minutes after the last arrival) with one
// placement policy and one cloud provisioner: none, mck8s's (the study's
// Algorithm 4) or codeco's (swm::CloudAutoscaler). Both come with a
// re-scheduler that moves long-running tasks back from the cloud when the
// fixed clusters have room again; codeco's also moves running jobs, with
// their progress, as its checkpointer moves a container with its state
// (mck8s's moves deployments only). It prints pending pods and CPU, the
// cloud's CPU-hours and nodes, next to the study's 6 % of pending pods.
// --quick uses a 60 s scheduling tick instead of 10 s.
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "report.h"
#include "scenario.h"
#include "simulation.h"
#include "swm/core/cloud_autoscaler.h"

namespace codeco::codef {
namespace {

// The cloud the scenario keeps for bursting.
constexpr char kCloudCluster[] = "nancy-cloud";

struct Row {
  const char* name;
  const char* policy;
  std::optional<swm::CloudScalingPolicy> cloud;
};

int Run(bool quick) {
  const std::string path =
      std::string(ADAPTATION_BENCH_SCENARIO_DIR) + "/grid5000-five-sites.yaml";
  absl::StatusOr<Scenario> scenario = LoadScenarioFile(path);
  if (!scenario.ok()) {
    std::printf("error: %s: %s\n", path.c_str(), std::string(scenario.status().message()).c_str());
    return 1;
  }
  const absl::Duration tick = quick ? absl::Seconds(60) : absl::Seconds(10);
  scenario->record.interval_ns = absl::ToInt64Nanoseconds(tick);
  scenario->record.metrics = {"pending_pods"};
  const Row rows[] = {
      {"mck8s cluster-affinity, no cloud", "mck8s-cluster-affinity", std::nullopt},
      {"codeco, no cloud", "codeco", std::nullopt},
      {"mck8s cluster-affinity + mck8s provisioner", "mck8s-cluster-affinity",
       swm::CloudScalingPolicy::kMck8s},
      {"codeco + codeco provisioner", "codeco", swm::CloudScalingPolicy::kPacked},
      {"codeco + mck8s provisioner", "codeco", swm::CloudScalingPolicy::kMck8s},
      {"mck8s cluster-affinity + codeco provisioner", "mck8s-cluster-affinity",
       swm::CloudScalingPolicy::kPacked},
  };
  const CloudBurstOptions defaults{.cluster = kCloudCluster};
  std::printf(
      "\n## Cloud bursting on the mck8s workload (CODEF simulate mode, %s, %s, tick %s)\n\n"
      "cloud %s: nodes of its first entry, at most %d; cluster ready %s after its order, an "
      "added node %s; scale-down delay %s, deprovisioning delay %s (the study's)\n\n",
      "examples/scenarios/grid5000-five-sites.yaml",
      absl::FormatDuration(absl::Nanoseconds(scenario->duration_ns)).c_str(),
      absl::FormatDuration(tick).c_str(), kCloudCluster, defaults.autoscaler.max_nodes,
      absl::FormatDuration(defaults.autoscaler.provisioning_delay).c_str(),
      absl::FormatDuration(defaults.autoscaler.node_boot_delay).c_str(),
      absl::FormatDuration(defaults.autoscaler.scale_down_delay).c_str(),
      absl::FormatDuration(defaults.autoscaler.deprovision_delay).c_str());
  std::printf(
      "| policy + cloud provisioner | pending pods, peak / mean | pending CPU, peak / mean "
      "| cloud CPU-hours | cloud nodes, peak (ordered) | first order | pods on cloud | moved "
      "back | wall |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& row : rows) {
    SimulationOptions options{.policy = row.policy, .tick = tick};
    if (row.cloud.has_value()) {
      options.cloud = defaults;
      options.cloud->autoscaler.policy = *row.cloud;
      // codeco moves jobs back from the cloud with their state; mck8s's
      // re-scheduler moves deployments only.
      options.cloud->reschedule_jobs = std::string(row.policy) == "codeco";
      if (*row.cloud == swm::CloudScalingPolicy::kPacked) options.cloud->autoscaler.scale_down_delay = absl::Minutes(2);
      if (*row.cloud == swm::CloudScalingPolicy::kPacked) options.cloud->autoscaler.scale_down_delay = absl::Minutes(5);
    }
    const absl::Time t0 = absl::Now();
    absl::StatusOr<SimulationResult> result = RunSimulation(*scenario, options, nullptr);
    const double wall_s = absl::ToDoubleSeconds(absl::Now() - t0);
    if (!result.ok()) {
      std::printf("error: %s: %s\n", row.name, std::string(result.status().message()).c_str());
      return 1;
    }
    absl::StatusOr<RecordedRun> run = ReadRecordedRun(result->csv);
    if (!run.ok()) {
      std::printf("error: %s\n", std::string(run.status().message()).c_str());
      return 1;
    }
    const RunSummary s = Summarize(*run);
    const CloudUsage& c = result->cloud;
    std::printf("| %s | %.1f / %.1f %% | %.1f / %.1f %% | %s | %s | %s | %lld | %lld | %.2f s |\n",
                row.name, 100 * s.pending_share_peak, 100 * s.pending_share_mean,
                100 * s.pending_cpu_share_peak, 100 * s.pending_cpu_share_mean,
                row.cloud ? absl::StrFormat("%.1f", c.cpu_hours).c_str() : "-",
                row.cloud ? absl::StrFormat("%d (%d)", c.peak_nodes, c.nodes_ordered).c_str()
                          : "-",
                c.first_order_ns < 0
                    ? "-"
                    : absl::FormatDuration(absl::Nanoseconds(c.first_order_ns)).c_str(),
                static_cast<long long>(c.pods_placed), static_cast<long long>(c.moved_back),
                wall_s);
  }
  std::printf("\nthe study (mck8s, with its cloud): at most 6 %% of pods pending\n");
  return 0;
}

}  // namespace
}  // namespace codeco::codef

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
      return 2;
    }
  }
  return codeco::codef::Run(quick);
}
