#pragma once
// The two-layer path between the hub's swm and each managed cluster's swm:
// the core's L2Solver and ClusterExecutor ports over SwmService's MC RPCs
// (SolveCluster, Reserve/Commit/Release), and the translation of an L2 solve
// to and from SolveClusterRequest/Response used by both sides.
//
// How the core's L2 request travels in SolveClusterRequest:
//   - workloads: the pending ones, in queue order;
//   - channels: every channel with an end among them, one per workload pair
//     (from_service / to_service carry the workload names: the hub has
//     already expanded service channels per replica);
//   - placed: every workload placed so far, with its cluster and node;
//   - unvisited: aggregates of the other clusters the solve needs (peers
//     hosting placed workloads, origins, and the next unvisited clusters),
//     each with the direct link from the solving cluster (taken as the
//     latency both ways) — plus one entry for the solving cluster itself,
//     which carries its labels (the MC knows its nodes, not its labels).
//     Clusters hosting none of `placed` are the ones not visited yet;
//   - intents: the application's hard constraints (the same on every workload);
//   - relax_soft_constraints: the reconsideration round (no deferral then).
// SolveClusterResponse: assignments (workload -> node), unplaced with reasons;
// a workload left for a better unvisited cluster is unplaced with a reason
// starting with kDeferredReason.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "codeco/swm/v1/swm_service.grpc.pb.h"
#include "grpcpp/channel.h"
#include "swm/core/execution.h"
#include "swm/core/solve.h"

namespace codeco::swm {

/// Reason prefix of a workload an MC leaves for a better unvisited cluster.
inline constexpr char kDeferredReason[] = "deferred: a cluster not visited yet scores higher";

/// The SolveClusterRequest for core request `request` (see the file comment).
codeco::swm::v1::SolveClusterRequest ToSolveClusterRequest(const L2Request& request,
                                                           const std::string& plan_id);

/// The core L2 solve an MC runs for `request`, with `self` (its own nodes,
/// reservations counted) as the solving cluster and `intra_latency_ns` as
/// every cluster's internal latency. INVALID_ARGUMENT naming the field for
/// bad input.
struct McSolve {
  Application app;    ///< Pending and placed workloads with their channels.
  L2Request request;  ///< The solve; request.app points at `app`.
};
/// Builds the McSolve (held by pointer: the request points into it).
absl::StatusOr<std::unique_ptr<McSolve>> FromSolveClusterRequest(
    const codeco::swm::v1::SolveClusterRequest& request, Cluster self, int64_t intra_latency_ns);

/// The answer an MC gives for `result` of `solve`.
codeco::swm::v1::SolveClusterResponse ToSolveClusterResponse(const McSolve& solve,
                                                             const L2Result& result);

/// The core result of an MC's answer.
L2Result FromSolveClusterResponse(const codeco::swm::v1::SolveClusterResponse& response);

/// The GetClusterView form of a core node.
codeco::swm::v1::ClusterNode ToClusterNode(const Node& node);
/// The core node of a GetClusterView entry.
Node FromClusterNode(const codeco::swm::v1::ClusterNode& node);

/// A cluster's well-known labels from its nodes' codeco.io/region,
/// /country, /tier and /provider labels (the first node carrying each), the
/// rule ACM's cluster agent registers them by.
ClusterLabels LabelsFromNodes(const std::vector<Node>& nodes);

/// A cluster's view as its MC swm gave it (GetClusterView or WatchClusterView).
struct McView {
  std::vector<Node> nodes;     ///< Every node, holds counted.
  bool solves_own_l2 = false;  ///< The swm asks to solve its L2 itself (SolveCluster).
};

/// Every node of `cluster` as its MC swm (behind `channel`) sees it, page by
/// page through GetClusterView; each call ends by `deadline` at the latest
/// and after `timeout`. Errors name the cluster.
absl::StatusOr<McView> ReadClusterView(const std::shared_ptr<grpc::Channel>& channel,
                                       const std::string& cluster, absl::Duration timeout,
                                       absl::Time deadline);

/// L2 over the MC swm of each cluster that has one, in process for the others.
class RemoteL2Solver final : public L2Solver {
 public:
  /// `endpoints` maps a cluster to the channel of its swm; `local` solves
  /// the clusters without one and must outlive this. Calls end after `timeout`.
  RemoteL2Solver(std::map<std::string, std::shared_ptr<grpc::Channel>> endpoints, L2Solver& local,
                 absl::Duration timeout);
  absl::StatusOr<L2Result> Solve(const L2Request& request) override;

 private:
  std::map<std::string, std::unique_ptr<codeco::swm::v1::SwmService::Stub>> stubs_;
  L2Solver& local_;
  absl::Duration timeout_;
};

/// The pod to create for each pod name of a plan (PodTemplate's).
using PodTemplates = std::map<std::string, codeco::lms::v1::Pod>;

/// A cluster's side of the two-phase commit, run by its MC swm over gRPC.
/// Reservation ids must be ReservationId()'s "<application>/<revision>/<cluster>".
/// Every ReserveRequest item carries its pod's template (ReservedItem.pod);
/// the MC stores it with the reservation and creates the pod from it.
class RemoteClusterExecutor final : public ClusterExecutor {
 public:
  /// Where a successful Reserve, Commit or Release reports the view
  /// version the MC answered (MemberViews::Saw).
  using ViewVersionSink = std::function<void(const codeco::swm::v1::ViewVersion&)>;
  /// Calls the swm behind `channel`; every call ends after `timeout`.
  /// `templates` holds the pod of every item Reserve will be given (none
  /// needed for an executor that only releases); `on_version` (may be
  /// empty) hears each answered view version.
  RemoteClusterExecutor(std::shared_ptr<grpc::Channel> channel, absl::Duration timeout,
                        PodTemplates templates = {}, ViewVersionSink on_version = nullptr);
  /// FAILED_PRECONDITION naming the pod when an item has no template.
  absl::Status Reserve(const std::string& reservation_id, const std::vector<ReservationItem>& items,
                       absl::Duration lease) override;
  absl::Status Commit(const std::string& reservation_id) override;
  absl::Status Release(const std::string& reservation_id) override;
  /// Release, answering the MC's record: state RELEASED with deleted_pods
  /// (the pods this or an earlier release deleted), or nullopt when the MC
  /// knows no reservation `reservation_id`. With `pods` non-empty only those
  /// pods of the reservation go (ReleaseRequest.pods): the record stays in
  /// its state with the other items, and is RELEASED once none is left.
  absl::StatusOr<std::optional<codeco::swm::v1::Reservation>> ReleaseReporting(
      const std::string& reservation_id, const std::string& reason,
      const std::vector<std::string>& pods = {});

 private:
  std::unique_ptr<codeco::swm::v1::SwmService::Stub> stub_;
  absl::Duration timeout_;
  PodTemplates templates_;
  ViewVersionSink on_version_;
};

}  // namespace codeco::swm
