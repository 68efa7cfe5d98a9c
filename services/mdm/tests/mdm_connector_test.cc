// The real codeco-mdm of an MC running its LMS connector against CODEF's
// emulated LMS (served by this test over gRPC): the cluster's nodes appear
// in the graph, a pod created and deleted through the LMS comes and goes
// with its RUNS_ON, and a codeco-mdm killed with SIGKILL and started again
// on the same data publishes nothing when nothing changed.
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <functional>
#include <regex>
#include <set>

#include "absl/time/clock.h"
#include "codeco/common/clock.h"
#include "codeco/common/server.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "codeco/mdm/v1/mdm_service.grpc.pb.h"
#include "federation.h"
#include "grpcpp/create_channel.h"
#include "link_control.h"
#include "lms_service.h"
#include "process.h"
#include "scenario.h"

namespace codeco::mdm {
namespace {

namespace fs = std::filesystem;
using codeco::testing::ChildProcess;
using codeco::testing::ReadWholeFile;
using codeco::testing::ScratchDir;

constexpr char kScenario[] = R"(
name: mdm-connector
federation:
  hub: {name: hub}
  clusters:
    - name: edge
      labels: {tier: edge, country: FR}
      nodes: [{name: n, count: 2, capacity: {cpu: 2, memory: 4Gi}}]
)";

std::chrono::system_clock::time_point In(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

// codeco-mdm of MC "edge" on `dir`, syncing the LMS at `lms` every second.
struct McMdm {
  std::unique_ptr<ChildProcess> process;
  std::unique_ptr<v1::MdmService::Stub> stub;
  std::string address;

  McMdm(const fs::path& dir, const std::string& lms) {
    const fs::path log = dir / "mdm.log";
    process = std::make_unique<ChildProcess>(
        std::vector<std::string>{std::string(CODECO_BIN_DIR) + "/codeco-mdm", "--role", "mc",
                                 "--cluster", "edge", "--insecure", "--listen", "127.0.0.1:0",
                                 "--metrics-listen", "127.0.0.1:0", "--data-dir",
                                 (dir / "data").string(), "--federation.lms", lms,
                                 "--federation.lms-plaintext", "--mdm.lms-sync-interval", "1s"},
        log.string());
    std::optional<std::string> line = process->ReadLine(absl::Now() + absl::Seconds(60));
    INFO("codeco-mdm printed: " << line.value_or("<nothing>") << "\n" << ReadWholeFile(log));
    REQUIRE(line.has_value());
    std::smatch m;
    REQUIRE(std::regex_search(*line, m, std::regex("listening on (127\\.0\\.0\\.1:[0-9]+)")));
    address = m[1].str();
    stub =
        v1::MdmService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  }

  // What `codecoctl get metadata ARGS --mdm <this one>` prints.
  std::string Codecoctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {std::string(CODECO_BIN_DIR) + "/codecoctl", "get", "metadata"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--mdm", address, "--insecure"});
    codeco::testing::CommandResult result = codeco::testing::RunCommand(argv, absl::Seconds(60));
    INFO(result.output);
    CHECK(result.exit_code == 0);
    return result.output;
  }

  // The ids of the entities of `type`.
  std::set<std::string> Ids(const std::string& type) {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    v1::ListEntitiesRequest request;
    request.set_type(type);
    request.set_page_size(1000);
    v1::ListEntitiesResponse response;
    std::set<std::string> out;
    if (stub->ListEntities(&context, request, &response).ok()) {
      for (const v1::Entity& e : response.entities()) out.insert(e.id());
    }
    return out;
  }
  // The entities one RUNS_ON hop from `id`.
  std::set<std::string> RunsOn(const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    v1::QueryGraphRequest request;
    request.set_entity_id(id);
    request.set_depth(1);
    request.add_relationship_types("RUNS_ON");
    v1::QueryGraphResponse response;
    std::set<std::string> out;
    if (stub->QueryGraph(&context, request, &response).ok()) {
      for (int i = 1; i < response.entities_size(); ++i) out.insert(response.entities(i).id());
    }
    return out;
  }
  int64_t EndOffset() {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    v1::ReadEventsRequest request;
    request.set_page_size(1);
    v1::ReadEventsResponse response;
    REQUIRE(stub->ReadEvents(&context, request, &response).ok());
    return response.end_offset();
  }
};

// Waits (up to a minute) until `done` holds.
bool WaitUntil(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + absl::Minutes(1);
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return done();
}

TEST_CASE("codeco-mdm mirrors its cluster's LMS into the graph and survives SIGKILL") {
  for (const char* v : {"http_proxy", "https_proxy", "grpc_proxy", "HTTP_PROXY", "HTTPS_PROXY"}) {
    unsetenv(v);
  }
  ScratchDir dir("mdm-connector");
  codef::InMemoryLinkControl links;
  codef::InMemoryCheckpointArchiveStore archives;
  auto scenario = codef::ParseScenario(kScenario, "");
  REQUIRE(scenario.ok());
  auto federation =
      codef::Federation::Create(*scenario, RealClock::Default(), &links, &archives, nullptr);
  REQUIRE(federation.ok());
  codef::EmulatedLmsService lms_service((*federation)->FindLms("edge"));
  GrpcServerOptions options;
  options.service = "lms";
  options.insecure = true;
  options.services = {&lms_service};
  auto lms_server = GrpcServer::Start(options);
  REQUIRE(lms_server.ok());
  auto lms = lms::v1::LmsService::NewStub(
      grpc::CreateChannel((*lms_server)->address(), grpc::InsecureChannelCredentials()));
  std::vector<std::string> nodes;
  {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    lms::v1::ListNodesResponse response;
    REQUIRE(lms->ListNodes(&context, {}, &response).ok());
    for (const auto& n : response.nodes()) nodes.push_back("Node/edge/" + n.name());
  }
  REQUIRE(nodes.size() == 2);

  int64_t settled_end = 0;
  {
    McMdm mdm(dir.path, (*lms_server)->address());
    REQUIRE(WaitUntil([&] { return mdm.Ids("Node").size() == 2; }));
    CHECK(mdm.Ids("Node") == std::set<std::string>(nodes.begin(), nodes.end()));
    CHECK(mdm.Ids("Cluster") == std::set<std::string>{"Cluster/edge"});

    // A pod created through the LMS appears with its RUNS_ON...
    {
      grpc::ClientContext context;
      context.set_deadline(In(absl::Seconds(10)));
      lms::v1::CreatePodRequest request;
      request.mutable_pod()->set_name("web-0");
      request.mutable_pod()->set_node_name(nodes[1].substr(std::string("Node/edge/").size()));
      (*request.mutable_pod()->mutable_labels())["codeco.io/application"] = "shop";
      lms::v1::Container* c = request.mutable_pod()->add_containers();
      c->set_name("web");
      c->set_image("registry.example/web:1");
      lms::v1::CreatePodResponse response;
      grpc::Status status = lms->CreatePod(&context, request, &response);
      INFO(status.error_message());
      REQUIRE(status.ok());
    }
    const std::string pod = "Pod/edge/default/web-0";
    REQUIRE(WaitUntil([&] { return mdm.RunsOn(pod) == std::set<std::string>{nodes[1]}; }));
    CHECK(mdm.Ids("Namespace") == std::set<std::string>{"Namespace/edge/default"});
    // codecoctl shows them.
    const std::string pods = mdm.Codecoctl({"--type", "Pod"});
    CHECK_THAT(pods, Catch::StartsWith("ID "));
    CHECK(std::regex_search(pods, std::regex(pod + " +Pod +edge +lms/edge ")));
    // The table cuts the properties short; -o json has them whole.
    CHECK_THAT(mdm.Codecoctl({"--type", "Pod", "-o", "json"}),
               Catch::Contains(R"("application": "shop")"));
    const std::string around = mdm.Codecoctl({pod});
    CHECK_THAT(around, Catch::Contains("SOURCE:      lms/edge"));
    CHECK(std::regex_search(around, std::regex(pod + " +-RUNS_ON-> +" + nodes[1])));
    CHECK(std::regex_search(around, std::regex("Namespace/edge/default +-CONTAINS-> +" + pod)));

    // ... and goes away when deleted.
    {
      grpc::ClientContext context;
      context.set_deadline(In(absl::Seconds(10)));
      lms::v1::DeletePodRequest request;
      request.set_name("web-0");
      lms::v1::DeletePodResponse response;
      REQUIRE(lms->DeletePod(&context, request, &response).ok());
    }
    REQUIRE(WaitUntil([&] { return mdm.Ids("Pod").empty(); }));
    CHECK(mdm.RunsOn(nodes[1]).empty());

    // Settled: a few more syncs publish nothing.
    settled_end = mdm.EndOffset();
    absl::SleepFor(absl::Seconds(3));
    CHECK(mdm.EndOffset() == settled_end);
    REQUIRE(mdm.process->Stop(SIGKILL, absl::Now() + absl::Seconds(10)) == 128 + SIGKILL);
  }

  // Started again on the same data: everything is there, and its syncs
  // publish nothing new.
  McMdm again(dir.path, (*lms_server)->address());
  CHECK(again.Ids("Node") == std::set<std::string>(nodes.begin(), nodes.end()));
  absl::SleepFor(absl::Seconds(3));
  CHECK(again.EndOffset() == settled_end);
}

}  // namespace
}  // namespace codeco::mdm
