// The recorder samples a federation into CSV text: headers once, then rows
// that follow pod phases, node usage and energy, and link conditions.
#include "recorder.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "codeco/common/clock.h"

namespace codeco::codef {
namespace {

constexpr char kScenario[] = R"(
name: rec
federation:
  hub: {name: hub}
  clusters:
    - name: a
      pod_start_delay: 1s
      nodes: [{name: n, capacity: {cpu: 2, memory: 1Gi}, energy: {idle_watts: 10, max_watts: 30}}]
links:
  matrix:
    - {between: [hub, a], rtt: 8ms, bandwidth: 1Gbps}
record:
  metrics: [node_usage, node_energy, pod_phases, pending_pods, link_conditions, placement]
)";

TEST_CASE("the recorder writes headers once and rows per sample") {
  SimulatedClock clock(absl::FromUnixSeconds(5000));
  InMemoryLinkControl links;
  InMemoryCheckpointArchiveStore archives;
  auto scenario = ParseScenario(kScenario, "");
  REQUIRE(scenario.ok());
  auto federation = Federation::Create(*scenario, clock, &links, &archives, nullptr);
  REQUIRE(federation.ok());
  Recorder recorder(scenario->record, federation->get());
  absl::Time start = clock.Now();

  codeco::lms::v1::Pod pod;
  pod.set_name("web");
  pod.set_node_name("n");
  auto* c = pod.add_containers();
  c->set_name("main");
  c->mutable_requests()->set_cpu_millicores(1000);
  c->mutable_requests()->set_memory_bytes(1 << 20);
  auto* lms = (*federation)->FindLms("a");
  REQUIRE(lms->Run([&](EmulatedCluster& e) { return e.CreatePod(pod, ""); }).ok());

  auto first = recorder.Sample(clock.Now(), start);
  REQUIRE(first.size() == 6);
  REQUIRE(first["pod_phases.csv"] ==
          "time_s,cluster,pending,running,succeeded,failed\n0.000,a,1,0,0,0\n");
  REQUIRE(first["pending_pods.csv"] ==
          "time_s,pending,unplaced,placed,unplaced_cpu_millicores,placed_cpu_millicores\n"
          "0.000,1,0,1,0,1000\n");
  REQUIRE(first["node_energy.csv"] == "time_s,cluster,node,watts\n0.000,a,n,10.00\n");
  REQUIRE(absl::StrContains(first["link_conditions.csv"], "0.000,hub,a,4000000,1000000000,"));
  REQUIRE(absl::StrContains(first["placement.csv"], "0.000,a,n,web,Pending\n"));

  clock.Advance(absl::Seconds(10));
  auto second = recorder.Sample(clock.Now(), start);
  REQUIRE(second["pod_phases.csv"] == "10.000,a,0,1,0,0\n");
  REQUIRE(second["node_usage.csv"] == "10.000,a,n,1000,1048576,0.5000,1000,2000\n");
  REQUIRE(second["node_energy.csv"] == "10.000,a,n,20.00\n");
  REQUIRE(second["pending_pods.csv"] == "10.000,0,0,1,0,1000\n");

  // Pods a scheduler still holds count as pending and unplaced.
  auto third = recorder.Sample(clock.Now(), start, UnplacedPods{.count = 2, .cpu_millicores = 700});
  REQUIRE(third["pending_pods.csv"] == "10.000,2,2,1,700,1000\n");
}

}  // namespace
}  // namespace codeco::codef
