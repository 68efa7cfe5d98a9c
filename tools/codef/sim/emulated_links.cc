#include "emulated_links.h"

namespace codeco::codef {

std::optional<swm::Link> EmulatedLink(const Federation& federation, const std::string& from,
                                      const std::string& to) {
  absl::StatusOr<LinkProperties> link = federation.GetLink(from, to);
  if (!link.ok() || link->cut) return std::nullopt;
  int64_t bandwidth = link->bandwidth_bps > 0 ? link->bandwidth_bps : kUnlimitedBandwidthBps;
  return swm::Link{.from = from,
                   .to = to,
                   .latency_ns = link->one_way_latency_ns,
                   .free_bandwidth_bps = {bandwidth, bandwidth}};
}

}  // namespace codeco::codef
