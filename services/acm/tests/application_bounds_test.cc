// The caps ACM and SWM share (CheckApplicationBounds) on specs in proto form,
// and the same caps as the CAM parser reports them with the YAML's paths.
#include "acm/core/application_bounds.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "acm/core/cam_parser.h"

namespace codeco::acm {
namespace {

// The path of the first error: the text before the first ": " of the first line.
std::string FirstErrorPath(const absl::Status& status) {
  std::string message(status.message());
  std::string first = message.substr(0, message.find('\n'));
  return first.substr(0, first.find(": "));
}

v1::ServiceSpec* AddService(v1::ApplicationSpec& spec, const std::string& name, int replicas) {
  v1::ServiceSpec* s = spec.add_services();
  s->set_name(name);
  s->set_image("registry.example.org/" + name + ":1");
  s->set_replicas(replicas);
  return s;
}

void AddChannel(v1::ServiceSpec& from, const std::string& name, const std::string& to) {
  v1::Channel* c = from.add_channels();
  c->set_name(name);
  c->set_from_service(from.name());
  c->set_to_service(to);
  c->set_to_port(80);
}

TEST_CASE("bounds: totals of a normal spec with replicas 0 counting as 1") {
  v1::ApplicationSpec spec;
  spec.set_app_name("app");
  v1::ServiceSpec* a = AddService(spec, "a", 3);
  a->mutable_requests()->set_cpu_millicores(500);
  a->mutable_requests()->set_memory_bytes(int64_t{1} << 30);
  v1::ServiceSpec* b = AddService(spec, "b", 0);
  b->mutable_requests()->set_gpu(1);
  AddChannel(*a, "a-b", "b");
  absl::StatusOr<ApplicationTotals> totals = CheckApplicationBounds(spec, ProtoSpecFieldNames("spec"));
  INFO(totals.status().ToString());
  REQUIRE(totals.ok());
  REQUIRE(totals->workloads == 4);
  REQUIRE(totals->channels == 3);
  REQUIRE(totals->cpu_millicores == 1500);
  REQUIRE(totals->memory_bytes == int64_t{3} << 30);
  REQUIRE(totals->gpu == 1);
}

TEST_CASE("bounds: one replica cap named by the field path") {
  v1::ApplicationSpec spec;
  AddService(spec, "a", 1);
  AddService(spec, "b", 1);
  AddService(spec, "c", kMaxServiceReplicas + 1);
  absl::Status status = CheckApplicationBounds(spec, ProtoSpecFieldNames("spec")).status();
  REQUIRE(status.code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(FirstErrorPath(status) == "spec.services[2].replicas");
  REQUIRE(CheckApplicationBounds(spec, ProtoSpecFieldNames("application.spec")).status().message()
              .find("application.spec.services[2].replicas: must be between 0 and 1000") == 0);
  spec.mutable_services(2)->set_replicas(kMaxServiceReplicas);
  REQUIRE(CheckApplicationBounds(spec, ProtoSpecFieldNames("spec")).ok());
  spec.mutable_services(1)->mutable_autoscaling()->set_max_replicas(kMaxServiceReplicas * 10);
  REQUIRE(FirstErrorPath(CheckApplicationBounds(spec, ProtoSpecFieldNames("spec")).status()) ==
          "spec.services[1].autoscaling.max_replicas");
}

TEST_CASE("bounds: a channel between two 1000-replica services is refused before it is expanded") {
  v1::ApplicationSpec spec;
  v1::ServiceSpec* a = AddService(spec, "a", 1000);
  AddService(spec, "b", 1000);
  AddChannel(*a, "small", "b");  // would be 10^6 pairs
  absl::Status status = CheckApplicationBounds(spec, ProtoSpecFieldNames("spec")).status();
  REQUIRE(status.code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(FirstErrorPath(status) == "spec.services[0].channels[0]");
  REQUIRE(std::string(status.message()).find("1000 x 1000 = 1000000 channels") !=
          std::string::npos);
  // At the cap exactly: 50 x 1000 = 50000 channels are accepted.
  spec.mutable_services(0)->set_replicas(50);
  absl::StatusOr<ApplicationTotals> totals = CheckApplicationBounds(spec, ProtoSpecFieldNames("spec"));
  REQUIRE(totals.ok());
  REQUIRE(totals->channels == kMaxApplicationChannels);
  AddChannel(*spec.mutable_services(0), "one-more", "b");
  REQUIRE(FirstErrorPath(CheckApplicationBounds(spec, ProtoSpecFieldNames("spec")).status()) ==
          "spec.services[0].channels[1]");
}

TEST_CASE("bounds: the replicas of all services are capped together") {
  v1::ApplicationSpec spec;
  for (int i = 0; i < 10; ++i) AddService(spec, absl::StrCat("s", i), 1000);
  REQUIRE(CheckApplicationBounds(spec, ProtoSpecFieldNames("spec")).ok());
  AddService(spec, "s10", 1);
  absl::Status status = CheckApplicationBounds(spec, ProtoSpecFieldNames("spec")).status();
  REQUIRE(FirstErrorPath(status) == "spec.services");
  REQUIRE(std::string(status.message()).find("10001 workloads") != std::string::npos);
}

TEST_CASE("bounds: replicas x requests and their sums are overflow-checked") {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  SECTION("one service's product") {
    v1::ApplicationSpec spec;
    AddService(spec, "a", 2)->mutable_requests()->set_cpu_millicores(kMax / 2 + 1);
    absl::Status status = CheckApplicationBounds(spec, ProtoSpecFieldNames("spec")).status();
    REQUIRE(status.code() == absl::StatusCode::kInvalidArgument);
    REQUIRE(FirstErrorPath(status) == "spec.services[0].replicas");
    REQUIRE(std::string(status.message()).find("CPU millicores") != std::string::npos);
  }
  SECTION("the sum over services") {
    v1::ApplicationSpec spec;
    for (int i = 0; i < 9; ++i) {
      AddService(spec, absl::StrCat("s", i), 1000)
          ->mutable_requests()
          ->set_memory_bytes(int64_t{1} << 50);  // 1 PiB, the parser's per-pod cap
    }
    absl::Status status = CheckApplicationBounds(spec, ProtoSpecFieldNames("spec")).status();
    REQUIRE(FirstErrorPath(status) == "spec.services[8].replicas");
    REQUIRE(std::string(status.message()).find("memory bytes") != std::string::npos);
  }
  SECTION("negative requests") {
    v1::ApplicationSpec spec;
    AddService(spec, "a", 1)->mutable_requests()->set_gpu(-1);
    REQUIRE(FirstErrorPath(CheckApplicationBounds(spec, ProtoSpecFieldNames("spec")).status()) ==
            "spec.services[0].requests.gpu");
  }
}

TEST_CASE("bounds: ValidateApplicationSpec applies the shared caps") {
  v1::ApplicationSpec spec;
  spec.set_app_name("app");
  v1::ServiceSpec* a = AddService(spec, "a", 1000);
  AddService(spec, "b", 1000);
  AddChannel(*a, "a-b", "b");
  absl::Status status = ValidateApplicationSpec(spec);
  REQUIRE(status.code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(FirstErrorPath(status) == "spec.services[0].channels[0]");
  spec.mutable_services(0)->set_replicas(5000);
  REQUIRE(FirstErrorPath(ValidateApplicationSpec(spec)) == "spec.services[0].replicas");
}

// A CodecoApp with `services` services of `replicas` replicas each, every
// one with a channel to the next, requesting `memory`.
std::string Cam(int services, int replicas, const std::string& memory = "64Mi") {
  std::string yaml = R"(apiVersion: codeco.io/v1
kind: CodecoApp
metadata:
  name: app
spec:
  appName: app
  codecoapp-msspec:
)";
  for (int i = 0; i < services; ++i) {
    absl::StrAppend(&yaml, "    - serviceName: s", i, "\n      replicas: ", replicas, R"(
      podspec:
        containers:
          - name: c
            image: registry.example.org/c:1
            ports:
              - containerPort: 80
            resources:
              requests:
                memory: )", memory, "\n");
    if (i + 1 < services) {
      absl::StrAppend(&yaml, "      serviceChannels:\n        - channelName: to-", i + 1,
                      "\n          otherService:\n            serviceName: s", i + 1,
                      "\n            port: 80\n");
    }
  }
  return yaml;
}

TEST_CASE("bounds: the CAM parser names the YAML's fields") {
  REQUIRE(ParseCam(Cam(3, 10)).ok());
  SECTION("replicas") {
    absl::Status status = ParseCam(Cam(2, 1001)).status();
    REQUIRE(FirstErrorPath(status) == "spec.codecoapp-msspec[0].replicas");
  }
  SECTION("channels") {
    absl::Status status = ParseCam(Cam(2, 1000)).status();
    REQUIRE(FirstErrorPath(status) == "spec.codecoapp-msspec[0].serviceChannels[0]");
  }
  SECTION("workloads") {
    absl::StatusOr<ParsedCam> cam = ParseCam(Cam(11, 1000) + "\n");
    REQUIRE(cam.status().code() == absl::StatusCode::kInvalidArgument);
    // The channel cap trips first on the chain; both are reported.
    REQUIRE(std::string(cam.status().message()).find("spec.codecoapp-msspec: the replicas add up "
                                                     "to 11000 workloads") != std::string::npos);
  }
  SECTION("memory summed over services") {
    absl::Status status = ParseCam(Cam(9, 2, "1Pi")).status();
    REQUIRE(status.ok());
    absl::Status big = ParseCam(Cam(9, 1000, "1Pi")).status();
    REQUIRE(big.code() == absl::StatusCode::kInvalidArgument);
    REQUIRE(std::string(big.message()).find("spec.codecoapp-msspec[8].replicas: 1000 replicas of") !=
            std::string::npos);
  }
}

TEST_CASE("bounds: one pod's containers summed past int64 are refused") {
  // 8193 containers of 1 PiB each: the 8192nd takes the sum to 2^63.
  std::string yaml = R"(apiVersion: codeco.he-codeco.eu/v1alpha1
kind: CodecoApp
metadata:
  name: app
spec:
  appName: app
  codecoapp-msspec:
    - serviceName: a
      podspec:
        containers:
)";
  for (int i = 0; i < 8193; ++i) {
    absl::StrAppend(&yaml, "          - {name: c", i,
                    ", image: i, resources: {requests: {memory: 1Pi}}}\n");
  }
  absl::Status status = ParseCam(yaml).status();
  REQUIRE(status.code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(FirstErrorPath(status) ==
          "spec.codecoapp-msspec[0].podspec.containers[8191].resources.requests.memory");
}

TEST_CASE("bounds: deep flow nesting is refused before yaml-cpp reads it") {
  std::string deep = "a: ";
  for (int i = 0; i < 100000; ++i) deep += "[";
  absl::Status status = ParseCam(deep).status();
  REQUIRE(status.code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(std::string(status.message()) == "document: nested deeper than 32 levels");
  // Brackets inside quoted scalars and comments do not count.
  std::string brackets(100, '[');
  std::string cam = R"(apiVersion: codeco.he-codeco.eu/v1alpha1
kind: CodecoApp
metadata: {name: app, labels: {a: ")" + brackets + R"(", b: ')" + brackets + R"('}}
# )" + brackets + R"(
spec:
  appName: app
  codecoapp-msspec:
    - serviceName: web
      podspec: {containers: [{name: web, image: "registry.example.org/web:1"}]}
)";
  absl::StatusOr<ParsedCam> parsed = ParseCam(cam);
  INFO(parsed.status().ToString());
  REQUIRE(parsed.ok());
}

}  // namespace
}  // namespace codeco::acm
