// Neighborhood summaries and the network view: build, merge (newest wins per
// link and origin), refuse non-members, validate before merging, age out and
// mark stale; topology revisions and cost maps over local plus remote links.
#include "netma/core/federation.h"

#include <catch2/catch.hpp>

#include "google/protobuf/util/time_util.h"
#include "netma/core/view.h"
#include "netma/tests/test_util.h"

namespace codeco::netma {
namespace {

using codeco::netma::v1::LinkMetrics;
using codeco::netma::v1::PeerSummary;
using google::protobuf::util::TimeUtil;

LinkMetrics Remote(const std::string& from, const std::string& to, absl::Time at, int64_t rtt_ns) {
  LinkMetrics l;
  l.set_link_id(LinkId(from, to));
  l.set_source_cluster(from);
  l.set_target_cluster(to);
  l.set_rtt_ema_ns(rtt_ns);
  l.set_rtt_p50_ns(rtt_ns);
  l.set_rtt_p99_ns(rtt_ns);
  l.set_throughput_bps(50'000'000);
  l.set_sample_count(10);
  *l.mutable_measure_time() = TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(at));
  return l;
}

PeerSummary Summary(const std::string& from, const std::string& nb,
                    std::vector<LinkMetrics> links) {
  PeerSummary s;
  s.set_cluster(from);
  s.set_neighborhood_id(nb);
  for (auto& l : links) *s.add_links() = l;
  return s;
}

struct Fixture {
  Fixture() : federation("a", FederationOptions{absl::Seconds(30), absl::Minutes(5)}, clock) {
    REQUIRE(federation.SetNeighborhood("nb1", {"a", "b", "c"}).ok());
    REQUIRE(federation.SetNeighborhood("nb2", {"a", "d"}).ok());
  }
  SimulatedClock clock{absl::FromUnixSeconds(2'000'000)};
  Federation federation;
};

TEST_CASE("a member's summary is merged and the newest wins per link and origin") {
  Fixture f;
  absl::Time t = f.clock.Now();
  auto merged = f.federation.Merge("b", Summary("b", "nb1", {Remote("b", "c", t, 8'000'000)}));
  REQUIRE(merged.ok());
  REQUIRE(*merged == 1);
  // An older measurement of the same link does not replace the newer one.
  merged = f.federation.Merge(
      "b", Summary("b", "nb1", {Remote("b", "c", t - absl::Seconds(5), 99'000'000)}));
  REQUIRE(*merged == 0);
  auto links = f.federation.RemoteLinks("nb1");
  REQUIRE(links.size() == 1);
  REQUIRE(links[0].rtt_ema_ns() == 8'000'000);
  f.clock.Advance(absl::Seconds(1));
  merged =
      f.federation.Merge("b", Summary("b", "nb1", {Remote("b", "c", f.clock.Now(), 9'000'000)}));
  REQUIRE(*merged == 1);
  REQUIRE(f.federation.RemoteLinks("nb1")[0].rtt_ema_ns() == 9'000'000);
  REQUIRE(f.federation.RemoteLinks("nb2").empty());  // scoped to its neighborhood
}

TEST_CASE("summaries from non-members or for someone else are refused") {
  Fixture f;
  absl::Time t = f.clock.Now();
  auto s = f.federation.Merge("d", Summary("d", "nb1", {Remote("d", "a", t, 1)}));
  REQUIRE(s.status().code() == absl::StatusCode::kPermissionDenied);
  s = f.federation.Merge("b", Summary("c", "nb1", {Remote("c", "a", t, 1)}));
  REQUIRE(s.status().code() == absl::StatusCode::kPermissionDenied);
  s = f.federation.Merge("b", Summary("b", "unknown", {}));
  REQUIRE(s.status().code() == absl::StatusCode::kPermissionDenied);
  REQUIRE(f.federation.RemoteLinks("").empty());
}

TEST_CASE("a malformed summary is refused whole with field paths") {
  Fixture f;
  absl::Time t = f.clock.Now();
  LinkMetrics good = Remote("b", "c", t, 1'000);
  LinkMetrics bad_loss = Remote("b", "a", t, 1'000);
  bad_loss.set_loss_ratio(1.5);
  LinkMetrics outside = Remote("b", "d", t, 1'000);
  LinkMetrics future = Remote("b", "a", t + absl::Hours(1), 1'000);
  future.set_link_id("b->a");
  auto s = f.federation.Merge("b", Summary("b", "nb1", {good, bad_loss, outside}));
  REQUIRE(s.status().code() == absl::StatusCode::kInvalidArgument);
  std::string message(s.status().message());
  REQUIRE_THAT(message, Catch::Contains("summary.links[1].loss_ratio"));
  REQUIRE_THAT(message, Catch::Contains("summary.links[2].target_cluster"));
  REQUIRE(f.federation.RemoteLinks("").empty());  // nothing written, not even the good link
  s = f.federation.Merge("b", Summary("b", "nb1", {future}));
  REQUIRE_THAT(std::string(s.status().message()), Catch::Contains("summary.links[0].measure_time"));
  s = f.federation.Merge("b", Summary("b", "nb1", {good, good}));
  REQUIRE_THAT(std::string(s.status().message()), Catch::Contains("summary.links[1].link_id"));
}

TEST_CASE("remote entries become stale and then expire") {
  Fixture f;
  REQUIRE(f.federation.Merge("c", Summary("c", "nb1", {Remote("c", "b", f.clock.Now(), 5)})).ok());
  REQUIRE_FALSE(f.federation.RemoteLinks("nb1")[0].stale());
  f.clock.Advance(absl::Seconds(31));
  auto links = f.federation.RemoteLinks("nb1");
  REQUIRE(links[0].stale());
  REQUIRE(links[0].age_ns() == absl::ToInt64Nanoseconds(absl::Seconds(31)));
  f.clock.Advance(absl::Minutes(5));
  REQUIRE(f.federation.RemoteLinks("nb1").empty());
  REQUIRE(f.federation.Expire() == 1);
}

TEST_CASE("a summary carries only the local links to members") {
  Fixture f;
  std::vector<LinkMetrics> local = {Remote("a", "b", f.clock.Now(), 1),
                                    Remote("a", "d", f.clock.Now(), 2)};
  auto s = f.federation.BuildSummary("nb1", local);
  REQUIRE(s.ok());
  REQUIRE(s->cluster() == "a");
  REQUIRE(s->links_size() == 1);
  REQUIRE(s->links(0).target_cluster() == "b");
  REQUIRE(s->revision() == 1);
  REQUIRE(f.federation.BuildSummary("nb1", local)->revision() == 2);
  REQUIRE(f.federation.BuildSummary("nope", local).status().code() == absl::StatusCode::kNotFound);
  REQUIRE(f.federation.SetNeighborhood("nb3", {"b", "c"}).ok());
  REQUIRE(f.federation.BuildSummary("nb3", local).status().code() ==
          absl::StatusCode::kFailedPrecondition);
  REQUIRE(f.federation.Peers() == std::set<std::string>{"b", "c", "d"});
}

TEST_CASE("the view joins local and remote links into topology and cost maps") {
  Fixture f;
  testing::ScriptedProber prober(&f.clock);
  MonitorOptions options;
  options.probe.bulk_every = 1;
  auto monitor = NetworkMonitor::Create("a", options, f.clock);
  REQUIRE(monitor.ok());
  (*monitor)->SetPeers({{"b", "127.0.2.1:7"}, {"c", "127.0.3.1:7"}});
  prober.Set("b", {.rtt = absl::Milliseconds(10), .bps = 40'000'000});
  prober.Set("c", {.rtt = absl::Milliseconds(30), .bps = 20'000'000});
  for (int i = 0; i < 5; ++i) {
    (*monitor)->RunDueProbes(prober);
    f.clock.Advance(absl::Seconds(1));
  }
  NetworkView view(**monitor, f.federation, ViewOptions{}, f.clock);
  view.SetEndpoints("a", {"127.0.1.1"});
  view.SetEndpoints("b", {"127.0.2.1"});
  REQUIRE(f.federation.Merge("b", Summary("b", "nb1", {Remote("b", "c", f.clock.Now(), 4'000'000)}))
              .ok());
  // c reports its own link to b.
  REQUIRE(f.federation.Merge("c", Summary("c", "nb1", {Remote("c", "b", f.clock.Now(), 6'000'000)}))
              .ok());

  auto topology = view.Topology("nb1");
  REQUIRE(topology.ok());
  REQUIRE(topology->nodes_size() == 3);
  REQUIRE(topology->links_size() == 4);  // a->b, a->c, b->c, c->b
  const auto& ab = topology->links(0);
  REQUIRE(ab.id() == "a->b");
  REQUIRE(ab.capabilities_size() == 2);
  REQUIRE(ab.capabilities(0).service_class() == codeco::common::v1::SERVICE_CLASS_BESTEFFORT);
  REQUIRE(ab.capabilities(0).latency_ns() == 5'000'000);
  REQUIRE(ab.capabilities(0).bandwidth_bps() == 40'000'000);
  REQUIRE(ab.capabilities(1).bandwidth_bps() == 20'000'000);  // ASSURED share 0.5
  int64_t revision = topology->revision();
  REQUIRE(view.Topology("nb1")->revision() == revision);  // nothing changed
  prober.Set("b", {.rtt = absl::Milliseconds(50), .bps = 40'000'000});
  f.clock.Advance(absl::Seconds(5));
  (*monitor)->RunDueProbes(prober);
  REQUIRE(view.Topology("nb1")->revision() == revision + 1);
  REQUIRE(view.Topology("nope").status().code() == absl::StatusCode::kNotFound);

  v1::GetCostMapRequest request;
  request.set_metric(v1::COST_METRIC_DELAY);
  request.set_neighborhood_id("nb1");
  auto cost_map = view.CostMap(request);
  REQUIRE(cost_map.ok());
  REQUIRE(cost_map->entries_size() == 4);
  auto network_map = view.NetworkMap("nb1");
  REQUIRE(cost_map->dependent_vtag() == network_map->vtag());
  REQUIRE(network_map->pids_size() == 3);
  // Scoping to nb2 leaves only a and d, with no measured link between them.
  request.set_neighborhood_id("nb2");
  REQUIRE(view.CostMap(request)->entries_size() == 0);
  // Endpoints are part of the network map's content.
  std::string vtag = network_map->vtag();
  view.SetEndpoints("c", {"127.0.3.1"});
  REQUIRE(view.NetworkMap("nb1")->vtag() != vtag);
}

TEST_CASE("a failed link leaves the cost map and loses its capabilities") {
  Fixture f;
  testing::ScriptedProber prober(&f.clock);
  MonitorOptions options;
  options.link.failure_threshold = 2;
  auto monitor = NetworkMonitor::Create("a", options, f.clock);
  (*monitor)->SetPeers({{"b", "127.0.2.1:7"}});
  prober.Set("b", {});
  (*monitor)->RunDueProbes(prober);
  NetworkView view(**monitor, f.federation, ViewOptions{}, f.clock);
  v1::GetCostMapRequest request;
  request.set_metric(v1::COST_METRIC_DELAY);
  REQUIRE(view.CostMap(request)->entries_size() == 1);
  prober.Set("b", {.down = true});
  for (int i = 0; i < 2; ++i) {
    f.clock.Advance(options.probe.interval);
    (*monitor)->RunDueProbes(prober);
  }
  REQUIRE(view.CostMap(request)->entries_size() == 0);
  auto topology = view.Topology("");
  REQUIRE(topology->links_size() == 1);
  REQUIRE(topology->links(0).failed());
  REQUIRE(topology->links(0).capabilities_size() == 0);
}

}  // namespace
}  // namespace codeco::netma

namespace codeco::netma {
namespace {

TEST_CASE("a degraded link shows in the delay cost map within three probe intervals") {
  SimulatedClock clock(absl::FromUnixSeconds(4'000'000));
  testing::ScriptedProber prober(&clock);
  MonitorOptions options;  // defaults: 5 s interval, path RTT over the last 5 probes
  auto monitor = NetworkMonitor::Create("a", options, clock);
  REQUIRE(monitor.ok());
  (*monitor)->SetPeers({{"b", "127.0.2.1:7"}});
  Federation federation("a", FederationOptions{}, clock);
  NetworkView view(**monitor, federation, ViewOptions{}, clock);
  v1::GetCostMapRequest request;
  request.set_metric(v1::COST_METRIC_DELAY);
  auto probe_for = [&](int intervals) {
    for (int i = 0; i < intervals; ++i) {
      (*monitor)->RunDueProbes(prober);
      clock.Advance(options.probe.interval);
    }
  };
  prober.Set("b", {.rtt = absl::Milliseconds(10)});
  probe_for(10);
  double before = view.CostMap(request)->entries(0).cost();
  REQUIRE(before == Approx(5e6));
  prober.Set("b", {.rtt = absl::Milliseconds(50)});
  probe_for(2);
  // Two high probes of five: still the old delay (a short spike is ignored).
  REQUIRE(view.CostMap(request)->entries(0).cost() == Approx(5e6));
  probe_for(1);
  // The third makes them the majority: the whole step, 5 ms -> 25 ms one way.
  double after = view.CostMap(request)->entries(0).cost();
  REQUIRE(after == Approx(25e6));
  // The p99 in ListLinks reacts at once.
  REQUIRE((*monitor)->Links()[0].rtt_p99_ns() == 50'000'000);
}

}  // namespace
}  // namespace codeco::netma
