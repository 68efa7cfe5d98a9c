#pragma once
// LinkSource over NetMA's measured topology (codeco.netma.v1.NetmaService/
// GetNetworkTopology): the scheduler plans with what the network does, not
// with what a scenario configured. Per directed link:
//   - measured and fresh: the measured one-way latency and the free bandwidth
//     NetMA gives each service class;
//   - measured as failed (consecutive probe failures): no link;
//   - never measured, or stale: the fallback source's link (configured
//     conditions), so a federation can place before its first probes.
// The topology is fetched at most once per `refresh` (one call serves the
// n^2 GetLink calls of a solve); a failed fetch uses the fallback for all.

#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/common/clock.h"
#include "codeco/netma/v1/netma_service.grpc.pb.h"
#include "grpcpp/channel.h"
#include "swm/server/federation_source.h"

namespace codeco::swm {

/// How NetmaLinkSource asks NetMA.
struct NetmaLinkSourceOptions {
  /// A topology younger than this is reused. Default: 1 s.
  absl::Duration refresh = absl::Seconds(1);
  /// Deadline of each GetNetworkTopology call. Default: 2 s.
  absl::Duration call_timeout = absl::Seconds(2);
};

/// Measured links from NetMA, configured ones where nothing is measured. Thread-safe.
class NetmaLinkSource final : public LinkSource {
 public:
  /// Asks the NetmaService behind `channel`; `fallback` (may be null: then an
  /// unmeasured link is no link) answers for links NetMA has not measured.
  NetmaLinkSource(std::shared_ptr<grpc::Channel> channel, std::shared_ptr<LinkSource> fallback,
                  const Clock& clock, NetmaLinkSourceOptions options = {});

  absl::StatusOr<std::optional<Link>> GetLink(const std::string& from,
                                              const std::string& to) override;
  /// One GetNetworkTopology read (at most once per `refresh`) for every
  /// pair; the fallback is asked once, with ListLinks, only when some pair is
  /// not measured.
  absl::StatusOr<std::vector<Link>> ListLinks(const std::vector<std::string>& clusters) override;

 private:
  /// What NetMA says about one directed link.
  struct Measured {
    bool failed = false;  ///< Down: no link.
    Link link;            ///< Latency and free bandwidth when up.
  };

  /// Refetches the topology when it is older than options_.refresh.
  void RefreshLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::unique_ptr<codeco::netma::v1::NetmaService::Stub> stub_;
  std::shared_ptr<LinkSource> fallback_;
  const Clock& clock_;
  NetmaLinkSourceOptions options_;
  absl::Mutex mu_;
  absl::Time fetched_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  /// Fresh measurements by "<from>-><to>".
  std::map<std::string, Measured> measured_ ABSL_GUARDED_BY(mu_);
};

}  // namespace codeco::swm
