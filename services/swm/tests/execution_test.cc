#include "swm/core/execution.h"

#include <catch2/catch.hpp>
#include <set>

#include "codeco/common/clock.h"
#include "swm/tests/fixtures.h"

namespace codeco::swm {
namespace {

using test::kGi;
using test::MakeCluster;
using test::MakeWorkload;

// A pod runtime that fails CreatePod after `fail_after` successful creations.
class FlakyRuntime final : public PodRuntime {
 public:
  explicit FlakyRuntime(std::vector<Node> nodes) : inner_(std::move(nodes)) {}
  absl::StatusOr<std::vector<Node>> ListNodes() override { return inner_.ListNodes(); }
  absl::StatusOr<std::vector<PodInfo>> ListPods() override { return inner_.ListPods(); }
  absl::Status CreatePod(const PodInfo& pod) override {
    if (fail_after >= 0 && created_ >= fail_after) return absl::UnavailableError("kubelet down");
    ++created_;
    return inner_.CreatePod(pod);
  }
  absl::Status DeletePod(const std::string& name) override { return inner_.DeletePod(name); }
  int fail_after = -1;

 private:
  InMemoryPodRuntime inner_;
  int created_ = 0;
};

struct ClusterRig {
  std::unique_ptr<FlakyRuntime> runtime;
  std::unique_ptr<LocalClusterExecutor> executor;
};

struct Rig {
  SimulatedClock clock{absl::FromUnixSeconds(1'000'000)};
  std::map<std::string, ClusterRig> clusters;
  ClusterRig& Add(const std::string& name, int nodes, int64_t cpu) {
    ClusterRig& r = clusters[name];
    r.runtime = std::make_unique<FlakyRuntime>(MakeCluster(name, nodes, cpu, 8 * kGi).nodes);
    r.executor = std::make_unique<LocalClusterExecutor>(clock, *r.runtime);
    return r;
  }
  PlanExecutor Executor(absl::Duration lease = absl::Seconds(30)) {
    std::map<std::string, ClusterExecutor*> m;
    for (auto& [name, r] : clusters) m[name] = r.executor.get();
    return PlanExecutor(m, lease);
  }
  size_t Pods() {
    size_t n = 0;
    for (auto& [name, r] : clusters) n += r.runtime->ListPods()->size();
    return n;
  }
  size_t Reservations() {
    size_t n = 0;
    for (auto& [name, r] : clusters) n += r.executor->ledger().size();
    return n;
  }
};

AssignmentPlan TwoClusterPlan() {
  Application app{
      .name = "shop",
      .workloads = {MakeWorkload("a", 500), MakeWorkload("b", 500), MakeWorkload("c", 500)},
      .channels = {{.name = "ab", .from = "a", .to = "b"}}};
  PlacementResult r;
  r.placements = {{"a", {"x", "x-n0"}}, {"b", {"y", "y-n0"}}, {"c", {"y", "y-n0"}}};
  r.channels = {ChannelResult{.channel = "ab", .path = {"x", "y"}, .satisfied = true}};
  return BuildPlan(app, r, 7);
}

TEST_CASE("a plan commits on every cluster and records its actions") {
  Rig rig;
  rig.Add("x", 1, 1000);
  rig.Add("y", 1, 1000);
  AssignmentPlan plan = TwoClusterPlan();
  REQUIRE(plan.actions.size() == 4);
  PlanExecutor exec = rig.Executor();
  REQUIRE(exec.Execute(plan).ok());
  CHECK(plan.phase == PlanPhase::kDone);
  CHECK(rig.Pods() == 3);
  for (const PlanAction& a : plan.actions) {
    if (a.type == ActionType::kCreatePod) CHECK(a.result == ActionResult::kSucceeded);
    if (a.type == ActionType::kCreateChannel) CHECK(a.result == ActionResult::kSkipped);
  }
  CHECK(ActionTypeName(plan.actions[0].type) == "CreatePod");
  // Committed reservations count until the pods are seen, then stop.
  CHECK(rig.Reservations() == 2);
  for (auto& [n, r] : rig.clusters) REQUIRE(r.executor->Sync().ok());
  CHECK(rig.Reservations() == 0);
  // Idempotent: Reserve and Commit again with the same id change nothing.
  ClusterExecutor& y = *rig.clusters["y"].executor;
  CHECK(y.Reserve("shop/7/y", {}, absl::Seconds(1)).ok());
}

TEST_CASE("reservations count against capacity so bursts never overcommit") {
  Rig rig;
  ClusterRig& x = rig.Add("x", 1, 1000);
  ReservationItem item{"p1", "x-n0", {600, 0, 0}};
  REQUIRE(x.executor->Reserve("r1", {item}, absl::Seconds(10)).ok());
  REQUIRE(x.executor->Reserve("r1", {item}, absl::Seconds(10)).ok());  // idempotent
  ReservationItem other{"p2", "x-n0", {600, 0, 0}};
  absl::Status st = x.executor->Reserve("r2", {other}, absl::Seconds(10));
  CHECK(st.code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(x.executor->Commit("r1").ok());
  REQUIRE(x.executor->Commit("r1").ok());  // idempotent
  REQUIRE(x.executor->Sync().ok());        // pod seen: the LMS now counts it
  CHECK(x.executor->Reserve("r2", {other}, absl::Seconds(10)).code() ==
        absl::StatusCode::kFailedPrecondition);
  REQUIRE(x.executor->Release("r1").ok());
  REQUIRE(x.executor->Release("r1").ok());  // idempotent
  CHECK(x.executor->Reserve("r2", {other}, absl::Seconds(10)).ok());
}

TEST_CASE("ReleasePods keeps the other pods and forgets the reservation when the last goes") {
  Rig rig;
  ClusterRig& x = rig.Add("x", 1, 4000);
  ReservationItem a{"shop-a", "x-n0", {300, 0, 0}, "a"};
  ReservationItem b{"shop-b", "x-n0", {300, 0, 0}, "b"};
  REQUIRE(x.executor->Reserve("shop/7/x", {a, b}, absl::Seconds(10)).ok());
  REQUIRE(x.executor->Commit("shop/7/x").ok());
  ReservationItem other{"web-c", "x-n0", {300, 0, 0}, "c"};
  REQUIRE(x.executor->Reserve("web/1/x", {other}, absl::Seconds(10)).ok());
  REQUIRE(x.executor->Commit("web/1/x").ok());
  CHECK(x.executor->ledger().Held("x-n0").cpu_millis == 900);

  // One pod goes (a pod of another reservation named with it stays): the
  // reservation holds only the other one.
  REQUIRE(x.executor->ReleasePods("shop/7/x", {"shop-a", "web-c"}).ok());
  std::vector<PodInfo> listed = *x.runtime->ListPods();
  std::set<std::string> pods;
  for (const PodInfo& p : listed) pods.insert(p.name);
  CHECK(pods == std::set<std::string>{"shop-b", "web-c"});
  auto items = x.executor->ledger().Items("shop/7/x");
  REQUIRE(items.ok());
  REQUIRE(items->size() == 1);
  CHECK(items->front().pod == "shop-b");
  CHECK(x.executor->ledger().Held("x-n0").cpu_millis == 600);
  REQUIRE(x.executor->ReleasePods("shop/7/x", {"shop-a"}).ok());  // idempotent
  CHECK(x.executor->ledger().Items("shop/7/x")->size() == 1);

  // The last one goes: the reservation is forgotten; the other one is untouched.
  REQUIRE(x.executor->ReleasePods("shop/7/x", {"shop-b"}).ok());
  CHECK(!x.executor->ledger().Contains("shop/7/x"));
  CHECK(x.executor->ledger().Contains("web/1/x"));
  REQUIRE(x.runtime->ListPods()->size() == 1);
  CHECK(x.runtime->ListPods()->front().name == "web-c");
  CHECK(x.executor->ReleasePods("shop/7/x", {"shop-b"}).ok());   // unknown: OK
  CHECK(x.executor->ReleasePods("never-seen", {"web-c"}).ok());  // deletes nothing
  CHECK(x.runtime->ListPods()->size() == 1);
}

TEST_CASE("a cluster failing during Commit leaves no reservation and no pod anywhere") {
  Rig rig;
  rig.Add("x", 1, 1000);
  ClusterRig& y = rig.Add("y", 1, 1000);
  y.runtime->fail_after = 1;  // y creates one pod, then its kubelet goes away
  AssignmentPlan plan = TwoClusterPlan();
  PlanExecutor exec = rig.Executor();
  absl::Status st = exec.Execute(plan);
  CHECK(st.code() == absl::StatusCode::kAborted);
  CHECK(std::string(st.message()).find("commit in y") != std::string::npos);
  CHECK(plan.phase == PlanPhase::kRolledBack);
  CHECK(rig.Pods() == 0);
  CHECK(rig.Reservations() == 0);
  bool rolled_back = false, failed = false;
  for (const PlanAction& a : plan.actions) {
    rolled_back |= a.result == ActionResult::kRolledBack;
    failed |= a.result == ActionResult::kFailed;
  }
  CHECK(rolled_back);  // x's pod was created and then deleted
  CHECK(failed);
}

TEST_CASE("a reservation that does not fit rolls back the clusters already reserved") {
  Rig rig;
  rig.Add("x", 1, 1000);
  rig.Add("y", 1, 800);  // b + c need 1000
  AssignmentPlan plan = TwoClusterPlan();
  PlanExecutor exec = rig.Executor();
  CHECK(exec.Execute(plan).code() == absl::StatusCode::kAborted);
  CHECK(plan.phase == PlanPhase::kRolledBack);
  CHECK(rig.Reservations() == 0);
  CHECK(rig.Pods() == 0);
}

TEST_CASE("a coordinator that vanishes mid-plan leaves nothing once leases expire") {
  Rig rig;
  rig.Add("x", 1, 1000);
  rig.Add("y", 1, 1000);
  AssignmentPlan plan = TwoClusterPlan();
  PlanExecutor exec = rig.Executor(absl::Seconds(30));
  REQUIRE(exec.Reserve(plan).ok());
  CHECK(plan.phase == PlanPhase::kReserving);
  CHECK(rig.Reservations() == 2);
  CHECK(rig.clusters["y"].executor->ledger().Held("y-n0").cpu_millis == 1000);
  rig.clock.Advance(absl::Seconds(29));
  CHECK(rig.Reservations() == 2);
  rig.clock.Advance(absl::Seconds(1));
  CHECK(rig.Reservations() == 0);
  CHECK(rig.clusters["y"].executor->ledger().Held("y-n0").cpu_millis == 0);
  CHECK(rig.Pods() == 0);
  // A late Commit from the old coordinator is refused.
  CHECK(rig.clusters["x"].executor->Commit(ReservationId(plan, "x")).code() ==
        absl::StatusCode::kFailedPrecondition);
  CHECK(rig.Pods() == 0);
}

TEST_CASE("a plan not in Placing is refused") {
  Rig rig;
  rig.Add("x", 1, 1000);
  AssignmentPlan plan = TwoClusterPlan();
  plan.phase = PlanPhase::kDone;
  PlanExecutor exec = rig.Executor();
  CHECK(exec.Execute(plan).code() == absl::StatusCode::kFailedPrecondition);
  plan.phase = PlanPhase::kPlacing;  // y has no executor
  CHECK(exec.Execute(plan).code() == absl::StatusCode::kFailedPrecondition);
  CHECK(rig.Reservations() == 0);
}

}  // namespace
}  // namespace codeco::swm
