#include "acm/core/application_autoscaler.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "acm/store/kv_application_store.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"

namespace codeco::acm {
namespace {

// A CAM whose service web (500m each) autoscales between 1 and `max`.
std::string AutoscaledCam(int replicas, int max = 6) {
  return absl::StrReplaceAll(
      R"(apiVersion: codeco.io/v1
kind: CodecoApp
metadata:
  name: shop
spec:
  appName: shop
  codecoapp-msspec:
    - serviceName: web
      replicas: REPLICAS
      requests: {cpu: 500m, memory: 128Mi}
      autoscaling:
        minReplicas: 1
        maxReplicas: MAX
        targetCPUUtilizationPercentage: 50
        scaleDownCooldown: 5m
      podspec:
        containers:
          - name: web
            image: registry.example.org/web:1
    - serviceName: db
      podspec:
        containers:
          - name: db
            image: registry.example.org/db:1
)",
      {{"REPLICAS", std::to_string(replicas)}, {"MAX", std::to_string(max)}});
}

struct Fixture {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore(ApplicationColumnFamilies());
  KvApplicationStore store{*kv, {.max_events = 1000}};
  InMemoryPlacementScheduler scheduler;
  SimulatedClock clock{absl::FromUnixSeconds(1'800'000'000)};
  ApplicationManager manager{store, scheduler, clock};
  ApplicationAutoscaler autoscaler{manager, clock};

  void Apply(const std::string& yaml) {
    v1::ApplyApplicationRequest request;
    request.set_cam_yaml(yaml);
    absl::StatusOr<v1::ApplyApplicationResponse> response = manager.Apply(request);
    INFO(response.status().ToString());
    REQUIRE(response.ok());
  }
  v1::Application Get() {
    v1::GetApplicationRequest get;
    get.set_name("shop");
    return manager.Get(get)->application();
  }
  // Places the current spec: `webs` web replicas in rennes and the db, all
  // running, and web using `web_cpu` millicores each.
  void RunAll(int webs, int64_t web_cpu) {
    const v1::Application app = Get();
    PlacementResult result;
    result.placed = true;
    result.plan_revision = app.spec_revision();
    std::vector<PodReport> pods;
    for (int i = 0; i < webs; ++i) {
      v1::ServicePlacement& p = result.placements.emplace_back();
      p.set_service("web");
      p.set_cluster("rennes");
      p.set_node("n1");
      p.set_pod(absl::StrCat("shop-web-", i));
      pods.push_back(PodReport{.application = "shop",
                               .service = "web",
                               .pod = p.pod(),
                               .node = "n1",
                               .phase = lms::v1::POD_PHASE_RUNNING,
                               .cpu_millicores = web_cpu,
                               .memory_bytes = 100 << 20,
                               .usage_known = true});
    }
    v1::ServicePlacement& db = result.placements.emplace_back();
    db.set_service("db");
    db.set_cluster("rennes");
    db.set_node("n1");
    db.set_pod("shop-db-0");
    pods.push_back(PodReport{.application = "shop",
                             .service = "db",
                             .pod = "shop-db-0",
                             .node = "n1",
                             .phase = lms::v1::POD_PHASE_RUNNING});
    REQUIRE(manager.RecordPlacement("shop", app.spec_revision(), result).ok());
    REQUIRE(manager.RecordPods("rennes", pods).ok());
    autoscaler.RecordUsage("rennes", pods);
    REQUIRE(Get().status().phase() == v1::APPLICATION_PHASE_RUNNING);
  }
};

const v1::ServiceSpec& Web(const v1::Application& app) {
  for (const v1::ServiceSpec& s : app.spec().services()) {
    if (s.name() == "web") return s;
  }
  FAIL("no web");
  return app.spec().services(0);
}

TEST_CASE("the autoscaler scales a service on its replicas' CPU over requests") {
  Fixture f;
  f.Apply(AutoscaledCam(2));
  // Not placed yet: nothing to measure, nothing changes.
  CHECK(f.autoscaler.Tick().empty());
  CHECK(f.Get().spec_revision() == 1);

  // 2 replicas at 450m of 500m (90 %) against a 50 % target: 4 wanted.
  f.RunAll(2, 450);
  std::vector<AutoscaleDecision> decisions = f.autoscaler.Tick();
  REQUIRE(decisions.size() == 1);
  CHECK(decisions[0].service == "web");
  CHECK(decisions[0].from == 2);
  CHECK(decisions[0].to == 4);
  CHECK(decisions[0].utilization_percent == 90);
  CHECK(decisions[0].error.empty());
  v1::Application app = f.Get();
  CHECK(app.spec_revision() == 2);
  CHECK(Web(app).replicas() == 4);
  CHECK(app.status().phase() == v1::APPLICATION_PHASE_PENDING);
  // The new revision is the scheduler's to place, with the cause recorded.
  CHECK(f.scheduler.requests().back().spec_revision() == 2);
  v1::ListApplicationRevisionsRequest revisions;
  revisions.set_name("shop");
  absl::StatusOr<v1::ListApplicationRevisionsResponse> listed = f.manager.ListRevisions(revisions);
  REQUIRE(listed.ok());
  CHECK(listed->revisions(0).change_cause() == "autoscaled: web 2 -> 4 (CPU 90% of requests)");
  // The measure went into the status: web's, and db's (no requests).
  REQUIRE(app.status().app_metrics().services_size() == 2);
  const v1::ServiceMetrics& measured = app.status().app_metrics().services(0);
  CHECK(measured.service() == "web");
  CHECK(measured.ready_replicas() == 2);
  CHECK(measured.cpu_millicores() == 900);
  CHECK(measured.cpu_utilization_percent() == 90);

  // While the new spec is being placed, nothing more happens.
  CHECK(f.autoscaler.Tick().empty());
  CHECK(f.Get().spec_revision() == 2);

  // 4 replicas at 100m (20 %): 2 wanted, but only once that has been
  // wanted for the 5-minute cooldown.
  f.RunAll(4, 100);
  CHECK(f.autoscaler.Tick().empty());
  f.clock.Advance(absl::Minutes(4));
  CHECK(f.autoscaler.Tick().empty());
  f.clock.Advance(absl::Minutes(1) + absl::Seconds(1));
  decisions = f.autoscaler.Tick();
  REQUIRE(decisions.size() == 1);
  CHECK(decisions[0].to == 2);
  CHECK(Web(f.Get()).replicas() == 2);
  CHECK(f.Get().spec_revision() == 3);

  // A user's apply wins over the autoscaler's: the new spec is placed, the
  // autoscaler goes on from it.
  f.Apply(AutoscaledCam(3));
  CHECK(f.Get().spec_revision() == 4);
  f.RunAll(3, 250);  // 50 %: on target
  CHECK(f.autoscaler.Tick().empty());
  CHECK(Web(f.Get()).replicas() == 3);
}

TEST_CASE("the autoscaler stays within maxReplicas and needs measured replicas") {
  Fixture f;
  f.Apply(AutoscaledCam(2, 3));
  f.RunAll(2, 2000);  // 400 %
  std::vector<AutoscaleDecision> decisions = f.autoscaler.Tick();
  REQUIRE(decisions.size() == 1);
  CHECK(decisions[0].to == 3);
  f.RunAll(3, 2000);
  CHECK(f.autoscaler.Tick().empty());  // at its maximum

  // Usage that no node measured is not a measure.
  std::vector<PodReport> unmeasured;
  for (int i = 0; i < 3; ++i) {
    unmeasured.push_back(PodReport{.application = "shop",
                                   .service = "web",
                                   .pod = absl::StrCat("shop-web-", i),
                                   .node = "n1",
                                   .phase = lms::v1::POD_PHASE_RUNNING});
  }
  f.autoscaler.RecordUsage("rennes", unmeasured);
  f.clock.Advance(absl::Hours(1));
  CHECK(f.autoscaler.Tick().empty());
  CHECK(Web(f.Get()).replicas() == 3);
  // Nor is a cluster that left.
  f.autoscaler.ForgetCluster("rennes");
  CHECK(f.autoscaler.Tick().empty());
  CHECK(f.Get().status().app_metrics().services(0).ready_replicas() == 0);
}

TEST_CASE("ScaleServices refuses a stale spec revision and an unknown service") {
  Fixture f;
  f.Apply(AutoscaledCam(2));
  CHECK(absl::IsFailedPrecondition(f.manager.ScaleServices("shop", 7, {{"web", 3}}, "x").status()));
  CHECK(absl::IsNotFound(f.manager.ScaleServices("shop", 1, {{"cart", 3}}, "x").status()));
  CHECK(absl::IsNotFound(f.manager.ScaleServices("nope", 1, {{"web", 3}}, "x").status()));
  CHECK(f.Get().spec_revision() == 1);
  // Admission and bounds still apply: outside minReplicas..maxReplicas.
  CHECK_FALSE(f.manager.ScaleServices("shop", 1, {{"web", 9}}, "x").ok());
  CHECK(f.Get().spec_revision() == 1);
}

}  // namespace
}  // namespace codeco::acm
