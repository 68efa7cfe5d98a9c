#include "acm/core/application_manager.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <tuple>

#include "absl/strings/str_replace.h"
#include "acm/store/kv_application_store.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"

namespace codeco::acm {
namespace {

namespace fs = std::filesystem;

std::string Bookinfo() {
  std::ifstream in(fs::path(ACM_EXAMPLES_DIR) / "bookinfo.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A CAM of `name` with one service whose image tag is `tag`.
std::string SmallCam(const std::string& name, const std::string& tag,
                     const std::string& labels = "") {
  return absl::StrReplaceAll(
      R"(apiVersion: codeco.he-codeco.eu/v1alpha1
kind: CodecoApp
metadata:
  name: NAME
LABELS
spec:
  appName: NAME
  codecoapp-msspec:
    - serviceName: web
      podspec:
        containers:
          - name: web
            image: registry.example.org/web:TAG
)",
      {{"NAME", name}, {"TAG", tag}, {"LABELS", labels.empty() ? "" : "  labels:\n" + labels}});
}

struct Fixture {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore(ApplicationColumnFamilies());
  KvApplicationStore store{*kv, {.max_events = 1000}};
  InMemoryPlacementScheduler scheduler;
  SimulatedClock clock{absl::FromUnixSeconds(1'800'000'000)};
  ApplicationManager manager{store, scheduler, clock};

  v1::ApplyApplicationResponse Apply(const std::string& yaml, const std::string& request_id = "") {
    v1::ApplyApplicationRequest request;
    request.set_cam_yaml(yaml);
    request.set_request_id(request_id);
    absl::StatusOr<v1::ApplyApplicationResponse> response = manager.Apply(request);
    INFO(response.status().ToString());
    REQUIRE(response.ok());
    return *response;
  }
};

TEST_CASE("apply creates a PENDING application and asks the scheduler") {
  Fixture f;
  v1::ApplyApplicationResponse r = f.Apply(Bookinfo());
  REQUIRE(r.created());
  const v1::Application& app = r.application();
  REQUIRE(app.metadata().name() == "bookinfo");
  REQUIRE(app.metadata().revision() == 1);
  REQUIRE(app.spec_revision() == 1);
  REQUIRE(app.status().phase() == v1::APPLICATION_PHASE_PENDING);
  REQUIRE(app.metadata().create_time().seconds() == 1'800'000'000);
  REQUIRE(app.cam_yaml() == Bookinfo());
  REQUIRE(f.scheduler.requests().size() == 1);
  REQUIRE(f.scheduler.requests()[0].spec_revision() == 1);

  v1::GetApplicationRequest get;
  get.set_name("bookinfo");
  REQUIRE(f.manager.Get(get)->application().spec().services_size() == 4);
}

TEST_CASE("re-applying the same CAM changes nothing but a changed one makes a new spec revision") {
  Fixture f;
  f.Apply(SmallCam("shop", "1"));
  v1::ApplyApplicationResponse same = f.Apply(SmallCam("shop", "1"));
  REQUIRE_FALSE(same.created());
  REQUIRE(same.application().metadata().revision() == 1);
  REQUIRE(f.manager.CurrentRevision().value() == 1);
  REQUIRE(f.scheduler.requests().size() == 1);

  v1::ApplyApplicationResponse changed = f.Apply(SmallCam("shop", "2"));
  REQUIRE(changed.application().metadata().revision() == 2);
  REQUIRE(changed.application().spec_revision() == 2);
  REQUIRE(f.scheduler.requests().size() == 2);

  // Labels alone: a new revision, same spec revision, no new placement.
  v1::ApplyApplicationResponse labelled = f.Apply(SmallCam("shop", "2", "    team: a\n"));
  REQUIRE(labelled.application().metadata().revision() == 3);
  REQUIRE(labelled.application().spec_revision() == 2);
  REQUIRE(f.scheduler.requests().size() == 2);
}

TEST_CASE("dry run validates and stores nothing") {
  Fixture f;
  v1::ApplyApplicationRequest request;
  request.set_cam_yaml(SmallCam("shop", "1"));
  request.set_dry_run(true);
  auto r = f.manager.Apply(request);
  REQUIRE(r.ok());
  REQUIRE(r->created());
  REQUIRE(f.manager.CurrentRevision().value() == 0);
  REQUIRE(f.scheduler.requests().empty());
  v1::GetApplicationRequest get;
  get.set_name("shop");
  REQUIRE(absl::IsNotFound(f.manager.Get(get).status()));
}

TEST_CASE("bad input is INVALID_ARGUMENT and stores nothing") {
  Fixture f;
  v1::ApplyApplicationRequest request;
  request.set_cam_yaml(absl::StrReplaceAll(Bookinfo(), {{"serviceName: ratings\n            port",
                                                         "serviceName: Db\n            port"}}));
  auto r = f.manager.Apply(request);
  REQUIRE(r.status().code() == absl::StatusCode::kInvalidArgument);
  REQUIRE_THAT(std::string(r.status().message()),
               Catch::Contains("spec.codecoapp-msspec[2].serviceChannels[0].otherService."
                               "serviceName: \"Db\" is not a DNS label"));
  REQUIRE(f.manager.CurrentRevision().value() == 0);

  v1::ApplyApplicationRequest empty;
  REQUIRE(f.manager.Apply(empty).status().code() == absl::StatusCode::kInvalidArgument);

  v1::ApplyApplicationRequest spec_form;
  spec_form.mutable_spec()->set_app_name("Bad_Name");
  auto bad = f.manager.Apply(spec_form);
  REQUIRE(bad.status().code() == absl::StatusCode::kInvalidArgument);
  REQUIRE_THAT(std::string(bad.status().message()), Catch::StartsWith("spec.app_name: "));
  REQUIRE(f.manager.CurrentRevision().value() == 0);
}

TEST_CASE("a request_id makes apply idempotent") {
  Fixture f;
  v1::ApplyApplicationResponse first = f.Apply(SmallCam("shop", "1"), "req-1");
  f.Apply(SmallCam("shop", "2"));  // someone else changes it in between
  v1::ApplyApplicationResponse again = f.Apply(SmallCam("shop", "1"), "req-1");
  REQUIRE(again.SerializeAsString() == first.SerializeAsString());
  REQUIRE(f.manager.CurrentRevision().value() == 2);

  v1::ApplyApplicationRequest reuse;
  reuse.set_cam_yaml(SmallCam("shop", "3"));
  reuse.set_request_id("req-1");
  auto r = f.manager.Apply(reuse);
  REQUIRE(r.status().code() == absl::StatusCode::kInvalidArgument);
  REQUIRE_THAT(std::string(r.status().message()), Catch::StartsWith("request_id: "));
}

TEST_CASE("expected_revision guards concurrent updates") {
  Fixture f;
  f.Apply(SmallCam("shop", "1"));
  v1::ApplyApplicationRequest request;
  request.set_cam_yaml(SmallCam("shop", "2"));
  request.set_expected_revision(7);
  REQUIRE(f.manager.Apply(request).status().code() == absl::StatusCode::kFailedPrecondition);
  request.set_expected_revision(1);
  REQUIRE(f.manager.Apply(request).ok());
}

TEST_CASE("rollback restores an older spec as a new spec revision") {
  Fixture f;
  f.Apply(SmallCam("shop", "1"));
  f.Apply(SmallCam("shop", "2"));
  v1::RollbackApplicationRequest rollback;
  rollback.set_name("shop");
  rollback.set_to_spec_revision(1);
  rollback.set_request_id("rb-1");
  auto r = f.manager.Rollback(rollback);
  REQUIRE(r.ok());
  REQUIRE(r->application().spec_revision() == 3);
  REQUIRE(r->application().spec().services(0).image() == "registry.example.org/web:1");
  REQUIRE(r->application().cam_yaml() == SmallCam("shop", "1"));
  REQUIRE(r->application().status().phase() == v1::APPLICATION_PHASE_PENDING);
  // Retried: the same answer, no new revision.
  auto again = f.manager.Rollback(rollback);
  REQUIRE(again->SerializeAsString() == r->SerializeAsString());
  REQUIRE(f.manager.CurrentRevision().value() == 3);

  v1::ListApplicationRevisionsRequest list;
  list.set_name("shop");
  list.set_page_size(2);
  auto page1 = f.manager.ListRevisions(list);
  REQUIRE(page1->revisions_size() == 2);
  REQUIRE(page1->revisions(0).spec_revision() == 3);
  REQUIRE(page1->revisions(0).change_cause() == "rollback to 1");
  list.set_page_token(page1->next_page_token());
  auto page2 = f.manager.ListRevisions(list);
  REQUIRE(page2->revisions_size() == 1);
  REQUIRE(page2->revisions(0).spec_revision() == 1);
  REQUIRE(page2->next_page_token().empty());

  v1::GetApplicationRequest get;
  get.set_name("shop");
  get.set_spec_revision(2);
  REQUIRE(f.manager.Get(get)->application().spec().services(0).image() ==
          "registry.example.org/web:2");

  rollback.set_request_id("");
  rollback.set_to_spec_revision(9);
  REQUIRE(absl::IsNotFound(f.manager.Rollback(rollback).status()));
}

TEST_CASE("the scheduler's answer moves the phase and stale answers are refused") {
  Fixture f;
  f.Apply(Bookinfo());
  PlacementResult result;
  result.placed = true;
  result.plan_revision = 1;
  result.neighborhood_id = "nb-bookinfo";
  for (const char* s : {"productpage", "details", "reviews"}) {
    v1::ServicePlacement p;
    p.set_service(s);
    p.set_cluster("edge-1");
    p.set_node("n1");
    p.set_pod(std::string(s) + "-0");
    p.set_ready(true);
    result.placements.push_back(p);
  }
  auto partial = f.manager.RecordPlacement("bookinfo", 1, result);
  REQUIRE(partial.ok());
  REQUIRE(partial->status().phase() == v1::APPLICATION_PHASE_DEGRADED);
  REQUIRE_THAT(partial->status().error_msg(), Catch::Contains("ratings"));

  v1::ServicePlacement ratings;
  ratings.set_service("ratings");
  ratings.set_cluster("edge-2");
  ratings.set_node("n7");
  ratings.set_pod("ratings-0");
  result.placements.push_back(ratings);
  auto deploying = f.manager.RecordPlacement("bookinfo", 1, result);
  REQUIRE(deploying->status().phase() == v1::APPLICATION_PHASE_DEPLOYING);
  result.placements.back().set_ready(true);
  auto running = f.manager.RecordPlacement("bookinfo", 1, result);
  REQUIRE(running->status().phase() == v1::APPLICATION_PHASE_RUNNING);
  REQUIRE(running->status().status() == v1::STATUS_LEVEL_OK);
  REQUIRE(running->status().placements_size() == 4);
  REQUIRE(running->status().observed_spec_revision() == 1);

  REQUIRE(f.manager.RecordPlacement("bookinfo", 2, result).status().code() ==
          absl::StatusCode::kFailedPrecondition);
  PlacementResult failed;
  failed.message = "no cluster has 250m CPU free for reviews";
  auto f2 = f.manager.RecordPlacement("bookinfo", 1, failed);
  REQUIRE(f2->status().phase() == v1::APPLICATION_PHASE_FAILED);
  REQUIRE(f2->status().status() == v1::STATUS_LEVEL_ERROR);
  REQUIRE(f2->status().error_msg() == failed.message);
}

TEST_CASE("pod reports move a placed application to RUNNING and failures to WARNING or ERROR") {
  Fixture f;
  // Two services, web on two clusters and db on one.
  std::string yaml = absl::StrReplaceAll(SmallCam("shop", "1"), {{"            image: registry.example.org/web:1\n",
                                                                  "            image: registry.example.org/web:1\n"
                                                                  "    - serviceName: db\n"
                                                                  "      podspec:\n"
                                                                  "        containers:\n"
                                                                  "          - name: db\n"
                                                                  "            image: registry.example.org/db:1\n"}});
  f.Apply(yaml);
  PlacementResult result;
  result.placed = true;
  result.plan_revision = 1;
  for (auto [service, cluster, pod] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"web", "rennes", "shop-web-0"}, {"web", "nantes", "shop-web-1"},
           {"db", "nantes", "shop-db-0"}}) {
    v1::ServicePlacement p;
    p.set_service(service);
    p.set_cluster(cluster);
    p.set_node("n1");
    p.set_pod(pod);
    result.placements.push_back(p);
  }
  REQUIRE(f.manager.RecordPlacement("shop", 1, result).ok());
  auto status = [&] {
    v1::GetApplicationRequest get;
    get.set_name("shop");
    return f.manager.Get(get)->application().status();
  };
  REQUIRE(status().phase() == v1::APPLICATION_PHASE_DEPLOYING);
  auto pod = [](const std::string& name, const std::string& service, lms::v1::PodPhase phase,
                const std::string& message = "") {
    return PodReport{"shop", service, name, "n1", phase, message};
  };

  // rennes: its pod runs; nantes has not reported: still DEPLOYING, one ready.
  REQUIRE(*f.manager.RecordPods("rennes", {pod("shop-web-0", "web", lms::v1::POD_PHASE_RUNNING)}) ==
          1);
  REQUIRE(status().phase() == v1::APPLICATION_PHASE_DEPLOYING);
  REQUIRE(status().placements(0).ready());
  // The same report again changes nothing (no event).
  const int64_t revision = *f.manager.CurrentRevision();
  REQUIRE(*f.manager.RecordPods("rennes", {pod("shop-web-0", "web", lms::v1::POD_PHASE_RUNNING)}) ==
          0);
  REQUIRE(*f.manager.CurrentRevision() == revision);

  // nantes: both run -> RUNNING, OK.
  REQUIRE(*f.manager.RecordPods("nantes", {pod("shop-web-1", "web", lms::v1::POD_PHASE_RUNNING),
                                           pod("shop-db-0", "db", lms::v1::POD_PHASE_RUNNING)}) ==
          1);
  REQUIRE(status().phase() == v1::APPLICATION_PHASE_RUNNING);
  REQUIRE(status().status() == v1::STATUS_LEVEL_OK);

  // Where the running pods serve is kept with their placements.
  PodReport db = pod("shop-db-0", "db", lms::v1::POD_PHASE_RUNNING);
  db.addresses = {"10.2.0.9:5432"};
  REQUIRE(*f.manager.RecordPods("nantes",
                                {pod("shop-web-1", "web", lms::v1::POD_PHASE_RUNNING), db}) == 1);
  const v1::ApplicationStatus serving = status();
  REQUIRE(serving.placements(2).pod() == "shop-db-0");
  CHECK(std::vector<std::string>(serving.placements(2).addresses().begin(),
                                 serving.placements(2).addresses().end()) ==
        std::vector<std::string>{"10.2.0.9:5432"});
  CHECK(serving.placements(1).addresses().empty());

  // One web replica fails: web still runs in rennes -> WARNING, the pod named.
  REQUIRE(*f.manager.RecordPods("nantes",
                                {pod("shop-web-1", "web", lms::v1::POD_PHASE_FAILED, "OOMKilled"),
                                 pod("shop-db-0", "db", lms::v1::POD_PHASE_RUNNING)}) == 1);
  REQUIRE(status().phase() == v1::APPLICATION_PHASE_DEGRADED);
  REQUIRE(status().status() == v1::STATUS_LEVEL_WARNING);
  REQUIRE_THAT(status().error_msg(),
               Catch::Contains("shop-web-1") && Catch::Contains("OOMKilled") &&
                   Catch::Contains("nantes"));
  // A report without the addresses drops them.
  CHECK(status().placements(2).addresses().empty());

  // db's only pod fails too -> ERROR.
  REQUIRE(*f.manager.RecordPods("nantes",
                                {pod("shop-web-1", "web", lms::v1::POD_PHASE_FAILED, "OOMKilled"),
                                 pod("shop-db-0", "db", lms::v1::POD_PHASE_FAILED, "CrashLoop")}) ==
          1);
  REQUIRE(status().status() == v1::STATUS_LEVEL_ERROR);
  REQUIRE_THAT(status().error_msg(), Catch::Contains("shop-db-0"));

  // Restarted and running again -> RUNNING, OK, no message.
  REQUIRE(*f.manager.RecordPods("nantes", {pod("shop-web-1", "web", lms::v1::POD_PHASE_RUNNING),
                                           pod("shop-db-0", "db", lms::v1::POD_PHASE_RUNNING)}) ==
          1);
  REQUIRE(status().phase() == v1::APPLICATION_PHASE_RUNNING);
  REQUIRE(status().error_msg().empty());

  // The watch log holds every step in order.
  auto changes = f.manager.ReadChanges("shop", revision, 100);
  std::vector<v1::ApplicationPhase> phases;
  for (const auto& c : *changes) phases.push_back(c.application().status().phase());
  REQUIRE(phases == std::vector<v1::ApplicationPhase>{
                        v1::APPLICATION_PHASE_RUNNING, v1::APPLICATION_PHASE_RUNNING,
                        v1::APPLICATION_PHASE_DEGRADED, v1::APPLICATION_PHASE_DEGRADED,
                        v1::APPLICATION_PHASE_RUNNING});

  // A report for a cluster with none of its pods leaves them not ready.
  REQUIRE(*f.manager.RecordPods("nantes", {}) == 1);
  REQUIRE(status().phase() == v1::APPLICATION_PHASE_DEPLOYING);
  REQUIRE(absl::IsInvalidArgument(f.manager.RecordPods("", {}).status()));
}

TEST_CASE("channel status from the scheduler shows in the application and OOQOS degrades it") {
  Fixture f;
  f.Apply(SmallCam("shop", "1"));
  auto channel = [](const std::string& name, v1::ChannelPhase phase, const std::string& message) {
    v1::ChannelStatus c;
    c.set_name(name);
    c.set_phase(phase);
    c.set_message(message);
    c.set_virtual_link_id("vl-1");
    return c;
  };
  auto status = [&] {
    v1::GetApplicationRequest get;
    get.set_name("shop");
    return f.manager.Get(get)->application().status();
  };
  // The channel stream ran ahead of the placement answer: kept for plan 1.
  REQUIRE(f.manager
              .RecordChannels("shop", 1,
                              {channel("web-db", v1::CHANNEL_PHASE_IMPLEMENTED, "set up")})
              .ok());
  REQUIRE(status().channels_size() == 0);
  PlacementResult result;
  result.placed = true;
  result.plan_revision = 1;
  v1::ServicePlacement p;
  p.set_service("web");
  p.set_cluster("rennes");
  p.set_node("n1");
  p.set_pod("shop-web-0");
  result.placements.push_back(p);
  REQUIRE(f.manager.RecordPlacement("shop", 1, result).ok());
  REQUIRE(status().channels_size() == 1);
  CHECK(status().channels(0).phase() == v1::CHANNEL_PHASE_IMPLEMENTED);
  REQUIRE(*f.manager.RecordPods("rennes", {PodReport{"shop", "web", "shop-web-0", "n1",
                                                     lms::v1::POD_PHASE_RUNNING, ""}}) == 1);
  REQUIRE(status().phase() == v1::APPLICATION_PHASE_RUNNING);

  REQUIRE(f.manager
              .RecordChannels("shop", 1,
                              {channel("web-db", v1::CHANNEL_PHASE_OOQOS,
                                       "out of QoS: delay 35 ms exceeds 20 ms")})
              .ok());
  CHECK(status().phase() == v1::APPLICATION_PHASE_DEGRADED);
  CHECK(status().status() == v1::STATUS_LEVEL_WARNING);
  CHECK_THAT(status().error_msg(), Catch::Contains("channel web-db OOQOS") &&
                                       Catch::Contains("35 ms exceeds"));
  // The change is an event watchers read.
  auto changes = f.manager.ReadChanges("shop", 0, 1000);
  REQUIRE(changes.ok());
  CHECK(changes->back().application().status().channels(0).phase() == v1::CHANNEL_PHASE_OOQOS);

  // Within bounds again: RUNNING. A stale report (older plan) or one for a
  // removed application changes nothing.
  REQUIRE(f.manager.RecordChannels("shop", 1, {channel("web-db", v1::CHANNEL_PHASE_RUNNING, "ok")})
              .ok());
  CHECK(status().phase() == v1::APPLICATION_PHASE_RUNNING);
  REQUIRE(f.manager.RecordChannels("shop", 0, {}).ok());
  REQUIRE(f.manager.RecordChannels("shop", 1, {channel("web-db", v1::CHANNEL_PHASE_RUNNING, "ok")})
              .ok());
  CHECK(status().channels_size() == 1);
  CHECK(absl::IsNotFound(f.manager.RecordChannels("nope", 1, {})));
}

TEST_CASE("a plan written by a migration moves the application's placement") {
  Fixture f;
  f.Apply(SmallCam("shop", "1"));
  auto status = [&] {
    v1::GetApplicationRequest get;
    get.set_name("shop");
    return f.manager.Get(get)->application().status();
  };
  auto placement = [](const std::string& cluster, const std::string& node,
                      const std::string& pod) {
    v1::ServicePlacement p;
    p.set_service("web");
    p.set_cluster(cluster);
    p.set_node(node);
    p.set_pod(pod);
    return p;
  };
  // Waiting for its own placement: a plan from elsewhere changes nothing.
  REQUIRE(f.manager.RecordMove("shop", 1, 1, {placement("rennes", "n1", "shop-web")}).ok());
  CHECK(status().placements_size() == 0);
  CHECK(status().phase() == v1::APPLICATION_PHASE_PENDING);

  PlacementResult result;
  result.placed = true;
  result.plan_revision = 1;
  result.placements.push_back(placement("rennes", "n1", "shop-web"));
  REQUIRE(f.manager.RecordPlacement("shop", 1, result).ok());
  REQUIRE(*f.manager.RecordPods("rennes", {PodReport{"shop", "web", "shop-web", "n1",
                                                     lms::v1::POD_PHASE_RUNNING, ""}}) == 1);
  REQUIRE(status().phase() == v1::APPLICATION_PHASE_RUNNING);
  const int64_t seen = *f.manager.CurrentRevision();

  // The same plan again, an older one, or one for another spec revision:
  // nothing changes.
  REQUIRE(f.manager.RecordMove("shop", 1, 1, {placement("lille", "n2", "shop-web-r2")}).ok());
  REQUIRE(f.manager.RecordMove("shop", 2, 2, {placement("lille", "n2", "shop-web-r2")}).ok());
  REQUIRE(f.manager.RecordMove("shop", 1, 2, {}).ok());
  CHECK(status().plan_revision() == 1);
  CHECK(status().placements(0).cluster() == "rennes");

  // Migration plan 2 moved web to lille: the placement follows (not ready
  // until lille reports the pod), and a watcher sees it as an event.
  REQUIRE(f.manager.RecordMove("shop", 1, 2, {placement("lille", "n2", "shop-web-r2")}).ok());
  CHECK(status().plan_revision() == 2);
  REQUIRE(status().placements_size() == 1);
  CHECK(status().placements(0).cluster() == "lille");
  CHECK(status().placements(0).pod() == "shop-web-r2");
  CHECK_FALSE(status().placements(0).ready());
  CHECK(status().phase() == v1::APPLICATION_PHASE_DEPLOYING);
  auto after = f.manager.ReadChanges("shop", seen, 1000);
  REQUIRE(after.ok());
  REQUIRE(after->size() == 1);
  CHECK(after->back().application().status().placements(0).cluster() == "lille");
  REQUIRE(*f.manager.RecordPods("lille", {PodReport{"shop", "web", "shop-web-r2", "n2",
                                                    lms::v1::POD_PHASE_RUNNING, ""}}) == 1);
  CHECK(status().phase() == v1::APPLICATION_PHASE_RUNNING);

  // A pod the cluster reported running before the plan that moves the
  // workload there came is ready at once.
  REQUIRE(*f.manager.RecordPods("lyon", {PodReport{"shop", "web", "shop-web-r3", "n7",
                                                   lms::v1::POD_PHASE_RUNNING, ""}}) == 0);
  REQUIRE(f.manager.RecordMove("shop", 1, 3, {placement("lyon", "n7", "shop-web-r3")}).ok());
  CHECK(status().placements(0).ready());
  CHECK(status().phase() == v1::APPLICATION_PHASE_RUNNING);
  REQUIRE(f.manager.RecordMove("shop", 1, 4, {placement("lille", "n2", "shop-web-r2")}).ok());

  // An unchanged placement keeps its readiness; channels kept for the plan
  // are folded in.
  REQUIRE(f.manager.RecordChannels("shop", 5, {}).ok());
  REQUIRE(f.manager.RecordMove("shop", 1, 5, {placement("lille", "n2", "shop-web-r2")}).ok());
  CHECK(status().plan_revision() == 5);
  CHECK(status().placements(0).ready());
  CHECK(status().phase() == v1::APPLICATION_PHASE_RUNNING);
  CHECK(absl::IsNotFound(f.manager.RecordMove("nope", 1, 1, {placement("a", "b", "c")})));
}

TEST_CASE("list pages by name and filters by phase and labels") {
  Fixture f;
  for (int i = 0; i < 5; ++i) {
    f.Apply(SmallCam("app-" + std::to_string(i), "1",
                     i % 2 == 0 ? "    tier: gold\n" : "    tier: silver\n"));
  }
  PlacementResult placed;
  placed.placed = true;
  v1::ServicePlacement p;
  p.set_service("web");
  p.set_ready(true);
  placed.placements.push_back(p);
  REQUIRE(f.manager.RecordPlacement("app-3", 1, placed).ok());

  v1::ListApplicationsRequest list;
  list.set_page_size(2);
  std::vector<std::string> names;
  for (int pages = 0; pages < 10; ++pages) {
    auto page = f.manager.List(list);
    REQUIRE(page.ok());
    for (const auto& a : page->applications()) names.push_back(a.metadata().name());
    if (page->next_page_token().empty()) break;
    list.set_page_token(page->next_page_token());
  }
  REQUIRE(names == std::vector<std::string>{"app-0", "app-1", "app-2", "app-3", "app-4"});

  v1::ListApplicationsRequest gold;
  (*gold.mutable_label_selector()->mutable_match_labels())["tier"] = "gold";
  REQUIRE(f.manager.List(gold)->applications_size() == 3);

  v1::ListApplicationsRequest running;
  running.set_phase(v1::APPLICATION_PHASE_RUNNING);
  auto r = f.manager.List(running);
  REQUIRE(r->applications_size() == 1);
  REQUIRE(r->applications(0).metadata().name() == "app-3");

  v1::ListApplicationsRequest not_silver;
  auto* expr = not_silver.mutable_label_selector()->add_match_expressions();
  expr->set_key("tier");
  expr->set_op(common::v1::LABEL_SELECTOR_OPERATOR_NOT_IN);
  expr->add_values("silver");
  REQUIRE(f.manager.List(not_silver)->applications_size() == 3);
}

TEST_CASE("delete removes the application and its revisions once the release is confirmed") {
  Fixture f;
  f.Apply(SmallCam("shop", "1"));
  f.Apply(SmallCam("shop", "2"));
  v1::DeleteApplicationRequest del;
  del.set_name("shop");
  del.set_request_id("d-1");
  absl::StatusOr<v1::DeleteApplicationResponse> first = f.manager.Delete(del);
  REQUIRE(first.ok());
  REQUIRE(first->operation().kind() == "acm.DeleteApplication");
  REQUIRE(first->operation().resource() == "applications/shop");
  REQUIRE_FALSE(first->operation().id().empty());
  absl::StatusOr<v1::DeleteApplicationResponse> again = f.manager.Delete(del);
  REQUIRE(again.ok());  // retried with the same id: same answer
  REQUIRE(again->operation().id() == first->operation().id());
  REQUIRE(f.scheduler.releases() == std::vector<std::string>{"shop"});

  // Until the scheduler confirms, the application stays, DELETING.
  v1::GetApplicationRequest get;
  get.set_name("shop");
  REQUIRE(f.manager.Get(get)->application().status().phase() == v1::APPLICATION_PHASE_DELETING);
  REQUIRE(f.manager.Get(get)->application().status().operation_id() == first->operation().id());
  REQUIRE(f.manager.Get(get)->application().spec_revision() == 2);

  REQUIRE(f.manager.RecordRelease("shop", absl::OkStatus()).ok());
  REQUIRE(absl::IsNotFound(f.manager.Get(get).status()));
  v1::ListApplicationRevisionsRequest revs;
  revs.set_name("shop");
  REQUIRE(absl::IsNotFound(f.manager.ListRevisions(revs).status()));
  del.set_request_id("");
  REQUIRE(absl::IsNotFound(f.manager.Delete(del).status()));
  REQUIRE(f.manager.RecordRelease("shop", absl::OkStatus()).ok());  // late duplicate: no-op

  // Re-created, it starts over at spec revision 1.
  REQUIRE(f.Apply(SmallCam("shop", "3")).application().spec_revision() == 1);
}

TEST_CASE("a DELETING application waits for an unreachable scheduler and refuses updates") {
  Fixture f;
  f.Apply(SmallCam("shop", "1"));
  int64_t before = *f.manager.CurrentRevision();
  v1::DeleteApplicationRequest del;
  del.set_name("shop");
  REQUIRE(f.manager.Delete(del).ok());

  // The scheduler reports it could not release: recorded once, still DELETING.
  REQUIRE(f.manager.RecordRelease("shop", absl::UnavailableError("swm: connection refused")).ok());
  v1::GetApplicationRequest get;
  get.set_name("shop");
  v1::Application app = f.manager.Get(get)->application();
  REQUIRE(app.status().phase() == v1::APPLICATION_PHASE_DELETING);
  REQUIRE(app.status().status() == v1::STATUS_LEVEL_WARNING);
  REQUIRE_THAT(app.status().error_msg(), Catch::Contains("swm: connection refused"));
  const int64_t revision = app.metadata().revision();
  REQUIRE(f.manager.RecordRelease("shop", absl::UnavailableError("swm: connection refused")).ok());
  REQUIRE(*f.manager.CurrentRevision() == revision);  // the same news is not a change

  // Nothing else may change it meanwhile.
  v1::ApplyApplicationRequest apply;
  apply.set_cam_yaml(SmallCam("shop", "2"));
  REQUIRE(absl::IsFailedPrecondition(f.manager.Apply(apply).status()));
  v1::RollbackApplicationRequest rollback;
  rollback.set_name("shop");
  rollback.set_to_spec_revision(1);
  REQUIRE(absl::IsFailedPrecondition(f.manager.Rollback(rollback).status()));
  PlacementResult placed;
  placed.placed = true;
  REQUIRE(absl::IsFailedPrecondition(f.manager.RecordPlacement("shop", 1, placed).status()));

  // Deleting again asks the scheduler again, under the same operation.
  REQUIRE(f.manager.Delete(del).ok());
  REQUIRE(f.scheduler.releases() == std::vector<std::string>{"shop", "shop"});

  // Once released: one DELETED event, after the DELETING and warning ones, in order.
  REQUIRE(f.manager.RecordRelease("shop", absl::OkStatus()).ok());
  auto changes = f.manager.ReadChanges("shop", before, 100);
  REQUIRE(changes.ok());
  REQUIRE(changes->size() == 3);
  REQUIRE((*changes)[0].type() == common::v1::WATCH_EVENT_TYPE_MODIFIED);
  REQUIRE((*changes)[0].application().status().phase() == v1::APPLICATION_PHASE_DELETING);
  REQUIRE((*changes)[1].application().status().status() == v1::STATUS_LEVEL_WARNING);
  REQUIRE((*changes)[2].type() == common::v1::WATCH_EVENT_TYPE_DELETED);
  REQUIRE((*changes)[2].application().metadata().revision() ==
          (*changes)[1].application().metadata().revision() + 1);
  // A release outcome for an application that is not DELETING is stale.
  f.Apply(SmallCam("other", "1"));
  REQUIRE(absl::IsFailedPrecondition(f.manager.RecordRelease("other", absl::OkStatus())));
}

// A job of `completions` pods ("batch-batch-<i>", `pods` of them at once
// with `counts` such as ", parallelism: 2") and, with `with_service`, a
// service "api" beside it; placed on rennes.
void PlaceJob(Fixture& f, int completions, bool with_service, const std::string& counts = "",
              int pods = 0) {
  if (pods == 0) pods = completions;
  std::string yaml = absl::StrCat(R"(apiVersion: codeco.io/v1
kind: CodecoApp
metadata: {name: batch}
spec:
  appName: batch
  codecoapp-msspec:
    - serviceName: batch
      job: {completions: )",
                                  completions, counts, R"(}
      podspec:
        restartPolicy: Never
        containers: [{name: b, image: b:1}]
)");
  if (with_service) {
    yaml += R"(    - serviceName: api
      podspec:
        containers: [{name: a, image: a:1}]
)";
  }
  f.Apply(yaml);
  PlacementResult result{.placed = true, .plan_revision = 1};
  for (int i = 0; i < pods + (with_service ? 1 : 0); ++i) {
    v1::ServicePlacement p;
    const bool api = i == pods;
    p.set_service(api ? "api" : "batch");
    p.set_cluster("rennes");
    p.set_node("n1");
    p.set_pod(api ? "batch-api-0" : absl::StrCat("batch-batch-", i));
    p.set_workload(api ? "api-0" : absl::StrCat("batch-", i));
    result.placements.push_back(p);
  }
  REQUIRE(f.manager.RecordPlacement("batch", 1, result).ok());
}

TEST_CASE("a job's application SUCCEEDS once every pod succeeded and each counts once") {
  Fixture f;
  PlaceJob(f, 2, false);
  auto status = [&] {
    v1::GetApplicationRequest get;
    get.set_name("batch");
    return f.manager.Get(get)->application().status();
  };
  auto pod = [](int i, lms::v1::PodPhase phase) {
    return PodReport{"batch", "batch", absl::StrCat("batch-batch-", i), "n1", phase, ""};
  };
  REQUIRE(f.manager
              .RecordPods("rennes",
                          {pod(0, lms::v1::POD_PHASE_RUNNING), pod(1, lms::v1::POD_PHASE_RUNNING)})
              .ok());
  REQUIRE(status().phase() == v1::APPLICATION_PHASE_RUNNING);
  REQUIRE(status().jobs_size() == 1);
  CHECK(status().jobs(0).completions() == 2);
  CHECK(status().jobs(0).succeeded_pods().empty());
  // One done: still RUNNING; the same report twice counts it once.
  for (int twice = 0; twice < 2; ++twice) {
    REQUIRE(f.manager
                .RecordPods("rennes", {pod(0, lms::v1::POD_PHASE_SUCCEEDED),
                                       pod(1, lms::v1::POD_PHASE_RUNNING)})
                .ok());
  }
  REQUIRE(status().phase() == v1::APPLICATION_PHASE_RUNNING);
  REQUIRE(status().jobs(0).succeeded_pods_size() == 1);
  CHECK(status().placements(0).succeeded());
  CHECK_FALSE(status().placements(0).ready());
  // The finished pod removed from its cluster stays counted.
  REQUIRE(f.manager.RecordPods("rennes", {pod(1, lms::v1::POD_PHASE_SUCCEEDED)}).ok());
  REQUIRE(status().phase() == v1::APPLICATION_PHASE_SUCCEEDED);
  CHECK(status().status() == v1::STATUS_LEVEL_OK);
  CHECK(status().jobs(0).succeeded_pods_size() == 2);
  // SUCCEEDED is final: later reports change nothing.
  REQUIRE(*f.manager.RecordPods("rennes", {}) == 0);
  CHECK(status().phase() == v1::APPLICATION_PHASE_SUCCEEDED);
}

TEST_CASE("a job whose pod fails FAILS its application and a finished job beside a service runs") {
  SECTION("failed") {
    Fixture f;
    PlaceJob(f, 2, false);
    REQUIRE(f.manager
                .RecordPods("rennes", {PodReport{"batch", "batch", "batch-batch-0", "n1",
                                                 lms::v1::POD_PHASE_FAILED, "exit code 3"},
                                       PodReport{"batch", "batch", "batch-batch-1", "n1",
                                                 lms::v1::POD_PHASE_RUNNING, ""}})
                .ok());
    v1::GetApplicationRequest get;
    get.set_name("batch");
    const v1::ApplicationStatus status = f.manager.Get(get)->application().status();
    CHECK(status.phase() == v1::APPLICATION_PHASE_FAILED);
    CHECK(status.status() == v1::STATUS_LEVEL_ERROR);
    CHECK_THAT(status.error_msg(),
               Catch::Contains("job batch failed: 1 of its pods failed, more than its "
                               "backoffLimit 0 (pod batch-batch-0") &&
                   Catch::Contains("exit code 3"));
    REQUIRE(status.jobs(0).failed_pods_size() == 1);
  }
  SECTION("beside a service") {
    Fixture f;
    PlaceJob(f, 1, true);
    REQUIRE(f.manager
                .RecordPods("rennes", {PodReport{"batch", "batch", "batch-batch-0", "n1",
                                                 lms::v1::POD_PHASE_SUCCEEDED, ""},
                                       PodReport{"batch", "api", "batch-api-0", "n1",
                                                 lms::v1::POD_PHASE_RUNNING, ""}})
                .ok());
    v1::GetApplicationRequest get;
    get.set_name("batch");
    const v1::ApplicationStatus status = f.manager.Get(get)->application().status();
    CHECK(status.phase() == v1::APPLICATION_PHASE_RUNNING);
    CHECK(status.jobs(0).succeeded_pods_size() == 1);
  }
}

TEST_CASE("a job runs its next pod in an ended pod's slot until its completions or backoffLimit") {
  Fixture f;
  // Three completions, two at a time, one failure tolerated.
  PlaceJob(f, 3, false, ", parallelism: 2, backoffLimit: 1", 2);
  auto status = [&] {
    v1::GetApplicationRequest get;
    get.set_name("batch");
    return f.manager.Get(get)->application().status();
  };
  auto pod = [](const std::string& name, lms::v1::PodPhase phase) {
    return PodReport{"batch", "batch", name,
                     "n1",    phase,   phase == lms::v1::POD_PHASE_FAILED ? "exit code 1" : ""};
  };
  // SWM's new plan after a slot's next pod: `pods` by slot.
  int64_t plan = 1;
  auto moved = [&](const std::vector<std::string>& pods) {
    std::vector<v1::ServicePlacement> placements;
    for (size_t i = 0; i < pods.size(); ++i) {
      v1::ServicePlacement p;
      p.set_service("batch");
      p.set_cluster("rennes");
      p.set_node("n1");
      p.set_pod(pods[i]);
      p.set_workload(absl::StrCat("batch-", i));
      placements.push_back(p);
    }
    REQUIRE(f.manager.RecordMove("batch", 1, ++plan, placements).ok());
  };
  REQUIRE(f.manager
              .RecordPods("rennes", {pod("batch-batch-0", lms::v1::POD_PHASE_FAILED),
                                     pod("batch-batch-1", lms::v1::POD_PHASE_RUNNING)})
              .ok());
  // One failure is within the limit: DEGRADED, and slot batch-0 runs again.
  CHECK(status().phase() == v1::APPLICATION_PHASE_DEGRADED);
  REQUIRE(f.manager.Reconcile().ok());
  CHECK(f.scheduler.next_job_pods() == std::vector<std::string>{"batch/batch-0"});
  // Not asked twice at once; asked again once the wait passes.
  REQUIRE(f.manager.Reconcile().ok());
  CHECK(f.scheduler.next_job_pods().size() == 1);
  f.clock.Advance(absl::Seconds(31));
  REQUIRE(f.manager.Reconcile().ok());
  CHECK(f.scheduler.next_job_pods().size() == 2);
  moved({"batch-batch-0-r2", "batch-batch-1"});
  // One pod succeeds while the new one runs: the third completion needs a pod.
  REQUIRE(f.manager
              .RecordPods("rennes", {pod("batch-batch-0-r2", lms::v1::POD_PHASE_RUNNING),
                                     pod("batch-batch-1", lms::v1::POD_PHASE_SUCCEEDED)})
              .ok());
  CHECK(status().phase() == v1::APPLICATION_PHASE_RUNNING);
  REQUIRE(f.manager.Reconcile().ok());
  CHECK(f.scheduler.next_job_pods().back() == "batch/batch-1");
  moved({"batch-batch-0-r2", "batch-batch-1-r3"});
  // Two running for the two completions left: nothing more is asked.
  REQUIRE(f.manager
              .RecordPods("rennes", {pod("batch-batch-0-r2", lms::v1::POD_PHASE_SUCCEEDED),
                                     pod("batch-batch-1-r3", lms::v1::POD_PHASE_RUNNING)})
              .ok());
  const size_t asked = f.scheduler.next_job_pods().size();
  REQUIRE(f.manager.Reconcile().ok());
  CHECK(f.scheduler.next_job_pods().size() == asked);
  CHECK(status().jobs(0).succeeded_pods_size() == 2);
  REQUIRE(
      f.manager.RecordPods("rennes", {pod("batch-batch-1-r3", lms::v1::POD_PHASE_SUCCEEDED)}).ok());
  CHECK(status().phase() == v1::APPLICATION_PHASE_SUCCEEDED);
  CHECK(status().jobs(0).failed_pods_size() == 1);

  SECTION("a second failure is past the limit: FAILED, nothing more asked") {
    Fixture g;
    PlaceJob(g, 3, false, ", parallelism: 2, backoffLimit: 1", 2);
    REQUIRE(g.manager
                .RecordPods("rennes", {pod("batch-batch-0", lms::v1::POD_PHASE_FAILED),
                                       pod("batch-batch-1", lms::v1::POD_PHASE_FAILED)})
                .ok());
    v1::GetApplicationRequest get;
    get.set_name("batch");
    CHECK(g.manager.Get(get)->application().status().phase() == v1::APPLICATION_PHASE_FAILED);
    REQUIRE(g.manager.Reconcile().ok());
    CHECK(g.scheduler.next_job_pods().empty());
  }
}

TEST_CASE("a restarted manager asks again for the releases it had not seen confirmed") {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore(ApplicationColumnFamilies());
  SimulatedClock clock{absl::FromUnixSeconds(1'800'000'000)};
  {
    KvApplicationStore store{*kv};
    InMemoryPlacementScheduler scheduler;
    scheduler.SetFailure(absl::UnavailableError("shutting down"));
    ApplicationManager manager{store, scheduler, clock};
    for (const char* name : {"a", "b", "c"}) {
      v1::ApplyApplicationRequest apply;
      apply.set_cam_yaml(SmallCam(name, "1"));
      REQUIRE(manager.Apply(apply).ok());
    }
    for (const char* name : {"a", "c"}) {
      v1::DeleteApplicationRequest del;
      del.set_name(name);
      REQUIRE(manager.Delete(del).ok());  // accepted, though the scheduler refused to queue it
    }
  }
  // "Restart": a new manager over the same store, with a scheduler that
  // completes releases at once.
  KvApplicationStore store{*kv};
  InMemoryPlacementScheduler scheduler;
  ApplicationManager manager{store, scheduler, clock};
  scheduler.CompleteReleasesWith([&](const std::string& name, const absl::Status& outcome) {
    REQUIRE(manager.RecordRelease(name, outcome).ok());
  });
  // The two releases, and the placement of "b" whose request was refused.
  REQUIRE(*manager.Resume() == 3);
  REQUIRE(scheduler.releases() == std::vector<std::string>{"a", "c"});
  REQUIRE(scheduler.requests().size() == 1);
  REQUIRE(scheduler.requests()[0].metadata().name() == "b");
  v1::ListApplicationsRequest list;
  auto left = manager.List(list);
  REQUIRE(left->applications_size() == 1);
  REQUIRE(left->applications(0).metadata().name() == "b");
  REQUIRE(*manager.Resume() == 0);
}

TEST_CASE("changes are read back in order per application or all and resumable") {
  Fixture f;
  int notified = 0;
  int id = f.manager.AddListener([&] { ++notified; });
  f.Apply(SmallCam("a", "1"));
  f.Apply(SmallCam("b", "1"));
  f.Apply(SmallCam("a", "2"));
  v1::DeleteApplicationRequest del;
  del.set_name("b");
  REQUIRE(f.manager.Delete(del).ok());                           // 4: DELETING
  REQUIRE(f.manager.RecordRelease("b", absl::OkStatus()).ok());  // 5: gone
  REQUIRE(notified == 5);
  f.manager.RemoveListener(id);
  f.Apply(SmallCam("c", "1"));
  REQUIRE(notified == 5);

  auto all = f.manager.ReadChanges("", 0, 100);
  REQUIRE(all->size() == 6);
  for (size_t i = 0; i < all->size(); ++i) {
    REQUIRE((*all)[i].application().metadata().revision() == static_cast<int64_t>(i + 1));
  }
  REQUIRE((*all)[3].type() == common::v1::WATCH_EVENT_TYPE_MODIFIED);
  REQUIRE((*all)[3].application().status().phase() == v1::APPLICATION_PHASE_DELETING);
  REQUIRE((*all)[4].type() == common::v1::WATCH_EVENT_TYPE_DELETED);
  REQUIRE((*all)[4].application().metadata().name() == "b");

  auto a = f.manager.ReadChanges("a", 1, 100);
  REQUIRE(a->size() == 1);
  REQUIRE((*a)[0].application().metadata().revision() == 3);
  REQUIRE((*a)[0].type() == common::v1::WATCH_EVENT_TYPE_MODIFIED);

  auto limited = f.manager.ReadChanges("", 2, 2);
  REQUIRE(limited->size() == 2);
  REQUIRE((*limited)[1].application().metadata().revision() == 4);

  auto snapshot = f.manager.Snapshot("");
  REQUIRE(snapshot->revision == 6);
  REQUIRE(snapshot->applications.size() == 2);  // a and c
}

TEST_CASE("events past the retention answer OUT_OF_RANGE") {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore(ApplicationColumnFamilies());
  KvApplicationStore store(*kv, {.max_events = 3});
  InMemoryPlacementScheduler scheduler;
  SimulatedClock clock;
  ApplicationManager manager(store, scheduler, clock);
  for (int i = 0; i < 6; ++i) {
    v1::ApplyApplicationRequest request;
    request.set_cam_yaml(SmallCam("shop", std::to_string(i)));
    REQUIRE(manager.Apply(request).ok());
  }
  REQUIRE(manager.ReadChanges("", 3, 10)->size() == 3);
  REQUIRE(manager.ReadChanges("", 2, 10).status().code() == absl::StatusCode::kOutOfRange);
  // The expired events are gone from storage too.
  int kept = 0;
  REQUIRE(kv->Scan("application_events", {}, [&](std::string_view, std::string_view) {
              ++kept;
              return true;
            }).ok());
  REQUIRE(kept == 3);
}

TEST_CASE("an application waits PENDING for a neighborhood before the scheduler is asked") {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore(ApplicationColumnFamilies());
  KvApplicationStore store(*kv);
  InMemoryPlacementScheduler scheduler;
  SimulatedClock clock;
  FixedNeighborhoodProvider none({});
  ApplicationManager lonely(store, scheduler, clock, {}, &none);
  v1::ApplyApplicationRequest request;
  request.set_cam_yaml(SmallCam("shop", "1"));
  auto r = lonely.Apply(request);
  REQUIRE(r.ok());
  REQUIRE(r->application().status().phase() == v1::APPLICATION_PHASE_PENDING);
  REQUIRE_THAT(r->application().status().error_msg(),
               Catch::StartsWith("waiting for a neighborhood: "));
  REQUIRE(scheduler.requests().empty());

  FixedNeighborhoodProvider two({"edge-1", "edge-2"});
  ApplicationManager manager(store, scheduler, clock, {}, &two);
  request.set_cam_yaml(SmallCam("shop", "2"));
  r = manager.Apply(request);
  REQUIRE(r->application().status().neighborhood_id() == "nb-shop");
  REQUIRE(r->application().status().error_msg().empty());
  REQUIRE(scheduler.requests().size() == 1);
  REQUIRE(scheduler.neighborhoods()[0].members_size() == 2);
}

TEST_CASE("the neighborhood manager selects from the registry and keeps revisions") {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore({"clusters", "neighborhoods"});
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  ClusterRegistry registry(*kv, clock);
  NeighborhoodManager neighborhoods(*kv, registry, clock, {.max_members = 2});
  auto add = [&](const std::string& name) {
    v1::RegisterClusterRequest reg;
    reg.mutable_cluster()->mutable_metadata()->set_name(name);
    reg.mutable_cluster()->set_role(v1::CLUSTER_ROLE_MC);
    reg.mutable_cluster()->mutable_capacity()->mutable_largest_free_node()->set_cpu_millicores(
        1000);
    REQUIRE(registry.Register(reg).ok());
  };
  v1::ApplicationSpec spec;
  spec.set_app_name("shop");
  REQUIRE(neighborhoods.Assign(spec).status().code() == absl::StatusCode::kFailedPrecondition);
  add("a");
  clock.Advance(absl::Seconds(30));  // within the partition's age: not seen yet
  REQUIRE(neighborhoods.Assign(spec).status().code() == absl::StatusCode::kFailedPrecondition);
  clock.Advance(absl::Seconds(30));
  add("b");
  add("c");
  auto nb = neighborhoods.Assign(spec);
  REQUIRE(nb.ok());
  REQUIRE(nb->members_size() == 2);
  REQUIRE(nb->revision() == 1);
  clock.Advance(absl::Seconds(40));
  for (const char* name : {"b", "c"}) {
    v1::HeartbeatRequest hb;
    hb.set_cluster_name(name);
    REQUIRE(registry.Heartbeat(hb).ok());
  }
  clock.Advance(absl::Seconds(20));
  REQUIRE(neighborhoods.Assign(spec)->revision() == 1);  // same members, same revision
  clock.Advance(absl::Seconds(60));  // b and c silent for 80 s: unreachable, nothing left
  REQUIRE(neighborhoods.Assign(spec).status().code() == absl::StatusCode::kFailedPrecondition);
  v1::ListNeighborhoodsRequest list;
  REQUIRE(neighborhoods.List(list)->neighborhoods_size() == 1);
  REQUIRE(neighborhoods.Release("shop").ok());
  v1::GetNeighborhoodRequest get;
  get.set_application("shop");
  REQUIRE(absl::IsNotFound(neighborhoods.Get(get).status()));
}

// The status of `name` in `manager`.
v1::ApplicationStatus StatusOf(ApplicationManager& manager, const std::string& name) {
  v1::GetApplicationRequest get;
  get.set_name(name);
  absl::StatusOr<v1::GetApplicationResponse> got = manager.Get(get);
  REQUIRE(got.ok());
  return got->application().status();
}

PlacementResult PlacedOn(const std::string& cluster) {
  PlacementResult placed;
  placed.placed = true;
  placed.plan_revision = 1;
  v1::ServicePlacement p;
  p.set_service("web");
  p.set_cluster(cluster);
  p.set_node("n1");
  p.set_pod("web-0");
  placed.placements.push_back(p);
  return placed;
}

TEST_CASE("a scheduler that cannot answer is retried with backoff on the clock and never FAILED") {
  Fixture f;
  f.Apply(SmallCam("shop", "1"));
  REQUIRE(f.scheduler.request_ids().size() == 1);
  const std::string request_id = f.scheduler.request_ids()[0];
  REQUIRE(request_id == PlacementRequestId(f.scheduler.requests()[0]));
  // In flight: a reconcile pass does not ask again.
  REQUIRE(*f.manager.Reconcile() == 0);

  for (absl::StatusCode code :
       {absl::StatusCode::kUnavailable, absl::StatusCode::kDeadlineExceeded,
        absl::StatusCode::kAborted, absl::StatusCode::kResourceExhausted,
        absl::StatusCode::kInternal}) {
    PlacementResult unanswered;
    unanswered.error = absl::Status(code, "connection refused");
    REQUIRE(f.manager.RecordPlacement("shop", 1, unanswered).ok());
    v1::ApplicationStatus status = StatusOf(f.manager, "shop");
    INFO(status.error_msg());
    REQUIRE(status.phase() == v1::APPLICATION_PHASE_PENDING);
    REQUIRE(status.status() == v1::STATUS_LEVEL_WARNING);
    REQUIRE_THAT(status.error_msg(), Catch::Contains(absl::StatusCodeToString(code)));
    REQUIRE_THAT(status.error_msg(), Catch::Contains("connection refused"));
    REQUIRE_THAT(status.error_msg(), Catch::Contains("next attempt at 2027-01-15T"));
    // Not due yet: nothing is sent; once the longest wait (60 s) passed, it is.
    const size_t sent = f.scheduler.requests().size();
    REQUIRE(*f.manager.Reconcile() == 0);
    f.clock.Advance(absl::Seconds(61));
    REQUIRE(*f.manager.Reconcile() == 1);
    REQUIRE(f.scheduler.requests().size() == sent + 1);
    REQUIRE(f.scheduler.request_ids().back() == request_id);  // the same request, resent
  }
  // The answer arrives: placed, and nothing more is asked.
  REQUIRE(f.manager.RecordPlacement("shop", 1, PlacedOn("edge-1")).ok());
  REQUIRE(StatusOf(f.manager, "shop").phase() == v1::APPLICATION_PHASE_DEPLOYING);
  REQUIRE(StatusOf(f.manager, "shop").status() == v1::STATUS_LEVEL_OK);
  f.clock.Advance(absl::Hours(1));
  REQUIRE(*f.manager.Reconcile() == 0);
  // A late transient error changes nothing.
  PlacementResult late;
  late.error = absl::UnavailableError("late");
  REQUIRE(f.manager.RecordPlacement("shop", 1, late).ok());
  REQUIRE(StatusOf(f.manager, "shop").phase() == v1::APPLICATION_PHASE_DEPLOYING);
}

TEST_CASE("replicas a scale left with no node are placed again on the clock with no apply") {
  Fixture f;
  f.Apply(SmallCam("shop", "1"));
  // Placed, but a replica found no node (SWM's scale answer).
  PlacementResult partly = PlacedOn("edge-1");
  partly.unplaced_replicas = {"web-1: no cluster fits: edge-1: 1 node: insufficient cpu"};
  REQUIRE(f.manager.RecordPlacement("shop", 1, partly).ok());
  v1::ApplicationStatus status = StatusOf(f.manager, "shop");
  INFO(status.error_msg());
  REQUIRE(status.phase() == v1::APPLICATION_PHASE_DEGRADED);
  REQUIRE_THAT(status.error_msg(), Catch::StartsWith("replicas not placed, found no node"));
  REQUIRE_THAT(status.error_msg(), Catch::Contains("tried again at 2027-01-15T"));
  REQUIRE_THAT(status.error_msg(), Catch::Contains("web-1: no cluster fits"));
  const size_t sent = f.scheduler.requests().size();
  // Not before the wait (30 s, less up to 20% jitter) is over.
  f.clock.Advance(absl::Seconds(23));
  REQUIRE(*f.manager.Reconcile() == 0);
  f.clock.Advance(absl::Seconds(8));
  REQUIRE(*f.manager.Reconcile() == 1);
  REQUIRE(f.scheduler.requests().size() == sent + 1);
  // The same spec, asked from the plan it has: a request of its own.
  REQUIRE(f.scheduler.requests().back().spec_revision() == 1);
  REQUIRE(f.scheduler.request_ids().back() == PlacementRequestId(f.scheduler.requests().back()));
  REQUIRE(*f.manager.Reconcile() == 0);  // in flight
  // Still no room: the next wait is longer (60 s, less jitter).
  partly.plan_revision = 2;
  REQUIRE(f.manager.RecordPlacement("shop", 1, partly).ok());
  REQUIRE_THAT(StatusOf(f.manager, "shop").error_msg(), Catch::Contains("attempt 3"));
  f.clock.Advance(absl::Seconds(40));
  REQUIRE(*f.manager.Reconcile() == 0);
  f.clock.Advance(absl::Seconds(21));
  REQUIRE(*f.manager.Reconcile() == 1);
  // Room freed: every replica placed, and nothing more is asked.
  PlacementResult whole = PlacedOn("edge-1");
  whole.plan_revision = 3;
  REQUIRE(f.manager.RecordPlacement("shop", 1, whole).ok());
  REQUIRE(StatusOf(f.manager, "shop").phase() == v1::APPLICATION_PHASE_DEPLOYING);
  f.clock.Advance(absl::Hours(1));
  REQUIRE(*f.manager.Reconcile() == 0);
}

TEST_CASE("a scale in place keeps the readiness of the pods that stay and a redeploy does not") {
  Fixture f;
  f.Apply(SmallCam("shop", "1"));
  PlacementResult first = PlacedOn("edge-1");
  first.placements[0].set_ready(true);
  first.placements[0].add_addresses("10.0.0.7:80");
  REQUIRE(f.manager.RecordPlacement("shop", 1, first).ok());
  REQUIRE(StatusOf(f.manager, "shop").phase() == v1::APPLICATION_PHASE_RUNNING);
  // The scheduler's answer lists the pod not ready (it does not know).
  PlacementResult again = PlacedOn("edge-1");
  again.plan_revision = 2;
  again.in_place = true;
  REQUIRE(f.manager.RecordPlacement("shop", 1, again).ok());
  v1::ApplicationStatus status = StatusOf(f.manager, "shop");
  REQUIRE(status.phase() == v1::APPLICATION_PHASE_RUNNING);
  REQUIRE(status.placements(0).ready());
  REQUIRE(status.placements(0).addresses(0) == "10.0.0.7:80");
  // A redeploy's pod of the same name is a new pod: not ready until reported.
  again.plan_revision = 3;
  again.in_place = false;
  REQUIRE(f.manager.RecordPlacement("shop", 1, again).ok());
  status = StatusOf(f.manager, "shop");
  REQUIRE(status.phase() == v1::APPLICATION_PHASE_DEPLOYING);
  REQUIRE_FALSE(status.placements(0).ready());
}

TEST_CASE("with unplaced_retry off a DEGRADED application waits for an apply") {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore(ApplicationColumnFamilies());
  KvApplicationStore store{*kv, {.max_events = 1000}};
  InMemoryPlacementScheduler scheduler;
  SimulatedClock clock{absl::FromUnixSeconds(1'800'000'000)};
  ApplicationManagerOptions options;
  options.unplaced_retry.initial = absl::ZeroDuration();
  ApplicationManager manager{store, scheduler, clock, options};
  v1::ApplyApplicationRequest apply;
  apply.set_cam_yaml(SmallCam("shop", "1"));
  REQUIRE(manager.Apply(apply).ok());
  PlacementResult partly = PlacedOn("edge-1");
  partly.unplaced_replicas = {"web-1: no node"};
  REQUIRE(manager.RecordPlacement("shop", 1, partly).ok());
  REQUIRE_THAT(StatusOf(manager, "shop").error_msg(), Catch::Contains("at a later apply"));
  clock.Advance(absl::Hours(1));
  REQUIRE(*manager.Reconcile() == 0);
}

TEST_CASE("the waits between retries grow with jitter up to the cap") {
  Fixture f;
  f.Apply(SmallCam("shop", "1"));
  absl::Duration previous = absl::ZeroDuration();
  for (int attempt = 1; attempt <= 10; ++attempt) {
    PlacementResult unanswered;
    unanswered.error = absl::UnavailableError("down");
    REQUIRE(f.manager.RecordPlacement("shop", 1, unanswered).ok());
    // Find the wait by stepping the clock one second at a time.
    absl::Duration waited = absl::ZeroDuration();
    while (*f.manager.Reconcile() == 0) {
      f.clock.Advance(absl::Seconds(1));
      waited += absl::Seconds(1);
      REQUIRE(waited <= absl::Seconds(61));
    }
    INFO("attempt " << attempt << " waited " << absl::FormatDuration(waited));
    REQUIRE(waited <= absl::Seconds(60));
    if (attempt <= 4) REQUIRE(waited >= previous);  // 1, 2, 4, 8 s less up to 20%
    if (attempt >= 8) REQUIRE(waited >= absl::Seconds(48));  // capped at 60 s less 20%
    previous = waited;
  }
}

TEST_CASE("RetryNow sends a backed-off placement at once but leaves one in flight alone") {
  Fixture f;
  f.Apply(SmallCam("shop", "1"));
  // shop failed several times: its next attempt is tens of seconds away.
  for (int i = 0; i < 6; ++i) {
    PlacementResult unanswered;
    unanswered.error = absl::UnavailableError("connection refused");
    REQUIRE(f.manager.RecordPlacement("shop", 1, unanswered).ok());
    if (i < 5) {
      f.clock.Advance(absl::Seconds(61));
      REQUIRE(*f.manager.Reconcile() == 1);
    }
  }
  REQUIRE(*f.manager.Reconcile() == 0);
  f.Apply(SmallCam("cart", "1"));
  const size_t sent = f.scheduler.requests().size();
  // The scheduler is reachable again: shop is due now; cart (in flight,
  // waiting for its answer) is not asked twice.
  REQUIRE(f.manager.RetryNow() == 1);
  REQUIRE(*f.manager.Reconcile() == 1);
  REQUIRE(f.scheduler.requests().size() == sent + 1);
  REQUIRE(f.scheduler.requests().back().metadata().name() == "shop");
  // Sent again: in flight now, so a second RetryNow brings nothing forward.
  REQUIRE(f.manager.RetryNow() == 0);
  REQUIRE(*f.manager.Reconcile() == 0);
}

TEST_CASE("a definitive scheduler answer fails the application with the reason") {
  Fixture f;
  f.Apply(SmallCam("shop", "1"));
  PlacementResult refused;
  refused.error = absl::InvalidArgumentError("application.spec.services[0]: no such image");
  REQUIRE(f.manager.RecordPlacement("shop", 1, refused).ok());
  v1::ApplicationStatus status = StatusOf(f.manager, "shop");
  REQUIRE(status.phase() == v1::APPLICATION_PHASE_FAILED);
  REQUIRE(status.status() == v1::STATUS_LEVEL_ERROR);
  REQUIRE_THAT(status.error_msg(), Catch::Contains("INVALID_ARGUMENT"));
  REQUIRE_THAT(status.error_msg(), Catch::Contains("no such image"));
  f.clock.Advance(absl::Hours(1));
  REQUIRE(*f.manager.Reconcile() == 0);

  f.Apply(SmallCam("other", "1"));
  PlacementResult unplaced;
  unplaced.error = absl::FailedPreconditionError("unplaced: web: no node with 4 CPUs free");
  REQUIRE(f.manager.RecordPlacement("other", 1, unplaced).ok());
  REQUIRE(StatusOf(f.manager, "other").phase() == v1::APPLICATION_PHASE_FAILED);
}

TEST_CASE("a refused request is retried and an unanswered one is sent again after the timeout") {
  Fixture f;
  f.scheduler.SetFailure(absl::UnavailableError("scheduler queue closed"));
  v1::ApplyApplicationResponse applied = f.Apply(SmallCam("shop", "1"));
  REQUIRE(applied.application().status().phase() == v1::APPLICATION_PHASE_PENDING);
  REQUIRE_THAT(applied.warnings(0), Catch::Contains("placement retried at"));
  REQUIRE(f.scheduler.requests().empty());
  f.scheduler.SetFailure(absl::OkStatus());
  REQUIRE(*f.manager.Reconcile() == 0);
  f.clock.Advance(absl::Seconds(61));
  REQUIRE(*f.manager.Reconcile() == 1);
  REQUIRE(f.scheduler.requests().size() == 1);
  // No answer ever comes: asked again once answer_timeout (5 min) passed.
  f.clock.Advance(absl::Minutes(4));
  REQUIRE(*f.manager.Reconcile() == 0);
  f.clock.Advance(absl::Minutes(1));
  REQUIRE(*f.manager.Reconcile() == 1);
  REQUIRE(f.scheduler.request_ids()[0] == f.scheduler.request_ids()[1]);
}

TEST_CASE("every acknowledged intent is sent again after a restart with the same request_id") {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore(ApplicationColumnFamilies());
  SimulatedClock clock{absl::FromUnixSeconds(1'800'000'000)};
  std::vector<std::string> first_ids;
  {
    KvApplicationStore store{*kv};
    InMemoryPlacementScheduler scheduler;
    ApplicationManager manager{store, scheduler, clock};
    for (const char* name : {"a", "b", "c"}) {
      v1::ApplyApplicationRequest apply;
      apply.set_cam_yaml(SmallCam(name, "1"));
      REQUIRE(manager.Apply(apply).ok());
    }
    // "b" changes spec: its intent is now spec revision 2.
    v1::ApplyApplicationRequest apply;
    apply.set_cam_yaml(SmallCam("b", "2"));
    REQUIRE(manager.Apply(apply).ok());
    // "c" is placed before the crash.
    REQUIRE(manager.RecordPlacement("c", 1, PlacedOn("edge-1")).ok());
    first_ids = scheduler.request_ids();
  }
  KvApplicationStore store{*kv};
  InMemoryPlacementScheduler scheduler;
  ApplicationManager manager{store, scheduler, clock};
  REQUIRE(*manager.Resume() == 2);
  std::vector<std::string> names;
  for (const auto& app : scheduler.requests()) names.push_back(app.metadata().name());
  REQUIRE(names == std::vector<std::string>{"a", "b"});
  REQUIRE(scheduler.requests()[1].spec_revision() == 2);
  // The same keys as before the restart: the scheduler answers them from the first.
  REQUIRE(scheduler.request_ids()[0] == first_ids[0]);
  REQUIRE(scheduler.request_ids()[1] == first_ids[3]);
  REQUIRE(first_ids[1] != first_ids[3]);
  REQUIRE(*manager.Reconcile() == 0);
}

common::v1::Operation OperationOf(ApplicationManager& manager, const std::string& id) {
  v1::GetOperationRequest get;
  get.set_id(id);
  absl::StatusOr<v1::GetOperationResponse> got = manager.GetOperation(get);
  INFO(got.status().ToString());
  REQUIRE(got.ok());
  return got->operation();
}

TEST_CASE("an apply's operation follows the application to running durably") {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore(ApplicationColumnFamilies());
  SimulatedClock clock{absl::FromUnixSeconds(1'800'000'000)};
  KvApplicationStore store{*kv};
  InMemoryPlacementScheduler scheduler;
  ApplicationManager manager{store, scheduler, clock};
  v1::ApplyApplicationRequest apply;
  apply.set_cam_yaml(SmallCam("shop", "1"));
  apply.set_request_id("first");
  absl::StatusOr<v1::ApplyApplicationResponse> applied = manager.Apply(apply);
  REQUIRE(applied.ok());
  const common::v1::Operation& op = applied->operation();
  REQUIRE(op.id() == "apply-shop-1");
  REQUIRE(op.kind() == "acm.ApplyApplication");
  REQUIRE(op.resource() == "applications/shop");
  REQUIRE(op.request_id() == "first");
  REQUIRE(op.progress_percent() == 40);
  REQUIRE(op.phase() == "placing");
  REQUIRE_FALSE(op.done());
  REQUIRE(applied->application().status().operation_id() == op.id());
  // The replayed answer carries the operation too.
  REQUIRE(manager.Apply(apply)->operation().id() == op.id());

  PlacementResult unanswered;
  unanswered.error = absl::UnavailableError("swm down");
  REQUIRE(manager.RecordPlacement("shop", 1, unanswered).ok());
  REQUIRE_THAT(OperationOf(manager, op.id()).phase(),
               Catch::Contains("UNAVAILABLE") && Catch::Contains("next attempt at"));

  REQUIRE(manager.RecordPlacement("shop", 1, PlacedOn("edge-1")).ok());
  common::v1::Operation placed = OperationOf(manager, op.id());
  REQUIRE(placed.progress_percent() == 80);
  REQUIRE(placed.phase() == "placed; waiting for pods");
  REQUIRE_FALSE(placed.done());

  REQUIRE(*manager.RecordPods("edge-1", {PodReport{"shop", "web", "web-0", "n1",
                                                   lms::v1::POD_PHASE_RUNNING, ""}}) == 1);
  common::v1::Operation running = OperationOf(manager, op.id());
  REQUIRE(running.done());
  REQUIRE(running.progress_percent() == 100);
  REQUIRE(running.phase() == "running");
  REQUIRE_FALSE(running.has_error());
  v1::Application result;
  REQUIRE(running.result().UnpackTo(&result));
  REQUIRE(result.status().phase() == v1::APPLICATION_PHASE_RUNNING);

  // A second manager on the same store (a restart) reads the same operation.
  InMemoryPlacementScheduler again;
  ApplicationManager restarted{store, again, clock};
  REQUIRE(OperationOf(restarted, op.id()).SerializeAsString() == running.SerializeAsString());
}

TEST_CASE("operations end failed or superseded or deleted and list newest first") {
  Fixture f;
  f.scheduler.CompleteReleasesWith([&](const std::string& name, const absl::Status& outcome) {
    REQUIRE(f.manager.RecordRelease(name, outcome).ok());
  });
  std::string first = f.Apply(SmallCam("shop", "1")).operation().id();
  f.clock.Advance(absl::Seconds(1));
  std::string second = f.Apply(SmallCam("shop", "2")).operation().id();
  REQUIRE(first != second);
  common::v1::Operation superseded = OperationOf(f.manager, first);
  REQUIRE(superseded.done());
  REQUIRE(superseded.error().code() == common::v1::ERROR_CODE_ABORTED);
  REQUIRE(superseded.error().message() == "superseded by " + second);

  PlacementResult refused;
  refused.error = absl::FailedPreconditionError("no node fits web");
  REQUIRE(f.manager.RecordPlacement("shop", 2, refused).ok());
  common::v1::Operation failed = OperationOf(f.manager, second);
  REQUIRE(failed.done());
  REQUIRE(failed.error().code() == common::v1::ERROR_CODE_FAILED_PRECONDITION);
  REQUIRE_THAT(failed.error().message(), Catch::Contains("no node fits web"));

  f.clock.Advance(absl::Seconds(1));
  f.Apply(SmallCam("cart", "1"));
  f.clock.Advance(absl::Seconds(1));
  v1::DeleteApplicationRequest del;
  del.set_name("shop");
  absl::StatusOr<v1::DeleteApplicationResponse> deleted = f.manager.Delete(del);
  REQUIRE(deleted.ok());
  common::v1::Operation gone = OperationOf(f.manager, deleted->operation().id());
  REQUIRE(gone.kind() == "acm.DeleteApplication");
  REQUIRE(gone.done());
  REQUIRE(gone.phase() == "deleted");
  REQUIRE(gone.progress_percent() == 100);

  v1::ListOperationsRequest list;
  absl::StatusOr<v1::ListOperationsResponse> all = f.manager.ListOperations(list);
  REQUIRE(all.ok());
  std::vector<std::string> ids;
  for (const auto& op : all->operations()) ids.push_back(op.id());
  REQUIRE(ids == std::vector<std::string>{gone.id(), "apply-cart-4", second, first});
  list.set_active_only(true);
  REQUIRE(f.manager.ListOperations(list)->operations_size() == 1);  // cart's apply
  list.set_active_only(false);
  list.set_kind("acm.ApplyApplication");
  list.set_page_size(2);
  absl::StatusOr<v1::ListOperationsResponse> page = f.manager.ListOperations(list);
  REQUIRE(page->operations_size() == 2);
  REQUIRE(page->operations(1).id() == second);
  REQUIRE_FALSE(page->next_page_token().empty());
  list.set_page_token(page->next_page_token());
  page = f.manager.ListOperations(list);
  REQUIRE(page->operations_size() == 1);
  REQUIRE(page->operations(0).id() == first);
  REQUIRE(page->next_page_token().empty());

  v1::GetOperationRequest get;
  get.set_id("apply-nope-1");
  absl::Status missing = f.manager.GetOperation(get).status();
  REQUIRE(absl::IsNotFound(missing));
  REQUIRE_THAT(std::string(missing.message()), Catch::StartsWith("id: "));
  list.set_page_token("bogus");
  REQUIRE_THAT(std::string(f.manager.ListOperations(list).status().message()),
               Catch::StartsWith("page_token"));
}

TEST_CASE("done operations go after the retention unless an application still names them") {
  Fixture f;
  f.scheduler.CompleteReleasesWith([&](const std::string& name, const absl::Status& outcome) {
    REQUIRE(f.manager.RecordRelease(name, outcome).ok());
  });
  std::string superseded = f.Apply(SmallCam("shop", "1")).operation().id();
  std::string active = f.Apply(SmallCam("shop", "2")).operation().id();
  std::string failed = f.Apply(SmallCam("cart", "1")).operation().id();
  PlacementResult refused;
  refused.error = absl::InvalidArgumentError("no such image");
  REQUIRE(f.manager.RecordPlacement("cart", 1, refused).ok());
  f.Apply(SmallCam("gone", "1"));
  v1::DeleteApplicationRequest del;
  del.set_name("gone");
  std::string deleted = f.manager.Delete(del)->operation().id();
  auto ids = [&] {
    absl::StatusOr<v1::ListOperationsResponse> listed =
        f.manager.ListOperations(v1::ListOperationsRequest());
    REQUIRE(listed.ok());
    std::set<std::string> out;
    for (const auto& op : listed->operations()) out.insert(op.id());
    return out;
  };
  REQUIRE(ids().size() == 5);
  f.clock.Advance(absl::Hours(24 * 7) - absl::Seconds(1));
  REQUIRE(f.manager.Reconcile().ok());
  REQUIRE(ids().size() == 5);  // not old enough yet
  f.clock.Advance(absl::Minutes(1));
  REQUIRE(f.manager.Reconcile().ok());
  // The superseded and the delete operation go; cart's failed one stays while
  // cart names it, and shop's is not done.
  REQUIRE(ids() == std::set<std::string>{active, failed});
  REQUIRE(!ids().count(superseded));
  REQUIRE(!ids().count(deleted));
}

TEST_CASE("a request_id is remembered for request_retention and then forgotten") {
  Fixture f;
  f.Apply(SmallCam("shop", "1"), "req-1");
  v1::ApplyApplicationRequest reuse;
  reuse.set_cam_yaml(SmallCam("shop", "2"));
  reuse.set_request_id("req-1");
  f.clock.Advance(absl::Hours(24) - absl::Minutes(1));
  REQUIRE(f.manager.Reconcile().ok());
  REQUIRE(f.manager.Apply(reuse).status().code() == absl::StatusCode::kInvalidArgument);
  f.clock.Advance(absl::Minutes(2));
  REQUIRE(f.manager.Reconcile().ok());
  // Past the retention the id is free again: the request is a new change.
  absl::StatusOr<v1::ApplyApplicationResponse> again = f.manager.Apply(reuse);
  REQUIRE(again.ok());
  REQUIRE(again->application().spec_revision() == 2);
}

// Operations `count` done ones of application "a<i>", created a second apart.
std::vector<common::v1::Operation> DoneOperations(int count) {
  std::vector<common::v1::Operation> ops;
  for (int i = 0; i < count; ++i) {
    common::v1::Operation op;
    op.set_id("op-" + std::to_string(1000 + i));
    op.set_kind("acm.ApplyApplication");
    op.set_resource("applications/a" + std::to_string(i));
    op.set_done(true);
    op.mutable_create_time()->set_seconds(1'800'000'000 + i);
    op.mutable_update_time()->set_seconds(1'800'000'000 + i);
    ops.push_back(op);
  }
  return ops;
}

TEST_CASE("history is pruned a bounded batch at a time and listed newest first") {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore(ApplicationColumnFamilies());
  KvApplicationStore store(*kv);
  for (const auto& op : DoneOperations(25)) REQUIRE(store.PutOperation(op).ok());
  std::vector<std::string> listed;
  std::string position;
  REQUIRE(store
              .ListOperations("",
                              [&](const std::string& at, const common::v1::Operation& op) {
                                listed.push_back(op.id());
                                position = at;
                                return listed.size() < 3;
                              })
              .ok());
  REQUIRE(listed == std::vector<std::string>{"op-1024", "op-1023", "op-1022"});
  listed.clear();
  REQUIRE(store
              .ListOperations(position,
                              [&](const std::string&, const common::v1::Operation& op) {
                                listed.push_back(op.id());
                                return listed.size() < 2;
                              })
              .ok());
  REQUIRE(listed == std::vector<std::string>{"op-1021", "op-1020"});

  // The ones done by second 19 are due; op-1003 is kept (an application names it).
  HistoryPruning pruning{
      .now = absl::FromUnixSeconds(1'800'000'100),
      .operations_done_by = absl::FromUnixSeconds(1'800'000'019),
      .keep = [](const common::v1::Operation& op) { return op.id() == "op-1003"; },
      .max_entries = 8};
  absl::StatusOr<PrunedHistory> first = store.PruneHistory(pruning);
  REQUIRE(first.ok());
  REQUIRE(first->more);
  REQUIRE(first->operations == 7);
  size_t pruned = first->operations;
  for (bool more = true; more;) {
    absl::StatusOr<PrunedHistory> next = store.PruneHistory(pruning);
    REQUIRE(next.ok());
    pruned += next->operations;
    more = next->more;
  }
  REQUIRE(pruned == 19);
  listed.clear();
  REQUIRE(store
              .ListOperations("",
                              [&](const std::string&, const common::v1::Operation& op) {
                                listed.push_back(op.id());
                                return true;
                              })
              .ok());
  REQUIRE(listed == std::vector<std::string>{"op-1024", "op-1023", "op-1022", "op-1021",
                                             "op-1020", "op-1003"});
  // The kept one is looked at again one retention later, and goes once no
  // application names it.
  pruning.keep = nullptr;
  REQUIRE(store.PruneHistory(pruning)->operations == 0);
  pruning.operations_done_by = pruning.now;
  REQUIRE(store.PruneHistory(pruning)->operations == 6);
  REQUIRE_FALSE(store.GetOperation("op-1003")->has_value());
}

TEST_CASE("a store written before the history index is indexed on first use") {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore(ApplicationColumnFamilies());
  // What an older ACM wrote: operations and idempotency records, no index.
  for (const auto& op : DoneOperations(300)) {
    REQUIRE(kv->Put("application_operations", op.id(), op.SerializeAsString()).ok());
  }
  REQUIRE(kv->Put("application_requests", "f/apply/req-1", "fingerprint").ok());
  REQUIRE(kv->Put("application_requests", "r/apply/req-1", "response").ok());
  KvApplicationStore store(*kv);
  size_t listed = 0;
  std::string newest;
  REQUIRE(store
              .ListOperations("",
                              [&](const std::string&, const common::v1::Operation& op) {
                                if (listed++ == 0) newest = op.id();
                                return true;
                              })
              .ok());
  REQUIRE(listed == 300);
  REQUIRE(newest == "op-1299");
  // Undated requests are dated at the first pruning and kept for a retention from then.
  const absl::Time now = absl::FromUnixSeconds(1'900'000'000);
  HistoryPruning pruning{.now = now,
                         .operations_done_by = now,
                         .requests_done_by = now - absl::Hours(24)};
  absl::StatusOr<PrunedHistory> pruned = store.PruneHistory(pruning);
  REQUIRE(pruned.ok());
  REQUIRE(pruned->requests == 0);
  REQUIRE(store.GetRequest("apply/req-1")->has_value());
  for (bool more = true; more;) {
    absl::StatusOr<PrunedHistory> next = store.PruneHistory(pruning);
    REQUIRE(next.ok());
    more = next->more;
  }
  REQUIRE_FALSE(store.GetOperation("op-1000")->has_value());
  pruning.requests_done_by = now;
  REQUIRE(store.PruneHistory(pruning)->requests == 1);
  REQUIRE_FALSE(store.GetRequest("apply/req-1")->has_value());
}

}  // namespace
}  // namespace codeco::acm
