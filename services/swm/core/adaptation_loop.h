#pragma once
// AdaptationLoop: the hub's runtime adaptation to failures, live. Each tick
// it reads the health of the clusters and nodes the placed applications run
// on, feeds the MigrationGovernor (grace periods, failback grace, budget),
// and moves the workloads of a failed node or cluster elsewhere through the
// placement pipeline (PlacementService::Migrate, behind the MoveExecutor
// port); once a failed place has been healthy for the failback grace, it
// moves them back there, within the budget. Pure logic under an injected
// clock: the hub's SwmServiceImpl runs it every swm.adapt_interval.
//
// What it watches: a cluster is unhealthy while it does not answer; a node
// while it is not ready (or gone) in a cluster that answers; a channel
// while the hub's channel tracker holds it out of QoS (its virtual link
// measured out of bounds past the channel grace, or failed): one of its
// two workloads moves (reason LINK_FAILURE), the one it goes to first
// unless only that one keeps state, under the governor's cooldown and
// budget. A node PDLC advises a breach ahead for sheds workloads
// (FORECAST_BREACH), and a replica that burst beyond its service's
// numberOfLocations is pulled back home (RESCHEDULE). Measured load and
// better recommendations are not acted on yet.
//
// Hub cut off: a tick in which no member answers observes and moves nothing
// (the hub, not every cluster, is away; the members act on their own).
//
// Hub back: before it acts on what it sees, each tick settles the local
// decisions of the members that answer (pods their own swm moved to another
// of their nodes while the hub was away, local_rescheduler.h). The rule: a
// move is ADOPTED when the hub's plan still runs that pod, under that
// reservation, in that cluster — the plan then takes the new node (a
// LOCAL_RESCHEDULE migration, already DONE) and the pod fails back to its
// node like any NODE_FAILURE evacuation; it is UNDONE otherwise (the hub
// moved the workload elsewhere or removed it meanwhile), and the hub's
// recovery and orphan reconciler remove the cluster's copy.

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "codeco/common/clock.h"
#include "codeco/swm/v1/plan.pb.h"
#include "swm/core/channel_status.h"
#include "swm/core/migration_governor.h"
#include "swm/core/placement_service.h"

namespace codeco::swm {

/// What one probe saw of a member cluster.
struct ClusterHealth {
  bool reachable = false;                  ///< It answered.
  std::map<std::string, bool> node_ready;  ///< node -> ready (when reachable).
};

/// Port: the health of member clusters (the hub reads its members' views).
class HealthSource {
 public:
  virtual ~HealthSource() = default;
  /// The health of each of `clusters`; a cluster missing from the answer
  /// counts as not reachable.
  virtual std::map<std::string, ClusterHealth> Read(const std::vector<std::string>& clusters,
                                                    absl::Time deadline) = 0;
  /// Every member cluster of the placed applications' neighborhoods, those
  /// that run nothing included: a tick probes them too, to tell a hub cut
  /// off from everyone from clusters that are down. Default: none.
  virtual std::vector<std::string> AllMembers() { return {}; }
};

/// Port: the channels out of QoS (the hub's channel tracker).
class ChannelHealthSource {
 public:
  virtual ~ChannelHealthSource() = default;
  /// Every channel out of QoS now.
  virtual std::vector<OutOfQosChannel> OutOfQos() = 0;
};

/// Port: the local decisions of member clusters (their MC swm's).
class LocalDecisionSource {
 public:
  virtual ~LocalDecisionSource() = default;
  /// The decisions of `cluster` the hub has not settled (MOVING ones
  /// included), oldest first; empty for a member without an swm.
  virtual absl::StatusOr<std::vector<codeco::swm::v1::LocalDecision>> Unsettled(
      const std::string& cluster, absl::Time deadline) = 0;
  /// Records the hub's `verdicts` with `cluster`.
  virtual absl::Status Settle(const std::string& cluster,
                              const std::vector<codeco::swm::v1::LocalDecisionVerdict>& verdicts,
                              absl::Time deadline) = 0;
};

/// A node its cluster's PDLC forecasts to breach (a BREACH_AHEAD advisory).
struct BreachAdvisory {
  std::string cluster;  ///< The node's cluster.
  std::string node;     ///< The node.
  std::string message;  ///< The advisory in words (metric, value, time to breach).
};

/// Port: the nodes forecast to breach now (the hub's PDLC streams).
class BreachAdvisorySource {
 public:
  virtual ~BreachAdvisorySource() = default;
  /// Every node some PDLC advises a breach ahead for, as last streamed.
  virtual std::vector<BreachAdvisory> BreachesAhead() = 0;
};

/// A service's mck8s numberOfLocations rule, as its application asks.
struct LocationSpread {
  int max_locations = 0;  ///< Clusters its replicas spread over (0: no rule).
  bool bursting = false;  ///< May go beyond them once they are full.
};

/// Port: carries out one move (the hub's MigrateWorkload, with the model and
/// neighborhood of the application's stored placement).
class MoveExecutor {
 public:
  virtual ~MoveExecutor() = default;
  /// Moves `workload` of `application` (to `target_cluster`/`target_node`
  /// when not empty) for `reason`; answers the migration record.
  virtual absl::StatusOr<codeco::swm::v1::Migration> Move(
      const std::string& application, const std::string& workload,
      const std::string& target_cluster, const std::string& target_node,
      codeco::swm::v1::MigrationReason reason, absl::Time deadline) = 0;
  /// True when the workloads of `service` of `application` keep state
  /// (their moves go through the checkpointer, so a stateless peer is moved
  /// first when either would do). Default: false.
  virtual bool KeepsState(const std::string& application, const std::string& service) {
    return false;
  }
  /// The numberOfLocations rule of `service` of `application` (replicas
  /// that burst beyond it are pulled back). Default: no rule.
  virtual LocationSpread LocationsOf(const std::string& application, const std::string& service) {
    return {};
  }
  /// Takes a member's local decision (PENDING) into the hub's plan or
  /// refuses it (the rule in this file's header); answers the verdict.
  /// An error leaves the decision unsettled (asked again next tick).
  /// Default: UNIMPLEMENTED.
  virtual absl::StatusOr<codeco::swm::v1::LocalDecisionVerdict> Adopt(
      const codeco::swm::v1::LocalDecision& decision, absl::Time deadline) {
    return absl::UnimplementedError("this hub does not adopt local decisions");
  }
};

/// What one tick did (for logs, metrics and tests).
struct AdaptationTick {
  std::vector<std::string> failed;     ///< Places confirmed failed by this tick.
  std::vector<std::string> recovered;  ///< Places healthy again for the failback grace.
  std::vector<std::string> moved;      ///< "<migration id>: <app>/<workload> <from> -> <to> (<reason>)".
  std::vector<std::string> held;       ///< Moves the governor or the pipeline held back, and why.
  std::vector<std::string> settled;    ///< "<decision id>: ADOPTED|UNDONE: <note>".
};

/// Runtime adaptation to node and cluster failures, with failback.
/// Not thread-safe: one caller ticks it.
class AdaptationLoop {
 public:
  /// Reads the placed plans from `plans`; `options` must pass
  /// ValidateMigrationGovernorOptions. The ports must outlive the loop.
  AdaptationLoop(const Clock& clock, const PlanRepository& plans, HealthSource& health,
                 MoveExecutor& mover, MigrationGovernorOptions options);

  /// One probe: observes every place a placed workload runs on (and every
  /// place a workload was evacuated from), moves the workloads off places
  /// confirmed failed (reason NODE_FAILURE or CLUSTER_FAILURE; failures
  /// bypass the budget), and moves evacuated workloads home once their
  /// place has recovered (reason FAILBACK, under cooldown and budget; a
  /// failback held back is tried again next tick), and moves one workload
  /// of each channel out of QoS (reason LINK_FAILURE: the workload the
  /// channel goes to, else the one it comes from — the stateless one first
  /// when only the other keeps state —, each under cooldown and budget; a
  /// refused one is tried again later), and sheds one workload per tick off
  /// each node advised to breach for longer than the overload grace
  /// (reason FORECAST_BREACH: a stateless one first, under cooldown and
  /// budget, until the advisory stops), and pulls back one replica per
  /// service that burst beyond its numberOfLocations (reason RESCHEDULE, to
  /// one of the service's home clusters — those of its lowest-numbered
  /// replicas —, under cooldown and budget; a refused one, e.g. while they
  /// are still full, is asked again after the retry wait, trying the next
  /// home cluster). The probe ends by
  /// `probe_deadline`; each move gets `move_timeout` from its start.
  AdaptationTick Tick(absl::Time probe_deadline, absl::Duration move_timeout);

  /// Where channels out of QoS are read (not owned; null: none are acted
  /// on). Call before the first tick.
  void SetChannelHealth(ChannelHealthSource* channels) { channels_ = channels; }
  /// Where breach advisories are read (not owned; null: none are acted on).
  /// Call before the first tick.
  void SetBreachAdvisories(BreachAdvisorySource* breaches) { breaches_ = breaches; }
  /// Where the members' local decisions are read and settled (not owned;
  /// null: they are left alone). Call before the first tick.
  void SetLocalDecisions(LocalDecisionSource* decisions) { local_decisions_ = decisions; }

  /// Evacuated workloads waiting to go home: "<app>/<workload>" -> "cluster"
  /// or "cluster/node" they left. The first tick rebuilds them from the
  /// stored migrations (a restarted hub still fails back): a workload whose
  /// newest finished move was a NODE_FAILURE or CLUSTER_FAILURE evacuation
  /// is away from that place.
  const std::map<std::string, std::string>& homes() const { return homes_; }

 private:
  const Clock& clock_;
  const PlanRepository& plans_;
  HealthSource& health_;
  MoveExecutor& mover_;
  ChannelHealthSource* channels_ = nullptr;
  BreachAdvisorySource* breaches_ = nullptr;
  LocalDecisionSource* local_decisions_ = nullptr;
  // Settles the unsettled local decisions of the reachable members among
  // `clusters`; true when one was adopted (the plans changed).
  bool SettleLocalDecisions(const std::map<std::string, ClusterHealth>& seen, absl::Time deadline,
                            AdaptationTick& tick);
  // Nodes ("cluster/node") advised to breach, or no longer advised but not
  // yet seen below the governor's overload_low.
  std::set<std::string> advised_;
  MigrationGovernor governor_;
  // "<app>/<workload>" -> the failed place ("cluster" or "cluster/node") it left.
  std::map<std::string, std::string> homes_;
  // Rebuilds homes_ from the stored migrations of `live`'s applications.
  void RestoreHomes(const std::vector<codeco::swm::v1::AssignmentPlan>& live,
                    AdaptationTick& tick);
  // Set once RestoreHomes ran.
  bool homes_restored_ = false;
  // Places recovered whose evacuated workloads are not all home yet.
  std::set<std::string> failing_back_;
  // Places confirmed failed (reported once per failure).
  std::set<std::string> failed_;
  // "<app>/<workload>" -> when a move that did not happen may be tried again.
  std::map<std::string, absl::Time> retry_at_;
  // "<app>/<workload>" -> moves in a row that did not happen.
  std::map<std::string, int> failed_moves_;
  // Pulls back the replicas that burst beyond their service's
  // numberOfLocations (see Tick), through `move`.
  void PullBack(const std::map<std::string, const codeco::swm::v1::AssignmentPlan*>& plan_of,
                const std::function<bool(const std::string&, const std::string&,
                                         const codeco::swm::v1::WorkloadTarget&, const std::string&,
                                         codeco::swm::v1::MigrationReason)>& move,
                AdaptationTick& tick);
  // How long after a first move that did not happen it is tried again: the
  // failure grace, doubled after each further one up to an hour (a refused
  // move is stored as a FAILED migration each time).
  absl::Duration retry_after_;
};

}  // namespace codeco::swm
