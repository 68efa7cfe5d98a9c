#pragma once
// PlacementService: the hub SWM's orchestration of one application, with no
// gRPC, no RocksDB and no clock of its own. It places (read the members,
// read the links, run the L1/L2 Coordinator, reserve in every target
// cluster, commit, store the plan) and removes (release every cluster's
// reservation, store a removal plan), writing the plan with its phase before
// each step so that Recover() can drive a plan a crash interrupted to a known
// outcome. It keeps the link bandwidth that placed plans' inter-cluster
// channels hold (LinkLedger) and subtracts it from what later placements may
// use. A reconciler (Reconcile) removes pods the clusters run under a plan
// or reservation the hub no longer holds.
//
// It reaches the world only through ports:
//   - MemberPort: the member clusters (how each is reached, its nodes and
//     labels, its L2 solver, commits and releases, labelled pods);
//   - LinkSource: the inter-cluster links (NetMA's topology);
//   - PlanRepository: the stored plans and operations (the RocksDB PlanStore
//     in the binary);
//   - VirtualLinkPort (optional): NetMA's virtual links, one per committed
//     inter-cluster channel, set up in the same all-or-nothing execution as
//     the pods and torn down with them;
//   - ExecutorFactory, given with each placement: the cluster side of the
//     two-phase commit for that plan (it knows the pod templates);
//   - Clock.
// The gRPC SwmServiceImpl only translates protos, queues work and calls it;
// CODEF's simulate mode drives the same class under virtual time.
//
// The stored resources are the codeco.swm.v1.AssignmentPlan and
// codeco.common.v1.Operation messages (proto messages, no gRPC): they are
// what the repository keeps and what GetAssignmentPlan answers.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/common/clock.h"
#include "codeco/common/v1/operation.pb.h"
#include "codeco/swm/v1/plan.pb.h"
#include "swm/core/execution.h"
#include "swm/core/federation_source.h"
#include "swm/core/model.h"
#include "swm/core/plugins.h"
#include "swm/core/solve.h"
#include "swm/core/state_mover.h"

namespace codeco::swm {

/// A member of the neighborhood as a placement request names it.
struct MemberRef {
  std::string cluster;                           ///< Cluster name.
  std::map<std::string, std::string> endpoints;  ///< "swm", "lms" -> host:port (any may be absent).
};

/// A member as the hub sees it for one placement.
struct MemberView {
  ClusterLabels labels;     ///< Region, country, tier, provider.
  std::vector<Node> nodes;  ///< Its nodes; `allocated` counts pods and live holds.
};

/// A pod a cluster runs that carries the codeco.io/plan and
/// codeco.io/reservation labels (their values use "." for "/").
struct LabelledPod {
  std::string name;         ///< Pod name.
  std::string plan;         ///< codeco.io/plan label value, e.g. "shop.3".
  std::string reservation;  ///< codeco.io/reservation label value, e.g. "shop.3.edge".
};

/// Port: the member clusters of the hub's placements.
class MemberPort {
 public:
  virtual ~MemberPort() = default;
  /// Resolves how each of `members` is reached for this placement (its MC
  /// swm or its LMS) before anything is read. FAILED_PRECONDITION naming
  /// `neighborhood.members[i].endpoints` for a member nobody knows how to
  /// reach; UNAVAILABLE when a directory it needs does not answer.
  virtual absl::Status Connect(const std::vector<MemberRef>& members, absl::Time deadline) = 0;
  /// The nodes and labels of each of `clusters` (connected before), in the
  /// same order; an error for a member that does not answer.
  virtual std::vector<absl::StatusOr<MemberView>> ReadMembers(
      const std::vector<std::string>& clusters, absl::Time deadline) = 0;
  /// The L2 solver of a placement over `neighborhood`: members that solve
  /// their own L2 (an MC swm) are asked there, the others solved by `local`,
  /// which outlives the solver.
  virtual std::unique_ptr<L2Solver> SolverFor(const std::vector<std::string>& neighborhood,
                                              L2Solver& local) = 0;
  /// Commits reservation `reservation_id` of `cluster` again (recovery of a
  /// plan found COMMITTING; Commit is idempotent). FAILED_PRECONDITION when
  /// the cluster no longer holds it.
  virtual absl::Status Commit(const std::string& cluster, const std::string& reservation_id,
                              absl::Time deadline) = 0;
  /// Removes `pods` of `cluster`, created under `reservation_id`, and drops
  /// them from the reservation, which is released once none of its pods is
  /// left (a migration removes one pod of a reservation that keeps the
  /// others); `reason` says why (logged by the cluster). One status per
  /// pod: OK = deleted now, NOT_FOUND = already gone, any other = still
  /// there.
  virtual std::map<std::string, absl::Status> RemovePods(const std::string& cluster,
                                                         const std::string& reservation_id,
                                                         const std::vector<std::string>& pods,
                                                         const std::string& reason,
                                                         absl::Time deadline) = 0;
  /// Tells the port that a plan or removal changed `clusters` (it may read
  /// their pods again).
  virtual void Touched(const std::vector<std::string>& clusters) = 0;
  /// Clusters whose pods the reconciler can list (those the hub ever reached).
  virtual std::vector<std::string> KnownClusters() = 0;
  /// The pods of `cluster` that carry the plan labels; UNIMPLEMENTED when
  /// the port cannot list that cluster's pods (a member known only through
  /// its own swm, which keeps its pods itself).
  virtual absl::StatusOr<std::vector<LabelledPod>> ListLabelledPods(const std::string& cluster,
                                                                    absl::Time deadline) = 0;
  /// Deletes the pod `pod` of `cluster` (an orphan); NOT_FOUND if gone.
  virtual absl::Status DeletePod(const std::string& cluster, const LabelledPod& pod,
                                 absl::Time deadline) = 0;
};

/// Port: the cluster side of the two-phase commit for one placement.
class ExecutorFactory {
 public:
  virtual ~ExecutorFactory() = default;
  /// The executor that reserves and commits `plan`'s share in `cluster`;
  /// it lives until the placement ends.
  virtual absl::StatusOr<std::unique_ptr<ClusterExecutor>> ExecutorFor(const std::string& cluster,
                                                                       const AssignmentPlan& plan,
                                                                       absl::Time deadline) = 0;
};

/// Port: the stored plans and operations (see plan_store.h for the layout
/// of the RocksDB implementation).
class PlanRepository {
 public:
  virtual ~PlanRepository() = default;
  /// The newest plan of `application`, or nullopt.
  virtual absl::StatusOr<std::optional<codeco::swm::v1::AssignmentPlan>> Latest(
      const std::string& application) const = 0;
  /// The newest plan of every application whose newest plan holds pods
  /// (HoldsPods: placed, or caught in RESERVING, COMMITTING, RELEASING), by
  /// application name. Applications removed for good are not read: the
  /// cost follows the applications that run, not the history.
  virtual absl::StatusOr<std::vector<codeco::swm::v1::AssignmentPlan>> LivePlans() const = 0;
  /// The operation started by `request_id`, or nullopt.
  virtual absl::StatusOr<std::optional<codeco::common::v1::Operation>> OperationForRequest(
      const std::string& request_id) const = 0;
  /// Operation `id`; NOT_FOUND when absent.
  virtual absl::StatusOr<codeco::common::v1::Operation> GetOperation(
      const std::string& id) const = 0;
  /// Stores `plan` (if not null), `operation` and, when non-empty,
  /// `request_id` -> operation, atomically and durably.
  virtual absl::Status Save(const codeco::swm::v1::AssignmentPlan* plan,
                            const codeco::common::v1::Operation& operation,
                            const std::string& request_id) = 0;
  /// Migration `id` ("<application>/<number>"); NOT_FOUND when absent.
  virtual absl::StatusOr<codeco::swm::v1::Migration> GetMigration(const std::string& id) const = 0;
  /// The newest migration of `application` (highest number), or nullopt.
  virtual absl::StatusOr<std::optional<codeco::swm::v1::Migration>> NewestMigration(
      const std::string& application) const = 0;
  /// Every migration not in a final phase (DONE, ROLLED_BACK, FAILED): the
  /// ones a crash or an unreachable cluster interrupted. The cost follows
  /// those, not the history.
  virtual absl::StatusOr<std::vector<codeco::swm::v1::Migration>> ActiveMigrations() const = 0;
  /// Stores `migration`, `plan` (if not null), `operation` and, when
  /// non-empty, `request_id` -> operation, atomically and durably.
  virtual absl::Status SaveMigration(const codeco::swm::v1::Migration& migration,
                                     const codeco::swm::v1::AssignmentPlan* plan,
                                     const codeco::common::v1::Operation& operation,
                                     const std::string& request_id) = 0;
  /// Every state backup record (state_backups.h).
  virtual absl::StatusOr<std::vector<codeco::swm::v1::StateBackupRecord>> StateBackups()
      const = 0;
  /// The state backup record of `workload` of `application`, or nullopt.
  virtual absl::StatusOr<std::optional<codeco::swm::v1::StateBackupRecord>> StateBackupOf(
      const std::string& application, const std::string& workload) const = 0;
  /// Stores `record` (replacing the one of its workload), durably.
  virtual absl::Status SaveStateBackup(const codeco::swm::v1::StateBackupRecord& record) = 0;
  /// Removes the record of `workload` of `application` (OK when absent).
  virtual absl::Status DeleteStateBackup(const std::string& application,
                                         const std::string& workload) = 0;
};

/// True for a removal plan: RELEASING, or pods (or channels) deleted and no
/// pod created — a migration's plan deletes the source pod but creates the
/// moved one, and a scale-down's deletes a replica but still holds the
/// others (DONE with targets), so neither is a removal.
bool IsRemoval(const codeco::swm::v1::AssignmentPlan& plan);

/// True for DONE, ROLLED_BACK and FAILED: the migration holds nothing and
/// nobody drives it any more.
bool IsFinal(codeco::swm::v1::MigrationPhase phase);

/// The number in migration id "<application>/<number>", or 0 for an id of
/// another form.
int64_t MigrationNumber(const std::string& id);

/// A PlanRepository held in memory (CODEF's simulate mode, tests): nothing
/// survives the object. Thread-safe.
class InMemoryPlanRepository final : public PlanRepository {
 public:
  absl::StatusOr<std::optional<codeco::swm::v1::AssignmentPlan>> Latest(
      const std::string& application) const override;
  absl::StatusOr<std::vector<codeco::swm::v1::AssignmentPlan>> LivePlans() const override;
  absl::StatusOr<std::optional<codeco::common::v1::Operation>> OperationForRequest(
      const std::string& request_id) const override;
  absl::StatusOr<codeco::common::v1::Operation> GetOperation(const std::string& id) const override;
  absl::Status Save(const codeco::swm::v1::AssignmentPlan* plan,
                    const codeco::common::v1::Operation& operation,
                    const std::string& request_id) override;
  absl::StatusOr<codeco::swm::v1::Migration> GetMigration(const std::string& id) const override;
  absl::StatusOr<std::optional<codeco::swm::v1::Migration>> NewestMigration(
      const std::string& application) const override;
  absl::StatusOr<std::vector<codeco::swm::v1::Migration>> ActiveMigrations() const override;
  absl::Status SaveMigration(const codeco::swm::v1::Migration& migration,
                             const codeco::swm::v1::AssignmentPlan* plan,
                             const codeco::common::v1::Operation& operation,
                             const std::string& request_id) override;
  absl::StatusOr<std::vector<codeco::swm::v1::StateBackupRecord>> StateBackups() const override;
  absl::StatusOr<std::optional<codeco::swm::v1::StateBackupRecord>> StateBackupOf(
      const std::string& application, const std::string& workload) const override;
  absl::Status SaveStateBackup(const codeco::swm::v1::StateBackupRecord& record) override;
  absl::Status DeleteStateBackup(const std::string& application,
                                 const std::string& workload) override;

 private:
  mutable absl::Mutex mu_;
  // (application, workload) -> its state backups
  std::map<std::pair<std::string, std::string>, codeco::swm::v1::StateBackupRecord> backups_
      ABSL_GUARDED_BY(mu_);
  // application -> revision -> plan
  std::map<std::string, std::map<int64_t, codeco::swm::v1::AssignmentPlan>> plans_
      ABSL_GUARDED_BY(mu_);
  // application -> number -> migration
  std::map<std::string, std::map<int64_t, codeco::swm::v1::Migration>> migrations_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, codeco::common::v1::Operation> operations_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> requests_ ABSL_GUARDED_BY(mu_);
};

/// Link bandwidth held by the inter-cluster channels of placed plans, per
/// directed link and service class, by application. Not thread-safe (the
/// PlacementService guards it).
class LinkLedger {
 public:
  /// Records what `plan` (a placed plan, DONE) holds: each channel whose
  /// path crosses two clusters holds its min_bandwidth_bps of its class on
  /// the link path[0] -> path[1]. Replaces what the application held.
  void Hold(const codeco::swm::v1::AssignmentPlan& plan);
  /// Gives back everything `application` holds (no-op if nothing).
  void Free(const std::string& application);
  /// Bits per second of `service_class` held on from -> to.
  int64_t Held(const std::string& from, const std::string& to, ServiceClass service_class) const;
  /// Lowers the free bandwidth of every link of `federation` by what is held
  /// on it (never below zero).
  void Apply(Federation& federation) const;

 private:
  struct Use {
    std::string from, to;
    ServiceClass service_class;
    int64_t bps;
  };
  std::map<std::string, std::vector<Use>> by_application_;
};

/// A placement as the core takes it.
struct PlaceRequest {
  /// The validated application (workloads, channels, profile).
  Application app;
  /// The neighborhood's members, at least one, no duplicates.
  std::vector<MemberRef> members;
  /// Idempotency key ("" = none): a key seen before answers its first result.
  std::string request_id;
  /// Solve and answer the plan without storing or reserving anything.
  bool dry_run = false;
  /// The application spec revision the plan is for.
  int64_t spec_revision = 0;
  /// The neighborhood's id.
  std::string neighborhood_id;
  /// The cluster side of the two-phase commit for this placement (pod
  /// templates included); not owned; required unless dry_run.
  ExecutorFactory* executors = nullptr;
  /// The id of the operation this placement stores ("" = the core names it
  /// "place/<application>/<plan revision>" once solved). A caller that
  /// answered with a running operation before the work began gives its id.
  std::string operation_id;
  /// Optional; called with the operation at each step of a placement that is
  /// not a dry run: READING_MEMBERS (5%), SOLVING (20%), RESERVING (40%),
  /// COMMITTING (70%) and once done (100%: the plan, or the error of a
  /// FAILED or rolled-back plan). `stored` is true when the core wrote that
  /// state through the PlanRepository before the call (RESERVING on); the
  /// earlier steps exist only here, for the caller to store or publish. An
  /// error answered before any plan was stored (UNAVAILABLE, a deadline, a
  /// request_id seen before) is not reported: the caller has the status.
  std::function<void(const codeco::common::v1::Operation& operation, bool stored)> on_progress;
};

/// What one placement did, for the caller's metrics.
struct PlaceCounts {
  int64_t placed = 0;    ///< Workloads whose pods a committed plan created.
  int64_t unplaced = 0;  ///< Workloads the solve could not fit.
};

/// A workload move as the core takes it.
struct MigrateRequest {
  /// The application as it was placed (validated): the pod templates and the
  /// channels come from it.
  Application app;
  /// The neighborhood's members, as the placement named them.
  std::vector<MemberRef> members;
  /// The neighborhood's id.
  std::string neighborhood_id;
  /// The workload to move (required).
  std::string workload;
  /// The cluster to move to ("" = the solve picks among the members).
  std::string target_cluster;
  /// The node to move to ("" = the solve picks); needs target_cluster.
  std::string target_node;
  /// Why it moves (CLUSTER_FAILURE: never within its own cluster).
  codeco::swm::v1::MigrationReason reason = codeco::swm::v1::MIGRATION_REASON_MANUAL;
  /// Idempotency key ("" = none): a key seen before answers its first result.
  std::string request_id;
  /// The cluster side of the two-phase commit (the pod template); not owned; required.
  ExecutorFactory* executors = nullptr;
  /// The id of the operation to store ("" = "migrate/<migration id>").
  std::string operation_id;
  /// The spec revision the new plan is for (0 = the current plan's).
  int64_t spec_revision = 0;
};

/// A change of a placed application's replica counts, as the core takes it.
struct ScaleRequest {
  /// The application at its new replica counts (validated): every workload
  /// of the current plan that it still names stays where it runs.
  Application app;
  /// The neighborhood's members, as the placement named them.
  std::vector<MemberRef> members;
  /// The neighborhood's id.
  std::string neighborhood_id;
  /// The application spec revision the new plans are for.
  int64_t spec_revision = 0;
  /// Idempotency key ("" = none): a key seen before answers its first result.
  std::string request_id;
  /// The cluster side of the two-phase commit (the pod templates of the new
  /// spec); not owned; required.
  ExecutorFactory* executors = nullptr;
  /// The id of the operation to store ("" = "scale/<application>/<first new
  /// plan revision>").
  std::string operation_id;
};

/// The name of the pod a migration creates for `workload`: "<application>-
/// <workload>-r<revision>", with the plan revision the move writes, so a
/// move within one cluster never clashes with the pod it replaces.
std::string MigratedPodName(const std::string& application, const std::string& workload,
                            int64_t revision);

/// A removal as the core takes it.
struct ReleaseRequest {
  std::string application;  ///< Application name (required).
  std::string request_id;   ///< Idempotency key ("" = none).
};

/// What Recover or Reconcile did (for logs and tests).
struct RecoveryReport {
  std::vector<std::string> committed;    ///< Plans found COMMITTING and committed (DONE now).
  std::vector<std::string> rolled_back;  ///< Plans found RESERVING/COMMITTING and rolled back.
  std::vector<std::string> released;     ///< Removal plans found RELEASING and finished.
  std::vector<std::string> orphans;      ///< "<cluster>/<pod>" orphans deleted.
  std::vector<std::string> migrations;   ///< Interrupted migrations finished or rolled back.
  std::vector<std::string> errors;       ///< What could not be done (retried next time).
};

/// Settings of the PlacementService.
struct PlacementServiceOptions {
  /// Lease of a reservation (how long it outlives a vanished hub). Default: 60 s.
  absl::Duration reservation_lease = absl::Seconds(60);
  /// Node-to-node latency assumed inside every cluster, ns. Default: 100 us.
  int64_t intra_cluster_latency_ns = 100'000;
  /// How long links read from the LinkSource are reused across placements.
  /// Default: 0 (read for every placement).
  absl::Duration link_cache_ttl = absl::ZeroDuration();
  /// How long a member's node view is reused across placements (a cluster a
  /// plan touched is read again). Default: 0 (read for every placement).
  absl::Duration node_view_ttl = absl::ZeroDuration();
  /// Coordinator settings. Default: the core's.
  CoordinatorOptions coordinator;
  /// PDLC's advice, which orders the clusters (see Coordinator); not owned,
  /// thread-safe. Null: none. Default: null.
  RecommendationSource* recommendations = nullptr;
  /// Where data sets live: a workload's dataLocality that names one is
  /// placed only in the clusters holding it. Not owned, thread-safe. Null:
  /// dataLocality is always a region or cluster. Default: null.
  DataSetLocator* data_sets = nullptr;
};

/// The kind of the operations Place stores.
inline constexpr char kPlaceKind[] = "swm.PlaceApplication";
/// The kind of the operations Release stores.
inline constexpr char kReleaseKind[] = "swm.ReleaseApplication";
/// The kind of the operations Migrate stores.
inline constexpr char kMigrateKind[] = "swm.MigrateWorkload";

/// The hub SWM's orchestration. Thread-safe, and placements overlap the way
/// kube-scheduler's scheduling and binding cycles do:
///   - one operation per application at a time (a second one waits for the
///     first, up to its deadline);
///   - the scheduling cycle — read the members and links, solve, write the
///     plan RESERVING, reserve in every target cluster — runs for one
///     placement at a time, so each plan is solved on a view that counts the
///     reservations of every plan before it;
///   - the rest — write COMMITTING, commit (the clusters create the pods),
///     write DONE — and removals run concurrently;
///   - Recover and Reconcile run alone: they wait for the operations in
///     flight to finish and hold new ones back until they are done.
class PlacementService {
 public:
  /// Uses the ports, which must outlive the service and be thread-safe;
  /// `links` may be null (no inter-cluster link exists). `local_l2` solves
  /// the clusters the hub solves itself (the in-process heuristic or the
  /// exact L2); `registry` holds the scheduling profiles the coordinator uses.
  PlacementService(const Clock& clock, MemberPort& members, LinkSource* links,
                   PlanRepository& plans, L2Solver& local_l2, const PluginRegistry& registry,
                   PlacementServiceOptions options = {});

  /// Places `request.app` over its members: reads them and the links,
  /// solves, then (unless dry_run) writes the plan RESERVING, reserves in
  /// every target cluster, writes it COMMITTING, commits, and writes it DONE
  /// with its operation. Answers the operation (done; result = the plan).
  /// FAILED_PRECONDITION listing every unplaced workload (the FAILED plan is
  /// stored); ABORTED when execution failed and was rolled back; UNAVAILABLE
  /// when no member answers; DEADLINE_EXCEEDED when `deadline` passed
  /// before anything was reserved (also while waiting for another operation
  /// of the same application). A request_id seen before answers its first
  /// result; one used by another kind of request is INVALID_ARGUMENT.
  absl::StatusOr<codeco::common::v1::Operation> Place(const PlaceRequest& request,
                                                      absl::Time deadline = absl::InfiniteFuture(),
                                                      PlaceCounts* counts = nullptr);

  /// Removes the application's pods (the newest plan that holds pods): the
  /// removal plan (one DeletePod action per pod, no targets once done) is
  /// written RELEASING first, then every cluster removes its pods, then the
  /// plan is written DONE, or FAILED with the pods still there as targets
  /// (answer UNAVAILABLE; the request_id is not claimed, so a retry removes
  /// what is left). An application with no placement gives an empty plan.
  absl::StatusOr<codeco::swm::v1::AssignmentPlan> Release(
      const ReleaseRequest& request, absl::Time deadline = absl::InfiniteFuture());

  /// Moves one workload of a placed application, make-before-break, with
  /// the current plan as the incumbent: the other workloads stay where they
  /// run and the solve places only this one (never on its current node),
  /// checking its channels against where its peers run. Then: the
  /// migration is stored RESERVING; the target cluster reserves and (stored
  /// RESTORING) commits the new pod, named by MigratedPodName, under the
  /// reservation "<application>/<new revision>/<cluster>", and the virtual
  /// links of its inter-cluster channels are set up; the new plan revision
  /// is written DONE together with the migration CUTTING_OVER; only then is
  /// the source pod removed (and the channels' old links), and the
  /// migration DONE. Any failure before the new plan is written rolls the
  /// target back and leaves the workload where it ran (ROLLED_BACK,
  /// ABORTED); a source that cannot be removed now (its cluster away, or
  /// not asked at all for reason CLUSTER_FAILURE) leaves the migration
  /// CUTTING_OVER, answered not done, and Recover finishes it. A stateful
  /// workload moves with its state: once the target pod runs (empty) the
  /// migration is stored CHECKPOINTING with the plan it will write, and the
  /// StateMover (the source cluster's checkpointer) loads the source's
  /// state into it and retires the source; the plan moves only then. The
  /// mover giving up rolls the target back (the source serves on); a move
  /// still running at `deadline` answers DEADLINE_EXCEEDED and Recover
  /// follows it. For reason NODE_FAILURE or CLUSTER_FAILURE the source
  /// cannot be read: the newest backup of the source pod (state_backups.h)
  /// is restored into the target through the target cluster's checkpointer
  /// instead, and kept in the migration as restored_backup. Without a
  /// StateMover, or off a failed node or cluster with no backup of the
  /// source pod, a stateful workload is not moved (FAILED_PRECONDITION,
  /// stored FAILED).
  /// With reason SCALE_UP (Scale's) the workload is one the plan does not
  /// hold yet: there is no source, the new plan holds it beside the others
  /// and it starts empty; SCALE_DOWN is refused (INVALID_ARGUMENT).
  /// Answers the operation (result = the Migration).
  /// INVALID_ARGUMENT naming `workload`, `target_cluster` or `target_node`;
  /// FAILED_PRECONDITION when the application is not placed, or no node can
  /// take the workload (stored FAILED, with the reason); UNAVAILABLE when an
  /// earlier migration of the application was interrupted before its new
  /// plan and is not recovered yet (one CUTTING_OVER does not hold the next
  /// move back: a cut cluster's workloads are evacuated one after another).
  absl::StatusOr<codeco::common::v1::Operation> Migrate(const MigrateRequest& request,
                                                        absl::Time deadline = absl::InfiniteFuture());

  /// Settles a member's local decision (a pod its swm moved to another of
  /// its nodes while the hub was away; the rule is in adaptation_loop.h).
  /// ADOPTED when the newest plan of the application is placed and runs
  /// pod `decision.pod` of `decision.workload` under `decision.reservation`
  /// in `decision.cluster`: a new plan revision has it on
  /// `decision.to_node`, stored with a migration (reason LOCAL_RESCHEDULE,
  /// DONE, with source and target) and published like any move; ADOPTED
  /// again, writing nothing, when the plan already has it there. UNDONE,
  /// saying why, otherwise. UNAVAILABLE while a migration of the workload
  /// is in flight (asked again later); INVALID_ARGUMENT naming the field
  /// for a decision without application, workload, cluster, pod or
  /// to_node.
  absl::StatusOr<codeco::swm::v1::LocalDecisionVerdict> AdoptLocalMove(
      const codeco::swm::v1::LocalDecision& decision, absl::Time deadline = absl::InfiniteFuture());

  /// Changes the replica counts of a placed application in place, through
  /// the pipeline with the current plan as the incumbent: every replica the
  /// new `request.app` no longer names is removed (one at a time, highest
  /// plan position first: the plan without it is written, then its pod
  /// removed — a migration record with reason SCALE_DOWN and no target),
  /// then every replica it names that the plan does not hold is added (one
  /// at a time, each solved against where the others run, reserved and
  /// committed before the plan holds it — a migration record with reason
  /// SCALE_UP and no source; a stateful replica starts empty, as a new
  /// StatefulSet replica does). A channel keeps the bandwidth share it was
  /// placed with; the channels of an added replica get theirs from
  /// `request.app`. Every plan written carries `request.spec_revision`
  /// (when nothing is added or removed, one new plan revision that only
  /// carries it). Answers the operation (kind swm.PlaceApplication, result
  /// = the newest plan, DONE, whose `unplaced` lists the new replicas no
  /// node could take: the others are added and run). An error of a step
  /// that did not happen (UNAVAILABLE, ABORTED, DEADLINE_EXCEEDED) ends it
  /// with the plan as far as it got, and does not claim the request_id, so
  /// a retry carries on from there. FAILED_PRECONDITION when the
  /// application is not placed; UNAVAILABLE while a migration of it is
  /// interrupted and not recovered.
  absl::StatusOr<codeco::common::v1::Operation> Scale(const ScaleRequest& request,
                                                      absl::Time deadline = absl::InfiniteFuture());

  /// At start: rebuilds the link ledger from the stored plans and drives
  /// every plan left in an intermediate phase to a known outcome —
  /// RESERVING: its reservations are released and it is ROLLED_BACK (the
  /// request_id stays free, so the caller's retry places again);
  /// COMMITTING: committed again in every target cluster (DONE, the
  /// request_id answers it) or, when a cluster no longer holds its
  /// reservation, its pods removed and ROLLED_BACK; RELEASING: the removal
  /// finished. Interrupted migrations: one that had not written its new
  /// plan is rolled back (the target pod removed, ROLLED_BACK); one
  /// CUTTING_OVER has its source pod removed (DONE). What cannot be done now
  /// (a cluster away) is in `errors` and the plan or migration stays as it
  /// was, for the next call.
  RecoveryReport Recover(absl::Time deadline = absl::InfiniteFuture());

  /// Compares what the clusters run with the stored plans: a pod labelled
  /// with a reservation that no stored plan's target (nor the target of a
  /// migration in flight) holds under that pod name — unknown, removed,
  /// rolled back, replaced by a newer revision or moved away — is deleted.
  /// Clusters the MemberPort cannot list are skipped. Run at start and
  /// periodically.
  RecoveryReport Reconcile(absl::Time deadline = absl::InfiniteFuture());

  /// Bits per second of `service_class` that placed plans hold on from -> to.
  int64_t HeldBandwidth(const std::string& from, const std::string& to, ServiceClass service_class);

  /// Where placements set up (and removals, rollbacks and the reconciler
  /// tear down) the virtual links of inter-cluster channels; not owned.
  /// None by default: those channels get no link (their actions say why).
  /// Call before the first placement.
  void SetVirtualLinks(VirtualLinkPort* links) { virtual_links_ = links; }

  /// Called with every plan once stored in a final state (placed, failed,
  /// rolled back, removed), after the store; e.g. the channel tracker.
  using PlanListener = std::function<void(const codeco::swm::v1::AssignmentPlan&)>;
  /// Sets the plan listener. Call before the first placement.
  void SetPlanListener(PlanListener listener) { plan_listener_ = std::move(listener); }

  /// Where migrations of stateful workloads move their state (the source
  /// cluster's checkpointer); not owned. None by default: a stateful
  /// workload is then never moved (a move would lose its state). Call
  /// before the first migration.
  void SetStateMover(StateMover* mover) { state_mover_ = mover; }

 private:
  // Admission: one operation per application, none while Recover or
  // Reconcile runs. Admit waits (up to `deadline`) for its turn.
  absl::Status Admit(const std::string& application, absl::Time deadline);
  void Leave(const std::string& application);
  // `operation()` (a StatusOr) run as `application`'s one operation: Admit,
  // then it, then Leave; Admit's error when its turn does not come in time.
  template <typename Operation>
  auto AsOnlyOperation(const std::string& application, absl::Time deadline, Operation operation)
      -> decltype(operation()) {
    if (absl::Status admitted = Admit(application, deadline); !admitted.ok()) return admitted;
    auto result = operation();
    Leave(application);
    return result;
  }
  // Recover and Reconcile: wait until nothing is in flight and hold new
  // operations back until LeaveAlone.
  void AdmitAlone();
  void LeaveAlone();

  absl::StatusOr<codeco::common::v1::Operation> PlaceAdmitted(const PlaceRequest& request,
                                                              absl::Time deadline,
                                                              PlaceCounts* counts);
  absl::StatusOr<codeco::swm::v1::AssignmentPlan> ReleaseAdmitted(const ReleaseRequest& request,
                                                                  absl::Time deadline);
  absl::StatusOr<codeco::common::v1::Operation> MigrateAdmitted(const MigrateRequest& request,
                                                                absl::Time deadline);
  absl::StatusOr<codeco::common::v1::Operation> ScaleAdmitted(const ScaleRequest& request,
                                                              absl::Time deadline);
  // A new operation of `kind` on `resource`, created at `now`, with id
  // `caller_id` when the caller stored it before the work began (it keeps
  // that creation time), else `default_id`.
  codeco::common::v1::Operation NewOperation(const std::string& caller_id,
                                             const std::string& default_id,
                                             const std::string& kind, const std::string& resource,
                                             const std::string& request_id, absl::Time now) const;
  // Removes replica `workload` of `latest` (a placed plan): writes the plan
  // without it (for `spec_revision`) with a SCALE_DOWN migration
  // CUTTING_OVER, then removes its pod (FinishCutover).
  absl::Status RemoveReplica(const codeco::swm::v1::AssignmentPlan& latest,
                             const std::string& workload, int64_t spec_revision,
                             absl::Time deadline);
  // Recovery of one migration found not final.
  void RecoverMigration(codeco::swm::v1::Migration migration, absl::Time deadline,
                        RecoveryReport& report);
  // A stateful workload's state, from the source pod into the target pod
  // (committed empty): the migration is stored CHECKPOINTING with the plan
  // it writes (`next`, as next_plan) before a checkpointer is asked, so a
  // restarted hub re-attaches to the move; then FollowStateMove.
  StateMoveProgress MoveState(codeco::swm::v1::Migration& migration,
                              codeco::common::v1::Operation& op,
                              const codeco::swm::v1::AssignmentPlan& next,
                              const std::string& checkpointer, absl::Time deadline);
  // Starts the state move of a CHECKPOINTING `migration` (or re-attaches to
  // it: the request id is the migration's own) and follows it up to
  // `deadline`: through the source cluster's checkpointer, or the target's
  // when it restores the migration's restored_backup; `checkpointer` is
  // that one's endpoint ("" = the one last used). The checkpointer's
  // operation goes into checkpoint_id. Done
  // with an error when the checkpointer gave up or refused the move (then
  // it never started); not done while it may still be running, including
  // when it could not be asked or followed (`phase` says why).
  StateMoveProgress FollowStateMove(codeco::swm::v1::Migration& migration,
                                    codeco::common::v1::Operation& op,
                                    const std::string& checkpointer, absl::Time deadline);
  // Writes the plan a move made (`next`, DONE) with the migration
  // CUTTING_OVER, then removes the source (FinishCutover) unless
  // `source_left` says why it cannot be asked now.
  absl::Status CutOver(codeco::swm::v1::Migration& migration, codeco::common::v1::Operation& op,
                       codeco::swm::v1::AssignmentPlan& next, const absl::Status& source_left,
                       const std::string& request_id, absl::Time deadline);
  // Removes one pod of a migration (its target or its source) from its
  // reservation; answers that pod's outcome (NOT_FOUND: gone already).
  absl::Status RemovePod(const codeco::swm::v1::WorkloadTarget& where, const std::string& reason,
                         absl::Time deadline);
  // Removes a migration's target pod (before its plan was written); false
  // with the reason in `why` when the target cluster could not do it now.
  bool RemoveTarget(const codeco::swm::v1::Migration& migration, const std::string& reason,
                    absl::Time deadline, std::string& why);
  // Removes the source pod of `migration` (CUTTING_OVER) and the old virtual
  // links of its channels; stores it DONE with `op` (and `plan`, the plan
  // the move wrote, with its DeletePod action's result, when not null), or
  // leaves it CUTTING_OVER with the error when the pod is still there.
  absl::Status FinishCutover(codeco::swm::v1::Migration& migration,
                             codeco::common::v1::Operation& op,
                             codeco::swm::v1::AssignmentPlan* plan, const std::string& request_id,
                             absl::Time deadline);
  // Stores `migration` in `phase` with `plan` (if not null) and `op`: an
  // error `status` goes on the migration; a final phase ends the operation
  // with it (OK: the migration is its result); `request_id` is claimed when
  // not empty.
  absl::Status StoreMigration(codeco::swm::v1::Migration& migration,
                              codeco::common::v1::Operation& op,
                              codeco::swm::v1::MigrationPhase phase, const absl::Status& status,
                              const codeco::swm::v1::AssignmentPlan* plan,
                              const std::string& request_id);
  // Reads the members and links of a placement into `federation`.
  // `app` with each dataLocality that names a data set resolved to the
  // clusters holding it (options_.data_sets). When the locator cannot tell,
  // a name that is a member cluster or region keeps that meaning; any other
  // is UNAVAILABLE, naming the workload.
  absl::StatusOr<Application> ResolveDataLocality(const Application& app,
                                                  const Federation& federation) const;
  absl::Status BuildFederation(const std::vector<MemberRef>& members, absl::Time deadline,
                               Federation& federation, std::vector<std::string>& neighborhood,
                               std::vector<std::string>& unreachable)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(schedule_mu_);
  // Deletes the pods `removal` (RELEASING, targets = pods to remove) lists
  // and writes it DONE or FAILED with `op`.
  absl::Status FinishRemoval(codeco::swm::v1::AssignmentPlan& removal,
                             codeco::common::v1::Operation& op, const std::string& request_id,
                             absl::Time deadline);
  // Reconcile's work, once it runs alone.
  RecoveryReport ReconcileAlone(absl::Time deadline);
  // Recovery of one plan found RESERVING or COMMITTING.
  void RecoverPlacement(codeco::swm::v1::AssignmentPlan plan, absl::Time deadline,
                        RecoveryReport& report);
  // Drops the cached views of `clusters` (node_view_ttl).
  void DropCachedViews(const std::vector<std::string>& clusters);
  // Drops the cached views of `clusters` and tells the member port.
  void Invalidate(const std::vector<std::string>& clusters);
  // Tells the plan listener, if any.
  void Published(const codeco::swm::v1::AssignmentPlan& plan) const;
  // Deletes every virtual link of `application`; each deletion is added to
  // `plan` as a DeleteChannel action. Returns what could not be deleted.
  std::vector<std::string> DeleteVirtualLinks(const std::string& application,
                                              codeco::swm::v1::AssignmentPlan* plan,
                                              absl::Time deadline);
  // Sets up the virtual links of `plan`'s inter-cluster channels (recovery
  // of a plan found COMMITTING); the error names the channel.
  absl::Status CreateVirtualLinks(codeco::swm::v1::AssignmentPlan& plan, absl::Time deadline);

  const Clock& clock_;
  MemberPort& members_;
  LinkSource* links_;
  PlanRepository& plans_;
  L2Solver& local_l2_;
  const PluginRegistry& registry_;
  PlacementServiceOptions options_;
  VirtualLinkPort* virtual_links_ = nullptr;
  StateMover* state_mover_ = nullptr;
  PlanListener plan_listener_;

  // Admission state.
  absl::Mutex admit_mu_;
  std::set<std::string> busy_ ABSL_GUARDED_BY(admit_mu_);  // applications in flight
  int in_flight_ ABSL_GUARDED_BY(admit_mu_) = 0;           // operations in flight
  bool alone_ ABSL_GUARDED_BY(admit_mu_) = false;          // Recover/Reconcile runs

  // Serialises the scheduling cycle (read, solve, reserve). Taken before mu_.
  absl::Mutex schedule_mu_;

  // The ledger and the caches; held only for short sections, never across a
  // call to a port.
  absl::Mutex mu_;
  LinkLedger ledger_ ABSL_GUARDED_BY(mu_);
  struct CachedLink {
    std::optional<Link> link;
    absl::Time read_at;
  };
  std::map<std::pair<std::string, std::string>, CachedLink> link_cache_ ABSL_GUARDED_BY(mu_);
  struct CachedView {
    MemberView view;
    absl::Time read_at;
  };
  std::map<std::string, CachedView> view_cache_ ABSL_GUARDED_BY(mu_);
};

/// The reservation the pod of `target` (a target of `plan`) was created
/// under: the target's own, or for plans stored before targets carried it,
/// "<application>/<revision that placed the pods>/<cluster>".
std::string TargetReservation(const codeco::swm::v1::AssignmentPlan& plan,
                              const codeco::swm::v1::WorkloadTarget& target);

/// True when the application has pods under `plan`: a placement that is
/// done, a removal that left pods behind (its targets), or a plan caught in
/// an intermediate phase (RESERVING, COMMITTING, RELEASING).
bool HoldsPods(const codeco::swm::v1::AssignmentPlan& plan);

}  // namespace codeco::swm
