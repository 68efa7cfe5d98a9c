#include "swm/lms/lms_pod_runtime.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codeco/common/call_deadline.h"
#include "codeco/common/grpc_status.h"
#include "swm/core/convert.h"

namespace codeco::swm {
namespace {

namespace lms = codeco::lms::v1;

}  // namespace

LmsPodRuntime::LmsPodRuntime(std::shared_ptr<grpc::Channel> channel, LmsPodRuntimeOptions options)
    : stub_(lms::LmsService::NewStub(std::move(channel))), options_(std::move(options)) {
  if (options_.page_size <= 0) options_.page_size = 500;
}

std::unique_ptr<grpc::ClientContext> LmsPodRuntime::NewContext() {
  absl::Time deadline;
  {
    absl::MutexLock lock(&mu_);
    deadline = deadline_;
  }
  return OutgoingContext(options_.call_timeout, deadline);
}

void LmsPodRuntime::SetDeadline(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  deadline_ = deadline;
}

absl::Status LmsPodRuntime::Wrap(const grpc::Status& status, const std::string& what) const {
  absl::Status s = FromGrpcStatus(status);
  return absl::Status(
      s.code(), absl::StrCat("LMS of cluster ", options_.cluster, ": ", what, ": ", s.message()));
}

absl::StatusOr<std::vector<lms::Pod>> LmsPodRuntime::ListPodsLabelled(const std::string& key,
                                                                      const std::string& value) {
  return ListLmsPods(key, value);
}

absl::StatusOr<std::vector<lms::Pod>> LmsPodRuntime::ListLmsPods(const std::string& key,
                                                                 const std::string& value) {
  std::vector<lms::Pod> pods;
  lms::ListPodsRequest request;
  request.set_page_size(options_.page_size);
  if (!key.empty()) (*request.mutable_label_selector()->mutable_match_labels())[key] = value;
  do {
    lms::ListPodsResponse response;
    grpc::Status status = stub_->ListPods(NewContext().get(), request, &response);
    if (!status.ok()) return Wrap(status, "ListPods");
    for (lms::Pod& p : *response.mutable_pods()) pods.push_back(std::move(p));
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  return pods;
}

absl::StatusOr<std::vector<Node>> LmsPodRuntime::ListNodes() {
  std::vector<Node> nodes;
  lms::ListNodesRequest request;
  request.set_page_size(options_.page_size);
  do {
    lms::ListNodesResponse response;
    grpc::Status status = stub_->ListNodes(NewContext().get(), request, &response);
    if (!status.ok()) return Wrap(status, "ListNodes");
    for (const lms::Node& n : response.nodes()) {
      const auto& a = n.allocatable();
      Node node{.name = n.name(),
                .capacity = {a.cpu_millicores(), a.memory_bytes(), a.gpu()},
                .schedulable = n.condition() == lms::NODE_CONDITION_READY && !n.unschedulable()};
      for (const auto& [key, value] : n.labels()) node.labels[key] = value;
      nodes.push_back(std::move(node));
    }
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());

  // Pods listed after the nodes: a pod bound in between is counted, never missed.
  absl::StatusOr<std::vector<lms::Pod>> pods = ListLmsPods();
  if (!pods.ok()) return pods.status();
  std::map<std::string, Resources> allocated;
  for (const lms::Pod& p : *pods) {
    if (!PodEnded(p.phase())) allocated[p.node_name()] += PodRequests(p);
  }
  for (Node& n : nodes) {
    if (auto it = allocated.find(n.name); it != allocated.end()) n.allocated = it->second;
  }
  return nodes;
}

absl::StatusOr<std::vector<PodInfo>> LmsPodRuntime::ListPods() {
  absl::StatusOr<std::vector<lms::Pod>> pods = ListLmsPods();
  if (!pods.ok()) return pods.status();
  std::vector<PodInfo> out;
  out.reserve(pods->size());
  for (const lms::Pod& p : *pods) out.push_back(PodInfo{p.name(), p.node_name(), PodRequests(p)});
  return out;
}

void LmsPodRuntime::SetPodTemplate(const lms::Pod& pod, const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  templates_[pod.name()] = Template{pod, request_id};
}

void LmsPodRuntime::ClearPodTemplate(const std::string& name) {
  absl::MutexLock lock(&mu_);
  templates_.erase(name);
}

absl::Status LmsPodRuntime::CreatePod(const PodInfo& pod) {
  lms::Pod from;
  std::string request_id;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = templates_.find(pod.name); it != templates_.end()) {
      from = it->second.pod;
      request_id = it->second.request_id;
    }
  }
  from.set_name(pod.name);
  return CreatePodFrom(std::move(from), pod.node, pod.requests, request_id);
}

absl::Status LmsPodRuntime::CreatePodFrom(lms::Pod pod, const std::string& node,
                                          const Resources& requests,
                                          const std::string& request_id) {
  lms::CreatePodRequest request;
  request.set_request_id(request_id);
  lms::Pod* out = request.mutable_pod();
  *out = std::move(pod);
  out->set_node_name(node);
  if (out->containers().empty()) out->add_containers()->set_name("main");
  // The plan's requests are what was reserved: they go on the first
  // container, the others' are cleared so the pod asks for exactly that.
  for (int i = 0; i < out->containers_size(); ++i) {
    auto* r = out->mutable_containers(i)->mutable_requests();
    r->Clear();
    if (i == 0) {
      r->set_cpu_millicores(requests.cpu_millis);
      r->set_memory_bytes(requests.memory_bytes);
      r->set_gpu(requests.gpu);
    }
  }
  const std::string name = out->name();
  lms::CreatePodResponse response;
  grpc::Status status = stub_->CreatePod(NewContext().get(), request, &response);
  if (!status.ok()) return Wrap(status, "CreatePod " + name);
  return absl::OkStatus();
}

absl::Status LmsPodRuntime::DeletePod(const std::string& name) { return Delete(name, false); }

absl::Status LmsPodRuntime::ForceDeletePod(const std::string& name) { return Delete(name, true); }

absl::Status LmsPodRuntime::Delete(const std::string& name, bool force) {
  lms::DeletePodRequest request;
  request.set_name(name);
  request.set_force(force);
  lms::DeletePodResponse response;
  grpc::Status status = stub_->DeletePod(NewContext().get(), request, &response);
  if (!status.ok()) return Wrap(status, "DeletePod " + name);
  return absl::OkStatus();
}

}  // namespace codeco::swm
