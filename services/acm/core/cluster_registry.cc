#include "acm/core/cluster_registry.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "acm/core/application_manager.h"
#include "acm/core/cam_parser.h"
#include "codeco/common/config.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/status.h"

namespace codeco::acm {
namespace {

constexpr char kClusters[] = "clusters";

absl::Status ValidateCapacity(const common::v1::CapacitySummary& c, const std::string& path) {
  for (const auto* q : {&c.allocatable(), &c.free(), &c.largest_free_node()}) {
    if (q->cpu_millicores() < 0 || q->memory_bytes() < 0 || q->gpu() < 0 ||
        q->ephemeral_storage_bytes() < 0) {
      return InvalidFieldError(path, "quantities must not be negative");
    }
  }
  if (c.node_count() < 0 || c.ready_node_count() < 0 || c.ready_node_count() > c.node_count()) {
    return InvalidFieldError(path + ".ready_node_count", "must lie within 0..node_count");
  }
  return absl::OkStatus();
}

}  // namespace

bool IsDraining(const v1::Cluster& cluster) {
  auto it = cluster.metadata().labels().find(kDrainingLabel);
  return it != cluster.metadata().labels().end() && (it->second == "true" || it->second == "force");
}

bool IsForcedDrain(const v1::Cluster& cluster) {
  auto it = cluster.metadata().labels().find(kDrainingLabel);
  return it != cluster.metadata().labels().end() && it->second == "force";
}

ClusterRegistry::ClusterRegistry(KvStore& kv, Clock& clock, ClusterRegistryOptions options)
    : kv_(kv), clock_(clock), options_(options) {}

google::protobuf::Timestamp ClusterRegistry::NowProto() const {
  return ToProtoTimestamp(clock_.Now());
}

absl::StatusOr<std::optional<v1::Cluster>> ClusterRegistry::Load(const std::string& name) const {
  absl::StatusOr<std::string> bytes = kv_.Get(kClusters, name);
  if (absl::IsNotFound(bytes.status())) return std::optional<v1::Cluster>();
  RETURN_IF_ERROR(bytes.status());
  v1::Cluster cluster;
  if (!cluster.ParseFromString(*bytes)) return absl::DataLossError("corrupt cluster record");
  return std::optional<v1::Cluster>(std::move(cluster));
}

absl::Status ClusterRegistry::Save(const v1::Cluster& cluster) {
  return kv_.Put(kClusters, cluster.metadata().name(), cluster.SerializeAsString());
}

absl::StatusOr<v1::RegisterClusterResponse> ClusterRegistry::Register(
    const v1::RegisterClusterRequest& request) {
  const v1::Cluster& in = request.cluster();
  const std::string& name = in.metadata().name();
  if (!IsDnsLabel(name)) return InvalidFieldError("cluster.metadata.name", "must be a DNS label");
  if (in.role() == v1::CLUSTER_ROLE_UNSPECIFIED) {
    return InvalidFieldError("cluster.role", "required (HUB or MC)");
  }
  if (!in.parent_cluster().empty() && !IsDnsLabel(in.parent_cluster())) {
    return InvalidFieldError("cluster.parent_cluster", "must be a cluster name");
  }
  if (in.parent_cluster() == name) {
    return InvalidFieldError("cluster.parent_cluster", "a cluster cannot be its own parent");
  }
  const auto& geo = in.cluster_labels();
  if (geo.latitude() < -90 || geo.latitude() > 90) {
    return InvalidFieldError("cluster.cluster_labels.latitude", "must lie within -90..90");
  }
  if (geo.longitude() < -180 || geo.longitude() > 180) {
    return InvalidFieldError("cluster.cluster_labels.longitude", "must lie within -180..180");
  }
  RETURN_IF_ERROR(ValidateCapacity(in.capacity(), "cluster.capacity"));
  constexpr int kMaxEndpoints = 32;
  if (in.endpoints_size() > kMaxEndpoints) {
    return InvalidFieldError("cluster.endpoints",
                             absl::StrCat("at most ", kMaxEndpoints, " services, got ",
                                          in.endpoints_size()));
  }
  for (const auto& [service, address] : in.endpoints()) {
    if (!IsDnsLabel(service)) {
      return InvalidFieldError("cluster.endpoints", "keys must be service names (DNS labels)");
    }
    RETURN_IF_ERROR(CheckHostPort(absl::StrCat("cluster.endpoints[", service, "]"), address));
  }
  absl::MutexLock lock(&mu_);
  // A cluster tree has no cycle: the new parent may not lie below this
  // cluster. A parent not registered (yet) is allowed; the chain stops there.
  std::vector<std::string> chain = {name};
  for (std::string up = in.parent_cluster(); !up.empty();) {
    chain.push_back(up);
    if (up == name) {
      return InvalidFieldError(
          "cluster.parent_cluster",
          absl::StrCat("\"", in.parent_cluster(), "\" lies below ", name, " (",
                       absl::StrJoin(chain, " -> "), "): a cluster tree has no cycle"));
    }
    ASSIGN_OR_RETURN(std::optional<v1::Cluster> above, Load(up));
    if (!above.has_value() || chain.size() > 64) break;  // unknown, or deeper than any tree
    up = above->parent_cluster();
  }
  ASSIGN_OR_RETURN(std::optional<v1::Cluster> current, Load(name));
  v1::Cluster cluster = in;
  // An agent reports an outage once; a later registration keeps it.
  if (!in.has_last_hub_outage() && current && current->has_last_hub_outage()) {
    *cluster.mutable_last_hub_outage() = current->last_hub_outage();
  }
  // The agent does not know about a drain in progress: the mark stays.
  cluster.mutable_metadata()->mutable_labels()->erase(kDrainingLabel);
  if (current && IsDraining(*current)) {
    (*cluster.mutable_metadata()->mutable_labels())[kDrainingLabel] =
        current->metadata().labels().at(kDrainingLabel);
  }
  cluster.mutable_metadata()->set_revision(current ? current->metadata().revision() + 1 : 1);
  *cluster.mutable_metadata()->mutable_create_time() =
      current ? current->metadata().create_time() : NowProto();
  *cluster.mutable_metadata()->mutable_update_time() = NowProto();
  *cluster.mutable_last_heartbeat_time() = NowProto();
  cluster.set_health(v1::CLUSTER_HEALTH_READY);
  cluster.clear_health_message();
  RETURN_IF_ERROR(Save(cluster));
  recovering_.erase(name);
  sequence_.erase(name);
  v1::RegisterClusterResponse response;
  *response.mutable_cluster() = cluster;
  response.set_heartbeat_interval_ns(absl::ToInt64Nanoseconds(options_.heartbeat_interval));
  return response;
}

absl::Status ValidateTreeReport(const v1::HeartbeatRequest& request) {
  if (request.subtree_size() > kMaxSubtreeClusters) {
    return InvalidFieldError("subtree",
                             absl::StrCat("more than ", kMaxSubtreeClusters, " clusters"));
  }
  std::set<std::string> names = {request.cluster_name()};
  for (int i = 0; i < request.subtree_size(); ++i) {
    const v1::SubtreeCluster& c = request.subtree(i);
    const std::string at = absl::StrCat("subtree[", i, "]");
    if (!IsDnsLabel(c.name())) {
      return InvalidFieldError(at + ".name",
                               "\"" + c.name().substr(0, 80) + "\" is not a cluster name");
    }
    if (!names.insert(c.name()).second) {
      return InvalidFieldError(at + ".name",
                               "\"" + c.name() + "\" appears twice (or is the reporter)");
    }
    if (!IsDnsLabel(c.parent())) {
      return InvalidFieldError(at + ".parent",
                               "\"" + c.parent().substr(0, 80) + "\" is not a cluster name");
    }
  }
  if (request.mission_status_size() > kMaxReportedMissionStates) {
    return InvalidFieldError("mission_status",
                             absl::StrCat("more than ", kMaxReportedMissionStates, " states"));
  }
  for (int i = 0; i < request.mission_status_size(); ++i) {
    const v1::MissionClusterStatus& state = request.mission_status(i);
    const std::string at = absl::StrCat("mission_status[", i, "]");
    if (!IsDnsLabel(state.mission())) {
      return InvalidFieldError(at + ".mission",
                               "\"" + state.mission().substr(0, 80) + "\" is not a mission name");
    }
    if (!names.count(state.cluster())) {
      return InvalidFieldError(
          at + ".cluster",
          "\"" + state.cluster().substr(0, 80) + "\" is neither the reporter nor in its subtree");
    }
    if (state.message().size() > 1024) {
      return InvalidFieldError(at + ".message", "longer than 1024 bytes");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::HeartbeatResponse> ClusterRegistry::Heartbeat(
    const v1::HeartbeatRequest& request) {
  if (request.cluster_name().empty()) return InvalidFieldError("cluster_name", "required");
  if (request.health() == v1::CLUSTER_HEALTH_UNREACHABLE) {
    return InvalidFieldError("health", "a heartbeat reports READY or DEGRADED");
  }
  RETURN_IF_ERROR(ValidateCapacity(request.capacity(), "capacity"));
  RETURN_IF_ERROR(ValidateTreeReport(request));
  v1::HeartbeatResponse response;
  response.set_heartbeat_interval_ns(absl::ToInt64Nanoseconds(options_.heartbeat_interval));
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::optional<v1::Cluster> cluster, Load(request.cluster_name()));
  if (!cluster) {
    response.set_reregister_required(true);
    return response;
  }
  auto seq = sequence_.find(request.cluster_name());
  if (request.sequence() != 0 && seq != sequence_.end() && request.sequence() <= seq->second) {
    return response;  // reordered or repeated: the newer one already counted
  }
  sequence_[request.cluster_name()] = request.sequence();
  *cluster->mutable_capacity() = request.capacity();
  if (request.has_cluster_labels()) *cluster->mutable_cluster_labels() = request.cluster_labels();
  if (request.has_hub_outage()) *cluster->mutable_last_hub_outage() = request.hub_outage();
  *cluster->mutable_subordinates() = request.subtree();
  int received = 0, active = 0;
  for (const v1::MissionClusterStatus& state : request.mission_status()) {
    if (state.cluster() != request.cluster_name()) continue;
    ++received;
    if (state.phase() == v1::MISSION_PHASE_RUNNING) ++active;
  }
  cluster->set_received_missions(received);
  cluster->set_active_missions(active);
  *cluster->mutable_last_heartbeat_time() = NowProto();
  v1::ClusterHealth reported = request.health() == v1::CLUSTER_HEALTH_UNSPECIFIED
                                   ? v1::CLUSTER_HEALTH_READY
                                   : request.health();
  if (cluster->health() == v1::CLUSTER_HEALTH_UNREACHABLE) {
    int beats = ++recovering_[request.cluster_name()];
    if (beats >= options_.recover_beats) {
      recovering_.erase(request.cluster_name());
      cluster->set_health(reported);
      cluster->set_health_message(request.health_message());
    } else {
      cluster->set_health_message(
          absl::StrCat("recovering: ", beats, " of ", options_.recover_beats, " heartbeats"));
    }
  } else {
    cluster->set_health(reported);
    cluster->set_health_message(request.health_message());
  }
  RETURN_IF_ERROR(Save(*cluster));
  return response;
}

absl::StatusOr<std::vector<std::string>> ClusterRegistry::Sweep() {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = clock_.Now() - options_.heartbeat_interval * options_.miss_threshold;
  std::vector<v1::Cluster> stale;
  absl::Status decode;
  RETURN_IF_ERROR(kv_.Scan(kClusters, {}, [&](std::string_view, std::string_view value) {
    v1::Cluster c;
    if (!c.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
      decode = absl::DataLossError("corrupt cluster record");
      return false;
    }
    if (c.health() != v1::CLUSTER_HEALTH_UNREACHABLE &&
        FromProtoTimestamp(c.last_heartbeat_time()) < deadline) {
      stale.push_back(std::move(c));
    }
    return true;
  }));
  RETURN_IF_ERROR(decode);
  std::vector<std::string> changed;
  KvWriteBatch batch;
  for (v1::Cluster& c : stale) {
    c.set_health(v1::CLUSTER_HEALTH_UNREACHABLE);
    c.set_health_message(
        absl::StrCat("no heartbeat for ",
                     absl::FormatDuration(clock_.Now() - FromProtoTimestamp(c.last_heartbeat_time()))));
    recovering_[c.metadata().name()] = 0;
    batch.Put(kClusters, c.metadata().name(), c.SerializeAsString());
    changed.push_back(c.metadata().name());
  }
  if (!batch.empty()) RETURN_IF_ERROR(kv_.Write(batch));
  return changed;
}

absl::StatusOr<v1::GetClusterResponse> ClusterRegistry::Get(
    const v1::GetClusterRequest& request) const {
  if (request.name().empty()) return InvalidFieldError("name", "required");
  ASSIGN_OR_RETURN(std::optional<v1::Cluster> cluster, Load(request.name()));
  if (!cluster) return absl::NotFoundError(absl::StrCat("cluster \"", request.name(), "\""));
  v1::GetClusterResponse response;
  *response.mutable_cluster() = *std::move(cluster);
  return response;
}

absl::StatusOr<v1::ListClustersResponse> ClusterRegistry::List(
    const v1::ListClustersRequest& request) const {
  if (request.page_size() < 0) return InvalidFieldError("page_size", "must not be negative");
  const int page = request.page_size() == 0 ? options_.default_page_size
                                            : std::min(request.page_size(), options_.max_page_size);
  v1::ListClustersResponse response;
  bool more = false;
  absl::Status decode;
  RETURN_IF_ERROR(kv_.Scan(
      kClusters, {.start_after = request.page_token()},
      [&](std::string_view, std::string_view value) {
        v1::Cluster c;
        if (!c.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
          decode = absl::DataLossError("corrupt cluster record");
          return false;
        }
        if (request.role() != v1::CLUSTER_ROLE_UNSPECIFIED && c.role() != request.role())
          return true;
        if (request.health() != v1::CLUSTER_HEALTH_UNSPECIFIED && c.health() != request.health()) {
          return true;
        }
        if (!request.parent_cluster().empty() && c.parent_cluster() != request.parent_cluster()) {
          return true;
        }
        if (!MatchesLabels(request.label_selector(), c.metadata().labels())) return true;
        if (response.clusters_size() == page) {
          more = true;
          return false;
        }
        *response.add_clusters() = std::move(c);
        return true;
      }));
  RETURN_IF_ERROR(decode);
  if (more) {
    response.set_next_page_token(response.clusters(response.clusters_size() - 1).metadata().name());
  }
  return response;
}

absl::StatusOr<v1::UnregisterClusterResponse> ClusterRegistry::Unregister(
    const v1::UnregisterClusterRequest& request) {
  if (request.name().empty()) return InvalidFieldError("name", "required");
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::optional<v1::Cluster> cluster, Load(request.name()));
  if (!cluster) {
    return absl::NotFoundError(
        absl::StrCat("name: cluster \"", request.name(), "\" is not registered"));
  }
  RETURN_IF_ERROR(kv_.Delete(kClusters, request.name()));
  recovering_.erase(request.name());
  sequence_.erase(request.name());
  return v1::UnregisterClusterResponse();
}

absl::Status ClusterRegistry::SetDraining(const std::string& name, bool draining, bool force) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::optional<v1::Cluster> cluster, Load(name));
  if (!cluster) {
    return absl::NotFoundError(absl::StrCat("name: cluster \"", name, "\" is not registered"));
  }
  auto& labels = *cluster->mutable_metadata()->mutable_labels();
  if (draining) {
    const std::string value = force ? "force" : "true";
    auto it = labels.find(kDrainingLabel);
    if (it != labels.end() && it->second == value) return absl::OkStatus();
    labels[kDrainingLabel] = value;
  } else {
    if (!IsDraining(*cluster)) return absl::OkStatus();
    labels.erase(kDrainingLabel);
  }
  cluster->mutable_metadata()->set_revision(cluster->metadata().revision() + 1);
  *cluster->mutable_metadata()->mutable_update_time() = NowProto();
  return Save(*cluster);
}

absl::StatusOr<std::vector<v1::Cluster>> ClusterRegistry::All() const {
  std::vector<v1::Cluster> out;
  absl::Status decode;
  RETURN_IF_ERROR(kv_.Scan(kClusters, {}, [&](std::string_view, std::string_view value) {
    v1::Cluster c;
    if (!c.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
      decode = absl::DataLossError("corrupt cluster record");
      return false;
    }
    out.push_back(std::move(c));
    return true;
  }));
  RETURN_IF_ERROR(decode);
  return out;
}

}  // namespace codeco::acm
