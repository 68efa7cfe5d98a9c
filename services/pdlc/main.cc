// codeco-pdlc: wires PDLC (the telemetry store in RocksDB, the Prometheus
// pull, the cluster's LMS, the LSTM forecaster and the advisor, and the
// federated training of the LSTM with the neighborhood's peers) into the
// shared bootstrap; and `codeco-pdlc eval`, the forecast evaluator on a
// user's traces.
#include <cstring>
#include <iostream>
#include <map>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "codeco/common/logging.h"
#include "codeco/common/server.h"
#include "codeco/common/status.h"
#include "pdlc/cli/eval_command.h"
#include "pdlc/core/federated_round.h"
#include "pdlc/core/lstm_forecaster.h"
#include "pdlc/server/federated_peer.h"
#include "pdlc/server/federated_service.h"
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
      .Add({"pdlc.forecast_model", ConfigType::kEnum, "lstm", {"lstm", "lstm-topology"}, false,
            "the forecaster: lstm (each node's own series) or lstm-topology (also the mean of "
            "the cluster's other nodes); a neighborhood's federated PDLCs must agree"})
      .Add({"pdlc.breach_threshold_percent", ConfigType::kInt, "80", {}, false,
            "usage (percent of capacity) whose forecast crossing raises a breach advisory, 1-100"})
      .Add({"pdlc.raw_retention", ConfigType::kDuration, "48h", {}, false,
            "raw samples are kept this long"})
      .Add({"pdlc.downsampled_retention", ConfigType::kDuration, "840h", {}, false,
            "5-minute means are kept this long (>= pdlc.raw_retention)"})
      .Add({"pdlc.auction.peers", ConfigType::kString, "", {}, false,
            "the neighborhood's other PDLCs this one asks for bids when it runs an auction "
            "(RunAuction), as cluster=host:port,...; empty: it bids alone"})
      .Add({"pdlc.federation.neighborhood", ConfigType::kString, "", {}, false,
            "neighborhood whose PDLCs train the LSTM together by secure FedAvg "
            "(empty: no federated training)"})
      .Add({"pdlc.federation.aggregator", ConfigType::kString, "", {}, false,
            "the neighborhood's aggregator PDLC as cluster=host:port (required with "
            "pdlc.federation.neighborhood; the PDLC of that cluster serves the rounds)"})
      .Add({"pdlc.federation.members", ConfigType::kString, "", {}, false,
            "aggregator: comma-separated clusters that may join rounds (empty: any member PDLC); "
            "joins close early once all of them joined"})
      .Add({"pdlc.federation.round_interval", ConfigType::kDuration, "1h", {}, false,
            "a peer takes part in a round every this long (when it trained since the last one); "
            "longer than the three windows together"})
      .Add({"pdlc.federation.join_window", ConfigType::kDuration, "1m", {}, false,
            "aggregator: joins are taken this long after a round's first join"})
      .Add({"pdlc.federation.collection_window", ConfigType::kDuration, "5m", {}, false,
            "aggregator: masked updates are taken this long after joins closed; "
            "participants that did not submit by then are dropped"})
      .Add({"pdlc.federation.reveal_window", ConfigType::kDuration, "1m", {}, false,
            "aggregator: survivors reveal their seeds with dropped peers within this long, "
            "else the round is abandoned"})
      .Add({"pdlc.federation.min_survivors", ConfigType::kInt, "2", {}, false,
            "aggregator: fewest peers whose updates a round aggregates (>= 2)"});
}

// The federated training settings of this PDLC (empty neighborhood: none).
struct FederationConfig {
  std::string neighborhood;
  std::string aggregator_cluster;
  std::string aggregator_address;
  absl::Duration round_interval;
  FederatedRoundOptions rounds;
};

// The name of the model the neighborhood trains: PDLC's LSTM over CPU and
// memory, by forecaster (peers of different shapes never share a round).
std::string FederatedModelName(const std::string& forecaster) {
  return absl::StrCat(forecaster, "-cpu-mem");
}

absl::StatusOr<FederationConfig> ReadFederationConfig(const codeco::Config& raw) {
  FederationConfig out;
  out.neighborhood = raw.GetString("pdlc.federation.neighborhood");
  if (out.neighborhood.empty()) return out;
  using Addresses = std::map<std::string, std::string>;
  ASSIGN_OR_RETURN(Addresses aggregator,
                   codeco::ParseNamedAddresses("pdlc.federation.aggregator",
                                               raw.GetString("pdlc.federation.aggregator"), "cluster"));
  if (aggregator.size() != 1) {
    return codeco::InvalidFieldError("pdlc.federation.aggregator",
                                     "must name exactly one cluster=host:port when "
                                     "pdlc.federation.neighborhood is set");
  }
  out.aggregator_cluster = aggregator.begin()->first;
  out.aggregator_address = aggregator.begin()->second;
  for (absl::string_view member :
       absl::StrSplit(raw.GetString("pdlc.federation.members"), ',', absl::SkipWhitespace())) {
    out.rounds.members.insert(std::string(absl::StripAsciiWhitespace(member)));
  }
  out.round_interval = raw.GetDuration("pdlc.federation.round_interval");
  const absl::Duration join = raw.GetDuration("pdlc.federation.join_window");
  const absl::Duration collection = raw.GetDuration("pdlc.federation.collection_window");
  const absl::Duration reveal = raw.GetDuration("pdlc.federation.reveal_window");
  for (auto [key, value] : {std::pair{"pdlc.federation.join_window", join},
                            {"pdlc.federation.collection_window", collection},
                            {"pdlc.federation.reveal_window", reveal}}) {
    if (value < absl::Seconds(1)) return codeco::InvalidFieldError(key, "must be at least 1s");
  }
  if (out.round_interval <= join + collection + reveal) {
    return codeco::InvalidFieldError(
        "pdlc.federation.round_interval",
        "must be longer than pdlc.federation.join_window + collection_window + reveal_window");
  }
  const int64_t min_survivors = raw.GetInt("pdlc.federation.min_survivors");
  if (min_survivors < 2 || min_survivors > 64) {
    return codeco::InvalidFieldError("pdlc.federation.min_survivors", "must be 2-64");
  }
  out.rounds.model_name = FederatedModelName(raw.GetString("pdlc.forecast_model"));
  out.rounds.neighborhood = out.neighborhood;
  out.rounds.join_window_ms = absl::ToInt64Milliseconds(join);
  out.rounds.collection_window_ms = absl::ToInt64Milliseconds(collection);
  out.rounds.reveal_window_ms = absl::ToInt64Milliseconds(reveal);
  out.rounds.min_survivors = static_cast<size_t>(min_survivors);
  out.rounds.min_participants = out.rounds.min_survivors;
  // Checks the members' names and the rest once more, naming the option.
  if (absl::Status s = FederatedRounds::Create(out.rounds).status(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("pdlc.federation: ", s.message()));
  }
  return out;
}

// Everything one PDLC runs on, built before the service that serves it.
struct Parts {
  std::unique_ptr<TelemetryStore> store;
  std::unique_ptr<Advisor> advisor;
  std::unique_ptr<PrometheusClient> prometheus;
  std::unique_ptr<TelemetryScraper> scraper;
  std::unique_ptr<codeco::PeerChannels> lms_channels;
  std::unique_ptr<LmsNodeInventory> inventory;
  // The advisor's LSTM as the federated peer reads and replaces its weights
  // (owned by the advisor).
  SharedWeightsForecaster* shared_model = nullptr;
};

// The served service, owning its parts (destroyed after the service).
class OwningService final : public PdlcServiceImpl {
 public:
  OwningService(std::shared_ptr<Parts> parts, codeco::Clock& clock, AuctionOptions auction)
      : PdlcServiceImpl(*parts->advisor, *parts->store,
                        [&clock] { return absl::ToUnixMillis(clock.Now()); }, std::move(auction)),
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

// The federated peer's loop, keeping the parts (the model) alive as long as it runs.
class OwningPeerLoop final : public codeco::BackgroundWork {
 public:
  OwningPeerLoop(std::shared_ptr<Parts> parts, std::unique_ptr<FederatedPeer> peer,
                 absl::Duration interval)
      : parts_(std::move(parts)), loop_(std::move(peer), interval) {}
  void Stop() override { loop_.Stop(); }

 private:
  std::shared_ptr<Parts> parts_;
  FederatedPeerLoop loop_;
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
  ASSIGN_OR_RETURN(FederationConfig federation, ReadFederationConfig(raw));
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
  // pdlc.forecast_model is an enum key: the schema refused any other value.
  auto lstm = std::make_unique<LstmForecaster>(
      LstmOptions{.read_neighbors = raw.GetString("pdlc.forecast_model") == "lstm-topology"});
  LstmForecaster* lstm_ptr = lstm.get();
  auto shared_model = std::make_unique<SharedWeightsForecaster>(
      std::move(lstm),
      SharedWeightsForecaster::Access{
          .weights = [lstm_ptr] { return lstm_ptr->Weights(); },
          .set_weights = [lstm_ptr](const std::vector<float>& w) { return lstm_ptr->SetWeights(w); },
          .trained_samples = [lstm_ptr] { return static_cast<uint64_t>(lstm_ptr->last_training_windows()); }});
  parts->shared_model = shared_model.get();
  parts->advisor = std::make_unique<Advisor>(*parts->store, std::move(shared_model), advisor);

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
  AuctionOptions auction;
  auction.cluster = context.config.cluster;
  auction.hub_cluster = context.config.hub_cluster;
  {
    using Addresses = std::map<std::string, std::string>;
    ASSIGN_OR_RETURN(Addresses peers,
                     codeco::ParseNamedAddresses("pdlc.auction.peers",
                                                 raw.GetString("pdlc.auction.peers"), "cluster"));
    for (const auto& [cluster, address] : peers) {
      if (cluster == context.config.cluster) continue;  // this PDLC bids itself
      ASSIGN_OR_RETURN(auction.peers[cluster], context.peers.Get(address));
    }
  }
  services.push_back(std::make_unique<OwningService>(parts, context.clock, std::move(auction)));

  if (federation.neighborhood.empty()) {
    services.push_back(std::make_unique<v1::FederatedLearningService::CallbackService>());
    return services;
  }
  if (federation.aggregator_cluster == context.config.cluster) {
    ASSIGN_OR_RETURN(FederatedRounds rounds, FederatedRounds::Create(federation.rounds));
    codeco::Clock& clock = context.clock;
    services.push_back(std::make_unique<FederatedLearningServiceImpl>(
        std::move(rounds), [&clock] { return absl::ToUnixMillis(clock.Now()); },
        context.config.hub_cluster));
  } else {
    services.push_back(std::make_unique<v1::FederatedLearningService::CallbackService>());
  }
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> aggregator,
                   context.peers.Get(federation.aggregator_address));
  FederatedPeerOptions peer;
  peer.peer_id = context.config.cluster;
  peer.model_name = federation.rounds.model_name;  // the rounds' model, named once
  peer.neighborhood = federation.neighborhood;
  context.background.push_back(std::make_unique<OwningPeerLoop>(
      parts, std::make_unique<FederatedPeer>(std::move(aggregator), *parts->shared_model, peer),
      federation.round_interval));
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
                                "operations (GetOperation) are not served yet"},
                               {"codeco.pdlc.v1.FederatedLearningService",
                                "only the neighborhood's aggregator PDLC serves federated rounds "
                                "(pdlc.federation.aggregator)"}}});
}
