#pragma once
// The federation interface of Nemesys: neighborhood-scoped link summaries
// exchanged with peers. A summary carries only the sender's links to members
// of one neighborhood; the receiver refuses a summary from a cluster that is
// not a member (PERMISSION_DENIED), validates every field before merging any
// (INVALID_ARGUMENT with the field path), keeps the newest entry per link and
// origin, marks entries stale after `stale_after` and drops them after
// `expire_after`.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codeco/common/clock.h"
#include "codeco/netma/v1/topology.pb.h"

namespace codeco::netma {

/// Settings of the neighborhood view.
struct FederationOptions {
  /// A remote entry older than this (by its measure time) is stale. Default 30 s.
  absl::Duration stale_after = absl::Seconds(30);
  /// A remote entry older than this is dropped. Default 5 min.
  absl::Duration expire_after = absl::Minutes(5);
};

/// Neighborhood membership and the merged view of peers' summaries. Not thread-safe.
class Federation {
 public:
  /// A view for `local_cluster`, reading time from `clock`.
  Federation(std::string local_cluster, const FederationOptions& options, const Clock& clock);

  /// Sets the members of neighborhood `id` (replacing earlier ones). Entries of
  /// origins no longer members are dropped. INVALID_ARGUMENT for an empty id or
  /// member name.
  absl::Status SetNeighborhood(const std::string& id, const std::vector<std::string>& members);
  /// Forgets neighborhood `id` and its entries.
  void RemoveNeighborhood(const std::string& id);
  /// Members of `id`; NOT_FOUND when unknown.
  absl::StatusOr<std::set<std::string>> Members(const std::string& id) const;
  /// Every neighborhood id, sorted.
  std::vector<std::string> NeighborhoodIds() const;
  /// Every cluster that shares a neighborhood with the local cluster (not itself).
  std::set<std::string> Peers() const;

  /// The local summary for neighborhood `id`: those of `local_links` that go
  /// to members. FAILED_PRECONDITION when the local cluster is not a member.
  absl::StatusOr<codeco::netma::v1::PeerSummary> BuildSummary(
      const std::string& id, const std::vector<codeco::netma::v1::LinkMetrics>& local_links);

  /// Merges `summary` received from the authenticated cluster `sender`.
  /// PERMISSION_DENIED when sender differs from summary.cluster or is not a
  /// member of the neighborhood (or the neighborhood is unknown here);
  /// INVALID_ARGUMENT (field path under "summary.") for malformed content.
  /// Nothing is merged unless everything is valid. Returns how many entries changed.
  absl::StatusOr<int> Merge(const std::string& sender,
                            const codeco::netma::v1::PeerSummary& summary);

  /// Drops entries past expire_after; returns how many.
  int Expire();
  /// Remote links of neighborhood `id` (every neighborhood when empty), newest
  /// per link, with age and the stale flag set at now.
  std::vector<codeco::netma::v1::LinkMetrics> RemoteLinks(const std::string& id) const;

 private:
  struct Entry {
    codeco::netma::v1::LinkMetrics link;
    absl::Time measured;
  };
  std::string local_cluster_;
  FederationOptions options_;
  const Clock& clock_;
  std::map<std::string, std::set<std::string>> neighborhoods_;
  // neighborhood -> origin cluster -> link id -> newest entry
  std::map<std::string, std::map<std::string, std::map<std::string, Entry>>> entries_;
  std::map<std::string, int64_t> revisions_;  // summary revision per neighborhood
};

}  // namespace codeco::netma
