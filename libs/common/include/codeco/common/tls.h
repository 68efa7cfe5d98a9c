#pragma once
// Mutual TLS for every codeco server and channel. Both sides present a
// certificate from the federation CA; servers require and verify the client's.
// Files are watched and re-read every TlsFiles::refresh_interval, so rotated
// certificates (and CA bundles) take effect without a restart.
//
// Identities are SPIFFE IDs in the certificate's URI SAN:
//   spiffe://codeco/cluster/<cluster>/<service>

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "codeco/common/service_config.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace grpc {
class AuthContext;
}

namespace codeco {

/// Who is on the other end of a call.
struct SpiffeIdentity {
  /// Cluster name (the trust unit of the federation).
  std::string cluster;
  /// Service name, e.g. "acm".
  std::string service;
};

/// Parses "spiffe://codeco/cluster/<cluster>/<service>"; INVALID_ARGUMENT otherwise.
absl::StatusOr<SpiffeIdentity> ParseSpiffeId(std::string_view uri);

/// The SPIFFE URI for `cluster` and `service`.
std::string SpiffeId(const std::string& cluster, const std::string& service);

/// Checks that the three files exist and hold PEM data; errors name the key.
absl::Status CheckTlsFiles(const TlsFiles& files);

/// Server credentials that present `files`' certificate and require a client
/// certificate chaining to its CA.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files);

/// Channel credentials that present `files`' certificate and verify the
/// server's against its CA (and the target host name).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsFiles& files);

/// The verified SPIFFE identity of a call's peer; UNAUTHENTICATED when the
/// call is plaintext or the certificate has no codeco SPIFFE ID.
absl::StatusOr<SpiffeIdentity> PeerIdentity(const grpc::AuthContext& auth);

}  // namespace codeco
