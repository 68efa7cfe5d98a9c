#include "federation_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <regex>
#include <thread>

#include "absl/strings/str_replace.h"
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
  // CODECO_TEST_KEEP_HOME=1 keeps the logs and data of the run for a post-mortem.
  if (const char* keep = std::getenv("CODECO_TEST_KEEP_HOME"); keep != nullptr && *keep == '1') {
    std::fprintf(stderr, "kept %s\n", path.c_str());
    return;
  }
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

std::map<std::string, std::string> RelayEndpoints(const std::string& up_output) {
  std::map<std::string, std::string> out;
  // A cluster row: ... IP, the LMS (host:port), then the relay (host:port).
  std::regex row(R"(\n(\S+) [^\n]*? 127\.[0-9.]+ +127\.[0-9.]+:\d+ +(127\.[0-9.]+:\d+))");
  for (auto it = std::sregex_iterator(up_output.begin(), up_output.end(), row);
       it != std::sregex_iterator(); ++it) {
    out[(*it)[1]] = (*it)[2];
  }
  return out;
}

std::string ConnectThroughRelay(const std::string& relay, const std::string& target,
                                const std::string& payload, std::string* echoed) {
  echoed->clear();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  const size_t colon = relay.rfind(':');
  inet_pton(AF_INET, relay.substr(0, colon).c_str(), &addr.sin_addr);
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(relay.substr(colon + 1))));
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "";
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  auto read_until = [&](const std::string& marker) {
    std::string got;
    char buf[4096];
    while (got.find(marker) == std::string::npos && absl::Now() < deadline) {
      pollfd pfd{fd, POLLIN, 0};
      if (poll(&pfd, 1, static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()))) <= 0) {
        continue;
      }
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    return got;
  };
  const std::string request = "CONNECT " + target + " HTTP/1.1\r\n\r\n";
  std::string status;
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
      static_cast<ssize_t>(request.size())) {
    std::string head = read_until("\r\n\r\n");
    status = head.substr(0, head.find("\r\n"));
    if (status.rfind("HTTP/1.1 200", 0) == 0 &&
        send(fd, payload.data(), payload.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(payload.size())) {
      *echoed = read_until(payload);
    }
  }
  close(fd);
  return status;
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

std::map<std::pair<std::string, std::string>, double> DelayCostMap(const std::string& cluster) {
  std::vector<std::string> argv = {CtlBinary(), "get", "costmap", "--metric", "delay", "-o", "json"};
  if (!cluster.empty()) argv.insert(argv.end(), {"--cluster", cluster});
  CommandResult r = RunCommand(argv, absl::Seconds(30));
  std::map<std::pair<std::string, std::string>, double> out;
  if (r.exit_code != 0) return out;
  nlohmann::json doc = nlohmann::json::parse(r.output, nullptr, false);
  if (doc.is_discarded() || !doc.contains("cost-map")) return out;
  for (const auto& [source, row] : doc["cost-map"].items()) {
    for (const auto& [destination, cost] : row.items()) {
      out[{source, destination}] = cost.get<double>();
    }
  }
  return out;
}

std::string FrontBackCam(const std::string& name) {
  std::ifstream in(SourceDir() + "/examples/cams/front-back.yaml");
  std::string cam((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE_FALSE(cam.empty());
  return absl::StrReplaceAll(cam, {{"front-back", name}});
}

std::string SensorFusionCam(const std::string& name, const std::string& min_bandwidth) {
  std::ifstream in(SourceDir() + "/examples/cams/sensor-fusion.yaml");
  std::string cam((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE_FALSE(cam.empty());
  for (size_t at = cam.find("sensor-fusion"); at != std::string::npos;
       at = cam.find("sensor-fusion", at + name.size())) {
    cam.replace(at, std::string("sensor-fusion").size(), name);
  }
  const std::string example = "minBandwidth: \"5Mbps\"";
  const size_t at = cam.find(example);
  REQUIRE(at != std::string::npos);
  cam.replace(at, example.size(), "minBandwidth: \"" + min_bandwidth + "\"");
  return cam;
}

bool SanitizedBuild() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#else
  return false;
#endif
}

double RttToleranceMs(double rtt_ms) {
  return SanitizedBuild() ? std::max(0.25 * rtt_ms, 5.0) : std::max(0.1 * rtt_ms, 1.0);
}

}  // namespace codeco::testing
