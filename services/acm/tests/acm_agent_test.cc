// A managed cluster's ACM agent against a real hub ACM (in process, over
// gRPC): it registers from its LMS (a fake), keeps local copies of the
// neighborhood of an application applied on the hub, and its ACM still
// serves that neighborhood once the hub is gone. Push* go to an MC's ACM,
// never to the hub's.
#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "acm/core/member_publisher.h"
#include "acm/server/acm_service.h"
#include "acm/server/cluster_agent.h"
#include "acm/store/kv_application_store.h"
#include "codeco/common/clock.h"
#include "codeco/common/peer_channels.h"
#include "codeco/common/server.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "acm_test_util.h"

namespace codeco::acm {
namespace {

using testing::In;

// An LMS with one ready node.
class FakeLms final : public lms::v1::LmsService::Service {
 public:
  grpc::Status ListNodes(grpc::ServerContext*, const lms::v1::ListNodesRequest*,
                         lms::v1::ListNodesResponse* response) override {
    auto* node = response->add_nodes();
    node->set_name("worker-1");
    node->mutable_allocatable()->set_cpu_millicores(4000);
    node->mutable_allocatable()->set_memory_bytes(int64_t{8} << 30);
    node->set_condition(lms::v1::NODE_CONDITION_READY);
    (*node->mutable_labels())["codeco.io/region"] = "eu-west";
    return grpc::Status::OK;
  }
};

std::unique_ptr<GrpcServer> Serve(std::vector<grpc::Service*> services, const std::string& name) {
  GrpcServerOptions options;
  options.service = name;
  options.insecure = true;
  options.services = std::move(services);
  auto started = GrpcServer::Start(options);
  REQUIRE(started.ok());
  return *std::move(started);
}

std::unique_ptr<KvStore> NewKv() { return NewInMemoryKvStore(AcmServiceColumnFamilies()); }

// Polls `check` until it holds or 30 s pass.
template <typename Check>
bool Eventually(Check check) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    if (check()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

grpc::Status GetNeighborhood(v1::AcmService::Stub& stub, const std::string& app,
                             v1::Neighborhood* nb) {
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(5)));
  v1::GetNeighborhoodRequest request;
  request.set_application(app);
  v1::GetNeighborhoodResponse response;
  grpc::Status status = stub.GetNeighborhood(&context, request, &response);
  *nb = response.neighborhood();
  return status;
}

TEST_CASE("an MC keeps its neighborhoods locally and serves them while the hub is away") {
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  // The hub: agents heartbeat (and sync) every 50 ms.
  auto hub_kv = NewKv();
  AcmServiceOptions hub_options;
  hub_options.clusters.heartbeat_interval = absl::Milliseconds(50);
  auto hub = NewAcmService(*hub_kv, clock, hub_options);
  auto hub_server = Serve({hub.get()}, "acm");
  auto hub_stub = v1::AcmService::NewStub(
      grpc::CreateChannel(hub_server->address(), grpc::InsecureChannelCredentials()));

  // The MC: its LMS, its ACM with local copies, its agent.
  FakeLms lms;
  auto lms_server = Serve({&lms}, "lms");
  auto mc_kv = NewKv();
  AcmServiceOptions mc_options;
  mc_options.local_copies = std::make_shared<LocalCopies>(*mc_kv, "edge-1");
  auto mc = NewAcmService(*mc_kv, clock, mc_options);
  auto mc_server = Serve({mc.get()}, "acm");
  auto mc_stub = v1::AcmService::NewStub(
      grpc::CreateChannel(mc_server->address(), grpc::InsecureChannelCredentials()));
  auto peers = PeerChannels::Create({.insecure = true});
  REQUIRE(peers.ok());
  auto agent = std::make_unique<ClusterAgent>(
      ClusterAgentOptions{"edge-1", hub_server->address(), lms_server->address(), true,
                          absl::Milliseconds(50)},
      **peers, mc_options.local_copies);

  REQUIRE(Eventually([&] {
    grpc::ClientContext context;
    v1::GetClusterRequest request;
    request.set_name("edge-1");
    v1::GetClusterResponse response;
    return hub_stub->GetCluster(&context, request, &response).ok();
  }));
  {
    grpc::ClientContext context;
    v1::ApplyApplicationRequest request;
    request.set_cam_yaml(R"(apiVersion: codeco.he-codeco.eu/v1alpha1
kind: CodecoApp
metadata: {name: shop}
spec:
  appName: shop
  codecoapp-msspec:
    - serviceName: web
      podspec:
        containers: [{name: web, image: "registry.example.org/web:1"}]
)");
    v1::ApplyApplicationResponse response;
    REQUIRE(hub_stub->ApplyApplication(&context, request, &response).ok());
    REQUIRE(response.application().status().neighborhood_id() == "nb-shop");
  }
  // The MC's ACM answers from its copy once the agent has synced.
  v1::Neighborhood nb;
  REQUIRE(Eventually([&] { return GetNeighborhood(*mc_stub, "shop", &nb).ok(); }));
  REQUIRE(nb.members_size() == 1);
  REQUIRE(nb.members(0).cluster() == "edge-1");

  // The hub goes away: the copy stays and is still served.
  hub_server->Shutdown(absl::Seconds(1));
  hub_server.reset();
  absl::SleepFor(absl::Milliseconds(200));  // a few failed agent cycles
  REQUIRE(GetNeighborhood(*mc_stub, "shop", &nb).ok());
  REQUIRE(nb.id() == "nb-shop");
  REQUIRE(mc_options.local_copies->NeighborhoodRevisions()->at("nb-shop") == 1);
  agent->Stop();
  mc_server->Shutdown(absl::Seconds(1));
  lms_server->Shutdown(absl::Seconds(1));
}

TEST_CASE("Push RPCs store into an MC's copies and are refused by the hub") {
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  auto hub_kv = NewKv();
  auto hub = NewAcmService(*hub_kv, clock);
  auto hub_server = Serve({hub.get()}, "acm");
  auto hub_stub = v1::AcmService::NewStub(
      grpc::CreateChannel(hub_server->address(), grpc::InsecureChannelCredentials()));
  auto mc_kv = NewKv();
  AcmServiceOptions mc_options;
  mc_options.local_copies = std::make_shared<LocalCopies>(*mc_kv, "edge-1");
  auto mc = NewAcmService(*mc_kv, clock, mc_options);
  auto mc_server = Serve({mc.get()}, "acm");
  auto mc_stub = v1::AcmService::NewStub(
      grpc::CreateChannel(mc_server->address(), grpc::InsecureChannelCredentials()));

  v1::PushNeighborhoodRequest push;
  push.mutable_neighborhood()->set_id("nb-shop");
  push.mutable_neighborhood()->set_application("shop");
  push.mutable_neighborhood()->set_revision(3);
  push.mutable_neighborhood()->add_members()->set_cluster("edge-1");
  {
    grpc::ClientContext context;
    v1::PushNeighborhoodResponse response;
    REQUIRE(hub_stub->PushNeighborhood(&context, push, &response).error_code() ==
            grpc::StatusCode::FAILED_PRECONDITION);
  }
  {
    grpc::ClientContext context;
    v1::PushNeighborhoodResponse response;
    REQUIRE(mc_stub->PushNeighborhood(&context, push, &response).ok());
    REQUIRE(response.stored_revision() == 3);
  }
  v1::Neighborhood nb;
  REQUIRE(GetNeighborhood(*mc_stub, "shop", &nb).ok());
  REQUIRE(nb.revision() == 3);

  v1::PushAssignmentRequest assign;
  assign.mutable_assignment()->set_application("shop");
  assign.mutable_assignment()->set_cluster("edge-2");
  {
    grpc::ClientContext context;
    v1::PushAssignmentResponse response;
    grpc::Status status = mc_stub->PushAssignment(&context, assign, &response);
    REQUIRE(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    REQUIRE_THAT(status.error_message(), Catch::StartsWith("assignment.cluster"));
  }
  assign.mutable_assignment()->set_cluster("edge-1");
  assign.mutable_assignment()->set_plan_revision(2);
  {
    grpc::ClientContext context;
    v1::PushAssignmentResponse response;
    REQUIRE(mc_stub->PushAssignment(&context, assign, &response).ok());
    REQUIRE(response.changed());
  }
  REQUIRE(mc_options.local_copies->GetAssignment("shop")->plan_revision() == 2);
  mc_server->Shutdown(absl::Seconds(1));
  hub_server->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace codeco::acm

namespace codeco::acm {
namespace {

TEST_CASE("the hub pushes a new neighborhood to the registered ACM of each member") {
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  // The MC: its ACM with local copies and no agent, so only a push can fill them.
  auto mc_kv = NewKv();
  AcmServiceOptions mc_options;
  mc_options.local_copies = std::make_shared<LocalCopies>(*mc_kv, "edge-1");
  auto mc = NewAcmService(*mc_kv, clock, mc_options);
  auto mc_server = Serve({mc.get()}, "acm");
  auto mc_stub = v1::AcmService::NewStub(
      grpc::CreateChannel(mc_server->address(), grpc::InsecureChannelCredentials()));

  // The hub, with channels to push through.
  auto peers = PeerChannels::Create({.insecure = true});
  REQUIRE(peers.ok());
  auto hub_kv = NewKv();
  AcmServiceOptions hub_options;
  hub_options.member_peers = peers->get();
  hub_options.publish_interval = absl::Milliseconds(50);
  auto hub = NewAcmService(*hub_kv, clock, hub_options);
  auto hub_server = Serve({hub.get()}, "acm");
  auto hub_stub = v1::AcmService::NewStub(
      grpc::CreateChannel(hub_server->address(), grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext context;
    v1::RegisterClusterRequest request;
    v1::Cluster& cluster = *request.mutable_cluster();
    cluster.mutable_metadata()->set_name("edge-1");
    cluster.set_role(v1::CLUSTER_ROLE_MC);
    cluster.mutable_capacity()->mutable_largest_free_node()->set_cpu_millicores(4000);
    (*cluster.mutable_endpoints())[kAcmEndpoint] = mc_server->address();
    v1::RegisterClusterResponse response;
    REQUIRE(hub_stub->RegisterCluster(&context, request, &response).ok());
  }
  {
    grpc::ClientContext context;
    v1::ApplyApplicationRequest request;
    request.set_cam_yaml(testing::SmallCam("shop"));
    v1::ApplyApplicationResponse response;
    REQUIRE(hub_stub->ApplyApplication(&context, request, &response).ok());
    REQUIRE(response.application().status().neighborhood_id() == "nb-shop");
  }
  v1::Neighborhood nb;
  REQUIRE(Eventually([&] { return GetNeighborhood(*mc_stub, "shop", &nb).ok(); }));
  CHECK(nb.id() == "nb-shop");
  REQUIRE(nb.members_size() == 1);
  CHECK(nb.members(0).cluster() == "edge-1");

  // Deleted on the hub (no scheduler to wait for): the copy goes too.
  {
    grpc::ClientContext context;
    v1::DeleteApplicationRequest request;
    request.set_name("shop");
    v1::DeleteApplicationResponse response;
    REQUIRE(hub_stub->DeleteApplication(&context, request, &response).ok());
  }
  REQUIRE(Eventually([&] {
    return GetNeighborhood(*mc_stub, "shop", &nb).error_code() == grpc::StatusCode::NOT_FOUND;
  }));
  hub_server->Shutdown(absl::Seconds(1));
  mc_server->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace codeco::acm

namespace codeco::acm {
namespace {

// An LMS with one node and one pod whose phase the test sets; its pod watch
// sends one event per SetPhase.
class WatchableLms final : public lms::v1::LmsService::Service {
 public:
  grpc::Status ListNodes(grpc::ServerContext*, const lms::v1::ListNodesRequest*,
                         lms::v1::ListNodesResponse* response) override {
    auto* node = response->add_nodes();
    node->set_name("worker-1");
    node->mutable_allocatable()->set_cpu_millicores(4000);
    node->mutable_allocatable()->set_memory_bytes(int64_t{8} << 30);
    node->set_condition(lms::v1::NODE_CONDITION_READY);
    return grpc::Status::OK;
  }
  grpc::Status ListPods(grpc::ServerContext*, const lms::v1::ListPodsRequest*,
                        lms::v1::ListPodsResponse* response) override {
    absl::MutexLock lock(&mu_);
    *response->add_pods() = Pod();
    return grpc::Status::OK;
  }
  grpc::Status WatchPods(grpc::ServerContext* context, const lms::v1::WatchPodsRequest*,
                         grpc::ServerWriter<lms::v1::WatchPodsResponse>* writer) override {
    int64_t sent = -1;  // the first event is the pod as it is
    while (!context->IsCancelled()) {
      lms::v1::WatchPodsResponse event;
      {
        absl::MutexLock lock(&mu_);
        auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return version_ > sent; };
        if (!mu_.AwaitWithTimeout(absl::Condition(&changed), absl::Milliseconds(50))) continue;
        sent = version_;
        *event.mutable_pod() = Pod();
        event.set_resource_version(absl::StrCat(sent));
      }
      if (!writer->Write(event)) break;
    }
    return grpc::Status::OK;
  }
  void SetPhase(lms::v1::PodPhase phase) {
    absl::MutexLock lock(&mu_);
    phase_ = phase;
    ++version_;
  }

 private:
  lms::v1::Pod Pod() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    lms::v1::Pod pod;
    pod.set_name("shop-web-0");
    pod.set_node_name("worker-1");
    pod.set_phase(phase_);
    (*pod.mutable_labels())["codeco.io/application"] = "shop";
    (*pod.mutable_labels())["codeco.io/service"] = "web";
    return pod;
  }
  absl::Mutex mu_;
  lms::v1::PodPhase phase_ ABSL_GUARDED_BY(mu_) = lms::v1::POD_PHASE_PENDING;
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
};

// A hub that asks for a heartbeat once an hour and records the pod phases
// each heartbeat carries.
class RecordingHub final : public v1::AcmService::Service {
 public:
  grpc::Status RegisterCluster(grpc::ServerContext*, const v1::RegisterClusterRequest*,
                               v1::RegisterClusterResponse* response) override {
    response->set_heartbeat_interval_ns(absl::ToInt64Nanoseconds(absl::Hours(1)));
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override {
    response->set_heartbeat_interval_ns(absl::ToInt64Nanoseconds(absl::Hours(1)));
    absl::MutexLock lock(&mu_);
    for (const auto& pod : request->pods()) phases_.push_back(pod.phase());
    return grpc::Status::OK;
  }
  std::vector<lms::v1::PodPhase> phases() {
    absl::MutexLock lock(&mu_);
    return phases_;
  }

 private:
  absl::Mutex mu_;
  std::vector<lms::v1::PodPhase> phases_ ABSL_GUARDED_BY(mu_);
};

TEST_CASE("a pod change reaches the hub at once and not at the next heartbeat") {
  WatchableLms lms;
  auto lms_server = Serve({&lms}, "lms");
  RecordingHub hub;
  auto hub_server = Serve({&hub}, "acm");
  auto peers = PeerChannels::Create({.insecure = true});
  REQUIRE(peers.ok());
  ClusterAgentOptions options{"edge-1", hub_server->address(), lms_server->address(), true};
  options.pod_report_delay = absl::Milliseconds(20);
  ClusterAgent agent(options, **peers);
  // Registered, then a heartbeat follows the watch's first events; the next
  // regular one is an hour away.
  REQUIRE(Eventually([&] { return !hub.phases().empty(); }));
  CHECK(hub.phases().back() == lms::v1::POD_PHASE_PENDING);
  lms.SetPhase(lms::v1::POD_PHASE_RUNNING);
  REQUIRE(Eventually([&] { return hub.phases().back() == lms::v1::POD_PHASE_RUNNING; }));
  agent.Stop();
  hub_server->Shutdown(absl::Seconds(1));
  lms_server->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace codeco::acm
