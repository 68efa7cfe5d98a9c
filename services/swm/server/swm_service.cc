#include "swm/server/swm_service.h"

#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/blocking_counter.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/logging.h"
#include "codeco/common/metrics.h"
#include "codeco/common/status.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "swm/server/cluster_service.h"
#include "swm/server/codef_directory.h"
#include "swm/server/convert.h"
#include "swm/server/netma_link_source.h"
#include "swm/server/remote_cluster.h"

namespace codeco::swm {
namespace {

namespace pb = codeco::swm::v1;
using codeco::common::v1::Operation;

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// The status a stored, failed operation answers with again.
absl::Status StatusOf(const codeco::common::v1::Error& error) {
  return absl::Status(static_cast<absl::StatusCode>(error.code()), error.message());
}

void SetError(const absl::Status& status, codeco::common::v1::Error* error) {
  error->set_code(static_cast<codeco::common::v1::ErrorCode>(status.code()));
  error->set_message(std::string(status.message()));
}

constexpr char kReleaseKind[] = "swm.ReleaseApplication";

// True when the application has pods under `plan`: a placement that is done,
// or a removal that left some pods (its targets) behind.
bool HoldsPods(const pb::AssignmentPlan& plan) {
  if (plan.targets().empty()) return false;
  if (plan.phase() == pb::PLAN_PHASE_DONE) return true;
  for (const pb::PlanAction& a : plan.actions()) {
    if (a.type() == pb::ACTION_TYPE_DELETE_POD) return true;
  }
  return false;
}

}  // namespace

// The codeco_swm_* domain metrics, declared once.
struct SwmServiceImpl::Metrics {
  explicit Metrics(prometheus::Registry& r)
      : placements(
            prometheus::BuildCounter()
                .Name(MetricName("swm", "placements_total"))
                .Help("PlaceApplication outcomes by status code (OK, FAILED_PRECONDITION...)")
                .Register(r)),
        duration(prometheus::BuildHistogram()
                     .Name(MetricName("swm", "placement_duration_seconds"))
                     .Help("Time to place and execute one application")
                     .Register(r)
                     .Add({}, prometheus::Histogram::BucketBoundaries{0.005, 0.01, 0.025, 0.05, 0.1,
                                                                      0.25, 0.5, 1, 2.5, 5, 10})),
        placed(prometheus::BuildCounter()
                   .Name(MetricName("swm", "workloads_placed_total"))
                   .Help("Workloads whose pods a committed plan created")
                   .Register(r)
                   .Add({})),
        unplaced(prometheus::BuildCounter()
                     .Name(MetricName("swm", "workloads_unplaced_total"))
                     .Help("Workloads a placement could not fit")
                     .Register(r)
                     .Add({})) {}
  prometheus::Family<prometheus::Counter>& placements;
  prometheus::Histogram& duration;
  prometheus::Counter& placed;
  prometheus::Counter& unplaced;
};

SwmServiceImpl::SwmServiceImpl(KvStore& store, const Clock& clock,
                               std::unique_ptr<PeerChannels> channels,
                               std::shared_ptr<ClusterDirectory> directory,
                               std::shared_ptr<LinkSource> links, SwmServiceOptions options,
                               prometheus::Registry* registry)
    : metrics_(registry != nullptr ? std::make_unique<Metrics>(*registry) : nullptr),
      plans_(store),
      clock_(clock),
      channels_(std::move(channels)),
      directory_(std::move(directory)),
      links_(std::move(links)),
      options_(options),
      registry_(NewDefaultRegistry()),
      worker_([this] { Work(); }) {}

SwmServiceImpl::~SwmServiceImpl() {
  {
    absl::MutexLock lock(&queue_mu_);
    stopping_ = true;
  }
  worker_.join();
}

bool SwmServiceImpl::Submit(std::function<void()> task) {
  absl::MutexLock lock(&queue_mu_);
  if (stopping_ || queue_.size() >= options_.max_queued_placements) return false;
  queue_.push_back(std::move(task));
  return true;
}

void SwmServiceImpl::Work() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&queue_mu_);
      queue_mu_.Await(absl::Condition(
          +[](SwmServiceImpl* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->queue_mu_) {
            return s->stopping_ || !s->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping, nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

grpc::ServerUnaryReactor* SwmServiceImpl::OnWorker(grpc::CallbackServerContext* context,
                                                   std::function<absl::Status(absl::Time)> work) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  bool queued = Submit([context, reactor, work = std::move(work)] {
    if (context->IsCancelled()) {
      reactor->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled while queued"));
      return;
    }
    if (context->deadline() <= std::chrono::system_clock::now()) {
      reactor->Finish(
          grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed while queued"));
      return;
    }
    absl::Time deadline = context->deadline() == std::chrono::system_clock::time_point::max()
                              ? absl::InfiniteFuture()
                              : absl::FromChrono(context->deadline());
    reactor->Finish(ToGrpcStatus(work(deadline)));
  });
  if (!queued) {
    reactor->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 "too many placements waiting; retry later"));
  }
  return reactor;
}

grpc::ServerUnaryReactor* SwmServiceImpl::PlaceApplication(
    grpc::CallbackServerContext* context, const pb::PlaceApplicationRequest* request,
    pb::PlaceApplicationResponse* response) {
  return OnWorker(context, [this, request, response](absl::Time deadline) {
    absl::StatusOr<Operation> op = Place(*request, deadline);
    if (op.ok()) *response->mutable_operation() = std::move(*op);
    return op.status();
  });
}

grpc::ServerUnaryReactor* SwmServiceImpl::ReleaseApplication(
    grpc::CallbackServerContext* context, const pb::ReleaseApplicationRequest* request,
    pb::ReleaseApplicationResponse* response) {
  return OnWorker(context, [this, request, response](absl::Time deadline) {
    absl::StatusOr<pb::AssignmentPlan> plan = Release(*request, deadline);
    if (plan.ok()) *response->mutable_plan() = std::move(*plan);
    return plan.status();
  });
}

grpc::ServerUnaryReactor* SwmServiceImpl::GetAssignmentPlan(
    grpc::CallbackServerContext* context, const pb::GetAssignmentPlanRequest* request,
    pb::GetAssignmentPlanResponse* response) {
  if (request->application().empty()) {
    return Answer(context, InvalidFieldError("application", "is required"));
  }
  if (request->plan_revision() < 0) {
    return Answer(context, InvalidFieldError("plan_revision", "must not be negative"));
  }
  absl::StatusOr<pb::AssignmentPlan> plan =
      plans_.Get(request->application(), request->plan_revision());
  if (plan.ok()) *response->mutable_plan() = std::move(*plan);
  return Answer(context, plan.status());
}

grpc::ServerUnaryReactor* SwmServiceImpl::ListAssignmentPlans(
    grpc::CallbackServerContext* context, const pb::ListAssignmentPlansRequest* request,
    pb::ListAssignmentPlansResponse* response) {
  absl::StatusOr<pb::ListAssignmentPlansResponse> page = plans_.List(*request);
  if (page.ok()) *response = std::move(*page);
  return Answer(context, page.status());
}

grpc::ServerUnaryReactor* SwmServiceImpl::GetOperation(grpc::CallbackServerContext* context,
                                                       const pb::GetOperationRequest* request,
                                                       pb::GetOperationResponse* response) {
  if (request->id().empty()) return Answer(context, InvalidFieldError("id", "is required"));
  absl::StatusOr<Operation> op = plans_.GetOperation(request->id());
  if (op.ok()) *response->mutable_operation() = std::move(*op);
  return Answer(context, op.status());
}

absl::StatusOr<SwmServiceImpl::ClusterRig*> SwmServiceImpl::RigFor(const std::string& cluster,
                                                                   const std::string& lms) {
  auto it = rigs_.find(cluster);
  if (it != rigs_.end() && it->second.mc == nullptr && it->second.lms == lms) return &it->second;
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, channels_->Get(lms));
  ClusterRig rig;
  rig.lms = lms;
  rig.runtime = std::make_unique<LmsPodRuntime>(
      std::move(channel),
      LmsPodRuntimeOptions{.cluster = cluster, .call_timeout = options_.lms_timeout});
  auto local = std::make_unique<LocalClusterExecutor>(clock_, *rig.runtime);
  rig.local = local.get();
  rig.executor = std::move(local);
  ClusterRig& stored = rigs_[cluster];
  stored = std::move(rig);
  // Remembered so that a restarted hub can still remove what it placed there.
  absl::StatusOr<std::optional<std::string>> saved = plans_.LmsEndpoint(cluster);
  if (!saved.ok() || saved->value_or("") != lms) {
    absl::Status st = plans_.SaveLmsEndpoint(cluster, lms);
    if (!st.ok()) {
      log::Warn("cannot remember a cluster's LMS endpoint",
                {{"cluster", cluster}, {"error", std::string(st.message())}});
    }
  }
  return &stored;
}

absl::StatusOr<SwmServiceImpl::ClusterRig*> SwmServiceImpl::RigForMc(const std::string& cluster,
                                                                     const std::string& swm) {
  auto it = rigs_.find(cluster);
  if (it != rigs_.end() && it->second.mc_address == swm) return &it->second;
  PeerChannels& peers = options_.mc_channels != nullptr ? *options_.mc_channels : *channels_;
  ClusterRig rig;
  rig.mc_address = swm;
  ASSIGN_OR_RETURN(rig.mc, peers.Get(swm));
  auto remote = std::make_unique<RemoteClusterExecutor>(rig.mc, options_.mc_timeout);
  rig.remote = remote.get();
  rig.executor = std::move(remote);
  ClusterRig& stored = rigs_[cluster];
  stored = std::move(rig);
  // Remembered so that a restarted hub can still remove what it placed there.
  absl::StatusOr<std::optional<std::string>> saved = plans_.SwmEndpoint(cluster);
  if (!saved.ok() || saved->value_or("") != swm) {
    absl::Status st = plans_.SaveSwmEndpoint(cluster, swm);
    if (!st.ok()) {
      log::Warn("cannot remember a cluster's swm endpoint",
                {{"cluster", cluster}, {"error", std::string(st.message())}});
    }
  }
  return &stored;
}

absl::StatusOr<Operation> SwmServiceImpl::Place(const pb::PlaceApplicationRequest& request,
                                                absl::Time deadline) {
  absl::MutexLock lock(&place_mu_);
  const absl::Time start = absl::Now();
  absl::StatusOr<Operation> op = PlaceLocked(request, deadline);
  for (auto& [name, rig] : rigs_) {
    if (rig.runtime != nullptr) rig.runtime->SetDeadline(absl::InfiniteFuture());
  }
  if (metrics_ != nullptr) {
    metrics_->placements.Add({{"code", absl::StatusCodeToString(op.status().code())}}).Increment();
    metrics_->duration.Observe(absl::ToDoubleSeconds(absl::Now() - start));
  }
  return op;
}

absl::StatusOr<Operation> SwmServiceImpl::PlaceLocked(const pb::PlaceApplicationRequest& request,
                                                      absl::Time deadline) {
  // Input checks first: nothing is read from peers for a bad request.
  FieldErrors errors;
  if (!request.has_application()) errors.Add("application", "is required");
  const auto& members = request.neighborhood().members();
  if (members.empty()) errors.Add("neighborhood.members", "must list at least one cluster");
  std::set<std::string> names;
  for (int i = 0; i < members.size(); ++i) {
    std::string path = absl::StrCat("neighborhood.members[", i, "].cluster");
    if (members[i].cluster().empty()) {
      errors.Add(path, "is required");
    } else if (!names.insert(members[i].cluster()).second) {
      errors.Add(path, "duplicate cluster \"" + members[i].cluster() + "\"");
    }
  }
  RETURN_IF_ERROR(errors.ToStatus());
  const std::string app_name = ApplicationName(request.application());
  const std::string resource = "applications/" + app_name;

  if (!request.request_id().empty()) {
    ASSIGN_OR_RETURN(std::optional<Operation> seen,
                     plans_.OperationForRequest(request.request_id()));
    if (seen.has_value()) {
      if (seen->resource() != resource || seen->kind() != "swm.PlaceApplication") {
        return InvalidFieldError("request_id", absl::StrCat("already used by ", seen->kind(),
                                                            " for ", seen->resource()));
      }
      if (seen->has_error()) return StatusOf(seen->error());
      return *seen;
    }
  }
  ASSIGN_OR_RETURN(Application app, ToCoreApplication(request.application(), names));

  // How each member is reached: through its MC swm (the neighborhood's
  // endpoints["swm"], which ACM copies from its registry, else
  // swm.cluster_endpoints), or, for a cluster without one, through its LMS
  // (endpoints["lms"], else the testbed directory).
  std::map<std::string, ClusterEndpoint> known;
  bool need_directory = false;
  for (const auto& member : members) {
    if (!member.endpoints().count("swm") && !options_.cluster_endpoints.count(member.cluster())) {
      need_directory = true;
    }
  }
  if (directory_ != nullptr && need_directory) {
    absl::StatusOr<std::vector<ClusterEndpoint>> listed = directory_->ListClusters();
    if (!listed.ok()) {
      return absl::UnavailableError("cluster directory: " + std::string(listed.status().message()));
    }
    for (ClusterEndpoint& c : *listed) known[c.name] = std::move(c);
  }
  Federation federation;
  std::vector<std::string> neighborhood;
  std::vector<std::string> unreachable;
  struct MemberRead {
    ClusterEndpoint endpoint;
    ClusterRig* rig = nullptr;
    absl::StatusOr<std::vector<Node>> nodes = absl::UnknownError("not read");
  };
  std::vector<MemberRead> reads(members.size());
  for (int i = 0; i < members.size(); ++i) {
    const std::string& name = members[i].cluster();
    ClusterEndpoint endpoint = known.count(name) ? known[name] : ClusterEndpoint{.name = name};
    std::string swm;
    if (auto it = members[i].endpoints().find("swm"); it != members[i].endpoints().end()) {
      swm = it->second;
    } else if (auto mc = options_.cluster_endpoints.find(name);
               mc != options_.cluster_endpoints.end()) {
      swm = mc->second;
    }
    if (auto it = members[i].endpoints().find("lms"); it != members[i].endpoints().end()) {
      endpoint.lms = it->second;
    }
    if (swm.empty() && endpoint.lms.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "neighborhood.members[", i, "].endpoints: no swm or LMS endpoint known for cluster ",
          name, (known.count(name) ? " (it has no nodes)" : " (unknown cluster)")));
    }
    absl::StatusOr<ClusterRig*> rig =
        swm.empty() ? RigFor(name, endpoint.lms) : RigForMc(name, swm);
    if (!rig.ok()) {
      return absl::Status(rig.status().code(),
                          absl::StrCat("cluster ", name, ": ", rig.status().message()));
    }
    if ((*rig)->runtime != nullptr) (*rig)->runtime->SetDeadline(deadline);
    reads[i].endpoint = std::move(endpoint);
    reads[i].rig = *rig;
  }
  // The members are read concurrently (a few at a time) — a member with an
  // swm through its GetClusterView, the others through their LMS — unless a
  // node view read less than swm.node_view_ttl ago can be reused.
  {
    const absl::Time now = clock_.Now();
    std::vector<MemberRead*> to_read;
    for (MemberRead& read : reads) {
      auto cached = node_cache_.find(read.endpoint.name);
      if (cached != node_cache_.end() && now - cached->second.read_at < options_.node_view_ttl) {
        read.nodes = cached->second.nodes;
      } else {
        to_read.push_back(&read);
      }
    }
    absl::BlockingCounter done(static_cast<int>(to_read.size()));
    const absl::Duration mc_timeout = options_.mc_timeout;
    auto read_one = [mc_timeout, deadline](MemberRead& read) {
      if (read.rig->mc != nullptr) {
        read.nodes = ReadClusterView(read.rig->mc, read.endpoint.name, mc_timeout, deadline);
      } else {
        read.nodes = read.rig->runtime->ListNodes();
      }
    };
    for (MemberRead* read_ptr : to_read) {
      MemberRead& read = *read_ptr;
      bool queued = readers_.Submit([&read, &done, &read_one] {
        read_one(read);
        done.DecrementCount();
      });
      if (!queued) {
        read_one(read);
        done.DecrementCount();
      }
    }
    done.Wait();
    if (options_.node_view_ttl > absl::ZeroDuration()) {
      for (MemberRead* read : to_read) {
        if (read->nodes.ok()) node_cache_[read->endpoint.name] = CachedNodes{*read->nodes, now};
      }
    }
  }
  for (MemberRead& read : reads) {
    const std::string& name = read.endpoint.name;
    if (!read.nodes.ok()) {
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("deadline passed while reading cluster ", name, "; nothing was reserved"));
      }
      // A member that does not answer is left out; the others may still do.
      log::Warn("cluster left out of a placement: it does not answer",
                {{"cluster", name}, {"error", std::string(read.nodes.status().message())}});
      unreachable.push_back(absl::StrCat(name, " (", read.nodes.status().message(), ")"));
      continue;
    }
    // A member's labels: the directory's (testbed), else its nodes' own.
    ClusterLabels labels = known.count(name) ? read.endpoint.labels : LabelsFromNodes(*read.nodes);
    federation.AddCluster(Cluster{.name = name,
                                  .labels = std::move(labels),
                                  .nodes = std::move(*read.nodes),
                                  .intra_latency_ns = options_.intra_cluster_latency_ns});
    neighborhood.push_back(name);
  }
  if (neighborhood.empty()) {
    return absl::UnavailableError("no member cluster answers: " + absl::StrJoin(unreachable, ", "));
  }
  if (links_ != nullptr) {
    // The links among the members in one read of the link source (NetMA's
    // topology: one call), unless every pair was read less than
    // swm.link_cache_ttl ago.
    const absl::Time now = clock_.Now();
    bool fresh = options_.link_cache_ttl > absl::ZeroDuration();
    for (const std::string& from : neighborhood) {
      for (const std::string& to : neighborhood) {
        if (from == to || !fresh) continue;
        auto cached = link_cache_.find({from, to});
        fresh =
            cached != link_cache_.end() && now - cached->second.read_at < options_.link_cache_ttl;
      }
    }
    if (!fresh) {
      absl::StatusOr<std::vector<Link>> listed = links_->ListLinks(neighborhood);
      if (!listed.ok()) {
        return absl::UnavailableError("link source: " + std::string(listed.status().message()));
      }
      for (const std::string& from : neighborhood) {
        for (const std::string& to : neighborhood) {
          if (from != to) link_cache_[{from, to}] = CachedLink{std::nullopt, now};
        }
      }
      for (const Link& l : *listed) {
        if (auto it = link_cache_.find({l.from, l.to}); it != link_cache_.end()) {
          it->second.link = l;
        }
      }
    }
    for (const std::string& from : neighborhood) {
      for (const std::string& to : neighborhood) {
        if (from == to) continue;
        const CachedLink& cached = link_cache_[{from, to}];
        if (cached.link.has_value()) federation.AddLink(*cached.link);
      }
    }
  }
  RETURN_IF_ERROR(federation.Validate());

  ASSIGN_OR_RETURN(std::optional<pb::AssignmentPlan> latest, plans_.Latest(app.name));
  if (!request.dry_run() && latest.has_value() && HoldsPods(*latest)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "application ", app.name, " is ",
        latest->phase() == pb::PLAN_PHASE_DONE ? "already placed" : "still being removed",
        " by plan ", latest->id(),
        "; moving a placed application is MigrateWorkload's job, removing it "
        "ReleaseApplication's"));
  }

  InProcessL2Solver in_process(registry_, nullptr);
  std::map<std::string, std::shared_ptr<grpc::Channel>> mcs;
  for (const std::string& name : neighborhood) {
    if (rigs_[name].mc != nullptr) mcs[name] = rigs_[name].mc;
  }
  milp::ExactL2Solver exact(registry_, nullptr, options_.exact_l2);
  L2Solver& local = options_.exact_l2.max_nodes > 0 ? static_cast<L2Solver&>(exact) : in_process;
  RemoteL2Solver l2(std::move(mcs), local, options_.mc_timeout);
  Coordinator coordinator(l2, registry_, nullptr, options_.coordinator);
  ASSIGN_OR_RETURN(PlacementResult result, coordinator.Place(app, federation, neighborhood));
  if (result.unplaced.empty()) {
    absl::Status verified = VerifyPlacement(app, federation, result);
    if (!verified.ok()) {
      return absl::InternalError("placement failed its own check: " +
                                 std::string(verified.message()));
    }
  }

  const int64_t revision = latest.has_value() ? latest->plan_revision() + 1 : 1;
  AssignmentPlan plan = BuildPlan(app, result, revision);
  const absl::Time now = clock_.Now();
  Operation op;
  op.set_id(absl::StrCat("place/", app.name, "/", revision));
  op.set_kind("swm.PlaceApplication");
  op.set_resource(resource);
  op.set_request_id(request.request_id());
  *op.mutable_create_time() = ToTimestamp(now);

  auto finish = [&](pb::AssignmentPlan& proto, const absl::Status& status) {
    proto.set_spec_revision(request.application().spec_revision());
    proto.set_neighborhood_id(request.neighborhood().id());
    proto.set_operation_id(op.id());
    if (latest.has_value()) proto.set_incumbent_plan_revision(latest->plan_revision());
    *proto.mutable_create_time() = ToTimestamp(now);
    *proto.mutable_update_time() = ToTimestamp(clock_.Now());
    op.set_done(true);
    op.set_progress_percent(100);
    op.set_phase(pb::PlanPhase_Name(proto.phase()).substr(sizeof("PLAN_PHASE_") - 1));
    if (status.ok()) {
      op.mutable_result()->PackFrom(proto);
    } else {
      SetError(status, op.mutable_error());
      for (const auto& u : proto.unplaced()) {
        auto* cause = op.mutable_error()->add_causes();
        cause->set_subject(u.workload());
        cause->set_reason(u.reason());
      }
    }
    *op.mutable_update_time() = ToTimestamp(clock_.Now());
  };

  if (!result.unplaced.empty()) {
    if (metrics_ != nullptr) metrics_->unplaced.Increment(result.unplaced.size());
    std::vector<std::string> reasons;
    for (const auto& [workload, reason] : result.unplaced) {
      reasons.push_back(workload + ": " + reason);
    }
    absl::Status status = absl::FailedPreconditionError(absl::StrCat(
        "no feasible placement for ", result.unplaced.size(), " of ", app.workloads.size(),
        " workloads of application ", app.name, ": ", absl::StrJoin(reasons, "; "),
        unreachable.empty()
            ? ""
            : "; left out because their LMS does not answer: " + absl::StrJoin(unreachable, ", ")));
    pb::AssignmentPlan proto = ToProtoPlan(plan, app, result);
    proto.set_phase(pb::PLAN_PHASE_FAILED);
    SetError(status, proto.mutable_error());
    for (const auto& u : proto.unplaced()) {
      auto* cause = proto.mutable_error()->add_causes();
      cause->set_subject(u.workload());
      cause->set_reason(u.reason());
    }
    finish(proto, status);
    if (!request.dry_run()) RETURN_IF_ERROR(plans_.Save(&proto, op, request.request_id()));
    return status;
  }

  if (request.dry_run()) {
    plan.phase = PlanPhase::kIdle;
    pb::AssignmentPlan proto = ToProtoPlan(plan, app, result);
    op.set_id("");  // nothing stored: a dry run has no operation to poll
    finish(proto, absl::OkStatus());
    return op;
  }

  if (absl::Now() >= deadline) {
    return absl::DeadlineExceededError(
        "the caller's deadline passed before the plan ran; nothing was reserved");
  }
  // Execute: reserve in every target cluster, then commit (pods created).
  // A cluster with an MC swm gets every pod's template in its ReserveRequest
  // and creates the pods itself; the others' pods the hub creates through
  // their LMS from the same templates.
  std::map<std::string, PodTemplates> templates;
  for (const WorkloadTarget& t : plan.targets) {
    templates[t.cluster][t.pod] = PodTemplate(request.application(), t, revision);
  }
  std::map<std::string, ClusterExecutor*> executors;
  std::vector<std::unique_ptr<RemoteClusterExecutor>> remotes;
  for (const std::string& name : neighborhood) {
    ClusterRig& rig = rigs_[name];
    if (rig.mc != nullptr) {
      remotes.push_back(std::make_unique<RemoteClusterExecutor>(rig.mc, options_.mc_timeout,
                                                                std::move(templates[name])));
      executors[name] = remotes.back().get();
    } else {
      for (const auto& [pod, pod_template] : templates[name]) {
        rig.runtime->SetPodTemplate(pod_template,
                                    absl::StrCat("swm/", app.name, "/", revision, "/", pod));
      }
      executors[name] = rig.executor.get();
    }
  }
  PlanExecutor executor(executors, options_.reservation_lease);
  absl::Status executed = executor.Execute(plan);
  for (const WorkloadTarget& t : plan.targets) {
    ClusterRig& rig = rigs_[t.cluster];
    if (rig.runtime != nullptr) rig.runtime->ClearPodTemplate(t.pod);
    node_cache_.erase(t.cluster);  // the plan changed it: read it again next time
  }
  for (const std::string& name : neighborhood) {
    if (rigs_[name].local == nullptr) continue;  // an MC swm watches its own pods
    absl::Status synced = rigs_[name].local->Sync();
    if (!synced.ok()) {
      log::Warn("cannot read pods after a plan",
                {{"cluster", name}, {"error", std::string(synced.message())}});
    }
  }
  pb::AssignmentPlan proto = ToProtoPlan(plan, app, result);
  finish(proto, executed);
  RETURN_IF_ERROR(plans_.Save(&proto, op, request.request_id()));
  log::Info("placed application", {{"application", app.name},
                                   {"plan", proto.id()},
                                   {"phase", pb::PlanPhase_Name(proto.phase())}});
  if (!executed.ok()) return executed;
  if (metrics_ != nullptr) metrics_->placed.Increment(plan.targets.size());
  return op;
}

absl::StatusOr<SwmServiceImpl::ClusterRig*> SwmServiceImpl::RigForRelease(
    const std::string& cluster) {
  if (auto it = rigs_.find(cluster); it != rigs_.end()) return &it->second;
  std::string lms;
  if (directory_ != nullptr) {
    absl::StatusOr<std::vector<ClusterEndpoint>> listed = directory_->ListClusters();
    if (listed.ok()) {
      for (const ClusterEndpoint& c : *listed) {
        if (c.name == cluster) lms = c.lms;
      }
    }
  }
  if (lms.empty()) {
    ASSIGN_OR_RETURN(std::optional<std::string> saved, plans_.LmsEndpoint(cluster));
    lms = saved.value_or("");
  }
  if (lms.empty()) {
    return absl::UnavailableError("no LMS endpoint known for cluster " + cluster);
  }
  return RigFor(cluster, lms);
}

absl::StatusOr<std::string> SwmServiceImpl::McEndpointFor(const std::string& cluster) {
  if (auto it = rigs_.find(cluster); it != rigs_.end()) return it->second.mc_address;
  ASSIGN_OR_RETURN(std::optional<std::string> saved, plans_.SwmEndpoint(cluster));
  if (saved.has_value()) return *saved;
  if (auto mc = options_.cluster_endpoints.find(cluster); mc != options_.cluster_endpoints.end()) {
    return mc->second;
  }
  return std::string();
}

void SwmServiceImpl::ReleaseThroughMc(const std::string& cluster, const std::string& swm,
                                      const std::string& reservation,
                                      const std::vector<const pb::WorkloadTarget*>& targets,
                                      pb::AssignmentPlan& plan,
                                      std::vector<std::string>& failures) {
  absl::StatusOr<std::optional<pb::Reservation>> report = absl::UnknownError("not called");
  PeerChannels& peers = options_.mc_channels != nullptr ? *options_.mc_channels : *channels_;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = peers.Get(swm);
  if (channel.ok()) {
    RemoteClusterExecutor remote(*channel, options_.mc_timeout);
    report = remote.ReleaseReporting(reservation, "ReleaseApplication of " + plan.application());
  } else {
    report = channel.status();
  }
  std::set<std::string> deleted;
  if (report.ok() && report->has_value()) {
    deleted.insert((*report)->deleted_pods().begin(), (*report)->deleted_pods().end());
  }
  for (const pb::WorkloadTarget* t : targets) {
    pb::PlanAction* action = plan.add_actions();
    action->set_index(plan.actions_size() - 1);
    action->set_type(pb::ACTION_TYPE_DELETE_POD);
    action->set_cluster(cluster);
    action->set_workload(t->workload());
    action->set_node(t->node());
    action->set_pod(t->pod());
    *action->mutable_update_time() = ToTimestamp(clock_.Now());
    if (!report.ok()) {
      absl::Status failed(
          report.status().code(),
          absl::StrCat("swm of cluster ", cluster, ": Release: ", report.status().message()));
      action->set_result(pb::ACTION_RESULT_FAILED);
      SetError(failed, action->mutable_error());
      failures.push_back(absl::StrCat(t->pod(), " in ", cluster, ": ", failed.message()));
      *plan.add_targets() = *t;  // still there
    } else if (deleted.count(t->pod())) {
      action->set_result(pb::ACTION_RESULT_SUCCEEDED);
    } else {
      action->set_result(pb::ACTION_RESULT_SKIPPED);  // already gone
    }
  }
}

absl::StatusOr<pb::AssignmentPlan> SwmServiceImpl::Release(
    const pb::ReleaseApplicationRequest& request, absl::Time deadline) {
  absl::MutexLock lock(&place_mu_);
  absl::StatusOr<pb::AssignmentPlan> plan = ReleaseLocked(request, deadline);
  for (auto& [name, rig] : rigs_) {
    if (rig.runtime != nullptr) rig.runtime->SetDeadline(absl::InfiniteFuture());
  }
  return plan;
}

absl::StatusOr<pb::AssignmentPlan> SwmServiceImpl::ReleaseLocked(
    const pb::ReleaseApplicationRequest& request, absl::Time deadline) {
  if (request.application().empty()) return InvalidFieldError("application", "is required");
  const std::string& app = request.application();
  const std::string resource = "applications/" + app;
  if (!request.request_id().empty()) {
    ASSIGN_OR_RETURN(std::optional<Operation> seen,
                     plans_.OperationForRequest(request.request_id()));
    if (seen.has_value()) {
      if (seen->resource() != resource || seen->kind() != kReleaseKind) {
        return InvalidFieldError("request_id", absl::StrCat("already used by ", seen->kind(),
                                                            " for ", seen->resource()));
      }
      pb::AssignmentPlan plan;
      if (!seen->result().UnpackTo(&plan)) {
        return absl::DataLossError("stored operation " + seen->id() + " has no plan");
      }
      return plan;
    }
  }
  ASSIGN_OR_RETURN(std::optional<pb::AssignmentPlan> latest, plans_.Latest(app));
  const absl::Time now = clock_.Now();
  Operation op;
  op.set_kind(kReleaseKind);
  op.set_resource(resource);
  op.set_request_id(request.request_id());
  *op.mutable_create_time() = ToTimestamp(now);
  op.set_done(true);
  op.set_progress_percent(100);

  pb::AssignmentPlan plan;
  plan.set_application(app);
  if (!latest.has_value() || !HoldsPods(*latest)) {
    // Nothing placed: an empty plan, remembered only for the request_id.
    if (!request.request_id().empty()) {
      op.set_id(absl::StrCat("release/", app, "/request/", request.request_id()));
      op.set_phase("Done");
      op.mutable_result()->PackFrom(plan);
      *op.mutable_update_time() = ToTimestamp(clock_.Now());
      RETURN_IF_ERROR(plans_.Save(nullptr, op, request.request_id()));
    }
    return plan;
  }

  const int64_t revision = latest->plan_revision() + 1;
  // A removal after a removal that left pods behind still releases the
  // reservations of the placement those pods came from.
  const int64_t placed_revision = latest->phase() == pb::PLAN_PHASE_DONE
                                      ? latest->plan_revision()
                                      : latest->incumbent_plan_revision();
  op.set_id(absl::StrCat("release/", app, "/", revision));
  plan.set_id(absl::StrCat(app, "/", revision));
  plan.set_plan_revision(revision);
  plan.set_spec_revision(latest->spec_revision());
  plan.set_neighborhood_id(latest->neighborhood_id());
  plan.set_operation_id(op.id());
  plan.set_incumbent_plan_revision(placed_revision);
  *plan.mutable_create_time() = ToTimestamp(now);

  std::map<std::string, std::vector<const pb::WorkloadTarget*>> by_cluster;
  for (const pb::WorkloadTarget& t : latest->targets()) by_cluster[t.cluster()].push_back(&t);
  std::vector<std::string> failures;
  for (const auto& [cluster, targets] : by_cluster) {
    const std::string reservation = absl::StrCat(app, "/", placed_revision, "/", cluster);
    absl::StatusOr<std::string> swm = McEndpointFor(cluster);
    if (!swm.ok()) return swm.status();
    if (!swm->empty()) {
      // The cluster's own swm deletes the reservation's pods and says which.
      ReleaseThroughMc(cluster, *swm, reservation, targets, plan, failures);
      node_cache_.erase(cluster);
      continue;
    }
    absl::StatusOr<ClusterRig*> rig = RigForRelease(cluster);
    if (rig.ok()) (*rig)->runtime->SetDeadline(deadline);
    bool cluster_ok = rig.ok();
    for (const pb::WorkloadTarget* t : targets) {
      pb::PlanAction* action = plan.add_actions();
      action->set_index(plan.actions_size() - 1);
      action->set_type(pb::ACTION_TYPE_DELETE_POD);
      action->set_cluster(cluster);
      action->set_workload(t->workload());
      action->set_node(t->node());
      action->set_pod(t->pod());
      absl::Status deleted = rig.ok() ? (*rig)->runtime->DeletePod(t->pod()) : rig.status();
      *action->mutable_update_time() = ToTimestamp(clock_.Now());
      if (deleted.ok()) {
        action->set_result(pb::ACTION_RESULT_SUCCEEDED);
      } else if (absl::IsNotFound(deleted)) {
        action->set_result(pb::ACTION_RESULT_SKIPPED);  // already gone
      } else {
        cluster_ok = false;
        action->set_result(pb::ACTION_RESULT_FAILED);
        SetError(deleted, action->mutable_error());
        failures.push_back(absl::StrCat(t->pod(), " in ", cluster, ": ", deleted.message()));
        *plan.add_targets() = *t;  // still there
      }
    }
    node_cache_.erase(cluster);
    // The placement's reservation: once its pods are gone nothing is held.
    if (cluster_ok) {
      absl::Status released = (*rig)->executor->Release(reservation);
      if (!released.ok()) {
        log::Warn("cannot release a reservation after removing its pods",
                  {{"cluster", cluster}, {"error", std::string(released.message())}});
      }
    }
  }
  absl::Status status = absl::OkStatus();
  if (failures.empty()) {
    plan.set_phase(pb::PLAN_PHASE_DONE);
  } else {
    plan.set_phase(pb::PLAN_PHASE_FAILED);
    status = absl::UnavailableError(absl::StrCat(
        "could not delete ", failures.size(), " pod(s) of application ", app, ": ",
        absl::StrJoin(failures, "; "), "; the plan lists them; call ReleaseApplication again"));
    SetError(status, plan.mutable_error());
    SetError(status, op.mutable_error());
  }
  *plan.mutable_update_time() = ToTimestamp(clock_.Now());
  op.set_phase(failures.empty() ? "Done" : "Failed");
  if (failures.empty()) op.mutable_result()->PackFrom(plan);
  *op.mutable_update_time() = ToTimestamp(clock_.Now());
  // A failed removal does not claim the request_id: the same one retries it.
  RETURN_IF_ERROR(plans_.Save(&plan, op, failures.empty() ? request.request_id() : ""));
  log::Info(
      "released application",
      {{"application", app}, {"plan", plan.id()}, {"phase", pb::PlanPhase_Name(plan.phase())}});
  if (!status.ok()) return status;
  return plan;
}

void AddSwmConfig(ConfigSchema& schema) {
  schema.Add({.path = "swm.codef_control",
              .type = ConfigType::kAddress,
              .help = "testbed only: host:port of the CODEF control API as the hub's directory "
                      "of members without an swm (their LMS and labels) and link source where "
                      "NetMA measured nothing (empty: neither)"});
  schema.Add({.path = "swm.netma",
              .type = ConfigType::kAddress,
              .help = "host:port of the hub's NetMA: links are planned with its measured "
                      "latency and bandwidth (configured conditions where nothing is measured)"});
  schema.Add({.path = "swm.lms_timeout",
              .type = ConfigType::kDuration,
              .default_value = "10s",
              .help = "deadline of each call to a cluster's LMS"});
  schema.Add({.path = "swm.reservation_lease",
              .type = ConfigType::kDuration,
              .default_value = "60s",
              .help = "how long a reservation outlives a hub that vanished mid-plan"});
  schema.Add({.path = "swm.link_cache_ttl",
              .type = ConfigType::kDuration,
              .default_value = "0s",
              .help = "how long the hub reuses the links read from the link source (one read "
                      "per placement) across placements (0s: read them for every placement)"});
  schema.Add({.path = "swm.node_view_ttl",
              .type = ConfigType::kDuration,
              .default_value = "0s",
              .help = "how long the hub reuses a member's nodes read from its swm or LMS across "
                      "placements (clusters a plan changed are read again; Reserve re-checks "
                      "room in the cluster); 0s: read for every placement"});
  schema.Add({.path = "swm.cluster_endpoints",
              .type = ConfigType::kString,
              .help = "hub: the MC swm of each cluster that has one, as "
                      "cluster=host:port[,cluster=host:port...]; those clusters solve their own "
                      "L2 and hold reservations; the others are driven through their LMS"});
  schema.Add({.path = "swm.exact_l2_max_nodes",
              .type = ConfigType::kInt,
              .default_value = "0",
              .help = "solve a cluster's L2 exactly with CBC when it has at most this many "
                      "schedulable nodes (0: never; the heuristic always)"});
  schema.Add({.path = "swm.exact_l2_max_workloads",
              .type = ConfigType::kInt,
              .default_value = "8",
              .help = "largest batch of workloads the exact L2 takes (larger ones: heuristic)"});
  schema.Add({.path = "swm.exact_l2_time_limit",
              .type = ConfigType::kDuration,
              .default_value = "500ms",
              .help = "CBC's time limit per exact L2 solve (the heuristic answers after it)"});
  schema.Add({.path = "swm.mc_timeout",
              .type = ConfigType::kDuration,
              .default_value = "10s",
              .help = "hub: deadline of each call to an MC swm"});
}

absl::StatusOr<std::map<std::string, std::string>> ParseClusterEndpoints(const std::string& text) {
  return ParseNamedAddresses("swm.cluster_endpoints", text, "cluster");
}

absl::StatusOr<std::vector<std::unique_ptr<grpc::Service>>> MakeSwmServices(
    ServiceContext& context) {
  std::vector<std::unique_ptr<grpc::Service>> services;
  // Channels to the clusters' LMS: plaintext when they are CODEF's.
  PeerChannelOptions lms_options = PeerChannelOptionsFrom(context.config);
  lms_options.insecure = lms_options.insecure || context.config.lms_plaintext;
  const Config& raw = context.config.raw;
  milp::ExactL2Options exact_l2{
      .max_nodes = static_cast<int>(raw.GetInt("swm.exact_l2_max_nodes")),
      .max_workloads = static_cast<int>(raw.GetInt("swm.exact_l2_max_workloads")),
      .time_limit = raw.GetDuration("swm.exact_l2_time_limit")};
  if (exact_l2.max_nodes < 0) {
    return InvalidFieldError("swm.exact_l2_max_nodes", "must not be negative");
  }
  if (exact_l2.max_workloads < 1) {
    return InvalidFieldError("swm.exact_l2_max_workloads", "must be at least 1");
  }
  if (context.config.role != Role::kHub) {
    // The MC role: L2 and the two-phase commit for this cluster, on its LMS.
    if (context.config.lms.empty()) {
      return InvalidFieldError("federation.lms",
                               "the MC role of swm needs its cluster's LMS (host:port)");
    }
    if (context.config.cluster.empty()) {
      return InvalidFieldError("cluster", "the MC role of swm needs its cluster's name");
    }
    // The cluster's own LMS is local: no egress relay.
    lms_options.egress_proxy.clear();
    ASSIGN_OR_RETURN(std::unique_ptr<PeerChannels> local, PeerChannels::Create(lms_options));
    ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, local->Get(context.config.lms));
    ClusterServiceOptions options{.cluster = context.config.cluster, .exact_l2 = exact_l2};
    options.reservations.default_lease = context.config.raw.GetDuration("swm.reservation_lease");
    auto lms = std::make_unique<LmsPodRuntime>(
        std::move(channel),
        LmsPodRuntimeOptions{.cluster = context.config.cluster,
                             .call_timeout = context.config.raw.GetDuration("swm.lms_timeout")});
    services.push_back(std::make_unique<SwmClusterServiceImpl>(context.store, context.clock,
                                                               std::move(lms), options));
    return services;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<PeerChannels> channels, PeerChannels::Create(lms_options));
  SwmServiceOptions options;
  options.lms_timeout = context.config.raw.GetDuration("swm.lms_timeout");
  options.reservation_lease = context.config.raw.GetDuration("swm.reservation_lease");
  options.link_cache_ttl = context.config.raw.GetDuration("swm.link_cache_ttl");
  options.node_view_ttl = context.config.raw.GetDuration("swm.node_view_ttl");
  ASSIGN_OR_RETURN(options.cluster_endpoints,
                   ParseClusterEndpoints(context.config.raw.GetString("swm.cluster_endpoints")));
  options.mc_timeout = context.config.raw.GetDuration("swm.mc_timeout");
  options.exact_l2 = exact_l2;
  options.mc_channels = &context.peers;
  std::shared_ptr<CodefDirectory> directory;
  if (context.config.raw.Has("swm.codef_control")) {
    // The control API is local to the emulator host: no egress relay.
    PeerChannelOptions local = lms_options;
    local.egress_proxy.clear();
    ASSIGN_OR_RETURN(std::unique_ptr<PeerChannels> control, PeerChannels::Create(local));
    ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                     control->Get(context.config.raw.GetString("swm.codef_control")));
    directory = std::make_shared<CodefDirectory>(
        std::move(channel), CodefDirectoryOptions{.call_timeout = options.lms_timeout});
  }
  std::shared_ptr<LinkSource> links = directory;
  if (context.config.raw.Has("swm.netma")) {
    // The hub's NetMA runs on the hub's own address: no egress relay (PeerChannels skips it).
    ASSIGN_OR_RETURN(std::unique_ptr<PeerChannels> netma_channels,
                     PeerChannels::Create(PeerChannelOptionsFrom(context.config)));
    ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                     netma_channels->Get(context.config.raw.GetString("swm.netma")));
    links = std::make_shared<NetmaLinkSource>(std::move(channel), directory, context.clock);
  }
  services.push_back(std::make_unique<SwmServiceImpl>(context.store, context.clock,
                                                      std::move(channels), directory, links,
                                                      options, &context.metrics));
  return services;
}

}  // namespace codeco::swm
