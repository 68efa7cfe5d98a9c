// The cloud provisioner and cluster autoscaler's decisions: sizing for the
// pending pods (mck8s's total over node size against codeco's packing),
// headroom ahead of a growing demand, and the delays of scale-in and
// deprovisioning.
#include <catch2/catch.hpp>

#include "codeco/common/clock.h"
#include "swm/core/cloud_autoscaler.h"

namespace codeco::swm {
namespace {

constexpr int64_t kGi = int64_t{1} << 30;

Resources Cpu(int64_t millis, int64_t memory = kGi) { return Resources{millis, memory, 0}; }

CloudAutoscalerOptions Options(CloudScalingPolicy policy) {
  return CloudAutoscalerOptions{.policy = policy, .node_capacity = Cpu(4000, 16 * kGi)};
}

TEST_CASE("options are checked field by field") {
  CHECK(ValidateCloudAutoscalerOptions(Options(CloudScalingPolicy::kPacked)).ok());
  CloudAutoscalerOptions o = Options(CloudScalingPolicy::kPacked);
  o.node_capacity.cpu_millis = 0;
  CHECK(ValidateCloudAutoscalerOptions(o).message().find("cloud.node_capacity.cpu") !=
        std::string::npos);
  o = Options(CloudScalingPolicy::kPacked);
  o.max_nodes = 0;
  CHECK(ValidateCloudAutoscalerOptions(o).message().find("cloud.max_nodes") != std::string::npos);
  o = Options(CloudScalingPolicy::kPacked);
  o.demand_window = absl::ZeroDuration();
  CHECK(absl::IsInvalidArgument(ValidateCloudAutoscalerOptions(o)));
  CHECK(ParseCloudScalingPolicy("mck8s", "f").value() == CloudScalingPolicy::kMck8s);
  CHECK(ParseCloudScalingPolicy("codeco", "f").value() == CloudScalingPolicy::kPacked);
  absl::StatusOr<CloudScalingPolicy> bad = ParseCloudScalingPolicy("greedy", "cloud.policy");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("cloud.policy") != std::string::npos);
}

TEST_CASE("nothing pending and no cloud: nothing to do") {
  SimulatedClock clock(absl::FromUnixSeconds(0));
  CloudAutoscaler autoscaler(clock, Options(CloudScalingPolicy::kPacked));
  CloudScaling s = autoscaler.Decide({.fixed_capacity = Cpu(10000), .fixed_allocated = Cpu(2000)});
  CHECK(s.Empty());
}

TEST_CASE("mck8s sizes by the total and codeco by packing") {
  // Five pods of 1.5 CPUs (7.5 CPUs in all) on nodes of 4 CPUs: mck8s orders
  // 2 nodes, which hold only four of them (two per node); codeco orders the
  // 3 they need.
  SimulatedClock clock(absl::FromUnixSeconds(0));
  const std::vector<Resources> pending(5, Cpu(1500));
  CloudAutoscaler mck8s(clock, Options(CloudScalingPolicy::kMck8s));
  CloudAutoscaler packed(clock, Options(CloudScalingPolicy::kPacked));
  CloudObservation o{.pending = pending, .fixed_capacity = Cpu(10000), .fixed_allocated = Cpu(10000)};
  CloudScaling a = mck8s.Decide(o);
  CloudScaling b = packed.Decide(o);
  CHECK(a.create_cluster);
  CHECK(a.add_nodes == 2);
  CHECK(b.create_cluster);
  CHECK(b.add_nodes == 3);
  CHECK(b.reason.find("5 pods pending") != std::string::npos);
}

TEST_CASE("nodes on their way count and the cluster is not ordered twice") {
  SimulatedClock clock(absl::FromUnixSeconds(0));
  for (CloudScalingPolicy policy : {CloudScalingPolicy::kMck8s, CloudScalingPolicy::kPacked}) {
    CloudAutoscaler autoscaler(clock, Options(policy));
    CloudObservation o{.cluster_exists = true,
                       .nodes = {{.name = "c-1", .ready = false}},
                       .pending = {Cpu(1000), Cpu(2000)},
                       .fixed_capacity = Cpu(10000),
                       .fixed_allocated = Cpu(10000)};
    CHECK(autoscaler.Decide(o).Empty());
    // One more pod than the booting node holds: one node more, no new cluster.
    o.pending.push_back(Cpu(2000));
    CloudScaling s = autoscaler.Decide(o);
    CHECK_FALSE(s.create_cluster);
    CHECK(s.add_nodes == 1);
  }
}

TEST_CASE("pods larger than a cloud node order nothing and say so") {
  SimulatedClock clock(absl::FromUnixSeconds(0));
  CloudAutoscaler autoscaler(clock, Options(CloudScalingPolicy::kPacked));
  CloudScaling s = autoscaler.Decide({.pending = {Cpu(8000)}});
  CHECK(s.Empty());
  CHECK(s.reason == "1 pending pod is larger than a cloud node");
}

TEST_CASE("the cloud never grows past max_nodes") {
  SimulatedClock clock(absl::FromUnixSeconds(0));
  CloudAutoscalerOptions options = Options(CloudScalingPolicy::kPacked);
  options.max_nodes = 2;
  CloudAutoscaler autoscaler(clock, options);
  CloudScaling s = autoscaler.Decide({.pending = std::vector<Resources>(10, Cpu(4000))});
  CHECK(s.add_nodes == 2);
  s = autoscaler.Decide({.cluster_exists = true,
                         .nodes = {{.name = "c-1"}, {.name = "c-2"}},
                         .pending = std::vector<Resources>(8, Cpu(4000))});
  CHECK(s.add_nodes == 0);
  CHECK(s.reason.find("at its 2 nodes") != std::string::npos);
}

TEST_CASE("codeco provisions ahead of a growing demand and mck8s waits for pending pods") {
  // The fixed clusters fill at 2 CPUs a minute and have 1 CPU free. With no
  // cloud cluster yet, a node ordered now is Ready in 5 minutes, when 10 CPUs
  // more will have come: codeco orders the 3 nodes the 9 that do not fit
  // need, before anything is pending. Once the cluster runs, an added node
  // boots in 2 minutes (4 CPUs, 3 beyond the fixed room), which an empty
  // node of 4 CPUs already covers.
  SimulatedClock clock(absl::FromUnixSeconds(0));
  CloudAutoscalerOptions options = Options(CloudScalingPolicy::kPacked);
  options.fixed_fill_limit = 1.0;
  options.demand_window = absl::Minutes(2);
  CloudAutoscaler mck8s(clock, Options(CloudScalingPolicy::kMck8s));
  CloudAutoscaler packed(clock, options);
  CloudAutoscaler running(clock, options);
  CloudObservation o{.fixed_capacity = Cpu(20000), .fixed_allocated = Cpu(15000)};
  CloudObservation with_cluster = o;
  with_cluster.cluster_exists = true;
  with_cluster.nodes = {{.name = "c-1", .ready = true}};
  CHECK(packed.Decide(o).Empty());
  CHECK(mck8s.Decide(o).Empty());
  CHECK(running.Decide(with_cluster).Empty());
  clock.Advance(absl::Minutes(2));
  o.fixed_allocated = with_cluster.fixed_allocated = Cpu(19000);
  CloudScaling ahead = packed.Decide(o);
  CHECK(ahead.create_cluster);
  CHECK(ahead.add_nodes == 3);
  CHECK(ahead.reason.find("demand grows") != std::string::npos);
  CHECK(mck8s.Decide(o).Empty());
  CHECK(running.Decide(with_cluster).Empty());
  // A steady demand needs no headroom.
  clock.Advance(absl::Minutes(10));
  CHECK(packed.Decide(o).Empty());
}

TEST_CASE("codeco counts the fixed clusters full at their fill limit") {
  // 90 % of 20 CPUs is 18: at 18 CPUs allocated and growing 1 CPU a minute,
  // the 5 CPUs of the next 5 minutes all go to the cloud (2 nodes of 4).
  SimulatedClock clock(absl::FromUnixSeconds(0));
  CloudAutoscalerOptions options = Options(CloudScalingPolicy::kPacked);
  options.demand_window = absl::Minutes(1);
  CloudAutoscaler packed(clock, options);
  CloudObservation o{.fixed_capacity = Cpu(20000), .fixed_allocated = Cpu(17000)};
  CHECK(packed.Decide(o).Empty());
  clock.Advance(absl::Minutes(1));
  o.fixed_allocated = Cpu(18000);
  CHECK(packed.Decide(o).add_nodes == 2);
  CloudAutoscalerOptions bad = Options(CloudScalingPolicy::kPacked);
  bad.fixed_fill_limit = 0;
  CHECK(ValidateCloudAutoscalerOptions(bad).message().find("cloud.fixed_fill_limit") !=
        std::string::npos);
}

TEST_CASE("an empty node goes after the scale-down delay and the idle cluster after its own") {
  SimulatedClock clock(absl::FromUnixSeconds(0));
  for (CloudScalingPolicy policy : {CloudScalingPolicy::kMck8s, CloudScalingPolicy::kPacked}) {
    CloudAutoscaler autoscaler(clock, Options(policy));
    CloudObservation o{.cluster_exists = true,
                       .nodes = {{.name = "c-1", .allocated = Cpu(1000), .pods = 1, .ready = true},
                                 {.name = "c-2", .ready = true},
                                 {.name = "c-3", .ready = true}},
                       .fixed_capacity = Cpu(20000),
                       .fixed_allocated = Cpu(20000)};
    CHECK(autoscaler.Decide(o).Empty());
    clock.Advance(absl::Minutes(9));
    CHECK(autoscaler.Decide(o).Empty());
    clock.Advance(absl::Minutes(1));
    CloudScaling s = autoscaler.Decide(o);
    CHECK(s.remove_nodes == std::vector<std::string>{"c-2", "c-3"});
    CHECK_FALSE(s.delete_cluster);
    // The last pod ends: the one node left stays until the cluster has been
    // idle for the deprovision delay.
    o.nodes = {{.name = "c-1", .ready = true}};
    CHECK(autoscaler.Decide(o).Empty());
    clock.Advance(absl::Minutes(19));
    CHECK(autoscaler.Decide(o).Empty());
    // A pod comes and goes: the idle time starts over.
    o.nodes[0].pods = 1;
    CHECK(autoscaler.Decide(o).Empty());
    o.nodes[0].pods = 0;
    CHECK(autoscaler.Decide(o).Empty());
    clock.Advance(absl::Minutes(20));
    s = autoscaler.Decide(o);
    CHECK(s.delete_cluster);
    CHECK(s.reason.find("idle for") != std::string::npos);
  }
}

TEST_CASE("a burst is not a rate: the growth is measured over the whole window") {
  // 8 CPUs arrive within 10 s of the start: over the 5-minute window that is
  // 1.6 CPUs a minute, 8 CPUs within the 5-minute provisioning (two nodes),
  // not 48 CPUs a minute.
  SimulatedClock clock(absl::FromUnixSeconds(0));
  CloudAutoscaler packed(clock, Options(CloudScalingPolicy::kPacked));
  CloudObservation o{.fixed_capacity = Cpu(10000), .fixed_allocated = Cpu(9000)};
  CHECK(packed.Decide(o).Empty());
  clock.Advance(absl::Seconds(10));
  o.fixed_allocated = Cpu(10000);
  o.pending = std::vector<Resources>(7, Cpu(1000));
  CloudScaling s = packed.Decide(o);
  // The 7 pending CPUs take 2 nodes and leave 1 CPU; the headroom (8 CPUs
  // expected, none of it fits the fixed clusters) wants 7 more: 2 nodes more.
  CHECK(s.add_nodes == 4);
}

TEST_CASE("codeco keeps the empty nodes its headroom needs") {
  SimulatedClock clock(absl::FromUnixSeconds(0));
  CloudAutoscaler autoscaler(clock, Options(CloudScalingPolicy::kPacked));
  // Demand grows 1 CPU a minute with the fixed clusters full: 2 CPUs of
  // headroom, one empty node of 4.
  CloudObservation o{.cluster_exists = true,
                     .nodes = {{.name = "c-1", .allocated = Cpu(4000), .pods = 2, .ready = true},
                               {.name = "c-2", .ready = true}},
                     .fixed_capacity = Cpu(20000),
                     .fixed_allocated = Cpu(20000)};
  for (int minute = 0; minute <= 11; ++minute) {
    // The fixed clusters grow with the demand and stay full, so nothing pends.
    o.fixed_capacity = Cpu(20000 + minute * 1000);
    o.fixed_allocated = Cpu(20000 + minute * 1000);
    CloudScaling s = autoscaler.Decide(o);
    CHECK(s.remove_nodes.empty());
    CHECK_FALSE(s.delete_cluster);
    clock.Advance(absl::Minutes(1));
  }
}

}  // namespace
}  // namespace codeco::swm
