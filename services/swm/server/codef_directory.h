#pragma once
// ClusterDirectory and LinkSource over the CODEF control API
// (codeco.codef.v1.CodefService): ListClusters gives each cluster's labels
// and LMS endpoint; GetLinkConditions gives each directed link's one-way
// latency and bandwidth cap (0 = unlimited, planned as `unlimited_bandwidth_bps`);
// a cut link is no link. Every call carries a deadline.

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "codeco/codef/v1/codef_service.grpc.pb.h"
#include "grpcpp/channel.h"
#include "swm/server/federation_source.h"

namespace codeco::swm {

/// How CodefDirectory calls the control API.
struct CodefDirectoryOptions {
  /// Deadline of every call from when it starts. Default: 10 s.
  absl::Duration call_timeout = absl::Seconds(10);
  /// Bandwidth planned for a link without a cap, bits/s. Default: 100 Gbit/s.
  int64_t unlimited_bandwidth_bps = 100'000'000'000;
};

/// The CODEF control API as a directory and link source. Thread-safe.
class CodefDirectory final : public ClusterDirectory, public LinkSource {
 public:
  /// Calls the CodefService behind `channel`.
  CodefDirectory(std::shared_ptr<grpc::Channel> channel, CodefDirectoryOptions options = {});

  absl::StatusOr<std::vector<ClusterEndpoint>> ListClusters() override;
  absl::StatusOr<std::optional<Link>> GetLink(const std::string& from,
                                              const std::string& to) override;

 private:
  std::unique_ptr<codeco::codef::v1::CodefService::Stub> stub_;
  CodefDirectoryOptions options_;
};

}  // namespace codeco::swm
