// The codef binary as a user starts it: on the five-site scenario it prints
// one line per cluster and its control address, every cluster's LMS answers
// ListNodes with the scenario's nodes, the control API lists the clusters,
// and SIGTERM stops it cleanly, leaving the recorded CSV and the report.
// `codef --simulate` on a small scenario writes CSV files that parse, the
// report and its SVG plots; bad flags exit with code 2.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "codeco/codef/v1/codef_service.grpc.pb.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "process.h"
#include "xml_check.h"

namespace codeco::codef {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  INFO(path.string());
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::chrono::system_clock::time_point In(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

TEST_CASE("codef hosts the five-site scenario and stops on SIGTERM") {
  fs::path work = fs::temp_directory_path() / ("codef_binary_test_" + std::to_string(getpid()));
  fs::remove_all(work);
  fs::create_directories(work);
  codeco::testing::ChildProcess codef(
      {std::string(CODECO_BIN_DIR) + "/codef", "--scenario",
       std::string(CODEF_EXAMPLES_DIR) + "/grid5000-five-sites.yaml", "--state-dir",
       (work / "state").string(), "--control-listen", "127.0.0.1:0", "--lms-port", "0", "--record",
       "--output-dir", (work / "results").string()},
      (work / "stderr.log").string());

  // "cluster NAME ip IP lms ADDR relay ADDR" lines, then the control line.
  std::map<std::string, std::string> lms;
  std::map<std::string, std::string> ips;
  std::map<std::string, std::string> relays;
  std::string control;
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (control.empty()) {
    auto line = codef.ReadLine(deadline);
    if (!line.has_value()) {
      std::ifstream err(work / "stderr.log");
      std::stringstream ss;
      ss << err.rdbuf();
      FAIL("codef did not start: " << ss.str());
    }
    std::vector<std::string> words = absl::StrSplit(*line, ' ');
    if (words.size() == 8 && words[0] == "cluster") {
      ips[words[1]] = words[3];
      lms[words[1]] = words[5];
      relays[words[1]] = words[7];
    } else if (absl::StartsWith(*line, "codef control listening on ")) {
      control = line->substr(std::string("codef control listening on ").size());
    }
  }
  REQUIRE(ips.size() == 7);
  REQUIRE(ips["hub"] == "127.0.1.1");
  REQUIRE(ips["rennes"] == "127.0.2.1");
  REQUIRE(ips["nancy-cloud"] == "127.0.7.1");
  REQUIRE(lms["hub"] == "-");

  std::map<std::string, int> expected_nodes = {{"rennes", 5},     {"nantes", 5},
                                               {"lille", 5},      {"grenoble", 5},
                                               {"luxembourg", 5}, {"nancy-cloud", 4}};
  for (const auto& [name, count] : expected_nodes) {
    INFO(name);
    REQUIRE(absl::StartsWith(lms[name], ips[name] + ":"));
    auto stub = codeco::lms::v1::LmsService::NewStub(
        grpc::CreateChannel(lms[name], grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    codeco::lms::v1::ListNodesResponse nodes;
    grpc::Status status = stub->ListNodes(&context, {}, &nodes);
    INFO(status.error_message());
    REQUIRE(status.ok());
    REQUIRE(nodes.nodes_size() == count);
    int64_t cpu = name == "rennes" || name == "luxembourg" ? 4000
                  : name == "nancy-cloud"                  ? 8000
                                                           : 2000;
    for (const auto& node : nodes.nodes()) {
      REQUIRE(node.capacity().cpu_millicores() == cpu);
      REQUIRE(node.labels().at("codeco.io/cluster") == name);
    }
  }

  auto control_stub = codeco::codef::v1::CodefService::NewStub(
      grpc::CreateChannel(control, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(10)));
  codeco::codef::v1::ListClustersResponse clusters;
  REQUIRE(control_stub->ListClusters(&context, {}, &clusters).ok());
  REQUIRE(clusters.clusters_size() == 7);
  REQUIRE(clusters.clusters(1).lms_endpoint() == lms["rennes"]);
  REQUIRE(fs::exists(work / "state" / "endpoints.json"));

  // Traffic from Rennes to Lille through Rennes' relay pays the study's RTT
  // (23.26 ms; a lower bound, so the check cannot fail on a slow machine),
  // stops while Lille is partitioned and flows again once it heals.
  REQUIRE(absl::StartsWith(relays["rennes"], "127.0.2.1:"));
  for (const char* variable : {"no_proxy", "NO_PROXY", "no_grpc_proxy"}) unsetenv(variable);
  grpc::ChannelArguments args;
  args.SetString("grpc.http_proxy", "http://" + relays["rennes"]);
  auto via_relay = codeco::lms::v1::LmsService::NewStub(
      grpc::CreateCustomChannel(lms["lille"], grpc::InsecureChannelCredentials(), args));
  auto list_nodes = [&](absl::Duration timeout) {
    grpc::ClientContext call;
    call.set_deadline(In(timeout));
    codeco::lms::v1::ListNodesResponse nodes;
    return via_relay->ListNodes(&call, {}, &nodes);
  };
  REQUIRE(list_nodes(absl::Seconds(10)).ok());  // connects
  absl::Time before = absl::Now();
  REQUIRE(list_nodes(absl::Seconds(10)).ok());
  REQUIRE(absl::Now() - before >= absl::Microseconds(23260));

  codeco::codef::v1::PartitionClusterRequest partition;
  partition.set_cluster("lille");
  codeco::codef::v1::PartitionClusterResponse partitioned;
  grpc::ClientContext partition_context;
  partition_context.set_deadline(In(absl::Seconds(10)));
  REQUIRE(control_stub->PartitionCluster(&partition_context, partition, &partitioned).ok());
  grpc::Status cut = list_nodes(absl::Milliseconds(500));
  REQUIRE(cut.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
  codeco::codef::v1::HealClusterRequest heal;
  heal.set_cluster("lille");
  codeco::codef::v1::HealClusterResponse healed;
  grpc::ClientContext heal_context;
  heal_context.set_deadline(In(absl::Seconds(10)));
  REQUIRE(control_stub->HealCluster(&heal_context, heal, &healed).ok());
  REQUIRE(list_nodes(absl::Seconds(10)).ok());

  REQUIRE(codef.Stop(SIGTERM, absl::Now() + absl::Seconds(20)) == 0);
  // --record wrote the scenario's metrics, at least the final sample of all 29 nodes.
  std::ifstream energy(work / "results" / "node_energy.csv");
  std::string header;
  REQUIRE(std::getline(energy, header));
  REQUIRE(header == "time_s,cluster,node,watts");
  int rows = 0;
  for (std::string row; std::getline(energy, row);) ++rows;
  REQUIRE(rows >= 29);
  REQUIRE(fs::exists(work / "results" / "pod_phases.csv"));
  // output.report is on: the report was written from the recorded CSV at exit.
  std::ifstream report_file(work / "results" / "report.md");
  std::stringstream report;
  report << report_file.rdbuf();
  REQUIRE(report.str().find("| mode | emulate |") != std::string::npos);
  REQUIRE(report.str().find("| rennes | 0.0 % | 0.0 % |") != std::string::npos);
  for (const char* svg : {"pending_pods.svg", "cpu_allocation.svg", "node_power.svg"}) {
    REQUIRE(testing::CheckXml(ReadFile(work / "results" / svg)).error.empty());
  }
  fs::remove_all(work);
}

// Checks that `text` is a CSV table: a header with `columns`, at least one
// row, every row as wide as the header, a numeric first column.
void CheckCsv(const std::string& text, const std::string& columns) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  REQUIRE(lines.size() >= 2);
  REQUIRE(lines[0] == columns);
  size_t width = std::count(columns.begin(), columns.end(), ',') + 1;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> cells = absl::StrSplit(lines[i], ',');
    INFO(lines[i]);
    REQUIRE(cells.size() == width);
    double t = 0;
    REQUIRE(absl::SimpleAtod(cells[0], &t));
  }
}

TEST_CASE("codef --simulate writes the CSV files and the report of a small scenario") {
  fs::path work = fs::temp_directory_path() / ("codef_simulate_test_" + std::to_string(getpid()));
  fs::remove_all(work);
  auto result = codeco::testing::RunCommand(
      {std::string(CODECO_BIN_DIR) + "/codef", "--simulate", "--scenario",
       std::string(CODEF_TESTDATA_DIR) + "/sim_small.yaml", "--out", (work / "out").string(),
       "--policy", "kubefed", "--policy", "codeco"},
      absl::Seconds(60));
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  REQUIRE(result.output.find("policy kubefed: simulated 1200s") != std::string::npos);
  REQUIRE(result.output.find("policy codeco: simulated 1200s") != std::string::npos);
  for (const char* policy : {"kubefed", "codeco"}) {
    fs::path dir = work / "out" / policy;
    INFO(dir.string());
    CheckCsv(ReadFile(dir / "pending_pods.csv"),
             "time_s,pending,unplaced,placed,unplaced_cpu_millicores,placed_cpu_millicores");
    CheckCsv(ReadFile(dir / "node_usage.csv"),
             "time_s,cluster,node,cpu_millicores,memory_bytes,cpu_utilization,"
             "cpu_requested_millicores,cpu_allocatable_millicores");
    CheckCsv(ReadFile(dir / "node_energy.csv"), "time_s,cluster,node,watts");
    CheckCsv(ReadFile(dir / "pod_phases.csv"), "time_s,cluster,pending,running,succeeded,failed");
    CheckCsv(ReadFile(dir / "placement.csv"), "time_s,cluster,node,pod,phase");
    std::string report = ReadFile(dir / "report.md");
    REQUIRE(report.find(std::string("| policy | ") + policy + " |") != std::string::npos);
    REQUIRE(report.find("| tasks | 120 |") != std::string::npos);
    REQUIRE(report.find("node_fail edge-a/worker-1: ok") != std::string::npos);
    for (const char* svg : {"pending_pods.svg", "cpu_allocation.svg", "node_power.svg"}) {
      INFO(svg);
      REQUIRE(report.find(std::string("](") + svg + ")") != std::string::npos);
      REQUIRE(testing::CheckXml(ReadFile(dir / svg)).error.empty());
    }
  }
  std::string comparison = ReadFile(work / "out" / "report.md");
  REQUIRE(comparison.find("| kubefed | ") != std::string::npos);
  REQUIRE(comparison.find("[codeco](codeco/report.md)") != std::string::npos);
  fs::remove_all(work);
}

TEST_CASE("codef --simulate bursts to an on-demand cloud and adapts at runtime") {
  fs::path work = fs::temp_directory_path() / ("codef_cloud_test_" + std::to_string(getpid()));
  fs::remove_all(work);
  const std::string scenario = std::string(CODEF_TESTDATA_DIR) + "/sim_small.yaml";
  auto result = codeco::testing::RunCommand(
      {std::string(CODECO_BIN_DIR) + "/codef", "--simulate", "--scenario", scenario, "--out",
       (work / "out").string(), "--cloud", "cloud", "--cloud-policy", "mck8s", "--adapt"},
      absl::Seconds(60));
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  REQUIRE(result.output.find("cloud cloud (mck8s provisioner): ") != std::string::npos);
  REQUIRE(result.output.find("adaptation: ") != std::string::npos);
  std::string report = ReadFile(work / "out" / "report.md");
  REQUIRE(report.find("| cloud cloud | mck8s provisioner: ") != std::string::npos);
  fs::remove_all(work);
  auto orphan_policy = codeco::testing::RunCommand(
      {std::string(CODECO_BIN_DIR) + "/codef", "--simulate", "--scenario", scenario,
       "--cloud-policy", "mck8s"},
      absl::Seconds(30));
  REQUIRE(orphan_policy.exit_code == 2);
  REQUIRE(orphan_policy.output.find("--cloud-policy: only with --cloud") != std::string::npos);
  auto bad_policy = codeco::testing::RunCommand(
      {std::string(CODECO_BIN_DIR) + "/codef", "--simulate", "--scenario", scenario, "--cloud",
       "cloud", "--cloud-policy", "cheapest"},
      absl::Seconds(30));
  REQUIRE(bad_policy.exit_code == 2);
  REQUIRE(bad_policy.output.find("--cloud-policy: unknown cloud scaling policy") !=
          std::string::npos);
  auto not_a_cluster = codeco::testing::RunCommand(
      {std::string(CODECO_BIN_DIR) + "/codef", "--simulate", "--scenario", scenario, "--cloud",
       "nowhere"},
      absl::Seconds(30));
  REQUIRE(not_a_cluster.exit_code == 2);
  REQUIRE(not_a_cluster.output.find("cloud.cluster: no managed cluster") != std::string::npos);
}

TEST_CASE("codef --simulate rejects a bad flag with exit code 2") {
  const std::string scenario = std::string(CODEF_TESTDATA_DIR) + "/sim_small.yaml";
  auto bad_policy =
      codeco::testing::RunCommand({std::string(CODECO_BIN_DIR) + "/codef", "--simulate",
                                   "--scenario", scenario, "--policy", "fastest"},
                                  absl::Seconds(30));
  REQUIRE(bad_policy.exit_code == 2);
  REQUIRE(bad_policy.output.find("--policy: unknown policy \"fastest\"") != std::string::npos);
  auto bad_tick = codeco::testing::RunCommand({std::string(CODECO_BIN_DIR) + "/codef", "--simulate",
                                               "--scenario", scenario, "--tick", "soon"},
                                              absl::Seconds(30));
  REQUIRE(bad_tick.exit_code == 2);
  REQUIRE(bad_tick.output.find("--tick: ") != std::string::npos);
  auto unknown = codeco::testing::RunCommand({std::string(CODECO_BIN_DIR) + "/codef", "--simulate",
                                              "--scenario", scenario, "--lms-port", "7"},
                                             absl::Seconds(30));
  REQUIRE(unknown.exit_code == 2);
  REQUIRE(unknown.output.find("unknown flag --lms-port") != std::string::npos);
}

TEST_CASE("codef rejects a bad scenario with the field path and exit code 2") {
  fs::path work = fs::temp_directory_path() / ("codef_bad_test_" + std::to_string(getpid()));
  fs::create_directories(work);
  std::ofstream(work / "bad.yaml") << "name: x\nfederation:\n  hub: {name: hub}\n"
                                      "  clusters: [{name: a, nodes: [{name: n}]}]\n";
  auto result = codeco::testing::RunCommand(
      {std::string(CODECO_BIN_DIR) + "/codef", "--scenario", (work / "bad.yaml").string()},
      absl::Seconds(30));
  REQUIRE(result.exit_code == 2);
  REQUIRE(result.output.find("federation.clusters[0].nodes[0].capacity: is required") !=
          std::string::npos);
  fs::remove_all(work);
}

}  // namespace
}  // namespace codeco::codef
