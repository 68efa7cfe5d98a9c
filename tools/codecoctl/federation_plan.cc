#include "federation_plan.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace codeco::ctl {
namespace {

// The one neighborhood NetMAs probe and share summaries in: everyone.
constexpr char kNetmaNeighborhood[] = "federation";

// The hub SWM's links come from the hub NetMA (one topology read per
// placement). It learns each managed cluster's SWM from the neighborhood ACM
// hands it: the cluster's agent registers it (acm.advertise, below).
void AddSwmLayers(const ClusterEndpoint& hub, ProcessSpec& spec) {
  if (!hub.netma_address.empty()) {
    spec.args.insert(spec.args.end(), {"--set", "swm.netma=" + hub.netma_address});
  }
}

// A managed cluster's ACM agent registers the cluster's own service endpoints
// with the hub, so the hub's services reach them through ACM's registry.
void AddAdvertisedEndpoints(const ClusterEndpoint& cluster, ProcessSpec& spec) {
  std::vector<std::string> endpoints;
  if (!cluster.swm_address.empty()) endpoints.push_back("swm=" + cluster.swm_address);
  if (!cluster.netma_address.empty()) endpoints.push_back("netma=" + cluster.netma_address);
  if (!cluster.pdlc_address.empty()) endpoints.push_back("pdlc=" + cluster.pdlc_address);
  // The hub's SWM moves stateful workloads' state through it.
  if (!cluster.checkpointer_address.empty()) {
    endpoints.push_back("checkpointer=" + cluster.checkpointer_address);
  }
  if (!endpoints.empty()) {
    spec.args.insert(spec.args.end(),
                     {"--set", "acm.advertise=" + absl::StrJoin(endpoints, ",")});
  }
}

// The federated training of the managed clusters' PDLCs (those with a chosen
// address): one neighborhood, the first such cluster's PDLC aggregates.
void AddPdlcFederation(const std::vector<ClusterEndpoint>& clusters, ProcessSpec& spec) {
  std::vector<std::string> members;
  const ClusterEndpoint* aggregator = nullptr;
  for (const ClusterEndpoint& c : clusters) {
    if (c.is_hub || c.pdlc_address.empty()) continue;
    members.push_back(c.name);
    if (aggregator == nullptr) aggregator = &c;
  }
  if (members.size() < 2) return;  // a round needs two peers
  spec.args.insert(spec.args.end(),
                   {"--set", absl::StrCat("pdlc.federation.neighborhood=", kNetmaNeighborhood), "--set",
                    absl::StrCat("pdlc.federation.aggregator=", aggregator->name, "=", aggregator->pdlc_address),
                    "--set", "pdlc.federation.members=" + absl::StrJoin(members, ",")});
}

// The managed clusters' other PDLCs, which `cluster`'s PDLC asks for bids
// when it runs a neighborhood auction.
void AddPdlcAuctionPeers(const ClusterEndpoint& cluster, const std::vector<ClusterEndpoint>& clusters,
                         ProcessSpec& spec) {
  std::vector<std::string> peers;
  for (const ClusterEndpoint& c : clusters) {
    if (c.is_hub || c.pdlc_address.empty() || c.name == cluster.name) continue;
    peers.push_back(c.name + "=" + c.pdlc_address);
  }
  if (peers.empty()) return;
  spec.args.insert(spec.args.end(), {"--set", "pdlc.auction.peers=" + absl::StrJoin(peers, ",")});
}

// NetMA's listen address, peers and neighborhood for `cluster`.
void AddNetmaMesh(const ClusterEndpoint& cluster, const std::vector<ClusterEndpoint>& clusters,
                  ProcessSpec& spec) {
  if (cluster.netma_address.empty()) return;
  std::vector<std::string> peers, members;
  for (const ClusterEndpoint& c : clusters) {
    if (c.netma_address.empty()) continue;
    members.push_back(c.name);
    if (c.name != cluster.name) peers.push_back(c.name + "=" + c.netma_address);
  }
  SetListen(cluster.netma_address, spec);
  spec.args.insert(spec.args.end(),
                   {"--netma.peers", absl::StrJoin(peers, ","), "--netma.neighborhoods",
                    absl::StrCat(kNetmaNeighborhood, "=", absl::StrJoin(members, ",")),
                    // Summaries as often as probes, so the hub's view lags by one interval.
                    "--netma.summary-interval", "5s"});
}

// A checkpointer's listen address, its peers (the other clusters'
// checkpointers: migration targets) and the registry it pushes to.
void AddCheckpointerMesh(const ClusterEndpoint& cluster,
                         const std::vector<ClusterEndpoint>& clusters, ProcessSpec& spec) {
  if (!cluster.checkpointer_address.empty()) SetListen(cluster.checkpointer_address, spec);
  std::vector<std::string> peers;
  for (const ClusterEndpoint& c : clusters) {
    if (c.name != cluster.name && !c.checkpointer_address.empty()) {
      peers.push_back(c.name + "=" + c.checkpointer_address);
    }
  }
  if (!peers.empty()) {
    spec.args.insert(spec.args.end(), {"--set", "checkpointer.peers=" + absl::StrJoin(peers, ",")});
  }
  if (!cluster.registry.empty()) {
    spec.args.insert(spec.args.end(),
                     {"--set", "checkpointer.repository=" + cluster.registry + "/codeco/checkpoints",
                      "--set", "checkpointer.registry_plaintext=true"});
  }
}

// The cluster called `name` in `clusters`, or null.
const ClusterEndpoint* FindCluster(const std::vector<ClusterEndpoint>& clusters,
                                   const std::string& name) {
  for (const ClusterEndpoint& c : clusters) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

ProcessSpec Plan(const ClusterEndpoint& cluster, const std::string& service, bool hub,
                 const SecuritySettings& security, const std::string& data_dir,
                 const std::string& hub_acm, const std::vector<ClusterEndpoint>& clusters,
                 codef::FederationMode mode) {
  ProcessSpec spec;
  spec.name = cluster.name + "/" + service;
  spec.cluster = cluster.name;
  spec.service = service;
  spec.hub = hub;
  spec.binary = "codeco-" + service;
  spec.args = {"--role",           hub ? "hub" : "mc",
               "--cluster",        cluster.name,
               "--listen",         cluster.service_ip + ":0",
               "--metrics-listen", cluster.service_ip + ":0",
               "--data-dir",       data_dir + "/" + cluster.name + "/" + service};
  if (security.insecure) {
    spec.args.push_back("--insecure");
  } else {
    const std::string base = security.certs_dir + "/" + cluster.name + "/" + service;
    spec.args.insert(spec.args.end(), {"--tls.ca-file", security.certs_dir + "/ca.crt",
                                       "--tls.cert-file", base + ".crt", "--tls.key-file",
                                       base + ".key"});
  }
  if (!cluster.relay_address.empty()) {
    spec.args.insert(spec.args.end(), {"--network.egress-proxy", cluster.relay_address});
  }
  if (!cluster.lms_address.empty()) {
    spec.args.insert(spec.args.end(), {"--federation.lms", cluster.lms_address});
  }
  // CODEF's LMS endpoints and control API are plaintext on loopback.
  spec.args.push_back("--federation.lms-plaintext");
  // The agent (ACM) reports to its parent's ACM in a layered tree; the
  // cluster's other services still know the hub's (SWM probes it).
  const std::string reports_to =
      service == "acm" && !hub ? ReportingAcm(cluster, clusters, hub_acm, mode) : hub_acm;
  if (!reports_to.empty()) {
    spec.args.insert(spec.args.end(), {"--federation.hub-acm", reports_to});
  }
  // Whom an MC's services authorize hub and operator callers against.
  for (const ClusterEndpoint& c : clusters) {
    if (!hub && c.is_hub) spec.args.insert(spec.args.end(), {"--federation.hub-cluster", c.name});
  }
  if (service == "netma") AddNetmaMesh(cluster, clusters, spec);
  if (service == "checkpointer") AddCheckpointerMesh(cluster, clusters, spec);
  if (service == "swm" && hub) AddSwmLayers(cluster, spec);
  if (service == "acm" && !hub) AddAdvertisedEndpoints(cluster, spec);
  if (service == "acm" && !hub && !cluster.parent.empty()) {
    spec.args.insert(spec.args.end(), {"--set", "acm.parent=" + cluster.parent});
  }
  if (service == "swm" && !hub && !cluster.swm_address.empty()) {
    SetListen(cluster.swm_address, spec);
  }
  // The cluster's own L2 follows its PDLC's node scores.
  if (service == "swm" && !hub && !cluster.pdlc_address.empty()) {
    spec.args.insert(spec.args.end(), {"--set", "swm.pdlc_endpoints=" + cluster.name + "=" + cluster.pdlc_address});
  }
  if (service == "pdlc" && !cluster.pdlc_address.empty()) {
    SetListen(cluster.pdlc_address, spec);
    AddPdlcFederation(clusters, spec);
    AddPdlcAuctionPeers(cluster, clusters, spec);
  }
  // A fixed address: the agent registers it as the cluster's "acm" endpoint.
  if (service == "acm" && !hub && !cluster.acm_address.empty()) {
    SetListen(cluster.acm_address, spec);
  }
  return spec;
}

}  // namespace

void SetListen(const std::string& address, ProcessSpec& spec) {
  for (size_t i = 0; i + 1 < spec.args.size(); ++i) {
    if (spec.args[i] == "--listen") spec.args[i + 1] = address;
  }
}

const std::vector<std::string>& HubServices() {
  // MDM first: the hub's SWM is started with its address (the data sets a
  // dataLocality may name). ACM last: it is started with the address of the
  // hub's SWM.
  static const std::vector<std::string> kServices = {"mdm", "swm", "netma", "acm"};
  return kServices;
}

const std::vector<std::string>& ManagedClusterServices() {
  static const std::vector<std::string> kServices = {"acm",  "swm", "pdlc",
                                                      "netma", "mdm", "checkpointer"};
  return kServices;
}

std::vector<ProcessSpec> PlanHub(const std::vector<ClusterEndpoint>& clusters,
                                 const SecuritySettings& security, const std::string& data_dir,
                                 bool pdlc_auction) {
  std::vector<ProcessSpec> out;
  for (const auto& cluster : clusters) {
    if (!cluster.is_hub) continue;
    for (const auto& service : HubServices()) {
      out.push_back(Plan(cluster, service, /*hub=*/true, security, data_dir, "", clusters,
                         codef::FederationMode::kFlat));
      if (service == "swm" && pdlc_auction) {
        out.back().args.insert(out.back().args.end(), {"--set", "swm.pdlc_auction=true"});
      }
    }
  }
  return out;
}

std::vector<ProcessSpec> PlanManagedClusters(const std::vector<ClusterEndpoint>& clusters,
                                             const std::string& hub_acm,
                                             const SecuritySettings& security,
                                             const std::string& data_dir,
                                             codef::FederationMode mode) {
  std::vector<ProcessSpec> out;
  for (const auto& cluster : clusters) {
    if (cluster.is_hub) continue;
    for (const auto& service : ManagedClusterServices()) {
      out.push_back(
          Plan(cluster, service, /*hub=*/false, security, data_dir, hub_acm, clusters, mode));
    }
  }
  return out;
}

std::string ReportingAcm(const ClusterEndpoint& cluster,
                         const std::vector<ClusterEndpoint>& clusters, const std::string& hub_acm,
                         codef::FederationMode mode) {
  if (mode != codef::FederationMode::kLayered || cluster.parent.empty()) return hub_acm;
  const ClusterEndpoint* parent = FindCluster(clusters, cluster.parent);
  if (parent == nullptr || parent->is_hub || parent->acm_address.empty()) return hub_acm;
  return parent->acm_address;
}

absl::Status CheckReportingTree(const std::vector<ClusterEndpoint>& clusters,
                                codef::FederationMode mode) {
  if (mode != codef::FederationMode::kLayered) return absl::OkStatus();
  for (const ClusterEndpoint& c : clusters) {
    if (c.is_hub || c.parent.empty()) continue;
    const ClusterEndpoint* parent = FindCluster(clusters, c.parent);
    if (parent == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("cluster ", c.name, ": its parent \"",
                                                        c.parent,
                                                        "\" is not a cluster of the federation"));
    }
    if (!parent->is_hub && parent->acm_address.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cluster ", c.name, ": its parent ", c.parent,
                       " has no fixed ACM address to report to (layered mode)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace codeco::ctl
