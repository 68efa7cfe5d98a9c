#include "acm/core/local_copies.h"

#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"

namespace codeco::acm {
namespace {

constexpr char kNeighborhoods[] = "neighborhoods";
constexpr char kAssignments[] = "assignments";

template <typename Message>
absl::StatusOr<std::optional<Message>> Load(const KvStore& kv, const char* family,
                                            const std::string& key) {
  absl::StatusOr<std::string> bytes = kv.Get(family, key);
  if (absl::IsNotFound(bytes.status())) return std::optional<Message>();
  RETURN_IF_ERROR(bytes.status());
  Message m;
  if (!m.ParseFromString(*bytes)) {
    return absl::DataLossError(absl::StrCat("corrupt ", family, " record ", key));
  }
  return std::optional<Message>(std::move(m));
}

absl::Status ValidateNeighborhood(const v1::Neighborhood& nb) {
  if (nb.id().empty()) return InvalidFieldError("neighborhood.id", "required");
  if (nb.application().empty()) return InvalidFieldError("neighborhood.application", "required");
  if (nb.revision() < 1) return InvalidFieldError("neighborhood.revision", "must be 1 or more");
  for (int i = 0; i < nb.members_size(); ++i) {
    if (nb.members(i).cluster().empty()) {
      return InvalidFieldError(absl::StrCat("neighborhood.members[", i, "].cluster"), "required");
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> LocalCopyColumnFamilies() { return {kNeighborhoods, kAssignments}; }

absl::StatusOr<bool> LocalCopies::StoreNeighborhoodLocked(const v1::Neighborhood& nb,
                                                          int64_t* stored) {
  ASSIGN_OR_RETURN(std::optional<v1::Neighborhood> current,
                   Load<v1::Neighborhood>(kv_, kNeighborhoods, nb.id()));
  if (current && current->revision() >= nb.revision()) {
    *stored = current->revision();
    return false;
  }
  RETURN_IF_ERROR(kv_.Put(kNeighborhoods, nb.id(), nb.SerializeAsString()));
  *stored = nb.revision();
  return true;
}

absl::StatusOr<bool> LocalCopies::StoreAssignmentLocked(const v1::ClusterAssignment& a,
                                                        int64_t* stored) {
  ASSIGN_OR_RETURN(std::optional<v1::ClusterAssignment> current,
                   Load<v1::ClusterAssignment>(kv_, kAssignments, a.application()));
  if (current && current->plan_revision() > a.plan_revision()) {
    *stored = current->plan_revision();
    return false;
  }
  // The same revision may still carry news (e.g. a pod's node): store if
  // different, the issue time aside (it changes with every sync).
  auto content = [](v1::ClusterAssignment x) {
    x.clear_issue_time();
    return x.SerializeAsString();
  };
  if (current && content(*current) == content(a)) {
    *stored = current->plan_revision();
    return false;
  }
  RETURN_IF_ERROR(kv_.Put(kAssignments, a.application(), a.SerializeAsString()));
  *stored = a.plan_revision();
  return true;
}

absl::StatusOr<v1::PushNeighborhoodResponse> LocalCopies::PushNeighborhood(
    const v1::PushNeighborhoodRequest& request) {
  const v1::Neighborhood& nb = request.neighborhood();
  v1::PushNeighborhoodResponse response;
  absl::MutexLock lock(&mu_);
  if (request.deleted()) {
    if (nb.id().empty()) return InvalidFieldError("neighborhood.id", "required");
    ASSIGN_OR_RETURN(std::optional<v1::Neighborhood> current,
                     Load<v1::Neighborhood>(kv_, kNeighborhoods, nb.id()));
    if (current && nb.revision() != 0 && current->revision() > nb.revision()) {
      response.set_stored_revision(current->revision());  // a newer copy stays
      return response;
    }
    if (current) RETURN_IF_ERROR(kv_.Delete(kNeighborhoods, nb.id()));
    response.set_changed(current.has_value());
    return response;
  }
  RETURN_IF_ERROR(ValidateNeighborhood(nb));
  int64_t stored = 0;
  ASSIGN_OR_RETURN(bool changed, StoreNeighborhoodLocked(nb, &stored));
  response.set_stored_revision(stored);
  response.set_changed(changed);
  return response;
}

absl::StatusOr<v1::PushAssignmentResponse> LocalCopies::PushAssignment(
    const v1::PushAssignmentRequest& request) {
  const v1::ClusterAssignment& a = request.assignment();
  if (a.application().empty()) return InvalidFieldError("assignment.application", "required");
  if (a.cluster() != cluster_) {
    return InvalidFieldError("assignment.cluster", absl::StrCat("this is cluster \"", cluster_,
                                                                "\", not \"", a.cluster(), "\""));
  }
  if (a.plan_revision() < 0) {
    return InvalidFieldError("assignment.plan_revision", "must not be negative");
  }
  for (int i = 0; i < a.pods_size(); ++i) {
    if (a.pods(i).pod().empty()) {
      return InvalidFieldError(absl::StrCat("assignment.pods[", i, "].pod"), "required");
    }
  }
  absl::MutexLock lock(&mu_);
  int64_t stored = 0;
  ASSIGN_OR_RETURN(bool changed, StoreAssignmentLocked(a, &stored));
  v1::PushAssignmentResponse response;
  response.set_stored_plan_revision(stored);
  response.set_changed(changed);
  return response;
}

absl::StatusOr<int> LocalCopies::SyncNeighborhoods(const std::vector<v1::Neighborhood>& current) {
  for (const auto& nb : current) RETURN_IF_ERROR(ValidateNeighborhood(nb));
  absl::MutexLock lock(&mu_);
  int changed = 0;
  std::set<std::string> keep;
  for (const auto& nb : current) {
    keep.insert(nb.id());
    int64_t stored = 0;
    ASSIGN_OR_RETURN(bool c, StoreNeighborhoodLocked(nb, &stored));
    changed += c ? 1 : 0;
  }
  std::vector<std::string> gone;
  RETURN_IF_ERROR(kv_.Scan(kNeighborhoods, {}, [&](std::string_view key, std::string_view) {
    if (!keep.count(std::string(key))) gone.emplace_back(key);
    return true;
  }));
  for (const auto& id : gone) RETURN_IF_ERROR(kv_.Delete(kNeighborhoods, id));
  return changed + static_cast<int>(gone.size());
}

absl::StatusOr<int> LocalCopies::SyncAssignments(
    const std::vector<v1::ClusterAssignment>& current) {
  absl::MutexLock lock(&mu_);
  int changed = 0;
  std::set<std::string> keep;
  for (const auto& a : current) {
    if (a.application().empty() || a.cluster() != cluster_) {
      return InvalidFieldError("assignment", "must name an application of this cluster");
    }
    keep.insert(a.application());
    int64_t stored = 0;
    ASSIGN_OR_RETURN(bool c, StoreAssignmentLocked(a, &stored));
    changed += c ? 1 : 0;
  }
  std::vector<std::string> gone;
  RETURN_IF_ERROR(kv_.Scan(kAssignments, {}, [&](std::string_view key, std::string_view) {
    if (!keep.count(std::string(key))) gone.emplace_back(key);
    return true;
  }));
  for (const auto& app : gone) RETURN_IF_ERROR(kv_.Delete(kAssignments, app));
  return changed + static_cast<int>(gone.size());
}

absl::StatusOr<std::map<std::string, int64_t>> LocalCopies::NeighborhoodRevisions() const {
  std::map<std::string, int64_t> out;
  absl::Status decode;
  RETURN_IF_ERROR(kv_.Scan(kNeighborhoods, {}, [&](std::string_view key, std::string_view value) {
    v1::Neighborhood nb;
    if (!nb.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
      decode = absl::DataLossError("corrupt neighborhood record");
      return false;
    }
    out[std::string(key)] = nb.revision();
    return true;
  }));
  RETURN_IF_ERROR(decode);
  return out;
}

absl::StatusOr<std::map<std::string, int64_t>> LocalCopies::AssignmentRevisions() const {
  std::map<std::string, int64_t> out;
  absl::Status decode;
  RETURN_IF_ERROR(kv_.Scan(kAssignments, {}, [&](std::string_view key, std::string_view value) {
    v1::ClusterAssignment a;
    if (!a.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
      decode = absl::DataLossError("corrupt assignment record");
      return false;
    }
    out[std::string(key)] = a.plan_revision();
    return true;
  }));
  RETURN_IF_ERROR(decode);
  return out;
}

absl::StatusOr<v1::ClusterAssignment> LocalCopies::GetAssignment(
    const std::string& application) const {
  ASSIGN_OR_RETURN(std::optional<v1::ClusterAssignment> a,
                   Load<v1::ClusterAssignment>(kv_, kAssignments, application));
  if (!a) return absl::NotFoundError(absl::StrCat("no assignment of \"", application, "\" here"));
  return *std::move(a);
}

std::vector<v1::ClusterAssignment> AssignmentsFor(const std::string& cluster,
                                                  const std::vector<v1::Application>& apps,
                                                  const google::protobuf::Timestamp& issue_time) {
  std::vector<v1::ClusterAssignment> out;
  for (const auto& app : apps) {
    if (app.status().phase() == v1::APPLICATION_PHASE_DELETING) continue;
    v1::ClusterAssignment a;
    std::set<std::string> services;
    for (const auto& p : app.status().placements()) {
      if (p.cluster() != cluster) continue;
      auto* pod = a.add_pods();
      pod->set_service(p.service());
      pod->set_pod(p.pod());
      pod->set_node(p.node());
      services.insert(p.service());
    }
    if (a.pods_size() == 0) continue;
    a.set_application(app.metadata().name());
    a.set_spec_revision(app.status().observed_spec_revision());
    a.set_plan_revision(app.status().plan_revision());
    a.set_cluster(cluster);
    a.set_neighborhood_id(app.status().neighborhood_id());
    for (const auto& s : app.spec().services()) {
      if (services.count(s.name())) *a.add_services() = s;
      for (const auto& c : s.channels()) {
        if (services.count(c.from_service()) || services.count(c.to_service())) {
          *a.add_channels() = c;
        }
      }
    }
    *a.mutable_issue_time() = issue_time;
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace codeco::acm
