// LocalRescheduler: what an MC swm decides on its own while the hub is away,
// on an injected clock.
#include "swm/core/local_rescheduler.h"

#include <catch2/catch.hpp>

namespace codeco::swm {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

Node NodeOf(const std::string& name, int64_t cpu, int64_t used, bool ready = true) {
  return Node{
      .name = name, .capacity = {cpu, 8 * kGi, 0}, .allocated = {used, 0, 0}, .schedulable = ready};
}

LocalPod PodOf(const std::string& pod, const std::string& node, int64_t cpu,
               bool stateful = false) {
  return LocalPod{.reservation = "app/1/c",
                  .application = "app",
                  .workload = pod,
                  .pod = "app-" + pod,
                  .node = node,
                  .requests = {cpu, kGi, 0},
                  .stateful = stateful};
}

TEST_CASE("a cluster moves nothing on its own while the hub answers") {
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  LocalRescheduler local(clock,
                         {.hub_away_after = absl::Seconds(15), .failure_grace = absl::Seconds(30)});
  const std::vector<LocalPod> pods = {PodOf("web-0", "n-0", 500)};
  std::vector<Node> nodes = {NodeOf("n-0", 2000, 500, /*ready=*/false), NodeOf("n-1", 2000, 0)};
  CHECK(local.Decide(nodes, pods).empty());  // n-0 seen failed now
  for (int i = 0; i < 10; ++i) {
    clock.Advance(absl::Seconds(10));
    local.HubSeen();
    CHECK_FALSE(local.HubAway());
    CHECK(local.Decide(nodes, pods).empty());
  }
}

TEST_CASE("with the hub away a failed node's pods move to the ready node with most room") {
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  LocalRescheduler local(clock,
                         {.hub_away_after = absl::Seconds(15), .failure_grace = absl::Seconds(30)});
  const std::vector<LocalPod> pods = {PodOf("web-0", "n-0", 500), PodOf("web-1", "n-0", 1500),
                                      PodOf("db-0", "n-0", 500, /*stateful=*/true),
                                      PodOf("web-2", "n-1", 500)};
  std::vector<Node> nodes = {NodeOf("n-0", 2000, 0, /*ready=*/false), NodeOf("n-1", 2000, 500),
                             NodeOf("n-2", 2000, 200)};
  CHECK(local.Decide(nodes, pods).empty());
  // The hub went silent at the start; the node has failed for 20 s: not yet.
  clock.Advance(absl::Seconds(20));
  CHECK(local.HubAway());
  CHECK(local.Decide(nodes, pods).empty());
  clock.Advance(absl::Seconds(10));
  std::vector<LocalMove> moves = local.Decide(nodes, pods);
  REQUIRE(moves.size() == 3);
  // Largest first: web-1 (1500m) to n-2 (1800m free), then web-0 (500m) to
  // n-1 (1500m free, against 300m left on n-2).
  CHECK(moves[0].pod.pod == "app-web-1");
  CHECK(moves[0].to_node == "n-2");
  CHECK(moves[1].pod.pod == "app-db-0");
  CHECK(moves[1].to_node.empty());
  CHECK_THAT(moves[1].reason, Catch::Contains("keeps state"));
  CHECK(moves[2].pod.pod == "app-web-0");
  CHECK(moves[2].to_node == "n-1");
  CHECK_THAT(moves[2].reason, Catch::Contains("node n-0 not ready for 30s"));
  CHECK_THAT(moves[2].reason, Catch::Contains("hub is away"));

  // The hub answers again: the cluster leaves failures to it.
  local.HubSeen();
  CHECK(local.Decide(nodes, pods).empty());
}

TEST_CASE("a pod no ready node has room for is held and moves once room frees") {
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  LocalRescheduler local(clock,
                         {.hub_away_after = absl::Seconds(5), .failure_grace = absl::Seconds(5)});
  const std::vector<LocalPod> pods = {PodOf("web-0", "n-0", 1500)};
  std::vector<Node> nodes = {NodeOf("n-0", 2000, 0, /*ready=*/false), NodeOf("n-1", 2000, 1000)};
  CHECK(local.Decide(nodes, pods).empty());
  clock.Advance(absl::Seconds(6));
  std::vector<LocalMove> moves = local.Decide(nodes, pods);
  REQUIRE(moves.size() == 1);
  CHECK(moves[0].to_node.empty());
  CHECK_THAT(moves[0].reason, Catch::Contains("no ready node of the cluster has room"));
  nodes[1].allocated.cpu_millis = 0;
  moves = local.Decide(nodes, pods);
  REQUIRE(moves.size() == 1);
  CHECK(moves[0].to_node == "n-1");
}

TEST_CASE("a node gone from the cluster counts as failed from when it was first missed") {
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  LocalRescheduler local(clock,
                         {.hub_away_after = absl::Seconds(5), .failure_grace = absl::Seconds(10)});
  const std::vector<LocalPod> pods = {PodOf("web-0", "n-0", 500)};
  const std::vector<Node> nodes = {NodeOf("n-1", 2000, 0)};
  CHECK(local.Decide(nodes, pods).empty());
  clock.Advance(absl::Seconds(9));
  CHECK(local.Decide(nodes, pods).empty());
  clock.Advance(absl::Seconds(1));
  std::vector<LocalMove> moves = local.Decide(nodes, pods);
  REQUIRE(moves.size() == 1);
  CHECK(moves[0].to_node == "n-1");
  CHECK_THAT(moves[0].reason, Catch::Contains("node n-0 gone"));
  // A node back before its grace restarts its count.
  const std::vector<Node> back = {NodeOf("n-0", 2000, 0), NodeOf("n-1", 2000, 0)};
  CHECK(local.Decide(back, pods).empty());
  clock.Advance(absl::Seconds(1));
  CHECK(local.Decide(nodes, pods).empty());
}

TEST_CASE("local rescheduler options must be positive") {
  CHECK(ValidateLocalReschedulerOptions({}).ok());
  absl::Status st = ValidateLocalReschedulerOptions({.hub_away_after = absl::ZeroDuration()});
  CHECK_THAT(std::string(st.message()), Catch::Contains("hub_away_after"));
  st = ValidateLocalReschedulerOptions({.failure_grace = -absl::Seconds(1)});
  CHECK_THAT(std::string(st.message()), Catch::Contains("failure_grace"));
}

}  // namespace
}  // namespace codeco::swm
