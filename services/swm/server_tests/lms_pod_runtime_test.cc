// LmsPodRuntime against the real CODEF LMS server (codef_server) over gRPC on
// loopback: nodes with capacity and allocations, pods created from templates
// and deleted, and the core's LocalClusterExecutor driving a cluster through it.
#include "swm/lms/lms_pod_runtime.h"

#include <catch2/catch.hpp>

#include "codeco/common/clock.h"
#include "codeco/common/server.h"
#include "emulated_cluster.h"
#include "federation.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "link_control.h"
#include "lms_service.h"
#include "scenario.h"

namespace codeco::swm {
namespace {

constexpr char kScenario[] = R"(
name: lms-runtime
federation:
  hub: {name: hub}
  clusters:
    - name: edge
      labels: {tier: edge, country: FR}
      nodes: [{name: n, count: 2, capacity: {cpu: 2, memory: 4Gi}}]
)";

constexpr int64_t kMi = int64_t{1} << 20;

// One emulated cluster served by the CODEF LMS on a loopback port.
struct EmulatedLms {
  EmulatedLms() : clock(absl::FromUnixSeconds(1'800'000'000)) {
    auto scenario = codef::ParseScenario(kScenario, "");
    REQUIRE(scenario.ok());
    auto created = codef::Federation::Create(*scenario, clock, &links, &archives, nullptr);
    REQUIRE(created.ok());
    federation = std::move(*created);
    service = std::make_unique<codef::EmulatedLmsService>(federation->FindLms("edge"));
    GrpcServerOptions options;
    options.service = "codef-lms";
    options.insecure = true;
    options.services = {service.get()};
    auto started = GrpcServer::Start(options);
    REQUIRE(started.ok());
    server = std::move(*started);
    runtime = std::make_unique<LmsPodRuntime>(
        grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()),
        LmsPodRuntimeOptions{.cluster = "edge"});
  }

  SimulatedClock clock;
  codef::InMemoryLinkControl links;
  codef::InMemoryCheckpointArchiveStore archives;
  std::unique_ptr<codef::Federation> federation;
  std::unique_ptr<codef::EmulatedLmsService> service;
  std::unique_ptr<GrpcServer> server;
  std::unique_ptr<LmsPodRuntime> runtime;
};

TEST_CASE("LmsPodRuntime lists nodes with capacity and labels and allocations from pods") {
  EmulatedLms lms;
  auto nodes = lms.runtime->ListNodes();
  REQUIRE(nodes.ok());
  REQUIRE(nodes->size() == 2);
  for (const Node& n : *nodes) {
    CHECK(n.capacity.cpu_millis == 2000);
    CHECK(n.capacity.memory_bytes == 4096 * kMi);
    CHECK(n.allocated == Resources{});
    CHECK(n.schedulable);
    CHECK(n.labels.at("codeco.io/cluster") == "edge");
  }
  const std::string node = (*nodes)[0].name;

  codeco::lms::v1::Pod tmpl;
  tmpl.set_name("shop-web-0");
  tmpl.mutable_labels()->insert({"codeco.io/application", "shop"});
  auto* c = tmpl.add_containers();
  c->set_name("web");
  c->set_image("nginx:1.25");
  lms.runtime->SetPodTemplate(tmpl, "plan-1/shop-web-0");
  REQUIRE(lms.runtime->CreatePod(PodInfo{"shop-web-0", node, {500, 256 * kMi, 0}}).ok());
  // Same request id: the LMS answers the first result, no second pod.
  REQUIRE(lms.runtime->CreatePod(PodInfo{"shop-web-0", node, {500, 256 * kMi, 0}}).ok());
  REQUIRE(lms.runtime->CreatePod(PodInfo{"bare-0", node, {250, 128 * kMi, 0}}).ok());

  nodes = lms.runtime->ListNodes();
  REQUIRE(nodes.ok());
  for (const Node& n : *nodes) {
    CHECK(n.allocated == (n.name == node ? Resources{750, 384 * kMi, 0} : Resources{}));
  }
  auto pods = lms.runtime->ListPods();
  REQUIRE(pods.ok());
  REQUIRE(pods->size() == 2);
  CHECK((*pods)[1].name == "shop-web-0");
  CHECK((*pods)[1].node == node);
  CHECK((*pods)[1].requests == Resources{500, 256 * kMi, 0});

  // The template's image and labels reached the LMS.
  auto pod = lms.federation->FindLms("edge")->Run(
      [](codef::EmulatedCluster& cluster) { return cluster.GetPod("shop-web-0"); });
  REQUIRE(pod.ok());
  CHECK(pod->containers(0).image() == "nginx:1.25");
  CHECK(pod->labels().at("codeco.io/application") == "shop");

  REQUIRE(lms.runtime->DeletePod("shop-web-0").ok());
  CHECK(absl::IsNotFound(lms.runtime->DeletePod("shop-web-0")));
  // No room: the LMS's refusal comes back with its code and the cluster named.
  absl::Status full = lms.runtime->CreatePod(PodInfo{"huge-0", node, {64000, kMi, 0}});
  CHECK(absl::IsFailedPrecondition(full));
  CHECK(full.message().find("cluster edge") != std::string_view::npos);
  CHECK(absl::IsNotFound(lms.runtime->CreatePod(PodInfo{"lost-0", "no-such-node", {1, 1, 0}})));

  // A caller's deadline that has passed caps every call; lifting it restores them.
  lms.runtime->SetDeadline(absl::Now() - absl::Seconds(1));
  CHECK(absl::IsDeadlineExceeded(lms.runtime->ListNodes().status()));
  lms.runtime->SetDeadline(absl::InfiniteFuture());
  CHECK(lms.runtime->ListNodes().ok());
}

TEST_CASE("LmsPodRuntime reports an unreachable LMS as UNAVAILABLE within its deadline") {
  // A port nobody listens on: bind one, then shut its server down.
  std::string address;
  {
    GrpcServerOptions options;
    options.service = "gone";
    options.insecure = true;
    auto server = GrpcServer::Start(options);
    REQUIRE(server.ok());
    address = (*server)->address();
  }
  LmsPodRuntime runtime(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()),
                        LmsPodRuntimeOptions{.cluster = "away", .call_timeout = absl::Seconds(2)});
  auto nodes = runtime.ListNodes();
  REQUIRE_FALSE(nodes.ok());
  CHECK((absl::IsUnavailable(nodes.status()) || absl::IsDeadlineExceeded(nodes.status())));
}

TEST_CASE("LocalClusterExecutor reserves and commits and releases pods through the LMS") {
  EmulatedLms lms;
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  LocalClusterExecutor executor(clock, *lms.runtime);
  auto nodes = lms.runtime->ListNodes();
  REQUIRE(nodes.ok());
  const std::string node = (*nodes)[0].name;
  std::vector<ReservationItem> items = {{"a-0", node, {1500, kMi, 0}}};
  REQUIRE(executor.Reserve("r1", items, absl::Seconds(30)).ok());
  // The held room is not offered twice.
  CHECK(absl::IsFailedPrecondition(
      executor.Reserve("r2", {{"b-0", node, {1000, kMi, 0}}}, absl::Seconds(30))));
  REQUIRE(executor.Commit("r1").ok());
  REQUIRE(executor.Sync().ok());
  CHECK(lms.runtime->ListPods()->size() == 1);
  REQUIRE(executor.Release("r1").ok());
  CHECK(lms.runtime->ListPods()->empty());
}

}  // namespace
}  // namespace codeco::swm
