#pragma once
// VirtualLinkPort over NetMA's virtual-link RPCs
// (codeco.netma.v1.NetmaService/CreateVirtualLink, DeleteVirtualLink,
// ListVirtualLinks): the hub SWM sets up one virtual link per inter-cluster
// channel of a committed plan, marked managed_by "swm", and tears it down
// with the plan. ListAll reads every link with its measured phase for the
// channel tracker.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "codeco/netma/v1/netma_service.grpc.pb.h"
#include "grpcpp/channel.h"
#include "swm/core/execution.h"

namespace codeco::swm {

/// NetMA's virtual links as a VirtualLinkPort. Thread-safe.
class NetmaVirtualLinks final : public VirtualLinkPort {
 public:
  /// Asks the NetmaService behind `channel`; each call ends by its deadline
  /// or after `call_timeout`, whichever comes first.
  NetmaVirtualLinks(std::shared_ptr<grpc::Channel> channel,
                    absl::Duration call_timeout = absl::Seconds(5));

  absl::StatusOr<std::string> Create(const VirtualLinkSpec& spec, const std::string& request_id,
                                     absl::Time deadline) override;
  absl::Status Delete(const std::string& id, absl::Time deadline) override;
  absl::StatusOr<std::vector<VirtualLinkRef>> List(const std::string& application,
                                                   absl::Time deadline) override;
  /// Every virtual link NetMA holds, as stored (phase, measurements).
  absl::StatusOr<std::vector<codeco::netma::v1::VirtualLink>> ListAll(
      const std::string& application, absl::Time deadline);

 private:
  absl::Time Deadline(absl::Time deadline) const;
  std::unique_ptr<codeco::netma::v1::NetmaService::Stub> stub_;
  absl::Duration call_timeout_;
};

}  // namespace codeco::swm
