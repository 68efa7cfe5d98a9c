// ProbeScheduler and NetworkMonitor under a SimulatedClock: pacing, bulk
// samples, link metrics, staleness and the NSM node attributes.
#include "netma/core/monitor.h"

#include <catch2/catch.hpp>

#include "netma/tests/test_util.h"

namespace codeco::netma {
namespace {

using testing::ScriptedProber;

TEST_CASE("scheduler spreads peers over the interval and probes each once per interval") {
  ProbeSchedulerOptions options;
  options.interval = absl::Seconds(4);
  options.bulk_every = 2;
  options.bulk_bytes = 1000;
  ProbeScheduler scheduler(options);
  absl::Time t0 = absl::UnixEpoch();
  scheduler.SetPeers({{"d", "x"}, {"b", "x"}, {"c", "x"}, {"a", "x"}}, t0);
  std::vector<ProbeTask> due = scheduler.TakeDue(t0);
  REQUIRE(due.size() == 1);
  REQUIRE(due[0].peer.cluster == "a");
  REQUIRE(due[0].bulk_bytes == 1000);  // first probe of a peer carries a bulk sample
  REQUIRE(scheduler.NextDue() == t0 + absl::Seconds(1));
  due = scheduler.TakeDue(t0 + absl::Seconds(3));
  REQUIRE(due.size() == 3);
  REQUIRE(due[0].peer.cluster == "b");
  REQUIRE(due[2].peer.cluster == "d");
  due = scheduler.TakeDue(t0 + absl::Seconds(4));
  REQUIRE(due.size() == 1);
  REQUIRE(due[0].peer.cluster == "a");
  REQUIRE(due[0].bulk_bytes == 0);  // second probe: RTT only
  REQUIRE(scheduler.TakeDue(t0 + absl::Seconds(4)).empty());
  // A long stall does not cause a burst: each peer is probed once, then on schedule.
  due = scheduler.TakeDue(t0 + absl::Seconds(100));
  REQUIRE(due.size() == 4);
  REQUIRE(scheduler.NextDue() > t0 + absl::Seconds(100));
  // Keeping peers keeps their schedule; removing drops them.
  absl::Time next = scheduler.NextDue();
  scheduler.SetPeers({{"a", "y"}}, t0 + absl::Seconds(100));
  REQUIRE(scheduler.peers().size() == 1);
  REQUIRE(scheduler.peers()[0].address == "y");
  REQUIRE(scheduler.NextDue() >= next);
}

TEST_CASE("scheduler options are validated with field names") {
  ProbeSchedulerOptions options;
  options.interval = absl::ZeroDuration();
  options.bulk_bytes = 10;
  options.max_bulk_bytes = 5;
  absl::Status status = ValidateProbeSchedulerOptions(options);
  REQUIRE(status.code() == absl::StatusCode::kInvalidArgument);
  REQUIRE_THAT(std::string(status.message()), Catch::Contains("interval"));
  REQUIRE_THAT(std::string(status.message()), Catch::Contains("bulk_bytes"));
}

struct Fixture {
  Fixture() : prober(&clock) {
    options.probe.interval = absl::Seconds(5);
    options.probe.bulk_every = 1;
    options.probe.bulk_bytes = 125'000;  // 1 Mbit
    options.probe.timeout = absl::Seconds(1);
    options.link.failure_threshold = 3;
    options.stale_after = absl::Seconds(15);
    auto created = NetworkMonitor::Create("a", options, clock);
    REQUIRE(created.ok());
    monitor = std::move(*created);
    monitor->SetPeers({{"a", "127.0.1.1:1"}, {"b", "127.0.2.1:1"}, {"c", "127.0.3.1:1"}});
  }
  // Runs every probe due in the next `d`, one second at a time.
  void Run(absl::Duration d) {
    absl::Time end = clock.Now() + d;
    while (clock.Now() < end) {
      monitor->RunDueProbes(prober);
      clock.Advance(absl::Seconds(1));
    }
  }
  SimulatedClock clock{absl::FromUnixSeconds(1'000'000)};
  ScriptedProber prober;
  MonitorOptions options;
  std::unique_ptr<NetworkMonitor> monitor;
};

TEST_CASE("the path RTT leaves out the measured local call overhead") {
  Fixture f;
  f.prober.Set("b", {.rtt = absl::Milliseconds(20), .bps = 10'000'000});
  f.prober.Set("c", {.rtt = absl::Microseconds(300), .bps = 10'000'000});
  f.Run(absl::Seconds(10));
  auto links = f.monitor->Links();
  REQUIRE(links[0].path_rtt_ns() == 20'000'000);  // nothing measured yet: nothing subtracted
  for (int us : {400, 500, 600}) f.monitor->RecordLocalOverhead(absl::Microseconds(us));
  REQUIRE(f.monitor->LocalOverheadNs() == 500'000);
  links = f.monitor->Links();
  REQUIRE(links[0].path_rtt_ns() == 19'500'000);
  REQUIRE(links[0].local_overhead_ns() == 500'000);
  REQUIRE(links[0].rtt_ema_ns() == 20'000'000);  // the raw figures stay raw
  REQUIRE(links[1].path_rtt_ns() == 0);          // never below zero
}

TEST_CASE("the monitor measures every peer but itself") {
  Fixture f;
  f.prober.Set("b", {.rtt = absl::Milliseconds(20), .bps = 10'000'000});
  f.prober.Set("c", {.rtt = absl::Milliseconds(40), .bps = 100'000'000});
  f.Run(absl::Seconds(30));
  auto links = f.monitor->Links();
  REQUIRE(links.size() == 2);
  REQUIRE(links[0].link_id() == "a->b");
  REQUIRE(links[0].rtt_ema_ns() == 20'000'000);
  REQUIRE(links[0].rtt_p99_ns() == 20'000'000);
  REQUIRE(links[0].throughput_bps() == 10'000'000);
  REQUIRE(links[0].loss_ratio() == 0);
  REQUIRE(links[0].sample_count() == 6);
  REQUIRE_FALSE(links[0].stale());
  REQUIRE(links[1].link_id() == "a->c");
  REQUIRE(links[1].throughput_bps() == 100'000'000);
  REQUIRE(links[1].energy_joules_per_byte() ==
          Approx(f.options.link.power.JoulesPerByteAt(100'000'000)));
  REQUIRE(links[1].probe_bytes() == 6 * (100 + 125'000));

  auto attrs = f.monitor->Attributes();
  REQUIRE(attrs.node() == "a");
  REQUIRE(attrs.degree() == 2);
  REQUIRE(attrs.egress_bandwidth_bps() == 110'000'000);
  REQUIRE(attrs.latency_ema_ns() == Approx((10'000'000 + 20'000'000) / 2.0));
  REQUIRE(attrs.link_failures() == 0);
  REQUIRE(attrs.node_net_failures() == 0);
  REQUIRE(attrs.packet_loss_ratio() == 0);
  REQUIRE(attrs.flow_energy_joules() > 0);
  REQUIRE(attrs.link_energy_joules() ==
          Approx(links[0].link_energy_joules() + links[1].link_energy_joules()));
}

TEST_CASE("a link that stops answering fails and counts as loss and recovers") {
  Fixture f;
  f.prober.Set("b", {.rtt = absl::Milliseconds(20)});
  f.prober.Set("c", {.rtt = absl::Milliseconds(40)});
  f.Run(absl::Seconds(20));
  f.prober.Set("c", {.down = true});
  f.Run(absl::Seconds(15));  // three probe intervals
  auto links = f.monitor->Links();
  REQUIRE(links[1].failed());
  REQUIRE(links[1].failure_count() == 1);
  REQUIRE(links[1].loss_ratio() > 0);
  auto attrs = f.monitor->Attributes();
  REQUIRE(attrs.degree() == 1);
  REQUIRE(attrs.link_failures() == 1);
  REQUIRE(attrs.node_net_failures() == 2);  // one failure event + one endpoint unreachable
  f.prober.Set("c", {.rtt = absl::Milliseconds(40)});
  f.Run(absl::Seconds(5));
  links = f.monitor->Links();
  REQUIRE_FALSE(links[1].failed());
  REQUIRE(f.monitor->Attributes().degree() == 2);
  REQUIRE(f.monitor->Attributes().node_net_failures() == 1);
}

TEST_CASE("links not probed within stale_after are stale and removed peers vanish") {
  Fixture f;
  f.prober.Set("b", {});
  f.prober.Set("c", {});
  f.Run(absl::Seconds(10));
  f.clock.Advance(absl::Seconds(16));  // no probes run
  auto links = f.monitor->Links();
  REQUIRE(links[0].stale());
  REQUIRE(links[0].age_ns() >= absl::ToInt64Nanoseconds(absl::Seconds(16)));
  f.monitor->SetPeers({{"b", "127.0.2.1:1"}});
  REQUIRE(f.monitor->Links().size() == 1);
}

TEST_CASE("monitor options are validated") {
  SimulatedClock clock;
  MonitorOptions options;
  options.link.ema_alpha = 0;
  options.probe.timeout = absl::ZeroDuration();
  auto created = NetworkMonitor::Create("a", options, clock);
  REQUIRE(created.status().code() == absl::StatusCode::kInvalidArgument);
  REQUIRE_THAT(std::string(created.status().message()), Catch::Contains("link.ema_alpha"));
  REQUIRE_THAT(std::string(created.status().message()), Catch::Contains("timeout"));
  REQUIRE_FALSE(NetworkMonitor::Create("", MonitorOptions(), clock).ok());
}

}  // namespace
}  // namespace codeco::netma
