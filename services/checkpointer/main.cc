// codeco-checkpointer: wires the checkpointer (drivers, the cluster's LMS,
// the registry, the other clusters' checkpointers) into the shared bootstrap.
#include <memory>

#include "absl/strings/str_cat.h"
#include "checkpointer/core/checkpointer.h"
#include "checkpointer/drivers/criu_driver.h"
#include "checkpointer/drivers/kubelet_driver.h"
#include "checkpointer/drivers/redis_hook.h"
#include "checkpointer/image/registry_image_store.h"
#include "checkpointer/server/checkpointer_metrics.h"
#include "checkpointer/server/checkpointer_service.h"
#include "checkpointer/server/grpc_ports.h"
#include "codeco/common/logging.h"
#include "codeco/common/server.h"
#include "codeco/common/status.h"

namespace {

using codeco::ConfigSchema;
using codeco::ConfigType;
using namespace codeco::checkpointer;

void AddCheckpointerConfig(ConfigSchema& schema) {
  schema
      .Add({"checkpointer.repository", ConfigType::kString, "", {}, false,
            "registry repository images go to when a request names none, "
            "e.g. 127.0.0.1:5000/codeco/checkpoints"})
      .Add({"checkpointer.registry_plaintext", ConfigType::kBool, "false", {}, false,
            "talk plain HTTP to registries (loopback test registries only)"})
      .Add({"checkpointer.registry_ca_file", ConfigType::kString, "", {}, false,
            "CA bundle registries are verified with (empty: the system's)"})
      .Add({"checkpointer.peers", ConfigType::kString, "", {}, false,
            "checkpointers of other clusters, <cluster>=<host:port>,... (migration targets)"})
      .Add({"checkpointer.parallelism", ConfigType::kInt, "4", {}, false,
            "operations running at once, 1-64 (checkpoints of different pods in parallel)"})
      .Add({"checkpointer.max_pending", ConfigType::kInt, "256", {}, false,
            "operations accepted and not finished, at most (1-100000)"})
      .Add({"checkpointer.max_state_bytes", ConfigType::kInt, "17179869184", {}, false,
            "largest checkpoint image a restore unpacks (all its layers), bytes"})
      .Add({"checkpointer.layer_bytes", ConfigType::kInt, "67108864", {}, false,
            "most bytes of state per image layer; a restore pulls and loads each layer while "
            "later ones are pushed (1 MiB - 1 GiB)"})
      .Add({"checkpointer.stall_timeout", ConfigType::kDuration, "60s", {}, false,
            "how long a restore follows an image whose push stopped adding layers"})
      .Add({"checkpointer.restore_timeout", ConfigType::kDuration, "10m", {}, false,
            "how long a restore (here or at a peer) may take"})
      .Add({"checkpointer.max_fence", ConfigType::kDuration, "5m", {}, false,
            "longest a source's writes stay fenced before its server lifts the fence itself"})
      .Add({"checkpointer.digest_max_bytes", ConfigType::kInt, "67108864", {}, false,
            "largest Redis dataset whose DEBUG DIGEST is taken at the fence and checked after "
            "a restore (it walks the dataset while writes wait: 1.9 s for 508k small keys "
            "here); larger ones are checked by key count and the RDB's CRC64 (0: never, "
            "negative: always)"})
      .Add({"checkpointer.redis_server", ConfigType::kString, "/usr/bin/redis-server", {}, false,
            "the redis-server binary"})
      .Add({"checkpointer.criu", ConfigType::kBool, "true", {}, false,
            "checkpoint processes with CRIU where `criu check` passes"})
      .Add({"checkpointer.kubelet_url", ConfigType::kString, "", {}, false,
            "the nodes' kubelets, e.g. https://{node}:10250 (empty: no kubelet driver; set on "
            "Kubernetes clusters)"})
      .Add({"checkpointer.kubelet_node", ConfigType::kString, "", {}, false,
            "the node this checkpointer runs on (it reads the kubelet's archives from its disk)"})
      .Add({"checkpointer.kubelet_ca_file", ConfigType::kString, "", {}, false,
            "CA bundle the kubelets are verified with"})
      .Add({"checkpointer.kubelet_cert_file", ConfigType::kString, "", {}, false,
            "client certificate for the kubelets (default: tls.cert_file)"})
      .Add({"checkpointer.kubelet_key_file", ConfigType::kString, "", {}, false,
            "key of checkpointer.kubelet_cert_file (default: tls.key_file)"});
}

// Everything one checkpointer runs on, built before the service that serves it.
struct Parts {
  std::unique_ptr<codeco::PeerChannels> lms_channels;
  std::unique_ptr<GrpcLms> lms;
  std::unique_ptr<RegistryImageStore> images;
  std::unique_ptr<GrpcPeerCheckpointers> peers;
  std::unique_ptr<RedisHookDriver> redis;
  std::unique_ptr<KubeletCheckpointDriver> kubelet;
  std::unique_ptr<CriuDriver> criu;
  std::unique_ptr<CheckpointerMetrics> metrics;
  std::unique_ptr<Checkpointer> checkpointer;
};

// The served service, owning its parts (destroyed after the service).
class OwningService final : public CheckpointerServiceImpl {
 public:
  OwningService(std::unique_ptr<Parts> parts, int max_watchers)
      : CheckpointerServiceImpl(*parts->checkpointer, max_watchers), parts_(std::move(parts)) {}

 private:
  std::unique_ptr<Parts> parts_;
};

absl::StatusOr<std::vector<std::unique_ptr<grpc::Service>>> MakeServices(
    codeco::ServiceContext& context) {
  const codeco::Config& raw = context.config.raw;
  if (context.config.lms.empty()) {
    return codeco::InvalidFieldError("federation.lms",
                                     "the checkpointer needs its cluster's LMS (host:port)");
  }
  if (context.config.cluster.empty()) {
    return codeco::InvalidFieldError("cluster", "the checkpointer needs its cluster's name");
  }
  const int64_t parallelism = raw.GetInt("checkpointer.parallelism");
  if (parallelism < 1 || parallelism > 64) {
    return codeco::InvalidFieldError("checkpointer.parallelism", "must be 1-64");
  }
  const int64_t max_pending = raw.GetInt("checkpointer.max_pending");
  if (max_pending < 1 || max_pending > 100000) {
    return codeco::InvalidFieldError("checkpointer.max_pending", "must be 1-100000");
  }
  const int64_t max_state = raw.GetInt("checkpointer.max_state_bytes");
  if (max_state < 1) {
    return codeco::InvalidFieldError("checkpointer.max_state_bytes", "must be positive");
  }
  const int64_t layer_bytes = raw.GetInt("checkpointer.layer_bytes");
  if (layer_bytes < (int64_t{1} << 20) || layer_bytes > (int64_t{1} << 30)) {
    return codeco::InvalidFieldError("checkpointer.layer_bytes", "must be 1 MiB - 1 GiB");
  }
  const absl::Duration stall_timeout = raw.GetDuration("checkpointer.stall_timeout");
  if (stall_timeout <= absl::ZeroDuration()) {
    return codeco::InvalidFieldError("checkpointer.stall_timeout", "must be positive");
  }
  const std::string repository = raw.GetString("checkpointer.repository");
  if (!repository.empty()) {
    RETURN_IF_ERROR(ParseImageReference(repository, "checkpointer.repository",
                                        /*repository_only=*/true)
                        .status());
  }
  ASSIGN_OR_RETURN(auto peer_addresses,
                   codeco::ParseNamedAddresses("checkpointer.peers",
                                               raw.GetString("checkpointer.peers"), "cluster"));

  auto parts = std::make_unique<Parts>();
  // The cluster's own LMS is local: no egress relay; plaintext when it is CODEF's.
  codeco::PeerChannelOptions lms_options = codeco::PeerChannelOptionsFrom(context.config);
  lms_options.insecure = lms_options.insecure || context.config.lms_plaintext;
  lms_options.egress_proxy.clear();
  ASSIGN_OR_RETURN(parts->lms_channels, codeco::PeerChannels::Create(lms_options));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> lms_channel,
                   parts->lms_channels->Get(context.config.lms));
  const absl::Duration restore_timeout = raw.GetDuration("checkpointer.restore_timeout");
  parts->lms = std::make_unique<GrpcLms>(std::move(lms_channel), absl::Seconds(30),
                                         restore_timeout);
  RegistryOptions registry;
  registry.scheme = raw.GetBool("checkpointer.registry_plaintext") ? "http" : "https";
  registry.ca_file = raw.GetString("checkpointer.registry_ca_file");
  RETURN_IF_ERROR(RegistryClient(registry).Check());
  parts->images = std::make_unique<RegistryImageStore>(
      registry, ImageStoreOptions{.max_state_bytes = max_state, .layer_bytes = layer_bytes,
                                  .stall_timeout = stall_timeout});
  parts->peers = std::make_unique<GrpcPeerCheckpointers>(std::move(peer_addresses), context.peers,
                                                         restore_timeout);
  RedisCheckpointHook::Options redis;
  redis.max_fence = raw.GetDuration("checkpointer.max_fence");
  redis.digest_max_bytes = raw.GetInt("checkpointer.digest_max_bytes");
  redis.server_binary = raw.GetString("checkpointer.redis_server");
  parts->redis = std::make_unique<RedisHookDriver>(redis);
  // Tried in order: the application hook (fenced, zero loss), the kubelet
  // on Kubernetes nodes, CRIU where it works (both crash-consistent).
  std::vector<StateDriver*> drivers = {parts->redis.get()};
  if (const std::string url = raw.GetString("checkpointer.kubelet_url"); !url.empty()) {
    KubeletCheckpointDriver::Options kubelet;
    kubelet.kubernetes = true;
    kubelet.url_template = url;
    kubelet.local_node = raw.GetString("checkpointer.kubelet_node");
    kubelet.ca_file = raw.GetString("checkpointer.kubelet_ca_file");
    kubelet.client_cert_file = raw.GetString("checkpointer.kubelet_cert_file").empty()
                                   ? context.config.tls.cert_file
                                   : raw.GetString("checkpointer.kubelet_cert_file");
    kubelet.client_key_file = raw.GetString("checkpointer.kubelet_key_file").empty()
                                  ? context.config.tls.key_file
                                  : raw.GetString("checkpointer.kubelet_key_file");
    parts->kubelet = std::make_unique<KubeletCheckpointDriver>(kubelet);
    drivers.push_back(parts->kubelet.get());
  }
  if (raw.GetBool("checkpointer.criu")) {
    parts->criu = std::make_unique<CriuDriver>(CriuDriver::Options{});
    drivers.push_back(parts->criu.get());
  }

  CheckpointerOptions options;
  options.cluster = context.config.cluster;
  options.work_directory = context.config.data_dir + "-work";
  options.default_repository = repository;
  options.parallelism = static_cast<int>(parallelism);
  options.max_pending = static_cast<int>(max_pending);
  parts->metrics = std::make_unique<CheckpointerMetrics>(context.metrics);
  options.on_finished = [metrics = parts->metrics.get()](const codeco::common::v1::Operation& op,
                                                         const v1::Checkpoint& checkpoint) {
    metrics->Record(op, checkpoint);
  };
  parts->checkpointer = std::make_unique<Checkpointer>(
      options, context.store, context.clock, *parts->lms, *parts->images, *parts->peers,
      std::move(drivers));
  ASSIGN_OR_RETURN(int resumed, parts->checkpointer->Recover());
  if (resumed > 0) {
    codeco::log::Info("checkpointer: resuming unfinished operations",
                      {{"count", absl::StrCat(resumed)}});
  }
  std::vector<std::unique_ptr<grpc::Service>> services;
  services.push_back(std::make_unique<OwningService>(std::move(parts), /*max_watchers=*/256));
  return services;
}

}  // namespace

int main(int argc, char** argv) {
  return codeco::RunServiceMain(argc, argv,
                                {.name = "checkpointer",
                                 .column_families = {kCheckpointsFamily, kOperationsFamily},
                                 .add_config = AddCheckpointerConfig,
                                 .make_services = MakeServices});
}
