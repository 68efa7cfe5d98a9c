#pragma once
// The PlacementScheduler that asks the hub's SWM over gRPC
// (codeco.swm.v1.SwmService/PlaceApplication). Requests are queued and sent
// from one worker thread, so Apply never waits on the scheduler; each answer
// goes to the result sink (ApplicationManager::RecordPlacement).

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "acm/core/application_manager.h"
#include "acm/core/placement_scheduler.h"
#include "grpcpp/channel.h"

namespace codeco::acm {

/// Where SWM answers go: application name, spec revision, result.
using PlacementSink =
    std::function<void(const std::string&, int64_t, const PlacementResult&)>;

/// PlacementScheduler over SWM's gRPC API.
class SwmPlacementScheduler final : public PlacementScheduler {
 public:
  /// Sends to SWM over `channel`; each call gets `timeout`.
  SwmPlacementScheduler(std::shared_ptr<grpc::Channel> channel, absl::Duration timeout);
  /// Stops the worker (pending requests are dropped; ACM asks again on the
  /// next apply).
  ~SwmPlacementScheduler() override;

  /// Sets where answers go; call once, before the first request.
  void SetSink(PlacementSink sink);
  /// Stops the worker thread; idempotent.
  void Stop();

  absl::Status RequestPlacement(const v1::Application& application,
                                const v1::Neighborhood& neighborhood) override;
  /// SWM has no RPC to release an application's placement yet: UNIMPLEMENTED.
  absl::Status ReleasePlacement(const std::string& application) override;

 private:
  struct Request {
    v1::Application application;
    v1::Neighborhood neighborhood;
  };
  void Loop();
  PlacementResult Place(const Request& request);

  std::shared_ptr<grpc::Channel> channel_;
  const absl::Duration timeout_;
  PlacementSink sink_;
  absl::Mutex mu_;
  std::deque<Request> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace codeco::acm
