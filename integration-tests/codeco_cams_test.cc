// CodecoApp documents as CODECO's team writes them (examples/cams/codeco/)
// apply unchanged on the five-site federation and end Running: several
// CodecoApps of one application, channels across them (one pending), kubectl
// metadata, Kubernetes Services in the same file. `codecoctl delete -f` then
// takes the CodecoApps of a file out again.
#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "federation_util.h"
#include "process.h"

namespace codeco::testing {
namespace {

namespace fs = std::filesystem;

const std::string& kCtl = CtlBinary();
const std::string& kScenario = FiveSiteScenario();
const fs::path kCams = fs::path(SourceDir()) / "examples" / "cams" / "codeco";
using Home = FederationHome;

TEST_CASE("CODECO's own CodecoApp documents apply unchanged and end Running") {
  Home home;
  CommandResult up = RunCommand({kCtl, "up", "--scenario", kScenario, "--no-prometheus"},
                                absl::Minutes(3));
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  REQUIRE(WaitUntilClustersReady(6));

  // file -> the application its CodecoApps make.
  const std::vector<std::pair<std::string, std::string>> files = {
      {"bookinfo-fair.yaml", "bookinfo-fair-app"},
      {"dummy-backend-frontends.yaml", "dummy-swm-app"},
      {"perfapp-postgres.yaml", "perfapp-pg-swmapp"},
      {"skupper-hello.yaml", "cam-n1-it1-20251201120000-swmapp"},
  };
  for (const auto& [file, app] : files) {
    CommandResult apply =
        RunCommand({kCtl, "apply", "-f", (kCams / file).string()}, absl::Seconds(60));
    INFO(file << "\n" << apply.output);
    REQUIRE(apply.exit_code == 0);
    REQUIRE_THAT(apply.output, Catch::Contains("application/" + app));
  }
  // The Services after bookinfo's CodecoApp are skipped, saying so.
  CommandResult again =
      RunCommand({kCtl, "apply", "-f", (kCams / "bookinfo-fair.yaml").string()}, absl::Seconds(60));
  REQUIRE_THAT(again.output, Catch::Contains("(v1/Service productpage) skipped"));

  std::string apps;
  std::string waiting;
  for (absl::Time end = absl::Now() + absl::Seconds(120); absl::Now() < end;) {
    apps = RunCommand({kCtl, "get", "apps"}, absl::Seconds(30)).output;
    waiting.clear();
    for (const auto& [file, app] : files) {
      if (!std::regex_search(apps, std::regex("\\n" + app + " +Running +Ok"))) waiting = app;
    }
    if (waiting.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  INFO(apps);
  INFO("not Running: " << waiting);
  REQUIRE(waiting.empty());
  // Three CodecoApps, one application of three services.
  CommandResult describe = RunCommand({kCtl, "describe", "app", "dummy-swm-app"},
                                      absl::Seconds(30));
  INFO(describe.output);
  for (const char* service : {"front-end-1-1-1", "backend-1-1", "front-end-1-1-2"}) {
    REQUIRE(std::regex_search(
        describe.output,
        std::regex(std::string("\\n  ") + service +
                   " +(rennes|nantes|lille|grenoble|luxembourg|nancy-cloud) +\\S+ +dummy-swm-app-")));
  }

  // delete -f: every CodecoApp of the file leaves; the application goes with the last.
  CommandResult deleted =
      RunCommand({kCtl, "delete", "-f", (kCams / "dummy-backend-frontends.yaml").string()},
                 absl::Seconds(60));
  INFO(deleted.output);
  REQUIRE(deleted.exit_code == 0);
  REQUIRE_THAT(deleted.output,
               Catch::Contains("codecoapp/acm-frontend-1-1-1 deleted: its services left"));
  bool gone = false;
  for (absl::Time end = absl::Now() + absl::Seconds(60); !gone && absl::Now() < end;) {
    apps = RunCommand({kCtl, "get", "apps"}, absl::Seconds(30)).output;
    gone = apps.find("\ndummy-swm-app ") == std::string::npos;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  INFO(apps);
  REQUIRE(gone);
}

}  // namespace
}  // namespace codeco::testing
