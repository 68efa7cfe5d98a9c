#pragma once
// A managed cluster's local copies of what the hub decided for it: the
// neighborhoods it belongs to and its part of each application's assignment,
// so that it keeps (and can serve) them while the hub is out of reach and
// after a restart. Fed by the hub's PushNeighborhood / PushAssignment and by
// the agent's reconciliation with the hub (Sync*); each write only moves
// forward (a lower revision than the stored one is ignored).
//
// Key layout (values are serialized codeco.acm.v1 protos):
//   neighborhoods <neighborhood id> -> Neighborhood   (the family the hub's
//                 NeighborhoodManager uses, so GetNeighborhood/ListNeighborhoods
//                 serve the copies on an MC unchanged)
//   assignments   <application>     -> ClusterAssignment

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "codeco/acm/v1/acm_service.pb.h"
#include "codeco/common/kv_store.h"

namespace codeco::acm {

/// The column families LocalCopies needs.
std::vector<std::string> LocalCopyColumnFamilies();

/// An MC's stored neighborhoods and assignments. Thread-safe.
class LocalCopies {
 public:
  /// Copies of cluster `cluster` on `kv` (which must hold
  /// LocalCopyColumnFamilies() and outlive it).
  LocalCopies(KvStore& kv, std::string cluster) : kv_(kv), cluster_(std::move(cluster)) {}

  /// Stores (or with `deleted`, removes) a neighborhood unless the stored
  /// revision is newer. INVALID_ARGUMENT names the field.
  absl::StatusOr<v1::PushNeighborhoodResponse> PushNeighborhood(
      const v1::PushNeighborhoodRequest& request);
  /// Stores this cluster's assignment of an application unless the stored
  /// plan revision is newer. INVALID_ARGUMENT names the field (also for an
  /// assignment meant for another cluster).
  absl::StatusOr<v1::PushAssignmentResponse> PushAssignment(
      const v1::PushAssignmentRequest& request);
  /// Makes the stored neighborhoods exactly `current` (the hub's list of those
  /// containing this cluster): newer ones stored, missing ones removed.
  /// Returns how many copies changed.
  absl::StatusOr<int> SyncNeighborhoods(const std::vector<v1::Neighborhood>& current);
  /// Makes the stored assignments exactly `current`, as SyncNeighborhoods.
  absl::StatusOr<int> SyncAssignments(const std::vector<v1::ClusterAssignment>& current);
  /// Stored neighborhood id -> revision (for the heartbeat).
  absl::StatusOr<std::map<std::string, int64_t>> NeighborhoodRevisions() const;
  /// Stored application -> plan revision (for the heartbeat).
  absl::StatusOr<std::map<std::string, int64_t>> AssignmentRevisions() const;
  /// The stored assignment of `application`, or NOT_FOUND.
  absl::StatusOr<v1::ClusterAssignment> GetAssignment(const std::string& application) const;
  /// This cluster's name.
  const std::string& cluster() const { return cluster_; }

 private:
  absl::StatusOr<bool> StoreNeighborhoodLocked(const v1::Neighborhood& nb, int64_t* stored)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<bool> StoreAssignmentLocked(const v1::ClusterAssignment& a, int64_t* stored)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  KvStore& kv_;
  const std::string cluster_;
  absl::Mutex mu_;
};

/// This cluster's part of each application placed on it (from the hub's
/// applications): its pods, the specs of their services, the channels with
/// an end in those services. `issue_time` stamps them.
std::vector<v1::ClusterAssignment> AssignmentsFor(const std::string& cluster,
                                                  const std::vector<v1::Application>& apps,
                                                  const google::protobuf::Timestamp& issue_time);

}  // namespace codeco::acm
