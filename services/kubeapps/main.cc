// codeco-kubeapps: the CodecoApp shim. It follows the CodecoApp objects of a
// Kubernetes cluster (the CRDs of deploy/k8s/overlays/hub) and forwards them
// to the hub ACM (federation.hub_acm), so `kubectl apply -f bookinfo.yaml`
// places the application; ACM's phase and placements come back into each
// object's status. It reaches kube-apiserver with a kubeconfig
// (kube.kubeconfig) or, inside a pod, with the pod's service account, and ACM
// with its own identity (<hub>/kubeapps), which ACM lets apply and delete.
#include "absl/strings/str_split.h"
#include "codeco/common/server.h"
#include "codeco/common/status.h"
#include "codeco/kube/http_kube_api.h"
#include "kubeapps/server/kubeapps_work.h"

namespace {

using codeco::ConfigSchema;
using codeco::ConfigType;

void AddKubeAppsConfig(ConfigSchema& schema) {
  codeco::kube::AddKubeConfig(schema);
  schema
      .Add({"kube.namespace",
            ConfigType::kString,
            "",
            {},
            false,
            "namespace whose CodecoApp objects are forwarded (empty: every namespace)"})
      .Add({"kube.resources",
            ConfigType::kString,
            "codeco.io/v1,codeco.he-codeco.eu/v1alpha1",
            {},
            false,
            "CodecoApp resources followed, comma-separated group/version[/plural]"})
      .Add({"kubeapps.status_interval",
            ConfigType::kDuration,
            "5s",
            {},
            false,
            "how often ACM's phase and placements are copied into the objects' status"})
      .Add({"kubeapps.acm_timeout",
            ConfigType::kDuration,
            "10s",
            {},
            false,
            "timeout of one call to ACM"});
}

absl::StatusOr<std::vector<std::unique_ptr<grpc::Service>>> MakeServices(
    codeco::ServiceContext& context) {
  using codeco::InvalidFieldError;
  namespace kubeapps = codeco::kubeapps;
  const codeco::Config& raw = context.config.raw;
  if (context.config.hub_acm.empty()) {
    return InvalidFieldError("federation.hub_acm", "required: the ACM the objects go to");
  }
  ASSIGN_OR_RETURN(codeco::kube::KubeEndpoint endpoint, codeco::kube::KubeEndpointFromConfig(raw));
  kubeapps::CodecoAppSyncOptions options;
  options.ns = raw.GetString("kube.namespace");
  options.resources.clear();
  for (absl::string_view text :
       absl::StrSplit(raw.GetString("kube.resources"), ',', absl::SkipWhitespace())) {
    ASSIGN_OR_RETURN(kubeapps::CodecoAppResource resource,
                     kubeapps::ParseCodecoAppResource(std::string(text), "kube.resources"));
    options.resources.push_back(std::move(resource));
  }
  if (options.resources.empty()) return InvalidFieldError("kube.resources", "names no resource");
  ASSIGN_OR_RETURN(options.kube, codeco::kube::KubeClientOptionsFromConfig(raw));
  options.status_interval = raw.GetDuration("kubeapps.status_interval");
  const absl::Duration acm_timeout = raw.GetDuration("kubeapps.acm_timeout");
  for (const auto& [key, d] : {std::pair{"kubeapps.status_interval", options.status_interval},
                               std::pair{"kubeapps.acm_timeout", acm_timeout}}) {
    if (d < absl::Milliseconds(100) || d > absl::Hours(1)) {
      return InvalidFieldError(key, "must be 100ms-1h");
    }
  }
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> acm_channel,
                   context.peers.Get(context.config.hub_acm));
  auto api = codeco::kube::MakeHttpKubeApi(std::move(endpoint), options.kube);
  context.background.push_back(std::make_unique<kubeapps::KubeAppsWork>(
      std::move(api), std::make_unique<kubeapps::GrpcAcmApplications>(acm_channel, acm_timeout),
      &context.clock, std::move(options), context.metrics));
  // Health and metrics only: the shim serves no API of its own.
  return std::vector<std::unique_ptr<grpc::Service>>();
}

}  // namespace

int main(int argc, char** argv) {
  return codeco::RunServiceMain(argc, argv,
                                {.name = "kubeapps",
                                 .column_families = {},
                                 .add_config = AddKubeAppsConfig,
                                 .make_services = MakeServices});
}
