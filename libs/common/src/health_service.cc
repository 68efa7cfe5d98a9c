#include "codeco/common/health_service.h"

#include <optional>

namespace codeco {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// One Watch stream: writes the latest status whenever it changes, one write
// at a time, and finishes after the last write once the service shuts down.
class HealthService::WatchReactor final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  WatchReactor(HealthService* owner, ServingStatus initial) : owner_(owner) { Push(initial); }

  // Queues `status` for sending when it differs from what was last sent.
  void Push(ServingStatus status) {
    {
      absl::MutexLock lock(&mu_);
      if (done_) return;
      pending_ = status;
    }
    Pump();
  }

  // Sends what is queued, then ends the stream.
  void Close() {
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
    }
    Pump();
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) closing_ = true;  // the client went away
    }
    Pump();
  }

  void OnCancel() override { Close(); }

  void OnDone() override {
    owner_->RemoveWatcher(this);
    delete this;
  }

 private:
  // Starts the next write or the finish, outside the lock (reactions may run inline).
  void Pump() {
    enum { kNothing, kWrite, kFinish } action = kNothing;
    {
      absl::MutexLock lock(&mu_);
      if (done_ || writing_) return;
      if (pending_.has_value() && pending_ != last_sent_) {
        response_.set_status(*pending_);
        last_sent_ = pending_;
        pending_.reset();
        writing_ = true;
        action = kWrite;
      } else if (closing_) {
        done_ = true;
        action = kFinish;
      }
    }
    if (action == kWrite) StartWrite(&response_);
    if (action == kFinish) Finish(grpc::Status::OK);
  }

  HealthService* const owner_;
  absl::Mutex mu_;
  HealthCheckResponse response_;
  std::optional<ServingStatus> pending_ ABSL_GUARDED_BY(mu_);
  std::optional<ServingStatus> last_sent_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
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
