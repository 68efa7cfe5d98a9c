// Fast tests of the SWM server's translation and storage: applications to
// workloads and channels (with field paths for bad input), and the plan
// store's ordering, pagination and request index on an in-memory KvStore.
#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "swm/core/convert.h"
#include "swm/server/plan_store.h"
#include "swm/server/remote_cluster.h"

namespace codeco::swm {
namespace {

namespace acm = codeco::acm::v1;
namespace pb = codeco::swm::v1;

acm::Application TwoServices() {
  acm::Application app;
  app.mutable_metadata()->set_name("shop");
  acm::ApplicationSpec* spec = app.mutable_spec();
  acm::ServiceSpec* web = spec->add_services();
  web->set_name("web");
  web->set_replicas(2);
  web->mutable_requests()->set_cpu_millicores(500);
  acm::ServiceSpec* db = spec->add_services();
  db->set_name("db");
  db->set_replicas(3);
  db->mutable_requests()->set_memory_bytes(1 << 30);
  acm::Channel* c = web->add_channels();
  c->set_name("queries");
  c->set_to_service("db");
  c->set_min_bandwidth_bps(30'000'000);
  c->set_max_delay_ns(5'000'000);
  c->set_service_class(codeco::common::v1::SERVICE_CLASS_ASSURED);
  spec->mutable_intents()->add_allowed_countries("FR");
  spec->mutable_intents()->set_origin("edge");
  spec->mutable_intents()->set_max_latency_to_origin_ns(10'000'000);
  return app;
}

TEST_CASE("an application becomes one workload per replica and channels per replica pair") {
  auto app = ToCoreApplication(TwoServices(), {"edge", "cloud"});
  REQUIRE(app.ok());
  CHECK(app->name == "shop");
  REQUIRE(app->workloads.size() == 5);
  CHECK(app->workloads[0].name == "web-0");
  CHECK(app->workloads[4].name == "db-2");
  CHECK(app->workloads[4].requests.memory_bytes == (1 << 30));
  CHECK(app->workloads[1].allowed_countries == std::vector<std::string>{"FR"});
  CHECK(app->workloads[1].origin_cluster == "edge");
  REQUIRE(app->channels.size() == 6);
  CHECK(app->channels[0].name == "queries-0-0");
  CHECK(app->channels[5].from == "web-1");
  CHECK(app->channels[5].to == "db-2");
  CHECK(app->channels[5].min_bandwidth_bps == 10'000'000);
  CHECK(app->channels[5].service_class == ServiceClass::kAssured);

  acm::Application unset = TwoServices();
  unset.mutable_spec()->mutable_services(1)->set_replicas(0);  // unset = 1
  unset.mutable_spec()->mutable_services(0)->set_replicas(1);
  auto single = ToCoreApplication(unset, {"edge"});
  REQUIRE(single.ok());
  REQUIRE(single->channels.size() == 1);
  CHECK(single->channels[0].name == "queries");
}

TEST_CASE("a job's replicas run to completion and its pods never restart") {
  acm::Application app = TwoServices();
  acm::ServiceSpec* db = app.mutable_spec()->mutable_services(1);
  db->mutable_job()->set_completions(3);
  auto core = ToCoreApplication(app, {"edge"});
  REQUIRE(core.ok());
  CHECK_FALSE(core->workloads[0].run_to_completion);  // web
  CHECK(core->workloads[4].run_to_completion);        // db-2
  WorkloadTarget job{
      .workload = "db-0", .service = "db", .cluster = "edge", .node = "n1", .pod = "shop-db-0"};
  CHECK(PodTemplate(app, job, 1).restart_policy() == codeco::lms::v1::RESTART_POLICY_NEVER);
  WorkloadTarget web = job;
  web.service = "web";
  CHECK(PodTemplate(app, web, 1).restart_policy() == codeco::lms::v1::RESTART_POLICY_UNSPECIFIED);
}

TEST_CASE("bad applications are refused with every field path") {
  acm::Application app = TwoServices();
  app.mutable_spec()->set_app_name("other");
  app.mutable_spec()->mutable_services(0)->set_name("Web!");
  app.mutable_spec()->mutable_services(1)->set_replicas(-2);
  app.mutable_spec()->mutable_services(1)->mutable_requests()->set_cpu_millicores(-1);
  auto result = ToCoreApplication(app, {"cloud"});
  REQUIRE(absl::IsInvalidArgument(result.status()));
  std::string message(result.status().message());
  CHECK(absl::StrContains(message, "application.spec.app_name: must equal metadata.name"));
  CHECK(absl::StrContains(message, "application.spec.services[0].name"));
  CHECK(absl::StrContains(message, "application.spec.services[1].replicas"));
  CHECK(absl::StrContains(message, "application.spec.services[1].requests.cpu_millicores"));
  CHECK(absl::StrContains(message, "application.spec.intents.origin"));

  acm::Application channels = TwoServices();
  acm::Channel* c = channels.mutable_spec()->mutable_services(0)->mutable_channels(0);
  c->set_to_service("cache");
  c->set_max_delay_ns(-1);
  result = ToCoreApplication(channels, {"edge"});
  REQUIRE(absl::IsInvalidArgument(result.status()));
  message = std::string(result.status().message());
  CHECK(absl::StrContains(message, "application.spec.services[0].channels[0].to_service"));
  CHECK(absl::StrContains(message, "application.spec.services[0].channels[0].max_delay_ns"));

  CHECK(absl::IsInvalidArgument(ToCoreApplication(acm::Application(), {}).status()));
}

pb::AssignmentPlan Plan(const std::string& app, int64_t revision, pb::PlanPhase phase) {
  pb::AssignmentPlan plan;
  plan.set_id(app + "/" + std::to_string(revision));
  plan.set_application(app);
  plan.set_plan_revision(revision);
  plan.set_phase(phase);
  return plan;
}

TEST_CASE("the plan store keeps plans newest first and pages through them") {
  auto kv = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  PlanStore store(*kv);
  codeco::common::v1::Operation op;
  op.set_id("place/a/1");
  op.set_resource("applications/a");
  for (int64_t rev = 1; rev <= 12; ++rev) {
    pb::AssignmentPlan plan = Plan("a", rev, rev % 2 ? pb::PLAN_PHASE_FAILED : pb::PLAN_PHASE_DONE);
    REQUIRE(store.Save(&plan, op, rev == 1 ? "req-a" : "").ok());
  }
  pb::AssignmentPlan other = Plan("b", 1, pb::PLAN_PHASE_DONE);
  REQUIRE(store.Save(&other, op, "").ok());

  auto latest = store.Latest("a");
  REQUIRE(latest.ok());
  REQUIRE(latest->has_value());
  CHECK((*latest)->plan_revision() == 12);
  CHECK(store.Get("a", 0)->plan_revision() == 12);
  CHECK(store.Get("a", 3)->plan_revision() == 3);
  CHECK(absl::IsNotFound(store.Get("a", 13).status()));
  CHECK(absl::IsNotFound(store.Get("c", 0).status()));
  CHECK_FALSE(store.Latest("c")->has_value());

  // Every plan of "a", newest first, five per page.
  pb::ListAssignmentPlansRequest request;
  request.set_application("a");
  request.set_page_size(5);
  std::vector<int64_t> seen;
  do {
    auto page = store.List(request);
    REQUIRE(page.ok());
    for (const auto& p : page->plans()) seen.push_back(p.plan_revision());
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty());
  CHECK(seen == std::vector<int64_t>{12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1});

  // Only DONE ones, across applications.
  pb::ListAssignmentPlansRequest done;
  done.set_phase(pb::PLAN_PHASE_DONE);
  done.set_page_size(100);
  auto page = store.List(done);
  REQUIRE(page.ok());
  CHECK(page->plans_size() == 7);
  CHECK(page->plans(6).application() == "b");
  CHECK(page->next_page_token().empty());

  pb::ListAssignmentPlansRequest bad;
  bad.set_page_size(-1);
  CHECK(absl::IsInvalidArgument(store.List(bad).status()));
  bad.set_page_size(1);
  bad.set_application("b");
  bad.set_page_token(PlanStore::PlanKey("a", 1));
  CHECK(absl::IsInvalidArgument(store.List(bad).status()));

  auto by_request = store.OperationForRequest("req-a");
  REQUIRE(by_request.ok());
  REQUIRE(by_request->has_value());
  CHECK((*by_request)->id() == "place/a/1");
  CHECK_FALSE(store.OperationForRequest("req-z")->has_value());
  CHECK(store.GetOperation("place/a/1")->resource() == "applications/a");
  CHECK(absl::IsNotFound(store.GetOperation("place/x/1").status()));
}

TEST_CASE("the plan store keeps one state backup record per workload and lists them by app") {
  auto kv = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  PlanStore store(*kv);
  auto record = [](const std::string& app, const std::string& workload, const std::string& ck) {
    pb::StateBackupRecord r;
    r.set_application(app);
    r.set_workload(workload);
    r.mutable_latest()->set_checkpoint_id(ck);
    return r;
  };
  REQUIRE(store.SaveStateBackup(record("shop", "db-0", "ck-1")).ok());
  REQUIRE(store.SaveStateBackup(record("shop", "db-1", "ck-2")).ok());
  REQUIRE(store.SaveStateBackup(record("shopping", "db-0", "ck-3")).ok());
  REQUIRE(store.SaveStateBackup(record("shop", "db-0", "ck-4")).ok());  // replaces ck-1

  CHECK(store.StateBackupOf("shop", "db-0")->value().latest().checkpoint_id() == "ck-4");
  CHECK_FALSE(store.StateBackupOf("shop", "db-9")->has_value());
  CHECK(store.StateBackups()->size() == 3);

  // Only "shop" (not "shopping"), one per page.
  pb::ListStateBackupsRequest request;
  request.set_application("shop");
  request.set_page_size(1);
  std::vector<std::string> seen;
  do {
    auto page = store.ListStateBackups(request);
    REQUIRE(page.ok());
    for (const auto& r : page->backups()) seen.push_back(r.latest().checkpoint_id());
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty());
  CHECK(seen == std::vector<std::string>{"ck-4", "ck-2"});
  pb::ListStateBackupsRequest bad;
  bad.set_page_size(-1);
  CHECK(absl::IsInvalidArgument(store.ListStateBackups(bad).status()));

  REQUIRE(store.DeleteStateBackup("shop", "db-0").ok());
  REQUIRE(store.DeleteStateBackup("shop", "db-0").ok());  // gone already: OK
  CHECK_FALSE(store.StateBackupOf("shop", "db-0")->has_value());
  PlanStore reopened(*kv);
  CHECK(reopened.StateBackups()->size() == 2);
}

// Application names of `plans`, sorted.
std::vector<std::string> Names(const std::vector<pb::AssignmentPlan>& plans) {
  std::vector<std::string> out;
  for (const auto& p : plans) out.push_back(p.application());
  std::sort(out.begin(), out.end());
  return out;
}

TEST_CASE("the plan store reads back only the applications that hold pods") {
  auto kv = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  codeco::common::v1::Operation op;
  op.set_id("op");
  {
    PlanStore store(*kv);
    pb::AssignmentPlan placed = Plan("placed", 1, pb::PLAN_PHASE_DONE);
    placed.add_targets()->set_cluster("edge");
    pb::AssignmentPlan reserving = Plan("reserving", 1, pb::PLAN_PHASE_RESERVING);
    pb::AssignmentPlan failed = Plan("failed", 1, pb::PLAN_PHASE_FAILED);
    pb::AssignmentPlan removed = Plan("removed", 1, pb::PLAN_PHASE_DONE);
    removed.add_targets()->set_cluster("edge");
    pb::AssignmentPlan released = Plan("removed", 2, pb::PLAN_PHASE_DONE);  // removal: no targets
    for (const pb::AssignmentPlan* p : {&placed, &reserving, &failed, &removed, &released}) {
      REQUIRE(store.Save(p, op, "").ok());
    }
    auto live = store.LivePlans();
    REQUIRE(live.ok());
    CHECK(Names(*live) == std::vector<std::string>{"placed", "reserving"});

    // The one reserving commits, the placed one is removed.
    pb::AssignmentPlan committed = Plan("reserving", 1, pb::PLAN_PHASE_DONE);
    committed.add_targets()->set_cluster("edge");
    pb::AssignmentPlan gone = Plan("placed", 2, pb::PLAN_PHASE_DONE);
    REQUIRE(store.Save(&committed, op, "").ok());
    REQUIRE(store.Save(&gone, op, "").ok());
    live = store.LivePlans();
    REQUIRE(live.ok());
    CHECK(Names(*live) == std::vector<std::string>{"reserving"});
  }
  // A store written before the index (no a/ keys, no marker) gets it built
  // from its plans on first use.
  REQUIRE(kv->Delete(kOperationsFamily, "a/reserving").ok());
  REQUIRE(kv->Delete(kOperationsFamily, "a!").ok());
  PlanStore reopened(*kv);
  auto live = reopened.LivePlans();
  REQUIRE(live.ok());
  CHECK(Names(*live) == std::vector<std::string>{"reserving"});
  CHECK(kv->Get(kOperationsFamily, "a/reserving").ok());
}

TEST_CASE("an MC's solve request keeps each workload's data locality") {
  Application app{.name = "pipeline",
                  .workloads = {{.name = "sensor-0", .service = "sensor", .data_locality = "lille"}}};
  L2Request request{.app = &app, .cluster = {.name = "grenoble"}, .pending = {"sensor-0"}};
  pb::SolveClusterRequest wire = ToSolveClusterRequest(request, "plan-1");
  REQUIRE(wire.workloads_size() == 1);
  CHECK(wire.workloads(0).data_locality() == "lille");
  absl::StatusOr<std::unique_ptr<McSolve>> solve =
      FromSolveClusterRequest(wire, Cluster{.name = "grenoble"}, 100'000);
  REQUIRE(solve.ok());
  REQUIRE_FALSE((*solve)->app.workloads.empty());
  CHECK((*solve)->app.workloads[0].data_locality == "lille");
}

}  // namespace
}  // namespace codeco::swm
