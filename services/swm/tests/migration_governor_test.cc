// The anti-oscillation rules of runtime adaptation: grace periods, the
// overload hysteresis, minimum gain, per-workload cooldown, the budget,
// failures that bypass them, and failback after a healthy spell.
#include <catch2/catch.hpp>

#include "codeco/common/clock.h"
#include "swm/core/migration_governor.h"

namespace codeco::swm {
namespace {

TEST_CASE("options are checked and name their field") {
  CHECK(ValidateMigrationGovernorOptions({}).ok());
  MigrationGovernorOptions o;
  o.overload_low = 0.95;
  CHECK(ValidateMigrationGovernorOptions(o).message().find("adaptation.overload_low") !=
        std::string::npos);
  o = {};
  o.budget_interval = absl::ZeroDuration();
  CHECK(ValidateMigrationGovernorOptions(o).message().find("adaptation.budget_interval") !=
        std::string::npos);
  o = {};
  o.min_gain = 101;
  CHECK(absl::IsInvalidArgument(ValidateMigrationGovernorOptions(o)));
  o = {};
  o.failure_grace = absl::Seconds(-1);
  CHECK(ValidateMigrationGovernorOptions(o).message().find("adaptation.failure_grace") !=
        std::string::npos);
}

TEST_CASE("a failure counts after its grace and a shorter blip never does") {
  SimulatedClock clock(absl::FromUnixSeconds(0));
  MigrationGovernor g(clock, {.failure_grace = absl::Seconds(60)});
  g.ObserveHealth("edge", false);
  clock.Advance(absl::Seconds(50));
  g.ObserveHealth("edge", false);
  CHECK_FALSE(g.Failed("edge"));
  g.ObserveHealth("edge", true);  // a 50 s blip
  clock.Advance(absl::Seconds(30));
  CHECK_FALSE(g.Failed("edge"));
  CHECK(g.Recovered().empty());
  g.ObserveHealth("edge", false);
  clock.Advance(absl::Seconds(60));
  g.ObserveHealth("edge", false);
  CHECK(g.Failed("edge"));
  CHECK_FALSE(g.Failed("core"));
}

TEST_CASE("failback is reported once after a healthy spell that is not interrupted") {
  SimulatedClock clock(absl::FromUnixSeconds(0));
  MigrationGovernor g(clock, {.failure_grace = absl::Seconds(30),
                              .failback_grace = absl::Minutes(5)});
  g.ObserveHealth("edge", false);
  clock.Advance(absl::Seconds(30));
  g.ObserveHealth("edge", false);
  REQUIRE(g.Failed("edge"));
  clock.Advance(absl::Minutes(1));
  g.ObserveHealth("edge", true);
  CHECK_FALSE(g.Failed("edge"));
  clock.Advance(absl::Minutes(4));
  g.ObserveHealth("edge", true);
  CHECK(g.Recovered().empty());
  // Down again for a moment: the healthy spell starts over.
  g.ObserveHealth("edge", false);
  clock.Advance(absl::Seconds(5));
  g.ObserveHealth("edge", true);
  clock.Advance(absl::Minutes(4));
  g.ObserveHealth("edge", true);
  CHECK(g.Recovered().empty());
  clock.Advance(absl::Minutes(1));
  CHECK(g.Recovered() == std::vector<std::string>{"edge"});
  CHECK(g.Recovered().empty());
}

TEST_CASE("a failure restored after a restart fails back after a healthy spell") {
  SimulatedClock clock(absl::FromUnixSeconds(0));
  MigrationGovernor g(clock, {.failure_grace = absl::Seconds(30),
                              .failback_grace = absl::Minutes(5)});
  g.RestoreFailed("edge");
  CHECK_FALSE(g.Failed("edge"));  // nothing is evacuated again for it
  g.ObserveHealth("edge", true);
  clock.Advance(absl::Minutes(5));
  CHECK(g.Recovered() == std::vector<std::string>{"edge"});
  CHECK(g.Recovered().empty());
}

TEST_CASE("a move for a channel out of QoS needs no gain but respects the cooldown") {
  SimulatedClock clock(absl::FromUnixSeconds(0));
  MigrationGovernor g(clock, {.min_gain = 10, .cooldown = absl::Hours(1)});
  CHECK(g.Admit({.workload = "shop/back-0", .trigger = MoveTrigger::kLinkFailure}).ok());
  clock.Advance(absl::Minutes(30));
  absl::Status held = g.Admit({.workload = "shop/back-0", .trigger = MoveTrigger::kLinkFailure});
  CHECK(absl::IsFailedPrecondition(held));
  CHECK(held.message().find("cooldown") != std::string::npos);
  CHECK(MoveTriggerName(MoveTrigger::kLinkFailure) == "link-failure");
}

TEST_CASE("overload needs its grace and clears only below the low mark") {
  SimulatedClock clock(absl::FromUnixSeconds(0));
  MigrationGovernor g(clock, {.overload_grace = absl::Minutes(2),
                              .overload_high = 0.9,
                              .overload_low = 0.7});
  g.ObserveUtilization("a/n1", 0.95);
  clock.Advance(absl::Minutes(1));
  g.ObserveUtilization("a/n1", 0.97);
  CHECK_FALSE(g.Overloaded("a/n1"));
  g.ObserveUtilization("a/n1", 0.85);  // a dip resets the grace
  clock.Advance(absl::Minutes(1));
  g.ObserveUtilization("a/n1", 0.95);
  clock.Advance(absl::Minutes(1));
  g.ObserveUtilization("a/n1", 0.95);
  CHECK_FALSE(g.Overloaded("a/n1"));
  clock.Advance(absl::Minutes(1));
  g.ObserveUtilization("a/n1", 0.92);
  CHECK(g.Overloaded("a/n1"));
  g.ObserveUtilization("a/n1", 0.8);  // between the marks: still overloaded
  CHECK(g.Overloaded("a/n1"));
  g.ObserveUtilization("a/n1", 0.6);
  CHECK_FALSE(g.Overloaded("a/n1"));
}

TEST_CASE("moves need their gain and respect cooldown and budget but failures do not") {
  SimulatedClock clock(absl::FromUnixSeconds(0));
  MigrationGovernor g(clock, {.min_gain = 10,
                              .cooldown = absl::Hours(1),
                              .budget = 2,
                              .budget_interval = absl::Minutes(10)});
  absl::Status low = g.Admit({.workload = "w1", .trigger = MoveTrigger::kOverload, .gain = 5});
  CHECK(absl::IsFailedPrecondition(low));
  CHECK(low.message().find("below min_gain") != std::string::npos);
  CHECK(g.Admit({.workload = "w1", .trigger = MoveTrigger::kOverload, .gain = 20}).ok());
  absl::Status again = g.Admit({.workload = "w1", .trigger = MoveTrigger::kBetterPlacement,
                                .gain = 50});
  CHECK(again.message().find("cooldown") != std::string::npos);
  CHECK(g.Admit({.workload = "w2", .trigger = MoveTrigger::kOverload, .gain = 20}).ok());
  absl::Status spent = g.Admit({.workload = "w3", .trigger = MoveTrigger::kOverload, .gain = 20});
  CHECK(spent.message().find("budget") != std::string::npos);
  // A failure goes ahead regardless, and does not use the budget.
  CHECK(g.Admit({.workload = "w1", .trigger = MoveTrigger::kFailure}).ok());
  CHECK(g.Admit({.workload = "w4", .trigger = MoveTrigger::kFailure}).ok());
  // Failback needs no gain but waits for the budget and the cooldown of a
  // move for load; a failure's forced move starts no cooldown.
  CHECK(g.Admit({.workload = "w4", .trigger = MoveTrigger::kFailback}).message().find("budget") !=
        std::string::npos);
  clock.Advance(absl::Minutes(10));
  CHECK(g.Admit({.workload = "w4", .trigger = MoveTrigger::kFailback}).ok());
  CHECK_FALSE(g.Admit({.workload = "w1", .trigger = MoveTrigger::kFailback}).ok());
  clock.Advance(absl::Hours(1));
  CHECK(g.Admit({.workload = "w1", .trigger = MoveTrigger::kFailback}).ok());
  CHECK(g.admitted() == 6);
}

}  // namespace
}  // namespace codeco::swm
