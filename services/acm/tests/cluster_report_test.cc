#include <catch2/catch.hpp>

#include "acm/core/cluster_report.h"

namespace codeco::acm {
namespace {

lms::v1::Node MakeNode(const std::string& name, int64_t cpu, int64_t used_cpu, bool ready,
                       std::map<std::string, std::string> labels) {
  lms::v1::Node node;
  node.set_name(name);
  node.mutable_allocatable()->set_cpu_millicores(cpu);
  node.mutable_allocatable()->set_memory_bytes(cpu * 1'000'000);
  node.mutable_requested()->set_cpu_millicores(used_cpu);
  node.mutable_energy_profile()->set_idle_watts(10);
  node.mutable_energy_profile()->set_max_watts(30);
  node.set_condition(ready ? lms::v1::NODE_CONDITION_READY : lms::v1::NODE_CONDITION_NOT_READY);
  for (auto& [k, v] : labels) (*node.mutable_labels())[k] = v;
  return node;
}

TEST_CASE("the cluster report sums ready nodes and reads codeco labels") {
  std::map<std::string, std::string> site = {{"codeco.io/region", "fr-west"},
                                             {"codeco.io/country", "FR"},
                                             {"codeco.io/tier", "far-edge"},
                                             {"codeco.io/compliance", "high,gdpr"}};
  auto report = BuildClusterReport({MakeNode("a", 4000, 1000, true, site),
                                    MakeNode("b", 2000, 2500, true, site),
                                    MakeNode("c", 8000, 0, false, site)});
  REQUIRE(report.labels.region() == "fr-west");
  REQUIRE(report.labels.country() == "FR");
  REQUIRE(report.labels.tier() == common::v1::TIER_FAR_EDGE);
  REQUIRE(report.capacity.node_count() == 3);
  REQUIRE(report.capacity.ready_node_count() == 2);
  REQUIRE(report.capacity.allocatable().cpu_millicores() == 6000);
  // Overcommitted node b counts as zero free, never negative.
  REQUIRE(report.capacity.free().cpu_millicores() == 3000);
  REQUIRE(report.capacity.largest_free_node().cpu_millicores() == 3000);
  REQUIRE(report.energy.idle_watts() == Approx(30));
  REQUIRE(report.cluster_labels.at("codeco.io/compliance") == "high,gdpr");
  REQUIRE_FALSE(report.cluster_labels.contains("codeco.io/security-class"));
}

TEST_CASE("a cluster-wide label needs every ready node to agree") {
  auto report = BuildClusterReport(
      {MakeNode("a", 1000, 0, true, {{"codeco.io/security-class", "high"}}),
       MakeNode("b", 1000, 0, true, {{"codeco.io/security-class", "low"}})});
  REQUIRE_FALSE(report.cluster_labels.contains("codeco.io/security-class"));
  REQUIRE(BuildClusterReport({}).capacity.node_count() == 0);
}

}  // namespace
}  // namespace codeco::acm

namespace codeco::acm {
namespace {

TEST_CASE("pod reports keep only the pods of placed applications with their phase") {
  std::vector<lms::v1::Pod> pods(3);
  pods[0].set_name("shop-web-1");
  pods[0].set_node_name("worker-2");
  pods[0].set_phase(lms::v1::POD_PHASE_FAILED);
  pods[0].set_message("OOMKilled");
  (*pods[0].mutable_labels())["codeco.io/application"] = "shop";
  (*pods[0].mutable_labels())["codeco.io/service"] = "web";
  pods[1].set_name("kube-proxy");  // not codeco's
  pods[2].set_name("shop-web-0");
  pods[2].set_node_name("worker-1");
  pods[2].set_phase(lms::v1::POD_PHASE_RUNNING);
  (*pods[2].mutable_labels())["codeco.io/application"] = "shop";
  (*pods[2].mutable_labels())["codeco.io/service"] = "web";
  std::vector<PodReport> reports = BuildPodReports(pods);
  REQUIRE(reports.size() == 2);
  REQUIRE(reports[0].pod == "shop-web-0");
  REQUIRE(reports[0].phase == lms::v1::POD_PHASE_RUNNING);
  REQUIRE(reports[1].pod == "shop-web-1");
  REQUIRE(reports[1].service == "web");
  REQUIRE(reports[1].node == "worker-2");
  REQUIRE(reports[1].message == "OOMKilled");
}

}  // namespace
}  // namespace codeco::acm
