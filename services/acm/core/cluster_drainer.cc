#include "acm/core/cluster_drainer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/status.h"

namespace codeco::acm {

absl::StatusOr<v1::UnregisterClusterResponse> ClusterDrainer::Unregister(
    const v1::UnregisterClusterRequest& request) {
  const std::string& name = request.name();
  if (name.empty()) return InvalidFieldError("name", "required");
  // NOT_FOUND (naming the field) when the cluster is not registered.
  RETURN_IF_ERROR(clusters_.SetDraining(name, true, request.force()));
  neighborhoods_.Repartition();
  absl::StatusOr<std::vector<std::string>> moved = applications_.MoveOffCluster(
      name, request.force() ? StuckApplications::kPend : StuckApplications::kRefuse,
      "unregistered");
  if (!moved.ok()) {
    // Nothing moved: the cluster stays as it was.
    clusters_.SetDraining(name, false).IgnoreError();
    neighborhoods_.Repartition();
    return moved.status();
  }
  v1::UnregisterClusterRequest remove;
  remove.set_name(name);
  RETURN_IF_ERROR(clusters_.Unregister(remove).status());
  neighborhoods_.Repartition();

  v1::UnregisterClusterResponse response;
  common::v1::Operation& op = *response.mutable_operation();
  const auto now = ToProtoTimestamp(clock_.Now());
  op.set_id(absl::StrCat("unregister-", name, "-", now.seconds()));
  op.set_kind("acm.UnregisterCluster");
  op.set_resource(absl::StrCat("clusters/", name));
  op.set_done(true);
  op.set_progress_percent(100);
  op.set_phase(moved->empty() ? "removed; no application was on it"
                              : absl::StrCat("removed; re-placing ", absl::StrJoin(*moved, ", ")));
  op.set_request_id(request.request_id());
  *op.mutable_create_time() = now;
  *op.mutable_update_time() = now;
  // Stored, so GetOperation answers for it like for the others.
  RETURN_IF_ERROR(applications_.RecordOperation(op));
  return response;
}

absl::StatusOr<int> ClusterDrainer::Resume() {
  ASSIGN_OR_RETURN(std::vector<v1::Cluster> all, clusters_.All());
  int removed = 0;
  for (const v1::Cluster& c : all) {
    if (!IsDraining(c)) continue;
    // Asked for before the restart: finish it as asked (a refused one
    // clears its mark, as it would have then).
    v1::UnregisterClusterRequest request;
    request.set_name(c.metadata().name());
    request.set_force(IsForcedDrain(c));
    absl::StatusOr<v1::UnregisterClusterResponse> done = Unregister(request);
    if (absl::IsFailedPrecondition(done.status())) continue;
    RETURN_IF_ERROR(done.status());
    ++removed;
  }
  return removed;
}

absl::StatusOr<std::vector<std::string>> ClusterDrainer::ReevaluateDegraded(
    absl::Duration unreachable_for) {
  RETURN_IF_ERROR(clusters_.Sweep().status());
  ASSIGN_OR_RETURN(std::vector<v1::Cluster> all, clusters_.All());
  const absl::Time now = clock_.Now();
  std::vector<std::string> down;
  for (const v1::Cluster& c : all) {
    if (c.health() != v1::CLUSTER_HEALTH_UNREACHABLE || IsDraining(c)) continue;
    const auto& beat = c.last_heartbeat_time();
    absl::Time last = FromProtoTimestamp(beat);
    if (now - last >= unreachable_for) down.push_back(c.metadata().name());
  }
  std::vector<std::string> moved;
  if (down.empty()) return moved;
  // Selection must see the clusters as unreachable now, not as partitioned earlier.
  neighborhoods_.Repartition();
  for (const std::string& name : down) {
    ASSIGN_OR_RETURN(
        std::vector<std::string> off,
        applications_.MoveOffCluster(
            name, StuckApplications::kLeave,
            absl::StrCat("unreachable for more than ", absl::FormatDuration(unreachable_for))));
    moved.insert(moved.end(), off.begin(), off.end());
  }
  return moved;
}

}  // namespace codeco::acm
