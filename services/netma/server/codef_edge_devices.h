#pragma once
// EdgeDevices over CODEF's control API (codeco.codef.v1.CodefService/
// InstallVirtualLink, RemoveVirtualLink): in the testbed each cluster's relay
// is its network edge device, and the hub NetMA, the SDN controller, installs
// every virtual link there, so channel traffic without one is refused. The
// control API is plaintext on loopback (the emulator's host).

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "codeco/codef/v1/codef_service.grpc.pb.h"
#include "netma/core/virtual_links.h"

namespace codeco::netma {

/// CODEF's relays as edge devices. Thread-safe.
class CodefEdgeDevices final : public EdgeDevices {
 public:
  /// Talks to the control API at `address` (host:port); each call ends after `timeout`.
  explicit CodefEdgeDevices(const std::string& address,
                            absl::Duration timeout = absl::Seconds(2));
  absl::Status Install(const codeco::netma::v1::VirtualLink& link) override;
  absl::Status Remove(const std::string& id) override;

 private:
  std::unique_ptr<codeco::codef::v1::CodefService::Stub> stub_;
  absl::Duration timeout_;
};

}  // namespace codeco::netma
