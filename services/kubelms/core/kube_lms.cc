#include "kubelms/core/kube_lms.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codeco/common/excerpt.h"
#include "codeco/common/logging.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/quantity.h"
#include "codeco/common/status.h"
#include "codeco/common/url.h"
#include "nlohmann/json.hpp"

namespace codeco::kubelms {
namespace {

using codeco::common::v1::ResourceQuantities;
using codeco::common::v1::WatchEventType;
using codeco::lms::v1::Node;
using codeco::lms::v1::Pod;
using json = nlohmann::json;

// Answers kept for retried CheckpointContainer calls.
constexpr size_t kRememberedCheckpoints = 1024;
// The pods that count against a node's allocatable.
constexpr char kLivePods[] = "status.phase!=Succeeded,status.phase!=Failed";

// A query string from name/value pairs; empty values are left out.
std::string Query(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string out;
  for (const auto& [name, value] : fields) {
    if (value.empty()) continue;
    absl::StrAppend(&out, out.empty() ? "?" : "&", name, "=", PercentEncode(value));
  }
  return out;
}

std::string Str(const json& o, const char* key) { return JsonString(o, key); }
const json& Member(const json& o, const char* key) { return JsonMember(o, key); }

std::string Describe(const ResourceQuantities& q) {
  return absl::StrCat("cpu ", FormatCpu(q.cpu_millicores()), ", memory ",
                      FormatBytes(q.memory_bytes()), ", gpu ", q.gpu());
}

ResourceQuantities PodRequests(const Pod& pod) {
  ResourceQuantities sum;
  for (const auto& c : pod.containers()) AddQuantities(&sum, c.requests());
  return sum;
}

// The first resource `wanted` exceeds in `free`, or "".
std::string Lacking(const ResourceQuantities& wanted, const ResourceQuantities& free) {
  if (wanted.cpu_millicores() > free.cpu_millicores()) return "cpu";
  if (wanted.memory_bytes() > free.memory_bytes()) return "memory";
  if (wanted.gpu() > free.gpu()) return "gpu";
  return "";
}

ResourceQuantities Free(const Node& node) {
  ResourceQuantities free = node.allocatable();
  free.set_cpu_millicores(free.cpu_millicores() - node.requested().cpu_millicores());
  free.set_memory_bytes(free.memory_bytes() - node.requested().memory_bytes());
  free.set_gpu(free.gpu() - node.requested().gpu());
  return free;
}

}  // namespace

KubeLms::KubeLms(kube::KubeApi* api, Clock* clock, kube::WaitFn wait, KubeLmsOptions options)
    : api_(api),
      clock_(clock),
      options_(std::move(options)),
      client_(api, clock, std::move(wait), options_.kube) {}

std::string KubeLms::PodPath(const std::string& name) const {
  return absl::StrCat("/api/v1/namespaces/", PercentEncode(options_.ns), "/pods",
                      name.empty() ? "" : "/", PercentEncode(name));
}

absl::StatusOr<std::map<std::string, ResourceQuantities>> KubeLms::RequestedByNode(
    const std::string& node) {
  std::map<std::string, ResourceQuantities> by_node;
  const std::string selector =
      node.empty() ? kLivePods : absl::StrCat(kLivePods, ",spec.nodeName=", node);
  RETURN_IF_ERROR(client_
                      .ListAll(absl::StrCat("/api/v1/pods", Query({{"fieldSelector", selector}})),
                               [&](const json& pod) -> absl::Status {
                                 const std::string on = Str(Member(pod, "spec"), "nodeName");
                                 if (on.empty()) return absl::OkStatus();
                                 absl::StatusOr<ResourceQuantities> q =
                                     PodRequestsFromKube(pod, options_.resources);
                                 // A pod Kubernetes admitted counts even if odd.
                                 if (q.ok()) AddQuantities(&by_node[on], *q);
                                 return absl::OkStatus();
                               })
                      .status());
  return by_node;
}

absl::StatusOr<codeco::lms::v1::ListNodesResponse> KubeLms::ListNodes(
    const codeco::lms::v1::ListNodesRequest& request) {
  if (request.page_size() < 0) return InvalidFieldError("page_size", "must not be negative");
  ASSIGN_OR_RETURN(std::string selector,
                   LabelSelectorToKube(request.label_selector(), "label_selector"));
  const std::string path = absl::StrCat(
      "/api/v1/nodes",
      Query({{"limit", absl::StrCat(request.page_size() > 0 ? request.page_size()
                                                            : options_.kube.list_page)},
             {"continue", request.page_token()},
             {"labelSelector", selector}}));
  absl::StatusOr<json> list = client_.Get(path, absl::StrCat("GET ", path));
  if (!list.ok() && absl::IsOutOfRange(list.status())) {
    return InvalidFieldError("page_token", absl::StrCat("has expired (", list.status().message(),
                                                        "): list again from the first page"));
  }
  RETURN_IF_ERROR(list.status());
  codeco::lms::v1::ListNodesResponse out;
  const json& items = Member(*list, "items");
  if (items.is_array() && !items.empty()) {
    ASSIGN_OR_RETURN(auto requested, RequestedByNode(""));
    for (const json& item : items) {
      ASSIGN_OR_RETURN(Node node, NodeFromKube(item, options_.resources));
      *node.mutable_requested() = requested[node.name()];
      *out.add_nodes() = std::move(node);
    }
  }
  out.set_next_page_token(Str(Member(*list, "metadata"), "continue"));
  out.set_resource_version(kube::ResourceVersionOf(*list));
  return out;
}

absl::StatusOr<Node> KubeLms::GetNode(const std::string& name) {
  if (name.empty()) return InvalidFieldError("name", "is required");
  const std::string path = absl::StrCat("/api/v1/nodes/", PercentEncode(name));
  ASSIGN_OR_RETURN(json object, client_.Get(path, absl::StrCat("GET ", path)));
  ASSIGN_OR_RETURN(Node node, NodeFromKube(object, options_.resources));
  ASSIGN_OR_RETURN(auto requested, RequestedByNode(name));
  *node.mutable_requested() = requested[name];
  return node;
}

absl::StatusOr<Pod> KubeLms::CreatePod(const codeco::lms::v1::CreatePodRequest& request) {
  return CreateKubePod(request.pod(), request.request_id(), "pod");
}

absl::StatusOr<Pod> KubeLms::CreateKubePod(const Pod& pod, const std::string& request_id,
                                           const std::string& path) {
  RETURN_IF_ERROR(ValidatePodForCreate(pod, path));
  // A retry of a create that went through answers with that pod.
  if (!request_id.empty()) {
    absl::StatusOr<json> existing = client_.Get(PodPath(pod.name()), "GET " + PodPath(pod.name()));
    if (existing.ok()) {
      if (Str(Member(Member(*existing, "metadata"), "annotations"), kRequestIdAnnotation) ==
          request_id) {
        return PodFromKube(*existing, options_.resources);
      }
      return absl::AlreadyExistsError(absl::StrCat("pod ", pod.name(), " already exists"));
    }
    if (!absl::IsNotFound(existing.status())) return existing.status();
  }
  // codeco binds pods itself, so it checks what kube-scheduler would have.
  absl::StatusOr<Node> node = GetNode(pod.node_name());
  if (absl::IsNotFound(node.status())) {
    return absl::NotFoundError(
        absl::StrCat(path, ".node_name: no node ", pod.node_name(), " in the cluster"));
  }
  RETURN_IF_ERROR(node.status());
  if (node->condition() != codeco::lms::v1::NODE_CONDITION_READY) {
    return absl::FailedPreconditionError(absl::StrCat("node ", node->name(), " is not ready"));
  }
  if (node->unschedulable()) {
    return absl::FailedPreconditionError(absl::StrCat("node ", node->name(), " is cordoned"));
  }
  const ResourceQuantities wanted = PodRequests(pod);
  const ResourceQuantities free = Free(*node);
  if (const std::string lacking = Lacking(wanted, free); !lacking.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("node ", node->name(), " lacks ", lacking,
                                                      ": the pod requests ", Describe(wanted),
                                                      "; free: ", Describe(free)));
  }
  const std::string body = PodToKube(pod, options_.ns, request_id, options_.resources).dump();
  absl::StatusOr<json> created =
      client_.Send("POST", PodPath(""), body, options_.kube.call_timeout, "POST " + PodPath(""));
  if (absl::IsAlreadyExists(created.status())) {
    return absl::AlreadyExistsError(absl::StrCat("pod ", pod.name(), " already exists"));
  }
  RETURN_IF_ERROR(created.status());
  return PodFromKube(*created, options_.resources);
}

absl::StatusOr<Pod> KubeLms::GetPod(const std::string& name) {
  if (name.empty()) return InvalidFieldError("name", "is required");
  ASSIGN_OR_RETURN(json object, client_.Get(PodPath(name), "GET " + PodPath(name)));
  return PodFromKube(object, options_.resources);
}

absl::StatusOr<codeco::lms::v1::ListPodsResponse> KubeLms::ListPods(
    const codeco::lms::v1::ListPodsRequest& request) {
  if (request.page_size() < 0) return InvalidFieldError("page_size", "must not be negative");
  ASSIGN_OR_RETURN(std::string selector,
                   LabelSelectorToKube(request.label_selector(), "label_selector"));
  std::vector<std::string> fields;
  if (!request.node_name().empty()) fields.push_back("spec.nodeName=" + request.node_name());
  if (request.phase() != codeco::lms::v1::POD_PHASE_UNSPECIFIED) {
    static const std::map<int, std::string> kPhases = {
        {codeco::lms::v1::POD_PHASE_PENDING, "Pending"},
        {codeco::lms::v1::POD_PHASE_RUNNING, "Running"},
        {codeco::lms::v1::POD_PHASE_SUCCEEDED, "Succeeded"},
        {codeco::lms::v1::POD_PHASE_FAILED, "Failed"}};
    auto it = kPhases.find(request.phase());
    if (it == kPhases.end()) return InvalidFieldError("phase", "is not a known phase");
    fields.push_back("status.phase=" + it->second);
  }
  const std::string path = absl::StrCat(
      PodPath(""),
      Query({{"limit", absl::StrCat(request.page_size() > 0 ? request.page_size()
                                                            : options_.kube.list_page)},
             {"continue", request.page_token()},
             {"labelSelector", selector},
             {"fieldSelector", absl::StrJoin(fields, ",")}}));
  absl::StatusOr<json> list = client_.Get(path, absl::StrCat("GET ", path));
  if (!list.ok() && absl::IsOutOfRange(list.status())) {
    return InvalidFieldError("page_token", absl::StrCat("has expired (", list.status().message(),
                                                        "): list again from the first page"));
  }
  RETURN_IF_ERROR(list.status());
  codeco::lms::v1::ListPodsResponse out;
  const json& items = Member(*list, "items");
  if (items.is_array()) {
    for (const json& item : items) {
      ASSIGN_OR_RETURN(*out.add_pods(), PodFromKube(item, options_.resources));
    }
  }
  out.set_next_page_token(Str(Member(*list, "metadata"), "continue"));
  out.set_resource_version(kube::ResourceVersionOf(*list));
  return out;
}

absl::StatusOr<Pod> KubeLms::DeletePod(const codeco::lms::v1::DeletePodRequest& request) {
  if (request.name().empty()) return InvalidFieldError("name", "is required");
  if (request.grace_period_ns() < 0) {
    return InvalidFieldError("grace_period_ns", "must not be negative");
  }
  if (request.force() && request.grace_period_ns() > 0) {
    return InvalidFieldError("grace_period_ns", "must be 0 with force (a force delete has none)");
  }
  std::string path = PodPath(request.name());
  if (request.force()) {
    // The API server removes the pod without waiting for its kubelet.
    absl::StrAppend(&path, "?gracePeriodSeconds=0");
  } else if (request.grace_period_ns() > 0) {
    // Kubernetes counts whole seconds: round up so the pod gets at least
    // what was asked.
    absl::StrAppend(
        &path, "?gracePeriodSeconds=", (request.grace_period_ns() + 999'999'999) / 1'000'000'000);
  }
  ASSIGN_OR_RETURN(json answer,
                   client_.Send("DELETE", path, "", options_.kube.call_timeout, "DELETE " + path));
  if (Str(answer, "kind") == "Status") {
    // Deleted at once (no graceful phase): the last state is gone with it.
    Pod gone;
    gone.set_name(request.name());
    return gone;
  }
  return PodFromKube(answer, options_.resources);
}

absl::StatusOr<codeco::lms::v1::NodeUsage> KubeLms::GetNodeUsage(const std::string& node) {
  if (node.empty()) return InvalidFieldError("node", "is required");
  const std::string node_path = absl::StrCat("/api/v1/nodes/", PercentEncode(node));
  RETURN_IF_ERROR(client_.Get(node_path, "GET " + node_path).status());
  const std::string metrics_path =
      absl::StrCat("/apis/metrics.k8s.io/v1beta1/nodes/", PercentEncode(node));
  absl::StatusOr<json> metrics = client_.Get(metrics_path, "GET " + metrics_path);
  if (absl::IsNotFound(metrics.status())) {
    return absl::FailedPreconditionError(
        absl::StrCat("metrics.k8s.io has no sample of node ", node,
                     " (is metrics-server installed?): ", metrics.status().message()));
  }
  RETURN_IF_ERROR(metrics.status());
  codeco::lms::v1::NodeUsage out;
  out.set_node(node);
  ASSIGN_OR_RETURN(*out.mutable_usage(),
                   QuantitiesFromKube(Member(*metrics, "usage"), options_.resources, "usage"));
  if (!ParseKubeTime(Str(*metrics, "timestamp"), out.mutable_sample_time())) {
    *out.mutable_sample_time() = ToProtoTimestamp(clock_->Now());
  }
  // The namespace's pods on the node, with their samples.
  std::map<std::string, bool> on_node;
  RETURN_IF_ERROR(
      client_
          .ListAll(absl::StrCat(PodPath(""), Query({{"fieldSelector", "spec.nodeName=" + node}})),
                   [&](const json& pod) {
                     on_node[Str(Member(pod, "metadata"), "name")] = true;
                     return absl::OkStatus();
                   })
          .status());
  if (on_node.empty()) return out;
  const std::string pods_path =
      absl::StrCat("/apis/metrics.k8s.io/v1beta1/namespaces/", PercentEncode(options_.ns), "/pods");
  ASSIGN_OR_RETURN(json pod_metrics, client_.Get(pods_path, "GET " + pods_path));
  const json& items = Member(pod_metrics, "items");
  if (!items.is_array()) return out;
  for (const json& item : items) {
    const std::string name = Str(Member(item, "metadata"), "name");
    if (on_node.count(name) == 0) continue;
    codeco::lms::v1::PodUsage* usage = out.add_pods();
    usage->set_pod(name);
    const json& containers = Member(item, "containers");
    if (!containers.is_array()) continue;
    for (const json& c : containers) {
      ASSIGN_OR_RETURN(ResourceQuantities q,
                       QuantitiesFromKube(Member(c, "usage"), options_.resources,
                                          absl::StrCat("pod ", name, " usage")));
      AddQuantities(usage->mutable_usage(), q);
    }
  }
  return out;
}

absl::StatusOr<codeco::lms::v1::CheckpointContainerResponse> KubeLms::CheckpointContainer(
    const codeco::lms::v1::CheckpointContainerRequest& request) {
  if (request.pod().empty()) return InvalidFieldError("pod", "is required");
  if (request.container().empty()) return InvalidFieldError("container", "is required");
  if (!request.request_id().empty()) {
    absl::MutexLock lock(&mu_);
    if (auto it = checkpoints_.find(request.request_id()); it != checkpoints_.end()) {
      return it->second;
    }
  }
  ASSIGN_OR_RETURN(Pod pod, GetPod(request.pod()));
  const bool has_container =
      std::any_of(pod.containers().begin(), pod.containers().end(),
                  [&](const auto& c) { return c.name() == request.container(); });
  if (!has_container) {
    return absl::NotFoundError(
        absl::StrCat("pod ", request.pod(), " has no container ", request.container()));
  }
  if (pod.phase() != codeco::lms::v1::POD_PHASE_RUNNING) {
    return absl::FailedPreconditionError(absl::StrCat("pod ", request.pod(), " is not running"));
  }
  // The kubelet's checkpoint API through the apiserver's node proxy.
  const int64_t seconds = std::max<int64_t>(1, absl::ToInt64Seconds(options_.checkpoint_timeout));
  const std::string path =
      absl::StrCat("/api/v1/nodes/", PercentEncode(pod.node_name()), "/proxy/checkpoint/",
                   PercentEncode(options_.ns), "/", PercentEncode(request.pod()), "/",
                   PercentEncode(request.container()), "?timeout=", seconds);
  const absl::Time start = clock_->Now();
  ASSIGN_OR_RETURN(KubeAnswer answer,
                   api_->Call("POST", path, "", options_.checkpoint_timeout + absl::Seconds(5)));
  if (!kube::Is2xx(answer.status)) {
    absl::Status error = StatusFromKube(answer.status, answer.body, "POST " + path);
    // The kubelet's 500 is the runtime refusing (no checkpoint support,
    // CRIU failed): retrying will not help.
    if (answer.status == 500) return absl::FailedPreconditionError(error.message());
    return error;
  }
  const json items = Member(json::parse(answer.body, nullptr, false), "items");
  if (!items.is_array() || items.empty() || !items[0].is_string()) {
    return absl::InternalError(absl::StrCat("kubelet checkpoint of ", request.pod(), "/",
                                            request.container(),
                                            " named no archive: ", PrintableExcerpt(answer.body)));
  }
  codeco::lms::v1::CheckpointContainerResponse out;
  out.set_node(pod.node_name());
  out.set_archive_path(items[0].get<std::string>());
  out.set_duration_ns(absl::ToInt64Nanoseconds(clock_->Now() - start));
  if (!request.request_id().empty()) {
    absl::MutexLock lock(&mu_);
    checkpoints_[request.request_id()] = out;
    checkpoint_order_[++checkpoint_seq_] = request.request_id();
    while (checkpoints_.size() > kRememberedCheckpoints) {
      checkpoints_.erase(checkpoint_order_.begin()->second);
      checkpoint_order_.erase(checkpoint_order_.begin());
    }
  }
  return out;
}

absl::StatusOr<codeco::lms::v1::RestoreContainerResponse> KubeLms::RestoreContainer(
    const codeco::lms::v1::RestoreContainerRequest& request, absl::Duration budget,
    const std::function<bool()>& cancelled) {
  if (request.container().empty()) return InvalidFieldError("container", "is required");
  if (request.state_source_case() == codeco::lms::v1::RestoreContainerRequest::kArchivePath) {
    return absl::FailedPreconditionError(
        "archive_path: Kubernetes restores a container only from a checkpoint OCI image; pass "
        "image_reference (the checkpointer builds and pushes one from the archive)");
  }
  if (request.image_reference().empty()) {
    return InvalidFieldError("image_reference", "is required");
  }
  Pod pod = request.pod();
  auto container = std::find_if(pod.mutable_containers()->begin(), pod.mutable_containers()->end(),
                                [&](const auto& c) { return c.name() == request.container(); });
  if (container == pod.mutable_containers()->end()) {
    return InvalidFieldError("container", absl::StrCat("names no container of pod ", pod.name()));
  }
  // CRI-O restores a container whose image is a checkpoint image.
  container->set_image(request.image_reference());
  const absl::Time start = clock_->Now();
  const absl::Time deadline = start + std::min(budget, options_.restore_timeout);
  ASSIGN_OR_RETURN(Pod created, CreateKubePod(pod, request.request_id(), "pod"));
  auto remove = [&](absl::Status why) {
    codeco::lms::v1::DeletePodRequest del;
    del.set_name(pod.name());
    absl::Status removed = DeletePod(del).status();
    if (!removed.ok() && !absl::IsNotFound(removed)) {
      log::Warn("a failed restore left its pod",
                {{"pod", pod.name()}, {"error", std::string(removed.message())}});
    }
    return why;
  };
  for (Pod current = created;;) {
    if (current.phase() == codeco::lms::v1::POD_PHASE_RUNNING) {
      codeco::lms::v1::RestoreContainerResponse out;
      *out.mutable_pod() = std::move(current);
      out.set_duration_ns(absl::ToInt64Nanoseconds(clock_->Now() - start));
      return out;
    }
    if (current.phase() == codeco::lms::v1::POD_PHASE_FAILED ||
        current.phase() == codeco::lms::v1::POD_PHASE_SUCCEEDED) {
      return remove(absl::FailedPreconditionError(absl::StrCat(
          "restored pod ", pod.name(),
          " did not run: ", current.message().empty() ? "it ended" : current.message())));
    }
    if (clock_->Now() >= deadline) {
      return remove(absl::DeadlineExceededError(
          absl::StrCat("restored pod ", pod.name(), " was not running after ",
                       absl::FormatDuration(clock_->Now() - start),
                       current.message().empty() ? "" : ": ", current.message())));
    }
    if (!client_.WaitUnlessCancelled(options_.restore_poll, cancelled)) {
      return remove(absl::CancelledError("the restore was cancelled"));
    }
    absl::StatusOr<Pod> next = GetPod(pod.name());
    if (absl::IsNotFound(next.status())) {
      return absl::AbortedError(
          absl::StrCat("restored pod ", pod.name(), " was deleted before it ran"));
    }
    if (next.ok()) current = std::move(*next);
  }
}

absl::Status KubeLms::WatchNodes(
    const codeco::lms::v1::WatchNodesRequest& request,
    const std::function<bool(codeco::lms::v1::WatchNodesResponse)>& emit,
    const std::function<bool()>& cancelled) {
  return client_.Watch(
      "/api/v1/nodes", "", request.resource_version(),
      [&](const json& object, WatchEventType type) -> absl::Status {
        absl::StatusOr<Node> node = NodeFromKube(object, options_.resources);
        if (!node.ok()) {
          log::Warn("kube watch: a node event left out",
                    {{"error", std::string(node.status().message())}});
          return absl::OkStatus();
        }
        codeco::lms::v1::WatchNodesResponse event;
        event.set_type(type);
        event.set_resource_version(node->resource_version());
        *event.mutable_node() = std::move(*node);
        return emit(std::move(event)) ? absl::OkStatus() : kube::KubeClient::ConsumerDone();
      },
      cancelled);
}

absl::Status KubeLms::WatchPods(const codeco::lms::v1::WatchPodsRequest& request,
                                const std::function<bool(codeco::lms::v1::WatchPodsResponse)>& emit,
                                const std::function<bool()>& cancelled) {
  ASSIGN_OR_RETURN(std::string selector,
                   LabelSelectorToKube(request.label_selector(), "label_selector"));
  const std::string query =
      Query({{"labelSelector", selector},
             {"fieldSelector",
              request.node_name().empty() ? "" : "spec.nodeName=" + request.node_name()}});
  return client_.Watch(
      PodPath(""), query, request.resource_version(),
      [&](const json& object, WatchEventType type) -> absl::Status {
        absl::StatusOr<Pod> pod = PodFromKube(object, options_.resources);
        if (!pod.ok()) {
          log::Warn("kube watch: a pod event left out",
                    {{"error", std::string(pod.status().message())}});
          return absl::OkStatus();
        }
        codeco::lms::v1::WatchPodsResponse event;
        event.set_type(type);
        event.set_resource_version(pod->resource_version());
        *event.mutable_pod() = std::move(*pod);
        return emit(std::move(event)) ? absl::OkStatus() : kube::KubeClient::ConsumerDone();
      },
      cancelled);
}

}  // namespace codeco::kubelms
