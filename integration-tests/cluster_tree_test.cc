// A layered cluster tree of 13 managed clusters in three levels
// (examples/scenarios/edge-tree-13.yaml: region, three sites, nine leaves),
// each cluster registered at its parent's ACM, under mTLS. A mission
// addressed by labels (examples/missions/camera-analytics.yaml: far-edge
// clusters of eu-north) reaches exactly the six matching leaves, whose pods
// run there and nowhere else, and its status from every leaf appears at the
// root. Then site-a's uplink is cut: its three leaves keep running their
// mission (site-a's ACM still relays it and their status), a change of the
// mission made at the root meanwhile reaches the other leaves only, and
// once the link heals site-a's leaves catch up.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "federation_util.h"
#include "nlohmann/json.hpp"
#include "process.h"

namespace codeco::testing {
namespace {

const std::string kScenario = SourceDir() + "/examples/scenarios/edge-tree-13.yaml";
const std::string kMission = SourceDir() + "/examples/missions/camera-analytics.yaml";
const std::set<std::string> kNorthLeaves = {"leaf-a1", "leaf-a2", "leaf-a3",
                                            "leaf-b1", "leaf-b2", "leaf-b3"};
const std::set<std::string> kSiteALeaves = {"leaf-a1", "leaf-a2", "leaf-a3"};

// `codecoctl get missions camera-analytics -o json` (at `cluster`'s own ACM
// when set), as a Mission; null when it cannot be read.
nlohmann::json Mission(const std::string& cluster = "") {
  std::vector<std::string> argv = {CtlBinary(),        "get", "missions",
                                   "camera-analytics", "-o",  "json"};
  if (!cluster.empty()) argv.insert(argv.end(), {"--cluster", cluster});
  CommandResult r = RunCommand(argv, absl::Seconds(30));
  nlohmann::json doc = nlohmann::json::parse(r.output, nullptr, false);
  if (r.exit_code != 0 || doc.is_discarded()) return nullptr;
  if (doc.contains("missions")) {
    return doc["missions"].empty() ? nlohmann::json(nullptr) : doc["missions"][0];
  }
  return doc.contains("mission") ? doc["mission"] : doc;
}

// cluster -> (phase, generation) of each status entry of `mission`.
std::map<std::string, std::pair<std::string, int64_t>> States(const nlohmann::json& mission) {
  std::map<std::string, std::pair<std::string, int64_t>> out;
  if (mission.is_null()) return out;
  for (const auto& s : mission.value("status", nlohmann::json::array())) {
    int64_t generation = 0;
    if (s.contains("generation")) {
      generation = s["generation"].is_string() ? std::stoll(s["generation"].get<std::string>())
                                               : s["generation"].get<int64_t>();
    }
    out[s.value("cluster", "")] = {s.value("phase", ""), generation};
  }
  return out;
}

// Waits until `done` holds (checked every second) or `timeout` passes.
bool WaitFor(absl::Duration timeout, const std::function<bool()>& done) {
  for (absl::Time end = absl::Now() + timeout; absl::Now() < end;
       absl::SleepFor(absl::Seconds(1))) {
    if (done()) return true;
  }
  return done();
}

// cluster -> names of the mission pods running there.
std::map<std::string, std::set<std::string>> MissionPods(
    const std::map<std::string, std::string>& lms) {
  std::map<std::string, std::set<std::string>> out;
  for (const auto& [cluster, endpoint] : lms) {
    for (const auto& pod : PodsOf(endpoint, "")) {
      auto label = pod.labels().find("codeco.io/mission");
      if (label == pod.labels().end() || label->second != "camera-analytics") continue;
      if (pod.phase() == lms::v1::POD_PHASE_RUNNING) out[cluster].insert(pod.name());
    }
  }
  return out;
}

// Every cluster of the tree as `codecoctl get tree -o json` shows it, by name.
std::map<std::string, nlohmann::json> TreeClusters() {
  std::map<std::string, nlohmann::json> out;
  CommandResult r = RunCommand({CtlBinary(), "get", "tree", "-o", "json"}, absl::Seconds(30));
  nlohmann::json doc = nlohmann::json::parse(r.output, nullptr, false);
  if (r.exit_code != 0 || doc.is_discarded()) return out;
  std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& node) {
    if (node.is_array()) {
      for (const auto& n : node) walk(n);
      return;
    }
    if (!node.is_object()) return;
    if (node.contains("name") && node["name"].is_string()) out[node["name"]] = node;
    for (const auto& [key, value] : node.items()) {
      if (value.is_array() || value.is_object()) walk(value);
    }
  };
  walk(doc);
  return out;
}

// The example mission with two replicas instead of one, in a new file.
std::string WriteGrownMission() {
  std::ifstream in(kMission);
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  const size_t at = yaml.find("replicas: 1");
  REQUIRE(at != std::string::npos);
  yaml.replace(at, std::string("replicas: 1").size(), "replicas: 2");
  const std::string path = absl::StrCat(std::filesystem::temp_directory_path().string(),
                                        "/camera-analytics-", getpid(), ".yaml");
  std::ofstream(path) << yaml;
  return path;
}

TEST_CASE(
    "a mission addressed by labels reaches exactly its leaves of a 13-cluster tree and survives a "
    "cut uplink") {
  FederationHome home;
  CommandResult up = RunCommand(
      {CtlBinary(), "up", "--scenario", kScenario, "--no-prometheus", "--set",
       "acm.registry_heartbeat_interval=1s", "--set-members", "acm.registry_heartbeat_interval=1s"},
      absl::Minutes(6));
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  const std::map<std::string, std::string> lms = LmsEndpoints(up.output);
  REQUIRE(lms.size() == 13);  // the hub runs no nodes

  // The whole tree shows at the root: region registered there, the rest
  // reported up through their parents.
  std::map<std::string, nlohmann::json> tree;
  bool whole = WaitFor(absl::Minutes(2), [&] {
    tree = TreeClusters();
    int ready = 0;
    for (const auto& [name, node] : tree) {
      if (absl::StartsWith(name, "leaf-") || absl::StartsWith(name, "site-") || name == "region") {
        ready += node.dump().find("READY") != std::string::npos;
      }
    }
    return ready == 13;
  });
  INFO(RunCommand({CtlBinary(), "get", "tree"}, absl::Seconds(30)).output);
  REQUIRE(whole);

  const absl::Time applied_at = absl::Now();
  CommandResult applied = RunCommand({CtlBinary(), "apply", "-f", kMission}, absl::Seconds(30));
  INFO(applied.output);
  REQUIRE(applied.exit_code == 0);

  // Every matching leaf runs it and reports so to the root; no other cluster does.
  nlohmann::json mission;
  bool running = WaitFor(absl::Minutes(2), [&] {
    mission = Mission();
    auto states = States(mission);
    if (states.size() != kNorthLeaves.size()) return false;
    for (const auto& [cluster, state] : states) {
      if (!kNorthLeaves.count(cluster) || state.first != "MISSION_PHASE_RUNNING") return false;
    }
    return true;
  });
  INFO(mission.dump(2));
  REQUIRE(running);
  const absl::Duration to_running = absl::Now() - applied_at;
  auto pods = MissionPods(lms);
  std::set<std::string> with_pods;
  for (const auto& [cluster, names] : pods) with_pods.insert(cluster);
  CHECK(with_pods == kNorthLeaves);

  // Cut site-a off from everything above it.
  const absl::Time cut_at = absl::Now();
  for (const char* above : {"region", "hub"}) {
    CommandResult cut =
        RunCommand({CtlBinary(), "fault", "link", "site-a", above, "--cut"}, absl::Seconds(30));
    INFO(cut.output);
    REQUIRE(cut.exit_code == 0);
  }
  // The root sees site-a go silent (through region's report).
  bool silent = WaitFor(absl::Minutes(1), [&] {
    auto now = TreeClusters();
    return now.count("site-a") && now["site-a"].dump().find("UNREACHABLE") != std::string::npos;
  });
  INFO(RunCommand({CtlBinary(), "get", "tree"}, absl::Seconds(30)).output);
  CHECK(silent);
  const absl::Duration to_silent = absl::Now() - cut_at;

  // A change made at the root meanwhile: two pods per leaf (generation 2).
  const std::string grown_file = WriteGrownMission();
  const absl::Time grown_at = absl::Now();
  CommandResult grown = RunCommand({CtlBinary(), "apply", "-f", grown_file}, absl::Seconds(30));
  INFO(grown.output);
  REQUIRE(grown.exit_code == 0);
  bool others_caught_up = WaitFor(absl::Minutes(2), [&] {
    auto states = States(Mission());
    for (const char* leaf : {"leaf-b1", "leaf-b2", "leaf-b3"}) {
      if (states[leaf] != std::make_pair(std::string("MISSION_PHASE_RUNNING"), int64_t{2})) {
        return false;
      }
    }
    return true;
  });
  CHECK(others_caught_up);
  const absl::Duration to_others = absl::Now() - grown_at;
  // site-a's leaves still run generation 1, relayed by site-a's own ACM.
  pods = MissionPods(lms);
  for (const std::string& leaf : kSiteALeaves) {
    INFO(leaf);
    CHECK(pods[leaf] == std::set<std::string>{"camera-analytics-1-0"});
  }
  auto local = States(Mission("site-a"));
  for (const std::string& leaf : kSiteALeaves) {
    INFO(leaf);
    CHECK(local[leaf] == std::make_pair(std::string("MISSION_PHASE_RUNNING"), int64_t{1}));
  }

  // Healed: site-a's leaves take generation 2.
  const absl::Time healed_at = absl::Now();
  for (const char* above : {"region", "hub"}) {
    REQUIRE(RunCommand({CtlBinary(), "fault", "link", "site-a", above, "--heal"}, absl::Seconds(30))
                .exit_code == 0);
  }
  bool converged = WaitFor(absl::Minutes(2), [&] {
    auto states = States(Mission());
    if (states.size() != kNorthLeaves.size()) return false;
    for (const auto& [cluster, state] : states) {
      if (state != std::make_pair(std::string("MISSION_PHASE_RUNNING"), int64_t{2})) return false;
    }
    return true;
  });
  INFO(Mission().dump(2));
  CHECK(converged);
  std::cout << "cluster tree: mission running in 6/6 leaves at the root "
            << absl::FormatDuration(to_running) << " after apply; site-a UNREACHABLE at the root "
            << absl::FormatDuration(to_silent) << " after its uplink cut; generation 2 running in "
            << "site-b's leaves " << absl::FormatDuration(to_others)
            << " after apply (site-a's leaves kept generation 1); all 6 on generation 2 "
            << absl::FormatDuration(absl::Now() - healed_at) << " after heal\n";
  pods = MissionPods(lms);
  for (const std::string& leaf : kNorthLeaves) {
    INFO(leaf);
    CHECK(pods[leaf] == std::set<std::string>{"camera-analytics-2-0", "camera-analytics-2-1"});
  }
  CHECK(RunCommand({CtlBinary(), "down"}, absl::Minutes(1)).exit_code == 0);
}

}  // namespace
}  // namespace codeco::testing
