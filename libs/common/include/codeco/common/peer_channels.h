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
  /// egress proxy.
  std::string local_ip;
};

/// The options a service's config implies (insecure, tls.*, network.egress_proxy,
/// and the host of `listen` as the local IP).
PeerChannelOptions PeerChannelOptionsFrom(const ServiceConfig& config);

/// A cache of channels to peers, one per target, safe to share between threads.
class PeerChannels {
 public:
  /// Validates `options` (TLS files readable) and builds the credentials once.
  static absl::StatusOr<std::unique_ptr<PeerChannels>> Create(const PeerChannelOptions& options);

  /// The channel to `target` (host:port), created on first use. A plaintext
  /// PeerChannels refuses non-loopback targets with FAILED_PRECONDITION.
  absl::StatusOr<std::shared_ptr<grpc::Channel>> Get(const std::string& target);

 private:
  PeerChannels() = default;
  PeerChannelOptions options_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace codeco
