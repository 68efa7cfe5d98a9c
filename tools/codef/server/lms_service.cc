#include "lms_service.h"

#include <deque>
#include <functional>

#include "absl/strings/str_cat.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/serve_on_executor.h"
#include "codeco/common/status.h"
#include "codeco/common/watch_stream.h"

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
// history), then every later event that passes the filter. Events arrive on
// the cluster's thread (OnEvent) and wait in `pending_` until the stream
// takes them (Next); a watcher more than kMaxQueuedEvents behind is ended
// with OUT_OF_RANGE (list again).
template <typename Response>
class ClusterWatch final : public WatchStream<Response>, public EventSubscriber {
 public:
  using Filter = std::function<bool(const WatchEvent&)>;
  using Batch = typename WatchStream<Response>::Batch;

  /// Watches `cluster`'s node (`nodes`) or pod events that pass `filter`
  /// (null: all) after `resource_version`; ends at once with `invalid` when
  /// that is not OK (a bad request).
  ClusterWatch(SynchronizedCluster* cluster, bool nodes, Filter filter,
               const std::string& resource_version, const absl::Status& invalid)
      : cluster_(cluster), filter_(std::move(filter)) {
    if (!invalid.ok()) {
      this->Fail(ToGrpcStatus(invalid));
      return;
    }
    auto subscription = cluster_->Subscribe(nodes, resource_version, this);
    if (!subscription.ok()) {
      this->Fail(ToGrpcStatus(subscription.status()));
      return;
    }
    {
      absl::MutexLock lock(&events_mu_);
      subscription_id_ = subscription->id;
      // The backlog comes before any event delivered while subscribing.
      std::deque<Response> early = std::move(pending_);
      pending_.clear();
      for (const WatchEvent& e : subscription->backlog) EnqueueLocked(e);
      for (Response& r : early) pending_.push_back(std::move(r));
      started_ = true;
    }
    this->Start();
  }

  void OnEvent(const WatchEvent& event) override {
    {
      absl::MutexLock lock(&events_mu_);
      if (fell_behind_) return;
      EnqueueLocked(event);
      if (pending_.size() > kMaxQueuedEvents) {
        fell_behind_ = true;
        pending_.clear();
      }
    }
    this->Poke();
  }

 private:
  absl::StatusOr<Batch> Next() override {
    absl::MutexLock lock(&events_mu_);
    if (!started_) return Batch{};  // the backlog goes first
    if (fell_behind_) {
      return absl::OutOfRangeError("watcher fell behind the event history: list again");
    }
    Batch batch;
    batch.messages.assign(std::make_move_iterator(pending_.begin()),
                          std::make_move_iterator(pending_.end()));
    pending_.clear();
    return batch;
  }

  void Closed() override {
    int64_t id = 0;
    {
      absl::MutexLock lock(&events_mu_);
      id = subscription_id_;
    }
    if (id != 0) cluster_->Unsubscribe(id);
  }

  void EnqueueLocked(const WatchEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(events_mu_) {
    if (filter_ && !filter_(event)) return;
    Response response;
    response.set_type(event.type);
    response.set_resource_version(absl::StrCat(event.version));
    if constexpr (std::is_same_v<Response, WatchNodesResponse>) {
      *response.mutable_node() = *event.node;
    } else {
      *response.mutable_pod() = *event.pod;
    }
    pending_.push_back(std::move(response));
  }

  SynchronizedCluster* cluster_;
  Filter filter_;
  absl::Mutex events_mu_;
  std::deque<Response> pending_ ABSL_GUARDED_BY(events_mu_);
  bool fell_behind_ ABSL_GUARDED_BY(events_mu_) = false;
  bool started_ ABSL_GUARDED_BY(events_mu_) = false;  // the backlog is in pending_
  int64_t subscription_id_ ABSL_GUARDED_BY(events_mu_) = 0;
};

}  // namespace

EmulatedLmsService::EmulatedLmsService(SynchronizedCluster* cluster, PodProcessRunner* processes)
    : cluster_(cluster), processes_(processes) {
  // Restores that wait for a redis-server to load: a few at a time.
  if (processes_ != nullptr) restores_ = std::make_unique<BoundedExecutor>(4, 64);
}

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
  return new ClusterWatch<WatchNodesResponse>(cluster_, true, nullptr,
                                             request->resource_version(), absl::OkStatus());
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
  if (request->force() && request->grace_period_ns() > 0) {
    return Answer(context, InvalidFieldError("grace_period_ns",
                                             "must be 0 with force (a force delete has none)"));
  }
  // An emulated pod goes at once, from a failed node too: force asks for nothing more.
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
  return new ClusterWatch<WatchPodsResponse>(cluster_, false, filter, request->resource_version(),
                                            valid);
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
  if (processes_ == nullptr) {
    auto result = cluster_->Run([&](EmulatedCluster& c) { return c.RestoreContainer(*request); });
    if (result.ok()) *response = std::move(*result);
    return Answer(context, result.status());
  }
  return ServeOnExecutor(*restores_, context, [this, request, response](absl::Time deadline) {
    auto result = cluster_->Run([&](EmulatedCluster& c) { return c.RestoreContainer(*request); });
    if (!result.ok()) return result.status();
    const codeco::lms::v1::Pod& pod = result->pod();
    if (pod.phase() == codeco::lms::v1::POD_PHASE_PENDING &&
        pod.annotations().contains(kEndpointAnnotation)) {
      // Its process loads without the cluster's lock held; then the cluster
      // turns the pod Running, or drops it when the load failed.
      const std::string name = pod.name();
      const std::string cluster = cluster_->Run([](EmulatedCluster& c) { return c.name(); });
      processes_->AwaitSettled(cluster, name, deadline);
      result = cluster_->Run([&](EmulatedCluster& c) { return c.RestoreOutcome(name); });
      if (!result.ok()) return result.status();
      if (result->pod().phase() == codeco::lms::v1::POD_PHASE_PENDING) {
        return absl::DeadlineExceededError(
            absl::StrCat("pod ", name, " is still loading ", request->archive_path(),
                         "; call again with the same request_id to wait on"));
      }
    }
    *response = std::move(*result);
    return absl::OkStatus();
  });
}

}  // namespace codeco::codef
