#include "mdm/server/compaction_loop.h"

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "codeco/common/logging.h"
#include "codeco/common/metrics.h"

namespace codeco::mdm {

struct CompactionLoop::Metrics {
  explicit Metrics(prometheus::Registry& registry)
      : runs(prometheus::BuildCounter()
                 .Name(MetricName("mdm", "compactions_total"))
                 .Help("Log compactions by result (ok, failed)")
                 .Register(registry)),
        removed(prometheus::BuildCounter()
                    .Name(MetricName("mdm", "compacted_events_total"))
                    .Help("Superseded events and tombstones log compaction removed")
                    .Register(registry)
                    .Add({})) {}
  prometheus::Family<prometheus::Counter>& runs;
  prometheus::Counter& removed;
};

CompactionLoop::CompactionLoop(std::shared_ptr<MetadataStore> store, prometheus::Registry& metrics,
                               CompactionLoopOptions options)
    : store_(std::move(store)), metrics_(std::make_unique<Metrics>(metrics)), options_(options) {
  thread_ = std::thread([this] {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.interval)) return;
      }
      RunOnce();
    }
  });
}

CompactionLoop::~CompactionLoop() { Stop(); }

void CompactionLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void CompactionLoop::RunOnce() {
  const absl::Time start = absl::Now();
  absl::StatusOr<CompactionResult> done = store_->Compact(options_.compaction);
  if (!done.ok()) {
    metrics_->runs.Add({{"result", "failed"}}).Increment();
    log::Error("mdm: log compaction failed", {{"error", std::string(done.status().message())}});
    return;
  }
  metrics_->runs.Add({{"result", "ok"}}).Increment();
  metrics_->removed.Increment(static_cast<double>(done->removed));
  if (done->removed > 0) {
    log::Info("mdm: compacted the event log",
              {{"looked_at", absl::StrCat(done->looked_at)},
               {"removed", absl::StrCat(done->removed)},
               {"tombstones_removed", absl::StrCat(done->tombstones_removed)},
               {"below_offset", absl::StrCat(done->compacted_below)},
               {"took", absl::FormatDuration(absl::Now() - start)}});
  }
}

}  // namespace codeco::mdm
