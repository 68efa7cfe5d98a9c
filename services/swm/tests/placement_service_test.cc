// PlacementService over fake ports (no sockets, no RocksDB): the real
// coordinator and solver place onto in-memory clusters (InMemoryPodRuntime
// behind a LocalClusterExecutor each); the plan repository is a map that can
// "crash" (freeze, with the clusters, at the moment a phase is written) so
// that Recover() is tested against the state a killed hub leaves behind.

#include "swm/core/placement_service.h"

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/status.h"
#include "netma/core/virtual_links.h"
#include "netma/store/kv_virtual_link_repository.h"
#include "swm/core/adaptation_loop.h"
#include "swm/core/channel_status.h"
#include "swm/core/convert.h"
#include "swm/core/state_backups.h"
#include "swm/core/plugins.h"
#include "swm/tests/fixtures.h"

namespace codeco::swm {
namespace {

namespace pb = codeco::swm::v1;
using codeco::common::v1::Operation;
using test::kGi;
using test::MakeCluster;

// Shared "the hub died here" switch: once set, the repository and the
// cluster executors of the dead hub ignore every later call.
struct Crash {
  pb::PlanPhase at = pb::PLAN_PHASE_UNSPECIFIED;  // phase whose write is the last one
  pb::MigrationPhase migration_at = pb::MIGRATION_PHASE_UNSPECIFIED;  // the same, for a migration
  bool happened = false;
};

class FakeRepository final : public PlanRepository {
 public:
  absl::StatusOr<std::optional<pb::AssignmentPlan>> Latest(
      const std::string& application) const override {
    absl::MutexLock lock(&mu_);
    auto it = plans_.find(application);
    if (it == plans_.end() || it->second.empty()) return std::nullopt;
    return it->second.rbegin()->second;
  }
  absl::StatusOr<std::vector<pb::AssignmentPlan>> LivePlans() const override {
    absl::MutexLock lock(&mu_);
    std::vector<pb::AssignmentPlan> out;
    for (const auto& [app, revisions] : plans_) {
      if (!revisions.empty() && HoldsPods(revisions.rbegin()->second)) {
        out.push_back(revisions.rbegin()->second);
      }
    }
    return out;
  }
  absl::StatusOr<std::optional<Operation>> OperationForRequest(
      const std::string& request_id) const override {
    absl::MutexLock lock(&mu_);
    auto it = requests_.find(request_id);
    if (it == requests_.end()) return std::nullopt;
    return operations_.at(it->second);
  }
  absl::StatusOr<Operation> GetOperation(const std::string& id) const override {
    absl::MutexLock lock(&mu_);
    auto it = operations_.find(id);
    if (it == operations_.end()) return absl::NotFoundError("no operation " + id);
    return it->second;
  }
  absl::Status Save(const pb::AssignmentPlan* plan, const Operation& operation,
                    const std::string& request_id) override {
    absl::MutexLock lock(&mu_);
    if (crash != nullptr && crash->happened) return absl::OkStatus();  // nobody writes any more
    if (plan != nullptr && !plan->id().empty()) {
      plans_[plan->application()][plan->plan_revision()] = *plan;
      phases.push_back(plan->phase());
    }
    if (!operation.id().empty()) operations_[operation.id()] = operation;
    if (!request_id.empty()) requests_[request_id] = operation.id();
    if (crash != nullptr && plan != nullptr && plan->phase() == crash->at) crash->happened = true;
    return absl::OkStatus();
  }
  absl::StatusOr<pb::Migration> GetMigration(const std::string& id) const override {
    return migrations_.GetMigration(id);
  }
  absl::StatusOr<std::optional<pb::Migration>> NewestMigration(
      const std::string& application) const override {
    return migrations_.NewestMigration(application);
  }
  absl::StatusOr<std::vector<pb::Migration>> ActiveMigrations() const override {
    return migrations_.ActiveMigrations();
  }
  absl::Status SaveMigration(const pb::Migration& migration, const pb::AssignmentPlan* plan,
                             const Operation& operation, const std::string& request_id) override {
    if (crash != nullptr && crash->happened) return absl::OkStatus();  // nobody writes any more
    RETURN_IF_ERROR(Save(plan, operation, request_id));
    RETURN_IF_ERROR(migrations_.SaveMigration(migration, nullptr, operation, ""));
    migration_phases.push_back(migration.phase());
    if (crash != nullptr && migration.phase() == crash->migration_at) crash->happened = true;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<pb::StateBackupRecord>> StateBackups() const override {
    return migrations_.StateBackups();
  }
  absl::StatusOr<std::optional<pb::StateBackupRecord>> StateBackupOf(
      const std::string& application, const std::string& workload) const override {
    return migrations_.StateBackupOf(application, workload);
  }
  absl::Status SaveStateBackup(const pb::StateBackupRecord& record) override {
    return migrations_.SaveStateBackup(record);
  }
  absl::Status DeleteStateBackup(const std::string& application,
                                 const std::string& workload) override {
    return migrations_.DeleteStateBackup(application, workload);
  }

  std::vector<pb::PlanPhase> phases;  // every plan phase written, in order
  std::vector<pb::MigrationPhase> migration_phases;  // every migration phase written, in order
  Crash* crash = nullptr;

 private:
  mutable absl::Mutex mu_;  // placements of different applications overlap
  std::map<std::string, std::map<int64_t, pb::AssignmentPlan>> plans_;
  std::map<std::string, Operation> operations_;
  std::map<std::string, std::string> requests_;
  InMemoryPlanRepository migrations_;  // the migration and state backup records
};

// One in-memory cluster: its pods, its reservations, and the reservation
// label of each pod (what an LMS would show).
struct FakeCluster {
  FakeCluster(const Clock& clock, Cluster spec)
      : labels(spec.labels), runtime(spec.nodes), executor(clock, runtime) {}
  ClusterLabels labels;
  InMemoryPodRuntime runtime;
  LocalClusterExecutor executor;
  std::map<std::string, std::string> reservation_of;  // pod -> reservation label value
};

// Holds the Commit of one application's reservations until opened: lets a
// test run a second placement while the first one commits.
struct CommitGate {
  std::string application;       // whose Commit waits ("" = nobody's)
  absl::Notification reached;    // its Commit started
  absl::Notification open;       // let it go on
};

// The executor of one cluster for one plan; dead once the crash happened.
class FakeExecutor final : public ClusterExecutor {
 public:
  FakeExecutor(FakeCluster& cluster, const Crash* crash, CommitGate* gate = nullptr)
      : cluster_(cluster), crash_(crash), gate_(gate) {}
  absl::Status Reserve(const std::string& id, const std::vector<ReservationItem>& items,
                       absl::Duration lease) override {
    if (Dead()) return absl::UnavailableError("hub is dead");
    for (const ReservationItem& item : items) cluster_.reservation_of[item.pod] = LabelValue(id);
    return cluster_.executor.Reserve(id, items, lease);
  }
  absl::Status Commit(const std::string& id) override {
    if (Dead()) return absl::UnavailableError("hub is dead");
    if (gate_ != nullptr && !gate_->application.empty() &&
        absl::StartsWith(id, gate_->application + "/")) {
      if (!gate_->reached.HasBeenNotified()) gate_->reached.Notify();
      gate_->open.WaitForNotification();
    }
    return cluster_.executor.Commit(id);
  }
  absl::Status Release(const std::string& id) override {
    if (Dead()) return absl::UnavailableError("hub is dead");
    return cluster_.executor.Release(id);
  }

 private:
  bool Dead() const { return crash_ != nullptr && crash_->happened; }
  FakeCluster& cluster_;
  const Crash* crash_;
  CommitGate* gate_;
};

class FakeFactory final : public ExecutorFactory {
 public:
  FakeFactory(std::map<std::string, std::unique_ptr<FakeCluster>>& clusters, const Crash* crash,
              CommitGate* gate = nullptr)
      : clusters_(clusters), crash_(crash), gate_(gate) {}
  absl::StatusOr<std::unique_ptr<ClusterExecutor>> ExecutorFor(const std::string& cluster,
                                                               const AssignmentPlan&,
                                                               absl::Time) override {
    auto it = clusters_.find(cluster);
    if (it == clusters_.end()) return absl::NotFoundError("no cluster " + cluster);
    return std::unique_ptr<ClusterExecutor>(
        std::make_unique<FakeExecutor>(*it->second, crash_, gate_));
  }

 private:
  std::map<std::string, std::unique_ptr<FakeCluster>>& clusters_;
  const Crash* crash_;
  CommitGate* gate_;
};

// Forwards to the hub's local L2 (every fake cluster is solved in process).
class LocalOnly final : public L2Solver {
 public:
  explicit LocalOnly(L2Solver& local) : local_(local) {}
  absl::StatusOr<L2Result> Solve(const L2Request& request) override {
    return local_.Solve(request);
  }

 private:
  L2Solver& local_;
};

class FakeMembers final : public MemberPort {
 public:
  explicit FakeMembers(std::map<std::string, std::unique_ptr<FakeCluster>>& clusters)
      : clusters_(clusters) {}
  absl::Status Connect(const std::vector<MemberRef>& members, absl::Time) override {
    for (size_t i = 0; i < members.size(); ++i) {
      if (!clusters_.count(members[i].cluster)) {
        return absl::FailedPreconditionError("neighborhood.members[" + std::to_string(i) +
                                             "].endpoints: unknown cluster");
      }
    }
    return absl::OkStatus();
  }
  std::vector<absl::StatusOr<MemberView>> ReadMembers(const std::vector<std::string>& names,
                                                      absl::Time) override {
    std::vector<absl::StatusOr<MemberView>> out;
    for (const std::string& name : names) {
      FakeCluster& c = *clusters_.at(name);
      if (away.count(name)) {
        out.push_back(absl::UnavailableError(name + " is away"));
        continue;
      }
      // As an MC's GetClusterView: allocated = pods (the runtime's) + live holds.
      std::vector<Node> nodes = *c.runtime.ListNodes();
      for (Node& n : nodes) n.allocated += c.executor.ledger().Held(n.name);
      out.push_back(MemberView{.labels = c.labels, .nodes = std::move(nodes)});
    }
    return out;
  }
  std::unique_ptr<L2Solver> SolverFor(const std::vector<std::string>&, L2Solver& local) override {
    return std::make_unique<LocalOnly>(local);
  }
  absl::Status Commit(const std::string& cluster, const std::string& id, absl::Time) override {
    return clusters_.at(cluster)->executor.Commit(id);
  }
  std::map<std::string, absl::Status> RemovePods(const std::string& cluster, const std::string& id,
                                                 const std::vector<std::string>& pods,
                                                 const std::string&, absl::Time) override {
    std::map<std::string, absl::Status> out;
    FakeCluster& c = *clusters_.at(cluster);
    for (const std::string& pod : pods) {
      out[pod] = away.count(cluster) ? absl::UnavailableError(cluster + " is away")
                                     : c.runtime.DeletePod(pod);
    }
    if (!away.count(cluster)) (void)c.executor.ReleasePods(id, pods);
    return out;
  }
  void Touched(const std::vector<std::string>& names) override {
    for (const std::string& name : names) (void)clusters_.at(name)->executor.Sync();
  }
  std::vector<std::string> KnownClusters() override {
    std::vector<std::string> out;
    for (const auto& [name, c] : clusters_) out.push_back(name);
    return out;
  }
  absl::StatusOr<std::vector<LabelledPod>> ListLabelledPods(const std::string& cluster,
                                                            absl::Time) override {
    FakeCluster& c = *clusters_.at(cluster);
    std::vector<LabelledPod> out;
    absl::StatusOr<std::vector<PodInfo>> pods = c.runtime.ListPods();
    if (!pods.ok()) return pods.status();
    for (const PodInfo& p : *pods) {
      auto it = c.reservation_of.find(p.name);
      if (it != c.reservation_of.end()) out.push_back({p.name, "", it->second});
    }
    return out;
  }
  absl::Status DeletePod(const std::string& cluster, const LabelledPod& pod, absl::Time) override {
    return clusters_.at(cluster)->runtime.DeletePod(pod.name);
  }

  std::set<std::string> away;  // clusters that do not answer

 private:
  std::map<std::string, std::unique_ptr<FakeCluster>>& clusters_;
};

class FakeLinks final : public LinkSource {
 public:
  absl::StatusOr<std::optional<Link>> GetLink(const std::string& from,
                                              const std::string& to) override {
    for (const Link& l : links) {
      if (l.from == from && l.to == to) return l;
    }
    return std::nullopt;
  }
  std::vector<Link> links;
};

// Two clusters "eu" (region eu) and "us" (region us), one node each, and a
// 1 Gbps link both ways.
struct Bed {
  Bed() {
    Cluster eu = MakeCluster("eu", 1, 4000, 16 * kGi, "eu", "FR");
    Cluster us = MakeCluster("us", 1, 4000, 16 * kGi, "us", "US");
    clusters["eu"] = std::make_unique<FakeCluster>(clock, eu);
    clusters["us"] = std::make_unique<FakeCluster>(clock, us);
    for (auto [from, to] : {std::pair{"eu", "us"}, std::pair{"us", "eu"}}) {
      links.links.push_back(Link{.from = from,
                                 .to = to,
                                 .latency_ns = 5 * test::kMs,
                                 .free_bandwidth_bps = {1'000'000'000, 1'000'000'000}});
    }
    NewHub();
  }
  // A (re)started hub over the same repository and clusters.
  void NewHub() {
    service = std::make_unique<PlacementService>(clock, members, &links, repo, l2, registry);
  }
  // The hub that died is started again: the new one writes and executes.
  void Restart() {
    repo.crash = nullptr;
    crash = Crash{};
    NewHub();
  }
  // An application "name" with "front" (region eu) and "back" (region us)
  // and a channel front -> back needing `bps`.
  static Application App(const std::string& name, int64_t bps) {
    Application app{.name = name};
    Workload front = test::MakeWorkload("front-0", 500);
    front.service = "front";
    front.allowed_regions = {"eu"};
    Workload back = test::MakeWorkload("back-0", 500);
    back.service = "back";
    back.allowed_regions = {"us"};
    app.workloads = {front, back};
    app.channels.push_back(Channel{.name = "front-back",
                                   .from = "front-0",
                                   .to = "back-0",
                                   .min_bandwidth_bps = bps,
                                   .max_delay_ns = 100 * test::kMs});
    return app;
  }
  PlaceRequest Request(Application app, const std::string& request_id = "") {
    PlaceRequest r{.app = std::move(app), .request_id = request_id};
    r.members = {MemberRef{.cluster = "eu"}, MemberRef{.cluster = "us"}};
    r.executors = &factory;
    return r;
  }
  size_t Pods(const std::string& cluster) { return clusters[cluster]->runtime.ListPods()->size(); }

  SimulatedClock clock{absl::FromUnixSeconds(1'700'000'000)};
  std::map<std::string, std::unique_ptr<FakeCluster>> clusters;
  Crash crash;
  FakeRepository repo;
  FakeMembers members{clusters};
  FakeLinks links;
  CommitGate gate;
  FakeFactory factory{clusters, &crash, &gate};
  PluginRegistry registry = NewDefaultRegistry();
  InProcessL2Solver l2{registry, nullptr};
  std::unique_ptr<PlacementService> service;
};

pb::AssignmentPlan PlanOf(const Operation& op) {
  pb::AssignmentPlan plan;
  REQUIRE(op.result().UnpackTo(&plan));
  return plan;
}

TEST_CASE("PlacementService writes each phase before its step and creates the pods",
          "[placement_service]") {
  Bed bed;
  absl::StatusOr<Operation> op = bed.service->Place(bed.Request(Bed::App("shop", 100'000'000)));
  REQUIRE(op.ok());
  CHECK(op->done());
  pb::AssignmentPlan plan = PlanOf(*op);
  CHECK(plan.phase() == pb::PLAN_PHASE_DONE);
  CHECK(plan.targets_size() == 2);
  CHECK(bed.repo.phases == std::vector<pb::PlanPhase>{pb::PLAN_PHASE_RESERVING,
                                                      pb::PLAN_PHASE_COMMITTING,
                                                      pb::PLAN_PHASE_DONE});
  CHECK(bed.Pods("eu") == 1);
  CHECK(bed.Pods("us") == 1);

  // Placing it again while it holds pods is refused.
  CHECK(absl::IsFailedPrecondition(
      bed.service->Place(bed.Request(Bed::App("shop", 100'000'000))).status()));

  bed.repo.phases.clear();
  absl::StatusOr<pb::AssignmentPlan> removal = bed.service->Release({.application = "shop"});
  REQUIRE(removal.ok());
  CHECK(removal->phase() == pb::PLAN_PHASE_DONE);
  CHECK(removal->targets().empty());
  CHECK(removal->actions_size() == 2);
  CHECK(bed.repo.phases ==
        std::vector<pb::PlanPhase>{pb::PLAN_PHASE_RELEASING, pb::PLAN_PHASE_DONE});
  CHECK(bed.Pods("eu") == 0);
  CHECK(bed.Pods("us") == 0);
}

// One call of PlaceRequest::on_progress.
struct Step {
  std::string id;
  std::string phase;
  int percent;
  bool stored;
  bool done;
};

TEST_CASE("PlacementService reports each step of a placement with its progress",
          "[placement_service]") {
  Bed bed;
  std::vector<Step> steps;
  auto record = [&](const Operation& op, bool stored) {
    steps.push_back({op.id(), op.phase(), op.progress_percent(), stored, op.done()});
  };

  SECTION("into the operation the caller stored") {
    // The caller stored its operation before the work began.
    Operation accepted;
    accepted.set_id("place/shop/started-1");
    accepted.set_kind(kPlaceKind);
    accepted.set_resource("applications/shop");
    accepted.set_phase("QUEUED");
    accepted.mutable_create_time()->set_seconds(1'600'000'000);
    REQUIRE(bed.repo.Save(nullptr, accepted, "").ok());

    PlaceRequest request = bed.Request(Bed::App("shop", 0));
    request.operation_id = accepted.id();
    request.on_progress = record;
    absl::StatusOr<Operation> op = bed.service->Place(request);
    REQUIRE(op.ok());
    CHECK(op->id() == accepted.id());
    REQUIRE(steps.size() == 5);
    CHECK(steps[0].phase == "READING_MEMBERS");
    CHECK(steps[0].percent == 5);
    CHECK(!steps[0].stored);
    CHECK(steps[1].phase == "SOLVING");
    CHECK(steps[1].percent == 20);
    CHECK(!steps[1].stored);
    CHECK(steps[2].phase == "RESERVING");
    CHECK(steps[2].percent == 40);
    CHECK(steps[2].stored);
    CHECK(steps[3].phase == "COMMITTING");
    CHECK(steps[3].percent == 70);
    CHECK(steps[3].stored);
    CHECK(steps[4].phase == "DONE");
    CHECK(steps[4].percent == 100);
    CHECK(steps[4].stored);
    CHECK(steps[4].done);
    for (const Step& s : steps) {
      CHECK(s.id == accepted.id());
      CHECK(s.done == (&s == &steps.back()));
    }
    // The stored operation is the caller's: its id, its creation time, the plan.
    absl::StatusOr<Operation> stored = bed.repo.GetOperation(accepted.id());
    REQUIRE(stored.ok());
    CHECK(stored->done());
    CHECK(stored->create_time().seconds() == 1'600'000'000);
    CHECK(PlanOf(*stored).operation_id() == accepted.id());
    CHECK(PlanOf(*stored).phase() == pb::PLAN_PHASE_DONE);
  }

  SECTION("under the core's own id once solved") {
    PlaceRequest request = bed.Request(Bed::App("shop", 0));
    request.on_progress = record;
    REQUIRE(bed.service->Place(request).ok());
    REQUIRE(steps.size() == 5);
    CHECK(steps[0].id.empty());  // not named before the revision is known
    CHECK(steps[1].id.empty());
    CHECK(steps[2].id == "place/shop/1");
    CHECK(steps[4].id == "place/shop/1");
  }

  SECTION("a placement that cannot fit ends FAILED after its solve") {
    Application app = Bed::App("huge", 0);
    app.workloads[0].requests.cpu_millis = 64'000;
    PlaceRequest request = bed.Request(app);
    request.on_progress = record;
    REQUIRE(absl::IsFailedPrecondition(bed.service->Place(request).status()));
    REQUIRE(steps.size() == 3);
    CHECK(steps[1].phase == "SOLVING");
    CHECK(steps[2].phase == "FAILED");
    CHECK(steps[2].stored);
    CHECK(steps[2].done);
    CHECK(steps[2].percent == 100);
  }

  SECTION("an error before any plan is only the answer") {
    bed.members.away = {"eu", "us"};
    PlaceRequest request = bed.Request(Bed::App("shop", 0));
    request.on_progress = record;
    REQUIRE(absl::IsUnavailable(bed.service->Place(request).status()));
    REQUIRE(steps.size() == 1);
    CHECK(steps[0].phase == "READING_MEMBERS");
  }

  SECTION("a dry run reports nothing") {
    PlaceRequest request = bed.Request(Bed::App("shop", 0));
    request.dry_run = true;
    request.on_progress = record;
    REQUIRE(bed.service->Place(request).ok());
    CHECK(steps.empty());
  }
}

TEST_CASE("PlacementService stores an unplaceable application as FAILED and reserves nothing",
          "[placement_service]") {
  Bed bed;
  Application app = Bed::App("huge", 0);
  app.workloads[0].requests.cpu_millis = 64'000;
  absl::StatusOr<Operation> op = bed.service->Place(bed.Request(app, "r1"));
  REQUIRE(absl::IsFailedPrecondition(op.status()));
  CHECK(std::string(op.status().message()).find("front-0") != std::string::npos);
  CHECK(bed.repo.phases == std::vector<pb::PlanPhase>{pb::PLAN_PHASE_FAILED});
  CHECK(bed.clusters["eu"]->executor.ledger().size() == 0);
  // The request id answers the same error again without solving.
  CHECK(absl::IsFailedPrecondition(bed.service->Place(bed.Request(app, "r1")).status()));
}

TEST_CASE("PlacementService leaves out a member that does not answer", "[placement_service]") {
  Bed bed;
  bed.members.away.insert("us");
  absl::StatusOr<Operation> op = bed.service->Place(bed.Request(Bed::App("shop", 0)));
  REQUIRE(absl::IsFailedPrecondition(op.status()));
  CHECK(std::string(op.status().message()).find("us (us is away)") != std::string::npos);
  bed.members.away.insert("eu");
  CHECK(absl::IsUnavailable(bed.service->Place(bed.Request(Bed::App("shop", 0))).status()));
}

// Data sets as MDM would answer them; `down` makes every question fail.
class ScriptedDataSets final : public DataSetLocator {
 public:
  absl::StatusOr<std::optional<std::vector<std::string>>> ClustersHolding(
      const std::string& name) override {
    ++asked;
    if (down) return absl::UnavailableError("mdm: connection refused");
    auto it = sets.find(name);
    if (it == sets.end()) return std::optional<std::vector<std::string>>();
    return std::optional<std::vector<std::string>>(it->second);
  }
  std::map<std::string, std::vector<std::string>> sets;
  bool down = false;
  int asked = 0;
};

TEST_CASE("A dataLocality naming a data set places the workload where MDM says the data is",
          "[placement_service]") {
  Bed bed;
  ScriptedDataSets data_sets;
  data_sets.sets["traffic-cams"] = {"us"};
  data_sets.sets["nowhere"] = {};
  bed.service = std::make_unique<PlacementService>(bed.clock, bed.members, &bed.links, bed.repo,
                                                   bed.l2, bed.registry,
                                                   PlacementServiceOptions{.data_sets = &data_sets});
  auto app = [](const std::string& name, const std::string& data) {
    Application a{.name = name};
    Workload w = test::MakeWorkload("reader-0", 500);
    w.service = "reader";
    w.data_locality = data;
    Workload v = test::MakeWorkload("viewer-0", 500);
    v.service = "viewer";
    v.data_locality = data;  // asked once for both
    a.workloads = {w, v};
    return a;
  };
  absl::StatusOr<Operation> op = bed.service->Place(bed.Request(app("cams", "traffic-cams")));
  INFO(op.status().message());
  REQUIRE(op.ok());
  CHECK(data_sets.asked == 1);
  pb::AssignmentPlan plan = PlanOf(*op);
  CHECK(plan.targets_size() == 2);
  for (const pb::WorkloadTarget& t : plan.targets()) CHECK(t.cluster() == "us");

  // A name MDM does not know keeps its meaning of a region or cluster.
  op = bed.service->Place(bed.Request(app("local", "eu")));
  REQUIRE(op.ok());
  plan = PlanOf(*op);
  for (const pb::WorkloadTarget& t : plan.targets()) CHECK(t.cluster() == "eu");

  // A data set held nowhere cannot be placed, and says so.
  op = bed.service->Place(bed.Request(app("lost", "nowhere")));
  CHECK(absl::IsFailedPrecondition(op.status()));
  CHECK_THAT(std::string(op.status().message()),
             Catch::Contains("data set \"nowhere\" (its dataLocality) is held in no cluster"));

  // MDM down: a region or cluster name still places; any other name waits.
  data_sets.down = true;
  REQUIRE(bed.service->Release({.application = "local"}).ok());
  CHECK(bed.service->Place(bed.Request(app("local", "eu"))).ok());
  op = bed.service->Place(bed.Request(app("cams2", "traffic-cams")));
  CHECK(absl::IsUnavailable(op.status()));
  CHECK_THAT(std::string(op.status().message()),
             Catch::StartsWith("workload reader-0: dataLocality \"traffic-cams\" is no member"));
}

TEST_CASE("Recover commits a plan the hub left COMMITTING", "[placement_service]") {
  Bed bed;
  bed.crash.at = pb::PLAN_PHASE_COMMITTING;
  bed.repo.crash = &bed.crash;
  (void)bed.service->Place(bed.Request(Bed::App("shop", 0), "req-1"));
  REQUIRE(bed.crash.happened);
  // The dead hub reserved but never committed: no pod, capacity held.
  CHECK(bed.Pods("eu") == 0);
  CHECK(bed.clusters["eu"]->executor.ledger().size() == 1);
  REQUIRE(bed.repo.Latest("shop")->value().phase() == pb::PLAN_PHASE_COMMITTING);

  bed.Restart();
  RecoveryReport report = bed.service->Recover();
  CHECK(report.errors.empty());
  CHECK(report.committed == std::vector<std::string>{"shop/1"});
  CHECK(bed.repo.Latest("shop")->value().phase() == pb::PLAN_PHASE_DONE);
  CHECK(bed.Pods("eu") == 1);
  CHECK(bed.Pods("us") == 1);
  // The caller's retry gets the committed plan.
  absl::StatusOr<Operation> again = bed.service->Place(bed.Request(Bed::App("shop", 0), "req-1"));
  REQUIRE(again.ok());
  CHECK(PlanOf(*again).phase() == pb::PLAN_PHASE_DONE);
}

TEST_CASE("Recover rolls back a plan the hub left RESERVING", "[placement_service]") {
  Bed bed;
  bed.crash.at = pb::PLAN_PHASE_RESERVING;
  bed.repo.crash = &bed.crash;
  (void)bed.service->Place(bed.Request(Bed::App("shop", 0), "req-1"));
  REQUIRE(bed.crash.happened);
  REQUIRE(bed.repo.Latest("shop")->value().phase() == pb::PLAN_PHASE_RESERVING);

  bed.Restart();
  // A placement's reservations held in a cluster before the crash (the dead
  // hub's executors stopped after the write, so hold one by hand as a hub
  // that died between two Reserve calls would have).
  REQUIRE(bed.clusters["eu"]
              ->executor
              .Reserve("shop/1/eu", {ReservationItem{"shop-front-0", "eu-n0", {500, kGi, 0}}},
                       absl::Minutes(1))
              .ok());
  RecoveryReport report = bed.service->Recover();
  CHECK(report.errors.empty());
  CHECK(report.rolled_back == std::vector<std::string>{"shop/1"});
  pb::AssignmentPlan stored = bed.repo.Latest("shop")->value();
  CHECK(stored.phase() == pb::PLAN_PHASE_ROLLED_BACK);
  CHECK(absl::IsAborted(absl::Status(static_cast<absl::StatusCode>(stored.error().code()), "")));
  CHECK(bed.clusters["eu"]->executor.ledger().size() == 0);
  CHECK(bed.Pods("eu") == 0);
  // The request id is free: the retry places (revision 2).
  absl::StatusOr<Operation> again = bed.service->Place(bed.Request(Bed::App("shop", 0), "req-1"));
  REQUIRE(again.ok());
  CHECK(PlanOf(*again).plan_revision() == 2);
  CHECK(bed.Pods("eu") == 1);
}

TEST_CASE("Recover finishes a removal the hub left RELEASING", "[placement_service]") {
  Bed bed;
  REQUIRE(bed.service->Place(bed.Request(Bed::App("shop", 0))).ok());
  bed.crash.at = pb::PLAN_PHASE_RELEASING;
  bed.repo.crash = &bed.crash;
  // Dies right after writing RELEASING: the fake members still delete, so
  // put the pods back as they were when the hub died.
  bed.members.away = {"eu", "us"};
  (void)bed.service->Release({.application = "shop", .request_id = "rm-1"});
  REQUIRE(bed.crash.happened);
  REQUIRE(bed.repo.Latest("shop")->value().phase() == pb::PLAN_PHASE_RELEASING);
  CHECK(bed.Pods("eu") == 1);

  bed.members.away.clear();
  bed.Restart();
  RecoveryReport report = bed.service->Recover();
  CHECK(report.errors.empty());
  CHECK(report.released == std::vector<std::string>{"shop/2"});
  pb::AssignmentPlan stored = bed.repo.Latest("shop")->value();
  CHECK(stored.phase() == pb::PLAN_PHASE_DONE);
  CHECK(stored.targets().empty());
  CHECK(bed.Pods("eu") == 0);
  CHECK(bed.Pods("us") == 0);
  // The removal's request id now answers the finished removal.
  absl::StatusOr<pb::AssignmentPlan> again =
      bed.service->Release({.application = "shop", .request_id = "rm-1"});
  REQUIRE(again.ok());
  CHECK(again->plan_revision() == 2);
}

TEST_CASE("A removal that cannot reach a cluster is stored FAILED and retried",
          "[placement_service]") {
  Bed bed;
  REQUIRE(bed.service->Place(bed.Request(Bed::App("shop", 0))).ok());
  bed.members.away = {"us"};
  absl::StatusOr<pb::AssignmentPlan> failed = bed.service->Release({.application = "shop"});
  REQUIRE(absl::IsUnavailable(failed.status()));
  pb::AssignmentPlan stored = bed.repo.Latest("shop")->value();
  CHECK(stored.phase() == pb::PLAN_PHASE_FAILED);
  REQUIRE(stored.targets_size() == 1);
  CHECK(stored.targets(0).cluster() == "us");
  bed.members.away.clear();
  absl::StatusOr<pb::AssignmentPlan> done = bed.service->Release({.application = "shop"});
  REQUIRE(done.ok());
  CHECK(done->phase() == pb::PLAN_PHASE_DONE);
  CHECK(done->incumbent_plan_revision() == 1);
  CHECK(bed.Pods("us") == 0);
}

TEST_CASE("Link bandwidth of placed channels is held across applications", "[placement_service]") {
  Bed bed;
  // Each needs 600 Mbps of the 1 Gbps eu -> us link: one fits, not both.
  REQUIRE(bed.service->Place(bed.Request(Bed::App("first", 600'000'000))).ok());
  CHECK(bed.service->HeldBandwidth("eu", "us", ServiceClass::kBestEffort) == 600'000'000);
  absl::StatusOr<Operation> second =
      bed.service->Place(bed.Request(Bed::App("second", 600'000'000)));
  REQUIRE(absl::IsFailedPrecondition(second.status()));
  CHECK(bed.Pods("eu") == 1);

  // A restarted hub rebuilds what placed plans hold from the stored plans.
  bed.NewHub();
  CHECK(bed.service->HeldBandwidth("eu", "us", ServiceClass::kBestEffort) == 0);
  (void)bed.service->Recover();
  CHECK(bed.service->HeldBandwidth("eu", "us", ServiceClass::kBestEffort) == 600'000'000);
  CHECK(absl::IsFailedPrecondition(
      bed.service->Place(bed.Request(Bed::App("second", 600'000'000))).status()));

  // Removing the first gives the bandwidth back, even while a member it is
  // on is away (the removal is stored FAILED and finished later).
  bed.members.away = {"us"};
  REQUIRE(absl::IsUnavailable(bed.service->Release({.application = "first"}).status()));
  CHECK(bed.service->HeldBandwidth("eu", "us", ServiceClass::kBestEffort) == 0);
  bed.members.away.clear();
  REQUIRE(bed.service->Release({.application = "first"}).ok());
  CHECK(bed.service->HeldBandwidth("eu", "us", ServiceClass::kBestEffort) == 0);
  REQUIRE(bed.service->Place(bed.Request(Bed::App("second", 600'000'000))).ok());
  CHECK(bed.service->HeldBandwidth("eu", "us", ServiceClass::kBestEffort) == 600'000'000);
}

// NetMA's own virtual-link controller, in process, as SWM's VirtualLinkPort
// (what NetmaVirtualLinks does over gRPC), with a switch that fails the n-th
// Create: the fault between the pods and the links.
class ControllerLinks final : public VirtualLinkPort {
 public:
  explicit ControllerLinks(const Clock& clock)
      : store_(NewInMemoryKvStore({netma::kVirtualLinksColumnFamily})),
        repository_(netma::NewKvVirtualLinkRepository(*store_)),
        controller_(*repository_, clock, {"idco-0"}) {}
  absl::StatusOr<std::string> Create(const VirtualLinkSpec& spec, const std::string& request_id,
                                     absl::Time) override {
    absl::MutexLock lock(&mu_);
    if (++creates_ == fail_create) return absl::UnavailableError("NetMA: connection reset");
    netma::v1::VirtualLink link = VirtualLinkFor(spec);
    absl::StatusOr<netma::v1::VirtualLink> made = controller_.Create(link, request_id);
    if (!made.ok()) return made.status();
    return made->id();
  }
  absl::Status Delete(const std::string& id, absl::Time) override {
    absl::MutexLock lock(&mu_);
    absl::Status st = controller_.Delete(id).status();
    return absl::IsNotFound(st) ? absl::OkStatus() : st;
  }
  absl::StatusOr<std::vector<VirtualLinkRef>> List(const std::string& application,
                                                   absl::Time) override {
    absl::MutexLock lock(&mu_);
    std::vector<VirtualLinkRef> out;
    for (const netma::v1::VirtualLink& l : AllLocked(application)) {
      out.push_back({l.id(), l.application(), l.channel(), l.managed_by() == kSwmManagedBy});
    }
    return out;
  }
  std::vector<netma::v1::VirtualLink> All(const std::string& application = "") {
    absl::MutexLock lock(&mu_);
    return AllLocked(application);
  }
  netma::VirtualLinkController& controller() { return controller_; }
  int fail_create = 0;  // 1-based; 0 = never

 private:
  std::vector<netma::v1::VirtualLink> AllLocked(const std::string& application) {
    netma::VirtualLinkQuery query{.page_size = 1000, .application = application};
    return controller_.List(query)->links;
  }
  absl::Mutex mu_;
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<netma::VirtualLinkRepository> repository_;
  netma::VirtualLinkController controller_;
  int creates_ = 0;
};

// "shop" with a channel each way between eu and us.
Application TwoWayApp() {
  Application app = Bed::App("shop", 100'000'000);
  app.channels.push_back(Channel{.name = "back-front",
                                 .from = "back-0",
                                 .to = "front-0",
                                 .min_bandwidth_bps = 50'000'000,
                                 .max_delay_ns = 100 * test::kMs,
                                 .to_port = 8443});
  return app;
}

TEST_CASE(
    "A placement sets up one virtual link per inter-cluster channel and a removal deletes them",
          "[placement_service][channels]") {
  Bed bed;
  ControllerLinks netma(bed.clock);
  bed.service->SetVirtualLinks(&netma);
  absl::StatusOr<Operation> placed = bed.service->Place(bed.Request(TwoWayApp()));
  REQUIRE(placed.ok());
  pb::AssignmentPlan plan = PlanOf(*placed);
  std::vector<netma::v1::VirtualLink> links = netma.All();
  REQUIRE(links.size() == 2);
  std::map<std::string, netma::v1::VirtualLink> by_channel;
  for (const auto& l : links) by_channel[l.channel()] = l;
  CHECK(by_channel["front-back"].source_cluster() == "eu");
  CHECK(by_channel["front-back"].target_cluster() == "us");
  CHECK(by_channel["front-back"].target_endpoint() == "shop-back-0.us:80");
  CHECK(by_channel["front-back"].min_bandwidth_bps() == 100'000'000);
  CHECK(by_channel["back-front"].target_endpoint() == "shop-front-0.eu:8443");
  CHECK(by_channel["back-front"].managed_by() == "swm");
  for (const pb::ChannelPath& c : plan.channels()) {
    CHECK(c.virtual_link_id() == by_channel[c.channel()].id());
  }
  int created = 0;
  for (const pb::PlanAction& a : plan.actions()) {
    if (a.type() != pb::ACTION_TYPE_CREATE_CHANNEL) continue;
    CHECK(a.result() == pb::ACTION_RESULT_SUCCEEDED);
    ++created;
  }
  CHECK(created == 2);

  absl::StatusOr<pb::AssignmentPlan> removed = bed.service->Release({.application = "shop"});
  REQUIRE(removed.ok());
  CHECK(netma.All().empty());
  int deleted = 0;
  for (const pb::PlanAction& a : removed->actions()) {
    if (a.type() == pb::ACTION_TYPE_DELETE_CHANNEL) {
      CHECK(a.result() == pb::ACTION_RESULT_SUCCEEDED);
      ++deleted;
    }
  }
  CHECK(deleted == 2);
}

TEST_CASE("A fault between the pods and the virtual links rolls back both",
          "[placement_service][channels]") {
  Bed bed;
  ControllerLinks netma(bed.clock);
  bed.service->SetVirtualLinks(&netma);
  netma.fail_create = 2;  // the first link is made, the second fails
  absl::StatusOr<Operation> placed = bed.service->Place(bed.Request(TwoWayApp()));
  REQUIRE(absl::IsAborted(placed.status()));
  CHECK_THAT(std::string(placed.status().message()),
             Catch::Contains("virtual link for channel") && Catch::Contains("connection reset"));
  CHECK(bed.Pods("eu") == 0);
  CHECK(bed.Pods("us") == 0);
  CHECK(netma.All().empty());  // the first link went with the pods
  CHECK(bed.service->HeldBandwidth("eu", "us", ServiceClass::kBestEffort) == 0);
  absl::StatusOr<std::optional<pb::AssignmentPlan>> stored = bed.repo.Latest("shop");
  REQUIRE(stored.ok());
  REQUIRE(stored->has_value());
  CHECK((*stored)->phase() == pb::PLAN_PHASE_ROLLED_BACK);
  bool failed_channel = false;
  for (const pb::PlanAction& a : (*stored)->actions()) {
    if (a.type() == pb::ACTION_TYPE_CREATE_CHANNEL && a.result() == pb::ACTION_RESULT_FAILED) {
      failed_channel = true;
    }
    CHECK(a.result() != pb::ACTION_RESULT_SUCCEEDED);
  }
  CHECK(failed_channel);
  // The retry places both again.
  REQUIRE(bed.service->Place(bed.Request(TwoWayApp())).ok());
  CHECK(netma.All().size() == 2);
  CHECK(bed.Pods("eu") == 1);
}

TEST_CASE("A placement that rolled back leaves its request_id free: the retry places again",
          "[placement_service][channels]") {
  // ACM resends an unanswered or transiently failed placement with the same
  // request_id; one answered from the rolled-back attempt would fail forever.
  Bed bed;
  ControllerLinks netma(bed.clock);
  bed.service->SetVirtualLinks(&netma);
  netma.fail_create = 1;  // NetMA away in the middle of the commit
  absl::StatusOr<Operation> first = bed.service->Place(bed.Request(TwoWayApp(), "acm/shop-1"));
  REQUIRE(absl::IsAborted(first.status()));
  CHECK(bed.Pods("eu") + bed.Pods("us") == 0);
  absl::StatusOr<Operation> retry = bed.service->Place(bed.Request(TwoWayApp(), "acm/shop-1"));
  REQUIRE(retry.ok());
  CHECK(PlanOf(*retry).phase() == pb::PLAN_PHASE_DONE);
  CHECK(bed.Pods("eu") == 1);
  // Answered now: the same id again gets this placement, not a second one.
  absl::StatusOr<Operation> again = bed.service->Place(bed.Request(TwoWayApp(), "acm/shop-1"));
  REQUIRE(again.ok());
  CHECK(again->id() == retry->id());
  CHECK(bed.Pods("eu") == 1);
}

TEST_CASE("NetMA refusing a channel's bandwidth rolls the plan back and names the link",
          "[placement_service][channels]") {
  Bed bed;
  ControllerLinks netma(bed.clock);
  // NetMA measured only 80 Mbps on eu -> us; the hub's configured 1 Gbps is stale.
  netma.controller().SetCapacity(
      [](const std::string& from, const std::string& to,
         codeco::common::v1::ServiceClass) -> std::optional<int64_t> {
        if (from == "eu" && to == "us") return 80'000'000;
        return std::nullopt;
      });
  bed.service->SetVirtualLinks(&netma);
  absl::StatusOr<Operation> placed = bed.service->Place(bed.Request(Bed::App("shop", 100'000'000)));
  REQUIRE(absl::IsAborted(placed.status()));
  CHECK_THAT(std::string(placed.status().message()),
             Catch::Contains("eu->us") && Catch::Contains("80000000 bps"));
  CHECK(bed.Pods("eu") + bed.Pods("us") == 0);
  REQUIRE(bed.service->Place(bed.Request(Bed::App("shop", 60'000'000))).ok());
  CHECK(netma.All().size() == 1);
}

TEST_CASE("Reconcile deletes the virtual links no placed plan holds and leaves hand-made ones",
          "[placement_service][channels]") {
  Bed bed;
  ControllerLinks netma(bed.clock);
  bed.service->SetVirtualLinks(&netma);
  REQUIRE(bed.service->Place(bed.Request(Bed::App("shop", 1'000'000))).ok());
  // A link of a plan the hub never stored, and one made by an operator.
  REQUIRE(netma.Create({.application = "ghost", .channel = "a-b", .source_cluster = "eu",
                        .target_cluster = "us", .target_endpoint = "ghost-b.us:80"},
                       "", absl::InfiniteFuture())
              .ok());
  netma::v1::VirtualLink by_hand;
  by_hand.set_application("ops");
  by_hand.set_channel("tunnel");
  by_hand.set_source_cluster("us");
  by_hand.set_target_cluster("eu");
  by_hand.set_target_endpoint("10.0.0.1:22");
  REQUIRE(netma.controller().Create(by_hand, "").ok());
  RecoveryReport report = bed.service->Reconcile();
  CHECK(report.errors.empty());
  REQUIRE(report.orphans.size() == 1);
  CHECK(absl::StartsWith(report.orphans[0], "virtual-link/vl-"));
  std::set<std::string> left;
  for (const auto& l : netma.All()) left.insert(l.application());
  CHECK(left == std::set<std::string>{"ops", "shop"});
}

TEST_CASE("Recover sets up the virtual links of a plan the hub left COMMITTING",
          "[placement_service][channels]") {
  Bed bed;
  ControllerLinks netma(bed.clock);
  bed.service->SetVirtualLinks(&netma);
  bed.crash.at = pb::PLAN_PHASE_COMMITTING;
  bed.repo.crash = &bed.crash;
  (void)bed.service->Place(bed.Request(Bed::App("shop", 1'000'000)));
  CHECK(netma.All().empty());
  bed.Restart();
  bed.service->SetVirtualLinks(&netma);
  RecoveryReport report = bed.service->Recover();
  REQUIRE(report.committed.size() == 1);
  REQUIRE(netma.All().size() == 1);
  absl::StatusOr<std::optional<pb::AssignmentPlan>> stored = bed.repo.Latest("shop");
  REQUIRE(stored.ok());
  CHECK((*stored)->channels(0).virtual_link_id() == netma.All()[0].id());
}

TEST_CASE("Reconcile deletes pods whose plan the hub does not hold", "[placement_service]") {
  Bed bed;
  REQUIRE(bed.service->Place(bed.Request(Bed::App("shop", 0))).ok());
  // An orphan: a pod of a plan nobody stored (e.g. a hub that lost its disk).
  FakeCluster& eu = *bed.clusters["eu"];
  REQUIRE(eu.runtime.CreatePod(PodInfo{"ghost-front-0", "eu-n0", {100, kGi, 0}}).ok());
  eu.reservation_of["ghost-front-0"] = LabelValue("ghost/1/eu");
  // A pod without the labels is none of the hub's business.
  REQUIRE(eu.runtime.CreatePod(PodInfo{"unlabelled", "eu-n0", {100, kGi, 0}}).ok());

  RecoveryReport report = bed.service->Reconcile();
  CHECK(report.errors.empty());
  CHECK(report.orphans == std::vector<std::string>{"eu/ghost-front-0"});
  std::set<std::string> left;
  absl::StatusOr<std::vector<PodInfo>> pods = eu.runtime.ListPods();
  REQUIRE(pods.ok());
  for (const PodInfo& p : *pods) left.insert(p.name);
  CHECK(left == std::set<std::string>{"shop-front-0", "unlabelled"});

  // Once the application is removed its pods are orphans too (here put back
  // by hand, as a cluster that was away during the removal would keep them).
  REQUIRE(bed.service->Release({.application = "shop"}).ok());
  REQUIRE(eu.runtime.CreatePod(PodInfo{"shop-front-0", "eu-n0", {500, kGi, 0}}).ok());
  report = bed.service->Reconcile();
  CHECK(report.orphans == std::vector<std::string>{"eu/shop-front-0"});
  CHECK(bed.Pods("eu") == 1);  // "unlabelled"
}

// An application "name" with two workloads that may run anywhere and a
// channel between them (within 100 ms), for the migration tests.
Application MovableApp(const std::string& name, int64_t cpu = 500) {
  Application app{.name = name};
  Workload front = test::MakeWorkload("front-0", cpu);
  front.service = "front";
  Workload back = test::MakeWorkload("back-0", cpu);
  back.service = "back";
  app.workloads = {front, back};
  app.channels.push_back(Channel{
      .name = "front-back", .from = "front-0", .to = "back-0", .max_delay_ns = 100 * test::kMs});
  return app;
}

MigrateRequest MoveOf(Bed& bed, const Application& app, const std::string& workload,
                      const std::string& target_cluster = "", const std::string& request_id = "") {
  MigrateRequest r{.app = app,
                   .workload = workload,
                   .target_cluster = target_cluster,
                   .request_id = request_id,
                   .executors = &bed.factory};
  r.members = {MemberRef{.cluster = "eu"}, MemberRef{.cluster = "us"}};
  return r;
}

pb::Migration MigrationOf(const Operation& op) {
  pb::Migration m;
  REQUIRE(op.result().UnpackTo(&m));
  return m;
}

std::set<std::string> PodNames(Bed& bed, const std::string& cluster) {
  std::set<std::string> out;
  absl::StatusOr<std::vector<PodInfo>> pods = bed.clusters[cluster]->runtime.ListPods();
  REQUIRE(pods.ok());
  for (const PodInfo& p : *pods) out.insert(p.name);
  return out;
}

const pb::WorkloadTarget& TargetOf(const pb::AssignmentPlan& plan, const std::string& workload) {
  for (const pb::WorkloadTarget& t : plan.targets()) {
    if (t.workload() == workload) return t;
  }
  FAIL("no target for " << workload);
  return plan.targets(0);
}

TEST_CASE("Migrate moves one workload make-before-break and leaves the others where they run",
          "[placement_service][migration]") {
  Bed bed;
  const Application app = MovableApp("shop");
  REQUIRE(bed.service->Place(bed.Request(app)).ok());
  const pb::AssignmentPlan placed = bed.repo.Latest("shop")->value();
  const pb::WorkloadTarget front = TargetOf(placed, "front-0");
  const pb::WorkloadTarget back = TargetOf(placed, "back-0");
  CHECK(back.reservation() == "shop/1/" + back.cluster());
  const std::string away_from = back.cluster();
  const std::string to = away_from == "eu" ? "us" : "eu";

  absl::StatusOr<Operation> op = bed.service->Migrate(MoveOf(bed, app, "back-0", to, "m-1"));
  REQUIRE(op.ok());
  CHECK(op->done());
  CHECK(op->kind() == kMigrateKind);
  pb::Migration m = MigrationOf(*op);
  CHECK(m.id() == "shop/1");
  CHECK(m.phase() == pb::MIGRATION_PHASE_DONE);
  CHECK(m.reason() == pb::MIGRATION_REASON_MANUAL);
  CHECK(m.source().cluster() == away_from);
  CHECK(m.target().cluster() == to);
  CHECK(m.target().pod() == "shop-back-0-r2");
  CHECK(m.target().reservation() == "shop/2/" + to);
  // The target was reserved and running before the source was touched.
  CHECK(bed.repo.migration_phases ==
        std::vector<pb::MigrationPhase>{pb::MIGRATION_PHASE_RESERVING,
                                        pb::MIGRATION_PHASE_RESTORING,
                                        pb::MIGRATION_PHASE_CUTTING_OVER,
                                        pb::MIGRATION_PHASE_DONE});
  CHECK(PodNames(bed, to).count("shop-back-0-r2") == 1);
  CHECK(PodNames(bed, away_from).count("shop-back-0") == 0);
  CHECK(PodNames(bed, front.cluster()).count("shop-front-0") == 1);

  // The new plan revision: front untouched, back moved, the channel re-checked.
  pb::AssignmentPlan next = bed.repo.Latest("shop")->value();
  CHECK(next.plan_revision() == 2);
  CHECK(next.incumbent_plan_revision() == 1);
  CHECK(next.phase() == pb::PLAN_PHASE_DONE);
  CHECK(TargetOf(next, "front-0").node() == front.node());
  CHECK(TargetOf(next, "front-0").reservation() == "shop/1/" + front.cluster());
  CHECK(TargetOf(next, "back-0").cluster() == to);
  REQUIRE(next.channels_size() == 1);
  CHECK(next.channels(0).satisfied());
  CHECK(next.channels(0).target_endpoint() == "shop-back-0-r2." + to + ":80");

  // The request id answers the same migration again; nothing moves.
  absl::StatusOr<Operation> again = bed.service->Migrate(MoveOf(bed, app, "back-0", to, "m-1"));
  REQUIRE(again.ok());
  CHECK(MigrationOf(*again).id() == "shop/1");
  CHECK(bed.repo.Latest("shop")->value().plan_revision() == 2);

  // With no target named the solve never picks the node it runs on: back
  // to where it came from (each cluster has one node).
  absl::StatusOr<Operation> back_home = bed.service->Migrate(MoveOf(bed, app, "back-0"));
  REQUIRE(back_home.ok());
  CHECK(MigrationOf(*back_home).id() == "shop/2");
  CHECK(MigrationOf(*back_home).target().cluster() == away_from);
  CHECK(PodNames(bed, away_from).count("shop-back-0-r3") == 1);
  CHECK(PodNames(bed, to).count("shop-back-0-r2") == 0);

  // The reconciler sees nothing to delete; the removal takes every pod,
  // each from the reservation it was created under.
  RecoveryReport report = bed.service->Reconcile();
  CHECK(report.orphans.empty());
  CHECK(report.errors.empty());
  REQUIRE(bed.service->Release({.application = "shop"}).ok());
  CHECK(bed.Pods("eu") == 0);
  CHECK(bed.Pods("us") == 0);
  CHECK(bed.clusters["eu"]->executor.ledger().size() == 0);
  CHECK(bed.clusters["us"]->executor.ledger().size() == 0);
}

// MovableApp with `backs` replicas of back, each with a channel from front.
Application ScaledApp(const std::string& name, int backs, int64_t cpu = 500) {
  Application app = MovableApp(name, cpu);
  app.workloads.pop_back();
  app.channels.clear();
  for (int i = 0; i < backs; ++i) {
    Workload back = test::MakeWorkload("back-" + std::to_string(i), cpu);
    back.service = "back";
    app.workloads.push_back(back);
    app.channels.push_back(Channel{.name = "front-back-0-" + std::to_string(i),
                                   .from = "front-0",
                                   .to = back.name,
                                   .max_delay_ns = 100 * test::kMs});
  }
  return app;
}

ScaleRequest ScaleOf(Bed& bed, const Application& app, int64_t spec_revision,
                     const std::string& request_id = "") {
  ScaleRequest r{.app = app,
                 .spec_revision = spec_revision,
                 .request_id = request_id,
                 .executors = &bed.factory};
  r.members = {MemberRef{.cluster = "eu"}, MemberRef{.cluster = "us"}};
  return r;
}

std::set<std::string> Workloads(const pb::AssignmentPlan& plan) {
  std::set<std::string> out;
  for (const pb::WorkloadTarget& t : plan.targets()) out.insert(t.workload());
  return out;
}

TEST_CASE("Scale adds and removes replicas in place and leaves the other pods running",
          "[placement_service][scale]") {
  Bed bed;
  REQUIRE(bed.service->Place(bed.Request(ScaledApp("shop", 2))).ok());
  const pb::AssignmentPlan placed = bed.repo.Latest("shop")->value();
  const pb::WorkloadTarget front = TargetOf(placed, "front-0");
  const pb::WorkloadTarget back0 = TargetOf(placed, "back-0");
  const pb::WorkloadTarget back1 = TargetOf(placed, "back-1");

  // Up from 2 to 4 backs: two replicas added, each reserved and running
  // before the plan holds it; nothing else touched.
  absl::StatusOr<Operation> up = bed.service->Scale(ScaleOf(bed, ScaledApp("shop", 4), 2, "s-1"));
  REQUIRE(up.ok());
  CHECK(up->done());
  CHECK(up->kind() == kPlaceKind);
  CHECK_FALSE(up->has_error());
  pb::AssignmentPlan plan;
  REQUIRE(up->result().UnpackTo(&plan));
  CHECK(plan.plan_revision() == 3);
  CHECK(plan.spec_revision() == 2);
  CHECK(plan.unplaced().empty());
  CHECK(Workloads(plan) ==
        std::set<std::string>{"front-0", "back-0", "back-1", "back-2", "back-3"});
  CHECK(TargetOf(plan, "front-0").pod() == front.pod());
  CHECK(TargetOf(plan, "back-0").pod() == back0.pod());
  CHECK(TargetOf(plan, "back-1").pod() == back1.pod());
  CHECK(TargetOf(plan, "back-2").pod() == "shop-back-2-r2");
  CHECK(TargetOf(plan, "back-3").pod() == "shop-back-3-r3");
  CHECK(plan.channels_size() == 4);
  for (const pb::ChannelPath& c : plan.channels()) CHECK(c.satisfied());
  absl::StatusOr<pb::Migration> added = bed.repo.GetMigration("shop/1");
  REQUIRE(added.ok());
  CHECK(added->reason() == pb::MIGRATION_REASON_SCALE_UP);
  CHECK(added->phase() == pb::MIGRATION_PHASE_DONE);
  CHECK_FALSE(added->has_source());
  CHECK(added->target().workload() == "back-2");
  CHECK(bed.Pods("eu") + bed.Pods("us") == 5);
  CHECK(PodNames(bed, front.cluster()).count(front.pod()) == 1);

  // The same request again answers the same scale; nothing changes.
  absl::StatusOr<Operation> again =
      bed.service->Scale(ScaleOf(bed, ScaledApp("shop", 4), 2, "s-1"));
  REQUIRE(again.ok());
  CHECK(again->id() == up->id());
  CHECK(bed.repo.Latest("shop")->value().plan_revision() == 3);

  // Down to 1 back: the highest-numbered replicas go, one plan each, each
  // written before its pod is removed; their channels go with them.
  absl::StatusOr<Operation> down = bed.service->Scale(ScaleOf(bed, ScaledApp("shop", 1), 3));
  REQUIRE(down.ok());
  REQUIRE(down->result().UnpackTo(&plan));
  CHECK(plan.plan_revision() == 6);
  CHECK(plan.spec_revision() == 3);
  CHECK(Workloads(plan) == std::set<std::string>{"front-0", "back-0"});
  REQUIRE(plan.channels_size() == 1);
  CHECK(plan.channels(0).to_workload() == "back-0");
  CHECK(bed.Pods("eu") + bed.Pods("us") == 2);
  CHECK(PodNames(bed, back0.cluster()).count(back0.pod()) == 1);
  absl::StatusOr<pb::Migration> removed = bed.repo.GetMigration("shop/3");
  REQUIRE(removed.ok());
  CHECK(removed->reason() == pb::MIGRATION_REASON_SCALE_DOWN);
  CHECK(removed->phase() == pb::MIGRATION_PHASE_DONE);
  CHECK(removed->workload() == "back-3");
  CHECK_FALSE(removed->has_target());
  CHECK(bed.repo.GetMigration("shop/4")->workload() == "back-2");
  CHECK(bed.repo.GetMigration("shop/5")->workload() == "back-1");

  // No change of count: one plan revision carries the new spec revision.
  absl::StatusOr<Operation> same = bed.service->Scale(ScaleOf(bed, ScaledApp("shop", 1), 4));
  REQUIRE(same.ok());
  REQUIRE(same->result().UnpackTo(&plan));
  CHECK(plan.plan_revision() == 7);
  CHECK(plan.spec_revision() == 4);
  CHECK(plan.actions().empty());
  CHECK(Workloads(plan) == std::set<std::string>{"front-0", "back-0"});

  // What was scaled is what a migration, the reconciler and a removal see.
  absl::StatusOr<Operation> moved =
      bed.service->Migrate(MoveOf(bed, ScaledApp("shop", 1), "back-0"));
  REQUIRE(moved.ok());
  CHECK(MigrationOf(*moved).phase() == pb::MIGRATION_PHASE_DONE);
  RecoveryReport report = bed.service->Reconcile();
  CHECK(report.orphans.empty());
  CHECK(report.errors.empty());
  REQUIRE(bed.service->Release({.application = "shop"}).ok());
  CHECK(bed.Pods("eu") == 0);
  CHECK(bed.Pods("us") == 0);
  CHECK(bed.clusters["eu"]->executor.ledger().size() == 0);
  CHECK(bed.clusters["us"]->executor.ledger().size() == 0);
}

TEST_CASE("Scale adds the replicas that fit and lists the others as unplaced",
          "[placement_service][scale]") {
  Bed bed;
  // 1,500 millicores each: a 4,000-millicore node takes two.
  REQUIRE(bed.service->Place(bed.Request(ScaledApp("shop", 1, 1500))).ok());
  absl::StatusOr<Operation> up =
      bed.service->Scale(ScaleOf(bed, ScaledApp("shop", 4, 1500), 2, "s-1"));
  REQUIRE(up.ok());
  CHECK_FALSE(up->has_error());
  pb::AssignmentPlan plan;
  REQUIRE(up->result().UnpackTo(&plan));
  CHECK(plan.phase() == pb::PLAN_PHASE_DONE);
  CHECK(plan.targets_size() == 4);
  REQUIRE(plan.unplaced_size() == 1);
  CHECK(plan.unplaced(0).workload() == "back-3");
  CHECK_THAT(plan.unplaced(0).reason(), Catch::Contains("no node can take workload back-3"));
  CHECK(bed.repo.Latest("shop")->value().plan_revision() == plan.plan_revision());
  CHECK(bed.Pods("eu") + bed.Pods("us") == 4);

  // A scale of an application that is not placed changes nothing.
  absl::StatusOr<Operation> none = bed.service->Scale(ScaleOf(bed, ScaledApp("other", 2), 1));
  CHECK(absl::IsFailedPrecondition(none.status()));
  // MigrateWorkload does not take a scale's reasons for a move.
  MigrateRequest down = MoveOf(bed, ScaledApp("shop", 4, 1500), "back-1");
  down.reason = pb::MIGRATION_REASON_SCALE_DOWN;
  CHECK(absl::IsInvalidArgument(bed.service->Migrate(down).status()));
}

TEST_CASE("Recover rolls back a replica being added and finishes one being removed",
          "[placement_service][scale]") {
  Bed bed;
  REQUIRE(bed.service->Place(bed.Request(ScaledApp("shop", 2))).ok());
  bed.repo.crash = &bed.crash;
  SECTION("a replica being added") {
    bed.crash.migration_at = pb::MIGRATION_PHASE_RESTORING;
    (void)bed.service->Scale(ScaleOf(bed, ScaledApp("shop", 3), 2, "s-1"));
    REQUIRE(bed.crash.happened);
    CHECK(bed.repo.Latest("shop")->value().plan_revision() == 1);
    bed.Restart();
    RecoveryReport report = bed.service->Recover();
    CHECK(report.errors.empty());
    CHECK(report.migrations == std::vector<std::string>{"shop/1"});
    CHECK(bed.repo.GetMigration("shop/1")->phase() == pb::MIGRATION_PHASE_ROLLED_BACK);
    CHECK(bed.Pods("eu") + bed.Pods("us") == 3);
    // The request id is free: the retry adds it.
    absl::StatusOr<Operation> retry =
        bed.service->Scale(ScaleOf(bed, ScaledApp("shop", 3), 2, "s-1"));
    REQUIRE(retry.ok());
    CHECK(Workloads(bed.repo.Latest("shop")->value()).count("back-2") == 1);
    CHECK(bed.Pods("eu") + bed.Pods("us") == 4);
  }
  SECTION("a replica being removed") {
    bed.crash.migration_at = pb::MIGRATION_PHASE_CUTTING_OVER;
    (void)bed.service->Scale(ScaleOf(bed, ScaledApp("shop", 1), 2));
    REQUIRE(bed.crash.happened);
    // The plan without it is written (the record says CUTTING_OVER: its
    // pod may still run).
    CHECK(Workloads(bed.repo.Latest("shop")->value()) ==
          std::set<std::string>{"front-0", "back-0"});
    CHECK(bed.repo.GetMigration("shop/1")->phase() == pb::MIGRATION_PHASE_CUTTING_OVER);
    bed.Restart();
    RecoveryReport report = bed.service->Recover();
    CHECK(report.errors.empty());
    CHECK(bed.repo.GetMigration("shop/1")->phase() == pb::MIGRATION_PHASE_DONE);
    CHECK(bed.Pods("eu") + bed.Pods("us") == 2);
  }
  RecoveryReport report = bed.service->Reconcile();
  CHECK(report.orphans.empty());
}

TEST_CASE("Migrate names the field of a bad request and moves nothing",
          "[placement_service][migration]") {
  Bed bed;
  const Application app = MovableApp("shop");
  auto message = [](const absl::StatusOr<Operation>& op) {
    return std::string(op.status().message());
  };
  // Not placed yet.
  absl::StatusOr<Operation> op = bed.service->Migrate(MoveOf(bed, app, "back-0"));
  CHECK(absl::IsFailedPrecondition(op.status()));
  CHECK(message(op).find("not placed") != std::string::npos);

  REQUIRE(bed.service->Place(bed.Request(app)).ok());
  const pb::WorkloadTarget back = TargetOf(bed.repo.Latest("shop")->value(), "back-0");
  op = bed.service->Migrate(MoveOf(bed, app, "db-0"));
  CHECK(absl::IsInvalidArgument(op.status()));
  CHECK(message(op).find("workload") != std::string::npos);
  op = bed.service->Migrate(MoveOf(bed, app, ""));
  CHECK(absl::IsInvalidArgument(op.status()));
  CHECK(message(op).find("workload") != std::string::npos);
  op = bed.service->Migrate(MoveOf(bed, app, "back-0", "mars"));
  CHECK(absl::IsInvalidArgument(op.status()));
  CHECK(message(op).find("target_cluster") != std::string::npos);
  MigrateRequest node_only = MoveOf(bed, app, "back-0");
  node_only.target_node = "eu-n0";
  op = bed.service->Migrate(node_only);
  CHECK(absl::IsInvalidArgument(op.status()));
  CHECK(message(op).find("target_node") != std::string::npos);
  MigrateRequest same = MoveOf(bed, app, "back-0", back.cluster());
  same.target_node = back.node();
  op = bed.service->Migrate(same);
  CHECK(absl::IsInvalidArgument(op.status()));
  CHECK(message(op).find("already runs") != std::string::npos);
  MigrateRequest unknown_node = MoveOf(bed, app, "back-0", "eu");
  unknown_node.target_node = "eu-n9";
  op = bed.service->Migrate(unknown_node);
  CHECK(absl::IsInvalidArgument(op.status()));
  CHECK(message(op).find("target_node") != std::string::npos);

  CHECK(bed.repo.migration_phases.empty());
  CHECK(bed.repo.Latest("shop")->value().plan_revision() == 1);
}

TEST_CASE("A migration with nowhere to go is stored FAILED and the workload stays",
          "[placement_service][migration]") {
  Bed bed;
  // 3 CPUs each on 4-CPU nodes: neither fits beside the other.
  const Application app = MovableApp("shop", 3000);
  REQUIRE(bed.service->Place(bed.Request(app)).ok());
  const pb::WorkloadTarget back = TargetOf(bed.repo.Latest("shop")->value(), "back-0");
  absl::StatusOr<Operation> op = bed.service->Migrate(MoveOf(bed, app, "back-0", "", "m-1"));
  REQUIRE(absl::IsFailedPrecondition(op.status()));
  CHECK(std::string(op.status().message()).find("back-0") != std::string::npos);
  CHECK(bed.repo.migration_phases == std::vector<pb::MigrationPhase>{pb::MIGRATION_PHASE_FAILED});
  absl::StatusOr<pb::Migration> stored = bed.repo.GetMigration("shop/1");
  REQUIRE(stored.ok());
  CHECK(stored->phase() == pb::MIGRATION_PHASE_FAILED);
  CHECK(!stored->error().message().empty());
  CHECK(PodNames(bed, back.cluster()).count("shop-back-0") == 1);
  CHECK(bed.repo.Latest("shop")->value().plan_revision() == 1);
  CHECK(bed.clusters["eu"]->executor.ledger().size() == 0);
  CHECK(bed.clusters["us"]->executor.ledger().size() == 0);
  // The request id answers the refusal again.
  CHECK(absl::IsFailedPrecondition(
      bed.service->Migrate(MoveOf(bed, app, "back-0", "", "m-1")).status()));
}

TEST_CASE("A source cluster that is away keeps the migration CUTTING_OVER until recovery",
          "[placement_service][migration]") {
  Bed bed;
  Application app = MovableApp("shop");
  app.channels.clear();
  app.workloads[0].allowed_regions = {"eu"};
  app.workloads[1].allowed_regions = {"us"};
  REQUIRE(bed.service->Place(bed.Request(app)).ok());
  app.workloads[1].allowed_regions.clear();
  // "us" is cut: back-0 is evacuated to "eu"; its old pod cannot be removed.
  bed.members.away = {"us"};
  absl::StatusOr<Operation> op = bed.service->Migrate(MoveOf(bed, app, "back-0", "eu"));
  REQUIRE(op.ok());
  CHECK(!op->done());
  CHECK(op->phase() == "CUTTING_OVER");
  pb::Migration m = MigrationOf(*op);
  CHECK(m.phase() == pb::MIGRATION_PHASE_CUTTING_OVER);
  CHECK(m.error().message().find("not removed yet") != std::string::npos);
  CHECK(PodNames(bed, "eu").count("shop-back-0-r2") == 1);
  CHECK(PodNames(bed, "us").count("shop-back-0") == 1);
  // The next move of the application starts from the plan this one wrote
  // (front-0 has nowhere else to go here, but it is not held back).
  CHECK(absl::IsFailedPrecondition(bed.service->Migrate(MoveOf(bed, app, "front-0")).status()));

  // Recovery while "us" is still away keeps it; once back, it finishes.
  RecoveryReport report = bed.service->Recover();
  CHECK(report.migrations.empty());
  CHECK(report.errors.size() == 1);
  bed.members.away.clear();
  report = bed.service->Recover();
  CHECK(report.errors.empty());
  CHECK(report.migrations == std::vector<std::string>{"shop/1"});
  CHECK(bed.repo.GetMigration("shop/1")->phase() == pb::MIGRATION_PHASE_DONE);
  CHECK(bed.repo.GetOperation(m.operation_id())->done());
  CHECK(PodNames(bed, "us").count("shop-back-0") == 0);
  CHECK(PodNames(bed, "eu").count("shop-back-0-r2") == 1);
  // The plan's DeletePod action is done too.
  const pb::AssignmentPlan plan = bed.repo.Latest("shop")->value();
  bool deleted = false;
  for (const pb::PlanAction& a : plan.actions()) {
    if (a.type() == pb::ACTION_TYPE_DELETE_POD) deleted = a.result() == pb::ACTION_RESULT_SUCCEEDED;
  }
  CHECK(deleted);
}

TEST_CASE("Recover rolls back a migration the hub left before its new plan",
          "[placement_service][migration]") {
  Bed bed;
  const Application app = MovableApp("shop");
  REQUIRE(bed.service->Place(bed.Request(app)).ok());
  const pb::WorkloadTarget back = TargetOf(bed.repo.Latest("shop")->value(), "back-0");
  const std::string to = back.cluster() == "eu" ? "us" : "eu";

  SECTION("while reserving") { bed.crash.migration_at = pb::MIGRATION_PHASE_RESERVING; }
  SECTION("while the target pod starts") {
    bed.crash.migration_at = pb::MIGRATION_PHASE_RESTORING;
  }
  bed.repo.crash = &bed.crash;
  (void)bed.service->Migrate(MoveOf(bed, app, "back-0", to, "m-1"));
  REQUIRE(bed.crash.happened);
  // The dead hub wrote that phase and went no further: nothing created, no
  // new plan.
  CHECK(bed.repo.Latest("shop")->value().plan_revision() == 1);

  bed.Restart();
  // A reservation the dead hub's Reserve left in the target cluster.
  REQUIRE(bed.clusters[to]
              ->executor
              .Reserve("shop/2/" + to,
                       {ReservationItem{"shop-back-0-r2", to + "-n0", {500, kGi, 0}}},
                       absl::Minutes(1))
              .ok());
  RecoveryReport report = bed.service->Recover();
  CHECK(report.errors.empty());
  CHECK(report.migrations == std::vector<std::string>{"shop/1"});
  absl::StatusOr<pb::Migration> m = bed.repo.GetMigration("shop/1");
  REQUIRE(m.ok());
  CHECK(m->phase() == pb::MIGRATION_PHASE_ROLLED_BACK);
  CHECK(bed.clusters[to]->executor.ledger().size() == 0);
  CHECK(PodNames(bed, back.cluster()).count("shop-back-0") == 1);
  // The request id is free: the retry moves it (its plan is revision 2).
  absl::StatusOr<Operation> retry = bed.service->Migrate(MoveOf(bed, app, "back-0", to, "m-1"));
  REQUIRE(retry.ok());
  CHECK(MigrationOf(*retry).id() == "shop/2");
  CHECK(MigrationOf(*retry).phase() == pb::MIGRATION_PHASE_DONE);
}

TEST_CASE("Recover finishes a migration the hub left CUTTING_OVER",
          "[placement_service][migration]") {
  Bed bed;
  const Application app = MovableApp("shop");
  REQUIRE(bed.service->Place(bed.Request(app)).ok());
  const pb::WorkloadTarget back = TargetOf(bed.repo.Latest("shop")->value(), "back-0");
  const std::string to = back.cluster() == "eu" ? "us" : "eu";
  bed.crash.migration_at = pb::MIGRATION_PHASE_CUTTING_OVER;
  bed.repo.crash = &bed.crash;
  (void)bed.service->Migrate(MoveOf(bed, app, "back-0", to));
  REQUIRE(bed.crash.happened);
  CHECK(bed.repo.Latest("shop")->value().plan_revision() == 2);
  CHECK(bed.repo.GetMigration("shop/1")->phase() == pb::MIGRATION_PHASE_CUTTING_OVER);

  bed.Restart();
  RecoveryReport report = bed.service->Recover();
  CHECK(report.errors.empty());
  CHECK(report.migrations == std::vector<std::string>{"shop/1"});
  CHECK(bed.repo.GetMigration("shop/1")->phase() == pb::MIGRATION_PHASE_DONE);
  CHECK(PodNames(bed, back.cluster()).count("shop-back-0") == 0);
  CHECK(PodNames(bed, to).count("shop-back-0-r2") == 1);
}

TEST_CASE("A cluster's workloads leave it one by one though their channels join them",
          "[placement_service][migration]") {
  Bed bed;
  // Both in us, and no link between the clusters: a channel from a workload
  // moved to eu to a peer pinned in us could not be met.
  Application placed = MovableApp("shop");
  for (Workload& w : placed.workloads) w.allowed_regions = {"us"};
  REQUIRE(bed.service->Place(bed.Request(placed)).ok());
  bed.links.links.clear();
  const Application app = MovableApp("shop");
  MigrateRequest first = MoveOf(bed, app, "back-0");
  // A manual move keeps the peer pinned: nowhere meets the channel.
  CHECK(absl::IsFailedPrecondition(bed.service->Migrate(first).status()));
  // A move out of a failed cluster leaves the peers there out (they leave too).
  first.reason = pb::MIGRATION_REASON_CLUSTER_FAILURE;
  absl::StatusOr<Operation> moved = bed.service->Migrate(first);
  REQUIRE(moved.ok());
  CHECK(MigrationOf(*moved).target().cluster() == "eu");
  MigrateRequest second = MoveOf(bed, app, "front-0");
  second.reason = pb::MIGRATION_REASON_CLUSTER_FAILURE;
  moved = bed.service->Migrate(second);
  REQUIRE(moved.ok());
  CHECK(MigrationOf(*moved).target().cluster() == "eu");
  // The last move checked the channel against where its peer went.
  const pb::AssignmentPlan plan = bed.repo.Latest("shop")->value();
  REQUIRE(plan.channels_size() == 1);
  CHECK(plan.channels(0).clusters_size() == 1);
  CHECK(plan.channels(0).clusters(0) == "eu");
  CHECK(plan.channels(0).satisfied());
  // The sources in the failed cluster were not asked; recovery removes them.
  CHECK(bed.repo.GetMigration("shop/2")->phase() == pb::MIGRATION_PHASE_CUTTING_OVER);
  CHECK(bed.Pods("us") == 2);
  RecoveryReport report = bed.service->Recover();
  CHECK(report.migrations == std::vector<std::string>{"shop/2", "shop/3"});
  CHECK(bed.Pods("us") == 0);
}

TEST_CASE("Reconcile deletes a moved workload's source pod left behind and keeps the target",
          "[placement_service][migration]") {
  Bed bed;
  const Application app = MovableApp("shop");
  REQUIRE(bed.service->Place(bed.Request(app)).ok());
  const pb::WorkloadTarget back = TargetOf(bed.repo.Latest("shop")->value(), "back-0");
  const std::string to = back.cluster() == "eu" ? "us" : "eu";
  REQUIRE(bed.service->Migrate(MoveOf(bed, app, "back-0", to)).ok());
  // The old pod is back (a cluster that restored it from its own state):
  // its reservation still holds front-0 there, but not this pod.
  FakeCluster& source = *bed.clusters[back.cluster()];
  const std::string node = source.runtime.ListNodes().value().front().name;
  REQUIRE(source.runtime.CreatePod(PodInfo{"shop-back-0", node, {500, kGi, 0}}).ok());
  RecoveryReport report = bed.service->Reconcile();
  CHECK(report.errors.empty());
  CHECK(report.orphans == std::vector<std::string>{back.cluster() + "/shop-back-0"});
  CHECK(PodNames(bed, to).count("shop-back-0-r2") == 1);
}

// The checkpointer side of the bed's stateful moves: the state of a pod is
// a string in `state` ("cluster/pod"); a successful move copies it into the
// target pod and deletes the source pod (as the checkpointer's cut-over
// does). A backup copies a pod's state into `images`; a move from a backup
// copies the image into the target pod and leaves the source alone.
// Starting the same request again answers its first operation.
class BedStateMover final : public StateMover {
 public:
  enum class Outcome { kMoves, kFails, kRefuses, kHangs };
  explicit BedStateMover(Bed& bed) : bed_(bed) {}
  absl::StatusOr<std::string> Start(const StateMove& move, absl::Time) override {
    absl::MutexLock lock(&mu_);
    starts.push_back(move);
    if (auto it = ops_.find(move.request_id); it != ops_.end()) return it->second;
    if (outcome == Outcome::kRefuses) {
      return absl::FailedPreconditionError("pod " + move.source_pod + " is not running");
    }
    const std::string id = "migrate/op-" + std::to_string(ops_.size() + 1);
    ops_[move.request_id] = id;
    StateMoveProgress& p = progress_[id];
    p.phase = "pushing";
    if (outcome == Outcome::kHangs) return id;
    p.done = true;
    if (outcome == Outcome::kFails) {
      p.status = absl::UnavailableError("pushing to the registry: connection refused; " +
                                        move.source_pod + " serves on");
      return id;
    }
    if (!move.from_backup.empty()) {
      state[move.target_cluster + "/" + move.target_pod] = images[move.from_backup];
      return id;
    }
    state[move.target_cluster + "/" + move.target_pod] =
        state[move.source_cluster + "/" + move.source_pod];
    state.erase(move.source_cluster + "/" + move.source_pod);
    REQUIRE(bed_.clusters[move.source_cluster]->runtime.DeletePod(move.source_pod).ok());
    return id;
  }
  absl::StatusOr<StateMoveProgress> Await(const std::string&, const std::string& id,
                                          absl::Time) override {
    absl::MutexLock lock(&mu_);
    auto it = progress_.find(id);
    if (it == progress_.end()) return absl::NotFoundError("no operation " + id);
    return it->second;
  }
  absl::StatusOr<std::string> StartBackup(const StateBackupRequest& backup, absl::Time) override {
    absl::MutexLock lock(&mu_);
    backups.push_back(backup);
    if (auto it = ops_.find(backup.request_id); it != ops_.end()) return it->second;
    if (backup_outcome == Outcome::kRefuses) {
      return absl::FailedPreconditionError("pod " + backup.pod + " is not running");
    }
    const std::string n = std::to_string(ops_.size() + 1);
    const std::string id = "checkpoint/op-" + n;
    ops_[backup.request_id] = id;
    StateBackupProgress& p = backup_progress_[id];
    p.phase = "pushing";
    if (backup_outcome == Outcome::kHangs) return id;
    p.done = true;
    if (backup_outcome == Outcome::kFails) {
      p.status = absl::UnavailableError("pushing to the registry: connection refused");
      return id;
    }
    p.checkpoint_id = "ck-" + n;
    p.image_reference = "registry/backups:ck-" + n;
    p.state_bytes = 42;
    images[p.image_reference] = state[backup.cluster + "/" + backup.pod];
    return id;
  }
  absl::StatusOr<StateBackupProgress> AwaitBackup(const std::string&, const std::string& id,
                                                  absl::Time) override {
    absl::MutexLock lock(&mu_);
    auto it = backup_progress_.find(id);
    if (it == backup_progress_.end()) return absl::NotFoundError("no operation " + id);
    return it->second;
  }
  absl::Status DeleteBackup(const std::string& cluster, const std::string& checkpoint_id,
                            absl::Time) override {
    absl::MutexLock lock(&mu_);
    if (!deletable) return absl::UnavailableError("the checkpointer of " + cluster + " is away");
    deleted.push_back(cluster + ":" + checkpoint_id);
    return absl::OkStatus();
  }

  Outcome outcome = Outcome::kMoves;
  Outcome backup_outcome = Outcome::kMoves;
  bool deletable = true;  // DeleteBackup succeeds
  std::map<std::string, std::string> state;   // "cluster/pod" -> its data
  std::map<std::string, std::string> images;  // backup image -> the data in it
  std::vector<StateMove> starts;
  std::vector<StateBackupRequest> backups;
  std::vector<std::string> deleted;  // "cluster:checkpoint id"

 private:
  Bed& bed_;
  absl::Mutex mu_;
  std::map<std::string, std::string> ops_;  // request id -> operation id
  std::map<std::string, StateMoveProgress> progress_;
  std::map<std::string, StateBackupProgress> backup_progress_;
};

// MovableApp with "back-0" stateful.
Application StatefulApp(const std::string& name) {
  Application app = MovableApp(name);
  app.workloads[1].stateful = true;
  return app;
}

// StatefulApp("shop") placed on a bed whose hub moves state through
// `mover` (none with `with_mover` false); back-0 runs on `back`, and `to`
// is the other cluster. Its Redis holds "42 keys".
struct StatefulBed {
  explicit StatefulBed(bool with_mover = true) {
    if (with_mover) bed.service->SetStateMover(&mover);
    REQUIRE(bed.service->Place(bed.Request(app)).ok());
    back = TargetOf(bed.repo.Latest("shop")->value(), "back-0");
    to = back.cluster() == "eu" ? "us" : "eu";
    mover.state[back.cluster() + "/shop-back-0"] = "42 keys";
  }
  Bed bed;
  BedStateMover mover{bed};
  const Application app = StatefulApp("shop");
  pb::WorkloadTarget back;
  std::string to;
};

TEST_CASE("A stateful workload moves with its state before the plan moves",
          "[placement_service][migration]") {
  StatefulBed s;
  auto& [bed, mover, app, back, to] = s;

  MigrateRequest request = MoveOf(bed, app, "back-0", to);
  request.members[0].endpoints["checkpointer"] = "127.0.0.1:7001";
  request.members[1].endpoints["checkpointer"] = "127.0.0.1:7002";
  absl::StatusOr<Operation> op = bed.service->Migrate(request);
  REQUIRE(op.ok());
  pb::Migration m = MigrationOf(*op);
  CHECK(m.phase() == pb::MIGRATION_PHASE_DONE);
  CHECK(m.checkpoint_id() == back.cluster() + ":migrate/op-1");
  CHECK_FALSE(m.has_next_plan());
  // The target pod ran (empty) before the state moved, and the plan moved
  // only once the state was there.
  CHECK(bed.repo.migration_phases ==
        std::vector<pb::MigrationPhase>{
            pb::MIGRATION_PHASE_RESERVING, pb::MIGRATION_PHASE_RESTORING,
            pb::MIGRATION_PHASE_CHECKPOINTING, pb::MIGRATION_PHASE_CHECKPOINTING,
            pb::MIGRATION_PHASE_CUTTING_OVER, pb::MIGRATION_PHASE_DONE});
  REQUIRE(mover.starts.size() == 1);
  const StateMove& move = mover.starts[0];
  CHECK(move.source_pod == "shop-back-0");
  CHECK(move.source_checkpointer ==
        (back.cluster() == "eu" ? "127.0.0.1:7001" : "127.0.0.1:7002"));
  CHECK(move.target_cluster == to);
  CHECK(move.target_pod == "shop-back-0-r2");
  CHECK(mover.state[to + "/shop-back-0-r2"] == "42 keys");
  CHECK(PodNames(bed, to).count("shop-back-0-r2") == 1);
  CHECK(PodNames(bed, back.cluster()).count("shop-back-0") == 0);
  CHECK(bed.repo.Latest("shop")->value().plan_revision() == 2);
  CHECK(TargetOf(bed.repo.Latest("shop")->value(), "back-0").cluster() == to);
  // The stateless one moves without the mover.
  REQUIRE(bed.service->Migrate(MoveOf(bed, app, "front-0")).ok());
  CHECK(mover.starts.size() == 1);
}

TEST_CASE("A stateful move whose state cannot follow leaves the workload where it ran",
          "[placement_service][migration]") {
  StatefulBed s;
  auto& [bed, mover, app, back, to] = s;

  SECTION("the checkpointer gives up") {
    mover.outcome = BedStateMover::Outcome::kFails;
    absl::StatusOr<Operation> op = bed.service->Migrate(MoveOf(bed, app, "back-0", to));
    REQUIRE(absl::IsUnavailable(op.status()));
    CHECK_THAT(std::string(op.status().message()),
               Catch::Contains("moving the state of back-0") &&
                   Catch::Contains("connection refused") && Catch::Contains("stays where it ran"));
    absl::StatusOr<pb::Migration> m = bed.repo.GetMigration("shop/1");
    REQUIRE(m.ok());
    CHECK(m->phase() == pb::MIGRATION_PHASE_ROLLED_BACK);
    CHECK_FALSE(m->has_next_plan());
  }
  SECTION("the checkpointer refuses") {
    mover.outcome = BedStateMover::Outcome::kRefuses;
    absl::StatusOr<Operation> op = bed.service->Migrate(MoveOf(bed, app, "back-0", to));
    REQUIRE(absl::IsFailedPrecondition(op.status()));
    CHECK(bed.repo.GetMigration("shop/1")->phase() == pb::MIGRATION_PHASE_ROLLED_BACK);
  }
  // The target pod is gone, the source serves on, and the plan did not move.
  CHECK(PodNames(bed, to).count("shop-back-0-r2") == 0);
  CHECK(PodNames(bed, back.cluster()).count("shop-back-0") == 1);
  CHECK(bed.clusters[to]->executor.ledger().size() == (PodNames(bed, to).empty() ? 0 : 1));
  CHECK(bed.repo.Latest("shop")->value().plan_revision() == 1);
}

TEST_CASE("A stateful workload is not moved without its state",
          "[placement_service][migration]") {
  StatefulBed s(/*with_mover=*/false);
  auto& [bed, mover, app, back, to] = s;
  SECTION("no checkpointer") {
    absl::StatusOr<Operation> op = bed.service->Migrate(MoveOf(bed, app, "back-0"));
    REQUIRE(absl::IsFailedPrecondition(op.status()));
    CHECK_THAT(std::string(op.status().message()),
               Catch::Contains("stateful") && Catch::Contains("reaches no checkpointer"));
  }
  SECTION("its cluster does not answer") {
    bed.service->SetStateMover(&mover);
    MigrateRequest request = MoveOf(bed, app, "back-0");
    request.reason = pb::MIGRATION_REASON_CLUSTER_FAILURE;
    absl::StatusOr<Operation> op = bed.service->Migrate(request);
    REQUIRE(absl::IsFailedPrecondition(op.status()));
    CHECK_THAT(std::string(op.status().message()), Catch::Contains("state cannot be read"));
    CHECK(mover.starts.empty());
  }
  CHECK(bed.repo.GetMigration("shop/1")->phase() == pb::MIGRATION_PHASE_FAILED);
  CHECK(PodNames(bed, back.cluster()).count("shop-back-0") == 1);
  CHECK(bed.repo.Latest("shop")->value().plan_revision() == 1);
}

// The stateful workload of a StatefulBed, as the hub's backup pass sees it.
std::vector<BackupSubject> SubjectsOf(StatefulBed& s) {
  return {BackupSubject{.application = "shop",
                        .workload = "back-0",
                        .placed = TargetOf(s.bed.repo.Latest("shop")->value(), "back-0"),
                        .checkpointer = "127.0.0.1:7009"}};
}

TEST_CASE("State backups are taken each interval and the replaced ones deleted",
          "[placement_service][migration][backup]") {
  StatefulBed s;
  auto& [bed, mover, app, back, to] = s;
  StateBackupScheduler backups(bed.clock, bed.repo, mover, {.interval = absl::Seconds(30)});

  StateBackupPass pass = backups.Run(SubjectsOf(s), absl::InfiniteFuture());
  CHECK(pass.started == std::vector<std::string>{"shop/back-0"});
  CHECK(pass.completed == std::vector<std::string>{"shop/back-0"});
  REQUIRE(mover.backups.size() == 1);
  CHECK(mover.backups[0].pod == "shop-back-0");
  CHECK(mover.backups[0].cluster == back.cluster());
  CHECK(mover.backups[0].checkpointer == "127.0.0.1:7009");
  std::optional<pb::StateBackupRecord> record = *bed.repo.StateBackupOf("shop", "back-0");
  REQUIRE(record.has_value());
  CHECK(record->latest().source().pod() == "shop-back-0");
  CHECK(record->latest().image_reference() == "registry/backups:ck-1");
  CHECK(FromProtoTimestamp(record->latest().take_time()) == bed.clock.Now());
  CHECK(mover.images["registry/backups:ck-1"] == "42 keys");

  // Not due before the interval.
  bed.clock.Advance(absl::Seconds(29));
  CHECK(backups.Run(SubjectsOf(s), absl::InfiniteFuture()).started.empty());

  // Due: a newer one replaces it, and the older checkpoint is deleted.
  bed.clock.Advance(absl::Seconds(1));
  mover.state[back.cluster() + "/shop-back-0"] = "43 keys";
  pass = backups.Run(SubjectsOf(s), absl::InfiniteFuture());
  CHECK(pass.completed == std::vector<std::string>{"shop/back-0"});
  CHECK(pass.deleted == std::vector<std::string>{back.cluster() + ":ck-1"});
  record = *bed.repo.StateBackupOf("shop", "back-0");
  CHECK(record->latest().checkpoint_id() == "ck-2");
  CHECK(record->retired().empty());

  // A backup that fails keeps the newest one that did not.
  bed.clock.Advance(absl::Seconds(30));
  mover.backup_outcome = BedStateMover::Outcome::kFails;
  pass = backups.Run(SubjectsOf(s), absl::InfiniteFuture());
  REQUIRE(pass.failed.size() == 1);
  CHECK_THAT(pass.failed[0], Catch::Contains("connection refused"));
  record = *bed.repo.StateBackupOf("shop", "back-0");
  CHECK(record->latest().checkpoint_id() == "ck-2");
  CHECK_THAT(record->last_error().message(), Catch::Contains("connection refused"));
  CHECK(record->pending_operation_id().empty());

  // One still running is followed by the next passes.
  bed.clock.Advance(absl::Seconds(30));
  mover.backup_outcome = BedStateMover::Outcome::kHangs;
  pass = backups.Run(SubjectsOf(s), absl::InfiniteFuture());
  CHECK(pass.started.size() == 1);
  CHECK(pass.completed.empty());
  CHECK_FALSE(bed.repo.StateBackupOf("shop", "back-0")->value().pending_operation_id().empty());
  bed.clock.Advance(absl::Minutes(2));
  pass = backups.Run(SubjectsOf(s), absl::InfiniteFuture());
  CHECK(pass.started.empty());  // not another while it runs
  // ... and given up after pending_timeout.
  bed.clock.Advance(absl::Minutes(10));
  pass = backups.Run(SubjectsOf(s), absl::InfiniteFuture());
  REQUIRE_FALSE(pass.failed.empty());
  CHECK_THAT(pass.failed[0], Catch::Contains("did not finish"));
}

TEST_CASE("A backup pass cut short by its deadline leaves the next pass to the others",
          "[placement_service][migration][backup]") {
  StatefulBed s;
  auto& [bed, mover, app, back, to] = s;
  StateBackupScheduler backups(bed.clock, bed.repo, mover, {.interval = absl::Seconds(30)});
  std::vector<BackupSubject> subjects = SubjectsOf(s);
  subjects.push_back(subjects[0]);
  subjects[1].workload = "back-1";
  subjects.push_back(subjects[0]);
  subjects[2].workload = "back-2";
  // A pass whose deadline has passed starts nothing; one with time backs
  // up every workload, the oldest attempted first.
  CHECK(backups.Run(subjects, absl::InfinitePast()).started.empty());
  CHECK(backups.Run(subjects, absl::InfiniteFuture()).started ==
        std::vector<std::string>{"shop/back-0", "shop/back-1", "shop/back-2"});
  // back-1's attempt is older than the others': it goes first next time.
  bed.clock.Advance(absl::Seconds(30));
  REQUIRE(backups.Run({subjects[0], subjects[2]}, absl::InfiniteFuture()).started.size() == 2);
  bed.clock.Advance(absl::Seconds(30));
  CHECK(backups.Run(subjects, absl::InfiniteFuture()).started.front() == "shop/back-1");
}

TEST_CASE("A workload being migrated is backed up again once its new plan is written",
          "[placement_service][migration][backup]") {
  StatefulBed s;
  auto& [bed, mover, app, back, to] = s;
  StateBackupScheduler backups(bed.clock, bed.repo, mover, {.interval = absl::Seconds(30)});
  pb::Migration moving;
  moving.set_id("shop/9");
  moving.set_application("shop");
  moving.set_workload("back-0");
  moving.set_phase(pb::MIGRATION_PHASE_CHECKPOINTING);
  Operation op;
  op.set_id("migrate/shop/9");
  REQUIRE(bed.repo.SaveMigration(moving, nullptr, op, "").ok());
  CHECK(backups.Run(SubjectsOf(s), absl::InfiniteFuture()).started.empty());
  // CUTTING_OVER: the new pod serves (its old one waits for its cluster).
  moving.set_phase(pb::MIGRATION_PHASE_CUTTING_OVER);
  REQUIRE(bed.repo.SaveMigration(moving, nullptr, op, "").ok());
  CHECK(backups.Run(SubjectsOf(s), absl::InfiniteFuture()).started ==
        std::vector<std::string>{"shop/back-0"});
}

TEST_CASE("The backups of an application no longer placed are deleted with their record",
          "[placement_service][migration][backup]") {
  StatefulBed s;
  auto& [bed, mover, app, back, to] = s;
  StateBackupScheduler backups(bed.clock, bed.repo, mover, {.interval = absl::Seconds(30)});
  pb::StateBackupRecord gone;
  gone.set_application("gone");
  gone.set_workload("db-0");
  gone.mutable_latest()->mutable_source()->set_cluster("eu");
  gone.mutable_latest()->set_checkpoint_id("ck-old");
  REQUIRE(bed.repo.SaveStateBackup(gone).ok());

  // Its checkpointer is away: the record stays, its backup retired.
  mover.deletable = false;
  StateBackupPass pass = backups.Run({}, absl::InfiniteFuture());
  CHECK(pass.deleted.empty());
  std::optional<pb::StateBackupRecord> kept = *bed.repo.StateBackupOf("gone", "db-0");
  REQUIRE(kept.has_value());
  CHECK_FALSE(kept->has_latest());
  CHECK(kept->retired_size() == 1);
  // A placed application missing from the subjects keeps its backups.
  REQUIRE(backups.Run(SubjectsOf(s), absl::InfiniteFuture()).completed.size() == 1);
  backups.Run({}, absl::InfiniteFuture());
  CHECK(bed.repo.StateBackupOf("shop", "back-0")->has_value());

  mover.deletable = true;
  pass = backups.Run({}, absl::InfiniteFuture());
  CHECK(pass.deleted == std::vector<std::string>{"eu:ck-old"});
  CHECK_FALSE(bed.repo.StateBackupOf("gone", "db-0")->has_value());
}

TEST_CASE("A stateful workload off a failed node is restored from its newest backup",
          "[placement_service][migration][backup]") {
  StatefulBed s;
  auto& [bed, mover, app, back, to] = s;
  MigrateRequest request = MoveOf(bed, app, "back-0", to);
  request.reason = pb::MIGRATION_REASON_NODE_FAILURE;
  request.members[0].endpoints["checkpointer"] = "127.0.0.1:7001";
  request.members[1].endpoints["checkpointer"] = "127.0.0.1:7002";
  StateBackupScheduler backups(bed.clock, bed.repo, mover, {.interval = absl::Seconds(30)});

  SECTION("with a backup of its pod") {
    REQUIRE(backups.Run(SubjectsOf(s), absl::InfiniteFuture()).completed.size() == 1);
    // Written after the backup: lost with the node.
    mover.state[back.cluster() + "/shop-back-0"] = "43 keys";
    absl::StatusOr<Operation> op = bed.service->Migrate(request);
    REQUIRE(op.ok());
    pb::Migration m = MigrationOf(*op);
    CHECK(m.phase() == pb::MIGRATION_PHASE_DONE);
    CHECK(m.restored_backup().image_reference() == "registry/backups:ck-1");
    CHECK(m.restored_backup().source().pod() == "shop-back-0");
    // Through the target's checkpointer; the failed source is not asked.
    REQUIRE(mover.starts.size() == 1);
    const StateMove& move = mover.starts[0];
    CHECK(move.from_backup == "registry/backups:ck-1");
    CHECK(move.RunsAt() == to);
    CHECK(move.target_checkpointer == (to == "eu" ? "127.0.0.1:7001" : "127.0.0.1:7002"));
    CHECK(move.source_checkpointer.empty());
    CHECK(m.checkpoint_id() == to + ":migrate/op-2");
    CHECK(mover.state[to + "/shop-back-0-r2"] == "42 keys");
    CHECK(PodNames(bed, back.cluster()).count("shop-back-0") == 0);
    CHECK(TargetOf(bed.repo.Latest("shop")->value(), "back-0").cluster() == to);

    // The next pass backs up the new pod and retires the restored backup.
    bed.clock.Advance(absl::Seconds(1));
    StateBackupPass pass = backups.Run(SubjectsOf(s), absl::InfiniteFuture());
    CHECK(pass.completed == std::vector<std::string>{"shop/back-0"});
    CHECK(pass.deleted == std::vector<std::string>{back.cluster() + ":ck-1"});
    CHECK(bed.repo.StateBackupOf("shop", "back-0")->value().latest().source().pod() ==
          "shop-back-0-r2");
  }
  SECTION("without one") {
    absl::StatusOr<Operation> op = bed.service->Migrate(request);
    REQUIRE(absl::IsFailedPrecondition(op.status()));
    CHECK_THAT(std::string(op.status().message()),
               Catch::Contains("failed") && Catch::Contains("no backup of pod shop-back-0"));
    CHECK(mover.starts.empty());
    CHECK(bed.repo.GetMigration("shop/1")->phase() == pb::MIGRATION_PHASE_FAILED);
    CHECK(PodNames(bed, back.cluster()).count("shop-back-0") == 1);
  }
}

TEST_CASE("Recover follows a stateful move the hub left while its state moved",
          "[placement_service][migration]") {
  StatefulBed s;
  auto& [bed, mover, app, back, to] = s;

  SECTION("the state arrived: the move is finished forward") {
    // The hub's last write was CHECKPOINTING; the checkpointer finished the
    // move meanwhile. The restarted hub asks under the same request id,
    // gets that move's outcome, and writes the plan.
    bed.crash.migration_at = pb::MIGRATION_PHASE_CHECKPOINTING;
    bed.repo.crash = &bed.crash;
    (void)bed.service->Migrate(MoveOf(bed, app, "back-0", to));
    REQUIRE(bed.crash.happened);
    CHECK(bed.repo.Latest("shop")->value().plan_revision() == 1);
    bed.Restart();
    bed.service->SetStateMover(&mover);
    RecoveryReport report = bed.service->Recover();
    CHECK(report.errors.empty());
    CHECK(report.migrations == std::vector<std::string>{"shop/1"});
    CHECK(bed.repo.GetMigration("shop/1")->phase() == pb::MIGRATION_PHASE_DONE);
    CHECK(bed.repo.Latest("shop")->value().plan_revision() == 2);
    CHECK(TargetOf(bed.repo.Latest("shop")->value(), "back-0").pod() == "shop-back-0-r2");
    CHECK(mover.state[to + "/shop-back-0-r2"] == "42 keys");
    CHECK(PodNames(bed, back.cluster()).count("shop-back-0") == 0);
    REQUIRE(mover.starts.size() == 2);
    CHECK(mover.starts[0].request_id == mover.starts[1].request_id);
  }
  SECTION("still moving, then failed: kept, then rolled back") {
    mover.outcome = BedStateMover::Outcome::kHangs;
    absl::StatusOr<Operation> op = bed.service->Migrate(MoveOf(bed, app, "back-0", to));
    REQUIRE(absl::IsDeadlineExceeded(op.status()));
    CHECK(bed.repo.GetMigration("shop/1")->phase() == pb::MIGRATION_PHASE_CHECKPOINTING);
    CHECK(bed.repo.GetMigration("shop/1")->has_next_plan());
    // Another move of the application waits for this one.
    CHECK(absl::IsUnavailable(bed.service->Migrate(MoveOf(bed, app, "front-0")).status()));
    bed.Restart();
    bed.service->SetStateMover(&mover);
    RecoveryReport report = bed.service->Recover();
    REQUIRE(report.errors.size() == 1);
    CHECK_THAT(report.errors[0], Catch::Contains("still moving"));
    CHECK(PodNames(bed, to).count("shop-back-0-r2") == 1);

    mover.outcome = BedStateMover::Outcome::kFails;
    BedStateMover failed(bed);
    failed.outcome = BedStateMover::Outcome::kFails;
    bed.Restart();
    bed.service->SetStateMover(&failed);
    report = bed.service->Recover();
    CHECK(report.errors.empty());
    absl::StatusOr<pb::Migration> m = bed.repo.GetMigration("shop/1");
    CHECK(m->phase() == pb::MIGRATION_PHASE_ROLLED_BACK);
    CHECK_THAT(m->error().message(), Catch::Contains("connection refused"));
    CHECK(PodNames(bed, to).count("shop-back-0-r2") == 0);
    CHECK(PodNames(bed, back.cluster()).count("shop-back-0") == 1);
    CHECK(bed.repo.Latest("shop")->value().plan_revision() == 1);
  }
  SECTION("a restore from a backup: the restarted hub asks the target's checkpointer again") {
    StateBackupScheduler backups(bed.clock, bed.repo, mover);
    REQUIRE(backups.Run(SubjectsOf(s), absl::InfiniteFuture()).completed.size() == 1);
    bed.crash.migration_at = pb::MIGRATION_PHASE_CHECKPOINTING;
    bed.repo.crash = &bed.crash;
    MigrateRequest request = MoveOf(bed, app, "back-0", to);
    request.reason = pb::MIGRATION_REASON_NODE_FAILURE;
    (void)bed.service->Migrate(request);
    REQUIRE(bed.crash.happened);
    bed.Restart();
    bed.service->SetStateMover(&mover);
    RecoveryReport report = bed.service->Recover();
    CHECK(report.errors.empty());
    CHECK(bed.repo.GetMigration("shop/1")->phase() == pb::MIGRATION_PHASE_DONE);
    CHECK(mover.state[to + "/shop-back-0-r2"] == "42 keys");
    REQUIRE(mover.starts.size() == 2);
    CHECK(mover.starts[1].request_id == mover.starts[0].request_id);
    CHECK(mover.starts[1].from_backup == "registry/backups:ck-1");
    CHECK(mover.starts[1].RunsAt() == to);
  }
}

// The members' health as the fake clusters show it: a cluster in
// `members.away` does not answer; a node in `not_ready` is not ready.
class FakeHealth final : public HealthSource {
 public:
  explicit FakeHealth(Bed& bed) : bed_(bed) {}
  std::map<std::string, ClusterHealth> Read(const std::vector<std::string>& clusters,
                                            absl::Time) override {
    std::map<std::string, ClusterHealth> out;
    for (const std::string& c : clusters) {
      ClusterHealth& h = out[c];
      h.reachable = !bed_.members.away.count(c);
      if (!h.reachable) continue;
      const std::vector<Node> nodes = bed_.clusters[c]->runtime.ListNodes().value();
      for (const Node& n : nodes) h.node_ready[n.name] = !not_ready.count(c + "/" + n.name);
      for (const std::string& node : also_ready[c]) h.node_ready[node] = true;
    }
    return out;
  }
  std::vector<std::string> AllMembers() override { return {"eu", "us"}; }
  std::set<std::string> not_ready;  // "cluster/node"
  // cluster -> nodes reported ready that the fake cluster does not hold.
  std::map<std::string, std::set<std::string>> also_ready;

 private:
  Bed& bed_;
};

// Moves through the bed's PlacementService, as the hub's MigrateWorkload does.
class BedMover final : public MoveExecutor {
 public:
  BedMover(Bed& bed, Application app) : bed_(bed), app_(std::move(app)) {}
  bool KeepsState(const std::string& application, const std::string& service) override {
    return application == app_.name &&
           std::any_of(app_.workloads.begin(), app_.workloads.end(),
                       [&](const Workload& w) { return w.service == service && w.stateful; });
  }
  LocationSpread LocationsOf(const std::string& application, const std::string& service) override {
    for (const Workload& w : app_.workloads) {
      if (application == app_.name && w.service == service) {
        return {.max_locations = w.max_locations, .bursting = w.bursting};
      }
    }
    return {};
  }
  absl::StatusOr<pb::Migration> Move(const std::string& application, const std::string& workload,
                                     const std::string& target_cluster,
                                     const std::string& target_node, pb::MigrationReason reason,
                                     absl::Time) override {
    REQUIRE(application == app_.name);
    MigrateRequest r = MoveOf(bed_, app_, workload, target_cluster);
    r.target_node = target_node;
    r.reason = reason;
    ASSIGN_OR_RETURN(Operation op, bed_.service->Migrate(r));
    return MigrationOf(op);
  }
  absl::StatusOr<pb::LocalDecisionVerdict> Adopt(const pb::LocalDecision& decision,
                                                 absl::Time) override {
    return bed_.service->AdoptLocalMove(decision);
  }

 private:
  Bed& bed_;
  Application app_;
};

// A bed with "shop" placed: front-0 pinned to eu, back-0 to us (no channel).
// The channels out of QoS, as a test sets them.
class FakeChannelHealth final : public ChannelHealthSource {
 public:
  std::vector<OutOfQosChannel> OutOfQos() override { return out; }
  std::vector<OutOfQosChannel> out;
};

// With `channel`, the front-back channel is placed too; the loop reads the
// channels out of QoS from `channels`, and `model` is the application the
// mover moves (it says which workloads keep state).
struct AdaptBed {
  explicit AdaptBed(bool channel = false, Application model = MovableApp("shop"))
      : mover{bed, std::move(model)} {
    app = MovableApp("shop");
    if (!channel) app.channels.clear();
    Application placed = app;
    placed.workloads[0].allowed_regions = {"eu"};
    placed.workloads[1].allowed_regions = {"us"};
    REQUIRE(bed.service->Place(bed.Request(placed)).ok());
    loop.SetChannelHealth(&channels);
  }
  std::string ClusterOf(const std::string& workload) {
    return TargetOf(bed.repo.Latest("shop")->value(), workload).cluster();
  }
  Bed bed;
  Application app;
  FakeHealth health{bed};
  BedMover mover;
  FakeChannelHealth channels;
  AdaptationLoop loop{bed.clock, bed.repo, health, mover, MigrationGovernorOptions{}};
};

// The nodes PDLC advises a breach ahead for, as the test sets them.
class FakeBreaches final : public BreachAdvisorySource {
 public:
  std::vector<BreachAdvisory> BreachesAhead() override { return advised; }
  std::vector<BreachAdvisory> advised;
};

TEST_CASE("A node advised to breach for longer than the grace sheds a workload", "[adaptation]") {
  AdaptBed a;
  FakeBreaches breaches;
  a.loop.SetBreachAdvisories(&breaches);
  REQUIRE(a.ClusterOf("back-0") == "us");
  const BreachAdvisory us{.cluster = "us", .node = "us-n0", .message = "cpu at 97 % in 12m"};

  // An advisory for two minutes, then gone: nothing moves.
  breaches.advised = {us};
  for (int i = 0; i < 12; ++i) {
    CHECK(a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1)).moved.empty());
    a.bed.clock.Advance(absl::Seconds(10));
  }
  breaches.advised.clear();
  CHECK(a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1)).moved.empty());

  // Held for the 3-minute overload grace: back-0 leaves us-n0.
  breaches.advised = {us};
  AdaptationTick tick;
  absl::Duration waited;
  for (; waited <= absl::Minutes(5); waited += absl::Seconds(10)) {
    tick = a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
    if (!tick.moved.empty()) break;
    a.bed.clock.Advance(absl::Seconds(10));
  }
  INFO(absl::StrJoin(tick.held, "; "));
  CHECK(waited == absl::Minutes(3));
  REQUIRE(tick.moved.size() == 1);
  CHECK(absl::StrContains(tick.moved[0], "shop/back-0 us/us-n0 -> eu/eu-n0 (FORECAST_BREACH)"));
  CHECK(a.bed.repo.GetMigration("shop/1")->reason() == pb::MIGRATION_REASON_FORECAST_BREACH);
  CHECK(a.ClusterOf("back-0") == "eu");
  // Nothing is left there; the advisory still stands: no other move.
  a.bed.clock.Advance(absl::Seconds(10));
  CHECK(a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1)).moved.empty());

  // eu-n0 advised now: its workloads stay within their cooldown (back-0)
  // and the budget; front-0 may go, back-0 is held.
  breaches.advised = {BreachAdvisory{.cluster = "eu", .node = "eu-n0"}};
  std::vector<std::string> moved, held;
  for (int i = 0; i < 24; ++i) {
    a.bed.clock.Advance(absl::Seconds(10));
    tick = a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
    moved.insert(moved.end(), tick.moved.begin(), tick.moved.end());
    held.insert(held.end(), tick.held.begin(), tick.held.end());
  }
  INFO(absl::StrJoin(held, "; "));
  for (const std::string& m : moved) CHECK_FALSE(absl::StrContains(m, "shop/back-0"));
  CHECK(std::any_of(held.begin(), held.end(), [](const std::string& h) {
    return absl::StrContains(h, "shop/back-0") && absl::StrContains(h, "cooldown");
  }));
}

TEST_CASE("A cluster cut longer than the grace is evacuated and failed back after it heals",
          "[adaptation]") {
  AdaptBed a;
  REQUIRE(a.ClusterOf("back-0") == "us");
  // A 40 s blip moves nothing.
  a.bed.members.away = {"us"};
  for (int i = 0; i < 4; ++i) {
    AdaptationTick tick = a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
    CHECK(tick.moved.empty());
    a.bed.clock.Advance(absl::Seconds(10));
  }
  a.bed.members.away.clear();
  CHECK(a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1)).moved.empty());

  // A lasting cut: acted on once it has lasted the 60 s grace.
  a.bed.members.away = {"us"};
  AdaptationTick tick;
  absl::Duration waited;
  for (; waited <= absl::Minutes(3); waited += absl::Seconds(10)) {
    tick = a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
    if (!tick.moved.empty()) break;
    a.bed.clock.Advance(absl::Seconds(10));
  }
  INFO(absl::StrJoin(tick.held, "; "));
  CHECK(waited == absl::Seconds(60));
  CHECK(tick.failed == std::vector<std::string>{"us"});
  REQUIRE(tick.moved.size() == 1);
  CHECK(absl::StrContains(tick.moved[0], "shop/back-0 us/us-n0 -> eu/eu-n0 (CLUSTER_FAILURE)"));
  CHECK(a.ClusterOf("back-0") == "eu");
  CHECK(a.loop.homes().at("shop/back-0") == "us");
  // The old pod cannot be removed while us is cut: the migration waits.
  CHECK(a.bed.repo.GetMigration("shop/1")->phase() == pb::MIGRATION_PHASE_CUTTING_OVER);
  CHECK(a.bed.repo.GetMigration("shop/1")->reason() == pb::MIGRATION_REASON_CLUSTER_FAILURE);
  a.bed.clock.Advance(absl::Seconds(10));
  CHECK(a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1)).moved.empty());  // nothing left there

  // Healed: the hub's recovery removes the old pod; five minutes later the
  // workload goes home by itself.
  a.bed.members.away.clear();
  REQUIRE(a.bed.service->Recover().errors.empty());
  CHECK(PodNames(a.bed, "us").count("shop-back-0") == 0);
  for (waited = absl::ZeroDuration(); waited <= absl::Minutes(10);
       waited += absl::Seconds(10)) {
    tick = a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
    if (!tick.moved.empty()) break;
    a.bed.clock.Advance(absl::Seconds(10));
  }
  CHECK(waited == absl::Minutes(5));
  CHECK(tick.recovered == std::vector<std::string>{"us"});
  REQUIRE(tick.moved.size() == 1);
  CHECK(absl::StrContains(tick.moved[0], "shop/back-0 eu/eu-n0 -> us/us-n0 (FAILBACK)"));
  CHECK(a.ClusterOf("back-0") == "us");
  CHECK(a.loop.homes().empty());
  CHECK(PodNames(a.bed, "us").count("shop-back-0-r3") == 1);
  CHECK(PodNames(a.bed, "eu") == std::set<std::string>{"shop-front-0"});
}

TEST_CASE("Replicas that burst beyond numberOfLocations are pulled back once room returns",
          "[adaptation]") {
  Bed bed;
  // Fillers leave 2 CPU free in eu and 1 in us.
  for (const auto& [cluster, cpu] : {std::pair{"eu", 2000}, std::pair{"us", 3000}}) {
    Application filler{.name = std::string("filler-") + cluster};
    Workload w = test::MakeWorkload("hog-0", cpu);
    w.service = "hog";
    w.allowed_regions = {cluster};
    filler.workloads = {w};
    REQUIRE(bed.service->Place(bed.Request(filler)).ok());
  }
  // Six replicas of 500m on one location, bursting: four fit at home, two burst.
  Application mcd{.name = "mcd"};
  for (int i = 0; i < 6; ++i) {
    Workload w = test::MakeWorkload("web-" + std::to_string(i), 500, 0);
    w.service = "web";
    w.max_locations = 1;
    w.bursting = true;
    mcd.workloads.push_back(w);
  }
  absl::StatusOr<Operation> placed = bed.service->Place(bed.Request(mcd));
  REQUIRE(placed.ok());
  auto cluster_of = [&](const std::string& workload) {
    return TargetOf(bed.repo.Latest("mcd")->value(), workload).cluster();
  };
  const std::string home = cluster_of("web-0");
  const std::string away = home == "eu" ? "us" : "eu";
  std::map<std::string, int> count;
  for (int i = 0; i < 6; ++i) ++count[cluster_of("web-" + std::to_string(i))];
  REQUIRE(count.size() == 2);
  const int burst = count[away];
  REQUIRE(burst > 0);

  FakeHealth health{bed};
  BedMover mover{bed, mcd};
  AdaptationLoop loop{bed.clock, bed.repo, health, mover, MigrationGovernorOptions{}};
  // Home still full: a pull back is tried, refused, and waits before the next try.
  AdaptationTick tick = loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
  CHECK(tick.moved.empty());
  REQUIRE(tick.held.size() == 1);
  CHECK(absl::StrContains(tick.held[0], "(RESCHEDULE)"));
  bed.clock.Advance(absl::Seconds(10));
  CHECK(loop.Tick(absl::InfiniteFuture(), absl::Hours(1)).held.empty());  // waiting

  // Room returns at home (its filler goes): the burst replicas come back,
  // one per tick, and the service runs in one cluster again.
  REQUIRE(bed.service->Release({.application = "filler-" + home}).ok());
  std::vector<std::string> moved;
  for (int i = 0; i < 60 && static_cast<int>(moved.size()) < burst; ++i) {
    bed.clock.Advance(absl::Seconds(10));
    tick = loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
    CHECK(tick.moved.size() <= 1);
    moved.insert(moved.end(), tick.moved.begin(), tick.moved.end());
  }
  REQUIRE(static_cast<int>(moved.size()) == burst);
  for (const std::string& m : moved) {
    CHECK(absl::StrContains(m, " -> " + home + "/"));
    CHECK(absl::StrContains(m, "(RESCHEDULE)"));
  }
  for (int i = 0; i < 6; ++i) CHECK(cluster_of("web-" + std::to_string(i)) == home);
  // Nothing more to pull back.
  bed.clock.Advance(absl::Minutes(10));
  tick = loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
  CHECK(tick.moved.empty());
  CHECK(tick.held.empty());
}

TEST_CASE("A failed node is evacuated and a failback held by the budget is tried again",
          "[adaptation]") {
  AdaptBed a;
  a.health.not_ready = {"eu/eu-n0"};
  AdaptationTick tick;
  for (int i = 0; i <= 6; ++i) {
    tick = a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
    if (!tick.moved.empty()) break;
    a.bed.clock.Advance(absl::Seconds(10));
  }
  CHECK(tick.failed == std::vector<std::string>{"eu/eu-n0"});
  REQUIRE(tick.moved.size() == 1);
  CHECK(absl::StrContains(tick.moved[0], "shop/front-0 eu/eu-n0 -> us/us-n0 (NODE_FAILURE)"));
  CHECK(a.bed.repo.GetMigration("shop/1")->phase() == pb::MIGRATION_PHASE_DONE);

  // The node is back; the failback goes to that node once it has been
  // ready for five minutes.
  a.health.not_ready.clear();
  for (int i = 0; i <= 40; ++i) {
    a.bed.clock.Advance(absl::Seconds(10));
    tick = a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
    if (!tick.moved.empty()) break;
  }
  REQUIRE(tick.moved.size() == 1);
  CHECK(absl::StrContains(tick.moved[0], "shop/front-0 us/us-n0 -> eu/eu-n0 (FAILBACK)"));
  CHECK(a.bed.repo.GetMigration("shop/2")->reason() == pb::MIGRATION_REASON_FAILBACK);
}

TEST_CASE("A restarted hub still fails back what the one before it evacuated", "[adaptation]") {
  AdaptBed a;
  a.bed.members.away = {"us"};
  AdaptationTick tick;
  for (int i = 0; i <= 7 && tick.moved.empty(); ++i) {
    tick = a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
    a.bed.clock.Advance(absl::Seconds(10));
  }
  REQUIRE(tick.moved.size() == 1);
  CHECK(absl::StrContains(tick.moved[0], "shop/back-0 us/us-n0 -> eu/eu-n0 (CLUSTER_FAILURE)"));

  // The hub restarts (a new loop on the same store) and the cluster heals.
  a.bed.members.away.clear();
  AdaptationLoop restarted{a.bed.clock, a.bed.repo, a.health, a.mover, MigrationGovernorOptions{}};
  tick = restarted.Tick(absl::InfiniteFuture(), absl::Hours(1));
  CHECK(restarted.homes() == std::map<std::string, std::string>{{"shop/back-0", "us"}});
  for (int i = 0; i <= 40 && tick.moved.empty(); ++i) {
    a.bed.clock.Advance(absl::Seconds(10));
    tick = restarted.Tick(absl::InfiniteFuture(), absl::Hours(1));
  }
  REQUIRE(tick.moved.size() == 1);
  CHECK(absl::StrContains(tick.moved[0], "shop/back-0 eu/eu-n0 -> us/us-n0 (FAILBACK)"));
  CHECK(restarted.homes().empty());
}

TEST_CASE("A channel out of QoS moves one of its workloads under the cooldown", "[adaptation]") {
  AdaptBed a(/*channel=*/true);
  Bed& bed = a.bed;
  FakeChannelHealth& channels = a.channels;
  AdaptationLoop& loop = a.loop;

  // Measured under an older plan: nothing moves.
  channels.out = {{.application = "shop", .channel = "front-back", .plan_revision = 0}};
  CHECK(loop.Tick(absl::InfiniteFuture(), absl::Hours(1)).moved.empty());

  // Out of QoS under the current plan: the workload it goes to moves.
  channels.out[0].plan_revision = 1;
  AdaptationTick tick = loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
  REQUIRE(tick.moved.size() == 1);
  CHECK(absl::StrContains(tick.moved[0], "shop/back-0 us/us-n0 -> eu/eu-n0 (LINK_FAILURE)"));
  CHECK(bed.repo.GetMigration("shop/1")->reason() == pb::MIGRATION_REASON_LINK_FAILURE);

  // Still out of QoS under the new plan: back-0 is in its cooldown, so the
  // one it comes from moves.
  bed.clock.Advance(absl::Seconds(10));
  channels.out[0].plan_revision = 2;
  tick = loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
  REQUIRE(tick.moved.size() == 1);
  CHECK(absl::StrContains(tick.moved[0], "shop/front-0 eu/eu-n0 -> us/us-n0 (LINK_FAILURE)"));
  REQUIRE(tick.held.size() == 1);
  CHECK(absl::StrContains(tick.held[0], "shop/back-0 (channel front-back)") );
  CHECK(absl::StrContains(tick.held[0], "cooldown"));

  // And again: both wait out their cooldown; an hour of ticks moves nothing
  // more (each is asked once per grace, not every tick).
  channels.out[0].plan_revision = 3;
  int moves = 0;
  size_t held = 0;
  for (int i = 0; i < 6 * 59; ++i) {
    bed.clock.Advance(absl::Seconds(10));
    tick = loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
    moves += static_cast<int>(tick.moved.size());
    held += tick.held.size();
  }
  CHECK(moves == 0);
  CHECK(held <= 2 * 60);
}

TEST_CASE("A channel out of QoS moves its stateless workload before the one that keeps state",
          "[adaptation]") {
  Application model = MovableApp("shop");
  model.workloads[1].stateful = true;  // back-0, where the channel goes
  AdaptBed a(/*channel=*/true, model);
  BedStateMover state{a.bed};
  a.bed.service->SetStateMover(&state);
  a.channels.out = {{.application = "shop", .channel = "front-back", .plan_revision = 1}};
  AdaptationTick tick = a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
  REQUIRE(tick.moved.size() == 1);
  CHECK(absl::StrContains(tick.moved[0], "shop/front-0 eu/eu-n0 -> us/us-n0 (LINK_FAILURE)"));
  CHECK(state.starts.empty());
}

TEST_CASE("A refused evacuation is tried again after a growing wait and not once per tick", "[adaptation]") {
  AdaptBed a;
  // eu cannot take back-0: its node is full.
  FakeCluster& eu = *a.bed.clusters["eu"];
  REQUIRE(eu.runtime.CreatePod(PodInfo{"filler", "eu-n0", {3400, kGi, 0}}).ok());
  a.bed.members.away = {"us"};
  std::vector<std::string> held;
  std::vector<int> at;  // seconds of each attempt
  for (int i = 0; i <= 6 * 30; ++i) {  // half an hour of 10 s ticks
    AdaptationTick tick = a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
    CHECK(tick.moved.empty());
    for (size_t k = 0; k < tick.held.size(); ++k) at.push_back(i * 10);
    held.insert(held.end(), tick.held.begin(), tick.held.end());
    a.bed.clock.Advance(absl::Seconds(10));
  }
  // Failed at 60 s: tried then, one grace later, and then twice as long
  // after each further refusal.
  CHECK(at == std::vector<int>{60, 120, 240, 480, 960});
  REQUIRE(!held.empty());
  CHECK(absl::StrContains(held[0], "shop/back-0 (CLUSTER_FAILURE): no node can take"));
  CHECK(a.bed.repo.NewestMigration("shop")->value().id() == "shop/5");
}

}  // namespace
}  // namespace codeco::swm

namespace codeco::swm {
namespace {

TEST_CASE("A placement overlaps another one's commit and counts its reservations",
          "[placement_service]") {
  Bed bed;
  // Each workload takes 3000 of the one 4000-millicore node of its cluster:
  // while "first" commits, "second" cannot fit, and a third application of
  // 500 still can.
  auto app = [](const std::string& name, int64_t millicores) {
    Application a = Bed::App(name, 1'000'000);
    for (Workload& w : a.workloads) w.requests.cpu_millis = millicores;
    return a;
  };
  bed.gate.application = "first";
  absl::StatusOr<Operation> first;
  std::thread committing([&] { first = bed.service->Place(bed.Request(app("first", 3000))); });
  bed.gate.reached.WaitForNotification();
  // "first" holds its reservations and is committing; the scheduling cycle
  // is free for the next placement, which sees what "first" holds.
  absl::StatusOr<Operation> second = bed.service->Place(bed.Request(app("second", 3000)));
  CHECK(absl::IsFailedPrecondition(second.status()));
  absl::StatusOr<Operation> small = bed.service->Place(bed.Request(app("small", 500)));
  CHECK(small.ok());
  CHECK(bed.Pods("eu") == 1);  // "small"'s; "first"'s pods wait for the gate
  bed.gate.open.Notify();
  committing.join();
  REQUIRE(first.ok());
  CHECK(PlanOf(*first).phase() == pb::PLAN_PHASE_DONE);
  CHECK(bed.Pods("eu") == 2);
  CHECK(bed.Pods("us") == 2);
}

TEST_CASE("Operations of one application wait for each other", "[placement_service]") {
  Bed bed;
  bed.gate.application = "shop";
  absl::StatusOr<Operation> placed;
  std::thread committing(
      [&] { placed = bed.service->Place(bed.Request(Bed::App("shop", 1'000'000))); });
  bed.gate.reached.WaitForNotification();
  // A removal of "shop" now waits for the placement; with a deadline that
  // has passed it gives up at once and touches nothing.
  absl::StatusOr<pb::AssignmentPlan> early =
      bed.service->Release({.application = "shop"}, absl::InfinitePast());
  CHECK(absl::IsDeadlineExceeded(early.status()));
  absl::StatusOr<pb::AssignmentPlan> removal;
  std::thread releasing([&] { removal = bed.service->Release({.application = "shop"}); });
  bed.gate.open.Notify();
  committing.join();
  releasing.join();
  REQUIRE(placed.ok());
  REQUIRE(removal.ok());
  // The removal ran after the placement: it removed both pods.
  CHECK(removal->actions_size() == 2);
  CHECK(bed.Pods("eu") == 0);
  CHECK(bed.Pods("us") == 0);
}

// The members' local decisions, as a test sets them; the verdicts given.
class FakeLocalDecisions final : public LocalDecisionSource {
 public:
  absl::StatusOr<std::vector<pb::LocalDecision>> Unsettled(const std::string& cluster,
                                                           absl::Time) override {
    return unsettled[cluster];
  }
  absl::Status Settle(const std::string& cluster,
                      const std::vector<pb::LocalDecisionVerdict>& verdicts, absl::Time) override {
    for (const pb::LocalDecisionVerdict& v : verdicts) settled[v.id()] = v;
    return absl::OkStatus();
  }
  std::map<std::string, std::vector<pb::LocalDecision>> unsettled;
  std::map<std::string, pb::LocalDecisionVerdict> settled;
};

pb::LocalDecision LocalMoveOf(const std::string& id, const pb::WorkloadTarget& target,
                              const std::string& to_node) {
  pb::LocalDecision d;
  d.set_id(id);
  d.set_cluster(target.cluster());
  d.set_application("shop");
  d.set_workload(target.workload());
  d.set_reservation(target.reservation());
  d.set_pod(target.pod());
  d.set_from_node(target.node());
  d.set_to_node(to_node);
  d.set_state(pb::LOCAL_DECISION_STATE_PENDING);
  return d;
}

TEST_CASE(
    "A member's local move is adopted into the plan and fails back and an overtaken one is undone",
    "[adaptation]") {
  AdaptBed a;
  FakeLocalDecisions decisions;
  a.loop.SetLocalDecisions(&decisions);
  const pb::AssignmentPlan placed = a.bed.repo.Latest("shop")->value();
  const pb::WorkloadTarget front = TargetOf(placed, "front-0");
  const pb::WorkloadTarget back = TargetOf(placed, "back-0");
  REQUIRE(front.cluster() == "eu");
  // eu moved front-0 off its failed node; us reports a move of a pod the
  // hub's plan does not run there; a third is still moving its pod.
  pb::WorkloadTarget stale = back;
  stale.set_pod("shop-back-0-r7");
  pb::LocalDecision moving = LocalMoveOf("eu/2", front, "eu-n2");
  moving.set_state(pb::LOCAL_DECISION_STATE_MOVING);
  decisions.unsettled["eu"] = {LocalMoveOf("eu/1", front, "eu-n1"), moving};
  decisions.unsettled["us"] = {LocalMoveOf("us/1", stale, "us-n1")};
  a.health.not_ready = {"eu/" + front.node()};
  a.health.also_ready["eu"] = {"eu-n1", "eu-n2"};

  AdaptationTick tick = a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
  CHECK(tick.moved.empty());  // the hub's own grace has not passed, and nothing is left to move
  REQUIRE(decisions.settled.size() == 2);
  CHECK(decisions.settled["eu/1"].state() == pb::LOCAL_DECISION_STATE_ADOPTED);
  CHECK_THAT(decisions.settled["eu/1"].note(), Catch::Contains("adopted as migration shop/1"));
  CHECK(decisions.settled["us/1"].state() == pb::LOCAL_DECISION_STATE_UNDONE);
  CHECK_THAT(decisions.settled["us/1"].note(),
             Catch::Contains("runs workload back-0 as pod " + back.pod()));
  CHECK_FALSE(decisions.settled.count("eu/2"));
  const pb::AssignmentPlan adopted = a.bed.repo.Latest("shop")->value();
  CHECK(adopted.plan_revision() == placed.plan_revision() + 1);
  CHECK(TargetOf(adopted, "front-0").node() == "eu-n1");
  CHECK(TargetOf(adopted, "front-0").pod() == front.pod());
  CHECK(TargetOf(adopted, "front-0").reservation() == front.reservation());
  CHECK(TargetOf(adopted, "back-0").node() == back.node());
  absl::StatusOr<pb::Migration> m = a.bed.repo.GetMigration("shop/1");
  REQUIRE(m.ok());
  CHECK(m->reason() == pb::MIGRATION_REASON_LOCAL_RESCHEDULE);
  CHECK(m->phase() == pb::MIGRATION_PHASE_DONE);
  CHECK(m->source().node() == front.node());
  CHECK(m->target().node() == "eu-n1");
  CHECK(a.loop.homes().at("shop/front-0") == "eu/" + front.node());

  // Asked again (the member did not record the verdict): nothing new is written.
  decisions.settled.clear();
  decisions.unsettled["us"].clear();
  tick = a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
  CHECK(decisions.settled["eu/1"].state() == pb::LOCAL_DECISION_STATE_ADOPTED);
  CHECK(a.bed.repo.Latest("shop")->value().plan_revision() == adopted.plan_revision());

  // The failed node is back: front-0 returns to it after the failback grace.
  decisions.unsettled.clear();
  a.health.not_ready.clear();
  for (int i = 0; i <= 40; ++i) {
    a.bed.clock.Advance(absl::Seconds(10));
    tick = a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
    if (!tick.moved.empty()) break;
  }
  REQUIRE(tick.moved.size() == 1);
  CHECK_THAT(tick.moved[0],
             Catch::Contains("shop/front-0 eu/eu-n1 -> eu/" + front.node() + " (FAILBACK)"));
}

TEST_CASE("A hub that reaches no member moves nothing and evacuates nothing once back",
          "[adaptation]") {
  AdaptBed a;
  const pb::AssignmentPlan placed = a.bed.repo.Latest("shop")->value();
  a.bed.members.away = {"eu", "us"};
  AdaptationTick tick;
  for (int i = 0; i < 20; ++i) {  // three minutes: three failure graces
    tick = a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
    CHECK(tick.failed.empty());
    CHECK(tick.moved.empty());
    a.bed.clock.Advance(absl::Seconds(10));
  }
  REQUIRE(tick.held.size() == 1);
  CHECK_THAT(tick.held[0], Catch::Contains("none of the 2 members answers"));
  // Back: both answer, and neither counts as failed.
  a.bed.members.away.clear();
  tick = a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
  CHECK(tick.failed.empty());
  CHECK(tick.moved.empty());
  CHECK(a.bed.repo.Latest("shop")->value().plan_revision() == placed.plan_revision());
  // One cluster away while the other answers is a cluster failure, as before,
  // even when the one that answers runs nothing (both pods on us).
  REQUIRE(a.bed.service->Migrate(MoveOf(a.bed, a.app, "front-0", "us")).ok());
  REQUIRE(a.ClusterOf("front-0") == "us");
  REQUIRE(a.ClusterOf("back-0") == "us");
  a.bed.members.away = {"us"};
  for (int i = 0; i < 8 && tick.moved.empty(); ++i) {
    a.bed.clock.Advance(absl::Seconds(10));
    tick = a.loop.Tick(absl::InfiniteFuture(), absl::Hours(1));
  }
  CHECK(tick.failed == std::vector<std::string>{"us"});
}

TEST_CASE("AdoptLocalMove names the missing fields and undoes a move of an application gone",
          "[adaptation]") {
  AdaptBed a;
  absl::StatusOr<pb::LocalDecisionVerdict> v = a.bed.service->AdoptLocalMove(pb::LocalDecision());
  REQUIRE_FALSE(v.ok());
  for (const char* field : {"application", "workload", "cluster", "pod", "to_node"}) {
    CHECK_THAT(std::string(v.status().message()), Catch::Contains(field));
  }
  const pb::WorkloadTarget front = TargetOf(a.bed.repo.Latest("shop")->value(), "front-0");
  pb::LocalDecision d = LocalMoveOf("eu/1", front, "eu-n1");
  d.set_application("gone");
  v = a.bed.service->AdoptLocalMove(d);
  REQUIRE(v.ok());
  CHECK(v->state() == pb::LOCAL_DECISION_STATE_UNDONE);
  CHECK_THAT(v->note(), Catch::Contains("no longer places application gone"));
}

}  // namespace
}  // namespace codeco::swm
