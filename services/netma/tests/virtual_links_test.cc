// Virtual links: create (validated, idempotent), compiled intents and
// per-device rules, pre-created vs on-demand, list/get/delete over the
// KvStore-backed repository, phases from measurements, controller failover.
#include "netma/core/virtual_links.h"

#include <catch2/catch.hpp>

#include "codeco/common/kv_store.h"
#include "netma/core/monitor.h"
#include "netma/store/kv_virtual_link_repository.h"

namespace codeco::netma {
namespace {

using codeco::netma::v1::VirtualLink;

VirtualLink Spec(const std::string& channel, const std::string& from = "edge-a",
                 const std::string& to = "cloud") {
  VirtualLink spec;
  spec.set_application("shop");
  spec.set_channel(channel);
  spec.set_source_cluster(from);
  spec.set_target_cluster(to);
  spec.set_target_endpoint("10.0.0.5:8080");
  spec.set_service_class(codeco::common::v1::SERVICE_CLASS_ASSURED);
  spec.set_min_bandwidth_bps(10'000'000);
  spec.set_max_delay_ns(20'000'000);
  spec.set_neighborhood_id("nb-shop");
  return spec;
}

struct Fixture {
  Fixture()
      : store(NewInMemoryKvStore({kVirtualLinksColumnFamily})),
        repository(NewKvVirtualLinkRepository(*store)),
        controller(*repository, clock, {"idco-0", "idco-1"}) {}
  SimulatedClock clock{absl::FromUnixSeconds(3'000'000)};
  std::unique_ptr<KvStore> store;
  std::unique_ptr<VirtualLinkRepository> repository;
  VirtualLinkController controller;
};

TEST_CASE("a pre-created link compiles to an intent and rules on both edge devices") {
  Fixture f;
  auto link = f.controller.Create(Spec("orders"), "req-1");
  REQUIRE(link.ok());
  REQUIRE(link->id() == VirtualLinkId(Spec("orders")));
  REQUIRE(link->phase() == v1::VIRTUAL_LINK_PHASE_ESTABLISHING);
  REQUIRE(link->controller() == "idco-0");
  REQUIRE_THAT(link->intent(), Catch::Contains("edge-a -> cloud"));
  REQUIRE(link->forwarding_rules_size() == 4);
  std::set<std::string> devices;
  for (const auto& rule : link->forwarding_rules()) {
    devices.insert(rule.device());
    REQUIRE(rule.priority() == 200);
    REQUIRE(rule.meter_bps() == 10'000'000);
  }
  REQUIRE(devices == std::set<std::string>{"ned-edge-a", "ned-cloud"});
  REQUIRE(link->forwarding_rules(0).action() == "encrypt; tunnel ned-cloud");
  REQUIRE(f.controller.Get(link->id())->intent() == link->intent());
  REQUIRE(f.controller.DeviceAssociations("nb-shop") ==
          std::map<std::string, std::string>{{"ned-cloud", "idco-0"}, {"ned-edge-a", "idco-0"}});
}

TEST_CASE("create is idempotent by request id and by channel") {
  Fixture f;
  auto first = f.controller.Create(Spec("orders"), "req-1");
  REQUIRE(first.ok());
  f.clock.Advance(absl::Seconds(1));
  auto again = f.controller.Create(Spec("orders"), "req-1");
  REQUIRE(again.ok());
  REQUIRE(again->create_time().seconds() == first->create_time().seconds());
  REQUIRE(f.controller.Create(Spec("orders"), "")->create_time().seconds() ==
          first->create_time().seconds());
  VirtualLink other = Spec("orders");
  other.set_min_bandwidth_bps(1);
  REQUIRE(f.controller.Create(other, "req-2").status().code() == absl::StatusCode::kAlreadyExists);
  REQUIRE(f.controller.Create(Spec("payments"), "req-1").status().code() ==
          absl::StatusCode::kAlreadyExists);
}

TEST_CASE("bad specs are refused with field paths and nothing is stored") {
  Fixture f;
  VirtualLink spec = Spec("Orders!");
  spec.set_target_cluster("edge-a");
  spec.set_target_endpoint("10.0.0.5");
  spec.set_min_bandwidth_bps(-1);
  spec.set_service_class(static_cast<codeco::common::v1::ServiceClass>(42));
  auto link = f.controller.Create(spec, "req");
  REQUIRE(link.status().code() == absl::StatusCode::kInvalidArgument);
  std::string message(link.status().message());
  for (const char* field :
       {"virtual_link.channel", "virtual_link.target_cluster", "virtual_link.target_endpoint",
        "virtual_link.min_bandwidth_bps", "virtual_link.service_class"}) {
    REQUIRE_THAT(message, Catch::Contains(field));
  }
  REQUIRE(f.controller.List({})->links.empty());
}

TEST_CASE("an on-demand link gets its rules on first use") {
  Fixture f;
  VirtualLink spec = Spec("orders");
  spec.set_provisioning(v1::VIRTUAL_LINK_PROVISIONING_ON_DEMAND);
  auto link = f.controller.Create(spec, "");
  REQUIRE(link.ok());
  REQUIRE(link->phase() == v1::VIRTUAL_LINK_PHASE_PENDING);
  REQUIRE(link->forwarding_rules_size() == 0);
  REQUIRE_FALSE(link->intent().empty());
  auto active = f.controller.Activate(link->id());
  REQUIRE(active.ok());
  REQUIRE(active->forwarding_rules_size() == 4);
  REQUIRE(active->phase() == v1::VIRTUAL_LINK_PHASE_ESTABLISHING);
  REQUIRE(f.controller.Get(link->id())->forwarding_rules_size() == 4);
}

TEST_CASE("list pages and filters and delete returns the last state") {
  Fixture f;
  for (const char* channel : {"c1", "c2", "c3", "c4", "c5"}) {
    REQUIRE(f.controller.Create(Spec(channel), "").ok());
  }
  REQUIRE(f.controller.Create(Spec("c6", "edge-b", "cloud"), "").ok());
  VirtualLinkQuery query;
  query.page_size = 4;
  auto page = f.controller.List(query);
  REQUIRE(page->links.size() == 4);
  REQUIRE_FALSE(page->next_page_token.empty());
  query.page_token = page->next_page_token;
  auto rest = f.controller.List(query);
  REQUIRE(rest->links.size() == 2);
  REQUIRE(rest->next_page_token.empty());
  REQUIRE(page->links[3].id() < rest->links[0].id());
  query = {};
  query.cluster = "edge-b";
  REQUIRE(f.controller.List(query)->links.size() == 1);
  query.cluster = "";
  query.application = "other";
  REQUIRE(f.controller.List(query)->links.empty());
  query = {};
  query.page_size = -1;
  REQUIRE(f.controller.List(query).status().code() == absl::StatusCode::kInvalidArgument);

  std::string id = VirtualLinkId(Spec("c1"));
  auto deleted = f.controller.Delete(id);
  REQUIRE(deleted.ok());
  REQUIRE(deleted->phase() == v1::VIRTUAL_LINK_PHASE_DELETING);
  REQUIRE(f.controller.Get(id).status().code() == absl::StatusCode::kNotFound);
  REQUIRE(f.controller.Delete(id).status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("measurements move links between UP and DEGRADED and FAILED") {
  Fixture f;
  auto link = f.controller.Create(Spec("orders"), "");
  v1::LinkMetrics m;
  m.set_link_id(LinkId("edge-a", "cloud"));
  m.set_rtt_ema_ns(30'000'000);
  m.set_throughput_bps(50'000'000);
  REQUIRE(*f.controller.ApplyMeasurements({m}) == 1);
  REQUIRE(f.controller.Get(link->id())->phase() == v1::VIRTUAL_LINK_PHASE_UP);
  REQUIRE(f.controller.Get(link->id())->measured_delay_ns() == 15'000'000);
  REQUIRE(*f.controller.ApplyMeasurements({m}) == 0);  // no change, no write
  m.set_rtt_ema_ns(60'000'000);
  REQUIRE(*f.controller.ApplyMeasurements({m}) == 1);
  REQUIRE(f.controller.Get(link->id())->phase() == v1::VIRTUAL_LINK_PHASE_DEGRADED);
  m.set_rtt_ema_ns(10'000'000);
  m.set_throughput_bps(1'000'000);
  REQUIRE(*f.controller.ApplyMeasurements({m}) == 1);
  REQUIRE(f.controller.Get(link->id())->phase() == v1::VIRTUAL_LINK_PHASE_DEGRADED);
  m.set_failed(true);
  REQUIRE(*f.controller.ApplyMeasurements({m}) == 1);
  REQUIRE(f.controller.Get(link->id())->phase() == v1::VIRTUAL_LINK_PHASE_FAILED);
}

TEST_CASE("the newest probe decides and out_of_bounds_since marks the first probe over a bound") {
  Fixture f;
  auto link = f.controller.Create(Spec("orders"), "");
  v1::LinkMetrics m;
  m.set_link_id(LinkId("edge-a", "cloud"));
  m.set_rtt_ema_ns(10'000'000);  // the average still looks fine...
  m.set_rtt_last_ns(50'000'000);  // ...the newest probe does not: 25 ms > 20 ms
  m.mutable_measure_time()->set_seconds(3'000'010);
  REQUIRE(*f.controller.ApplyMeasurements({m}) == 1);
  auto first = f.controller.Get(link->id());
  REQUIRE(first->phase() == v1::VIRTUAL_LINK_PHASE_DEGRADED);
  REQUIRE(first->measured_delay_ns() == 25'000'000);
  REQUIRE(first->out_of_bounds_since().seconds() == 3'000'010);
  REQUIRE(first->measure_time().seconds() == 3'000'010);
  // Still over at the next probe: the run started at the first one.
  m.mutable_measure_time()->set_seconds(3'000'015);
  REQUIRE(*f.controller.ApplyMeasurements({m}) == 1);
  REQUIRE(f.controller.Get(link->id())->out_of_bounds_since().seconds() == 3'000'010);
  REQUIRE(f.controller.Get(link->id())->measure_time().seconds() == 3'000'015);
  // Back within bounds: the run ends.
  m.set_rtt_last_ns(12'000'000);
  m.mutable_measure_time()->set_seconds(3'000'020);
  REQUIRE(*f.controller.ApplyMeasurements({m}) == 1);
  REQUIRE(f.controller.Get(link->id())->phase() == v1::VIRTUAL_LINK_PHASE_UP);
  REQUIRE_FALSE(f.controller.Get(link->id())->has_out_of_bounds_since());
}

TEST_CASE("virtual links never oversubscribe a link's bandwidth of their class") {
  Fixture f;
  // 40 Mbps of ASSURED on edge-a -> cloud; nothing measured elsewhere.
  f.controller.SetCapacity([](const std::string& from, const std::string& to,
                              codeco::common::v1::ServiceClass c) -> std::optional<int64_t> {
    if (from == "edge-a" && to == "cloud") {
      return c == codeco::common::v1::SERVICE_CLASS_ASSURED ? 40'000'000 : 80'000'000;
    }
    return std::nullopt;
  });
  VirtualLink big = Spec("orders");
  big.set_min_bandwidth_bps(30'000'000);
  REQUIRE(f.controller.Create(big, "").ok());
  VirtualLink second = Spec("payments");
  second.set_min_bandwidth_bps(15'000'000);
  absl::Status refused = f.controller.Create(second, "").status();
  REQUIRE(refused.code() == absl::StatusCode::kResourceExhausted);
  REQUIRE_THAT(std::string(refused.message()), Catch::Contains("edge-a->cloud") &&
                                                   Catch::Contains("10000000 bps") &&
                                                   Catch::Contains("shop/payments"));
  REQUIRE_FALSE(f.controller.Get(VirtualLinkId(second)).ok());  // nothing stored
  // Another class, or a link with nothing measured, is not limited by it.
  second.set_service_class(codeco::common::v1::SERVICE_CLASS_BESTEFFORT);
  REQUIRE(f.controller.Create(second, "").ok());
  REQUIRE(f.controller.Create(Spec("reverse", "cloud", "edge-a"), "").ok());
  REQUIRE(*f.controller.HeldBandwidth("edge-a", "cloud",
                                      codeco::common::v1::SERVICE_CLASS_ASSURED) == 30'000'000);
  // The topology says what the links hold; deleting gives it back.
  v1::NetworkTopology topology;
  auto* l = topology.add_links();
  l->set_id(LinkId("edge-a", "cloud"));
  for (auto c : {codeco::common::v1::SERVICE_CLASS_BESTEFFORT,
                 codeco::common::v1::SERVICE_CLASS_ASSURED}) {
    l->add_capabilities()->set_service_class(c);
  }
  REQUIRE(f.controller.AnnotateTopology(topology).ok());
  REQUIRE(topology.links(0).capabilities(0).reserved_bandwidth_bps() == 15'000'000);
  REQUIRE(topology.links(0).capabilities(1).reserved_bandwidth_bps() == 30'000'000);
  REQUIRE(f.controller.Delete(VirtualLinkId(big)).ok());
  second.set_service_class(codeco::common::v1::SERVICE_CLASS_ASSURED);
  second.set_channel("payments-2");
  REQUIRE(f.controller.Create(second, "").ok());
}

TEST_CASE("edge devices re-associate with another controller when theirs goes down") {
  Fixture f;
  auto a = f.controller.Create(Spec("orders"), "");
  VirtualLink other = Spec("sync", "edge-b", "edge-c");
  other.set_neighborhood_id("nb-other");
  auto b = f.controller.Create(other, "");
  REQUIRE(a->controller() == "idco-0");
  REQUIRE(b->controller() == "idco-1");  // one controller per neighborhood, balanced
  REQUIRE(f.controller.MarkControllerDown("idco-0").ok());
  auto moved = f.controller.Get(a->id());
  REQUIRE(moved->controller() == "idco-1");
  REQUIRE(moved->forwarding_rules_size() == 4);
  REQUIRE_THAT(moved->message(), Catch::Contains("re-associated from idco-0 to idco-1"));
  REQUIRE(f.controller.ControllerOf("nb-shop") == "idco-1");
  REQUIRE(f.controller.DeviceAssociations("nb-shop").at("ned-edge-a") == "idco-1");
  REQUIRE(f.controller.MarkControllerDown("idco-1").code() == absl::StatusCode::kUnavailable);
  REQUIRE(f.controller.Get(a->id())->phase() == v1::VIRTUAL_LINK_PHASE_FAILED);
  REQUIRE(f.controller.Create(Spec("new"), "").status().code() == absl::StatusCode::kUnavailable);
  REQUIRE(f.controller.MarkControllerUp("idco-0").ok());
  REQUIRE(f.controller.Create(Spec("new"), "")->controller() == "idco-0");
  REQUIRE(f.controller.MarkControllerDown("nope").code() == absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace codeco::netma
