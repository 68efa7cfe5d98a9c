#include "codeco/common/channel_ready_watch.h"

#include <chrono>

namespace codeco {

ChannelReadyWatch::ChannelReadyWatch(std::shared_ptr<grpc::Channel> channel,
                                     std::function<void()> on_ready, absl::Duration poll)
    : channel_(std::move(channel)), on_ready_(std::move(on_ready)), poll_(poll) {
  thread_ = std::thread([this] { Loop(); });
}

ChannelReadyWatch::~ChannelReadyWatch() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

int ChannelReadyWatch::recoveries() const {
  absl::MutexLock lock(&mu_);
  return recoveries_;
}

void ChannelReadyWatch::Loop() {
  grpc_connectivity_state last = channel_->GetState(/*try_to_connect=*/false);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    // Not READY: ask for a connection, so an idle channel notices the peer
    // is back without waiting for the next call.
    grpc_connectivity_state now = channel_->GetState(/*try_to_connect=*/last != GRPC_CHANNEL_READY);
    if (now == last) {
      const auto deadline = std::chrono::system_clock::now() +
                            std::chrono::milliseconds(absl::ToInt64Milliseconds(poll_));
      if (!channel_->WaitForStateChange(last, deadline)) continue;  // poll: check stopping
      now = channel_->GetState(/*try_to_connect=*/false);
    }
    if (now == GRPC_CHANNEL_READY && last != GRPC_CHANNEL_READY) {
      {
        absl::MutexLock lock(&mu_);
        ++recoveries_;
      }
      on_ready_();
    }
    last = now;
  }
}

}  // namespace codeco
