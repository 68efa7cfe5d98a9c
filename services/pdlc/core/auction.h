#pragma once
// The neighborhood auction's pure parts: how a cluster decides its bid for a
// workload from its own scores and forecasts, and how the auctioneer orders
// the bids and names the winner. Only the decision value (and what the
// cluster offers) leaves the cluster; the node behind it stays local.
//
// A bid looks 15 minutes ahead (kBidHorizon): a cluster whose best node is
// green now but forecast to fill up bids low, which is what the auction
// adds to SWM's view of current scores.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pdlc/core/advisor.h"

namespace codeco::pdlc {

/// The horizon bids look at: index 2 of kHorizonSteps, 15 minutes ahead.
inline constexpr size_t kBidHorizon = 2;

/// A node at least this likely to reach its breach threshold with the
/// workload added is no offer: it contributes a value of 0.
inline constexpr double kMaxBidBreachProbability = 0.5;

/// A workload an auction is for.
struct AuctionWorkload {
  /// Name, e.g. "shop/web".
  std::string name;
  /// CPU it requests, millicores.
  double cpu_millicores = 0;
  /// Memory it requests, bytes.
  double memory_bytes = 0;
  /// The profile its bids are scored by (a built-in one).
  ScoringProfile profile = ScoringProfile::kLatency;
};

/// A cluster's decision for one workload.
struct BidDecision {
  /// The decision value, 0-100: the best node's profile score with the
  /// workload's requests at kBidHorizon, times the probability that node
  /// stays below its breach threshold with the workload added (0 for a node
  /// at least kMaxBidBreachProbability likely to breach).
  double value = 0;
  /// Stability of the best node's score, 0-1.
  double stability = 1;
  /// The best node (stays in the cluster; not part of the bid sent).
  std::string node;
  /// Probability the best node reaches the threshold with the workload, 0-1.
  double breach_probability = 0;
  /// The best node's forecast free CPU, millicores.
  double offered_cpu_millicores = 0;
  /// The best node's forecast free memory, bytes.
  double offered_memory_bytes = 0;
  /// Why the value is 0, when it is.
  std::string reason;
};

/// Decides this cluster's bid for `workload` from `advisor`'s scores and
/// forecasts as of its last refresh. INVALID_ARGUMENT naming the field for
/// a custom profile or negative requests.
absl::StatusOr<BidDecision> DecideBid(Advisor& advisor, const AuctionWorkload& workload,
                                      int64_t now_ms);

/// A bid as the auctioneer weighs it.
struct RankedBid {
  /// The bidding cluster.
  std::string cluster;
  /// Its decision value, 0-100.
  double value = 0;
  /// Its stability, 0-1.
  double stability = 1;
};

/// Sorts `bids` highest value first (ties: the steadier, then by cluster
/// name) and returns the winner: the first bid's cluster when its value is
/// above 0, else "" (no cluster can take the workload).
std::string RankBids(std::vector<RankedBid>& bids);

}  // namespace codeco::pdlc
