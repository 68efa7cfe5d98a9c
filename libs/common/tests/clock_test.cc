#include <catch2/catch.hpp>

#include "codeco/common/clock.h"

namespace codeco {
namespace {

TEST_CASE("simulated clock moves only when told") {
  SimulatedClock clock(absl::FromUnixSeconds(1000));
  REQUIRE(clock.Now() == absl::FromUnixSeconds(1000));
  clock.Advance(absl::Milliseconds(1500));
  REQUIRE(clock.Now() == absl::FromUnixMillis(1001500));
  clock.SetTime(absl::FromUnixSeconds(2000));
  REQUIRE(clock.Now() == absl::FromUnixSeconds(2000));
}

TEST_CASE("real clock follows the system time") {
  absl::Time before = absl::Now();
  absl::Time now = RealClock::Default().Now();
  REQUIRE(now >= before);
  REQUIRE(now - before < absl::Seconds(5));
}

}  // namespace
}  // namespace codeco
