#pragma once
// The real Prober: RTT from a grpc.health.v1.Health/Check call to the peer
// NetMA, throughput from one bounded ProbeBulk upload timed against that RTT.
// Channels are cached per address, use mTLS (or plaintext on loopback in
// development), and may go through an HTTP CONNECT proxy (the cluster's
// egress relay in CODEF) via the `grpc.http_proxy` channel argument.

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "codeco/common/service_config.h"
#include "codeco/netma/v1/netma_service.grpc.pb.h"
#include "grpcpp/channel.h"
#include "netma/core/federation.h"
#include "netma/core/probe_scheduler.h"

namespace codeco::netma {

/// How to reach peers.
struct PeerChannelOptions {
  /// Plaintext channels (development on loopback only).
  bool insecure = false;
  /// mTLS files, used unless `insecure`.
  TlsFiles tls;
  /// HTTP CONNECT proxy "host:port" for every channel (empty: direct).
  std::string http_proxy;
};

/// Channels to peer NetMAs, one per address. Thread-safe.
class PeerChannels {
 public:
  /// Channels made with `options`.
  explicit PeerChannels(PeerChannelOptions options) : options_(std::move(options)) {}
  /// The channel to `address`, created on first use.
  absl::StatusOr<std::shared_ptr<grpc::Channel>> Get(const std::string& address);

 private:
  PeerChannelOptions options_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
};

/// Prober over gRPC. Thread-safe; probes to different peers may run at once.
class GrpcProber final : public Prober {
 public:
  /// Probes through `channels` (not owned).
  explicit GrpcProber(PeerChannels& channels) : channels_(channels) {}
  absl::StatusOr<Result> Probe(const ProbeTask& task) override;

 private:
  PeerChannels& channels_;
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
