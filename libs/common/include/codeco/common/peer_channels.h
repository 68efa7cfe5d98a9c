#pragma once
// Channels from one codeco service to another. Every outgoing call to a peer
// goes through PeerChannels, so identity (mTLS with this process's
// certificate), plaintext for loopback development, and the cluster's egress
// proxy (in CODEF, the link emulator's relay, an HTTP CONNECT proxy) are
// decided in one place.

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/common/service_config.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"

namespace codeco {

/// How to reach peers.
struct PeerChannelOptions {
  /// Plaintext channels; only loopback targets are allowed then.
  bool insecure = false;
  /// mTLS files (used unless `insecure`).
  TlsFiles tls;
  /// host:port of an HTTP CONNECT proxy channels to other clusters go
  /// through; empty for direct connections.
  std::string egress_proxy;
  /// This process's own IP: targets on it are inside the cluster and skip the
  /// egress proxy (empty: every target goes through it).
  std::string local_ip;
  /// A channel older than this is replaced by a new one (a new connection)
  /// at its next use, e.g. so probes measure the path and not the history of
  /// one long-lived connection. Zero: never. Default: never.
  absl::Duration max_channel_age = absl::ZeroDuration();
  /// Longest wait between reconnection attempts to a peer that went away
  /// (gRPC's default is 2 min, longer than a restart takes). Default: 5 s.
  absl::Duration max_reconnect_backoff = absl::Seconds(5);
};

/// The options a service's config implies (insecure, tls.*, network.egress_proxy,
/// and the host of `listen` as the local IP).
PeerChannelOptions PeerChannelOptionsFrom(const ServiceConfig& config);

/// A cache of channels to peers, one per target, safe to share between threads.
class PeerChannels {
 public:
  /// Validates `options` (TLS files readable) and builds the credentials once.
  static absl::StatusOr<std::unique_ptr<PeerChannels>> Create(const PeerChannelOptions& options);

  /// The channel to `target` (host:port), created on first use (and renewed
  /// once older than max_channel_age). A plaintext PeerChannels refuses
  /// non-loopback targets with FAILED_PRECONDITION. The *_proxy environment
  /// variables are ignored: only egress_proxy is used.
  absl::StatusOr<std::shared_ptr<grpc::Channel>> Get(const std::string& target);

 private:
  PeerChannels() = default;
  PeerChannelOptions options_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  absl::Mutex mu_;
  /// A channel and when it was made.
  struct Made {
    std::shared_ptr<grpc::Channel> channel;
    absl::Time created;
  };
  std::map<std::string, Made> channels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace codeco
