#pragma once
// Per-link measurement state of NSM: fed one probe sample at a time, it keeps
// the RTT EMA, a window of recent RTTs for p50/p99, throughput from bounded
// bulk samples, loss as the failed share of the recent probes, failure
// detection after N consecutive failures (and recovery on the next success),
// and link energy from a linear power model.

#include <cstdint>
#include <deque>

#include "absl/time/time.h"

namespace codeco::netma {

/// Linear power model (after Feeney and Nilsson): a transfer of `bytes`
/// lasting `duration` costs static_watts * duration + joules_per_byte * bytes.
struct LinearPowerModel {
  /// Baseline power of the interface while it transmits, watts. Default 2 W.
  double static_watts = 2.0;
  /// Size-dependent energy, joules per byte. Default 5 nJ/byte.
  double joules_per_byte = 5e-9;

  /// Energy of one transfer, joules.
  double TransferJoules(int64_t bytes, absl::Duration duration) const;
  /// Energy per byte when sending at `throughput_bps`, joules (0 bps: the
  /// size-dependent term alone).
  double JoulesPerByteAt(int64_t throughput_bps) const;
};

/// How a LinkEstimator turns samples into metrics.
struct LinkEstimatorOptions {
  /// Weight of the newest RTT in the EMA, in (0, 1]. Default 0.2.
  double ema_alpha = 0.2;
  /// Probes kept for p50/p99 and loss. Default 64.
  int window_size = 64;
  /// Successful probes whose median is the path RTT. Default 5: one spike
  /// (or two) does not move it, and a lasting change shows in full after
  /// three probes.
  int recent_size = 5;
  /// Bulk (throughput) samples kept; throughput is their byte-weighted mean. Default 4.
  int throughput_window = 4;
  /// Consecutive failed probes after which the link is down. Default 3.
  int failure_threshold = 3;
  /// Weight of the newest transfer in the link-energy EMA. Default 0.2.
  double energy_alpha = 0.2;
  /// Power model for link energy.
  LinearPowerModel power;
};

/// One probe outcome.
struct ProbeSample {
  /// When the probe completed.
  absl::Time at;
  /// False when the probe failed (timeout, unreachable, error).
  bool ok = false;
  /// Round-trip time of the RTT probe (ok samples only).
  absl::Duration rtt;
  /// Bytes moved by the bulk part (0: RTT-only probe).
  int64_t bulk_bytes = 0;
  /// Time the bulk part took (with bulk_bytes > 0).
  absl::Duration bulk_duration;
  /// Bytes the whole probe put on the wire (RTT and bulk), for overhead accounting.
  int64_t wire_bytes = 0;
};

/// Measurement state of one directed link. Not thread-safe.
class LinkEstimator {
 public:
  /// An empty estimator; `options` must be valid (see ValidateLinkEstimatorOptions).
  explicit LinkEstimator(const LinkEstimatorOptions& options) : options_(options) {}

  /// Folds one sample in. Samples are expected in completion order.
  void Record(const ProbeSample& sample);

  /// RTT EMA in nanoseconds (0 before the first successful probe).
  int64_t rtt_ema_ns() const { return static_cast<int64_t>(rtt_ema_ns_ + 0.5); }
  /// Median RTT over the window's successful probes, nanoseconds (0 if none).
  int64_t RttPercentileNs(double quantile) const;
  /// Median of the last `recent_size` successful RTTs, nanoseconds (0 if none).
  int64_t RecentMedianRttNs() const;
  /// RTT of the newest successful probe, nanoseconds (0 before the first).
  int64_t LastRttNs() const { return recent_rtts_ns_.empty() ? 0 : recent_rtts_ns_.back(); }
  /// Byte-weighted throughput over the retained bulk samples, bits/s (0 if none).
  int64_t throughput_bps() const;
  /// Share of failed probes in the window, 0-1.
  double loss_ratio() const;
  /// True after `failure_threshold` consecutive failures, until the next success.
  bool failed() const { return failed_; }
  /// Times the link went down.
  int64_t failure_count() const { return failure_count_; }
  /// Probes in the window.
  int64_t window_count() const { return static_cast<int64_t>(window_.size()); }
  /// Completion time of the last sample (InfinitePast before any).
  absl::Time last_sample_at() const { return last_sample_at_; }
  /// Link energy EMA over bulk transfers, joules.
  double link_energy_joules() const { return link_energy_ema_; }
  /// Energy of the most recent bulk transfer, joules (a flow's energy).
  double last_flow_energy_joules() const { return last_flow_energy_; }
  /// Energy per byte at the measured throughput, joules.
  double energy_joules_per_byte() const { return options_.power.JoulesPerByteAt(throughput_bps()); }
  /// Bytes all probes of this link put on the wire.
  int64_t probe_bytes() const { return probe_bytes_; }
  /// True once any sample was recorded.
  bool has_samples() const { return last_sample_at_ != absl::InfinitePast(); }

 private:
  struct WindowEntry {
    bool ok;
    int64_t rtt_ns;
  };
  struct BulkEntry {
    int64_t bytes;
    absl::Duration duration;
  };

  LinkEstimatorOptions options_;
  std::deque<WindowEntry> window_;
  std::deque<BulkEntry> bulk_;
  std::deque<int64_t> recent_rtts_ns_;  // last recent_size successful RTTs
  double rtt_ema_ns_ = 0;
  bool has_rtt_ = false;
  int consecutive_failures_ = 0;
  bool failed_ = false;
  int64_t failure_count_ = 0;
  absl::Time last_sample_at_ = absl::InfinitePast();
  double link_energy_ema_ = 0;
  bool has_energy_ = false;
  double last_flow_energy_ = 0;
  int64_t probe_bytes_ = 0;
};

}  // namespace codeco::netma
