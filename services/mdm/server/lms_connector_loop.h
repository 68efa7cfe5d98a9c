#pragma once
// Runs the LMS connector (mdm/core/lms_connector.h) against this cluster's
// LMS (federation.lms) on a schedule: read every node and pod over
// codeco.lms.v1, then Sync. A failed read or sync is logged and tried again
// at the next tick; warnings are logged when they change.

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/common/server.h"
#include "mdm/core/lms_connector.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace codeco::mdm {

/// Every node and pod of the LMS behind `channel`, page by page, each call
/// bounded by `timeout`.
absl::StatusOr<ClusterInventory> ReadClusterInventory(const std::shared_ptr<grpc::Channel>& channel,
                                                      absl::Duration timeout);

/// The connector's schedule.
struct LmsConnectorLoopOptions {
  /// Read and sync every this long (the first right away).
  absl::Duration interval = absl::Seconds(15);
  /// Bound of each LMS call.
  absl::Duration call_timeout = absl::Seconds(10);
};

/// The loop, on a thread of its own from construction until Stop.
class LmsConnectorLoop final : public BackgroundWork {
 public:
  /// Syncs `cluster`'s LMS behind `channel` into `store`; counts syncs in `metrics` as
  /// codeco_mdm_connector_syncs_total and the events they published as
  /// codeco_mdm_connector_events_total.
  LmsConnectorLoop(std::shared_ptr<MetadataStore> store, std::string cluster,
                   std::shared_ptr<grpc::Channel> channel, prometheus::Registry& metrics,
                   LmsConnectorLoopOptions options);
  ~LmsConnectorLoop() override;

  /// Stops and joins the thread.
  void Stop() override;

 private:
  struct Metrics;
  void RunOnce();

  std::shared_ptr<MetadataStore> store_;
  LmsConnector connector_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Metrics> metrics_;
  const LmsConnectorLoopOptions options_;
  bool types_registered_ = false;
  std::vector<std::string> last_warnings_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace codeco::mdm
