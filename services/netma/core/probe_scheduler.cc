#include "netma/core/probe_scheduler.h"

#include <algorithm>

#include "codeco/common/status.h"

namespace codeco::netma {

absl::Status ValidateProbeSchedulerOptions(const ProbeSchedulerOptions& options) {
  FieldErrors errors;
  if (options.interval <= absl::ZeroDuration()) errors.Add("interval", "must be positive");
  if (options.bulk_every < 0) errors.Add("bulk_every", "must not be negative");
  if (options.max_bulk_bytes <= 0) errors.Add("max_bulk_bytes", "must be positive");
  if (options.bulk_bytes < 0 || options.bulk_bytes > options.max_bulk_bytes) {
    errors.Add("bulk_bytes", "must be between 0 and max_bulk_bytes");
  }
  if (options.timeout <= absl::ZeroDuration()) errors.Add("timeout", "must be positive");
  return errors.ToStatus();
}

void ProbeScheduler::SetPeers(const std::vector<Peer>& peers, absl::Time now) {
  std::map<std::string, Entry> next;
  std::vector<const Peer*> fresh;
  for (const Peer& peer : peers) {
    auto it = entries_.find(peer.cluster);
    if (it != entries_.end()) {
      Entry kept = it->second;
      kept.peer = peer;
      next[peer.cluster] = kept;
    } else {
      fresh.push_back(&peer);
    }
  }
  std::sort(fresh.begin(), fresh.end(),
            [](const Peer* a, const Peer* b) { return a->cluster < b->cluster; });
  for (size_t i = 0; i < fresh.size(); ++i) {
    // Spread new peers evenly over one interval: peer i starts at now + i * interval / n.
    absl::Duration offset =
        options_.interval * static_cast<double>(i) / static_cast<double>(fresh.size());
    next[fresh[i]->cluster] = Entry{*fresh[i], now + offset, 0};
  }
  entries_ = std::move(next);
}

std::vector<ProbeTask> ProbeScheduler::TakeDue(absl::Time now) {
  std::vector<Entry*> due;
  for (auto& [cluster, entry] : entries_) {
    if (entry.due <= now) due.push_back(&entry);
  }
  std::sort(due.begin(), due.end(), [](const Entry* a, const Entry* b) {
    return a->due != b->due ? a->due < b->due : a->peer.cluster < b->peer.cluster;
  });
  std::vector<ProbeTask> tasks;
  for (Entry* entry : due) {
    ProbeTask task;
    task.peer = entry->peer;
    task.timeout = options_.timeout;
    // The first probe of a peer carries a bulk sample so throughput is known early.
    if (options_.bulk_every > 0 && entry->probes % options_.bulk_every == 0) {
      task.bulk_bytes = std::min(options_.bulk_bytes, options_.max_bulk_bytes);
    }
    ++entry->probes;
    entry->due += options_.interval;
    if (entry->due <= now) {
      // Fell behind (e.g. a long stall): skip missed slots instead of bursting.
      int64_t missed = (now - entry->due) / options_.interval + 1;
      entry->due += options_.interval * missed;
    }
    tasks.push_back(std::move(task));
  }
  return tasks;
}

absl::Time ProbeScheduler::NextDue() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [cluster, entry] : entries_) next = std::min(next, entry.due);
  return next;
}

std::vector<Peer> ProbeScheduler::peers() const {
  std::vector<Peer> out;
  for (const auto& [cluster, entry] : entries_) out.push_back(entry.peer);
  return out;
}

}  // namespace codeco::netma
