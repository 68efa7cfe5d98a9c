// codeco-pdlc: wires PDLC (the telemetry store in RocksDB, the Prometheus
// pull, the cluster's LMS, the LSTM forecaster and the advisor) into the
// shared bootstrap; and `codeco-pdlc eval`, the forecast evaluator on a
// user's traces.
#include <cstring>
#include <iostream>
#include <memory>

#include "absl/strings/numbers.h"
#include "codeco/common/logging.h"
#include "codeco/common/server.h"
#include "codeco/common/status.h"
#include "pdlc/cli/eval_command.h"
#include "pdlc/core/lstm_forecaster.h"
#include "pdlc/server/pdlc_loop.h"
#include "pdlc/server/pdlc_service.h"
#include "pdlc/server/prometheus_client.h"
#include "pdlc/store/kv_telemetry_store.h"

namespace {

using codeco::ConfigSchema;
using codeco::ConfigType;
using namespace codeco::pdlc;

void AddPdlcConfig(ConfigSchema& schema) {
  schema
      .Add({"pdlc.prometheus_url", ConfigType::kString, "", {}, false,
            "Prometheus holding CODECO's recording rules for this cluster, e.g. http://127.0.0.1:9090 "
            "(empty: no pull; samples come only through IngestMetrics)"})
      .Add({"pdlc.prometheus_selector", ConfigType::kString, "", {}, false,
            "label matchers added to every pulled series, e.g. cluster=\"edge-1\" "
            "(default: cluster=\"<this cluster>\")"})
      .Add({"pdlc.refresh_interval", ConfigType::kDuration, "15s", {}, false,
            "pull, read the nodes and recompute forecasts and scores every this long"})
      .Add({"pdlc.retrain_interval", ConfigType::kDuration, "1h", {}, false,
            "retrain the LSTM on the cluster's own history every this long"})
      .Add({"pdlc.breach_threshold_percent", ConfigType::kInt, "80", {}, false,
            "usage (percent of capacity) whose forecast crossing raises a breach advisory, 1-100"})
      .Add({"pdlc.raw_retention", ConfigType::kDuration, "48h", {}, false,
            "raw samples are kept this long"})
      .Add({"pdlc.downsampled_retention", ConfigType::kDuration, "840h", {}, false,
            "5-minute means are kept this long (>= pdlc.raw_retention)"});
}

// Everything one PDLC runs on, built before the service that serves it.
struct Parts {
  std::unique_ptr<TelemetryStore> store;
  std::unique_ptr<Advisor> advisor;
  std::unique_ptr<PrometheusClient> prometheus;
  std::unique_ptr<TelemetryScraper> scraper;
  std::unique_ptr<codeco::PeerChannels> lms_channels;
  std::unique_ptr<LmsNodeInventory> inventory;
};

// The served service, owning its parts (destroyed after the service).
class OwningService final : public PdlcServiceImpl {
 public:
  OwningService(std::shared_ptr<Parts> parts, codeco::Clock& clock)
      : PdlcServiceImpl(*parts->advisor, *parts->store,
                        [&clock] { return absl::ToUnixMillis(clock.Now()); }),
        parts_(std::move(parts)) {}

 private:
  std::shared_ptr<Parts> parts_;
};

// The loop, keeping the parts alive as long as it runs.
class OwningLoop final : public codeco::BackgroundWork {
 public:
  OwningLoop(std::shared_ptr<Parts> parts, codeco::Clock& clock, PdlcLoopOptions options)
      : parts_(parts),
        loop_(*parts->advisor, *parts->store, parts->scraper.get(), parts->inventory.get(), clock,
              std::move(options)) {
    loop_.Start();
  }
  void Stop() override { loop_.Stop(); }

 private:
  std::shared_ptr<Parts> parts_;
  PdlcLoop loop_;
};

absl::StatusOr<std::vector<std::unique_ptr<grpc::Service>>> MakeServices(codeco::ServiceContext& context) {
  const codeco::Config& raw = context.config.raw;
  if (context.config.cluster.empty()) {
    return codeco::InvalidFieldError("cluster", "PDLC serves one cluster: give its name");
  }
  const int64_t threshold = raw.GetInt("pdlc.breach_threshold_percent");
  if (threshold < 1 || threshold > 100) {
    return codeco::InvalidFieldError("pdlc.breach_threshold_percent", "must be 1-100");
  }
  PdlcLoopOptions loop;
  loop.refresh_interval = raw.GetDuration("pdlc.refresh_interval");
  loop.retrain_interval = raw.GetDuration("pdlc.retrain_interval");
  if (loop.refresh_interval < absl::Seconds(1)) {
    return codeco::InvalidFieldError("pdlc.refresh_interval", "must be at least 1s");
  }
  if (loop.retrain_interval < absl::Minutes(1)) {
    return codeco::InvalidFieldError("pdlc.retrain_interval", "must be at least 1m");
  }
  loop.retention.raw_retention = raw.GetDuration("pdlc.raw_retention");
  loop.retention.downsampled_retention = raw.GetDuration("pdlc.downsampled_retention");
  if (loop.retention.downsample_after > loop.retention.raw_retention) {
    loop.retention.downsample_after = loop.retention.raw_retention;
  }
  if (absl::Status s = ValidateRetentionPolicy(loop.retention); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("pdlc retention: ", s.message()));
  }

  auto parts = std::make_shared<Parts>();
  ASSIGN_OR_RETURN(parts->store, NewKvTelemetryStore(context.store));
  AdvisorOptions advisor;
  advisor.cluster = context.config.cluster;
  advisor.breach_threshold_percent = static_cast<double>(threshold);
  advisor.training_history_ms = absl::ToInt64Milliseconds(loop.retention.downsampled_retention);
  parts->advisor = std::make_unique<Advisor>(*parts->store, std::make_unique<LstmForecaster>(), advisor);

  if (const std::string url = raw.GetString("pdlc.prometheus_url"); !url.empty()) {
    parts->prometheus = std::make_unique<PrometheusClient>(PrometheusClientOptions{.base_url = url});
    std::string selector = raw.GetString("pdlc.prometheus_selector");
    if (selector.empty()) selector = absl::StrCat("cluster=\"", context.config.cluster, "\"");
    std::vector<TelemetryMapping> mappings = DefaultTelemetryMappings();
    for (auto& m : mappings) m.query = absl::StrCat(m.query, "{", selector, "}");
    RETURN_IF_ERROR(ValidateTelemetryMappings(mappings));
    parts->scraper = std::make_unique<TelemetryScraper>(*parts->prometheus, *parts->store, std::move(mappings));
  }
  if (!context.config.lms.empty()) {
    codeco::PeerChannelOptions lms_options = codeco::PeerChannelOptionsFrom(context.config);
    lms_options.insecure = lms_options.insecure || context.config.lms_plaintext;
    lms_options.egress_proxy.clear();
    ASSIGN_OR_RETURN(parts->lms_channels, codeco::PeerChannels::Create(lms_options));
    ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, parts->lms_channels->Get(context.config.lms));
    parts->inventory = std::make_unique<LmsNodeInventory>(std::move(channel), absl::Seconds(10));
  } else {
    codeco::log::Warn("pdlc: no federation.lms: no nodes to score", {});
  }
  context.background.push_back(std::make_unique<OwningLoop>(parts, context.clock, loop));
  std::vector<std::unique_ptr<grpc::Service>> services;
  services.push_back(std::make_unique<OwningService>(parts, context.clock));
  return services;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "eval") == 0) {
    return RunEvalCommand(std::vector<std::string>(argv + 2, argv + argc), std::cout, std::cerr);
  }
  return codeco::RunServiceMain(
      argc, argv,
      {.name = "pdlc",
       .column_families = {"telemetry", "profiles", "models", "operations"},
       .add_config = AddPdlcConfig,
       .make_services = MakeServices,
       .unimplemented_notes = {{"codeco.pdlc.v1.PdlcService",
                                "the neighborhood auction (SubmitBid) and federated training rounds "
                                "(PushModelUpdate, GetGlobalModel, GetOperation) are not served yet"}}});
}
