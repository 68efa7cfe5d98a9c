// The hub pushes managed clusters their neighborhoods and their part of each
// placed application as they change; clusters it cannot reach are left to
// their agents' pulls.
#include <catch2/catch.hpp>

#include "acm/core/member_publisher.h"
#include "acm/store/kv_application_store.h"
#include "acm_test_util.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"

namespace codeco::acm {
namespace {

using testing::SmallCam;

// Records every push; pushes to clusters in `failing` fail.
class RecordingPush final : public MemberPushPort {
 public:
  struct Sent {
    std::string cluster;
    std::string endpoint;
    std::string what;  // "assignment <app> pods=<n>" or "neighborhood <id>[ deleted]"
  };
  absl::Status PushNeighborhood(const std::string& cluster, const std::string& endpoint,
                                const v1::PushNeighborhoodRequest& request) override {
    if (failing.count(cluster)) return absl::UnavailableError("connection refused");
    sent.push_back({cluster, endpoint,
                    "neighborhood " + request.neighborhood().id() +
                        (request.deleted() ? " deleted" : "")});
    return absl::OkStatus();
  }
  absl::Status PushAssignment(const std::string& cluster, const std::string& endpoint,
                              const v1::PushAssignmentRequest& request) override {
    if (failing.count(cluster)) return absl::UnavailableError("connection refused");
    sent.push_back({cluster, endpoint,
                    "assignment " + request.assignment().application() +
                        " pods=" + std::to_string(request.assignment().pods_size())});
    return absl::OkStatus();
  }
  // What was sent to `cluster`, in order.
  std::vector<std::string> To(const std::string& cluster) const {
    std::vector<std::string> out;
    for (const Sent& s : sent) {
      if (s.cluster == cluster) out.push_back(s.what);
    }
    return out;
  }
  std::vector<Sent> sent;
  std::set<std::string> failing;
};

std::unique_ptr<KvStore> NewKv() {
  auto families = ApplicationColumnFamilies();
  families.push_back("clusters");
  families.push_back("neighborhoods");
  return NewInMemoryKvStore(families);
}

struct Hub {
  std::unique_ptr<KvStore> kv = NewKv();
  SimulatedClock clock{absl::FromUnixSeconds(1'800'000'000)};
  KvApplicationStore store{*kv};
  InMemoryPlacementScheduler scheduler;
  ClusterRegistry registry{*kv, clock};
  NeighborhoodManager neighborhoods{*kv, registry, clock, {.max_members = 2}};
  ApplicationManager manager{store, scheduler, clock, {}, &neighborhoods};
  RecordingPush push;

  // Registers `name`; with `acm` its ACM is reachable there.
  void AddCluster(const std::string& name, const std::string& acm) {
    v1::RegisterClusterRequest reg;
    reg.mutable_cluster()->mutable_metadata()->set_name(name);
    reg.mutable_cluster()->set_role(v1::CLUSTER_ROLE_MC);
    reg.mutable_cluster()->mutable_capacity()->mutable_largest_free_node()->set_cpu_millicores(
        4000);
    if (!acm.empty()) (*reg.mutable_cluster()->mutable_endpoints())[kAcmEndpoint] = acm;
    REQUIRE(registry.Register(reg).ok());
    neighborhoods.Repartition();
  }
  // Applies `name` and records its one service placed on `cluster`.
  void PlaceOn(const std::string& name, const std::string& cluster) {
    v1::ApplyApplicationRequest apply;
    apply.set_cam_yaml(SmallCam(name));
    REQUIRE(manager.Apply(apply).ok());
    PlacementResult placed;
    placed.placed = true;
    placed.plan_revision = 1;
    v1::ServicePlacement p;
    p.set_service("web");
    p.set_cluster(cluster);
    p.set_pod(name + "-web-0");
    placed.placements.push_back(p);
    REQUIRE(manager.RecordPlacement(name, 1, placed).ok());
  }
  // The neighborhood id of `name`.
  std::string NeighborhoodOf(const std::string& name) {
    auto found = neighborhoods.Find(name);
    REQUIRE(found.ok());
    REQUIRE(found->has_value());
    return (*found)->id();
  }
};

TEST_CASE("a placed application reaches each member as its neighborhood and its own pods") {
  Hub hub;
  hub.AddCluster("edge-a", "127.0.2.1:17600");
  hub.AddCluster("edge-b", "127.0.3.1:17600");
  MemberPublisher publisher(hub.manager, hub.neighborhoods, hub.registry, hub.push, hub.clock);
  hub.PlaceOn("shop", "edge-a");

  auto stats = publisher.Step();
  REQUIRE(stats.ok());
  const std::string nb = hub.NeighborhoodOf("shop");
  // edge-a runs the pod: it gets the neighborhood and its assignment;
  // edge-b is only a member.
  CHECK(hub.push.To("edge-a") ==
        std::vector<std::string>{"neighborhood " + nb, "assignment shop pods=1"});
  CHECK(hub.push.To("edge-b") == std::vector<std::string>{"neighborhood " + nb});
  CHECK(stats->pushed == 3);
  for (const auto& s : hub.push.sent) {
    CHECK(s.endpoint == (s.cluster == "edge-a" ? "127.0.2.1:17600" : "127.0.3.1:17600"));
  }

  SECTION("nothing that did not change is pushed again") {
    hub.push.sent.clear();
    auto again = publisher.Step();
    REQUIRE(again.ok());
    CHECK(again->pushed == 0);
    CHECK(hub.push.sent.empty());
  }

  SECTION("a deleted application leaves run-nothing and removes the neighborhood copies") {
    hub.push.sent.clear();
    v1::DeleteApplicationRequest del;
    del.set_name("shop");
    REQUIRE(hub.manager.Delete(del).ok());
    REQUIRE(publisher.Step().ok());
    CHECK(hub.push.To("edge-a") == std::vector<std::string>{"assignment shop pods=0"});
    REQUIRE(hub.manager.RecordRelease("shop", absl::OkStatus()).ok());
    REQUIRE(publisher.Step().ok());
    CHECK(hub.push.To("edge-a") == std::vector<std::string>{"assignment shop pods=0",
                                                           "neighborhood " + nb + " deleted"});
    CHECK(hub.push.To("edge-b") == std::vector<std::string>{"neighborhood " + nb + " deleted"});
  }
}

TEST_CASE("clusters without an ACM endpoint are skipped and failed pushes are counted") {
  Hub hub;
  hub.AddCluster("edge-a", "127.0.2.1:17600");
  hub.AddCluster("edge-b", "");
  hub.push.failing.insert("edge-a");
  MemberPublisher publisher(hub.manager, hub.neighborhoods, hub.registry, hub.push, hub.clock);
  hub.PlaceOn("shop", "edge-a");

  auto stats = publisher.Step();
  REQUIRE(stats.ok());
  CHECK(stats->pushed == 0);
  CHECK(stats->failed == 2);   // edge-a's neighborhood and assignment
  CHECK(stats->skipped == 1);  // edge-b has no ACM endpoint: its agent pulls
  CHECK(hub.push.sent.empty());
}

TEST_CASE("a publisher started late pushes only what changes after it started") {
  Hub hub;
  hub.AddCluster("edge-a", "127.0.2.1:17600");
  hub.PlaceOn("old", "edge-a");
  MemberPublisher publisher(hub.manager, hub.neighborhoods, hub.registry, hub.push, hub.clock);
  REQUIRE(publisher.Step().ok());
  CHECK(hub.push.sent.empty());  // the agent pulled "old" (or will)
  hub.PlaceOn("new", "edge-a");
  REQUIRE(publisher.Step().ok());
  CHECK(hub.push.To("edge-a") ==
        std::vector<std::string>{"neighborhood " + hub.NeighborhoodOf("new"),
                                 "assignment new pods=1"});
}

}  // namespace
}  // namespace codeco::acm
