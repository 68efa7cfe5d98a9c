#pragma once
// NSM, the network state monitor of one cluster: it keeps a LinkEstimator per
// peer, lets the ProbeScheduler pick what to probe, folds the Prober's results
// in, and reports link metrics and the node attributes of CODECO's NSM
// (link failures, packet loss, node net failures, egress bandwidth, degree,
// latency EMA, flow and link energy). Reads time only from the injected Clock.

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codeco/common/clock.h"
#include "codeco/netma/v1/topology.pb.h"
#include "netma/core/link_estimator.h"
#include "netma/core/probe_scheduler.h"

namespace codeco::netma {

/// Settings of the monitor.
struct MonitorOptions {
  /// Per-link estimation.
  LinkEstimatorOptions link;
  /// Probe pacing and size.
  ProbeSchedulerOptions probe;
  /// A link whose last probe is older than this is stale. Default 3 probe intervals.
  absl::Duration stale_after = absl::Seconds(15);
  /// Weight of the newest flow in the node's flow-energy EMA. Default 0.2.
  double flow_energy_alpha = 0.2;
};

/// INVALID_ARGUMENT naming every bad field of `options`.
absl::Status ValidateMonitorOptions(const MonitorOptions& options);

/// NSM state of the local cluster's egress links. Not thread-safe.
class NetworkMonitor {
 public:
  /// A monitor for `local_cluster`; INVALID_ARGUMENT for bad options.
  static absl::StatusOr<std::unique_ptr<NetworkMonitor>> Create(std::string local_cluster,
                                                                const MonitorOptions& options,
                                                                const Clock& clock);

  /// Replaces the set of peers to probe (peers that leave keep no state).
  void SetPeers(const std::vector<Peer>& peers);
  /// The probes due now (see ProbeScheduler::TakeDue).
  std::vector<ProbeTask> TakeDueProbes();
  /// Folds in one round trip of this NetMA to itself (no network path): the
  /// cost of the calls themselves, which path_rtt_ns leaves out.
  void RecordLocalOverhead(absl::Duration rtt);
  /// The median of the recent self round trips, nanoseconds (0 before any).
  int64_t LocalOverheadNs() const;
  /// When the next probe is due.
  absl::Time NextProbeDue() const { return scheduler_.NextDue(); }
  /// Folds in the outcome of `task`, completed now.
  void RecordResult(const ProbeTask& task, const absl::StatusOr<Prober::Result>& result);
  /// Runs every due probe through `prober`, one after the other, and records
  /// the results; returns how many ran. For simulations and tests.
  int RunDueProbes(Prober& prober);

  /// Metrics of every probed link, ordered by link id, with age and staleness at now.
  std::vector<codeco::netma::v1::LinkMetrics> Links() const;
  /// The local node's NSM attributes at now.
  codeco::netma::v1::NodeNetworkAttributes Attributes() const;
  /// The local cluster name.
  const std::string& local_cluster() const { return local_cluster_; }
  /// The peers being probed.
  std::vector<Peer> peers() const { return scheduler_.peers(); }
  /// The options in use.
  const MonitorOptions& options() const { return options_; }

 private:
  NetworkMonitor(std::string local_cluster, const MonitorOptions& options, const Clock& clock);

  std::string local_cluster_;
  MonitorOptions options_;
  const Clock& clock_;
  ProbeScheduler scheduler_;
  std::map<std::string, LinkEstimator> links_;  // by peer cluster
  /// Self round trips kept for the overhead median.
  static constexpr size_t kOverheadSamples = 16;
  std::deque<int64_t> overhead_samples_ns_;
  double flow_energy_ema_ = 0;
  bool has_flow_energy_ = false;
};

/// "<source>-><target>".
std::string LinkId(const std::string& source, const std::string& target);

}  // namespace codeco::netma
