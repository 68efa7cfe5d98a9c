#include "emulated_links.h"

namespace codeco::codef {

swm::Link SchedulerLink(const std::string& from, const std::string& to, int64_t latency_ns,
                        int64_t bandwidth_bps) {
  const int64_t bandwidth = bandwidth_bps > 0 ? bandwidth_bps : kUnlimitedBandwidthBps;
  return swm::Link{.from = from,
                   .to = to,
                   .latency_ns = latency_ns,
                   .free_bandwidth_bps = {bandwidth, bandwidth}};
}

std::optional<swm::Link> EmulatedLink(const Federation& federation, const std::string& from,
                                      const std::string& to) {
  absl::StatusOr<LinkProperties> link = federation.GetLink(from, to);
  if (!link.ok() || link->cut) return std::nullopt;
  return SchedulerLink(from, to, link->one_way_latency_ns, link->bandwidth_bps);
}

}  // namespace codeco::codef
