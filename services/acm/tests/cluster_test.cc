#include <catch2/catch.hpp>
#include <memory>

#include "acm/core/cluster_registry.h"
#include "acm/core/neighborhood_composer.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"

namespace codeco::acm {
namespace {

v1::Cluster MakeCluster(const std::string& name, const std::string& region,
                        const std::string& country, common::v1::Tier tier, double lat, double lon,
                        int64_t free_cpu_m = 8000) {
  v1::Cluster c;
  c.mutable_metadata()->set_name(name);
  c.set_role(v1::CLUSTER_ROLE_MC);
  c.set_health(v1::CLUSTER_HEALTH_READY);
  auto* l = c.mutable_cluster_labels();
  l->set_region(region);
  l->set_country(country);
  l->set_tier(tier);
  l->set_latitude(lat);
  l->set_longitude(lon);
  auto* cap = c.mutable_capacity();
  cap->mutable_allocatable()->set_cpu_millicores(16000);
  cap->mutable_allocatable()->set_memory_bytes(int64_t{64} << 30);
  cap->mutable_free()->set_cpu_millicores(free_cpu_m);
  cap->mutable_free()->set_memory_bytes(int64_t{32} << 30);
  cap->mutable_largest_free_node()->set_cpu_millicores(free_cpu_m / 2);
  cap->mutable_largest_free_node()->set_memory_bytes(int64_t{16} << 30);
  cap->set_node_count(4);
  cap->set_ready_node_count(4);
  return c;
}

struct Registry {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore({"clusters"});
  SimulatedClock clock{absl::FromUnixSeconds(1'800'000'000)};
  ClusterRegistry registry{
      *kv,
      clock,
      {.heartbeat_interval = absl::Seconds(10), .miss_threshold = 3, .recover_beats = 2}};

  void Beat(const std::string& name, int64_t seq) {
    v1::HeartbeatRequest hb;
    hb.set_cluster_name(name);
    hb.set_sequence(seq);
    hb.set_health(v1::CLUSTER_HEALTH_READY);
    auto r = registry.Heartbeat(hb);
    REQUIRE(r.ok());
    REQUIRE_FALSE(r->reregister_required());
  }
  v1::ClusterHealth Health(const std::string& name) {
    v1::GetClusterRequest get;
    get.set_name(name);
    return registry.Get(get)->cluster().health();
  }
};

TEST_CASE("registered clusters heartbeat and missed beats make them UNREACHABLE with hysteresis") {
  Registry r;
  v1::RegisterClusterRequest reg;
  *reg.mutable_cluster() =
      MakeCluster("edge-1", "eu-west", "PT", common::v1::TIER_EDGE, 38.7, -9.1);
  auto registered = r.registry.Register(reg);
  REQUIRE(registered.ok());
  REQUIRE(registered->heartbeat_interval_ns() == 10'000'000'000);
  REQUIRE(r.Health("edge-1") == v1::CLUSTER_HEALTH_READY);

  // One or two lost beats change nothing.
  r.clock.Advance(absl::Seconds(25));
  REQUIRE(r.registry.Sweep()->empty());
  r.Beat("edge-1", 1);
  r.clock.Advance(absl::Seconds(29));
  REQUIRE(r.registry.Sweep()->empty());
  REQUIRE(r.Health("edge-1") == v1::CLUSTER_HEALTH_READY);
  // Three intervals of silence: UNREACHABLE.
  r.clock.Advance(absl::Seconds(2));
  REQUIRE(r.registry.Sweep().value() == std::vector<std::string>{"edge-1"});
  REQUIRE(r.Health("edge-1") == v1::CLUSTER_HEALTH_UNREACHABLE);
  REQUIRE(r.registry.Sweep()->empty());  // reported once
  // One beat is not enough to come back; two are.
  r.Beat("edge-1", 2);
  REQUIRE(r.Health("edge-1") == v1::CLUSTER_HEALTH_UNREACHABLE);
  r.Beat("edge-1", 2);  // a repeated sequence does not count
  REQUIRE(r.Health("edge-1") == v1::CLUSTER_HEALTH_UNREACHABLE);
  r.Beat("edge-1", 3);
  REQUIRE(r.Health("edge-1") == v1::CLUSTER_HEALTH_READY);

  // Unknown clusters are told to register.
  v1::HeartbeatRequest stranger;
  stranger.set_cluster_name("ghost");
  REQUIRE(r.registry.Heartbeat(stranger)->reregister_required());

  v1::UnregisterClusterRequest un;
  un.set_name("edge-1");
  REQUIRE(r.registry.Unregister(un).ok());
  REQUIRE(absl::IsNotFound(r.registry.Unregister(un).status()));
}

TEST_CASE("registration validates its input and list filters") {
  Registry r;
  v1::RegisterClusterRequest bad;
  *bad.mutable_cluster() = MakeCluster("Edge_1", "eu", "PT", common::v1::TIER_EDGE, 0, 0);
  REQUIRE_THAT(std::string(r.registry.Register(bad).status().message()),
               Catch::StartsWith("cluster.metadata.name: "));
  *bad.mutable_cluster() = MakeCluster("e1", "eu", "PT", common::v1::TIER_EDGE, 95, 0);
  REQUIRE_THAT(std::string(r.registry.Register(bad).status().message()),
               Catch::StartsWith("cluster.cluster_labels.latitude: "));
  bad.mutable_cluster()->mutable_cluster_labels()->set_latitude(0);
  bad.mutable_cluster()->mutable_capacity()->mutable_free()->set_cpu_millicores(-1);
  REQUIRE(r.registry.Register(bad).status().code() == absl::StatusCode::kInvalidArgument);
  bad.mutable_cluster()->mutable_capacity()->mutable_free()->set_cpu_millicores(0);
  (*bad.mutable_cluster()->mutable_endpoints())["swm"] = "127.0.2.1";
  REQUIRE_THAT(std::string(r.registry.Register(bad).status().message()),
               Catch::StartsWith("cluster.endpoints[swm]: "));
  bad.mutable_cluster()->mutable_endpoints()->clear();
  (*bad.mutable_cluster()->mutable_endpoints())["Not A Label"] = "127.0.2.1:7000";
  REQUIRE_THAT(std::string(r.registry.Register(bad).status().message()),
               Catch::StartsWith("cluster.endpoints: "));
  bad.mutable_cluster()->mutable_endpoints()->clear();
  (*bad.mutable_cluster()->mutable_endpoints())["swm"] = "127.0.2.1:7000";
  Registry other;  // a registry of its own, so r's sweep below counts only c0..c4
  auto with_endpoint = other.registry.Register(bad);
  REQUIRE(with_endpoint.ok());
  REQUIRE(with_endpoint->cluster().endpoints().at("swm") == "127.0.2.1:7000");

  for (int i = 0; i < 5; ++i) {
    v1::RegisterClusterRequest reg;
    *reg.mutable_cluster() =
        MakeCluster("c" + std::to_string(i), "eu", "PT", common::v1::TIER_EDGE, 0, 0);
    REQUIRE(r.registry.Register(reg).ok());
  }
  r.clock.Advance(absl::Seconds(31));
  r.Beat("c2", 1);
  REQUIRE(r.registry.Sweep()->size() == 4);
  v1::ListClustersRequest list;
  list.set_health(v1::CLUSTER_HEALTH_READY);
  auto ready = r.registry.List(list);
  REQUIRE(ready->clusters_size() == 1);
  REQUIRE(ready->clusters(0).metadata().name() == "c2");
  v1::ListClustersRequest paged;
  paged.set_page_size(2);
  auto page = r.registry.List(paged);
  REQUIRE(page->clusters_size() == 2);
  REQUIRE(page->next_page_token() == "c1");
}

std::vector<v1::Cluster> Federation() {
  return {
      MakeCluster("lisbon-edge", "eu-west", "PT", common::v1::TIER_EDGE, 38.72, -9.14),
      MakeCluster("porto-edge", "eu-west", "PT", common::v1::TIER_EDGE, 41.15, -8.61),
      MakeCluster("madrid-cloud", "eu-west", "ES", common::v1::TIER_CLOUD, 40.42, -3.70),
      MakeCluster("frankfurt-cloud", "eu-central", "DE", common::v1::TIER_CLOUD, 50.11, 8.68),
      MakeCluster("munich-edge", "eu-central", "DE", common::v1::TIER_EDGE, 48.14, 11.58),
      MakeCluster("virginia-cloud", "us-east", "US", common::v1::TIER_CLOUD, 38.03, -78.48),
      MakeCluster("tiny-edge", "eu-west", "PT", common::v1::TIER_FAR_EDGE, 38.7, -9.2, 200),
  };
}

v1::ApplicationSpec App() {
  v1::ApplicationSpec spec;
  spec.set_app_name("shop");
  auto* s = spec.add_services();
  s->set_name("web");
  s->mutable_requests()->set_cpu_millicores(500);
  s->mutable_requests()->set_memory_bytes(512 << 20);
  return spec;
}

std::vector<std::string> Members(const v1::Neighborhood& nb) {
  std::vector<std::string> out;
  for (const auto& m : nb.members()) out.push_back(m.cluster());
  return out;
}

TEST_CASE("a cluster's parent may not lie below it and an unknown parent is allowed") {
  Registry r;
  auto reg = [&](const std::string& name, const std::string& parent) {
    v1::RegisterClusterRequest req;
    *req.mutable_cluster() = MakeCluster(name, "eu", "FR", common::v1::TIER_EDGE, 48, 2);
    req.mutable_cluster()->set_parent_cluster(parent);
    return r.registry.Register(req);
  };
  REQUIRE(reg("root", "").ok());
  REQUIRE(reg("middle", "root").ok());
  REQUIRE(reg("leaf", "middle").ok());
  REQUIRE(reg("later", "not-yet").ok());  // its parent may register after it
  // root re-registering under leaf would close root -> leaf -> middle -> root.
  auto looped = reg("root", "leaf");
  REQUIRE_FALSE(looped.ok());
  CHECK_THAT(std::string(looped.status().message()),
             Catch::Contains("cluster.parent_cluster: \"leaf\" lies below root (root -> leaf -> "
                             "middle -> root)"));
  CHECK(absl::IsInvalidArgument(reg("middle", "middle").status()));
  // Moving a subtree elsewhere is fine.
  REQUIRE(reg("middle", "later").ok());
  v1::GetClusterRequest get;
  get.set_name("root");
  CHECK(r.registry.Get(get)->cluster().parent_cluster().empty());
}

TEST_CASE("a cluster's last hub outage is stored from its heartbeat and kept on registration") {
  Registry r;
  v1::RegisterClusterRequest req;
  *req.mutable_cluster() = MakeCluster("edge", "eu", "FR", common::v1::TIER_EDGE, 48, 2);
  REQUIRE(r.registry.Register(req).ok());
  v1::HeartbeatRequest hb;
  hb.set_cluster_name("edge");
  hb.set_sequence(1);
  hb.set_health(v1::CLUSTER_HEALTH_READY);
  hb.mutable_hub_outage()->mutable_start_time()->set_seconds(1'800'000'000);
  hb.mutable_hub_outage()->mutable_end_time()->set_seconds(1'800'000'600);
  REQUIRE(r.registry.Heartbeat(hb).ok());
  v1::GetClusterRequest get;
  get.set_name("edge");
  CHECK(r.registry.Get(get)->cluster().last_hub_outage().end_time().seconds() == 1'800'000'600);
  // A later heartbeat without one, and a registration without one, keep it.
  hb.clear_hub_outage();
  hb.set_sequence(2);
  REQUIRE(r.registry.Heartbeat(hb).ok());
  REQUIRE(r.registry.Register(req).ok());
  CHECK(r.registry.Get(get)->cluster().last_hub_outage().start_time().seconds() == 1'800'000'000);
}

TEST_CASE("neighborhoods meet the hard constraints and suit the profile") {
  NeighborhoodComposer cnc;
  cnc.Partition(Federation());
  REQUIRE(cnc.class_count() >= 4);
  REQUIRE(cnc.ClassOf("lisbon-edge") == cnc.ClassOf("porto-edge"));
  REQUIRE(cnc.ClassOf("lisbon-edge") != cnc.ClassOf("madrid-cloud"));

  // GDPR-style residency: only DE and PT clusters; tiny-edge cannot host 500m.
  v1::ApplicationSpec spec = App();
  spec.mutable_intents()->add_allowed_countries("DE");
  spec.mutable_intents()->add_allowed_countries("PT");
  auto nb = cnc.Select(spec, {.max_members = 8});
  REQUIRE(nb.ok());
  auto members = Members(*nb);
  std::sort(members.begin(), members.end());
  REQUIRE(members ==
          std::vector<std::string>{"frankfurt-cloud", "lisbon-edge", "munich-edge", "porto-edge"});

  // Latency to an origin in Lisbon within 5 ms: Lisbon and Porto (~275 km) only.
  spec = App();
  spec.set_performance_profile(common::v1::PERFORMANCE_PROFILE_LATENCY);
  spec.mutable_intents()->set_origin("lisbon-edge");
  spec.mutable_intents()->set_max_latency_to_origin_ns(5'000'000);
  nb = cnc.Select(spec, {.max_members = 8});
  REQUIRE(Members(*nb) == std::vector<std::string>{"lisbon-edge", "porto-edge"});

  // Bounded: the closest two of every allowed cluster.
  spec.mutable_intents()->set_max_latency_to_origin_ns(0);
  nb = cnc.Select(spec, {.max_members = 2});
  REQUIRE(Members(*nb) == std::vector<std::string>{"lisbon-edge", "porto-edge"});

  // Regions prune whole classes.
  spec = App();
  spec.mutable_intents()->add_allowed_regions("us-east");
  REQUIRE(Members(*cnc.Select(spec)) == std::vector<std::string>{"virginia-cloud"});

  // Nothing qualifies: FAILED_PRECONDITION naming why.
  spec = App();
  spec.set_compliance_class("gdpr");
  auto none = cnc.Select(spec);
  REQUIRE(none.status().code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE_THAT(std::string(none.status().message()), Catch::Contains("without compliance"));
}

TEST_CASE("compliance and security and health labels filter clusters") {
  auto clusters = Federation();
  (*clusters[3].mutable_metadata()->mutable_labels())["codeco.io/compliance"] = "gdpr, high";
  (*clusters[3].mutable_metadata()->mutable_labels())["codeco.io/security-class"] = "High";
  (*clusters[4].mutable_metadata()->mutable_labels())["codeco.io/compliance"] = "gdpr";
  (*clusters[4].mutable_metadata()->mutable_labels())["codeco.io/security-class"] = "Medium";
  (*clusters[0].mutable_metadata()->mutable_labels())["codeco.io/compliance"] = "gdpr";
  clusters[0].set_health(v1::CLUSTER_HEALTH_UNREACHABLE);
  NeighborhoodComposer cnc;
  cnc.Partition(clusters);
  v1::ApplicationSpec spec = App();
  spec.set_compliance_class("GDPR");
  auto members = Members(*cnc.Select(spec));
  std::sort(members.begin(), members.end());
  REQUIRE(members == std::vector<std::string>{"frankfurt-cloud", "munich-edge"});
  spec.set_security_class("High");
  REQUIRE(Members(*cnc.Select(spec)) == std::vector<std::string>{"frankfurt-cloud"});
}

TEST_CASE("CODECO's security and compliance scales: a class is met by itself or higher") {
  auto clusters = Federation();
  for (auto& c : clusters) {
    (*c.mutable_metadata()->mutable_labels())["codeco.io/compliance"] = "low";
    (*c.mutable_metadata()->mutable_labels())["codeco.io/security-class"] = "low";
  }
  (*clusters[3].mutable_metadata()->mutable_labels())["codeco.io/compliance"] = "gdpr,high";
  (*clusters[3].mutable_metadata()->mutable_labels())["codeco.io/security-class"] = "high";
  (*clusters[4].mutable_metadata()->mutable_labels())["codeco.io/compliance"] = "medium";
  (*clusters[4].mutable_metadata()->mutable_labels())["codeco.io/security-class"] = "medium";
  NeighborhoodComposer cnc;
  cnc.Partition(clusters);
  v1::ApplicationSpec spec = App();
  spec.set_compliance_class("Medium");  // met by medium and by high
  auto members = Members(*cnc.Select(spec));
  std::sort(members.begin(), members.end());
  REQUIRE(members == std::vector<std::string>{"frankfurt-cloud", "munich-edge"});
  spec.set_security_class("Good");  // between Medium and High: only high meets it
  REQUIRE(Members(*cnc.Select(spec)) == std::vector<std::string>{"frankfurt-cloud"});
  spec.set_security_class("None");  // asks for nothing
  REQUIRE(Members(*cnc.Select(spec)).size() == 2);
  spec.set_compliance_class("High");
  REQUIRE(Members(*cnc.Select(spec)) == std::vector<std::string>{"frankfurt-cloud"});
}

TEST_CASE("the resilience profile spreads over similarity classes") {
  NeighborhoodComposer cnc;
  cnc.Partition(Federation());
  v1::ApplicationSpec spec = App();
  spec.set_performance_profile(common::v1::PERFORMANCE_PROFILE_RESILIENCE);
  auto nb = cnc.Select(spec, {.max_members = 4});
  REQUIRE(nb->members_size() == 4);
  std::set<std::string> classes;
  for (const auto& m : nb->members()) classes.insert(m.partition_class());
  REQUIRE(classes.size() == 4);
}

}  // namespace
}  // namespace codeco::acm
