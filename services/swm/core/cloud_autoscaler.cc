#include "swm/core/cloud_autoscaler.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"

namespace codeco::swm {
namespace {

// "1 node", "3 nodes".
std::string Count(size_t n, const char* noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
}

// ceil(a / b) for a >= 0, b > 0.
int64_t CeilDiv(int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; }

// A node's free room: its share of the flavor not allocated (never
// negative), as Node::Free counts it.
Resources FreeOf(const Resources& capacity, const Resources& allocated) {
  return Node{.capacity = capacity, .allocated = allocated}.Free();
}

}  // namespace

std::string CloudScalingPolicyName(CloudScalingPolicy policy) {
  return policy == CloudScalingPolicy::kMck8s ? "mck8s" : "codeco";
}

absl::StatusOr<CloudScalingPolicy> ParseCloudScalingPolicy(absl::string_view name,
                                                           absl::string_view field) {
  if (name == "mck8s") return CloudScalingPolicy::kMck8s;
  if (name == "codeco") return CloudScalingPolicy::kPacked;
  return InvalidFieldError(std::string(field),
                           absl::StrCat("unknown cloud scaling policy \"", name,
                                        "\" (one of mck8s, codeco)"));
}

absl::Status ValidateCloudAutoscalerOptions(const CloudAutoscalerOptions& o) {
  if (o.node_capacity.cpu_millis <= 0) {
    return InvalidFieldError("cloud.node_capacity.cpu", "must be positive");
  }
  if (o.node_capacity.memory_bytes <= 0) {
    return InvalidFieldError("cloud.node_capacity.memory", "must be positive");
  }
  if (o.max_nodes < 1) return InvalidFieldError("cloud.max_nodes", "must be at least 1");
  if (o.provisioning_delay < absl::ZeroDuration()) {
    return InvalidFieldError("cloud.provisioning_delay", "must not be negative");
  }
  if (o.node_boot_delay < absl::ZeroDuration()) {
    return InvalidFieldError("cloud.node_boot_delay", "must not be negative");
  }
  if (o.scale_down_delay < absl::ZeroDuration()) {
    return InvalidFieldError("cloud.scale_down_delay", "must not be negative");
  }
  if (o.deprovision_delay < absl::ZeroDuration()) {
    return InvalidFieldError("cloud.deprovision_delay", "must not be negative");
  }
  if (!(o.fixed_fill_limit > 0 && o.fixed_fill_limit <= 1)) {
    return InvalidFieldError("cloud.fixed_fill_limit", "must be in (0, 1]");
  }
  if (o.demand_window <= absl::ZeroDuration()) {
    return InvalidFieldError("cloud.demand_window", "must be positive");
  }
  return absl::OkStatus();
}

CloudAutoscaler::CloudAutoscaler(const Clock& clock, CloudAutoscalerOptions options)
    : clock_(clock), options_(std::move(options)) {}

int CloudAutoscaler::NodesForPending(const CloudObservation& observation, std::string& why) const {
  if (observation.pending.empty()) return 0;
  const Resources& flavor = options_.node_capacity;
  int too_large = 0;
  std::vector<Resources> pods;
  for (const Resources& r : observation.pending) {
    if (flavor.Fits(r)) {
      pods.push_back(r);
    } else {
      ++too_large;  // no node of the flavor can ever hold it
    }
  }
  int64_t nodes = 0;
  if (options_.policy == CloudScalingPolicy::kMck8s) {
    // The study's sizing: the total request over the node size, less the
    // room of the nodes already on their way.
    Resources total;
    for (const Resources& r : pods) total += r;
    Resources booting;
    for (const CloudNode& n : observation.nodes) {
      if (!n.ready) booting += FreeOf(flavor, n.allocated);
    }
    nodes = std::max(CeilDiv(total.cpu_millis - booting.cpu_millis, flavor.cpu_millis),
                     CeilDiv(total.memory_bytes - booting.memory_bytes, flavor.memory_bytes));
  } else {
    // First-fit decreasing into the room the cloud has (booting nodes
    // included), then into new nodes of the flavor.
    std::sort(pods.begin(), pods.end(), [](const Resources& a, const Resources& b) {
      return a.cpu_millis != b.cpu_millis ? a.cpu_millis > b.cpu_millis
                                          : a.memory_bytes > b.memory_bytes;
    });
    std::vector<Resources> bins;
    for (const CloudNode& n : observation.nodes) bins.push_back(FreeOf(flavor, n.allocated));
    const size_t existing = bins.size();
    for (const Resources& r : pods) {
      auto bin = std::find_if(bins.begin(), bins.end(),
                              [&](const Resources& free) { return free.Fits(r); });
      if (bin == bins.end()) {
        bins.push_back(flavor);
        bin = std::prev(bins.end());
      }
      *bin -= r;
    }
    nodes = static_cast<int64_t>(bins.size() - existing);
  }
  if (nodes > 0) {
    why = absl::StrCat(Count(observation.pending.size(), "pod"), " pending");
  }
  if (too_large > 0) {
    absl::StrAppend(&why, why.empty() ? "" : "; ", Count(too_large, "pending pod"),
                    too_large == 1 ? " is" : " are", " larger than a cloud node");
  }
  return static_cast<int>(nodes);
}

int64_t CloudAutoscaler::Headroom(const CloudObservation& observation) const {
  if (options_.policy != CloudScalingPolicy::kPacked || demand_.size() < 2) return 0;
  const auto& [first_at, first_demand] = demand_.front();
  const auto& [last_at, last_demand] = demand_.back();
  // Over the whole window even when less of it has been seen: a burst at
  // the start is not a rate.
  const double elapsed =
      absl::ToDoubleSeconds(std::max(last_at - first_at, options_.demand_window));
  if (last_demand <= first_demand) return 0;
  const double per_second = static_cast<double>(last_demand - first_demand) / elapsed;
  const auto expected =
      static_cast<int64_t>(per_second * absl::ToDoubleSeconds(observation.cluster_exists
                                                                   ? options_.node_boot_delay
                                                                   : options_.provisioning_delay));
  const auto usable = static_cast<int64_t>(
      static_cast<double>(observation.fixed_capacity.cpu_millis) * options_.fixed_fill_limit);
  const int64_t fixed_free =
      std::max<int64_t>(0, usable - observation.fixed_allocated.cpu_millis);
  return std::max<int64_t>(0, expected - fixed_free);
}

CloudScaling CloudAutoscaler::Decide(const CloudObservation& observation) {
  const absl::Time now = clock_.Now();
  const Resources& flavor = options_.node_capacity;
  CloudScaling out;

  // The demand the federation carries, for the growth rate; and the CPU
  // the cloud's nodes (booting ones included) have free.
  int64_t demand = observation.fixed_allocated.cpu_millis;
  int64_t cloud_free_now = 0;
  for (const CloudNode& n : observation.nodes) {
    demand += n.allocated.cpu_millis;
    cloud_free_now += FreeOf(flavor, n.allocated).cpu_millis;
  }
  for (const Resources& r : observation.pending) demand += r.cpu_millis;
  demand_.emplace_back(now, demand);
  while (demand_.size() > 2 && demand_[1].first <= now - options_.demand_window) {
    demand_.pop_front();
  }

  const int room =
      std::max(0, options_.max_nodes - static_cast<int>(observation.nodes.size()));
  std::string why;
  int add = NodesForPending(observation, why);
  const int64_t headroom = Headroom(observation);
  if (headroom > 0) {
    // What the cloud has free once the pending pods are in.
    int64_t cloud_free = cloud_free_now + static_cast<int64_t>(add) * flavor.cpu_millis;
    for (const Resources& r : observation.pending) cloud_free -= r.cpu_millis;
    const int more = static_cast<int>(CeilDiv(headroom - cloud_free, flavor.cpu_millis));
    if (more > 0) {
      add += more;
      absl::StrAppend(&why, why.empty() ? "" : "; ", "demand grows ",
                      headroom / 1000, " CPUs past the fixed clusters within a node's boot");
    }
  }
  add = std::min(add, room);
  if (add > 0) {
    out.create_cluster = !observation.cluster_exists;
    out.add_nodes = add;
    out.reason = why;
    idle_since_.reset();
    return out;
  }
  if (!why.empty()) {
    // Pending pods the cloud will not take: say why.
    out.reason = why;
    if (room == 0) {
      absl::StrAppend(&out.reason, "; the cloud is at its ", options_.max_nodes, " nodes");
    }
  }
  if (!observation.cluster_exists) {
    empty_since_.clear();
    idle_since_.reset();
    return out;
  }

  // Shrinking: empty nodes past their delay, the cluster past its own.
  std::set<std::string> present;
  bool any_pods = false;
  for (const CloudNode& n : observation.nodes) {
    present.insert(n.name);
    if (n.pods > 0 || !n.ready) {
      empty_since_.erase(n.name);
      any_pods = any_pods || n.pods > 0;
    } else {
      empty_since_.emplace(n.name, now);
    }
  }
  for (auto it = empty_since_.begin(); it != empty_since_.end();) {
    it = present.count(it->first) ? std::next(it) : empty_since_.erase(it);
  }
  const bool idle = !any_pods && observation.pending.empty() && headroom == 0;
  if (!idle) {
    idle_since_.reset();
  } else if (!idle_since_.has_value()) {
    idle_since_ = now;
  }
  if (idle && now - *idle_since_ >= options_.deprovision_delay) {
    out.delete_cluster = true;
    out.reason = absl::StrCat("idle for ", absl::FormatDuration(now - *idle_since_));
    empty_since_.clear();
    idle_since_.reset();
    return out;
  }
  // Free CPU the cloud must keep: the headroom.
  int64_t cloud_free = cloud_free_now;
  size_t remaining = observation.nodes.size();
  for (const auto& [name, since] : empty_since_) {
    if (remaining <= 1) break;  // the last node goes with the cluster
    if (now - since < options_.scale_down_delay) continue;
    if (cloud_free - flavor.cpu_millis < headroom) break;
    out.remove_nodes.push_back(name);
    cloud_free -= flavor.cpu_millis;
    --remaining;
  }
  if (!out.remove_nodes.empty()) {
    out.reason = absl::StrCat(Count(out.remove_nodes.size(), "node"), " empty for ",
                              absl::FormatDuration(options_.scale_down_delay));
    for (const std::string& name : out.remove_nodes) empty_since_.erase(name);
  }
  return out;
}

}  // namespace codeco::swm
