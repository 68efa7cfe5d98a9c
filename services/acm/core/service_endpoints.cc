#include "acm/core/service_endpoints.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "acm/core/cam_parser.h"
#include "codeco/common/status.h"

namespace codeco::acm {

absl::StatusOr<ServiceName> ParseServiceName(const std::string& name, const std::string& field) {
  if (name.empty()) return InvalidFieldError(field, "required");
  if (name.size() > 256) return InvalidFieldError(field, "longer than 256 bytes");
  std::string_view rest = name;
  if (rest.ends_with(kClustersetSuffix)) {
    rest.remove_suffix(std::string_view(kClustersetSuffix).size());
  }
  const size_t dot = rest.find('.');
  const std::string_view service = rest.substr(0, dot);
  const std::string_view application =
      dot == std::string_view::npos ? std::string_view() : rest.substr(dot + 1);
  if (dot == std::string_view::npos || !IsDnsLabel(service) || !IsDnsLabel(application)) {
    return InvalidFieldError(
        field, absl::StrCat("\"", name, "\" is not <service>.<application>[", kClustersetSuffix,
                            "] with both parts DNS labels"));
  }
  return ServiceName{std::string(service), std::string(application)};
}

std::string ClustersetName(const ServiceName& name) {
  return absl::StrCat(name.service, ".", name.application, kClustersetSuffix);
}

absl::StatusOr<v1::ResolveServiceResponse> ResolveEndpoints(const v1::Application& app,
                                                            const ServiceName& name,
                                                            const std::string& from_cluster,
                                                            bool include_not_ready,
                                                            const RegionOf& region_of) {
  const auto& services = app.spec().services();
  auto spec = std::find_if(services.begin(), services.end(),
                           [&](const v1::ServiceSpec& s) { return s.name() == name.service; });
  if (spec == services.end()) {
    return absl::NotFoundError(absl::StrCat("name: application \"", name.application,
                                            "\" has no service \"", name.service, "\""));
  }
  v1::ResolveServiceResponse out;
  out.set_name(ClustersetName(name));
  *out.mutable_ports() = spec->ports();

  const std::string from_region = from_cluster.empty() ? "" : region_of(from_cluster);
  auto locality = [&](const std::string& cluster) {
    if (from_cluster.empty()) return v1::ENDPOINT_LOCALITY_UNSPECIFIED;
    if (cluster == from_cluster) return v1::ENDPOINT_LOCALITY_SAME_CLUSTER;
    if (!from_region.empty() && region_of(cluster) == from_region) {
      return v1::ENDPOINT_LOCALITY_SAME_REGION;
    }
    return v1::ENDPOINT_LOCALITY_REMOTE;
  };
  std::vector<v1::ServiceEndpoint> endpoints;
  for (const v1::ServicePlacement& p : app.status().placements()) {
    if (p.service() != name.service || (!p.ready() && !include_not_ready)) continue;
    v1::ServiceEndpoint& e = endpoints.emplace_back();
    e.set_cluster(p.cluster());
    e.set_node(p.node());
    e.set_pod(p.pod());
    e.set_ready(p.ready());
    if (p.ready()) *e.mutable_addresses() = p.addresses();
    e.set_locality(locality(p.cluster()));
  }
  std::sort(
      endpoints.begin(), endpoints.end(),
      [](const v1::ServiceEndpoint& a, const v1::ServiceEndpoint& b) {
        return std::make_tuple(static_cast<int>(a.locality()), !a.ready(), a.cluster(), a.pod()) <
               std::make_tuple(static_cast<int>(b.locality()), !b.ready(), b.cluster(), b.pod());
      });
  for (v1::ServiceEndpoint& e : endpoints) *out.add_endpoints() = std::move(e);
  return out;
}

}  // namespace codeco::acm
