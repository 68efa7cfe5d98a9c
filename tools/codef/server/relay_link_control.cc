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

absl::Status RelayLinkControl::PutVirtualLink(const std::string& id, const std::string& source,
                                              const std::string& target,
                                              const std::string& endpoint) {
  return emulator_->PutVirtualLink(VirtualLinkRoute{id, source, target, endpoint});
}

absl::Status RelayLinkControl::DeleteVirtualLink(const std::string& id) {
  return emulator_->DeleteVirtualLink(id);
}

size_t RelayLinkControl::VirtualLinkCount() const { return emulator_->VirtualLinks().size(); }

}  // namespace codeco::codef
