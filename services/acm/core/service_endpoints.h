#pragma once
// Multi-cluster services (mck8s MCS, the Kubernetes multi-cluster services
// API): a service of an application has one name across the clusterset,
// "<service>.<application>.svc.clusterset.local", that resolves to the
// endpoints of its replicas in every cluster, nearest to the asking cluster
// first. The endpoints are the ones the clusters' agents report with their
// heartbeats (ApplicationStatus.placements[].addresses).

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "codeco/acm/v1/acm_service.pb.h"
#include "codeco/acm/v1/application.pb.h"

namespace codeco::acm {

/// The suffix that makes a clusterset name whole.
inline constexpr char kClustersetSuffix[] = ".svc.clusterset.local";

/// A multi-cluster service name split into its parts.
struct ServiceName {
  /// The service (a DNS label).
  std::string service;
  /// The application it belongs to (a DNS label).
  std::string application;
};

/// Parses "<service>.<application>", with or without kClustersetSuffix;
/// INVALID_ARGUMENT naming `field` when it is not two DNS labels.
absl::StatusOr<ServiceName> ParseServiceName(const std::string& name,
                                             const std::string& field = "name");

/// "<service>.<application>.svc.clusterset.local".
std::string ClustersetName(const ServiceName& name);

/// A cluster's region (its "region" label), "" when unknown.
using RegionOf = std::function<std::string(const std::string& cluster)>;

/// Resolves `name` in `app`: the service's declared ports and one endpoint
/// per replica the status places (ready ones only unless
/// `include_not_ready`), ordered by locality to `from_cluster` (same
/// cluster, same region, the rest; none when it is empty), then ready
/// first, then by cluster and pod. NOT_FOUND naming "name" when the
/// application has no such service.
absl::StatusOr<v1::ResolveServiceResponse> ResolveEndpoints(const v1::Application& app,
                                                            const ServiceName& name,
                                                            const std::string& from_cluster,
                                                            bool include_not_ready,
                                                            const RegionOf& region_of);

}  // namespace codeco::acm
