// CODECO's recording rules over CODEF, with Debian's real Prometheus: promtool
// accepts deploy/prometheus/codeco-rules.yml and its unit tests pass; then a
// codef on loopback hosts one cluster, `codecoctl fault node --load` makes a
// load step on a node (and fails another), a pod runs with a constant
// profile, /usr/bin/prometheus (loopback, scraping every second with the
// configuration generator `codecoctl up` uses) scrapes the cluster's
// /metrics and evaluates the rules, and instance:node_cpu:rate1m and the
// other rules, read through /api/v1/query, match the emulated usage. The
// rules' [1m] windows need about a minute of samples: the test waits on the
// values with a generous deadline. Without Prometheus installed it fails
// saying what to install. Prometheus and codef are killed at the end.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "codeco/common/ports.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "federation_util.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "nlohmann/json.hpp"
#include "process.h"
#include "prometheus_config.h"

namespace codeco::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kPrometheus[] = "/usr/bin/prometheus";
constexpr char kPromtool[] = "/usr/bin/promtool";
constexpr char kCurl[] = "/usr/bin/curl";

void RequireInstalled(const char* binary) {
  INFO(binary << " is not installed: scripts/install-deps.sh installs Debian's prometheus "
                 "package (prometheus and promtool)");
  REQUIRE(fs::exists(binary));
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A temporary directory removed at the end of the test.
struct WorkDir {
  explicit WorkDir(const std::string& name)
      : path(fs::temp_directory_path() / absl::StrCat(name, "_", getpid())) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~WorkDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

// The values of an instant query, or nullopt when Prometheus does not answer
// or answers an error. `raw` gets the answer.
std::optional<std::vector<double>> Query(const std::string& prometheus, const std::string& expr,
                                         std::string* raw) {
  CommandResult result = RunCommand({kCurl, "-s", "-G", "--max-time", "10", "--data-urlencode",
                                     "query=" + expr, prometheus + "/api/v1/query"},
                                    absl::Seconds(20));
  *raw = result.output;
  if (result.exit_code != 0) return std::nullopt;
  nlohmann::json answer = nlohmann::json::parse(result.output, nullptr, false);
  if (answer.is_discarded() || answer.value("status", "") != "success") return std::nullopt;
  std::vector<double> values;
  for (const auto& sample : answer["data"]["result"]) {
    double v = 0;
    if (!absl::SimpleAtod(sample["value"][1].get<std::string>(), &v)) return std::nullopt;
    values.push_back(v);
  }
  return values;
}

TEST_CASE("promtool accepts the recording rules and their unit tests pass") {
  RequireInstalled(kPromtool);
  const std::string dir = SourceDir() + "/deploy/prometheus";
  CommandResult check =
      RunCommand({kPromtool, "check", "rules", dir + "/codeco-rules.yml"}, absl::Seconds(60));
  INFO(check.output);
  REQUIRE(check.exit_code == 0);
  REQUIRE_THAT(check.output, Catch::Contains("SUCCESS: 6 rules found"));
  CommandResult unit =
      RunCommand({kPromtool, "test", "rules", dir + "/codeco-rules.test.yml"}, absl::Seconds(60));
  INFO(unit.output);
  REQUIRE(unit.exit_code == 0);
  REQUIRE_THAT(unit.output, Catch::Contains("SUCCESS"));
}

constexpr char kScenario[] = R"(name: prometheus-rules
federation:
  hub: {name: hub}
  clusters:
    - name: edge
      pod_start_delay: 100ms
      nodes:
        - {name: n1, capacity: {cpu: 4, memory: 16Gi}, energy: {idle_watts: 100, max_watts: 200}}
        - {name: n2, capacity: {cpu: 2, memory: 4Gi}, energy: {idle_watts: 50, max_watts: 90}}
links:
  default: {rtt: 10ms}
)";

TEST_CASE("Prometheus evaluates the CODECO rules over an emulated cluster after a load step") {
#ifdef CODECO_SANITIZER
  // A minute of waiting for the rules' [1m] windows adds nothing a sanitizer
  // can find: the exporter's code runs under it in codef_core_test
  // (kube_metrics_test) and codef_server_test. The plain build runs this.
  WARN("left to the plain build under a sanitizer");
  return;
#endif
  RequireInstalled(kPrometheus);
  WorkDir work("prometheus_rules_test");
  const fs::path scenario = work.path / "scenario.yaml";
  std::ofstream(scenario) << kScenario;

  ChildProcess codef({std::string(CODECO_BIN_DIR) + "/codef", "--scenario", scenario.string(),
                      "--control-listen", "127.0.0.1:0", "--lms-port", "0", "--metrics-port", "0"},
                     (work.path / "codef.log").string());
  std::string lms;
  std::string metrics;
  std::string control;
  const absl::Time start_deadline = absl::Now() + absl::Seconds(60);
  while (control.empty()) {
    std::optional<std::string> line = codef.ReadLine(start_deadline);
    if (!line.has_value()) FAIL("codef did not start: " << ReadAll(work.path / "codef.log"));
    std::vector<std::string> words = absl::StrSplit(*line, ' ');
    if (words.size() == 8 && words[0] == "cluster" && words[1] == "edge") lms = words[5];
    if (words.size() == 3 && words[0] == "metrics" && words[1] == "edge") {
      absl::string_view url = words[2];
      REQUIRE(absl::ConsumePrefix(&url, "http://"));
      REQUIRE(absl::ConsumeSuffix(&url, "/metrics"));
      metrics = std::string(url);
    }
    constexpr absl::string_view kControl = "codef control listening on ";
    if (absl::StartsWith(*line, kControl)) control = line->substr(kControl.size());
  }
  REQUIRE(absl::StartsWith(metrics, "127.0.2.1:"));
  REQUIRE_FALSE(lms.empty());

  // The load step on n1, as a user makes it: half its CPU and 3Gi of memory
  // used outside its pods. n2 fails.
  const std::string ctl = CtlBinary();
  CommandResult step = RunCommand(
      {ctl, "fault", "node", "edge/n1", "--load", "50%", "--memory", "3Gi", "--codef", control},
      absl::Seconds(30));
  INFO(step.output);
  REQUIRE(step.exit_code == 0);
  REQUIRE_THAT(step.output, Catch::Contains("cpu 2 of 4, memory 3Gi"));
  CommandResult fail = RunCommand({ctl, "fault", "node", "edge/n2", "--fail", "--codef", control},
                                  absl::Seconds(30));
  INFO(fail.output);
  REQUIRE(fail.exit_code == 0);
  CommandResult bad = RunCommand(
      {ctl, "fault", "node", "edge/n1", "--load", "150%", "--codef", control}, absl::Seconds(30));
  REQUIRE(bad.exit_code == 2);

  // A pod on n1 using one core and 1Gi, Running before Prometheus starts.
  auto stub = codeco::lms::v1::LmsService::NewStub(
      grpc::CreateChannel(lms, grpc::InsecureChannelCredentials()));
  {
    codeco::lms::v1::CreatePodRequest request;
    codeco::lms::v1::Pod* pod = request.mutable_pod();
    pod->set_name("web");
    pod->set_node_name("n1");
    (*pod->mutable_annotations())["codef.codeco.io/usage-profile"] =
        "{type: constant, cpu: 1, memory: 1Gi}";
    auto* container = pod->add_containers();
    container->set_name("app");
    container->set_image("nginx:1.25");
    container->mutable_requests()->set_cpu_millicores(1000);
    container->mutable_requests()->set_memory_bytes(int64_t{1} << 30);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    codeco::lms::v1::CreatePodResponse response;
    grpc::Status status = stub->CreatePod(&context, request, &response);
    INFO(status.error_message());
    REQUIRE(status.ok());
  }
  bool running = false;
  for (absl::Time end = absl::Now() + absl::Seconds(60); !running && absl::Now() < end;) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    codeco::lms::v1::GetPodRequest request;
    request.set_name("web");
    codeco::lms::v1::GetPodResponse response;
    running = stub->GetPod(&context, request, &response).ok() &&
              response.pod().phase() == codeco::lms::v1::POD_PHASE_RUNNING;
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(running);

  // Prometheus with the configuration codecoctl up generates, scraping and
  // evaluating every second.
  ctl::PrometheusConfig config;
  config.comment = "prometheus_rules_test";
  config.scrape_interval = absl::Seconds(1);
  config.evaluation_interval = absl::Seconds(1);
  config.rule_files = {SourceDir() + "/deploy/prometheus/codeco-rules.yml"};
  config.codef = {{metrics, {{"cluster", "edge"}}}};
  const fs::path config_file = work.path / "prometheus.yml";
  std::ofstream(config_file) << ctl::PrometheusConfigYaml(config);
  absl::StatusOr<int> port = FreePort("127.0.0.1");
  REQUIRE(port.ok());
  const std::string listen = absl::StrCat("127.0.0.1:", *port);
  const std::string url = "http://" + listen;
  ChildProcess prometheus(
      {kPrometheus, "--config.file=" + config_file.string(),
       "--storage.tsdb.path=" + (work.path / "data").string(), "--web.listen-address=" + listen},
      (work.path / "prometheus.log").string());

  struct Expectation {
    std::string expr;
    double value;
    double tolerance;
  };
  const std::vector<Expectation> expected = {
      // CPU busy: (1 core of the pod + 2 cores of background) / 4 cores.
      {R"(instance:node_cpu:rate1m{cluster="edge",node="n1",instance="n1"})", 0.75, 0.02},
      // Memory used: (1Gi + 3Gi) / 16Gi.
      {R"(instance:node_memory:avg1m{cluster="edge",node="n1"})", 0.25, 0.001},
      {R"(pod:container_cpu:rate1m{cluster="edge",namespace="default",pod="web",node="n1"})", 1.0,
       0.03},
      {R"(pod:container_memory_working_set:avg1m{cluster="edge",pod="web"})", 1073741824.0, 1},
      // Power: 100 W + (200 - 100) W x 0.75.
      {R"(node:codeco_node_power_watts:avg1m{cluster="edge",node="n1"})", 175, 1},
      // Restarts per node: codef never restarts a container, but the join
      // of the restart counters to kube_pod_info puts web's 0 on n1.
      {R"(node:kube_pod_container_status_restarts:increase1h{cluster="edge",node="n1"})", 0, 0},
      {R"(kube_node_status_condition{cluster="edge",node="n2",condition="Ready",status="false"})",
       1, 0},
      {R"(up{job="codef",cluster="edge"})", 1, 0},
      // A failed node's exporter is down: no busy share is recorded for it.
      {R"(count(instance:node_cpu:rate1m{node="n2"}) or vector(0))", 0, 0},
  };
  std::map<std::string, std::string> last;
  bool matched = false;
  const absl::Time deadline = absl::Now() + absl::Seconds(200);
  while (!matched && absl::Now() < deadline) {
    matched = true;
    for (const Expectation& e : expected) {
      std::string raw;
      std::optional<std::vector<double>> values = Query(url, e.expr, &raw);
      last[e.expr] = raw;
      if (!values.has_value() || values->size() != 1 ||
          std::abs((*values)[0] - e.value) > e.tolerance) {
        matched = false;
        break;
      }
    }
    if (!matched) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  for (const auto& [expr, raw] : last) UNSCOPED_INFO(expr << " -> " << raw);
  INFO("prometheus log: " << ReadAll(work.path / "prometheus.log").substr(0, 4000));
  REQUIRE(matched);

  REQUIRE(prometheus.Stop(SIGTERM, absl::Now() + absl::Seconds(30)).has_value());
  REQUIRE(codef.Stop(SIGTERM, absl::Now() + absl::Seconds(30)) == 0);
}

}  // namespace
}  // namespace codeco::testing
