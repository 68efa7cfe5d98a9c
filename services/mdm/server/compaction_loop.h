#pragma once
// Compacts the MDM's event log (MetadataStore::Compact) on a schedule,
// on a thread of its own; each run's figures are logged and counted.

#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/common/server.h"
#include "mdm/core/metadata_store.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace codeco::mdm {

/// The loop's schedule and what each run keeps.
struct CompactionLoopOptions {
  /// Compact every this long (the first run one interval after the start).
  absl::Duration interval = absl::Minutes(10);
  /// What each run leaves.
  CompactionOptions compaction;
};

/// The loop, from construction until Stop.
class CompactionLoop final : public BackgroundWork {
 public:
  /// Compacts `store`; counts the removed events in `metrics` as
  /// codeco_mdm_compacted_events_total and the runs as
  /// codeco_mdm_compactions_total{result="ok"|"failed"}.
  CompactionLoop(std::shared_ptr<MetadataStore> store, prometheus::Registry& metrics,
                 CompactionLoopOptions options);
  ~CompactionLoop() override;

  /// Stops and joins the thread (a run under way ends first).
  void Stop() override;

 private:
  struct Metrics;
  void RunOnce();

  std::shared_ptr<MetadataStore> store_;
  std::unique_ptr<Metrics> metrics_;
  const CompactionLoopOptions options_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace codeco::mdm
