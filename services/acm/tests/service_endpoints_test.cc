// Multi-cluster service names: parsing, the addresses agents report, and
// the nearest-first answer.
#include "acm/core/service_endpoints.h"

#include <catch2/catch.hpp>

#include "acm/core/cluster_report.h"

namespace codeco::acm {
namespace {

TEST_CASE("a clusterset service name parses with or without its suffix and bad ones are named") {
  auto short_form = ParseServiceName("sessions.session-cache");
  REQUIRE(short_form.ok());
  CHECK(short_form->service == "sessions");
  CHECK(short_form->application == "session-cache");
  CHECK(ClustersetName(*short_form) == "sessions.session-cache.svc.clusterset.local");
  auto full = ParseServiceName("web.shop.svc.clusterset.local");
  REQUIRE(full.ok());
  CHECK(full->service == "web");
  CHECK(full->application == "shop");

  for (const char* bad : {"", "web", "web.", ".shop", "Web.shop", "web.shop.extra", "web..shop",
                          ".svc.clusterset.local", "web.shop.svc.cluster.local"}) {
    INFO(bad);
    absl::StatusOr<ServiceName> parsed = ParseServiceName(bad);
    REQUIRE(absl::IsInvalidArgument(parsed.status()));
    CHECK_THAT(std::string(parsed.status().message()), Catch::StartsWith("name"));
  }
  CHECK(absl::IsInvalidArgument(ParseServiceName(std::string(300, 'a')).status()));
}

lms::v1::Pod RunningPod(const std::string& name, const std::string& ip) {
  lms::v1::Pod pod;
  pod.set_name(name);
  pod.set_node_name("n1");
  (*pod.mutable_labels())[kApplicationLabel] = "shop";
  (*pod.mutable_labels())[kServiceLabel] = "db";
  pod.set_phase(lms::v1::POD_PHASE_RUNNING);
  pod.set_pod_ip(ip);
  auto* container = pod.add_containers();
  container->add_ports()->set_port(6379);
  auto* metrics = container->add_ports();
  metrics->set_port(9121);
  metrics->set_reach_port(40001);
  return pod;
}

TEST_CASE("pod reports carry where a running pod serves and nothing before it runs") {
  lms::v1::Pod pending = RunningPod("shop-db-1", "");
  pending.set_phase(lms::v1::POD_PHASE_PENDING);
  std::vector<PodReport> reports = BuildPodReports(
      {RunningPod("shop-db-0", "10.1.0.7"), pending, RunningPod("shop-db-2", "fd00::7")});
  REQUIRE(reports.size() == 3);
  CHECK(reports[0].addresses == std::vector<std::string>{"10.1.0.7:6379", "10.1.0.7:40001"});
  CHECK(reports[1].addresses.empty());
  CHECK(reports[2].addresses == std::vector<std::string>{"[fd00::7]:6379", "[fd00::7]:40001"});

  CHECK(CheckPodAddress("10.1.0.7:6379", "pods[0].addresses[0]").ok());
  CHECK(CheckPodAddress("[fd00::7]:1", "f").ok());
  for (const std::string& bad :
       {std::string("10.1.0.7"), std::string("10.1.0.7:0"), std::string(":80"),
        std::string("h:99999"), std::string(300, 'a') + ":80"}) {
    absl::Status checked = CheckPodAddress(bad, "pods[3].addresses[1]");
    INFO(bad);
    REQUIRE(absl::IsInvalidArgument(checked));
    CHECK_THAT(std::string(checked.message()), Catch::StartsWith("pods[3].addresses[1]"));
  }
}

v1::Application PlacedShop() {
  v1::Application app;
  app.mutable_metadata()->set_name("shop");
  for (const char* name : {"web", "db"}) {
    v1::ServiceSpec* s = app.mutable_spec()->add_services();
    s->set_name(name);
  }
  auto* port = app.mutable_spec()->mutable_services(1)->add_ports();
  port->set_name("redis");
  port->set_port(6379);
  struct Replica {
    const char* service;
    const char* cluster;
    const char* pod;
    bool ready;
  };
  for (const Replica& r :
       {Replica{"db", "paris", "shop-db-0", true}, Replica{"db", "lille", "shop-db-1", true},
        Replica{"db", "nantes", "shop-db-2", true}, Replica{"db", "lille", "shop-db-3", false},
        Replica{"web", "lille", "shop-web-0", true}}) {
    v1::ServicePlacement* p = app.mutable_status()->add_placements();
    p->set_service(r.service);
    p->set_cluster(r.cluster);
    p->set_node("n1");
    p->set_pod(r.pod);
    p->set_ready(r.ready);
    if (r.ready) p->add_addresses(std::string("10.0.0.1:") + (r.pod + 5));
  }
  return app;
}

std::vector<std::string> Pods(const v1::ResolveServiceResponse& resolved) {
  std::vector<std::string> out;
  for (const auto& e : resolved.endpoints()) out.push_back(e.pod());
  return out;
}

TEST_CASE("a service resolves to its replicas in every cluster nearest first") {
  const v1::Application app = PlacedShop();
  const std::map<std::string, std::string> regions = {
      {"paris", "fr-north"}, {"lille", "fr-north"}, {"nantes", "fr-west"}};
  const RegionOf region_of = [&](const std::string& cluster) {
    auto it = regions.find(cluster);
    return it == regions.end() ? std::string() : it->second;
  };
  const ServiceName db{"db", "shop"};

  auto from_lille = ResolveEndpoints(app, db, "lille", false, region_of);
  REQUIRE(from_lille.ok());
  CHECK(from_lille->name() == "db.shop.svc.clusterset.local");
  REQUIRE(from_lille->ports_size() == 1);
  CHECK(from_lille->ports(0).port() == 6379);
  CHECK(Pods(*from_lille) == std::vector<std::string>{"shop-db-1", "shop-db-0", "shop-db-2"});
  CHECK(from_lille->endpoints(0).locality() == v1::ENDPOINT_LOCALITY_SAME_CLUSTER);
  CHECK(from_lille->endpoints(1).locality() == v1::ENDPOINT_LOCALITY_SAME_REGION);
  CHECK(from_lille->endpoints(2).locality() == v1::ENDPOINT_LOCALITY_REMOTE);
  CHECK(from_lille->endpoints(0).addresses(0) == "10.0.0.1:db-1");

  auto from_nantes = ResolveEndpoints(app, db, "nantes", true, region_of);
  REQUIRE(from_nantes.ok());
  CHECK(Pods(*from_nantes) ==
        std::vector<std::string>{"shop-db-2", "shop-db-1", "shop-db-0", "shop-db-3"});
  CHECK_FALSE(from_nantes->endpoints(3).ready());
  CHECK(from_nantes->endpoints(3).addresses().empty());

  auto anywhere = ResolveEndpoints(app, db, "", false, region_of);
  REQUIRE(anywhere.ok());
  CHECK(Pods(*anywhere) == std::vector<std::string>{"shop-db-1", "shop-db-2", "shop-db-0"});
  CHECK(anywhere->endpoints(0).locality() == v1::ENDPOINT_LOCALITY_UNSPECIFIED);

  auto missing = ResolveEndpoints(app, {"cache", "shop"}, "lille", false, region_of);
  REQUIRE(absl::IsNotFound(missing.status()));
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("no service \"cache\""));
}

}  // namespace
}  // namespace codeco::acm
