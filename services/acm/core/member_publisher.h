#pragma once
// The hub's side of the managed clusters' local copies: it pushes each
// cluster its neighborhoods (PushNeighborhood) and its part of each placed
// application (PushAssignment) as soon as they change, so an MC holds what
// the hub decided before the hub can go out of reach. Pushes are a fast
// path only: every MC agent still pulls the same copies from the hub on
// each heartbeat (ClusterAgent), which repairs a lost push and catches up
// after an outage on either side.
//
// The publisher follows the application change log (ApplicationManager's
// ReadChanges) from the revision it was started at; for every changed
// application it computes each cluster's assignment (AssignmentsFor) and
// pushes it where it differs from what was last pushed there. A cluster the
// application left (moved or deleted) is pushed an assignment with no pods
// ("run nothing of this application"), and a member that left a
// neighborhood, or every member of a deleted application's neighborhood, a
// deletion of it. A cluster is reached at the "acm" endpoint it registered
// (Cluster.endpoints, acm.advertise); a cluster without one, or UNREACHABLE,
// is skipped (its agent pulls). Pure logic over ports and a Clock.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "acm/core/application_manager.h"
#include "acm/core/cluster_registry.h"
#include "acm/core/neighborhood_manager.h"
#include "codeco/acm/v1/acm_service.pb.h"
#include "codeco/common/clock.h"

namespace codeco::acm {

/// The Cluster.endpoints key of a managed cluster's own ACM.
inline constexpr char kAcmEndpoint[] = "acm";

/// How the hub reaches a managed cluster's ACM (the server adapts gRPC).
class MemberPushPort {
 public:
  virtual ~MemberPushPort() = default;
  /// Sends `request` to the ACM of `cluster` at `endpoint` (host:port).
  virtual absl::Status PushNeighborhood(const std::string& cluster, const std::string& endpoint,
                                        const v1::PushNeighborhoodRequest& request) = 0;
  /// Sends `request` to the ACM of `cluster` at `endpoint` (host:port).
  virtual absl::Status PushAssignment(const std::string& cluster, const std::string& endpoint,
                                      const v1::PushAssignmentRequest& request) = 0;
};

/// What one Step did.
struct PublishStats {
  /// Changes read from the log.
  int changes = 0;
  /// Pushes the clusters accepted.
  int pushed = 0;
  /// Pushes that failed (the cluster's agent pulls the same copy later).
  int failed = 0;
  /// Pushes not sent: the cluster has no "acm" endpoint or is UNREACHABLE.
  int skipped = 0;
  /// True when the change log had moved past the publisher (it then
  /// starts again from the current revision; agents pull what it missed).
  bool fell_behind = false;
};

/// Settings of a MemberPublisher.
struct MemberPublisherOptions {
  /// Changes read from the log per Step. Default: 256.
  size_t changes_per_step = 256;
};

/// Pushes neighborhoods and assignments to managed clusters as they change.
/// Not thread-safe: one caller runs Step.
class MemberPublisher {
 public:
  /// Starts after the current revision of `manager`. Every argument must
  /// outlive the publisher.
  MemberPublisher(const ApplicationManager& manager, NeighborhoodProvider& neighborhoods,
                  const ClusterRegistry& clusters, MemberPushPort& push, const Clock& clock,
                  MemberPublisherOptions options = {});

  /// Pushes what the changes since the last Step call for, up to
  /// changes_per_step changes. Call again while it returns a full batch.
  absl::StatusOr<PublishStats> Step();

 private:
  // Pushes what changed `app` (its state after the change) calls for.
  void Publish(const v1::Application& app, bool deleted, PublishStats& stats);
  // The "acm" endpoint of a reachable `cluster`, or empty.
  std::string EndpointOf(const std::string& cluster) const;
  // Sends `request` to `cluster`, counting the outcome; true when accepted.
  bool SendAssignment(const std::string& cluster, const v1::PushAssignmentRequest& request,
                      PublishStats& stats);
  bool SendNeighborhood(const std::string& cluster, const v1::PushNeighborhoodRequest& request,
                        PublishStats& stats);

  const ApplicationManager& manager_;
  NeighborhoodProvider& neighborhoods_;
  const ClusterRegistry& clusters_;
  MemberPushPort& push_;
  const Clock& clock_;
  const MemberPublisherOptions options_;
  // Revision of the last change handled.
  int64_t after_ = 0;
  // application -> cluster -> the assignment last pushed there (without its
  // issue time), so an unchanged one is not pushed again.
  std::map<std::string, std::map<std::string, std::string>> assigned_;
  // application -> (neighborhood id, revision) last pushed, and to whom.
  struct PushedNeighborhood {
    std::string id;
    int64_t revision = 0;
    std::set<std::string> members;
  };
  std::map<std::string, PushedNeighborhood> neighborhood_of_;
};

}  // namespace codeco::acm
