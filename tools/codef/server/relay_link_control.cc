#include "relay_link_control.h"

namespace codeco::codef {

absl::Status RelayLinkControl::SetLink(const std::string& from, const std::string& to,
                                       const LinkProperties& properties) {
  LinkConditions conditions;
  conditions.one_way_latency_ns = properties.one_way_latency_ns;
  conditions.bandwidth_bps = properties.bandwidth_bps;
  conditions.loss = properties.loss;
  conditions.cut = properties.cut;
  return emulator_->SetLink(from, to, conditions);
}

absl::StatusOr<LinkProperties> RelayLinkControl::GetLink(const std::string& from,
                                                         const std::string& to) const {
  absl::StatusOr<LinkConditions> conditions = emulator_->GetLink(from, to);
  if (!conditions.ok()) return conditions.status();
  LinkProperties out;
  out.one_way_latency_ns = conditions->one_way_latency_ns;
  out.bandwidth_bps = conditions->bandwidth_bps;
  out.loss = conditions->loss;
  out.cut = conditions->cut;
  return out;
}

absl::Status RelayLinkControl::SetPartitioned(const std::string& cluster, bool partitioned) {
  return emulator_->SetPartitioned(cluster, partitioned);
}

}  // namespace codeco::codef
