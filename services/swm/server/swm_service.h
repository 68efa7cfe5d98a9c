#pragma once
// codeco.swm.v1.SwmService for the hub role on the callback API.
//
// The orchestration itself is the core's PlacementService
// (swm/core/placement_service.h); this class translates the protos, queues
// the work on one worker and calls it, with HubMemberPort (hub_members.h) as
// its way to the members and the PlanStore as its repository. At start the
// worker first runs PlacementService::Recover (plans a crash interrupted)
// and, when reconcile_interval is set, the orphan reconciler.
//
// MigrateWorkload moves one workload of a placed application through the
// same pipeline (the core's Migrate: the current plan is the incumbent, the
// target reserved and committed before the source is removed), with the
// model and neighborhood of the application's newest placement request,
// which PlaceApplication stores once the placement passed its checks;
// GetMigration and ListMigrations read the stored records; so does
// ListStateBackups (state_backups.h).
//
// PlaceApplication turns the application into workloads and builds the
// federation of its neighborhood: a member with an MC swm (the member's
// endpoints["swm"] from ACM's registry, else swm.cluster_endpoints) is known
// only through that swm — its nodes from GetClusterView, its labels from its
// nodes' codeco.io/* labels — and a member without one through its LMS (and,
// in the testbed, CODEF's directory). The links among the members come from
// the LinkSource in one read (NetMA's topology). It runs the L1/L2
// Coordinator (MC members solve their own L2 with SolveCluster) and executes
// the plan through PlanExecutor: reserve in every cluster — an MC gets every
// pod's full template (image, ports, env, command, args, requests, limits,
// labels codeco.io/plan and codeco.io/reservation) in its ReserveRequest and
// creates the pods itself on Commit — then commit; any failure releases
// everything. The plan and the operation are stored before the answer.
// Placements and removals run on swm.placement_workers threads, never on
// gRPC's threads; the core serialises each placement's scheduling cycle
// (read, solve, reserve) and overlaps the commits. Requests beyond the queue
// bound get RESOURCE_EXHAUSTED.
//
// In PLACE_MODE_RUNNING the request is checked (bad input is still the
// call's INVALID_ARGUMENT), its operation stored QUEUED and answered at once,
// and the placement queued on the worker; the core's progress (READING_MEMBERS,
// SOLVING, then the plan's phases) is stored into that operation, and its end
// (the plan, or the error, also one the core answered before storing a plan)
// too. WatchOperation streams any stored operation's changes (the store tells
// the watches after every write), ListOperations pages through them. At
// start, after the core's Recover, an operation left not done that no
// interrupted plan carries (the hub died before the plan was written) is
// finished ABORTED: nothing was reserved for it.
//
// Answers: the Operation (done, result = AssignmentPlan); INVALID_ARGUMENT
// with the field path for bad input; FAILED_PRECONDITION listing every
// unplaced workload with its reason (the FAILED plan is stored, nothing is
// reserved); ABORTED when execution failed and was rolled back; UNAVAILABLE
// when the directory or no member can be reached (a member whose swm or LMS
// does not answer is left out, and named if that leaves workloads unplaced).
// A request_id seen before answers the first result again without placing
// anything.

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/common/clock.h"
#include "codeco/common/config.h"
#include "codeco/common/executor.h"
#include "codeco/common/kv_store.h"
#include "codeco/common/listeners.h"
#include "codeco/common/peer_channels.h"
#include "codeco/common/server.h"
#include "codeco/swm/v1/swm_service.grpc.pb.h"
#include "prometheus/registry.h"
#include "swm/core/execution.h"
#include "swm/core/plugins.h"
#include "swm/core/solve.h"
#include "swm/lms/lms_pod_runtime.h"
#include "swm/milp/exact_l2.h"
#include "swm/core/federation_source.h"
#include "swm/core/adaptation_loop.h"
#include "swm/core/state_backups.h"
#include "swm/core/placement_service.h"
#include "swm/core/channel_status.h"
#include "swm/server/hub_members.h"
#include "swm/server/netma_virtual_links.h"
#include "swm/server/pdlc_recommendations.h"
#include "swm/server/checkpointer_state_mover.h"
#include "swm/server/plan_store.h"
#include "swm/server/remote_cluster.h"

namespace codeco::swm {

/// Settings of the SWM service.
struct SwmServiceOptions {
  /// Deadline of each call to a cluster's LMS. Default: 10 s.
  absl::Duration lms_timeout = absl::Seconds(10);
  /// Lease of a reservation (how long it outlives a vanished hub). Default: 60 s.
  absl::Duration reservation_lease = absl::Seconds(60);
  /// Node-to-node latency assumed inside every cluster, ns. Default: 100 us.
  int64_t intra_cluster_latency_ns = 100'000;
  /// How long the links read from the LinkSource (one read per placement)
  /// are reused by later placements. Reservations re-check capacity in the clusters, but a stale
  /// link may let a channel bound be planned on old figures: keep it short. Default: 0 (every
  /// placement reads every link).
  absl::Duration link_cache_ttl = absl::ZeroDuration();
  /// How long the nodes read from a member (its swm or LMS) are reused by later
  /// placements. A plan (or removal) that touched a cluster drops its view;
  /// changes made by others meanwhile are not seen, but Reserve re-checks
  /// room in the cluster, so a stale view can fail a plan (ABORTED, rolled
  /// back), never overcommit a node. Default: 0 (read for every placement).
  absl::Duration node_view_ttl = absl::ZeroDuration();
  /// The MC swm of each cluster that has one (cluster -> host:port), for
  /// members whose neighborhood entry has no endpoints["swm"]: such a
  /// cluster reports its nodes (GetClusterView), solves its own L2
  /// (SolveCluster) and runs its side of the two-phase commit
  /// (Reserve/Commit/Release) with its durable ledger; the others are solved
  /// here and driven through their LMS. Default: none.
  std::map<std::string, std::string> cluster_endpoints;
  /// Channels to the MC swm endpoints (mTLS identity, egress proxy); not
  /// owned. Null: the LMS channels. Default: null.
  PeerChannels* mc_channels = nullptr;
  /// The PDLC of each cluster that has one (cluster -> host:port), for
  /// members whose neighborhood entry has no endpoints["pdlc"]. Placements
  /// follow their recommendations (see pdlc_recommendations.h), reached
  /// over mc_channels. Default: none.
  std::map<std::string, std::string> pdlc_endpoints;
  /// How the PDLCs' recommendations are kept.
  PdlcRecommendationsOptions pdlc;
  /// Deadline of each call to an MC swm. Default: 10 s.
  absl::Duration mc_timeout = absl::Seconds(10);
  /// Where MC members' L2 is solved. Default: on the hub, on their views.
  MemberL2 member_l2 = MemberL2::kHub;
  /// When the hub solves a cluster's L2 exactly with CBC (clusters it drives
  /// through their LMS; small clusters and batches; max_nodes 0 = never).
  /// Default: never.
  milp::ExactL2Options exact_l2{.max_nodes = 0};
  /// Placements allowed to wait for a worker. Default: 64.
  size_t max_queued_placements = 64;
  /// Threads that run placements and removals. Placements overlap: the core
  /// serialises each one's scheduling cycle (read, solve, reserve) and runs
  /// the commits concurrently (see PlacementService). Default: 4.
  size_t placement_workers = 4;
  /// Most WatchOperation streams open at once (more are answered
  /// RESOURCE_EXHAUSTED). Default: 256.
  int max_operation_watchers = 256;
  /// Coordinator settings. Default: the core's.
  CoordinatorOptions coordinator;
  /// NetMA's virtual links: each committed inter-cluster channel gets one,
  /// torn down with its plan, and the channels' status follows their
  /// measurements. Null: no virtual links (those channels stay REVIEWED).
  std::shared_ptr<NetmaVirtualLinks> virtual_links;
  /// Where data sets live (the MDM of swm.mdm): a dataLocality naming one
  /// places its workload only where the data set is. Null: dataLocality is
  /// a region or cluster.
  std::shared_ptr<DataSetLocator> data_sets;
  /// How often NetMA's virtual links are read for the channels' status
  /// (only while some channel has one). Default: 1 s.
  absl::Duration channel_poll = absl::Seconds(1);
  /// The channel lifecycle's settings (the out-of-QoS grace period).
  ChannelTrackerOptions channels;
  /// How often the orphan reconciler runs (at start, then every interval):
  /// pods in the LMS-driven clusters labelled with a plan the hub no longer
  /// holds are deleted; each round first retries the recovery of plans a
  /// crash interrupted that could not be finished before (a member away).
  /// Zero: never (the recovery then runs at start only). Default: never
  /// (the binary: 5 min).
  absl::Duration reconcile_interval = absl::ZeroDuration();
  /// How often the adaptation loop probes the members of the placed
  /// applications and moves the workloads of a node or cluster failed for
  /// longer than adaptation.failure_grace, then back once it recovered
  /// (AdaptationLoop). Zero: never. Default: never (the binary: 10 s).
  absl::Duration adapt_interval = absl::ZeroDuration();
  /// The adaptation loop's rules (grace periods, cooldown, budget).
  MigrationGovernorOptions adaptation;
  /// Backups of the stateful workloads, taken on the adaptation loop's
  /// ticks (so at most every adapt_interval); a zero interval takes none.
  /// Default: none (the binary: every 30 s).
  StateBackupOptions state_backups{.interval = absl::ZeroDuration()};
};

/// The hub's SwmService. Thread-safe.
class SwmServiceImpl final : public codeco::swm::v1::SwmService::CallbackService {
 public:
  /// Uses `store` (with the "plans" and "operations" families) and `clock`,
  /// which must outlive the service; reaches the clusters' LMS through
  /// `channels`. `directory` and `links` may be null: then LMS endpoints come
  /// only from the neighborhood members' endpoints["lms"], and no
  /// inter-cluster link exists. Domain metrics (codeco_swm_placements_total
  /// by code, codeco_swm_placement_duration_seconds, codeco_swm_workloads_placed_total,
  /// codeco_swm_workloads_unplaced_total) go to `registry` unless it is null.
  SwmServiceImpl(KvStore& store, const Clock& clock, std::unique_ptr<PeerChannels> channels,
                 std::shared_ptr<ClusterDirectory> directory, std::shared_ptr<LinkSource> links,
                 SwmServiceOptions options = {}, prometheus::Registry* registry = nullptr);
  /// Runs the queued placements, then stops the workers.
  ~SwmServiceImpl() override;

  grpc::ServerUnaryReactor* PlaceApplication(
      grpc::CallbackServerContext* context, const codeco::swm::v1::PlaceApplicationRequest* request,
      codeco::swm::v1::PlaceApplicationResponse* response) override;
  grpc::ServerUnaryReactor* ReleaseApplication(
      grpc::CallbackServerContext* context,
      const codeco::swm::v1::ReleaseApplicationRequest* request,
      codeco::swm::v1::ReleaseApplicationResponse* response) override;
  grpc::ServerUnaryReactor* GetAssignmentPlan(
      grpc::CallbackServerContext* context,
      const codeco::swm::v1::GetAssignmentPlanRequest* request,
      codeco::swm::v1::GetAssignmentPlanResponse* response) override;
  grpc::ServerUnaryReactor* ListAssignmentPlans(
      grpc::CallbackServerContext* context,
      const codeco::swm::v1::ListAssignmentPlansRequest* request,
      codeco::swm::v1::ListAssignmentPlansResponse* response) override;
  grpc::ServerUnaryReactor* GetOperation(grpc::CallbackServerContext* context,
                                         const codeco::swm::v1::GetOperationRequest* request,
                                         codeco::swm::v1::GetOperationResponse* response) override;
  grpc::ServerUnaryReactor* ListOperations(
      grpc::CallbackServerContext* context, const codeco::swm::v1::ListOperationsRequest* request,
      codeco::swm::v1::ListOperationsResponse* response) override;
  grpc::ServerWriteReactor<codeco::swm::v1::WatchOperationResponse>* WatchOperation(
      grpc::CallbackServerContext* context,
      const codeco::swm::v1::WatchOperationRequest* request) override;
  /// Moves one workload (the core's Migrate, on the worker) with the model
  /// and neighborhood of the application's stored placement request.
  grpc::ServerUnaryReactor* MigrateWorkload(
      grpc::CallbackServerContext* context, const codeco::swm::v1::MigrateWorkloadRequest* request,
      codeco::swm::v1::MigrateWorkloadResponse* response) override;
  /// A stored migration record; NOT_FOUND when absent.
  grpc::ServerUnaryReactor* GetMigration(grpc::CallbackServerContext* context,
                                         const codeco::swm::v1::GetMigrationRequest* request,
                                         codeco::swm::v1::GetMigrationResponse* response) override;
  /// One page of stored migration records.
  grpc::ServerUnaryReactor* ListStateBackups(
      grpc::CallbackServerContext* context,
      const codeco::swm::v1::ListStateBackupsRequest* request,
      codeco::swm::v1::ListStateBackupsResponse* response) override;
  grpc::ServerUnaryReactor* ListMigrations(
      grpc::CallbackServerContext* context, const codeco::swm::v1::ListMigrationsRequest* request,
      codeco::swm::v1::ListMigrationsResponse* response) override;
  /// The channels of every placed application (or one): all first, then
  /// each change with the out-of-QoS triggers it raised. Counted with the
  /// operation watches against max_operation_watchers.
  grpc::ServerWriteReactor<codeco::swm::v1::WatchChannelsResponse>* WatchChannels(
      grpc::CallbackServerContext* context,
      const codeco::swm::v1::WatchChannelsRequest* request) override;

  /// PlaceApplication in PLACE_MODE_RUNNING: checks the request, answers
  /// the operation (started before by the same request_id, or new: stored
  /// QUEUED, its placement queued on the worker). INVALID_ARGUMENT for bad
  /// input or a request_id used by other work; RESOURCE_EXHAUSTED when the
  /// worker's queue is full (the operation is then stored done with it).
  absl::StatusOr<codeco::common::v1::Operation> Start(
      const codeco::swm::v1::PlaceApplicationRequest& request);

  /// The placement itself, synchronously (what the worker runs); calls to
  /// the clusters' LMS end by `deadline` (the caller's) at the latest. With
  /// scale_in_place, an application whose newest plan is placed has its
  /// replica counts changed in place (the core's Scale) when the new spec
  /// differs from the one stored with its placement only in services'
  /// replicas and autoscaling, its neighborhood is the same one and still
  /// holds the clusters of the replicas that stay, and no channel
  /// between replicas that stay changes its name; ALREADY_EXISTS saying
  /// which of those fails otherwise (nothing changes).
  absl::StatusOr<codeco::common::v1::Operation> Place(
      const codeco::swm::v1::PlaceApplicationRequest& request,
      absl::Time deadline = absl::InfiniteFuture());

  /// The removal itself, synchronously (what the worker runs for
  /// ReleaseApplication): removes the pods of the application's placed plan
  /// in every cluster it is on — a cluster with an MC swm through that swm's
  /// Release of the plan's reservation (the MC deletes its pods and reports
  /// which; the hub never deletes them itself), the others by deleting the
  /// pods through their LMS and releasing the reservation — and stores a new
  /// plan revision with one DeletePod action per pod (SUCCEEDED, or SKIPPED
  /// when the pod was already gone) and no targets. An application with no
  /// placement gives an empty plan (only `application` set) and stores no
  /// plan. When a pod cannot be deleted the plan is stored FAILED with the
  /// pods still there as targets, and the answer is UNAVAILABLE (retrying,
  /// even with the same request_id, deletes what is left); a request_id
  /// seen with a success answers that plan again.
  absl::StatusOr<codeco::swm::v1::AssignmentPlan> Release(
      const codeco::swm::v1::ReleaseApplicationRequest& request,
      absl::Time deadline = absl::InfiniteFuture());

  /// The move itself, synchronously (what the worker runs for
  /// MigrateWorkload): checks the request (INVALID_ARGUMENT naming
  /// application, workload or reason), reads the request of the
  /// application's newest placement (FAILED_PRECONDITION when none is
  /// stored: the application was not placed by this hub) and calls the
  /// core's Migrate with it.
  absl::StatusOr<codeco::common::v1::Operation> Migrate(
      const codeco::swm::v1::MigrateWorkloadRequest& request,
      absl::Time deadline = absl::InfiniteFuture());

  /// Waits until the worker has run everything queued before this call
  /// (at start: the recovery of interrupted plans and the first reconcile).
  void DrainForTest();

 private:
  class ChannelWatch;
  // The scale in place of an application whose newest plan is placed (see
  // Place), or nullopt when it is not placed (then it is placed as new).
  std::optional<absl::StatusOr<codeco::common::v1::Operation>> ScaleInPlace(
      const codeco::swm::v1::PlaceApplicationRequest& request, absl::Time deadline,
      const codeco::common::v1::Operation* accepted);
  // Takes `plan` into the channel tracker; tells the channel watches.
  void TrackPlan(const codeco::swm::v1::AssignmentPlan& plan);
  // The channel monitor's loop: reads NetMA's virtual links every
  // channel_poll while some channel has one.
  void MonitorChannels();
  // After a change of the tracker: metrics, trigger log, watches.
  void ChannelsChanged();
  // The checked core request of `request`, without its executors;
  // INVALID_ARGUMENT naming the field.
  absl::StatusOr<PlaceRequest> ToPlaceRequest(
      const codeco::swm::v1::PlaceApplicationRequest& request);
  // Place(), reporting into the operation `accepted` (stored by Start) when
  // not null, else into the core's own.
  absl::StatusOr<codeco::common::v1::Operation> PlaceAs(
      const codeco::swm::v1::PlaceApplicationRequest& request, absl::Time deadline,
      const codeco::common::v1::Operation* accepted);
  // Stores `accepted` done with what the placement answered, unless the
  // core stored its end; then forgets it as running.
  void FinishStarted(const codeco::common::v1::Operation& accepted,
                     const absl::StatusOr<codeco::common::v1::Operation>& placed);
  // At start: operations left not done that no interrupted plan carries end ABORTED.
  void FinishInterruptedOperations();
  bool Submit(std::function<void()> task);
  // Runs `work(deadline)` on the worker and finishes `context`'s call with it.
  grpc::ServerUnaryReactor* OnWorker(grpc::CallbackServerContext* context,
                                     std::function<absl::Status(absl::Time)> work);
  // Recover() and, when configured, the reconciler: the worker's first task.
  void Recover();
  // One tick of the adaptation loop (the first worker, every adapt_interval).
  void Adapt();
  // One pass of the state backups (after each adaptation tick).
  void BackUpState();
  class MemberHealth;
  class ChannelHealth;
  class Mover;
  struct Metrics;
  std::unique_ptr<Metrics> metrics_;
  // One worker's loop; the `first` runs the start-up recovery and the reconciler.
  void Work(bool first);

  PlanStore plans_;
  const Clock& clock_;
  std::unique_ptr<PeerChannels> channels_;
  std::shared_ptr<ClusterDirectory> directory_;
  std::shared_ptr<LinkSource> links_;
  SwmServiceOptions options_;
  PluginRegistry registry_;
  HubMemberPort members_;
  // The clusters' PDLCs, read by the L1 order and the L2 scores.
  PdlcRecommendations recommendations_;
  // The member clusters' checkpointers: stateful migrations move state there.
  CheckpointerStateMover state_mover_;
  InProcessL2Solver in_process_l2_;
  milp::ExactL2Solver exact_l2_;
  std::unique_ptr<PlacementService> core_;
  // The adaptation loop and its ports (null when adapt_interval is zero).
  std::unique_ptr<MemberHealth> member_health_;
  std::unique_ptr<ChannelHealth> channel_health_;
  std::unique_ptr<Mover> mover_;
  std::unique_ptr<AdaptationLoop> adaptation_;
  // Backups of stateful workloads (null when they are off).
  std::unique_ptr<StateBackupScheduler> backups_;

  absl::Mutex queue_mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(queue_mu_);
  bool stopping_ ABSL_GUARDED_BY(queue_mu_) = false;
  // Set once the start-up recovery ran: no request is taken before.
  bool recovered_ ABSL_GUARDED_BY(queue_mu_) = false;
  // Tasks a worker runs now.
  int running_tasks_ ABSL_GUARDED_BY(queue_mu_) = 0;
  std::vector<std::thread> workers_;

  Listeners listeners_;  // told after every stored change of an operation
  ChannelTracker channel_tracker_;
  Listeners channel_listeners_;  // told after every change of the tracker
  absl::Mutex channel_mu_;
  int64_t channel_logged_ ABSL_GUARDED_BY(channel_mu_) = 0;  // triggers logged up to this sequence
  bool channel_stop_ ABSL_GUARDED_BY(channel_mu_) = false;
  std::thread channel_monitor_;
  std::atomic<int> operation_watchers_{0};
  // Operations this process started in PLACE_MODE_RUNNING and not finished,
  // by id, and their request_ids.
  absl::Mutex started_mu_;
  std::set<std::string> started_ ABSL_GUARDED_BY(started_mu_);
  std::map<std::string, std::string> started_requests_ ABSL_GUARDED_BY(started_mu_);
  int64_t started_count_ ABSL_GUARDED_BY(started_mu_) = 0;
  bool recovered_once_ = false;  // the worker's

  // Store reads and the acceptance of started placements, off gRPC's threads.
  BoundedExecutor io_{1, 256};
};

/// Declares the swm.* configuration keys (swm.codef_control, swm.lms_timeout,
/// swm.reservation_lease, swm.link_cache_ttl, swm.node_view_ttl, swm.cluster_endpoints,
/// swm.mc_timeout, swm.exact_l2_max_nodes, swm.exact_l2_max_workloads,
/// swm.exact_l2_time_limit, swm.reconcile_interval, swm.placement_workers,
/// swm.adapt_interval, swm.failure_grace, swm.failback_grace, swm.state_backup_interval).
void AddSwmConfig(ConfigSchema& schema);

/// Parses swm.cluster_endpoints ("cluster=host:port,cluster=host:port"):
/// INVALID_ARGUMENT naming the key and the bad entry.
absl::StatusOr<std::map<std::string, std::string>> ParseClusterEndpoints(const std::string& text);

/// The services codeco-swm serves for `context`: on the hub the
/// SwmServiceImpl (with a CodefDirectory when swm.codef_control is set, and
/// the MC swm of the clusters in swm.cluster_endpoints); on an MC the
/// SwmClusterServiceImpl over the cluster's LMS (the `lms` key, required).
absl::StatusOr<std::vector<std::unique_ptr<grpc::Service>>> MakeSwmServices(
    ServiceContext& context);

}  // namespace codeco::swm
