// codeco-netma: wires the NetMA server (NSM probing, Nemesys ALTO maps,
// neighborhood summaries, virtual links) into the shared bootstrap.
#include <cstdlib>

#include "absl/strings/str_split.h"
#include "codeco/common/server.h"
#include "codeco/common/status.h"
#include "netma/server/netma_service.h"

namespace {

using codeco::ConfigField;
using codeco::ConfigSchema;
using codeco::ConfigType;

void AddNetmaConfig(ConfigSchema& schema) {
  schema
      .Add({"netma.peers",
            ConfigType::kString,
            "",
            {},
            false,
            "peer NetMAs, <cluster>=<host:port>,... (probed when they share a neighborhood)"})
      .Add({"netma.neighborhoods",
            ConfigType::kString,
            "",
            {},
            false,
            "neighborhoods, <id>=<cluster>,<cluster>;... (summaries are scoped to them)"})
      .Add({"netma.endpoints",
            ConfigType::kString,
            "",
            {},
            false,
            "IP addresses or prefixes of this cluster's ALTO PID, comma-separated "
            "(default: the host of listen)"})
      .Add({"netma.probe_interval",
            ConfigType::kDuration,
            "5s",
            {},
            false,
            "time between two probes of the same peer"})
      .Add({"netma.probe_timeout", ConfigType::kDuration, "2s", {}, false, "deadline of one probe"})
      .Add({"netma.bulk_bytes",
            ConfigType::kInt,
            "65536",
            {},
            false,
            "bytes of one throughput sample (at most 1048576)"})
      .Add({"netma.bulk_every",
            ConfigType::kInt,
            "6",
            {},
            false,
            "every n-th probe of a peer carries a throughput sample (0 = never)"})
      .Add({"netma.failure_threshold",
            ConfigType::kInt,
            "3",
            {},
            false,
            "consecutive failed probes after which a link is down"})
      .Add({"netma.ema_alpha",
            ConfigType::kString,
            "0.2",
            {},
            false,
            "weight of the newest RTT in the EMA, in (0, 1]"})
      .Add({"netma.summary_interval",
            ConfigType::kDuration,
            "10s",
            {},
            false,
            "how often summaries are exchanged with neighborhood peers"})
      .Add({"netma.alto_listen",
            ConfigType::kAddress,
            "127.0.0.1:0",
            {},
            false,
            "ALTO HTTP listen address (empty: no HTTP)"})
      .Add({"netma.codef_control",
            ConfigType::kString,
            "",
            {},
            false,
            "hub, testbed only: host:port of CODEF's control API; its relays are the edge "
            "devices virtual links are installed on (empty: the rules are only modelled)"})
      .Add({"netma.controllers",
            ConfigType::kString,
            "idco-0",
            {},
            false,
            "virtual-link controller instances (hub), comma-separated"});
}

absl::StatusOr<std::vector<std::unique_ptr<grpc::Service>>> MakeServices(
    codeco::ServiceContext& context) {
  using codeco::netma::NetmaServerOptions;
  const codeco::Config& raw = context.config.raw;
  NetmaServerOptions options;
  options.cluster = context.config.cluster;
  options.hub_cluster = context.config.hub_cluster;
  options.role = context.config.role;
  ASSIGN_OR_RETURN(auto peers, codeco::ParseNamedAddresses(
                                    "netma.peers", raw.GetString("netma.peers"), "cluster"));
  for (auto& [cluster, address] : peers) options.peers.push_back({cluster, address});
  ASSIGN_OR_RETURN(options.neighborhoods,
                   codeco::netma::ParseNeighborhoods("netma.neighborhoods",
                                                     raw.GetString("netma.neighborhoods")));
  if (raw.Has("netma.endpoints")) {
    options.local_endpoints =
        absl::StrSplit(raw.GetString("netma.endpoints"), ',', absl::SkipWhitespace());
  } else {
    const std::string& listen = context.config.listen;
    std::string host = listen.substr(0, listen.rfind(':'));
    if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    options.local_endpoints = {host};
  }
  // With a fixed port NetMA can probe itself to measure its call overhead.
  if (const std::string& listen = context.config.listen;
      !listen.empty() && listen.substr(listen.rfind(':') + 1) != "0") {
    options.self_address = listen;
  }
  options.monitor.probe.interval = raw.GetDuration("netma.probe_interval");
  options.monitor.probe.timeout = raw.GetDuration("netma.probe_timeout");
  options.monitor.probe.bulk_bytes = raw.GetInt("netma.bulk_bytes");
  options.monitor.probe.bulk_every = static_cast<int>(raw.GetInt("netma.bulk_every"));
  options.monitor.link.failure_threshold = static_cast<int>(raw.GetInt("netma.failure_threshold"));
  char* end = nullptr;
  const std::string& alpha = raw.GetString("netma.ema_alpha");
  options.monitor.link.ema_alpha = std::strtod(alpha.c_str(), &end);
  if (end == alpha.c_str() || *end != '\0') {
    return codeco::InvalidFieldError("netma.ema_alpha", "must be a number in (0, 1]");
  }
  options.monitor.stale_after = 3 * options.monitor.probe.interval;
  options.summary_interval = raw.GetDuration("netma.summary_interval");
  options.federation.stale_after = 3 * options.summary_interval;
  options.alto_listen = raw.GetString("netma.alto_listen");
  options.codef_control = raw.GetString("netma.codef_control");
  options.controllers =
      absl::StrSplit(raw.GetString("netma.controllers"), ',', absl::SkipWhitespace());
  options.channels.insecure = context.config.insecure;
  options.channels.tls = context.config.tls;
  options.channels.egress_proxy = raw.GetString("network.egress_proxy");
  ASSIGN_OR_RETURN(auto server,
                   codeco::netma::NetmaServer::Create(std::move(options), context.store,
                                                      context.clock, &context.metrics));
  std::vector<std::unique_ptr<grpc::Service>> services;
  services.push_back(std::move(server));
  return services;
}

}  // namespace

int main(int argc, char** argv) {
  return codeco::RunServiceMain(
      argc, argv,
      {.name = "netma",
       .column_families = {"link_metrics", "topology", "virtual_links", "operations"},
       .add_config = AddNetmaConfig,
       .make_services = MakeServices});
}
