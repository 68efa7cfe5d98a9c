// codecoctl apply against a real codeco-acm process prints one
// "warning: <path>: ..." line per CAM field ACM accepts but does not act on
// yet, and none of those for a CAM whose fields all take effect.
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>

#include "absl/time/clock.h"
#include "acm_test_util.h"
#include "process.h"

namespace codeco::ctl {
namespace {

namespace fs = std::filesystem;
using codeco::testing::ChildProcess;
using codeco::testing::CommandResult;
using codeco::testing::RunCommand;

TEST_CASE("codecoctl apply prints the fields not acted on yet as warnings") {
  const fs::path dir =
      fs::temp_directory_path() / ("codecoctl-warnings-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  ChildProcess acm({std::string(CODECO_BIN_DIR) + "/codeco-acm", "--role", "hub", "--insecure",
                    "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--data-dir",
                    (dir / "data").string()},
                   (dir / "acm.log").string());
  std::optional<std::string> line = acm.ReadLine(absl::Now() + absl::Seconds(60));
  REQUIRE(line.has_value());
  std::smatch m;
  REQUIRE(std::regex_search(*line, m, std::regex("listening on (127\\.0\\.0\\.1:[0-9]+)")));
  const std::string address = m[1].str();
  auto apply = [&](const std::string& name, const std::string& yaml) {
    fs::path file = dir / (name + ".yaml");
    std::ofstream(file) << yaml;
    CommandResult r = RunCommand({"/usr/bin/env", "HOME=" + dir.string(),
                                  std::string(CODECO_BIN_DIR) + "/codecoctl", "apply", "-f",
                                  file.string(), "--acm", address, "--insecure"},
                                 absl::Seconds(30));
    INFO("codecoctl apply " << name << " -> " << r.exit_code << "\n" << r.output);
    REQUIRE(r.exit_code == 0);
    return r.output;
  };

  std::string plain = apply("plain", acm::testing::SmallCam("plain"));
  REQUIRE_THAT(plain, Catch::Contains("application/plain created"));
  // (With no cluster registered it may warn that it waits for a neighborhood.)
  REQUIRE_THAT(plain, !Catch::Contains("not acted on"));

  std::string cam = acm::testing::SmallCam("gold");
  cam.replace(cam.find("  appName: gold\n"), std::string("  appName: gold\n").size(),
              "  appName: gold\n  qosClass: Gold\n  appEnergyLimit: 20%\n");
  std::string warned = apply("gold", cam);
  REQUIRE_THAT(warned, Catch::Contains("application/gold created"));
  REQUIRE_THAT(warned, Catch::Contains("warning: spec.qosClass: accepted but not acted on yet"));
  REQUIRE_THAT(warned,
               Catch::Contains("warning: spec.appEnergyLimit: accepted but not acted on yet"));

  acm.Stop(SIGTERM, absl::Now() + absl::Seconds(10));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace codeco::ctl
