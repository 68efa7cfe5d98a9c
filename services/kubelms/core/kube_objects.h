#pragma once
// Translation between Kubernetes API objects (v1 Node and Pod, metrics.k8s.io
// NodeMetrics and PodMetrics, Status) as kube-apiserver serves them in JSON,
// and the codeco.lms.v1 messages. Pure: no I/O.
//
// Reading is lenient: what codeco's messages cannot say (tolerations,
// volumes, env from secrets, ...) is left out, and only a document that is not
// an object of the kind, or has no name, is an error. Writing is strict: a
// pod codeco creates is checked field by field first, and an error names the
// field (`pod.containers[0].image`).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "codeco/common/v1/types.pb.h"
#include "codeco/kube/kube_api.h"
#include "codeco/lms/v1/lms.pb.h"
#include "nlohmann/json_fwd.hpp"

namespace codeco::kubelms {

// The readers of libs/kube this adapter's translations are written with.
using kube::JsonMember;
using kube::JsonString;
using kube::ParseKubeTime;
using kube::StatusFromKube;

/// Annotation that carries a CreatePod or RestoreContainer request_id, so a
/// retried call finds the pod it made.
inline constexpr char kRequestIdAnnotation[] = "lms.codeco.io/request-id";

/// How Kubernetes names the resources codeco counts.
struct ResourceNames {
  /// Extended resources counted as GPUs (summed when a node has several);
  /// the first is the one a created pod asks for.
  std::vector<std::string> gpu = {"nvidia.com/gpu", "amd.com/gpu"};
};

/// A Kubernetes resource list ({"cpu": "500m", "memory": "1Gi", ...}) as
/// quantities. `path` names it in errors; absent keys are 0.
absl::StatusOr<codeco::common::v1::ResourceQuantities> QuantitiesFromKube(
    const nlohmann::json& resources, const ResourceNames& names, const std::string& path);

/// A v1 Node as an LMS node (requested and usage are left empty: they come
/// from pods and metrics).
absl::StatusOr<codeco::lms::v1::Node> NodeFromKube(const nlohmann::json& node,
                                                   const ResourceNames& names);

/// A v1 Pod as an LMS pod.
absl::StatusOr<codeco::lms::v1::Pod> PodFromKube(const nlohmann::json& pod,
                                                 const ResourceNames& names);

/// What a pod asks of its node, Kubernetes' way: the larger of the sum of its
/// containers' requests and its largest init container's, per resource.
absl::StatusOr<codeco::common::v1::ResourceQuantities> PodRequestsFromKube(
    const nlohmann::json& pod, const ResourceNames& names);

/// Checks an LMS pod codeco asks to create: name (a DNS-1123 subdomain),
/// node_name, containers (unique names, images, ports, quantities), labels
/// and annotations. Errors name the field under `path`.
absl::Status ValidatePodForCreate(const codeco::lms::v1::Pod& pod, const std::string& path);

/// The v1 Pod manifest for a checked LMS pod in `ns`, bound to its node;
/// `request_id` (may be empty) goes into kRequestIdAnnotation.
nlohmann::json PodToKube(const codeco::lms::v1::Pod& pod, const std::string& ns,
                         const std::string& request_id, const ResourceNames& names);

/// A label selector in Kubernetes' query syntax ("app=web,tier in (a,b),!x");
/// checks keys and values. Errors name the field under `path`.
absl::StatusOr<std::string> LabelSelectorToKube(const codeco::common::v1::LabelSelector& selector,
                                                const std::string& path);

/// Adds `q` to `into`, resource by resource.
void AddQuantities(codeco::common::v1::ResourceQuantities* into,
                   const codeco::common::v1::ResourceQuantities& q);

}  // namespace codeco::kubelms
