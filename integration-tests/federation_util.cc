#include "federation_util.h"

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <regex>
#include <thread>

#include <catch2/catch.hpp>

#include "absl/time/clock.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "process.h"

namespace codeco::testing {

namespace fs = std::filesystem;

const std::string& CtlBinary() {
  static const std::string kCtl = std::string(CODECO_BIN_DIR) + "/codecoctl";
  return kCtl;
}

const std::string& FiveSiteScenario() {
  static const std::string kScenario =
      std::string(CODECO_SOURCE_DIR) + "/examples/scenarios/grid5000-five-sites.yaml";
  return kScenario;
}

const std::string& SourceDir() {
  static const std::string kSource = CODECO_SOURCE_DIR;
  return kSource;
}

FederationHome::FederationHome() {
  std::random_device rd;
  path = fs::temp_directory_path() / ("codeco-up-" + std::to_string(rd()));
  fs::create_directories(path);
  setenv("CODECO_HOME", path.c_str(), 1);
}

FederationHome::~FederationHome() {
  // Whatever happened, leave nothing running.
  RunCommand({CtlBinary(), "down"}, absl::Seconds(60));
  fs::remove_all(path);
}

nlohmann::json FederationHome::State() const {
  std::ifstream in(path / "state.json");
  return nlohmann::json::parse(in);
}

bool Alive(int pid) {
  if (kill(pid, 0) != 0) return false;
  // A process that exited but was not reaped yet (its parent, `codecoctl up`,
  // is gone and PID 1 may not reap) is not running.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

bool WaitUntilClustersReady(size_t count) {
  for (absl::Time end = absl::Now() + absl::Seconds(60); absl::Now() < end;) {
    CommandResult clusters = RunCommand({CtlBinary(), "get", "clusters"}, absl::Seconds(30));
    size_t ready = 0;
    for (size_t at = clusters.output.find(" Ready "); at != std::string::npos;
         at = clusters.output.find(" Ready ", at + 1)) {
      ++ready;
    }
    if (ready == count) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  return false;
}

std::map<std::string, std::string> LmsEndpoints(const std::string& up_output) {
  std::map<std::string, std::string> out;
  // A cluster row: ... IP (no port), then the LMS (host:port).
  std::regex row(R"(\n(\S+) [^\n]*? 127\.[0-9.]+ +(127\.[0-9.]+:\d+) )");
  for (auto it = std::sregex_iterator(up_output.begin(), up_output.end(), row);
       it != std::sregex_iterator(); ++it) {
    out[(*it)[1]] = (*it)[2];
  }
  return out;
}

std::vector<codeco::lms::v1::Pod> PodsOf(const std::string& lms, const std::string& app) {
  auto stub = codeco::lms::v1::LmsService::NewStub(
      grpc::CreateChannel(lms, grpc::InsecureChannelCredentials()));
  codeco::lms::v1::ListPodsRequest request;
  if (!app.empty()) {
    (*request.mutable_label_selector()->mutable_match_labels())["codeco.io/application"] = app;
  }
  codeco::lms::v1::ListPodsResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  grpc::Status status = stub->ListPods(&context, request, &response);
  INFO(lms << ": " << status.error_message());
  REQUIRE(status.ok());
  return {response.pods().begin(), response.pods().end()};
}

std::map<std::string, std::string> PlacedClusters(const std::string& app) {
  CommandResult r = RunCommand({CtlBinary(), "get", "apps", "-o", "json"}, absl::Seconds(30));
  std::map<std::string, std::string> out;
  nlohmann::json doc = nlohmann::json::parse(r.output, nullptr, false);
  if (r.exit_code != 0 || doc.is_discarded()) return out;
  for (const auto& a : doc.value("applications", nlohmann::json::array())) {
    if (a["metadata"].value("name", "") != app) continue;
    for (const auto& p : a["status"].value("placements", nlohmann::json::array())) {
      if (!p.value("cluster", "").empty()) out[p.value("service", "")] = p.value("cluster", "");
    }
  }
  return out;
}

}  // namespace codeco::testing
