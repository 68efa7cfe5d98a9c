#pragma once
// Follows a gRPC channel's connectivity and calls back each time the channel
// becomes READY again after it was not: the peer is back after an outage.
// Callers use it to retry at once what they deferred with backoff while the
// peer was away, instead of waiting out a backoff that grew during the
// outage (ACM's placement retries reach a minute).
//
// While the channel is not READY the watch asks it to connect (an IDLE
// channel would otherwise wait for the next call), so a peer's return is
// seen within the channel's own reconnect backoff.

#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"

namespace codeco {

/// Calls `on_ready` from its own thread each time `channel` goes from any
/// other state to READY (its first connection included, but not when it is
/// READY already as the watch starts).
class ChannelReadyWatch {
 public:
  /// Starts following `channel`; `poll` bounds how long a stop waits.
  ChannelReadyWatch(std::shared_ptr<grpc::Channel> channel, std::function<void()> on_ready,
                    absl::Duration poll = absl::Seconds(1));
  /// Stops following (waits for a running `on_ready` to return).
  ~ChannelReadyWatch();
  ChannelReadyWatch(const ChannelReadyWatch&) = delete;
  ChannelReadyWatch& operator=(const ChannelReadyWatch&) = delete;

  /// How many times `on_ready` was called.
  int recoveries() const;

 private:
  void Loop();

  const std::shared_ptr<grpc::Channel> channel_;
  const std::function<void()> on_ready_;
  const absl::Duration poll_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int recoveries_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace codeco
