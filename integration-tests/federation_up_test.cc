// `codecoctl up` on the five-site Grid'5000 scenario brings up the emulator,
// the hub and every cluster's services (mTLS) and Prometheus; later commands
// find the federation without flags; a link fault goes through; `codecoctl
// down` leaves no process behind. NetMA measures every link of the scenario
// through the link emulator, the hub's cost map matches the emulated RTTs, and
// a degraded link shows in it and is avoided by the scheduler's next plan.
// Pods an MC's SWM creates carry the CAM's template (image, command, args,
// ports, env) and the codeco.io/plan and /reservation labels, read back from
// the emulated clusters' LMS.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <thread>

#include "absl/time/clock.h"

#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "nlohmann/json.hpp"
#include "federation_util.h"
#include "process.h"
#include "yaml-cpp/yaml.h"

namespace codeco::testing {
namespace {

namespace fs = std::filesystem;

const std::string& kCtl = CtlBinary();
const std::string& kScenario = FiveSiteScenario();
using Home = FederationHome;

TEST_CASE("codecoctl up brings the five-site federation up and down cleanly") {
  Home home;
  CommandResult up = RunCommand({kCtl, "up", "--scenario", kScenario}, absl::Minutes(3));
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  REQUIRE_THAT(up.output, Catch::Contains("ACM (the API):"));
  for (const char* cluster : {"rennes", "nantes", "lille", "grenoble", "luxembourg"}) {
    REQUIRE_THAT(up.output, Catch::Contains(cluster));
  }
  nlohmann::json state = home.State();
  std::vector<int> pids;
  for (const auto& p : state["processes"]) pids.push_back(p["pid"].get<int>());
  // codef + 4 hub services + 6 clusters x 6 services (+ Prometheus when installed).
  REQUIRE(pids.size() >= 1 + 4 + 6 * 6);

  // ACM is found without flags, with the identity `up` issued (mTLS).
  CommandResult health = RunCommand({kCtl, "health"}, absl::Seconds(30));
  INFO(health.output);
  REQUIRE(health.exit_code == 0);
  REQUIRE_THAT(health.output, Catch::Contains("SERVING"));
  CommandResult all = RunCommand({kCtl, "health", "--all"}, absl::Seconds(60));
  INFO(all.output);
  REQUIRE(all.exit_code == 0);

  // A plaintext client is refused by the services.
  std::string acm = state["acm"];
  CommandResult plaintext = RunCommand({kCtl, "health", acm, "--insecure"}, absl::Seconds(30));
  REQUIRE(plaintext.exit_code != 0);

  // Faults go through CODEF's control API.
  CommandResult cut = RunCommand({kCtl, "fault", "link", "rennes", "nantes", "--rtt", "40ms"},
                                 absl::Seconds(30));
  INFO(cut.output);
  REQUIRE(cut.exit_code == 0);
  REQUIRE_THAT(cut.output, Catch::Contains("rtt 40ms"));
  REQUIRE(RunCommand({kCtl, "fault", "link", "rennes", "nantes", "--heal"}, absl::Seconds(30))
              .exit_code == 0);
  CommandResult bad = RunCommand({kCtl, "fault", "link", "rennes", "atlantis", "--cut"},
                                 absl::Seconds(30));
  REQUIRE(bad.exit_code != 0);

  // Prometheus, when installed, scrapes every service and every emulated
  // cluster's node and pod series from CODEF, and records CODECO's rules.
  std::string prometheus = state.value("prometheus", "");
  if (!prometheus.empty()) {
    auto count = [&](const std::string& query, int expected, std::string* last) {
      CommandResult q = RunCommand({"/usr/bin/curl", "-s", "-G", "--data-urlencode",
                                    "query=" + query, prometheus + "/api/v1/query"},
                                   absl::Seconds(10));
      *last = q.output;
      std::smatch m;
      return std::regex_search(q.output, m, std::regex("\"(\\d+)\"\\]")) &&
             std::stoi(m[1]) == expected;
    };
    bool scraped = false;
    std::string last;
    for (absl::Time end = absl::Now() + absl::Seconds(90); !scraped && absl::Now() < end;) {
      scraped = count(R"(count(up{job="codeco"}==1))", 4 + 6 * 6, &last) &&
                count(R"(count(up{job="codef"}==1))", 6, &last) &&
                // 5 + 5 + 5 + 5 + 5 + 4 nodes, each with its busy share recorded.
                count("count(instance:node_cpu:rate1m)", 29, &last);
      if (!scraped) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    INFO(last);
    REQUIRE(scraped);
  }

  // The real bookinfo CodecoApp, applied unchanged through ACM, ends placed:
  // the clusters' agents register, CNC picks a neighborhood, SWM places every
  // service on a node of an emulated cluster within its channel bounds.
  REQUIRE(WaitUntilClustersReady(6));
  CommandResult apply = RunCommand(
      {kCtl, "apply", "-f", std::string(CODECO_SOURCE_DIR) + "/examples/cams/bookinfo.yaml"},
      absl::Seconds(30));
  INFO(apply.output);
  REQUIRE(apply.exit_code == 0);
  CommandResult describe;
  bool placed = false;
  for (absl::Time end = absl::Now() + absl::Seconds(90); !placed && absl::Now() < end;) {
    describe = RunCommand({kCtl, "describe", "app", "bookinfo"}, absl::Seconds(30));
    // The channels come from SWM's stored plan, the status from ACM once
    // PlaceApplication has answered it: wait for both.
    placed = describe.output.find("Channels (plan bookinfo/") != std::string::npos &&
             describe.output.find("Status:         Ok") != std::string::npos;
    if (!placed) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  INFO(describe.output);
  REQUIRE(placed);
  REQUIRE_THAT(describe.output, Catch::Contains("Status:         Ok"));
  for (const char* service : {"productpage", "details", "reviews", "ratings"}) {
    std::smatch m;
    // SERVICE CLUSTER NODE POD: every service on a node of a five-site cluster.
    REQUIRE(std::regex_search(
        describe.output, m,
        std::regex(std::string("\\n  ") + service +
                   " +(rennes|nantes|lille|grenoble|luxembourg|nancy-cloud) +\\S+ +bookinfo-")));
  }
  REQUIRE(describe.output.find(" NO\n") == std::string::npos);  // every channel within bound
  // The clusters' agents report the pods running: the application is Running.
  bool running = false;
  std::string apps;
  for (absl::Time end = absl::Now() + absl::Seconds(60); !running && absl::Now() < end;) {
    apps = RunCommand({kCtl, "get", "apps"}, absl::Seconds(30)).output;
    running = std::regex_search(apps, std::regex("\\nbookinfo +Running +Ok"));
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  INFO(apps);
  REQUIRE(running);

  // Deleting releases the pods everywhere: the application goes, and applying
  // it again places it again (SWM refuses while pods of it remain).
  CommandResult deleted = RunCommand({kCtl, "delete", "app", "bookinfo"}, absl::Seconds(30));
  INFO(deleted.output);
  REQUIRE(deleted.exit_code == 0);
  bool gone = false;
  for (absl::Time end = absl::Now() + absl::Seconds(60); !gone && absl::Now() < end;) {
    apps = RunCommand({kCtl, "get", "apps"}, absl::Seconds(30)).output;
    gone = apps.find("\nbookinfo ") == std::string::npos;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  INFO(apps);
  REQUIRE(gone);
  REQUIRE(RunCommand({kCtl, "apply", "-f", std::string(CODECO_SOURCE_DIR) +
                                               "/examples/cams/bookinfo.yaml"},
                     absl::Seconds(30))
              .exit_code == 0);
  bool placed_again = false;
  for (absl::Time end = absl::Now() + absl::Seconds(90); !placed_again && absl::Now() < end;) {
    describe = RunCommand({kCtl, "describe", "app", "bookinfo"}, absl::Seconds(30));
    placed_again = describe.output.find("Channels (plan bookinfo/") != std::string::npos;
    if (!placed_again) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  INFO(describe.output);
  REQUIRE(placed_again);

  // A second up while one runs is refused.
  REQUIRE(RunCommand({kCtl, "up", "--scenario", kScenario}, absl::Seconds(30)).exit_code != 0);

  // The federation's own services never refuse each other: every call one
  // makes to another is in the authorization policy (the clusters' agents
  // pull their applications, heartbeat, watch views...).
  const fs::path logs = fs::path(state["run_dir"].get<std::string>()) / "logs";
  REQUIRE(fs::is_directory(logs));
  std::string denied;
  for (const auto& entry : fs::directory_iterator(logs)) {
    if (entry.path().extension() != ".log") continue;
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      if (line.find("\"permission denied\"") != std::string::npos) {
        denied += entry.path().filename().string() + ": " + line + "\n";
      }
    }
  }
  INFO(denied);
  CHECK(denied.empty());

  CommandResult down = RunCommand({kCtl, "down"}, absl::Minutes(1));
  INFO(down.output);
  REQUIRE(down.exit_code == 0);
  for (int pid : pids) {
    INFO("pid " << pid);
    REQUIRE_FALSE(Alive(pid));
  }
  REQUIRE_FALSE(fs::exists(home.path / "state.json"));
}

// Every ordered pair of clusters in the scenario -> its configured RTT, ms.
std::map<std::pair<std::string, std::string>, double> ScenarioRtts() {
  YAML::Node scenario = YAML::LoadFile(kScenario);
  std::vector<std::string> clusters = {scenario["federation"]["hub"]["name"].as<std::string>()};
  for (const auto& c : scenario["federation"]["clusters"]) {
    clusters.push_back(c["name"].as<std::string>());
  }
  auto ms = [](const std::string& text) {
    REQUIRE(text.size() > 2);
    REQUIRE(text.substr(text.size() - 2) == "ms");
    return std::stod(text.substr(0, text.size() - 2));
  };
  std::map<std::pair<std::string, std::string>, double> rtt;
  double fallback = ms(scenario["links"]["default"]["rtt"].as<std::string>());
  for (const auto& a : clusters) {
    for (const auto& b : clusters) {
      if (a != b) rtt[{a, b}] = fallback;
    }
  }
  for (const auto& entry : scenario["links"]["matrix"]) {
    std::string a = entry["between"][0].as<std::string>();
    std::string b = entry["between"][1].as<std::string>();
    rtt[{a, b}] = rtt[{b, a}] = ms(entry["rtt"].as<std::string>());
  }
  return rtt;
}

// Applies examples/cams/sensor-fusion.yaml as application `name` and waits
// until both services are placed; returns where.
std::map<std::string, std::string> ApplySensorFusion(const std::string& name,
                                                     const fs::path& dir) {
  fs::path file = dir / (name + ".yaml");
  std::ofstream(file) << SensorFusionCam(name);
  CommandResult apply = RunCommand({kCtl, "apply", "-f", file.string()}, absl::Seconds(30));
  INFO(apply.output);
  REQUIRE(apply.exit_code == 0);
  std::map<std::string, std::string> placed;
  for (absl::Time end = absl::Now() + absl::Seconds(90);
       placed.size() < 2 && absl::Now() < end;) {
    placed = PlacedClusters(name);
    if (placed.size() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  CommandResult describe = RunCommand({kCtl, "describe", "app", name}, absl::Seconds(30));
  INFO(describe.output);
  REQUIRE(placed.size() == 2);
  REQUIRE(placed["sensor"] == "lille");
  REQUIRE(describe.output.find(" NO\n") == std::string::npos);  // channel within its bound
  return placed;
}

TEST_CASE("NetMA measures the five-site links and the scheduler avoids a degraded one") {
  Home home;
  CommandResult up = RunCommand({kCtl, "up", "--scenario", kScenario, "--no-prometheus"},
                                absl::Minutes(3));
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  REQUIRE_THAT(up.output, Catch::Contains("NetMA (hub):"));
  const auto rtts = ScenarioRtts();

  // Every directed link appears in the hub's cost map, within 10 % (or 1 ms)
  // of the emulated RTT (wider under a sanitizer: RttToleranceMs). Early
  // samples carry start-up noise that the EMA decays, so the map is read
  // until it matches or two minutes pass.
  std::map<std::pair<std::string, std::string>, double> costs;
  double worst_error_ms = 0;
  std::string worst_link;
  bool matched = false;
  for (absl::Time end = absl::Now() + absl::Minutes(2); !matched && absl::Now() < end;) {
    costs = DelayCostMap();
    matched = costs.size() == rtts.size();
    worst_error_ms = 0;
    for (const auto& [link, rtt_ms] : rtts) {
      auto it = costs.find(link);
      if (it == costs.end()) {
        matched = false;
        continue;
      }
      double measured_rtt_ms = 2 * it->second / 1e6;
      double error_ms = std::abs(measured_rtt_ms - rtt_ms);
      if (error_ms > RttToleranceMs(rtt_ms)) matched = false;
      if (error_ms > worst_error_ms) {
        worst_error_ms = error_ms;
        worst_link = link.first + "->" + link.second;
      }
    }
    if (!matched) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  INFO("cost map entries " << costs.size() << " of " << rtts.size() << ", worst error "
                           << worst_error_ms << " ms on " << worst_link);
  REQUIRE(matched);
  WARN("cost map vs emulated RTT: " << costs.size() << " links, worst error " << worst_error_ms
                                    << " ms (" << worst_link << ")");
  CommandResult links = RunCommand({kCtl, "get", "links"}, absl::Seconds(30));
  INFO(links.output);
  REQUIRE(links.exit_code == 0);
  REQUIRE_THAT(links.output, Catch::Contains("RTT-EMA"));
  REQUIRE_THAT(links.output, Catch::Contains("lille"));
  CommandResult bad = RunCommand({kCtl, "get", "costmap", "--metric", "jitter"}, absl::Seconds(30));
  REQUIRE(bad.exit_code != 0);
  REQUIRE_THAT(bad.output, Catch::Contains("--metric"));

  // The hub plans with NetMA's measurements, whose EMA carries the noise of
  // busy relays (under a sanitizer they forward slowly): each apply waits
  // until the hub's cost map has the links the channel may use within its
  // 8 ms, with a margin for the clusters' internal latency.
  auto wait_within_bound = [](const std::vector<std::string>& targets) {
    int within = 0;
    for (absl::Time end = absl::Now() + absl::Minutes(3); within == 0 && absl::Now() < end;) {
      const auto delays = DelayCostMap();
      within = 0;
      for (const std::string& target : targets) {
        auto it = delays.find({"lille", target});
        if (it != delays.end() && it->second < 7.5e6) ++within;
      }
      if (within == 0) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    return within > 0;
  };

  // The clusters register; a pipeline whose channel must leave Lille is placed
  // on one of the two clusters close enough to it.
  REQUIRE(WaitUntilClustersReady(6));
  REQUIRE(wait_within_bound({"luxembourg", "nancy-cloud"}));
  std::map<std::string, std::string> first = ApplySensorFusion("sensor-fusion", home.path);
  const std::string used = first["fusion"];
  REQUIRE((used == "luxembourg" || used == "nancy-cloud"));

  // Degrade the link it uses beyond the channel's 8 ms; Lille's cost map
  // shows it at the third probe after the change, the hub's at the next
  // summary exchange.
  const double before_ns = costs[{"lille", used}];
  CommandResult degrade =
      RunCommand({kCtl, "fault", "link", "lille", used, "--rtt", "60ms"}, absl::Seconds(30));
  INFO(degrade.output);
  REQUIRE(degrade.exit_code == 0);
  absl::Time degraded_at = absl::Now();
  std::map<std::string, double> after_ns = {{"lille", before_ns}, {"", before_ns}};
  std::map<std::string, double> seen_after_s;
  for (absl::Time end = absl::Now() + absl::Minutes(1);
       seen_after_s.size() < 2 && absl::Now() < end;) {
    for (const std::string view : {"lille", ""}) {
      if (seen_after_s.count(view)) continue;
      auto now = DelayCostMap(view);
      if (now.count({"lille", used})) after_ns[view] = now[{"lille", used}];
      if (after_ns[view] >= before_ns + 2e6) {
        seen_after_s[view] = absl::ToDoubleSeconds(absl::Now() - degraded_at);
      }
    }
    if (seen_after_s.size() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  REQUIRE(seen_after_s.size() == 2);
  WARN("degraded link lille->" << used << " (probe interval 5 s): "
                               << before_ns / 1e6 << " -> " << after_ns["lille"] / 1e6
                               << " ms one way in Lille's cost map after " << seen_after_s["lille"]
                               << " s, in the hub's after " << seen_after_s[""] << " s");

  // The next plan for the same pipeline avoids the degraded link.
  REQUIRE(wait_within_bound({used == "luxembourg" ? "nancy-cloud" : "luxembourg"}));
  std::map<std::string, std::string> second = ApplySensorFusion("sensor-fusion-2", home.path);
  CHECK(second["fusion"] != used);
  CHECK((second["fusion"] == "luxembourg" || second["fusion"] == "nancy-cloud"));
}

constexpr char kTemplateCam[] = R"(apiVersion: codeco.io/v1
kind: CodecoApp
metadata:
  name: tmpl-shop
spec:
  appName: tmpl-shop
  performanceProfile: latency
  codecoapp-msspec:
    - serviceName: web
      podspec:
        containers:
          - name: web
            image: registry.example/shop/web:3.1
            command: ["/srv/web"]
            args: ["--listen", ":8080"]
            ports:
              - {containerPort: 8080, name: http}
              - {containerPort: 9090, name: metrics, protocol: TCP}
            env:
              - {name: MODE, value: production}
              - {name: LOG_LEVEL, value: debug}
            resources:
              requests: {cpu: 200m, memory: 128Mi}
              limits: {cpu: 500m, memory: 256Mi}
    - serviceName: cache
      podspec:
        containers:
          - name: cache
            image: registry.example/shop/cache:7
            ports:
              - {containerPort: 6379, name: redis}
            env:
              - {name: MAXMEMORY, value: 64mb}
            resources:
              requests: {cpu: 100m, memory: 64Mi}
)";

TEST_CASE(
    "pods an MC's SWM creates through codecoctl up carry the CAM's template and plan labels") {
  Home home;
  CommandResult up =
      RunCommand({kCtl, "up", "--scenario", kScenario, "--no-prometheus"}, absl::Minutes(3));
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  const std::map<std::string, std::string> lms = LmsEndpoints(up.output);
  REQUIRE(lms.size() >= 6);
  REQUIRE(WaitUntilClustersReady(6));

  fs::path cam = home.path / "tmpl-shop.yaml";
  std::ofstream(cam) << kTemplateCam;
  CommandResult apply = RunCommand({kCtl, "apply", "-f", cam.string()}, absl::Seconds(30));
  INFO(apply.output);
  REQUIRE(apply.exit_code == 0);
  std::map<std::string, std::string> placed;
  for (absl::Time end = absl::Now() + absl::Seconds(90); placed.size() < 2 && absl::Now() < end;) {
    placed = PlacedClusters("tmpl-shop");
    if (placed.size() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  REQUIRE(placed.size() == 2);

  // What each service's container must be, exactly.
  struct Want {
    std::string image;
    std::vector<std::string> command, args;
    std::map<std::string, int> ports;  // name -> number
    std::map<std::string, std::string> env;
  };
  const std::map<std::string, Want> want = {
      {"web",
       {"registry.example/shop/web:3.1",
        {"/srv/web"},
        {"--listen", ":8080"},
        {{"http", 8080}, {"metrics", 9090}},
        {{"MODE", "production"}, {"LOG_LEVEL", "debug"}}}},
      {"cache",
       {"registry.example/shop/cache:7", {}, {}, {{"redis", 6379}}, {{"MAXMEMORY", "64mb"}}}}};
  std::map<std::string, int> seen;
  for (const auto& [cluster, endpoint] : lms) {
    for (const codeco::lms::v1::Pod& pod : PodsOf(endpoint, "tmpl-shop")) {
      INFO("pod " << pod.name() << " in " << cluster);
      const std::string service = pod.labels().at("codeco.io/service");
      REQUIRE(want.count(service) == 1);
      ++seen[service];
      CHECK(placed[service] == cluster);
      // Labelled with its plan and reservation, so a reconciler can match it.
      const std::string plan = "tmpl-shop." + pod.labels().at("codeco.io/plan-revision");
      CHECK(pod.labels().at("codeco.io/plan") == plan);
      CHECK(pod.labels().at("codeco.io/reservation") == plan + "." + cluster);
      REQUIRE(pod.containers_size() == 1);
      const codeco::lms::v1::Container& c = pod.containers(0);
      const Want& w = want.at(service);
      CHECK(c.image() == w.image);
      CHECK(std::vector<std::string>(c.command().begin(), c.command().end()) == w.command);
      CHECK(std::vector<std::string>(c.args().begin(), c.args().end()) == w.args);
      std::map<std::string, int> ports;
      for (const auto& p : c.ports()) ports[p.name()] = p.port();
      CHECK(ports == w.ports);
      CHECK(std::map<std::string, std::string>(c.env().begin(), c.env().end()) == w.env);
    }
  }
  CHECK(seen == std::map<std::string, int>{{"web", 1}, {"cache", 1}});

  // Deleting the application removes the pods through the MCs' Release.
  REQUIRE(RunCommand({kCtl, "delete", "app", "tmpl-shop"}, absl::Seconds(30)).exit_code == 0);
  size_t left = 1;
  for (absl::Time end = absl::Now() + absl::Seconds(60); left > 0 && absl::Now() < end;) {
    left = 0;
    for (const auto& [cluster, endpoint] : lms) left += PodsOf(endpoint, "tmpl-shop").size();
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  CHECK(left == 0);
}

// `codecoctl get tree -o json`, parsed; null when it fails.
nlohmann::json Tree() {
  CommandResult r = RunCommand({kCtl, "get", "tree", "-o", "json"}, absl::Seconds(30));
  if (r.exit_code != 0) return nullptr;
  return nlohmann::json::parse(r.output, nullptr, false);
}

// The node of `tree` named `name`, searched depth first; null when absent.
nlohmann::json Find(const nlohmann::json& nodes, const std::string& name) {
  for (const auto& n : nodes) {
    if (n.value("name", "") == name) return n;
    nlohmann::json below = Find(n.value("children", nlohmann::json::array()), name);
    if (!below.is_null()) return below;
  }
  return nullptr;
}

TEST_CASE(
    "a cluster tree registers each cluster under its parent and a cut site keeps its leaves") {
  Home home;
  CommandResult up =
      RunCommand({kCtl, "up", "--scenario", SourceDir() + "/examples/scenarios/edge-tree.yaml",
                  "--no-prometheus"},
                 absl::Minutes(3));
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  REQUIRE(WaitUntilClustersReady(7));
  nlohmann::json tree = Tree();
  INFO(tree.dump(2));
  REQUIRE(tree.is_object());
  REQUIRE(tree["clusters"].size() == 1);  // everything under the regional cluster
  const nlohmann::json& region = tree["clusters"][0];
  CHECK(region["name"] == "region");
  CHECK(region["subtree"]["clusters"] == 7);
  CHECK(region["subtree"]["nodes"] == 11);
  REQUIRE(region["children"].size() == 2);
  for (const char* site : {"site-a", "site-b"}) {
    const nlohmann::json node = Find(tree["clusters"], site);
    REQUIRE_FALSE(node.is_null());
    CHECK(node["subtree"]["clusters"] == 3);
    CHECK(node["children"].size() == 2);
  }
  CHECK_THAT(RunCommand({kCtl, "get", "tree"}, absl::Seconds(30)).output,
             Catch::Contains("|  `- leaf-a2"));

  // Flat mode: a mission addressed by name goes from the hub to each of its
  // clusters directly, and their states come back.
  const std::string mission_file = (home.path / "sensor.yaml").string();
  std::ofstream(mission_file) << R"(apiVersion: codeco.io/v1
kind: Mission
metadata: {name: sensor}
spec:
  placement: {clusters: [leaf-a1, leaf-b2]}
  workload:
    containers: [{name: probe, image: registry.example.org/probe:1, resources: {cpu: 100m, memory: 32Mi}}]
)";
  CommandResult applied = RunCommand({kCtl, "apply", "-f", mission_file}, absl::Seconds(30));
  INFO(applied.output);
  REQUIRE(applied.exit_code == 0);
  bool running = false;
  std::string missions;
  for (absl::Time end = absl::Now() + absl::Minutes(1); absl::Now() < end && !running;) {
    missions = RunCommand({kCtl, "get", "missions"}, absl::Seconds(30)).output;
    running = missions.find("2/2") != std::string::npos;
    if (!running) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  INFO(missions);
  CHECK(running);

  // site-a's links cut: it goes UNREACHABLE; its leaves, which report to
  // the hub themselves, stay Ready, and the region counts one unreachable.
  REQUIRE(RunCommand({kCtl, "fault", "cluster", "site-a", "--partition"}, absl::Seconds(30))
              .exit_code == 0);
  bool seen = false;
  for (absl::Time end = absl::Now() + absl::Minutes(2); absl::Now() < end && !seen;) {
    tree = Tree();
    const nlohmann::json site = tree.is_object() ? Find(tree["clusters"], "site-a") : nullptr;
    seen = !site.is_null() && site["health"] == "UNREACHABLE";
    if (!seen) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  INFO(tree.dump(2));
  REQUIRE(seen);
  for (const char* leaf : {"leaf-a1", "leaf-a2"})
    CHECK(Find(tree["clusters"], leaf)["health"] == "READY");
  CHECK(tree["clusters"][0]["subtree"]["unreachable_clusters"] == 1);
}

TEST_CASE("codecoctl up refuses a missing scenario") {
  Home home;
  CommandResult up = RunCommand({kCtl, "up", "--scenario", "/nonexistent.yaml"}, absl::Seconds(30));
  REQUIRE(up.exit_code == 2);
  REQUIRE_THAT(up.output, Catch::Contains("--scenario: no such file"));
}

TEST_CASE(
    "codecoctl up refuses a setting of a service the clusters do not run and starts nothing") {
  Home home;
  for (const char* flag : {"--set", "--set-members"}) {
    CommandResult up = RunCommand({kCtl, "up", "--scenario", FiveSiteScenario(), "--no-prometheus",
                                   flag, "scheduler.interval=1s"},
                                  absl::Minutes(1));
    INFO(up.output);
    CHECK(up.exit_code != 0);
    CHECK_THAT(up.output, Catch::Contains(std::string(flag) + ": "));
    CHECK_THAT(up.output, Catch::Contains("no service \"scheduler\""));
    // No run was recorded: nothing is left for `down` to stop.
    CommandResult down = RunCommand({kCtl, "down"}, absl::Seconds(30));
    CHECK_THAT(down.output, !Catch::Contains("Stopped"));
  }
}

}  // namespace
}  // namespace codeco::testing
