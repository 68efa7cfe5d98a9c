// codeco-kubelms: codeco.lms.v1 served from a real Kubernetes cluster, for
// the cluster's codeco services in place of CODEF's emulated LMS. It reaches
// kube-apiserver with a kubeconfig (kube.kubeconfig) or, inside a pod, with
// the pod's service account.
#include "absl/strings/str_split.h"
#include "codeco/common/server.h"
#include "codeco/common/status.h"
#include "codeco/kube/http_kube_api.h"
#include "kubelms/server/kube_lms_service.h"

namespace {

using codeco::ConfigSchema;
using codeco::ConfigType;

void AddKubeConfig(ConfigSchema& schema) {
  codeco::kube::AddKubeConfig(schema);
  schema
      .Add({"kube.namespace",
            ConfigType::kString,
            "",
            {},
            false,
            "namespace of codeco's pods (empty: the context's or service account's, else "
            "default)"})
      .Add({"kube.gpu_resources",
            ConfigType::kString,
            "nvidia.com/gpu,amd.com/gpu",
            {},
            false,
            "extended resources counted as GPUs, comma-separated; pods ask for the first"})
      .Add({"kube.checkpoint_timeout",
            ConfigType::kDuration,
            "5m",
            {},
            false,
            "longest a kubelet checkpoint may take"})
      .Add({"kube.restore_timeout",
            ConfigType::kDuration,
            "5m",
            {},
            false,
            "longest RestoreContainer waits for the restored pod to run"})
      .Add({"kube.threads", ConfigType::kInt, "8", {}, false, "workers for unary calls (1-256)"})
      .Add({"kube.max_watches",
            ConfigType::kInt,
            "256",
            {},
            false,
            "watches served at once, one thread each (1-4096)"});
}

absl::StatusOr<std::vector<std::unique_ptr<grpc::Service>>> MakeServices(
    codeco::ServiceContext& context) {
  using codeco::InvalidFieldError;
  namespace kubelms = codeco::kubelms;
  const codeco::Config& raw = context.config.raw;
  ASSIGN_OR_RETURN(codeco::kube::KubeEndpoint endpoint, codeco::kube::KubeEndpointFromConfig(raw));
  kubelms::KubeLmsOptions options;
  options.ns = raw.GetString("kube.namespace");
  if (options.ns.empty()) options.ns = endpoint.ns.empty() ? "default" : endpoint.ns;
  options.resources.gpu.clear();
  for (absl::string_view name :
       absl::StrSplit(raw.GetString("kube.gpu_resources"), ',', absl::SkipWhitespace())) {
    options.resources.gpu.emplace_back(name);
  }
  ASSIGN_OR_RETURN(options.kube, codeco::kube::KubeClientOptionsFromConfig(raw));
  options.checkpoint_timeout = raw.GetDuration("kube.checkpoint_timeout");
  options.restore_timeout = raw.GetDuration("kube.restore_timeout");
  for (const auto& [key, d] : {std::pair{"kube.checkpoint_timeout", options.checkpoint_timeout},
                               std::pair{"kube.restore_timeout", options.restore_timeout}}) {
    if (d < absl::Seconds(1)) return InvalidFieldError(key, "must be at least 1s");
  }
  const int64_t threads = raw.GetInt("kube.threads");
  if (threads < 1 || threads > 256) return InvalidFieldError("kube.threads", "must be 1-256");
  const int64_t max_watches = raw.GetInt("kube.max_watches");
  if (max_watches < 1 || max_watches > 4096) {
    return InvalidFieldError("kube.max_watches", "must be 1-4096");
  }
  auto api = codeco::kube::MakeHttpKubeApi(std::move(endpoint), options.kube);
  std::vector<std::unique_ptr<grpc::Service>> services;
  services.push_back(std::make_unique<kubelms::KubeLmsService>(
      std::move(api), &context.clock, std::move(options), static_cast<int>(threads),
      static_cast<int>(max_watches)));
  return services;
}

}  // namespace

int main(int argc, char** argv) {
  return codeco::RunServiceMain(argc, argv,
                                {.name = "kubelms",
                                 .column_families = {},
                                 .add_config = AddKubeConfig,
                                 .make_services = MakeServices});
}
