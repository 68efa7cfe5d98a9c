#include "swm/server/remote_cluster.h"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "codeco/common/call_deadline.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/status.h"

namespace codeco::swm {
namespace {

namespace pb = codeco::swm::v1;
namespace common = codeco::common::v1;

common::ResourceQuantities ToQuantities(const Resources& r) {
  common::ResourceQuantities q;
  q.set_cpu_millicores(r.cpu_millis);
  q.set_memory_bytes(r.memory_bytes);
  q.set_gpu(r.gpu);
  return q;
}

Resources ToResources(const common::ResourceQuantities& q) {
  return Resources{q.cpu_millicores(), q.memory_bytes(), q.gpu()};
}

common::ClusterLabels ToProtoLabels(const ClusterLabels& l) {
  common::ClusterLabels out;
  out.set_region(l.region);
  out.set_country(l.country);
  out.set_provider(l.provider);
  out.set_tier(ParseTier(l.tier));
  return out;
}

ClusterLabels FromProtoLabels(const common::ClusterLabels& l) {
  return ClusterLabels{.region = l.region(),
                       .country = l.country(),
                       .tier = l.tier() == common::TIER_UNSPECIFIED ? "" : TierName(l.tier()),
                       .provider = l.provider()};
}

pb::ClusterAggregate ToProtoAggregate(const ClusterAggregate& a) {
  pb::ClusterAggregate out;
  out.set_cluster(a.name);
  *out.mutable_cluster_labels() = ToProtoLabels(a.labels);
  common::CapacitySummary* c = out.mutable_capacity();
  *c->mutable_allocatable() = ToQuantities(a.capacity);
  *c->mutable_free() = ToQuantities(a.free);
  *c->mutable_largest_free_node() = ToQuantities(a.largest_free_node);
  c->set_node_count(a.node_count);
  c->set_ready_node_count(a.node_count);
  return out;
}

}  // namespace

pb::SolveClusterRequest ToSolveClusterRequest(const L2Request& req, const std::string& plan_id) {
  const Application& app = *req.app;
  pb::SolveClusterRequest out;
  out.set_plan_id(plan_id);
  out.set_cluster(req.cluster.name);
  std::set<std::string> pending(req.pending.begin(), req.pending.end());
  for (const std::string& name : req.pending) {
    int wi = app.WorkloadIndex(name);
    if (wi < 0) continue;
    const Workload& w = app.workloads[wi];
    pb::Workload* p = out.add_workloads();
    p->set_name(w.name);
    p->set_application(app.name);
    p->set_service(w.service);
    *p->mutable_requests() = ToQuantities(w.requests);
    p->set_stateful(w.stateful);
    p->set_availability_kpi(w.availability_kpi);
    p->set_data_locality(w.data_locality);
  }
  for (const Channel& ch : app.channels) {
    if (!pending.count(ch.from) && !pending.count(ch.to)) continue;
    codeco::acm::v1::Channel* c = out.add_channels();
    c->set_name(ch.name);
    c->set_from_service(ch.from);
    c->set_to_service(ch.to);
    c->set_min_bandwidth_bps(ch.min_bandwidth_bps);
    c->set_max_delay_ns(ch.max_delay_ns);
    c->set_service_class(ch.service_class == ServiceClass::kAssured
                             ? common::SERVICE_CLASS_ASSURED
                             : common::SERVICE_CLASS_BESTEFFORT);
  }
  for (const auto& [name, at] : req.placed) {
    pb::WorkloadTarget* t = out.add_placed();
    t->set_workload(name);
    if (int wi = app.WorkloadIndex(name); wi >= 0) t->set_service(app.workloads[wi].service);
    t->set_cluster(at.cluster);
    t->set_node(at.node);
  }
  *out.add_unvisited() = ToProtoAggregate(AggregateOf(req.cluster));
  for (const ClusterAggregate& a : req.others) {
    pb::ClusterAggregate* p = out.add_unvisited();
    *p = ToProtoAggregate(a);
    for (const Link& l : req.links) {
      if (l.from != req.cluster.name || l.to != a.name) continue;
      p->set_link_latency_ns(std::max<int64_t>(l.latency_ns, 1));
      p->set_link_bandwidth_bps(std::min(l.free_bandwidth_bps[0], l.free_bandwidth_bps[1]));
    }
  }
  // The intents are the application's, copied onto every workload.
  for (const std::string& name : req.pending) {
    int wi = app.WorkloadIndex(name);
    if (wi < 0) continue;
    const Workload& w = app.workloads[wi];
    codeco::acm::v1::Intents* intents = out.mutable_intents();
    for (const std::string& r : w.allowed_regions) intents->add_allowed_regions(r);
    for (const std::string& c : w.allowed_countries) intents->add_allowed_countries(c);
    intents->set_origin(w.origin_cluster);
    intents->set_max_latency_to_origin_ns(w.max_latency_to_origin_ns);
    break;
  }
  out.set_performance_profile(
      ParsePerformanceProfile(app.performance_profile).value_or(common::PERFORMANCE_PROFILE_LATENCY));
  out.mutable_custom_profile_weights()->insert(app.custom_profile_weights.begin(),
                                               app.custom_profile_weights.end());
  out.set_relax_soft_constraints(req.relax_soft);
  return out;
}

absl::StatusOr<std::unique_ptr<McSolve>> FromSolveClusterRequest(
    const pb::SolveClusterRequest& request, Cluster self, int64_t intra_latency_ns) {
  FieldErrors errors;
  if (request.cluster() != self.name) {
    errors.Add("cluster", "this swm solves for cluster \"" + self.name + "\", not \"" +
                              request.cluster() + "\"");
  }
  if (request.workloads().empty()) errors.Add("workloads", "must list a workload");
  auto solve = std::make_unique<McSolve>();
  Application& app = solve->app;
  std::set<std::string> names;
  for (int i = 0; i < request.workloads_size(); ++i) {
    const pb::Workload& w = request.workloads(i);
    std::string path = absl::StrCat("workloads[", i, "]");
    if (w.name().empty()) {
      errors.Add(path + ".name", "is required");
    } else if (!names.insert(w.name()).second) {
      errors.Add(path + ".name", "duplicate workload \"" + w.name() + "\"");
    }
    if (w.application().empty()) {
      errors.Add(path + ".application", "is required");
    } else if (app.name.empty()) {
      app.name = w.application();
    } else if (w.application() != app.name) {
      errors.Add(path + ".application", "must be the same for every workload");
    }
    const auto& q = w.requests();
    if (q.cpu_millicores() < 0 || q.memory_bytes() < 0 || q.gpu() < 0) {
      errors.Add(path + ".requests", "must not be negative");
    }
    if (w.availability_kpi() < 0 || w.availability_kpi() > 100) {
      errors.Add(path + ".availability_kpi", "must be 0-100");
    }
  }
  std::set<std::string> placed_names;
  for (int i = 0; i < request.placed_size(); ++i) {
    const pb::WorkloadTarget& t = request.placed(i);
    std::string path = absl::StrCat("placed[", i, "]");
    if (t.workload().empty()) errors.Add(path + ".workload", "is required");
    if (t.cluster().empty()) errors.Add(path + ".cluster", "is required");
    if (t.node().empty()) errors.Add(path + ".node", "is required");
    if (names.count(t.workload())) {
      errors.Add(path + ".workload", "is also among the workloads to place");
    } else if (!t.workload().empty() && !placed_names.insert(t.workload()).second) {
      errors.Add(path + ".workload", "duplicate workload \"" + t.workload() + "\"");
    }
  }
  for (int i = 0; i < request.channels_size(); ++i) {
    const codeco::acm::v1::Channel& c = request.channels(i);
    std::string path = absl::StrCat("channels[", i, "]");
    if (c.name().empty()) errors.Add(path + ".name", "is required");
    for (const auto& [field, end] :
         {std::pair{"from_service", c.from_service()}, std::pair{"to_service", c.to_service()}}) {
      if (!names.count(end) && !placed_names.count(end)) {
        errors.Add(path + "." + field, "unknown workload \"" + end + "\"");
      }
    }
    if (c.min_bandwidth_bps() < 0) errors.Add(path + ".min_bandwidth_bps", "must not be negative");
    if (c.max_delay_ns() < 0) errors.Add(path + ".max_delay_ns", "must not be negative");
  }
  for (int i = 0; i < request.unvisited_size(); ++i) {
    if (request.unvisited(i).cluster().empty()) {
      errors.Add(absl::StrCat("unvisited[", i, "].cluster"), "is required");
    }
  }
  const codeco::acm::v1::Intents& intents = request.intents();
  if (intents.max_latency_to_origin_ns() < 0) {
    errors.Add("intents.max_latency_to_origin_ns", "must not be negative");
  }
  RETURN_IF_ERROR(errors.ToStatus());

  for (const pb::Workload& w : request.workloads()) {
    Workload core{
        .name = w.name(),
        .service = w.service(),
        .requests = ToResources(w.requests()),
        .stateful = w.stateful(),
        .availability_kpi = w.availability_kpi(),
        .allowed_regions = {intents.allowed_regions().begin(), intents.allowed_regions().end()},
        .allowed_countries = {intents.allowed_countries().begin(),
                              intents.allowed_countries().end()},
        .data_locality = w.data_locality()};
    if (intents.max_latency_to_origin_ns() > 0) {
      core.origin_cluster = intents.origin();
      core.max_latency_to_origin_ns = intents.max_latency_to_origin_ns();
    }
    app.workloads.push_back(std::move(core));
  }
  // Workloads placed elsewhere are channel ends only: never placed here.
  for (const pb::WorkloadTarget& t : request.placed()) {
    app.workloads.push_back(Workload{.name = t.workload(), .service = t.service()});
  }
  for (const codeco::acm::v1::Channel& c : request.channels()) {
    app.channels.push_back(
        Channel{.name = c.name(),
                .from = c.from_service(),
                .to = c.to_service(),
                .min_bandwidth_bps = c.min_bandwidth_bps(),
                .max_delay_ns = c.max_delay_ns(),
                .service_class = c.service_class() == common::SERVICE_CLASS_ASSURED
                                     ? ServiceClass::kAssured
                                     : ServiceClass::kBestEffort});
  }
  app.performance_profile = PerformanceProfileName(request.performance_profile());
  app.custom_profile_weights = {request.custom_profile_weights().begin(),
                                request.custom_profile_weights().end()};
  absl::Status valid = app.Validate();
  if (!valid.ok()) return InvalidFieldError("workloads", std::string(valid.message()));

  L2Request& req = solve->request;
  req.app = &app;
  self.intra_latency_ns = intra_latency_ns;
  std::set<std::string> hosting;
  for (const pb::WorkloadTarget& t : request.placed()) {
    hosting.insert(t.cluster());
    req.placed[t.workload()] = Placement{t.cluster(), t.node()};
  }
  for (const pb::ClusterAggregate& a : request.unvisited()) {
    if (a.cluster() == self.name) {
      self.labels = FromProtoLabels(a.cluster_labels());
      continue;
    }
    const common::CapacitySummary& c = a.capacity();
    req.others.push_back(ClusterAggregate{.name = a.cluster(),
                                          .labels = FromProtoLabels(a.cluster_labels()),
                                          .intra_latency_ns = intra_latency_ns,
                                          .capacity = ToResources(c.allocatable()),
                                          .free = ToResources(c.free()),
                                          .largest_free_node = ToResources(c.largest_free_node()),
                                          .node_count = c.ready_node_count()});
    if (!hosting.count(a.cluster())) req.unvisited.push_back(a.cluster());
    if (a.link_latency_ns() > 0) {
      for (const auto& [from, to] :
           {std::pair{self.name, a.cluster()}, std::pair{a.cluster(), self.name}}) {
        req.links.push_back(
            Link{.from = from,
                 .to = to,
                 .latency_ns = a.link_latency_ns(),
                 .free_bandwidth_bps = {a.link_bandwidth_bps(), a.link_bandwidth_bps()}});
      }
    }
  }
  req.cluster = std::move(self);
  for (const pb::Workload& w : request.workloads()) req.pending.push_back(w.name());
  req.relax_soft = request.relax_soft_constraints();
  req.allow_defer = !req.relax_soft;
  return solve;
}

pb::SolveClusterResponse ToSolveClusterResponse(const McSolve& solve, const L2Result& result) {
  pb::SolveClusterResponse out;
  const Application& app = solve.app;
  for (const auto& [workload, node] : result.node_of) {
    pb::WorkloadTarget* t = out.add_assignments();
    t->set_workload(workload);
    if (int wi = app.WorkloadIndex(workload); wi >= 0) t->set_service(app.workloads[wi].service);
    t->set_cluster(solve.request.cluster.name);
    t->set_node(node);
    t->set_pod(app.name + "-" + workload);
    t->set_gateway_latency_ns(solve.request.cluster.intra_latency_ns);
  }
  for (const auto& [workload, reason] : result.unfit) {
    pb::UnplacedWorkload* u = out.add_unplaced();
    u->set_workload(workload);
    u->set_reason(reason);
  }
  for (const std::string& workload : result.deferred) {
    pb::UnplacedWorkload* u = out.add_unplaced();
    u->set_workload(workload);
    u->set_reason(kDeferredReason);
  }
  size_t pending = solve.request.pending.size();
  out.set_score(pending == 0 ? 0.0
                             : 100.0 * static_cast<double>(result.node_of.size()) /
                                   static_cast<double>(pending));
  return out;
}

L2Result FromSolveClusterResponse(const pb::SolveClusterResponse& response) {
  L2Result out;
  for (const pb::WorkloadTarget& t : response.assignments()) out.node_of[t.workload()] = t.node();
  for (const pb::UnplacedWorkload& u : response.unplaced()) {
    if (absl::StartsWith(u.reason(), kDeferredReason)) {
      out.deferred.push_back(u.workload());
    } else {
      out.unfit[u.workload()] = u.reason();
    }
  }
  return out;
}

pb::ClusterNode ToClusterNode(const Node& node) {
  pb::ClusterNode out;
  out.set_name(node.name);
  out.mutable_labels()->insert(node.labels.begin(), node.labels.end());
  *out.mutable_capacity() = ToQuantities(node.capacity);
  *out.mutable_allocated() = ToQuantities(node.allocated);
  out.set_schedulable(node.schedulable);
  return out;
}

Node FromClusterNode(const pb::ClusterNode& node) {
  Node out{.name = node.name(),
           .capacity = ToResources(node.capacity()),
           .allocated = ToResources(node.allocated()),
           .schedulable = node.schedulable()};
  for (const auto& [key, value] : node.labels()) out.labels[key] = value;
  return out;
}

ClusterLabels LabelsFromNodes(const std::vector<Node>& nodes) {
  ClusterLabels out;
  for (const auto& [key, field] : {std::pair{"codeco.io/region", &ClusterLabels::region},
                                   std::pair{"codeco.io/country", &ClusterLabels::country},
                                   std::pair{"codeco.io/tier", &ClusterLabels::tier},
                                   std::pair{"codeco.io/provider", &ClusterLabels::provider}}) {
    for (const Node& n : nodes) {
      auto it = n.labels.find(key);
      if (it == n.labels.end() || it->second.empty()) continue;
      out.*field = it->second;
      break;
    }
  }
  return out;
}

absl::StatusOr<McView> ReadClusterView(const std::shared_ptr<grpc::Channel>& channel,
                                       const std::string& cluster, absl::Duration timeout,
                                       absl::Time deadline) {
  auto stub = pb::SwmService::NewStub(channel);
  pb::GetClusterViewRequest request;
  request.set_cluster(cluster);
  McView view;
  do {
    grpc::ClientContext context;
    SetOutgoingDeadline(context, timeout, deadline);
    pb::GetClusterViewResponse response;
    grpc::Status status = stub->GetClusterView(&context, request, &response);
    if (!status.ok()) {
      absl::Status s = FromGrpcStatus(status);
      return absl::Status(
          s.code(), absl::StrCat("swm of cluster ", cluster, ": GetClusterView: ", s.message()));
    }
    for (const pb::ClusterNode& n : response.nodes()) view.nodes.push_back(FromClusterNode(n));
    view.solves_own_l2 = response.solves_own_l2();
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  return view;
}

RemoteL2Solver::RemoteL2Solver(std::map<std::string, std::shared_ptr<grpc::Channel>> endpoints,
                               L2Solver& local, absl::Duration timeout)
    : local_(local), timeout_(timeout) {
  for (auto& [cluster, channel] : endpoints) {
    stubs_[cluster] = pb::SwmService::NewStub(std::move(channel));
  }
}

absl::StatusOr<L2Result> RemoteL2Solver::Solve(const L2Request& request) {
  auto it = stubs_.find(request.cluster.name);
  if (it == stubs_.end()) return local_.Solve(request);
  if (request.app == nullptr) return absl::InvalidArgumentError("app: required");
  pb::SolveClusterRequest call = ToSolveClusterRequest(request, request.app->name);
  pb::SolveClusterResponse response;
  grpc::Status status = it->second->SolveCluster(OutgoingContext(timeout_).get(), call, &response);
  if (!status.ok()) {
    absl::Status s = FromGrpcStatus(status);
    return absl::Status(s.code(), absl::StrCat("swm of cluster ", request.cluster.name,
                                               ": SolveCluster: ", s.message()));
  }
  return FromSolveClusterResponse(response);
}

RemoteClusterExecutor::RemoteClusterExecutor(std::shared_ptr<grpc::Channel> channel,
                                             absl::Duration timeout, PodTemplates templates,
                                             ViewVersionSink on_version)
    : stub_(pb::SwmService::NewStub(std::move(channel))),
      timeout_(timeout),
      templates_(std::move(templates)),
      on_version_(std::move(on_version)) {}

absl::Status RemoteClusterExecutor::Reserve(const std::string& reservation_id,
                                            const std::vector<ReservationItem>& items,
                                            absl::Duration lease) {
  std::vector<std::string> parts = absl::StrSplit(reservation_id, '/');
  int64_t revision = 0;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[1], &revision)) {
    return absl::InvalidArgumentError("reservation id \"" + reservation_id +
                                      "\" is not <application>/<revision>/<cluster>");
  }
  pb::ReserveRequest request;
  request.set_reservation_id(reservation_id);
  request.set_application(parts[0]);
  request.set_plan_revision(revision);
  request.set_lease_duration_ns(absl::ToInt64Nanoseconds(lease));
  for (const ReservationItem& item : items) {
    pb::ReservedItem* p = request.add_items();
    p->set_workload(item.workload.empty() ? item.pod : item.workload);
    p->set_node(item.node);
    *p->mutable_resources() = ToQuantities(item.requests);
    auto it = templates_.find(item.pod);
    if (it == templates_.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("reservation ", reservation_id, ": no pod template for pod ", item.pod));
    }
    *p->mutable_pod() = it->second;
  }
  pb::ReserveResponse response;
  absl::Status st =
      FromGrpcStatus(stub_->Reserve(OutgoingContext(timeout_).get(), request, &response));
  if (st.ok() && on_version_) on_version_(response.view_version());
  return st;
}

absl::Status RemoteClusterExecutor::Commit(const std::string& reservation_id) {
  pb::CommitRequest request;
  request.set_reservation_id(reservation_id);
  pb::CommitResponse response;
  absl::Status st =
      FromGrpcStatus(stub_->Commit(OutgoingContext(timeout_).get(), request, &response));
  if (st.ok() && on_version_) on_version_(response.view_version());
  return st;
}

absl::Status RemoteClusterExecutor::Release(const std::string& reservation_id) {
  return ReleaseReporting(reservation_id, "released by the hub").status();
}

absl::StatusOr<std::optional<pb::Reservation>> RemoteClusterExecutor::ReleaseReporting(
    const std::string& reservation_id, const std::string& reason,
    const std::vector<std::string>& pods) {
  pb::ReleaseRequest request;
  request.set_reservation_id(reservation_id);
  request.set_reason(reason);
  for (const std::string& pod : pods) request.add_pods(pod);
  pb::ReleaseResponse response;
  RETURN_IF_ERROR(
      FromGrpcStatus(stub_->Release(OutgoingContext(timeout_).get(), request, &response)));
  if (on_version_) on_version_(response.view_version());
  if (!response.has_reservation()) return std::nullopt;
  return response.reservation();
}

}  // namespace codeco::swm
