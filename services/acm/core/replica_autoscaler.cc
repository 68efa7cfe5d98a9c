#include "acm/core/replica_autoscaler.h"

#include <algorithm>
#include <cmath>

#include "codeco/common/status.h"

namespace codeco::acm {

absl::Status ValidateReplicaAutoscalerOptions(const ReplicaAutoscalerOptions& o) {
  if (o.min_replicas < 0)
    return InvalidFieldError("autoscaling.min_replicas", "must not be negative");
  if (o.max_replicas < std::max(1, o.min_replicas)) {
    return InvalidFieldError("autoscaling.max_replicas",
                             "must be at least 1 and at least min_replicas");
  }
  if (!(o.target_utilization > 0 && o.target_utilization <= 1)) {
    return InvalidFieldError("autoscaling.target_utilization", "must be in (0, 1]");
  }
  if (o.scale_down_cooldown < absl::ZeroDuration()) {
    return InvalidFieldError("autoscaling.scale_down_cooldown", "must not be negative");
  }
  return absl::OkStatus();
}

ReplicaAutoscaler::ReplicaAutoscaler(const Clock& clock, ReplicaAutoscalerOptions options)
    : clock_(clock), options_(std::move(options)) {}

int ReplicaAutoscaler::Desired(int current, double utilization) {
  const absl::Time now = clock_.Now();
  const double raw = std::ceil(static_cast<double>(std::max(current, 0)) *
                                   std::max(utilization, 0.0) / options_.target_utilization -
                               1e-9);
  const int wanted = std::clamp(static_cast<int>(std::min(raw, 1e6)), options_.min_replicas,
                                options_.max_replicas);
  if (wanted >= current) {
    lower_.clear();
    return wanted;
  }
  lower_.emplace_back(now, wanted);
  if (now - lower_.front().first < options_.scale_down_cooldown) return current;
  // Wanted lower for the whole cooldown: go to the highest count wanted in
  // that time, and start over from there.
  int highest = 0;
  for (const auto& [at, count] : lower_) highest = std::max(highest, count);
  lower_.clear();
  return highest;
}

}  // namespace codeco::acm
