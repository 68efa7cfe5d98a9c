#include "lms_service.h"

#include <deque>
#include <functional>

#include "absl/strings/str_cat.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/status.h"

namespace codeco::codef {
namespace {

using codeco::lms::v1::WatchNodesResponse;
using codeco::lms::v1::WatchPodsResponse;

// A watcher that falls this far behind is cut off and must list again.
constexpr size_t kMaxQueuedEvents = 10000;

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// Streams the events of one cluster: first the backlog (initial state or
// history), then every later event that passes the filter, one write at a time.
template <typename Response>
class WatchReactor final : public grpc::ServerWriteReactor<Response>, public EventSubscriber {
 public:
  using Filter = std::function<bool(const WatchEvent&)>;

  WatchReactor(SynchronizedCluster* cluster, bool nodes, Filter filter)
      : cluster_(cluster), nodes_(nodes), filter_(std::move(filter)) {}

  void Start(const std::string& resource_version) {
    auto subscription = cluster_->Subscribe(nodes_, resource_version, this);
    absl::MutexLock lock(&mu_);
    if (!subscription.ok()) {
      FinishLocked(ToGrpcStatus(subscription.status()));
      return;
    }
    subscription_id_ = subscription->id;
    std::deque<Response> early = std::move(queue_);
    queue_.clear();
    for (const WatchEvent& e : subscription->backlog) Enqueue(e);
    for (Response& r : early) queue_.push_back(std::move(r));
    started_ = true;
    WriteNextLocked();
  }

  // Ends the stream at once with `status` (a bad request).
  void Fail(const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    FinishLocked(ToGrpcStatus(status));
  }

  void OnEvent(const WatchEvent& event) override {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    Enqueue(event);
    if (queue_.size() > kMaxQueuedEvents) {
      FinishLocked(grpc::Status(grpc::StatusCode::OUT_OF_RANGE,
                                "watcher fell behind the event history: list again"));
      return;
    }
    if (started_) WriteNextLocked();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
      return;
    }
    queue_.pop_front();
    WriteNextLocked();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    int64_t id = 0;
    {
      absl::MutexLock lock(&mu_);
      id = subscription_id_;
    }
    if (id != 0) cluster_->Unsubscribe(id);
    delete this;
  }

 private:
  void Enqueue(const WatchEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (filter_ && !filter_(event)) return;
    Response response;
    response.set_type(event.type);
    response.set_resource_version(absl::StrCat(event.version));
    if constexpr (std::is_same_v<Response, WatchNodesResponse>) {
      *response.mutable_node() = *event.node;
    } else {
      *response.mutable_pod() = *event.pod;
    }
    queue_.push_back(std::move(response));
  }

  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_ || queue_.empty()) return;
    writing_ = true;
    this->StartWrite(&queue_.front());
  }

  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    this->Finish(status);
  }

  SynchronizedCluster* cluster_;
  bool nodes_;
  Filter filter_;
  absl::Mutex mu_;
  std::deque<Response> queue_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  int64_t subscription_id_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

grpc::ServerUnaryReactor* EmulatedLmsService::ListNodes(
    grpc::CallbackServerContext* context, const codeco::lms::v1::ListNodesRequest* request,
    codeco::lms::v1::ListNodesResponse* response) {
  auto result = cluster_->Run([&](EmulatedCluster& c) { return c.ListNodes(*request); });
  if (result.ok()) *response = std::move(*result);
  return Answer(context, result.status());
}

grpc::ServerUnaryReactor* EmulatedLmsService::GetNode(
    grpc::CallbackServerContext* context, const codeco::lms::v1::GetNodeRequest* request,
    codeco::lms::v1::GetNodeResponse* response) {
  if (request->name().empty()) return Answer(context, InvalidFieldError("name", "is required"));
  auto result = cluster_->Run([&](EmulatedCluster& c) { return c.GetNode(request->name()); });
  if (result.ok()) *response->mutable_node() = std::move(*result);
  return Answer(context, result.status());
}

grpc::ServerWriteReactor<WatchNodesResponse>* EmulatedLmsService::WatchNodes(
    grpc::CallbackServerContext*, const codeco::lms::v1::WatchNodesRequest* request) {
  auto* reactor = new WatchReactor<WatchNodesResponse>(cluster_, true, nullptr);
  reactor->Start(request->resource_version());
  return reactor;
}

grpc::ServerUnaryReactor* EmulatedLmsService::CreatePod(
    grpc::CallbackServerContext* context, const codeco::lms::v1::CreatePodRequest* request,
    codeco::lms::v1::CreatePodResponse* response) {
  auto result = cluster_->Run(
      [&](EmulatedCluster& c) { return c.CreatePod(request->pod(), request->request_id()); });
  if (result.ok()) *response->mutable_pod() = std::move(*result);
  return Answer(context, result.status());
}

grpc::ServerUnaryReactor* EmulatedLmsService::GetPod(grpc::CallbackServerContext* context,
                                                     const codeco::lms::v1::GetPodRequest* request,
                                                     codeco::lms::v1::GetPodResponse* response) {
  if (request->name().empty()) return Answer(context, InvalidFieldError("name", "is required"));
  auto result = cluster_->Run([&](EmulatedCluster& c) { return c.GetPod(request->name()); });
  if (result.ok()) *response->mutable_pod() = std::move(*result);
  return Answer(context, result.status());
}

grpc::ServerUnaryReactor* EmulatedLmsService::ListPods(
    grpc::CallbackServerContext* context, const codeco::lms::v1::ListPodsRequest* request,
    codeco::lms::v1::ListPodsResponse* response) {
  auto result = cluster_->Run([&](EmulatedCluster& c) { return c.ListPods(*request); });
  if (result.ok()) *response = std::move(*result);
  return Answer(context, result.status());
}

grpc::ServerUnaryReactor* EmulatedLmsService::DeletePod(
    grpc::CallbackServerContext* context, const codeco::lms::v1::DeletePodRequest* request,
    codeco::lms::v1::DeletePodResponse* response) {
  if (request->name().empty()) return Answer(context, InvalidFieldError("name", "is required"));
  if (request->grace_period_ns() < 0) {
    return Answer(context, InvalidFieldError("grace_period_ns", "must not be negative"));
  }
  auto result = cluster_->Run([&](EmulatedCluster& c) { return c.DeletePod(request->name()); });
  if (result.ok()) *response->mutable_pod() = std::move(*result);
  return Answer(context, result.status());
}

grpc::ServerWriteReactor<WatchPodsResponse>* EmulatedLmsService::WatchPods(
    grpc::CallbackServerContext*, const codeco::lms::v1::WatchPodsRequest* request) {
  std::string node = request->node_name();
  codeco::common::v1::LabelSelector selector = request->label_selector();
  google::protobuf::Map<std::string, std::string> no_labels;
  absl::Status valid = MatchesSelector(no_labels, selector, "label_selector").status();
  auto filter = [node, selector](const WatchEvent& e) {
    if (!node.empty() && e.pod->node_name() != node) return false;
    auto match = MatchesSelector(e.pod->labels(), selector, "label_selector");
    return match.ok() && *match;
  };
  auto* reactor = new WatchReactor<WatchPodsResponse>(cluster_, false, filter);
  if (!valid.ok()) {
    reactor->Fail(valid);
    return reactor;
  }
  reactor->Start(request->resource_version());
  return reactor;
}

grpc::ServerUnaryReactor* EmulatedLmsService::GetNodeUsage(
    grpc::CallbackServerContext* context, const codeco::lms::v1::GetNodeUsageRequest* request,
    codeco::lms::v1::GetNodeUsageResponse* response) {
  if (request->node().empty()) return Answer(context, InvalidFieldError("node", "is required"));
  auto result = cluster_->Run([&](EmulatedCluster& c) { return c.GetNodeUsage(request->node()); });
  if (result.ok()) *response->mutable_usage() = std::move(*result);
  return Answer(context, result.status());
}

grpc::ServerUnaryReactor* EmulatedLmsService::CheckpointContainer(
    grpc::CallbackServerContext* context,
    const codeco::lms::v1::CheckpointContainerRequest* request,
    codeco::lms::v1::CheckpointContainerResponse* response) {
  auto result = cluster_->Run([&](EmulatedCluster& c) { return c.CheckpointContainer(*request); });
  if (result.ok()) *response = std::move(*result);
  return Answer(context, result.status());
}

grpc::ServerUnaryReactor* EmulatedLmsService::RestoreContainer(
    grpc::CallbackServerContext* context, const codeco::lms::v1::RestoreContainerRequest* request,
    codeco::lms::v1::RestoreContainerResponse* response) {
  auto result = cluster_->Run([&](EmulatedCluster& c) { return c.RestoreContainer(*request); });
  if (result.ok()) *response = std::move(*result);
  return Answer(context, result.status());
}

}  // namespace codeco::codef
