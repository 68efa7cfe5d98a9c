#include "federation_plan.h"

namespace codeco::ctl {
namespace {

ProcessSpec Plan(const ClusterEndpoint& cluster, const std::string& service, bool hub,
                 const SecuritySettings& security, const std::string& data_dir,
                 const std::string& hub_acm) {
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
  if (!hub_acm.empty()) spec.args.insert(spec.args.end(), {"--federation.hub-acm", hub_acm});
  return spec;
}

}  // namespace

const std::vector<std::string>& HubServices() {
  // ACM last: it is started with the address of the hub's SWM.
  static const std::vector<std::string> kServices = {"swm", "netma", "mdm", "acm"};
  return kServices;
}

const std::vector<std::string>& ManagedClusterServices() {
  static const std::vector<std::string> kServices = {"acm",  "swm", "pdlc",
                                                      "netma", "mdm", "checkpointer"};
  return kServices;
}

std::vector<ProcessSpec> PlanHub(const ClusterEndpoint& hub, const SecuritySettings& security,
                                 const std::string& data_dir) {
  std::vector<ProcessSpec> out;
  for (const auto& service : HubServices()) {
    out.push_back(Plan(hub, service, /*hub=*/true, security, data_dir, ""));
  }
  return out;
}

std::vector<ProcessSpec> PlanManagedClusters(const std::vector<ClusterEndpoint>& clusters,
                                             const std::string& hub_acm,
                                             const SecuritySettings& security,
                                             const std::string& data_dir) {
  std::vector<ProcessSpec> out;
  for (const auto& cluster : clusters) {
    if (cluster.is_hub) continue;
    for (const auto& service : ManagedClusterServices()) {
      out.push_back(Plan(cluster, service, /*hub=*/false, security, data_dir, hub_acm));
    }
  }
  return out;
}

}  // namespace codeco::ctl
