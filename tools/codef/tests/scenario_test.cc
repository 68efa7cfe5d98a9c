// Scenario parsing: the shipped examples load with the figures they claim,
// every file of the bad corpus is rejected naming the expected field paths,
// and the task stream generator is deterministic and follows its spec.
#include "scenario.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace codeco::codef {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

constexpr char kMinimal[] = R"(
name: t
federation:
  hub: {name: hub}
  clusters:
    - name: a
      nodes: [{name: n, count: 3, capacity: {cpu: 1500m, memory: 1Gi, gpu: 1}}]
    - name: b
      parent: a
      energy: {idle_watts: 10, max_watts: 30, carbon_intensity_g_per_kwh: 120}
      nodes: [{name: n, capacity: {cpu: 2, memory: 512Mi}}]
links:
  default: {rtt: 40ms}
  matrix:
    - {between: [a, b], rtt: 10ms, bandwidth: 100Mbps, loss: 1%}
    - {from: hub, to: a, latency: 3ms}
faults:
  - {at: 2m, action: hub_cut}
  - {at: 1m, action: link_degrade, between: [a, b], rtt: 50ms}
  - {at: 3m, action: node_fail, node: a/n-2}
  - {at: 4m, action: load_surge, cluster: b, factor: 2.5, duration: 30s}
)";

TEST_CASE("a minimal scenario parses into its typed form") {
  auto scenario = ParseScenario(kMinimal, "");
  INFO(scenario.status().ToString());
  REQUIRE(scenario.ok());
  REQUIRE(scenario->name == "t");
  REQUIRE(scenario->hub.name == "hub");
  REQUIRE(scenario->hub.nodes.empty());
  REQUIRE(scenario->clusters.size() == 2);
  const ClusterSpec& a = scenario->clusters[0];
  REQUIRE(a.nodes.size() == 3);
  REQUIRE(a.nodes[0].name == "n-1");
  REQUIRE(a.nodes[2].name == "n-3");
  REQUIRE(a.nodes[1].cpu_millicores == 1500);
  REQUIRE(a.nodes[1].memory_bytes == 1073741824);
  REQUIRE(a.nodes[1].gpu == 1);
  const ClusterSpec& b = scenario->clusters[1];
  REQUIRE(b.parent == "a");
  REQUIRE(b.nodes[0].name == "n");
  REQUIRE(b.nodes[0].idle_watts == 10);
  REQUIRE(b.nodes[0].max_watts == 30);
  REQUIRE(b.nodes[0].carbon_intensity_g_per_kwh == 120);  // the cluster default reaches its nodes

  // Symmetric by default, RTT halved; directed entries stay directed.
  auto ab = scenario->LinkBetween("a", "b");
  auto ba = scenario->LinkBetween("b", "a");
  REQUIRE(ab.has_value());
  REQUIRE(ba.has_value());
  REQUIRE(ab->one_way_latency_ns == 5'000'000);
  REQUIRE(ba->one_way_latency_ns == 5'000'000);
  REQUIRE(ab->bandwidth_bps == 100'000'000);
  REQUIRE(ab->loss == Approx(0.01));
  REQUIRE(scenario->LinkBetween("hub", "a")->one_way_latency_ns == 3'000'000);
  REQUIRE(scenario->LinkBetween("a", "hub")->one_way_latency_ns == 20'000'000);  // default

  // Faults come sorted by time.
  REQUIRE(scenario->faults.size() == 4);
  REQUIRE(scenario->faults[0].action == FaultAction::kLinkDegrade);
  REQUIRE(scenario->faults[0].one_way_latency_ns == 25'000'000);
  REQUIRE(scenario->faults[0].symmetric);
  REQUIRE(scenario->faults[1].action == FaultAction::kHubCut);
  REQUIRE(scenario->faults[2].cluster == "a");
  REQUIRE(scenario->faults[2].node == "n-2");
  REQUIRE(scenario->faults[3].factor == 2.5);
  REQUIRE(scenario->faults[3].duration_ns == 30'000'000'000);
}

TEST_CASE("node_load faults take a share or a CPU quantity and are checked against the node") {
  std::string text = kMinimal;
  text +=
      "  - {at: 5m, action: node_load, node: a/n-1, cpu: 90%, memory: 512Mi, duration: 1m}\n"
      "  - {at: 6m, action: node_load, node: b/n, cpu: 1500m}\n";
  auto scenario = ParseScenario(text, "");
  INFO(scenario.status().ToString());
  REQUIRE(scenario.ok());
  REQUIRE(scenario->faults.size() == 6);
  const FaultSpec& share = scenario->faults[4];
  REQUIRE(share.action == FaultAction::kNodeLoad);
  REQUIRE(std::string(FaultActionName(share.action)) == "node_load");
  REQUIRE(share.cluster == "a");
  REQUIRE(share.node == "n-1");
  REQUIRE(share.cpu_fraction == Approx(0.9));
  REQUIRE_FALSE(share.cpu_millicores.has_value());
  REQUIRE(share.memory_bytes == 512 << 20);
  REQUIRE(share.duration_ns == 60'000'000'000);
  REQUIRE(scenario->faults[5].cpu_millicores == 1500);
  REQUIRE_FALSE(scenario->faults[5].cpu_fraction.has_value());

  for (const auto& [fault, path] : std::vector<std::pair<std::string, std::string>>{
           {"{at: 5m, action: node_load, node: b/n, cpu: 3}", "faults[4].cpu: "},
           {"{at: 5m, action: node_load, node: b/n, cpu: 120%}", "faults[4].cpu: "},
           {"{at: 5m, action: node_load, node: b/n, memory: 1Gi}", "faults[4].memory: "},
           {"{at: 5m, action: node_load, node: b/n}", "faults[4]: "},
           {"{at: 5m, action: node_load, node: b/x, cpu: 1}", "faults[4].node: "}}) {
    auto bad = ParseScenario(std::string(kMinimal) + "  - " + fault + "\n", "");
    INFO(fault);
    REQUIRE(bad.status().code() == absl::StatusCode::kInvalidArgument);
    REQUIRE_THAT(std::string(bad.status().message()), Catch::Contains(path));
  }
}

TEST_CASE("without a default link unlisted pairs have no link") {
  std::string text = kMinimal;
  text.replace(text.find("  default: {rtt: 40ms}\n"), 23, "");
  auto scenario = ParseScenario(text, "");
  INFO(scenario.status().ToString());
  REQUIRE(scenario.ok());
  REQUIRE_FALSE(scenario->LinkBetween("a", "hub").has_value());
}

TEST_CASE("every bad scenario in the corpus names its field paths") {
  int files = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(CODEF_TESTDATA_DIR) / "bad")) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    std::string text = ReadAll(entry.path());
    std::vector<std::string> expected;
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      if (absl::StartsWith(line, "# expect: ")) {
        expected.emplace_back(line.substr(std::string("# expect: ").size()));
      }
    }
    INFO(entry.path().filename().string());
    REQUIRE_FALSE(expected.empty());
    auto scenario = ParseScenario(text, "");
    REQUIRE_FALSE(scenario.ok());
    REQUIRE(scenario.status().code() == absl::StatusCode::kInvalidArgument);
    std::string message(scenario.status().message());
    INFO(message);
    std::vector<std::string> lines = absl::StrSplit(message, '\n');
    for (const std::string& path : expected) {
      bool found = false;
      for (const std::string& line : lines) {
        if (absl::StartsWith(line, path + ": ")) found = true;
      }
      INFO("expected an error at " << path);
      CHECK(found);
    }
  }
  REQUIRE(files >= 30);
}

TEST_CASE("the five-site example follows the mck8s study") {
  auto scenario = LoadScenarioFile(std::string(CODEF_EXAMPLES_DIR) + "/grid5000-five-sites.yaml");
  INFO(scenario.status().ToString());
  REQUIRE(scenario.ok());
  REQUIRE(scenario->clusters.size() == 6);
  auto cluster = [&](const std::string& name) {
    const ClusterSpec* c = scenario->FindCluster(name);
    REQUIRE(c != nullptr);
    return c;
  };
  for (const char* big : {"rennes", "luxembourg"}) {
    REQUIRE(cluster(big)->nodes.size() == 5);
    for (const NodeSpec& n : cluster(big)->nodes) {
      REQUIRE(n.cpu_millicores == 4000);
      REQUIRE(n.memory_bytes == int64_t{16} << 30);
    }
  }
  for (const char* small : {"nantes", "lille", "grenoble"}) {
    REQUIRE(cluster(small)->nodes.size() == 5);
    for (const NodeSpec& n : cluster(small)->nodes) {
      REQUIRE(n.cpu_millicores == 2000);
      REQUIRE(n.memory_bytes == int64_t{4} << 30);
    }
  }
  REQUIRE(cluster("nancy-cloud")->labels.tier() == codeco::common::v1::TIER_CLOUD);
  // Table II: Lille-Nancy 9.70 ms, Luxembourg-Grenoble 15.33 ms RTT.
  REQUIRE(scenario->LinkBetween("lille", "nancy-cloud")->one_way_latency_ns == 4'850'000);
  REQUIRE(scenario->LinkBetween("grenoble", "luxembourg")->one_way_latency_ns == 7'665'000);
  REQUIRE(scenario->workloads.task_stream.has_value());
  REQUIRE(scenario->workloads.task_stream->count == 1126);
  // The study's first experiment places on the five sites; Nancy is for bursting.
  REQUIRE(scenario->workloads.task_stream->clusters ==
          std::vector<std::string>{"rennes", "nantes", "lille", "grenoble", "luxembourg"});
}

TEST_CASE("the edge-cloud continuum example has three tiers of about 20 clusters") {
  auto scenario = LoadScenarioFile(std::string(CODEF_EXAMPLES_DIR) + "/edge-cloud-continuum.yaml");
  INFO(scenario.status().ToString());
  REQUIRE(scenario.ok());
  REQUIRE(scenario->clusters.size() >= 18);
  REQUIRE(scenario->clusters.size() <= 24);
  std::map<int, int> per_tier;
  std::map<int, double> max_watts;
  for (const ClusterSpec& c : scenario->clusters) {
    per_tier[c.labels.tier()]++;
    for (const NodeSpec& n : c.nodes)
      max_watts[c.labels.tier()] = std::max(max_watts[c.labels.tier()], n.max_watts);
  }
  REQUIRE(per_tier[codeco::common::v1::TIER_FAR_EDGE] > 0);
  REQUIRE(per_tier[codeco::common::v1::TIER_EDGE] > 0);
  REQUIRE(per_tier[codeco::common::v1::TIER_CLOUD] > 0);
  // Far-edge devices draw far less power than cloud servers.
  REQUIRE(max_watts[codeco::common::v1::TIER_FAR_EDGE] * 5 <
          max_watts[codeco::common::v1::TIER_CLOUD]);
  // Every far-edge cluster hangs below an edge parent that is close by.
  for (const ClusterSpec& c : scenario->clusters) {
    if (c.labels.tier() != codeco::common::v1::TIER_FAR_EDGE) continue;
    INFO(c.name);
    REQUIRE_FALSE(c.parent.empty());
    auto up = scenario->LinkBetween(c.name, c.parent);
    REQUIRE(up.has_value());
    REQUIRE(up->one_way_latency_ns < 10'000'000);
  }
}

TEST_CASE("federation.mode is flat by default and layered when asked") {
  auto flat = ParseScenario(kMinimal, "");
  REQUIRE(flat.ok());
  CHECK(flat->mode == FederationMode::kFlat);
  std::string text = kMinimal;
  text.replace(text.find("  hub: {name: hub}\n"), 0, "  mode: layered\n");
  auto layered = ParseScenario(text, "");
  INFO(layered.status().ToString());
  REQUIRE(layered.ok());
  CHECK(layered->mode == FederationMode::kLayered);
  CHECK(std::string(FederationModeName(layered->mode)) == "layered");
  text.replace(text.find("mode: layered"), 13, "mode: flat");
  auto explicit_flat = ParseScenario(text, "");
  REQUIRE(explicit_flat.ok());
  CHECK(explicit_flat->mode == FederationMode::kFlat);
  text.replace(text.find("mode: flat"), 10, "mode: [layered]");
  auto bad = ParseScenario(text, "");
  REQUIRE(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad.status().message()), Catch::StartsWith("federation.mode: "));
}

TEST_CASE("the edge-tree-13 example is a layered tree of a region three sites and nine leaves") {
  auto scenario = LoadScenarioFile(std::string(CODEF_EXAMPLES_DIR) + "/edge-tree-13.yaml");
  INFO(scenario.status().ToString());
  REQUIRE(scenario.ok());
  CHECK(scenario->mode == FederationMode::kLayered);
  REQUIRE(scenario->clusters.size() == 13);
  std::map<std::string, std::vector<std::string>> children;
  int eu_north_leaves = 0;
  int nodes = 0;
  for (const ClusterSpec& c : scenario->clusters) {
    INFO(c.name);
    children[c.parent].push_back(c.name);
    nodes += static_cast<int>(c.nodes.size());
    if (c.labels.tier() == codeco::common::v1::TIER_FAR_EDGE) {
      REQUIRE(c.nodes.size() == 1);
      CHECK(c.nodes[0].cpu_millicores == 2000);
      CHECK(c.nodes[0].memory_bytes == int64_t{4} << 30);
      CHECK(absl::StartsWith(c.parent, "site-"));
      if (c.labels.region() == "eu-north") ++eu_north_leaves;
      // A leaf is closest to its own site.
      REQUIRE(scenario->LinkBetween(c.name, c.parent)->one_way_latency_ns < 5'000'000);
    }
  }
  CHECK(children[""] == std::vector<std::string>{"region"});
  CHECK(children["region"] == std::vector<std::string>{"site-a", "site-b", "site-c"});
  CHECK(children["site-a"] == std::vector<std::string>{"leaf-a1", "leaf-a2", "leaf-a3"});
  CHECK(children["site-c"] == std::vector<std::string>{"leaf-c1", "leaf-c2", "leaf-c3"});
  CHECK(scenario->FindCluster("leaf-c2")->labels.region() == "eu-south");
  CHECK(scenario->FindCluster("site-b")->labels.tier() == codeco::common::v1::TIER_EDGE);
  CHECK(scenario->FindCluster("region")->labels.tier() == codeco::common::v1::TIER_CLOUD);
  // examples/missions/camera-analytics.yaml addresses {tier: far-edge, region: eu-north}.
  CHECK(eu_north_leaves == 6);
  CHECK(nodes == 15);
}

TEST_CASE("mutated scenarios never crash the parser and errors keep the path shape") {
  std::string original = ReadAll(fs::path(CODEF_EXAMPLES_DIR) / "edge-cloud-continuum.yaml");
  std::mt19937_64 rng(20261122);
  const std::string alphabet = ":-[]{},\"'#&*!|> \n\tax0.%";
  int accepted = 0;
  for (int round = 0; round < 300; ++round) {
    std::string text = original;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0:
          text[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          text.erase(at, 1 + rng() % 40);
          break;
        default:
          text.insert(at, text.substr(rng() % text.size(), 1 + rng() % 40));
          break;
      }
    }
    auto scenario = ParseScenario(text, "");
    if (scenario.ok()) {
      ++accepted;
      continue;
    }
    INFO(text);
    REQUIRE(scenario.status().code() == absl::StatusCode::kInvalidArgument);
    for (absl::string_view line : absl::StrSplit(scenario.status().message(), '\n')) {
      INFO(std::string(line));
      REQUIRE(line.find(": ") != absl::string_view::npos);
    }
  }
  REQUIRE(accepted < 300);  // the mutations do break files
}

TEST_CASE("the task stream is deterministic and follows its spec") {
  TaskStreamSpec spec;
  spec.count = 2000;
  spec.window_ns = 3'600'000'000'000;
  spec.duration.kind = Distribution::Kind::kLogNormal;
  spec.duration.value = 300e9;
  spec.duration.sigma = 1.0;
  spec.duration.min = 10e9;
  spec.duration.max = 7200e9;
  spec.cpu.kind = Distribution::Kind::kChoice;
  spec.cpu.choices = {100, 500};
  spec.cpu.weights = {3, 1};
  spec.memory.kind = Distribution::Kind::kUniform;
  spec.memory.min = 1e6;
  spec.memory.max = 2e6;
  spec.long_running_after_ns = 3'600'000'000'000;
  spec.locations = {{"a", 1}, {"b", 3}, {"c", 0}};
  spec.seed = 7;
  auto tasks = GenerateTasks(spec, {});
  auto again = GenerateTasks(spec, {});
  REQUIRE(tasks.size() == 2000);
  std::map<std::string, int> per_cluster;
  int small_cpu = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    REQUIRE(tasks[i].at_ns == again[i].at_ns);
    REQUIRE(tasks[i].cluster == again[i].cluster);
    REQUIRE(tasks[i].duration_ns == again[i].duration_ns);
    if (i > 0) REQUIRE(tasks[i - 1].at_ns <= tasks[i].at_ns);
    REQUIRE(tasks[i].at_ns < spec.window_ns);
    REQUIRE(tasks[i].duration_ns >= 10'000'000'000);
    REQUIRE(tasks[i].duration_ns <= 7'200'000'000'000);
    REQUIRE(tasks[i].memory_bytes >= 1'000'000);
    REQUIRE(tasks[i].memory_bytes <= 2'000'000);
    REQUIRE(tasks[i].long_running == (tasks[i].duration_ns >= spec.long_running_after_ns));
    per_cluster[tasks[i].cluster]++;
    if (tasks[i].cpu_millicores == 100) ++small_cpu;
  }
  REQUIRE(per_cluster.count("c") == 0);
  // Weights 1:3 and 3:1 within a generous margin.
  REQUIRE(per_cluster["b"] > 2 * per_cluster["a"]);
  REQUIRE(small_cpu > 2 * (2000 - small_cpu));
  spec.seed = 8;
  auto other = GenerateTasks(spec, {});
  bool differs = false;
  for (size_t i = 0; i < tasks.size(); ++i) differs |= other[i].at_ns != tasks[i].at_ns;
  REQUIRE(differs);
}

}  // namespace
}  // namespace codeco::codef
