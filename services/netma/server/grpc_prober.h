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
#include "absl/time/time.h"
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
  /// A channel older than this is replaced by a new one (a new connection)
  /// at its next use, so probes measure the path and not the history of one
  /// long-lived connection. Zero: never. Default 1 min.
  absl::Duration max_channel_age = absl::Minutes(1);
};

/// Channels to peer NetMAs, one per address. Thread-safe.
class PeerChannels {
 public:
  /// Channels made with `options`.
  explicit PeerChannels(PeerChannelOptions options) : options_(std::move(options)) {}
  /// The channel to `address`, created on first use and renewed once older
  /// than options.max_channel_age.
  absl::StatusOr<std::shared_ptr<grpc::Channel>> Get(const std::string& address);

 private:
  /// A channel and when it was made.
  struct Made {
    std::shared_ptr<grpc::Channel> channel;
    absl::Time created;
  };
  PeerChannelOptions options_;
  absl::Mutex mu_;
  std::map<std::string, Made> channels_ ABSL_GUARDED_BY(mu_);
};

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
