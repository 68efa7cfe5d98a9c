#include "tools/codef/relay/link_table.h"

#include <arpa/inet.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"

namespace codeco::codef {

absl::Status ValidateLinkConditions(const LinkConditions& conditions) {
  FieldErrors errors;
  if (conditions.one_way_latency_ns < 0) {
    errors.Add("one_way_latency_ns", "must not be negative");
  }
  if (conditions.bandwidth_bps < 0) {
    errors.Add("bandwidth_bps", "must not be negative (0 = unlimited)");
  }
  if (!std::isfinite(conditions.loss) || conditions.loss < 0 || conditions.loss > 1) {
    errors.Add("loss", "must be a ratio between 0 and 1");
  }
  return errors.ToStatus();
}

absl::Status LinkTable::AddCluster(const std::string& name, const std::string& service_ip) {
  if (name.empty()) return InvalidFieldError("name", "must not be empty");
  in_addr parsed;
  if (inet_pton(AF_INET, service_ip.c_str(), &parsed) != 1) {
    return InvalidFieldError("service_ip", absl::StrCat("not an IPv4 address: ", service_ip));
  }
  absl::MutexLock lock(&mu_);
  if (clusters_.count(name) > 0) {
    return absl::AlreadyExistsError(absl::StrCat("cluster ", name, " is already registered"));
  }
  if (auto it = cluster_by_ip_.find(service_ip); it != cluster_by_ip_.end()) {
    return absl::AlreadyExistsError(
        absl::StrCat("service_ip ", service_ip, " already belongs to cluster ", it->second));
  }
  clusters_[name] = Cluster{service_ip, false};
  cluster_by_ip_[service_ip] = name;
  return absl::OkStatus();
}

bool LinkTable::HasCluster(const std::string& name) const {
  absl::ReaderMutexLock lock(&mu_);
  return clusters_.count(name) > 0;
}

std::optional<std::string> LinkTable::ServiceIp(const std::string& name) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = clusters_.find(name);
  if (it == clusters_.end()) return std::nullopt;
  return it->second.service_ip;
}

std::optional<std::string> LinkTable::ClusterForIp(const std::string& ip) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = cluster_by_ip_.find(ip);
  if (it == cluster_by_ip_.end()) return std::nullopt;
  return it->second;
}

absl::Status LinkTable::CheckPair(const std::string& from, const std::string& to) const {
  if (clusters_.count(from) == 0) return absl::NotFoundError(absl::StrCat("no cluster ", from));
  if (clusters_.count(to) == 0) return absl::NotFoundError(absl::StrCat("no cluster ", to));
  return absl::OkStatus();
}

absl::Status LinkTable::SetLink(const std::string& from, const std::string& to,
                                const LinkConditions& conditions) {
  RETURN_IF_ERROR(ValidateLinkConditions(conditions));
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckPair(from, to));
  if (from == to) {
    return InvalidFieldError("to", "a link joins two different clusters");
  }
  links_[{from, to}] = conditions;
  return absl::OkStatus();
}

absl::StatusOr<LinkConditions> LinkTable::GetLink(const std::string& from,
                                                  const std::string& to) const {
  absl::ReaderMutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckPair(from, to));
  auto it = links_.find({from, to});
  return it == links_.end() ? LinkConditions{} : it->second;
}

absl::Status LinkTable::SetPartitioned(const std::string& cluster, bool partitioned) {
  absl::MutexLock lock(&mu_);
  auto it = clusters_.find(cluster);
  if (it == clusters_.end()) return absl::NotFoundError(absl::StrCat("no cluster ", cluster));
  it->second.partitioned = partitioned;
  return absl::OkStatus();
}

absl::StatusOr<bool> LinkTable::IsPartitioned(const std::string& cluster) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = clusters_.find(cluster);
  if (it == clusters_.end()) return absl::NotFoundError(absl::StrCat("no cluster ", cluster));
  return it->second.partitioned;
}

absl::StatusOr<PathState> LinkTable::Path(const std::string& from, const std::string& to) const {
  absl::ReaderMutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckPair(from, to));
  PathState path;
  if (from == to) return path;  // inside one cluster: never shaped
  if (auto it = links_.find({from, to}); it != links_.end()) path.forward = it->second;
  if (auto it = links_.find({to, from}); it != links_.end()) {
    path.reverse_latency_ns = it->second.one_way_latency_ns;
  }
  if (clusters_.at(from).partitioned || clusters_.at(to).partitioned) path.forward.cut = true;
  return path;
}

absl::Status LinkTable::PutVirtualLink(const VirtualLinkRoute& route) {
  FieldErrors errors;
  if (route.id.empty() || route.id.size() > 253) errors.Add("id", "must be 1-253 characters");
  const size_t colon = route.target_endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == route.target_endpoint.size() ||
      route.target_endpoint.size() > 300) {
    errors.Add("target_endpoint", "must be host:port");
  }
  absl::MutexLock lock(&mu_);
  if (!clusters_.count(route.source_cluster)) {
    errors.Add("source_cluster", absl::StrCat("unknown cluster \"", route.source_cluster, "\""));
  }
  if (!clusters_.count(route.target_cluster)) {
    errors.Add("target_cluster", absl::StrCat("unknown cluster \"", route.target_cluster, "\""));
  } else if (route.target_cluster == route.source_cluster) {
    errors.Add("target_cluster", "must differ from source_cluster");
  }
  RETURN_IF_ERROR(errors.ToStatus());
  virtual_links_[route.id] = route;
  return absl::OkStatus();
}

absl::Status LinkTable::DeleteVirtualLink(const std::string& id) {
  absl::MutexLock lock(&mu_);
  if (virtual_links_.erase(id) == 0) {
    return absl::NotFoundError(absl::StrCat("no virtual link ", id, " is installed"));
  }
  return absl::OkStatus();
}

std::optional<std::string> LinkTable::ChannelDestination(const std::string& source,
                                                         const std::string& host_port) const {
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [id, route] : virtual_links_) {
    if (route.source_cluster == source && route.target_endpoint == host_port) {
      return route.target_cluster;
    }
  }
  return std::nullopt;
}

std::map<std::string, VirtualLinkRoute> LinkTable::VirtualLinks() const {
  absl::ReaderMutexLock lock(&mu_);
  return virtual_links_;
}

}  // namespace codeco::codef
