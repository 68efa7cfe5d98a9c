#include "kubelms/server/kube_lms_service.h"

#include <atomic>
#include <deque>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/serve_on_executor.h"
#include "codeco/common/status.h"
#include "codeco/common/watch_stream.h"

namespace codeco::kubelms {
namespace {

using codeco::lms::v1::WatchNodesResponse;
using codeco::lms::v1::WatchPodsResponse;

// Events a watcher may fall behind by before it is cut off (list again).
constexpr size_t kMaxQueuedEvents = 10000;

// One LMS watch: a thread runs `follow` (KubeLms::WatchNodes or WatchPods),
// which hands events to Enqueue; the stream writes them. Closing the stream
// cancels the thread and joins it, so nothing pokes the stream after.
template <typename Response>
class KubeWatch final : public WatchStream<Response> {
 public:
  using Follow = std::function<absl::Status(const std::function<bool(Response)>& emit,
                                            const std::function<bool()>& cancelled)>;
  using Batch = typename WatchStream<Response>::Batch;

  KubeWatch(Follow follow, std::shared_ptr<std::atomic<int>> watches, int max_watches)
      : watches_(std::move(watches)) {
    if (watches_->fetch_add(1) >= max_watches) {
      this->Fail(
          grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                       absl::StrCat("this LMS serves at most ", max_watches, " watches at once")));
      return;
    }
    this->Start();
    thread_ = std::thread([this, follow = std::move(follow)] {
      absl::Status end = follow([this](Response r) { return Enqueue(std::move(r)); },
                                [this] { return cancelled_.load(); });
      {
        absl::MutexLock lock(&mu_);
        if (!ended_.has_value()) {
          ended_ = end.ok() ? absl::OutOfRangeError(
                                  "the Kubernetes watch ended: list again and watch from there")
                            : end;
        }
      }
      this->Poke();
    });
  }

 private:
  bool Enqueue(Response response) {
    {
      absl::MutexLock lock(&mu_);
      if (pending_.size() >= kMaxQueuedEvents) {
        ended_ = absl::OutOfRangeError("watcher fell behind the event history: list again");
        pending_.clear();
        return false;
      }
      pending_.push_back(std::move(response));
    }
    this->Poke();
    return true;
  }

  absl::StatusOr<Batch> Next() override {
    absl::MutexLock lock(&mu_);
    Batch batch;
    if (pending_.empty() && ended_.has_value()) return *ended_;
    batch.messages.assign(std::make_move_iterator(pending_.begin()),
                          std::make_move_iterator(pending_.end()));
    pending_.clear();
    return batch;
  }

  void Closed() override {
    cancelled_ = true;
    if (thread_.joinable()) thread_.join();
    watches_->fetch_sub(1);
  }

  std::shared_ptr<std::atomic<int>> watches_;
  std::atomic<bool> cancelled_{false};
  std::thread thread_;
  absl::Mutex mu_;
  std::deque<Response> pending_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> ended_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

KubeLmsService::KubeLmsService(std::unique_ptr<KubeApi> api, Clock* clock, KubeLmsOptions options,
                               int threads, int max_watches)
    : api_(std::move(api)),
      lms_(std::make_unique<KubeLms>(
          api_.get(), clock,
          [](absl::Duration d) {
            absl::SleepFor(d);
            return true;
          },
          std::move(options))),
      executor_(std::make_unique<BoundedExecutor>(threads, 256)),
      max_watches_(max_watches),
      watches_(std::make_shared<std::atomic<int>>(0)) {}

KubeLmsService::~KubeLmsService() = default;

grpc::ServerUnaryReactor* KubeLmsService::ListNodes(
    grpc::CallbackServerContext* context, const codeco::lms::v1::ListNodesRequest* request,
    codeco::lms::v1::ListNodesResponse* response) {
  return ServeOnExecutor(*executor_, context,
                         [this, request, response](absl::Time) -> absl::Status {
                           ASSIGN_OR_RETURN(*response, lms_->ListNodes(*request));
                           return absl::OkStatus();
                         });
}

grpc::ServerUnaryReactor* KubeLmsService::GetNode(grpc::CallbackServerContext* context,
                                                  const codeco::lms::v1::GetNodeRequest* request,
                                                  codeco::lms::v1::GetNodeResponse* response) {
  return ServeOnExecutor(
      *executor_, context, [this, request, response](absl::Time) -> absl::Status {
        ASSIGN_OR_RETURN(*response->mutable_node(), lms_->GetNode(request->name()));
        return absl::OkStatus();
      });
}

grpc::ServerWriteReactor<WatchNodesResponse>* KubeLmsService::WatchNodes(
    grpc::CallbackServerContext*, const codeco::lms::v1::WatchNodesRequest* request) {
  return new KubeWatch<WatchNodesResponse>(
      [lms = lms_.get(), request = *request](const auto& emit, const auto& cancelled) {
        return lms->WatchNodes(request, emit, cancelled);
      },
      watches_, max_watches_);
}

grpc::ServerUnaryReactor* KubeLmsService::CreatePod(
    grpc::CallbackServerContext* context, const codeco::lms::v1::CreatePodRequest* request,
    codeco::lms::v1::CreatePodResponse* response) {
  return ServeOnExecutor(*executor_, context,
                         [this, request, response](absl::Time) -> absl::Status {
                           ASSIGN_OR_RETURN(*response->mutable_pod(), lms_->CreatePod(*request));
                           return absl::OkStatus();
                         });
}

grpc::ServerUnaryReactor* KubeLmsService::GetPod(grpc::CallbackServerContext* context,
                                                 const codeco::lms::v1::GetPodRequest* request,
                                                 codeco::lms::v1::GetPodResponse* response) {
  return ServeOnExecutor(
      *executor_, context, [this, request, response](absl::Time) -> absl::Status {
        ASSIGN_OR_RETURN(*response->mutable_pod(), lms_->GetPod(request->name()));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* KubeLmsService::ListPods(grpc::CallbackServerContext* context,
                                                   const codeco::lms::v1::ListPodsRequest* request,
                                                   codeco::lms::v1::ListPodsResponse* response) {
  return ServeOnExecutor(*executor_, context,
                         [this, request, response](absl::Time) -> absl::Status {
                           ASSIGN_OR_RETURN(*response, lms_->ListPods(*request));
                           return absl::OkStatus();
                         });
}

grpc::ServerUnaryReactor* KubeLmsService::DeletePod(
    grpc::CallbackServerContext* context, const codeco::lms::v1::DeletePodRequest* request,
    codeco::lms::v1::DeletePodResponse* response) {
  return ServeOnExecutor(*executor_, context,
                         [this, request, response](absl::Time) -> absl::Status {
                           ASSIGN_OR_RETURN(*response->mutable_pod(), lms_->DeletePod(*request));
                           return absl::OkStatus();
                         });
}

grpc::ServerWriteReactor<WatchPodsResponse>* KubeLmsService::WatchPods(
    grpc::CallbackServerContext*, const codeco::lms::v1::WatchPodsRequest* request) {
  return new KubeWatch<WatchPodsResponse>(
      [lms = lms_.get(), request = *request](const auto& emit, const auto& cancelled) {
        return lms->WatchPods(request, emit, cancelled);
      },
      watches_, max_watches_);
}

grpc::ServerUnaryReactor* KubeLmsService::GetNodeUsage(
    grpc::CallbackServerContext* context, const codeco::lms::v1::GetNodeUsageRequest* request,
    codeco::lms::v1::GetNodeUsageResponse* response) {
  return ServeOnExecutor(
      *executor_, context, [this, request, response](absl::Time) -> absl::Status {
        ASSIGN_OR_RETURN(*response->mutable_usage(), lms_->GetNodeUsage(request->node()));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* KubeLmsService::CheckpointContainer(
    grpc::CallbackServerContext* context,
    const codeco::lms::v1::CheckpointContainerRequest* request,
    codeco::lms::v1::CheckpointContainerResponse* response) {
  return ServeOnExecutor(*executor_, context,
                         [this, request, response](absl::Time) -> absl::Status {
                           ASSIGN_OR_RETURN(*response, lms_->CheckpointContainer(*request));
                           return absl::OkStatus();
                         });
}

grpc::ServerUnaryReactor* KubeLmsService::RestoreContainer(
    grpc::CallbackServerContext* context, const codeco::lms::v1::RestoreContainerRequest* request,
    codeco::lms::v1::RestoreContainerResponse* response) {
  return ServeOnExecutor(
      *executor_, context, [this, request, response, context](absl::Time deadline) -> absl::Status {
        ASSIGN_OR_RETURN(*response,
                         lms_->RestoreContainer(*request, deadline - absl::Now(),
                                                [context] { return context->IsCancelled(); }));
        return absl::OkStatus();
      });
}

}  // namespace codeco::kubelms
