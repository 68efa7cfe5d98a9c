#pragma once
// The hub's MemberPort and ExecutorFactory over gRPC: how the hub SWM
// reaches the members of a neighborhood. A member with an MC swm (the
// neighborhood's endpoints["swm"], else swm.cluster_endpoints) is read from
// the hub's watched copy of its view (member_views.h: a WatchClusterView
// stream, waited for until it counts the hub's own last change there), or
// through GetClusterView while that stream is down; its L2 is solved here
// on that view unless the view asks for the member's own (SolveCluster, see
// MemberL2); it runs its side of the two-phase commit (Reserve with
// every pod's template, Commit, Release); a member without one is driven
// through its LMS (endpoints["lms"], else the testbed directory) with a
// LocalClusterExecutor. Endpoints learned
// from neighborhoods are remembered in the PlanStore so a restarted hub can
// still reach the clusters its plans are on.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/acm/v1/application.pb.h"
#include "codeco/common/clock.h"
#include "codeco/common/executor.h"
#include "codeco/common/peer_channels.h"
#include "swm/core/adaptation_loop.h"
#include "swm/core/placement_service.h"
#include "swm/lms/lms_pod_runtime.h"
#include "swm/server/member_views.h"
#include "swm/server/plan_store.h"
#include "swm/server/remote_cluster.h"

namespace codeco::swm {

/// Where the L2 (workloads to nodes) of a member with an MC swm is solved.
enum class MemberL2 {
  /// On the hub, on the member's view read for the placement, unless the
  /// view says its swm solves its own (an L2 set on that swm): no call per
  /// visit. The member's Reserve re-checks every node.
  kHub,
  /// Always by the member's swm (SolveCluster), one call per visit.
  kMember,
};

/// Settings of the HubMemberPort.
struct HubMemberOptions {
  /// Deadline of each call to a cluster's LMS. Default: 10 s.
  absl::Duration lms_timeout = absl::Seconds(10);
  /// Deadline of each call to an MC swm. Default: 10 s.
  absl::Duration mc_timeout = absl::Seconds(10);
  /// The MC swm of clusters whose neighborhood entry names none. Default: none.
  std::map<std::string, std::string> cluster_endpoints;
  /// The watched views of the MC members.
  MemberViewsOptions views;
  /// Where MC members' L2 is solved. Default: on the hub.
  MemberL2 member_l2 = MemberL2::kHub;
};

/// The hub's MemberPort over gRPC, and where its adaptation loop reads and
/// settles the members' local decisions. Thread-safe.
class HubMemberPort final : public MemberPort, public LocalDecisionSource {
 public:
  /// Reaches LMS endpoints through `channels` and MC swm endpoints through
  /// `mc_channels` (`channels` when null); `directory` (may be null) lists
  /// the clusters without an swm (testbed). `plans`, `clock` and the
  /// channels must outlive the port.
  HubMemberPort(PlanStore& plans, const Clock& clock, PeerChannels& channels,
                PeerChannels* mc_channels, std::shared_ptr<ClusterDirectory> directory,
                HubMemberOptions options);

  absl::Status Connect(const std::vector<MemberRef>& members, absl::Time deadline) override;
  std::vector<absl::StatusOr<MemberView>> ReadMembers(const std::vector<std::string>& clusters,
                                                      absl::Time deadline) override;
  /// As ReadMembers, but every member is asked now (its MC swm's
  /// GetClusterView, else its LMS): a health probe must not trust a watched
  /// copy, whose stream may hang without ending when the member is cut off.
  std::vector<absl::StatusOr<MemberView>> ProbeMembers(const std::vector<std::string>& clusters,
                                                       absl::Time deadline);
  std::unique_ptr<L2Solver> SolverFor(const std::vector<std::string>& neighborhood,
                                      L2Solver& local) override;
  absl::Status Commit(const std::string& cluster, const std::string& reservation_id,
                      absl::Time deadline) override;
  std::map<std::string, absl::Status> RemovePods(const std::string& cluster,
                                                 const std::string& reservation_id,
                                                 const std::vector<std::string>& pods,
                                                 const std::string& reason,
                                                 absl::Time deadline) override;
  void Touched(const std::vector<std::string>& clusters) override;
  std::vector<std::string> KnownClusters() override;
  absl::StatusOr<std::vector<LabelledPod>> ListLabelledPods(const std::string& cluster,
                                                            absl::Time deadline) override;
  absl::Status DeletePod(const std::string& cluster, const LabelledPod& pod,
                         absl::Time deadline) override;
  /// ListLocalDecisions of the member's swm, every page (each call within
  /// mc_timeout); empty for a member without an swm.
  absl::StatusOr<std::vector<codeco::swm::v1::LocalDecision>> Unsettled(
      const std::string& cluster, absl::Time deadline) override;
  /// SettleLocalDecisions of the member's swm, 1000 verdicts per call.
  absl::Status Settle(const std::string& cluster,
                      const std::vector<codeco::swm::v1::LocalDecisionVerdict>& verdicts,
                      absl::Time deadline) override;

  /// The executors of one placement of `app` (its pod templates come from
  /// it); valid while this port lives.
  std::unique_ptr<ExecutorFactory> ExecutorsFor(const codeco::acm::v1::Application& app);

  /// Lifts the deadline a call set on every LMS connection.
  void ClearDeadlines();

 private:
  // ReadMembers and ProbeMembers: `watched` says whether a fresh watched
  // copy of an MC member's view may answer instead of a call.
  std::vector<absl::StatusOr<MemberView>> Read(const std::vector<std::string>& clusters,
                                               absl::Time deadline, bool watched);

  friend class HubExecutorFactory;
  // How one cluster is reached. Copied out under mu_ and used outside it, so
  // that no call to a cluster holds the port's lock (and a rig replaced
  // meanwhile stays alive for the call that copied it).
  struct Rig {
    std::string lms;
    std::shared_ptr<LmsPodRuntime> runtime;
    std::shared_ptr<LocalClusterExecutor> local;  // when the hub drives the LMS itself
    std::string mc_address;                       // the cluster's MC swm, when it has one
    std::shared_ptr<grpc::Channel> mc;            // channel to it (then no runtime)
  };
  // A copy of the rig of a cluster a stored plan is on (RigForKnown).
  absl::StatusOr<Rig> KnownRig(const std::string& cluster);
  absl::StatusOr<Rig*> RigForLms(const std::string& cluster, const std::string& lms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Rig*> RigForMc(const std::string& cluster, const std::string& swm)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The rig of a cluster a stored plan is on (its MC swm or LMS as
  // remembered, from swm.cluster_endpoints or the directory).
  absl::StatusOr<Rig*> RigForKnown(const std::string& cluster) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  PlanStore& plans_;
  const Clock& clock_;
  PeerChannels& channels_;
  PeerChannels& mc_channels_;
  std::shared_ptr<ClusterDirectory> directory_;
  HubMemberOptions options_;

  absl::Mutex mu_;
  std::map<std::string, Rig> rigs_ ABSL_GUARDED_BY(mu_);
  // Labels of the members the directory knows (set by Connect).
  std::map<std::string, ClusterLabels> directory_labels_ ABSL_GUARDED_BY(mu_);
  // MC members whose last view asked for SolveCluster (an L2 set on their swm).
  std::map<std::string, bool> solves_own_l2_ ABSL_GUARDED_BY(mu_);
  // Reads the members concurrently during a placement.
  BoundedExecutor readers_{8, 1024};
  // Watched views of the MC members (declared last: its streams end first).
  MemberViews views_;
};

}  // namespace codeco::swm
