#pragma once
// codeco.netma.v1.NetmaService over gRPC, plus what runs beside it in a NetMA
// process: the background probe loop (a thread with a stop flag; the core
// decides what to probe and when), periodic neighborhood-summary exchange with
// peers, ALTO JSON over HTTP, and the codeco_netma_* Prometheus metrics.
// Handlers translate protos to core calls under one mutex and map errors with
// ToGrpcStatus.

#include <map>
#include <optional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"
#include "codeco/common/service_config.h"
#include "codeco/netma/v1/netma_service.grpc.pb.h"
#include "netma/core/federation.h"
#include "netma/core/monitor.h"
#include "netma/core/view.h"
#include "netma/core/virtual_links.h"
#include "codeco/common/executor.h"
#include "netma/server/grpc_prober.h"
#include "netma/server/http_server.h"

namespace prometheus {
class Registry;
}

namespace codeco::netma {

/// Everything a NetMA server needs to know.
struct NetmaServerOptions {
  /// This cluster's name.
  std::string cluster;
  /// The federation's hub cluster, against which callers are authorized
  /// (ServiceConfig::hub_cluster); required for mTLS callers' reads.
  std::string hub_cluster;
  /// hub or mc: which RPCs are served (the others answer FAILED_PRECONDITION).
  Role role = Role::kManagedCluster;
  /// NSM settings (probe interval, bulk size, EMA alpha, ...).
  MonitorOptions monitor;
  /// Summary staleness and expiry.
  FederationOptions federation;
  /// Topology and ALTO settings.
  ViewOptions view;
  /// Peer NetMAs by cluster. Probed when they share a neighborhood with this
  /// cluster (all of them when no neighborhood is configured).
  std::vector<Peer> peers;
  /// Neighborhood id -> member clusters.
  std::map<std::string, std::vector<std::string>> neighborhoods;
  /// Endpoints (IP addresses or prefixes) of this cluster's ALTO PID.
  std::vector<std::string> local_endpoints;
  /// This NetMA's own gRPC address (host:port) for the self probe that
  /// measures call overhead; empty: no self probe, nothing subtracted.
  std::string self_address;
  /// Virtual-link controller instances (hub). Default one, "idco-0".
  std::vector<std::string> controllers = {"idco-0"};
  /// How often summaries are exchanged with neighborhood peers. Default 10 s.
  absl::Duration summary_interval = absl::Seconds(10);
  /// How peers are dialled (mTLS files, egress proxy; local_ip stays empty so
  /// the self probe takes the proxy like the peers' probes). Default: a new
  /// connection every minute, reconnect attempts at most 2 s apart.
  PeerChannelOptions channels{.max_channel_age = absl::Minutes(1),
                              .max_reconnect_backoff = absl::Seconds(2)};
  /// ALTO HTTP listen address (empty: no HTTP server).
  std::string alto_listen;
  /// Hub, testbed only: CODEF's control API (host:port), whose relays are the
  /// edge devices the virtual links are installed on. Empty: rules modelled.
  std::string codef_control;
  /// Run the background probe and summary loop (tests drive rounds by hand when false).
  bool run_loop = true;
};

/// The NetMA gRPC service and its background work. Thread-safe.
class NetmaServer final : public codeco::netma::v1::NetmaService::CallbackService {
 public:
  /// Builds the service over `store` (virtual links) and `clock`, registers
  /// metrics in `registry` (may be null), starts the HTTP server and the loop.
  /// `prober` and `exchange` default to the gRPC ones.
  static absl::StatusOr<std::unique_ptr<NetmaServer>> Create(
      NetmaServerOptions options, KvStore& store, const Clock& clock,
      prometheus::Registry* registry, std::unique_ptr<Prober> prober = nullptr,
      std::unique_ptr<PeerSummaryExchange> exchange = nullptr);
  /// Stops the loop and the HTTP server.
  ~NetmaServer() override;

  /// Replaces the peer NetMAs (e.g. once their addresses are known).
  void SetPeers(std::vector<Peer> peers);
  /// The bound ALTO HTTP address (empty when not serving HTTP).
  std::string alto_address() const;
  /// Runs the probes due now and records them (what the loop does each round).
  void ProbeRound();
  /// Exchanges summaries with every neighborhood peer now.
  void SummaryRound();
  /// Answers an ALTO GET for `path` (what the HTTP server calls).
  HttpResponse HandleAlto(const std::string& path);

  grpc::ServerUnaryReactor* GetNetworkTopology(
      grpc::CallbackServerContext* context,
      const codeco::netma::v1::GetNetworkTopologyRequest* request,
      codeco::netma::v1::GetNetworkTopologyResponse* response) override;
  grpc::ServerUnaryReactor* ListLinks(grpc::CallbackServerContext* context,
                                      const codeco::netma::v1::ListLinksRequest* request,
                                      codeco::netma::v1::ListLinksResponse* response) override;
  grpc::ServerUnaryReactor* GetNetworkMap(
      grpc::CallbackServerContext* context, const codeco::netma::v1::GetNetworkMapRequest* request,
      codeco::netma::v1::GetNetworkMapResponse* response) override;
  grpc::ServerUnaryReactor* GetCostMap(grpc::CallbackServerContext* context,
                                       const codeco::netma::v1::GetCostMapRequest* request,
                                       codeco::netma::v1::GetCostMapResponse* response) override;
  grpc::ServerUnaryReactor* ExchangeSummary(
      grpc::CallbackServerContext* context,
      const codeco::netma::v1::ExchangeSummaryRequest* request,
      codeco::netma::v1::ExchangeSummaryResponse* response) override;
  grpc::ServerUnaryReactor* CreateVirtualLink(
      grpc::CallbackServerContext* context,
      const codeco::netma::v1::CreateVirtualLinkRequest* request,
      codeco::netma::v1::CreateVirtualLinkResponse* response) override;
  grpc::ServerUnaryReactor* GetVirtualLink(
      grpc::CallbackServerContext* context, const codeco::netma::v1::GetVirtualLinkRequest* request,
      codeco::netma::v1::GetVirtualLinkResponse* response) override;
  grpc::ServerUnaryReactor* ListVirtualLinks(
      grpc::CallbackServerContext* context,
      const codeco::netma::v1::ListVirtualLinksRequest* request,
      codeco::netma::v1::ListVirtualLinksResponse* response) override;
  grpc::ServerUnaryReactor* DeleteVirtualLink(
      grpc::CallbackServerContext* context,
      const codeco::netma::v1::DeleteVirtualLinkRequest* request,
      codeco::netma::v1::DeleteVirtualLinkResponse* response) override;
  grpc::ServerUnaryReactor* GetOperation(
      grpc::CallbackServerContext* context, const codeco::netma::v1::GetOperationRequest* request,
      codeco::netma::v1::GetOperationResponse* response) override;
  grpc::ServerUnaryReactor* ProbeBulk(grpc::CallbackServerContext* context,
                                      const codeco::netma::v1::ProbeBulkRequest* request,
                                      codeco::netma::v1::ProbeBulkResponse* response) override;

 private:
  struct Metrics;
  NetmaServer(NetmaServerOptions options, const Clock& clock);
  void Loop();
  void UpdateMetricsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RequireRole(Role role, const char* method) const;
  // Binding of the neighborhood-scoped reads: a managed cluster's caller reads
  // only a neighborhood it is a member of (authz.h); the operator and the hub
  // read any, or all at once (empty `neighborhood_id`).
  absl::Status MayRead(const grpc::CallbackServerContext& context, std::string_view method,
                       const std::string& neighborhood_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyPeersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hub: folds the newest link measurements (own probes and peers'
  // summaries) into the virtual links' phases.
  void ApplyVirtualLinkMeasurementsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What the measured link from -> to offers `service_class` (the virtual
  // links' capacity check); nullopt while it has no throughput measurement.
  std::optional<int64_t> LinkCapacityLocked(const std::string& from, const std::string& to,
                                            codeco::common::v1::ServiceClass service_class)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `work` (which touches RocksDB) on the executor and finishes the call
  // with its status; UNAVAILABLE right away when the executor is saturated.
  grpc::ServerUnaryReactor* Offload(grpc::CallbackServerContext* context,
                                    std::function<absl::Status()> work);

  NetmaServerOptions options_;
  const Clock& clock_;
  std::unique_ptr<PeerChannels> channels_;
  std::unique_ptr<Prober> prober_;
  std::unique_ptr<PeerSummaryExchange> exchange_;
  std::unique_ptr<VirtualLinkRepository> repository_;
  std::unique_ptr<Metrics> metrics_;

  mutable absl::Mutex mu_;
  std::unique_ptr<NetworkMonitor> monitor_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Federation> federation_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<NetworkView> view_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<VirtualLinkController> vlinks_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<EdgeDevices> devices_;  // set before vlinks_ uses it
  std::map<std::string, int64_t> reported_probe_bytes_ ABSL_GUARDED_BY(mu_);
  std::vector<Peer> peers_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time next_summary_ ABSL_GUARDED_BY(mu_);
  absl::CondVar wake_;

  std::unique_ptr<HttpServer> http_;
  std::thread loop_;
  // Declared last: destroyed first, so queued work finishes while the rest lives.
  std::unique_ptr<BoundedExecutor> executor_;
};

/// Parses "nb1=a,b,c;nb2=a,d" into neighborhoods; errors name `key`.
absl::StatusOr<std::map<std::string, std::vector<std::string>>> ParseNeighborhoods(
    const std::string& key, const std::string& text);

}  // namespace codeco::netma
