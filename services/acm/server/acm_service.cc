#include "acm/server/acm_service.h"

#include <atomic>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "acm/core/cluster_report.h"
#include "acm/core/service_endpoints.h"
#include "acm/server/channel_status_follower.h"
#include "acm/server/member_push_client.h"
#include "acm/server/swm_placement_scheduler.h"
#include "acm/store/kv_application_store.h"
#include "codeco/common/authz.h"
#include "codeco/common/channel_ready_watch.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/logging.h"
#include "codeco/common/operation_watch.h"
#include "codeco/common/serve_on_executor.h"
#include "codeco/common/status.h"
#include "codeco/common/watch_stream.h"

namespace codeco::acm {
namespace {

// Runs `work` (returning absl::StatusOr<Response>) on `executor` with
// ServeOnExecutor's policy and answers its result.
template <typename Response, typename Work>
grpc::ServerUnaryReactor* Answer(BoundedExecutor& executor, grpc::CallbackServerContext* context,
                                 Response* response, Work work) {
  return ServeOnExecutor(executor, context,
                         [response, work = std::move(work)](absl::Time) mutable -> absl::Status {
                           absl::StatusOr<Response> result = work();
                           if (result.ok()) *response = *std::move(result);
                           return result.status();
                         });
}

// Streams an application's changes: first the current state (from_revision
// 0) or the changes after from_revision, then every later change as the
// manager reports commits. Counted in `watchers` (by the caller, which
// refuses past the cap) until done.
class ApplicationWatch final : public WatchStream<v1::WatchApplicationResponse> {
 public:
  ApplicationWatch(ApplicationManager& manager, const v1::WatchApplicationRequest& request,
                   std::atomic<int>& watchers)
      : manager_(manager), name_(request.name()), watchers_(watchers) {
    if (request.from_revision() < 0) {
      Fail(ToGrpcStatus(InvalidFieldError("from_revision", "must not be negative")));
      return;
    }
    std::vector<v1::WatchApplicationResponse> first;
    if (request.from_revision() == 0) {
      absl::StatusOr<ApplicationSnapshot> snapshot = manager_.Snapshot(name_);
      if (!snapshot.ok()) {
        Fail(ToGrpcStatus(snapshot.status()));
        return;
      }
      for (auto& app : snapshot->applications) {
        v1::WatchApplicationResponse event;
        event.set_type(common::v1::WATCH_EVENT_TYPE_ADDED);
        *event.mutable_application() = std::move(app);
        first.push_back(std::move(event));
      }
      last_ = snapshot->revision;
    } else {
      last_ = request.from_revision();
    }
    listener_ = manager_.AddListener([this] { Poke(); });
    Start(std::move(first));
  }

  /// A watch refused before it started (counted like the others until done).
  ApplicationWatch(ApplicationManager& manager, std::atomic<int>& watchers,
                   const grpc::Status& refusal)
      : manager_(manager), watchers_(watchers) {
    Fail(refusal);
  }

 private:
  static constexpr size_t kBatch = 256;

  // The changes after the last one read, from the manager's change log.
  absl::StatusOr<Batch> Next() override {
    absl::StatusOr<int64_t> current = manager_.CurrentRevision();
    if (!current.ok()) return current.status();
    absl::StatusOr<std::vector<v1::WatchApplicationResponse>> changes =
        manager_.ReadChanges(name_, last_, kBatch);
    if (!changes.ok()) return changes.status();
    int64_t read_to =
        changes->empty() ? last_ : changes->back().application().metadata().revision();
    // Short of the batch, every change up to `current` has been seen.
    last_ = changes->size() == kBatch ? read_to : std::max(read_to, *current);
    return Batch{*std::move(changes), false};
  }

  void Closed() override {
    if (listener_ != 0) manager_.RemoveListener(listener_);
    watchers_.fetch_sub(1);
  }

  ApplicationManager& manager_;
  const std::string name_;
  std::atomic<int>& watchers_;
  int listener_ = 0;
  int64_t last_ = 0;  // under the stream's lock (Next) once started
};

// The member-from-base idiom: the dependencies are built before the service
// that refers to them.
struct OwnedDependencies {
  OwnedDependencies(KvStore& kv, Clock& clock, const AcmServiceOptions& options)
      : store(kv),
        missions(options.missions != nullptr
                     ? options.missions
                     : std::make_shared<MissionRelay>(kv, clock, /*root=*/true)),
        scheduler(MakeScheduler(options)),
        clusters(kv, clock, options.clusters),
        neighborhoods(kv, clusters, clock, options.neighborhoods),
        admission([this] { return RegisteredClusters(); }, &clock, options.policy_webhook),
        manager(store, *scheduler, clock, options.manager, &neighborhoods, &admission),
        drainer(clusters, neighborhoods, manager, clock),
        autoscaler(manager, clock) {
    if (!options.policy_bundle.bundle.empty()) {
      // Day 2: a new bundle brings new forecasts and policies to what still
      // waits for its start time.
      bundle_watcher = std::make_unique<PolicyBundleWatcher>(
          admission, options.policy_bundle, options.policy_reload_interval, [this] {
            absl::StatusOr<ReadmitOutcome> readmitted = manager.ReadmitWaiting();
            if (!readmitted.ok()) {
              log::Warn("re-admission failed",
                        {{"error", std::string(readmitted.status().message())}});
              return;
            }
            if (!readmitted->changed.empty()) {
              log::Info("re-admitted under the new policy bundle",
                        {{"applications", absl::StrJoin(readmitted->changed, ",")}});
            }
            for (const std::string& refused : readmitted->refused) {
              log::Warn("refused under the new policy bundle; its schedule stays",
                        {{"application", refused}});
            }
          });
    }
    auto record_release = [this](const std::string& name, const absl::Status& outcome) {
      absl::Status recorded = manager.RecordRelease(name, outcome);
      if (!recorded.ok()) {
        log::Warn("release not recorded",
                  {{"application", name}, {"error", std::string(recorded.message())}});
      }
    };
    if (in_memory != nullptr) in_memory->CompleteReleasesWith(record_release);
    if (swm != nullptr) {
      swm->SetReleaseSink(record_release);
      swm->SetSink([this](const std::string& name, int64_t spec_revision,
                          const PlacementResult& result) {
        auto recorded = manager.RecordPlacement(name, spec_revision, result);
        if (!recorded.ok()) {
          log::Warn("placement not recorded",
                    {{"application", name}, {"error", std::string(recorded.status().message())}});
        }
      });
    }
    // Drains, deletions and moves a restart interrupted carry on.
    absl::StatusOr<int> drained = drainer.Resume();
    if (!drained.ok()) {
      log::Warn("drains not resumed", {{"error", std::string(drained.status().message())}});
    }
    absl::StatusOr<int> resumed = manager.Resume();
    if (!resumed.ok()) {
      log::Warn("interrupted work not resumed",
                {{"error", std::string(resumed.status().message())}});
    } else if (*resumed > 0) {
      log::Info("interrupted work resumed", {{"applications", absl::StrCat(*resumed)}});
    }
    // The hub pushes neighborhoods and assignments to its members' ACMs; a
    // managed cluster (with local copies) only receives them.
    if (options.member_peers != nullptr && options.local_copies == nullptr) {
      publisher = std::make_unique<MemberPublisherLoop>(
          manager, neighborhoods, clusters, clock,
          std::make_unique<GrpcMemberPush>(*options.member_peers, options.push_timeout),
          options.publish_interval);
    }
    // The hub's SWM reports the channels of the applications it placed.
    if (options.swm_channel != nullptr && options.local_copies == nullptr) {
      channel_follower = std::make_unique<ChannelStatusFollower>(options.swm_channel, manager);
    }
    // SWM back after an outage: what waits out a backoff that grew during
    // the outage (up to a minute) is sent now, by the next reconcile pass.
    if (swm != nullptr) {
      swm_back = std::make_unique<ChannelReadyWatch>(options.swm_channel, [this] {
        const int placements = manager.RetryNow();
        const int releases = swm->RetryNow();
        if (placements + releases > 0) {
          log::Info("SWM reachable again; retrying now",
                    {{"placements", absl::StrCat(placements)},
                     {"releases", absl::StrCat(releases)}});
        }
      });
    }
    if (options.reevaluate_interval > absl::ZeroDuration()) {
      maintenance = std::thread([this, interval = options.reevaluate_interval,
                                 after = options.reevaluate_after] { Maintain(interval, after); });
    }
    if (options.autoscale_interval > absl::ZeroDuration() && options.local_copies == nullptr) {
      autoscaling = std::thread([this, interval = options.autoscale_interval] {
        while (!WaitStopping(interval)) autoscaler.Tick();
      });
    }
    if (options.reconcile_interval > absl::ZeroDuration()) {
      reconciler = std::thread([this, interval = options.reconcile_interval] {
        while (!WaitStopping(interval)) {
          absl::Status passed = manager.Reconcile().status();
          if (!passed.ok()) {
            log::Warn("reconcile pass failed", {{"error", std::string(passed.message())}});
          }
        }
      });
    }
  }

  // Waits `interval` or until stopping; true when stopping.
  bool WaitStopping(absl::Duration interval) {
    absl::MutexLock lock(&maintenance_mu);
    auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(maintenance_mu) { return stopping; };
    maintenance_mu.AwaitWithTimeout(absl::Condition(&stop), interval);
    return stopping;
  }
  // The SWM worker and the maintenance thread call into the manager: stop
  // them before members go.
  ~OwnedDependencies() {
    {
      absl::MutexLock lock(&maintenance_mu);
      stopping = true;
    }
    publisher.reset();
    channel_follower.reset();
    swm_back.reset();
    if (maintenance.joinable()) maintenance.join();
    if (reconciler.joinable()) reconciler.join();
    if (autoscaling.joinable()) autoscaling.join();
    if (swm != nullptr) swm->Stop();
  }

  // Every `interval`: re-evaluates the neighborhoods of applications on
  // clusters unreachable for `after` or more.
  void Maintain(absl::Duration interval, absl::Duration after) {
    while (true) {
      {
        absl::MutexLock lock(&maintenance_mu);
        auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(maintenance_mu) { return stopping; };
        maintenance_mu.AwaitWithTimeout(absl::Condition(&stop), interval);
        if (stopping) return;
      }
      absl::StatusOr<std::vector<std::string>> moved = drainer.ReevaluateDegraded(after);
      if (!moved.ok()) {
        log::Warn("neighborhood re-evaluation failed",
                  {{"error", std::string(moved.status().message())}});
      } else if (!moved->empty()) {
        log::Info("applications moved off unreachable clusters",
                  {{"applications", absl::StrJoin(*moved, ",")}});
      }
    }
  }

  // The registered clusters' region and country labels, for admission.
  std::vector<RegisteredCluster> RegisteredClusters() const {
    std::vector<RegisteredCluster> out;
    absl::StatusOr<std::vector<v1::Cluster>> all = clusters.All();
    if (!all.ok()) return out;
    for (const v1::Cluster& c : *all) {
      out.push_back({c.metadata().name(), c.cluster_labels().region(),
                     c.cluster_labels().country()});
    }
    return out;
  }

  std::unique_ptr<PlacementScheduler> MakeScheduler(const AcmServiceOptions& options) {
    if (options.swm_channel == nullptr) {
      auto made = std::make_unique<InMemoryPlacementScheduler>();
      in_memory = made.get();
      return made;
    }
    auto made = std::make_unique<SwmPlacementScheduler>(
        options.swm_channel, options.placement_timeout, options.release_retry_min,
        options.release_retry_max, options.placement_concurrency);
    swm = made.get();
    return made;
  }

  KvApplicationStore store;
  // The cluster tree's missions (the root's, or those relayed to an MC).
  std::shared_ptr<MissionRelay> missions;
  SwmPlacementScheduler* swm = nullptr;             // owned by `scheduler` when set
  InMemoryPlacementScheduler* in_memory = nullptr;  // owned by `scheduler` when set
  std::unique_ptr<PlacementScheduler> scheduler;
  ClusterRegistry clusters;
  NeighborhoodManager neighborhoods;
  AdmissionChain admission;
  ApplicationManager manager;
  ClusterDrainer drainer;
  // The hub's multi-cluster autoscaler (ticked by `autoscaling`).
  ApplicationAutoscaler autoscaler;
  absl::Mutex maintenance_mu;
  bool stopping ABSL_GUARDED_BY(maintenance_mu) = false;
  std::thread maintenance;
  std::thread reconciler;
  std::thread autoscaling;
  // Pushes to managed clusters (hub with options.member_peers only).
  std::unique_ptr<MemberPublisherLoop> publisher;
  // Records SWM's channel status (hub with an SWM only).
  std::unique_ptr<ChannelStatusFollower> channel_follower;
  // Brings retries forward when SWM is reachable again (hub with an SWM only).
  std::unique_ptr<ChannelReadyWatch> swm_back;
  // Keeps `admission` on the signed bundle's files (when configured).
  std::unique_ptr<PolicyBundleWatcher> bundle_watcher;
};

class OwningAcmService final : private OwnedDependencies, public AcmServiceImpl {
 public:
  OwningAcmService(KvStore& kv, Clock& clock, const AcmServiceOptions& options)
      : OwnedDependencies(kv, clock, options),
        AcmServiceImpl(OwnedDependencies::manager, OwnedDependencies::clusters,
                       OwnedDependencies::neighborhoods, OwnedDependencies::drainer,
                       *OwnedDependencies::missions, options.local_copies, options.hub_cluster) {
    SetMaxOperationWatchers(options.max_operation_watchers);
    SetMaxWatchers(options.max_watchers);
    if (options.autoscale_interval > absl::ZeroDuration() && options.local_copies == nullptr) {
      SetAutoscaler(&(OwnedDependencies::autoscaler));
    }
  }
};

}  // namespace

grpc::ServerUnaryReactor* AcmServiceImpl::ApplyApplication(
    grpc::CallbackServerContext* context, const v1::ApplyApplicationRequest* request,
    v1::ApplyApplicationResponse* response) {
  return Answer(executor_, context, response, [=, this] { return manager_.Apply(*request); });
}

grpc::ServerUnaryReactor* AcmServiceImpl::GetApplication(grpc::CallbackServerContext* context,
                                                         const v1::GetApplicationRequest* request,
                                                         v1::GetApplicationResponse* response) {
  absl::StatusOr<Caller> caller = CallerOf(*context, hub_cluster_);
  return Answer(executor_, context, response,
                [=, this]() -> absl::StatusOr<v1::GetApplicationResponse> {
                  if (!caller.ok()) return caller.status();
                  ASSIGN_OR_RETURN(v1::GetApplicationResponse found_app, manager_.Get(*request));
                  RETURN_IF_ERROR(RequireMemberOfApplication(*context, *caller, request->name(),
                                                             "GetApplication"));
                  return found_app;
                });
}

absl::Status AcmServiceImpl::RequireMemberOfApplication(grpc::CallbackServerContext& context,
                                                        const Caller& caller,
                                                        const std::string& application,
                                                        const std::string& method) const {
  if (caller.plaintext || caller.kind != CallerKind::kMember) return absl::OkStatus();
  // A member's agent reads the applications of the neighborhoods it is in
  // (its local copies), no others; checked after the lookup, as
  // GetNeighborhood.
  v1::GetNeighborhoodRequest of;
  of.set_application(application);
  absl::StatusOr<v1::GetNeighborhoodResponse> found = neighborhoods_.Get(of);
  std::set<std::string> members;
  if (found.ok()) {
    for (const auto& m : found->neighborhood().members()) members.insert(m.cluster());
  }
  return RequireNeighborhoodMember(context, hub_cluster_, method,
                                   found.ok() ? found->neighborhood().id() : "(none yet)", members);
}

grpc::ServerUnaryReactor* AcmServiceImpl::ResolveService(grpc::CallbackServerContext* context,
                                                         const v1::ResolveServiceRequest* request,
                                                         v1::ResolveServiceResponse* response) {
  absl::StatusOr<Caller> caller = CallerOf(*context, hub_cluster_);
  return Answer(
      executor_, context, response, [=, this]() -> absl::StatusOr<v1::ResolveServiceResponse> {
        if (!caller.ok()) return caller.status();
        ASSIGN_OR_RETURN(ServiceName name, ParseServiceName(request->name()));
        v1::GetApplicationRequest get;
        get.set_name(name.application);
        ASSIGN_OR_RETURN(v1::GetApplicationResponse found, manager_.Get(get));
        RETURN_IF_ERROR(
            RequireMemberOfApplication(*context, *caller, name.application, "ResolveService"));
        // A cluster's agent asks for its own cluster unless it names another.
        std::string from = request->from_cluster();
        if (from.empty() && !caller->plaintext && caller->kind == CallerKind::kMember) {
          from = caller->identity.cluster;
        }
        // Regions of the clusters asked about, read once each.
        std::map<std::string, std::optional<std::string>> regions;
        auto region_of = [&](const std::string& cluster) -> const std::optional<std::string>& {
          auto [it, added] = regions.try_emplace(cluster);
          if (added) {
            v1::GetClusterRequest one;
            one.set_name(cluster);
            absl::StatusOr<v1::GetClusterResponse> got = clusters_.Get(one);
            if (got.ok()) it->second = got->cluster().cluster_labels().region();
          }
          return it->second;
        };
        if (!from.empty() && !region_of(from).has_value()) {
          return InvalidFieldError(
              "from_cluster", absl::StrCat("no registered cluster \"", from.substr(0, 64), "\""));
        }
        return ResolveEndpoints(
            found.application(), name, from, request->include_not_ready(),
            [&](const std::string& cluster) { return region_of(cluster).value_or(""); });
      });
}

grpc::ServerUnaryReactor* AcmServiceImpl::ListApplications(
    grpc::CallbackServerContext* context, const v1::ListApplicationsRequest* request,
    v1::ListApplicationsResponse* response) {
  return Answer(executor_, context, response, [=, this] { return manager_.List(*request); });
}

grpc::ServerUnaryReactor* AcmServiceImpl::DeleteApplication(
    grpc::CallbackServerContext* context, const v1::DeleteApplicationRequest* request,
    v1::DeleteApplicationResponse* response) {
  return Answer(executor_, context, response, [=, this] { return manager_.Delete(*request); });
}

grpc::ServerUnaryReactor* AcmServiceImpl::RollbackApplication(
    grpc::CallbackServerContext* context, const v1::RollbackApplicationRequest* request,
    v1::RollbackApplicationResponse* response) {
  return Answer(executor_, context, response, [=, this] { return manager_.Rollback(*request); });
}

grpc::ServerUnaryReactor* AcmServiceImpl::ListApplicationRevisions(
    grpc::CallbackServerContext* context, const v1::ListApplicationRevisionsRequest* request,
    v1::ListApplicationRevisionsResponse* response) {
  return Answer(executor_, context, response,
                [=, this] { return manager_.ListRevisions(*request); });
}

grpc::ServerWriteReactor<v1::WatchApplicationResponse>* AcmServiceImpl::WatchApplication(
    grpc::CallbackServerContext* context, const v1::WatchApplicationRequest* request) {
  if (watchers_.fetch_add(1) >= max_watchers_.load()) {
    return new ApplicationWatch(
        manager_, watchers_,
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     absl::StrCat("acm: already ", max_watchers_.load(),
                                  " open watches (the most this server keeps); retry later")));
  }
  return new ApplicationWatch(manager_, *request, watchers_);
}

grpc::ServerUnaryReactor* AcmServiceImpl::GetOperation(grpc::CallbackServerContext* context,
                                                       const v1::GetOperationRequest* request,
                                                       v1::GetOperationResponse* response) {
  return Answer(executor_, context, response, [=, this] { return manager_.GetOperation(*request); });
}

grpc::ServerUnaryReactor* AcmServiceImpl::ListOperations(grpc::CallbackServerContext* context,
                                                         const v1::ListOperationsRequest* request,
                                                         v1::ListOperationsResponse* response) {
  return Answer(executor_, context, response,
                [=, this] { return manager_.ListOperations(*request); });
}

grpc::ServerWriteReactor<v1::WatchOperationResponse>* AcmServiceImpl::WatchOperation(
    grpc::CallbackServerContext* context, const v1::WatchOperationRequest* request) {
  return new OperationWatch<v1::WatchOperationResponse>(
      "acm",
      [this](const std::string& id) -> absl::StatusOr<common::v1::Operation> {
        v1::GetOperationRequest get;
        get.set_id(id);
        absl::StatusOr<v1::GetOperationResponse> got = manager_.GetOperation(get);
        if (!got.ok()) return got.status();
        return got->operation();
      },
      [this](std::function<void()> f) { return manager_.AddListener(std::move(f)); },
      [this](int listener) { manager_.RemoveListener(listener); }, operation_watchers_,
      max_operation_watchers_, request->id());
}

grpc::ServerUnaryReactor* AcmServiceImpl::RegisterCluster(grpc::CallbackServerContext* context,
                                                          const v1::RegisterClusterRequest* request,
                                                          v1::RegisterClusterResponse* response) {
  absl::Status allowed =
      RequireOwnCluster(*context, hub_cluster_, "RegisterCluster", "cluster.metadata.name",
                        request->cluster().metadata().name());
  return Answer(executor_, context, response,
                [=, this]() -> absl::StatusOr<v1::RegisterClusterResponse> {
                  RETURN_IF_ERROR(allowed);
                  return clusters_.Register(*request);
                });
}

grpc::ServerUnaryReactor* AcmServiceImpl::Heartbeat(grpc::CallbackServerContext* context,
                                                    const v1::HeartbeatRequest* request,
                                                    v1::HeartbeatResponse* response) {
  absl::Status allowed = RequireOwnCluster(*context, hub_cluster_, "Heartbeat", "cluster_name",
                                          request->cluster_name());
  return Answer(executor_, context, response,
                [=, this]() -> absl::StatusOr<v1::HeartbeatResponse> {
                  RETURN_IF_ERROR(allowed);
                  // Every report is checked before any of the heartbeat is recorded.
                  std::vector<PodReport> pods;
                  for (int i = 0; i < request->pods_size(); ++i) {
                    const v1::PodReport& p = request->pods(i);
                    const std::string at = absl::StrCat("pods[", i, "].addresses");
                    if (p.addresses_size() > kMaxPodAddresses) {
                      return InvalidFieldError(at, absl::StrCat("more than ", kMaxPodAddresses));
                    }
                    for (int j = 0; j < p.addresses_size(); ++j) {
                      RETURN_IF_ERROR(
                          CheckPodAddress(p.addresses(j), absl::StrCat(at, "[", j, "]")));
                    }
                    pods.push_back({p.application(),
                                    p.service(),
                                    p.pod(),
                                    p.node(),
                                    p.phase(),
                                    p.message(),
                                    p.cpu_millicores(),
                                    p.memory_bytes(),
                                    p.usage_known(),
                                    {p.addresses().begin(), p.addresses().end()}});
                  }
                  ASSIGN_OR_RETURN(v1::HeartbeatResponse answer, clusters_.Heartbeat(*request));
                  if (!answer.reregister_required()) {
                    RETURN_IF_ERROR(AnswerMissions(*request, answer));
                  }
                  if (request->pods_reported() && !answer.reregister_required()) {
                    if (autoscaler_ != nullptr) {
                      autoscaler_->RecordUsage(request->cluster_name(), pods);
                    }
                    // Readiness is a view: a failure here must not fail the heartbeat.
                    absl::StatusOr<int> changed = manager_.RecordPods(request->cluster_name(), pods);
                    if (!changed.ok()) {
                      log::Warn("recording pod readiness failed",
                                {{"cluster", request->cluster_name()},
                                 {"error", std::string(changed.status().message())}});
                    }
                  }
                  return answer;
                });
}

// Reads bring health up to date first, so a silent cluster shows UNREACHABLE
// even between periodic sweeps.
grpc::ServerUnaryReactor* AcmServiceImpl::GetCluster(grpc::CallbackServerContext* context,
                                                     const v1::GetClusterRequest* request,
                                                     v1::GetClusterResponse* response) {
  absl::Status allowed =
      RequireOwnCluster(*context, hub_cluster_, "GetCluster", "name", request->name());
  return Answer(executor_, context, response,
                [=, this]() -> absl::StatusOr<v1::GetClusterResponse> {
                  RETURN_IF_ERROR(allowed);
                  RETURN_IF_ERROR(clusters_.Sweep().status());
                  return clusters_.Get(*request);
                });
}

grpc::ServerUnaryReactor* AcmServiceImpl::ListClusters(grpc::CallbackServerContext* context,
                                                       const v1::ListClustersRequest* request,
                                                       v1::ListClustersResponse* response) {
  return Answer(executor_, context, response,
                [=, this]() -> absl::StatusOr<v1::ListClustersResponse> {
                  RETURN_IF_ERROR(clusters_.Sweep().status());
                  return clusters_.List(*request);
                });
}

grpc::ServerUnaryReactor* AcmServiceImpl::UnregisterCluster(
    grpc::CallbackServerContext* context, const v1::UnregisterClusterRequest* request,
    v1::UnregisterClusterResponse* response) {
  return Answer(
      executor_, context, response, [=, this]() -> absl::StatusOr<v1::UnregisterClusterResponse> {
        ASSIGN_OR_RETURN(v1::UnregisterClusterResponse answer, drainer_.Unregister(*request));
        if (autoscaler_ != nullptr) autoscaler_->ForgetCluster(request->name());
        missions_.ForgetReporter(request->name());
        return answer;
      });
}

absl::Status AcmServiceImpl::AnswerMissions(const v1::HeartbeatRequest& request,
                                            v1::HeartbeatResponse& answer) {
  missions_.RecordReport(request.cluster_name(), request.mission_status());
  v1::GetClusterRequest get;
  get.set_name(request.cluster_name());
  ASSIGN_OR_RETURN(v1::GetClusterResponse reporter, clusters_.Get(get));
  std::vector<TreeMember> members = {TreeMemberOf(reporter.cluster())};
  for (const v1::SubtreeCluster& below : request.subtree()) members.push_back(TreeMemberOf(below));
  ASSIGN_OR_RETURN(std::vector<v1::Mission> addressed, missions_.MissionsFor(members));
  for (v1::Mission& m : addressed) *answer.add_missions() = std::move(m);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TreeMember>> AcmServiceImpl::KnownTreeMembers() const {
  ASSIGN_OR_RETURN(std::vector<v1::Cluster> registered, clusters_.All());
  std::vector<TreeMember> known;
  for (const v1::Cluster& c : registered) {
    known.push_back(TreeMemberOf(c));
    for (const v1::SubtreeCluster& below : c.subordinates()) known.push_back(TreeMemberOf(below));
  }
  return known;
}

grpc::ServerUnaryReactor* AcmServiceImpl::ApplyMission(grpc::CallbackServerContext* context,
                                                       const v1::ApplyMissionRequest* request,
                                                       v1::ApplyMissionResponse* response) {
  return Answer(executor_, context, response, [=, this] { return missions_.Apply(*request); });
}

grpc::ServerUnaryReactor* AcmServiceImpl::DeleteMission(grpc::CallbackServerContext* context,
                                                        const v1::DeleteMissionRequest* request,
                                                        v1::DeleteMissionResponse* response) {
  return Answer(executor_, context, response,
                [=, this]() -> absl::StatusOr<v1::DeleteMissionResponse> {
                  RETURN_IF_ERROR(missions_.Delete(*request));
                  return v1::DeleteMissionResponse();
                });
}

grpc::ServerUnaryReactor* AcmServiceImpl::GetMission(grpc::CallbackServerContext* context,
                                                     const v1::GetMissionRequest* request,
                                                     v1::GetMissionResponse* response) {
  return Answer(executor_, context, response,
                [=, this]() -> absl::StatusOr<v1::GetMissionResponse> {
                  RETURN_IF_ERROR(clusters_.Sweep().status());
                  ASSIGN_OR_RETURN(std::vector<TreeMember> known, KnownTreeMembers());
                  return missions_.Get(*request, known);
                });
}

grpc::ServerUnaryReactor* AcmServiceImpl::ListMissions(grpc::CallbackServerContext* context,
                                                       const v1::ListMissionsRequest* request,
                                                       v1::ListMissionsResponse* response) {
  return Answer(executor_, context, response,
                [=, this]() -> absl::StatusOr<v1::ListMissionsResponse> {
                  RETURN_IF_ERROR(clusters_.Sweep().status());
                  ASSIGN_OR_RETURN(std::vector<TreeMember> known, KnownTreeMembers());
                  return missions_.List(*request, known);
                });
}

grpc::ServerUnaryReactor* AcmServiceImpl::GetNeighborhood(grpc::CallbackServerContext* context,
                                                          const v1::GetNeighborhoodRequest* request,
                                                          v1::GetNeighborhoodResponse* response) {
  return Answer(executor_, context, response,
                [=, this]() -> absl::StatusOr<v1::GetNeighborhoodResponse> {
                  ASSIGN_OR_RETURN(v1::GetNeighborhoodResponse found,
                                   neighborhoods_.Get(*request));
                  std::set<std::string> members;
                  for (const auto& m : found.neighborhood().members()) members.insert(m.cluster());
                  RETURN_IF_ERROR(RequireNeighborhoodMember(*context, hub_cluster_,
                                                            "GetNeighborhood",
                                                            found.neighborhood().id(), members));
                  return found;
                });
}

grpc::ServerUnaryReactor* AcmServiceImpl::ListNeighborhoods(
    grpc::CallbackServerContext* context, const v1::ListNeighborhoodsRequest* request,
    v1::ListNeighborhoodsResponse* response) {
  absl::Status allowed = RequireOwnCluster(*context, hub_cluster_, "ListNeighborhoods", "cluster",
                                          request->cluster());
  return Answer(executor_, context, response,
                [=, this]() -> absl::StatusOr<v1::ListNeighborhoodsResponse> {
                  RETURN_IF_ERROR(allowed);
                  return neighborhoods_.List(*request);
                });
}

grpc::ServerUnaryReactor* AcmServiceImpl::PushNeighborhood(
    grpc::CallbackServerContext* context, const v1::PushNeighborhoodRequest* request,
    v1::PushNeighborhoodResponse* response) {
  return Answer(executor_, context, response,
                [=, this]() -> absl::StatusOr<v1::PushNeighborhoodResponse> {
                  if (local_copies_ == nullptr) {
                    return absl::FailedPreconditionError(
                        "PushNeighborhood is served by a managed cluster's ACM, not the hub's");
                  }
                  return local_copies_->PushNeighborhood(*request);
                });
}

grpc::ServerUnaryReactor* AcmServiceImpl::PushAssignment(grpc::CallbackServerContext* context,
                                                         const v1::PushAssignmentRequest* request,
                                                         v1::PushAssignmentResponse* response) {
  return Answer(executor_, context, response,
                [=, this]() -> absl::StatusOr<v1::PushAssignmentResponse> {
                  if (local_copies_ == nullptr) {
                    return absl::FailedPreconditionError(
                        "PushAssignment is served by a managed cluster's ACM, not the hub's");
                  }
                  return local_copies_->PushAssignment(*request);
                });
}

std::vector<std::string> AcmServiceColumnFamilies() {
  std::vector<std::string> families = ApplicationColumnFamilies();
  for (const auto& f : LocalCopyColumnFamilies()) families.push_back(f);
  for (const char* f : {"clusters", "operations", kMissionFamily}) families.push_back(f);
  return families;
}

std::unique_ptr<AcmServiceImpl> NewAcmService(KvStore& kv, Clock& clock,
                                              AcmServiceOptions options) {
  return std::make_unique<OwningAcmService>(kv, clock, options);
}

}  // namespace codeco::acm
