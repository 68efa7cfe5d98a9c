#include "acm/core/cam_parser.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"

namespace codeco::acm {
namespace {

namespace fs = std::filesystem;
using v1::ApplicationSpec;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ParsedCam ParseExample(const std::string& name) {
  absl::StatusOr<ParsedCam> cam = ParseCam(ReadFile(fs::path(ACM_EXAMPLES_DIR) / name));
  INFO(name << ": " << cam.status().ToString());
  REQUIRE(cam.ok());
  return *std::move(cam);
}

const v1::ServiceSpec& Service(const ApplicationSpec& spec, const std::string& name) {
  for (const auto& s : spec.services()) {
    if (s.name() == name) return s;
  }
  FAIL("no service " << name);
  return spec.services(0);
}

// The path of the first error: the text before the first ": " of the first line.
std::string FirstErrorPath(const absl::Status& status) {
  std::string message(status.message());
  std::string first = message.substr(0, message.find('\n'));
  return first.substr(0, first.find(": "));
}

TEST_CASE("the real bookinfo CodecoApp parses unchanged with exact quantities") {
  ParsedCam cam = ParseExample("bookinfo.yaml");
  const ApplicationSpec& spec = cam.spec;
  REQUIRE(cam.form == CamForm::kCodecoApp);
  REQUIRE(spec.app_name() == "bookinfo");
  REQUIRE(spec.qos_class() == v1::QOS_CLASS_GOLD);
  REQUIRE(spec.security_class() == "High");
  REQUIRE(spec.app_energy_limit_percent() == 20);
  REQUIRE(spec.performance_profile() == common::v1::PERFORMANCE_PROFILE_LATENCY);
  REQUIRE(spec.services_size() == 4);
  REQUIRE(cam.labels.at("app") == "bookinfo");

  const v1::ServiceSpec& page = Service(spec, "productpage");
  REQUIRE(page.image() == "docker.io/istio/examples-bookinfo-productpage-v1:1.17.0");
  REQUIRE(page.replicas() == 1);
  REQUIRE(page.requests().cpu_millicores() == 200);
  REQUIRE(page.requests().memory_bytes() == 256LL * 1024 * 1024);
  REQUIRE(page.limits().cpu_millicores() == 500);
  REQUIRE(page.limits().memory_bytes() == 512LL * 1024 * 1024);
  REQUIRE(page.network_bandwidth_bps() == 1'200'000);  // "1.2" Mbit/s
  REQUIRE(page.network_latency_ns() == 3'000'000);     // "3" ms
  REQUIRE(page.ports_size() == 1);
  REQUIRE(page.ports(0).port() == 9080);
  REQUIRE(page.channels_size() == 2);

  const v1::Channel& details = page.channels(0);
  REQUIRE(details.name() == "productpage-details");
  REQUIRE(details.from_service() == "productpage");
  REQUIRE(details.to_service() == "details");
  REQUIRE(details.service_class() == common::v1::SERVICE_CLASS_BESTEFFORT);
  REQUIRE(details.min_bandwidth_bps() == 5'000'000);
  REQUIRE(details.max_delay_ns() == 10'000'000);  // "10e-3" seconds

  const v1::Channel& reviews = page.channels(1);
  REQUIRE(reviews.service_class() == common::v1::SERVICE_CLASS_ASSURED);
  REQUIRE(reviews.to_port() == 9080);
  REQUIRE(reviews.min_bandwidth_bps() == 10'000'000);
  REQUIRE(reviews.max_delay_ns() == 20'000'000);
  REQUIRE(reviews.frame_size_bytes() == 500);
  REQUIRE(reviews.send_interval_ns() == 10'000'000);

  int assured = 0;
  for (const auto& s : spec.services()) {
    for (const auto& c : s.channels())
      assured += c.service_class() == common::v1::SERVICE_CLASS_ASSURED;
  }
  REQUIRE(assured == 1);
}

TEST_CASE("the codeco.io/v1 extensions parse") {
  ParsedCam cam = ParseExample("shop-extended.yaml");
  const ApplicationSpec& spec = cam.spec;
  REQUIRE(cam.form == CamForm::kCodecoAppExtended);
  REQUIRE(spec.qos_class() == v1::QOS_CLASS_SILVER);
  REQUIRE(spec.performance_profile() == common::v1::PERFORMANCE_PROFILE_CUSTOM);
  REQUIRE(spec.custom_profile_weights().at("latency") == 2.0);
  REQUIRE(spec.intents().allowed_countries_size() == 3);
  REQUIRE(spec.intents().allowed_regions(1) == "eu-central");
  REQUIRE(spec.intents().origin() == "eu-west");
  REQUIRE(spec.intents().max_latency_to_origin_ns() == 30'000'000);
  REQUIRE(spec.intents().deadline().seconds() == 1796112000);  // 2026-12-01T08:00:00Z
  REQUIRE(spec.placement().policy() == v1::PLACEMENT_POLICY_WORST_FIT);
  REQUIRE(spec.placement().number_of_locations() == 2);
  REQUIRE(spec.placement().bursting());

  const v1::ServiceSpec& web = Service(spec, "web");
  REQUIRE(web.replicas() == 3);
  REQUIRE(web.availability_kpi() == 99);
  REQUIRE(web.autoscaling().min_replicas() == 2);
  REQUIRE(web.autoscaling().max_replicas() == 10);
  REQUIRE(web.autoscaling().target_cpu_utilization_percent() == 70);
  REQUIRE(web.autoscaling().scale_down_cooldown_ns() == 300'000'000'000LL);
  REQUIRE(web.channels(0).min_bandwidth_bps() == 100'000'000);
  REQUIRE(web.channels(0).max_delay_ns() == 5'000'000);

  const v1::ServiceSpec& db = Service(spec, "db");
  REQUIRE(db.stateful());
  REQUIRE(db.availability_kpi() == 100);
  REQUIRE(db.data_locality() == "eu-west");
  REQUIRE(db.requests().cpu_millicores() == 2000);
  REQUIRE(db.requests().memory_bytes() == 4LL << 30);
}

TEST_CASE("mck8s MultiClusterDeployments parse") {
  ParsedCam traffic = ParseExample("mcd-traffic-aware.yaml");
  REQUIRE(traffic.form == CamForm::kMultiClusterDeployment);
  REQUIRE(traffic.spec.app_name() == "mcd-app-1");
  REQUIRE(traffic.spec.placement().policy() == v1::PLACEMENT_POLICY_TRAFFIC_AWARE);
  REQUIRE(traffic.spec.placement().number_of_locations() == 2);
  REQUIRE(traffic.spec.placement().bursting());
  REQUIRE(traffic.spec.services_size() == 1);
  REQUIRE(traffic.spec.services(0).replicas() == 5);
  REQUIRE(traffic.spec.services(0).requests().cpu_millicores() == 500);
  REQUIRE(traffic.spec.services(0).requests().memory_bytes() == 512LL << 20);
  REQUIRE(traffic.labels.at("tier") == "backend");

  ParsedCam affinity = ParseExample("mcd-cluster-affinity.yaml");
  REQUIRE(affinity.spec.placement().policy() == v1::PLACEMENT_POLICY_CLUSTER_AFFINITY);
  REQUIRE(affinity.spec.placement().preferred_clusters_size() == 2);
  REQUIRE(affinity.spec.placement().preferred_clusters(1) == "cluster5");
  REQUIRE(affinity.spec.placement().substitution());
  REQUIRE(affinity.spec.services(0).replicas() == 4);
}

TEST_CASE("a MultiClusterJob and a CodecoApp job block parse into a job") {
  ParsedCam mcj = ParseExample("mcj-batch.yaml");
  REQUIRE(mcj.form == CamForm::kMultiClusterDeployment);
  REQUIRE(mcj.spec.services_size() == 1);
  const v1::ServiceSpec& render = mcj.spec.services(0);
  REQUIRE(render.has_job());
  CHECK(render.job().completions() == 3);
  CHECK(render.job().parallelism() == 2);
  CHECK(render.job().backoff_limit() == 1);
  CHECK(render.replicas() == 2);  // two pods at a time
  CHECK(mcj.spec.placement().number_of_locations() == 2);
  CHECK(mcj.warnings.empty());

  const std::string codeco_app = R"(apiVersion: codeco.io/v1
kind: CodecoApp
metadata: {name: nightly}
spec:
  appName: nightly
  codecoapp-msspec:
    - serviceName: api
      podspec:
        containers: [{name: api, image: api:1}]
    - serviceName: report
      job: {completions: 4, parallelism: 2, backoffLimit: 3}
      podspec:
        restartPolicy: OnFailure
        containers: [{name: report, image: report:1}]
)";
  absl::StatusOr<ParsedCam> parsed = ParseCam(codeco_app);
  REQUIRE(parsed.ok());
  CHECK_FALSE(Service(parsed->spec, "api").has_job());
  const v1::ServiceSpec& report = Service(parsed->spec, "report");
  CHECK(report.job().completions() == 4);
  CHECK(report.job().parallelism() == 2);
  CHECK(report.job().backoff_limit() == 3);
  CHECK(report.replicas() == 2);  // two pods at a time
  REQUIRE(ValidateApplicationSpec(parsed->spec).ok());
  // OnFailure runs as Never: said so, by its path; the counts take effect.
  REQUIRE(parsed->warnings.size() == 1);
  CHECK_THAT(parsed->warnings[0],
             Catch::StartsWith("spec.codecoapp-msspec[1].podspec."
                               "restartPolicy: accepted but not acted on yet"));
  v1::Job wide;
  wide.set_completions(3);
  wide.set_parallelism(10);
  CHECK(JobReplicas(wide) == 3);
}

TEST_CASE("a parsed spec's job is validated field by field") {
  ParsedCam mcj = ParseExample("mcj-batch.yaml");
  ApplicationSpec spec = mcj.spec;
  spec.mutable_services(0)->set_replicas(5);
  CHECK(FirstErrorPath(ValidateApplicationSpec(spec)) == "spec.services[0].replicas");
  spec = mcj.spec;
  spec.mutable_services(0)->mutable_job()->set_completions(0);
  CHECK(FirstErrorPath(ValidateApplicationSpec(spec)) == "spec.services[0].job.completions");
  spec = mcj.spec;
  spec.mutable_services(0)->mutable_job()->set_backoff_limit(-1);
  CHECK(FirstErrorPath(ValidateApplicationSpec(spec)) == "spec.services[0].job.backoff_limit");
  spec = mcj.spec;
  spec.mutable_services(0)->set_stateful(true);
  CHECK(FirstErrorPath(ValidateApplicationSpec(spec)) == "spec.services[0].stateful");
  spec = mcj.spec;
  spec.mutable_services(0)->mutable_autoscaling()->set_max_replicas(3);
  spec.mutable_services(0)->mutable_autoscaling()->set_min_replicas(1);
  CHECK(FirstErrorPath(ValidateApplicationSpec(spec)) == "spec.services[0].autoscaling");
}

TEST_CASE("every example CAM parses and its spec validates") {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(ACM_EXAMPLES_DIR)) {
    if (entry.path().extension() != ".yaml") continue;
    ParsedCam cam = ParseExample(entry.path().filename().string());
    INFO(entry.path());
    REQUIRE(ValidateApplicationSpec(cam.spec).ok());
    ++count;
  }
  REQUIRE(count >= 4);
}

TEST_CASE("every bad CAM is INVALID_ARGUMENT naming its field path") {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(ACM_TESTDATA_DIR) / "bad")) {
    std::string text = ReadFile(entry.path());
    const std::string marker = "# expect: ";
    REQUIRE(absl::StartsWith(text, marker));
    std::string expected = text.substr(marker.size(), text.find('\n') - marker.size());
    absl::StatusOr<ParsedCam> cam = ParseCam(text);
    INFO(entry.path().filename() << " -> " << cam.status().ToString());
    REQUIRE(cam.status().code() == absl::StatusCode::kInvalidArgument);
    REQUIRE(FirstErrorPath(cam.status()) == expected);
    ++count;
  }
  REQUIRE(count >= 40);
}

TEST_CASE("oversized documents are refused before parsing") {
  std::string big(2 << 20, ' ');
  absl::StatusOr<ParsedCam> cam = ParseCam(big);
  REQUIRE(cam.status().code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(FirstErrorPath(cam.status()) == "document");
  REQUIRE_THAT(std::string(cam.status().message()), Catch::Contains("larger than"));
}

TEST_CASE("an alias bomb is refused by the node budget without being expanded") {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  std::string prev = "a";
  for (char c = 'b'; c <= 'j'; ++c) {
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 10; ++i) bomb += (i ? ", *" : "*") + prev;
    bomb += "]\n";
    prev = std::string(1, c);
  }
  absl::StatusOr<ParsedCam> cam = ParseCam(bomb);  // 10^10 nodes if expanded
  REQUIRE(cam.status().code() == absl::StatusCode::kInvalidArgument);
  REQUIRE_THAT(std::string(cam.status().message()), Catch::Contains("aliases are expanded"));
}

TEST_CASE("a CAM with several mistakes reports all of them") {
  std::string text = ReadFile(fs::path(ACM_EXAMPLES_DIR) / "bookinfo.yaml");
  auto replace = [&](const std::string& from, const std::string& to) {
    size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
  };
  replace("qosClass: Gold", "qosClass: Diamond");
  replace("serviceName: ratings\n            port", "serviceName: Rating\n            port");
  absl::StatusOr<ParsedCam> cam = ParseCam(text);
  REQUIRE(cam.status().code() == absl::StatusCode::kInvalidArgument);
  std::string message(cam.status().message());
  REQUIRE_THAT(message, Catch::StartsWith("spec.qosClass: "));
  REQUIRE_THAT(message, Catch::Contains("spec.codecoapp-msspec[2].serviceChannels[0].otherService"
                                        ".serviceName: \"Rating\" is not a DNS label"));
}

TEST_CASE("ValidateApplicationSpec names proto field paths") {
  ApplicationSpec spec = ParseExample("bookinfo.yaml").spec;
  REQUIRE(ValidateApplicationSpec(spec).ok());
  spec.mutable_services(1)->add_channels()->set_name("x");
  absl::Status status = ValidateApplicationSpec(spec);
  REQUIRE(status.code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(FirstErrorPath(status) == "spec.services[1].channels[0].to_service");
  spec = ParseExample("bookinfo.yaml").spec;
  spec.mutable_services(0)->mutable_requests()->set_cpu_millicores(-1);
  REQUIRE(FirstErrorPath(ValidateApplicationSpec(spec)) ==
          "spec.services[0].requests.cpu_millicores");
  spec = ParseExample("bookinfo.yaml").spec;
  spec.mutable_placement()->set_number_of_locations(-1);
  REQUIRE(FirstErrorPath(ValidateApplicationSpec(spec)) == "spec.placement.number_of_locations");
}

TEST_CASE("DNS labels") {
  REQUIRE(IsDnsLabel("a"));
  REQUIRE(IsDnsLabel("web-1"));
  REQUIRE_FALSE(IsDnsLabel(""));
  REQUIRE_FALSE(IsDnsLabel("-a"));
  REQUIRE_FALSE(IsDnsLabel("a-"));
  REQUIRE_FALSE(IsDnsLabel("A"));
  REQUIRE_FALSE(IsDnsLabel("a_b"));
  REQUIRE_FALSE(IsDnsLabel(std::string(64, 'a')));
  REQUIRE(IsDnsLabel(std::string(63, 'a')));
}

}  // namespace
}  // namespace codeco::acm
