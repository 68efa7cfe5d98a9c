#include "swm/core/model.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codeco/common/status.h"

namespace codeco::swm {

Resources Resources::operator+(const Resources& o) const {
  return {cpu_millis + o.cpu_millis, memory_bytes + o.memory_bytes, gpu + o.gpu};
}
Resources Resources::operator-(const Resources& o) const {
  return {cpu_millis - o.cpu_millis, memory_bytes - o.memory_bytes, gpu - o.gpu};
}
Resources& Resources::operator+=(const Resources& o) { return *this = *this + o; }
Resources& Resources::operator-=(const Resources& o) { return *this = *this - o; }
bool Resources::Fits(const Resources& r) const {
  return r.cpu_millis <= cpu_millis && r.memory_bytes <= memory_bytes && r.gpu <= gpu;
}

Resources Node::Free() const {
  Resources f = capacity - allocated;
  f.cpu_millis = std::max<int64_t>(0, f.cpu_millis);
  f.memory_bytes = std::max<int64_t>(0, f.memory_bytes);
  f.gpu = std::max<int64_t>(0, f.gpu);
  return f;
}

Resources Cluster::Capacity() const {
  Resources total;
  for (const Node& n : nodes) {
    if (n.schedulable) total += n.capacity;
  }
  return total;
}
Resources Cluster::Free() const {
  Resources total;
  for (const Node& n : nodes) {
    if (n.schedulable) total += n.Free();
  }
  return total;
}
int Cluster::NodeIndex(const std::string& node) const {
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].name == node) return static_cast<int>(i);
  }
  return -1;
}

void Federation::AddCluster(Cluster cluster) {
  auto it = cluster_index_.find(cluster.name);
  if (it != cluster_index_.end()) {
    clusters_[it->second] = std::move(cluster);
    return;
  }
  cluster_index_[cluster.name] = clusters_.size();
  clusters_.push_back(std::move(cluster));
}
void Federation::AddLink(const Link& link) {
  auto key = std::make_pair(link.from, link.to);
  auto it = link_index_.find(key);
  if (it != link_index_.end()) {
    links_[it->second] = link;
    return;
  }
  link_index_[key] = links_.size();
  links_.push_back(link);
}
const Cluster* Federation::FindCluster(const std::string& name) const {
  auto it = cluster_index_.find(name);
  return it == cluster_index_.end() ? nullptr : &clusters_[it->second];
}
Cluster* Federation::MutableCluster(const std::string& name) {
  auto it = cluster_index_.find(name);
  return it == cluster_index_.end() ? nullptr : &clusters_[it->second];
}
const Link* Federation::FindLink(const std::string& from, const std::string& to) const {
  auto it = link_index_.find({from, to});
  return it == link_index_.end() ? nullptr : &links_[it->second];
}
Link* Federation::MutableLink(const std::string& from, const std::string& to) {
  auto it = link_index_.find({from, to});
  return it == link_index_.end() ? nullptr : &links_[it->second];
}

namespace {
void CheckResources(const Resources& r, const std::string& path, FieldErrors& errors) {
  if (r.cpu_millis < 0) errors.Add(path + ".cpu_millis", "must be >= 0");
  if (r.memory_bytes < 0) errors.Add(path + ".memory_bytes", "must be >= 0");
  if (r.gpu < 0) errors.Add(path + ".gpu", "must be >= 0");
}
}  // namespace

absl::Status Federation::Validate() const {
  FieldErrors errors;
  std::set<std::string> names;
  for (size_t i = 0; i < clusters_.size(); ++i) {
    const Cluster& c = clusters_[i];
    std::string path = absl::StrCat("clusters[", i, "]");
    if (c.name.empty()) errors.Add(path + ".name", "must not be empty");
    if (!names.insert(c.name).second) errors.Add(path + ".name", "duplicate \"" + c.name + "\"");
    if (c.intra_latency_ns < 0) errors.Add(path + ".intra_latency_ns", "must be >= 0");
    std::set<std::string> node_names;
    for (size_t j = 0; j < c.nodes.size(); ++j) {
      std::string npath = absl::StrCat(path, ".nodes[", j, "]");
      if (c.nodes[j].name.empty()) errors.Add(npath + ".name", "must not be empty");
      if (!node_names.insert(c.nodes[j].name).second) {
        errors.Add(npath + ".name", "duplicate \"" + c.nodes[j].name + "\"");
      }
      CheckResources(c.nodes[j].capacity, npath + ".capacity", errors);
      CheckResources(c.nodes[j].allocated, npath + ".allocated", errors);
    }
  }
  for (size_t i = 0; i < links_.size(); ++i) {
    const Link& l = links_[i];
    std::string path = absl::StrCat("links[", i, "]");
    if (!names.count(l.from)) errors.Add(path + ".from", "unknown cluster \"" + l.from + "\"");
    if (!names.count(l.to)) errors.Add(path + ".to", "unknown cluster \"" + l.to + "\"");
    if (l.from == l.to) errors.Add(path + ".to", "a link joins two different clusters");
    if (l.latency_ns < 0) errors.Add(path + ".latency_ns", "must be >= 0");
    for (int k = 0; k < kNumServiceClasses; ++k) {
      if (l.free_bandwidth_bps[k] < 0) {
        errors.Add(absl::StrCat(path, ".free_bandwidth_bps[", k, "]"), "must be >= 0");
      }
    }
  }
  return errors.ToStatus();
}

int Application::WorkloadIndex(const std::string& name) const {
  for (size_t i = 0; i < workloads.size(); ++i) {
    if (workloads[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

absl::Status Application::Validate() const {
  FieldErrors errors;
  if (name.empty()) errors.Add("name", "must not be empty");
  std::set<std::string> names;
  for (size_t i = 0; i < workloads.size(); ++i) {
    const Workload& w = workloads[i];
    std::string path = absl::StrCat("workloads[", i, "]");
    if (w.name.empty()) errors.Add(path + ".name", "must not be empty");
    if (!names.insert(w.name).second) errors.Add(path + ".name", "duplicate \"" + w.name + "\"");
    CheckResources(w.requests, path + ".requests", errors);
    if (w.availability_kpi < 0 || w.availability_kpi > 100) {
      errors.Add(path + ".availability_kpi", "must be in 0-100");
    }
    if (w.max_latency_to_origin_ns < 0) {
      errors.Add(path + ".max_latency_to_origin_ns", "must be >= 0");
    }
    if (w.max_latency_to_origin_ns > 0 && w.origin_cluster.empty()) {
      errors.Add(path + ".origin_cluster", "required when max_latency_to_origin_ns is set");
    }
  }
  std::set<std::string> channel_names;
  for (size_t i = 0; i < channels.size(); ++i) {
    const Channel& c = channels[i];
    std::string path = absl::StrCat("channels[", i, "]");
    if (c.name.empty()) errors.Add(path + ".name", "must not be empty");
    if (!channel_names.insert(c.name).second) {
      errors.Add(path + ".name", "duplicate \"" + c.name + "\"");
    }
    if (!names.count(c.from)) errors.Add(path + ".from", "unknown workload \"" + c.from + "\"");
    if (!names.count(c.to)) errors.Add(path + ".to", "unknown workload \"" + c.to + "\"");
    if (c.from == c.to) errors.Add(path + ".to", "a channel joins two different workloads");
    if (c.min_bandwidth_bps < 0) errors.Add(path + ".min_bandwidth_bps", "must be >= 0");
    if (c.max_delay_ns < 0) errors.Add(path + ".max_delay_ns", "must be >= 0");
  }
  return errors.ToStatus();
}

std::optional<int64_t> PathLatencyNs(const Federation& federation, const Placement& a,
                                     const Placement& b) {
  const Cluster* ca = federation.FindCluster(a.cluster);
  const Cluster* cb = federation.FindCluster(b.cluster);
  if (ca == nullptr || cb == nullptr) return std::nullopt;
  if (a.cluster == b.cluster) return a.node == b.node ? 0 : ca->intra_latency_ns;
  const Link* link = federation.FindLink(a.cluster, b.cluster);
  if (link == nullptr) return std::nullopt;
  return ca->intra_latency_ns + link->latency_ns + cb->intra_latency_ns;
}

std::string LocationSpreadRefusal(const Application& app,
                                  const std::map<std::string, Placement>& placed, const Workload& w,
                                  const std::string& cluster, bool spread_first, bool may_burst) {
  if (w.max_locations <= 0) return "";
  std::set<std::string> spans;
  for (const auto& [name, at] : placed) {
    const int i = name == w.name ? -1 : app.WorkloadIndex(name);
    if (i >= 0 && app.workloads[i].service == w.service) spans.insert(at.cluster);
  }
  const int n = static_cast<int>(spans.size());
  if (spans.count(cluster)) {
    if (n < w.max_locations && spread_first) {
      return absl::StrCat("numberOfLocations ", w.max_locations, ": service ", w.service,
                          " spreads to a cluster it does not run in first");
    }
    return "";
  }
  if (n < w.max_locations || may_burst) return "";
  return absl::StrCat("numberOfLocations ", w.max_locations, ": service ", w.service,
                      " already runs in ", absl::StrJoin(spans, ", "),
                      w.bursting ? " (it bursts only once they are full)" : " and bursting is off");
}

}  // namespace codeco::swm
