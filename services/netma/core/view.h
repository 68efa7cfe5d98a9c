#pragma once
// The neighborhood-scoped network view Nemesys serves: the local cluster's
// measured links (NSM) plus its peers' links (federation summaries), as the
// scheduler's NetworkTopology (clusters, directed links, capabilities per
// service class) and as ALTO network and cost maps. Reads time only from the
// injected Clock.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codeco/common/clock.h"
#include "codeco/netma/v1/netma_service.pb.h"
#include "netma/core/alto.h"
#include "netma/core/federation.h"
#include "netma/core/monitor.h"

namespace codeco::netma {

/// Settings of the view.
struct ViewOptions {
  /// Share of a link's measured bandwidth offered to the ASSURED class, 0-1. Default 0.5.
  double assured_share = 0.5;
  /// Resource id under which the network map is published. Default "networkmap".
  std::string network_map_resource_id = "networkmap";
};

/// Builds topology, network and cost maps. Not thread-safe.
class NetworkView {
 public:
  /// A view over `monitor` and `federation` (not owned; must outlive it).
  NetworkView(const NetworkMonitor& monitor, const Federation& federation,
              const ViewOptions& options, const Clock& clock);

  /// Sets the endpoints (IP addresses or prefixes) of `cluster`'s PID.
  void SetEndpoints(const std::string& cluster, std::vector<std::string> endpoints);

  /// Links known in neighborhood `neighborhood_id` (all when empty): the local
  /// measurements first-hand, remote ones from summaries; ordered by link id.
  /// NOT_FOUND for an unknown neighborhood.
  absl::StatusOr<std::vector<codeco::netma::v1::LinkMetrics>> Links(
      const std::string& neighborhood_id) const;
  /// The scheduler's topology; its revision goes up exactly when nodes, links,
  /// capabilities or stale/failed marks change.
  absl::StatusOr<codeco::netma::v1::NetworkTopology> Topology(const std::string& neighborhood_id);
  /// The ALTO network map: one PID per cluster.
  absl::StatusOr<codeco::netma::v1::NetworkMap> NetworkMap(
      const std::string& neighborhood_id) const;
  /// The ALTO cost map asked for by `request`.
  absl::StatusOr<codeco::netma::v1::CostMap> CostMap(
      const codeco::netma::v1::GetCostMapRequest& request) const;
  /// The options in use.
  const ViewOptions& options() const { return options_; }

 private:
  absl::StatusOr<std::vector<std::string>> Clusters(const std::string& neighborhood_id) const;

  const NetworkMonitor& monitor_;
  const Federation& federation_;
  ViewOptions options_;
  const Clock& clock_;
  std::map<std::string, std::vector<std::string>> endpoints_;
  struct Revision {
    std::string tag;
    int64_t revision = 0;
  };
  std::map<std::string, Revision> topology_revisions_;  // by neighborhood id
};

}  // namespace codeco::netma
