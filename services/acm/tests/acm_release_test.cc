// DeleteApplication through a hub ACM whose SWM is a fake gRPC server: the
// application stays DELETING while SWM cannot release it (UNIMPLEMENTED,
// UNAVAILABLE), saying why, and goes once SWM confirms; an ACM restarted on
// the same store carries on with deletions it had not finished.
#include <atomic>
#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "acm/server/acm_service.h"
#include "acm/server/swm_placement_scheduler.h"
#include "acm/store/kv_application_store.h"
#include "codeco/common/clock.h"
#include "codeco/common/server.h"
#include "codeco/swm/v1/swm_service.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "acm_test_util.h"

namespace codeco::acm {
namespace {

using testing::In;
using testing::SmallCam;

// An SWM whose ReleaseApplication answers `answer` (settable) and counts calls.
class FakeSwm final : public swm::v1::SwmService::Service {
 public:
  grpc::Status ReleaseApplication(grpc::ServerContext*,
                                  const swm::v1::ReleaseApplicationRequest* request,
                                  swm::v1::ReleaseApplicationResponse* response) override {
    absl::MutexLock lock(&mu_);
    released_.push_back(request->application());
    release_ids_.push_back(request->request_id());
    log_.push_back("release " + request->application());
    return answer_;
  }
  // Places every service on edge-1 under the next plan revision.
  grpc::Status PlaceApplication(grpc::ServerContext*,
                                const swm::v1::PlaceApplicationRequest* request,
                                swm::v1::PlaceApplicationResponse* response) override {
    absl::MutexLock lock(&mu_);
    const std::string& name = request->application().metadata().name();
    if (request->scale_in_place()) {
      // As SWM answers a spec changed beyond replica counts, unless told.
      log_.push_back("scale " + name);
      if (!scale_in_place_) {
        return grpc::Status(grpc::StatusCode::ALREADY_EXISTS, "not a change of replica counts");
      }
    } else {
      log_.push_back("place " + name);
    }
    swm::v1::AssignmentPlan plan;
    plan.set_application(name);
    plan.set_plan_revision(static_cast<int64_t>(log_.size()));
    for (const auto& s : request->application().spec().services()) {
      auto* t = plan.add_targets();
      t->set_service(s.name());
      t->set_cluster("edge-1");
      t->set_node("worker-1");
      t->set_pod(name + "-" + s.name() + "-0");
    }
    response->mutable_operation()->set_done(true);
    response->mutable_operation()->mutable_result()->PackFrom(plan);
    return grpc::Status::OK;
  }
  // Every call in order: "place APP" or "release APP".
  std::vector<std::string> log() {
    absl::MutexLock lock(&mu_);
    return log_;
  }
  void Answer(grpc::Status status) {
    absl::MutexLock lock(&mu_);
    answer_ = std::move(status);
  }
  // Whether PlaceApplication with scale_in_place scales (else ALREADY_EXISTS).
  void ScaleInPlace(bool scales) {
    absl::MutexLock lock(&mu_);
    scale_in_place_ = scales;
  }
  size_t calls() {
    absl::MutexLock lock(&mu_);
    return released_.size();
  }
  // The request_id of each ReleaseApplication, in order.
  std::vector<std::string> release_ids() {
    absl::MutexLock lock(&mu_);
    return release_ids_;
  }

 private:
  absl::Mutex mu_;
  bool scale_in_place_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status answer_ ABSL_GUARDED_BY(mu_) = grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                                           "ReleaseApplication lands later");
  std::vector<std::string> released_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> release_ids_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> log_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<GrpcServer> Serve(grpc::Service* service, const std::string& name) {
  GrpcServerOptions options;
  options.service = name;
  options.insecure = true;
  options.services = {service};
  auto started = GrpcServer::Start(options);
  REQUIRE(started.ok());
  return *std::move(started);
}

// A hub ACM over `kv`, asking the SWM at `swm`.
struct Hub {
  SimulatedClock clock{absl::FromUnixSeconds(1'800'000'000)};
  std::unique_ptr<AcmServiceImpl> service;
  std::unique_ptr<GrpcServer> server;
  std::unique_ptr<v1::AcmService::Stub> stub;

  Hub(KvStore& kv, const std::string& swm, int max_operation_watchers = 256) {
    AcmServiceOptions options;
    options.max_operation_watchers = max_operation_watchers;
    options.swm_channel = grpc::CreateChannel(swm, grpc::InsecureChannelCredentials());
    options.placement_timeout = absl::Seconds(5);
    options.release_retry_min = absl::Milliseconds(20);
    options.release_retry_max = absl::Milliseconds(100);
    service = NewAcmService(kv, clock, options);
    server = Serve(service.get(), "acm");
    stub = v1::AcmService::NewStub(
        grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  }
  ~Hub() { server->Shutdown(absl::Seconds(1)); }

  // The application, or its gRPC error (NOT_FOUND once gone).
  grpc::Status Get(const std::string& name, v1::Application* app) {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    v1::GetApplicationRequest request;
    request.set_name(name);
    v1::GetApplicationResponse response;
    grpc::Status status = stub->GetApplication(&context, request, &response);
    *app = response.application();
    return status;
  }

  // Waits until `done` holds for `name`'s state; false if it never does.
  template <typename Pred>
  bool WaitFor(const std::string& name, Pred done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      v1::Application app;
      grpc::Status status = Get(name, &app);
      if (done(status, app)) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }
};

std::unique_ptr<KvStore> NewKv() { return NewInMemoryKvStore(AcmServiceColumnFamilies()); }

TEST_CASE("a deleted application stays DELETING until SWM confirms the release") {
  FakeSwm swm;
  auto swm_server = Serve(&swm, "swm");
  auto kv = NewKv();
  Hub hub(*kv, swm_server->address());
  {
    grpc::ClientContext context;
    v1::ApplyApplicationRequest request;
    request.set_cam_yaml(SmallCam("shop"));
    v1::ApplyApplicationResponse response;
    REQUIRE(hub.stub->ApplyApplication(&context, request, &response).ok());
  }
  {
    grpc::ClientContext context;
    v1::DeleteApplicationRequest request;
    request.set_name("shop");
    v1::DeleteApplicationResponse response;
    REQUIRE(hub.stub->DeleteApplication(&context, request, &response).ok());
    REQUIRE(response.operation().kind() == "acm.DeleteApplication");
  }
  // SWM without the RPC: the application says so and stays.
  REQUIRE(hub.WaitFor("shop", [](const grpc::Status& s, const v1::Application& app) {
    return s.ok() && app.status().error_msg().find("lands later") != std::string::npos;
  }));
  v1::Application app;
  REQUIRE(hub.Get("shop", &app).ok());
  REQUIRE(app.status().phase() == v1::APPLICATION_PHASE_DELETING);
  REQUIRE(app.status().status() == v1::STATUS_LEVEL_WARNING);

  // SWM away: the new reason replaces the old one; still DELETING, and retried.
  swm.Answer(grpc::Status(grpc::StatusCode::UNAVAILABLE, "swm is restarting"));
  REQUIRE(hub.WaitFor("shop", [](const grpc::Status& s, const v1::Application& app) {
    return s.ok() && app.status().error_msg().find("restarting") != std::string::npos;
  }));
  const size_t calls = swm.calls();
  REQUIRE(calls >= 2);

  // SWM confirms: the application goes.
  swm.Answer(grpc::Status::OK);
  REQUIRE(hub.WaitFor("shop", [](const grpc::Status& s, const v1::Application&) {
    return s.error_code() == grpc::StatusCode::NOT_FOUND;
  }));
  REQUIRE(swm.calls() > calls);
}

TEST_CASE("an ACM restarted on the same store finishes the deletions it had started") {
  FakeSwm swm;
  auto swm_server = Serve(&swm, "swm");
  auto kv = NewKv();
  {
    Hub hub(*kv, swm_server->address());
    grpc::ClientContext context;
    v1::ApplyApplicationRequest request;
    request.set_cam_yaml(SmallCam("shop"));
    v1::ApplyApplicationResponse response;
    REQUIRE(hub.stub->ApplyApplication(&context, request, &response).ok());
    grpc::ClientContext del_context;
    v1::DeleteApplicationRequest del;
    del.set_name("shop");
    v1::DeleteApplicationResponse deleted;
    REQUIRE(hub.stub->DeleteApplication(&del_context, del, &deleted).ok());
    REQUIRE(hub.WaitFor("shop", [](const grpc::Status& s, const v1::Application& app) {
      return s.ok() && app.status().status() == v1::STATUS_LEVEL_WARNING;
    }));
  }  // the hub stops with the release unconfirmed
  swm.Answer(grpc::Status::OK);
  Hub restarted(*kv, swm_server->address());
  REQUIRE(restarted.WaitFor("shop", [](const grpc::Status& s, const v1::Application&) {
    return s.error_code() == grpc::StatusCode::NOT_FOUND;
  }));
}

TEST_CASE("an application placed before is scaled in place or else released then placed again") {
  FakeSwm swm;
  swm.Answer(grpc::Status::OK);
  auto swm_server = Serve(&swm, "swm");
  auto kv = NewKv();
  Hub hub(*kv, swm_server->address());
  {
    // A member for the neighborhood, so the scheduler is asked at all.
    grpc::ClientContext context;
    v1::RegisterClusterRequest request;
    request.mutable_cluster()->mutable_metadata()->set_name("edge-1");
    request.mutable_cluster()->set_role(v1::CLUSTER_ROLE_MC);
    request.mutable_cluster()->mutable_capacity()->mutable_largest_free_node()->set_cpu_millicores(
        4000);
    v1::RegisterClusterResponse response;
    REQUIRE(hub.stub->RegisterCluster(&context, request, &response).ok());
  }
  auto apply = [&](const std::string& tag) {
    grpc::ClientContext context;
    v1::ApplyApplicationRequest request;
    request.set_cam_yaml(SmallCam("shop", tag));
    v1::ApplyApplicationResponse response;
    REQUIRE(hub.stub->ApplyApplication(&context, request, &response).ok());
  };
  apply("1");
  REQUIRE(hub.WaitFor("shop", [](const grpc::Status& s, const v1::Application& app) {
    return s.ok() && app.status().phase() == v1::APPLICATION_PHASE_DEPLOYING;
  }));
  REQUIRE(swm.log() == std::vector<std::string>{"place shop"});
  // A changed spec: ACM asks SWM to scale it in place first; SWM answers
  // that this is more than a change of replica counts, so ACM releases it
  // and places it again.
  apply("2");
  REQUIRE(hub.WaitFor("shop", [](const grpc::Status& s, const v1::Application& app) {
    return s.ok() && app.spec_revision() == 2 && app.status().observed_spec_revision() == 2 &&
           app.status().phase() == v1::APPLICATION_PHASE_DEPLOYING;
  }));
  REQUIRE(swm.log() ==
          std::vector<std::string>{"place shop", "scale shop", "release shop", "place shop"});
  // One SWM scales in place: nothing is released.
  swm.ScaleInPlace(true);
  apply("3");
  REQUIRE(hub.WaitFor("shop", [](const grpc::Status& s, const v1::Application& app) {
    return s.ok() && app.spec_revision() == 3 && app.status().observed_spec_revision() == 3 &&
           app.status().phase() == v1::APPLICATION_PHASE_DEPLOYING;
  }));
  REQUIRE(swm.log() == std::vector<std::string>{"place shop", "scale shop", "release shop",
                                                "place shop", "scale shop"});
}

TEST_CASE("WatchOperation streams a delete until it is done and Get/ListOperations answer") {
  FakeSwm swm;
  auto swm_server = Serve(&swm, "swm");
  auto kv = NewKv();
  Hub hub(*kv, swm_server->address());
  {
    grpc::ClientContext context;
    v1::ApplyApplicationRequest request;
    request.set_cam_yaml(SmallCam("shop"));
    v1::ApplyApplicationResponse response;
    REQUIRE(hub.stub->ApplyApplication(&context, request, &response).ok());
  }
  std::string op_id;
  {
    grpc::ClientContext context;
    v1::DeleteApplicationRequest request;
    request.set_name("shop");
    v1::DeleteApplicationResponse response;
    REQUIRE(hub.stub->DeleteApplication(&context, request, &response).ok());
    op_id = response.operation().id();
  }
  grpc::ClientContext watch_context;
  watch_context.set_deadline(In(absl::Seconds(60)));
  v1::WatchOperationRequest watch;
  watch.set_id(op_id);
  auto stream = hub.stub->WatchOperation(&watch_context, watch);
  v1::WatchOperationResponse event;
  REQUIRE(stream->Read(&event));
  REQUIRE(event.operation().id() == op_id);
  REQUIRE_FALSE(event.operation().done());
  REQUIRE_THAT(event.operation().phase(), Catch::StartsWith("releasing the application's pods"));
  // SWM confirms: the stream shows the operation done, then ends by itself.
  swm.Answer(grpc::Status::OK);
  common::v1::Operation last;
  while (stream->Read(&event)) last = event.operation();
  REQUIRE(stream->Finish().ok());
  REQUIRE(last.done());
  REQUIRE(last.phase() == "deleted");
  REQUIRE(last.progress_percent() == 100);
  // Every release asked under the delete's one request_id.
  std::vector<std::string> ids = swm.release_ids();
  REQUIRE_FALSE(ids.empty());
  REQUIRE(ids.front() == ids.back());
  REQUIRE_THAT(ids.front(), Catch::EndsWith("/release/" + op_id));

  {
    grpc::ClientContext context;
    v1::GetOperationRequest request;
    request.set_id(op_id);
    v1::GetOperationResponse response;
    REQUIRE(hub.stub->GetOperation(&context, request, &response).ok());
    REQUIRE(response.operation().SerializeAsString() == last.SerializeAsString());
  }
  {
    grpc::ClientContext context;
    v1::ListOperationsRequest request;
    request.set_kind("acm.DeleteApplication");
    v1::ListOperationsResponse response;
    REQUIRE(hub.stub->ListOperations(&context, request, &response).ok());
    REQUIRE(response.operations_size() == 1);
    REQUIRE(response.operations(0).id() == op_id);
  }
  {
    grpc::ClientContext context;
    v1::GetOperationRequest request;
    request.set_id("nope");
    v1::GetOperationResponse response;
    grpc::Status status = hub.stub->GetOperation(&context, request, &response);
    REQUIRE(status.error_code() == grpc::StatusCode::NOT_FOUND);
  }
  {
    // A watch of a done operation sends it once and ends; an empty id is refused.
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(30)));
    auto again = hub.stub->WatchOperation(&context, watch);
    REQUIRE(again->Read(&event));
    REQUIRE(event.operation().done());
    REQUIRE_FALSE(again->Read(&event));
    REQUIRE(again->Finish().ok());
    grpc::ClientContext bad_context;
    bad_context.set_deadline(In(absl::Seconds(30)));
    v1::WatchOperationRequest bad;
    auto refused = hub.stub->WatchOperation(&bad_context, bad);
    REQUIRE_FALSE(refused->Read(&event));
    grpc::Status status = refused->Finish();
    REQUIRE(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    REQUIRE_THAT(status.error_message(), Catch::StartsWith("id"));
  }
}

TEST_CASE("operation watches past the cap are RESOURCE_EXHAUSTED until one closes") {
  FakeSwm swm;  // never confirms a release: the delete stays in flight
  auto swm_server = Serve(&swm, "swm");
  auto kv = NewKv();
  Hub hub(*kv, swm_server->address(), /*max_operation_watchers=*/1);
  {
    grpc::ClientContext context;
    v1::ApplyApplicationRequest request;
    request.set_cam_yaml(SmallCam("shop"));
    v1::ApplyApplicationResponse response;
    REQUIRE(hub.stub->ApplyApplication(&context, request, &response).ok());
  }
  v1::WatchOperationRequest watch;
  {
    grpc::ClientContext context;
    v1::DeleteApplicationRequest request;
    request.set_name("shop");
    v1::DeleteApplicationResponse response;
    REQUIRE(hub.stub->DeleteApplication(&context, request, &response).ok());
    watch.set_id(response.operation().id());
  }
  v1::WatchOperationResponse event;
  auto first_context = std::make_unique<grpc::ClientContext>();
  first_context->set_deadline(In(absl::Seconds(60)));
  auto first = hub.stub->WatchOperation(first_context.get(), watch);
  REQUIRE(first->Read(&event));
  {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(30)));
    auto second = hub.stub->WatchOperation(&context, watch);
    REQUIRE_FALSE(second->Read(&event));
    REQUIRE(second->Finish().error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  first_context->TryCancel();
  while (first->Read(&event)) {
  }
  first->Finish();
  // The slot frees once the server has seen the first one go.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  bool admitted = false;
  while (!admitted && absl::Now() < deadline) {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(30)));
    auto again = hub.stub->WatchOperation(&context, watch);
    admitted = again->Read(&event);
    context.TryCancel();
    while (again->Read(&event)) {
    }
    again->Finish();
    if (!admitted) absl::SleepFor(absl::Milliseconds(10));
  }
  REQUIRE(admitted);
}

// An SWM that answers PlaceApplication with the operation running and
// streams it: the first watch loses it after one state (an SWM restart), the
// next ones follow it to DONE with a plan on edge-1.
class RunningSwm final : public swm::v1::SwmService::Service {
 public:
  grpc::Status PlaceApplication(grpc::ServerContext*,
                                const swm::v1::PlaceApplicationRequest* request,
                                swm::v1::PlaceApplicationResponse* response) override {
    absl::MutexLock lock(&mu_);
    modes_.push_back(request->mode());
    request_ids_.push_back(request->request_id());
    response->mutable_operation()->set_id("place/shop/started-1");
    response->mutable_operation()->set_phase("QUEUED");
    return grpc::Status::OK;
  }
  grpc::Status WatchOperation(grpc::ServerContext*, const swm::v1::WatchOperationRequest* request,
                              grpc::ServerWriter<swm::v1::WatchOperationResponse>* writer) override {
    int watch = 0;
    {
      absl::MutexLock lock(&mu_);
      watch = ++watches_;
    }
    swm::v1::WatchOperationResponse event;
    event.mutable_operation()->set_id(request->id());
    event.mutable_operation()->set_phase("SOLVING");
    event.mutable_operation()->set_progress_percent(20);
    writer->Write(event);
    if (watch == 1) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "swm restarting");
    swm::v1::AssignmentPlan plan;
    plan.set_application("shop");
    plan.set_plan_revision(1);
    auto* t = plan.add_targets();
    t->set_service("web");
    t->set_cluster("edge-1");
    t->set_node("worker-1");
    t->set_pod("shop-web-0");
    event.mutable_operation()->set_done(true);
    event.mutable_operation()->set_phase("DONE");
    event.mutable_operation()->set_progress_percent(100);
    event.mutable_operation()->mutable_result()->PackFrom(plan);
    writer->Write(event);
    return grpc::Status::OK;
  }
  std::vector<swm::v1::PlaceMode> modes() {
    absl::MutexLock lock(&mu_);
    return modes_;
  }
  std::vector<std::string> request_ids() {
    absl::MutexLock lock(&mu_);
    return request_ids_;
  }

 private:
  absl::Mutex mu_;
  std::vector<swm::v1::PlaceMode> modes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> request_ids_ ABSL_GUARDED_BY(mu_);
  int watches_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST_CASE("the SWM scheduler starts a placement and follows its operation to the plan") {
  RunningSwm swm;
  auto swm_server = Serve(&swm, "swm");
  SwmPlacementScheduler scheduler(
      grpc::CreateChannel(swm_server->address(), grpc::InsecureChannelCredentials()),
      absl::Seconds(10));
  absl::Mutex mu;
  std::vector<PlacementResult> results;
  scheduler.SetSink([&](const std::string&, int64_t, const PlacementResult& result) {
    absl::MutexLock lock(&mu);
    results.push_back(result);
  });
  // Waits (on the condition, 30 s at most) for the sink's n-th result.
  auto wait_for = [&](size_t n) {
    absl::MutexLock lock(&mu);
    auto enough = [&]() { return results.size() >= n; };
    return mu.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(30));
  };
  v1::Application app;
  app.mutable_metadata()->set_name("shop");
  app.mutable_spec()->add_services()->set_name("web");
  v1::Neighborhood neighborhood;
  neighborhood.set_id("nb-shop");

  // The watch is lost before the end: a transient error, retried by ACM.
  REQUIRE(scheduler.RequestPlacement(app, neighborhood, "shop/1").ok());
  REQUIRE(wait_for(1));
  {
    absl::MutexLock lock(&mu);
    CHECK(absl::IsUnavailable(results[0].error));
    CHECK(IsTransientSchedulerError(results[0].error));
    CHECK(absl::StrContains(results[0].error.message(), "place/shop/started-1"));
  }
  // The retry (same request_id) gets the operation again and follows it to DONE.
  REQUIRE(scheduler.RequestPlacement(app, neighborhood, "shop/1").ok());
  REQUIRE(wait_for(2));
  {
    absl::MutexLock lock(&mu);
    INFO(results[1].error);
    CHECK(results[1].error.ok());
    CHECK(results[1].placed);
    CHECK(results[1].plan_revision == 1);
    REQUIRE(results[1].placements.size() == 1);
    CHECK(results[1].placements[0].cluster() == "edge-1");
  }
  CHECK(swm.modes() ==
        std::vector<swm::v1::PlaceMode>{swm::v1::PLACE_MODE_RUNNING, swm::v1::PLACE_MODE_RUNNING});
  CHECK(swm.request_ids() == std::vector<std::string>{"shop/1", "shop/1"});
  scheduler.Stop();
  swm_server->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace codeco::acm
