#include "acm/server/cluster_agent.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "acm/core/cluster_report.h"
#include "acm/core/mission_runner.h"
#include "codeco/acm/v1/acm_service.grpc.pb.h"
#include "codeco/common/call_deadline.h"
#include "codeco/common/logging.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/service_config.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace codeco::acm {
ClusterAgent::ClusterAgent(ClusterAgentOptions options, PeerChannels& peers,
                           std::shared_ptr<LocalCopies> copies,
                           std::shared_ptr<MissionRelay> missions, ClusterRegistry* subordinates)
    : options_(std::move(options)),
      peers_(peers),
      copies_(std::move(copies)),
      missions_(std::move(missions)),
      subordinates_(subordinates),
      interval_(options_.interval) {
  if (missions_ != nullptr) {
    // A child's mission changed state: send it up now, not at the next heartbeat.
    missions_->SetOnStateChange([this] {
      absl::MutexLock lock(&mu_);
      pods_changed_ = true;
    });
  }
  thread_ = std::thread([this] { Loop(); });
  if (options_.pod_report_delay > absl::ZeroDuration()) {
    watcher_ = std::thread([this] { WatchPods(); });
  }
}

ClusterAgent::~ClusterAgent() { Stop(); }

void ClusterAgent::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (watch_context_ != nullptr) watch_context_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
  if (watcher_.joinable()) watcher_.join();
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> ClusterAgent::LmsChannel() {
  // The LMS is local to the cluster (PeerChannels skips the relay for it).
  if (options_.lms_plaintext) {
    return grpc::CreateChannel(options_.lms, grpc::InsecureChannelCredentials());
  }
  return peers_.Get(options_.lms);
}

void ClusterAgent::WatchPods() {
  std::shared_ptr<grpc::Channel> channel;
  while (true) {
    if (channel == nullptr) {
      auto made = LmsChannel();
      if (made.ok()) channel = *made;
    }
    if (channel != nullptr) {
      auto lms = lms::v1::LmsService::NewStub(channel);
      grpc::ClientContext context;
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
        watch_context_ = &context;
      }
      // From now: the first events list every pod (a change for the hub too).
      auto reader = lms->WatchPods(&context, lms::v1::WatchPodsRequest());
      lms::v1::WatchPodsResponse event;
      while (reader->Read(&event)) {
        absl::MutexLock lock(&mu_);
        pods_changed_ = true;
      }
      grpc::Status status = reader->Finish();
      absl::MutexLock lock(&mu_);
      watch_context_ = nullptr;
      if (stopping_) return;
      if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
        log::Info("agent: the LMS has no pod watch; pods are reported with heartbeats",
                  {{"lms", options_.lms}});
        return;
      }
    }
    // The watch broke (LMS restarting, network): try again shortly.
    absl::MutexLock lock(&mu_);
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    mu_.AwaitWithTimeout(absl::Condition(&stopping), absl::Seconds(1));
    if (stopping_) return;
  }
}

void ClusterAgent::Loop() {
  // Copies are synced once per interval, not on every report a pod change causes.
  absl::Time last_sync = absl::InfinitePast();
  while (true) {
    const bool sync = absl::Now() - last_sync >= interval_;
    bool ok = ReportOnce(/*sync_copies=*/sync);
    if (ok && sync) last_sync = absl::Now();
    // Retry sooner after a failure, but never spin.
    const absl::Time next =
        absl::Now() + (ok ? interval_ : std::min(interval_, absl::Seconds(1)));
    absl::MutexLock lock(&mu_);
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    // Never two reports closer than pod_report_delay; then the next
    // heartbeat, or earlier when a pod changed.
    mu_.AwaitWithTimeout(absl::Condition(&stopping),
                         std::max(options_.pod_report_delay, absl::Milliseconds(10)));
    auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || pods_changed_;
    };
    mu_.AwaitWithDeadline(absl::Condition(&woken), next);
    if (stopping_) return;
    pods_changed_ = false;
  }
}

void ClusterAgent::AddOutage(v1::HubOutage* outage) const {
  *outage->mutable_start_time() = ToProtoTimestamp(hub_lost_since_);
  *outage->mutable_end_time() = ToProtoTimestamp(absl::Now());
}

bool ClusterAgent::ReportOnce(bool sync_copies) {
  if (lms_channel_ == nullptr) {
    auto channel = LmsChannel();
    if (!channel.ok()) {
      log::Warn("agent: no channel to the LMS",
                {{"error", std::string(channel.status().message())}});
      return false;
    }
    lms_channel_ = *channel;
  }
  auto lms = lms::v1::LmsService::NewStub(lms_channel_);
  std::vector<lms::v1::Node> nodes;
  std::string token;
  do {
    lms::v1::ListNodesRequest request;
    request.set_page_token(token);
    lms::v1::ListNodesResponse response;
    grpc::Status status =
        lms->ListNodes(OutgoingContext(options_.call_timeout).get(), request, &response);
    if (!status.ok()) {
      log::Warn("agent: LMS ListNodes failed",
                {{"lms", options_.lms}, {"error", status.error_message()}});
      return false;
    }
    nodes.insert(nodes.end(), response.nodes().begin(), response.nodes().end());
    token = response.next_page_token();
  } while (!token.empty());
  ClusterReport report = BuildClusterReport(nodes);
  // The pods of placed applications, for the hub's readiness view; a failed
  // list only leaves readiness as it was.
  std::vector<lms::v1::Pod> pods;
  bool pods_listed = true;
  token.clear();
  do {
    lms::v1::ListPodsRequest request;
    request.set_page_token(token);
    lms::v1::ListPodsResponse response;
    grpc::Status status =
        lms->ListPods(OutgoingContext(options_.call_timeout).get(), request, &response);
    if (!status.ok()) {
      log::Warn("agent: LMS ListPods failed",
                {{"lms", options_.lms}, {"error", status.error_message()}});
      pods_listed = false;
      break;
    }
    pods.insert(pods.end(), response.pods().begin(), response.pods().end());
    token = response.next_page_token();
  } while (!token.empty());
  std::vector<PodReport> pod_reports;
  if (pods_listed) pod_reports = BuildPodReports(pods);
  // Missions run whether or not the hub answers.
  if (pods_listed && missions_ != nullptr) RunMissions(*lms, report, nodes, pods);
  // What those pods use, from their nodes (the hub's autoscaler scales on
  // it); a node that does not answer leaves its pods' usage unknown.
  std::map<std::string, lms::v1::PodUsage> usage;  // pod -> usage
  std::set<std::string> hosting;
  for (const PodReport& p : pod_reports) {
    if (!p.node.empty()) hosting.insert(p.node);
  }
  for (const std::string& node : hosting) {
    lms::v1::GetNodeUsageRequest request;
    request.set_node(node);
    lms::v1::GetNodeUsageResponse response;
    grpc::Status status =
        lms->GetNodeUsage(OutgoingContext(options_.call_timeout).get(), request, &response);
    if (!status.ok()) continue;
    for (const lms::v1::PodUsage& u : response.usage().pods()) usage[u.pod()] = u;
  }

  auto hub_channel = peers_.Get(options_.hub_acm);
  if (!hub_channel.ok()) {
    log::Warn("agent: no channel to the hub",
              {{"error", std::string(hub_channel.status().message())}});
    return false;
  }
  auto hub = v1::AcmService::NewStub(*hub_channel);
  if (!registered_) {
    v1::RegisterClusterRequest request;
    auto* cluster = request.mutable_cluster();
    cluster->mutable_metadata()->set_name(options_.cluster);
    cluster->set_role(v1::CLUSTER_ROLE_MC);
    cluster->set_parent_cluster(options_.parent);
    *cluster->mutable_cluster_labels() = report.labels;
    *cluster->mutable_capacity() = report.capacity;
    *cluster->mutable_energy_profile() = report.energy;
    for (const auto& [service, address] : options_.endpoints) {
      (*cluster->mutable_endpoints())[service] = address;
    }
    for (const auto& [key, value] : report.cluster_labels) {
      (*cluster->mutable_metadata()->mutable_labels())[key] = value;
    }
    request.set_request_id(
        absl::StrCat(options_.cluster, "-register-", absl::ToUnixNanos(absl::Now())));
    if (hub_lost_since_ != absl::InfiniteFuture()) AddOutage(cluster->mutable_last_hub_outage());
    v1::RegisterClusterResponse response;
    grpc::Status status =
        hub->RegisterCluster(OutgoingContext(options_.call_timeout).get(), request, &response);
    if (!status.ok()) {
      log::Warn("agent: register failed",
                {{"hub", options_.hub_acm}, {"error", status.error_message()}});
      hub_lost_since_ = std::min(hub_lost_since_, absl::Now());
      return false;
    }
    hub_lost_since_ = absl::InfiniteFuture();
    registered_ = true;
    sequence_ = 0;
    if (response.heartbeat_interval_ns() > 0) {
      interval_ = absl::Nanoseconds(response.heartbeat_interval_ns());
    }
    log::Info("agent: registered with the hub",
              {{"hub", options_.hub_acm}, {"nodes", absl::StrCat(nodes.size())}});
    return true;
  }
  // Copies first, so the heartbeat reports what the cluster holds now; a
  // failed sync keeps the old copies and still heartbeats.
  if (copies_ != nullptr && sync_copies) SyncCopies(*hub);
  v1::HeartbeatRequest request;
  request.set_cluster_name(options_.cluster);
  if (copies_ != nullptr) {
    auto neighborhoods = copies_->NeighborhoodRevisions();
    if (neighborhoods.ok()) {
      for (const auto& [id, rev] : *neighborhoods)
        (*request.mutable_neighborhood_revisions())[id] = rev;
    }
    auto assignments = copies_->AssignmentRevisions();
    if (assignments.ok()) {
      for (const auto& [app, rev] : *assignments)
        (*request.mutable_assignment_revisions())[app] = rev;
    }
  }
  *request.mutable_capacity() = report.capacity;
  *request.mutable_cluster_labels() = report.labels;
  request.set_health(report.capacity.ready_node_count() > 0 ? v1::CLUSTER_HEALTH_READY
                                                            : v1::CLUSTER_HEALTH_DEGRADED);
  request.set_sequence(++sequence_);
  request.set_pods_reported(pods_listed);
  if (pods_listed) {
    for (const PodReport& p : pod_reports) {
      v1::PodReport* out = request.add_pods();
      out->set_application(p.application);
      out->set_service(p.service);
      out->set_pod(p.pod);
      out->set_node(p.node);
      out->set_phase(p.phase);
      out->set_message(p.message);
      if (auto u = usage.find(p.pod); u != usage.end()) {
        out->set_cpu_millicores(u->second.usage().cpu_millicores());
        out->set_memory_bytes(u->second.usage().memory_bytes());
        out->set_usage_known(true);
      }
      for (const std::string& address : p.addresses) out->add_addresses(address);
    }
  }
  if (hub_lost_since_ != absl::InfiniteFuture()) AddOutage(request.mutable_hub_outage());
  if (missions_ != nullptr) {
    for (v1::MissionClusterStatus& state : missions_->StatesToRelay()) {
      *request.add_mission_status() = std::move(state);
    }
  }
  for (v1::SubtreeCluster& below : Subtree()) *request.add_subtree() = std::move(below);
  v1::HeartbeatResponse response;
  grpc::Status status =
      hub->Heartbeat(OutgoingContext(options_.call_timeout).get(), request, &response);
  if (!status.ok()) {
    log::Warn("agent: heartbeat failed",
              {{"hub", options_.hub_acm}, {"error", status.error_message()}});
    hub_lost_since_ = std::min(hub_lost_since_, absl::Now());
    return false;
  }
  if (hub_lost_since_ != absl::InfiniteFuture()) {
    log::Info("agent: the hub answers again",
              {{"hub", options_.hub_acm},
               {"away_for", absl::FormatDuration(absl::Now() - hub_lost_since_)}});
  }
  if (response.reregister_required()) {
    registered_ = false;  // the hub stored nothing: the outage goes with the registration
  } else {
    hub_lost_since_ = absl::InfiniteFuture();
    if (missions_ != nullptr) {
      absl::StatusOr<int> changed = missions_->ReplaceFromUpstream(response.missions());
      if (!changed.ok()) {
        log::Warn("agent: missions not stored",
                  {{"error", std::string(changed.status().message())}});
      } else if (*changed > 0) {
        log::Info("agent: missions updated", {{"changed", absl::StrCat(*changed)},
                                              {"held", absl::StrCat(response.missions_size())}});
        // Report again soon (after pod_report_delay), not a whole interval
        // later: the new missions run and their state goes up at once.
        absl::MutexLock lock(&mu_);
        pods_changed_ = true;
      }
    }
  }
  if (response.heartbeat_interval_ns() > 0)
    interval_ = absl::Nanoseconds(response.heartbeat_interval_ns());
  return true;
}

void ClusterAgent::RunMissions(lms::v1::LmsService::Stub& lms, const ClusterReport& report,
                               const std::vector<lms::v1::Node>& nodes,
                               const std::vector<lms::v1::Pod>& pods) {
  const google::protobuf::Map<std::string, std::string> labels(report.cluster_labels.begin(),
                                                               report.cluster_labels.end());
  TreeMember self = TreeMemberOf(options_.cluster, labels, report.labels);
  absl::StatusOr<std::vector<v1::Mission>> addressed = missions_->MissionsFor({self});
  if (!addressed.ok()) {
    log::Warn("agent: stored missions unreadable",
              {{"error", std::string(addressed.status().message())}});
    return;
  }
  MissionPodPlan plan = PlanMissionPods(options_.cluster, *addressed, pods, nodes, absl::Now());
  for (const std::string& name : plan.remove) {
    lms::v1::DeletePodRequest request;
    request.set_name(name);
    lms::v1::DeletePodResponse response;
    grpc::Status status =
        lms.DeletePod(OutgoingContext(options_.call_timeout).get(), request, &response);
    if (!status.ok() && status.error_code() != grpc::StatusCode::NOT_FOUND) {
      log::Warn("agent: deleting a mission pod failed",
                {{"pod", name}, {"error", status.error_message()}});
    }
  }
  // mission -> why a pod of it could not be created.
  std::map<std::string, grpc::Status> refused;
  for (const lms::v1::Pod& pod : plan.create) {
    lms::v1::CreatePodRequest request;
    *request.mutable_pod() = pod;
    request.set_request_id(absl::StrCat(options_.cluster, "-", pod.name()));
    lms::v1::CreatePodResponse response;
    grpc::Status status =
        lms.CreatePod(OutgoingContext(options_.call_timeout).get(), request, &response);
    if (!status.ok() && status.error_code() != grpc::StatusCode::ALREADY_EXISTS) {
      refused.emplace(pod.labels().at(kMissionLabel), status);
    }
  }
  for (v1::MissionClusterStatus& state : plan.states) {
    auto it = refused.find(state.mission());
    if (it == refused.end()) continue;
    state.set_message("the LMS refused a pod: " + it->second.error_message().substr(0, 900));
    if (it->second.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      state.set_phase(v1::MISSION_PHASE_FAILED);
    }
  }
  if (!plan.create.empty() || !plan.remove.empty()) {
    log::Info("agent: mission pods reconciled",
              {{"created", absl::StrCat(plan.create.size() - refused.size())},
               {"deleted", absl::StrCat(plan.remove.size())}});
  }
  missions_->RecordOwnStates(std::move(self), std::move(plan.states));
}

std::vector<v1::SubtreeCluster> ClusterAgent::Subtree() {
  std::vector<v1::SubtreeCluster> out;
  if (subordinates_ == nullptr) return out;
  // A child that went silent shows UNREACHABLE above too.
  (void)subordinates_->Sweep();
  absl::StatusOr<std::vector<v1::Cluster>> children = subordinates_->All();
  if (!children.ok()) return out;
  std::set<std::string> seen = {options_.cluster};
  auto add = [&](v1::SubtreeCluster below) {
    if (static_cast<int>(out.size()) >= kMaxSubtreeClusters) return;
    if (!seen.insert(below.name()).second) return;
    out.push_back(std::move(below));
  };
  for (const v1::Cluster& c : *children) {
    v1::SubtreeCluster child;
    child.set_name(c.metadata().name());
    child.set_parent(c.parent_cluster().empty() ? options_.cluster : c.parent_cluster());
    child.set_health(c.health());
    *child.mutable_cluster_labels() = c.cluster_labels();
    *child.mutable_labels() = c.metadata().labels();
    child.set_node_count(c.capacity().node_count());
    child.set_ready_node_count(c.capacity().ready_node_count());
    *child.mutable_last_heartbeat_time() = c.last_heartbeat_time();
    child.set_received_missions(c.received_missions());
    child.set_active_missions(c.active_missions());
    add(std::move(child));
    for (const v1::SubtreeCluster& below : c.subordinates()) add(below);
  }
  return out;
}

bool ClusterAgent::SyncCopies(v1::AcmService::Stub& hub) {
  std::vector<v1::Neighborhood> neighborhoods;
  std::string token;
  do {
    v1::ListNeighborhoodsRequest request;
    request.set_cluster(options_.cluster);
    request.set_page_size(1000);
    request.set_page_token(token);
    v1::ListNeighborhoodsResponse response;
    grpc::Status status =
        hub.ListNeighborhoods(OutgoingContext(options_.call_timeout).get(), request, &response);
    if (!status.ok()) {
      log::Warn("agent: ListNeighborhoods failed; copies kept",
                {{"hub", options_.hub_acm}, {"error", status.error_message()}});
      return false;
    }
    neighborhoods.insert(neighborhoods.end(), response.neighborhoods().begin(),
                         response.neighborhoods().end());
    token = response.next_page_token();
  } while (!token.empty());
  // An application is placed only inside its neighborhood: read just the
  // applications of the neighborhoods this cluster is in (not every one).
  std::vector<v1::Application> apps;
  for (const auto& nb : neighborhoods) {
    v1::GetApplicationRequest request;
    request.set_name(nb.application());
    v1::GetApplicationResponse response;
    grpc::Status status =
        hub.GetApplication(OutgoingContext(options_.call_timeout).get(), request, &response);
    // Just deleted, or just moved to a neighborhood without this cluster.
    if (status.error_code() == grpc::StatusCode::NOT_FOUND ||
        status.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      continue;
    }
    if (!status.ok()) {
      log::Warn("agent: GetApplication failed; copies kept",
                {{"hub", options_.hub_acm}, {"error", status.error_message()}});
      return false;
    }
    apps.push_back(response.application());
  }
  auto nb = copies_->SyncNeighborhoods(neighborhoods);
  auto assigned = copies_->SyncAssignments(
      AssignmentsFor(options_.cluster, apps, ToProtoTimestamp(absl::Now())));
  if (!nb.ok() || !assigned.ok()) {
    log::Warn("agent: local copies not stored",
              {{"error", std::string((!nb.ok() ? nb.status() : assigned.status()).message())}});
    return false;
  }
  if (*nb + *assigned > 0) {
    log::Info("agent: local copies updated",
              {{"neighborhoods", absl::StrCat(*nb)}, {"assignments", absl::StrCat(*assigned)}});
  }
  return true;
}

}  // namespace codeco::acm
