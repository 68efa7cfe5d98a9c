#pragma once
// Follows the hub SWM's channel status (codeco.swm.v1.SwmService/
// WatchChannels) and records it in ACM's applications
// (ApplicationManager::RecordChannels): each channel's CODECO lifecycle
// phase, and out-of-QoS channels as a DEGRADED application whose error names
// them, so `codecoctl describe app` and `codecoctl watch app` show them.
// The same stream says where each plan runs its workloads: a plan SWM wrote
// for a migration becomes the application's placements
// (ApplicationManager::RecordMove), so those commands show moves too. The
// stream is reopened (with backoff) when SWM restarts; its first message
// carries every application again.

#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "acm/core/application_manager.h"
#include "codeco/common/backoff.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"

namespace codeco::acm {

/// Records SWM's channel status in ACM. Runs one thread until destroyed.
class ChannelStatusFollower {
 public:
  /// Watches SWM behind `swm` and records into `manager` (which must outlive
  /// it); a lost stream is reopened after `retry`'s backoff.
  ChannelStatusFollower(std::shared_ptr<grpc::Channel> swm, ApplicationManager& manager,
                        BackoffPolicy retry = {});
  /// Cancels the stream and joins the thread.
  ~ChannelStatusFollower();

 private:
  void Run();
  // One stream until it ends; true when anything was read.
  bool Follow();

  std::shared_ptr<grpc::Channel> swm_;
  ApplicationManager& manager_;
  BackoffPolicy retry_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;  // the open stream's
  std::thread thread_;
};

}  // namespace codeco::acm
