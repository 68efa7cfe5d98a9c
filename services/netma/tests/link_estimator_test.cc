// LinkEstimator and the linear power model: EMA, nearest-rank percentiles,
// throughput, loss, failure detection and recovery, energy.
#include "netma/core/link_estimator.h"

#include <catch2/catch.hpp>

namespace codeco::netma {
namespace {

ProbeSample Ok(absl::Time at, absl::Duration rtt) {
  ProbeSample s;
  s.at = at;
  s.ok = true;
  s.rtt = rtt;
  s.wire_bytes = 100;
  return s;
}

ProbeSample Fail(absl::Time at) {
  ProbeSample s;
  s.at = at;
  return s;
}

TEST_CASE("RTT EMA starts at the first sample and follows alpha") {
  LinkEstimatorOptions options;
  options.ema_alpha = 0.5;
  LinkEstimator link(options);
  absl::Time t = absl::UnixEpoch();
  REQUIRE(link.rtt_ema_ns() == 0);
  link.Record(Ok(t, absl::Milliseconds(10)));
  REQUIRE(link.rtt_ema_ns() == 10'000'000);
  link.Record(Ok(t, absl::Milliseconds(20)));
  REQUIRE(link.rtt_ema_ns() == 15'000'000);
  link.Record(Ok(t, absl::Milliseconds(20)));
  REQUIRE(link.rtt_ema_ns() == 17'500'000);
  // A failure does not move the EMA.
  link.Record(Fail(t));
  REQUIRE(link.rtt_ema_ns() == 17'500'000);
}

TEST_CASE("p50 and p99 are nearest-rank over the window's successful probes") {
  LinkEstimatorOptions options;
  options.window_size = 100;
  LinkEstimator link(options);
  for (int i = 1; i <= 100; ++i) link.Record(Ok(absl::UnixEpoch(), absl::Microseconds(i)));
  REQUIRE(link.RttPercentileNs(0.5) == 50'000);
  REQUIRE(link.RttPercentileNs(0.99) == 99'000);
  // The window slides: 100 more samples of 1 ms push the old ones out.
  for (int i = 0; i < 100; ++i) link.Record(Ok(absl::UnixEpoch(), absl::Milliseconds(1)));
  REQUIRE(link.RttPercentileNs(0.5) == 1'000'000);
  REQUIRE(link.RttPercentileNs(0.99) == 1'000'000);
  REQUIRE(link.window_count() == 100);
}

TEST_CASE("loss is the failed share of the window") {
  LinkEstimatorOptions options;
  options.window_size = 10;
  options.failure_threshold = 100;
  LinkEstimator link(options);
  for (int i = 0; i < 10; ++i) {
    if (i % 5 == 0) {
      link.Record(Fail(absl::UnixEpoch()));
    } else {
      link.Record(Ok(absl::UnixEpoch(), absl::Milliseconds(1)));
    }
  }
  REQUIRE(link.loss_ratio() == Approx(0.2));
  for (int i = 0; i < 10; ++i) link.Record(Ok(absl::UnixEpoch(), absl::Milliseconds(1)));
  REQUIRE(link.loss_ratio() == 0);
}

TEST_CASE("a link fails after N consecutive failures and recovers on success") {
  LinkEstimatorOptions options;
  options.failure_threshold = 3;
  LinkEstimator link(options);
  link.Record(Ok(absl::UnixEpoch(), absl::Milliseconds(1)));
  link.Record(Fail(absl::UnixEpoch()));
  link.Record(Fail(absl::UnixEpoch()));
  REQUIRE_FALSE(link.failed());
  link.Record(Ok(absl::UnixEpoch(), absl::Milliseconds(1)));  // resets the run
  link.Record(Fail(absl::UnixEpoch()));
  link.Record(Fail(absl::UnixEpoch()));
  REQUIRE_FALSE(link.failed());
  link.Record(Fail(absl::UnixEpoch()));
  REQUIRE(link.failed());
  REQUIRE(link.failure_count() == 1);
  link.Record(Fail(absl::UnixEpoch()));  // still the same failure
  REQUIRE(link.failure_count() == 1);
  link.Record(Ok(absl::UnixEpoch(), absl::Milliseconds(1)));
  REQUIRE_FALSE(link.failed());
  for (int i = 0; i < 3; ++i) link.Record(Fail(absl::UnixEpoch()));
  REQUIRE(link.failure_count() == 2);
}

TEST_CASE("throughput is byte-weighted over the last bulk samples") {
  LinkEstimatorOptions options;
  options.throughput_window = 2;
  LinkEstimator link(options);
  auto bulk = [](int64_t bytes, absl::Duration d) {
    ProbeSample s = Ok(absl::UnixEpoch(), absl::Milliseconds(1));
    s.bulk_bytes = bytes;
    s.bulk_duration = d;
    return s;
  };
  link.Record(bulk(1'000'000, absl::Seconds(1)));  // 8 Mbit/s
  REQUIRE(link.throughput_bps() == 8'000'000);
  link.Record(bulk(3'000'000, absl::Seconds(1)));  // (1+3) MB in 2 s = 16 Mbit/s
  REQUIRE(link.throughput_bps() == 16'000'000);
  link.Record(bulk(1'000'000, absl::Seconds(1)));  // the first drops out: 4 MB in 2 s
  REQUIRE(link.throughput_bps() == 16'000'000);
  link.Record(bulk(1'000'000, absl::Seconds(1)));
  REQUIRE(link.throughput_bps() == 8'000'000);
}

TEST_CASE("linear power model: static power over transmission time plus a per-byte term") {
  LinearPowerModel model{.static_watts = 2.0, .joules_per_byte = 1e-8};
  REQUIRE(model.TransferJoules(1'000'000, absl::Milliseconds(500)) == Approx(1.0 + 0.01));
  // At 8 Mbit/s a byte takes 1 us: 2 W * 1 us + 10 nJ.
  REQUIRE(model.JoulesPerByteAt(8'000'000) == Approx(2e-6 + 1e-8));
  REQUIRE(model.JoulesPerByteAt(0) == Approx(1e-8));

  LinkEstimatorOptions options;
  options.power = model;
  options.energy_alpha = 0.5;
  LinkEstimator link(options);
  ProbeSample s = Ok(absl::UnixEpoch(), absl::Milliseconds(1));
  s.bulk_bytes = 1'000'000;
  s.bulk_duration = absl::Milliseconds(500);
  link.Record(s);
  REQUIRE(link.link_energy_joules() == Approx(1.01));
  s.bulk_duration = absl::Milliseconds(1500);  // 3.01 J
  link.Record(s);
  REQUIRE(link.last_flow_energy_joules() == Approx(3.01));
  REQUIRE(link.link_energy_joules() == Approx(2.01));
  REQUIRE(link.probe_bytes() == 200);
}

TEST_CASE("the recent median ignores a spike and follows a lasting step after three probes") {
  LinkEstimator link(LinkEstimatorOptions{});
  absl::Time t = absl::UnixEpoch();
  for (int i = 0; i < 5; ++i) link.Record(Ok(t += absl::Seconds(5), absl::Milliseconds(10)));
  link.Record(Ok(t += absl::Seconds(5), absl::Milliseconds(90)));  // one spike
  REQUIRE(link.RecentMedianRttNs() == 10'000'000);
  REQUIRE(link.rtt_ema_ns() > 20'000'000);  // the EMA is dragged by it
  for (int i = 0; i < 5; ++i) link.Record(Ok(t += absl::Seconds(5), absl::Milliseconds(10)));
  link.Record(Ok(t += absl::Seconds(5), absl::Milliseconds(50)));
  link.Record(Ok(t += absl::Seconds(5), absl::Milliseconds(50)));
  REQUIRE(link.RecentMedianRttNs() == 10'000'000);
  link.Record(Ok(t += absl::Seconds(5), absl::Milliseconds(50)));  // third probe of the step
  REQUIRE(link.RecentMedianRttNs() == 50'000'000);
  link.Record(Fail(t += absl::Seconds(5)));  // failures do not count
  REQUIRE(link.RecentMedianRttNs() == 50'000'000);
}

}  // namespace
}  // namespace codeco::netma
