#pragma once
// Missions of a cluster tree (Centaurus Edge, seed 002), as one ACM holds
// them. The root (the hub ACM) authors them (Apply, Delete); every other ACM
// holds the missions its upstream (the ACM it heartbeats to: the hub, or its
// parent in a layered tree) addressed to it or to a cluster below it, and
// replaces them wholesale with each upstream answer (ReplaceFromUpstream),
// so a cluster cut off from its upstream keeps running, and relaying, the
// last missions it received. Each ACM answers a heartbeat with the missions
// addressed to the reporting cluster or to its reported subtree
// (MissionsFor), and keeps the mission states reported from below
// (RecordReport) to relay them up with its own (StatusesToRelay) and to show
// them (Get, List).
//
// Missions are stored in the KvStore port, column family "missions", key =
// name, value = codeco.acm.v1.Mission (without status). States are reports,
// held in memory: every cluster sends its whole set with each heartbeat.
// Pure logic over the store and an injected Clock; thread-safe.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "codeco/acm/v1/acm_service.pb.h"
#include "codeco/acm/v1/cluster.pb.h"
#include "codeco/acm/v1/mission.pb.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"

namespace codeco::acm {

/// The column family missions are stored in.
inline constexpr char kMissionFamily[] = "missions";

/// A cluster as a mission's placement sees it: its name and its labels (the
/// free-form ones plus the well-known ones as region, country, provider, tier).
struct TreeMember {
  /// Cluster name.
  std::string name;
  /// Labels a placement's selector is matched against.
  google::protobuf::Map<std::string, std::string> labels;
};

/// `cluster` as a TreeMember.
TreeMember TreeMemberOf(const v1::Cluster& cluster);
/// A subtree cluster, as reported up by its parent, as a TreeMember.
TreeMember TreeMemberOf(const v1::SubtreeCluster& cluster);
/// A cluster named `name` with `labels` (free-form) and `well_known` labels.
TreeMember TreeMemberOf(const std::string& name,
                        const google::protobuf::Map<std::string, std::string>& labels,
                        const common::v1::ClusterLabels& well_known);

/// True when `placement` addresses `member` (by name or by its labels).
bool Addresses(const v1::MissionPlacement& placement, const TreeMember& member);

/// Largest serialized mission (placement, workload and metadata), 16 KiB:
/// with at most MissionRelayOptions::max_missions of them, every mission of
/// the tree fits one heartbeat answer (gRPC's 4 MiB).
inline constexpr size_t kMaxMissionBytes = 16 * 1024;

/// OK when `mission` can be stored; INVALID_ARGUMENT naming the field
/// (under `mission.`) otherwise.
absl::Status ValidateMission(const v1::Mission& mission);

/// Limits of what a MissionRelay takes.
struct MissionRelayOptions {
  /// Most missions the root holds (more are refused RESOURCE_EXHAUSTED);
  /// a relay keeps at most this many of what its upstream sends.
  int max_missions = 200;
  /// Page size when a List request gives none.
  int default_page_size = 100;
  /// Largest page size honoured.
  int max_page_size = 1000;
};

/// One ACM's missions and the states reported from below. Thread-safe.
class MissionRelay {
 public:
  /// `kv` (holding kMissionFamily) and `clock` must outlive the relay.
  /// `root`: this ACM authors missions (the hub); else it relays them.
  MissionRelay(KvStore& kv, Clock& clock, bool root, MissionRelayOptions options = {});

  /// True on the root.
  bool root() const { return root_; }

  /// Root: stores a new mission or a change of one (the generation moves on
  /// when placement or workload change). FAILED_PRECONDITION off the root.
  absl::StatusOr<v1::ApplyMissionResponse> Apply(const v1::ApplyMissionRequest& request);
  /// Root: removes a mission (NOT_FOUND naming it when absent).
  absl::Status Delete(const v1::DeleteMissionRequest& request);
  /// A mission with its state in each cluster of `known` it addresses
  /// (PENDING until that cluster reports it) and in each cluster reporting it.
  absl::StatusOr<v1::GetMissionResponse> Get(const v1::GetMissionRequest& request,
                                             const std::vector<TreeMember>& known) const;
  /// One page of missions in name order, each as Get shows it.
  absl::StatusOr<v1::ListMissionsResponse> List(const v1::ListMissionsRequest& request,
                                                const std::vector<TreeMember>& known) const;

  /// Not the root: makes the stored missions exactly `missions` (what the
  /// upstream addressed to this cluster and its subtree). Each is validated;
  /// an invalid one is skipped (and logged), the others kept. Returns how
  /// many stored missions changed.
  absl::StatusOr<int> ReplaceFromUpstream(
      const google::protobuf::RepeatedPtrField<v1::Mission>& missions);

  /// The stored missions that address any of `members`, in name order.
  absl::StatusOr<std::vector<v1::Mission>> MissionsFor(
      const std::vector<TreeMember>& members) const;

  /// Calls `hook` (from the recording thread, no lock held) whenever a
  /// report from below changes a state in more than its report time. A
  /// managed cluster's agent reports up at once then. Call before use.
  void SetOnStateChange(std::function<void()> hook) { on_state_change_ = std::move(hook); }

  /// Records what `reporter` (a cluster heartbeating to this ACM) reported
  /// for itself and its subtree; replaces its previous report.
  void RecordReport(const std::string& reporter,
                    const google::protobuf::RepeatedPtrField<v1::MissionClusterStatus>& states);
  /// Forgets what `reporter` reported (it left this ACM's registry).
  void ForgetReporter(const std::string& reporter);
  /// Records this cluster's own states (its runner's last pass); `self` is
  /// this cluster, which Get and List then count among the known clusters.
  void RecordOwnStates(TreeMember self, std::vector<v1::MissionClusterStatus> states);
  /// This cluster's own states and those reported from below, to send up.
  /// For a (mission, cluster) reported twice the newest report wins.
  std::vector<v1::MissionClusterStatus> StatesToRelay() const;

 private:
  // (mission, cluster) -> newest state.
  using StateMap = std::map<std::pair<std::string, std::string>, v1::MissionClusterStatus>;
  // The stored missions `options` selects, in name order.
  absl::StatusOr<std::vector<v1::Mission>> Load(const KvScanOptions& options = {}) const;
  // Fills mission.status for `known` (and this cluster) from `newest`.
  void AddStatus(v1::Mission& mission, const std::vector<TreeMember>& known,
                 const StateMap& newest) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The newest state of each (mission, cluster), own and reported.
  StateMap NewestStatesLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  KvStore& kv_;
  Clock& clock_;
  const bool root_;
  const MissionRelayOptions options_;
  // Serializes writes of the stored missions.
  absl::Mutex write_mu_;
  mutable absl::Mutex mu_;
  // reporter -> what it last reported.
  std::map<std::string, std::vector<v1::MissionClusterStatus>> reported_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::MissionClusterStatus> own_ ABSL_GUARDED_BY(mu_);
  std::optional<TreeMember> self_ ABSL_GUARDED_BY(mu_);
  std::function<void()> on_state_change_;
};

}  // namespace codeco::acm
