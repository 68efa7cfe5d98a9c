// ChannelTracker: each channel's CODECO lifecycle from its plan and NetMA's
// virtual links, the out-of-QoS grace period, triggers, and what watchers get.
#include "swm/core/channel_status.h"

#include <catch2/catch.hpp>
#include <optional>

#include "google/protobuf/util/time_util.h"

namespace codeco::swm {
namespace {

namespace pb = codeco::swm::v1;
namespace acm = codeco::acm::v1;
namespace netma = codeco::netma::v1;
using google::protobuf::util::TimeUtil;

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

google::protobuf::Timestamp At(absl::Duration after) {
  return TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(kT0 + after));
}

// "shop" placed: a channel eu -> us with virtual link vl-1 and one inside eu.
pb::AssignmentPlan Placed(pb::PlanPhase phase = pb::PLAN_PHASE_DONE) {
  pb::AssignmentPlan plan;
  plan.set_id("shop/3");
  plan.set_application("shop");
  plan.set_plan_revision(3);
  plan.set_phase(phase);
  plan.add_targets()->set_pod("shop-front-0");
  pb::ChannelPath* inter = plan.add_channels();
  inter->set_channel("front-back");
  inter->add_clusters("eu");
  inter->add_clusters("us");
  inter->set_expected_latency_ns(10'000'000);
  inter->set_max_delay_ns(20'000'000);
  inter->set_satisfied(true);
  if (phase == pb::PLAN_PHASE_DONE) inter->set_virtual_link_id("vl-1");
  pb::ChannelPath* intra = plan.add_channels();
  intra->set_channel("front-cache");
  intra->add_clusters("eu");
  intra->set_expected_latency_ns(100'000);
  intra->set_satisfied(true);
  return plan;
}

netma::VirtualLink Link(netma::VirtualLinkPhase phase, absl::Duration measured_at,
                        std::optional<absl::Duration> since = std::nullopt) {
  netma::VirtualLink l;
  l.set_id("vl-1");
  l.set_application("shop");
  l.set_channel("front-back");
  l.set_phase(phase);
  l.set_message(phase == netma::VIRTUAL_LINK_PHASE_UP ? "within bounds"
                                                      : "delay 35000000 ns exceeds 20000000 ns");
  l.set_measured_delay_ns(phase == netma::VIRTUAL_LINK_PHASE_UP ? 9'000'000 : 35'000'000);
  *l.mutable_measure_time() = At(measured_at);
  if (since.has_value()) *l.mutable_out_of_bounds_since() = At(*since);
  return l;
}

std::map<std::string, acm::ChannelStatus> Channels(const ChannelTracker& tracker) {
  std::map<std::string, acm::ChannelStatus> out;
  for (const auto& app : tracker.ChangesAfter(0, "shop")) {
    for (const auto& c : app.channels()) out[c.name()] = c;
  }
  return out;
}

TEST_CASE("channels follow the lifecycle from the plan and the virtual link", "[channels]") {
  ChannelTracker tracker;
  REQUIRE(tracker.SetPlan(Placed(pb::PLAN_PHASE_COMMITTING), kT0));
  CHECK(Channels(tracker)["front-back"].phase() == acm::CHANNEL_PHASE_IMPLEMENTING);
  CHECK(Channels(tracker)["front-cache"].phase() == acm::CHANNEL_PHASE_REVIEWED);
  CHECK_FALSE(tracker.FollowsLinks());

  REQUIRE(tracker.SetPlan(Placed(), kT0));
  CHECK(tracker.FollowsLinks());
  CHECK(Channels(tracker)["front-back"].phase() == acm::CHANNEL_PHASE_IMPLEMENTING);
  CHECK(Channels(tracker)["front-back"].virtual_link_id() == "vl-1");
  CHECK(Channels(tracker)["front-cache"].phase() == acm::CHANNEL_PHASE_RUNNING);

  CHECK(tracker.ApplyLinks({Link(netma::VIRTUAL_LINK_PHASE_ESTABLISHING, absl::ZeroDuration())},
                           kT0) == 1);
  CHECK(Channels(tracker)["front-back"].phase() == acm::CHANNEL_PHASE_IMPLEMENTED);
  CHECK(tracker.ApplyLinks({Link(netma::VIRTUAL_LINK_PHASE_UP, absl::Seconds(5))}, kT0) == 1);
  CHECK(Channels(tracker)["front-back"].phase() == acm::CHANNEL_PHASE_RUNNING);
  CHECK(Channels(tracker)["front-back"].delay_ns() == 9'000'000);
  // The same links again change nothing.
  CHECK(tracker.ApplyLinks({Link(netma::VIRTUAL_LINK_PHASE_UP, absl::Seconds(5))}, kT0) == 0);
  CHECK(tracker.CountByPhase()[acm::CHANNEL_PHASE_RUNNING] == 2);

  // A link NetMA no longer lists: being set up again, as far as anyone knows.
  CHECK(tracker.ApplyLinks({}, kT0) == 1);
  CHECK(Channels(tracker)["front-back"].phase() == acm::CHANNEL_PHASE_IMPLEMENTING);
}

TEST_CASE("a channel is OOQOS only once its link stays out of bounds for the grace period",
          "[channels]") {
  ChannelTracker tracker(ChannelTrackerOptions{.grace = absl::Seconds(4)});
  tracker.SetPlan(Placed(), kT0);
  tracker.ApplyLinks({Link(netma::VIRTUAL_LINK_PHASE_UP, absl::Seconds(5))}, kT0);
  const int64_t before = tracker.sequence();
  // One probe over the bound: a blip, not yet out of QoS.
  tracker.ApplyLinks({Link(netma::VIRTUAL_LINK_PHASE_DEGRADED, absl::Seconds(10),
                           absl::Seconds(10))},
                     kT0 + absl::Seconds(11));
  CHECK(Channels(tracker)["front-back"].phase() == acm::CHANNEL_PHASE_RUNNING);
  CHECK_THAT(Channels(tracker)["front-back"].message(), Catch::Contains("grace"));
  CHECK(tracker.triggers_raised() == 0);
  CHECK(tracker.OutOfQos().empty());
  // The next probe, 5 s later, still over: OOQOS, and one trigger.
  tracker.ApplyLinks({Link(netma::VIRTUAL_LINK_PHASE_DEGRADED, absl::Seconds(15),
                           absl::Seconds(10))},
                     kT0 + absl::Seconds(16));
  acm::ChannelStatus c = Channels(tracker)["front-back"];
  CHECK(c.phase() == acm::CHANNEL_PHASE_OOQOS);
  CHECK_THAT(c.message(), Catch::Contains("exceeds") && Catch::Contains("adaptation triggered"));
  CHECK(c.delay_ns() == 35'000'000);
  CHECK(tracker.triggers_raised() == 1);
  std::vector<pb::ApplicationChannels> changes = tracker.ChangesAfter(before, "");
  REQUIRE(changes.size() == 1);
  REQUIRE(changes.back().triggers_size() == 1);
  const pb::ChannelTrigger& t = changes.back().triggers(0);
  CHECK(t.channel() == "front-back");
  CHECK(t.reason() == pb::MIGRATION_REASON_LINK_FAILURE);
  CHECK(t.virtual_link_id() == "vl-1");
  CHECK(t.max_delay_ns() == 20'000'000);
  CHECK(t.out_of_bounds_since().seconds() == At(absl::Seconds(10)).seconds());
  CHECK(tracker.CountByPhase()[acm::CHANNEL_PHASE_OOQOS] == 1);
  // The adaptation loop's view: which channel, under which plan.
  std::vector<OutOfQosChannel> out = tracker.OutOfQos();
  REQUIRE(out.size() == 1);
  CHECK(out[0].application == "shop");
  CHECK(out[0].channel == "front-back");
  CHECK(out[0].plan_revision == 3);
  CHECK_THAT(out[0].why, Catch::Contains("exceeds"));
  // Still out of bounds: no second trigger. A watcher past it sees none.
  tracker.ApplyLinks({Link(netma::VIRTUAL_LINK_PHASE_DEGRADED, absl::Seconds(20),
                           absl::Seconds(10))},
                     kT0 + absl::Seconds(21));
  CHECK(tracker.triggers_raised() == 1);
  const int64_t seen = tracker.sequence();
  // Back within bounds: RUNNING again.
  tracker.ApplyLinks({Link(netma::VIRTUAL_LINK_PHASE_UP, absl::Seconds(25))},
                     kT0 + absl::Seconds(26));
  CHECK(Channels(tracker)["front-back"].phase() == acm::CHANNEL_PHASE_RUNNING);
  CHECK(tracker.OutOfQos().empty());
  changes = tracker.ChangesAfter(seen, "");
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].triggers_size() == 0);
  // A link that fails is out of QoS at once (NetMA counted its failed probes).
  tracker.ApplyLinks({Link(netma::VIRTUAL_LINK_PHASE_FAILED, absl::Seconds(30),
                           absl::Seconds(30))},
                     kT0 + absl::Seconds(31));
  CHECK(Channels(tracker)["front-back"].phase() == acm::CHANNEL_PHASE_OOQOS);
  CHECK(tracker.triggers_raised() == 2);
}

TEST_CASE("removed and failed placements end their channels", "[channels]") {
  ChannelTracker tracker;
  tracker.SetPlan(Placed(), kT0);
  pb::AssignmentPlan removal;
  removal.set_id("shop/4");
  removal.set_application("shop");
  removal.set_plan_revision(4);
  removal.set_phase(pb::PLAN_PHASE_DONE);
  removal.add_actions()->set_type(pb::ACTION_TYPE_DELETE_POD);
  REQUIRE(tracker.SetPlan(removal, kT0));
  std::vector<pb::ApplicationChannels> all = tracker.ChangesAfter(0, "");
  REQUIRE(all.size() == 1);
  CHECK(all[0].plan_revision() == 0);
  for (const auto& c : all[0].channels()) CHECK(c.phase() == acm::CHANNEL_PHASE_DELETED);
  CHECK(tracker.CountByPhase().empty());
  CHECK_FALSE(tracker.FollowsLinks());

  pb::AssignmentPlan failed = Placed(pb::PLAN_PHASE_ROLLED_BACK);
  failed.mutable_error()->set_message("virtual link for channel front-back: refused");
  tracker.SetPlan(failed, kT0);
  CHECK(Channels(tracker)["front-back"].phase() == acm::CHANNEL_PHASE_REJECTED);
  CHECK_THAT(Channels(tracker)["front-back"].message(), Catch::Contains("refused"));

  // Applications without channels cost nothing.
  pb::AssignmentPlan plain;
  plain.set_application("plain");
  plain.set_phase(pb::PLAN_PHASE_DONE);
  CHECK_FALSE(tracker.SetPlan(plain, kT0));
  CHECK(tracker.ChangesAfter(0, "plain").empty());
}

TEST_CASE("watchers learn where a done plan runs its workloads", "[channels]") {
  ChannelTracker tracker;
  auto plan = [](int64_t revision, pb::PlanPhase phase, const std::string& cluster) {
    pb::AssignmentPlan p;
    p.set_id("cache/" + std::to_string(revision));
    p.set_application("cache");
    p.set_spec_revision(2);
    p.set_plan_revision(revision);
    p.set_phase(phase);
    pb::WorkloadTarget* t = p.add_targets();
    t->set_workload("redis");
    t->set_service("redis");
    t->set_cluster(cluster);
    t->set_node("n1");
    t->set_pod("cache-redis-r" + std::to_string(revision));
    t->set_reservation("cache/1/" + cluster);
    return p;
  };
  // No channels: tracked for its placements alone, once the plan is DONE.
  REQUIRE(tracker.SetPlan(plan(1, pb::PLAN_PHASE_COMMITTING, "nantes"), kT0));
  std::vector<pb::ApplicationChannels> seen = tracker.ChangesAfter(0, "cache");
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].placements().empty());
  REQUIRE(tracker.SetPlan(plan(1, pb::PLAN_PHASE_DONE, "nantes"), kT0));
  seen = tracker.ChangesAfter(0, "cache");
  REQUIRE(seen[0].placements_size() == 1);
  CHECK(seen[0].spec_revision() == 2);
  CHECK(seen[0].placements(0).cluster() == "nantes");
  CHECK(seen[0].channels().empty());
  const int64_t before = tracker.sequence();

  // A migration's plan moves the workload (it creates the moved pod and
  // deletes the source: not a removal): one change, with the new place.
  pb::AssignmentPlan moved = plan(2, pb::PLAN_PHASE_DONE, "lille");
  moved.add_actions()->set_type(pb::ACTION_TYPE_CREATE_POD);
  moved.add_actions()->set_type(pb::ACTION_TYPE_DELETE_POD);
  REQUIRE(tracker.SetPlan(moved, kT0));
  seen = tracker.ChangesAfter(before, "");
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].plan_revision() == 2);
  CHECK(seen[0].placements(0).cluster() == "lille");
  CHECK(seen[0].placements(0).pod() == "cache-redis-r2");
  CHECK(seen[0].placements(0).workload() == "redis");  // the slot a job's next pod takes
  // The same plan again is no change.
  CHECK_FALSE(tracker.SetPlan(moved, kT0));

  // A failed plan places nothing.
  REQUIRE(tracker.SetPlan(plan(3, pb::PLAN_PHASE_FAILED, "lille"), kT0));
  CHECK(tracker.ChangesAfter(0, "cache")[0].placements().empty());
}

TEST_CASE("removed applications are remembered up to a bound", "[channels]") {
  ChannelTracker tracker(ChannelTrackerOptions{.max_removed = 3});
  for (int i = 0; i < 10; ++i) {
    pb::AssignmentPlan plan = Placed();
    plan.set_application("app-" + std::to_string(i));
    tracker.SetPlan(plan, kT0);
    plan.clear_channels();
    plan.clear_targets();  // a removal done holds no pod
    plan.add_actions()->set_type(pb::ACTION_TYPE_DELETE_POD);
    tracker.SetPlan(plan, kT0);
  }
  CHECK(tracker.ChangesAfter(0, "").size() == 3);
}

}  // namespace
}  // namespace codeco::swm
