// UnregisterCluster drains: the cluster is marked, its applications get a
// neighborhood without it and are placed again, then it goes; a refusal
// (nowhere else to go, no force) changes nothing; a restart finishes a drain.
#include <algorithm>
#include <catch2/catch.hpp>

#include "absl/strings/str_replace.h"
#include "acm/core/cluster_drainer.h"
#include "acm/store/kv_application_store.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"
#include "acm_test_util.h"

namespace codeco::acm {
namespace {

using testing::SmallCam;

std::unique_ptr<KvStore> NewKv() {
  auto families = ApplicationColumnFamilies();
  families.push_back("clusters");
  families.push_back("neighborhoods");
  return NewInMemoryKvStore(families);
}

// The hub's core over one store: what a (re)started ACM builds.
struct Hub {
  KvStore& kv;
  SimulatedClock& clock;
  KvApplicationStore store{kv};
  InMemoryPlacementScheduler scheduler;
  ClusterRegistry registry{kv, clock};
  NeighborhoodManager neighborhoods{kv, registry, clock, {.max_members = 2}};
  ApplicationManager manager{store, scheduler, clock, {}, &neighborhoods};
  ClusterDrainer drainer{registry, neighborhoods, manager, clock};

  Hub(KvStore& kv, SimulatedClock& clock) : kv(kv), clock(clock) {}

  void AddCluster(const std::string& name) {
    v1::RegisterClusterRequest reg;
    reg.mutable_cluster()->mutable_metadata()->set_name(name);
    reg.mutable_cluster()->set_role(v1::CLUSTER_ROLE_MC);
    reg.mutable_cluster()->mutable_capacity()->mutable_largest_free_node()->set_cpu_millicores(
        4000);
    REQUIRE(registry.Register(reg).ok());
    neighborhoods.Repartition();
  }
  v1::Application Get(const std::string& name) {
    v1::GetApplicationRequest get;
    get.set_name(name);
    auto got = manager.Get(get);
    REQUIRE(got.ok());
    return got->application();
  }
  // Applies `name` and records a placement of its one service on `cluster`.
  void PlaceOn(const std::string& name, const std::string& cluster) {
    v1::ApplyApplicationRequest apply;
    apply.set_cam_yaml(SmallCam(name));
    REQUIRE(manager.Apply(apply).ok());
    PlacementResult placed;
    placed.placed = true;
    placed.neighborhood_id = "nb-" + name;
    v1::ServicePlacement p;
    p.set_service("web");
    p.set_cluster(cluster);
    p.set_pod(name + "-web-0");
    placed.placements.push_back(p);
    REQUIRE(manager.RecordPlacement(name, 1, placed).ok());
  }
  bool Registered(const std::string& name) {
    v1::GetClusterRequest get;
    get.set_name(name);
    return registry.Get(get).ok();
  }
};

TEST_CASE("unregistering a cluster re-places its applications elsewhere then removes it") {
  auto kv = NewKv();
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  Hub hub(*kv, clock);
  hub.AddCluster("edge-1");
  hub.AddCluster("edge-2");
  hub.PlaceOn("shop", "edge-1");
  REQUIRE(hub.scheduler.requests().size() == 1);
  hub.AddCluster("edge-3");

  v1::UnregisterClusterRequest request;
  request.set_name("edge-1");
  auto done = hub.drainer.Unregister(request);
  INFO(done.status().ToString());
  REQUIRE(done.ok());
  REQUIRE(done->operation().kind() == "acm.UnregisterCluster");
  REQUIRE(done->operation().done());
  REQUIRE_THAT(done->operation().phase(), Catch::Contains("shop"));
  REQUIRE_FALSE(hub.Registered("edge-1"));

  // Asked to be placed again, in a neighborhood without edge-1.
  REQUIRE(hub.scheduler.requests().size() == 2);
  const v1::Neighborhood nb = hub.scheduler.neighborhoods().back();
  REQUIRE(nb.members_size() == 2);
  for (const auto& m : nb.members()) REQUIRE(m.cluster() != "edge-1");
  v1::Application app = hub.Get("shop");
  REQUIRE(app.status().phase() == v1::APPLICATION_PHASE_MIGRATING);
  REQUIRE_THAT(app.status().error_msg(), Catch::Contains("edge-1"));
  v1::GetNeighborhoodRequest get_nb;
  get_nb.set_application("shop");
  auto stored = hub.neighborhoods.Get(get_nb);
  for (const auto& m : stored->neighborhood().members()) REQUIRE(m.cluster() != "edge-1");

  // The scheduler's answer lands as usual.
  PlacementResult placed;
  placed.placed = true;
  v1::ServicePlacement p;
  p.set_service("web");
  p.set_cluster("edge-2");
  placed.placements.push_back(p);
  REQUIRE(hub.manager.RecordPlacement("shop", 1, placed).ok());
  REQUIRE(hub.Get("shop").status().phase() == v1::APPLICATION_PHASE_DEPLOYING);

  // A cluster that is not registered (any more) is NOT_FOUND naming the field.
  auto again = hub.drainer.Unregister(request);
  REQUIRE(absl::IsNotFound(again.status()));
  REQUIRE_THAT(std::string(again.status().message()), Catch::StartsWith("name: "));
  request.set_name("");
  REQUIRE(absl::IsInvalidArgument(hub.drainer.Unregister(request).status()));
}

TEST_CASE("a cluster whose applications have nowhere else to go stays unless forced") {
  auto kv = NewKv();
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  Hub hub(*kv, clock);
  hub.AddCluster("only");
  hub.PlaceOn("shop", "only");
  const int64_t revision = *hub.manager.CurrentRevision();

  v1::UnregisterClusterRequest request;
  request.set_name("only");
  auto refused = hub.drainer.Unregister(request);
  REQUIRE(absl::IsFailedPrecondition(refused.status()));
  REQUIRE_THAT(std::string(refused.status().message()), Catch::Contains("shop"));
  // Nothing changed: still registered, not draining, the application as it was.
  REQUIRE(hub.Registered("only"));
  v1::GetClusterRequest get;
  get.set_name("only");
  REQUIRE_FALSE(IsDraining(hub.registry.Get(get)->cluster()));
  REQUIRE(*hub.manager.CurrentRevision() == revision);

  request.set_force(true);
  REQUIRE(hub.drainer.Unregister(request).ok());
  REQUIRE_FALSE(hub.Registered("only"));
  v1::Application app = hub.Get("shop");
  REQUIRE(app.status().phase() == v1::APPLICATION_PHASE_PENDING);
  REQUIRE_THAT(app.status().error_msg(), Catch::Contains("waiting for a neighborhood"));
  REQUIRE(hub.scheduler.requests().size() == 1);  // only the first placement
}

TEST_CASE("a restarted hub finishes a drain and the moves it had started") {
  auto kv = NewKv();
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  {
    Hub hub(*kv, clock);
    hub.AddCluster("edge-1");
    hub.AddCluster("edge-2");
    hub.PlaceOn("shop", "edge-1");
    // Crash after the mark was stored, before anything moved.
    REQUIRE(hub.registry.SetDraining("edge-1", true).ok());
    // A re-registering agent does not clear the mark.
    hub.AddCluster("edge-1");
    v1::GetClusterRequest get;
    get.set_name("edge-1");
    REQUIRE(IsDraining(hub.registry.Get(get)->cluster()));
  }
  Hub restarted(*kv, clock);
  REQUIRE(*restarted.drainer.Resume() == 1);
  REQUIRE_FALSE(restarted.Registered("edge-1"));
  REQUIRE(restarted.Get("shop").status().phase() == v1::APPLICATION_PHASE_MIGRATING);
  REQUIRE(restarted.scheduler.requests().size() == 1);
  // And a hub restarted while shop is MIGRATING asks for its placement again.
  Hub again(*kv, clock);
  REQUIRE(*again.manager.Resume() == 1);
  REQUIRE(again.scheduler.requests().size() == 1);
  REQUIRE(again.scheduler.neighborhoods()[0].members_size() == 1);
  REQUIRE(again.scheduler.neighborhoods()[0].members(0).cluster() == "edge-2");
}

TEST_CASE("applications move off a cluster unreachable for longer than the limit") {
  auto kv = NewKv();
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  Hub hub(*kv, clock);
  hub.AddCluster("edge-1");
  hub.AddCluster("edge-2");
  hub.PlaceOn("shop", "edge-1");
  hub.PlaceOn("lonely", "edge-1");
  auto beat = [&](const std::string& name) {
    v1::HeartbeatRequest hb;
    hb.set_cluster_name(name);
    REQUIRE(hub.registry.Heartbeat(hb).ok());
  };
  // edge-1 falls silent; edge-2 keeps beating. 50 s silent: unreachable, not yet long enough.
  for (int i = 0; i < 5; ++i) {
    clock.Advance(absl::Seconds(10));
    beat("edge-2");
  }
  REQUIRE(hub.drainer.ReevaluateDegraded(absl::Minutes(2))->empty());
  REQUIRE(hub.Get("shop").status().phase() == v1::APPLICATION_PHASE_DEPLOYING);
  for (int i = 0; i < 8; ++i) {
    clock.Advance(absl::Seconds(10));
    beat("edge-2");
  }
  // 130 s silent: shop moves to a neighborhood without edge-1.
  auto moved = hub.drainer.ReevaluateDegraded(absl::Minutes(2));
  REQUIRE(moved.ok());
  REQUIRE(std::find(moved->begin(), moved->end(), "shop") != moved->end());
  v1::Application shop = hub.Get("shop");
  REQUIRE(shop.status().phase() == v1::APPLICATION_PHASE_MIGRATING);
  REQUIRE_THAT(shop.status().error_msg(), Catch::Contains("unreachable"));
  const v1::Neighborhood nb = hub.scheduler.neighborhoods().back();
  for (const auto& m : nb.members()) REQUIRE(m.cluster() != "edge-1");
  // The cluster stays registered (it may come back), and a second pass
  // leaves the moving application alone.
  REQUIRE(hub.Registered("edge-1"));
  const size_t asked = hub.scheduler.requests().size();
  REQUIRE(hub.drainer.ReevaluateDegraded(absl::Minutes(2))->empty());
  REQUIRE(hub.scheduler.requests().size() == asked);
}

TEST_CASE("an application with nowhere else to go stays when its cluster is long unreachable") {
  auto kv = NewKv();
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  Hub hub(*kv, clock);
  hub.AddCluster("only");
  hub.PlaceOn("shop", "only");
  const int64_t revision = *hub.manager.CurrentRevision();
  clock.Advance(absl::Minutes(10));
  auto moved = hub.drainer.ReevaluateDegraded(absl::Minutes(2));
  REQUIRE(moved.ok());
  REQUIRE(moved->empty());
  REQUIRE(*hub.manager.CurrentRevision() == revision);
  REQUIRE(hub.scheduler.requests().size() == 1);
}

}  // namespace
}  // namespace codeco::acm
