#pragma once
// The two-layer federated solve. The L1 coordinator (hub) orders a
// neighborhood's clusters and visits them one at a time through the L2Solver
// port; each L2 solve places workloads on its cluster's nodes, seeing that
// cluster in detail and the unvisited ones only as aggregates. The hub
// re-validates every partial result (capacity, channels) before merging it,
// so a wrong or stale L2 answer can never produce an infeasible plan.

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "swm/core/framework.h"
#include "swm/core/plugins.h"

namespace codeco::swm {

/// What one cluster's L2 solve gets.
struct L2Request {
  const Application* app = nullptr;         ///< The application (in process).
  std::string profile;                      ///< Profile name to solve with.
  Cluster cluster;                          ///< The solving cluster, in detail.
  std::vector<ClusterAggregate> others;     ///< Peer and unvisited clusters, as aggregates.
  std::vector<std::string> unvisited;       ///< Names among `others` not visited yet.
  std::vector<Link> links;                  ///< Links among these clusters, free bandwidth
                                            ///< already net of the plan's use.
  std::map<std::string, Placement> placed;  ///< Workloads placed so far.
  std::vector<std::string> pending;         ///< Workloads to consider, in queue order.
  bool allow_defer = true;  ///< Leave a workload for an unvisited cluster that scores higher.
  bool relax_soft = false;  ///< Reconsideration round: skip soft plugins.
};

/// What one L2 solve answers.
struct L2Result {
  std::map<std::string, std::string> node_of;  ///< workload -> node in the cluster.
  std::map<std::string, std::string> unfit;    ///< workload -> why it does not fit here.
  std::vector<std::string> deferred;           ///< Left for a better unvisited cluster.
};

/// The L2 port: in process here, over gRPC to the MC's swm later.
class L2Solver {
 public:
  virtual ~L2Solver() = default;
  /// Solves `request`; an error means the cluster could not answer.
  virtual absl::StatusOr<L2Result> Solve(const L2Request& request) = 0;
};

/// Solves L2 with a Framework per profile, in this process.
class InProcessL2Solver final : public L2Solver {
 public:
  /// `recommendations` may be null (no PDLC).
  InProcessL2Solver(const PluginRegistry& registry, RecommendationSource* recommendations);
  absl::StatusOr<L2Result> Solve(const L2Request& request) override;

 private:
  absl::StatusOr<const Framework*> FrameworkFor(const std::string& profile);
  const PluginRegistry& registry_;
  RecommendationSource* recommendations_;
  std::map<std::string, std::unique_ptr<Framework>> frameworks_;
};

/// Options of the coordinator.
struct CoordinatorOptions {
  /// How many unvisited clusters (next in visiting order) an L2 solve sees as
  /// aggregates. Default 8.
  int lookahead = 8;
  /// Link latencies within the same bucket count as equally fast when
  /// ordering clusters, so the policy score decides. Default 1 ms.
  int64_t latency_bucket_ns = 1'000'000;
  /// Run the reconsideration round (soft plugins off, no deferral). Default true.
  bool reconsider = true;
  /// Solves to try when workloads are left: each retry puts the unplaced
  /// ones first in the queue; the best outcome is kept. Default 3.
  int max_attempts = 3;
  /// Let an L2 solve leave a workload for an unvisited cluster whose
  /// aggregate scores higher. Default true.
  bool defer = true;
  /// Rounds of 1-opt improvement after the solve: each workload may move to
  /// a node (in its cluster or a peer's) that passes every filter and lowers
  /// the latency of its channels. 0 turns it off. Default 2.
  int polish_rounds = 2;
};

/// A channel as the plan realises it.
struct ChannelResult {
  std::string channel;              ///< Channel name.
  std::vector<std::string> path;    ///< Clusters, one (intra) or two (single hop).
  int64_t expected_latency_ns = 0;  ///< Expected one-way latency.
  int64_t max_delay_ns = 0;         ///< Its bound (0 = none).
  int64_t min_bandwidth_bps = 0;    ///< Bandwidth it needs.
  bool satisfied = false;           ///< Both bounds hold.
  // Set by BuildPlan and the executor, not by the solver:
  ServiceClass service_class = ServiceClass::kBestEffort;  ///< The channel's class.
  std::string target_endpoint;  ///< "<pod>.<cluster>:<port>" the channel delivers to.
  std::string virtual_link_id;  ///< NetMA's virtual link (inter-cluster, once committed).
};

/// The outcome of a placement solve.
struct PlacementResult {
  std::map<std::string, Placement> placements;  ///< workload -> cluster/node.
  std::map<std::string, std::string> unplaced;  ///< workload -> reason.
  std::vector<ChannelResult> channels;          ///< Channels with both ends placed.
  std::vector<std::string> visit_order;         ///< Clusters in the order visited.
  int l2_calls = 0;                             ///< L2 solves made.
};

/// The L1 coordinator.
class Coordinator {
 public:
  /// `l2` solves each cluster; `registry` builds the L1 frameworks;
  /// `recommendations` may be null.
  Coordinator(L2Solver& l2, const PluginRegistry& registry, RecommendationSource* recommendations,
              CoordinatorOptions options = {});
  /// Places `app` over the `neighborhood` clusters of `federation` (all of
  /// them when empty). INVALID_ARGUMENT for a bad app, profile or cluster
  /// name; unplaceable workloads are reported in the result, not as errors.
  ///
  /// `pinned` (workload -> where it runs now) places only some workloads, the
  /// others staying where they run (a migration moves one workload with the
  /// current placement as the incumbent):
  /// - A pinned workload is not placed again: it is in the result's
  ///   `placements` at its pinned place, never in `unplaced`, and the polish
  ///   never moves it. It is skipped by the queue and by every retry; it
  ///   counts as placed when clusters are scored for the visiting order.
  /// - Its requests are not added to any node: `federation` already counts it
  ///   (it runs, so its node's `allocated` includes it).
  /// - It is bound before anything is placed, so each channel between a placed
  ///   workload and a pinned one is checked (latency bound, single hop, free
  ///   bandwidth) and its bandwidth is counted for the placed one as usual.
  ///   A channel between two pinned workloads adds nothing: the caller's
  ///   links already hold its bandwidth.
  /// - Its cluster need not be in `neighborhood` (only the placed workloads
  ///   visit the neighborhood's clusters); L2 solves still see it as context
  ///   (aggregate and links) like any cluster with placed workloads. The
  ///   polish too keeps placed workloads in the neighborhood, even when a
  ///   pinned peer runs outside it.
  /// - The result's `channels` list every channel whose ends are both placed
  ///   or pinned. When every workload is pinned, the result just lists them.
  /// Each entry must name a workload of `app` and a node of a cluster of
  /// `federation`: otherwise INVALID_ARGUMENT naming `pinned["<workload>"]`.
  /// ApplyPlacement and VerifyPlacement count every entry of `placements`:
  /// a pinned one would be counted a second time there.
  absl::StatusOr<PlacementResult> Place(const Application& app, const Federation& federation,
                                        const std::vector<std::string>& neighborhood,
                                        const std::map<std::string, Placement>& pinned = {});

 private:
  absl::StatusOr<const Framework*> FrameworkFor(const std::string& profile);
  /// 1-opt improvement of `placed` (pinned workloads included, never moved):
  /// a workload moves only within `clusters` (the neighborhood).
  absl::Status Polish(const Application& app, const Federation& federation, const Framework& fw,
                      const std::set<std::string>& clusters,
                      const std::map<std::string, Placement>& pinned,
                      std::map<std::string, Placement>& placed) const;
  L2Solver& l2_;
  const PluginRegistry& registry_;
  RecommendationSource* recommendations_;
  CoordinatorOptions options_;
  std::map<std::string, std::unique_ptr<Framework>> frameworks_;
};

/// Applies `result` to `federation`: adds each placed workload's requests to
/// its node and each inter-cluster channel's bandwidth to its link.
void ApplyPlacement(const Application& app, const PlacementResult& result, Federation& federation);

/// Checks that `result` is feasible on `federation` (before ApplyPlacement):
/// every node's capacity and every channel's latency, single-hop path and
/// bandwidth. FAILED_PRECONDITION describing the first violation.
absl::Status VerifyPlacement(const Application& app, const Federation& federation,
                             const PlacementResult& result);

}  // namespace codeco::swm
