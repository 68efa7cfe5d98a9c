#include "codeco/common/backoff.h"

#include <algorithm>
#include <cmath>

namespace codeco {

absl::Duration BackoffDelay(const BackoffPolicy& policy, int retry, double unit) {
  const absl::Duration cap = std::max(policy.max, absl::ZeroDuration());
  const absl::Duration initial = std::clamp(policy.initial, absl::ZeroDuration(), cap);
  const double multiplier = std::max(policy.multiplier, 1.0);
  absl::Duration wait = initial;
  for (int i = 1; i < retry && wait < cap; ++i) wait = std::min(wait * multiplier, cap);
  const double jitter = std::clamp(policy.jitter, 0.0, 1.0);
  const double share = std::clamp(unit, 0.0, 1.0) * jitter;
  return std::clamp(wait * (1.0 - share), absl::ZeroDuration(), cap);
}

absl::Duration Backoff::Delay(int retry) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  return BackoffDelay(policy_, retry, unit(rng_));
}

}  // namespace codeco
