#include "netma/server/netma_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "codeco/common/authz.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/logging.h"
#include "codeco/common/metrics.h"
#include "codeco/common/serve_on_executor.h"
#include "codeco/common/status.h"
#include "codeco/common/tls.h"
#include "netma/core/alto.h"
#include "netma/server/codef_edge_devices.h"
#include "netma/store/kv_virtual_link_repository.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace codeco::netma {

namespace v1 = codeco::netma::v1;

namespace {

constexpr int kDefaultPageSize = 100;
constexpr int kMaxPageSize = 1000;
constexpr int64_t kMaxBulkPayload = 1024 * 1024;

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context, const absl::Status& status) {
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

bool IsLabel(const std::string& s) {
  return !s.empty() && s.size() <= 63 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

}  // namespace

absl::StatusOr<std::map<std::string, std::vector<std::string>>> ParseNeighborhoods(
    const std::string& key, const std::string& text) {
  std::map<std::string, std::vector<std::string>> out;
  FieldErrors errors;
  int i = 0;
  for (absl::string_view item : absl::StrSplit(text, ';', absl::SkipWhitespace())) {
    std::vector<std::string> parts =
        absl::StrSplit(absl::StripAsciiWhitespace(item), absl::MaxSplits('=', 1));
    std::string path = absl::StrCat(key, "[", i++, "]");
    if (parts.size() != 2 || parts[0].empty()) {
      errors.Add(path, "must be <id>=<cluster>,<cluster>...");
      continue;
    }
    std::vector<std::string> members;
    for (absl::string_view m : absl::StrSplit(parts[1], ',', absl::SkipWhitespace())) {
      members.emplace_back(absl::StripAsciiWhitespace(m));
    }
    for (const std::string& m : members) {
      if (!IsLabel(m)) errors.Add(path, "member " + m + " is not a cluster name");
    }
    out[parts[0]] = members;
  }
  RETURN_IF_ERROR(errors.ToStatus());
  return out;
}

// The codeco_netma_* metrics, declared once.
struct NetmaServer::Metrics {
  explicit Metrics(prometheus::Registry& r)
      : rtt_ema(prometheus::BuildGauge()
                    .Name(MetricName("netma", "link_rtt_ema_seconds"))
                    .Help("EMA of the probed round-trip time per link")
                    .Register(r)),
        rtt_p99(prometheus::BuildGauge()
                    .Name(MetricName("netma", "link_rtt_p99_seconds"))
                    .Help("99th percentile RTT over the probe window per link")
                    .Register(r)),
        loss(prometheus::BuildGauge()
                 .Name(MetricName("netma", "link_loss_ratio"))
                 .Help("Failed share of the probes in the window per link")
                 .Register(r)),
        throughput(prometheus::BuildGauge()
                       .Name(MetricName("netma", "link_throughput_bits_per_second"))
                       .Help("Throughput of the bounded bulk samples per link")
                       .Register(r)),
        up(prometheus::BuildGauge()
               .Name(MetricName("netma", "link_up"))
               .Help("1 when the link answers probes, 0 after consecutive failures")
               .Register(r)),
        link_energy(prometheus::BuildGauge()
                        .Name(MetricName("netma", "link_energy_joules"))
                        .Help("EMA of the energy of a bulk transfer per link (linear power model)")
                        .Register(r)),
        probe_bytes(prometheus::BuildCounter()
                        .Name(MetricName("netma", "probe_bytes_total"))
                        .Help("Bytes the probes of a link put on the wire")
                        .Register(r)),
        node(prometheus::BuildGauge()
                 .Name(MetricName("netma", "node_attribute"))
                 .Help("NSM node attributes (link_failures, packet_loss, node_net_failures, "
                       "egress_bandwidth_bps, degree, latency_ema_ns, flow_energy_joules, "
                       "link_energy_joules)")
                 .Register(r)) {}
  prometheus::Family<prometheus::Gauge>& rtt_ema;
  prometheus::Family<prometheus::Gauge>& rtt_p99;
  prometheus::Family<prometheus::Gauge>& loss;
  prometheus::Family<prometheus::Gauge>& throughput;
  prometheus::Family<prometheus::Gauge>& up;
  prometheus::Family<prometheus::Gauge>& link_energy;
  prometheus::Family<prometheus::Counter>& probe_bytes;
  prometheus::Family<prometheus::Gauge>& node;
};

NetmaServer::NetmaServer(NetmaServerOptions options, const Clock& clock)
    : options_(std::move(options)), clock_(clock) {}

absl::StatusOr<std::unique_ptr<NetmaServer>> NetmaServer::Create(
    NetmaServerOptions options, KvStore& store, const Clock& clock, prometheus::Registry* registry,
    std::unique_ptr<Prober> prober, std::unique_ptr<PeerSummaryExchange> exchange) {
  if (!IsLabel(options.cluster)) return InvalidFieldError("cluster", "must be a DNS label");
  std::unique_ptr<NetmaServer> s(new NetmaServer(std::move(options), clock));
  const NetmaServerOptions& o = s->options_;
  ASSIGN_OR_RETURN(auto monitor, NetworkMonitor::Create(o.cluster, o.monitor, clock));
  auto federation = std::make_unique<Federation>(o.cluster, o.federation, clock);
  for (const auto& [id, members] : o.neighborhoods) {
    RETURN_IF_ERROR(federation->SetNeighborhood(id, members));
  }
  auto view = std::make_unique<NetworkView>(*monitor, *federation, o.view, clock);
  view->SetEndpoints(o.cluster, o.local_endpoints);
  ASSIGN_OR_RETURN(s->channels_, PeerChannels::Create(o.channels));
  // The self probe takes the same way out as the peers' probes (through the
  // egress proxy, which does not delay traffic inside a cluster), so what it
  // measures is exactly the overhead they carry.
  s->prober_ = prober ? std::move(prober)
                      : std::make_unique<GrpcProber>(*s->channels_, o.self_address);
  s->exchange_ =
      exchange ? std::move(exchange)
               : std::make_unique<GrpcSummaryExchange>(*s->channels_, o.monitor.probe.timeout);
  s->repository_ = NewKvVirtualLinkRepository(store);
  if (registry != nullptr) s->metrics_ = std::make_unique<Metrics>(*registry);
  s->executor_ = std::make_unique<BoundedExecutor>(2, 256);
  {
    absl::MutexLock lock(&s->mu_);
    s->monitor_ = std::move(monitor);
    s->federation_ = std::move(federation);
    s->view_ = std::move(view);
    s->vlinks_ = std::make_unique<VirtualLinkController>(*s->repository_, clock, o.controllers);
    // Create runs under mu_ (every call to vlinks_ does).
    s->vlinks_->SetCapacity([self = s.get()](const std::string& from, const std::string& to,
                                             codeco::common::v1::ServiceClass service_class) {
      self->mu_.AssertHeld();
      return self->LinkCapacityLocked(from, to, service_class);
    });
    if (!o.codef_control.empty() && o.role == Role::kHub) {
      s->devices_ = std::make_unique<CodefEdgeDevices>(o.codef_control);
      s->vlinks_->SetEdgeDevices(s->devices_.get());
      // The devices may have restarted (or this controller): put the stored links back.
      if (absl::Status st = s->vlinks_->ReinstallAll(); !st.ok()) {
        log::Warn("virtual links not reinstalled on the edge devices",
                  {{"error", std::string(st.message())}});
      }
    }
    s->next_summary_ = clock.Now();
    s->peers_ = o.peers;
    s->ApplyPeersLocked();
  }
  if (!o.alto_listen.empty()) {
    NetmaServer* self = s.get();
    ASSIGN_OR_RETURN(s->http_, HttpServer::Start(o.alto_listen, [self](const std::string& path) {
                       return self->HandleAlto(path);
                     }));
    log::Info("alto listening", {{"address", s->http_->address()}});
  }
  if (o.run_loop) s->loop_ = std::thread([self = s.get()] { self->Loop(); });
  return s;
}

NetmaServer::~NetmaServer() {
  executor_.reset();  // finish the calls it holds
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    wake_.SignalAll();
  }
  if (loop_.joinable()) loop_.join();
  http_.reset();
}

void NetmaServer::SetPeers(std::vector<Peer> peers) {
  absl::MutexLock lock(&mu_);
  peers_ = std::move(peers);
  ApplyPeersLocked();
  wake_.SignalAll();
}

void NetmaServer::ApplyPeersLocked() {
  // Probe the peers that share a neighborhood (all of them without neighborhoods).
  std::set<std::string> shared = federation_->Peers();
  std::vector<Peer> probed;
  for (const Peer& peer : peers_) {
    if (options_.neighborhoods.empty() || shared.count(peer.cluster)) probed.push_back(peer);
    std::string host = peer.address.substr(0, peer.address.rfind(':'));
    if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    view_->SetEndpoints(peer.cluster, {host});
  }
  monitor_->SetPeers(probed);
}

std::string NetmaServer::alto_address() const { return http_ ? http_->address() : ""; }

void NetmaServer::ProbeRound() {
  std::vector<ProbeTask> tasks;
  {
    absl::MutexLock lock(&mu_);
    tasks = monitor_->TakeDueProbes();
  }
  if (tasks.empty()) return;
  // Probes to different peers run at once so one dead peer does not delay the rest.
  std::vector<absl::StatusOr<Prober::Result>> results(tasks.size(), absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < tasks.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = prober_->Probe(tasks[i]); });
  }
  for (std::thread& t : threads) t.join();
  // Then the same call to itself, under the same load: the overhead that the
  // path RTT leaves out.
  absl::StatusOr<absl::Duration> self = prober_->ProbeSelf(options_.monitor.probe.timeout);
  absl::MutexLock lock(&mu_);
  if (self.ok()) monitor_->RecordLocalOverhead(*self);
  for (size_t i = 0; i < tasks.size(); ++i) {
    monitor_->RecordResult(tasks[i], results[i]);
    if (!results[i].ok()) {
      log::Debug("probe failed", {{"peer", tasks[i].peer.cluster},
                                  {"error", std::string(results[i].status().message())}});
    }
  }
  ApplyVirtualLinkMeasurementsLocked();
  UpdateMetricsLocked();
}

void NetmaServer::ApplyVirtualLinkMeasurementsLocked() {
  if (options_.role != Role::kHub) return;
  absl::StatusOr<std::vector<v1::LinkMetrics>> links = view_->Links("");
  if (!links.ok()) return;
  absl::StatusOr<int> changed = vlinks_->ApplyMeasurements(*links);
  if (!changed.ok()) {
    log::Warn("virtual link update failed", {{"error", std::string(changed.status().message())}});
  }
}

std::optional<int64_t> NetmaServer::LinkCapacityLocked(
    const std::string& from, const std::string& to,
    codeco::common::v1::ServiceClass service_class) {
  absl::StatusOr<std::vector<v1::LinkMetrics>> links = view_->Links("");
  if (!links.ok()) return std::nullopt;
  for (const v1::LinkMetrics& l : *links) {
    if (l.source_cluster() != from || l.target_cluster() != to) continue;
    if (l.failed()) return 0;
    if (l.throughput_bps() <= 0) return std::nullopt;
    double share = service_class == codeco::common::v1::SERVICE_CLASS_ASSURED
                       ? view_->options().assured_share
                       : 1.0;
    return static_cast<int64_t>(static_cast<double>(l.throughput_bps()) * share);
  }
  return std::nullopt;
}

void NetmaServer::SummaryRound() {
  struct Job {
    Peer peer;
    v1::PeerSummary summary;
  };
  std::vector<Job> jobs;
  {
    absl::MutexLock lock(&mu_);
    federation_->Expire();
    std::map<std::string, std::string> addresses;
    for (const Peer& p : peers_) addresses[p.cluster] = p.address;
    std::vector<v1::LinkMetrics> local = monitor_->Links();
    for (const std::string& id : federation_->NeighborhoodIds()) {
      absl::StatusOr<v1::PeerSummary> summary = federation_->BuildSummary(id, local);
      if (!summary.ok()) continue;  // not a member of this one
      absl::StatusOr<std::set<std::string>> members = federation_->Members(id);
      if (!members.ok()) continue;
      for (const std::string& member : *members) {
        auto it = addresses.find(member);
        if (member != options_.cluster && it != addresses.end()) {
          jobs.push_back({{member, it->second}, *summary});
        }
      }
    }
  }
  for (const Job& job : jobs) {
    absl::StatusOr<PeerSummaryExchange::Reply> reply = exchange_->Exchange(job.peer, job.summary);
    if (!reply.ok()) {
      log::Debug("summary exchange failed",
                 {{"peer", job.peer.cluster}, {"error", std::string(reply.status().message())}});
      continue;
    }
    absl::MutexLock lock(&mu_);
    absl::StatusOr<int> merged = federation_->Merge(reply->cluster, reply->summary);
    if (!merged.ok()) {
      log::Warn("peer summary refused",
                {{"peer", reply->cluster}, {"error", std::string(merged.status().message())}});
    }
  }
  // The peers' newest probes reach the virtual links now, not a probe round later.
  absl::MutexLock lock(&mu_);
  ApplyVirtualLinkMeasurementsLocked();
}

void NetmaServer::Loop() {
  while (true) {
    ProbeRound();
    bool summaries = false;
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      if (clock_.Now() >= next_summary_) {
        summaries = true;
        next_summary_ = clock_.Now() + options_.summary_interval;
      }
    }
    if (summaries) SummaryRound();
    absl::MutexLock lock(&mu_);
    absl::Time until = std::min(monitor_->NextProbeDue(), next_summary_);
    while (!stop_ && clock_.Now() < until) {
      // The loop runs on real time; `until` comes from the same clock.
      wake_.WaitWithTimeout(&mu_, until - clock_.Now());
    }
    if (stop_) return;
  }
}

void NetmaServer::UpdateMetricsLocked() {
  if (metrics_ == nullptr) return;
  for (const v1::LinkMetrics& l : monitor_->Links()) {
    std::map<std::string, std::string> labels = {{"source", l.source_cluster()},
                                                 {"target", l.target_cluster()}};
    metrics_->rtt_ema.Add(labels).Set(static_cast<double>(l.rtt_ema_ns()) / 1e9);
    metrics_->rtt_p99.Add(labels).Set(static_cast<double>(l.rtt_p99_ns()) / 1e9);
    metrics_->loss.Add(labels).Set(l.loss_ratio());
    metrics_->throughput.Add(labels).Set(static_cast<double>(l.throughput_bps()));
    metrics_->up.Add(labels).Set(l.failed() ? 0 : 1);
    metrics_->link_energy.Add(labels).Set(l.link_energy_joules());
    int64_t& reported = reported_probe_bytes_[l.link_id()];
    if (l.probe_bytes() > reported) {
      metrics_->probe_bytes.Add(labels).Increment(static_cast<double>(l.probe_bytes() - reported));
      reported = l.probe_bytes();
    }
  }
  v1::NodeNetworkAttributes a = monitor_->Attributes();
  auto node = [&](const char* attribute, double value) {
    metrics_->node.Add({{"node", a.node()}, {"attribute", attribute}}).Set(value);
  };
  node("link_failures", static_cast<double>(a.link_failures()));
  node("packet_loss", a.packet_loss_ratio());
  node("node_net_failures", static_cast<double>(a.node_net_failures()));
  node("egress_bandwidth_bps", static_cast<double>(a.egress_bandwidth_bps()));
  node("degree", static_cast<double>(a.degree()));
  node("latency_ema_ns", a.latency_ema_ns());
  node("flow_energy_joules", a.flow_energy_joules());
  node("link_energy_joules", a.link_energy_joules());
}

grpc::ServerUnaryReactor* NetmaServer::Offload(grpc::CallbackServerContext* context,
                                               std::function<absl::Status()> work) {
  return ServeOnExecutor(*executor_, context,
                         [work = std::move(work)](absl::Time) { return work(); });
}

absl::Status NetmaServer::RequireRole(Role role, const char* method) const {
  if (options_.role == role) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(method, " is served by the ", RoleName(role),
                                                    " role; this NetMA runs as ",
                                                    RoleName(options_.role)));
}

HttpResponse NetmaServer::HandleAlto(const std::string& path) {
  auto error = [](int code, const std::string& message) {
    nlohmann::json body = {
        {"meta",
         {{"code", code == 404 ? "E_INVALID_FIELD_VALUE" : "E_SYNTAX"}, {"message", message}}}};
    return HttpResponse{code, kAltoErrorMediaType, body.dump()};
  };
  absl::MutexLock lock(&mu_);
  if (path == "/alto/networkmap") {
    absl::StatusOr<v1::NetworkMap> map = view_->NetworkMap("");
    if (!map.ok()) return error(500, std::string(map.status().message()));
    return {200, kAltoNetworkMapMediaType,
            NetworkMapToAltoJson(*map, options_.view.network_map_resource_id).dump()};
  }
  const std::string prefix = "/alto/costmap/";
  if (path.rfind(prefix, 0) == 0) {
    absl::StatusOr<v1::CostMetric> metric = ParseCostMetricSegment(path.substr(prefix.size()));
    if (!metric.ok()) return error(404, std::string(metric.status().message()));
    v1::GetCostMapRequest request;
    request.set_metric(*metric);
    absl::StatusOr<v1::CostMap> map = view_->CostMap(request);
    if (!map.ok()) return error(500, std::string(map.status().message()));
    return {200, kAltoCostMapMediaType,
            CostMapToAltoJson(*map, options_.view.network_map_resource_id).dump()};
  }
  return error(404, "unknown resource " + path);
}

absl::Status NetmaServer::MayRead(const grpc::CallbackServerContext& context,
                                  std::string_view method, const std::string& neighborhood_id) {
  if (neighborhood_id.empty()) {
    return RequireHubOrOperator(context, options_.hub_cluster, method, "neighborhood_id");
  }
  absl::StatusOr<std::set<std::string>> members = federation_->Members(neighborhood_id);
  return RequireNeighborhoodMember(context, options_.hub_cluster, method, neighborhood_id,
                                   members.ok() ? *members : std::set<std::string>());
}

grpc::ServerUnaryReactor* NetmaServer::GetNetworkTopology(
    grpc::CallbackServerContext* context, const v1::GetNetworkTopologyRequest* request,
    v1::GetNetworkTopologyResponse* response) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = MayRead(*context, "GetNetworkTopology", request->neighborhood_id());
      !s.ok()) {
    return Done(context, s);
  }
  absl::StatusOr<v1::NetworkTopology> topology = view_->Topology(request->neighborhood_id());
  if (!topology.ok()) return Done(context, topology.status());
  // What the committed channels' virtual links hold of each link.
  if (options_.role == Role::kHub) {
    if (absl::Status s = vlinks_->AnnotateTopology(*topology); !s.ok()) return Done(context, s);
  }
  *response->mutable_topology() = std::move(*topology);
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* NetmaServer::ListLinks(grpc::CallbackServerContext* context,
                                                 const v1::ListLinksRequest* request,
                                                 v1::ListLinksResponse* response) {
  FieldErrors errors;
  if (request->page_size() < 0) errors.Add("page_size", "must not be negative");
  if (request->max_age_ns() < 0) errors.Add("max_age_ns", "must not be negative");
  if (!errors.empty()) return Done(context, errors.ToStatus());
  int size =
      request->page_size() == 0 ? kDefaultPageSize : std::min(request->page_size(), kMaxPageSize);
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<v1::LinkMetrics>> links = view_->Links("");
  if (!links.ok()) return Done(context, links.status());
  std::vector<const v1::LinkMetrics*> selected;
  for (const v1::LinkMetrics& l : *links) {
    if (!request->page_token().empty() && l.link_id() <= request->page_token()) continue;
    if (!request->source_cluster().empty() && l.source_cluster() != request->source_cluster()) {
      continue;
    }
    if (!request->target_cluster().empty() && l.target_cluster() != request->target_cluster()) {
      continue;
    }
    if (request->max_age_ns() > 0 && l.age_ns() > request->max_age_ns()) continue;
    selected.push_back(&l);
  }
  for (size_t i = 0; i < selected.size() && static_cast<int>(i) < size; ++i) {
    *response->add_links() = *selected[i];
  }
  if (static_cast<int>(selected.size()) > size) {
    response->set_next_page_token(selected[size - 1]->link_id());
  }
  *response->mutable_local_node() = monitor_->Attributes();
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* NetmaServer::GetNetworkMap(grpc::CallbackServerContext* context,
                                                     const v1::GetNetworkMapRequest* request,
                                                     v1::GetNetworkMapResponse* response) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = MayRead(*context, "GetNetworkMap", request->neighborhood_id()); !s.ok()) {
    return Done(context, s);
  }
  absl::StatusOr<v1::NetworkMap> map = view_->NetworkMap(request->neighborhood_id());
  if (map.ok()) *response->mutable_network_map() = std::move(*map);
  return Done(context, map.status());
}

grpc::ServerUnaryReactor* NetmaServer::GetCostMap(grpc::CallbackServerContext* context,
                                                  const v1::GetCostMapRequest* request,
                                                  v1::GetCostMapResponse* response) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = MayRead(*context, "GetCostMap", request->neighborhood_id()); !s.ok()) {
    return Done(context, s);
  }
  absl::StatusOr<v1::CostMap> map = view_->CostMap(*request);
  if (map.ok()) *response->mutable_cost_map() = std::move(*map);
  return Done(context, map.status());
}

grpc::ServerUnaryReactor* NetmaServer::ExchangeSummary(grpc::CallbackServerContext* context,
                                                       const v1::ExchangeSummaryRequest* request,
                                                       v1::ExchangeSummaryResponse* response) {
  if (absl::Status s = RequireRole(Role::kManagedCluster, "ExchangeSummary"); !s.ok()) {
    return Done(context, s);
  }
  absl::StatusOr<SpiffeIdentity> identity = PeerIdentity(*context->auth_context());
  if (!identity.ok()) {
    return Done(context,
                absl::UnauthenticatedError("ExchangeSummary needs the caller's mTLS identity: " +
                                           std::string(identity.status().message())));
  }
  if (identity->service != "netma") {
    return Done(context, absl::PermissionDeniedError("only a peer's netma may exchange summaries, "
                                                     "not " +
                                                     identity->service));
  }
  if (!request->has_summary()) return Done(context, InvalidFieldError("summary", "required"));
  const v1::PeerSummary& summary = request->summary();
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::set<std::string>> members = federation_->Members(summary.neighborhood_id());
  if (members.ok() && members->count(identity->cluster) && !members->count(options_.cluster)) {
    return Done(context, absl::FailedPreconditionError(
                             absl::StrCat(options_.cluster, " is not a member of neighborhood ",
                                          summary.neighborhood_id())));
  }
  absl::StatusOr<int> merged = federation_->Merge(identity->cluster, summary);
  if (!merged.ok()) return Done(context, merged.status());
  absl::StatusOr<v1::PeerSummary> mine =
      federation_->BuildSummary(summary.neighborhood_id(), monitor_->Links());
  if (mine.ok()) *response->mutable_summary() = std::move(*mine);
  return Done(context, mine.status());
}

grpc::ServerUnaryReactor* NetmaServer::CreateVirtualLink(
    grpc::CallbackServerContext* context, const v1::CreateVirtualLinkRequest* request,
    v1::CreateVirtualLinkResponse* response) {
  if (absl::Status s = RequireRole(Role::kHub, "CreateVirtualLink"); !s.ok()) {
    return Done(context, s);
  }
  return Offload(context, [this, request, response]() -> absl::Status {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(*response->mutable_virtual_link(),
                     vlinks_->Create(request->virtual_link(), request->request_id()));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* NetmaServer::GetVirtualLink(grpc::CallbackServerContext* context,
                                                      const v1::GetVirtualLinkRequest* request,
                                                      v1::GetVirtualLinkResponse* response) {
  if (absl::Status s = RequireRole(Role::kHub, "GetVirtualLink"); !s.ok()) return Done(context, s);
  return Offload(context, [this, request, response]() -> absl::Status {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(*response->mutable_virtual_link(), vlinks_->Get(request->id()));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* NetmaServer::ListVirtualLinks(grpc::CallbackServerContext* context,
                                                        const v1::ListVirtualLinksRequest* request,
                                                        v1::ListVirtualLinksResponse* response) {
  if (absl::Status s = RequireRole(Role::kHub, "ListVirtualLinks"); !s.ok()) {
    return Done(context, s);
  }
  VirtualLinkQuery query{request->page_size(), request->page_token(), request->application(),
                         request->cluster()};
  return Offload(context, [this, query, response]() -> absl::Status {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(VirtualLinkPage page, vlinks_->List(query));
    for (v1::VirtualLink& link : page.links) *response->add_virtual_links() = std::move(link);
    response->set_next_page_token(page.next_page_token);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* NetmaServer::DeleteVirtualLink(
    grpc::CallbackServerContext* context, const v1::DeleteVirtualLinkRequest* request,
    v1::DeleteVirtualLinkResponse* response) {
  if (absl::Status s = RequireRole(Role::kHub, "DeleteVirtualLink"); !s.ok()) {
    return Done(context, s);
  }
  return Offload(context, [this, request, response]() -> absl::Status {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(*response->mutable_virtual_link(), vlinks_->Delete(request->id()));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* NetmaServer::GetOperation(grpc::CallbackServerContext* context,
                                                    const v1::GetOperationRequest* request,
                                                    v1::GetOperationResponse*) {
  // NetMA's work is synchronous today; no operation ever exists.
  if (request->id().empty()) return Done(context, InvalidFieldError("id", "required"));
  return Done(context, absl::NotFoundError("operation " + request->id()));
}

grpc::ServerUnaryReactor* NetmaServer::ProbeBulk(grpc::CallbackServerContext* context,
                                                 const v1::ProbeBulkRequest* request,
                                                 v1::ProbeBulkResponse* response) {
  if (static_cast<int64_t>(request->payload().size()) > kMaxBulkPayload) {
    return Done(context, InvalidFieldError("payload", "at most 1 MiB"));
  }
  response->set_received_bytes(static_cast<int64_t>(request->payload().size()));
  return Done(context, absl::OkStatus());
}

}  // namespace codeco::netma
