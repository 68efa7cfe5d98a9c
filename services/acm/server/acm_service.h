#pragma once
// The gRPC AcmService (callback API): translates requests to the core's
// ApplicationManager and its answers back, mapping errors with ToGrpcStatus.
// Application, cluster registry and neighborhood RPCs are served, and in a
// managed cluster Push* (into its local copies), and the operations ACM
// starts (Get/List/WatchOperation; past a cap of open watches, more are
// answered RESOURCE_EXHAUSTED).

#include <atomic>
#include <memory>

#include "acm/core/application_autoscaler.h"
#include "acm/core/application_manager.h"
#include "acm/core/cluster_drainer.h"
#include "acm/core/cluster_registry.h"
#include "acm/core/local_copies.h"
#include "acm/core/mission_relay.h"
#include "acm/core/neighborhood_manager.h"
#include "acm/server/policy_bundle_watcher.h"
#include "codeco/acm/v1/acm_service.grpc.pb.h"
#include "codeco/common/authz.h"
#include "codeco/common/clock.h"
#include "codeco/common/executor.h"
#include "codeco/common/kv_store.h"
#include "codeco/common/peer_channels.h"
#include "grpcpp/channel.h"

namespace codeco::acm {

/// AcmService over an ApplicationManager.
class AcmServiceImpl : public v1::AcmService::CallbackService {
 public:
  /// `manager`, `clusters`, `neighborhoods` and `drainer` must outlive the
  /// service. Unary work runs on `worker_threads` threads with at most
  /// `max_queued` calls waiting (more are answered RESOURCE_EXHAUSTED).
  /// `local_copies` is set in a managed cluster (it serves PushNeighborhood
  /// and PushAssignment into them); on the hub it is null and those answer
  /// FAILED_PRECONDITION. `hub_cluster` is the federation's hub, against
  /// which mTLS callers are bound to their own cluster and neighborhoods.
  /// `missions` (which must outlive the service) holds the missions of the
  /// cluster tree: authored here on the hub, relayed through a managed cluster.
  AcmServiceImpl(ApplicationManager& manager, ClusterRegistry& clusters,
                 NeighborhoodManager& neighborhoods, ClusterDrainer& drainer,
                 MissionRelay& missions, std::shared_ptr<LocalCopies> local_copies = nullptr,
                 std::string hub_cluster = "", int worker_threads = 2, size_t max_queued = 1024)
      : manager_(manager),
        clusters_(clusters),
        neighborhoods_(neighborhoods),
        drainer_(drainer),
        missions_(missions),
        local_copies_(std::move(local_copies)),
        hub_cluster_(std::move(hub_cluster)),
        executor_(worker_threads, max_queued) {}

  grpc::ServerUnaryReactor* ApplyApplication(grpc::CallbackServerContext* context,
                                             const v1::ApplyApplicationRequest* request,
                                             v1::ApplyApplicationResponse* response) override;
  grpc::ServerUnaryReactor* GetApplication(grpc::CallbackServerContext* context,
                                           const v1::GetApplicationRequest* request,
                                           v1::GetApplicationResponse* response) override;
  grpc::ServerUnaryReactor* ListApplications(grpc::CallbackServerContext* context,
                                             const v1::ListApplicationsRequest* request,
                                             v1::ListApplicationsResponse* response) override;
  grpc::ServerUnaryReactor* DeleteApplication(grpc::CallbackServerContext* context,
                                              const v1::DeleteApplicationRequest* request,
                                              v1::DeleteApplicationResponse* response) override;
  grpc::ServerUnaryReactor* RollbackApplication(grpc::CallbackServerContext* context,
                                                const v1::RollbackApplicationRequest* request,
                                                v1::RollbackApplicationResponse* response) override;
  grpc::ServerUnaryReactor* ListApplicationRevisions(
      grpc::CallbackServerContext* context, const v1::ListApplicationRevisionsRequest* request,
      v1::ListApplicationRevisionsResponse* response) override;
  grpc::ServerUnaryReactor* ResolveService(grpc::CallbackServerContext* context,
                                           const v1::ResolveServiceRequest* request,
                                           v1::ResolveServiceResponse* response) override;
  grpc::ServerWriteReactor<v1::WatchApplicationResponse>* WatchApplication(
      grpc::CallbackServerContext* context, const v1::WatchApplicationRequest* request) override;
  grpc::ServerUnaryReactor* RegisterCluster(grpc::CallbackServerContext* context,
                                            const v1::RegisterClusterRequest* request,
                                            v1::RegisterClusterResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* GetCluster(grpc::CallbackServerContext* context,
                                       const v1::GetClusterRequest* request,
                                       v1::GetClusterResponse* response) override;
  grpc::ServerUnaryReactor* ListClusters(grpc::CallbackServerContext* context,
                                         const v1::ListClustersRequest* request,
                                         v1::ListClustersResponse* response) override;
  grpc::ServerUnaryReactor* UnregisterCluster(grpc::CallbackServerContext* context,
                                              const v1::UnregisterClusterRequest* request,
                                              v1::UnregisterClusterResponse* response) override;
  grpc::ServerUnaryReactor* GetNeighborhood(grpc::CallbackServerContext* context,
                                            const v1::GetNeighborhoodRequest* request,
                                            v1::GetNeighborhoodResponse* response) override;
  grpc::ServerUnaryReactor* ListNeighborhoods(grpc::CallbackServerContext* context,
                                              const v1::ListNeighborhoodsRequest* request,
                                              v1::ListNeighborhoodsResponse* response) override;
  grpc::ServerUnaryReactor* PushNeighborhood(grpc::CallbackServerContext* context,
                                             const v1::PushNeighborhoodRequest* request,
                                             v1::PushNeighborhoodResponse* response) override;
  grpc::ServerUnaryReactor* PushAssignment(grpc::CallbackServerContext* context,
                                           const v1::PushAssignmentRequest* request,
                                           v1::PushAssignmentResponse* response) override;
  grpc::ServerUnaryReactor* GetOperation(grpc::CallbackServerContext* context,
                                         const v1::GetOperationRequest* request,
                                         v1::GetOperationResponse* response) override;
  grpc::ServerUnaryReactor* ListOperations(grpc::CallbackServerContext* context,
                                           const v1::ListOperationsRequest* request,
                                           v1::ListOperationsResponse* response) override;
  grpc::ServerWriteReactor<v1::WatchOperationResponse>* WatchOperation(
      grpc::CallbackServerContext* context, const v1::WatchOperationRequest* request) override;
  grpc::ServerUnaryReactor* ApplyMission(grpc::CallbackServerContext* context,
                                         const v1::ApplyMissionRequest* request,
                                         v1::ApplyMissionResponse* response) override;
  grpc::ServerUnaryReactor* DeleteMission(grpc::CallbackServerContext* context,
                                          const v1::DeleteMissionRequest* request,
                                          v1::DeleteMissionResponse* response) override;
  grpc::ServerUnaryReactor* GetMission(grpc::CallbackServerContext* context,
                                       const v1::GetMissionRequest* request,
                                       v1::GetMissionResponse* response) override;
  grpc::ServerUnaryReactor* ListMissions(grpc::CallbackServerContext* context,
                                         const v1::ListMissionsRequest* request,
                                         v1::ListMissionsResponse* response) override;

  /// The clusters reporting to this ACM (on a managed cluster: its
  /// subordinates in a layered tree, which its agent reports up).
  ClusterRegistry& registry() { return clusters_; }

  /// Sets how many WatchOperation streams may be open at once (default 256).
  void SetMaxOperationWatchers(int max) { max_operation_watchers_ = max; }

  /// Caps the open WatchApplication streams at `max` (more are answered
  /// RESOURCE_EXHAUSTED); each one holds a listener and a queue. Default:
  /// kDefaultMaxWatchers.
  void SetMaxWatchers(int max) { max_watchers_.store(max); }

  /// The default cap on open WatchApplication streams.
  static constexpr int kDefaultMaxWatchers = 1000;

  /// Where the pod usage of the clusters' heartbeats goes (the hub's
  /// multi-cluster autoscaler; not owned; null: nowhere). Call before serving.
  void SetAutoscaler(ApplicationAutoscaler* autoscaler) { autoscaler_ = autoscaler; }

 private:
  // Records the mission states `request` carries and adds to `answer` the
  // missions addressed to its cluster or that cluster's subtree.
  absl::Status AnswerMissions(const v1::HeartbeatRequest& request, v1::HeartbeatResponse& answer);
  // Every cluster this ACM knows: those registered here and their reported subtrees.
  absl::StatusOr<std::vector<TreeMember>> KnownTreeMembers() const;
  // OK unless `caller` is a member cluster outside the neighborhood of
  // `application` (PERMISSION_DENIED naming `method`).
  absl::Status RequireMemberOfApplication(grpc::CallbackServerContext& context,
                                          const Caller& caller, const std::string& application,
                                          const std::string& method) const;

  ApplicationManager& manager_;
  ClusterRegistry& clusters_;
  NeighborhoodManager& neighborhoods_;
  ClusterDrainer& drainer_;
  MissionRelay& missions_;
  const std::shared_ptr<LocalCopies> local_copies_;
  // WatchOperation streams open, and how many may be.
  std::atomic<int> operation_watchers_{0};
  int max_operation_watchers_ = 256;
  // Open watches and their cap.
  std::atomic<int> watchers_{0};
  std::atomic<int> max_watchers_{kDefaultMaxWatchers};
  const std::string hub_cluster_;
  ApplicationAutoscaler* autoscaler_ = nullptr;
  // Last member: destroyed first, so queued work still sees the rest.
  BoundedExecutor executor_;
};

/// What a self-contained ACM service is built from.
struct AcmServiceOptions {
  /// Lifecycle settings.
  ApplicationManagerOptions manager;
  /// Cluster registry settings.
  ClusterRegistryOptions clusters;
  /// Neighborhood settings.
  NeighborhoodManagerOptions neighborhoods;
  /// Channel to the hub's SWM; null keeps placements in memory (applications
  /// then stay PENDING).
  std::shared_ptr<grpc::Channel> swm_channel;
  /// A managed cluster's local copies (set by the MC's main, shared with its
  /// agent); null on the hub.
  std::shared_ptr<LocalCopies> local_copies;
  /// A managed cluster's missions relayed to it (set by the MC's main,
  /// shared with its agent, on the store's kMissionFamily); null: the
  /// service makes the root's (the hub authors missions).
  std::shared_ptr<MissionRelay> missions;
  /// The federation's hub cluster (ServiceConfig::hub_cluster), for the
  /// authorization bindings of mTLS callers (codeco/common/authz.h).
  std::string hub_cluster;
  /// Deadline of one PlaceApplication or ReleaseApplication call.
  absl::Duration placement_timeout = absl::Seconds(60);
  /// PlaceApplication and ReleaseApplication calls in flight to SWM at once
  /// (one application's go one after the other). Default: 4.
  int placement_concurrency = 4;
  /// How often the hub re-evaluates neighborhoods on long-unreachable
  /// clusters; zero (the default) never does.
  absl::Duration reevaluate_interval = absl::ZeroDuration();
  /// How long a cluster must have been silent (UNREACHABLE) before its
  /// applications are moved to a neighborhood without it. Default: 5 min.
  absl::Duration reevaluate_after = absl::Minutes(5);
  /// Wait before retrying a release SWM did not confirm; doubles each time. Default: 1 s.
  absl::Duration release_retry_min = absl::Seconds(1);
  /// Longest wait between release retries. Default: 30 s.
  absl::Duration release_retry_max = absl::Seconds(30);
  /// How often stored intents (PENDING, MIGRATING, DELETING) are reconciled
  /// with the scheduler: retries that are due and answers that never came
  /// (ApplicationManager::Reconcile); zero never does. Default: 1 s.
  absl::Duration reconcile_interval = absl::Seconds(1);
  /// How often the hub's multi-cluster autoscaler runs
  /// (acm/core/application_autoscaler.h), fed by the pod usage the
  /// clusters' heartbeats carry; zero never does. Default: 15 s.
  absl::Duration autoscale_interval = absl::Seconds(15);
  /// Most WatchOperation streams open at once. Default: 256.
  int max_operation_watchers = 256;
  /// Most open WatchApplication streams; more are answered RESOURCE_EXHAUSTED.
  /// Default: AcmServiceImpl::kDefaultMaxWatchers (1000).
  int max_watchers = AcmServiceImpl::kDefaultMaxWatchers;
  /// The hub's channels to managed clusters' ACMs (with its identity): when
  /// set on the hub, neighborhoods and assignments are pushed to each
  /// cluster's registered "acm" endpoint as they change (MemberPublisher).
  /// Null: clusters only pull them (their agents do on every heartbeat).
  PeerChannels* member_peers = nullptr;
  /// Deadline of one push to a managed cluster. Default: 2 s.
  absl::Duration push_timeout = absl::Seconds(2);
  /// Longest time between two passes of the publisher. Default: 1 s.
  absl::Duration publish_interval = absl::Seconds(1);
  /// The signed policy bundle the admission chain follows
  /// (docs/policies.md); an empty `bundle` path keeps the built-in defaults.
  PolicyBundleFiles policy_bundle;
  /// How often the bundle's files are read again. Default: 5 s.
  absl::Duration policy_reload_interval = absl::Seconds(5);
  /// The external decision endpoint (an OPA-compatible webhook) the
  /// admission chain asks before its built-in policies; none by default.
  ExternalPolicy policy_webhook;
};

/// Every column family an AcmService's store needs: the applications', the
/// local copies', "clusters", "operations" and kMissionFamily.
std::vector<std::string> AcmServiceColumnFamilies();

/// An AcmService owning its store (on `kv`, which must hold
/// AcmServiceColumnFamilies()), its manager,
/// its cluster registry, its neighborhood manager and its scheduler port (SWM
/// over gRPC when options.swm_channel is set, else the in-memory one, with
/// which applications stay PENDING). `kv` and `clock` must outlive it.
std::unique_ptr<AcmServiceImpl> NewAcmService(KvStore& kv, Clock& clock,
                                              AcmServiceOptions options = {});

}  // namespace codeco::acm
