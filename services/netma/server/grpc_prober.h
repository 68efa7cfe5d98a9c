#pragma once
// The real Prober: RTT from a grpc.health.v1.Health/Check call to the peer
// NetMA, throughput from one bounded ProbeBulk upload timed against that RTT.
// Channels come from the services' one PeerChannels (libs/common): mTLS (or
// plaintext on loopback in development), through the cluster's egress proxy
// (the link emulator's relay in CODEF), renewed after max_channel_age.

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/common/peer_channels.h"
#include "codeco/common/service_config.h"
#include "codeco/netma/v1/netma_service.grpc.pb.h"
#include "grpcpp/channel.h"
#include "netma/core/federation.h"
#include "netma/core/probe_scheduler.h"

namespace codeco::netma {

/// Prober over gRPC. Thread-safe; probes to different peers may run at once.
class GrpcProber final : public Prober {
 public:
  /// Probes peers, and itself at `self_address` the same way (empty:
  /// ProbeSelf is UNIMPLEMENTED), through `channels` (not owned).
  GrpcProber(PeerChannels& channels, std::string self_address)
      : channels_(channels), self_address_(std::move(self_address)) {}
  absl::StatusOr<Result> Probe(const ProbeTask& task) override;
  absl::StatusOr<absl::Duration> ProbeSelf(absl::Duration timeout) override;

 private:
  PeerChannels& channels_;
  std::string self_address_;
};

/// The port the probe loop uses to swap neighborhood summaries with a peer.
class PeerSummaryExchange {
 public:
  virtual ~PeerSummaryExchange() = default;
  /// Sends `mine` to `peer` and returns the peer's summary together with the
  /// peer's verified cluster (from its certificate).
  struct Reply {
    /// The peer's summary.
    codeco::netma::v1::PeerSummary summary;
    /// The cluster the peer proved to be.
    std::string cluster;
  };
  /// One exchange; UNAVAILABLE and friends when the peer is away.
  virtual absl::StatusOr<Reply> Exchange(const Peer& peer,
                                         const codeco::netma::v1::PeerSummary& mine) = 0;
};

/// PeerSummaryExchange over gRPC with mTLS.
class GrpcSummaryExchange final : public PeerSummaryExchange {
 public:
  /// Exchanges through `channels` (not owned) with `timeout` per call.
  GrpcSummaryExchange(PeerChannels& channels, absl::Duration timeout)
      : channels_(channels), timeout_(timeout) {}
  absl::StatusOr<Reply> Exchange(const Peer& peer,
                                 const codeco::netma::v1::PeerSummary& mine) override;

 private:
  PeerChannels& channels_;
  absl::Duration timeout_;
};

}  // namespace codeco::netma
