#pragma once
// Execution without half-states. An AssignmentPlan is carried out as a
// two-phase commit across clusters: Reserve (with a lease) on every target
// cluster, then Commit everywhere; any failure releases everything. Each
// cluster keeps a ReservationLedger that counts reserved capacity until the
// pods are seen, so bursts of plans never overcommit a node, and that drops
// reservations whose lease ran out (a coordinator that vanished mid-plan).

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/common/clock.h"
#include "swm/core/model.h"
#include "swm/core/solve.h"

namespace codeco::swm {

/// Phase of a plan, as in the AssignmentPlan resource.
enum class PlanPhase { kIdle, kPlacing, kReserving, kCommitting, kDone, kRolledBack };
/// Kind of plan step.
enum class ActionType { kCreatePod, kDeletePod, kCreateChannel, kDeleteChannel };
/// Outcome of a plan step.
enum class ActionResult { kPending, kRunning, kSucceeded, kFailed, kSkipped, kRolledBack };

/// Printable names, e.g. "Committing", "CreatePod", "RolledBack".
std::string PhaseName(PlanPhase p);
/// Printable name of an action type.
std::string ActionTypeName(ActionType t);
/// Printable name of an action result.
std::string ActionResultName(ActionResult r);

/// Where one workload goes under a plan.
struct WorkloadTarget {
  std::string workload;  ///< Workload name.
  std::string service;   ///< Its service.
  std::string cluster;   ///< Target cluster.
  std::string node;      ///< Target node.
  std::string pod;       ///< Pod name "<app>-<workload>".
  Resources requests;    ///< What it needs.
};

/// One step of a plan and its outcome.
struct PlanAction {
  int index = 0;                                 ///< Position, from 0.
  ActionType type = ActionType::kCreatePod;      ///< Kind of step.
  std::string cluster;                           ///< Cluster it acts in.
  std::string workload;                          ///< Pod actions: the workload.
  std::string node;                              ///< Pod actions: the node.
  std::string pod;                               ///< Pod actions: the pod.
  std::string channel;                           ///< Channel actions: the channel.
  ActionResult result = ActionResult::kPending;  ///< Outcome.
  std::string error;                             ///< Why it failed.
};

/// The AssignmentPlan resource: targets, channel paths, actions, phase.
struct AssignmentPlan {
  std::string application;                      ///< Application name.
  int64_t revision = 0;                         ///< Plan revision.
  PlanPhase phase = PlanPhase::kIdle;           ///< Where execution is.
  std::vector<WorkloadTarget> targets;          ///< Placed workloads.
  std::map<std::string, std::string> unplaced;  ///< Workloads left out, with reasons.
  std::vector<ChannelResult> channels;          ///< Channel paths vs bounds.
  std::vector<PlanAction> actions;              ///< Steps.
  std::string error;                            ///< Why it rolled back.
};

/// Builds the plan for `result`: CreatePod per placed workload, CreateChannel
/// per channel with both ends placed (with its target endpoint). Phase kPlacing.
AssignmentPlan BuildPlan(const Application& app, const PlacementResult& result, int64_t revision);

/// The endpoint a channel delivers to: "<pod>.<cluster>:<port>", port 80
/// when the channel names none.
std::string ChannelEndpoint(const std::string& pod, const std::string& cluster, int port);

/// The virtual link one inter-cluster channel needs (NetMA's VirtualLink spec).
struct VirtualLinkSpec {
  std::string application;      ///< Application name.
  std::string channel;          ///< Channel name.
  std::string source_cluster;   ///< Sending cluster.
  std::string target_cluster;   ///< Receiving cluster.
  std::string target_endpoint;  ///< "host:port" it delivers to.
  std::string neighborhood_id;  ///< The application's neighborhood ("" = none).
  ServiceClass service_class = ServiceClass::kBestEffort;  ///< Network class.
  int64_t min_bandwidth_bps = 0;                           ///< Bandwidth to hold.
  int64_t max_delay_ns = 0;                                ///< Delay bound (0 = none).
};

/// A virtual link as the network manager lists it.
struct VirtualLinkRef {
  std::string id;           ///< Link id.
  std::string application;  ///< Application it serves.
  std::string channel;      ///< Channel it serves.
  bool managed_by_swm = false;  ///< Set up by SWM for a plan (not by hand).
};

/// Port: the virtual links of inter-cluster channels (NetMA over gRPC in
/// the binary; NetMA's own controller in process in tests). Thread-safe.
class VirtualLinkPort {
 public:
  virtual ~VirtualLinkPort() = default;
  /// Sets up the link `spec` describes, marked as managed by SWM;
  /// idempotent by `request_id` and by spec. Returns the link's id.
  /// RESOURCE_EXHAUSTED naming the link when its bandwidth is held by other
  /// channels.
  virtual absl::StatusOr<std::string> Create(const VirtualLinkSpec& spec,
                                             const std::string& request_id,
                                             absl::Time deadline) = 0;
  /// Tears down link `id`; OK when it is already gone.
  virtual absl::Status Delete(const std::string& id, absl::Time deadline) = 0;
  /// The links of `application` (every link when empty), by hand or not.
  virtual absl::StatusOr<std::vector<VirtualLinkRef>> List(const std::string& application,
                                                           absl::Time deadline) = 0;
};

/// The idempotency key of the virtual link of `channel` under plan
/// `revision` of `application`.
std::string VirtualLinkRequestId(const std::string& application, int64_t revision,
                                 const std::string& channel);

/// One pod a reservation covers.
struct ReservationItem {
  std::string pod;       ///< Pod name.
  std::string node;      ///< Node it is bound to.
  Resources requests;    ///< What it needs.
  std::string workload;  ///< Workload the pod runs ("" when not known).
};

/// The cluster side of the two-phase commit. Every call is idempotent and
/// keyed by the reservation id.
class ClusterExecutor {
 public:
  virtual ~ClusterExecutor() = default;
  /// Holds capacity for `items` until Commit, Release, or `lease` runs out.
  /// FAILED_PRECONDITION when a node lacks room; OK again for the same id.
  virtual absl::Status Reserve(const std::string& reservation_id,
                               const std::vector<ReservationItem>& items, absl::Duration lease) = 0;
  /// Creates the pods. FAILED_PRECONDITION if the reservation expired or was
  /// released; OK again once committed.
  virtual absl::Status Commit(const std::string& reservation_id) = 0;
  /// Deletes whatever the reservation created and forgets it. OK when unknown.
  virtual absl::Status Release(const std::string& reservation_id) = 0;
};

/// A pod as the LMS reports it.
struct PodInfo {
  std::string name;    ///< Pod name.
  std::string node;    ///< Node it runs on.
  Resources requests;  ///< Its requests.
};

/// The LMS port a cluster executor drives (codeco.lms.v1 over gRPC in
/// production; InMemoryPodRuntime in the CODEF simulator and tests).
class PodRuntime {
 public:
  virtual ~PodRuntime() = default;
  /// Nodes with capacity and the requests of pods bound to them.
  virtual absl::StatusOr<std::vector<Node>> ListNodes() = 0;
  /// Pods that exist.
  virtual absl::StatusOr<std::vector<PodInfo>> ListPods() = 0;
  /// Creates a pod; ALREADY_EXISTS if a pod of that name exists.
  virtual absl::Status CreatePod(const PodInfo& pod) = 0;
  /// Deletes a pod; NOT_FOUND if there is none.
  virtual absl::Status DeletePod(const std::string& name) = 0;
};

/// Pods bound in memory on a fixed set of nodes. Thread-safe.
class InMemoryPodRuntime final : public PodRuntime {
 public:
  /// Starts with `nodes` (their `allocated` is ignored) and no pods.
  explicit InMemoryPodRuntime(std::vector<Node> nodes);
  absl::StatusOr<std::vector<Node>> ListNodes() override;
  absl::StatusOr<std::vector<PodInfo>> ListPods() override;
  absl::Status CreatePod(const PodInfo& pod) override;
  absl::Status DeletePod(const std::string& name) override;

 private:
  absl::Mutex mu_;
  std::vector<Node> nodes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, PodInfo> pods_ ABSL_GUARDED_BY(mu_);
};

/// One cluster's reservations: what is held, until when, and which pods are
/// not seen in the LMS yet. Leases expire under the injected clock. Thread-safe.
class ReservationLedger {
 public:
  /// Reads time from `clock` only.
  explicit ReservationLedger(const Clock& clock) : clock_(clock) {}
  /// Capacity held on `node` by live reservations whose pods are not seen yet.
  Resources Held(const std::string& node);
  /// Records a reservation; ALREADY_EXISTS if `id` is known.
  absl::Status Add(const std::string& id, const std::vector<ReservationItem>& items,
                   absl::Duration lease);
  /// True if `id` is live (reserved or committed, lease not run out).
  bool Contains(const std::string& id);
  /// The items of a live reservation, or NOT_FOUND.
  absl::StatusOr<std::vector<ReservationItem>> Items(const std::string& id);
  /// True if `id` is committed.
  bool IsCommitted(const std::string& id);
  /// Marks `id` committed (its lease no longer applies); NOT_FOUND if not live.
  absl::Status MarkCommitted(const std::string& id);
  /// Forgets `id` (no-op if unknown).
  void Remove(const std::string& id);
  /// Drops the items of `id` whose pod is in `pods` (the record stays, even
  /// with no item left); returns how many items remain, 0 when `id` is not
  /// live.
  size_t RemoveItems(const std::string& id, const std::set<std::string>& pods);
  /// Stops counting committed items whose pod is in `pods` (the LMS now
  /// counts them). The record stays until Release, which deletes the pods.
  void ObservePods(const std::set<std::string>& pods);
  /// Live reservations still holding capacity (some pod not seen yet).
  size_t size();

 private:
  struct Entry {
    std::vector<ReservationItem> items;
    std::vector<bool> seen;
    absl::Time deadline;
    bool committed = false;
  };
  void ExpireLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const Clock& clock_;
  absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

/// The cluster side of execution: checks room against the LMS plus the
/// ledger, holds it, and creates or deletes pods through the PodRuntime.
class LocalClusterExecutor final : public ClusterExecutor {
 public:
  /// Uses `clock` for leases and `runtime` for nodes and pods.
  LocalClusterExecutor(const Clock& clock, PodRuntime& runtime);
  absl::Status Reserve(const std::string& reservation_id, const std::vector<ReservationItem>& items,
                       absl::Duration lease) override;
  absl::Status Commit(const std::string& reservation_id) override;
  absl::Status Release(const std::string& reservation_id) override;
  /// Deletes those of `pods` that are the reservation's (a pod it does not
  /// cover is left alone; NOT_FOUND counts as deleted), drops their items,
  /// and forgets the reservation once no item is left (a migration moving
  /// one workload out of it). OK when `reservation_id` is unknown; on a
  /// failed delete the items of the pods already gone are dropped and the
  /// error returned, so a retry finishes.
  absl::Status ReleasePods(const std::string& reservation_id,
                           const std::vector<std::string>& pods);
  /// Reads the LMS's pods so committed reservations stop counting once seen.
  absl::Status Sync();
  /// The ledger (for inspection).
  ReservationLedger& ledger() { return ledger_; }

 private:
  PodRuntime& runtime_;
  ReservationLedger ledger_;
  absl::Mutex mu_;  // serialises Reserve's check-then-add
};

/// Drives a plan through Reserve and Commit on every target cluster and
/// rolls back everything on any failure.
class PlanExecutor {
 public:
  /// `clusters` maps a cluster name to its executor; `lease` bounds how long
  /// a reservation survives a vanished coordinator.
  PlanExecutor(std::map<std::string, ClusterExecutor*> clusters, absl::Duration lease);
  /// Called with the plan each time it enters kReserving (before the first
  /// Reserve) and kCommitting (before the first Commit), so that the plan
  /// can be written before the step is taken. An error stops execution
  /// there: the plan is rolled back and the error returned.
  using PhaseObserver = std::function<absl::Status(const AssignmentPlan&)>;
  /// Sets the observer (none by default).
  void SetPhaseObserver(PhaseObserver observer) { observer_ = std::move(observer); }
  /// Where Commit sets up the virtual links of the plan's inter-cluster
  /// channels, once every cluster created its pods (none by default: those
  /// channel actions are Skipped, saying no network manager is configured),
  /// and the neighborhood and deadline of those calls.
  void SetVirtualLinks(VirtualLinkPort* links, std::string neighborhood_id, absl::Time deadline) {
    links_ = links;
    neighborhood_id_ = std::move(neighborhood_id);
    links_deadline_ = deadline;
  }
  /// Executes `plan` (phase must be kPlacing): Reserve, then Commit. On
  /// success phase kDone and every CreatePod succeeded; on failure phase
  /// kRolledBack, every cluster released, and the error returned (ABORTED,
  /// naming the cluster).
  absl::Status Execute(AssignmentPlan& plan);
  /// The first half of Execute: reserves in every target cluster, leaving
  /// the plan in kReserving (a coordinator that dies here is what leases are
  /// for). On failure the plan is rolled back (kRolledBack). The hub's
  /// scheduling cycle ends here: once a plan holds its reservations, the
  /// next placement's view of the clusters counts them.
  absl::Status Reserve(AssignmentPlan& plan);
  /// The second half of Execute, after a successful Reserve: writes the plan
  /// kCommitting (observer), commits in every cluster, then sets up a
  /// virtual link for every inter-cluster channel; kDone on success. Any
  /// failure — a cluster's commit or a channel's link — rolls back both
  /// the pods and the links made so far (ABORTED naming the channel).
  absl::Status Commit(AssignmentPlan& plan);

 private:
  absl::Status ReserveAll(AssignmentPlan& plan);
  absl::Status CreateChannels(AssignmentPlan& plan);
  void RollBack(AssignmentPlan& plan, const std::string& why);
  std::map<std::string, ClusterExecutor*> clusters_;
  absl::Duration lease_;
  PhaseObserver observer_;
  VirtualLinkPort* links_ = nullptr;
  std::string neighborhood_id_;
  absl::Time links_deadline_ = absl::InfiniteFuture();
  // Virtual links created so far (what a rollback deletes).
  std::vector<std::string> created_links_;
  // Clusters asked to reserve so far (what a rollback releases).
  std::vector<std::string> touched_;
};

/// The reservation id of `plan` in `cluster`: "<app>/<revision>/<cluster>".
std::string ReservationId(const AssignmentPlan& plan, const std::string& cluster);

}  // namespace codeco::swm
