#include "acm/server/channel_status_follower.h"

#include <vector>

#include "codeco/common/logging.h"
#include "codeco/swm/v1/swm_service.grpc.pb.h"

namespace codeco::acm {

ChannelStatusFollower::ChannelStatusFollower(std::shared_ptr<grpc::Channel> swm,
                                             ApplicationManager& manager, BackoffPolicy retry)
    : swm_(std::move(swm)), manager_(manager), retry_(retry) {
  thread_ = std::thread([this] { Run(); });
}

ChannelStatusFollower::~ChannelStatusFollower() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  thread_.join();
}

void ChannelStatusFollower::Run() {
  Backoff backoff(retry_, /*seed=*/reinterpret_cast<uintptr_t>(this));
  int failures = 0;
  while (true) {
    failures = Follow() ? 1 : failures + 1;
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    const absl::Time until = absl::Now() + backoff.Delay(failures);
    mu_.AwaitWithDeadline(absl::Condition(&stop_), until);
    if (stop_) return;
  }
}

bool ChannelStatusFollower::Follow() {
  auto stub = swm::v1::SwmService::NewStub(swm_);
  grpc::ClientContext context;
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return false;
    context_ = &context;
  }
  swm::v1::WatchChannelsRequest request;
  auto stream = stub->WatchChannels(&context, request);
  swm::v1::WatchChannelsResponse response;
  bool read = false;
  while (stream->Read(&response)) {
    read = true;
    for (const swm::v1::ApplicationChannels& app : response.applications()) {
      // A plan written by a migration moves a workload: follow it first, so
      // its channels then land on the plan the application holds.
      std::vector<v1::ServicePlacement> placements(app.placements().begin(),
                                                   app.placements().end());
      absl::Status moved = manager_.RecordMove(app.application(), app.spec_revision(),
                                               app.plan_revision(), placements);
      if (!moved.ok() && !absl::IsNotFound(moved)) {
        log::Warn("moved placement not recorded", {{"application", app.application()},
                                                   {"error", std::string(moved.message())}});
      }
      std::vector<v1::ChannelStatus> channels(app.channels().begin(), app.channels().end());
      absl::Status recorded =
          manager_.RecordChannels(app.application(), app.plan_revision(), channels);
      if (!recorded.ok() && !absl::IsNotFound(recorded)) {
        log::Warn("channel status not recorded", {{"application", app.application()},
                                                  {"error", std::string(recorded.message())}});
      }
      for (const swm::v1::ChannelTrigger& t : app.triggers()) {
        log::Info("channel out of QoS", {{"application", t.application()},
                                         {"channel", t.channel()},
                                         {"why", t.message()}});
      }
    }
  }
  grpc::Status status = stream->Finish();
  {
    absl::MutexLock lock(&mu_);
    context_ = nullptr;
  }
  if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
    log::Debug("channel watch ended", {{"error", status.error_message()}});
  }
  return read;
}

}  // namespace codeco::acm
