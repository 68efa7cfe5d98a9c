// SWM's recommendation port against a real PDLC service on loopback: the
// watch stream fills the book, a refresh reaches the next placement, a custom
// profile blends the streamed ones, a PDLC answering for another cluster is
// ignored, and the advice of a PDLC that went away ages out. Last, the
// BREACH_AHEAD advisories of nodes a streamed message carries reach the
// adaptation loop's port.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"
#include "codeco/common/peer_channels.h"
#include "codeco/common/server.h"
#include "codeco/pdlc/v1/pdlc_service.grpc.pb.h"
#include "grpcpp/create_channel.h"
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
  // `peers`: the PDLCs its auctions ask for bids (plaintext, on loopback).
  explicit Pdlc(const std::string& cluster, const std::vector<const Pdlc*>& peers = {})
      : kv(NewInMemoryKvStore({"telemetry"})), clock(absl::FromUnixSeconds(1'800'000'000)) {
    store = *pdlc::NewKvTelemetryStore(*kv);
    advisor = std::make_unique<pdlc::Advisor>(*store, nullptr, pdlc::AdvisorOptions{.cluster = cluster});
    pdlc::AuctionOptions auction{.cluster = cluster};
    for (const Pdlc* p : peers) {
      auction.peers[p->name] =
          grpc::CreateChannel(p->server->address(), grpc::InsecureChannelCredentials());
    }
    name = cluster;
    service = std::make_unique<pdlc::PdlcServiceImpl>(
        *advisor, *store, [this] { return absl::ToUnixMillis(clock.Now()); }, std::move(auction));
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
  std::string name;
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

TEST_CASE("with the auction on a placement visits the neighborhood auction's winner first") {
  // Three clusters; a's PDLC runs the auctions and asks b and c for bids.
  Pdlc b("b"), c("c");
  Pdlc a("a", {&b, &c});
  a.Refresh({{30, true}});
  b.Refresh({{8, true}});   // the greenest
  c.Refresh({{20, true}});
  auto channels = *PeerChannels::Create(PeerChannelOptions{.insecure = true});
  SimulatedClock hub_clock(absl::FromUnixSeconds(1'800'000'000));
  PdlcRecommendations recs(*channels, hub_clock,
                           PdlcRecommendationsOptions{.auction = true,
                                                      .auction_cache = absl::Seconds(30)});
  REQUIRE(recs.SetEndpoint("a", a.server->address()).ok());
  Application web{.name = "web", .performance_profile = "greenness"};
  web.workloads.push_back(Workload{.name = "web-0", .requests = {.cpu_millis = 500}});
  auto got = recs.Get(web);
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  CHECK((*got)->advised_cluster == "b");
  CHECK(recs.auctions_run() == 1);
  // Every bid stands as its cluster's score for this application.
  REQUIRE((*got)->cluster_scores.size() == 3);
  CHECK((*got)->cluster_scores.at("b") > (*got)->cluster_scores.at("c"));
  CHECK((*got)->cluster_scores.at("c") > (*got)->cluster_scores.at("a"));
  // Reused while fresh, for the same demand.
  CHECK((*recs.Get(web))->advised_cluster == "b");
  CHECK(recs.auctions_run() == 1);

  // b's node goes not ready: the next auction (once the last one aged out)
  // goes to the next greenest.
  b.Refresh({{8, false}});
  hub_clock.Advance(absl::Seconds(31));
  CHECK((*recs.Get(web))->advised_cluster == "c");
  CHECK(recs.auctions_run() == 2);

  // Too big for every node: no winner, the scores alone order the clusters.
  Application huge{.name = "huge", .performance_profile = "greenness"};
  huge.workloads.push_back(Workload{.name = "huge-0", .requests = {.cpu_millis = 64000}});
  got = recs.Get(huge);
  REQUIRE(got.ok());
  CHECK((!got->has_value() || (*got)->advised_cluster.empty()));

  // A custom application runs no auction.
  const Application custom{.name = "batch", .performance_profile = "custom",
                           .custom_profile_weights = {{"greenness", 1}}};
  const int before = recs.auctions_run();
  REQUIRE(recs.Get(custom).ok());
  CHECK(recs.auctions_run() == before);
}

TEST_CASE("RunAuction answers every bid and names the missing and bad requests name the field") {
  Pdlc b("b");
  Pdlc a("a", {&b});
  a.Refresh({{30, true}});
  b.Refresh({{8, true}});
  auto stub = pdlc::v1::PdlcService::NewStub(
      grpc::CreateChannel(a.server->address(), grpc::InsecureChannelCredentials()));
  auto run = [&](const pdlc::v1::RunAuctionRequest& request, pdlc::v1::RunAuctionResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    return stub->RunAuction(&context, request, response);
  };
  pdlc::v1::RunAuctionRequest request;
  request.set_neighborhood_id("nb1");
  request.mutable_workload()->set_name("shop/web");
  request.mutable_workload()->set_cpu_millicores(500);
  request.mutable_workload()->set_performance_profile(common::v1::PERFORMANCE_PROFILE_GREENNESS);
  pdlc::v1::RunAuctionResponse response;
  REQUIRE(run(request, &response).ok());
  CHECK(response.winner_cluster() == "b");
  REQUIRE(response.bids_size() == 2);
  CHECK(response.bids(0).bidder_cluster() == "b");
  CHECK(response.bids(0).auction_id() == response.auction_id());
  CHECK(response.bids(0).workload() == "shop/web");
  CHECK(response.bids(0).score() > response.bids(1).score());
  CHECK(response.missing().empty());

  // b goes away: a bids alone and names b as missing.
  b.server->Shutdown(absl::ZeroDuration());
  request.set_bid_timeout_ms(500);
  REQUIRE(run(request, &response).ok());
  CHECK(response.winner_cluster() == "a");
  REQUIRE(response.missing_size() == 1);
  CHECK(response.missing(0).cluster() == "b");

  struct Bad {
    std::function<void(pdlc::v1::RunAuctionRequest&)> change;
    std::string field;
  };
  for (const Bad& bad : std::vector<Bad>{
           {[](auto& r) { r.clear_neighborhood_id(); }, "neighborhood_id"},
           {[](auto& r) { r.mutable_workload()->clear_name(); }, "workload.name"},
           {[](auto& r) { r.mutable_workload()->set_cpu_millicores(-1); }, "workload.cpu_millicores"},
           {[](auto& r) { r.mutable_workload()->set_memory_bytes(-1); }, "workload.memory_bytes"},
           {[](auto& r) {
              r.mutable_workload()->set_performance_profile(common::v1::PERFORMANCE_PROFILE_CUSTOM);
            },
            "workload.performance_profile"},
           {[](auto& r) { r.set_bid_timeout_ms(60'000); }, "bid_timeout_ms"},
           {[](auto& r) { r.add_bidders("nobody"); }, "bidders[0]"},
           {[](auto& r) {
              r.add_bidders("b");
              r.add_bidders("b");
            },
            "bidders[1]"},
       }) {
    pdlc::v1::RunAuctionRequest changed = request;
    bad.change(changed);
    grpc::Status status = run(changed, &response);
    INFO(bad.field << ": " << status.error_message());
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(), Catch::StartsWith(bad.field));
  }
}

}  // namespace
}  // namespace codeco::swm

namespace codeco::swm {
namespace {

namespace pdlc_pb = codeco::pdlc::v1;

// A PDLC that streams one recommendation of cluster "edge-1" with the
// advisories in `advisories`, then holds the stream open.
class AdvisingPdlc final : public pdlc_pb::PdlcService::Service {
 public:
  grpc::Status WatchRecommendations(
      grpc::ServerContext* context, const pdlc_pb::WatchRecommendationsRequest*,
      grpc::ServerWriter<pdlc_pb::WatchRecommendationsResponse>* writer) override {
    pdlc_pb::WatchRecommendationsResponse message;
    pdlc_pb::Recommendation* rec = message.add_recommendations();
    rec->set_cluster("edge-1");
    rec->add_node_scores()->set_node("n1");
    for (const pdlc_pb::Advisory& a : advisories) *rec->add_advisories() = a;
    writer->Write(message);
    while (!context->IsCancelled()) absl::SleepFor(absl::Milliseconds(20));
    return grpc::Status::OK;
  }
  std::vector<pdlc_pb::Advisory> advisories;
};

pdlc_pb::Advisory Advice(pdlc_pb::AdvisoryType type, pdlc_pb::SubjectKind kind,
                         const std::string& subject) {
  pdlc_pb::Advisory a;
  a.set_type(type);
  a.set_subject_kind(kind);
  a.set_subject(subject);
  a.set_message("cpu of node " + subject + " is forecast at 91 %");
  return a;
}

TEST_CASE("the hub's PDLC port reports the nodes its PDLCs advise a breach ahead for") {
  AdvisingPdlc pdlc;
  pdlc.advisories = {
      Advice(pdlc_pb::ADVISORY_TYPE_BREACH_AHEAD, pdlc_pb::SUBJECT_KIND_NODE, "n1"),
      Advice(pdlc_pb::ADVISORY_TYPE_BREACH_AHEAD, pdlc_pb::SUBJECT_KIND_POD, "web-0"),
      Advice(pdlc_pb::ADVISORY_TYPE_NODE_UNSTABLE, pdlc_pb::SUBJECT_KIND_NODE, "n2"),
      Advice(pdlc_pb::ADVISORY_TYPE_BREACH_AHEAD, pdlc_pb::SUBJECT_KIND_NODE, "n3")};
  GrpcServerOptions options;
  options.service = "pdlc";
  options.insecure = true;
  options.services = {&pdlc};
  std::unique_ptr<GrpcServer> server = *GrpcServer::Start(options);
  auto channels = *PeerChannels::Create(PeerChannelOptions{.insecure = true});
  SimulatedClock hub_clock(absl::FromUnixSeconds(1'800'000'000));
  PdlcRecommendations recs(*channels, hub_clock,
                           PdlcRecommendationsOptions{.max_age = absl::Minutes(3)});
  REQUIRE(recs.SetEndpoint("edge-1", server->address()).ok());
  REQUIRE(Eventually([&] { return recs.BreachesAhead().size() == 2; }));
  std::vector<BreachAdvisory> breaches = recs.BreachesAhead();
  CHECK(breaches[0].cluster == "edge-1");
  CHECK(breaches[0].node == "n1");
  CHECK(breaches[0].message == "cpu of node n1 is forecast at 91 %");
  CHECK(breaches[1].node == "n3");
  // A PDLC heard from no more than max_age ago only.
  hub_clock.Advance(absl::Minutes(3) + absl::Seconds(1));
  CHECK(recs.BreachesAhead().empty());
  server->Shutdown(absl::ZeroDuration());
}

}  // namespace
}  // namespace codeco::swm
