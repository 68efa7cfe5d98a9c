// mck8s's multi-cluster autoscaler (Algorithm 3): the replica formula, its
// bounds, scale-up at once and scale-down after an unbroken cooldown.
#include "acm/core/replica_autoscaler.h"

#include <catch2/catch.hpp>

#include "codeco/common/clock.h"

namespace codeco::acm {
namespace {

TEST_CASE("replica options are checked and name their field") {
  CHECK(ValidateReplicaAutoscalerOptions({}).ok());
  CHECK(ValidateReplicaAutoscalerOptions({.min_replicas = 3, .max_replicas = 2})
            .message()
            .find("autoscaling.max_replicas") != std::string::npos);
  CHECK(ValidateReplicaAutoscalerOptions({.target_utilization = 0})
            .message()
            .find("autoscaling.target_utilization") != std::string::npos);
  CHECK(absl::IsInvalidArgument(
      ValidateReplicaAutoscalerOptions({.scale_down_cooldown = absl::Seconds(-1)})));
}

TEST_CASE("desired replicas follow ceil(current x utilization / target) within the bounds") {
  SimulatedClock clock(absl::FromUnixSeconds(0));
  ReplicaAutoscaler a(clock, {.min_replicas = 2, .max_replicas = 8, .target_utilization = 0.75});
  CHECK(a.Desired(2, 0.75) == 2);
  CHECK(a.Desired(2, 1.5) == 4);  // 2 x 1.5 / 0.75
  CHECK(a.Desired(4, 0.9) == 5);  // 4.8 rounds up
  CHECK(a.Desired(5, 3.0) == 8);  // capped at max
  CHECK(a.Desired(0, 0.0) == 2);  // raised to min
}

TEST_CASE("scale-down waits for an unbroken cooldown and keeps the highest wish") {
  SimulatedClock clock(absl::FromUnixSeconds(0));
  ReplicaAutoscaler a(clock, {.min_replicas = 1,
                              .max_replicas = 10,
                              .target_utilization = 0.5,
                              .scale_down_cooldown = absl::Minutes(10)});
  CHECK(a.Desired(6, 0.1) == 6);  // wants 2
  clock.Advance(absl::Minutes(5));
  CHECK(a.Desired(6, 0.25) == 6);  // wants 3
  clock.Advance(absl::Minutes(4));
  CHECK(a.Desired(6, 0.1) == 6);
  clock.Advance(absl::Minutes(1));
  CHECK(a.Desired(6, 0.1) == 3);  // 10 minutes lower: the highest wish, 3
  // The load comes back for a moment: the cooldown starts over.
  CHECK(a.Desired(3, 0.1) == 3);
  clock.Advance(absl::Minutes(9));
  CHECK(a.Desired(3, 0.6) == 4);  // up at once
  clock.Advance(absl::Minutes(2));
  CHECK(a.Desired(4, 0.1) == 4);
  clock.Advance(absl::Minutes(9));
  CHECK(a.Desired(4, 0.1) == 4);
  clock.Advance(absl::Minutes(1));
  CHECK(a.Desired(4, 0.1) == 1);
}

}  // namespace
}  // namespace codeco::acm
