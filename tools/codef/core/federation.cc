#include "federation.h"

#include "absl/strings/str_cat.h"
#include "codeco/common/quantity.h"
#include "codeco/common/status.h"

namespace codeco::codef {

SynchronizedCluster::SynchronizedCluster(std::unique_ptr<EmulatedCluster> cluster,
                                         const Clock& clock)
    : clock_(clock), cluster_(std::move(cluster)) {
  absl::MutexLock lock(&mu_);
  // The listener runs inside cluster calls, which hold mu_.
  cluster_->SetEventListener([this](const WatchEvent& event)
                                 ABSL_NO_THREAD_SAFETY_ANALYSIS { Dispatch(event); });
}

void SynchronizedCluster::Dispatch(const WatchEvent& event) {
  bool is_node = event.node.has_value();
  for (const auto& [id, s] : subscribers_) {
    if (s.nodes == is_node) s.subscriber->OnEvent(event);
  }
}

absl::StatusOr<SynchronizedCluster::Subscription> SynchronizedCluster::Subscribe(
    bool nodes, const std::string& resource_version, EventSubscriber* subscriber) {
  absl::MutexLock lock(&mu_);
  cluster_->AdvanceTo(clock_.Now());
  auto since = nodes ? cluster_->NodeEventsSince(resource_version)
                     : cluster_->PodEventsSince(resource_version);
  if (!since.ok()) return since.status();
  Subscription out;
  out.backlog = std::move(since->first);
  out.id = next_id_++;
  subscribers_[out.id] = Subscriber{nodes, subscriber};
  return out;
}

void SynchronizedCluster::Unsubscribe(int64_t id) {
  absl::MutexLock lock(&mu_);
  subscribers_.erase(id);
}

std::string ManagedClusterServiceIp(size_t index) {
  return absl::StrCat("127.0.", index + 2, ".1");
}

Federation::Federation(const Scenario& scenario, const Clock& clock, LinkControl* links)
    : scenario_(scenario), clock_(clock), links_(links) {}

absl::StatusOr<std::unique_ptr<Federation>> Federation::Create(
    const Scenario& scenario, const Clock& clock, LinkControl* links,
    CheckpointArchiveStore* archives, FileReader read_file, PodProcessRunner* processes) {
  std::unique_ptr<Federation> f(new Federation(scenario, clock, links));
  std::vector<const ClusterSpec*> all = {&scenario.hub};
  for (const ClusterSpec& c : scenario.clusters) all.push_back(&c);
  for (size_t i = 0; i < all.size(); ++i) {
    const ClusterSpec& spec = *all[i];
    f->names_.push_back(spec.name);
    f->service_ips_[spec.name] = i == 0 ? kHubServiceIp : ManagedClusterServiceIp(i - 1);
    if (spec.nodes.empty()) continue;
    EmulatedClusterOptions options;
    options.name = spec.name;
    options.labels = spec.labels;
    options.pod_start_delay = absl::Nanoseconds(spec.pod_start_delay_ns);
    // Pod IPs: 10.<cluster index + 1>.x.y, distinct per cluster.
    options.pod_ip_prefix = absl::StrCat("10.", i + 1);
    auto cluster =
        std::make_unique<EmulatedCluster>(options, clock, archives, read_file, processes);
    for (const NodeSpec& node : spec.nodes) RETURN_IF_ERROR(cluster->AddNode(node));
    f->lms_[spec.name] = std::make_unique<SynchronizedCluster>(std::move(cluster), clock);
  }
  for (const std::string& from : f->names_) {
    for (const std::string& to : f->names_) {
      if (from == to) continue;
      std::optional<LinkSpec> link = scenario.LinkBetween(from, to);
      LinkProperties p;
      if (link.has_value()) {
        p.one_way_latency_ns = link->one_way_latency_ns;
        p.bandwidth_bps = link->bandwidth_bps;
        p.loss = link->loss;
      } else {
        p.cut = true;  // single-hop model: no link, no traffic
      }
      RETURN_IF_ERROR(links->SetLink(from, to, p));
    }
  }
  return f;
}

std::vector<std::string> Federation::ClusterNames() const { return names_; }

SynchronizedCluster* Federation::FindLms(const std::string& name) const {
  auto it = lms_.find(name);
  return it == lms_.end() ? nullptr : it->second.get();
}

absl::StatusOr<std::string> Federation::ServiceIp(const std::string& name) const {
  auto it = service_ips_.find(name);
  if (it == service_ips_.end()) return absl::NotFoundError(absl::StrCat("no cluster ", name));
  return it->second;
}

void Federation::SetEndpoints(const std::string& name, const std::string& lms,
                              const std::string& relay) {
  absl::MutexLock lock(&mu_);
  endpoints_[name] = {lms, relay};
}

void Federation::SetMetricsEndpoint(const std::string& name, const std::string& metrics) {
  absl::MutexLock lock(&mu_);
  metrics_endpoints_[name] = metrics;
}

std::vector<codeco::codef::v1::EmulatedCluster> Federation::ListClusters() const {
  std::vector<codeco::codef::v1::EmulatedCluster> out;
  for (const std::string& name : names_) {
    const ClusterSpec* spec = scenario_.FindCluster(name);
    codeco::codef::v1::EmulatedCluster c;
    c.set_name(name);
    c.set_hub(name == scenario_.hub.name);
    *c.mutable_labels() = spec->labels;
    c.set_parent(spec->parent);
    c.set_service_ip(service_ips_.at(name));
    {
      absl::MutexLock lock(&mu_);
      auto it = endpoints_.find(name);
      if (it != endpoints_.end()) {
        c.set_lms_endpoint(it->second.first);
        c.set_relay_endpoint(it->second.second);
      }
      c.set_partitioned(partitioned_.count(name) > 0);
      if (auto m = metrics_endpoints_.find(name); m != metrics_endpoints_.end()) {
        c.set_metrics_endpoint(m->second);
      }
    }
    if (SynchronizedCluster* lms = FindLms(name)) {
      auto [nodes, ready] = lms->Run([](EmulatedCluster& e) { return e.NodeCounts(); });
      c.set_node_count(nodes);
      c.set_ready_node_count(ready);
    }
    out.push_back(std::move(c));
  }
  return out;
}

absl::Status Federation::CheckCluster(const std::string& name, const std::string& field) const {
  if (name.empty()) return InvalidFieldError(field, "is required");
  if (service_ips_.count(name) == 0) {
    return absl::NotFoundError(absl::StrCat(field, ": no cluster ", name));
  }
  return absl::OkStatus();
}

SynchronizedCluster* Federation::RequireLms(const std::string& name, absl::Status* status) const {
  *status = CheckCluster(name, "cluster");
  if (!status->ok()) return nullptr;
  SynchronizedCluster* lms = FindLms(name);
  if (lms == nullptr) {
    *status = absl::FailedPreconditionError(absl::StrCat("cluster ", name, " has no nodes"));
  }
  return lms;
}

absl::Status Federation::SetLink(const std::string& from, const std::string& to,
                                 const LinkProperties& p, bool symmetric) {
  RETURN_IF_ERROR(CheckCluster(from, "from_cluster"));
  RETURN_IF_ERROR(CheckCluster(to, "to_cluster"));
  if (from == to) return InvalidFieldError("to_cluster", "must differ from from_cluster");
  if (p.one_way_latency_ns < 0) {
    return InvalidFieldError("conditions.one_way_latency_ns", "must not be negative");
  }
  if (p.bandwidth_bps < 0)
    return InvalidFieldError("conditions.bandwidth_bps", "must not be negative");
  if (!(p.loss >= 0 && p.loss <= 1)) {
    return InvalidFieldError("conditions.loss_ratio", "must be between 0 and 1");
  }
  RETURN_IF_ERROR(links_->SetLink(from, to, p));
  if (symmetric) RETURN_IF_ERROR(links_->SetLink(to, from, p));
  return absl::OkStatus();
}

absl::Status Federation::PutVirtualLink(const std::string& id, const std::string& source,
                                        const std::string& target, const std::string& endpoint) {
  FieldErrors errors;
  if (id.empty() || id.size() > 253) errors.Add("virtual_link.id", "must be 1-253 characters");
  if (absl::Status s = CheckCluster(source, "virtual_link.source_cluster"); !s.ok()) {
    errors.Add("virtual_link.source_cluster", "unknown cluster \"" + source + "\"");
  }
  if (absl::Status s = CheckCluster(target, "virtual_link.target_cluster"); !s.ok()) {
    errors.Add("virtual_link.target_cluster", "unknown cluster \"" + target + "\"");
  } else if (source == target) {
    errors.Add("virtual_link.target_cluster", "must differ from source_cluster");
  }
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == endpoint.size() ||
      endpoint.size() > 300) {
    errors.Add("virtual_link.target_endpoint", "must be host:port");
  }
  RETURN_IF_ERROR(errors.ToStatus());
  return links_->PutVirtualLink(id, source, target, endpoint);
}

absl::Status Federation::DeleteVirtualLink(const std::string& id) {
  if (id.empty()) return InvalidFieldError("id", "required");
  return links_->DeleteVirtualLink(id);
}

absl::StatusOr<LinkProperties> Federation::GetLink(const std::string& from,
                                                   const std::string& to) const {
  RETURN_IF_ERROR(CheckCluster(from, "from_cluster"));
  RETURN_IF_ERROR(CheckCluster(to, "to_cluster"));
  return links_->GetLink(from, to);
}

absl::Status Federation::ResetLink(const std::string& from, const std::string& to) {
  RETURN_IF_ERROR(CheckCluster(from, "from_cluster"));
  RETURN_IF_ERROR(CheckCluster(to, "to_cluster"));
  if (from == to) return InvalidFieldError("to_cluster", "must differ from from_cluster");
  for (const auto& [a, b] : {std::pair{from, to}, std::pair{to, from}}) {
    std::optional<LinkSpec> link = scenario_.LinkBetween(a, b);
    LinkProperties p;
    if (link.has_value()) {
      p.one_way_latency_ns = link->one_way_latency_ns;
      p.bandwidth_bps = link->bandwidth_bps;
      p.loss = link->loss;
    } else {
      p.cut = true;
    }
    RETURN_IF_ERROR(links_->SetLink(a, b, p));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Federation::FailNode(const std::string& cluster, const std::string& node) {
  absl::Status status;
  SynchronizedCluster* lms = RequireLms(cluster, &status);
  if (lms == nullptr) return status;
  if (node.empty()) return InvalidFieldError("node", "is required");
  return lms->Run([&](EmulatedCluster& c) { return c.FailNode(node); });
}

absl::Status Federation::RecoverNode(const std::string& cluster, const std::string& node) {
  absl::Status status;
  SynchronizedCluster* lms = RequireLms(cluster, &status);
  if (lms == nullptr) return status;
  if (node.empty()) return InvalidFieldError("node", "is required");
  return lms->Run([&](EmulatedCluster& c) { return c.RecoverNode(node); });
}

absl::Status Federation::SetPartitioned(const std::string& cluster, bool partitioned) {
  RETURN_IF_ERROR(CheckCluster(cluster, "cluster"));
  if (cluster == scenario_.hub.name) {
    return InvalidFieldError("cluster", "is the hub: use CutHub / HealHub");
  }
  RETURN_IF_ERROR(links_->SetPartitioned(cluster, partitioned));
  absl::MutexLock lock(&mu_);
  if (partitioned) {
    partitioned_.insert(cluster);
  } else {
    partitioned_.erase(cluster);
  }
  return absl::OkStatus();
}

absl::Status Federation::SetHubCut(bool cut) {
  RETURN_IF_ERROR(links_->SetPartitioned(scenario_.hub.name, cut));
  absl::MutexLock lock(&mu_);
  if (cut) {
    partitioned_.insert(scenario_.hub.name);
  } else {
    partitioned_.erase(scenario_.hub.name);
  }
  return absl::OkStatus();
}

absl::Status Federation::SetPodLoad(const std::string& cluster, const std::string& pod,
                                    const std::string& profile_text) {
  absl::Status status;
  SynchronizedCluster* lms = RequireLms(cluster, &status);
  if (lms == nullptr) return status;
  if (pod.empty()) return InvalidFieldError("pod", "is required");
  return lms->Run([&](EmulatedCluster& c) { return c.SetPodLoad(pod, profile_text); });
}

absl::Status Federation::EndPod(const std::string& cluster, const std::string& pod, bool succeeded,
                                const std::string& message) {
  absl::Status status;
  SynchronizedCluster* lms = RequireLms(cluster, &status);
  if (lms == nullptr) return status;
  if (pod.empty()) return InvalidFieldError("pod", "is required");
  return lms->Run([&](EmulatedCluster& c) { return c.EndPod(pod, succeeded, message); });
}

absl::Status Federation::SetClusterLoad(const std::string& cluster, double factor) {
  absl::Status status;
  SynchronizedCluster* lms = RequireLms(cluster, &status);
  if (lms == nullptr) return status;
  return lms->Run([&](EmulatedCluster& c) { return c.SetLoadFactor(factor); });
}

absl::StatusOr<codeco::codef::v1::SetNodeLoadResponse> Federation::SetNodeLoad(
    const std::string& cluster, const std::string& node, const NodeLoadChange& change) {
  absl::Status status;
  SynchronizedCluster* lms = RequireLms(cluster, &status);
  if (lms == nullptr) return status;
  if (node.empty()) return InvalidFieldError("node", "is required");
  return lms->Run(
      [&](EmulatedCluster& c) -> absl::StatusOr<codeco::codef::v1::SetNodeLoadResponse> {
        ASSIGN_OR_RETURN(NodeLoad load, c.SetNodeLoad(node, change));
        ASSIGN_OR_RETURN(codeco::lms::v1::Node n, c.GetNode(node));
        codeco::codef::v1::SetNodeLoadResponse out;
        out.set_cpu_millicores(load.cpu_millicores);
        out.set_memory_bytes(load.memory_bytes);
        out.set_cpu_capacity_millicores(n.capacity().cpu_millicores());
        return out;
      });
}

void Federation::StartTimeline(absl::Time start) {
  absl::MutexLock lock(&mu_);
  timeline_start_ = start;
  next_fault_ = 0;
}

absl::Status Federation::ApplyFault(const FaultSpec& fault) {
  switch (fault.action) {
    case FaultAction::kLinkDegrade: {
      for (const auto& [a, b] :
           {std::pair{fault.from, fault.to}, std::pair{fault.to, fault.from}}) {
        ASSIGN_OR_RETURN(LinkProperties p, links_->GetLink(a, b));
        if (fault.one_way_latency_ns) p.one_way_latency_ns = *fault.one_way_latency_ns;
        if (fault.bandwidth_bps) p.bandwidth_bps = *fault.bandwidth_bps;
        if (fault.loss) p.loss = *fault.loss;
        p.cut = false;
        RETURN_IF_ERROR(links_->SetLink(a, b, p));
        if (!fault.symmetric) break;
      }
      return absl::OkStatus();
    }
    case FaultAction::kLinkCut: {
      for (const auto& [a, b] :
           {std::pair{fault.from, fault.to}, std::pair{fault.to, fault.from}}) {
        ASSIGN_OR_RETURN(LinkProperties p, links_->GetLink(a, b));
        p.cut = true;
        RETURN_IF_ERROR(links_->SetLink(a, b, p));
        if (!fault.symmetric) break;
      }
      return absl::OkStatus();
    }
    case FaultAction::kLinkHeal:
      return ResetLink(fault.from, fault.to);
    case FaultAction::kNodeFail:
      return FailNode(fault.cluster, fault.node).status();
    case FaultAction::kNodeRecover:
      return RecoverNode(fault.cluster, fault.node);
    case FaultAction::kClusterPartition:
      return SetPartitioned(fault.cluster, true);
    case FaultAction::kClusterHeal:
      return SetPartitioned(fault.cluster, false);
    case FaultAction::kHubCut:
      return SetHubCut(true);
    case FaultAction::kHubHeal:
      return SetHubCut(false);
    case FaultAction::kLoadSurge:
      return SetClusterLoad(fault.cluster, fault.factor);
    case FaultAction::kNodeLoad: {
      NodeLoadChange change;
      change.cpu_fraction = fault.cpu_fraction;
      change.cpu_millicores = fault.cpu_millicores;
      change.memory_bytes = fault.memory_bytes;
      return SetNodeLoad(fault.cluster, fault.node, change).status();
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> Federation::Tick() {
  std::vector<std::string> applied;
  absl::Time now = clock_.Now();
  for (auto& [name, lms] : lms_) {
    lms->Run([now](EmulatedCluster& c) {
      c.AdvanceTo(now);
      return 0;
    });
  }
  std::vector<FaultSpec> due;
  std::vector<std::string> surges_over;
  std::vector<std::pair<std::string, std::string>> node_loads_over;
  {
    absl::MutexLock lock(&mu_);
    if (!timeline_start_.has_value()) return applied;
    while (next_fault_ < scenario_.faults.size() &&
           *timeline_start_ + absl::Nanoseconds(scenario_.faults[next_fault_].at_ns) <= now) {
      const FaultSpec& fault = scenario_.faults[next_fault_++];
      due.push_back(fault);
      if (fault.action == FaultAction::kLoadSurge && fault.duration_ns > 0) {
        surge_ends_.emplace(*timeline_start_ + absl::Nanoseconds(fault.at_ns + fault.duration_ns),
                            fault.cluster);
      }
      if (fault.action == FaultAction::kNodeLoad && fault.duration_ns > 0) {
        node_load_ends_.emplace(
            *timeline_start_ + absl::Nanoseconds(fault.at_ns + fault.duration_ns),
            std::pair{fault.cluster, fault.node});
      }
    }
    while (!surge_ends_.empty() && surge_ends_.begin()->first <= now) {
      surges_over.push_back(surge_ends_.begin()->second);
      surge_ends_.erase(surge_ends_.begin());
    }
    while (!node_load_ends_.empty() && node_load_ends_.begin()->first <= now) {
      node_loads_over.push_back(node_load_ends_.begin()->second);
      node_load_ends_.erase(node_load_ends_.begin());
    }
  }
  for (const FaultSpec& fault : due) {
    absl::Status status = ApplyFault(fault);
    std::string target = fault.node.empty() ? fault.cluster : fault.cluster + "/" + fault.node;
    if (!fault.from.empty()) target = fault.from + "<->" + fault.to;
    applied.push_back(absl::StrCat("at ", FormatDurationNanos(fault.at_ns), ": ",
                                   FaultActionName(fault.action), target.empty() ? "" : " ", target,
                                   ": ", status.ok() ? "ok" : status.ToString()));
  }
  for (const std::string& cluster : surges_over) {
    absl::Status status = SetClusterLoad(cluster, 1.0);
    applied.push_back(
        absl::StrCat("load_surge over ", cluster, ": ", status.ok() ? "ok" : status.ToString()));
  }
  for (const auto& [cluster, node] : node_loads_over) {
    NodeLoadChange none{.cpu_millicores = 0, .memory_bytes = 0};
    absl::Status status = SetNodeLoad(cluster, node, none).status();
    applied.push_back(absl::StrCat("node_load over ", cluster, "/", node, ": ",
                                   status.ok() ? "ok" : status.ToString()));
  }
  return applied;
}

}  // namespace codeco::codef
