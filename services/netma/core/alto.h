#pragma once
// Nemesys' ALTO exposure (RFC 7285): a network map whose PIDs are clusters,
// and cost maps for delay, available bandwidth, loss and energy between PIDs
// with a direct link. Maps are built as codeco.netma.v1 messages and rendered
// as RFC 7285 JSON documents. A network map's vtag is a hash of its content,
// so it changes exactly when the content changes; cost maps name it in
// dependent-vtags.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codeco/netma/v1/topology.pb.h"
#include "nlohmann/json.hpp"

namespace codeco::netma {

/// RFC 7285 media type of a network map.
inline constexpr char kAltoNetworkMapMediaType[] = "application/alto-networkmap+json";
/// RFC 7285 media type of a cost map.
inline constexpr char kAltoCostMapMediaType[] = "application/alto-costmap+json";
/// RFC 7285 media type of an error.
inline constexpr char kAltoErrorMediaType[] = "application/alto-error+json";

/// The measured cost of one directed link between two PIDs.
struct LinkCost {
  /// Source PID.
  std::string source;
  /// Destination PID.
  std::string destination;
  /// One-way delay, nanoseconds.
  int64_t delay_ns = 0;
  /// Available bandwidth, bits per second.
  int64_t bandwidth_bps = 0;
  /// Loss, ratio 0-1.
  double loss_ratio = 0;
  /// Energy per byte, joules.
  double energy_joules_per_byte = 0;
};

/// A stable 64-bit FNV-1a hash of `data` as 16 lowercase hex digits.
std::string ContentTag(const std::string& data);

/// A network map with PIDs `pids` (name -> endpoint addresses or prefixes) and
/// a vtag derived from its content.
codeco::netma::v1::NetworkMap BuildNetworkMap(
    const std::map<std::string, std::vector<std::string>>& pids);

/// A cost map of `metric` in `mode` over `network_map`'s PIDs from `costs`;
/// entries whose PIDs are not in the map are left out, and so are sources or
/// destinations outside non-empty filters. INVALID_ARGUMENT for metric
/// UNSPECIFIED or an unknown PID in a filter.
absl::StatusOr<codeco::netma::v1::CostMap> BuildCostMap(
    const codeco::netma::v1::NetworkMap& network_map, const std::vector<LinkCost>& costs,
    codeco::netma::v1::CostMetric metric, codeco::netma::v1::CostMode mode,
    const std::vector<std::string>& source_pids, const std::vector<std::string>& destination_pids);

/// The ALTO cost-metric string of `metric` ("delay-ow", "bw-available",
/// "lossrate", "priv:codeco-energy-per-byte").
std::string AltoCostMetricName(codeco::netma::v1::CostMetric metric);
/// The metric for a URL segment: "delay", "bandwidth", "loss" or "energy";
/// INVALID_ARGUMENT otherwise.
absl::StatusOr<codeco::netma::v1::CostMetric> ParseCostMetricSegment(const std::string& segment);

/// The RFC 7285 network-map document (section 11.2.1.6) of `map`, published
/// under `resource_id`. Endpoints are grouped as "ipv4" / "ipv6" prefixes; a
/// bare address becomes a /32 or /128 prefix; names that are not IP
/// addresses are left out.
nlohmann::json NetworkMapToAltoJson(const codeco::netma::v1::NetworkMap& map,
                                    const std::string& resource_id);
/// The RFC 7285 cost-map document (section 11.2.3.6) of `map`, whose PIDs come
/// from the network map published under `network_map_resource_id`.
nlohmann::json CostMapToAltoJson(const codeco::netma::v1::CostMap& map,
                                 const std::string& network_map_resource_id);

/// OK when `doc` has the shape of an RFC 7285 network-map response;
/// INVALID_ARGUMENT naming the first wrong JSON path otherwise.
absl::Status ValidateAltoNetworkMap(const nlohmann::json& doc);
/// OK when `doc` has the shape of an RFC 7285 cost-map response.
absl::Status ValidateAltoCostMap(const nlohmann::json& doc);

}  // namespace codeco::netma
