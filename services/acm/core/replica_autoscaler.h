#pragma once
// ReplicaAutoscaler: mck8s's multi-cluster horizontal pod autoscaler (MCHPA,
// the study's Algorithm 3) for one multi-cluster deployment: the replicas of
// a service, wherever they run, scale together on their average CPU
// utilization. Pure logic under an injected clock: the caller measures the
// deployment's replicas and utilization, asks Desired, and has the placement
// add or remove replicas (where they go is the placement policy's choice).
//
// desired = ceil(current x utilization / target), clamped to [min, max].
// A scale-up applies at once; a scale-down only once a lower count has been
// wanted for `scale_down_cooldown` without a break (the study's 10 minutes),
// and then to the highest count wanted over that time, so a short dip does
// not shed replicas a returning load needs.

#include <deque>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "codeco/common/clock.h"

namespace codeco::acm {

/// Settings of one deployment's autoscaler (the CAM's `autoscaling`).
struct ReplicaAutoscalerOptions {
  /// Fewest replicas. Default 1.
  int min_replicas = 1;
  /// Most replicas. Default 10.
  int max_replicas = 10;
  /// Average CPU utilization of the replicas' requests to aim for (0-1]. Default 0.75.
  double target_utilization = 0.75;
  /// How long a lower count must be wanted before replicas go. Default 10 min.
  absl::Duration scale_down_cooldown = absl::Minutes(10);

  /// Every setting equal.
  bool operator==(const ReplicaAutoscalerOptions&) const = default;
};

/// Checks `options`; INVALID_ARGUMENT naming the field ("autoscaling.<field>").
absl::Status ValidateReplicaAutoscalerOptions(const ReplicaAutoscalerOptions& options);

/// The replica count of one multi-cluster deployment. Not thread-safe.
class ReplicaAutoscaler {
 public:
  /// `options` must pass ValidateReplicaAutoscalerOptions. Reads time from `clock` only.
  ReplicaAutoscaler(const Clock& clock, ReplicaAutoscalerOptions options);

  /// The replica count to run now, given `current` replicas and their
  /// average CPU utilization (used / requested, may exceed 1).
  int Desired(int current, double utilization);

 private:
  const Clock& clock_;
  ReplicaAutoscalerOptions options_;
  // While a lower count is wanted: (time, count) of each wish, oldest first.
  std::deque<std::pair<absl::Time, int>> lower_;
};

}  // namespace codeco::acm
