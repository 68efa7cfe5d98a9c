#include "swm/core/placement_service.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "codeco/common/logging.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/status.h"
#include "swm/core/convert.h"

namespace codeco::swm {
namespace {

namespace pb = codeco::swm::v1;
using codeco::common::v1::Operation;

// "RESERVING" for PLAN_PHASE_RESERVING: the operation's phase.
std::string OperationPhase(pb::PlanPhase phase) {
  return std::string(absl::StripPrefix(pb::PlanPhase_Name(phase), "PLAN_PHASE_"));
}

// The placed revision whose reservations a plan's pods were created under:
// the plan's own for a placement, the incumbent's for a removal.
int64_t PlacedRevision(const pb::AssignmentPlan& plan) {
  return IsRemoval(plan) ? plan.incumbent_plan_revision() : plan.plan_revision();
}

std::string ReservationOf(const std::string& app, int64_t revision, const std::string& cluster) {
  return absl::StrCat(app, "/", revision, "/", cluster);
}

// "RESERVING" for MIGRATION_PHASE_RESERVING: the operation's phase.
std::string MigrationOperationPhase(pb::MigrationPhase phase) {
  return std::string(absl::StripPrefix(pb::MigrationPhase_Name(phase), "MIGRATION_PHASE_"));
}

// How far a migration in `phase` is, for its operation.
int MigrationProgress(pb::MigrationPhase phase) {
  switch (phase) {
    case pb::MIGRATION_PHASE_RESERVING:
      return 30;
    case pb::MIGRATION_PHASE_CHECKPOINTING:
    case pb::MIGRATION_PHASE_RESTORING:
      return 60;
    case pb::MIGRATION_PHASE_CUTTING_OVER:
      return 90;
    case pb::MIGRATION_PHASE_DONE:
    case pb::MIGRATION_PHASE_ROLLED_BACK:
    case pb::MIGRATION_PHASE_FAILED:
      return 100;
    default:
      return 10;
  }
}

// `app` with only the workloads `plan` runs and `workload`, and the
// channels among them.
Application RunningAnd(const Application& app, const pb::AssignmentPlan& plan,
                       const std::string& workload) {
  std::set<std::string> kept = {workload};
  for (const pb::WorkloadTarget& t : plan.targets()) kept.insert(t.workload());
  Application out = app;
  out.workloads.clear();
  out.channels.clear();
  for (const Workload& w : app.workloads) {
    if (kept.count(w.name)) out.workloads.push_back(w);
  }
  for (const Channel& c : app.channels) {
    if (kept.count(c.from) && kept.count(c.to)) out.channels.push_back(c);
  }
  return out;
}

// The operation a request_id seen before ended with, answered again (its
// error as a status), or nullopt for a new one ("" is always new).
// INVALID_ARGUMENT naming request_id when other work (another kind, another
// application) used it.
absl::StatusOr<std::optional<Operation>> AnswerSeen(const PlanRepository& plans,
                                                    const std::string& request_id,
                                                    const std::string& resource,
                                                    const std::string& kind) {
  if (request_id.empty()) return std::nullopt;
  ASSIGN_OR_RETURN(std::optional<Operation> seen, plans.OperationForRequest(request_id));
  if (!seen.has_value()) return std::nullopt;
  if (seen->resource() != resource || seen->kind() != kind) {
    return InvalidFieldError(
        "request_id", absl::StrCat("already used by ", seen->kind(), " for ", seen->resource()));
  }
  if (seen->has_error()) return StatusFromError(seen->error());
  return seen;
}

// The key a reconciler matches a pod with: its reservation label and name.
std::string LivePodKey(const std::string& reservation_label, const std::string& pod) {
  return absl::StrCat(reservation_label, " ", pod);
}

}  // namespace

std::string TargetReservation(const pb::AssignmentPlan& plan, const pb::WorkloadTarget& target) {
  if (!target.reservation().empty()) return target.reservation();
  return ReservationOf(plan.application(), PlacedRevision(plan), target.cluster());
}

std::string MigratedPodName(const std::string& application, const std::string& workload,
                            int64_t revision) {
  return absl::StrCat(application, "-", workload, "-r", revision);
}

bool IsRemoval(const pb::AssignmentPlan& plan) {
  if (plan.phase() == pb::PLAN_PHASE_RELEASING) return true;
  // A scale-down deletes a replica and holds the others; a removal done
  // holds nothing.
  if (plan.phase() == pb::PLAN_PHASE_DONE && plan.targets_size() > 0) return false;
  bool deletes = false;
  for (const pb::PlanAction& a : plan.actions()) {
    if (a.type() == pb::ACTION_TYPE_CREATE_POD) return false;
    if (a.type() == pb::ACTION_TYPE_DELETE_POD || a.type() == pb::ACTION_TYPE_DELETE_CHANNEL) {
      deletes = true;
    }
  }
  return deletes;
}

bool IsFinal(pb::MigrationPhase phase) {
  return phase == pb::MIGRATION_PHASE_DONE || phase == pb::MIGRATION_PHASE_ROLLED_BACK ||
         phase == pb::MIGRATION_PHASE_FAILED;
}

int64_t MigrationNumber(const std::string& id) {
  const size_t slash = id.rfind('/');
  int64_t number = 0;
  if (slash == std::string::npos || !absl::SimpleAtoi(id.substr(slash + 1), &number)) return 0;
  return number;
}

bool HoldsPods(const pb::AssignmentPlan& plan) {
  switch (plan.phase()) {
    case pb::PLAN_PHASE_RESERVING:
    case pb::PLAN_PHASE_COMMITTING:
    case pb::PLAN_PHASE_RELEASING:
      return true;
    case pb::PLAN_PHASE_DONE:
      return !plan.targets().empty();
    default:
      break;
  }
  if (plan.targets().empty()) return false;
  for (const pb::PlanAction& a : plan.actions()) {
    if (a.type() == pb::ACTION_TYPE_DELETE_POD) return true;
  }
  return false;
}

absl::StatusOr<std::optional<pb::AssignmentPlan>> InMemoryPlanRepository::Latest(
    const std::string& application) const {
  absl::MutexLock lock(&mu_);
  auto it = plans_.find(application);
  if (it == plans_.end() || it->second.empty()) return std::nullopt;
  return it->second.rbegin()->second;
}

absl::StatusOr<std::vector<pb::AssignmentPlan>> InMemoryPlanRepository::LivePlans() const {
  absl::MutexLock lock(&mu_);
  std::vector<pb::AssignmentPlan> out;
  for (const auto& [app, revisions] : plans_) {
    if (!revisions.empty() && HoldsPods(revisions.rbegin()->second)) {
      out.push_back(revisions.rbegin()->second);
    }
  }
  return out;
}

absl::StatusOr<std::optional<Operation>> InMemoryPlanRepository::OperationForRequest(
    const std::string& request_id) const {
  absl::MutexLock lock(&mu_);
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return std::nullopt;
  auto op = operations_.find(it->second);
  if (op == operations_.end()) return absl::DataLossError("request " + request_id + " lost");
  return op->second;
}

absl::StatusOr<Operation> InMemoryPlanRepository::GetOperation(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = operations_.find(id);
  if (it == operations_.end()) return absl::NotFoundError("no operation " + id);
  return it->second;
}

absl::Status InMemoryPlanRepository::Save(const pb::AssignmentPlan* plan, const Operation& op,
                                          const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  if (plan != nullptr && !plan->id().empty()) {
    plans_[plan->application()][plan->plan_revision()] = *plan;
  }
  if (!op.id().empty()) operations_[op.id()] = op;
  if (!request_id.empty()) requests_[request_id] = op.id();
  return absl::OkStatus();
}

absl::StatusOr<pb::Migration> InMemoryPlanRepository::GetMigration(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  const std::string application = id.substr(0, id.rfind('/'));
  auto app = migrations_.find(application);
  if (app != migrations_.end()) {
    auto it = app->second.find(MigrationNumber(id));
    if (it != app->second.end()) return it->second;
  }
  return absl::NotFoundError("no migration " + id);
}

absl::StatusOr<std::optional<pb::Migration>> InMemoryPlanRepository::NewestMigration(
    const std::string& application) const {
  absl::MutexLock lock(&mu_);
  auto it = migrations_.find(application);
  if (it == migrations_.end() || it->second.empty()) return std::nullopt;
  return it->second.rbegin()->second;
}

absl::StatusOr<std::vector<pb::Migration>> InMemoryPlanRepository::ActiveMigrations() const {
  absl::MutexLock lock(&mu_);
  std::vector<pb::Migration> out;
  for (const auto& [app, by_number] : migrations_) {
    for (const auto& [number, m] : by_number) {
      if (!IsFinal(m.phase())) out.push_back(m);
    }
  }
  return out;
}

absl::Status InMemoryPlanRepository::SaveMigration(const pb::Migration& migration,
                                                   const pb::AssignmentPlan* plan,
                                                   const Operation& op,
                                                   const std::string& request_id) {
  RETURN_IF_ERROR(Save(plan, op, request_id));
  absl::MutexLock lock(&mu_);
  migrations_[migration.application()][MigrationNumber(migration.id())] = migration;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<pb::StateBackupRecord>> InMemoryPlanRepository::StateBackups() const {
  absl::MutexLock lock(&mu_);
  std::vector<pb::StateBackupRecord> out;
  for (const auto& [key, record] : backups_) out.push_back(record);
  return out;
}

absl::StatusOr<std::optional<pb::StateBackupRecord>> InMemoryPlanRepository::StateBackupOf(
    const std::string& application, const std::string& workload) const {
  absl::MutexLock lock(&mu_);
  auto it = backups_.find({application, workload});
  if (it == backups_.end()) return std::nullopt;
  return it->second;
}

absl::Status InMemoryPlanRepository::SaveStateBackup(const pb::StateBackupRecord& record) {
  absl::MutexLock lock(&mu_);
  backups_[{record.application(), record.workload()}] = record;
  return absl::OkStatus();
}

absl::Status InMemoryPlanRepository::DeleteStateBackup(const std::string& application,
                                                       const std::string& workload) {
  absl::MutexLock lock(&mu_);
  backups_.erase({application, workload});
  return absl::OkStatus();
}

void LinkLedger::Hold(const pb::AssignmentPlan& plan) {
  std::vector<Use> uses;
  for (const pb::ChannelPath& c : plan.channels()) {
    if (c.clusters_size() != 2 || c.min_bandwidth_bps() <= 0) continue;
    uses.push_back(
        Use{.from = c.clusters(0),
            .to = c.clusters(1),
            .service_class = c.service_class() == codeco::common::v1::SERVICE_CLASS_ASSURED
                                 ? ServiceClass::kAssured
                                 : ServiceClass::kBestEffort,
            .bps = c.min_bandwidth_bps()});
  }
  if (uses.empty()) {
    by_application_.erase(plan.application());
  } else {
    by_application_[plan.application()] = std::move(uses);
  }
}

void LinkLedger::Free(const std::string& application) { by_application_.erase(application); }

int64_t LinkLedger::Held(const std::string& from, const std::string& to,
                         ServiceClass service_class) const {
  int64_t held = 0;
  for (const auto& [app, uses] : by_application_) {
    for (const Use& u : uses) {
      if (u.from == from && u.to == to && u.service_class == service_class) held += u.bps;
    }
  }
  return held;
}

void LinkLedger::Apply(Federation& federation) const {
  for (const auto& [app, uses] : by_application_) {
    for (const Use& u : uses) {
      Link* link = federation.MutableLink(u.from, u.to);
      if (link == nullptr) continue;
      int64_t& free = link->free_bandwidth_bps[static_cast<int>(u.service_class)];
      free = std::max<int64_t>(0, free - u.bps);
    }
  }
}

PlacementService::PlacementService(const Clock& clock, MemberPort& members, LinkSource* links,
                                   PlanRepository& plans, L2Solver& local_l2,
                                   const PluginRegistry& registry, PlacementServiceOptions options)
    : clock_(clock),
      members_(members),
      links_(links),
      plans_(plans),
      local_l2_(local_l2),
      registry_(registry),
      options_(std::move(options)) {}

int64_t PlacementService::HeldBandwidth(const std::string& from, const std::string& to,
                                        ServiceClass service_class) {
  absl::MutexLock lock(&mu_);
  return ledger_.Held(from, to, service_class);
}

void PlacementService::DropCachedViews(const std::vector<std::string>& clusters) {
  absl::MutexLock lock(&mu_);
  for (const std::string& c : clusters) view_cache_.erase(c);
}

void PlacementService::Invalidate(const std::vector<std::string>& clusters) {
  DropCachedViews(clusters);
  members_.Touched(clusters);
}

absl::Status PlacementService::Admit(const std::string& application, absl::Time deadline) {
  absl::MutexLock lock(&admit_mu_);
  auto turn = [this, &application]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(admit_mu_) {
    return !alone_ && !busy_.count(application);
  };
  // Deadlines are the caller's (gRPC's), on the wall clock.
  if (!admit_mu_.AwaitWithDeadline(absl::Condition(&turn), deadline)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the caller's deadline passed while another operation of application ", application,
        " (or the recovery) ran; nothing was done"));
  }
  busy_.insert(application);
  ++in_flight_;
  return absl::OkStatus();
}

void PlacementService::Leave(const std::string& application) {
  absl::MutexLock lock(&admit_mu_);
  busy_.erase(application);
  --in_flight_;
}

void PlacementService::AdmitAlone() {
  absl::MutexLock lock(&admit_mu_);
  auto no_other = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(admit_mu_) { return !alone_; };
  admit_mu_.Await(absl::Condition(&no_other));
  alone_ = true;  // holds new operations back
  auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(admit_mu_) { return in_flight_ == 0; };
  admit_mu_.Await(absl::Condition(&drained));
}

void PlacementService::LeaveAlone() {
  absl::MutexLock lock(&admit_mu_);
  alone_ = false;
}

absl::StatusOr<Operation> PlacementService::Place(const PlaceRequest& request, absl::Time deadline,
                                                  PlaceCounts* counts) {
  // A dry run stores nothing: it needs no turn.
  if (request.dry_run) return PlaceAdmitted(request, deadline, counts);
  return AsOnlyOperation(request.app.name, deadline,
                         [&] { return PlaceAdmitted(request, deadline, counts); });
}

absl::StatusOr<Application> PlacementService::ResolveDataLocality(
    const Application& app, const Federation& federation) const {
  Application out = app;
  if (options_.data_sets == nullptr) return out;
  std::map<std::string, std::optional<std::vector<std::string>>> known;  // by name
  for (size_t i = 0; i < out.workloads.size(); ++i) {
    Workload& w = out.workloads[i];
    if (w.data_locality.empty()) continue;
    auto it = known.find(w.data_locality);
    if (it == known.end()) {
      absl::StatusOr<std::optional<std::vector<std::string>>> clusters =
          options_.data_sets->ClustersHolding(w.data_locality);
      if (!clusters.ok()) {
        bool is_place = false;
        for (const Cluster& c : federation.clusters()) {
          is_place = is_place || c.name == w.data_locality || c.labels.region == w.data_locality;
        }
        if (!is_place) {
          return absl::UnavailableError(absl::StrCat(
              "workload ", w.name, ": dataLocality \"", w.data_locality,
              "\" is no member cluster or region, and where the data set of that name lives "
              "cannot be read: ",
              clusters.status().message()));
        }
        clusters = std::optional<std::vector<std::string>>();
      }
      it = known.emplace(w.data_locality, *std::move(clusters)).first;
    }
    if (it->second.has_value()) {
      w.data_clusters = *it->second;
      if (w.data_clusters.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat("workload ", w.name, ": data set \"", w.data_locality,
                         "\" (its dataLocality) is held in no cluster"));
      }
    }
  }
  return out;
}

absl::Status PlacementService::BuildFederation(const std::vector<MemberRef>& members,
                                               absl::Time deadline,
                                               Federation& federation,
                                               std::vector<std::string>& neighborhood,
                                               std::vector<std::string>& unreachable) {
  RETURN_IF_ERROR(members_.Connect(members, deadline));
  // Each member's view: reused while younger than node_view_ttl, else read
  // (the port reads them concurrently).
  const absl::Time now = clock_.Now();
  std::vector<std::string> to_read;
  std::map<std::string, absl::StatusOr<MemberView>> views;
  {
    absl::MutexLock lock(&mu_);
    for (const MemberRef& m : members) {
      auto cached = view_cache_.find(m.cluster);
      if (cached != view_cache_.end() && now - cached->second.read_at < options_.node_view_ttl) {
        views.emplace(m.cluster, cached->second.view);
      } else {
        to_read.push_back(m.cluster);
      }
    }
  }
  std::vector<absl::StatusOr<MemberView>> read = members_.ReadMembers(to_read, deadline);
  if (read.size() != to_read.size()) {
    return absl::InternalError("member port answered a different number of members");
  }
  for (size_t i = 0; i < to_read.size(); ++i) {
    if (read[i].ok() && options_.node_view_ttl > absl::ZeroDuration()) {
      absl::MutexLock lock(&mu_);
      view_cache_[to_read[i]] = CachedView{*read[i], now};
    }
    views.emplace(to_read[i], std::move(read[i]));
  }
  for (const MemberRef& m : members) {
    absl::StatusOr<MemberView>& view = views.at(m.cluster);
    if (!view.ok()) {
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat("deadline passed while reading cluster ",
                                                        m.cluster, "; nothing was reserved"));
      }
      // A member that does not answer is left out; the others may still do.
      log::Warn("cluster left out of a placement: it does not answer",
                {{"cluster", m.cluster}, {"error", std::string(view.status().message())}});
      unreachable.push_back(absl::StrCat(m.cluster, " (", view.status().message(), ")"));
      continue;
    }
    federation.AddCluster(Cluster{.name = m.cluster,
                                  .labels = view->labels,
                                  .nodes = std::move(view->nodes),
                                  .intra_latency_ns = options_.intra_cluster_latency_ns});
    neighborhood.push_back(m.cluster);
  }
  if (neighborhood.empty()) {
    return absl::UnavailableError("no member cluster answers: " + absl::StrJoin(unreachable, ", "));
  }
  if (links_ != nullptr && options_.link_cache_ttl <= absl::ZeroDuration()) {
    // Nothing reused (the default): the links among the members, in one
    // read, straight into the federation.
    absl::StatusOr<std::vector<Link>> listed = links_->ListLinks(neighborhood);
    if (!listed.ok()) {
      return absl::UnavailableError("link source: " + std::string(listed.status().message()));
    }
    const std::set<std::string> members(neighborhood.begin(), neighborhood.end());
    for (const Link& l : *listed) {
      if (l.from != l.to && members.count(l.from) && members.count(l.to)) federation.AddLink(l);
    }
  } else if (links_ != nullptr) {
    // The links among the members in one read of the link source, unless
    // every pair was read less than link_cache_ttl ago.
    bool fresh = true;
    absl::ReleasableMutexLock lock(&mu_);
    for (const std::string& from : neighborhood) {
      for (const std::string& to : neighborhood) {
        if (from == to || !fresh) continue;
        auto cached = link_cache_.find({from, to});
        fresh =
            cached != link_cache_.end() && now - cached->second.read_at < options_.link_cache_ttl;
      }
    }
    if (!fresh) {
      lock.Release();
      absl::StatusOr<std::vector<Link>> listed = links_->ListLinks(neighborhood);
      absl::MutexLock relock(&mu_);
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
    } else {
      lock.Release();
    }
    absl::MutexLock relock(&mu_);
    for (const std::string& from : neighborhood) {
      for (const std::string& to : neighborhood) {
        if (from == to) continue;
        const CachedLink& cached = link_cache_[{from, to}];
        if (cached.link.has_value()) federation.AddLink(*cached.link);
      }
    }
  }
  {
    // What placed plans' channels hold is not free for this one.
    absl::MutexLock lock(&mu_);
    ledger_.Apply(federation);
  }
  return federation.Validate();
}

absl::StatusOr<Operation> PlacementService::PlaceAdmitted(const PlaceRequest& request,
                                                          absl::Time deadline,
                                                          PlaceCounts* counts) {
  const Application& app = request.app;
  const std::string resource = "applications/" + app.name;
  ASSIGN_OR_RETURN(std::optional<Operation> seen,
                   AnswerSeen(plans_, request.request_id, resource, kPlaceKind));
  if (seen.has_value()) return *seen;
  if (!request.dry_run && request.executors == nullptr) {
    return absl::InvalidArgumentError("a placement that is not a dry run needs its executors");
  }

  // The scheduling cycle: one placement at a time reads, solves and
  // reserves, so the next one's view counts this one's reservations.
  absl::ReleasableMutexLock schedule(&schedule_mu_);
  // Reports a step that is not stored (before a plan exists).
  auto report = [&](const char* phase, int percent) {
    if (!request.on_progress || request.dry_run) return;
    Operation step;
    step.set_id(request.operation_id);
    step.set_kind(kPlaceKind);
    step.set_resource(resource);
    step.set_request_id(request.request_id);
    step.set_phase(phase);
    step.set_progress_percent(percent);
    *step.mutable_update_time() = ToTimestamp(clock_.Now());
    request.on_progress(step, /*stored=*/false);
  };
  // Reports a state the core has just stored.
  auto report_stored = [&](const Operation& stored_op) {
    if (request.on_progress) request.on_progress(stored_op, /*stored=*/true);
  };

  report("READING_MEMBERS", 5);
  Federation federation;
  std::vector<std::string> neighborhood;
  std::vector<std::string> unreachable;
  RETURN_IF_ERROR(
      BuildFederation(request.members, deadline, federation, neighborhood, unreachable));

  ASSIGN_OR_RETURN(std::optional<pb::AssignmentPlan> latest, plans_.Latest(app.name));
  if (!request.dry_run && latest.has_value() && HoldsPods(*latest)) {
    const bool interrupted =
        latest->phase() == pb::PLAN_PHASE_RESERVING || latest->phase() == pb::PLAN_PHASE_COMMITTING;
    return absl::FailedPreconditionError(
        absl::StrCat("application ", app.name, " is ",
                     latest->phase() == pb::PLAN_PHASE_DONE
                         ? "already placed"
                         : (interrupted ? "held by an interrupted placement not recovered yet"
                                        : "still being removed"),
                     " by plan ", latest->id(),
                     "; moving a placed application is MigrateWorkload's job, removing it "
                     "ReleaseApplication's"));
  }

  report("SOLVING", 20);
  ASSIGN_OR_RETURN(const Application solved, ResolveDataLocality(app, federation));
  std::unique_ptr<L2Solver> l2 = members_.SolverFor(neighborhood, local_l2_);
  Coordinator coordinator(*l2, registry_, options_.recommendations, options_.coordinator);
  ASSIGN_OR_RETURN(PlacementResult result, coordinator.Place(solved, federation, neighborhood));
  if (result.unplaced.empty()) {
    absl::Status verified = VerifyPlacement(solved, federation, result);
    if (!verified.ok()) {
      return absl::InternalError("placement failed its own check: " +
                                 std::string(verified.message()));
    }
  }

  const int64_t revision = latest.has_value() ? latest->plan_revision() + 1 : 1;
  AssignmentPlan plan = BuildPlan(app, result, revision);
  const absl::Time now = clock_.Now();
  Operation op = NewOperation(request.operation_id, absl::StrCat("place/", app.name, "/", revision),
                              kPlaceKind, resource, request.request_id, now);

  // The stored form of the plan at its current phase; `done` sets the
  // operation's outcome too.
  auto stored = [&](const AssignmentPlan& core, const absl::Status& status, bool done) {
    pb::AssignmentPlan proto = ToProtoPlan(core, app, result);
    proto.set_spec_revision(request.spec_revision);
    proto.set_neighborhood_id(request.neighborhood_id);
    proto.set_operation_id(op.id());
    if (latest.has_value()) proto.set_incumbent_plan_revision(latest->plan_revision());
    *proto.mutable_create_time() = ToTimestamp(now);
    *proto.mutable_update_time() = ToTimestamp(clock_.Now());
    op.set_done(done);
    op.set_phase(OperationPhase(proto.phase()));
    op.clear_result();
    op.clear_error();
    if (!done) {
      op.set_progress_percent(proto.phase() == pb::PLAN_PHASE_COMMITTING ? 70 : 40);
    } else {
      op.set_progress_percent(100);
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
    }
    *op.mutable_update_time() = ToTimestamp(clock_.Now());
    return proto;
  };

  if (!result.unplaced.empty()) {
    if (counts != nullptr) counts->unplaced += static_cast<int64_t>(result.unplaced.size());
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
    pb::AssignmentPlan proto = stored(plan, status, /*done=*/true);
    proto.set_phase(pb::PLAN_PHASE_FAILED);
    op.set_phase(OperationPhase(pb::PLAN_PHASE_FAILED));
    SetError(status, proto.mutable_error());
    for (const auto& u : proto.unplaced()) {
      auto* cause = proto.mutable_error()->add_causes();
      cause->set_subject(u.workload());
      cause->set_reason(u.reason());
    }
    if (!request.dry_run) {
      RETURN_IF_ERROR(plans_.Save(&proto, op, request.request_id));
      report_stored(op);
      Published(proto);
    }
    return status;
  }

  if (request.dry_run) {
    plan.phase = PlanPhase::kIdle;
    op.set_id("");  // nothing stored: a dry run has no operation to poll
    stored(plan, absl::OkStatus(), /*done=*/true);
    return op;
  }

  // Deadlines are the caller's (gRPC's), on the wall clock.
  if (absl::Now() >= deadline) {
    return absl::DeadlineExceededError(
        "the caller's deadline passed before the plan ran; nothing was reserved");
  }
  // Execute: reserve in every target cluster, then commit (pods created),
  // the plan written with its phase before each step.
  std::set<std::string> target_clusters;
  for (const WorkloadTarget& t : plan.targets) target_clusters.insert(t.cluster);
  std::vector<std::unique_ptr<ClusterExecutor>> owned;
  std::map<std::string, ClusterExecutor*> executors;
  for (const std::string& name : target_clusters) {
    absl::StatusOr<std::unique_ptr<ClusterExecutor>> e =
        request.executors->ExecutorFor(name, plan, deadline);
    if (!e.ok()) {
      return absl::Status(e.status().code(),
                          absl::StrCat("cluster ", name, ": ", e.status().message()));
    }
    executors[name] = e->get();
    owned.push_back(std::move(*e));
  }
  PlanExecutor executor(executors, options_.reservation_lease);
  executor.SetVirtualLinks(virtual_links_, request.neighborhood_id, deadline);
  executor.SetPhaseObserver([&](const AssignmentPlan& at) {
    pb::AssignmentPlan proto = stored(at, absl::OkStatus(), /*done=*/false);
    RETURN_IF_ERROR(plans_.Save(&proto, op, ""));
    report_stored(op);
    return absl::OkStatus();
  });
  const std::vector<std::string> touched(target_clusters.begin(), target_clusters.end());
  absl::Status executed = executor.Reserve(plan);
  if (executed.ok()) {
    // The channels' bandwidth is held from now on: the next solve must not
    // plan with it.
    absl::MutexLock lock(&mu_);
    ledger_.Hold(stored(plan, absl::OkStatus(), /*done=*/false));
  }
  // The reservations are (or were) in the clusters: the next placement reads
  // them again (no pod changed yet, so the port has nothing to re-read).
  DropCachedViews(touched);
  schedule.Release();
  // The binding cycle, concurrent with other placements: commit and store.
  if (executed.ok()) executed = executor.Commit(plan);
  owned.clear();
  if (!executed.ok()) {
    absl::MutexLock lock(&mu_);
    ledger_.Free(app.name);
  }
  Invalidate(touched);
  pb::AssignmentPlan proto = stored(plan, executed, /*done=*/true);
  // A plan that rolled back holds nothing and does not claim the request_id:
  // the caller's retry with the same id places again (as after Recover's
  // rollback), instead of being answered this attempt's error forever.
  RETURN_IF_ERROR(plans_.Save(&proto, op, executed.ok() ? request.request_id : ""));
  report_stored(op);
  Published(proto);
  log::Info("placed application", {{"application", app.name},
                                   {"plan", proto.id()},
                                   {"phase", pb::PlanPhase_Name(proto.phase())}});
  if (!executed.ok()) return executed;
  if (counts != nullptr) counts->placed += static_cast<int64_t>(plan.targets.size());
  return op;
}

absl::StatusOr<pb::AssignmentPlan> PlacementService::Release(const ReleaseRequest& request,
                                                             absl::Time deadline) {
  if (request.application.empty()) return InvalidFieldError("application", "is required");
  return AsOnlyOperation(request.application, deadline,
                         [&] { return ReleaseAdmitted(request, deadline); });
}

absl::StatusOr<pb::AssignmentPlan> PlacementService::ReleaseAdmitted(const ReleaseRequest& request,
                                                                     absl::Time deadline) {
  const std::string& app = request.application;
  const std::string resource = "applications/" + app;
  if (!request.request_id.empty()) {
    ASSIGN_OR_RETURN(std::optional<Operation> seen, plans_.OperationForRequest(request.request_id));
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
  op.set_request_id(request.request_id);
  *op.mutable_create_time() = ToTimestamp(now);

  pb::AssignmentPlan plan;
  plan.set_application(app);
  if (!latest.has_value() || !HoldsPods(*latest)) {
    // Nothing placed: an empty plan, remembered only for the request_id.
    if (!request.request_id.empty()) {
      op.set_id(absl::StrCat("release/", app, "/request/", request.request_id));
      op.set_done(true);
      op.set_progress_percent(100);
      op.set_phase("Done");
      op.mutable_result()->PackFrom(plan);
      *op.mutable_update_time() = ToTimestamp(clock_.Now());
      RETURN_IF_ERROR(plans_.Save(nullptr, op, request.request_id));
    }
    return plan;
  }
  if (latest->phase() == pb::PLAN_PHASE_RESERVING || latest->phase() == pb::PLAN_PHASE_COMMITTING) {
    return absl::UnavailableError(
        absl::StrCat("plan ", latest->id(), " of application ", app, " was interrupted while ",
                     OperationPhase(latest->phase()), " and is not recovered yet; retry later"));
  }
  if (latest->phase() == pb::PLAN_PHASE_RELEASING) {
    // A removal a crash interrupted: finish that one.
    pb::AssignmentPlan removal = *latest;
    absl::StatusOr<Operation> stored_op = plans_.GetOperation(removal.operation_id());
    if (stored_op.ok()) op = *stored_op;
    op.set_request_id(request.request_id);
    RETURN_IF_ERROR(FinishRemoval(removal, op, request.request_id, deadline));
    return removal;
  }

  const int64_t revision = latest->plan_revision() + 1;
  op.set_id(absl::StrCat("release/", app, "/", revision));
  plan.set_id(absl::StrCat(app, "/", revision));
  plan.set_plan_revision(revision);
  plan.set_spec_revision(latest->spec_revision());
  plan.set_neighborhood_id(latest->neighborhood_id());
  plan.set_operation_id(op.id());
  // A removal after a removal that left pods behind still releases the
  // reservations of the placement those pods came from.
  plan.set_incumbent_plan_revision(PlacedRevision(*latest));
  *plan.mutable_create_time() = ToTimestamp(now);
  *plan.mutable_targets() = latest->targets();
  plan.set_phase(pb::PLAN_PHASE_RELEASING);
  *plan.mutable_update_time() = ToTimestamp(clock_.Now());
  op.set_done(false);
  op.set_phase(OperationPhase(pb::PLAN_PHASE_RELEASING));
  op.set_progress_percent(10);
  *op.mutable_update_time() = ToTimestamp(clock_.Now());
  // Written before any pod is touched: a hub that dies now finishes it later.
  RETURN_IF_ERROR(plans_.Save(&plan, op, ""));
  RETURN_IF_ERROR(FinishRemoval(plan, op, request.request_id, deadline));
  return plan;
}

absl::Status PlacementService::FinishRemoval(pb::AssignmentPlan& plan, Operation& op,
                                             const std::string& request_id, absl::Time deadline) {
  const std::string& app = plan.application();
  // The pods by cluster and the reservation they were created under (a
  // workload moved since the placement has its own).
  std::map<std::pair<std::string, std::string>, std::vector<pb::WorkloadTarget>> by_reservation;
  for (const pb::WorkloadTarget& t : plan.targets()) {
    by_reservation[{t.cluster(), TargetReservation(plan, t)}].push_back(t);
  }
  plan.clear_targets();
  plan.clear_actions();
  std::vector<std::string> failures;
  std::vector<std::string> touched;
  for (const auto& [where, targets] : by_reservation) {
    const auto& [cluster, reservation] = where;
    std::vector<std::string> pods;
    for (const pb::WorkloadTarget& t : targets) pods.push_back(t.pod());
    std::map<std::string, absl::Status> removed =
        members_.RemovePods(cluster, reservation, pods, "ReleaseApplication of " + app, deadline);
    touched.push_back(cluster);
    for (const pb::WorkloadTarget& t : targets) {
      pb::PlanAction* action = plan.add_actions();
      action->set_index(plan.actions_size() - 1);
      action->set_type(pb::ACTION_TYPE_DELETE_POD);
      action->set_cluster(cluster);
      action->set_workload(t.workload());
      action->set_node(t.node());
      action->set_pod(t.pod());
      *action->mutable_update_time() = ToTimestamp(clock_.Now());
      auto it = removed.find(t.pod());
      absl::Status st = it == removed.end()
                            ? absl::UnknownError("the cluster did not report the pod")
                            : it->second;
      if (st.ok()) {
        action->set_result(pb::ACTION_RESULT_SUCCEEDED);
      } else if (absl::IsNotFound(st)) {
        action->set_result(pb::ACTION_RESULT_SKIPPED);  // already gone
      } else {
        action->set_result(pb::ACTION_RESULT_FAILED);
        SetError(st, action->mutable_error());
        failures.push_back(absl::StrCat(t.pod(), " in ", cluster, ": ", st.message()));
        *plan.add_targets() = t;  // still there
      }
    }
  }
  Invalidate(touched);
  // The channels' virtual links go with the pods. One that cannot be deleted
  // now does not fail the removal: it serves nothing any more, and the
  // reconciler deletes links no placed plan holds.
  for (const std::string& left : DeleteVirtualLinks(app, &plan, deadline)) {
    log::Warn("virtual link left for the reconciler", {{"application", app}, {"error", left}});
  }
  absl::Status status = absl::OkStatus();
  plan.clear_error();
  {
    // A removal gives the links back even when some pods are left (they are
    // on their way out; a restarted hub, which rebuilds the ledger from DONE
    // placements only, would not count them either).
    absl::MutexLock lock(&mu_);
    ledger_.Free(app);
  }
  if (failures.empty()) {
    plan.set_phase(pb::PLAN_PHASE_DONE);
  } else {
    plan.set_phase(pb::PLAN_PHASE_FAILED);
    status = absl::UnavailableError(absl::StrCat(
        "could not delete ", failures.size(), " pod(s) of application ", app, ": ",
        absl::StrJoin(failures, "; "), "; the plan lists them; call ReleaseApplication again"));
    SetError(status, plan.mutable_error());
  }
  *plan.mutable_update_time() = ToTimestamp(clock_.Now());
  op.set_done(true);
  op.set_progress_percent(100);
  op.clear_result();
  op.clear_error();
  op.set_phase(failures.empty() ? "Done" : "Failed");
  if (failures.empty()) {
    op.mutable_result()->PackFrom(plan);
  } else {
    SetError(status, op.mutable_error());
  }
  *op.mutable_update_time() = ToTimestamp(clock_.Now());
  // A failed removal does not claim the request_id: the same one retries it.
  RETURN_IF_ERROR(plans_.Save(&plan, op, failures.empty() ? request_id : ""));
  Published(plan);
  log::Info(
      "released application",
      {{"application", app}, {"plan", plan.id()}, {"phase", pb::PlanPhase_Name(plan.phase())}});
  return status;
}

absl::StatusOr<Operation> PlacementService::Migrate(const MigrateRequest& request,
                                                    absl::Time deadline) {
  return AsOnlyOperation(request.app.name, deadline,
                         [&] { return MigrateAdmitted(request, deadline); });
}

absl::StatusOr<pb::LocalDecisionVerdict> PlacementService::AdoptLocalMove(
    const pb::LocalDecision& decision, absl::Time deadline) {
  FieldErrors errors;
  const std::pair<const char*, const std::string*> required[] = {
      {"application", &decision.application()},
      {"workload", &decision.workload()},
      {"cluster", &decision.cluster()},
      {"pod", &decision.pod()},
      {"to_node", &decision.to_node()}};
  for (const auto& [field, value] : required) {
    if (value->empty()) errors.Add(field, "is required");
  }
  RETURN_IF_ERROR(errors.ToStatus());
  return AsOnlyOperation(
      decision.application(), deadline, [&]() -> absl::StatusOr<pb::LocalDecisionVerdict> {
        pb::LocalDecisionVerdict verdict;
        verdict.set_id(decision.id());
        auto settle = [&](pb::LocalDecisionState state, std::string note) {
          verdict.set_state(state);
          verdict.set_note(std::move(note));
          return verdict;
        };
        const std::string& app = decision.application();
        ASSIGN_OR_RETURN(std::optional<pb::AssignmentPlan> latest, plans_.Latest(app));
        if (!latest.has_value() || latest->phase() != pb::PLAN_PHASE_DONE || IsRemoval(*latest)) {
          return settle(pb::LOCAL_DECISION_STATE_UNDONE,
                        absl::StrCat("the hub no longer places application ", app));
        }
        ASSIGN_OR_RETURN(std::vector<pb::Migration> active, plans_.ActiveMigrations());
        for (const pb::Migration& m : active) {
          if (m.application() == app && m.workload() == decision.workload()) {
            return absl::UnavailableError(absl::StrCat("migration ", m.id(), " of workload ",
                                                       decision.workload(),
                                                       " is in flight; settled once it ends"));
          }
        }
        const pb::WorkloadTarget* target = nullptr;
        for (const pb::WorkloadTarget& t : latest->targets()) {
          if (t.workload() == decision.workload()) target = &t;
        }
        if (target == nullptr) {
          return settle(pb::LOCAL_DECISION_STATE_UNDONE,
                        absl::StrCat("plan ", latest->id(), " no longer runs workload ",
                                     decision.workload()));
        }
        const std::string reservation = TargetReservation(*latest, *target);
        if (target->cluster() != decision.cluster() || target->pod() != decision.pod() ||
            reservation != decision.reservation()) {
          return settle(pb::LOCAL_DECISION_STATE_UNDONE,
                        absl::StrCat("plan ", latest->id(), " runs workload ", decision.workload(),
                                     " as pod ", target->pod(), " on ", target->cluster(), "/",
                                     target->node(), " (the hub moved it while ",
                                     decision.cluster(), " was away); the hub's recovery removes ",
                                     decision.cluster(), "'s pod ", decision.pod()));
        }
        if (target->node() == decision.to_node()) {
          return settle(pb::LOCAL_DECISION_STATE_ADOPTED,
                        absl::StrCat("plan ", latest->id(), " runs it on ", decision.to_node()));
        }
        ASSIGN_OR_RETURN(std::optional<pb::Migration> newest, plans_.NewestMigration(app));
        const int64_t number = newest.has_value() ? MigrationNumber(newest->id()) + 1 : 1;
        const int64_t revision = latest->plan_revision() + 1;
        const absl::Time now = clock_.Now();

        pb::Migration migration;
        migration.set_id(absl::StrCat(app, "/", number));
        migration.set_application(app);
        migration.set_workload(decision.workload());
        migration.set_reason(pb::MIGRATION_REASON_LOCAL_RESCHEDULE);
        *migration.mutable_source() = *target;
        migration.mutable_source()->set_reservation(reservation);
        *migration.mutable_target() = migration.source();
        migration.mutable_target()->set_node(decision.to_node());
        *migration.mutable_create_time() = decision.decide_time();
        Operation op;
        op.set_id("migrate/" + migration.id());
        op.set_kind(kMigrateKind);
        op.set_resource("applications/" + app);
        *op.mutable_create_time() = ToTimestamp(now);
        migration.set_operation_id(op.id());

        pb::AssignmentPlan next = *latest;
        next.set_id(absl::StrCat(app, "/", revision));
        next.set_plan_revision(revision);
        next.set_incumbent_plan_revision(latest->plan_revision());
        next.set_operation_id(op.id());
        next.clear_error();
        *next.mutable_create_time() = ToTimestamp(now);
        *next.mutable_update_time() = ToTimestamp(now);
        for (pb::WorkloadTarget& t : *next.mutable_targets()) {
          // Each target keeps the reservation it was created under.
          if (t.reservation().empty()) t.set_reservation(TargetReservation(*latest, t));
          if (t.workload() == decision.workload()) t.set_node(decision.to_node());
        }
        next.clear_actions();
        pb::PlanAction* moved = next.add_actions();
        moved->set_index(0);
        moved->set_type(pb::ACTION_TYPE_MIGRATE);
        moved->set_cluster(decision.cluster());
        moved->set_workload(decision.workload());
        moved->set_node(decision.to_node());
        moved->set_pod(decision.pod());
        moved->set_source_cluster(decision.cluster());
        moved->set_source_node(decision.from_node());
        moved->set_result(pb::ACTION_RESULT_SUCCEEDED);
        *moved->mutable_update_time() = decision.decide_time();
        RETURN_IF_ERROR(
            StoreMigration(migration, op, pb::MIGRATION_PHASE_DONE, absl::OkStatus(), &next, ""));
        {
          absl::MutexLock lock(&mu_);
          ledger_.Hold(next);
        }
        Published(next);
        log::Info("adopted a member's local decision", {{"decision", decision.id()},
                                                        {"migration", migration.id()},
                                                        {"plan", next.id()},
                                                        {"node", decision.to_node()}});
        return settle(pb::LOCAL_DECISION_STATE_ADOPTED,
                      absl::StrCat("adopted as migration ", migration.id(), ": plan ", next.id(),
                                   " runs it on ", decision.to_node()));
      });
}

absl::StatusOr<Operation> PlacementService::MigrateAdmitted(const MigrateRequest& request,
                                                            absl::Time deadline) {
  const Application& app = request.app;
  const std::string resource = "applications/" + app.name;
  ASSIGN_OR_RETURN(std::optional<Operation> seen,
                   AnswerSeen(plans_, request.request_id, resource, kMigrateKind));
  if (seen.has_value()) return *seen;
  if (request.executors == nullptr) {
    return absl::InvalidArgumentError("a migration needs its executors");
  }
  if (request.workload.empty()) return InvalidFieldError("workload", "is required");
  if (!request.target_node.empty() && request.target_cluster.empty()) {
    return InvalidFieldError("target_node", "needs target_cluster (the node's cluster)");
  }
  if (!request.target_cluster.empty() &&
      std::none_of(request.members.begin(), request.members.end(),
                   [&](const MemberRef& m) { return m.cluster == request.target_cluster; })) {
    return InvalidFieldError("target_cluster",
                             absl::StrCat("\"", request.target_cluster,
                                          "\" is not a member of the neighborhood of application ",
                                          app.name));
  }
  ASSIGN_OR_RETURN(std::optional<pb::AssignmentPlan> latest, plans_.Latest(app.name));
  if (!latest.has_value() || latest->phase() != pb::PLAN_PHASE_DONE ||
      latest->targets().empty() || IsRemoval(*latest)) {
    return absl::FailedPreconditionError(
        absl::StrCat("application ", app.name, " is not placed",
                     latest.has_value() ? absl::StrCat(" (its newest plan ", latest->id(), " is ",
                                                       pb::PlanPhase_Name(latest->phase()),
                                                       IsRemoval(*latest) ? ", a removal" : "", ")")
                                        : "",
                     "; only a placed workload can move"));
  }
  if (request.reason == pb::MIGRATION_REASON_SCALE_DOWN) {
    return InvalidFieldError("reason", "SCALE_DOWN removes a replica (Scale), it moves nothing");
  }
  // A replica Scale adds has no source: the plan does not hold it yet.
  const bool scale_up = request.reason == pb::MIGRATION_REASON_SCALE_UP;
  const pb::WorkloadTarget* source = nullptr;
  for (const pb::WorkloadTarget& t : latest->targets()) {
    if (t.workload() == request.workload) source = &t;
  }
  if (scale_up && (source != nullptr || app.WorkloadIndex(request.workload) < 0)) {
    return InvalidFieldError(
        "workload",
        absl::StrCat("application ", app.name,
                     source != nullptr ? " already runs workload \"" : " names no workload \"",
                     request.workload, "\" to add"));
  }
  if (!scale_up && (source == nullptr || app.WorkloadIndex(request.workload) < 0)) {
    return InvalidFieldError("workload", absl::StrCat("application ", app.name,
                                                      " has no placed workload \"",
                                                      request.workload, "\""));
  }
  if (source != nullptr && request.target_cluster == source->cluster() &&
      request.target_node == source->node()) {
    return InvalidFieldError("target_node",
                             absl::StrCat("workload ", request.workload, " already runs on node ",
                                          source->node(), " of cluster ", source->cluster()));
  }
  ASSIGN_OR_RETURN(std::vector<pb::Migration> active, plans_.ActiveMigrations());
  for (const pb::Migration& m : active) {
    // One CUTTING_OVER has written its plan (only its source is left to
    // remove, maybe in a cluster that is away): the next move starts from it.
    if (m.application() == app.name && m.phase() != pb::MIGRATION_PHASE_CUTTING_OVER) {
      return absl::UnavailableError(absl::StrCat(
          "migration ", m.id(), " of application ", app.name, " was interrupted while ",
          MigrationOperationPhase(m.phase()), " and is not recovered yet; retry later"));
    }
  }
  ASSIGN_OR_RETURN(std::optional<pb::Migration> newest, plans_.NewestMigration(app.name));
  const int64_t number = newest.has_value() ? MigrationNumber(newest->id()) + 1 : 1;

  const absl::Time now = clock_.Now();
  pb::Migration migration;
  migration.set_id(absl::StrCat(app.name, "/", number));
  migration.set_application(app.name);
  migration.set_workload(request.workload);
  migration.set_reason(request.reason);
  migration.set_phase(pb::MIGRATION_PHASE_PENDING);
  if (source != nullptr) {
    *migration.mutable_source() = *source;
    migration.mutable_source()->set_reservation(TargetReservation(*latest, *source));
  }
  *migration.mutable_create_time() = ToTimestamp(now);
  Operation op;
  op.set_id(request.operation_id.empty() ? "migrate/" + migration.id() : request.operation_id);
  op.set_kind(kMigrateKind);
  op.set_resource(resource);
  op.set_request_id(request.request_id);
  *op.mutable_create_time() = ToTimestamp(now);
  migration.set_operation_id(op.id());
  // Stores the migration in `phase` with `plan` (if not null); a final
  // phase ends the operation with `status` (OK: the migration is its result).
  auto save = [&](pb::MigrationPhase phase, const absl::Status& status,
                  const pb::AssignmentPlan* plan, const std::string& request_id) {
    return StoreMigration(migration, op, phase, status, plan, request_id);
  };

  // A stateful workload moves with its state or not at all: read live from
  // its source, or, when its node or cluster failed, restored from the
  // newest backup of that pod (state_backups.h). An added replica has no
  // state to bring: it starts empty.
  const bool stateful =
      source != nullptr && app.workloads[app.WorkloadIndex(request.workload)].stateful;
  std::map<std::string, std::string> checkpointer_of;  // cluster -> host:port
  if (stateful) {
    const bool source_lost = request.reason == pb::MIGRATION_REASON_NODE_FAILURE ||
                             request.reason == pb::MIGRATION_REASON_CLUSTER_FAILURE;
    absl::Status refused = absl::OkStatus();
    if (state_mover_ == nullptr) {
      refused = absl::FailedPreconditionError(absl::StrCat(
          "workload ", request.workload, " is stateful and this hub reaches no checkpointer: ",
          "a move would lose its state, so it stays on ", source->cluster(), "/",
          source->node()));
    } else if (source_lost) {
      ASSIGN_OR_RETURN(std::optional<pb::StateBackupRecord> backups,
                       plans_.StateBackupOf(app.name, request.workload));
      if (backups.has_value() && backups->has_latest() &&
          backups->latest().source().pod() == source->pod()) {
        *migration.mutable_restored_backup() = backups->latest();
      } else {
        refused = absl::FailedPreconditionError(absl::StrCat(
            "workload ", request.workload, " is stateful and ",
            request.reason == pb::MIGRATION_REASON_CLUSTER_FAILURE
                ? "its cluster " + source->cluster() + " does not answer"
                : "its node " + source->node() + " of cluster " + source->cluster() + " failed",
            ": its state cannot be read and no backup of pod ", source->pod(),
            " was taken yet (the hub takes one every swm.state_backup_interval), so it stays "
            "until its ",
            request.reason == pb::MIGRATION_REASON_CLUSTER_FAILURE ? "cluster" : "node",
            " answers"));
      }
    }
    if (!refused.ok()) {
      RETURN_IF_ERROR(save(pb::MIGRATION_PHASE_FAILED, refused, nullptr, request.request_id));
      log::Info("migration refused", {{"migration", migration.id()},
                                      {"error", std::string(refused.message())}});
      return refused;
    }
    for (const MemberRef& m : request.members) {
      auto it = m.endpoints.find("checkpointer");
      if (it != m.endpoints.end()) checkpointer_of[m.cluster] = it->second;
    }
  }

  // The scheduling cycle, as for a placement: read, solve, reserve.
  absl::ReleasableMutexLock schedule(&schedule_mu_);
  Federation federation;
  std::vector<std::string> neighborhood;
  std::vector<std::string> unreachable;
  RETURN_IF_ERROR(
      BuildFederation(request.members, deadline, federation, neighborhood, unreachable));
  // Never back onto the node it leaves.
  if (Cluster* c = source != nullptr ? federation.MutableCluster(source->cluster()) : nullptr;
      c != nullptr) {
    if (int i = c->NodeIndex(source->node()); i >= 0) c->nodes[i].schedulable = false;
  }
  std::vector<std::string> solve_over = neighborhood;
  if (request.reason == pb::MIGRATION_REASON_CLUSTER_FAILURE) {
    // Its cluster failed: none of its nodes (a view of a cut member may
    // still be read from a stale copy).
    solve_over.erase(std::remove(solve_over.begin(), solve_over.end(), source->cluster()),
                     solve_over.end());
  }
  if (!request.target_cluster.empty()) {
    Cluster* target = federation.MutableCluster(request.target_cluster);
    if (target == nullptr) {
      return absl::UnavailableError(absl::StrCat("target cluster ", request.target_cluster,
                                                 " does not answer: ",
                                                 absl::StrJoin(unreachable, ", ")));
    }
    if (!request.target_node.empty()) {
      if (target->NodeIndex(request.target_node) < 0) {
        return InvalidFieldError("target_node", absl::StrCat("cluster ", request.target_cluster,
                                                             " has no node \"",
                                                             request.target_node, "\""));
      }
      for (Node& n : target->nodes) n.schedulable = n.schedulable && n.name == request.target_node;
    }
    solve_over = {request.target_cluster};
  }
  // The incumbent: every other workload stays where it runs (the views
  // count its pod already). Peers in a cluster that does not answer are
  // left out: channels to them cannot be checked now; so are the peers in a
  // failed cluster, which leave it too (each move checks its channels
  // against those already moved).
  const bool cluster_failed = request.reason == pb::MIGRATION_REASON_CLUSTER_FAILURE;
  std::map<std::string, Placement> pinned;
  std::map<std::string, std::string> pod_of;
  for (const pb::WorkloadTarget& t : latest->targets()) {
    pod_of[t.workload()] = t.pod();
    if (t.workload() == request.workload) continue;
    if (cluster_failed && t.cluster() == source->cluster()) continue;
    const Cluster* c = federation.FindCluster(t.cluster());
    if (c != nullptr && c->NodeIndex(t.node()) >= 0) pinned[t.workload()] = {t.cluster(), t.node()};
  }
  // Only what runs and the workload itself are solved: a replica the plan
  // does not hold yet (Scale adds them one by one) is neither placed here
  // nor a channel's peer.
  const Application considered = RunningAnd(app, *latest, request.workload);
  ASSIGN_OR_RETURN(const Application solved, ResolveDataLocality(considered, federation));
  std::unique_ptr<L2Solver> l2 = members_.SolverFor(neighborhood, local_l2_);
  Coordinator coordinator(*l2, registry_, options_.recommendations, options_.coordinator);
  ASSIGN_OR_RETURN(PlacementResult result,
                   coordinator.Place(solved, federation, solve_over, pinned));
  auto placed = result.placements.find(request.workload);
  if (placed == result.placements.end()) {
    auto why = result.unplaced.find(request.workload);
    absl::Status refused = absl::FailedPreconditionError(absl::StrCat(
        "no node can take workload ", request.workload, " of application ", app.name, ": ",
        why == result.unplaced.end() ? "no candidate" : why->second,
        unreachable.empty()
            ? ""
            : "; left out because their LMS does not answer: " + absl::StrJoin(unreachable, ", ")));
    RETURN_IF_ERROR(save(pb::MIGRATION_PHASE_FAILED, refused, nullptr, request.request_id));
    log::Info("migration refused", {{"migration", migration.id()},
                                    {"error", std::string(refused.message())}});
    return refused;
  }

  // The move: one pod under a reservation of its own, and the channels that
  // touch the workload, each towards where its peer runs.
  const int64_t revision = latest->plan_revision() + 1;
  pod_of[request.workload] = MigratedPodName(app.name, request.workload, revision);
  AssignmentPlan full = BuildPlan(considered, result, revision);
  AssignmentPlan move{.application = app.name, .revision = revision, .phase = PlanPhase::kPlacing};
  std::set<std::string> moved_channels;
  for (WorkloadTarget& t : full.targets) {
    if (t.workload != request.workload) continue;
    t.pod = pod_of[t.workload];
    move.actions.push_back(PlanAction{.type = ActionType::kCreatePod,
                                      .cluster = t.cluster,
                                      .workload = t.workload,
                                      .node = t.node,
                                      .pod = t.pod});
    move.targets.push_back(t);
  }
  std::map<std::string, const Channel*> channel_specs;
  for (const Channel& c : considered.channels) channel_specs[c.name] = &c;
  for (ChannelResult& ch : full.channels) {
    const Channel& spec = *channel_specs.at(ch.channel);
    if (spec.from != request.workload && spec.to != request.workload) continue;
    ch.target_endpoint =
        ChannelEndpoint(pod_of[spec.to], result.placements.at(spec.to).cluster, spec.to_port);
    moved_channels.insert(ch.channel);
    move.actions.push_back(PlanAction{.index = static_cast<int>(move.actions.size()),
                                      .type = ActionType::kCreateChannel,
                                      .cluster = ch.path.front(),
                                      .channel = ch.channel});
    move.channels.push_back(ch);
  }
  const WorkloadTarget& to = move.targets.front();
  pb::WorkloadTarget* target = migration.mutable_target();
  target->set_workload(to.workload);
  target->set_service(to.service);
  target->set_cluster(to.cluster);
  target->set_node(to.node);
  target->set_pod(to.pod);
  target->set_reservation(ReservationId(move, to.cluster));

  if (absl::Now() >= deadline) {
    return absl::DeadlineExceededError(
        "the caller's deadline passed before the move ran; nothing was reserved");
  }
  absl::StatusOr<std::unique_ptr<ClusterExecutor>> cluster_executor =
      request.executors->ExecutorFor(to.cluster, move, deadline);
  if (!cluster_executor.ok()) {
    return absl::Status(cluster_executor.status().code(),
                        absl::StrCat("cluster ", to.cluster, ": ",
                                     cluster_executor.status().message()));
  }
  PlanExecutor executor({{to.cluster, cluster_executor->get()}}, options_.reservation_lease);
  executor.SetVirtualLinks(virtual_links_, request.neighborhood_id, deadline);
  executor.SetPhaseObserver([&](const AssignmentPlan& at) {
    return save(at.phase == PlanPhase::kReserving ? pb::MIGRATION_PHASE_RESERVING
                                                  : pb::MIGRATION_PHASE_RESTORING,
                absl::OkStatus(), nullptr, "");
  });
  absl::Status executed = executor.Reserve(move);
  DropCachedViews({to.cluster});
  schedule.Release();
  if (executed.ok()) executed = executor.Commit(move);
  cluster_executor->reset();
  if (!executed.ok()) {
    // The executor released the target and its links: the workload stays.
    Invalidate({to.cluster});
    RETURN_IF_ERROR(save(pb::MIGRATION_PHASE_ROLLED_BACK, executed, nullptr, ""));
    log::Info("migration rolled back", {{"migration", migration.id()},
                                        {"error", std::string(executed.message())}});
    return executed;
  }

  // The new pod runs: the new plan revision holds it, written with the
  // migration CUTTING_OVER before the source is touched.
  pb::AssignmentPlan moved_proto = ToProtoPlan(move, considered, result);
  pb::AssignmentPlan next = *latest;
  if (request.spec_revision > 0) next.set_spec_revision(request.spec_revision);
  next.set_id(absl::StrCat(app.name, "/", revision));
  next.set_plan_revision(revision);
  next.set_incumbent_plan_revision(latest->plan_revision());
  next.set_operation_id(op.id());
  next.set_phase(pb::PLAN_PHASE_DONE);
  next.clear_error();
  next.clear_unplaced();
  *next.mutable_create_time() = ToTimestamp(now);
  *next.mutable_update_time() = ToTimestamp(clock_.Now());
  for (pb::WorkloadTarget& t : *next.mutable_targets()) {
    if (t.workload() == request.workload) {
      const int64_t gateway = t.gateway_latency_ns();
      t = *target;
      t.set_gateway_latency_ns(gateway);
    } else if (t.reservation().empty()) {
      t.set_reservation(TargetReservation(*latest, t));
    }
  }
  if (source == nullptr) {
    pb::WorkloadTarget* added = next.add_targets();
    *added = *target;
    for (const pb::WorkloadTarget& t : moved_proto.targets()) {
      if (t.workload() == request.workload) added->set_gateway_latency_ns(t.gateway_latency_ns());
    }
  }
  // The channels that touch the workload: replaced where they ran, added
  // for a new replica.
  for (const pb::ChannelPath& now_path : moved_proto.channels()) {
    auto same =
        std::find_if(next.mutable_channels()->begin(), next.mutable_channels()->end(),
                     [&](const pb::ChannelPath& c) { return c.channel() == now_path.channel(); });
    if (same != next.mutable_channels()->end()) {
      *same = now_path;
    } else {
      *next.add_channels() = now_path;
    }
  }
  *next.mutable_actions() = moved_proto.actions();
  if (source != nullptr) {
    pb::PlanAction* remove_source = next.add_actions();
    remove_source->set_index(next.actions_size() - 1);
    remove_source->set_type(pb::ACTION_TYPE_DELETE_POD);
    remove_source->set_cluster(source->cluster());
    remove_source->set_workload(source->workload());
    remove_source->set_node(source->node());
    remove_source->set_pod(source->pod());
    remove_source->set_result(pb::ACTION_RESULT_PENDING);
  }
  // Out of a failed cluster the source is not asked now (that would only
  // wait out the deadline, one workload after another): Recover removes it
  // once the cluster answers.
  const absl::Status source_left =
      cluster_failed ? absl::UnavailableError(absl::StrCat(
                           "the workload runs at the target; its source pod ", source->pod(),
                           " stays in ", source->cluster(),
                           ", which failed, until it answers again (the hub's recovery removes "
                           "it then)"))
                     : absl::OkStatus();
  if (stateful) {
    // The target pod runs empty: the state follows before the plan moves.
    // The checkpointer that runs it: the target's for a backup, else the source's.
    const std::string& runs_at =
        migration.has_restored_backup() ? to.cluster : source->cluster();
    const StateMoveProgress moved =
        MoveState(migration, op, next, checkpointer_of[runs_at], deadline);
    if (!moved.done) {
      // Started, or maybe: the checkpointer may still be moving it, so the
      // target stays; the hub's recovery follows the move to its end.
      Invalidate({to.cluster});
      return absl::DeadlineExceededError(absl::StrCat(
          "migration ", migration.id(), " is moving the state of ", request.workload, " (",
          moved.phase, "); the hub's recovery finishes or rolls it back"));
    }
    const absl::Status& state = moved.status;
    if (!state.ok()) {
      // The checkpointer gave up before its cut-over: the source serves on.
      const absl::Status failed(state.code(),
                                absl::StrCat("moving the state of ", request.workload, ": ",
                                             state.message(), "; it stays where it ran"));
      std::string why;
      if (!RemoveTarget(migration, "migration " + migration.id() + " could not move the state",
                        deadline, why)) {
        // Left CHECKPOINTING: the recovery removes the target.
        return absl::Status(failed.code(), absl::StrCat(failed.message(), "; ", why));
      }
      Invalidate({to.cluster});
      migration.clear_next_plan();
      RETURN_IF_ERROR(save(pb::MIGRATION_PHASE_ROLLED_BACK, failed, nullptr, ""));
      log::Info("migration rolled back", {{"migration", migration.id()},
                                          {"error", std::string(failed.message())}});
      return failed;
    }
  }
  RETURN_IF_ERROR(CutOver(migration, op, next, source_left, request.request_id, deadline));
  Invalidate({to.cluster});
  log::Info(scale_up ? "added a replica" : "migrated a workload",
            {{"migration", migration.id()},
             {"from", source != nullptr ? source->cluster() + "/" + source->node() : "-"},
             {"to", to.cluster + "/" + to.node},
             {"phase", MigrationOperationPhase(migration.phase())}});
  return op;
}

Operation PlacementService::NewOperation(const std::string& caller_id,
                                         const std::string& default_id, const std::string& kind,
                                         const std::string& resource,
                                         const std::string& request_id, absl::Time now) const {
  Operation op;
  op.set_id(caller_id.empty() ? default_id : caller_id);
  op.set_kind(kind);
  op.set_resource(resource);
  op.set_request_id(request_id);
  *op.mutable_create_time() = ToTimestamp(now);
  if (!caller_id.empty()) {
    // An operation the caller stored before the work began keeps its creation time.
    absl::StatusOr<Operation> accepted = plans_.GetOperation(caller_id);
    if (accepted.ok()) *op.mutable_create_time() = accepted->create_time();
  }
  return op;
}

absl::StatusOr<Operation> PlacementService::Scale(const ScaleRequest& request,
                                                  absl::Time deadline) {
  return AsOnlyOperation(request.app.name, deadline,
                         [&] { return ScaleAdmitted(request, deadline); });
}

absl::StatusOr<Operation> PlacementService::ScaleAdmitted(const ScaleRequest& request,
                                                          absl::Time deadline) {
  const Application& app = request.app;
  const std::string resource = "applications/" + app.name;
  ASSIGN_OR_RETURN(std::optional<Operation> seen,
                   AnswerSeen(plans_, request.request_id, resource, kPlaceKind));
  if (seen.has_value()) return *seen;
  if (request.executors == nullptr) {
    return absl::InvalidArgumentError("a scale needs its executors");
  }
  ASSIGN_OR_RETURN(std::optional<pb::AssignmentPlan> latest, plans_.Latest(app.name));
  if (!latest.has_value() || latest->phase() != pb::PLAN_PHASE_DONE || latest->targets().empty() ||
      IsRemoval(*latest)) {
    return absl::FailedPreconditionError(absl::StrCat("application ", app.name,
                                                      " is not placed; only a placed application "
                                                      "scales in place"));
  }
  // Removed first (they free room), the highest plan position first.
  std::vector<std::string> removed;
  std::set<std::string> running;
  for (auto t = latest->targets().rbegin(); t != latest->targets().rend(); ++t) {
    running.insert(t->workload());
    if (app.WorkloadIndex(t->workload()) < 0) removed.push_back(t->workload());
  }
  std::vector<std::string> added;
  for (const Workload& w : app.workloads) {
    if (!running.count(w.name)) added.push_back(w.name);
  }

  Operation op = NewOperation(request.operation_id,
                              absl::StrCat("scale/", app.name, "/", latest->plan_revision() + 1),
                              kPlaceKind, resource, request.request_id, clock_.Now());
  op.set_phase("SCALING");
  op.set_progress_percent(10);
  *op.mutable_update_time() = ToTimestamp(clock_.Now());
  RETURN_IF_ERROR(plans_.Save(nullptr, op, ""));

  // Each step writes its own plan revision and migration record; a step
  // that fails leaves the plan as the steps before it wrote it.
  absl::Status failed = absl::OkStatus();
  std::vector<std::pair<std::string, std::string>> unplaced;  // workload, why
  for (const std::string& workload : removed) {
    ASSIGN_OR_RETURN(latest, plans_.Latest(app.name));
    if (!latest.has_value()) return absl::InternalError("the plan vanished while scaling");
    absl::Status gone = RemoveReplica(*latest, workload, request.spec_revision, deadline);
    if (!gone.ok()) {
      failed = gone;
      break;
    }
  }
  for (size_t i = 0; failed.ok() && i < added.size(); ++i) {
    MigrateRequest add{.app = app,
                       .members = request.members,
                       .neighborhood_id = request.neighborhood_id,
                       .workload = added[i],
                       .reason = pb::MIGRATION_REASON_SCALE_UP,
                       .executors = request.executors,
                       .spec_revision = request.spec_revision};
    absl::StatusOr<Operation> step = MigrateAdmitted(add, deadline);
    if (step.ok() && step->has_error() && step->error().code() != 0) {
      step = StatusFromError(step->error());
    }
    if (absl::IsFailedPrecondition(step.status())) {
      // No room for it: the others may still fit.
      unplaced.emplace_back(added[i], std::string(step.status().message()));
    } else if (!step.ok()) {
      failed = step.status();
    }
  }

  // The newest plan carries the spec revision even when no step changed it.
  ASSIGN_OR_RETURN(latest, plans_.Latest(app.name));
  if (!latest.has_value()) return absl::InternalError("the plan vanished while scaling");
  pb::AssignmentPlan plan = *latest;
  if (plan.spec_revision() != request.spec_revision) {
    plan.set_id(absl::StrCat(app.name, "/", latest->plan_revision() + 1));
    plan.set_plan_revision(latest->plan_revision() + 1);
    plan.set_incumbent_plan_revision(latest->plan_revision());
    plan.set_spec_revision(request.spec_revision);
    plan.set_operation_id(op.id());
    plan.clear_actions();
    for (pb::WorkloadTarget& t : *plan.mutable_targets()) {
      t.set_reservation(TargetReservation(*latest, t));
    }
    *plan.mutable_create_time() = ToTimestamp(clock_.Now());
    *plan.mutable_update_time() = ToTimestamp(clock_.Now());
  }
  plan.clear_unplaced();
  for (const auto& [workload, why] : unplaced) {
    pb::UnplacedWorkload* u = plan.add_unplaced();
    u->set_workload(workload);
    u->set_reason(why);
  }
  op.set_done(true);
  op.set_progress_percent(100);
  op.clear_result();
  op.clear_error();
  op.set_phase(failed.ok() ? "DONE" : "FAILED");
  if (failed.ok()) {
    op.mutable_result()->PackFrom(plan);
  } else {
    SetError(failed, op.mutable_error());
  }
  *op.mutable_update_time() = ToTimestamp(clock_.Now());
  // A new revision only carries the spec revision; one a step wrote is
  // stored already (with unplaced, it is the operation's to tell).
  const bool new_revision = plan.plan_revision() != latest->plan_revision();
  RETURN_IF_ERROR(
      plans_.Save(new_revision ? &plan : nullptr, op, failed.ok() ? request.request_id : ""));
  if (new_revision) Published(plan);
  log::Info("scaled in place", {{"application", app.name},
                                {"removed", absl::StrJoin(removed, ",")},
                                {"added", absl::StrJoin(added, ",")},
                                {"plan", plan.id()},
                                {"status", failed.ok() ? "OK" : std::string(failed.message())}});
  if (!failed.ok()) return failed;
  return op;
}

absl::Status PlacementService::RemoveReplica(const pb::AssignmentPlan& latest,
                                             const std::string& workload, int64_t spec_revision,
                                             absl::Time deadline) {
  const std::string& app = latest.application();
  auto source = std::find_if(latest.targets().begin(), latest.targets().end(),
                             [&](const pb::WorkloadTarget& t) { return t.workload() == workload; });
  if (source == latest.targets().end()) return absl::OkStatus();  // gone already
  ASSIGN_OR_RETURN(std::optional<pb::Migration> newest, plans_.NewestMigration(app));
  const int64_t number = newest.has_value() ? MigrationNumber(newest->id()) + 1 : 1;
  const absl::Time now = clock_.Now();
  pb::Migration migration;
  migration.set_id(absl::StrCat(app, "/", number));
  migration.set_application(app);
  migration.set_workload(workload);
  migration.set_reason(pb::MIGRATION_REASON_SCALE_DOWN);
  migration.set_phase(pb::MIGRATION_PHASE_PENDING);
  *migration.mutable_source() = *source;
  migration.mutable_source()->set_reservation(TargetReservation(latest, *source));
  *migration.mutable_create_time() = ToTimestamp(now);
  Operation op;
  op.set_id("migrate/" + migration.id());
  op.set_kind(kMigrateKind);
  op.set_resource("applications/" + app);
  *op.mutable_create_time() = ToTimestamp(now);
  migration.set_operation_id(op.id());

  // The plan without the replica and its channels.
  const int64_t revision = latest.plan_revision() + 1;
  pb::AssignmentPlan next = latest;
  next.set_id(absl::StrCat(app, "/", revision));
  next.set_plan_revision(revision);
  next.set_incumbent_plan_revision(latest.plan_revision());
  next.set_spec_revision(spec_revision);
  next.set_operation_id(op.id());
  next.set_phase(pb::PLAN_PHASE_DONE);
  next.clear_error();
  next.clear_unplaced();
  next.clear_actions();
  *next.mutable_create_time() = ToTimestamp(now);
  next.clear_targets();
  for (const pb::WorkloadTarget& t : latest.targets()) {
    if (t.workload() == workload) continue;
    pb::WorkloadTarget* kept = next.add_targets();
    *kept = t;
    kept->set_reservation(TargetReservation(latest, t));
  }
  next.clear_channels();
  for (const pb::ChannelPath& c : latest.channels()) {
    if (c.from_workload() != workload && c.to_workload() != workload) *next.add_channels() = c;
  }
  pb::PlanAction* remove = next.add_actions();
  remove->set_type(pb::ACTION_TYPE_DELETE_POD);
  remove->set_cluster(source->cluster());
  remove->set_workload(workload);
  remove->set_node(source->node());
  remove->set_pod(source->pod());
  remove->set_result(pb::ACTION_RESULT_PENDING);
  RETURN_IF_ERROR(CutOver(migration, op, next, absl::OkStatus(), "", deadline));
  log::Info("removed a replica", {{"migration", migration.id()},
                                  {"pod", source->cluster() + "/" + source->pod()},
                                  {"phase", MigrationOperationPhase(migration.phase())}});
  return absl::OkStatus();
}

StateMoveProgress PlacementService::MoveState(pb::Migration& migration, Operation& op,
                                              const pb::AssignmentPlan& next,
                                              const std::string& checkpointer,
                                              absl::Time deadline) {
  *migration.mutable_next_plan() = next;
  if (absl::Status stored = StoreMigration(migration, op, pb::MIGRATION_PHASE_CHECKPOINTING,
                                           absl::OkStatus(), nullptr, "");
      !stored.ok()) {
    return {.done = false, .phase = absl::StrCat("storing it: ", stored.message())};
  }
  return FollowStateMove(migration, op, checkpointer, deadline);
}

StateMoveProgress PlacementService::FollowStateMove(pb::Migration& migration, Operation& op,
                                                    const std::string& checkpointer,
                                                    absl::Time deadline) {
  absl::StatusOr<StateMoveProgress> followed = [&]() -> absl::StatusOr<StateMoveProgress> {
    if (state_mover_ == nullptr) {
      return absl::UnavailableError("this hub reaches no checkpointer to follow the state move");
    }
    const pb::WorkloadTarget& source = migration.source();
    const pb::WorkloadTarget& target = migration.target();
    // The migration's own key: its id alone would repeat for an application
    // deleted and created again, so its creation time goes in too.
    StateMove move{.request_id = absl::StrCat("swm/", migration.id(), "/",
                                              absl::ToUnixNanos(FromProtoTimestamp(
                                                  migration.create_time()))),
                   .source_cluster = source.cluster(),
                   .source_node = source.node(),
                   .source_pod = source.pod(),
                   .target_cluster = target.cluster(),
                   .target_node = target.node(),
                   .target_pod = target.pod(),
                   .from_backup = migration.restored_backup().image_reference()};
    (move.from_backup.empty() ? move.source_checkpointer : move.target_checkpointer) =
        checkpointer;
    ASSIGN_OR_RETURN(std::string id, state_mover_->Start(move, deadline));
    const std::string ref = absl::StrCat(move.RunsAt(), ":", id);
    if (migration.checkpoint_id() != ref) {
      migration.set_checkpoint_id(ref);
      RETURN_IF_ERROR(StoreMigration(migration, op, pb::MIGRATION_PHASE_CHECKPOINTING,
                                     absl::OkStatus(), nullptr, ""));
    }
    return state_mover_->Await(move.RunsAt(), id, deadline);
  }();
  if (followed.ok()) return *followed;
  // Refused by the checkpointer, the move never started: settled, failed.
  // Any other error leaves it unknown: it may still be running.
  const absl::Status& error = followed.status();
  if (absl::IsInvalidArgument(error) || absl::IsFailedPrecondition(error) ||
      absl::IsNotFound(error)) {
    return {.done = true, .status = error};
  }
  return {.done = false, .phase = std::string(error.message())};
}

absl::Status PlacementService::CutOver(pb::Migration& migration, Operation& op,
                                       pb::AssignmentPlan& next, const absl::Status& source_left,
                                       const std::string& request_id, absl::Time deadline) {
  migration.clear_next_plan();
  *next.mutable_update_time() = ToTimestamp(clock_.Now());
  RETURN_IF_ERROR(StoreMigration(migration, op, pb::MIGRATION_PHASE_CUTTING_OVER, source_left,
                                 &next, ""));
  {
    absl::MutexLock lock(&mu_);
    ledger_.Hold(next);
  }
  Published(next);
  if (!source_left.ok()) return absl::OkStatus();
  return FinishCutover(migration, op, &next, request_id, deadline);
}

absl::Status PlacementService::RemovePod(const pb::WorkloadTarget& where,
                                         const std::string& reason, absl::Time deadline) {
  std::map<std::string, absl::Status> removed =
      members_.RemovePods(where.cluster(), where.reservation(), {where.pod()}, reason, deadline);
  Invalidate({where.cluster()});
  auto it = removed.find(where.pod());
  return it == removed.end() ? absl::UnknownError("the cluster did not report the pod")
                             : it->second;
}

bool PlacementService::RemoveTarget(const pb::Migration& migration, const std::string& reason,
                                    absl::Time deadline, std::string& why) {
  if (!migration.has_target()) return true;
  const pb::WorkloadTarget& target = migration.target();
  const absl::Status removed = RemovePod(target, reason, deadline);
  if (removed.ok() || absl::IsNotFound(removed)) return true;
  why = absl::StrCat("its target pod ", target.pod(), " in ", target.cluster(),
                     " is not removed yet (", removed.message(), "); the hub's recovery retries");
  return false;
}

absl::Status PlacementService::FinishCutover(pb::Migration& migration, Operation& op,
                                             pb::AssignmentPlan* plan,
                                             const std::string& request_id, absl::Time deadline) {
  if (!migration.has_source()) {
    // A replica added (SCALE_UP): nothing ran before it.
    return StoreMigration(migration, op, pb::MIGRATION_PHASE_DONE, absl::OkStatus(), plan,
                          request_id);
  }
  const pb::WorkloadTarget& source = migration.source();
  const bool removing_replica = !migration.has_target();
  const absl::Status st = RemovePod(
      source,
      removing_replica
          ? absl::StrCat("migration ", migration.id(), " removed replica ", source.workload())
          : absl::StrCat("migration ", migration.id(), " moved it to ",
                         migration.target().cluster()),
      deadline);
  const bool gone = st.ok() || absl::IsNotFound(st);
  if (plan != nullptr) {
    for (pb::PlanAction& a : *plan->mutable_actions()) {
      if (a.type() != pb::ACTION_TYPE_DELETE_POD || a.pod() != source.pod()) continue;
      a.set_result(st.ok() ? pb::ACTION_RESULT_SUCCEEDED
                           : (gone ? pb::ACTION_RESULT_SKIPPED : pb::ACTION_RESULT_FAILED));
      if (!gone) SetError(st, a.mutable_error());
      *a.mutable_update_time() = ToTimestamp(clock_.Now());
    }
    *plan->mutable_update_time() = ToTimestamp(clock_.Now());
  }
  // The old virtual links of the moved channels serve nothing now.
  if (gone && virtual_links_ != nullptr && plan != nullptr) {
    std::set<std::string> held;
    std::set<std::string> moved;
    for (const pb::ChannelPath& c : plan->channels()) {
      if (!c.virtual_link_id().empty()) held.insert(c.virtual_link_id());
      if (c.from_workload() == migration.workload() || c.to_workload() == migration.workload()) {
        moved.insert(c.channel());
      }
    }
    absl::StatusOr<std::vector<VirtualLinkRef>> links =
        virtual_links_->List(migration.application(), deadline);
    for (const VirtualLinkRef& link : links.ok() ? *links : std::vector<VirtualLinkRef>()) {
      // A removed replica's channels are not in the plan any more: every
      // link the plan does not hold goes (the application's other moves
      // wait for this one).
      if (!link.managed_by_swm || held.count(link.id) ||
          (!removing_replica && !moved.count(link.channel))) {
        continue;
      }
      if (absl::Status deleted = virtual_links_->Delete(link.id, deadline); !deleted.ok()) {
        // The reconciler deletes links no placed plan holds.
        log::Warn("virtual link left for the reconciler",
                  {{"link", link.id}, {"error", std::string(deleted.message())}});
      }
    }
  }
  if (gone) {
    return StoreMigration(migration, op, pb::MIGRATION_PHASE_DONE, absl::OkStatus(), plan,
                          request_id);
  }
  return StoreMigration(migration, op, pb::MIGRATION_PHASE_CUTTING_OVER,
                        absl::UnavailableError(absl::StrCat(
                            "the workload runs at the target; its source pod ", source.pod(),
                            " in ", source.cluster(), " is not removed yet (", st.message(),
                            "); the hub retries with its recovery")),
                        plan, "");
}

absl::Status PlacementService::StoreMigration(pb::Migration& migration, Operation& op,
                                              pb::MigrationPhase phase,
                                              const absl::Status& status,
                                              const pb::AssignmentPlan* plan,
                                              const std::string& request_id) {
  migration.set_phase(phase);
  if (status.ok()) {
    migration.clear_error();
  } else {
    SetError(status, migration.mutable_error());
  }
  *migration.mutable_update_time() = ToTimestamp(clock_.Now());
  op.set_done(IsFinal(phase));
  op.set_phase(MigrationOperationPhase(phase));
  op.set_progress_percent(MigrationProgress(phase));
  op.clear_result();
  op.clear_error();
  if (op.done() && !status.ok()) {
    SetError(status, op.mutable_error());
  } else {
    op.mutable_result()->PackFrom(migration);
  }
  *op.mutable_update_time() = ToTimestamp(clock_.Now());
  return plans_.SaveMigration(migration, plan, op, request_id);
}

void PlacementService::RecoverMigration(pb::Migration migration, absl::Time deadline,
                                        RecoveryReport& report) {
  absl::StatusOr<Operation> stored_op = plans_.GetOperation(migration.operation_id());
  Operation op;
  if (stored_op.ok()) {
    op = *stored_op;
  } else {
    op.set_id(migration.operation_id());
    op.set_kind(kMigrateKind);
    op.set_resource("applications/" + migration.application());
  }
  if (migration.phase() == pb::MIGRATION_PHASE_CUTTING_OVER) {
    // The new plan is written: only the source is left to remove.
    absl::StatusOr<std::optional<pb::AssignmentPlan>> latest =
        plans_.Latest(migration.application());
    std::optional<pb::AssignmentPlan> plan;
    if (latest.ok() && latest->has_value() && (*latest)->operation_id() == op.id()) plan = **latest;
    absl::Status st =
        FinishCutover(migration, op, plan.has_value() ? &*plan : nullptr, op.request_id(), deadline);
    if (!st.ok()) {
      report.errors.push_back(absl::StrCat("migration ", migration.id(), ": ", st.message()));
    } else if (migration.phase() == pb::MIGRATION_PHASE_DONE) {
      report.migrations.push_back(migration.id());
    } else {
      report.errors.push_back(
          absl::StrCat("migration ", migration.id(), ": ", migration.error().message()));
    }
    return;
  }
  absl::Status aborted = absl::AbortedError(absl::StrCat(
      "the hub restarted while ", MigrationOperationPhase(migration.phase()),
      "; rolled back, the workload stays where it ran"));
  if (migration.phase() == pb::MIGRATION_PHASE_CHECKPOINTING) {
    // The state was on its way: the checkpointer's outcome decides. Done
    // there, the source is retired: the move is finished forward.
    const StateMoveProgress moved =
        FollowStateMove(migration, op, "", std::min(deadline, absl::Now() + absl::Seconds(2)));
    if (!moved.done) {
      report.errors.push_back(absl::StrCat("migration ", migration.id(),
                                           ": its state is still moving (", moved.phase, ")"));
      return;
    }
    const absl::Status& state = moved.status;
    if (state.ok()) {
      pb::AssignmentPlan next = migration.next_plan();
      absl::Status st = CutOver(migration, op, next, absl::OkStatus(), op.request_id(), deadline);
      if (!st.ok() || migration.phase() != pb::MIGRATION_PHASE_DONE) {
        report.errors.push_back(absl::StrCat("migration ", migration.id(), ": ",
                                             st.ok() ? migration.error().message() : st.message()));
      } else {
        report.migrations.push_back(migration.id());
      }
      return;
    }
    aborted = absl::Status(state.code(), absl::StrCat("moving the state: ", state.message(),
                                                      "; rolled back, the workload stays where "
                                                      "it ran"));
  }
  // Before the new plan was written: the source still runs and holds the
  // workload; the target (if reserved or created) is removed.
  std::string why;
  if (!RemoveTarget(migration, "rollback of migration " + migration.id() + " after a restart",
                    deadline, why)) {
    report.errors.push_back(
        absl::StrCat("migration ", migration.id(), ": cannot roll back yet: ", why));
    return;
  }
  migration.clear_next_plan();
  absl::Status saved =
      StoreMigration(migration, op, pb::MIGRATION_PHASE_ROLLED_BACK, aborted, nullptr, "");
  if (!saved.ok()) {
    report.errors.push_back(absl::StrCat("migration ", migration.id(), ": ", saved.message()));
    return;
  }
  report.migrations.push_back(migration.id());
}

void PlacementService::RecoverPlacement(pb::AssignmentPlan plan, absl::Time deadline,
                                        RecoveryReport& report) {
  const std::string& app = plan.application();
  absl::StatusOr<Operation> stored_op = plans_.GetOperation(plan.operation_id());
  Operation op;
  if (stored_op.ok()) {
    op = *stored_op;
  } else {
    op.set_id(plan.operation_id());
    op.set_kind(kPlaceKind);
    op.set_resource("applications/" + app);
  }
  std::map<std::string, std::vector<std::string>> pods_by_cluster;
  for (const pb::WorkloadTarget& t : plan.targets()) {
    pods_by_cluster[t.cluster()].push_back(t.pod());
  }
  std::string why;
  if (plan.phase() == pb::PLAN_PHASE_COMMITTING) {
    // Commit is idempotent: commit every cluster again.
    for (const auto& [cluster, pods] : pods_by_cluster) {
      absl::Status st =
          members_.Commit(cluster, ReservationOf(app, plan.plan_revision(), cluster), deadline);
      if (!st.ok()) {
        why = absl::StrCat("commit in ", cluster, " after a restart: ", st.message());
        break;
      }
    }
    if (why.empty()) {
      for (pb::PlanAction& a : *plan.mutable_actions()) {
        if (a.type() == pb::ACTION_TYPE_CREATE_POD) a.set_result(pb::ACTION_RESULT_SUCCEEDED);
      }
      if (absl::Status links = CreateVirtualLinks(plan, deadline); !links.ok()) {
        why = absl::StrCat("after a restart: ", links.message());
      }
    }
    if (why.empty()) {
      plan.set_phase(pb::PLAN_PHASE_DONE);
      *plan.mutable_update_time() = ToTimestamp(clock_.Now());
      op.set_done(true);
      op.set_progress_percent(100);
      op.set_phase(OperationPhase(pb::PLAN_PHASE_DONE));
      op.clear_error();
      op.mutable_result()->PackFrom(plan);
      *op.mutable_update_time() = ToTimestamp(clock_.Now());
      absl::Status saved = plans_.Save(&plan, op, op.request_id());
      if (!saved.ok()) {
        report.errors.push_back(absl::StrCat(plan.id(), ": ", saved.message()));
        return;
      }
      Published(plan);
      {
        absl::MutexLock lock(&mu_);
        ledger_.Hold(plan);
      }
      std::vector<std::string> touched;
      for (const auto& [cluster, pods] : pods_by_cluster) touched.push_back(cluster);
      Invalidate(touched);
      report.committed.push_back(plan.id());
      return;
    }
  } else {
    why = "the hub restarted while reserving";
  }
  // Roll back: every cluster releases the plan's reservation and deletes
  // whatever pods it created under it.
  std::vector<std::string> failures;
  std::vector<std::string> touched;
  for (const auto& [cluster, pods] : pods_by_cluster) {
    std::map<std::string, absl::Status> removed =
        members_.RemovePods(cluster, ReservationOf(app, plan.plan_revision(), cluster), pods,
                            "rollback of " + plan.id() + " after a restart", deadline);
    touched.push_back(cluster);
    for (const std::string& pod : pods) {
      auto it = removed.find(pod);
      if (it == removed.end() || (!it->second.ok() && !absl::IsNotFound(it->second))) {
        failures.push_back(
            absl::StrCat(pod, " in ", cluster, ": ",
                         it == removed.end() ? "not reported" : std::string(it->second.message())));
      }
    }
  }
  Invalidate(touched);
  // Links a commit interrupted after some channels went with the pods.
  for (const std::string& left : DeleteVirtualLinks(app, nullptr, deadline)) {
    failures.push_back(left);
  }
  for (pb::ChannelPath& c : *plan.mutable_channels()) c.clear_virtual_link_id();
  if (!failures.empty()) {
    report.errors.push_back(
        absl::StrCat(plan.id(), ": cannot roll back yet: ", absl::StrJoin(failures, "; ")));
    return;
  }
  for (pb::PlanAction& a : *plan.mutable_actions()) {
    if (a.result() == pb::ACTION_RESULT_SUCCEEDED) {
      a.set_result(pb::ACTION_RESULT_ROLLED_BACK);
    } else if (a.result() != pb::ACTION_RESULT_FAILED) {
      a.set_result(pb::ACTION_RESULT_SKIPPED);
    }
  }
  absl::Status aborted = absl::AbortedError(why + "; rolled back, place again");
  plan.set_phase(pb::PLAN_PHASE_ROLLED_BACK);
  SetError(aborted, plan.mutable_error());
  *plan.mutable_update_time() = ToTimestamp(clock_.Now());
  op.set_done(true);
  op.set_progress_percent(100);
  op.set_phase(OperationPhase(pb::PLAN_PHASE_ROLLED_BACK));
  op.clear_result();
  SetError(aborted, op.mutable_error());
  *op.mutable_update_time() = ToTimestamp(clock_.Now());
  // The request_id stays free: the caller's retry places again.
  absl::Status saved = plans_.Save(&plan, op, "");
  if (!saved.ok()) {
    report.errors.push_back(absl::StrCat(plan.id(), ": ", saved.message()));
    return;
  }
  Published(plan);
  report.rolled_back.push_back(plan.id());
}

void PlacementService::Published(const pb::AssignmentPlan& plan) const {
  if (plan_listener_) plan_listener_(plan);
}

std::vector<std::string> PlacementService::DeleteVirtualLinks(const std::string& application,
                                                              pb::AssignmentPlan* plan,
                                                              absl::Time deadline) {
  std::vector<std::string> failures;
  if (virtual_links_ == nullptr) return failures;
  absl::StatusOr<std::vector<VirtualLinkRef>> links = virtual_links_->List(application, deadline);
  if (!links.ok()) {
    failures.push_back(absl::StrCat("listing the virtual links of ", application, ": ",
                                    links.status().message()));
    return failures;
  }
  for (const VirtualLinkRef& link : *links) {
    if (!link.managed_by_swm) continue;  // set up by hand: not the plan's
    absl::Status st = virtual_links_->Delete(link.id, deadline);
    if (!st.ok()) {
      failures.push_back(absl::StrCat("virtual link ", link.id, ": ", st.message()));
    }
    if (plan == nullptr) continue;
    pb::PlanAction* action = plan->add_actions();
    action->set_index(plan->actions_size() - 1);
    action->set_type(pb::ACTION_TYPE_DELETE_CHANNEL);
    action->set_channel(link.channel);
    *action->mutable_update_time() = ToTimestamp(clock_.Now());
    action->set_result(st.ok() ? pb::ACTION_RESULT_SUCCEEDED : pb::ACTION_RESULT_FAILED);
    if (!st.ok()) SetError(st, action->mutable_error());
  }
  return failures;
}

absl::Status PlacementService::CreateVirtualLinks(pb::AssignmentPlan& plan, absl::Time deadline) {
  if (virtual_links_ == nullptr) return absl::OkStatus();
  for (pb::ChannelPath& c : *plan.mutable_channels()) {
    if (c.clusters_size() != 2) continue;
    VirtualLinkSpec spec{.application = plan.application(),
                         .channel = c.channel(),
                         .source_cluster = c.clusters(0),
                         .target_cluster = c.clusters(1),
                         .target_endpoint = c.target_endpoint(),
                         .neighborhood_id = plan.neighborhood_id(),
                         .service_class =
                             c.service_class() == codeco::common::v1::SERVICE_CLASS_ASSURED
                                 ? ServiceClass::kAssured
                                 : ServiceClass::kBestEffort,
                         .min_bandwidth_bps = c.min_bandwidth_bps(),
                         .max_delay_ns = c.max_delay_ns()};
    absl::StatusOr<std::string> id = virtual_links_->Create(
        spec, VirtualLinkRequestId(plan.application(), plan.plan_revision(), c.channel()),
        deadline);
    if (!id.ok()) {
      return absl::Status(id.status().code(),
                          absl::StrCat("virtual link for channel ", c.channel(), " from ",
                                       c.clusters(0), " to ", c.clusters(1), ": ",
                                       id.status().message()));
    }
    c.set_virtual_link_id(*id);
    for (pb::PlanAction& a : *plan.mutable_actions()) {
      if (a.type() == pb::ACTION_TYPE_CREATE_CHANNEL && a.channel() == c.channel()) {
        a.set_result(pb::ACTION_RESULT_SUCCEEDED);
      }
    }
  }
  return absl::OkStatus();
}

RecoveryReport PlacementService::Recover(absl::Time deadline) {
  AdmitAlone();
  RecoveryReport report;
  absl::StatusOr<std::vector<pb::AssignmentPlan>> latest = plans_.LivePlans();
  if (!latest.ok()) {
    report.errors.push_back(absl::StrCat("reading plans: ", latest.status().message()));
    LeaveAlone();
    return report;
  }
  {
    absl::MutexLock lock(&mu_);
    ledger_ = LinkLedger();
    for (const pb::AssignmentPlan& plan : *latest) {
      if (plan.phase() == pb::PLAN_PHASE_DONE && !plan.targets().empty() &&
          PlacedRevision(plan) == plan.plan_revision()) {
        ledger_.Hold(plan);
      }
    }
  }
  for (pb::AssignmentPlan& plan : *latest) {
    switch (plan.phase()) {
      case pb::PLAN_PHASE_RESERVING:
      case pb::PLAN_PHASE_COMMITTING:
        RecoverPlacement(std::move(plan), deadline, report);
        break;
      case pb::PLAN_PHASE_RELEASING: {
        absl::StatusOr<Operation> op = plans_.GetOperation(plan.operation_id());
        Operation stored = op.ok() ? *op : Operation();
        if (!op.ok()) {
          stored.set_id(plan.operation_id());
          stored.set_kind(kReleaseKind);
          stored.set_resource("applications/" + plan.application());
        }
        const std::string id = plan.id();
        absl::Status st = FinishRemoval(plan, stored, stored.request_id(), deadline);
        if (st.ok()) {
          report.released.push_back(id);
        } else {
          report.errors.push_back(absl::StrCat(id, ": ", st.message()));
        }
        break;
      }
      default:
        break;
    }
  }
  absl::StatusOr<std::vector<pb::Migration>> moving = plans_.ActiveMigrations();
  if (!moving.ok()) {
    report.errors.push_back(absl::StrCat("reading migrations: ", moving.status().message()));
  } else {
    for (pb::Migration& m : *moving) RecoverMigration(std::move(m), deadline, report);
  }
  LeaveAlone();
  return report;
}

RecoveryReport PlacementService::Reconcile(absl::Time deadline) {
  AdmitAlone();
  RecoveryReport report = ReconcileAlone(deadline);
  LeaveAlone();
  return report;
}

RecoveryReport PlacementService::ReconcileAlone(absl::Time deadline) {
  RecoveryReport report;
  absl::StatusOr<std::vector<pb::AssignmentPlan>> latest = plans_.LivePlans();
  if (!latest.ok()) {
    report.errors.push_back(absl::StrCat("reading plans: ", latest.status().message()));
    return report;
  }
  // The pods that may run: the targets of plans holding pods, each under
  // the reservation it was created with, and the targets of migrations in
  // flight (Recover drives those to an end first; one whose cluster was
  // away is still undecided).
  absl::StatusOr<std::vector<pb::Migration>> moving = plans_.ActiveMigrations();
  if (!moving.ok()) {
    report.errors.push_back(absl::StrCat("reading migrations: ", moving.status().message()));
    return report;
  }
  std::set<std::string> live;
  for (const pb::AssignmentPlan& plan : *latest) {
    if (!HoldsPods(plan)) continue;
    for (const pb::WorkloadTarget& t : plan.targets()) {
      live.insert(LivePodKey(LabelValue(TargetReservation(plan, t)), t.pod()));
    }
  }
  for (const pb::Migration& m : *moving) {
    if (m.has_target()) {
      live.insert(LivePodKey(LabelValue(m.target().reservation()), m.target().pod()));
    }
  }
  // Virtual links no placed plan holds (a removal or rollback that could
  // not reach NetMA, a hub that died between a link and its plan).
  if (virtual_links_ != nullptr) {
    std::set<std::string> held;
    for (const pb::AssignmentPlan& plan : *latest) {
      if (!HoldsPods(plan)) continue;
      for (const pb::ChannelPath& c : plan.channels()) {
        if (!c.virtual_link_id().empty()) held.insert(c.virtual_link_id());
      }
    }
    absl::StatusOr<std::vector<VirtualLinkRef>> links = virtual_links_->List("", deadline);
    if (!links.ok()) {
      report.errors.push_back(absl::StrCat("virtual links: ", links.status().message()));
    } else {
      for (const VirtualLinkRef& link : *links) {
        if (!link.managed_by_swm || held.count(link.id)) continue;
        absl::Status st = virtual_links_->Delete(link.id, deadline);
        if (st.ok()) {
          report.orphans.push_back("virtual-link/" + link.id);
          log::Info("deleted an orphan virtual link",
                    {{"link", link.id}, {"application", link.application}});
        } else {
          report.errors.push_back(absl::StrCat("virtual link ", link.id, ": ", st.message()));
        }
      }
    }
  }
  for (const std::string& cluster : members_.KnownClusters()) {
    absl::StatusOr<std::vector<LabelledPod>> pods = members_.ListLabelledPods(cluster, deadline);
    if (!pods.ok()) {
      if (!absl::IsUnimplemented(pods.status())) {
        report.errors.push_back(absl::StrCat(cluster, ": ", pods.status().message()));
      }
      continue;
    }
    for (const LabelledPod& pod : *pods) {
      if (pod.reservation.empty() || live.count(LivePodKey(pod.reservation, pod.name))) continue;
      absl::Status st = members_.DeletePod(cluster, pod, deadline);
      if (st.ok() || absl::IsNotFound(st)) {
        report.orphans.push_back(absl::StrCat(cluster, "/", pod.name));
        log::Info("deleted an orphan pod",
                  {{"cluster", cluster}, {"pod", pod.name}, {"reservation", pod.reservation}});
      } else {
        report.errors.push_back(absl::StrCat(cluster, "/", pod.name, ": ", st.message()));
      }
    }
  }
  return report;
}

}  // namespace codeco::swm
