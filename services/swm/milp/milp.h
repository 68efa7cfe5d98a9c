#pragma once
// The exact reference: the placement problem of swm_core as a mixed-integer
// linear program, solved with CBC. Meant for small instances (tens of
// workloads, a few dozen nodes) to measure the heuristic's optimality gap.
//
// Model. x[w][n] = 1 if workload w runs on node n (only nodes passing the hard
// location and origin-latency constraints get a variable). Each workload is
// placed at most once; each node's CPU, memory and GPU hold. For a channel
// c = (a -> b) and nodes (na, nb): if the pair has no single-hop path or its
// latency exceeds c's bound, x[a][na] + x[b][nb] <= 1; otherwise
// z[c][na][nb] >= x[a][na] + x[b][nb] - 1 (z in [0,1]) carries the pair's
// latency into the objective and its bandwidth onto link (A, B) of the
// channel's class, whose free capacity holds.
// Objective (maximised): kPlacedWeight per placed workload minus the sum of
// channel latencies in milliseconds — the same PlacementObjective used to
// score the heuristic.

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "swm/core/model.h"
#include "swm/core/solve.h"

namespace codeco::swm::milp {

/// Weight of one placed workload in the objective; dominates any latency sum.
inline constexpr double kPlacedWeight = 1e6;

/// kPlacedWeight * placed workloads - sum of channel latencies (ms) over
/// channels with both ends placed. Higher is better.
double PlacementObjective(const Application& app, const Federation& federation,
                          const std::map<std::string, Placement>& placements);

/// Options of the exact solve.
struct MilpOptions {
  double time_limit_seconds = 60;  ///< CBC time limit. Default 60 s.
};

/// The exact solve's answer.
struct MilpResult {
  std::map<std::string, Placement> placements;  ///< The optimal placement.
  double objective = 0;                         ///< Its PlacementObjective.
  bool optimal = false;                         ///< CBC proved optimality.
  int variables = 0;                            ///< Columns in the model.
  int constraints = 0;                          ///< Rows in the model.
};

/// Solves `app` on `federation` exactly. INVALID_ARGUMENT for a bad app.
absl::StatusOr<MilpResult> SolveExact(const Application& app, const Federation& federation,
                                      const MilpOptions& options = {});

}  // namespace codeco::swm::milp
