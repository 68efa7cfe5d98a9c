#pragma once
// CBC as the L2 strategy of small clusters: an L2Solver that assigns a
// batch of pending workloads to one cluster's nodes exactly, with a MILP,
// when the cluster has at most `max_nodes` schedulable nodes and the batch at
// most `max_workloads` workloads; larger solves (and any CBC failure) go to
// the heuristic (InProcessL2Solver).
//
// Model. The profile's filters decide, per workload, which nodes it may use
// (location, origin latency, channels to workloads placed elsewhere, room);
// x[w][n] = 1 if workload w takes node n. Each workload at most once; each
// node's CPU, memory and GPU hold jointly; the bandwidth of channels to
// workloads in other clusters holds per link; for a channel between two
// workloads of the batch and two nodes of the cluster, a pair whose latency
// (0 on one node, the cluster's intra latency across nodes) exceeds the
// bound is excluded (x_a + x_b <= 1), and z >= x_a + x_b - 1 brings the
// latency of the others into the objective. Objective (maximised): 1e6 per
// placed workload minus channel latency in ms. The answer is then run
// through the profile's Reserve and Permit plugins in queue order, as the
// heuristic's would be; a workload they refuse is reported unfit. The exact
// solve places what fits here and never defers to an unvisited cluster.

#include <memory>

#include "absl/time/time.h"
#include "swm/core/plugins.h"
#include "swm/core/solve.h"

namespace codeco::swm::milp {

/// When the exact L2 is used.
struct ExactL2Options {
  /// Largest cluster (schedulable nodes) solved exactly; 0 turns it off. Default 8.
  int max_nodes = 8;
  /// Largest batch of pending workloads solved exactly. Default 8 (tight
  /// batches of 12 on 8 nodes take CBC seconds: see docs/benchmarks.md).
  int max_workloads = 8;
  /// CBC's time limit per solve; without a solution by then, the heuristic
  /// answers (CBC checks it between steps, so a solve may overrun it).
  /// Default 500 ms.
  absl::Duration time_limit = absl::Milliseconds(500);
};

/// Exact L2 for small clusters and batches, the heuristic otherwise. Not
/// thread-safe (one solve at a time, like InProcessL2Solver).
class ExactL2Solver final : public L2Solver {
 public:
  /// `registry` builds the profiles' frameworks; `recommendations` may be
  /// null. Both must outlive the solver.
  ExactL2Solver(const PluginRegistry& registry, RecommendationSource* recommendations,
                ExactL2Options options = {});
  absl::StatusOr<L2Result> Solve(const L2Request& request) override;
  /// Solves counted so far that CBC answered (the others went to the heuristic).
  int exact_solves() const { return exact_solves_; }

 private:
  absl::StatusOr<std::optional<L2Result>> SolveExactly(const L2Request& request);
  const PluginRegistry& registry_;
  RecommendationSource* recommendations_;
  ExactL2Options options_;
  InProcessL2Solver heuristic_;
  std::map<std::string, std::unique_ptr<Framework>> frameworks_;
  int exact_solves_ = 0;
};

}  // namespace codeco::swm::milp
