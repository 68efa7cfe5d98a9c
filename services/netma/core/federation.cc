#include "netma/core/federation.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"
#include "google/protobuf/util/time_util.h"
#include "netma/core/monitor.h"

namespace codeco::netma {

using codeco::netma::v1::LinkMetrics;
using codeco::netma::v1::PeerSummary;
using google::protobuf::util::TimeUtil;

namespace {

absl::Time FromProtoTime(const google::protobuf::Timestamp& t) {
  return absl::FromUnixNanos(TimeUtil::TimestampToNanoseconds(t));
}

bool ValidTimestamp(const google::protobuf::Timestamp& t) {
  return t.seconds() >= TimeUtil::kTimestampMinSeconds &&
         t.seconds() <= TimeUtil::kTimestampMaxSeconds && t.nanos() >= 0 && t.nanos() <= 999999999;
}

}  // namespace

Federation::Federation(std::string local_cluster, const FederationOptions& options,
                       const Clock& clock)
    : local_cluster_(std::move(local_cluster)), options_(options), clock_(clock) {}

absl::Status Federation::SetNeighborhood(const std::string& id,
                                         const std::vector<std::string>& members) {
  FieldErrors errors;
  if (id.empty()) errors.Add("neighborhood.id", "required");
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].empty()) errors.Add(absl::StrCat("neighborhood.members[", i, "]"), "required");
  }
  RETURN_IF_ERROR(errors.ToStatus());
  std::set<std::string> set(members.begin(), members.end());
  auto& origins = entries_[id];
  for (auto it = origins.begin(); it != origins.end();) {
    it = set.count(it->first) ? std::next(it) : origins.erase(it);
  }
  neighborhoods_[id] = std::move(set);
  return absl::OkStatus();
}

void Federation::RemoveNeighborhood(const std::string& id) {
  neighborhoods_.erase(id);
  entries_.erase(id);
}

absl::StatusOr<std::set<std::string>> Federation::Members(const std::string& id) const {
  auto it = neighborhoods_.find(id);
  if (it == neighborhoods_.end()) return absl::NotFoundError(absl::StrCat("neighborhood ", id));
  return it->second;
}

std::vector<std::string> Federation::NeighborhoodIds() const {
  std::vector<std::string> ids;
  for (const auto& [id, members] : neighborhoods_) ids.push_back(id);
  return ids;
}

std::set<std::string> Federation::Peers() const {
  std::set<std::string> peers;
  for (const auto& [id, members] : neighborhoods_) {
    if (!members.count(local_cluster_)) continue;
    for (const std::string& m : members) {
      if (m != local_cluster_) peers.insert(m);
    }
  }
  return peers;
}

absl::StatusOr<PeerSummary> Federation::BuildSummary(const std::string& id,
                                                     const std::vector<LinkMetrics>& local_links) {
  ASSIGN_OR_RETURN(std::set<std::string> members, Members(id));
  if (!members.count(local_cluster_)) {
    return absl::FailedPreconditionError(
        absl::StrCat(local_cluster_, " is not a member of neighborhood ", id));
  }
  PeerSummary summary;
  summary.set_cluster(local_cluster_);
  summary.set_neighborhood_id(id);
  for (const LinkMetrics& link : local_links) {
    if (link.source_cluster() == local_cluster_ && members.count(link.target_cluster())) {
      *summary.add_links() = link;
    }
  }
  summary.set_revision(++revisions_[id]);
  *summary.mutable_generate_time() =
      TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(clock_.Now()));
  return summary;
}

absl::StatusOr<int> Federation::Merge(const std::string& sender, const PeerSummary& summary) {
  if (sender.empty() || summary.cluster() != sender) {
    return absl::PermissionDeniedError(absl::StrCat("summary.cluster: caller ", sender,
                                                    " may only send its own summary, not ",
                                                    summary.cluster(), "'s"));
  }
  auto nb = neighborhoods_.find(summary.neighborhood_id());
  if (nb == neighborhoods_.end() || !nb->second.count(sender)) {
    return absl::PermissionDeniedError(absl::StrCat("summary.neighborhood_id: ", sender,
                                                    " is not a member of neighborhood ",
                                                    summary.neighborhood_id()));
  }
  const std::set<std::string>& members = nb->second;
  FieldErrors errors;
  std::set<std::string> seen;
  for (int i = 0; i < summary.links_size(); ++i) {
    const LinkMetrics& l = summary.links(i);
    std::string path = absl::StrCat("summary.links[", i, "]");
    if (l.source_cluster() != sender) errors.Add(path + ".source_cluster", "must be the sender");
    if (!members.count(l.target_cluster()) || l.target_cluster() == sender) {
      errors.Add(path + ".target_cluster", "must be another member of the neighborhood");
    }
    if (l.link_id() != LinkId(l.source_cluster(), l.target_cluster())) {
      errors.Add(path + ".link_id", "must be <source_cluster>-><target_cluster>");
    } else if (!seen.insert(l.link_id()).second) {
      errors.Add(path + ".link_id", "duplicate");
    }
    if (l.rtt_ema_ns() < 0) errors.Add(path + ".rtt_ema_ns", "must not be negative");
    if (l.rtt_p50_ns() < 0) errors.Add(path + ".rtt_p50_ns", "must not be negative");
    if (l.rtt_p99_ns() < 0) errors.Add(path + ".rtt_p99_ns", "must not be negative");
    if (l.throughput_bps() < 0) errors.Add(path + ".throughput_bps", "must not be negative");
    if (!(l.loss_ratio() >= 0 && l.loss_ratio() <= 1)) {
      errors.Add(path + ".loss_ratio", "must be in [0, 1]");
    }
    if (!std::isfinite(l.energy_joules_per_byte()) || l.energy_joules_per_byte() < 0) {
      errors.Add(path + ".energy_joules_per_byte", "must be a non-negative number");
    }
    if (!std::isfinite(l.link_energy_joules()) || l.link_energy_joules() < 0) {
      errors.Add(path + ".link_energy_joules", "must be a non-negative number");
    }
    if (!l.has_measure_time() || !ValidTimestamp(l.measure_time())) {
      errors.Add(path + ".measure_time", "required, a valid timestamp");
    } else if (FromProtoTime(l.measure_time()) > clock_.Now() + absl::Minutes(1)) {
      errors.Add(path + ".measure_time", "is in the future");
    }
  }
  RETURN_IF_ERROR(errors.ToStatus());

  int changed = 0;
  auto& links = entries_[summary.neighborhood_id()][sender];
  for (const LinkMetrics& l : summary.links()) {
    absl::Time measured = FromProtoTime(l.measure_time());
    auto it = links.find(l.link_id());
    if (it != links.end() && it->second.measured >= measured) continue;  // newest wins
    links[l.link_id()] = Entry{l, measured};
    ++changed;
  }
  return changed;
}

int Federation::Expire() {
  absl::Time now = clock_.Now();
  int dropped = 0;
  for (auto& [id, origins] : entries_) {
    for (auto& [origin, links] : origins) {
      for (auto it = links.begin(); it != links.end();) {
        if (now - it->second.measured > options_.expire_after) {
          it = links.erase(it);
          ++dropped;
        } else {
          ++it;
        }
      }
    }
  }
  return dropped;
}

std::vector<LinkMetrics> Federation::RemoteLinks(const std::string& id) const {
  absl::Time now = clock_.Now();
  std::map<std::string, const Entry*> newest;
  for (const auto& [nid, origins] : entries_) {
    if (!id.empty() && nid != id) continue;
    for (const auto& [origin, links] : origins) {
      for (const auto& [link_id, entry] : links) {
        if (now - entry.measured > options_.expire_after) continue;
        const Entry*& slot = newest[link_id];
        if (slot == nullptr || slot->measured < entry.measured) slot = &entry;
      }
    }
  }
  std::vector<LinkMetrics> out;
  for (const auto& [link_id, entry] : newest) {
    LinkMetrics m = entry->link;
    m.set_age_ns(absl::ToInt64Nanoseconds(now - entry->measured));
    m.set_stale(m.stale() || now - entry->measured > options_.stale_after);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace codeco::netma
