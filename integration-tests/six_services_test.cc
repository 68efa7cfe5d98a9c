// Starts all six service binaries on loopback as a user would, then checks
// each one from the outside: health and reflection through generated stubs,
// the same through `buf curl`, RPC latency on /metrics, `codecoctl health`,
// the UNIMPLEMENTED note, and a clean exit on SIGTERM.
#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>

#include "codeco/pdlc/v1/pdlc_service.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "http_get.h"
#include "process.h"

namespace codeco::testing {
namespace {

namespace fs = std::filesystem;
using grpc::reflection::v1alpha::ServerReflection;
using grpc::reflection::v1alpha::ServerReflectionRequest;
using grpc::reflection::v1alpha::ServerReflectionResponse;

struct ServiceUnderTest {
  std::string name;                     // "acm"
  std::string role;                     // "hub" or "mc"
  std::string grpc_service;             // "codeco.acm.v1.AcmService"
  std::vector<std::string> extra_args;  // what this service needs besides the common flags
};

const std::vector<ServiceUnderTest> kServices = {
    {"acm", "hub", "codeco.acm.v1.AcmService"},
    {"swm", "hub", "codeco.swm.v1.SwmService"},
    // PDLC serves one cluster; with no LMS or Prometheus it scores no node.
    {"pdlc", "mc", "codeco.pdlc.v1.PdlcService", {"--cluster", "mc1"}},
    {"netma", "hub", "codeco.netma.v1.NetmaService"},
    {"mdm", "hub", "codeco.mdm.v1.MdmService"},
    // The checkpointer needs its cluster and LMS (an address nothing here calls).
    {"checkpointer", "mc", "codeco.checkpointer.v1.CheckpointerService",
     {"--cluster", "mc1", "--federation.lms", "127.0.0.1:9", "--federation.lms-plaintext"}},
};

std::chrono::system_clock::time_point In(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}


// A started service: its process and the addresses it printed.
struct RunningService {
  ServiceUnderTest spec;
  std::unique_ptr<ChildProcess> process;
  std::string address;
  std::string metrics_url;
};

RunningService StartService(const ServiceUnderTest& spec, const fs::path& work) {
  RunningService out{spec, nullptr, "", ""};
  std::string binary = std::string(CODECO_BIN_DIR) + "/codeco-" + spec.name;
  std::vector<std::string> argv = {binary,          "--role",           spec.role,
                                   "--insecure",    "--listen",         "127.0.0.1:0",
                                   "--metrics-listen", "127.0.0.1:0",   "--data-dir",
                                   (work / spec.name).string()};
  argv.insert(argv.end(), spec.extra_args.begin(), spec.extra_args.end());
  out.process = std::make_unique<ChildProcess>(argv, (work / (spec.name + ".log")).string());
  std::optional<std::string> line = out.process->ReadLine(absl::Now() + absl::Seconds(30));
  INFO("service " << spec.name << " printed: " << line.value_or("<nothing>"));
  REQUIRE(line.has_value());
  std::smatch m;
  REQUIRE(std::regex_search(*line, m,
                            std::regex("listening on (127\\.0\\.0\\.1:[0-9]+) .*metrics=(\\S+)")));
  out.address = m[1];
  out.metrics_url = m[2];
  return out;
}

std::vector<std::string> ReflectionServiceNames(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(10)));
  auto stream = ServerReflection::NewStub(channel)->ServerReflectionInfo(&context);
  ServerReflectionRequest request;
  request.set_list_services("");
  REQUIRE(stream->Write(request));
  stream->WritesDone();
  ServerReflectionResponse response;
  REQUIRE(stream->Read(&response));
  REQUIRE(stream->Finish().ok());
  std::vector<std::string> names;
  for (const auto& s : response.list_services_response().service()) names.push_back(s.name());
  return names;
}

// Asks reflection for the file that defines `symbol`; true when it has one.
bool ReflectionKnowsSymbol(const std::shared_ptr<grpc::Channel>& channel,
                           const std::string& symbol) {
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(10)));
  auto stream = ServerReflection::NewStub(channel)->ServerReflectionInfo(&context);
  ServerReflectionRequest request;
  request.set_file_containing_symbol(symbol);
  REQUIRE(stream->Write(request));
  stream->WritesDone();
  ServerReflectionResponse response;
  REQUIRE(stream->Read(&response));
  stream->Finish();
  return response.has_file_descriptor_response() &&
         response.file_descriptor_response().file_descriptor_proto_size() > 0;
}

CommandResult BufCurl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {CODECO_BUF, "curl", "--protocol", "grpc",
                                   "--http2-prior-knowledge"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, absl::Seconds(60));
}

struct WorkDir {
  WorkDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("codeco-it-" + std::to_string(rd()));
    fs::create_directories(path);
    setenv("BUF_CACHE_DIR", (path / "buf-cache").c_str(), 1);
  }
  ~WorkDir() { fs::remove_all(path); }
  fs::path path;
};

TEST_CASE("all six services start and answer health reflection and metrics") {
  WorkDir work;
  std::vector<RunningService> running;
  for (const auto& spec : kServices) running.push_back(StartService(spec, work.path));

  for (auto& service : running) {
    INFO("service " << service.spec.name << " at " << service.address);
    auto channel = grpc::CreateChannel(service.address, grpc::InsecureChannelCredentials());

    // Health through the generated stub: the server and its own service.
    for (const std::string& name : {std::string(), service.spec.grpc_service}) {
      grpc::ClientContext context;
      context.set_deadline(In(absl::Seconds(10)));
      grpc::health::v1::HealthCheckRequest request;
      request.set_service(name);
      grpc::health::v1::HealthCheckResponse response;
      REQUIRE(grpc::health::v1::Health::NewStub(channel)->Check(&context, request, &response).ok());
      REQUIRE(response.status() == grpc::health::v1::HealthCheckResponse::SERVING);
    }

    // Reflection through the generated stub lists the service and health,
    // and can describe both.
    std::vector<std::string> names = ReflectionServiceNames(channel);
    REQUIRE_THAT(names, Catch::VectorContains(service.spec.grpc_service));
    REQUIRE_THAT(names, Catch::VectorContains(std::string("grpc.health.v1.Health")));
    REQUIRE(ReflectionKnowsSymbol(channel, service.spec.grpc_service));
    REQUIRE(ReflectionKnowsSymbol(channel, "grpc.health.v1.Health"));

    // The same through buf curl, an outside client with no proto files.
    CommandResult list = BufCurl({"--list-methods", "http://" + service.address});
    INFO(list.output);
    REQUIRE(list.exit_code == 0);
    REQUIRE_THAT(list.output, Catch::Contains(service.spec.grpc_service + "/"));
    REQUIRE_THAT(list.output, Catch::Contains("grpc.health.v1.Health/Check"));
    CommandResult check =
        BufCurl({"-d", "{}", "http://" + service.address + "/grpc.health.v1.Health/Check"});
    INFO(check.output);
    REQUIRE(check.exit_code == 0);
    REQUIRE_THAT(check.output, Catch::Contains("\"SERVING\""));

    // codecoctl asks for health too.
    CommandResult ctl = RunCommand(
        {std::string(CODECO_BIN_DIR) + "/codecoctl", "health", service.address, "--insecure"},
        absl::Seconds(30));
    INFO(ctl.output);
    REQUIRE(ctl.exit_code == 0);
    REQUIRE_THAT(ctl.output, Catch::Contains("SERVING"));

    // RPC latency histograms on /metrics, named codeco_<svc>_...
    std::string metrics = HttpGet(service.metrics_url).body;
    REQUIRE_THAT(metrics, Catch::Contains("codeco_" + service.spec.name +
                                          "_rpc_duration_seconds_bucket{"));
    REQUIRE_THAT(metrics, Catch::Contains("method=\"/grpc.health.v1.Health/Check\""));
  }

  // PDLC answers recommendations; a method whose issue has not landed says so.
  {
    auto channel = grpc::CreateChannel(running[2].address, grpc::InsecureChannelCredentials());
    auto stub = codeco::pdlc::v1::PdlcService::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    codeco::pdlc::v1::GetRecommendationResponse response;
    REQUIRE(stub->GetRecommendation(&context, codeco::pdlc::v1::GetRecommendationRequest(), &response).ok());
    REQUIRE(response.recommendation().cluster() == "mc1");
    // An auction with no peers configured: this cluster bids alone.
    grpc::ClientContext auction_context;
    auction_context.set_deadline(In(absl::Seconds(10)));
    codeco::pdlc::v1::RunAuctionRequest auction;
    auction.set_neighborhood_id("nb1");
    auction.mutable_workload()->set_name("shop/web");
    codeco::pdlc::v1::RunAuctionResponse won;
    REQUIRE(stub->RunAuction(&auction_context, auction, &won).ok());
    REQUIRE(won.bids_size() == 1);
    REQUIRE(won.bids(0).bidder_cluster() == "mc1");
    grpc::ClientContext operation_context;
    operation_context.set_deadline(In(absl::Seconds(10)));
    codeco::pdlc::v1::GetOperationResponse operation;
    grpc::Status status = stub->GetOperation(
        &operation_context, codeco::pdlc::v1::GetOperationRequest(), &operation);
    REQUIRE(status.error_code() == grpc::StatusCode::UNIMPLEMENTED);
    REQUIRE_THAT(status.error_message(), Catch::Contains("is not implemented yet"));
    REQUIRE_THAT(status.error_message(), Catch::Contains("operations (GetOperation)"));
  }

  // SIGTERM: every service shuts down cleanly and exits 0.
  for (auto& service : running) {
    INFO("service " << service.spec.name);
    REQUIRE(service.process->Stop(SIGTERM, absl::Now() + absl::Seconds(20)) == 0);
  }
}

TEST_CASE("bad flags and config are refused with the key named") {
  WorkDir work;
  std::string acm = std::string(CODECO_BIN_DIR) + "/codeco-acm";
  CommandResult bad_role = RunCommand(
      {acm, "--role", "leader", "--insecure", "--data-dir", (work.path / "d").string()},
      absl::Seconds(30));
  REQUIRE(bad_role.exit_code == 2);
  REQUIRE_THAT(bad_role.output, Catch::Contains("role: must be one of hub|mc"));

  CommandResult public_plaintext =
      RunCommand({acm, "--role", "hub", "--insecure", "--listen", "0.0.0.0:0", "--data-dir",
                  (work.path / "d").string()},
                 absl::Seconds(30));
  REQUIRE(public_plaintext.exit_code == 2);
  REQUIRE_THAT(public_plaintext.output,
               Catch::Contains("insecure: plaintext is allowed only on loopback"));

  fs::path config = work.path / "acm.yaml";
  std::ofstream(config) << "role: hub\ndata_dir: /tmp/x\ntls:\n  ca_fle: /x\n";
  CommandResult bad_file = RunCommand({acm, "--config", config.string()}, absl::Seconds(30));
  REQUIRE(bad_file.exit_code == 2);
  REQUIRE_THAT(bad_file.output, Catch::Contains("tls.ca_fle: unknown key"));

  CommandResult unknown_flag = RunCommand({acm, "--colour", "red"}, absl::Seconds(30));
  REQUIRE(unknown_flag.exit_code == 2);
  REQUIRE_THAT(unknown_flag.output, Catch::Contains("--colour: unknown flag"));
}

}  // namespace
}  // namespace codeco::testing
