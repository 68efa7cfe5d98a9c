#include "swm/core/channel_status.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "google/protobuf/util/time_util.h"
#include "swm/core/placement_service.h"

namespace codeco::swm {
namespace {

namespace pb = codeco::swm::v1;
namespace acm = codeco::acm::v1;
namespace netma = codeco::netma::v1;
using google::protobuf::util::TimeUtil;

absl::Time FromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixNanos(TimeUtil::TimestampToNanoseconds(t));
}

std::string Ms(int64_t ns) { return absl::StrCat(ns / 1'000'000, ".", (ns / 100'000) % 10, " ms"); }

}  // namespace

netma::VirtualLink VirtualLinkFor(const VirtualLinkSpec& spec) {
  netma::VirtualLink link;
  link.set_application(spec.application);
  link.set_channel(spec.channel);
  link.set_source_cluster(spec.source_cluster);
  link.set_target_cluster(spec.target_cluster);
  link.set_target_endpoint(spec.target_endpoint);
  link.set_neighborhood_id(spec.neighborhood_id);
  link.set_service_class(spec.service_class == ServiceClass::kAssured
                             ? codeco::common::v1::SERVICE_CLASS_ASSURED
                             : codeco::common::v1::SERVICE_CLASS_BESTEFFORT);
  link.set_min_bandwidth_bps(spec.min_bandwidth_bps);
  link.set_max_delay_ns(spec.max_delay_ns);
  link.set_provisioning(netma::VIRTUAL_LINK_PROVISIONING_PRE_CREATED);
  link.set_managed_by(kSwmManagedBy);
  return link;
}

ChannelTracker::ChannelTracker(ChannelTrackerOptions options) : options_(options) {}

bool ChannelTracker::SetPlan(const pb::AssignmentPlan& plan, absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(plan.application());
  if (it == entries_.end()) {
    // Nothing tracked, and nothing to track.
    if (IsRemoval(plan) || (plan.channels().empty() && plan.targets().empty())) return false;
    it = entries_.emplace(plan.application(), Entry{}).first;
  }
  Entry& entry = it->second;
  if (IsRemoval(plan)) {
    // The channels of the placement it removes become DELETED.
    if (entry.removed) return false;
    entry.removed = true;
  } else {
    entry.removed = false;
    // Only what the status is computed from: a tracked application costs its
    // channels and where its workloads run, not its whole plan.
    entry.plan.Clear();
    entry.plan.set_id(plan.id());
    entry.plan.set_application(plan.application());
    entry.plan.set_spec_revision(plan.spec_revision());
    entry.plan.set_plan_revision(plan.plan_revision());
    entry.plan.set_phase(plan.phase());
    if (plan.has_error()) entry.plan.mutable_error()->set_message(plan.error().message());
    *entry.plan.mutable_channels() = plan.channels();
    for (const pb::WorkloadTarget& t : plan.targets()) {
      pb::WorkloadTarget* kept = entry.plan.add_targets();
      kept->set_workload(t.workload());
      kept->set_service(t.service());
      kept->set_cluster(t.cluster());
      kept->set_node(t.node());
      kept->set_pod(t.pod());
    }
  }
  bool changed = RecomputeLocked(entry, now);
  ForgetRemovedLocked();
  return changed;
}

int ChannelTracker::ApplyLinks(const std::vector<netma::VirtualLink>& links, absl::Time now) {
  absl::MutexLock lock(&mu_);
  links_.clear();
  for (const netma::VirtualLink& l : links) links_[l.id()] = l;
  int changed = 0;
  for (auto& [name, entry] : entries_) {
    if (entry.removed) continue;
    bool linked = false;
    for (const pb::ChannelPath& c : entry.plan.channels()) {
      linked = linked || !c.virtual_link_id().empty();
    }
    if (linked && RecomputeLocked(entry, now)) ++changed;
  }
  return changed;
}

bool ChannelTracker::RecomputeLocked(Entry& entry, absl::Time now) {
  pb::ApplicationChannels next;
  next.set_application(entry.plan.application());
  next.set_plan_revision(entry.removed ? 0 : entry.plan.plan_revision());
  next.set_spec_revision(entry.plan.spec_revision());
  if (!entry.removed && entry.plan.phase() == pb::PLAN_PHASE_DONE) {
    for (const pb::WorkloadTarget& t : entry.plan.targets()) {
      acm::ServicePlacement* p = next.add_placements();
      p->set_service(t.service());
      p->set_cluster(t.cluster());
      p->set_node(t.node());
      p->set_pod(t.pod());
      p->set_workload(t.workload());
    }
  }
  std::vector<pb::ChannelTrigger> raised;
  std::map<std::string, acm::ChannelPhase> before;
  std::map<std::string, const acm::ChannelStatus*> reported;
  for (const acm::ChannelStatus& c : entry.state.channels()) {
    before[c.name()] = c.phase();
    reported[c.name()] = &c;
  }
  const pb::PlanPhase phase = entry.plan.phase();
  for (const pb::ChannelPath& path : entry.plan.channels()) {
    acm::ChannelStatus* c = next.add_channels();
    c->set_name(path.channel());
    c->set_virtual_link_id(path.virtual_link_id());
    c->set_delay_ns(path.expected_latency_ns());
    const bool inter = path.clusters_size() == 2;
    if (entry.removed) {
      c->set_phase(acm::CHANNEL_PHASE_DELETED);
      c->set_message(inter ? "application removed; virtual link deleted"
                           : "application removed");
      continue;
    }
    if (phase == pb::PLAN_PHASE_FAILED || phase == pb::PLAN_PHASE_ROLLED_BACK) {
      c->set_phase(acm::CHANNEL_PHASE_REJECTED);
      c->set_message(absl::StrCat("plan ", entry.plan.id(), " ",
                                  phase == pb::PLAN_PHASE_FAILED ? "failed" : "was rolled back",
                                  entry.plan.error().message().empty() ? "" : ": ",
                                  entry.plan.error().message()));
      continue;
    }
    if (phase != pb::PLAN_PHASE_DONE) {
      c->set_phase(inter ? acm::CHANNEL_PHASE_IMPLEMENTING : acm::CHANNEL_PHASE_REVIEWED);
      c->set_message(absl::StrCat("plan ", entry.plan.id(), " is being carried out"));
      continue;
    }
    if (!path.satisfied()) {
      c->set_phase(acm::CHANNEL_PHASE_REJECTED);
      c->set_message(absl::StrCat("expected latency ", Ms(path.expected_latency_ns()),
                                  " exceeds the bound ", Ms(path.max_delay_ns())));
      continue;
    }
    if (!inter) {
      c->set_phase(acm::CHANNEL_PHASE_RUNNING);
      c->set_message(absl::StrCat("inside cluster ",
                                  path.clusters_size() > 0 ? path.clusters(0) : "?",
                                  "; no virtual link needed"));
      continue;
    }
    if (path.virtual_link_id().empty()) {
      c->set_phase(acm::CHANNEL_PHASE_REVIEWED);
      c->set_message("no virtual link was set up (no network manager configured)");
      continue;
    }
    auto link = links_.find(path.virtual_link_id());
    if (link == links_.end()) {
      c->set_phase(acm::CHANNEL_PHASE_IMPLEMENTING);
      c->set_message(absl::StrCat("virtual link ", path.virtual_link_id(),
                                  " not reported by NetMA yet"));
      continue;
    }
    const netma::VirtualLink& l = link->second;
    if (l.measured_delay_ns() > 0) c->set_delay_ns(l.measured_delay_ns());
    switch (l.phase()) {
      case netma::VIRTUAL_LINK_PHASE_PENDING:
        c->set_phase(acm::CHANNEL_PHASE_IMPLEMENTING);
        c->set_message("virtual link compiled; rules are installed on first use");
        break;
      case netma::VIRTUAL_LINK_PHASE_ESTABLISHING:
        c->set_phase(acm::CHANNEL_PHASE_IMPLEMENTED);
        c->set_message("virtual link set up; waiting for a measurement of the path");
        break;
      case netma::VIRTUAL_LINK_PHASE_UP:
        c->set_phase(acm::CHANNEL_PHASE_RUNNING);
        c->set_message(absl::StrCat("within bounds: delay ", Ms(l.measured_delay_ns()),
                                    path.max_delay_ns() > 0
                                        ? absl::StrCat(" of ", Ms(path.max_delay_ns()))
                                        : std::string()));
        break;
      case netma::VIRTUAL_LINK_PHASE_DEGRADED:
      case netma::VIRTUAL_LINK_PHASE_FAILED: {
        const absl::Time since = l.has_out_of_bounds_since()
                                     ? FromProto(l.out_of_bounds_since())
                                     : absl::InfinitePast();
        const absl::Time measured = l.has_measure_time() ? FromProto(l.measure_time()) : now;
        const bool failed = l.phase() == netma::VIRTUAL_LINK_PHASE_FAILED;
        if (!failed && measured - since < options_.grace) {
          c->set_phase(acm::CHANNEL_PHASE_RUNNING);
          c->set_message(absl::StrCat(l.message(), " (out of bounds for ",
                                      absl::FormatDuration(measured - since), ", grace ",
                                      absl::FormatDuration(options_.grace), ")"));
          break;
        }
        c->set_phase(acm::CHANNEL_PHASE_OOQOS);
        c->set_message(absl::StrCat(
            "out of QoS: ", l.message(),
            failed ? "" : absl::StrCat(" for ", absl::FormatDuration(measured - since)),
            "; adaptation triggered"));
        if (before.count(path.channel()) && before[path.channel()] == acm::CHANNEL_PHASE_OOQOS) {
          break;  // raised before
        }
        pb::ChannelTrigger t;
        t.set_application(entry.plan.application());
        t.set_channel(path.channel());
        t.set_reason(pb::MIGRATION_REASON_LINK_FAILURE);
        t.set_virtual_link_id(l.id());
        for (const std::string& cluster : path.clusters()) t.add_clusters(cluster);
        t.set_message(l.message());
        t.set_measured_delay_ns(l.measured_delay_ns());
        t.set_max_delay_ns(path.max_delay_ns());
        if (l.has_out_of_bounds_since()) *t.mutable_out_of_bounds_since() = l.out_of_bounds_since();
        *t.mutable_raise_time() = TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(now));
        raised.push_back(std::move(t));
        break;
      }
      case netma::VIRTUAL_LINK_PHASE_DELETING:
        c->set_phase(acm::CHANNEL_PHASE_DELETED);
        c->set_message("virtual link being deleted");
        break;
      default:
        c->set_phase(acm::CHANNEL_PHASE_IMPLEMENTING);
        c->set_message(absl::StrCat("virtual link ", l.id(), " in an unknown phase"));
        break;
    }
  }
  // A channel whose phase holds and whose delay moved little keeps what was
  // reported: watchers (ACM, each change a new revision) hear of phase
  // changes and real drifts, not of every probe.
  for (acm::ChannelStatus& c : *next.mutable_channels()) {
    auto it = reported.find(c.name());
    if (it == reported.end() || it->second->phase() != c.phase() ||
        it->second->virtual_link_id() != c.virtual_link_id()) {
      continue;
    }
    const int64_t was = it->second->delay_ns();
    const int64_t drift = std::max<int64_t>(was / 5, 1'000'000);
    if (std::abs(c.delay_ns() - was) <= drift) c = *it->second;
  }
  next.set_sequence(entry.state.sequence());
  if (google::protobuf::util::MessageDifferencer::Equals(next, entry.state)) return false;
  next.set_sequence(++sequence_);
  for (pb::ChannelTrigger& t : raised) {
    entry.triggers.push_back(std::move(t));
    entry.trigger_sequences.push_back(sequence_);
    ++triggers_raised_;
  }
  while (entry.triggers.size() > options_.max_triggers) {
    entry.triggers.erase(entry.triggers.begin());
    entry.trigger_sequences.erase(entry.trigger_sequences.begin());
  }
  entry.state = std::move(next);
  return true;
}

void ChannelTracker::ForgetRemovedLocked() {
  size_t removed = 0;
  for (const auto& [name, entry] : entries_) removed += entry.removed ? 1 : 0;
  while (removed > options_.max_removed) {
    auto oldest = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (!it->second.removed) continue;
      if (oldest == entries_.end() ||
          it->second.state.sequence() < oldest->second.state.sequence()) {
        oldest = it;
      }
    }
    entries_.erase(oldest);
    --removed;
  }
}

std::vector<OutOfQosChannel> ChannelTracker::OutOfQos() const {
  absl::MutexLock lock(&mu_);
  std::vector<OutOfQosChannel> out;
  for (const auto& [name, entry] : entries_) {
    if (entry.removed) continue;
    for (const acm::ChannelStatus& c : entry.state.channels()) {
      if (c.phase() != acm::CHANNEL_PHASE_OOQOS) continue;
      out.push_back({.application = name,
                     .channel = c.name(),
                     .plan_revision = entry.state.plan_revision(),
                     .why = c.message()});
    }
  }
  return out;
}

std::vector<pb::ApplicationChannels> ChannelTracker::ChangesAfter(
    int64_t sequence, const std::string& application) const {
  absl::MutexLock lock(&mu_);
  std::vector<pb::ApplicationChannels> out;
  auto add = [&](const Entry& entry) {
    if (entry.state.sequence() <= sequence) return;
    pb::ApplicationChannels a = entry.state;
    for (size_t i = 0; i < entry.triggers.size(); ++i) {
      if (entry.trigger_sequences[i] > sequence) *a.add_triggers() = entry.triggers[i];
    }
    out.push_back(std::move(a));
  };
  if (!application.empty()) {
    auto it = entries_.find(application);
    if (it != entries_.end()) add(it->second);
    return out;
  }
  for (const auto& [name, entry] : entries_) add(entry);
  return out;
}

int64_t ChannelTracker::sequence() const {
  absl::MutexLock lock(&mu_);
  return sequence_;
}

std::map<acm::ChannelPhase, int> ChannelTracker::CountByPhase() const {
  absl::MutexLock lock(&mu_);
  std::map<acm::ChannelPhase, int> out;
  for (const auto& [name, entry] : entries_) {
    if (entry.removed) continue;
    for (const acm::ChannelStatus& c : entry.state.channels()) ++out[c.phase()];
  }
  return out;
}

int64_t ChannelTracker::triggers_raised() const {
  absl::MutexLock lock(&mu_);
  return triggers_raised_;
}

bool ChannelTracker::FollowsLinks() const {
  absl::MutexLock lock(&mu_);
  for (const auto& [name, entry] : entries_) {
    if (entry.removed) continue;
    for (const pb::ChannelPath& c : entry.plan.channels()) {
      if (!c.virtual_link_id().empty()) return true;
    }
  }
  return false;
}

}  // namespace codeco::swm
