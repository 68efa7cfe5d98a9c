#pragma once
// Authorization: which callers may call each RPC of a codeco server.
//
// A caller is the SPIFFE identity of its mTLS certificate
// (spiffe://codeco/cluster/<cluster>/<service>), classified against the
// federation's hub cluster:
//   operator  spiffe://codeco/cluster/<hub>/operator, the user-facing identity
//             (codecoctl);
//   hub       any other service of the hub cluster (<hub>/acm, <hub>/swm, ...);
//   member    a service of any other cluster (a managed cluster).
// The policy is one table, fully qualified method -> the principals it admits
// (operator, a hub service, a member service, a service of the server's own
// cluster, or any authenticated peer). A method without an entry is denied.
// GrpcServer enforces the table for every call before the handler runs and
// refuses to start when a served method has no entry.
//
// What the table cannot say (the cluster named in a request must be the
// caller's, the caller must be a member of the neighborhood it reads) the
// handlers check with CallerOf and the Require* helpers below, given the hub
// cluster from their configuration.
//
// Plaintext (insecure, loopback only) servers have no identities: they apply
// neither the table nor the bindings, every caller is trusted like the
// operator (GrpcServer logs a warning at start).

#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codeco/common/tls.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "grpcpp/server_context.h"

namespace codeco {

/// The service name in the operator's SPIFFE ID: <hub>/operator.
inline constexpr std::string_view kOperatorService = "operator";

/// One kind of caller a method admits.
struct Principal {
  /// Which callers.
  enum class Kind {
    /// The hub's operator identity.
    kOperator,
    /// A service of the hub cluster (not the operator).
    kHub,
    /// A service of a cluster other than the hub.
    kMember,
    /// A service of the server's own cluster (not the operator).
    kLocal,
    /// Any caller with a valid codeco identity.
    kAnyPeer,
  };
  /// Which callers.
  Kind kind = Kind::kAnyPeer;
  /// For kHub, kMember and kLocal: the service name the identity must carry;
  /// empty admits any service.
  std::string service;
};

/// The operator identity.
Principal Operator();
/// A hub service named `service` ("" = any hub service).
Principal HubService(std::string service = "");
/// A managed cluster's service named `service` ("" = any).
Principal MemberService(std::string service = "");
/// A service of the server's own cluster named `service` ("" = any).
Principal LocalService(std::string service = "");
/// Any authenticated federation peer.
Principal AnyPeer();

/// Fully qualified method ("/codeco.acm.v1.AcmService/ApplyApplication") ->
/// the principals that may call it.
using AuthzPolicy = std::map<std::string, std::vector<Principal>, std::less<>>;

/// The federation's policy: every method of the acm, swm, netma, pdlc, mdm and
/// checkpointer services, health and reflection (docs/security.md shows it).
const AuthzPolicy& FederationAuthzPolicy();

/// The server-side facts a decision depends on.
struct AuthzServer {
  /// The server's own cluster.
  std::string cluster;
  /// The federation's hub cluster (equal to `cluster` on the hub).
  std::string hub_cluster;
};

/// How a caller stands to the federation.
enum class CallerKind { kOperator, kHub, kMember };

/// "operator", "hub" or "member".
const char* CallerKindName(CallerKind kind);

/// Classifies `identity` against the hub cluster `hub_cluster`.
CallerKind ClassifyCaller(const SpiffeIdentity& identity, std::string_view hub_cluster);

/// OK when `policy` lets `caller` call `method` on `server`; PERMISSION_DENIED
/// naming the method and the caller's SPIFFE ID otherwise (also for a method
/// the policy does not list).
absl::Status Authorize(const AuthzPolicy& policy, const AuthzServer& server,
                       std::string_view method, const SpiffeIdentity& caller);

/// The methods of the registered gRPC services `service_names` (fully
/// qualified service names, looked up in the generated descriptor pool) that
/// `policy` has no entry for; a service missing from the pool is listed by its
/// name.
std::vector<std::string> MethodsWithoutPolicy(const AuthzPolicy& policy,
                                              const std::vector<std::string>& service_names);

/// The gRPC hook GrpcServer installs on its mTLS credentials: it reads the
/// method from ":path" and the caller from the verified certificate, and
/// rejects the call with PERMISSION_DENIED (UNAUTHENTICATED without a codeco
/// identity) before any handler runs. It writes nothing to the AuthContext,
/// which gRPC shares between the calls of one connection. `policy` must
/// outlive the processor.
std::shared_ptr<grpc::AuthMetadataProcessor> MakeAuthzProcessor(const AuthzPolicy& policy,
                                                                AuthzServer server);

/// The caller of a call, as the handlers see it.
struct Caller {
  /// True on a plaintext server: there is no identity and every binding passes.
  bool plaintext = false;
  /// The verified identity (empty when plaintext).
  SpiffeIdentity identity;
  /// How the identity stands to the federation (kOperator when plaintext).
  CallerKind kind = CallerKind::kOperator;
  /// "spiffe://codeco/cluster/<c>/<s>", or "plaintext caller".
  std::string Describe() const;
};

/// The caller of the call `context` serves, classified against `hub_cluster`
/// (the server's ServiceConfig::hub_cluster). A plaintext call gives a Caller
/// with `plaintext` set. PERMISSION_DENIED for an authenticated call when
/// `hub_cluster` is empty, so bindings fail closed on a server that does not
/// know its hub.
absl::StatusOr<Caller> CallerOf(const grpc::ServerContextBase& context,
                                std::string_view hub_cluster);

/// Binding "a cluster speaks only for itself": OK for the operator, hub
/// services, plaintext calls, and a managed cluster's service whose cluster is
/// `cluster` (the value of request field `field` of `method`);
/// PERMISSION_DENIED naming method, field and caller otherwise. (Whether the
/// operator or the hub may call `method` at all is the table's business.)
absl::Status RequireOwnCluster(const grpc::ServerContextBase& context, std::string_view hub_cluster,
                               std::string_view method, std::string_view field,
                               std::string_view cluster);

/// Binding "neighborhood-scoped reads for its members": OK for the operator,
/// hub services, plaintext calls, and a member whose cluster is in `members`
/// (the clusters of neighborhood `neighborhood`); PERMISSION_DENIED naming
/// method, neighborhood and caller otherwise.
absl::Status RequireNeighborhoodMember(const grpc::ServerContextBase& context,
                                       std::string_view hub_cluster, std::string_view method,
                                       std::string_view neighborhood,
                                       const std::set<std::string>& members);

/// Binding for reads that span every neighborhood: OK for the operator, hub
/// services and plaintext calls; PERMISSION_DENIED for members, whose reads
/// must name a neighborhood (`field`).
absl::Status RequireHubOrOperator(const grpc::ServerContextBase& context,
                                  std::string_view hub_cluster, std::string_view method,
                                  std::string_view field);

}  // namespace codeco
