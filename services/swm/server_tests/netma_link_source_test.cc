// NetmaLinkSource against a real NetMA server on loopback (its probes
// scripted): measured links win over configured ones, a failed link is no
// link, and links NetMA never measured come from the fallback.
#include <catch2/catch.hpp>

#include <map>

#include "codeco/common/kv_store.h"
#include "codeco/common/server.h"
#include "grpcpp/create_channel.h"
#include "netma/server/netma_service.h"
#include "netma/store/kv_virtual_link_repository.h"
#include "netma/tests/test_util.h"
#include "swm/server/netma_link_source.h"

namespace codeco::swm {
namespace {

using netma::testing::ScriptedProber;

// What a scenario configured: every link 1 ms, 1 Gbit/s.
class ConfiguredLinks final : public LinkSource {
 public:
  absl::StatusOr<std::optional<Link>> GetLink(const std::string& from,
                                              const std::string& to) override {
    ++calls;
    return Link{.from = from,
                .to = to,
                .latency_ns = 1'000'000,
                .free_bandwidth_bps = {1'000'000'000, 1'000'000'000}};
  }
  int calls = 0;
};

TEST_CASE("NetmaLinkSource plans with measured links and falls back for unmeasured ones") {
  SimulatedClock netma_clock(absl::FromUnixSeconds(1'700'000'000));
  auto prober = std::make_unique<ScriptedProber>(&netma_clock);
  prober->Set("b", {.rtt = absl::Milliseconds(10), .bps = 200'000'000});
  prober->Set("c", {.down = true});
  auto store = NewInMemoryKvStore({netma::kVirtualLinksColumnFamily});
  netma::NetmaServerOptions options;
  options.cluster = "a";
  options.role = Role::kManagedCluster;
  options.peers = {{"b", "127.0.0.1:1"}, {"c", "127.0.0.1:2"}};
  options.monitor.probe.interval = absl::Seconds(5);
  options.monitor.probe.bulk_every = 1;
  options.alto_listen = "";
  options.run_loop = false;
  options.channels.insecure = true;
  auto created = netma::NetmaServer::Create(options, *store, netma_clock, nullptr,
                                            std::move(prober), nullptr);
  REQUIRE(created.ok());
  std::unique_ptr<netma::NetmaServer> netma = std::move(*created);
  GrpcServerOptions server_options;
  server_options.service = "netma";
  server_options.insecure = true;
  server_options.services = {netma.get()};
  auto server = GrpcServer::Start(server_options);
  REQUIRE(server.ok());
  // Enough rounds for c to count as down (three consecutive failures).
  for (int i = 0; i < 5; ++i) {
    netma_clock.Advance(options.monitor.probe.interval);
    netma->ProbeRound();
  }

  auto fallback = std::make_shared<ConfiguredLinks>();
  SimulatedClock clock(absl::FromUnixSeconds(1'700'000'000));
  NetmaLinkSource links(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()), fallback,
      clock);

  absl::StatusOr<std::optional<Link>> ab = links.GetLink("a", "b");
  REQUIRE(ab.ok());
  REQUIRE(ab->has_value());
  CHECK((*ab)->latency_ns == 5'000'000);  // one way: half the 10 ms RTT
  CHECK((*ab)->free_bandwidth_bps[static_cast<int>(ServiceClass::kBestEffort)] > 0);
  CHECK((*ab)->free_bandwidth_bps[static_cast<int>(ServiceClass::kAssured)] <
        (*ab)->free_bandwidth_bps[static_cast<int>(ServiceClass::kBestEffort)]);

  absl::StatusOr<std::optional<Link>> ac = links.GetLink("a", "c");
  REQUIRE(ac.ok());
  CHECK_FALSE(ac->has_value());  // measured as down: the scheduler must not use it
  CHECK(fallback->calls == 0);

  absl::StatusOr<std::optional<Link>> bd = links.GetLink("b", "d");  // never measured
  REQUIRE(bd.ok());
  REQUIRE(bd->has_value());
  CHECK((*bd)->latency_ns == 1'000'000);
  CHECK(fallback->calls == 1);

  // ListLinks answers every pair in one read: a->b measured, a->c down (no
  // link), the pairs NetMA never measured from the fallback's one ListLinks.
  clock.Advance(absl::Seconds(2));
  const int before = fallback->calls;
  absl::StatusOr<std::vector<Link>> all = links.ListLinks({"a", "b", "c"});
  REQUIRE(all.ok());
  std::map<std::pair<std::string, std::string>, int64_t> latency;
  for (const Link& l : *all) latency[{l.from, l.to}] = l.latency_ns;
  CHECK(latency.size() == 5);
  CHECK(latency[{"a", "b"}] == 5'000'000);
  CHECK(latency.count({"a", "c"}) == 0);
  CHECK(latency[{"c", "b"}] == 1'000'000);
  CHECK(fallback->calls - before == 6);  // the double's ListLinks: GetLink per ordered pair
  // Without a fallback, an unmeasured pair is no link.
  NetmaLinkSource measured_only(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()), nullptr,
      clock);
  absl::StatusOr<std::vector<Link>> measured = measured_only.ListLinks({"a", "b", "c"});
  REQUIRE(measured.ok());
  REQUIRE(measured->size() == 1);
  CHECK((*measured)[0].from == "a");
  CHECK((*measured)[0].to == "b");

  // Without NetMA (stopped), every link comes from the fallback.
  (*server)->Shutdown(absl::ZeroDuration());
  clock.Advance(absl::Seconds(2));
  absl::StatusOr<std::optional<Link>> again = links.GetLink("a", "b");
  REQUIRE(again.ok());
  REQUIRE(again->has_value());
  CHECK((*again)->latency_ns == 1'000'000);
}

}  // namespace
}  // namespace codeco::swm
