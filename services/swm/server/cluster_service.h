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
//
// Hub away: a thread probes the hub every `local_interval` (and any call
// the hub makes counts as an answer) and runs the LocalRescheduler
// (local_rescheduler.h): once the hub has been silent for hub_away_after,
// the pods of a node not ready for failure_grace move to other nodes of
// this cluster through the ledger, each stored as a LocalDecision that
// ListLocalDecisions shows and the hub settles with SettleLocalDecisions.

#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "codeco/common/clock.h"
#include "codeco/common/executor.h"
#include "codeco/common/kv_store.h"
#include "codeco/swm/v1/swm_service.grpc.pb.h"
#include "swm/core/local_rescheduler.h"
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
  /// How often the hub is probed and the local pass runs (zero: never; the
  /// cluster then does nothing on its own while the hub is away).
  /// Default: zero.
  absl::Duration local_interval = absl::ZeroDuration();
  /// When the hub counts as away and how long a node must fail first.
  LocalReschedulerOptions local;
  /// Asks the hub whether it answers, by `deadline` (true: it did). Null:
  /// only the hub's calls count as answers.
  std::function<bool(absl::Time deadline)> probe_hub;
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
  grpc::ServerUnaryReactor* ListLocalDecisions(
      grpc::CallbackServerContext* context,
      const codeco::swm::v1::ListLocalDecisionsRequest* request,
      codeco::swm::v1::ListLocalDecisionsResponse* response) override;
  grpc::ServerUnaryReactor* SettleLocalDecisions(
      grpc::CallbackServerContext* context,
      const codeco::swm::v1::SettleLocalDecisionsRequest* request,
      codeco::swm::v1::SettleLocalDecisionsResponse* response) override;

  /// ListLocalDecisions itself, synchronously (INVALID_ARGUMENT naming the
  /// field for another cluster, a bad page size or token).
  absl::StatusOr<codeco::swm::v1::ListLocalDecisionsResponse> ListDecisions(
      const codeco::swm::v1::ListLocalDecisionsRequest& request);
  /// One local pass, synchronously (what the thread runs every
  /// local_interval after probing the hub): finishes the moves a failure
  /// interrupted and carries out what the LocalRescheduler decides. Answers
  /// the decisions it made now.
  absl::StatusOr<std::vector<codeco::swm::v1::LocalDecision>> LocalPass();
  /// Records that the hub answered now.
  void HubSeen();

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
  // Probes the hub and runs LocalPass every local_interval until stopped.
  void LocalLoop();
  // The error of a request for cluster `asked`, which this swm does not serve.
  std::string NotServed(const std::string& asked) const;

  const Clock& clock_;
  std::unique_ptr<LmsPodRuntime> lms_;
  ClusterServiceOptions options_;
  ClusterReservations reservations_;
  ClusterViewFeed view_feed_;
  std::atomic<int> view_watchers_{0};
  PluginRegistry registry_;
  absl::Mutex l2_mu_;  // the in-process solver caches frameworks
  std::unique_ptr<L2Solver> own_l2_ ABSL_GUARDED_BY(l2_mu_);
  absl::Mutex local_mu_;
  LocalRescheduler local_ ABSL_GUARDED_BY(local_mu_);
  // Pods reported held ("<pod> <reason>"), so each is logged once.
  std::set<std::string> held_logged_ ABSL_GUARDED_BY(local_mu_);
  BoundedExecutor executor_;
  absl::Notification stop_local_;
  std::thread local_thread_;
};

}  // namespace codeco::swm
