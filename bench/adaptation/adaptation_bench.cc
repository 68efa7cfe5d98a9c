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
//
// Noisy load (examples/scenarios/noisy-load.yaml): runtime adaptation on
// three clusters of long-running services with short load bursts, two
// lasting overloads and one real cluster failure, with the migration
// governor's rules and without them: moves per trigger, the most moves of
// one service within an hour, how soon the failure is acted on and when
// the services fail back.
//
// Traffic follow (mck8s's second experiment): a backend scaled by the
// multi-cluster autoscaler (acm::ReplicaAutoscaler) while its users move
// across the five sites: how long until every replica runs where the users
// are, and how many replicas it took.
#include <cstdio>
#include <cstring>
#include <map>
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

// examples/scenarios/<file>, or the error printed.
absl::StatusOr<Scenario> LoadBenchScenario(const std::string& file) {
  const std::string path = std::string(ADAPTATION_BENCH_SCENARIO_DIR) + "/" + file;
  absl::StatusOr<Scenario> scenario = LoadScenarioFile(path);
  if (!scenario.ok()) {
    std::printf("error: %s: %s\n", path.c_str(), std::string(scenario.status().message()).c_str());
  }
  return scenario;
}

struct Row {
  const char* name;
  const char* policy;
  std::optional<swm::CloudScalingPolicy> cloud;
};

int RunCloudBursting(bool quick) {
  absl::StatusOr<Scenario> scenario = LoadBenchScenario("grid5000-five-sites.yaml");
  if (!scenario.ok()) return 1;
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
  std::optional<DemandFloor> floor;
  for (const Row& row : rows) {
    SimulationOptions options{.policy = row.policy, .tick = tick};
    if (row.cloud.has_value()) {
      options.cloud = defaults;
      options.cloud->autoscaler.policy = *row.cloud;
      // codeco moves jobs back from the cloud with their state; mck8s's
      // re-scheduler moves deployments only.
      options.cloud->reschedule_jobs = std::string(row.policy) == "codeco";
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
    if (!floor.has_value()) {
      // Over the same run: its duration and sampling tick, the five sites.
      floor = ComputeDemandFloor(result->generated_tasks,
                                 result->placement_capacity_millicores, tick,
                                 absl::Nanoseconds(scenario->duration_ns));
    }
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
  std::printf("| physical floor (CPU demand beyond the sites' capacity) | - | %.1f / %.1f %% "
              "| - | - | - | - | - | - |\n",
              100 * floor->floor_peak, 100 * floor->floor_mean);
  std::printf("| pooled queue (the sites as one pool, no node boundaries, same tick) | - | "
              "%.1f / %.1f %% | - | - | - | - | - | - |\n",
              100 * floor->pooled_peak, 100 * floor->pooled_mean);
  std::printf("\nthe study (mck8s, with its cloud): at most 6 %% of pods pending\n");
  return 0;
}

// The first move of `trigger` at or after `from_ns`, in seconds after
// `from_ns`; -1 when none.
double SecondsToFirst(const AdaptationReport& report, const std::string& trigger,
                      int64_t from_ns) {
  for (const MigrationRecord& m : report.migrations) {
    if (m.trigger == trigger && m.at_ns >= from_ns) {
      return static_cast<double>(m.at_ns - from_ns) / 1e9;
    }
  }
  return -1;
}

// Noisy load (examples/scenarios/noisy-load.yaml): runtime adaptation with
// the migration governor's rules against the same triggers without them.
int RunNoisy() {
  absl::StatusOr<Scenario> scenario = LoadBenchScenario("noisy-load.yaml");
  if (!scenario.ok()) return 1;
  scenario->record.metrics = {"pending_pods"};
  // The real failure of the scenario: the partition that lasts (its heal
  // follows more than a minute later).
  int64_t cut_ns = -1, heal_ns = -1;
  for (size_t i = 0; i < scenario->faults.size(); ++i) {
    const FaultSpec& f = scenario->faults[i];
    if (f.action != FaultAction::kClusterPartition) continue;
    for (size_t j = i + 1; j < scenario->faults.size(); ++j) {
      const FaultSpec& h = scenario->faults[j];
      if (h.action == FaultAction::kClusterHeal && h.cluster == f.cluster) {
        if (h.at_ns - f.at_ns > absl::ToInt64Nanoseconds(absl::Minutes(1))) {
          cut_ns = f.at_ns;
          heal_ns = h.at_ns;
        }
        break;
      }
    }
  }
  AdaptationOptions with_rules;
  AdaptationOptions without_rules;
  without_rules.governor = {.failure_grace = absl::ZeroDuration(),
                            .overload_grace = absl::ZeroDuration(),
                            .overload_high = 0.9,
                            .overload_low = 0.9,
                            .min_gain = 0,
                            .cooldown = absl::ZeroDuration(),
                            .budget = 1'000'000,
                            .failback_grace = absl::ZeroDuration()};
  const struct {
    const char* name;
    AdaptationOptions options;
  } rows[] = {{"governor's rules (defaults)", with_rules},
              {"no rules (no grace, hysteresis, gain, cooldown or budget)", without_rules}};
  const double probe_s = absl::ToDoubleSeconds(with_rules.probe_interval);
  std::printf(
      "\n## Noisy load with runtime adaptation (CODEF simulate mode, %s, %s, probe %s)\n\n"
      "a real failure: a cluster cut at %s, healed at %s\n\n"
      "| rules | moves: overload / failure / failback | most moves of one service in an hour "
      "(for load only) | held back | failure acted on after | failback after the heal |\n"
      "|---|---|---|---|---|---|\n",
      "examples/scenarios/noisy-load.yaml",
      absl::FormatDuration(absl::Nanoseconds(scenario->duration_ns)).c_str(),
      absl::FormatDuration(with_rules.probe_interval).c_str(),
      absl::FormatDuration(absl::Nanoseconds(cut_ns)).c_str(),
      absl::FormatDuration(absl::Nanoseconds(heal_ns)).c_str());
  for (const auto& row : rows) {
    SimulationOptions options{.policy = "codeco", .adaptation = row.options};
    absl::StatusOr<SimulationResult> result = RunSimulation(*scenario, options, nullptr);
    if (!result.ok()) {
      std::printf("error: %s: %s\n", row.name, std::string(result.status().message()).c_str());
      return 1;
    }
    const AdaptationReport& a = result->adaptation;
    std::map<std::string, int> by_trigger;
    for (const MigrationRecord& m : a.migrations) ++by_trigger[m.trigger];
    const double acted = SecondsToFirst(a, "failure", cut_ns);
    const double back = SecondsToFirst(a, "failback", heal_ns);
    std::printf("| %s | %d / %d / %d | %d (%d) | %lld | %s | %s |\n", row.name,
                by_trigger["overload"], by_trigger["failure"], by_trigger["failback"],
                a.max_moves_per_task_hour, a.max_load_moves_per_task_hour,
                static_cast<long long>(a.held_back),
                acted < 0 ? "-" : absl::StrFormat("%.0f s (%.0f probes)", acted, acted / probe_s).c_str(),
                back < 0 ? "-" : absl::StrFormat("%.0f s", back).c_str());
  }
  std::printf("\nissue 13's goal: at most 1 move per service per hour for load, a failure acted on "
              "within 3 probes, failback by itself\n");
  return 0;
}

}  // namespace
}  // namespace codeco::codef

namespace codeco::codef {
namespace {

// mck8s's traffic-follow experiment on the five-site scenario: a backend of
// 500m / 512 MiB replicas (2 to 10, 75 % CPU target, 10-minute scale-down
// cooldown: the study's MCHPA) starts with 2 replicas at nantes; users
// needing 2 CPUs then sit 7 minutes each at lille, grenoble, luxembourg,
// rennes and nantes (the study's order).
int RunTrafficFollow(bool quick) {
  absl::StatusOr<Scenario> scenario = LoadBenchScenario("grid5000-five-sites.yaml");
  if (!scenario.ok()) return 1;
  scenario->workloads.task_stream->count = 0;  // the backend alone
  scenario->record.metrics = {"pending_pods"};
  const absl::Duration tick = quick ? absl::Seconds(60) : absl::Seconds(10);
  SimDeployment backend{.name = "backend",
                        .autoscaling = {.min_replicas = 2,
                                        .max_replicas = 10,
                                        .target_utilization = 0.75,
                                        .scale_down_cooldown = absl::Minutes(10)}};
  const int64_t step = absl::ToInt64Nanoseconds(absl::Minutes(7));
  backend.traffic.push_back({.at_ns = 0, .cluster = "nantes", .cpu_millicores = 500});
  // The users move 1 s after a scheduling cycle: the worst case for how
  // soon the next cycle sees them.
  int64_t at = absl::ToInt64Nanoseconds(absl::Minutes(5) + absl::Seconds(1));
  for (const char* site : {"lille", "grenoble", "luxembourg", "rennes", "nantes"}) {
    backend.traffic.push_back({.at_ns = at, .cluster = site, .cpu_millicores = 2000});
    at += step;
  }
  backend.traffic.push_back({.at_ns = at, .cluster = "nantes", .cpu_millicores = 500});
  SimulationOptions options{.policy = "codeco",
                            .tick = tick,
                            .duration = absl::Nanoseconds(at) + absl::Minutes(15),
                            .deployments = {backend}};
  absl::StatusOr<SimulationResult> result = RunSimulation(*scenario, options, nullptr);
  if (!result.ok()) {
    std::printf("error: %s\n", std::string(result.status().message()).c_str());
    return 1;
  }
  std::printf(
      "\n## Traffic follow (mck8s's experiment, CODEF simulate mode, five sites, tick %s)\n\n"
      "backend 500m / 512 MiB replicas, 2-10, target 75 %% CPU, scale-down cooldown 10m; "
      "users need 2 CPUs for 7 minutes at each site in turn\n\n"
      "| from | users at | CPU they need | all replicas there after | replicas, peak |\n"
      "|---|---|---|---|---|\n",
      absl::FormatDuration(tick).c_str());
  for (size_t i = 0; i < result->follows.size(); ++i) {
    const FollowRecord& f = result->follows[i];
    std::printf("| %s | %s | %lldm | %s | %d |\n",
                absl::FormatDuration(absl::Nanoseconds(f.at_ns)).c_str(), f.cluster.c_str(),
                static_cast<long long>(backend.traffic[i].cpu_millicores),
                f.followed_after_ns < 0
                    ? "never"
                    : absl::FormatDuration(absl::Nanoseconds(f.followed_after_ns)).c_str(),
                f.peak_replicas);
  }
  std::printf("\nsimulate mode sees where the users are at once; a live hub sees it through "
              "its metrics, a scrape interval later\n"
              "the study: the backend follows the traffic to each cluster at the next "
              "scheduling cycle after the autoscaler's update (Fig. 8, no time given)\n");
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
  const int cloud = codeco::codef::RunCloudBursting(quick);
  if (cloud != 0) return cloud;
  const int follow = codeco::codef::RunTrafficFollow(quick);
  if (follow != 0) return follow;
  return codeco::codef::RunNoisy();
}
