#include "swm/core/local_rescheduler.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"

namespace codeco::swm {

absl::Status ValidateLocalReschedulerOptions(const LocalReschedulerOptions& options) {
  if (options.hub_away_after <= absl::ZeroDuration()) {
    return InvalidFieldError("hub_away_after", "must be positive");
  }
  if (options.failure_grace <= absl::ZeroDuration()) {
    return InvalidFieldError("failure_grace", "must be positive");
  }
  return absl::OkStatus();
}

LocalRescheduler::LocalRescheduler(const Clock& clock, LocalReschedulerOptions options)
    : clock_(clock), options_(options), hub_last_seen_(clock.Now()) {}

void LocalRescheduler::HubSeen() { hub_last_seen_ = std::max(hub_last_seen_, clock_.Now()); }

bool LocalRescheduler::HubAway() const {
  return clock_.Now() - hub_last_seen_ >= options_.hub_away_after;
}

namespace {

// The share of `node`'s CPU left free once `requests` land on it (0..1; a
// node without CPU capacity scores by memory).
double FreeShareAfter(const Node& node, const Resources& requests) {
  const Resources free = node.Free() - requests;
  if (node.capacity.cpu_millis > 0) {
    return static_cast<double>(free.cpu_millis) / static_cast<double>(node.capacity.cpu_millis);
  }
  if (node.capacity.memory_bytes > 0) {
    return static_cast<double>(free.memory_bytes) / static_cast<double>(node.capacity.memory_bytes);
  }
  return 0;
}

}  // namespace

std::vector<LocalMove> LocalRescheduler::Decide(const std::vector<Node>& nodes,
                                                const std::vector<LocalPod>& pods) {
  const absl::Time now = clock_.Now();
  // Track readiness on every pass, hub present or not.
  std::map<std::string, Node> ready;
  std::set<std::string> listed;
  for (const Node& n : nodes) {
    listed.insert(n.name);
    if (n.schedulable) {
      ready[n.name] = n;
      not_ready_since_.erase(n.name);
    } else {
      not_ready_since_.emplace(n.name, now);
    }
  }
  for (const LocalPod& p : pods) {
    if (!listed.count(p.node)) not_ready_since_.emplace(p.node, now);  // gone
  }
  for (auto it = not_ready_since_.begin(); it != not_ready_since_.end();) {
    // A node neither listed nor holding a pod is forgotten.
    const bool holds = std::any_of(pods.begin(), pods.end(),
                                   [&](const LocalPod& p) { return p.node == it->first; });
    it = listed.count(it->first) || holds ? std::next(it) : not_ready_since_.erase(it);
  }

  std::vector<LocalMove> moves;
  if (!HubAway()) return moves;
  std::vector<const LocalPod*> stranded;
  for (const LocalPod& p : pods) {
    auto down = not_ready_since_.find(p.node);
    if (down != not_ready_since_.end() && now - down->second >= options_.failure_grace) {
      stranded.push_back(&p);
    }
  }
  // Largest first, so that big pods find room before small ones fill it.
  std::sort(stranded.begin(), stranded.end(), [](const LocalPod* a, const LocalPod* b) {
    return std::tie(b->requests.cpu_millis, b->requests.memory_bytes, a->reservation, a->pod) <
           std::tie(a->requests.cpu_millis, a->requests.memory_bytes, b->reservation, b->pod);
  });
  for (const LocalPod* p : stranded) {
    const absl::Time since = not_ready_since_.at(p->node);
    const std::string failed = absl::StrCat(
        "node ", p->node, listed.count(p->node) ? " not ready" : " gone", " for ",
        absl::FormatDuration(absl::Trunc(now - since, absl::Seconds(1))),
        " while the hub is away (last seen ",
        absl::FormatDuration(absl::Trunc(now - hub_last_seen_, absl::Seconds(1))), " ago)");
    LocalMove move{.pod = *p};
    if (p->stateful) {
      move.reason = absl::StrCat(failed, "; held: it keeps state and its backups are recorded ",
                                 "at the hub, so it waits for its node or the hub");
      moves.push_back(std::move(move));
      continue;
    }
    Node* best = nullptr;
    double best_share = 0;
    for (auto& [name, node] : ready) {
      if (!node.Free().Fits(p->requests)) continue;
      const double share = FreeShareAfter(node, p->requests);
      if (best == nullptr || share > best_share) {
        best = &node;
        best_share = share;
      }
    }
    if (best == nullptr) {
      move.reason =
          absl::StrCat(failed, "; held: no ready node of the cluster has room for ",
                       p->requests.cpu_millis, "m CPU and ", p->requests.memory_bytes, " B memory");
    } else {
      move.to_node = best->name;
      move.reason = failed;
      best->allocated += p->requests;
    }
    moves.push_back(std::move(move));
  }
  return moves;
}

}  // namespace codeco::swm
