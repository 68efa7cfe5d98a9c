// GrpcServer over real gRPC on loopback: health Check and Watch, the
// UNIMPLEMENTED note, RPC metrics on /metrics, and deadline propagation.
#include <catch2/catch.hpp>


#include "codeco/common/grpc_status.h"
#include "codeco/common/metrics.h"
#include "http_get.h"
#include "codeco/common/peer_channels.h"
#include "codeco/common/server.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace codeco {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

std::chrono::system_clock::time_point In(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}


struct TestServer {
  TestServer() {
    auto exposer = MetricsExposer::Start("127.0.0.1:0");
    REQUIRE(exposer.ok());
    metrics_exposer = std::move(*exposer);
    rpc_metrics = std::make_unique<RpcMetrics>("test", metrics_exposer->registry());
    GrpcServerOptions options;
    options.service = "test";
    options.insecure = true;
    options.services = {&lms};
    options.metrics = rpc_metrics.get();
    options.unimplemented_notes = {{"codeco.lms.v1.LmsService", "lands with issue #3"}};
    auto started = GrpcServer::Start(options);
    REQUIRE(started.ok());
    server = std::move(*started);
    channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  }

  grpc::Status Check(const std::string& service, HealthCheckResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    HealthCheckRequest request;
    request.set_service(service);
    return Health::NewStub(channel)->Check(&context, request, response);
  }

  codeco::lms::v1::LmsService::CallbackService lms;  // every method unimplemented
  std::unique_ptr<MetricsExposer> metrics_exposer;
  std::unique_ptr<RpcMetrics> rpc_metrics;
  std::unique_ptr<GrpcServer> server;
  std::shared_ptr<grpc::Channel> channel;
};

TEST_CASE("health Check answers SERVING for the server and each service") {
  TestServer t;
  HealthCheckResponse response;
  REQUIRE(t.Check("", &response).ok());
  REQUIRE(response.status() == HealthCheckResponse::SERVING);
  REQUIRE(t.Check("codeco.lms.v1.LmsService", &response).ok());
  REQUIRE(response.status() == HealthCheckResponse::SERVING);
  REQUIRE(t.Check("grpc.health.v1.Health", &response).ok());
  REQUIRE(t.Check("no.such.Service", &response).error_code() == grpc::StatusCode::NOT_FOUND);

  t.server->health().SetServingStatus("", HealthCheckResponse::NOT_SERVING);
  REQUIRE(t.Check("", &response).ok());
  REQUIRE(response.status() == HealthCheckResponse::NOT_SERVING);
}

TEST_CASE("health Watch streams changes and ends on shutdown") {
  TestServer t;
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(20)));
  HealthCheckRequest request;
  auto reader = Health::NewStub(t.channel)->Watch(&context, request);
  HealthCheckResponse response;
  REQUIRE(reader->Read(&response));
  REQUIRE(response.status() == HealthCheckResponse::SERVING);
  t.server->health().SetServingStatus("", HealthCheckResponse::NOT_SERVING);
  REQUIRE(reader->Read(&response));
  REQUIRE(response.status() == HealthCheckResponse::NOT_SERVING);
  t.server->health().SetServingStatus("", HealthCheckResponse::SERVING);
  REQUIRE(reader->Read(&response));
  REQUIRE(response.status() == HealthCheckResponse::SERVING);
  t.server->Shutdown(absl::Seconds(5));
  // Shutdown sends NOT_SERVING, then the stream ends.
  REQUIRE(reader->Read(&response));
  REQUIRE(response.status() == HealthCheckResponse::NOT_SERVING);
  REQUIRE_FALSE(reader->Read(&response));
  REQUIRE(reader->Finish().ok());
}

TEST_CASE("methods not implemented yet say so") {
  TestServer t;
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(10)));
  codeco::lms::v1::ListNodesRequest request;
  codeco::lms::v1::ListNodesResponse response;
  grpc::Status status =
      codeco::lms::v1::LmsService::NewStub(t.channel)->ListNodes(&context, request, &response);
  REQUIRE(status.error_code() == grpc::StatusCode::UNIMPLEMENTED);
  REQUIRE(status.error_message() ==
          "/codeco.lms.v1.LmsService/ListNodes is not implemented yet: lands with issue #3");
}

TEST_CASE("RPC latency histograms appear on /metrics") {
  TestServer t;
  HealthCheckResponse response;
  REQUIRE(t.Check("", &response).ok());
  std::string body = testing::HttpGet("http://" + t.metrics_exposer->address() + "/metrics").body;
  REQUIRE_THAT(body, Catch::Contains("codeco_test_rpc_duration_seconds_bucket{"));
  REQUIRE_THAT(body, Catch::Contains("method=\"/grpc.health.v1.Health/Check\""));
  REQUIRE_THAT(body, Catch::Contains("code=\"OK\""));
  REQUIRE_THAT(body, Catch::Contains("codeco_test_rpc_deadline_budget_seconds"));
}

TEST_CASE("plaintext is refused off loopback") {
  GrpcServerOptions options;
  options.service = "test";
  options.insecure = true;
  options.listen = "0.0.0.0:0";
  auto server = GrpcServer::Start(options);
  REQUIRE(server.status().code() == absl::StatusCode::kInvalidArgument);
  REQUIRE_THAT(std::string(server.status().message()), Catch::Contains("insecure:"));
}

TEST_CASE("outgoing calls get the caller's remaining deadline capped") {
  grpc::ServerContext no_deadline;  // a caller that set no deadline
  auto fallback = OutgoingContext(no_deadline, absl::Seconds(30), absl::Minutes(10));
  double left = absl::ToDoubleSeconds(absl::FromChrono(fallback->deadline()) - absl::Now());
  REQUIRE(left > 25);
  REQUIRE(left <= 30);
  auto capped = OutgoingContext(no_deadline, absl::Minutes(30), absl::Seconds(5));
  left = absl::ToDoubleSeconds(absl::FromChrono(capped->deadline()) - absl::Now());
  REQUIRE(left <= 5);
}

TEST_CASE("peer channels are cached per target and plaintext stays on loopback") {
  TestServer t;
  auto peers = PeerChannels::Create({.insecure = true});
  REQUIRE(peers.ok());
  auto channel = (*peers)->Get(t.server->address());
  REQUIRE(channel.ok());
  REQUIRE((*peers)->Get(t.server->address()).value() == *channel);
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(10)));
  HealthCheckResponse response;
  REQUIRE(Health::NewStub(*channel)->Check(&context, HealthCheckRequest(), &response).ok());
  REQUIRE((*peers)->Get("10.1.2.3:443").status().code() ==
          absl::StatusCode::kFailedPrecondition);
  REQUIRE_FALSE(PeerChannels::Create({.tls = {"/nonexistent", "", ""}}).ok());
}

TEST_CASE("peer channels older than max_channel_age are renewed") {
  TestServer t;
  auto peers = PeerChannels::Create({.insecure = true, .max_channel_age = absl::Milliseconds(1)});
  REQUIRE(peers.ok());
  auto first = (*peers)->Get(t.server->address());
  REQUIRE(first.ok());
  absl::SleepFor(absl::Milliseconds(5));  // older than the age, whatever the machine's speed
  auto second = (*peers)->Get(t.server->address());
  REQUIRE(second.ok());
  REQUIRE(*second != *first);
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(10)));
  HealthCheckResponse response;
  REQUIRE(Health::NewStub(*second)->Check(&context, HealthCheckRequest(), &response).ok());
}

TEST_CASE("status codes map one to one") {
  for (int code = 0; code <= 16; ++code) {
    absl::Status status(static_cast<absl::StatusCode>(code), code == 0 ? "" : "why");
    grpc::Status grpc_status = ToGrpcStatus(status);
    REQUIRE(static_cast<int>(grpc_status.error_code()) == code);
    REQUIRE(FromGrpcStatus(grpc_status) == status);
  }
  REQUIRE(ToGrpcStatus(absl::InvalidArgumentError("spec.name: required")).error_message() ==
          "spec.name: required");
}

}  // namespace
}  // namespace codeco
