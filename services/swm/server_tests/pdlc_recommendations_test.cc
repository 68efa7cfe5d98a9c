// SWM's recommendation port against a real PDLC service on loopback: the
// watch stream fills the book, a refresh reaches the next placement, a custom
// profile blends the streamed ones, a PDLC answering for another cluster is
// ignored, and the advice of a PDLC that went away ages out.
#include <catch2/catch.hpp>

#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"
#include "codeco/common/peer_channels.h"
#include "codeco/common/server.h"
#include "pdlc/server/pdlc_service.h"
#include "pdlc/store/kv_telemetry_store.h"
#include "swm/server/pdlc_recommendations.h"

namespace codeco::swm {
namespace {

// Waits (real time, bounded) until `done` holds.
template <typename F>
bool Eventually(F done) {
  const absl::Time until = absl::Now() + absl::Seconds(20);
  while (!done()) {
    if (absl::Now() > until) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

// One cluster's PDLC: the real advisor and service over an in-memory store.
struct Pdlc {
  explicit Pdlc(const std::string& cluster)
      : kv(NewInMemoryKvStore({"telemetry"})), clock(absl::FromUnixSeconds(1'800'000'000)) {
    store = *pdlc::NewKvTelemetryStore(*kv);
    advisor = std::make_unique<pdlc::Advisor>(*store, nullptr, pdlc::AdvisorOptions{.cluster = cluster});
    service = std::make_unique<pdlc::PdlcServiceImpl>(*advisor, *store,
                                                      [this] { return absl::ToUnixMillis(clock.Now()); });
    GrpcServerOptions options;
    options.service = "pdlc";
    options.insecure = true;
    options.services = {service.get()};
    server = *GrpcServer::Start(options);
  }
  // Refreshes the advisor with nodes of these watts per busy core, ready or not.
  void Refresh(std::vector<std::pair<double, bool>> nodes) {
    std::vector<pdlc::NodeContext> inventory;
    for (size_t i = 0; i < nodes.size(); ++i) {
      pdlc::NodeContext c;
      c.node = "n" + std::to_string(i + 1);
      c.cpu_capacity_millicores = 4000;
      c.watts_per_core = nodes[i].first;
      c.carbon_g_per_kwh = 100;
      c.ready = nodes[i].second;
      inventory.push_back(c);
    }
    REQUIRE(advisor->Refresh(inventory, absl::ToUnixMillis(clock.Now())).ok());
  }
  std::unique_ptr<KvStore> kv;
  SimulatedClock clock;
  std::unique_ptr<pdlc::TelemetryStore> store;
  std::unique_ptr<pdlc::Advisor> advisor;
  std::unique_ptr<pdlc::PdlcServiceImpl> service;
  std::unique_ptr<GrpcServer> server;
};

TEST_CASE("the hub's PDLC port streams refreshes into placements and forgets silent PDLCs") {
  Pdlc edge("edge-1");
  edge.Refresh({{10, true}, {30, true}});
  auto channels = *PeerChannels::Create(PeerChannelOptions{.insecure = true});
  SimulatedClock hub_clock(absl::FromUnixSeconds(1'800'000'000));
  PdlcRecommendations recs(*channels, hub_clock,
                           PdlcRecommendationsOptions{.max_age = absl::Minutes(3), .call_cache = absl::Seconds(10)});
  REQUIRE(recs.SetEndpoint("edge-1", edge.server->address()).ok());
  REQUIRE(Eventually([&] { return recs.Streaming("edge-1"); }));

  const Application green{.name = "web", .performance_profile = "greenness"};
  auto got = recs.Get(green);
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  // Greenness: energy .45, carbon .35, no usage known (headroom left out).
  const double carbon = 100.0 * 300 / 400;
  const double n1 = (0.45 * 50 + 0.35 * carbon) / 0.8, n2 = (0.45 * 25 + 0.35 * carbon) / 0.8;
  CHECK((*got)->node_scores.at({"edge-1", "n1"}) == Approx(n1));
  CHECK((*got)->node_scores.at({"edge-1", "n2"}) == Approx(n2));
  CHECK((*got)->cluster_scores.at("edge-1") == Approx((n1 + n2) / 2));

  // The next refresh reaches the next placement: n1 is not ready any more.
  edge.Refresh({{10, false}, {30, true}});
  REQUIRE(Eventually([&] { return (*recs.Get(green))->node_scores.at({"edge-1", "n1"}) == 0; }));
  CHECK((*recs.Get(green))->cluster_scores.at("edge-1") == Approx(n2 / 2));

  // A custom profile blends the built-in profiles' streamed scores by its weights.
  const Application custom{.name = "batch", .performance_profile = "custom",
                           .custom_profile_weights = {{"greenness", 1}, {"latency", 1}}};
  REQUIRE(Eventually([&] { return recs.Get(custom)->has_value(); }));
  const Application latency{.name = "api", .performance_profile = "latency"};
  const double n2_latency = (*recs.Get(latency))->node_scores.at({"edge-1", "n2"});
  CHECK((*recs.Get(custom))->node_scores.at({"edge-1", "n2"}) == Approx((n2 + n2_latency) / 2));

  // An endpoint whose PDLC answers for another cluster adds nothing.
  REQUIRE(recs.SetEndpoint("core-1", edge.server->address()).ok());
  CHECK((*recs.Get(latency))->cluster_scores.count("core-1") == 0);
  CHECK((*recs.Get(green))->cluster_scores.count("core-1") == 0);

  // Bad endpoints are refused without naming a field (the caller does).
  CHECK(absl::IsInvalidArgument(recs.SetEndpoint("edge-2", "")));
  CHECK(absl::IsInvalidArgument(recs.SetEndpoint("", edge.server->address())));

  // The PDLC goes away: its last scores steer placements until max_age.
  edge.server->Shutdown(absl::ZeroDuration());
  REQUIRE(Eventually([&] { return !recs.Streaming("edge-1"); }));
  CHECK((*recs.Get(green))->cluster_scores.count("edge-1") == 1);
  hub_clock.Advance(absl::Minutes(3));
  got = recs.Get(green);
  REQUIRE(got.ok());  // never an error: no advice instead
  CHECK_FALSE(got->has_value());
}

}  // namespace
}  // namespace codeco::swm
