#pragma once
// Where the hub's SWM learns the federation it places onto when a member
// has no swm of its own: which clusters exist and how to reach their LMS
// (ClusterDirectory, the CODEF control API's testbed adapter in
// codef_directory.h), and the links between them (LinkSource: NetMA's
// measured topology in one read, netma_link_source.h; CODEF's configured
// links in the testbed).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "swm/core/model.h"

namespace codeco::swm {

/// One cluster as a directory knows it.
struct ClusterEndpoint {
  std::string name;      ///< Cluster name.
  ClusterLabels labels;  ///< Region, country, tier, provider.
  std::string lms;       ///< host:port of its codeco.lms.v1.LmsService ("" = none).
};

/// The clusters of the federation and their endpoints.
class ClusterDirectory {
 public:
  virtual ~ClusterDirectory() = default;
  /// Every known cluster; UNAVAILABLE when the directory cannot be asked.
  virtual absl::StatusOr<std::vector<ClusterEndpoint>> ListClusters() = 0;
};

/// The inter-cluster links as SWM plans with them.
class LinkSource {
 public:
  virtual ~LinkSource() = default;
  /// The direct link from -> to (latency, free bandwidth per class), or
  /// nullopt when there is none (cut, or never configured).
  virtual absl::StatusOr<std::optional<Link>> GetLink(const std::string& from,
                                                      const std::string& to) = 0;
  /// Every direct link among `clusters` (each direction its own Link), in
  /// one read of the source: what a placement asks. The default asks GetLink
  /// for every ordered pair (n*(n-1) calls: a testbed adapter's way); a
  /// source with a whole-topology read (NetMA) overrides it.
  virtual absl::StatusOr<std::vector<Link>> ListLinks(const std::vector<std::string>& clusters) {
    std::vector<Link> out;
    for (const std::string& from : clusters) {
      for (const std::string& to : clusters) {
        if (from == to) continue;
        absl::StatusOr<std::optional<Link>> link = GetLink(from, to);
        if (!link.ok()) return link.status();
        if (link->has_value()) out.push_back(**link);
      }
    }
    return out;
  }
};

}  // namespace codeco::swm
