// Simulate mode on tiny scenarios: the scheduler respects capacity, jobs
// finish and free their room, faults act at their time, partitions keep new
// pods away, and a run repeats exactly for a seed.
#include "simulation.h"

#include <catch2/catch.hpp>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "report.h"

namespace codeco::codef {
namespace {

// Cluster a: two nodes of 1 CPU; cluster b: one node of 1 CPU. Eight jobs of
// 500m, 2 minutes each, all arriving in the first second and preferring a.
std::string TinyScenario(const std::string& faults, const std::string& extra_stream = "") {
  return absl::StrCat(R"(
name: tiny
duration: 10m
federation:
  hub: {name: hub}
  clusters:
    - name: a
      pod_start_delay: 0s
      nodes: [{name: n, count: 2, capacity: {cpu: 1, memory: 1Gi},
               energy: {idle_watts: 10, max_watts: 20}}]
    - name: b
      pod_start_delay: 0s
      nodes: [{name: m, capacity: {cpu: 1, memory: 1Gi}, energy: {idle_watts: 10, max_watts: 20}}]
links:
  default: {rtt: 10ms, bandwidth: 1Gbps}
workloads:
  task_stream:
    count: 8
    window: 1s
    duration: 2m
    cpu: 500m
    memory: 64Mi
    locations: {a: 1}
    seed: 7
)",
                      extra_stream, "faults: ", faults.empty() ? "[]" : "", "\n", faults, R"(
record:
  interval: 10s
  metrics: [pending_pods, node_usage, pod_phases]
)");
}

Scenario Parse(const std::string& yaml) {
  absl::StatusOr<Scenario> scenario = ParseScenario(yaml, "");
  INFO(scenario.status().ToString());
  REQUIRE(scenario.ok());
  return *scenario;
}

SimulationResult Simulate(const Scenario& scenario, const std::string& policy = "codeco") {
  SimulationOptions options;
  options.policy = policy;
  absl::StatusOr<SimulationResult> result = RunSimulation(scenario, options, nullptr);
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  return *std::move(result);
}

// pending_pods.csv as time_s -> (unplaced, placed).
std::map<int, std::pair<int, int>> Pending(const SimulationResult& result) {
  std::map<int, std::pair<int, int>> out;
  std::vector<std::string> lines =
      absl::StrSplit(result.csv.at("pending_pods.csv"), '\n', absl::SkipEmpty());
  REQUIRE(lines.at(0) ==
          "time_s,pending,unplaced,placed,unplaced_cpu_millicores,placed_cpu_millicores");
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> cells = absl::StrSplit(lines[i], ',');
    REQUIRE(cells.size() == 6);
    double t = 0;
    int unplaced = 0, placed = 0;
    REQUIRE(absl::SimpleAtod(cells[0], &t));
    REQUIRE(absl::SimpleAtoi(cells[2], &unplaced));
    REQUIRE(absl::SimpleAtoi(cells[3], &placed));
    out[static_cast<int>(t)] = {unplaced, placed};
  }
  return out;
}

// node_usage.csv as (time_s, "cluster/node") -> (requested, allocatable) CPU.
std::map<std::pair<int, std::string>, std::pair<int64_t, int64_t>> NodeCpu(
    const SimulationResult& result) {
  std::map<std::pair<int, std::string>, std::pair<int64_t, int64_t>> out;
  std::vector<std::string> lines =
      absl::StrSplit(result.csv.at("node_usage.csv"), '\n', absl::SkipEmpty());
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> cells = absl::StrSplit(lines[i], ',');
    REQUIRE(cells.size() == 8);
    double t = 0;
    int64_t requested = 0, allocatable = 0;
    REQUIRE(absl::SimpleAtod(cells[0], &t));
    REQUIRE(absl::SimpleAtoi(cells[6], &requested));
    REQUIRE(absl::SimpleAtoi(cells[7], &allocatable));
    out[{static_cast<int>(t), cells[1] + "/" + cells[2]}] = {requested, allocatable};
  }
  return out;
}

TEST_CASE("simulate places up to capacity and the rest waits for the next tick") {
  SimulationResult result = Simulate(Parse(TinyScenario("")));
  auto pending = Pending(result);
  // 61 samples: 0s to 600s every 10s.
  REQUIRE(pending.size() == 61);
  // At 0s nothing has arrived; at 10s six of eight fit (3 CPUs of 500m jobs).
  REQUIRE(pending.at(0) == std::pair{0, 0});
  REQUIRE(pending.at(10) == std::pair{2, 6});
  for (const auto& [key, cpu] : NodeCpu(result)) {
    INFO(key.first << " s " << key.second);
    REQUIRE(cpu.first <= cpu.second);
  }
  REQUIRE(NodeCpu(result).at({10, "b/m"}).first == 1000);  // codeco bursts to b
  REQUIRE(result.tasks.rejected_by_lms == 0);
}

TEST_CASE("simulate completes jobs after their duration and frees their capacity") {
  SimulationResult result = Simulate(Parse(TinyScenario("")));
  auto pending = Pending(result);
  // Placed at 10s, the first six finish at 130s; the two waiting get their
  // room at the 130s tick and finish at 250s.
  REQUIRE(pending.at(120) == std::pair{2, 6});
  REQUIRE(pending.at(130) == std::pair{0, 2});
  REQUIRE(pending.at(240) == std::pair{0, 2});
  REQUIRE(pending.at(250) == std::pair{0, 0});
  REQUIRE(result.tasks.completed == 8);
  REQUIRE(result.tasks.pods_created == 8);
  REQUIRE(result.tasks.waiting_at_end == 0);
}

TEST_CASE("long-running tasks keep their capacity to the end") {
  SimulationResult result = Simulate(Parse(TinyScenario("", "    long_running_after: 1m\n")));
  auto pending = Pending(result);
  REQUIRE(pending.at(600) == std::pair{2, 6});
  REQUIRE(result.tasks.completed == 0);
}

TEST_CASE("the kubefed baseline keeps tasks in their preferred cluster") {
  SimulationResult result = Simulate(Parse(TinyScenario("")), kKubefedPolicy);
  auto pending = Pending(result);
  // Only cluster a's 2 CPUs: four run, four wait, though b is idle.
  REQUIRE(pending.at(10) == std::pair{4, 4});
  REQUIRE(NodeCpu(result).at({10, "b/m"}).first == 0);
  REQUIRE(pending.at(130) == std::pair{0, 4});
}

TEST_CASE("a node failure on the timeline takes effect at its time") {
  SimulationResult result = Simulate(Parse(TinyScenario(R"(
  - {at: 60s, action: node_fail, node: a/n-1}
  - {at: 90s, action: node_recover, node: a/n-1}
)")));
  auto pending = Pending(result);
  auto cpu = NodeCpu(result);
  REQUIRE(pending.at(50) == std::pair{2, 6});
  REQUIRE(cpu.at({50, "a/n-1"}).first == 1000);
  // At 60s the two pods of a/n-1 fail and wait again with the two others.
  REQUIRE(pending.at(60) == std::pair{4, 4});
  REQUIRE(cpu.at({60, "a/n-1"}).first == 0);
  REQUIRE(result.tasks.pods_failed == 2);
  // At 90s the node is back and takes two of them.
  REQUIRE(pending.at(80) == std::pair{4, 4});
  REQUIRE(pending.at(90) == std::pair{2, 6});
  REQUIRE(result.events.size() == 2);
  REQUIRE(absl::StrContains(result.events[0], "node_fail a/n-1: ok"));
  // The retried tasks run their full duration and everything completes.
  REQUIRE(result.tasks.completed == 8);
  REQUIRE(result.tasks.pods_created == 10);
}

TEST_CASE("a partitioned cluster gets no new pods until it heals") {
  SimulationResult result = Simulate(Parse(TinyScenario(R"(
  - {at: 0s, action: cluster_partition, cluster: b}
  - {at: 30s, action: cluster_heal, cluster: b}
)")));
  auto pending = Pending(result);
  auto cpu = NodeCpu(result);
  REQUIRE(pending.at(20) == std::pair{4, 4});
  REQUIRE(cpu.at({20, "b/m"}).first == 0);
  REQUIRE(pending.at(30) == std::pair{2, 6});
  REQUIRE(cpu.at({30, "b/m"}).first == 1000);
}

TEST_CASE("the same seed gives the same CSV and another seed does not") {
  std::string random_stream = R"(
name: seeded
duration: 30m
federation:
  hub: {name: hub}
  clusters:
    - name: a
      nodes: [{name: n, count: 3, capacity: {cpu: 2, memory: 4Gi}}]
    - name: b
      nodes: [{name: m, count: 2, capacity: {cpu: 2, memory: 4Gi}}]
links:
  default: {rtt: 10ms}
workloads:
  task_stream:
    count: 200
    window: 20m
    duration: {distribution: lognormal, median: 3m, sigma: 1}
    cpu: {distribution: choice, values: [100m, 250m, 500m, 1]}
    memory: {distribution: uniform, min: 32Mi, max: 512Mi}
    seed: SEED
record:
  interval: 30s
  metrics: [pending_pods, node_usage, node_energy, pod_phases, placement]
)";
  auto with_seed = [&](const std::string& seed) {
    std::string yaml = random_stream;
    yaml.replace(yaml.find("SEED"), 4, seed);
    return Simulate(Parse(yaml)).csv;
  };
  auto first = with_seed("11");
  auto again = with_seed("11");
  auto other = with_seed("12");
  REQUIRE(first.size() == 5);
  REQUIRE(first == again);
  REQUIRE(first.at("placement.csv") != other.at("placement.csv"));
}

TEST_CASE("a CAM of the scenario is placed whole at its time with its data locality") {
  const std::string cam = R"(apiVersion: codeco.io/v1
kind: CodecoApp
metadata: {name: pipe}
spec:
  appName: pipe
  codecoapp-msspec:
    - serviceName: sensor
      dataLocality: b
      podspec:
        containers: [{name: s, image: "example.org/s:1", resources: {requests: {cpu: 500m, memory: 64Mi}}}]
      serviceChannels:
        - channelName: readings
          otherService: {appName: pipe, serviceName: fusion, port: 9000}
          serviceClass: BESTEFFORT
          advancedChannelSettings: {maxDelay: 20ms}
    - serviceName: fusion
      podspec:
        containers: [{name: f, image: "example.org/f:1", resources: {requests: {cpu: 1500m, memory: 64Mi}}}]
)";
  Scenario scenario = Parse(R"(
name: cams
duration: 3m
federation:
  hub: {name: hub}
  clusters:
    - name: a
      pod_start_delay: 0s
      nodes: [{name: n, capacity: {cpu: 2, memory: 1Gi}}]
    - name: b
      pod_start_delay: 0s
      nodes: [{name: m, capacity: {cpu: 1, memory: 1Gi}}]
links:
  default: {rtt: 10ms, bandwidth: 1Gbps}
workloads:
  cams: [{file: /scenario/pipe.yaml, at: 1m}]
record:
  interval: 10s
  metrics: [node_usage]
)");
  SimulationOptions options;
  options.policy = "codeco";
  FileReader files = [&](const std::string& path) -> absl::StatusOr<std::string> {
    if (path == "/scenario/pipe.yaml") return cam;
    return absl::NotFoundError(path);
  };
  absl::StatusOr<SimulationResult> result = RunSimulation(scenario, options, files);
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  CHECK(result->applications_placed == 1);
  std::string notes = absl::StrJoin(result->notes, "\n");
  INFO(notes);
  // The sensor stays with its data in b; fusion needs more than b has left.
  CHECK_THAT(notes, Catch::Contains("sensor-0 on b/m"));
  CHECK_THAT(notes, Catch::Contains("fusion-0 on a/n"));
  auto cpu = NodeCpu(*result);
  CHECK(cpu.at({50, "b/m"}).first == 0);  // not applied before 1 m
  CHECK(cpu.at({70, "b/m"}).first == 500);
  CHECK(cpu.at({70, "a/n"}).first == 1500);

  // A CAM that does not parse is refused with its field path.
  const std::string broken = "apiVersion: codeco.io/v1\nkind: CodecoApp\nspec: {}\n";
  FileReader bad_files = [&](const std::string&) -> absl::StatusOr<std::string> {
    return broken;
  };
  absl::StatusOr<SimulationResult> refused = RunSimulation(scenario, options, bad_files);
  REQUIRE(refused.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("workloads.cams[0]"));
}

TEST_CASE("simulated CAMs go through SWM's PlacementService and share the link's bandwidth") {
  // Two applications whose channel b -> a needs 60 Mbps of a 100 Mbps link:
  // each fits alone, not both. The hub's link ledger keeps the second
  // waiting while the first holds the bandwidth.
  auto cam = [](const std::string& name) {
    return absl::StrCat(R"(apiVersion: codeco.io/v1
kind: CodecoApp
metadata: {name: )", name, R"(}
spec:
  appName: )", name, R"(
  codecoapp-msspec:
    - serviceName: sensor
      dataLocality: b
      podspec:
        containers: [{name: s, image: "example.org/s:1", resources: {requests: {cpu: 100m, memory: 32Mi}}}]
      serviceChannels:
        - channelName: readings
          otherService: {appName: )", name, R"(, serviceName: fusion, port: 9000}
          serviceClass: BESTEFFORT
          advancedChannelSettings: {maxDelay: 50ms, minBandwidth: 60Mbps}
    - serviceName: fusion
      dataLocality: a
      podspec:
        containers: [{name: f, image: "example.org/f:1", resources: {requests: {cpu: 100m, memory: 32Mi}}}]
)");
  };
  Scenario scenario = Parse(R"(
name: shared-link
duration: 2m
federation:
  hub: {name: hub}
  clusters:
    - name: a
      pod_start_delay: 0s
      nodes: [{name: n, capacity: {cpu: 4, memory: 4Gi}}]
    - name: b
      pod_start_delay: 0s
      nodes: [{name: m, capacity: {cpu: 4, memory: 4Gi}}]
links:
  default: {rtt: 10ms, bandwidth: 100Mbps}
workloads:
  cams: [{file: /one.yaml, at: 30s}, {file: /two.yaml, at: 30s}]
record:
  interval: 10s
  metrics: [node_usage]
)");
  FileReader files = [&](const std::string& path) -> absl::StatusOr<std::string> {
    if (path == "/one.yaml") return cam("one");
    if (path == "/two.yaml") return cam("two");
    return absl::NotFoundError(path);
  };
  SimulationOptions options;
  absl::StatusOr<SimulationResult> result = RunSimulation(scenario, options, files);
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  std::string notes = absl::StrJoin(result->notes, "\n");
  INFO(notes);
  CHECK(result->applications_placed == 1);
  CHECK_THAT(notes, Catch::Contains("application one placed at 30 s"));
  CHECK_THAT(notes, Catch::Contains("application two (/two.yaml) waits"));
  CHECK_THAT(notes, Catch::Contains("link b -> a: needs 60000000bps, 40000000bps free"));
}

TEST_CASE("simulate rejects a bad policy and a scenario without duration") {
  Scenario scenario = Parse(TinyScenario(""));
  SimulationOptions options;
  options.policy = "fastest";
  auto bad_policy = RunSimulation(scenario, options, nullptr);
  REQUIRE(absl::IsInvalidArgument(bad_policy.status()));
  REQUIRE(absl::StrContains(bad_policy.status().message(), "policy: unknown policy \"fastest\""));

  options.policy = "codeco";
  options.tick = absl::ZeroDuration();
  auto bad_tick = RunSimulation(scenario, options, nullptr);
  REQUIRE(absl::StrContains(bad_tick.status().message(), "tick: must be positive"));

  scenario.duration_ns = 0;
  options.tick = absl::Seconds(10);
  auto no_duration = RunSimulation(scenario, options, nullptr);
  REQUIRE(absl::IsInvalidArgument(no_duration.status()));
  REQUIRE(absl::StartsWith(no_duration.status().message(), "duration:"));
  options.duration = absl::Minutes(1);
  REQUIRE(RunSimulation(scenario, options, nullptr).ok());
}

TEST_CASE("every listed policy runs and places the tiny stream") {
  Scenario scenario = Parse(TinyScenario(""));
  for (const std::string& policy : SimulationPolicies()) {
    INFO(policy);
    SimulationResult result = Simulate(scenario, policy);
    REQUIRE(result.tasks.completed == 8);
  }
}

TEST_CASE("the summary of a simulated run matches its CSV") {
  SimulationResult result = Simulate(Parse(TinyScenario("")));
  auto run = ReadRecordedRun(result.csv);
  REQUIRE(run.ok());
  RunSummary summary = Summarize(*run);
  REQUIRE(summary.samples == 61);
  // 2 of 8 wait from 10s to 120s: 12 samples at 25 %.
  REQUIRE(summary.pending_share_peak == Approx(0.25));
  REQUIRE(summary.pending_share_mean == Approx(12 * 0.25 / 61));
  REQUIRE(summary.clusters.size() == 2);
  REQUIRE(summary.clusters[0].cpu_allocated_peak == Approx(1.0));
}

TEST_CASE("the physical floor is the demand beyond capacity") {
  std::vector<GeneratedTask> tasks = {
      {.name = "a", .at_ns = 0, .cpu_millicores = 1500, .duration_ns = 60'000'000'000},
      {.name = "b", .at_ns = 0, .cpu_millicores = 1500, .duration_ns = 30'000'000'000},
      {.name = "c", .at_ns = 0, .cpu_millicores = 1000, .long_running = true},
  };
  // Capacity 2 CPUs; samples at 0, 30, 60, 90 s: demand 4, 2.5, 1, 1 CPUs.
  DemandFloor floor = ComputeDemandFloor(tasks, 2000, absl::Seconds(30), absl::Seconds(90));
  REQUIRE(floor.peak_demand_cpus == Approx(4.0));
  REQUIRE(floor.floor_peak == Approx(0.5));
  REQUIRE(floor.floor_mean == Approx((0.5 + 0.2) / 4));
}

// Cluster a: one node of 1 CPU takes the task stream; cluster c stands for
// an on-demand cloud of 2-CPU nodes. `stream` sets the tasks' duration.
std::string CloudScenario(const std::string& duration, const std::string& long_running_after,
                          const std::string& faults = "[]") {
  return absl::StrCat(R"(
name: cloudy
duration: 30m
federation:
  hub: {name: hub}
  clusters:
    - name: a
      pod_start_delay: 0s
      nodes: [{name: n, capacity: {cpu: 1, memory: 1Gi}}]
    - name: c
      pod_start_delay: 0s
      nodes: [{name: vm, count: 3, capacity: {cpu: 2, memory: 4Gi}}]
links:
  default: {rtt: 10ms, bandwidth: 1Gbps}
workloads:
  task_stream:
    count: 8
    window: 1s
    duration: )",
                      duration, R"(
    cpu: 500m
    memory: 64Mi
    long_running_after: )",
                      long_running_after, R"(
    locations: {a: 1}
    clusters: [a]
    seed: 7
faults: )",
                      faults, R"(
record:
  interval: 10s
  metrics: [pending_pods]
)");
}

SimulationOptions CloudOptions(swm::CloudScalingPolicy policy) {
  SimulationOptions options;
  options.cloud = CloudBurstOptions{.cluster = "c"};
  options.cloud->autoscaler.policy = policy;
  options.cloud->autoscaler.provisioning_delay = absl::Minutes(1);
  options.cloud->autoscaler.scale_down_delay = absl::Minutes(2);
  options.cloud->autoscaler.deprovision_delay = absl::Minutes(3);
  return options;
}

TEST_CASE("the cloud is ordered for pending tasks and given back once idle") {
  // Two of the eight 500m jobs fit on a; the six others wait for the cloud
  // (a minute to provision).
  Scenario scenario = Parse(CloudScenario("4m", "1h"));
  for (swm::CloudScalingPolicy policy :
       {swm::CloudScalingPolicy::kMck8s, swm::CloudScalingPolicy::kPacked}) {
    INFO(swm::CloudScalingPolicyName(policy));
    absl::StatusOr<SimulationResult> result =
        RunSimulation(scenario, CloudOptions(policy), nullptr);
    REQUIRE(result.ok());
    const CloudUsage& cloud = result->cloud;
    INFO(absl::StrJoin(result->events, "\n"));
    CHECK(result->tasks.completed == 8);
    CHECK(cloud.clusters_ordered == 1);
    // The tasks arrive in the first second: the tick at 10 s sees them pending.
    CHECK(cloud.first_order_ns == absl::ToInt64Nanoseconds(absl::Seconds(10)));
    // Both order the 2 nodes the six pods need; codeco also keeps headroom
    // for the demand's growth (4 CPUs in 10 s, over its 5-minute window:
    // 1.6 CPUs within a node's 2-minute boot, more than the 1 CPU left).
    CHECK(cloud.nodes_ordered == (policy == swm::CloudScalingPolicy::kMck8s ? 2 : 3));
    CHECK(cloud.pods_placed == 6);
    // Every node was given back, with the cluster once it had been idle.
    CHECK(cloud.nodes_removed == cloud.nodes_ordered);
    CHECK(std::any_of(result->events.begin(), result->events.end(), [](const std::string& e) {
      return absl::StrContains(e, "cloud c: removed (idle for");
    }));
    // Billed from order to removal: 2 nodes of 2 CPUs for well under the 30 minutes.
    CHECK(cloud.cpu_hours > 0.1);
    CHECK(cloud.cpu_hours < 2 * 2 * 0.5);
    // The tasks never ran on the cloud before it was Ready, and a's run was
    // not counted as the cloud's.
    CHECK(result->placement_clusters == std::vector<std::string>{"a"});
  }
}

TEST_CASE("the re-scheduler moves long-running tasks back from the cloud when room returns") {
  // a's node is down from the start, so all eight services (long-running)
  // go to the cloud; when it is back at 3 minutes, the re-scheduler moves
  // the two it has room for back to a.
  Scenario scenario = Parse(CloudScenario("1h", "30m", R"(
  - {at: 0s, action: node_fail, node: a/n}
  - {at: 3m, action: node_recover, node: a/n})"));
  absl::StatusOr<SimulationResult> result =
      RunSimulation(scenario, CloudOptions(swm::CloudScalingPolicy::kPacked), nullptr);
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  CHECK(result->cloud.pods_placed == 8);
  CHECK(result->cloud.moved_back == 2);
  CHECK(result->tasks.waiting_at_end == 0);
  // Without the re-scheduler they stay.
  SimulationOptions options = CloudOptions(swm::CloudScalingPolicy::kPacked);
  options.cloud->reschedule = false;
  result = RunSimulation(scenario, options, nullptr);
  REQUIRE(result.ok());
  CHECK(result->cloud.moved_back == 0);
}

TEST_CASE("with reschedule_jobs the re-scheduler moves jobs back with their progress") {
  // The same outage with 10-minute jobs: at 3 minutes two of them move to a
  // and finish there 10 s (the move) after they would have on the cloud.
  Scenario scenario = Parse(CloudScenario("10m", "1h", R"(
  - {at: 0s, action: node_fail, node: a/n}
  - {at: 3m, action: node_recover, node: a/n})"));
  SimulationOptions options = CloudOptions(swm::CloudScalingPolicy::kPacked);
  absl::StatusOr<SimulationResult> stay = RunSimulation(scenario, options, nullptr);
  REQUIRE(stay.ok());
  CHECK(stay->cloud.moved_back == 0);
  options.cloud->reschedule_jobs = true;
  absl::StatusOr<SimulationResult> moved = RunSimulation(scenario, options, nullptr);
  REQUIRE(moved.ok());
  CHECK(moved->cloud.moved_back == 2);
  CHECK(moved->tasks.completed == 8);
  // The cloud is Ready at 70 s and the jobs run from then until 670 s; the
  // two moved ones did not start over: they end at 680 s, 10 s later.
  auto running_at = [](const SimulationResult& r, int t) { return Pending(r).at(t).second; };
  CHECK(running_at(*stay, 660) == 8);
  CHECK(running_at(*stay, 670) == 0);
  CHECK(running_at(*moved, 660) == 8);
  CHECK(running_at(*moved, 670) == 2);
  CHECK(running_at(*moved, 680) == 0);
}

TEST_CASE("cloud bursting checks its cluster") {
  Scenario scenario = Parse(CloudScenario("4m", "1h"));
  SimulationOptions options = CloudOptions(swm::CloudScalingPolicy::kPacked);
  options.cloud->cluster = "a";
  auto fixed = RunSimulation(scenario, options, nullptr);
  REQUIRE(absl::IsInvalidArgument(fixed.status()));
  CHECK(absl::StrContains(fixed.status().message(), "cloud.cluster: a is one of task_stream"));
  options.cloud->cluster = "nowhere";
  auto unknown = RunSimulation(scenario, options, nullptr);
  CHECK(absl::StrContains(unknown.status().message(), "cloud.cluster: no managed cluster"));
  options.cloud->cluster = "c";
  options.cloud->autoscaler.max_nodes = 0;
  auto bad = RunSimulation(scenario, options, nullptr);
  CHECK(absl::StrContains(bad.status().message(), "cloud.max_nodes"));
}

// Cluster a and cluster b: one node of 4 CPUs each; four long-running 500m
// services that prefer a (cluster affinity keeps them there).
std::string AdaptationScenario(const std::string& faults) {
  return absl::StrCat(R"(
name: adaptive
duration: 40m
federation:
  hub: {name: hub}
  clusters:
    - name: a
      pod_start_delay: 0s
      nodes: [{name: n, capacity: {cpu: 4, memory: 8Gi}}]
    - name: b
      pod_start_delay: 0s
      nodes: [{name: m, capacity: {cpu: 4, memory: 8Gi}}]
links:
  default: {rtt: 10ms, bandwidth: 1Gbps}
workloads:
  task_stream:
    count: 4
    window: 1s
    duration: 2h
    cpu: 500m
    memory: 64Mi
    long_running_after: 1h
    locations: {a: 1}
    seed: 7
faults:
)",
                      faults, R"(
record:
  interval: 10s
  metrics: [pending_pods]
)");
}

SimulationResult Adapted(const std::string& faults) {
  SimulationOptions options;
  options.policy = "mck8s-cluster-affinity";
  options.adaptation = AdaptationOptions{
      .probe_interval = absl::Seconds(30),
      .governor = {.failure_grace = absl::Seconds(60),
                   .overload_grace = absl::Minutes(3),
                   .failback_grace = absl::Minutes(5)}};
  absl::StatusOr<SimulationResult> result =
      RunSimulation(Parse(AdaptationScenario(faults)), options, nullptr);
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  return *std::move(result);
}

// The moves of a run as "<minute:second> <trigger> <from> -> <to>".
std::vector<std::string> Moves(const SimulationResult& result) {
  std::vector<std::string> out;
  for (const MigrationRecord& m : result.adaptation.migrations) {
    out.push_back(absl::StrCat(m.at_ns / 60'000'000'000, ":", (m.at_ns / 1'000'000'000) % 60, " ",
                               m.trigger, " ", m.from, " -> ", m.to));
  }
  return out;
}

TEST_CASE("a cut shorter than the failure grace moves nothing") {
  SimulationResult result = Adapted(R"(
  - {at: 2m, action: cluster_partition, cluster: a}
  - {at: 160s, action: cluster_heal, cluster: a})");
  INFO(absl::StrJoin(Moves(result), "\n"));
  CHECK(result.adaptation.migrations.empty());
}

TEST_CASE("a cluster cut past the grace is evacuated within three probes and failed back after") {
  SimulationResult result = Adapted(R"(
  - {at: 5m, action: cluster_partition, cluster: a}
  - {at: 15m, action: cluster_heal, cluster: a})");
  const std::vector<std::string> moves = Moves(result);
  INFO(absl::StrJoin(moves, "\n"));
  INFO(absl::StrJoin(result.events, "\n"));
  REQUIRE(moves.size() == 8);
  // Seen unreachable at 5:00, failed once that lasted 60 s: moved at 6:00,
  // two probes after the cut.
  for (int i = 0; i < 4; ++i) {
    CHECK(absl::StartsWith(moves[i], "6:0 failure a/n -> b/m"));
  }
  // Reachable again at 15:00, healthy for 5 minutes: home at 20:00.
  for (int i = 4; i < 8; ++i) {
    CHECK(absl::StartsWith(moves[i], "20:0 failback b/m -> a/n"));
  }
  CHECK(result.adaptation.max_moves_per_task_hour == 2);
  CHECK(result.adaptation.max_load_moves_per_task_hour == 0);
  // The pods left on a during the cut were deleted once it was back: a runs
  // exactly the four services again.
  CHECK(Pending(result).rbegin()->second == std::pair{0, 4});
}

TEST_CASE("a load blip moves nothing and a lasting overload moves each service once") {
  SimulationResult result = Adapted(R"(
  - {at: 1m, action: node_load, node: a/n, cpu: 90%, duration: 1m}
  - {at: 5m, action: node_load, node: a/n, cpu: 80%, duration: 10m})");
  const std::vector<std::string> moves = Moves(result);
  INFO(absl::StrJoin(moves, "\n"));
  // The 80 % background keeps a/n above the low mark until 15:00, so its
  // services leave one per probe from 8:00 (3 minutes of overload), each once.
  REQUIRE(moves.size() == 4);
  CHECK(absl::StartsWith(moves[0], "8:0 overload a/n -> b/m"));
  for (const std::string& m : moves) CHECK(absl::StrContains(m, "overload a/n -> b/m"));
  CHECK(result.adaptation.max_moves_per_task_hour == 1);
  CHECK(result.adaptation.max_load_moves_per_task_hour == 1);
}

TEST_CASE("adaptation options are checked") {
  SimulationOptions options;
  options.adaptation = AdaptationOptions{.probe_interval = absl::ZeroDuration()};
  auto bad = RunSimulation(Parse(AdaptationScenario("[]")), options, nullptr);
  CHECK(absl::StrContains(bad.status().message(), "adaptation.probe_interval"));
  options.adaptation = AdaptationOptions{};
  options.adaptation->governor.overload_low = 2;
  bad = RunSimulation(Parse(AdaptationScenario("[]")), options, nullptr);
  CHECK(absl::StrContains(bad.status().message(), "adaptation.overload_low"));
}

TEST_CASE("a multi-cluster deployment scales with its users and follows them") {
  // Clusters a and b (one node of 4 CPUs each): 2 replicas of 500m start
  // near users at a needing 500m; at 2 minutes the users are at b and need
  // 1.5 CPUs (utilization 1.5 over 2 replicas, target 0.5: 6 replicas), all
  // at b by that tick; at 5 minutes they need 250m, and the replicas go
  // down to the minimum only after the 10-minute cooldown.
  Scenario scenario = Parse(AdaptationScenario("[]"));
  scenario.workloads.task_stream->count = 0;
  SimulationOptions options;
  options.deployments.push_back(SimDeployment{
      .name = "backend",
      .autoscaling = {.min_replicas = 2, .max_replicas = 8, .target_utilization = 0.5},
      .traffic = {{.at_ns = 0, .cluster = "a", .cpu_millicores = 500},
                  {.at_ns = absl::ToInt64Nanoseconds(absl::Minutes(2)),
                   .cluster = "b",
                   .cpu_millicores = 1500},
                  {.at_ns = absl::ToInt64Nanoseconds(absl::Minutes(5)),
                   .cluster = "b",
                   .cpu_millicores = 250}}});
  absl::StatusOr<SimulationResult> result = RunSimulation(scenario, options, nullptr);
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  REQUIRE(result->follows.size() == 3);
  const FollowRecord& start = result->follows[0];
  CHECK(start.cluster == "a");
  CHECK(start.followed_after_ns == 0);
  CHECK(start.peak_replicas == 2);
  const FollowRecord& moved = result->follows[1];
  CHECK(moved.cluster == "b");
  CHECK(moved.followed_after_ns == 0);  // the tick at 2:00 moves them
  CHECK(moved.peak_replicas == 6);      // 2 x (1500 / 1000) / 0.5
  const FollowRecord& quiet = result->follows[2];
  CHECK(quiet.peak_replicas == 6);      // kept through the cooldown
  // At the end (40 minutes) the cooldown has passed: down to the minimum.
  CHECK(Pending(*result).rbegin()->second == std::pair{0, 2});
  // A deployment whose users are nowhere the tasks may go is refused.
  options.deployments[0].traffic[1].cluster = "mars";
  auto bad = RunSimulation(scenario, options, nullptr);
  CHECK(absl::StrContains(bad.status().message(), "deployments[0].traffic[1].cluster"));
}

}  // namespace
}  // namespace codeco::codef
