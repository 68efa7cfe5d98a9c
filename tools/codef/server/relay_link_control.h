#pragma once
// The LinkControl port over the link emulator (tools/codef/relay): the
// conditions codef sets are what the relays impose on real traffic.

#include <string>

#include "link_control.h"
#include "tools/codef/relay/link_emulator.h"

namespace codeco::codef {

/// Drives a LinkEmulator. Thread-safe (the emulator is).
class RelayLinkControl final : public LinkControl {
 public:
  /// Controls `emulator`, which must outlive this object.
  explicit RelayLinkControl(LinkEmulator* emulator) : emulator_(emulator) {}
  absl::Status SetLink(const std::string& from, const std::string& to,
                       const LinkProperties& properties) override;
  absl::StatusOr<LinkProperties> GetLink(const std::string& from,
                                         const std::string& to) const override;
  absl::Status SetPartitioned(const std::string& cluster, bool partitioned) override;
  absl::Status PutVirtualLink(const std::string& id, const std::string& source,
                              const std::string& target, const std::string& endpoint) override;
  absl::Status DeleteVirtualLink(const std::string& id) override;
  size_t VirtualLinkCount() const override;

 private:
  LinkEmulator* emulator_;
};

}  // namespace codeco::codef
