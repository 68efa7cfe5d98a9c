#include "pdlc/core/auction.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"

namespace codeco::pdlc {
namespace {

// The probability `forecast`'s `metric` reaches `threshold_percent` at
// kBidHorizon once `added_percent` more is used; without a forecast, whether
// the current use (`used_fraction`, unknown below 0) plus the addition does.
double BreachProbability(const NodeForecast* forecast, UsageMetric metric, double used_fraction,
                         double added_percent, double threshold_percent) {
  if (forecast != nullptr) {
    return ExceedanceProbability(forecast->forecast, metric, kBidHorizon,
                                 threshold_percent - added_percent);
  }
  if (used_fraction < 0) return 0;  // unknown: the score already says so in its notes
  return 100 * used_fraction + added_percent >= threshold_percent ? 1 : 0;
}

}  // namespace

absl::StatusOr<BidDecision> DecideBid(Advisor& advisor, const AuctionWorkload& workload,
                                      int64_t now_ms) {
  if (workload.profile == ScoringProfile::kCustom) {
    return absl::InvalidArgumentError(
        "workload.performance_profile: bids use a built-in profile (latency, greenness, "
        "resilience or cost), not CUSTOM");
  }
  if (!(workload.cpu_millicores >= 0) || !(workload.memory_bytes >= 0)) {
    return absl::InvalidArgumentError("workload: cpu_millicores and memory_bytes must not be negative");
  }
  RecommendationQuery query;
  query.profile = workload.profile;
  query.requests = {.cpu_millicores = workload.cpu_millicores,
                    .memory_bytes = workload.memory_bytes};
  query.horizon = kBidHorizon;
  ASSIGN_OR_RETURN(RecommendationResult scores, advisor.Recommend(query, now_ms));
  std::map<std::string, NodeContext> nodes;
  for (NodeContext& n : advisor.Nodes()) nodes.emplace(n.node, std::move(n));
  std::map<std::string, NodeForecast> forecasts;
  for (NodeForecast& f : scores.forecasts) forecasts.emplace(f.node, std::move(f));
  const double threshold = advisor.ThresholdFor(workload.profile);

  BidDecision best;
  best.reason = scores.node_scores.empty() ? "the cluster reports no nodes"
                                           : "no node has room for the workload";
  for (const NodeScore& s : scores.node_scores) {
    auto node = nodes.find(s.node);
    if (node == nodes.end() || s.score <= 0) continue;
    const NodeContext& n = node->second;
    auto f = forecasts.find(s.node);
    const NodeForecast* forecast = f == forecasts.end() ? nullptr : &f->second;
    // A node without room for the workload already scored 0 (ScoreNodes).
    // What it offers is what it has free at the bid's horizon (now, without
    // a forecast; all of it when its usage is unknown).
    const double cpu_used = forecast != nullptr ? forecast->forecast.cpu_percent[kBidHorizon] / 100
                                                : std::max(0.0, n.cpu_used_fraction);
    const double mem_used = forecast != nullptr ? forecast->forecast.mem_percent[kBidHorizon] / 100
                                                : std::max(0.0, n.memory_used_fraction);
    const double free_cpu = std::max(0.0, n.cpu_capacity_millicores * (1 - cpu_used));
    const double free_mem = std::max(0.0, n.memory_capacity_bytes * (1 - mem_used));
    const double cpu_added = n.cpu_capacity_millicores > 0
                                 ? 100 * workload.cpu_millicores / n.cpu_capacity_millicores
                                 : 0;
    const double mem_added = n.memory_capacity_bytes > 0
                                 ? 100 * workload.memory_bytes / n.memory_capacity_bytes
                                 : 0;
    const double p_cpu =
        BreachProbability(forecast, UsageMetric::kCpu, n.cpu_used_fraction, cpu_added, threshold);
    const double p_mem = BreachProbability(forecast, UsageMetric::kMemory, n.memory_used_fraction,
                                           mem_added, threshold);
    const double breach = 1 - (1 - p_cpu) * (1 - p_mem);
    // A node more likely than not to breach with the workload is no offer.
    const double value = breach < kMaxBidBreachProbability ? s.score * (1 - breach) : 0;
    if (best.node.empty() || value > best.value || (value == best.value && s.node < best.node)) {
      best.value = value;
      best.node = s.node;
      best.stability = s.stability;
      best.breach_probability = breach;
      best.offered_cpu_millicores = free_cpu;
      best.offered_memory_bytes = free_mem;
      best.reason = value > 0 ? ""
                              : absl::StrCat("node ", s.node, " would reach the ", threshold,
                                             " % breach threshold with the workload");
    }
  }
  if (best.node.empty()) best.value = 0;
  return best;
}

std::string RankBids(std::vector<RankedBid>& bids) {
  std::sort(bids.begin(), bids.end(), [](const RankedBid& a, const RankedBid& b) {
    if (a.value != b.value) return a.value > b.value;
    if (a.stability != b.stability) return a.stability > b.stability;
    return a.cluster < b.cluster;
  });
  return !bids.empty() && bids.front().value > 0 ? bids.front().cluster : "";
}

}  // namespace codeco::pdlc
