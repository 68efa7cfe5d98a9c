#include "codeco/common/health_service.h"

#include <optional>

#include "codeco/common/watch_stream.h"

namespace codeco {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// One Watch stream: writes the latest status whenever it changes, and ends
// after the last write once the service shuts down.
class HealthService::WatchReactor final : public WatchStream<HealthCheckResponse> {
 public:
  WatchReactor(HealthService* owner, ServingStatus initial) : owner_(owner) {
    {
      absl::MutexLock lock(&mu_);
      pending_ = initial;
    }
    Start();
  }

  // Sends `status` when it differs from what was last sent.
  void Push(ServingStatus status) {
    {
      absl::MutexLock lock(&mu_);
      pending_ = status;
    }
    Poke();
  }

  // Sends what is pending, then ends the stream.
  void Close() {
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
    }
    Poke();
  }

 private:
  absl::StatusOr<Batch> Next() override {
    absl::MutexLock lock(&mu_);
    Batch batch;
    if (pending_.has_value() && pending_ != last_sent_) {
      batch.messages.emplace_back().set_status(*pending_);
      last_sent_ = pending_;
    }
    pending_.reset();
    batch.last = closing_;
    return batch;
  }

  void Closed() override { owner_->RemoveWatcher(this); }

  HealthService* const owner_;
  absl::Mutex mu_;
  std::optional<ServingStatus> pending_ ABSL_GUARDED_BY(mu_);
  std::optional<ServingStatus> last_sent_ ABSL_GUARDED_BY(mu_);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
};

HealthService::HealthService() { statuses_[""] = HealthCheckResponse::NOT_SERVING; }

HealthService::~HealthService() = default;

HealthService::ServingStatus HealthService::StatusOfLocked(const std::string& service) const {
  auto it = statuses_.find(service);
  return it == statuses_.end() ? HealthCheckResponse::SERVICE_UNKNOWN : it->second;
}

void HealthService::SetServingStatus(const std::string& service, ServingStatus status) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return;
  statuses_[service] = status;
  // Watchers are few; each filters by its own service name.
  for (auto& [watcher, watched] : watchers_) {
    if (watched == service) watcher->Push(status);
  }
}

void HealthService::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  for (auto& [service, status] : statuses_) status = HealthCheckResponse::NOT_SERVING;
  for (auto& [watcher, watched] : watchers_) {
    watcher->Push(HealthCheckResponse::NOT_SERVING);
    watcher->Close();
  }
}

void HealthService::RemoveWatcher(WatchReactor* watcher) {
  absl::MutexLock lock(&mu_);
  watchers_.erase(watcher);
}

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* context,
                                               const HealthCheckRequest* request,
                                               HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::MutexLock lock(&mu_);
  ServingStatus status = StatusOfLocked(request->service());
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                                 "unknown service \"" + request->service() + "\""));
  } else {
    response->set_status(status);
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext* context, const HealthCheckRequest* request) {
  absl::MutexLock lock(&mu_);
  auto* watcher = new WatchReactor(this, StatusOfLocked(request->service()));
  watchers_[watcher] = request->service();
  if (shut_down_) watcher->Close();
  return watcher;
}

}  // namespace codeco
