// `codecoctl up` on the five-site Grid'5000 scenario brings up the emulator,
// the hub and every cluster's services (mTLS) and Prometheus; later commands
// find the federation without flags; a link fault goes through; `codecoctl
// down` leaves no process behind.
#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <thread>

#include "absl/time/clock.h"

#include "nlohmann/json.hpp"
#include "process.h"

namespace codeco::testing {
namespace {

namespace fs = std::filesystem;

const std::string kCtl = std::string(CODECO_BIN_DIR) + "/codecoctl";
const std::string kScenario =
    std::string(CODECO_SOURCE_DIR) + "/examples/scenarios/grid5000-five-sites.yaml";

struct Home {
  Home() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("codeco-up-" + std::to_string(rd()));
    fs::create_directories(path);
    setenv("CODECO_HOME", path.c_str(), 1);
  }
  ~Home() {
    // Whatever happened, leave nothing running.
    RunCommand({kCtl, "down"}, absl::Seconds(60));
    fs::remove_all(path);
  }
  nlohmann::json State() const {
    std::ifstream in(path / "state.json");
    return nlohmann::json::parse(in);
  }
  fs::path path;
};

// True while `pid` runs. A process that exited but was not reaped yet (a
// zombie: its parent, `codecoctl up`, is gone and PID 1 may not reap) is not.
bool Alive(int pid) {
  if (kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

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

  // Prometheus, when installed, scrapes every service.
  std::string prometheus = state.value("prometheus", "");
  if (!prometheus.empty()) {
    bool scraped = false;
    std::string last;
    for (absl::Time end = absl::Now() + absl::Seconds(60); !scraped && absl::Now() < end;) {
      CommandResult q = RunCommand(
          {"/usr/bin/curl", "-s", prometheus + "/api/v1/query?query=count(up%3D%3D1)"},
          absl::Seconds(10));
      last = q.output;
      std::smatch m;
      scraped = std::regex_search(q.output, m, std::regex("\"(\\d+)\"\\]")) &&
                std::stoi(m[1]) == 4 + 6 * 6;
      if (!scraped) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    INFO(last);
    REQUIRE(scraped);
  }

  // The real bookinfo CodecoApp, applied unchanged through ACM, ends placed:
  // the clusters' agents register, CNC picks a neighborhood, SWM places every
  // service on a node of an emulated cluster within its channel bounds.
  bool registered = false;
  for (absl::Time end = absl::Now() + absl::Seconds(60); !registered && absl::Now() < end;) {
    CommandResult clusters = RunCommand({kCtl, "get", "clusters"}, absl::Seconds(30));
    size_t ready = 0;
    for (size_t at = clusters.output.find(" Ready "); at != std::string::npos;
         at = clusters.output.find(" Ready ", at + 1)) {
      ++ready;
    }
    registered = ready == 6;
    if (!registered) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  REQUIRE(registered);
  CommandResult apply = RunCommand(
      {kCtl, "apply", "-f", std::string(CODECO_SOURCE_DIR) + "/examples/cams/bookinfo.yaml"},
      absl::Seconds(30));
  INFO(apply.output);
  REQUIRE(apply.exit_code == 0);
  CommandResult describe;
  bool placed = false;
  for (absl::Time end = absl::Now() + absl::Seconds(90); !placed && absl::Now() < end;) {
    describe = RunCommand({kCtl, "describe", "app", "bookinfo"}, absl::Seconds(30));
    placed = describe.output.find("Channels (plan bookinfo/") != std::string::npos;
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

  // A second up while one runs is refused.
  REQUIRE(RunCommand({kCtl, "up", "--scenario", kScenario}, absl::Seconds(30)).exit_code != 0);

  CommandResult down = RunCommand({kCtl, "down"}, absl::Minutes(1));
  INFO(down.output);
  REQUIRE(down.exit_code == 0);
  for (int pid : pids) {
    INFO("pid " << pid);
    REQUIRE_FALSE(Alive(pid));
  }
  REQUIRE_FALSE(fs::exists(home.path / "state.json"));
}

TEST_CASE("codecoctl up refuses a missing scenario") {
  Home home;
  CommandResult up = RunCommand({kCtl, "up", "--scenario", "/nonexistent.yaml"}, absl::Seconds(30));
  REQUIRE(up.exit_code == 2);
  REQUIRE_THAT(up.output, Catch::Contains("--scenario: no such file"));
}

}  // namespace
}  // namespace codeco::testing
