#pragma once
// Unregistering a cluster drains it first: the cluster is marked draining
// (stored, so selection stops choosing it at once and a restart carries on),
// every application placed on it or scoped to it gets a neighborhood without
// it and is placed again, and only then is the cluster removed. Without
// `force`, a cluster whose applications have nowhere else to go stays (its
// mark cleared) and the call answers FAILED_PRECONDITION naming them.
// The same move, without removal, re-evaluates the neighborhoods of
// applications on a cluster that stays unreachable too long.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "acm/core/application_manager.h"
#include "acm/core/cluster_registry.h"
#include "acm/core/neighborhood_manager.h"
#include "codeco/acm/v1/acm_service.pb.h"
#include "codeco/common/clock.h"

namespace codeco::acm {

/// Drains and removes clusters.
class ClusterDrainer {
 public:
  /// All must outlive the drainer.
  ClusterDrainer(ClusterRegistry& clusters, NeighborhoodManager& neighborhoods,
                 ApplicationManager& applications, Clock& clock)
      : clusters_(clusters),
        neighborhoods_(neighborhoods),
        applications_(applications),
        clock_(clock) {}

  /// UnregisterCluster: drain, then remove. INVALID_ARGUMENT / NOT_FOUND name
  /// the `name` field. The operation is done when it answers: the
  /// applications moved are named in its phase; their placements proceed on
  /// their own (watch them).
  absl::StatusOr<v1::UnregisterClusterResponse> Unregister(
      const v1::UnregisterClusterRequest& request);
  /// Finishes the drains a restart interrupted (clusters still marked). Call
  /// once at start; returns how many clusters it removed.
  absl::StatusOr<int> Resume();
  /// Re-evaluates the neighborhoods of applications on clusters UNREACHABLE
  /// whose last heartbeat is at least `unreachable_for` old: each such
  /// application that can get a neighborhood without them is placed again
  /// (MIGRATING); one that cannot stays as it is; one already MIGRATING is
  /// left to finish. The clusters stay registered (they may come back).
  /// Call periodically; returns the applications moved.
  absl::StatusOr<std::vector<std::string>> ReevaluateDegraded(absl::Duration unreachable_for);

 private:
  ClusterRegistry& clusters_;
  NeighborhoodManager& neighborhoods_;
  ApplicationManager& applications_;
  Clock& clock_;
};

}  // namespace codeco::acm
