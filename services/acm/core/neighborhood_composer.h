#pragma once
// CNC, the CODECO Neighborhood Composer: splits the expensive part from the
// per-application part. Partition() (slow timescale, periodic) groups the
// registered clusters into similarity classes by tier, region, capacity band
// and carbon band, and indexes them. Select() (deploy time) visits only the
// classes an application's hard constraints allow, filters their clusters
// (role, health, country, compliance, security, capacity, latency to the
// origin), scores the rest for the performance profile and returns a bounded
// neighborhood.
//
// Cluster labels read (metadata.labels):
//   codeco.io/compliance      comma-separated compliance classes it meets, e.g. "gdpr,high"
//   codeco.io/security-class  Low | Medium | High (a cluster meets its level and below)
// Latency to the origin is estimated from coordinates (ClusterLabels latitude
// and longitude): 1 ms plus 10 us per km of great-circle distance to the
// origin (a cluster, or the centroid of a region's clusters); a cluster
// without coordinates is within any bound only in the origin's own region.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codeco/acm/v1/acm_service.pb.h"

namespace codeco::acm {

/// What Select() may return.
struct SelectionOptions {
  /// Most clusters in a neighborhood. Default: 8.
  int max_members = 8;
};

/// Similarity partitioning and bounded neighborhood selection.
class NeighborhoodComposer {
 public:
  /// Rebuilds the partition from `clusters` (replacing the previous one).
  void Partition(std::vector<v1::Cluster> clusters);
  /// A neighborhood for `spec` of at most options.max_members clusters that
  /// meet every hard constraint, best first for the performance profile.
  /// FAILED_PRECONDITION, saying why per constraint, when no cluster qualifies.
  absl::StatusOr<v1::Neighborhood> Select(const v1::ApplicationSpec& spec,
                                          const SelectionOptions& options = {}) const;
  /// Number of similarity classes in the current partition.
  size_t class_count() const { return classes_.size(); }
  /// The class id of a cluster ("" when not partitioned).
  std::string ClassOf(const std::string& cluster) const;

 private:
  struct Entry {
    v1::Cluster cluster;
    int class_index = 0;
    bool has_geo = false;
    int security_level = 0;
    std::vector<std::string> compliance;  // lower-cased codeco.io/compliance entries
  };
  struct Class {
    std::string id;
    std::string region;
    std::vector<int> members;  // indexes into entries_
  };
  struct Point {
    double lat = 0;
    double lon = 0;
  };

  std::vector<Entry> entries_;
  std::vector<Class> classes_;
  std::map<std::string, int> by_name_;
  std::map<std::string, Point> region_centroids_;
};

}  // namespace codeco::acm
