// codeco-acm killed with SIGKILL and started again on the same data
// directory: every acknowledged application, spec revision and change is
// back, and a watcher resumes from its last revision without gaps; and every
// apply acknowledged while SWM was unreachable is placed exactly once after
// the restart (an SWM served by the test, idempotent by request_id as SWM is).
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "acm_test_util.h"
#include "codeco/acm/v1/acm_service.grpc.pb.h"
#include "codeco/swm/v1/swm_service.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "process.h"

namespace codeco::acm {
namespace {

using testing::In;
using testing::SmallCam;

namespace fs = std::filesystem;
using codeco::testing::ChildProcess;
using codeco::testing::ScratchDir;

std::string Bookinfo() {
  std::ifstream in(fs::path(ACM_EXAMPLES_DIR) / "bookinfo.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Acm {
  std::unique_ptr<ChildProcess> process;
  std::unique_ptr<v1::AcmService::Stub> stub;

  explicit Acm(const fs::path& dir, const std::string& swm = "") {
    std::vector<std::string> argv{std::string(CODECO_BIN_DIR) + "/codeco-acm",
                                  "--role",
                                  "hub",
                                  "--insecure",
                                  "--listen",
                                  "127.0.0.1:0",
                                  "--metrics-listen",
                                  "127.0.0.1:0",
                                  "--data-dir",
                                  (dir / "data").string()};
    if (!swm.empty()) argv.insert(argv.end(), {"--set", "acm.swm=" + swm});
    process = std::make_unique<ChildProcess>(argv, (dir / "acm.log").string());
    std::optional<std::string> line = process->ReadLine(absl::Now() + absl::Seconds(60));
    INFO("codeco-acm printed: " << line.value_or("<nothing>"));
    REQUIRE(line.has_value());
    std::smatch m;
    REQUIRE(std::regex_search(*line, m, std::regex("listening on (127\\.0\\.0\\.1:[0-9]+)")));
    stub = v1::AcmService::NewStub(
        grpc::CreateChannel(m[1].str(), grpc::InsecureChannelCredentials()));
  }
};

TEST_CASE("SIGKILL and restart lose nothing acknowledged and watchers resume without gaps") {
  ScratchDir dir("acm-crash");
  // name -> (metadata.revision, spec_revision) as last acknowledged.
  std::map<std::string, std::pair<int64_t, int64_t>> expected;
  int64_t last_revision = 0;
  int64_t watched_to = 0;
  {
    Acm acm(dir.path);
    auto apply = [&](const std::string& yaml, const std::string& request_id) {
      grpc::ClientContext context;
      context.set_deadline(In(absl::Seconds(30)));
      v1::ApplyApplicationRequest request;
      request.set_cam_yaml(yaml);
      request.set_request_id(request_id);
      v1::ApplyApplicationResponse response;
      grpc::Status status = acm.stub->ApplyApplication(&context, request, &response);
      INFO(status.error_message());
      REQUIRE(status.ok());
      const auto& app = response.application();
      expected[app.metadata().name()] = {app.metadata().revision(), app.spec_revision()};
      last_revision = app.metadata().revision();
    };
    // A watcher of everything, which reads part of the log before the crash.
    grpc::ClientContext watch_context;
    watch_context.set_deadline(In(absl::Seconds(120)));
    v1::WatchApplicationRequest watch;
    watch.set_from_revision(0);
    auto stream = acm.stub->WatchApplication(&watch_context, watch);

    for (const char* name : {"edge-1", "edge-2", "cloud-1"}) {
      grpc::ClientContext context;
      v1::RegisterClusterRequest request;
      request.mutable_cluster()->mutable_metadata()->set_name(name);
      request.mutable_cluster()->set_role(v1::CLUSTER_ROLE_MC);
      request.mutable_cluster()->mutable_cluster_labels()->set_region("eu-west");
      auto* free = request.mutable_cluster()->mutable_capacity()->mutable_largest_free_node();
      free->set_cpu_millicores(4000);
      free->set_memory_bytes(int64_t{8} << 30);
      v1::RegisterClusterResponse response;
      REQUIRE(acm.stub->RegisterCluster(&context, request, &response).ok());
    }
    apply(Bookinfo(), "bookinfo-1");
    for (int round = 1; round <= 3; ++round) {
      for (int i = 0; i < 5; ++i) {
        apply(SmallCam("app-" + std::to_string(i), std::to_string(round)), "");
      }
    }
    v1::WatchApplicationResponse event;
    for (int64_t r = 1; r <= 9; ++r) {
      REQUIRE(stream->Read(&event));
      REQUIRE(event.application().metadata().revision() == r);
      watched_to = r;
    }
    REQUIRE(acm.process->Stop(SIGKILL, absl::Now() + absl::Seconds(30)) == 128 + SIGKILL);
    watch_context.TryCancel();
    while (stream->Read(&event)) {
    }
    stream->Finish();
  }
  REQUIRE(last_revision == 16);

  Acm acm(dir.path);
  // Every application is back at the revision last acknowledged.
  for (const auto& [name, revisions] : expected) {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(30)));
    v1::GetApplicationRequest request;
    request.set_name(name);
    v1::GetApplicationResponse response;
    REQUIRE(acm.stub->GetApplication(&context, request, &response).ok());
    REQUIRE(response.application().metadata().revision() == revisions.first);
    REQUIRE(response.application().spec_revision() == revisions.second);
  }
  // Clusters are back.
  {
    grpc::ClientContext context;
    v1::ListClustersRequest request;
    v1::ListClustersResponse response;
    REQUIRE(acm.stub->ListClusters(&context, request, &response).ok());
    std::vector<std::string> names;
    for (const auto& c : response.clusters()) names.push_back(c.metadata().name());
    REQUIRE(names == std::vector<std::string>{"cloud-1", "edge-1", "edge-2"});
  }
  // Neighborhoods are back: one per small application (bookinfo asks for
  // compliance and security classes no test cluster offers, so it waits).
  {
    grpc::ClientContext context;
    v1::ListNeighborhoodsRequest request;
    v1::ListNeighborhoodsResponse response;
    REQUIRE(acm.stub->ListNeighborhoods(&context, request, &response).ok());
    REQUIRE(response.neighborhoods_size() == 5);
    REQUIRE(response.neighborhoods(0).id() == "nb-app-0");
    REQUIRE(response.neighborhoods(0).members_size() == 3);
  }
  {
    grpc::ClientContext context;
    v1::GetApplicationRequest request;
    request.set_name("bookinfo");
    v1::GetApplicationResponse response;
    REQUIRE(acm.stub->GetApplication(&context, request, &response).ok());
    REQUIRE(response.application().status().phase() == v1::APPLICATION_PHASE_PENDING);
    REQUIRE_THAT(response.application().status().error_msg(),
                 Catch::Contains("without compliance \"High\""));
  }
  // Spec revisions are back.
  {
    grpc::ClientContext context;
    v1::ListApplicationRevisionsRequest request;
    request.set_name("app-3");
    v1::ListApplicationRevisionsResponse response;
    REQUIRE(acm.stub->ListApplicationRevisions(&context, request, &response).ok());
    REQUIRE(response.revisions_size() == 3);
    REQUIRE(response.revisions(0).spec_revision() == 3);
  }
  // The idempotency record survived: the retried apply answers as before.
  {
    grpc::ClientContext context;
    v1::ApplyApplicationRequest request;
    request.set_cam_yaml(Bookinfo());
    request.set_request_id("bookinfo-1");
    v1::ApplyApplicationResponse response;
    REQUIRE(acm.stub->ApplyApplication(&context, request, &response).ok());
    REQUIRE(response.created());
    REQUIRE(response.application().metadata().revision() == 1);
  }
  // The watcher resumes after the last revision it saw: no gap, no repeat,
  // including a change made after the restart.
  grpc::ClientContext watch_context;
  watch_context.set_deadline(In(absl::Seconds(120)));
  v1::WatchApplicationRequest watch;
  watch.set_from_revision(watched_to);
  auto stream = acm.stub->WatchApplication(&watch_context, watch);
  {
    grpc::ClientContext context;
    v1::ApplyApplicationRequest request;
    request.set_cam_yaml(SmallCam("after-restart", "1"));
    v1::ApplyApplicationResponse response;
    REQUIRE(acm.stub->ApplyApplication(&context, request, &response).ok());
    REQUIRE(response.application().metadata().revision() == last_revision + 1);
  }
  v1::WatchApplicationResponse event;
  for (int64_t r = watched_to + 1; r <= last_revision + 1; ++r) {
    REQUIRE(stream->Read(&event));
    REQUIRE(event.application().metadata().revision() == r);
  }
  REQUIRE(event.application().metadata().name() == "after-restart");
  watch_context.TryCancel();
  while (stream->Read(&event)) {
  }
  stream->Finish();
  REQUIRE(acm.process->Stop(SIGTERM, absl::Now() + absl::Seconds(30)) == 0);
}

// An SWM that answers UNAVAILABLE while down; once up it places every
// service on edge-1 and, as SWM does, answers a request_id it has seen from
// its first answer. Counts the placements it really made per application.
class FakeSwm final : public swm::v1::SwmService::Service {
 public:
  grpc::Status PlaceApplication(grpc::ServerContext*,
                                const swm::v1::PlaceApplicationRequest* request,
                                swm::v1::PlaceApplicationResponse* response) override {
    absl::MutexLock lock(&mu_);
    const std::string& name = request->application().metadata().name();
    ids_[name].insert(request->request_id());
    if (down_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "swm is down");
    auto seen = answers_.find(request->request_id());
    if (request->request_id().empty() || seen == answers_.end()) {
      ++placed_[name];
      swm::v1::AssignmentPlan plan;
      plan.set_application(name);
      plan.set_plan_revision(++plans_);
      for (const auto& s : request->application().spec().services()) {
        auto* t = plan.add_targets();
        t->set_service(s.name());
        t->set_cluster("edge-1");
        t->set_node("worker-1");
        t->set_pod(name + "-" + s.name() + "-0");
      }
      response->mutable_operation()->set_done(true);
      response->mutable_operation()->mutable_result()->PackFrom(plan);
      answers_[request->request_id()] = *response;
      return grpc::Status::OK;
    }
    *response = seen->second;
    return grpc::Status::OK;
  }
  void SetDown(bool down) {
    absl::MutexLock lock(&mu_);
    down_ = down;
  }
  // Placements made, per application.
  std::map<std::string, int> placed() {
    absl::MutexLock lock(&mu_);
    return placed_;
  }
  // The request_ids each application was asked under.
  std::map<std::string, std::set<std::string>> ids() {
    absl::MutexLock lock(&mu_);
    return ids_;
  }

 private:
  absl::Mutex mu_;
  bool down_ ABSL_GUARDED_BY(mu_) = true;
  int64_t plans_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, swm::v1::PlaceApplicationResponse> answers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> placed_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::set<std::string>> ids_ ABSL_GUARDED_BY(mu_);
};

v1::Application GetApp(v1::AcmService::Stub& stub, const std::string& name) {
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(10)));
  v1::GetApplicationRequest request;
  request.set_name(name);
  v1::GetApplicationResponse response;
  grpc::Status status = stub.GetApplication(&context, request, &response);
  INFO(status.error_message());
  REQUIRE(status.ok());
  return response.application();
}

// Reads `name` until `done` holds for it or `wait` passed; returns the last read.
template <typename Pred>
v1::Application Await(v1::AcmService::Stub& stub, const std::string& name, absl::Duration wait,
                      Pred done) {
  const absl::Time deadline = absl::Now() + wait;
  v1::Application app = GetApp(stub, name);
  while (!done(app) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
    app = GetApp(stub, name);
  }
  return app;
}

common::v1::Operation GetOp(v1::AcmService::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(10)));
  v1::GetOperationRequest request;
  request.set_id(id);
  v1::GetOperationResponse response;
  grpc::Status status = stub.GetOperation(&context, request, &response);
  INFO(status.error_message());
  REQUIRE(status.ok());
  return response.operation();
}

TEST_CASE("applies acknowledged while SWM is down are placed exactly once after SIGKILL") {
  ScratchDir dir("acm-crash");
  FakeSwm swm;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&swm);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  REQUIRE(server != nullptr);
  const std::string swm_address = "127.0.0.1:" + std::to_string(port);

  std::map<std::string, std::string> operations;  // application -> its apply operation
  {
    Acm acm(dir.path, swm_address);
    for (const char* name : {"edge-1", "edge-2", "cloud-1"}) {
      grpc::ClientContext context;
      v1::RegisterClusterRequest request;
      request.mutable_cluster()->mutable_metadata()->set_name(name);
      request.mutable_cluster()->set_role(v1::CLUSTER_ROLE_MC);
      request.mutable_cluster()->mutable_cluster_labels()->set_region("eu-west");
      auto* free = request.mutable_cluster()->mutable_capacity()->mutable_largest_free_node();
      free->set_cpu_millicores(4000);
      free->set_memory_bytes(int64_t{8} << 30);
      v1::RegisterClusterResponse response;
      REQUIRE(acm.stub->RegisterCluster(&context, request, &response).ok());
    }
    for (int i = 0; i < 6; ++i) {
      grpc::ClientContext context;
      context.set_deadline(In(absl::Seconds(30)));
      v1::ApplyApplicationRequest request;
      request.set_cam_yaml(SmallCam("app-" + std::to_string(i), "1"));
      v1::ApplyApplicationResponse response;
      grpc::Status status = acm.stub->ApplyApplication(&context, request, &response);
      INFO(status.error_message());
      REQUIRE(status.ok());
      REQUIRE(response.operation().kind() == "acm.ApplyApplication");
      operations[response.application().metadata().name()] = response.operation().id();
      if (i == 2) {
        // The first ones were tried and not answered: retrying, not FAILED.
        v1::Application app = Await(*acm.stub, "app-0", absl::Seconds(30), [](const auto& a) {
          return a.status().status() == v1::STATUS_LEVEL_WARNING;
        });
        INFO(app.DebugString());
        REQUIRE(app.status().phase() == v1::APPLICATION_PHASE_PENDING);
        REQUIRE_THAT(app.status().error_msg(),
                     Catch::Contains("UNAVAILABLE") && Catch::Contains("next attempt at"));
        common::v1::Operation op = GetOp(*acm.stub, operations["app-0"]);
        REQUIRE_FALSE(op.done());
        REQUIRE_THAT(op.phase(), Catch::Contains("UNAVAILABLE"));
      }
    }
    // Killed right after the last acknowledgement.
    REQUIRE(acm.process->Stop(SIGKILL, absl::Now() + absl::Seconds(30)) == 128 + SIGKILL);
  }
  swm.SetDown(false);
  Acm acm(dir.path, swm_address);
  // Every acknowledged apply ends placed; the operations say so.
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (const auto& [name, op_id] : operations) {
    v1::Application app = Await(*acm.stub, name, deadline - absl::Now(), [](const auto& a) {
      return a.status().phase() == v1::APPLICATION_PHASE_DEPLOYING;
    });
    INFO(app.DebugString());
    REQUIRE(app.status().phase() == v1::APPLICATION_PHASE_DEPLOYING);
    REQUIRE(app.status().status() == v1::STATUS_LEVEL_OK);
    REQUIRE(app.status().placements_size() == 1);
    common::v1::Operation op = GetOp(*acm.stub, op_id);
    REQUIRE(op.progress_percent() == 80);
    REQUIRE(op.phase() == "placed; waiting for pods");
  }
  // Placed exactly once each, always asked under one request_id.
  std::map<std::string, int> placed = swm.placed();
  std::map<std::string, std::set<std::string>> ids = swm.ids();
  REQUIRE(placed.size() == operations.size());
  for (const auto& [name, count] : placed) {
    INFO(name);
    REQUIRE(count == 1);
    REQUIRE(ids[name].size() == 1);
    REQUIRE_FALSE(ids[name].begin()->empty());
  }
  REQUIRE(acm.process->Stop(SIGTERM, absl::Now() + absl::Seconds(30)) == 0);
  server->Shutdown(In(absl::Seconds(1)));
}

}  // namespace
}  // namespace codeco::acm
