#include "swm/server/swm_service.h"

#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/logging.h"
#include "codeco/common/metrics.h"
#include "codeco/common/operation_watch.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/serve_on_executor.h"
#include "codeco/common/status.h"
#include "codeco/common/watch_stream.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "swm/core/convert.h"
#include "swm/server/cluster_service.h"
#include "swm/server/codef_directory.h"
#include "swm/server/mdm_data_sets.h"
#include "swm/server/netma_link_source.h"
#include "swm/server/remote_cluster.h"

namespace codeco::swm {
namespace {

namespace pb = codeco::swm::v1;
namespace acm = codeco::acm::v1;
using codeco::common::v1::Operation;

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// The services of a stored placement request that keep state (`stateful`).
std::set<std::string> StatefulServices(const pb::PlaceApplicationRequest& placed) {
  std::set<std::string> out;
  for (const acm::ServiceSpec& s : placed.application().spec().services()) {
    if (s.stateful()) out.insert(s.name());
  }
  return out;
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
                     .Add({})),
        channels(prometheus::BuildGauge()
                     .Name(MetricName("swm", "channels"))
                     .Help("Channels of placed applications by lifecycle phase (REQUESTED, "
                           "REVIEWED, IMPLEMENTING, IMPLEMENTED, RUNNING, REJECTED, OOQOS)")
                     .Register(r)),
        channel_triggers(prometheus::BuildCounter()
                             .Name(MetricName("swm", "channel_triggers_total"))
                             .Help("Channels that became out of QoS (adaptation triggers raised)")
                             .Register(r)
                             .Add({})),
        backups(prometheus::BuildCounter()
                    .Name(MetricName("swm", "state_backups_total"))
                    .Help("Backups of stateful workloads by result (ok, failed)")
                    .Register(r)),
        backup_age(prometheus::BuildGauge()
                       .Name(MetricName("swm", "state_backup_age_seconds"))
                       .Help("Age of the oldest of the stateful workloads' newest backups at "
                             "the end of the last backup pass (it grows while backups fail)")
                       .Register(r)
                       .Add({})) {}
  prometheus::Family<prometheus::Counter>& placements;
  prometheus::Histogram& duration;
  prometheus::Counter& placed;
  prometheus::Counter& unplaced;
  prometheus::Family<prometheus::Gauge>& channels;
  prometheus::Counter& channel_triggers;
  prometheus::Family<prometheus::Counter>& backups;
  prometheus::Gauge& backup_age;
};

// The channels the channel tracker holds out of QoS (OOQOS), for the
// adaptation loop.
class SwmServiceImpl::ChannelHealth final : public ChannelHealthSource {
 public:
  explicit ChannelHealth(SwmServiceImpl& service) : service_(service) {}
  std::vector<OutOfQosChannel> OutOfQos() override {
    return service_.channel_tracker_.OutOfQos();
  }

 private:
  SwmServiceImpl& service_;
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
      members_(plans_, clock_, *channels_, options_.mc_channels, directory_,
               HubMemberOptions{.lms_timeout = options_.lms_timeout,
                                .mc_timeout = options_.mc_timeout,
                                .cluster_endpoints = options_.cluster_endpoints,
                                .member_l2 = options_.member_l2}),
      recommendations_(options_.mc_channels != nullptr ? *options_.mc_channels : *channels_, clock_,
                       options_.pdlc),
      state_mover_(options_.mc_channels != nullptr ? *options_.mc_channels : *channels_, plans_,
                   CheckpointerStateMoverOptions{.call_timeout = options_.mc_timeout}),
      in_process_l2_(registry_, &recommendations_),
      exact_l2_(registry_, &recommendations_, options_.exact_l2),
      core_(std::make_unique<PlacementService>(
          clock_, members_, links_.get(), plans_,
          options_.exact_l2.max_nodes > 0 ? static_cast<L2Solver&>(exact_l2_)
                                          : static_cast<L2Solver&>(in_process_l2_),
          registry_,
          PlacementServiceOptions{.reservation_lease = options_.reservation_lease,
                                  .intra_cluster_latency_ns = options_.intra_cluster_latency_ns,
                                  .link_cache_ttl = options_.link_cache_ttl,
                                  .node_view_ttl = options_.node_view_ttl,
                                  .coordinator = options_.coordinator,
                                  .recommendations = &recommendations_,
                                  .data_sets = options_.data_sets.get()})),
      channel_tracker_(options_.channels) {
  for (const auto& [cluster, address] : options_.pdlc_endpoints) {
    if (absl::Status set = recommendations_.SetEndpoint(cluster, address); !set.ok()) {
      log::Warn("swm.pdlc_endpoints: a PDLC cannot be watched",
                {{"cluster", cluster}, {"error", std::string(set.message())}});
    }
  }
  // Every stored change of an operation wakes the watches.
  plans_.SetSaveObserver([this] { listeners_.Notify(); });
  core_->SetVirtualLinks(options_.virtual_links.get());
  core_->SetStateMover(&state_mover_);
  core_->SetPlanListener([this](const pb::AssignmentPlan& plan) { TrackPlan(plan); });
  if (options_.virtual_links != nullptr) {
    channel_monitor_ = std::thread([this] { MonitorChannels(); });
  }
  if (options_.adapt_interval > absl::ZeroDuration()) {
    member_health_ = std::make_unique<MemberHealth>(*this);
    mover_ = std::make_unique<Mover>(*this);
    adaptation_ = std::make_unique<AdaptationLoop>(clock_, plans_, *member_health_, *mover_,
                                                   options_.adaptation);
    channel_health_ = std::make_unique<ChannelHealth>(*this);
    adaptation_->SetChannelHealth(channel_health_.get());
    adaptation_->SetBreachAdvisories(&recommendations_);
    adaptation_->SetLocalDecisions(&members_);
    if (options_.state_backups.interval > absl::ZeroDuration()) {
      backups_ = std::make_unique<StateBackupScheduler>(clock_, plans_, state_mover_,
                                                        options_.state_backups);
    }
  }
  // The first worker drives the plans a crash interrupted to an outcome
  // before any worker takes a request.
  const size_t workers = std::max<size_t>(1, options_.placement_workers);
  for (size_t i = 0; i < workers; ++i) {
    workers_.emplace_back([this, i] { Work(/*first=*/i == 0); });
  }
}

// The adaptation loop's view of the members: each cluster is asked now (its
// MC swm's GetClusterView, else its LMS; never a watched copy, whose stream
// can hang on a cut), reached as the stored placement requests of the
// placed applications say.
class SwmServiceImpl::MemberHealth final : public HealthSource {
 public:
  explicit MemberHealth(SwmServiceImpl& service) : service_(service) {}
  std::vector<std::string> AllMembers() override {
    std::vector<std::string> members;
    for (const auto& [cluster, ref] : MemberRefs()) members.push_back(cluster);
    return members;
  }
  std::map<std::string, ClusterHealth> Read(const std::vector<std::string>& clusters,
                                            absl::Time deadline) override {
    std::map<std::string, MemberRef> refs = MemberRefs();
    std::vector<MemberRef> reach;
    for (const std::string& c : clusters) {
      reach.push_back(refs.count(c) ? refs[c] : MemberRef{.cluster = c});
    }
    std::map<std::string, ClusterHealth> out;
    if (absl::Status connected = service_.members_.Connect(reach, deadline); !connected.ok()) {
      log::Warn("adaptation: members not reached",
                {{"error", std::string(connected.message())}});
      return out;
    }
    std::vector<absl::StatusOr<MemberView>> views =
        service_.members_.ProbeMembers(clusters, deadline);
    for (size_t i = 0; i < clusters.size() && i < views.size(); ++i) {
      ClusterHealth& h = out[clusters[i]];
      h.reachable = views[i].ok();
      if (!h.reachable) continue;
      for (const Node& n : views[i]->nodes) h.node_ready[n.name] = n.schedulable;
    }
    return out;
  }

 private:
  // Every member of the placed applications' neighborhoods, with its
  // endpoints, as the stored placement requests name them.
  std::map<std::string, MemberRef> MemberRefs() {
    std::map<std::string, MemberRef> refs;
    absl::StatusOr<std::vector<pb::AssignmentPlan>> live = service_.plans_.LivePlans();
    for (const pb::AssignmentPlan& plan : live.ok() ? *live : std::vector<pb::AssignmentPlan>()) {
      absl::StatusOr<std::optional<pb::PlaceApplicationRequest>> placed =
          service_.plans_.PlacementRequest(plan.application());
      if (!placed.ok() || !placed->has_value()) continue;
      for (const auto& m : (*placed)->neighborhood().members()) {
        refs[m.cluster()] = MemberRef{.cluster = m.cluster(),
                                      .endpoints = std::map<std::string, std::string>(
                                          m.endpoints().begin(), m.endpoints().end())};
      }
    }
    return refs;
  }

  SwmServiceImpl& service_;
};

// The adaptation loop's moves: MigrateWorkload, as an operator's call runs it.
class SwmServiceImpl::Mover final : public MoveExecutor {
 public:
  explicit Mover(SwmServiceImpl& service) : service_(service) {}
  absl::StatusOr<pb::Migration> Move(const std::string& application, const std::string& workload,
                                     const std::string& target_cluster,
                                     const std::string& target_node, pb::MigrationReason reason,
                                     absl::Time deadline) override {
    pb::MigrateWorkloadRequest request;
    request.set_application(application);
    request.set_workload(workload);
    request.set_target_cluster(target_cluster);
    request.set_target_node(target_node);
    request.set_reason(reason);
    ASSIGN_OR_RETURN(Operation op, service_.Migrate(request, deadline));
    pb::Migration migration;
    if (!op.result().UnpackTo(&migration)) {
      return absl::InternalError("operation " + op.id() + " carries no migration");
    }
    return migration;
  }
  bool KeepsState(const std::string& application, const std::string& service) override {
    // The service's spec, from the placement request stored with the plan.
    absl::StatusOr<std::optional<pb::PlaceApplicationRequest>> placed =
        service_.plans_.PlacementRequest(application);
    return placed.ok() && placed->has_value() && StatefulServices(**placed).count(service) > 0;
  }
  LocationSpread LocationsOf(const std::string& application, const std::string&) override {
    // An application-wide rule (the CAM's placement), from the stored request.
    absl::StatusOr<std::optional<pb::PlaceApplicationRequest>> placed =
        service_.plans_.PlacementRequest(application);
    if (!placed.ok() || !placed->has_value()) return {};
    const codeco::acm::v1::Placement& p = (*placed)->application().spec().placement();
    return {.max_locations = p.number_of_locations(), .bursting = p.bursting()};
  }
  absl::StatusOr<pb::LocalDecisionVerdict> Adopt(const pb::LocalDecision& decision,
                                                 absl::Time deadline) override {
    return service_.core_->AdoptLocalMove(decision, deadline);
  }

 private:
  SwmServiceImpl& service_;
};

void SwmServiceImpl::Adapt() {
  // Migrations a cut cluster left CUTTING_OVER are finished first, once it answers.
  absl::StatusOr<std::vector<pb::Migration>> moving = plans_.ActiveMigrations();
  if (moving.ok() && !moving->empty()) {
    RecoveryReport recovered = core_->Recover(absl::Now() + options_.mc_timeout);
    members_.ClearDeadlines();
    if (!recovered.migrations.empty()) {
      log::Info("migrations finished", {{"migrations", absl::StrJoin(recovered.migrations, ",")}});
    }
  }
  // The probe fits in a tick; a move may take a few member calls (read,
  // reserve, commit, remove).
  AdaptationTick tick = adaptation_->Tick(
      absl::Now() + std::min(options_.adapt_interval, options_.mc_timeout), options_.mc_timeout * 3);
  members_.ClearDeadlines();
  for (const std::string& place : tick.failed) {
    log::Warn("adaptation: a place failed for longer than its grace; moving its workloads",
              {{"place", place}});
  }
  for (const std::string& place : tick.recovered) {
    log::Info("adaptation: a failed place is healthy again; moving its workloads back",
              {{"place", place}});
  }
  for (const std::string& m : tick.moved) log::Info("adaptation moved a workload", {{"move", m}});
  for (const std::string& s : tick.settled) {
    log::Info("adaptation settled a member's local decision", {{"decision", s}});
  }
  for (const std::string& h : tick.held) log::Warn("adaptation held a move back", {{"why", h}});
  if (backups_ != nullptr) BackUpState();
}

void SwmServiceImpl::BackUpState() {
  // The stateful workloads placed now, each with its cluster's checkpointer
  // as the neighborhood of its placement names it.
  absl::StatusOr<std::vector<pb::AssignmentPlan>> live = plans_.LivePlans();
  if (!live.ok()) {
    log::Warn("state backups: plans not read", {{"error", std::string(live.status().message())}});
    return;
  }
  std::vector<BackupSubject> subjects;
  for (const pb::AssignmentPlan& plan : *live) {
    if (plan.phase() != pb::PLAN_PHASE_DONE) continue;
    absl::StatusOr<std::optional<pb::PlaceApplicationRequest>> placed =
        plans_.PlacementRequest(plan.application());
    if (!placed.ok() || !placed->has_value()) continue;
    const std::set<std::string> stateful = StatefulServices(**placed);
    if (stateful.empty()) continue;
    std::map<std::string, std::string> checkpointer_of;
    for (const auto& m : (*placed)->neighborhood().members()) {
      auto it = m.endpoints().find("checkpointer");
      if (it != m.endpoints().end()) checkpointer_of[m.cluster()] = it->second;
    }
    for (const pb::WorkloadTarget& t : plan.targets()) {
      if (!stateful.count(t.service())) continue;
      subjects.push_back(BackupSubject{.application = plan.application(),
                                       .workload = t.workload(),
                                       .placed = t,
                                       .checkpointer = checkpointer_of[t.cluster()]});
    }
  }
  StateBackupPass pass = backups_->Run(subjects, absl::Now() + options_.mc_timeout);
  if (metrics_ != nullptr) {
    metrics_->backups.Add({{"result", "ok"}}).Increment(static_cast<double>(pass.completed.size()));
    metrics_->backups.Add({{"result", "failed"}}).Increment(static_cast<double>(pass.failed.size()));
    absl::Duration oldest = absl::ZeroDuration();
    absl::StatusOr<std::vector<pb::StateBackupRecord>> records = plans_.StateBackups();
    if (records.ok()) {
      for (const pb::StateBackupRecord& r : *records) {
        if (!r.has_latest()) continue;
        oldest = std::max(oldest, clock_.Now() - FromProtoTimestamp(r.latest().take_time()));
      }
    }
    metrics_->backup_age.Set(absl::ToDoubleSeconds(oldest));
  }
  for (const std::string& b : pass.completed) log::Info("state backed up", {{"workload", b}});
  for (const std::string& f : pass.failed) log::Warn("state backup failed", {{"why", f}});
  for (const std::string& d : pass.deleted) {
    log::Info("replaced state backup deleted", {{"checkpoint", d}});
  }
}

void SwmServiceImpl::DrainForTest() {
  absl::MutexLock lock(&queue_mu_);
  auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
    return stopping_ || (recovered_ && queue_.empty() && running_tasks_ == 0);
  };
  queue_mu_.Await(absl::Condition(&drained));
}

void SwmServiceImpl::Recover() {
  RecoveryReport recovered = core_->Recover();
  members_.ClearDeadlines();
  if (!recovered_once_) {
    // The channels of the applications placed before a restart.
    absl::StatusOr<std::vector<pb::AssignmentPlan>> live = plans_.LivePlans();
    if (live.ok()) {
      for (const pb::AssignmentPlan& plan : *live) TrackPlan(plan);
    } else {
      log::Warn("channel status not restored", {{"error", std::string(live.status().message())}});
    }
  }
  if (!recovered_once_) {
    recovered_once_ = true;
    FinishInterruptedOperations();
  }
  for (const std::string& e : recovered.errors) {
    log::Warn("plan recovery left work for later", {{"error", e}});
  }
  if (!recovered.committed.empty() || !recovered.rolled_back.empty() ||
      !recovered.released.empty()) {
    log::Info("recovered plans interrupted by a restart",
              {{"committed", absl::StrJoin(recovered.committed, ",")},
               {"rolled_back", absl::StrJoin(recovered.rolled_back, ",")},
               {"released", absl::StrJoin(recovered.released, ",")}});
  }
  if (options_.reconcile_interval <= absl::ZeroDuration()) return;
  RecoveryReport reconciled = core_->Reconcile();
  members_.ClearDeadlines();
  for (const std::string& e : reconciled.errors) {
    log::Warn("reconciler could not check a cluster", {{"error", e}});
  }
}

SwmServiceImpl::~SwmServiceImpl() {
  {
    absl::MutexLock lock(&queue_mu_);
    stopping_ = true;
  }
  for (std::thread& worker : workers_) worker.join();
  {
    absl::MutexLock lock(&channel_mu_);
    channel_stop_ = true;
  }
  if (channel_monitor_.joinable()) channel_monitor_.join();
}

void SwmServiceImpl::TrackPlan(const pb::AssignmentPlan& plan) {
  if (channel_tracker_.SetPlan(plan, clock_.Now())) ChannelsChanged();
}

void SwmServiceImpl::ChannelsChanged() {
  {
    absl::MutexLock lock(&channel_mu_);
    for (const pb::ApplicationChannels& app : channel_tracker_.ChangesAfter(channel_logged_, "")) {
      for (const pb::ChannelTrigger& t : app.triggers()) {
        log::Warn("channel out of QoS: adaptation trigger raised",
                  {{"application", t.application()},
                   {"channel", t.channel()},
                   {"virtual_link", t.virtual_link_id()},
                   {"why", t.message()}});
        if (metrics_ != nullptr) metrics_->channel_triggers.Increment();
      }
      channel_logged_ = std::max(channel_logged_, app.sequence());
    }
  }
  if (metrics_ != nullptr) {
    std::map<acm::ChannelPhase, int> counts = channel_tracker_.CountByPhase();
    for (int phase = acm::CHANNEL_PHASE_REQUESTED; phase <= acm::CHANNEL_PHASE_DELETED; ++phase) {
      if (phase == acm::CHANNEL_PHASE_DELETED) continue;  // removed channels are not counted
      auto it = counts.find(static_cast<acm::ChannelPhase>(phase));
      std::string name = acm::ChannelPhase_Name(static_cast<acm::ChannelPhase>(phase));
      metrics_->channels.Add({{"phase", std::string(absl::StripPrefix(name, "CHANNEL_PHASE_"))}})
          .Set(it == counts.end() ? 0 : it->second);
    }
  }
  channel_listeners_.Notify();
}

void SwmServiceImpl::MonitorChannels() {
  while (true) {
    {
      absl::MutexLock lock(&channel_mu_);
      const absl::Time until = absl::Now() + options_.channel_poll;
      while (!channel_stop_ && absl::Now() < until) {
        channel_mu_.AwaitWithDeadline(absl::Condition(&channel_stop_), until);
      }
      if (channel_stop_) return;
    }
    if (!channel_tracker_.FollowsLinks()) continue;
    absl::StatusOr<std::vector<codeco::netma::v1::VirtualLink>> links =
        options_.virtual_links->ListAll("", absl::Now() + options_.channel_poll * 5);
    if (!links.ok()) {
      log::Debug("virtual links not read", {{"error", std::string(links.status().message())}});
      continue;
    }
    if (channel_tracker_.ApplyLinks(*links, clock_.Now()) > 0) ChannelsChanged();
  }
}

bool SwmServiceImpl::Submit(std::function<void()> task) {
  absl::MutexLock lock(&queue_mu_);
  if (stopping_ || queue_.size() >= options_.max_queued_placements) return false;
  queue_.push_back(std::move(task));
  return true;
}

void SwmServiceImpl::Work(bool first) {
  if (first) {
    Recover();
    absl::MutexLock lock(&queue_mu_);
    recovered_ = true;
  }
  // The first worker also runs the reconciler and the adaptation loop.
  const bool reconcile = first && options_.reconcile_interval > absl::ZeroDuration();
  const bool adapt = first && adaptation_ != nullptr;
  absl::Time next_reconcile =
      reconcile ? absl::Now() + options_.reconcile_interval : absl::InfiniteFuture();
  absl::Time next_adapt = adapt ? absl::Now() + options_.adapt_interval : absl::InfiniteFuture();
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&queue_mu_);
      absl::Condition ready(
          +[](SwmServiceImpl* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->queue_mu_) {
            return s->stopping_ || (s->recovered_ && !s->queue_.empty());
          },
          this);
      if (reconcile || adapt) {
        queue_mu_.AwaitWithDeadline(ready, std::min(next_reconcile, next_adapt));
      } else {
        queue_mu_.Await(ready);
      }
      if (stopping_ && (queue_.empty() || !recovered_)) return;  // stopping, nothing left
      if (recovered_ && !queue_.empty()) {
        task = std::move(queue_.front());
        queue_.pop_front();
        ++running_tasks_;
      }
    }
    if (task) {
      task();
      absl::MutexLock lock(&queue_mu_);
      --running_tasks_;
      continue;
    }
    if (adapt && absl::Now() >= next_adapt) {
      Adapt();
      next_adapt = absl::Now() + options_.adapt_interval;
    }
    if (reconcile && absl::Now() >= next_reconcile) {
      // The reconciler's turn: what a recovery left for later (a member was
      // away) is tried again, then pods of plans the hub no longer holds go.
      Recover();
      next_reconcile = absl::Now() + options_.reconcile_interval;
    }
  }
}

grpc::ServerUnaryReactor* SwmServiceImpl::OnWorker(grpc::CallbackServerContext* context,
                                                   std::function<absl::Status(absl::Time)> work) {
  return ServeOnQueue([this](std::function<void()> task) { return Submit(std::move(task)); },
                      context, std::move(work));
}

grpc::ServerUnaryReactor* SwmServiceImpl::PlaceApplication(
    grpc::CallbackServerContext* context, const pb::PlaceApplicationRequest* request,
    pb::PlaceApplicationResponse* response) {
  if (request->mode() == pb::PLACE_MODE_RUNNING && !request->dry_run()) {
    // Answered from the io executor at once; the placement runs on the worker.
    return ServeOnExecutor(io_, context, [this, request, response](absl::Time) {
      absl::StatusOr<Operation> op = Start(*request);
      if (op.ok()) *response->mutable_operation() = std::move(*op);
      return op.status();
    });
  }
  if (request->mode() != pb::PLACE_MODE_UNSPECIFIED && request->mode() != pb::PLACE_MODE_WAIT &&
      request->mode() != pb::PLACE_MODE_RUNNING) {
    return Answer(context, InvalidFieldError("mode", absl::StrCat("unknown mode ",
                                                                  static_cast<int>(request->mode()))));
  }
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

grpc::ServerUnaryReactor* SwmServiceImpl::MigrateWorkload(
    grpc::CallbackServerContext* context, const pb::MigrateWorkloadRequest* request,
    pb::MigrateWorkloadResponse* response) {
  return OnWorker(context, [this, request, response](absl::Time deadline) {
    absl::StatusOr<Operation> op = Migrate(*request, deadline);
    if (op.ok()) *response->mutable_operation() = std::move(*op);
    return op.status();
  });
}

grpc::ServerUnaryReactor* SwmServiceImpl::GetMigration(grpc::CallbackServerContext* context,
                                                       const pb::GetMigrationRequest* request,
                                                       pb::GetMigrationResponse* response) {
  if (request->id().empty()) return Answer(context, InvalidFieldError("id", "is required"));
  if (MigrationNumber(request->id()) <= 0) {
    return Answer(context, InvalidFieldError("id", "must be \"<application>/<number>\", not \"" +
                                                       request->id() + "\""));
  }
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) {
    absl::StatusOr<pb::Migration> migration = plans_.GetMigration(request->id());
    if (migration.ok()) *response->mutable_migration() = std::move(*migration);
    return migration.status();
  });
}

grpc::ServerUnaryReactor* SwmServiceImpl::ListMigrations(grpc::CallbackServerContext* context,
                                                         const pb::ListMigrationsRequest* request,
                                                         pb::ListMigrationsResponse* response) {
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) {
    absl::StatusOr<pb::ListMigrationsResponse> page = plans_.ListMigrations(*request);
    if (page.ok()) *response = std::move(*page);
    return page.status();
  });
}

grpc::ServerUnaryReactor* SwmServiceImpl::ListStateBackups(
    grpc::CallbackServerContext* context, const pb::ListStateBackupsRequest* request,
    pb::ListStateBackupsResponse* response) {
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) {
    absl::StatusOr<pb::ListStateBackupsResponse> page = plans_.ListStateBackups(*request);
    if (page.ok()) *response = std::move(*page);
    return page.status();
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
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) {
    absl::StatusOr<Operation> op = plans_.GetOperation(request->id());
    if (op.ok()) *response->mutable_operation() = std::move(*op);
    return op.status();
  });
}

grpc::ServerUnaryReactor* SwmServiceImpl::ListOperations(grpc::CallbackServerContext* context,
                                                         const pb::ListOperationsRequest* request,
                                                         pb::ListOperationsResponse* response) {
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) {
    absl::StatusOr<pb::ListOperationsResponse> page = plans_.ListOperations(*request);
    if (page.ok()) *response = std::move(*page);
    return page.status();
  });
}

grpc::ServerWriteReactor<pb::WatchOperationResponse>* SwmServiceImpl::WatchOperation(
    grpc::CallbackServerContext* /*context*/, const pb::WatchOperationRequest* request) {
  return new OperationWatch<pb::WatchOperationResponse>(
      "swm", [this](const std::string& id) { return plans_.GetOperation(id); }, listeners_,
      operation_watchers_, options_.max_operation_watchers, request->id());
}

// Streams the channel tracker: every application's channels first (those
// of `application` only, when set), then each change after the last
// sequence written, with the triggers it raised.
class SwmServiceImpl::ChannelWatch final : public WatchStream<pb::WatchChannelsResponse> {
 public:
  ChannelWatch(SwmServiceImpl& service, const std::string& application)
      : service_(service), application_(application) {
    if (service_.operation_watchers_.fetch_add(1) >= service_.options_.max_operation_watchers) {
      Fail(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("swm: already ", service_.options_.max_operation_watchers,
                                     " open watches; retry later")));
      return;
    }
    if (application_.size() > 253) {
      Fail(ToGrpcStatus(InvalidFieldError("application", "at most 253 characters")));
      return;
    }
    listener_ = service_.channel_listeners_.Add([this] { Poke(); });
    Start();
  }

 private:
  absl::StatusOr<Batch> Next() override {
    std::vector<pb::ApplicationChannels> changes =
        service_.channel_tracker_.ChangesAfter(sent_, application_);
    if (changes.empty()) return Batch{};
    Batch batch;
    batch.messages.emplace_back();
    for (pb::ApplicationChannels& app : changes) {
      sent_ = std::max(sent_, app.sequence());
      *batch.messages.back().add_applications() = std::move(app);
    }
    return batch;
  }

  void Closed() override {
    if (listener_ != 0) service_.channel_listeners_.Remove(listener_);
    service_.operation_watchers_.fetch_sub(1);
  }

  SwmServiceImpl& service_;
  const std::string application_;
  int listener_ = 0;
  int64_t sent_ = 0;  // the newest sequence written (under the stream's lock)
};

grpc::ServerWriteReactor<pb::WatchChannelsResponse>* SwmServiceImpl::WatchChannels(
    grpc::CallbackServerContext* /*context*/, const pb::WatchChannelsRequest* request) {
  return new ChannelWatch(*this, request->application());
}

absl::StatusOr<PlaceRequest> SwmServiceImpl::ToPlaceRequest(
    const pb::PlaceApplicationRequest& request) {
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
  PlaceRequest core;
  ASSIGN_OR_RETURN(core.app, ToCoreApplication(request.application(), names));
  for (const auto& m : members) {
    core.members.push_back(MemberRef{
        .cluster = m.cluster(),
        .endpoints =
            std::map<std::string, std::string>(m.endpoints().begin(), m.endpoints().end())});
  }
  // The members' PDLCs advise this placement and the later ones.
  for (int i = 0; i < members.size(); ++i) {
    auto pdlc = members[i].endpoints().find("pdlc");
    if (pdlc == members[i].endpoints().end()) continue;
    if (absl::Status set = recommendations_.SetEndpoint(members[i].cluster(), pdlc->second); !set.ok()) {
      errors.Add(absl::StrCat("neighborhood.members[", i, "].endpoints[\"pdlc\"]"), std::string(set.message()));
    }
  }
  RETURN_IF_ERROR(errors.ToStatus());
  core.request_id = request.request_id();
  core.dry_run = request.dry_run();
  core.spec_revision = request.application().spec_revision();
  core.neighborhood_id = request.neighborhood().id();
  return core;
}

absl::StatusOr<Operation> SwmServiceImpl::Start(const pb::PlaceApplicationRequest& request) {
  ASSIGN_OR_RETURN(PlaceRequest checked, ToPlaceRequest(request));
  const std::string resource = "applications/" + checked.app.name;
  const std::string& request_id = request.request_id();
  Operation op;
  {
    absl::MutexLock lock(&started_mu_);
    if (!request_id.empty()) {
      // The same request again: its operation, running or done.
      if (auto it = started_requests_.find(request_id); it != started_requests_.end()) {
        return plans_.GetOperation(it->second);
      }
      ASSIGN_OR_RETURN(std::optional<Operation> seen, plans_.OperationForRequest(request_id));
      if (seen.has_value()) {
        if (seen->resource() != resource || seen->kind() != kPlaceKind) {
          return InvalidFieldError("request_id", absl::StrCat("already used by ", seen->kind(),
                                                              " for ", seen->resource()));
        }
        return *seen;
      }
    }
    const absl::Time now = clock_.Now();
    op.set_id(absl::StrCat("place/", checked.app.name, "/started-", absl::ToUnixMicros(now), "-",
                           ++started_count_));
    op.set_kind(kPlaceKind);
    op.set_resource(resource);
    op.set_request_id(request_id);
    op.set_phase("QUEUED");
    op.set_progress_percent(0);
    *op.mutable_create_time() = ToTimestamp(now);
    *op.mutable_update_time() = ToTimestamp(now);
    // Known as this process's before it is stored: the start-up sweep of
    // interrupted operations leaves it alone.
    started_.insert(op.id());
    if (!request_id.empty()) started_requests_[request_id] = op.id();
  }
  auto forget = [this, &op, &request_id] {
    absl::MutexLock lock(&started_mu_);
    started_.erase(op.id());
    if (!request_id.empty()) started_requests_.erase(request_id);
  };
  if (absl::Status saved = plans_.Save(nullptr, op, ""); !saved.ok()) {
    forget();
    return saved;
  }
  bool queued = Submit([this, request, op] {
    FinishStarted(op, PlaceAs(request, absl::InfiniteFuture(), &op));
  });
  if (!queued) {
    absl::Status full =
        absl::ResourceExhaustedError("too many placements waiting; retry later");
    FinishStarted(op, full);
    return full;
  }
  return op;
}

void SwmServiceImpl::FinishStarted(const Operation& accepted,
                                   const absl::StatusOr<Operation>& placed) {
  const absl::Status& status = placed.status();
  absl::StatusOr<Operation> stored = plans_.GetOperation(accepted.id());
  if (!stored.ok() || !stored->done()) {
    // The core answered before storing the end (a member or a directory
    // away, ...), or answered another operation (a request_id claimed by a
    // call in PLACE_MODE_WAIT meanwhile): this one ends with that answer.
    Operation op = stored.ok() ? *stored : accepted;
    op.set_done(true);
    op.set_progress_percent(100);
    op.set_phase(status.ok() ? placed->phase() : "FAILED");
    op.clear_result();
    op.clear_error();
    if (status.ok()) {
      if (placed->has_result()) *op.mutable_result() = placed->result();
      if (placed->has_error()) *op.mutable_error() = placed->error();
    } else {
      SetError(status, op.mutable_error());
    }
    *op.mutable_update_time() = ToTimestamp(clock_.Now());
    absl::Status saved = plans_.Save(nullptr, op, "");
    if (!saved.ok()) {
      log::Warn("operation end not stored",
                {{"operation", op.id()}, {"error", std::string(saved.message())}});
    }
  }
  absl::MutexLock lock(&started_mu_);
  started_.erase(accepted.id());
  if (!accepted.request_id().empty()) started_requests_.erase(accepted.request_id());
}

void SwmServiceImpl::FinishInterruptedOperations() {
  absl::StatusOr<std::vector<Operation>> ops = plans_.Operations();
  absl::StatusOr<std::vector<pb::AssignmentPlan>> plans = plans_.LivePlans();
  if (!ops.ok() || !plans.ok()) {
    log::Warn("interrupted operations not checked",
              {{"error", std::string((ops.ok() ? plans.status() : ops.status()).message())}});
    return;
  }
  // Operations whose plan a crash left in an intermediate phase are the
  // core's recovery's to finish (now, or once their clusters answer).
  std::set<std::string> carried;
  for (const pb::AssignmentPlan& plan : *plans) {
    if (plan.phase() == pb::PLAN_PHASE_RESERVING || plan.phase() == pb::PLAN_PHASE_COMMITTING ||
        plan.phase() == pb::PLAN_PHASE_RELEASING) {
      carried.insert(plan.operation_id());
    }
  }
  // So do the operations of migrations not finished.
  absl::StatusOr<std::vector<pb::Migration>> moving = plans_.ActiveMigrations();
  if (!moving.ok()) {
    log::Warn("interrupted operations not checked",
              {{"error", std::string(moving.status().message())}});
    return;
  }
  for (const pb::Migration& m : *moving) carried.insert(m.operation_id());
  for (Operation& op : *ops) {
    if (op.done() || carried.count(op.id())) continue;
    {
      absl::MutexLock lock(&started_mu_);
      if (started_.count(op.id())) continue;  // started by this process
    }
    op.set_done(true);
    op.set_progress_percent(100);
    op.set_phase("ABORTED");
    op.clear_result();
    op.mutable_error()->set_code(codeco::common::v1::ERROR_CODE_ABORTED);
    op.mutable_error()->set_message(
        "swm restarted before this placement wrote its plan; nothing was reserved; place again");
    *op.mutable_update_time() = ToTimestamp(clock_.Now());
    absl::Status saved = plans_.Save(nullptr, op, "");
    if (saved.ok()) {
      log::Info("operation interrupted by a restart finished", {{"operation", op.id()}});
    } else {
      log::Warn("interrupted operation not finished",
                {{"operation", op.id()}, {"error", std::string(saved.message())}});
    }
  }
}

absl::StatusOr<Operation> SwmServiceImpl::Place(const pb::PlaceApplicationRequest& request,
                                                absl::Time deadline) {
  return PlaceAs(request, deadline, nullptr);
}

namespace {

// `spec` without what a scale in place may change: every service's replica
// count and autoscaling settings.
acm::ApplicationSpec WithoutScale(const acm::ApplicationSpec& spec) {
  acm::ApplicationSpec out = spec;
  for (acm::ServiceSpec& s : *out.mutable_services()) {
    s.clear_replicas();
    s.clear_autoscaling();
  }
  return out;
}

}  // namespace

std::optional<absl::StatusOr<Operation>> SwmServiceImpl::ScaleInPlace(
    const pb::PlaceApplicationRequest& request, absl::Time deadline, const Operation* accepted) {
  const std::string name = ApplicationName(request.application());
  absl::StatusOr<std::optional<pb::AssignmentPlan>> latest = plans_.Latest(name);
  if (!latest.ok()) return latest.status();
  if (!latest->has_value() || (*latest)->phase() != pb::PLAN_PHASE_DONE ||
      (*latest)->targets().empty() || IsRemoval(**latest)) {
    return std::nullopt;
  }
  const pb::AssignmentPlan& plan = **latest;
  absl::StatusOr<PlaceRequest> checked = ToPlaceRequest(request);
  if (!checked.ok()) return checked.status();
  absl::StatusOr<std::optional<pb::PlaceApplicationRequest>> placed = plans_.PlacementRequest(name);
  if (!placed.ok()) return placed.status();
  auto refuse = [&](const std::string& why) -> absl::StatusOr<Operation> {
    return absl::AlreadyExistsError(absl::StrCat("application ", name, " is placed (plan ",
                                                 plan.id(), ") and cannot scale in place: ", why,
                                                 "; release it and place it again"));
  };
  if (!placed->has_value()) return refuse("this hub stored no request for its placement");
  const pb::PlaceApplicationRequest& before = **placed;
  if (!google::protobuf::util::MessageDifferencer::Equals(
          WithoutScale(before.application().spec()), WithoutScale(request.application().spec()))) {
    return refuse("its spec changed beyond services' replicas and autoscaling");
  }
  if (before.neighborhood().id() != request.neighborhood().id()) {
    return refuse("its neighborhood changed");
  }
  // The neighborhood may have been chosen again: every replica that stays
  // must still run in one of its members.
  std::set<std::string> members_now;
  for (const auto& m : request.neighborhood().members()) members_now.insert(m.cluster());
  for (const pb::WorkloadTarget& t : plan.targets()) {
    if (checked->app.WorkloadIndex(t.workload()) >= 0 && !members_now.count(t.cluster())) {
      return refuse(absl::StrCat("replica ", t.workload(), " runs in ", t.cluster(),
                                 ", no longer a member of its neighborhood"));
    }
  }
  // A channel between replicas that stay keeps its name (one between two
  // single replicas is named after the spec's channel, between more after
  // the pair): else it would be a new channel on the same pods.
  std::set<std::string> channels_now;
  for (const Channel& c : checked->app.channels) channels_now.insert(c.name);
  for (const pb::ChannelPath& c : plan.channels()) {
    if (checked->app.WorkloadIndex(c.from_workload()) < 0 ||
        checked->app.WorkloadIndex(c.to_workload()) < 0) {
      continue;
    }
    if (!channels_now.count(c.channel())) {
      return refuse(absl::StrCat("channel ", c.channel(), " between ", c.from_workload(), " and ",
                                 c.to_workload(), " would change its name"));
    }
  }
  // Migrations from now on re-create pods from the new spec.
  if (absl::Status kept = plans_.SavePlacementRequest(name, request); !kept.ok()) return kept;
  std::unique_ptr<ExecutorFactory> executors = members_.ExecutorsFor(request.application());
  ScaleRequest scale{.app = std::move(checked->app),
                     .members = std::move(checked->members),
                     .neighborhood_id = checked->neighborhood_id,
                     .spec_revision = checked->spec_revision,
                     .request_id = checked->request_id,
                     .executors = executors.get(),
                     .operation_id = accepted != nullptr ? accepted->id() : ""};
  return core_->Scale(scale, deadline);
}

absl::StatusOr<Operation> SwmServiceImpl::PlaceAs(const pb::PlaceApplicationRequest& request,
                                                  absl::Time deadline,
                                                  const Operation* accepted) {
  const absl::Time start = absl::Now();
  PlaceCounts counts;
  auto place = [&]() -> absl::StatusOr<Operation> {
    if (request.scale_in_place() && !request.dry_run()) {
      std::optional<absl::StatusOr<Operation>> scaled = ScaleInPlace(request, deadline, accepted);
      if (scaled.has_value()) return *std::move(scaled);
    }
    ASSIGN_OR_RETURN(PlaceRequest core, ToPlaceRequest(request));
    std::unique_ptr<ExecutorFactory> executors = members_.ExecutorsFor(request.application());
    core.executors = executors.get();
    if (accepted != nullptr) core.operation_id = accepted->id();
    // The request is stored once the core has checked that the application
    // is not placed (SOLVING, under its turn): every plan holding pods comes
    // from the request stored last, which migrations re-create pods from.
    // The steps before a plan exists are stored here; the core stores the rest.
    core.on_progress = [this, accepted, &request](const Operation& step, bool stored) {
      if (stored) return;
      if (step.phase() == "SOLVING") {
        absl::Status kept = plans_.SavePlacementRequest(ApplicationName(request.application()),
                                                        request);
        if (!kept.ok()) {
          log::Warn("placement request not stored; the application cannot be migrated",
                    {{"operation", step.id()}, {"error", std::string(kept.message())}});
        }
      }
      if (accepted != nullptr) {
        Operation op = step;
        *op.mutable_create_time() = accepted->create_time();
        absl::Status saved = plans_.Save(nullptr, op, "");
        if (!saved.ok()) {
          log::Warn("placement progress not stored",
                    {{"operation", op.id()}, {"error", std::string(saved.message())}});
        }
      }
    };
    return core_->Place(core, deadline, &counts);
  };
  absl::StatusOr<Operation> op = place();
  members_.ClearDeadlines();
  if (metrics_ != nullptr) {
    metrics_->placements.Add({{"code", absl::StatusCodeToString(op.status().code())}}).Increment();
    metrics_->duration.Observe(absl::ToDoubleSeconds(absl::Now() - start));
    if (counts.unplaced > 0) metrics_->unplaced.Increment(static_cast<double>(counts.unplaced));
    if (counts.placed > 0) metrics_->placed.Increment(static_cast<double>(counts.placed));
  }
  return op;
}

absl::StatusOr<Operation> SwmServiceImpl::Migrate(const pb::MigrateWorkloadRequest& request,
                                                  absl::Time deadline) {
  FieldErrors errors;
  if (request.application().empty()) errors.Add("application", "is required");
  if (request.workload().empty()) errors.Add("workload", "is required");
  if (!pb::MigrationReason_IsValid(request.reason())) {
    errors.Add("reason", absl::StrCat("unknown reason ", request.reason()));
  } else if (request.reason() == pb::MIGRATION_REASON_SCALE_UP ||
             request.reason() == pb::MIGRATION_REASON_SCALE_DOWN) {
    errors.Add("reason",
               "SCALE_UP and SCALE_DOWN are recorded by a scale in place (PlaceApplication "
               "with scale_in_place), not asked for");
  }
  RETURN_IF_ERROR(errors.ToStatus());
  ASSIGN_OR_RETURN(std::optional<pb::PlaceApplicationRequest> placed,
                   plans_.PlacementRequest(request.application()));
  if (!placed.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("application ", request.application(),
                     " has no placement stored by this hub; place it first"));
  }
  ASSIGN_OR_RETURN(PlaceRequest stored, ToPlaceRequest(*placed));
  std::unique_ptr<ExecutorFactory> executors = members_.ExecutorsFor(placed->application());
  MigrateRequest move{.app = std::move(stored.app),
                      .members = std::move(stored.members),
                      .neighborhood_id = stored.neighborhood_id,
                      .workload = request.workload(),
                      .target_cluster = request.target_cluster(),
                      .target_node = request.target_node(),
                      .reason = request.reason() == pb::MIGRATION_REASON_UNSPECIFIED
                                    ? pb::MIGRATION_REASON_MANUAL
                                    : request.reason(),
                      .request_id = request.request_id(),
                      .executors = executors.get()};
  absl::StatusOr<Operation> op = core_->Migrate(move, deadline);
  members_.ClearDeadlines();
  return op;
}

absl::StatusOr<pb::AssignmentPlan> SwmServiceImpl::Release(
    const pb::ReleaseApplicationRequest& request, absl::Time deadline) {
  absl::StatusOr<pb::AssignmentPlan> plan = core_->Release(
      ReleaseRequest{.application = request.application(), .request_id = request.request_id()},
      deadline);
  members_.ClearDeadlines();
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
  schema.Add({.path = "swm.mdm",
              .type = ConfigType::kAddress,
              .help = "hub: host:port of the MDM holding the federation's data sets (DataSet "
                      "entities): a dataLocality naming one places its workload only in the "
                      "clusters holding it; empty: dataLocality is a region or cluster"});
  schema.Add({.path = "swm.channel_poll",
              .type = ConfigType::kDuration,
              .default_value = "1s",
              .help = "hub: how often NetMA's virtual links are read for the channels' status "
                      "(only while some placed channel has one)"});
  schema.Add({.path = "swm.channel_grace",
              .type = ConfigType::kDuration,
              .default_value = "4s",
              .help = "hub: how long a channel's virtual link must be measured out of its bounds "
                      "(first to newest probe over them) before the channel is OOQOS and an "
                      "adaptation trigger is raised; 4s = two probes in a row at NetMA's 5 s"});
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
                      "cluster=host:port[,cluster=host:port...]; those clusters are read through "
                      "their swm and hold reservations (swm.member_l2 says who solves their L2); "
                      "the others are driven through their LMS"});
  schema.Add({.path = "swm.pdlc_endpoints",
              .type = ConfigType::kString,
              .help = "the PDLC of each cluster whose neighborhood entry names none, as "
                      "cluster=host:port[,...]; placements follow their recommendations (hub: "
                      "cluster order and node scores; MC: its own L2's node scores)"});
  schema.Add({.path = "swm.pdlc_auction",
              .type = ConfigType::kBool,
              .default_value = "false",
              .help = "hub: run the neighborhood auction (PdlcService.RunAuction on a member's "
                      "PDLC) for each application placed and visit its winner first"});
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
  schema.Add({.path = "swm.reconcile_interval",
              .type = ConfigType::kDuration,
              .default_value = "5m",
              .help = "hub: how often the orphan reconciler deletes pods of the clusters the hub "
                      "drives through their LMS that carry a plan label the hub no longer holds "
                      "(also once at start); 0s: never"});
  schema.Add({.path = "swm.adapt_interval",
              .type = ConfigType::kDuration,
              .default_value = "10s",
              .help = "hub: how often the adaptation loop probes the members of the placed "
                      "applications; the workloads of a node or cluster failed for longer than "
                      "swm.failure_grace are moved elsewhere, and back once it has been healthy "
                      "for swm.failback_grace (0s: never). mc: how often the hub ACM is probed "
                      "and, while the hub is away (swm.hub_away_after), the pods of a node not "
                      "ready for swm.failure_grace move to other nodes of the cluster (0s: "
                      "never)"});
  schema.Add({.path = "swm.hub_away_after",
              .type = ConfigType::kDuration,
              .default_value = "30s",
              .help = "mc: how long the hub may not answer (probes of the hub ACM, calls from "
                      "the hub swm) before this cluster's swm moves pods off its failed nodes "
                      "on its own; the hub adopts or undoes those moves when it is back"});
  schema.Add({.path = "swm.state_backup_interval",
              .type = ConfigType::kDuration,
              .default_value = "30s",
              .help = "hub: how often each stateful workload's state is backed up (a checkpoint "
                      "of its running pod pushed to the registry by its cluster's "
                      "checkpointer, on the adaptation loop's ticks); a move off a failed node "
                      "or cluster restores the newest backup, losing the writes after it "
                      "(0s: no backups, and such a workload stays on its failed node)"});
  schema.Add({.path = "swm.failure_grace",
              .type = ConfigType::kDuration,
              .default_value = "60s",
              .help = "hub: how long a node must be not ready, or a cluster not answer, before "
                      "its workloads are moved (a shorter blip moves nothing); mc: how long a "
                      "node must be not ready, while the hub is away, before its pods move"});
  schema.Add({.path = "swm.breach_grace",
              .type = ConfigType::kDuration,
              .default_value = "3m",
              .help = "hub: how long a PDLC must keep advising a breach ahead on a node before "
                      "the adaptation loop moves a workload off it (one per tick, a stateless "
                      "one first, under the cooldown and budget)"});
  schema.Add({.path = "swm.failback_grace",
              .type = ConfigType::kDuration,
              .default_value = "5m",
              .help = "hub: how long a failed node or cluster must be healthy again before the "
                      "workloads moved off it go back"});
  schema.Add({.path = "swm.mc_timeout",
              .type = ConfigType::kDuration,
              .default_value = "10s",
              .help = "hub: deadline of each call to an MC swm"});
  schema.Add({.path = "swm.member_l2",
              .type = ConfigType::kEnum,
              .default_value = "hub",
              .allowed_values = {"hub", "member"},
              .help = "hub: where a member with an MC swm gets its L2 (workloads to nodes) "
                      "solved: hub (here, on the view read for the placement, unless the view "
                      "says the member runs its own L2 strategy; its Reserve re-checks every "
                      "node) or member (always its SolveCluster, one call per visit)"});
  schema.Add({.path = "swm.placement_workers",
              .type = ConfigType::kInt,
              .default_value = "4",
              .help = "hub: threads that run placements and removals (1-64); each placement's "
                      "read-solve-reserve cycle runs alone, the commits overlap"});
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
  // The PDLCs both roles follow, reached over the service's own channels:
  // an address those cannot reach is refused here, in either role.
  ASSIGN_OR_RETURN(const auto pdlc_endpoints,
                   ParseNamedAddresses("swm.pdlc_endpoints", raw.GetString("swm.pdlc_endpoints"), "cluster"));
  for (const auto& [cluster, address] : pdlc_endpoints) {
    if (auto channel = context.peers.Get(address); !channel.ok()) {
      return InvalidFieldError("swm.pdlc_endpoints", absl::StrCat(cluster, ": ", channel.status().message()));
    }
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
    if (!pdlc_endpoints.empty()) {
      auto recommendations = std::make_shared<PdlcRecommendations>(context.peers, context.clock);
      for (const auto& [cluster, address] : pdlc_endpoints) {
        RETURN_IF_ERROR(recommendations->SetEndpoint(cluster, address));  // checked above
      }
      options.recommendations = std::move(recommendations);
    }
    options.reservations.default_lease = context.config.raw.GetDuration("swm.reservation_lease");
    options.local_interval = raw.GetDuration("swm.adapt_interval");
    if (options.local_interval < absl::ZeroDuration()) {
      return InvalidFieldError("swm.adapt_interval", "must not be negative");
    }
    options.local = {.hub_away_after = raw.GetDuration("swm.hub_away_after"),
                     .failure_grace = raw.GetDuration("swm.failure_grace")};
    if (absl::Status valid = ValidateLocalReschedulerOptions(options.local); !valid.ok()) {
      // Its errors name the option's field (hub_away_after, failure_grace):
      // the keys are swm.<field>.
      return absl::InvalidArgumentError(absl::StrCat("swm.", valid.message()));
    }
    if (!context.config.hub_acm.empty()) {
      // Through the egress relay, as the cluster's ACM agent reaches the hub.
      ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> hub,
                       context.peers.Get(context.config.hub_acm));
      options.probe_hub = [hub = std::move(hub)](absl::Time deadline) {
        grpc::ClientContext call;
        call.set_deadline(absl::ToChronoTime(deadline));
        grpc::health::v1::HealthCheckRequest request;
        grpc::health::v1::HealthCheckResponse response;
        return grpc::health::v1::Health::NewStub(hub)->Check(&call, request, &response).ok() &&
               response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
      };
    }
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
  options.pdlc_endpoints = pdlc_endpoints;
  options.pdlc.auction = raw.GetBool("swm.pdlc_auction");
  options.mc_timeout = context.config.raw.GetDuration("swm.mc_timeout");
  options.reconcile_interval = context.config.raw.GetDuration("swm.reconcile_interval");
  options.adapt_interval = context.config.raw.GetDuration("swm.adapt_interval");
  options.adaptation.failure_grace = context.config.raw.GetDuration("swm.failure_grace");
  options.adaptation.failback_grace = context.config.raw.GetDuration("swm.failback_grace");
  options.adaptation.overload_grace = context.config.raw.GetDuration("swm.breach_grace");
  options.state_backups.interval = context.config.raw.GetDuration("swm.state_backup_interval");
  if (options.state_backups.interval < absl::ZeroDuration()) {
    return InvalidFieldError("swm.state_backup_interval", "must not be negative");
  }
  if (absl::Status valid = ValidateMigrationGovernorOptions(options.adaptation); !valid.ok()) {
    // Its errors name adaptation.<field>; the keys are swm.<field>.
    return InvalidFieldError("swm.failure_grace, swm.failback_grace, swm.breach_grace",
                             std::string(valid.message()));
  }
  // An enum key: the configuration refused any other value already.
  options.member_l2 = context.config.raw.GetString("swm.member_l2") == "member" ? MemberL2::kMember
                                                                               : MemberL2::kHub;
  const int64_t workers = context.config.raw.GetInt("swm.placement_workers");
  if (workers < 1 || workers > 64) {
    return InvalidFieldError("swm.placement_workers", "must be 1-64");
  }
  options.placement_workers = static_cast<size_t>(workers);
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
    links = std::make_shared<NetmaLinkSource>(channel, directory, context.clock);
    options.virtual_links = std::make_shared<NetmaVirtualLinks>(std::move(channel));
  }
  if (context.config.raw.Has("swm.mdm")) {
    ASSIGN_OR_RETURN(std::unique_ptr<PeerChannels> mdm_channels,
                     PeerChannels::Create(PeerChannelOptionsFrom(context.config)));
    ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                     mdm_channels->Get(context.config.raw.GetString("swm.mdm")));
    options.data_sets = std::make_shared<MdmDataSets>(std::move(channel), options.mc_timeout);
  }
  options.channel_poll = context.config.raw.GetDuration("swm.channel_poll");
  if (options.channel_poll < absl::Milliseconds(100)) {
    return InvalidFieldError("swm.channel_poll", "must be at least 100ms");
  }
  options.channels.grace = context.config.raw.GetDuration("swm.channel_grace");
  if (options.channels.grace < absl::ZeroDuration()) {
    return InvalidFieldError("swm.channel_grace", "must not be negative");
  }
  services.push_back(std::make_unique<SwmServiceImpl>(context.store, context.clock,
                                                      std::move(channels), directory, links,
                                                      options, &context.metrics));
  return services;
}

}  // namespace codeco::swm
