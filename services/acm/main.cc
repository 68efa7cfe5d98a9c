// codeco-acm: wires the acm service into the shared bootstrap. On the hub it
// serves the user-facing API and asks SWM (acm.swm) for placements; in a
// managed cluster it also runs the agent that registers the cluster with the
// hub ACM (federation.hub_acm) and heartbeats what its LMS (federation.lms)
// reports, keeping local copies of its neighborhoods and assignments.
#include <algorithm>
#include <iterator>
#include <memory>
#include <optional>

#include "acm/core/local_copies.h"
#include "acm/core/member_publisher.h"
#include "acm/server/acm_service.h"
#include "acm/server/cluster_agent.h"
#include "acm/server/policy_webhook.h"
#include "acm/store/kv_application_store.h"
#include "codeco/common/server.h"
#include "codeco/common/status.h"

namespace {

// `listen` when others can dial it as it is: a host:port whose host is not
// a wildcard and whose port is not 0.
std::optional<std::string> ConcreteAddress(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  const std::string host = listen.substr(0, colon);
  const std::string port = listen.substr(colon + 1);
  if (port.empty() || port == "0") return std::nullopt;
  if (host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::") return std::nullopt;
  return listen;
}

void AddConfig(codeco::ConfigSchema& schema) {
  // clang-format off
  schema
      .Add({"acm.swm", codeco::ConfigType::kAddress, "", {}, false,
            "hub: the hub SWM's address; placements are asked there (empty: applications "
            "stay PENDING)"})
      .Add({"acm.placement_timeout", codeco::ConfigType::kDuration, "60s", {}, false,
            "hub: deadline of one placement request to SWM"})
      .Add({"acm.placement_concurrency", codeco::ConfigType::kInt, "4", {}, false,
            "hub: placement and release requests in flight to SWM at once (1-64); one "
            "application's requests always go one after the other"})
      .Add({"acm.heartbeat_interval", codeco::ConfigType::kDuration, "5s", {}, false,
            "mc: time between the agent's heartbeats to the hub until the hub's answer names "
            "its own (acm.registry_heartbeat_interval there)"})
      .Add({"acm.registry_heartbeat_interval", codeco::ConfigType::kDuration, "10s", {}, false,
            "hub, and a parent in a layered cluster tree: the heartbeat interval asked of the "
            "agents registered here (at least 100ms); a cluster silent for 3 intervals is "
            "UNREACHABLE"})
      .Add({"acm.pod_report_delay", codeco::ConfigType::kDuration, "200ms", {}, false,
            "mc: least time between two agent reports; a pod change the agent sees on the "
            "LMS's pod watch reaches the hub after at most this (0s: pods only with heartbeats)"})
      .Add({"acm.advertise", codeco::ConfigType::kString, "", {}, false,
            "mc: this cluster's service endpoints the agent registers with the hub, as "
            "service=host:port,... (e.g. swm=10.1.0.2:17501); the hub hands them to the "
            "members of each neighborhood, and its SWM reaches the cluster's SWM there"})
      .Add({"acm.parent", codeco::ConfigType::kString, "", {}, false,
            "mc: this cluster's parent in a cluster tree, registered with the hub "
            "(codecoctl get tree); empty: directly under the hub"})
      .Add({"acm.reevaluate_after", codeco::ConfigType::kDuration, "5m", {}, false,
            "hub: a cluster silent this long (UNREACHABLE) has its applications moved to a "
            "neighborhood without it (0: never)"})
      .Add({"acm.reevaluate_interval", codeco::ConfigType::kDuration, "10s", {}, false,
            "hub: how often long-unreachable clusters are looked for"})
      .Add({"acm.autoscale_interval", codeco::ConfigType::kDuration, "15s", {}, false,
            "hub: how often the multi-cluster autoscaler measures the services with "
            "autoscaling and changes their replica counts (0: never)"})
      .Add({"acm.unplaced_retry_interval", codeco::ConfigType::kDuration, "30s", {}, false,
            "hub: replicas a scale left with no node are placed again after this, doubling "
            "up to 5m while they still find none (0s: only at a later apply)"})
      .Add({"acm.operation_retention", codeco::ConfigType::kDuration, "168h", {}, false,
            "a done operation is deleted this long after it last changed, unless an "
            "application still names it"})
      .Add({"acm.request_retention", codeco::ConfigType::kDuration, "24h", {}, false,
            "how long a request_id is remembered: a request repeated within it gets the "
            "first answer"})
      .Add({"acm.policy_bundle", codeco::ConfigType::kString, "", {}, false,
            "the signed policy bundle (YAML; its signature in <path>.sig) the admission "
            "chain follows, read again every acm.policy_reload_interval (empty: the "
            "built-in defaults; docs/policies.md)"})
      .Add({"acm.policy_bundle_key", codeco::ConfigType::kString, "", {}, false,
            "PEM Ed25519 public key a policy bundle's signature must verify with "
            "(required with acm.policy_bundle)"})
      .Add({"acm.policy_reload_interval", codeco::ConfigType::kDuration, "5s", {}, false,
            "how often the policy bundle's files are read again"})
      .Add({"acm.policy_webhook", codeco::ConfigType::kString, "", {}, false,
            "an OPA-compatible decision URL (e.g. http://127.0.0.1:8181/v1/data/codeco/admit) "
            "the admission chain asks about every applied spec before its built-in policies "
            "(empty: none; docs/policies.md)"})
      .Add({"acm.policy_webhook_timeout", codeco::ConfigType::kDuration, "2s", {}, false,
            "how long an apply waits for the webhook's decision (10ms-30s)"})
      .Add({"acm.policy_webhook_ca_file", codeco::ConfigType::kString, "", {}, false,
            "PEM CAs of an https webhook's certificate (empty: the system's)"})
      .Add({"acm.policy_webhook_on_failure", codeco::ConfigType::kString, "refuse", {}, false,
            "without a decision from the webhook (unreachable, an error, no result): "
            "refuse (the apply fails UNAVAILABLE) or admit (with a warning)"});
  // clang-format on
}

absl::StatusOr<std::vector<std::unique_ptr<grpc::Service>>> MakeServices(
    codeco::ServiceContext& context) {
  const codeco::ServiceConfig& config = context.config;

  codeco::acm::AcmServiceOptions options;
  options.placement_timeout = config.raw.GetDuration("acm.placement_timeout");
  const int64_t concurrency = config.raw.GetInt("acm.placement_concurrency");
  if (concurrency < 1 || concurrency > 64) {
    return codeco::InvalidFieldError("acm.placement_concurrency", "must be 1-64");
  }
  options.placement_concurrency = static_cast<int>(concurrency);
  options.hub_cluster = config.hub_cluster;
  options.clusters.heartbeat_interval = config.raw.GetDuration("acm.registry_heartbeat_interval");
  if (options.clusters.heartbeat_interval < absl::Milliseconds(100)) {
    return codeco::InvalidFieldError("acm.registry_heartbeat_interval", "must be at least 100ms");
  }
  for (const char* key : {"acm.operation_retention", "acm.request_retention"}) {
    if (config.raw.GetDuration(key) < absl::Minutes(1)) {
      return codeco::InvalidFieldError(key, "must be at least 1m");
    }
  }
  options.manager.operation_retention = config.raw.GetDuration("acm.operation_retention");
  options.manager.request_retention = config.raw.GetDuration("acm.request_retention");
  const absl::Duration unplaced_retry = config.raw.GetDuration("acm.unplaced_retry_interval");
  if (unplaced_retry < absl::ZeroDuration()) {
    return codeco::InvalidFieldError("acm.unplaced_retry_interval", "must not be negative");
  }
  options.manager.unplaced_retry.initial = unplaced_retry;
  options.manager.unplaced_retry.max = std::max(unplaced_retry, absl::Minutes(5));
  if (config.raw.Has("acm.policy_bundle") && !config.raw.GetString("acm.policy_bundle").empty()) {
    if (!config.raw.Has("acm.policy_bundle_key") ||
        config.raw.GetString("acm.policy_bundle_key").empty()) {
      return codeco::InvalidFieldError("acm.policy_bundle_key",
                                       "required when acm.policy_bundle is set");
    }
    if (config.raw.GetDuration("acm.policy_reload_interval") < absl::Milliseconds(100)) {
      return codeco::InvalidFieldError("acm.policy_reload_interval", "must be at least 100ms");
    }
    options.policy_bundle = {config.raw.GetString("acm.policy_bundle"),
                             config.raw.GetString("acm.policy_bundle_key")};
    options.policy_reload_interval = config.raw.GetDuration("acm.policy_reload_interval");
  }
  if (config.raw.Has("acm.policy_webhook") && !config.raw.GetString("acm.policy_webhook").empty()) {
    codeco::acm::PolicyWebhookOptions webhook;
    webhook.url = config.raw.GetString("acm.policy_webhook");
    webhook.timeout = config.raw.GetDuration("acm.policy_webhook_timeout");
    webhook.ca_file = config.raw.GetString("acm.policy_webhook_ca_file");
    RETURN_IF_ERROR(codeco::acm::ValidatePolicyWebhookOptions(webhook));
    const std::string on_failure = config.raw.GetString("acm.policy_webhook_on_failure");
    if (on_failure != "refuse" && on_failure != "admit") {
      return codeco::InvalidFieldError("acm.policy_webhook_on_failure",
                                       "must be refuse or admit, got \"" + on_failure + "\"");
    }
    options.policy_webhook = {
        std::make_shared<codeco::acm::HttpPolicyDecisionPort>(std::move(webhook)),
        on_failure == "refuse"};
  }
  if (config.role == codeco::Role::kHub &&
      config.raw.GetDuration("acm.reevaluate_after") > absl::ZeroDuration()) {
    options.reevaluate_after = config.raw.GetDuration("acm.reevaluate_after");
    options.reevaluate_interval = config.raw.GetDuration("acm.reevaluate_interval");
  }
  options.autoscale_interval = config.role == codeco::Role::kHub
                                   ? config.raw.GetDuration("acm.autoscale_interval")
                                   : absl::ZeroDuration();
  if (config.role == codeco::Role::kHub && config.raw.Has("acm.swm")) {
    auto channel = context.peers.Get(config.raw.GetString("acm.swm"));
    if (!channel.ok()) return channel.status();
    options.swm_channel = *channel;
  }
  std::optional<codeco::acm::ClusterAgentOptions> agent_options;
  if (config.role == codeco::Role::kManagedCluster && !config.hub_acm.empty()) {
    if (config.lms.empty()) {
      return codeco::InvalidFieldError("federation.lms",
                                       "required in a managed cluster that reports to a hub");
    }
    // The agent keeps the local copies in step with the hub; the service
    // takes pushes into them and serves GetNeighborhood from them.
    options.local_copies =
        std::make_shared<codeco::acm::LocalCopies>(context.store, config.cluster);
    // The missions its upstream relays to it (and to the clusters below it).
    options.missions =
        std::make_shared<codeco::acm::MissionRelay>(context.store, context.clock, /*root=*/false);
    codeco::acm::ClusterAgentOptions agent{config.cluster, config.hub_acm, config.lms,
                                           config.lms_plaintext,
                                           config.raw.GetDuration("acm.heartbeat_interval")};
    absl::StatusOr<std::map<std::string, std::string>> advertised = codeco::ParseNamedAddresses(
        "acm.advertise", config.raw.Has("acm.advertise") ? config.raw.GetString("acm.advertise") : "",
        "service");
    if (!advertised.ok()) return advertised.status();
    agent.endpoints = *std::move(advertised);
    agent.pod_report_delay = config.raw.GetDuration("acm.pod_report_delay");
    agent.parent = config.raw.Has("acm.parent") ? config.raw.GetString("acm.parent") : "";
    // The hub pushes this cluster its copies at its own ACM: advertised
    // unless acm.advertise says otherwise and the listen address is a
    // concrete host:port (not a wildcard, not port 0).
    if (!agent.endpoints.count(codeco::acm::kAcmEndpoint)) {
      if (std::optional<std::string> own = ConcreteAddress(config.listen)) {
        agent.endpoints[codeco::acm::kAcmEndpoint] = *own;
      }
    }
    agent_options = std::move(agent);
  }
  // The hub pushes neighborhoods and assignments to the clusters' ACMs.
  if (config.role == codeco::Role::kHub) options.member_peers = &context.peers;
  std::unique_ptr<codeco::acm::AcmServiceImpl> service =
      codeco::acm::NewAcmService(context.store, context.clock, options);
  if (agent_options) {
    // The agent reports the clusters registered at this ACM as its subtree.
    context.background.push_back(std::make_unique<codeco::acm::ClusterAgent>(
        *std::move(agent_options), context.peers, options.local_copies, options.missions,
        &service->registry()));
  }
  std::vector<std::unique_ptr<grpc::Service>> services;
  services.push_back(std::move(service));
  return services;
}

}  // namespace

int main(int argc, char** argv) {
  return codeco::RunServiceMain(argc, argv,
                                {.name = "acm",
                                 .column_families = codeco::acm::AcmServiceColumnFamilies(),
                                 .add_config = AddConfig,
                                 .make_services = MakeServices});
}
