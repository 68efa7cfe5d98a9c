#include "netma/core/link_estimator.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace codeco::netma {

double LinearPowerModel::TransferJoules(int64_t bytes, absl::Duration duration) const {
  return static_watts * absl::ToDoubleSeconds(duration) +
         joules_per_byte * static_cast<double>(bytes);
}

double LinearPowerModel::JoulesPerByteAt(int64_t throughput_bps) const {
  if (throughput_bps <= 0) return joules_per_byte;
  // Seconds per byte at this rate, times the static power, plus the per-byte term.
  return static_watts * 8.0 / static_cast<double>(throughput_bps) + joules_per_byte;
}

void LinkEstimator::Record(const ProbeSample& sample) {
  last_sample_at_ = sample.at;
  probe_bytes_ += sample.wire_bytes;
  window_.push_back({sample.ok, sample.ok ? absl::ToInt64Nanoseconds(sample.rtt) : 0});
  while (static_cast<int>(window_.size()) > options_.window_size) window_.pop_front();
  if (!sample.ok) {
    ++consecutive_failures_;
    if (!failed_ && consecutive_failures_ >= options_.failure_threshold) {
      failed_ = true;
      ++failure_count_;
    }
    return;
  }
  consecutive_failures_ = 0;
  failed_ = false;
  recent_rtts_ns_.push_back(absl::ToInt64Nanoseconds(sample.rtt));
  while (static_cast<int>(recent_rtts_ns_.size()) > options_.recent_size) {
    recent_rtts_ns_.pop_front();
  }
  double rtt = absl::ToDoubleNanoseconds(sample.rtt);
  rtt_ema_ns_ = has_rtt_ ? options_.ema_alpha * rtt + (1 - options_.ema_alpha) * rtt_ema_ns_ : rtt;
  has_rtt_ = true;
  if (sample.bulk_bytes > 0 && sample.bulk_duration > absl::ZeroDuration()) {
    bulk_.push_back({sample.bulk_bytes, sample.bulk_duration});
    while (static_cast<int>(bulk_.size()) > options_.throughput_window) bulk_.pop_front();
    last_flow_energy_ = options_.power.TransferJoules(sample.bulk_bytes, sample.bulk_duration);
    link_energy_ema_ = has_energy_ ? options_.energy_alpha * last_flow_energy_ +
                                         (1 - options_.energy_alpha) * link_energy_ema_
                                   : last_flow_energy_;
    has_energy_ = true;
  }
}

int64_t LinkEstimator::RecentMedianRttNs() const {
  if (recent_rtts_ns_.empty()) return 0;
  std::vector<int64_t> sorted(recent_rtts_ns_.begin(), recent_rtts_ns_.end());
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

int64_t LinkEstimator::RttPercentileNs(double quantile) const {
  std::vector<int64_t> rtts;
  for (const WindowEntry& e : window_) {
    if (e.ok) rtts.push_back(e.rtt_ns);
  }
  if (rtts.empty()) return 0;
  std::sort(rtts.begin(), rtts.end());
  // Nearest-rank percentile: the smallest value with at least `quantile` of
  // the samples at or below it.
  size_t rank = static_cast<size_t>(std::ceil(quantile * static_cast<double>(rtts.size())));
  rank = std::clamp<size_t>(rank, 1, rtts.size());
  return rtts[rank - 1];
}

int64_t LinkEstimator::throughput_bps() const {
  int64_t bytes = 0;
  absl::Duration total;
  for (const BulkEntry& e : bulk_) {
    bytes += e.bytes;
    total += e.duration;
  }
  if (bytes == 0 || total <= absl::ZeroDuration()) return 0;
  return static_cast<int64_t>(static_cast<double>(bytes) * 8.0 / absl::ToDoubleSeconds(total));
}

double LinkEstimator::loss_ratio() const {
  if (window_.empty()) return 0;
  int64_t failed =
      std::count_if(window_.begin(), window_.end(), [](const WindowEntry& e) { return !e.ok; });
  return static_cast<double>(failed) / static_cast<double>(window_.size());
}

}  // namespace codeco::netma
