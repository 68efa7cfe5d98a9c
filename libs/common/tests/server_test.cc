// GrpcServer over real gRPC on loopback: health Check and Watch, the
// UNIMPLEMENTED note, RPC metrics on /metrics, and deadline propagation.
#include <catch2/catch.hpp>


#include <atomic>
#include <functional>

#include "absl/strings/str_cat.h"
#include "codeco/common/call_deadline.h"
#include "codeco/common/channel_ready_watch.h"
#include "codeco/common/ports.h"
#include "codeco/common/executor.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/kv_store.h"
#include "codeco/common/serve_on_executor.h"
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

TEST_CASE("process and store memory appear on /metrics") {
  auto exposer = MetricsExposer::Start("127.0.0.1:0");
  REQUIRE(exposer.ok());
  auto store = NewInMemoryKvStore({"apps"});
  (*exposer)->ExportMemory("test", store.get());
  std::string body = testing::HttpGet("http://" + (*exposer)->address() + "/metrics").body;
  REQUIRE_THAT(body, Catch::Contains("# TYPE codeco_test_resident_memory_bytes gauge"));
  REQUIRE_THAT(body, Catch::Contains("codeco_test_heap_bytes{state=\"in_use\"}"));
  REQUIRE_THAT(body, Catch::Contains("codeco_test_heap_bytes{state=\"free_held\"}"));
  REQUIRE_THAT(body, Catch::Contains("codeco_test_store_memory_bytes{part=\"block_cache\"} 0"));
  // The resident set is read, not left at zero.
  REQUIRE_THAT(body, !Catch::Contains("codeco_test_resident_memory_bytes 0\n"));
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

TEST_CASE("outgoing calls end by the earliest of the caller's deadline and their own") {
  auto left = [](const grpc::ClientContext& c) {
    return absl::ToDoubleSeconds(absl::FromChrono(c.deadline()) - absl::Now());
  };
  // Serving no call: the call's own timeout.
  REQUIRE(CallerDeadline() == absl::InfiniteFuture());
  auto own = OutgoingContext(absl::Seconds(30));
  CHECK(left(*own) > 25);
  CHECK(left(*own) <= 30);
  {
    ScopedCallerDeadline serving(absl::Now() + absl::Seconds(5));
    // The caller's 5 s cap a 30 s timeout.
    auto capped = OutgoingContext(absl::Seconds(30));
    CHECK(left(*capped) <= 5);
    CHECK(left(*capped) > 1);
    {
      // A later deadline nested inside does not extend the caller's.
      ScopedCallerDeadline later(absl::Now() + absl::Minutes(5));
      CHECK(CallerDeadline() < absl::Now() + absl::Seconds(6));
      // A deadline passed down, earlier still, wins.
      grpc::ClientContext passed;
      SetOutgoingDeadline(passed, absl::Seconds(30), absl::Now() + absl::Seconds(1));
      CHECK(left(passed) <= 1);
    }
    // A short timeout wins over the caller's deadline.
    const absl::Time short_deadline = OutgoingDeadline(absl::Milliseconds(100));
    CHECK(short_deadline <= absl::Now() + absl::Milliseconds(100));
  }
  // The scope is gone with the call.
  CHECK(CallerDeadline() == absl::InfiniteFuture());
}

TEST_CASE("a served call gets the default deadline without one and never more than the longest") {
  SetCallDeadlineLimits({.when_none = absl::Seconds(30), .longest = absl::Minutes(10)});
  const absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  CHECK(ServedDeadline(absl::InfiniteFuture(), now) == now + absl::Seconds(30));
  CHECK(ServedDeadline(now + absl::Seconds(5), now) == now + absl::Seconds(5));
  CHECK(ServedDeadline(now + absl::Hours(2), now) == now + absl::Minutes(10));
  SetCallDeadlineLimits({.when_none = absl::Minutes(1), .longest = absl::Seconds(20)});
  CHECK(ServedDeadline(absl::InfiniteFuture(), now) == now + absl::Seconds(20));
  SetCallDeadlineLimits({});  // the defaults again for the other tests
}

// Downstream: records the deadline each ListNodes call arrives with.
class DeadlineRecorder final : public codeco::lms::v1::LmsService::CallbackService {
 public:
  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* context,
                                      const codeco::lms::v1::ListNodesRequest*,
                                      codeco::lms::v1::ListNodesResponse*) override {
    seen = absl::FromChrono(context->deadline());
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  std::atomic<absl::Time> seen{absl::InfinitePast()};
};

// Upstream: serves ListNodes on an executor and calls downstream with a
// one-hour timeout of its own.
class Forwarder final : public codeco::lms::v1::LmsService::CallbackService {
 public:
  explicit Forwarder(std::shared_ptr<grpc::Channel> downstream)
      : stub_(codeco::lms::v1::LmsService::NewStub(std::move(downstream))) {}
  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* context,
                                      const codeco::lms::v1::ListNodesRequest* request,
                                      codeco::lms::v1::ListNodesResponse* response) override {
    return ServeOnExecutor(executor_, context, [this, request, response](absl::Time) {
      auto outgoing = OutgoingContext(absl::Hours(1));
      return FromGrpcStatus(stub_->ListNodes(outgoing.get(), *request, response));
    });
  }

 private:
  std::unique_ptr<codeco::lms::v1::LmsService::Stub> stub_;
  BoundedExecutor executor_{2, 8};
};

TEST_CASE("a call served on the executor passes its caller's deadline on to the calls it makes") {
  DeadlineRecorder recorder;
  GrpcServerOptions options;
  options.service = "test";
  options.insecure = true;
  options.services = {&recorder};
  auto downstream = GrpcServer::Start(options);
  REQUIRE(downstream.ok());
  Forwarder forwarder(
      grpc::CreateChannel((*downstream)->address(), grpc::InsecureChannelCredentials()));
  options.services = {&forwarder};
  auto upstream = GrpcServer::Start(options);
  REQUIRE(upstream.ok());

  auto stub = codeco::lms::v1::LmsService::NewStub(
      grpc::CreateChannel((*upstream)->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  const absl::Time caller_deadline = absl::Now() + absl::Seconds(20);
  context.set_deadline(absl::ToChronoTime(caller_deadline));
  codeco::lms::v1::ListNodesResponse response;
  grpc::Status status = stub->ListNodes(&context, {}, &response);
  INFO(status.error_message());
  REQUIRE(status.ok());
  // Downstream saw the caller's 20 s, not the forwarder's own hour (gRPC
  // rounds deadlines on the wire, hence the slack).
  CHECK(recorder.seen.load() <= caller_deadline + absl::Seconds(1));
  CHECK(recorder.seen.load() > absl::Now());
  (*upstream)->Shutdown(absl::Seconds(5));
  (*downstream)->Shutdown(absl::Seconds(5));
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

namespace codeco {
namespace {

// Waits up to a minute for `done`; false when it never held.
bool WaitFor(const std::function<bool()>& done) {
  for (absl::Time end = absl::Now() + absl::Minutes(1); absl::Now() < end;) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return done();
}

// A plaintext server on `listen` with every LMS method unimplemented.
std::unique_ptr<GrpcServer> StartOn(const std::string& listen,
                                    lms::v1::LmsService::CallbackService& lms) {
  GrpcServerOptions options;
  options.service = "test";
  options.insecure = true;
  options.listen = listen;
  options.services = {&lms};
  auto started = GrpcServer::Start(options);
  REQUIRE(started.ok());
  return std::move(*started);
}

TEST_CASE("a channel ready watch calls back when its peer is back after an outage") {
  auto port = FreePort("127.0.0.1");
  REQUIRE(port.ok());
  const std::string address = absl::StrCat("127.0.0.1:", *port);
  lms::v1::LmsService::CallbackService lms;
  std::unique_ptr<GrpcServer> server = StartOn(address, lms);
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  std::atomic<int> calls{0};
  ChannelReadyWatch watch(channel, [&] { calls.fetch_add(1); }, absl::Milliseconds(50));
  // No call is made: the watch connects the idle channel itself.
  REQUIRE(WaitFor([&] { return calls.load() == 1; }));
  REQUIRE(watch.recoveries() == 1);

  server->Shutdown(absl::ZeroDuration());
  server.reset();
  REQUIRE(WaitFor([&] { return channel->GetState(false) != GRPC_CHANNEL_READY; }));
  REQUIRE(calls.load() == 1);  // away: no call back

  server = StartOn(address, lms);
  REQUIRE(WaitFor([&] { return calls.load() == 2; }));
  REQUIRE(watch.recoveries() == 2);
}

}  // namespace
}  // namespace codeco
