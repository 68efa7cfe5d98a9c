// The prometheus.yml `codecoctl up` writes: valid YAML with the intervals,
// the rule files, the services' job and CODEF's job (honor_labels, one
// target per emulated cluster).
#include "prometheus_config.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "yaml-cpp/yaml.h"

namespace codeco::ctl {
namespace {

TEST_CASE("the Prometheus configuration scrapes services and CODEF and loads the rules") {
  PrometheusConfig config;
  config.comment = "test";
  config.scrape_interval = absl::Seconds(5);
  config.evaluation_interval = absl::Milliseconds(1500);
  config.rule_files = {"/run/x/codeco-rules.yml"};
  config.services = {{"127.0.2.1:40001", {{"cluster", "rennes"}, {"service", "acm"}}}};
  config.codef = {{"127.0.2.1:40100", {{"cluster", "rennes"}}},
                  {"127.0.3.1:40200", {{"cluster", "o'brien"}}}};
  std::string text = PrometheusConfigYaml(config);
  INFO(text);
  YAML::Node root = YAML::Load(text);
  REQUIRE(root["global"]["scrape_interval"].as<std::string>() == "5s");
  REQUIRE(root["global"]["evaluation_interval"].as<std::string>() == "1500ms");
  REQUIRE(root["rule_files"][0].as<std::string>() == "/run/x/codeco-rules.yml");
  YAML::Node jobs = root["scrape_configs"];
  REQUIRE(jobs.size() == 2);
  REQUIRE(jobs[0]["job_name"].as<std::string>() == "codeco");
  REQUIRE(jobs[0]["static_configs"][0]["targets"][0].as<std::string>() == "127.0.2.1:40001");
  REQUIRE(jobs[0]["static_configs"][0]["labels"]["service"].as<std::string>() == "acm");
  REQUIRE(jobs[1]["job_name"].as<std::string>() == "codef");
  REQUIRE(jobs[1]["honor_labels"].as<bool>());
  REQUIRE(jobs[1]["static_configs"].size() == 2);
  REQUIRE(jobs[1]["static_configs"][1]["labels"]["cluster"].as<std::string>() == "o'brien");
}

TEST_CASE("the recording rules are found in the source tree") {
  REQUIRE(std::filesystem::exists(RulesFileInSource()));
}

}  // namespace
}  // namespace codeco::ctl
