#include "codeco/common/server.h"

#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codeco/common/authz.h"
#include "codeco/common/call_deadline.h"
#include "codeco/common/etcd_client.h"
#include "codeco/common/etcd_kv_store.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/leader_election.h"
#include "codeco/common/logging.h"
#include "codeco/common/metrics.h"
#include "codeco/common/rocksdb_kv_store.h"
#include "codeco/common/status.h"
#include "codeco/common/tls.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "grpcpp/impl/server_initializer.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "prometheus/gauge.h"

namespace codeco {
namespace {

std::chrono::system_clock::time_point ToChrono(absl::Time t) { return absl::ToChronoTime(t); }

// Captures the names of the services registered on a server while it is
// built (the way the reflection plugin learns them), so each gets a health
// status.
class ServiceListCapture final : public grpc::ServerBuilderPlugin {
 public:
  explicit ServiceListCapture(std::vector<std::string>* names) : names_(names) {}
  std::string name() override { return "codeco_service_list"; }
  void InitServer(grpc::ServerInitializer* si) override { *names_ = *si->GetServiceList(); }
  void Finish(grpc::ServerInitializer*) override {}
  void ChangeArguments(const std::string&, void*) override {}
  bool has_async_methods() const override { return false; }
  bool has_sync_methods() const override { return false; }

 private:
  std::vector<std::string>* names_;
};

class ServiceListOption final : public grpc::ServerBuilderOption {
 public:
  explicit ServiceListOption(std::vector<std::string>* names) : names_(names) {}
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->push_back(std::make_unique<ServiceListCapture>(names_));
  }

 private:
  std::vector<std::string>* names_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Start(const GrpcServerOptions& options) {
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (options.insecure) {
    if (!IsLoopbackAddress(options.listen)) {
      return InvalidFieldError("insecure", absl::StrCat("plaintext is allowed only on loopback, "
                                                        "but listen is ",
                                                        options.listen));
    }
    creds = grpc::InsecureServerCredentials();
  } else {
    ASSIGN_OR_RETURN(creds, MakeServerCredentials(options.tls));
  }
  const AuthzPolicy& policy =
      options.authz_policy != nullptr ? *options.authz_policy : FederationAuthzPolicy();
  if (options.insecure) {
    log::Warn("plaintext server: no caller identities, every caller is trusted as the operator",
              {{"listen", options.listen}});
  } else {
    if (options.authz.hub_cluster.empty()) {
      return InvalidFieldError("federation.hub_cluster",
                               "required with mTLS: callers are authorized against the hub");
    }
    creds->SetAuthMetadataProcessor(MakeAuthzProcessor(policy, options.authz));
  }

  // Reflection registers itself as a builder plugin; once per process is enough.
  static const bool reflection_enabled = [] {
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    return true;
  }();
  (void)reflection_enabled;

  std::unique_ptr<GrpcServer> out(new GrpcServer());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen, creds, &port);
  // Explicit limits on untrusted input (see GrpcServerOptions).
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  // One process per address: a second server on a port in use fails to bind
  // instead of sharing its connections (gRPC sets SO_REUSEPORT by default).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  grpc::ResourceQuota quota(absl::StrCat("codeco-", options.service));
  quota.Resize(options.memory_quota_bytes);
  builder.SetResourceQuota(quota);
  builder.RegisterService(&out->health_);
  for (grpc::Service* service : options.services) builder.RegisterService(service);
  InterceptorOptions interceptor_options{options.service, options.metrics,
                                         options.unimplemented_notes};
  builder.experimental().SetInterceptorCreators(MakeServerInterceptors(interceptor_options));
  std::vector<std::string> service_names;
  builder.SetOption(std::make_unique<ServiceListOption>(&service_names));
  out->server_ = builder.BuildAndStart();
  if (out->server_ == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("listen: cannot serve on ", options.listen));
  }
  out->address_ = absl::StrCat(options.listen.substr(0, options.listen.rfind(':')), ":", port);
  if (!options.insecure) {
    if (std::vector<std::string> missing = MethodsWithoutPolicy(policy, service_names);
        !missing.empty()) {
      out->Shutdown(absl::ZeroDuration());
      return absl::FailedPreconditionError(
          absl::StrCat("authorization: no policy entry for ", absl::StrJoin(missing, ", ")));
    }
  }
  out->health_.SetServingStatus("", grpc::health::v1::HealthCheckResponse::SERVING);
  for (const std::string& name : service_names) {
    out->health_.SetServingStatus(name, grpc::health::v1::HealthCheckResponse::SERVING);
  }
  return out;
}

GrpcServer::~GrpcServer() { Shutdown(absl::ZeroDuration()); }

void GrpcServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  health_.Shutdown();
  server_->Shutdown(ToChrono(absl::Now() + grace));
  server_->Wait();
}

void BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void ConfigureMalloc() {
  // Blocks of 256 KiB and more (RocksDB's memtable arena blocks, large
  // messages) are mapped on their own and unmapped when freed. Setting the
  // threshold turns off glibc's dynamic one, which after the first such free
  // serves them from the heap, where a flushed memtable leaves holes.
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  // At most 4 malloc arenas (glibc's default is 8 per core): gRPC's and
  // RocksDB's many threads then share free memory instead of each arena
  // keeping its own.
  mallopt(M_ARENA_MAX, 4);
}

int WaitForTerminationSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  // While waiting, free memory malloc holds is handed back every 30 s, so
  // the resident set follows what is in use rather than the peak.
  const timespec trim_interval{.tv_sec = 30, .tv_nsec = 0};
  while (true) {
    const int signal_number = sigtimedwait(&set, nullptr, &trim_interval);
    if (signal_number > 0) return signal_number;
    if (errno == EAGAIN) malloc_trim(0);
  }
}

namespace {

// A replica's part in the election while it stands by or leads. A standby
// whose lease is lost takes a new one and goes on waiting; a leader whose
// lease is lost stops (SIGTERM to itself, exit code 3).
struct Candidacy {
  /// Starts a LeaderElection with a new lease.
  std::function<absl::StatusOr<std::unique_ptr<LeaderElection>>()> start;
  /// The election in force.
  std::unique_ptr<LeaderElection> election;
  /// Set once this replica leads.
  std::atomic<bool> leading{false};
  /// The leader's lease was lost.
  std::atomic<bool> leadership_lost{false};
  /// A standby's lease was lost: take a new one.
  std::atomic<bool> standby_lease_lost{false};

  /// What LeaderElection calls when the lease is lost.
  void OnLost() {
    if (leading) {
      // Fail-stop: the main thread sees SIGTERM, shuts down and exits 3.
      leadership_lost = true;
      kill(getpid(), SIGTERM);
    } else {
      standby_lease_lost = true;
    }
  }
};

// Tries to become leader every `poll` until it does (0) or a termination
// signal arrives (its number); prints a "standby" line each time the holder
// changes.
int Campaign(Candidacy& candidacy, absl::Duration poll, const std::string& binary,
             const std::string& metrics_address) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  const timespec poll_interval = absl::ToTimespec(poll);
  std::string announced_holder = "(not asked yet)";
  while (true) {
    if (candidacy.standby_lease_lost.exchange(false) || candidacy.election == nullptr) {
      candidacy.election.reset();
      absl::StatusOr<std::unique_ptr<LeaderElection>> renewed = candidacy.start();
      if (renewed.ok()) {
        candidacy.election = std::move(*renewed);
      } else {
        log::Warn("taking a new lease failed",
                  {{"error", std::string(renewed.status().message())}});
      }
    }
    LeaderElection* election = candidacy.election.get();
    absl::StatusOr<bool> acquired = election != nullptr ? election->TryAcquire() : false;
    if (acquired.ok() && *acquired) {
      candidacy.leading = true;
      // The lease may have been declared lost just before: then this
      // replica must not lead on it.
      if (!candidacy.standby_lease_lost) return 0;
      candidacy.leading = false;
      (void)election->Resign();
      continue;
    }
    if (!acquired.ok()) {
      log::Warn("campaign attempt failed", {{"error", std::string(acquired.status().message())}});
    } else if (election != nullptr) {
      absl::StatusOr<std::string> holder = election->Holder();
      if (holder.ok() && *holder != announced_holder) {
        announced_holder = *holder;
        // The line tests and operators read while a replica waits.
        std::printf("%s standby: %s is held by %s (metrics=http://%s/metrics)\n", binary.c_str(),
                    election->options().key.c_str(), holder->c_str(), metrics_address.c_str());
        std::fflush(stdout);
        log::Info("standing by", {{"key", election->options().key}, {"leader", *holder}});
      }
    }
    const int signal_number = sigtimedwait(&set, nullptr, &poll_interval);
    if (signal_number > 0) return signal_number;
  }
}

}  // namespace

int RunServiceMain(int argc, char** argv, const ServiceDefinition& definition) {
  BlockTerminationSignals();
  ConfigureMalloc();
  const std::string binary = "codeco-" + definition.name;
  ConfigSchema schema = CommonServiceSchema();
  if (definition.add_config) definition.add_config(schema);

  absl::StatusOr<ParsedFlags> flags = ParseFlags(argc, argv, schema);
  if (!flags.ok()) {
    std::cerr << binary << ": " << flags.status().message() << std::endl;
    return 2;
  }
  if (flags->help) {
    std::cout << "usage: " << binary
              << " --role hub|mc --data-dir DIR [--config FILE] [--listen HOST:PORT]\n"
              << "       [--metrics-listen HOST:PORT] [--insecure] [--set key=value]...\n\n"
              << "Settings (also accepted as YAML keys in --config; flags win):\n"
              << schema.HelpText();
    return 0;
  }
  absl::StatusOr<Config> config = schema.LoadFile(flags->config_file, flags->overrides);
  if (!config.ok()) {
    std::cerr << binary << ": invalid configuration:\n" << config.status().message() << std::endl;
    return 2;
  }
  absl::StatusOr<ServiceConfig> service_config = ReadServiceConfig(definition.name, *config);
  if (!service_config.ok()) {
    std::cerr << binary << ": invalid configuration:\n"
              << service_config.status().message() << std::endl;
    return 2;
  }
  const ServiceConfig& cfg = *service_config;
  log::SetService(definition.name);
  log::Level level = log::Level::kInfo;
  log::ParseLevel(config->GetString("log.level"), &level);
  log::SetLevel(level);

  auto fail = [&](const absl::Status& status) {
    log::Error("start failed", {{"error", std::string(status.message())}});
    std::cerr << binary << ": " << status.message() << std::endl;
    return 1;
  };

  SetCallDeadlineLimits({.when_none = cfg.default_deadline, .longest = cfg.max_deadline});
  absl::StatusOr<std::unique_ptr<MetricsExposer>> metrics =
      MetricsExposer::Start(cfg.metrics_listen);
  if (!metrics.ok()) return fail(metrics.status());

  std::shared_ptr<EtcdClient> etcd;
  if (cfg.store_on_etcd) {
    absl::StatusOr<std::unique_ptr<EtcdClient>> client =
        EtcdClient::Connect({.endpoints = cfg.etcd_endpoints,
                             .tls = cfg.etcd_tls,
                             .attempt_timeout = std::min(cfg.etcd_timeout, absl::Seconds(2)),
                             .call_timeout = cfg.etcd_timeout});
    if (!client.ok()) return fail(client.status());
    etcd = std::move(*client);
  }
  // With leader election, wait here as a standby until this replica leads;
  // only then is the state read and the port bound, so clients and the
  // Kubernetes readiness probe reach the leader alone.
  Candidacy candidacy;
  LeaderElection* election = nullptr;
  if (cfg.leader_election) {
    prometheus::Gauge& leader_gauge = prometheus::BuildGauge()
                                          .Name("codeco_" + definition.name + "_leader")
                                          .Help("1 while this replica leads, 0 while it stands by")
                                          .Register((*metrics)->registry())
                                          .Add({});
    // The pid tells this incarnation from an earlier one of the same replica.
    std::string identity = cfg.ha_identity;
    if (identity.empty()) {
      char host[256] = {};
      gethostname(host, sizeof(host) - 1);
      identity = host;
    }
    absl::StrAppend(&identity, "/", getpid());
    const LeaderElectionOptions election_options{
        .key = cfg.etcd_prefix + "leader", .identity = identity, .lease_ttl = cfg.lease_ttl};
    candidacy.start = [&etcd, election_options, &candidacy] {
      return LeaderElection::Start(etcd, election_options,
                                   [&candidacy](const absl::Status&) { candidacy.OnLost(); });
    };
    // The first lease is taken here, so a bad etcd setting fails the start.
    absl::StatusOr<std::unique_ptr<LeaderElection>> started = candidacy.start();
    if (!started.ok()) return fail(started.status());
    candidacy.election = std::move(*started);
    const int signal_number = Campaign(candidacy, cfg.lease_ttl / 5, binary, (*metrics)->address());
    if (signal_number != 0) {
      if (candidacy.election != nullptr) (void)candidacy.election->Resign();
      log::Info("stopped while standing by", {{"signal", absl::StrCat(signal_number)}});
      return 0;
    }
    election = candidacy.election.get();
    leader_gauge.Set(1);
    log::Info("leading", {{"key", election->options().key},
                          {"identity", identity},
                          {"revision", absl::StrCat(election->create_revision())}});
  }

  absl::StatusOr<std::unique_ptr<KvStore>> store;
  if (etcd != nullptr) {
    EtcdKvStoreOptions etcd_options{.prefix = cfg.etcd_prefix,
                                    .column_families = definition.column_families};
    if (election != nullptr) {
      etcd_options.fence = {.key = election->options().key,
                            .create_revision = election->create_revision()};
    }
    store = OpenEtcdKvStore(etcd, etcd_options);
  } else {
    RocksDbOptions store_options;
    store_options.path = cfg.data_dir;
    store_options.column_families = definition.column_families;
    store_options.sync = cfg.store_sync;
    store_options.block_cache_bytes = cfg.store_block_cache_bytes;
    store_options.memtable_budget_bytes = cfg.store_memtable_budget_bytes;
    store = OpenRocksDbKvStore(store_options);
  }
  if (!store.ok()) return fail(store.status());
  (*metrics)->ExportMemory(definition.name, store->get());
  RpcMetrics rpc_metrics(definition.name, (*metrics)->registry());

  absl::StatusOr<std::unique_ptr<PeerChannels>> peers =
      PeerChannels::Create(PeerChannelOptionsFrom(cfg));
  if (!peers.ok()) return fail(peers.status());
  std::vector<std::unique_ptr<BackgroundWork>> background;
  auto stop_background = [&background] {
    for (auto& work : background) work->Stop();
  };
  ServiceContext context{cfg,        **store, RealClock::Default(), (*metrics)->registry(),
                         background, **peers};
  std::vector<std::unique_ptr<grpc::Service>> services;
  if (definition.make_services) {
    auto made = definition.make_services(context);
    if (!made.ok()) {
      stop_background();
      return fail(made.status());
    }
    services = std::move(*made);
  }

  GrpcServerOptions server_options;
  server_options.service = definition.name;
  server_options.listen = cfg.listen;
  server_options.insecure = cfg.insecure;
  server_options.tls = cfg.tls;
  for (auto& service : services) server_options.services.push_back(service.get());
  server_options.metrics = &rpc_metrics;
  server_options.unimplemented_notes = definition.unimplemented_notes;
  server_options.authz = {cfg.cluster, cfg.hub_cluster};
  absl::StatusOr<std::unique_ptr<GrpcServer>> server = GrpcServer::Start(server_options);
  // A new leader may find the old one still closing its listener (it stops
  // within its shutdown grace once its lease is lost): retry for a while.
  for (absl::Time give_up = absl::Now() + cfg.lease_ttl + cfg.shutdown_grace;
       election != nullptr && !server.ok() && absl::Now() < give_up;) {
    log::Warn("cannot serve yet; retrying", {{"error", std::string(server.status().message())}});
    absl::SleepFor(absl::Milliseconds(500));
    server = GrpcServer::Start(server_options);
  }
  if (!server.ok()) {
    stop_background();
    return fail(server.status());
  }

  // The one line tools and tests read to find the service.
  const std::string data = etcd != nullptr
                               ? "etcd:" + cfg.etcd_prefix + (election != nullptr ? " leader" : "")
                               : cfg.data_dir;
  std::printf("%s listening on %s (role=%s cluster=%s metrics=http://%s/metrics data=%s%s)\n",
              binary.c_str(), (*server)->address().c_str(), RoleName(cfg.role), cfg.cluster.c_str(),
              (*metrics)->address().c_str(), data.c_str(), cfg.insecure ? " insecure" : " mtls");
  std::fflush(stdout);
  log::Info("serving", {{"listen", (*server)->address()},
                        {"metrics", (*metrics)->address()},
                        {"role", RoleName(cfg.role)},
                        {"cluster", cfg.cluster}});

  int signal_number = WaitForTerminationSignal();
  log::Info("shutting down", {{"signal", absl::StrCat(signal_number)},
                              {"grace", absl::FormatDuration(cfg.shutdown_grace)}});
  stop_background();
  (*server)->Shutdown(cfg.shutdown_grace);
  if (election != nullptr) {
    if (candidacy.leadership_lost) {
      log::Error("stopped: leadership lost; restart as a standby");
      return 3;
    }
    // Hand over at once instead of after the lease runs out.
    absl::Status resigned = election->Resign();
    if (!resigned.ok()) {
      log::Warn("resigning failed", {{"error", std::string(resigned.message())}});
    }
  }
  log::Info("stopped");
  return 0;
}

}  // namespace codeco
