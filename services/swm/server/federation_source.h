#pragma once
// Where the hub's SWM learns the federation it places onto: which clusters
// exist and how to reach their LMS (ClusterDirectory), and the links between
// them (LinkSource). The first implementations ask the CODEF control API
// (codef_directory.h); NetMA's measured topology replaces the LinkSource later.

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
};

}  // namespace codeco::swm
