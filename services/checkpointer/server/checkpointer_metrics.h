#pragma once
// The checkpointer's domain metrics (codeco_checkpointer_*), fed by the
// core's on_finished callback as each operation ends.

#include "codeco/checkpointer/v1/checkpoint.pb.h"
#include "codeco/common/v1/operation.pb.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace codeco::checkpointer {

/// Counters and histograms of finished checkpoints, restores and migrations.
/// Thread-safe (prometheus-cpp metrics are).
class CheckpointerMetrics {
 public:
  /// Registers the metrics in `registry`, which must outlive this object.
  explicit CheckpointerMetrics(prometheus::Registry& registry);

  /// Counts `op` (by kind and status code) and, when it succeeded, observes
  /// the time of each phase `checkpoint` records and the bytes it moved.
  void Record(const common::v1::Operation& op, const v1::Checkpoint& checkpoint);

 private:
  prometheus::Family<prometheus::Counter>& operations_;
  prometheus::Family<prometheus::Histogram>& phase_seconds_;
  prometheus::Counter& state_bytes_;
};

}  // namespace codeco::checkpointer
