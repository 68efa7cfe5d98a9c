#include "acm/core/neighborhood_manager.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/status.h"

namespace codeco::acm {
namespace {

constexpr char kNeighborhoods[] = "neighborhoods";

std::string IdFor(const std::string& application) { return "nb-" + application; }

bool SameMembers(const v1::Neighborhood& a, const v1::Neighborhood& b) {
  if (a.members_size() != b.members_size()) return false;
  for (int i = 0; i < a.members_size(); ++i) {
    if (a.members(i).cluster() != b.members(i).cluster()) return false;
  }
  return true;
}

}  // namespace

NeighborhoodManager::NeighborhoodManager(KvStore& kv, ClusterRegistry& clusters, Clock& clock,
                                         NeighborhoodManagerOptions options)
    : kv_(kv), clusters_(clusters), clock_(clock), options_(options) {}

absl::StatusOr<v1::Neighborhood> NeighborhoodManager::SelectLocked(
    const v1::ApplicationSpec& spec) {
  const absl::Time now = clock_.Now();
  if (now - partitioned_at_ >= options_.repartition_interval) {
    RETURN_IF_ERROR(clusters_.Sweep().status());
    ASSIGN_OR_RETURN(std::vector<v1::Cluster> all, clusters_.All());
    // A draining cluster is on its way out: never a member of a new choice.
    std::erase_if(all, [](const v1::Cluster& c) { return IsDraining(c); });
    composer_.Partition(std::move(all));
    partitioned_at_ = now;
  }
  return composer_.Select(spec, {.max_members = options_.max_members});
}

void NeighborhoodManager::Repartition() {
  absl::MutexLock lock(&mu_);
  partitioned_at_ = absl::InfinitePast();
}

absl::StatusOr<v1::Neighborhood> NeighborhoodManager::Preview(const v1::ApplicationSpec& spec) {
  absl::MutexLock lock(&mu_);
  return SelectLocked(spec);
}

absl::StatusOr<std::optional<v1::Neighborhood>> NeighborhoodManager::Find(
    const std::string& application) {
  v1::GetNeighborhoodRequest request;
  request.set_application(application);
  absl::StatusOr<v1::GetNeighborhoodResponse> found = Get(request);
  if (absl::IsNotFound(found.status())) return std::optional<v1::Neighborhood>();
  RETURN_IF_ERROR(found.status());
  return std::optional<v1::Neighborhood>(found->neighborhood());
}

absl::StatusOr<v1::Neighborhood> NeighborhoodManager::Assign(const v1::ApplicationSpec& spec) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_.Now();
  ASSIGN_OR_RETURN(v1::Neighborhood nb, SelectLocked(spec));
  absl::StatusOr<std::string> stored = kv_.Get(kNeighborhoods, nb.id());
  int64_t revision = 1;
  if (stored.ok()) {
    v1::Neighborhood old;
    if (!old.ParseFromString(*stored)) return absl::DataLossError("corrupt neighborhood record");
    // Members in a stable order so an unchanged set keeps its revision.
    revision = old.revision() + 1;
    auto by_name = [](const v1::NeighborhoodMember& a, const v1::NeighborhoodMember& b) {
      return a.cluster() < b.cluster();
    };
    std::sort(nb.mutable_members()->begin(), nb.mutable_members()->end(), by_name);
    if (SameMembers(old, nb)) return old;
  } else if (!absl::IsNotFound(stored.status())) {
    return stored.status();
  } else {
    std::sort(nb.mutable_members()->begin(), nb.mutable_members()->end(),
              [](const auto& a, const auto& b) { return a.cluster() < b.cluster(); });
  }
  nb.set_revision(revision);
  *nb.mutable_update_time() = ToProtoTimestamp(now);
  RETURN_IF_ERROR(kv_.Put(kNeighborhoods, nb.id(), nb.SerializeAsString()));
  return nb;
}

absl::Status NeighborhoodManager::Release(const std::string& application) {
  return kv_.Delete(kNeighborhoods, IdFor(application));
}

absl::StatusOr<v1::GetNeighborhoodResponse> NeighborhoodManager::Get(
    const v1::GetNeighborhoodRequest& request) const {
  std::string id;
  switch (request.key_case()) {
    case v1::GetNeighborhoodRequest::kId:
      id = request.id();
      break;
    case v1::GetNeighborhoodRequest::kApplication:
      id = IdFor(request.application());
      break;
    default:
      return InvalidFieldError("key", "id or application is required");
  }
  absl::StatusOr<std::string> bytes = kv_.Get(kNeighborhoods, id);
  if (absl::IsNotFound(bytes.status())) {
    return absl::NotFoundError(absl::StrCat("neighborhood \"", id, "\""));
  }
  RETURN_IF_ERROR(bytes.status());
  v1::GetNeighborhoodResponse response;
  if (!response.mutable_neighborhood()->ParseFromString(*bytes)) {
    return absl::DataLossError("corrupt neighborhood record");
  }
  return response;
}

absl::StatusOr<v1::ListNeighborhoodsResponse> NeighborhoodManager::List(
    const v1::ListNeighborhoodsRequest& request) const {
  if (request.page_size() < 0) return InvalidFieldError("page_size", "must not be negative");
  const int page = request.page_size() == 0 ? options_.default_page_size : request.page_size();
  v1::ListNeighborhoodsResponse response;
  bool more = false;
  absl::Status decode;
  RETURN_IF_ERROR(kv_.Scan(
      kNeighborhoods, {.start_after = request.page_token()},
      [&](std::string_view, std::string_view value) {
        v1::Neighborhood nb;
        if (!nb.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
          decode = absl::DataLossError("corrupt neighborhood record");
          return false;
        }
        if (!request.cluster().empty() &&
            std::none_of(nb.members().begin(), nb.members().end(),
                         [&](const auto& m) { return m.cluster() == request.cluster(); })) {
          return true;
        }
        if (response.neighborhoods_size() == page) {
          more = true;
          return false;
        }
        *response.add_neighborhoods() = std::move(nb);
        return true;
      }));
  RETURN_IF_ERROR(decode);
  if (more) {
    response.set_next_page_token(response.neighborhoods(response.neighborhoods_size() - 1).id());
  }
  return response;
}

absl::StatusOr<v1::Neighborhood> FixedNeighborhoodProvider::Assign(
    const v1::ApplicationSpec& spec) {
  if (clusters_.empty()) return absl::FailedPreconditionError("no cluster registered");
  v1::Neighborhood nb;
  nb.set_id(IdFor(spec.app_name()));
  nb.set_application(spec.app_name());
  nb.set_revision(1);
  for (const auto& c : clusters_) nb.add_members()->set_cluster(c);
  return nb;
}

}  // namespace codeco::acm
