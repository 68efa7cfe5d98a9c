#include "codeco/common/backoff.h"

#include <catch2/catch.hpp>

namespace codeco {
namespace {

TEST_CASE("backoff doubles from initial up to max and jitter only shortens") {
  BackoffPolicy policy{.initial = absl::Seconds(1), .max = absl::Seconds(10), .multiplier = 2,
                       .jitter = 0.5};
  REQUIRE(BackoffDelay(policy, 1, 0.0) == absl::Seconds(1));
  REQUIRE(BackoffDelay(policy, 2, 0.0) == absl::Seconds(2));
  REQUIRE(BackoffDelay(policy, 4, 0.0) == absl::Seconds(8));
  REQUIRE(BackoffDelay(policy, 5, 0.0) == absl::Seconds(10));
  REQUIRE(BackoffDelay(policy, 1000, 0.0) == absl::Seconds(10));
  REQUIRE(BackoffDelay(policy, 3, 1.0) == absl::Seconds(2));
  REQUIRE(BackoffDelay(policy, 3, 0.5) == absl::Seconds(3));
  // Nonsense input is clamped, never negative or past max.
  REQUIRE(BackoffDelay(policy, 0, 7.0) == absl::Milliseconds(500));
  BackoffPolicy huge{.initial = absl::Hours(1), .max = absl::Seconds(5)};
  REQUIRE(BackoffDelay(huge, 1, 0.0) == absl::Seconds(5));
}

TEST_CASE("a seeded Backoff repeats its draws and stays within bounds") {
  BackoffPolicy policy{.initial = absl::Milliseconds(100), .max = absl::Seconds(3),
                       .multiplier = 3, .jitter = 0.2};
  Backoff a(policy, 42);
  Backoff b(policy, 42);
  for (int retry = 1; retry <= 8; ++retry) {
    absl::Duration da = a.Delay(retry);
    REQUIRE(da == b.Delay(retry));
    absl::Duration full = BackoffDelay(policy, retry, 0.0);
    REQUIRE(da <= full);
    REQUIRE(da >= full * 0.8);
  }
}

}  // namespace
}  // namespace codeco
