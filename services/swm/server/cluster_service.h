#pragma once
// codeco.swm.v1.SwmService for the MC role on the callback API: the L2
// solver and executor of this process's own cluster.
//
// SolveCluster places the hub's pending workloads on this cluster's nodes as
// its LMS reports them, minus what live reservations hold (remote_cluster.h
// says how the request maps onto the core's L2 solve). Reserve, Commit and
// Release run the cluster's side of the two-phase commit over the durable
// ledger of cluster_reservations.h: a reservation is in RocksDB (WAL) before
// Reserve answers, Commit creates its pods on the LMS. Work runs on a bounded
// executor, never on gRPC's threads; a full queue answers RESOURCE_EXHAUSTED.
// WatchClusterView streams the view as it changes (cluster_view_feed.h);
// Reserve, Commit and Release answer the ViewVersion from which the view
// counts them, so the hub knows when its watched copy does.

#include <atomic>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "codeco/common/clock.h"
#include "codeco/common/executor.h"
#include "codeco/common/kv_store.h"
#include "codeco/swm/v1/swm_service.grpc.pb.h"
#include "swm/core/plugins.h"
#include "swm/core/solve.h"
#include "swm/lms/lms_pod_runtime.h"
#include "swm/milp/exact_l2.h"
#include "swm/server/cluster_reservations.h"
#include "swm/server/cluster_view_feed.h"

namespace codeco::swm {

/// Settings of the MC role.
struct ClusterServiceOptions {
  /// This cluster's name (SolveCluster refuses requests for another). Required.
  std::string cluster;
  /// Node-to-node latency assumed inside every cluster, ns. Default: 100 us.
  int64_t intra_cluster_latency_ns = 100'000;
  /// Ledger settings (default lease, longest lease, tombstones).
  ClusterReservationsOptions reservations;
  /// Threads serving the RPCs. Default: 4.
  int threads = 4;
  /// Calls allowed to wait for a thread. Default: 256.
  size_t max_queued = 256;
  /// When SolveCluster solves exactly with CBC (small clusters and batches;
  /// max_nodes 0 = never). Default: never.
  milp::ExactL2Options exact_l2{.max_nodes = 0};
  /// L2 solver for SolveCluster, replacing the above; null = the service's
  /// own (exact or heuristic). Not owned; must outlive the service.
  L2Solver* l2 = nullptr;
  /// How the streamed view is kept current.
  ClusterViewFeedOptions view_feed;
  /// Most WatchClusterView streams open at once (more: RESOURCE_EXHAUSTED).
  /// Default: 16.
  int max_view_watchers = 16;
  /// This cluster's PDLC advice for the service's own L2 (node scores).
  /// Null: none. Default: null.
  std::shared_ptr<RecommendationSource> recommendations;
};

/// The MC's SwmService. Thread-safe.
class SwmClusterServiceImpl final : public codeco::swm::v1::SwmService::CallbackService {
 public:
  /// Keeps reservations in `store` ("reservations" family), reads time from
  /// `clock` (both must outlive it) and drives the cluster's LMS through `lms`.
  SwmClusterServiceImpl(KvStore& store, const Clock& clock, std::unique_ptr<LmsPodRuntime> lms,
                        ClusterServiceOptions options);
  /// Finishes the queued calls.
  ~SwmClusterServiceImpl() override;

  grpc::ServerUnaryReactor* SolveCluster(grpc::CallbackServerContext* context,
                                         const codeco::swm::v1::SolveClusterRequest* request,
                                         codeco::swm::v1::SolveClusterResponse* response) override;
  grpc::ServerUnaryReactor* Reserve(grpc::CallbackServerContext* context,
                                    const codeco::swm::v1::ReserveRequest* request,
                                    codeco::swm::v1::ReserveResponse* response) override;
  grpc::ServerUnaryReactor* Commit(grpc::CallbackServerContext* context,
                                   const codeco::swm::v1::CommitRequest* request,
                                   codeco::swm::v1::CommitResponse* response) override;
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* context,
                                    const codeco::swm::v1::ReleaseRequest* request,
                                    codeco::swm::v1::ReleaseResponse* response) override;
  grpc::ServerUnaryReactor* GetClusterView(
      grpc::CallbackServerContext* context, const codeco::swm::v1::GetClusterViewRequest* request,
      codeco::swm::v1::GetClusterViewResponse* response) override;
  grpc::ServerWriteReactor<codeco::swm::v1::WatchClusterViewResponse>* WatchClusterView(
      grpc::CallbackServerContext* context,
      const codeco::swm::v1::WatchClusterViewRequest* request) override;

  /// SolveCluster itself, synchronously.
  absl::StatusOr<codeco::swm::v1::SolveClusterResponse> Solve(
      const codeco::swm::v1::SolveClusterRequest& request);
  /// GetClusterView itself, synchronously: the LMS's nodes with what the
  /// ledger holds added, by name, one page after `request.page_token`
  /// (INVALID_ARGUMENT naming the field for another cluster or a bad page).
  absl::StatusOr<codeco::swm::v1::GetClusterViewResponse> View(
      const codeco::swm::v1::GetClusterViewRequest& request);
  /// Whether this swm runs an L2 the hub does not (the exact L2, or
  /// options.l2): its views say so, and the hub then asks it with
  /// SolveCluster instead of solving on the view.
  bool SolvesOwnL2() const { return options_.l2 != nullptr || options_.exact_l2.max_nodes > 0; }
  /// The ledger (for tests and inspection).
  ClusterReservations& reservations() { return reservations_; }

 private:
  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* context,
                                std::function<absl::Status()> work);

  const Clock& clock_;
  std::unique_ptr<LmsPodRuntime> lms_;
  ClusterServiceOptions options_;
  ClusterReservations reservations_;
  ClusterViewFeed view_feed_;
  std::atomic<int> view_watchers_{0};
  PluginRegistry registry_;
  absl::Mutex l2_mu_;  // the in-process solver caches frameworks
  std::unique_ptr<L2Solver> own_l2_ ABSL_GUARDED_BY(l2_mu_);
  BoundedExecutor executor_;
};

}  // namespace codeco::swm
