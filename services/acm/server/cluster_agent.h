#pragma once
// The managed-cluster side of ACM: registers its cluster with the hub ACM and
// heartbeats a capacity summary read from the cluster's LMS, re-registering
// when the hub asks (e.g. after the hub lost its state or the cluster was
// marked unreachable). Before each heartbeat it brings the cluster's local
// copies in step with the hub (the neighborhoods containing the cluster, and
// its part of each application placed on it, from the hub's
// ListNeighborhoods and GetApplication of each of those neighborhoods'
// applications) and reports their revisions in the heartbeat. While the hub
// is away the copies stay as they were. A watch on the LMS's pods makes a
// pod change (a pod Running, Failed, gone) reach the hub within
// `pod_report_delay` instead of at the next heartbeat. Each report carries
// what every reported pod uses, read from its node's GetNodeUsage (the
// hub's multi-cluster autoscaler scales on it).
//
// In a cluster tree the agent also runs the missions addressed to its
// cluster (PlanMissionPods against the LMS, every report, also while the
// hub is away), reports their states and those of the clusters below it
// (the clusters registered at its own ACM, in a layered tree, with their
// own subtrees), and keeps the missions the hub (or its parent) answers
// with in the MissionRelay its own ACM serves them from. Runs on its own
// threads until stopped.

#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "acm/core/cluster_registry.h"
#include "acm/core/cluster_report.h"
#include "acm/core/local_copies.h"
#include "acm/core/mission_relay.h"
#include "codeco/acm/v1/acm_service.grpc.pb.h"
#include "codeco/common/peer_channels.h"
#include "codeco/common/server.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "grpcpp/channel.h"

namespace codeco::acm {

/// Where the agent reports and how often.
struct ClusterAgentOptions {
  /// This cluster's name.
  std::string cluster;
  /// host:port of the hub ACM.
  std::string hub_acm;
  /// host:port of this cluster's LMS.
  std::string lms;
  /// The LMS speaks plaintext (CODEF); else it is called with mTLS.
  bool lms_plaintext = false;
  /// Time between heartbeats (the hub may ask for another).
  absl::Duration interval = absl::Seconds(5);
  /// Deadline of each call.
  absl::Duration call_timeout = absl::Seconds(5);
  /// Least time between two reports; a pod change seen by the LMS watch is
  /// reported this long after the previous report at the latest (zero: no
  /// watch, pods are reported with each heartbeat only). Default: 200 ms.
  absl::Duration pod_report_delay = absl::Milliseconds(200);
  /// This cluster's service endpoints (service -> host:port) registered with
  /// the hub as Cluster.endpoints (acm.advertise); empty for none.
  std::map<std::string, std::string> endpoints;
  /// Its parent in a cluster tree, registered as Cluster.parent_cluster
  /// (acm.parent); empty: directly under the hub.
  std::string parent;
};

/// Registers and heartbeats until Stop().
class ClusterAgent final : public BackgroundWork {
 public:
  /// Starts the agent thread; `peers` must outlive the agent; `copies` may
  /// be null. `missions` (null: no missions) holds what the upstream relays;
  /// `subordinates` (null: none), the registry of this cluster's own ACM, is
  /// reported up as its subtree and must outlive the agent.
  ClusterAgent(ClusterAgentOptions options, PeerChannels& peers,
               std::shared_ptr<LocalCopies> copies = nullptr,
               std::shared_ptr<MissionRelay> missions = nullptr,
               ClusterRegistry* subordinates = nullptr);
  ~ClusterAgent() override;
  void Stop() override;

 private:
  void Loop();
  /// Follows the LMS's pods until stopped and flags every change.
  void WatchPods();
  /// A channel to the LMS (plaintext or mTLS as configured).
  absl::StatusOr<std::shared_ptr<grpc::Channel>> LmsChannel();
  /// One report to the hub; false when it failed (logged). With
  /// `sync_copies` it first brings the local copies in step.
  bool ReportOnce(bool sync_copies);
  /// Brings the local copies in step with the hub; false when it failed (logged).
  bool SyncCopies(v1::AcmService::Stub& hub);
  /// Creates and deletes this cluster's mission pods as PlanMissionPods
  /// says and records the missions' states.
  void RunMissions(lms::v1::LmsService::Stub& lms, const ClusterReport& report,
                   const std::vector<lms::v1::Node>& nodes, const std::vector<lms::v1::Pod>& pods);
  /// The clusters registered at this cluster's ACM, every level, to report up.
  std::vector<v1::SubtreeCluster> Subtree();

  const ClusterAgentOptions options_;
  PeerChannels& peers_;
  const std::shared_ptr<LocalCopies> copies_;
  const std::shared_ptr<MissionRelay> missions_;
  ClusterRegistry* const subordinates_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Report again after pod_report_delay, not at the next heartbeat: a pod
  // changed, or the missions did.
  bool pods_changed_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* watch_context_ ABSL_GUARDED_BY(mu_) = nullptr;  // the open watch
  std::shared_ptr<grpc::Channel> lms_channel_;  // loop thread only; made on first use
  bool registered_ = false;  // loop thread only
  // When a report first failed to reach the hub, since the last one that
  // did (InfiniteFuture: none failed); loop thread only.
  absl::Time hub_lost_since_ = absl::InfiniteFuture();
  // The outage to report with the next call that reaches the hub, if any.
  void AddOutage(v1::HubOutage* outage) const;
  int64_t sequence_ = 0;     // loop thread only
  absl::Duration interval_;  // loop thread only
  std::thread thread_;
  std::thread watcher_;
};

}  // namespace codeco::acm
