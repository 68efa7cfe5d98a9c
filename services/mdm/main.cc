// codeco-mdm: the metadata store (event log, graph, types) on the service's
// RocksDB, served over gRPC (docs/mdm.md). With federation.lms set it also
// runs the LMS connector, mirroring this cluster's nodes and pods into it.
#include <memory>

#include "codeco/common/config.h"
#include "codeco/common/peer_channels.h"
#include "codeco/common/server.h"
#include "codeco/common/status.h"
#include "mdm/core/builtin_types.h"
#include "mdm/core/metadata_store.h"
#include "mdm/server/compaction_loop.h"
#include "mdm/server/lms_connector_loop.h"
#include "mdm/server/mdm_service.h"

namespace {

using codeco::ConfigType;

void AddMdmConfig(codeco::ConfigSchema& schema) {
  schema.Add({"mdm.lms_sync_interval",
              ConfigType::kDuration,
              "15s",
              {},
              false,
              "with federation.lms set, mirror the cluster's nodes and pods into the graph "
              "every this long (1s-1h)"});
  schema.Add({"mdm.compact_interval",
              ConfigType::kDuration,
              "10m",
              {},
              false,
              "compact the event log every this long (0s: never; else 1s-24h): remove the "
              "events a later insert or deletion superseded (docs/mdm.md)"});
  schema.Add({"mdm.compact_keep_events",
              ConfigType::kInt,
              "100000",
              {},
              false,
              "the newest events compaction leaves alone (a watcher less far behind sees all)"});
  schema.Add({"mdm.compact_keep_tombstones",
              ConfigType::kInt,
              "1000000",
              {},
              false,
              "the newest events among which compaction keeps deletions "
              "(>= mdm.compact_keep_events)"});
}

// The connector loop with the channels it reads the LMS through.
class ConnectorWork final : public codeco::BackgroundWork {
 public:
  ConnectorWork(std::unique_ptr<codeco::PeerChannels> channels,
                std::unique_ptr<codeco::mdm::LmsConnectorLoop> loop)
      : channels_(std::move(channels)), loop_(std::move(loop)) {}
  void Stop() override { loop_->Stop(); }

 private:
  std::unique_ptr<codeco::PeerChannels> channels_;
  std::unique_ptr<codeco::mdm::LmsConnectorLoop> loop_;
};

absl::StatusOr<std::vector<std::unique_ptr<grpc::Service>>> MakeServices(
    codeco::ServiceContext& context) {
  codeco::mdm::LmsConnectorLoopOptions connector;
  connector.interval = context.config.raw.GetDuration("mdm.lms_sync_interval");
  if (connector.interval < absl::Seconds(1) || connector.interval > absl::Hours(1)) {
    return codeco::InvalidFieldError("mdm.lms_sync_interval", "must be 1s-1h");
  }
  codeco::mdm::CompactionLoopOptions compaction;
  compaction.interval = context.config.raw.GetDuration("mdm.compact_interval");
  compaction.compaction.keep_recent_events = context.config.raw.GetInt("mdm.compact_keep_events");
  compaction.compaction.keep_tombstone_events =
      context.config.raw.GetInt("mdm.compact_keep_tombstones");
  if (compaction.interval != absl::ZeroDuration() &&
      (compaction.interval < absl::Seconds(1) || compaction.interval > absl::Hours(24))) {
    return codeco::InvalidFieldError("mdm.compact_interval", "must be 0s or 1s-24h");
  }
  if (compaction.compaction.keep_recent_events < 0) {
    return codeco::InvalidFieldError("mdm.compact_keep_events", "must not be negative");
  }
  if (compaction.compaction.keep_tombstone_events < compaction.compaction.keep_recent_events) {
    return codeco::InvalidFieldError("mdm.compact_keep_tombstones",
                                     "must be at least mdm.compact_keep_events");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<codeco::mdm::MetadataStore> opened,
                   codeco::mdm::MetadataStore::Open(context.store, context.clock));
  std::shared_ptr<codeco::mdm::MetadataStore> store = std::move(opened);
  RETURN_IF_ERROR(codeco::mdm::RegisterBuiltInTypes(*store));
  if (!context.config.lms.empty()) {
    codeco::PeerChannelOptions lms_options = codeco::PeerChannelOptionsFrom(context.config);
    lms_options.insecure = lms_options.insecure || context.config.lms_plaintext;
    lms_options.egress_proxy.clear();
    ASSIGN_OR_RETURN(std::unique_ptr<codeco::PeerChannels> channels,
                     codeco::PeerChannels::Create(lms_options));
    ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, channels->Get(context.config.lms));
    context.background.push_back(std::make_unique<ConnectorWork>(
        std::move(channels),
        std::make_unique<codeco::mdm::LmsConnectorLoop>(
            store, context.config.cluster, std::move(channel), context.metrics, connector)));
  }
  if (compaction.interval > absl::ZeroDuration()) {
    context.background.push_back(
        std::make_unique<codeco::mdm::CompactionLoop>(store, context.metrics, compaction));
  }
  std::vector<std::unique_ptr<grpc::Service>> services;
  services.push_back(std::make_unique<codeco::mdm::MdmServiceImpl>(std::move(store)));
  return services;
}

}  // namespace

int main(int argc, char** argv) {
  return codeco::RunServiceMain(argc, argv,
                                {.name = "mdm",
                                 .column_families = codeco::mdm::MetadataColumnFamilies(),
                                 .add_config = AddMdmConfig,
                                 .make_services = MakeServices});
}
