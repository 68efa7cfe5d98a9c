#pragma once
// The server bootstrap every codeco service uses. GrpcServer starts a gRPC
// server on the callback API with the standard health service, server
// reflection, the shared interceptors and mTLS (or plaintext on loopback).
// RunServiceMain is the whole main() of a service binary: flags and config,
// logging, RocksDB, metrics, server, one "listening on" line on stdout, and a
// graceful shutdown on SIGTERM or SIGINT.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "codeco/common/authz.h"
#include "codeco/common/clock.h"
#include "codeco/common/config.h"
#include "codeco/common/health_service.h"
#include "codeco/common/interceptors.h"
#include "codeco/common/kv_store.h"
#include "codeco/common/peer_channels.h"
#include "codeco/common/service_config.h"
#include "grpcpp/client_context.h"
#include "grpcpp/server.h"

namespace codeco {

/// How to start a GrpcServer.
struct GrpcServerOptions {
  /// Short service name for logs and metrics ("acm").
  std::string service;
  /// host:port; port 0 picks a free port.
  std::string listen = "127.0.0.1:0";
  /// Plaintext; refused unless `listen` is loopback.
  bool insecure = false;
  /// mTLS files, used unless `insecure`.
  TlsFiles tls;
  /// Services to serve besides health and reflection; not owned, must outlive
  /// the server.
  std::vector<grpc::Service*> services;
  /// RPC metrics to update; null for none. Not owned.
  RpcMetrics* metrics = nullptr;
  /// Notes for UNIMPLEMENTED answers, by fully qualified service name.
  std::map<std::string, std::string> unimplemented_notes;
  /// Largest request message accepted, bytes; a larger one is answered
  /// RESOURCE_EXHAUSTED before it is parsed. Default: 4 MiB (a CAM is a few KB;
  /// the CAM parser refuses documents over 1 MiB).
  int max_receive_message_bytes = 4 << 20;
  /// Most concurrent calls (HTTP/2 streams) one client connection may open.
  /// Default: 100.
  int max_concurrent_streams = 100;
  /// Memory the server's transports and calls may hold (a grpc::ResourceQuota
  /// of its own), bytes; past it gRPC sheds connections and calls. Default: 256 MiB.
  size_t memory_quota_bytes = size_t{256} << 20;
  /// The server's cluster and the federation's hub cluster, against which
  /// mTLS callers are authorized; hub_cluster is required unless `insecure`.
  AuthzServer authz;
  /// The per-method policy for mTLS calls; null means FederationAuthzPolicy().
  /// Every method served must have an entry. Not owned.
  const AuthzPolicy* authz_policy = nullptr;
};

/// A running gRPC server with health and reflection.
class GrpcServer {
 public:
  /// Binds and starts serving; the health of "" and of every service is SERVING.
  /// With mTLS every call is authorized (authz.h) before its handler runs;
  /// FAILED_PRECONDITION when a served method has no policy entry.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Start(const GrpcServerOptions& options);
  /// Shuts down immediately if still running.
  ~GrpcServer();

  /// The bound address, host:port with the real port.
  const std::string& address() const { return address_; }
  /// The health service, to change serving status.
  HealthService& health() { return health_; }
  /// Marks everything NOT_SERVING, stops accepting calls, lets in-flight calls
  /// finish for up to `grace`, then cancels the rest. Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  GrpcServer() = default;
  HealthService health_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  bool shut_down_ = false;
};

/// Work a service runs beside its gRPC server, such as a loop that talks to
/// peers. RunServiceMain stops it before the server shuts down.
class BackgroundWork {
 public:
  virtual ~BackgroundWork() = default;
  /// Stops the work and joins its threads; idempotent.
  virtual void Stop() = 0;
};

/// What a service's factory gets to build its gRPC services with.
struct ServiceContext {
  /// Validated settings (ServiceConfig::raw has service-specific keys).
  const ServiceConfig& config;
  /// The service's own RocksDB, with the column families it declared.
  KvStore& store;
  /// Real time (cores take it as a port).
  Clock& clock;
  /// Registry for the service's domain metrics.
  prometheus::Registry& metrics;
  /// Background work to keep running until shutdown; the factory appends.
  std::vector<std::unique_ptr<BackgroundWork>>& background;
  /// Channels to other services with this process's identity and egress proxy.
  PeerChannels& peers;
};

/// Everything RunServiceMain needs to know about one service.
struct ServiceDefinition {
  /// Short name: "acm", "swm", ...; binary is codeco-<name>.
  std::string name;
  /// Column families of its RocksDB (one per record type).
  std::vector<std::string> column_families;
  /// Adds service-specific keys to the common schema; may be empty.
  std::function<void(ConfigSchema&)> add_config;
  /// Builds the gRPC services once the store is open.
  std::function<absl::StatusOr<std::vector<std::unique_ptr<grpc::Service>>>(ServiceContext&)>
      make_services;
  /// Notes for methods not implemented yet, by fully qualified service name.
  std::map<std::string, std::string> unimplemented_notes;
};

/// A ServiceDefinition::make_services serving the generated `CallbackServiceT`
/// with no method overridden: every method answers UNIMPLEMENTED with the
/// definition's note. For a service whose issue has not landed yet.
template <typename CallbackServiceT>
auto ServeNotYetImplemented() {
  return [](ServiceContext&) -> absl::StatusOr<std::vector<std::unique_ptr<grpc::Service>>> {
    std::vector<std::unique_ptr<grpc::Service>> services;
    services.push_back(std::make_unique<CallbackServiceT>());
    return services;
  };
}

/// The main() of a service binary. Returns the process exit code: 0 after a
/// clean shutdown, 2 for bad flags or config, 1 for a start failure.
int RunServiceMain(int argc, char** argv, const ServiceDefinition& definition);

/// Blocks SIGTERM and SIGINT in the calling thread and every thread it starts
/// later; call first in main(), before any thread exists.
void BlockTerminationSignals();

/// Waits for SIGTERM or SIGINT (blocked by BlockTerminationSignals) and
/// returns its number; meanwhile, every 30 s, hands the free memory malloc
/// holds back to the system (malloc_trim).
int WaitForTerminationSignal();

/// Sets the process's malloc policy for a long-running service: large
/// blocks mapped on their own, few arenas (see server.cc for the reasons).
/// Call once at start, before threads are made.
void ConfigureMalloc();

}  // namespace codeco
