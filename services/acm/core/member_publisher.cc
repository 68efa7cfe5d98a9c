#include "acm/core/member_publisher.h"

#include <algorithm>
#include <vector>

#include "codeco/common/logging.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/status.h"
#include "acm/core/local_copies.h"

namespace codeco::acm {
namespace {

// An assignment as compared with the last one pushed: its issue time aside.
std::string Content(v1::ClusterAssignment assignment) {
  assignment.clear_issue_time();
  return assignment.SerializeAsString();
}

}  // namespace

MemberPublisher::MemberPublisher(const ApplicationManager& manager,
                                 NeighborhoodProvider& neighborhoods,
                                 const ClusterRegistry& clusters, MemberPushPort& push,
                                 const Clock& clock, MemberPublisherOptions options)
    : manager_(manager),
      neighborhoods_(neighborhoods),
      clusters_(clusters),
      push_(push),
      clock_(clock),
      options_(options) {
  absl::StatusOr<int64_t> current = manager_.CurrentRevision();
  // What happened before the publisher started, the agents pull.
  after_ = current.ok() ? *current : 0;
}

absl::StatusOr<PublishStats> MemberPublisher::Step() {
  PublishStats stats;
  absl::StatusOr<std::vector<v1::WatchApplicationResponse>> changes =
      manager_.ReadChanges("", after_, std::max<size_t>(1, options_.changes_per_step));
  if (absl::IsOutOfRange(changes.status())) {
    ASSIGN_OR_RETURN(after_, manager_.CurrentRevision());
    stats.fell_behind = true;
    return stats;
  }
  RETURN_IF_ERROR(changes.status());
  stats.changes = static_cast<int>(changes->size());
  for (const v1::WatchApplicationResponse& change : *changes) {
    after_ = std::max(after_, change.application().metadata().revision());
    Publish(change.application(), change.type() == common::v1::WATCH_EVENT_TYPE_DELETED, stats);
  }
  return stats;
}

void MemberPublisher::Publish(const v1::Application& app, bool deleted, PublishStats& stats) {
  const std::string& name = app.metadata().name();
  const bool gone = deleted || app.status().phase() == v1::APPLICATION_PHASE_DELETING;

  // Assignments: each cluster with pods of the application gets its part;
  // each cluster that had some and has none now gets "run nothing".
  std::map<std::string, std::string>& pushed = assigned_[name];
  std::set<std::string> now;
  if (!gone) {
    std::set<std::string> clusters;
    for (const auto& p : app.status().placements()) clusters.insert(p.cluster());
    for (const std::string& cluster : clusters) {
      std::vector<v1::ClusterAssignment> parts =
          AssignmentsFor(cluster, {app}, ToProtoTimestamp(clock_.Now()));
      if (parts.empty()) continue;
      now.insert(cluster);
      std::string content = Content(parts.front());
      auto it = pushed.find(cluster);
      if (it != pushed.end() && it->second == content) continue;
      v1::PushAssignmentRequest request;
      *request.mutable_assignment() = std::move(parts.front());
      if (SendAssignment(cluster, request, stats)) {
        pushed[cluster] = std::move(content);
      } else {
        pushed.erase(cluster);  // pushed again with the next change, else pulled
      }
    }
  }
  for (auto it = pushed.begin(); it != pushed.end();) {
    if (now.count(it->first)) {
      ++it;
      continue;
    }
    v1::PushAssignmentRequest request;
    v1::ClusterAssignment& empty = *request.mutable_assignment();
    empty.set_application(name);
    empty.set_cluster(it->first);
    empty.set_spec_revision(app.status().observed_spec_revision());
    empty.set_plan_revision(app.status().plan_revision());
    empty.set_neighborhood_id(app.status().neighborhood_id());
    *empty.mutable_issue_time() = ToProtoTimestamp(clock_.Now());
    SendAssignment(it->first, request, stats);
    it = pushed.erase(it);
  }
  if (pushed.empty()) assigned_.erase(name);

  // Neighborhood: its members get each new revision; members that left it,
  // and all of them once the application is gone, get its deletion.
  std::optional<v1::Neighborhood> neighborhood;
  if (!deleted) {
    absl::StatusOr<std::optional<v1::Neighborhood>> found = neighborhoods_.Find(name);
    if (found.ok()) {
      neighborhood = *std::move(found);
    } else {
      log::Warn("publisher: neighborhood not read",
                {{"application", name}, {"error", std::string(found.status().message())}});
      return;
    }
  }
  PushedNeighborhood& before = neighborhood_of_[name];
  std::set<std::string> members;
  if (neighborhood.has_value()) {
    for (const auto& m : neighborhood->members()) members.insert(m.cluster());
  }
  auto remove_from = [&](const std::string& cluster) {
    v1::PushNeighborhoodRequest request;
    request.mutable_neighborhood()->set_id(before.id);
    request.mutable_neighborhood()->set_application(name);
    request.set_deleted(true);
    SendNeighborhood(cluster, request, stats);
  };
  if (!before.id.empty()) {
    const bool same = neighborhood.has_value() && neighborhood->id() == before.id;
    for (const std::string& cluster : before.members) {
      if (!same || !members.count(cluster)) remove_from(cluster);
    }
  }
  if (!neighborhood.has_value()) {
    neighborhood_of_.erase(name);
    return;
  }
  if (neighborhood->id() == before.id && neighborhood->revision() <= before.revision &&
      members == before.members) {
    return;
  }
  PushedNeighborhood after{neighborhood->id(), neighborhood->revision(), {}};
  v1::PushNeighborhoodRequest request;
  *request.mutable_neighborhood() = *neighborhood;
  for (const std::string& cluster : members) {
    // A member that missed it is not retried here: its agent pulls it.
    SendNeighborhood(cluster, request, stats);
    after.members.insert(cluster);
  }
  before = std::move(after);
}

std::string MemberPublisher::EndpointOf(const std::string& cluster) const {
  v1::GetClusterRequest request;
  request.set_name(cluster);
  absl::StatusOr<v1::GetClusterResponse> got = clusters_.Get(request);
  if (!got.ok()) return "";
  const v1::Cluster& c = got->cluster();
  if (c.health() == v1::CLUSTER_HEALTH_UNREACHABLE) return "";
  auto it = c.endpoints().find(kAcmEndpoint);
  return it == c.endpoints().end() ? "" : it->second;
}

bool MemberPublisher::SendAssignment(const std::string& cluster,
                                     const v1::PushAssignmentRequest& request,
                                     PublishStats& stats) {
  const std::string endpoint = EndpointOf(cluster);
  if (endpoint.empty()) {
    ++stats.skipped;
    return false;
  }
  absl::Status sent = push_.PushAssignment(cluster, endpoint, request);
  if (!sent.ok()) {
    ++stats.failed;
    log::Warn("publisher: assignment not pushed; the cluster's agent pulls it",
              {{"cluster", cluster},
               {"application", request.assignment().application()},
               {"error", std::string(sent.message())}});
    return false;
  }
  ++stats.pushed;
  return true;
}

bool MemberPublisher::SendNeighborhood(const std::string& cluster,
                                       const v1::PushNeighborhoodRequest& request,
                                       PublishStats& stats) {
  const std::string endpoint = EndpointOf(cluster);
  if (endpoint.empty()) {
    ++stats.skipped;
    return false;
  }
  absl::Status sent = push_.PushNeighborhood(cluster, endpoint, request);
  if (!sent.ok()) {
    ++stats.failed;
    log::Warn("publisher: neighborhood not pushed; the cluster's agent pulls it",
              {{"cluster", cluster},
               {"neighborhood", request.neighborhood().id()},
               {"error", std::string(sent.message())}});
    return false;
  }
  ++stats.pushed;
  return true;
}

}  // namespace codeco::acm
