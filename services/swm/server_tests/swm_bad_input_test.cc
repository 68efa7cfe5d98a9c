// SWM's PlaceApplication over real gRPC (127.0.0.1) refuses what ACM's
// shared caps refuse, before any workload or channel is expanded and before
// any cluster is asked: replica, workload and channel bombs and request
// totals past int64, each naming its field path.
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"
#include "codeco/common/peer_channels.h"
#include "codeco/common/server.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "swm/core/convert.h"
#include "swm/server/plan_store.h"
#include "swm/server/swm_service.h"

namespace codeco::swm {
namespace {

namespace acm = codeco::acm::v1;
namespace pb = codeco::swm::v1;

// The path of the first error: the text before the first ": " of the first line.
std::string FirstErrorPath(const std::string& message) {
  std::string first = message.substr(0, message.find('\n'));
  return first.substr(0, first.find(": "));
}

acm::ServiceSpec* AddService(pb::PlaceApplicationRequest& request, const std::string& name,
                             int replicas) {
  acm::ServiceSpec* s = request.mutable_application()->mutable_spec()->add_services();
  s->set_name(name);
  s->set_image("registry.example.org/" + name + ":1");
  s->set_replicas(replicas);
  return s;
}

pb::PlaceApplicationRequest Request() {
  pb::PlaceApplicationRequest request;
  request.mutable_application()->mutable_metadata()->set_name("bomb");
  // No endpoints: a request that got past validation would fail reaching it.
  request.mutable_neighborhood()->add_members()->set_cluster("c1");
  return request;
}

TEST_CASE("PlaceApplication refuses bombs and overflowing totals naming the field") {
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  auto kv = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  auto channels = PeerChannels::Create({.insecure = true});
  REQUIRE(channels.ok());
  SwmServiceImpl service(*kv, clock, std::move(*channels), nullptr, nullptr);
  GrpcServerOptions options;
  options.service = "swm";
  options.insecure = true;
  options.services = {&service};
  auto server = GrpcServer::Start(options);
  REQUIRE(server.ok());
  auto stub = pb::SwmService::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  auto place = [&](const pb::PlaceApplicationRequest& request) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    pb::PlaceApplicationResponse response;
    return stub->PlaceApplication(&context, request, &response);
  };

  SECTION("replicas past the shared cap") {
    pb::PlaceApplicationRequest request = Request();
    AddService(request, "a", kMaxReplicas + 1);
    grpc::Status status = place(request);
    REQUIRE(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    REQUIRE(FirstErrorPath(status.error_message()) == "application.spec.services[0].replicas");
  }
  SECTION("a channel between two 1000-replica services") {
    pb::PlaceApplicationRequest request = Request();
    acm::ServiceSpec* a = AddService(request, "a", 1000);
    AddService(request, "b", 1000);
    acm::Channel* c = a->add_channels();
    c->set_name("a-b");
    c->set_to_service("b");
    grpc::Status status = place(request);
    REQUIRE(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    REQUIRE(FirstErrorPath(status.error_message()) ==
            "application.spec.services[0].channels[0]");
  }
  SECTION("too many workloads in all") {
    pb::PlaceApplicationRequest request = Request();
    for (int i = 0; i < 11; ++i) AddService(request, absl::StrCat("s", i), 1000);
    grpc::Status status = place(request);
    REQUIRE(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    REQUIRE(FirstErrorPath(status.error_message()) == "application.spec.services");
  }
  SECTION("replicas x cpu past int64") {
    pb::PlaceApplicationRequest request = Request();
    AddService(request, "a", 3)->mutable_requests()->set_cpu_millicores(
        std::numeric_limits<int64_t>::max() / 2);
    grpc::Status status = place(request);
    REQUIRE(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    REQUIRE(FirstErrorPath(status.error_message()) == "application.spec.services[0].replicas");
  }
}

TEST_CASE("a channel's bandwidth near int64 is shared out without overflow") {
  acm::Application app;
  app.mutable_metadata()->set_name("wide");
  acm::ServiceSpec* a = app.mutable_spec()->add_services();
  a->set_name("a");
  a->set_replicas(2);
  acm::ServiceSpec* b = app.mutable_spec()->add_services();
  b->set_name("b");
  b->set_replicas(3);
  acm::Channel* c = a->add_channels();
  c->set_name("a-b");
  c->set_to_service("b");
  c->set_min_bandwidth_bps(std::numeric_limits<int64_t>::max());
  auto core = ToCoreApplication(app, {"c1"});
  INFO(core.status().ToString());
  REQUIRE(core.ok());
  REQUIRE(core->channels.size() == 6);
  // ceil(max / 3) = max / 3 + 1 (max = 2^63 - 1 is not a multiple of 3).
  REQUIRE(core->channels[0].min_bandwidth_bps == std::numeric_limits<int64_t>::max() / 3 + 1);
}

TEST_CASE("custom profile weights must name a built-in profile with a finite weight") {
  acm::Application app;
  app.mutable_metadata()->set_name("blend");
  app.mutable_spec()->add_services()->set_name("a");
  app.mutable_spec()->set_performance_profile(common::v1::PERFORMANCE_PROFILE_CUSTOM);
  (*app.mutable_spec()->mutable_custom_profile_weights())["greenness"] = 2;
  auto ok = ToCoreApplication(app, {"c1"});
  REQUIRE(ok.ok());
  CHECK(ok->custom_profile_weights == std::map<std::string, double>{{"greenness", 2}});
  (*app.mutable_spec()->mutable_custom_profile_weights())["energy"] = 1;
  (*app.mutable_spec()->mutable_custom_profile_weights())["cost"] = -1;
  auto bad = ToCoreApplication(app, {"c1"});
  REQUIRE(absl::IsInvalidArgument(bad.status()));
  const std::string message(bad.status().message());
  CHECK(message.find("application.spec.custom_profile_weights[\"energy\"]: must be latency") != std::string::npos);
  CHECK(message.find("application.spec.custom_profile_weights[\"cost\"]: must be a finite number") != std::string::npos);
}

}  // namespace
}  // namespace codeco::swm
