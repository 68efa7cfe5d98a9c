#pragma once
// Capped exponential backoff with jitter, the one retry schedule codeco's
// services share. Pure: the caller owns the clock and the random source, so
// tests choose both.

#include <cstdint>
#include <random>

#include "absl/time/time.h"

namespace codeco {

/// How retries space out.
struct BackoffPolicy {
  /// Wait before the first retry. Default: 1 s.
  absl::Duration initial = absl::Seconds(1);
  /// Longest wait between two attempts. Default: 30 s.
  absl::Duration max = absl::Seconds(30);
  /// Growth of the wait after each failure. Default: 2.
  double multiplier = 2.0;
  /// Each wait is drawn uniformly from [wait * (1 - jitter), wait], so that
  /// many retries started together spread out. 0..1. Default: 0.2.
  double jitter = 0.2;
};

/// The wait before retry number `retry` (1 = the first retry, after one
/// failure): initial * multiplier^(retry-1), capped at `max`, less a random
/// share of up to `jitter` of it taken from `unit` (a draw in [0, 1)).
/// Never negative, never above `max`.
absl::Duration BackoffDelay(const BackoffPolicy& policy, int retry, double unit);

/// A BackoffPolicy with its own seeded random source. Not thread-safe.
class Backoff {
 public:
  /// Draws jitter from a generator seeded with `seed`.
  explicit Backoff(BackoffPolicy policy = {}, uint64_t seed = 1) : policy_(policy), rng_(seed) {}
  /// The wait before retry number `retry` (1 = after the first failure).
  absl::Duration Delay(int retry);
  /// The policy in force.
  const BackoffPolicy& policy() const { return policy_; }

 private:
  BackoffPolicy policy_;
  std::mt19937_64 rng_;
};

}  // namespace codeco
