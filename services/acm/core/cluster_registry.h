#pragma once
// The hub's cluster registry: MC agents register and heartbeat capacity,
// labels and health; a cluster that misses heartbeats becomes UNREACHABLE
// with hysteresis (it takes `miss_threshold` silent intervals to fall, and
// `recover_beats` heartbeats to come back), all under the injected Clock.
// Clusters are kept in the KvStore port, column family "clusters", key =
// cluster name, value = codeco.acm.v1.Cluster.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/acm/v1/acm_service.pb.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"

namespace codeco::acm {

/// metadata.labels key set on a cluster being unregistered ("true", or
/// "force" when it goes even if its applications have nowhere else to go):
/// it takes no new work while its applications are re-placed, and keeps the
/// mark across a restart (or a re-registration) until it is removed.
inline constexpr char kDrainingLabel[] = "codeco.io/draining";

/// True if `cluster` carries the draining mark.
bool IsDraining(const v1::Cluster& cluster);
/// True if `cluster`'s drain was forced.
bool IsForcedDrain(const v1::Cluster& cluster);

/// Most clusters a heartbeat may report in its layered subtree.
inline constexpr int kMaxSubtreeClusters = 10000;
/// Most mission states a heartbeat may carry.
inline constexpr int kMaxReportedMissionStates = 100000;

/// OK when the tree part of `request` (subtree, mission_status) is well
/// formed: names are cluster names, none twice, each state about the
/// reporter or a cluster of its subtree; INVALID_ARGUMENT naming the field.
absl::Status ValidateTreeReport(const v1::HeartbeatRequest& request);

/// Settings of a ClusterRegistry.
struct ClusterRegistryOptions {
  /// Interval at which agents are told to heartbeat. Default: 10 s.
  absl::Duration heartbeat_interval = absl::Seconds(10);
  /// Silent intervals after which a cluster is UNREACHABLE. Default: 3.
  int miss_threshold = 3;
  /// Heartbeats needed for an UNREACHABLE cluster to count as up again. Default: 2.
  int recover_beats = 2;
  /// Page size when a List request gives none. Default: 100.
  int default_page_size = 100;
  /// Largest page size honoured. Default: 1000.
  int max_page_size = 1000;
};

/// Registered clusters and their health.
class ClusterRegistry {
 public:
  /// `kv` (with a "clusters" column family) and `clock` must outlive the registry.
  ClusterRegistry(KvStore& kv, Clock& clock, ClusterRegistryOptions options = {});

  /// Registers or re-registers a cluster (role, labels, energy, parent, endpoints).
  absl::StatusOr<v1::RegisterClusterResponse> Register(const v1::RegisterClusterRequest& request);
  /// Records a heartbeat; asks for re-registration when the cluster is unknown.
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request);
  /// A registered cluster.
  absl::StatusOr<v1::GetClusterResponse> Get(const v1::GetClusterRequest& request) const;
  /// One page of clusters, filtered.
  absl::StatusOr<v1::ListClustersResponse> List(const v1::ListClustersRequest& request) const;
  /// Removes a cluster at once (ClusterDrainer drains it first).
  absl::StatusOr<v1::UnregisterClusterResponse> Unregister(
      const v1::UnregisterClusterRequest& request);
  /// Sets (forced or not) or clears the draining mark of `name` (NOT_FOUND naming `name`).
  absl::Status SetDraining(const std::string& name, bool draining, bool force = false);
  /// Marks clusters UNREACHABLE whose last heartbeat is older than
  /// miss_threshold intervals; returns the names that changed. Call periodically.
  absl::StatusOr<std::vector<std::string>> Sweep();
  /// Every registered cluster, in name order (for neighborhood selection).
  absl::StatusOr<std::vector<v1::Cluster>> All() const;

 private:
  absl::StatusOr<std::optional<v1::Cluster>> Load(const std::string& name) const;
  absl::Status Save(const v1::Cluster& cluster);
  google::protobuf::Timestamp NowProto() const;

  KvStore& kv_;
  Clock& clock_;
  const ClusterRegistryOptions options_;
  absl::Mutex mu_;
  // Heartbeats received since a cluster became UNREACHABLE (memory only: a
  // restarted hub makes clusters earn their way back, never flap up).
  std::map<std::string, int> recovering_ ABSL_GUARDED_BY(mu_);
  // Last heartbeat sequence seen per cluster, to drop reordered beats.
  std::map<std::string, int64_t> sequence_ ABSL_GUARDED_BY(mu_);
};

}  // namespace codeco::acm
