// AcmService over real gRPC on loopback: apply/get/list/delete/rollback with
// their error codes, and WatchApplication streaming in order and resuming.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_replace.h"
#include "absl/synchronization/notification.h"
#include "acm/server/acm_service.h"
#include "codeco/common/executor.h"
#include "acm/store/kv_application_store.h"
#include "codeco/common/clock.h"
#include "codeco/common/server.h"
#include "grpcpp/create_channel.h"
#include "acm_test_util.h"

namespace codeco::acm {
namespace {

using testing::In;
using testing::SmallCam;

namespace fs = std::filesystem;
using Stub = v1::AcmService::Stub;

std::string Bookinfo() {
  std::ifstream in(fs::path(ACM_EXAMPLES_DIR) / "bookinfo.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Server {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore([] { return AcmServiceColumnFamilies(); }());
  SimulatedClock clock{absl::FromUnixSeconds(1'800'000'000)};
  std::unique_ptr<AcmServiceImpl> service = NewAcmService(*kv, clock);
  std::unique_ptr<GrpcServer> server;
  std::unique_ptr<Stub> stub;

  Server() {
    GrpcServerOptions options;
    options.service = "acm";
    options.insecure = true;
    options.services = {service.get()};
    auto started = GrpcServer::Start(options);
    REQUIRE(started.ok());
    server = *std::move(started);
    stub = v1::AcmService::NewStub(
        grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  }
  ~Server() { server->Shutdown(absl::Seconds(1)); }

  grpc::Status Apply(const std::string& yaml, v1::ApplyApplicationResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(30)));
    v1::ApplyApplicationRequest request;
    request.set_cam_yaml(yaml);
    return stub->ApplyApplication(&context, request, response);
  }
};

TEST_CASE("applications are applied and read and listed and rolled back and deleted over gRPC") {
  Server s;
  v1::ApplyApplicationResponse applied;
  REQUIRE(s.Apply(Bookinfo(), &applied).ok());
  REQUIRE(applied.created());
  REQUIRE(applied.application().status().phase() == v1::APPLICATION_PHASE_PENDING);

  v1::ApplyApplicationResponse bad;
  grpc::Status status =
      s.Apply(absl::StrReplaceAll(Bookinfo(), {{"qosClass: Gold", "qosClass: 7"}}), &bad);
  REQUIRE(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  REQUIRE_THAT(status.error_message(), Catch::StartsWith("spec.qosClass: "));

  {
    grpc::ClientContext context;
    v1::GetApplicationRequest request;
    request.set_name("bookinfo");
    v1::GetApplicationResponse response;
    REQUIRE(s.stub->GetApplication(&context, request, &response).ok());
    REQUIRE(response.application().spec().services_size() == 4);
  }
  {
    grpc::ClientContext context;
    v1::GetApplicationRequest request;
    request.set_name("nope");
    v1::GetApplicationResponse response;
    REQUIRE(s.stub->GetApplication(&context, request, &response).error_code() ==
            grpc::StatusCode::NOT_FOUND);
  }
  REQUIRE(s.Apply(SmallCam("shop", "1"), &applied).ok());
  REQUIRE(s.Apply(SmallCam("shop", "2"), &applied).ok());
  {
    grpc::ClientContext context;
    v1::ListApplicationsRequest request;
    request.set_page_size(1);
    v1::ListApplicationsResponse response;
    REQUIRE(s.stub->ListApplications(&context, request, &response).ok());
    REQUIRE(response.applications_size() == 1);
    REQUIRE(response.applications(0).metadata().name() == "bookinfo");
    REQUIRE(response.next_page_token() == "bookinfo");
  }
  {
    grpc::ClientContext context;
    v1::RollbackApplicationRequest request;
    request.set_name("shop");
    request.set_to_spec_revision(1);
    v1::RollbackApplicationResponse response;
    REQUIRE(s.stub->RollbackApplication(&context, request, &response).ok());
    REQUIRE(response.application().spec_revision() == 3);
  }
  {
    grpc::ClientContext context;
    v1::DeleteApplicationRequest request;
    request.set_name("shop");
    request.set_expected_revision(99);
    v1::DeleteApplicationResponse response;
    REQUIRE(s.stub->DeleteApplication(&context, request, &response).error_code() ==
            grpc::StatusCode::FAILED_PRECONDITION);
  }
  {
    grpc::ClientContext context;
    v1::DeleteApplicationRequest request;
    request.set_name("shop");
    v1::DeleteApplicationResponse response;
    REQUIRE(s.stub->DeleteApplication(&context, request, &response).ok());
  }
  {
    grpc::ClientContext context;
    v1::ListApplicationsRequest request;
    v1::ListApplicationsResponse response;
    REQUIRE(s.stub->ListApplications(&context, request, &response).ok());
    REQUIRE(response.applications_size() == 1);
  }
}

TEST_CASE("WatchApplication streams the current state then every change in order") {
  Server s;
  v1::ApplyApplicationResponse applied;
  REQUIRE(s.Apply(SmallCam("a", "1"), &applied).ok());  // revision 1

  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(60)));
  v1::WatchApplicationRequest request;
  auto stream = s.stub->WatchApplication(&context, request);
  v1::WatchApplicationResponse event;
  REQUIRE(stream->Read(&event));
  REQUIRE(event.type() == common::v1::WATCH_EVENT_TYPE_ADDED);
  REQUIRE(event.application().metadata().name() == "a");

  REQUIRE(s.Apply(SmallCam("b", "1"), &applied).ok());  // 2
  REQUIRE(s.Apply(SmallCam("a", "2"), &applied).ok());  // 3
  {
    grpc::ClientContext del_context;
    v1::DeleteApplicationRequest del;
    del.set_name("b");
    v1::DeleteApplicationResponse response;
    // 4: DELETING; 5: gone (no scheduler here, so nothing to release).
    REQUIRE(s.stub->DeleteApplication(&del_context, del, &response).ok());
  }
  std::vector<std::pair<common::v1::WatchEventType, int64_t>> seen;
  for (int i = 0; i < 4; ++i) {
    REQUIRE(stream->Read(&event));
    seen.emplace_back(event.type(), event.application().metadata().revision());
  }
  REQUIRE(seen == std::vector<std::pair<common::v1::WatchEventType, int64_t>>{
                      {common::v1::WATCH_EVENT_TYPE_ADDED, 2},
                      {common::v1::WATCH_EVENT_TYPE_MODIFIED, 3},
                      {common::v1::WATCH_EVENT_TYPE_MODIFIED, 4},
                      {common::v1::WATCH_EVENT_TYPE_DELETED, 5}});
  context.TryCancel();
  while (stream->Read(&event)) {
  }
  REQUIRE(stream->Finish().error_code() == grpc::StatusCode::CANCELLED);

  // Resuming one application's watch after revision 1 sees only its own change.
  grpc::ClientContext resume_context;
  resume_context.set_deadline(In(absl::Seconds(60)));
  v1::WatchApplicationRequest resume;
  resume.set_name("a");
  resume.set_from_revision(1);
  auto resumed = s.stub->WatchApplication(&resume_context, resume);
  REQUIRE(resumed->Read(&event));
  REQUIRE(event.application().metadata().revision() == 3);
  REQUIRE(event.type() == common::v1::WATCH_EVENT_TYPE_MODIFIED);
  resume_context.TryCancel();
  while (resumed->Read(&event)) {
  }
  resumed->Finish();

  // A negative revision is refused.
  grpc::ClientContext bad_context;
  bad_context.set_deadline(In(absl::Seconds(60)));
  v1::WatchApplicationRequest bad;
  bad.set_from_revision(-1);
  auto refused = s.stub->WatchApplication(&bad_context, bad);
  REQUIRE_FALSE(refused->Read(&event));
  REQUIRE(refused->Finish().error_code() == grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_CASE("an applied application gets a neighborhood of registered clusters") {
  Server s;
  for (const char* name : {"edge-1", "edge-2"}) {
    grpc::ClientContext context;
    v1::RegisterClusterRequest request;
    request.mutable_cluster()->mutable_metadata()->set_name(name);
    request.mutable_cluster()->set_role(v1::CLUSTER_ROLE_MC);
    auto* free = request.mutable_cluster()->mutable_capacity()->mutable_largest_free_node();
    free->set_cpu_millicores(4000);
    free->set_memory_bytes(int64_t{8} << 30);
    v1::RegisterClusterResponse response;
    REQUIRE(s.stub->RegisterCluster(&context, request, &response).ok());
  }
  v1::ApplyApplicationResponse applied;
  REQUIRE(s.Apply(SmallCam("shop", "1"), &applied).ok());
  REQUIRE(applied.application().status().neighborhood_id() == "nb-shop");
  REQUIRE(applied.application().status().phase() == v1::APPLICATION_PHASE_PENDING);
  grpc::ClientContext context;
  v1::GetNeighborhoodRequest request;
  request.set_application("shop");
  v1::GetNeighborhoodResponse response;
  REQUIRE(s.stub->GetNeighborhood(&context, request, &response).ok());
  REQUIRE(response.neighborhood().members_size() == 2);
  REQUIRE(response.neighborhood().revision() == 1);
  grpc::ClientContext list_context;
  v1::ListNeighborhoodsRequest list;
  list.set_cluster("edge-2");
  v1::ListNeighborhoodsResponse listed;
  REQUIRE(s.stub->ListNeighborhoods(&list_context, list, &listed).ok());
  REQUIRE(listed.neighborhoods_size() == 1);
}

TEST_CASE("clusters register and heartbeat and fall UNREACHABLE over gRPC") {
  Server s;
  {
    grpc::ClientContext context;
    v1::RegisterClusterRequest request;
    request.mutable_cluster()->mutable_metadata()->set_name("edge-1");
    request.mutable_cluster()->set_role(v1::CLUSTER_ROLE_MC);
    request.mutable_cluster()->mutable_cluster_labels()->set_region("eu-west");
    v1::RegisterClusterResponse response;
    REQUIRE(s.stub->RegisterCluster(&context, request, &response).ok());
    REQUIRE(response.heartbeat_interval_ns() == 10'000'000'000);
  }
  {
    grpc::ClientContext context;
    v1::HeartbeatRequest request;
    request.set_cluster_name("edge-1");
    request.set_sequence(1);
    request.set_health(v1::CLUSTER_HEALTH_DEGRADED);
    request.set_health_message("1 of 3 nodes not ready");
    v1::HeartbeatResponse response;
    REQUIRE(s.stub->Heartbeat(&context, request, &response).ok());
    REQUIRE_FALSE(response.reregister_required());
  }
  auto health = [&] {
    grpc::ClientContext context;
    v1::GetClusterRequest request;
    request.set_name("edge-1");
    v1::GetClusterResponse response;
    REQUIRE(s.stub->GetCluster(&context, request, &response).ok());
    return response.cluster().health();
  };
  REQUIRE(health() == v1::CLUSTER_HEALTH_DEGRADED);
  s.clock.Advance(absl::Seconds(31));
  REQUIRE(health() == v1::CLUSTER_HEALTH_UNREACHABLE);
  {
    grpc::ClientContext context;
    v1::ListClustersRequest request;
    request.set_health(v1::CLUSTER_HEALTH_UNREACHABLE);
    v1::ListClustersResponse response;
    REQUIRE(s.stub->ListClusters(&context, request, &response).ok());
    REQUIRE(response.clusters_size() == 1);
  }
  {
    grpc::ClientContext context;
    v1::RegisterClusterRequest request;
    request.mutable_cluster()->mutable_metadata()->set_name("Bad Name");
    v1::RegisterClusterResponse response;
    grpc::Status status = s.stub->RegisterCluster(&context, request, &response);
    REQUIRE(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    REQUIRE_THAT(status.error_message(), Catch::StartsWith("cluster.metadata.name: "));
  }
  {
    grpc::ClientContext context;
    v1::UnregisterClusterRequest request;
    request.set_name("edge-1");
    v1::UnregisterClusterResponse response;
    REQUIRE(s.stub->UnregisterCluster(&context, request, &response).ok());
  }
  {
    grpc::ClientContext context;
    v1::PushAssignmentRequest request;
    v1::PushAssignmentResponse response;
    // The hub has no local copies: Push* belong to an MC's ACM.
    REQUIRE(s.stub->PushAssignment(&context, request, &response).error_code() ==
            grpc::StatusCode::FAILED_PRECONDITION);
  }
}

TEST_CASE("the executor refuses work past its queue bound and drains on destruction") {
  absl::Notification release;
  absl::Notification started;
  std::atomic<int> ran{0};
  {
    BoundedExecutor executor(1, 2);
    REQUIRE(executor.Submit([&] {
      started.Notify();
      release.WaitForNotification();
      ++ran;
    }));
    started.WaitForNotification();  // the only worker is busy
    REQUIRE(executor.Submit([&] { ++ran; }));
    REQUIRE(executor.Submit([&] { ++ran; }));
    REQUIRE_FALSE(executor.Submit([&] { ++ran; }));  // queue full
    release.Notify();
  }
  REQUIRE(ran == 3);
}

}  // namespace
}  // namespace codeco::acm
