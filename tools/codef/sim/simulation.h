#pragma once
// CODEF simulate mode: runs a scenario in one process under a virtual clock.
// The emulated clusters of codef_core (the Federation) host the pods; the
// scheduler's core (swm_core's Coordinator with a built-in profile) places
// the scenario's task stream on them; the fault timeline is applied at its
// times; the Recorder is sampled every `record.interval`. Nothing here reads
// the wall clock or opens a socket, so an hour of scenario runs in seconds
// and the same scenario (same seed) always gives the same CSV.
//
// Discrete events, in time order (same instant: faults, then scheduling,
// then the sample):
//  - the fault timeline and the ends of load surges (Federation::Tick);
//  - job completions, at their exact time inside the emulated LMS (a job is
//    a task shorter than `long_running_after`; longer ones run to the end);
//  - a scheduling cycle every `tick`: tasks that have arrived join the
//    queue in arrival order; the queue (oldest first) is offered to the
//    scheduler, which places each task on a node of a reachable cluster or
//    leaves it waiting for the next cycle;
//  - a record sample every `record.interval`, from the start to the end
//    inclusive.
// A pod that fails (its node failed) is recreated as a new attempt of its
// task (`task-00042-r1`, full duration) and queued again, as a Job or
// Deployment controller would. The hub places only on clusters its link
// reaches: a cut link, a partitioned cluster or a cut hub keeps new pods
// away (pods already running keep running).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "acm/core/replica_autoscaler.h"
#include "scenario.h"
#include "swm/core/cloud_autoscaler.h"
#include "swm/core/migration_governor.h"
#include "usage_profile.h"

namespace codeco::codef {

/// The baseline policy name: each task goes to its preferred cluster only
/// (KubeFed-like: no look at other clusters' capacity) and waits there.
inline constexpr char kKubefedPolicy[] = "kubefed";

/// The policies simulate mode accepts: kKubefedPolicy and SWM's built-in
/// profiles.
std::vector<std::string> SimulationPolicies();

/// On-demand cloud bursting in a simulated run: the hub's cloud provisioner
/// and cluster autoscaler (swm::CloudAutoscaler) order, grow, shrink and
/// remove a cloud cluster, which CODEF emulates with its provisioning and
/// boot delays.
struct CloudBurstOptions {
  /// The scenario cluster that stands for the cloud. It starts with no node
  /// and takes no task until the autoscaler orders nodes; the nodes ordered
  /// are copies of its first node entry (the flavor), named
  /// "<cluster>-node-<n>". It must not be one of task_stream.clusters.
  std::string cluster;
  /// The autoscaler's settings; node_capacity is taken from the flavor. Its
  /// provisioning_delay and node_boot_delay are also the delays CODEF
  /// emulates.
  swm::CloudAutoscalerOptions autoscaler;
  /// A re-scheduler moves long-running tasks from the cloud back to the
  /// fixed clusters once nothing is pending and they have room. Default on.
  bool reschedule = true;
  /// The re-scheduler also moves running jobs, with their progress, as
  /// codeco's checkpointer moves a container with its state: the job goes on
  /// where it was after `job_move_delay`. Jobs with less than a minute left
  /// stay. Default off (mck8s's re-scheduler moves deployments only).
  bool reschedule_jobs = false;
  /// What a job's move costs it (checkpoint, transfer, restore). Default 10 s.
  absl::Duration job_move_delay = absl::Seconds(10);
};

/// What the cloud cost and did in a run with cloud bursting.
struct CloudUsage {
  /// CPU-hours of cloud nodes, from each node's order to its removal.
  double cpu_hours = 0;
  /// Most nodes the cloud had at once (booting ones included).
  int peak_nodes = 0;
  /// Nodes ordered, and removed, over the run.
  int nodes_ordered = 0;
  int nodes_removed = 0;
  /// Times the cluster was ordered.
  int clusters_ordered = 0;
  /// When the first cloud node was ordered, from the start (-1 = never), ns.
  int64_t first_order_ns = -1;
  /// Tasks moved back from the cloud by the re-scheduler (jobs with their
  /// progress included).
  int64_t moved_back = 0;
  /// Pods placed on the cloud.
  int64_t pods_placed = 0;
};

/// Runtime adaptation in a simulated run: every `probe_interval` the hub
/// observes its clusters (reachable or not) and their nodes (CPU in use,
/// background load included, against capacity), and moves long-running
/// tasks under swm::MigrationGovernor's rules:
///   - off a cluster the hub cannot reach once that is a confirmed failure
///     (a new pod elsewhere; the old one is deleted when the cluster is
///     back, as a cluster rejoining deletes what the hub moved away);
///   - one task at a time off a node confirmed overloaded, to the node the
///     policy picks elsewhere, if the move gains enough (the gain is the
///     drop in CPU share, in points, between the source now and the target
///     with the task);
///   - back to the cluster a failure moved them from, once it has been
///     healthy for the failback grace (kFailback), when it has room.
struct AdaptationOptions {
  /// How often the hub observes and acts. Default 30 s.
  absl::Duration probe_interval = absl::Seconds(30);
  /// The anti-oscillation rules.
  swm::MigrationGovernorOptions governor;
};

/// One move runtime adaptation made.
struct MigrationRecord {
  int64_t at_ns = 0;     ///< When, from the start.
  std::string task;      ///< The task moved.
  std::string trigger;   ///< swm::MoveTriggerName of its reason.
  std::string from;      ///< "cluster/node" it left.
  std::string to;        ///< "cluster/node" it went to.
};

/// What runtime adaptation did in a run.
struct AdaptationReport {
  /// Every move, in time order.
  std::vector<MigrationRecord> migrations;
  /// Moves the governor held back (gain, cooldown or budget).
  int64_t held_back = 0;
  /// The most moves of one task within any hour.
  int max_moves_per_task_hour = 0;
  /// The same, counting only moves for load or placement (not a failure's
  /// forced move nor its failback).
  int max_load_moves_per_task_hour = 0;
};

/// A multi-cluster deployment in a simulated run (mck8s's MCD with its
/// MCHPA): replicas of one long-running service whose users move. Every
/// tick the replicas scale with acm::ReplicaAutoscaler on the CPU the
/// users' traffic needs (spread evenly over the replicas), and follow the
/// traffic: each replica outside the cluster the traffic comes from is
/// moved to the node the scheduler picks with that cluster preferred
/// (mck8s's cluster affinity: that cluster, else the nearest with room), if
/// that is nearer the users; new replicas go there too; replicas farthest
/// from the users go first when scaling down.
struct SimDeployment {
  /// Name; replica pods are "<name>-<n>".
  std::string name;
  /// CPU request of a replica, millicores. Default 500m (the study's).
  int64_t cpu_millicores = 500;
  /// Memory request of a replica, bytes. Default 512 MiB (the study's).
  int64_t memory_bytes = int64_t{512} << 20;
  /// Replicas at the start, placed near the first traffic entry. Default 2.
  int initial_replicas = 2;
  /// The autoscaler's settings.
  acm::ReplicaAutoscalerOptions autoscaling;
  /// From `at_ns` on, the users are at `cluster` and need `cpu_millicores` in all.
  struct Traffic {
    int64_t at_ns = 0;             ///< From when, ns after the start.
    std::string cluster;           ///< Where the users are.
    int64_t cpu_millicores = 0;    ///< CPU their requests need.
  };
  /// The traffic over time, in time order; the first entry starts at 0.
  std::vector<Traffic> traffic;
};

/// How a deployment followed its users after one move of the traffic.
struct FollowRecord {
  std::string deployment;  ///< Which deployment.
  int64_t at_ns = 0;       ///< When the traffic moved.
  std::string cluster;     ///< Where it moved to.
  /// How long until every replica ran in that cluster, ns; -1 when it never
  /// did before the traffic moved again (or the run ended).
  int64_t followed_after_ns = -1;
  /// The most replicas during this traffic period.
  int peak_replicas = 0;
};

/// Settings of one simulated run.
struct SimulationOptions {
  /// SWM built-in profile to place with ("codeco", "mck8s-worst-fit", ...)
  /// or kKubefedPolicy. Default "codeco".
  std::string policy = "codeco";
  /// Scheduling cycle period. Default 10 s.
  absl::Duration tick = absl::Seconds(10);
  /// How long to simulate; zero = the scenario's `duration`. Default zero.
  absl::Duration duration = absl::ZeroDuration();
  /// Only these record files are kept in the result (e.g. the bench drops
  /// placement.csv); empty = every file recorded. Default empty.
  std::vector<std::string> keep_metrics;
  /// On-demand cloud bursting; none by default.
  std::optional<CloudBurstOptions> cloud;
  /// Runtime adaptation; none by default (failed pods are still recreated).
  std::optional<AdaptationOptions> adaptation;
  /// Multi-cluster deployments that scale and follow their users; none by default.
  std::vector<SimDeployment> deployments;
};

/// What happened to the task stream during a run.
struct TaskCounts {
  /// Tasks in the stream.
  int64_t generated = 0;
  /// Tasks that arrived before the end.
  int64_t arrived = 0;
  /// Pods bound to a node (a task's retries count again).
  int64_t pods_created = 0;
  /// Jobs that succeeded.
  int64_t completed = 0;
  /// Pods that failed (their node failed).
  int64_t pods_failed = 0;
  /// Tasks still waiting for a node at the end.
  int64_t waiting_at_end = 0;
  /// Placements the LMS refused (the scheduler's view was stale); the task
  /// stays queued.
  int64_t rejected_by_lms = 0;
  /// Calls to the scheduler.
  int64_t scheduler_calls = 0;
};

/// The outcome of a simulated run.
struct SimulationResult {
  /// Per CSV file name ("pending_pods.csv"), its whole text.
  std::map<std::string, std::string> csv;
  /// How long was simulated.
  absl::Duration simulated;
  /// What happened to the tasks.
  TaskCounts tasks;
  /// The tasks of the stream (sorted by arrival), for demand analyses.
  std::vector<GeneratedTask> generated_tasks;
  /// Clusters the tasks may be placed on, in scenario order.
  std::vector<std::string> placement_clusters;
  /// Their CPU capacity, millicores.
  int64_t placement_capacity_millicores = 0;
  /// One line per fault applied ("at 10m: node_fail rennes/worker-2: ok").
  std::vector<std::string> events;
  /// CAM applications (workloads.cams) placed whole, their pods created.
  int64_t applications_placed = 0;
  /// Where each CAM application went, parts of the scenario this run did not
  /// act on, and why.
  std::vector<std::string> notes;
  /// The cloud's cost and activity (runs with SimulationOptions::cloud).
  CloudUsage cloud;
  /// What runtime adaptation did (runs with SimulationOptions::adaptation).
  AdaptationReport adaptation;
  /// How each deployment followed each move of its traffic.
  std::vector<FollowRecord> follows;
};

/// Runs `scenario` under a virtual clock. `read_file` loads usage traces
/// (may be empty). INVALID_ARGUMENT naming the field for a bad policy, tick
/// or duration (e.g. a scenario without `duration` and no override).
/// Always records pending_pods, node_usage and node_energy besides the
/// scenario's `record.metrics`: the report is built from them.
absl::StatusOr<SimulationResult> RunSimulation(const Scenario& scenario,
                                               const SimulationOptions& options,
                                               const FileReader& read_file);

/// CPU demand of a task stream against a capacity, sampled every `interval`
/// over [0, until].
struct DemandFloor {
  /// Highest CPU demand of running tasks (requests), in CPUs.
  double peak_demand_cpus = 0;
  /// Highest share of demand beyond the capacity (0-1): the pending CPU
  /// share no policy can beat.
  double floor_peak = 0;
  /// Mean of that share over the samples.
  double floor_mean = 0;
  /// The same tasks queued for one pool of the capacity with no node
  /// boundaries: at each sample, in arrival order, every waiting task that
  /// fits starts (and runs its duration from then). Highest and mean share
  /// of the CPU of waiting tasks in that of waiting and running ones (the
  /// simulator's pending CPU share): what a perfectly packed federation
  /// scheduling at the same interval would leave pending, waiting included.
  double pooled_peak = 0;
  double pooled_mean = 0;
};

/// The physical floor of `tasks` (jobs run for their duration, long-running
/// tasks to the end) on `capacity_millicores`, and the pooled queue.
DemandFloor ComputeDemandFloor(const std::vector<GeneratedTask>& tasks, int64_t capacity_millicores,
                               absl::Duration interval, absl::Duration until);

}  // namespace codeco::codef
