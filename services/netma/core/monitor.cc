#include "netma/core/monitor.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"
#include "google/protobuf/util/time_util.h"

namespace codeco::netma {

using codeco::netma::v1::LinkMetrics;
using codeco::netma::v1::NodeNetworkAttributes;

namespace {

google::protobuf::Timestamp ToProtoTime(absl::Time t) {
  return google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(t));
}

}  // namespace

std::string LinkId(const std::string& source, const std::string& target) {
  return absl::StrCat(source, "->", target);
}

absl::Status ValidateMonitorOptions(const MonitorOptions& options) {
  FieldErrors errors;
  const LinkEstimatorOptions& link = options.link;
  if (!(link.ema_alpha > 0 && link.ema_alpha <= 1))
    errors.Add("link.ema_alpha", "must be in (0, 1]");
  if (!(link.energy_alpha > 0 && link.energy_alpha <= 1)) {
    errors.Add("link.energy_alpha", "must be in (0, 1]");
  }
  if (link.window_size < 1) errors.Add("link.window_size", "must be at least 1");
  if (link.recent_size < 1) errors.Add("link.recent_size", "must be at least 1");
  if (link.throughput_window < 1) errors.Add("link.throughput_window", "must be at least 1");
  if (link.failure_threshold < 1) errors.Add("link.failure_threshold", "must be at least 1");
  if (link.power.static_watts < 0) errors.Add("link.power.static_watts", "must not be negative");
  if (link.power.joules_per_byte < 0) {
    errors.Add("link.power.joules_per_byte", "must not be negative");
  }
  absl::Status probe = ValidateProbeSchedulerOptions(options.probe);
  if (!probe.ok()) errors.Add("probe", std::string(probe.message()));
  if (options.stale_after <= absl::ZeroDuration()) errors.Add("stale_after", "must be positive");
  if (!(options.flow_energy_alpha > 0 && options.flow_energy_alpha <= 1)) {
    errors.Add("flow_energy_alpha", "must be in (0, 1]");
  }
  return errors.ToStatus();
}

absl::StatusOr<std::unique_ptr<NetworkMonitor>> NetworkMonitor::Create(
    std::string local_cluster, const MonitorOptions& options, const Clock& clock) {
  if (local_cluster.empty()) return InvalidFieldError("cluster", "required");
  RETURN_IF_ERROR(ValidateMonitorOptions(options));
  return std::unique_ptr<NetworkMonitor>(
      new NetworkMonitor(std::move(local_cluster), options, clock));
}

NetworkMonitor::NetworkMonitor(std::string local_cluster, const MonitorOptions& options,
                               const Clock& clock)
    : local_cluster_(std::move(local_cluster)),
      options_(options),
      clock_(clock),
      scheduler_(options.probe) {}

void NetworkMonitor::SetPeers(const std::vector<Peer>& peers) {
  std::vector<Peer> others;
  std::set<std::string> names;
  for (const Peer& peer : peers) {
    if (peer.cluster == local_cluster_ || !names.insert(peer.cluster).second) continue;
    others.push_back(peer);
  }
  scheduler_.SetPeers(others, clock_.Now());
  for (auto it = links_.begin(); it != links_.end();) {
    it = names.count(it->first) ? std::next(it) : links_.erase(it);
  }
}

std::vector<ProbeTask> NetworkMonitor::TakeDueProbes() { return scheduler_.TakeDue(clock_.Now()); }

void NetworkMonitor::RecordResult(const ProbeTask& task,
                                  const absl::StatusOr<Prober::Result>& result) {
  bool known = false;
  for (const Peer& peer : scheduler_.peers()) known |= peer.cluster == task.peer.cluster;
  if (!known) return;  // the peer left while its probe ran
  ProbeSample sample;
  sample.at = clock_.Now();
  sample.ok = result.ok();
  if (result.ok()) {
    sample.rtt = result->rtt;
    sample.bulk_bytes = result->bulk_bytes;
    sample.bulk_duration = result->bulk_duration;
    sample.wire_bytes = result->wire_bytes;
  }
  auto [it, inserted] = links_.try_emplace(task.peer.cluster, options_.link);
  it->second.Record(sample);
  if (sample.ok && sample.bulk_bytes > 0 && sample.bulk_duration > absl::ZeroDuration()) {
    double flow = it->second.last_flow_energy_joules();
    flow_energy_ema_ = has_flow_energy_ ? options_.flow_energy_alpha * flow +
                                              (1 - options_.flow_energy_alpha) * flow_energy_ema_
                                        : flow;
    has_flow_energy_ = true;
  }
}

void NetworkMonitor::RecordLocalOverhead(absl::Duration rtt) {
  overhead_samples_ns_.push_back(absl::ToInt64Nanoseconds(rtt));
  while (overhead_samples_ns_.size() > kOverheadSamples) overhead_samples_ns_.pop_front();
}

int64_t NetworkMonitor::LocalOverheadNs() const {
  if (overhead_samples_ns_.empty()) return 0;
  std::vector<int64_t> sorted(overhead_samples_ns_.begin(), overhead_samples_ns_.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted[sorted.size() / 2];
}

int NetworkMonitor::RunDueProbes(Prober& prober) {
  std::vector<ProbeTask> tasks = TakeDueProbes();
  for (const ProbeTask& task : tasks) RecordResult(task, prober.Probe(task));
  return static_cast<int>(tasks.size());
}

std::vector<LinkMetrics> NetworkMonitor::Links() const {
  absl::Time now = clock_.Now();
  std::vector<LinkMetrics> out;
  for (const auto& [peer, link] : links_) {
    LinkMetrics m;
    m.set_link_id(LinkId(local_cluster_, peer));
    m.set_source_cluster(local_cluster_);
    m.set_target_cluster(peer);
    m.set_rtt_ema_ns(link.rtt_ema_ns());
    m.set_rtt_p50_ns(link.RttPercentileNs(0.5));
    m.set_rtt_p99_ns(link.RttPercentileNs(0.99));
    const int64_t overhead = LocalOverheadNs();
    m.set_local_overhead_ns(overhead);
    m.set_path_rtt_ns(std::max<int64_t>(link.RecentMedianRttNs() - overhead, 0));
    if (link.LastRttNs() > 0) m.set_rtt_last_ns(std::max<int64_t>(link.LastRttNs() - overhead, 1));
    m.set_throughput_bps(link.throughput_bps());
    m.set_loss_ratio(link.loss_ratio());
    m.set_sample_count(link.window_count());
    *m.mutable_measure_time() = ToProtoTime(link.last_sample_at());
    m.set_age_ns(absl::ToInt64Nanoseconds(now - link.last_sample_at()));
    m.set_failed(link.failed());
    m.set_failure_count(link.failure_count());
    m.set_link_energy_joules(link.link_energy_joules());
    m.set_energy_joules_per_byte(link.energy_joules_per_byte());
    m.set_stale(now - link.last_sample_at() > options_.stale_after);
    m.set_probe_bytes(link.probe_bytes());
    out.push_back(std::move(m));
  }
  // Link ids share the source prefix, so peer order is link-id order.
  return out;
}

NodeNetworkAttributes NetworkMonitor::Attributes() const {
  NodeNetworkAttributes a;
  a.set_node(local_cluster_);
  double loss_sum = 0;
  double latency_sum = 0;
  int64_t unreachable = 0;
  for (const auto& [peer, link] : links_) {
    a.set_link_failures(a.link_failures() + link.failure_count());
    a.set_link_energy_joules(a.link_energy_joules() + link.link_energy_joules());
    loss_sum += link.loss_ratio();
    if (link.failed()) {
      ++unreachable;
      continue;
    }
    a.set_degree(a.degree() + 1);
    a.set_egress_bandwidth_bps(a.egress_bandwidth_bps() + link.throughput_bps());
    latency_sum += static_cast<double>(link.rtt_ema_ns()) / 2.0;
  }
  if (!links_.empty()) a.set_packet_loss_ratio(loss_sum / static_cast<double>(links_.size()));
  if (a.degree() > 0) a.set_latency_ema_ns(latency_sum / static_cast<double>(a.degree()));
  a.set_node_net_failures(a.link_failures() + unreachable);
  a.set_flow_energy_joules(flow_energy_ema_);
  return a;
}

}  // namespace codeco::netma
