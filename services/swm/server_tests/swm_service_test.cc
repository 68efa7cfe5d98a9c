// The hub's SwmService over real gRPC on loopback, placing onto the clusters
// the codef binary emulates (five Grid'5000 sites): a bookinfo-like
// application lands on real nodes with its pods in the clusters' LMS and every
// channel within its bound; an impossible one is refused with
// FAILED_PRECONDITION naming the workload and creates no pod; bad input is
// INVALID_ARGUMENT with the field path; plans survive a restart.
#include "swm/server/swm_service.h"

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "codeco/common/peer_channels.h"
#include "codeco/common/rocksdb_kv_store.h"
#include "codeco/common/server.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "codeco/swm/v1/swm_service.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "process.h"
#include "swm/server/codef_directory.h"
#include "swm/server/plan_store.h"

namespace codeco::swm {
namespace {

namespace fs = std::filesystem;
namespace pb = codeco::swm::v1;
namespace acm = codeco::acm::v1;
using codeco::lms::v1::LmsService;

constexpr int64_t kMi = int64_t{1} << 20;
constexpr int64_t kMs = 1'000'000;
const char* const kSites[] = {"rennes", "nantes", "lille", "grenoble", "luxembourg"};

std::chrono::system_clock::time_point In(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

// The codef binary on the five-site scenario, with the endpoints it printed.
struct Codef {
  explicit Codef(const fs::path& work)
      : process({std::string(CODECO_BIN_DIR) + "/codef", "--scenario",
                 std::string(CODEF_EXAMPLES_DIR) + "/grid5000-five-sites.yaml", "--state-dir",
                 (work / "codef").string(), "--control-listen", "127.0.0.1:0", "--lms-port", "0"},
                (work / "codef.log").string()) {
    absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (control.empty()) {
      auto line = process.ReadLine(deadline);
      if (!line.has_value()) {
        std::ifstream err(work / "codef.log");
        std::stringstream ss;
        ss << err.rdbuf();
        FAIL("codef did not start: " << ss.str());
      }
      std::vector<std::string> words = absl::StrSplit(*line, ' ');
      if (words.size() == 8 && words[0] == "cluster") {
        lms[words[1]] =
            LmsService::NewStub(grpc::CreateChannel(words[5], grpc::InsecureChannelCredentials()));
      } else if (absl::StartsWith(*line, "codef control listening on ")) {
        control = line->substr(std::string("codef control listening on ").size());
      }
    }
  }

  std::vector<codeco::lms::v1::Pod> Pods(const std::string& cluster) {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    codeco::lms::v1::ListPodsRequest request;
    request.set_page_size(1000);
    codeco::lms::v1::ListPodsResponse response;
    grpc::Status status = lms.at(cluster)->ListPods(&context, request, &response);
    REQUIRE(status.ok());
    return {response.pods().begin(), response.pods().end()};
  }

  std::set<std::string> NodeNames(const std::string& cluster) {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    codeco::lms::v1::ListNodesResponse response;
    REQUIRE(lms.at(cluster)->ListNodes(&context, {}, &response).ok());
    std::set<std::string> names;
    for (const auto& n : response.nodes()) names.insert(n.name());
    return names;
  }

  size_t TotalPods() {
    size_t n = 0;
    for (const char* site : kSites) n += Pods(site).size();
    return n;
  }

  codeco::testing::ChildProcess process;
  std::map<std::string, std::unique_ptr<LmsService::Stub>> lms;
  std::string control;
};

// The hub's SWM in this process over a RocksDB store, served on loopback.
struct Hub {
  Hub(const fs::path& db, const std::string& codef_control) {
    auto opened = OpenRocksDbKvStore(
        {.path = db.string(), .column_families = {kPlansFamily, kOperationsFamily}});
    REQUIRE(opened.ok());
    store = std::move(*opened);
    auto channels = PeerChannels::Create({.insecure = true});
    REQUIRE(channels.ok());
    auto directory = std::make_shared<CodefDirectory>(
        grpc::CreateChannel(codef_control, grpc::InsecureChannelCredentials()));
    service = std::make_unique<SwmServiceImpl>(*store, RealClock::Default(), std::move(*channels),
                                               directory, directory);
    GrpcServerOptions options;
    options.service = "swm";
    options.insecure = true;
    options.services = {service.get()};
    auto started = GrpcServer::Start(options);
    REQUIRE(started.ok());
    server = std::move(*started);
    stub = pb::SwmService::NewStub(
        grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  }
  ~Hub() {
    server->Shutdown(absl::Seconds(5));
    server.reset();
    service.reset();
    store.reset();
  }

  grpc::Status Place(const pb::PlaceApplicationRequest& request,
                     pb::PlaceApplicationResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(60)));
    return stub->PlaceApplication(&context, request, response);
  }

  std::unique_ptr<KvStore> store;
  std::unique_ptr<SwmServiceImpl> service;
  std::unique_ptr<GrpcServer> server;
  std::unique_ptr<pb::SwmService::Stub> stub;
};

acm::ServiceSpec* AddService(acm::ApplicationSpec* spec, const std::string& name, int replicas,
                             int64_t cpu, int64_t memory) {
  acm::ServiceSpec* s = spec->add_services();
  s->set_name(name);
  s->set_image("docker.io/istio/examples-bookinfo-" + name + ":1.18");
  s->set_replicas(replicas);
  s->mutable_requests()->set_cpu_millicores(cpu);
  s->mutable_requests()->set_memory_bytes(memory);
  s->add_ports()->set_port(9080);
  return s;
}

void AddChannel(acm::ServiceSpec* from, const std::string& name, const std::string& to,
                codeco::common::v1::ServiceClass cls, int64_t max_delay_ns, int64_t bps) {
  acm::Channel* c = from->add_channels();
  c->set_name(name);
  c->set_from_service(from->name());
  c->set_to_service(to);
  c->set_to_port(9080);
  c->set_service_class(cls);
  c->set_max_delay_ns(max_delay_ns);
  c->set_min_bandwidth_bps(bps);
}

pb::PlaceApplicationRequest Bookinfo(const std::string& request_id) {
  pb::PlaceApplicationRequest request;
  request.set_request_id(request_id);
  acm::Application* app = request.mutable_application();
  app->mutable_metadata()->set_name("bookinfo");
  app->set_spec_revision(1);
  acm::ApplicationSpec* spec = app->mutable_spec();
  spec->set_app_name("bookinfo");
  spec->mutable_intents()->add_allowed_countries("FR");
  acm::ServiceSpec* page = AddService(spec, "productpage", 1, 500, 256 * kMi);
  AddService(spec, "details", 1, 250, 128 * kMi);
  acm::ServiceSpec* reviews = AddService(spec, "reviews", 2, 500, 256 * kMi);
  AddService(spec, "ratings", 1, 250, 128 * kMi);
  AddChannel(page, "page-reviews", "reviews", codeco::common::v1::SERVICE_CLASS_ASSURED, 5 * kMs,
             10'000'000);
  AddChannel(page, "page-details", "details", codeco::common::v1::SERVICE_CLASS_BESTEFFORT,
             30 * kMs, 1'000'000);
  AddChannel(reviews, "reviews-ratings", "ratings", codeco::common::v1::SERVICE_CLASS_BESTEFFORT,
             30 * kMs, 1'000'000);
  acm::Neighborhood* hood = request.mutable_neighborhood();
  hood->set_id("bookinfo-hood");
  hood->set_application("bookinfo");
  for (const char* site : kSites) hood->add_members()->set_cluster(site);
  return request;
}

TEST_CASE("the hub's SWM places onto the codef clusters over gRPC") {
  for (const char* v : {"http_proxy", "https_proxy", "grpc_proxy", "HTTP_PROXY", "HTTPS_PROXY"}) {
    unsetenv(v);
  }
  fs::path work = fs::temp_directory_path() / ("swm_service_test_" + std::to_string(getpid()));
  fs::remove_all(work);
  fs::create_directories(work);
  Codef codef(work);
  std::string plan_id;
  {
    Hub hub(work / "swm-db", codef.control);

    // Bad input: the field path, and nothing placed.
    pb::PlaceApplicationRequest bad = Bookinfo("");
    bad.mutable_neighborhood()->clear_members();
    bad.mutable_application()->mutable_spec()->mutable_services(2)->set_replicas(-1);
    pb::PlaceApplicationResponse response;
    grpc::Status status = hub.Place(bad, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(absl::StrContains(status.error_message(), "neighborhood.members"));
    CHECK(codef.TotalPods() == 0);
    bad = Bookinfo("");
    bad.mutable_application()->mutable_spec()->mutable_services(2)->set_replicas(-1);
    status = hub.Place(bad, &response);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(absl::StrContains(status.error_message(), "application.spec.services[2].replicas"));

    // A dry run computes a plan and creates nothing.
    pb::PlaceApplicationRequest dry = Bookinfo("");
    dry.set_dry_run(true);
    status = hub.Place(dry, &response);
    INFO(status.error_message());
    REQUIRE(status.ok());
    pb::AssignmentPlan dry_plan;
    REQUIRE(response.operation().result().UnpackTo(&dry_plan));
    CHECK(dry_plan.phase() == pb::PLAN_PHASE_IDLE);
    CHECK(dry_plan.targets_size() == 5);
    CHECK(codef.TotalPods() == 0);

    // The real placement.
    status = hub.Place(Bookinfo("req-1"), &response);
    INFO(status.error_message());
    REQUIRE(status.ok());
    const codeco::common::v1::Operation& op = response.operation();
    CHECK(op.done());
    CHECK(op.kind() == "swm.PlaceApplication");
    CHECK(op.request_id() == "req-1");
    pb::AssignmentPlan plan;
    REQUIRE(op.result().UnpackTo(&plan));
    plan_id = plan.id();
    CHECK(plan.phase() == pb::PLAN_PHASE_DONE);
    CHECK(plan.plan_revision() == 1);
    CHECK(plan.unplaced().empty());
    REQUIRE(plan.targets_size() == 5);
    std::set<std::string> workloads;
    for (const pb::WorkloadTarget& t : plan.targets()) {
      INFO(t.workload() << " on " << t.cluster() << "/" << t.node());
      workloads.insert(t.workload());
      CHECK(t.cluster() != "luxembourg");  // allowed_countries: FR
      CHECK(codef.NodeNames(t.cluster()).count(t.node()) == 1);
      bool found = false;
      for (const auto& pod : codef.Pods(t.cluster())) {
        if (pod.name() != t.pod()) continue;
        found = true;
        CHECK(pod.node_name() == t.node());
        CHECK(pod.labels().at("codeco.io/application") == "bookinfo");
        CHECK(pod.labels().at("codeco.io/service") == t.service());
        CHECK(absl::StartsWith(pod.containers(0).image(), "docker.io/istio/"));
      }
      CHECK(found);
    }
    CHECK(workloads == std::set<std::string>{"productpage-0", "details-0", "reviews-0", "reviews-1",
                                             "ratings-0"});
    CHECK(codef.TotalPods() == 5);
    // page-reviews is expanded per receiver replica; reviews-ratings per sender.
    REQUIRE(plan.channels_size() == 5);
    for (const pb::ChannelPath& ch : plan.channels()) {
      INFO(ch.channel());
      CHECK(ch.satisfied());
      CHECK(ch.expected_latency_ns() <= ch.max_delay_ns());
      CHECK(!ch.clusters().empty());
    }

    // The same request_id answers the first result and places nothing more.
    pb::PlaceApplicationResponse again;
    REQUIRE(hub.Place(Bookinfo("req-1"), &again).ok());
    CHECK(again.operation().id() == op.id());
    CHECK(codef.TotalPods() == 5);
    // Another request for the placed application is refused.
    status = hub.Place(Bookinfo("req-2"), &again);
    CHECK(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
    CHECK(codef.TotalPods() == 5);

    // Impossible: one replica larger than any node. Nothing is created.
    pb::PlaceApplicationRequest impossible = Bookinfo("req-3");
    impossible.mutable_application()->mutable_metadata()->set_name("giant");
    impossible.mutable_application()->mutable_spec()->set_app_name("giant");
    AddService(impossible.mutable_application()->mutable_spec(), "huge", 1, 64'000, 512 * kMi);
    status = hub.Place(impossible, &again);
    INFO(status.error_message());
    CHECK(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
    CHECK(absl::StrContains(status.error_message(), "huge-0"));
    CHECK(codef.TotalPods() == 5);
    for (const char* site : kSites) {
      for (const auto& pod : codef.Pods(site)) CHECK(!absl::StartsWith(pod.name(), "giant-"));
    }

    // Plans are listed and read back.
    grpc::ClientContext list_context;
    list_context.set_deadline(In(absl::Seconds(10)));
    pb::ListAssignmentPlansResponse list;
    REQUIRE(hub.stub->ListAssignmentPlans(&list_context, {}, &list).ok());
    REQUIRE(list.plans_size() == 2);
    CHECK(list.plans(0).id() == plan_id);
    CHECK(list.plans(1).phase() == pb::PLAN_PHASE_FAILED);
  }

  // A new hub on the same RocksDB still has the plan.
  Hub restarted(work / "swm-db", codef.control);
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(10)));
  pb::GetAssignmentPlanRequest get;
  get.set_application("bookinfo");
  pb::GetAssignmentPlanResponse got;
  grpc::Status status = restarted.stub->GetAssignmentPlan(&context, get, &got);
  INFO(status.error_message());
  REQUIRE(status.ok());
  CHECK(got.plan().id() == plan_id);
  CHECK(got.plan().phase() == pb::PLAN_PHASE_DONE);
  grpc::ClientContext missing_context;
  missing_context.set_deadline(In(absl::Seconds(10)));
  get.set_application("nope");
  CHECK(restarted.stub->GetAssignmentPlan(&missing_context, get, &got).error_code() ==
        grpc::StatusCode::NOT_FOUND);

  // MigrateWorkload on the restarted hub, from the placement request the
  // first hub stored: ratings-0 moves (SWM picks where), make-before-break.
  auto migrate = [&](const std::string& app, const std::string& workload,
                     const std::string& target_cluster, pb::MigrateWorkloadResponse* out) {
    grpc::ClientContext migrate_context;
    migrate_context.set_deadline(In(absl::Seconds(60)));
    pb::MigrateWorkloadRequest r;
    r.set_application(app);
    r.set_workload(workload);
    r.set_target_cluster(target_cluster);
    return restarted.stub->MigrateWorkload(&migrate_context, r, out);
  };
  pb::MigrateWorkloadResponse moved;
  status = migrate("bookinfo", "db-0", "", &moved);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(status.error_message(), "workload"));
  status = migrate("bookinfo", "ratings-0", "mars", &moved);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(status.error_message(), "target_cluster"));
  status = migrate("nope", "ratings-0", "", &moved);
  CHECK(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  status = migrate("bookinfo", "ratings-0", "", &moved);
  INFO(status.error_message());
  REQUIRE(status.ok());
  CHECK(moved.operation().done());
  pb::Migration migration;
  REQUIRE(moved.operation().result().UnpackTo(&migration));
  CHECK(migration.id() == "bookinfo/1");
  CHECK(migration.phase() == pb::MIGRATION_PHASE_DONE);
  CHECK(migration.reason() == pb::MIGRATION_REASON_MANUAL);
  CHECK(migration.target().pod() == "bookinfo-ratings-0-r2");
  CHECK(migration.target().node() != migration.source().node());
  CHECK(codef.TotalPods() == 5);
  bool started = false;
  for (const auto& pod : codef.Pods(migration.target().cluster())) {
    CHECK(pod.name() != "bookinfo-ratings-0");
    if (pod.name() != migration.target().pod()) continue;
    started = true;
    CHECK(pod.node_name() == migration.target().node());
    CHECK(pod.labels().at("codeco.io/reservation") ==
          "bookinfo.2." + migration.target().cluster());
    CHECK(absl::StartsWith(pod.containers(0).image(), "docker.io/istio/"));
  }
  CHECK(started);
  for (const auto& pod : codef.Pods(migration.source().cluster())) {
    CHECK(pod.name() != "bookinfo-ratings-0");
  }
  {
    grpc::ClientContext get_context;
    get_context.set_deadline(In(absl::Seconds(10)));
    pb::GetMigrationRequest get_migration;
    get_migration.set_id("bookinfo/1");
    pb::GetMigrationResponse got_migration;
    REQUIRE(restarted.stub->GetMigration(&get_context, get_migration, &got_migration).ok());
    CHECK(got_migration.migration().phase() == pb::MIGRATION_PHASE_DONE);
    grpc::ClientContext bad_context;
    bad_context.set_deadline(In(absl::Seconds(10)));
    get_migration.set_id("bookinfo");
    CHECK(restarted.stub->GetMigration(&bad_context, get_migration, &got_migration).error_code() ==
          grpc::StatusCode::INVALID_ARGUMENT);
    grpc::ClientContext list_context;
    list_context.set_deadline(In(absl::Seconds(10)));
    pb::ListMigrationsRequest list_migrations;
    list_migrations.set_application("bookinfo");
    pb::ListMigrationsResponse listed;
    REQUIRE(restarted.stub->ListMigrations(&list_context, list_migrations, &listed).ok());
    REQUIRE(listed.migrations_size() == 1);
    CHECK(listed.migrations(0).id() == "bookinfo/1");
  }

  // ReleaseApplication on the restarted hub (it learns the LMS endpoints from
  // the directory): every pod is deleted and the removal is the newest plan.
  auto release = [&](const std::string& app, const std::string& request_id,
                     pb::ReleaseApplicationResponse* out) {
    grpc::ClientContext release_context;
    release_context.set_deadline(In(absl::Seconds(30)));
    pb::ReleaseApplicationRequest r;
    r.set_application(app);
    r.set_request_id(request_id);
    return restarted.stub->ReleaseApplication(&release_context, r, out);
  };
  pb::ReleaseApplicationResponse released;
  status = release("", "rel-0", &released);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(status.error_message(), "application"));
  CHECK(codef.TotalPods() == 5);
  status = release("bookinfo", "rel-1", &released);
  INFO(status.error_message());
  REQUIRE(status.ok());
  const pb::AssignmentPlan& removal = released.plan();
  CHECK(removal.plan_revision() == 3);
  CHECK(removal.phase() == pb::PLAN_PHASE_DONE);
  CHECK(removal.targets().empty());
  CHECK(removal.incumbent_plan_revision() == 2);
  REQUIRE(removal.actions_size() == 5);
  std::set<std::string> deleted;
  for (const pb::PlanAction& a : removal.actions()) {
    CHECK(a.type() == pb::ACTION_TYPE_DELETE_POD);
    CHECK(a.result() == pb::ACTION_RESULT_SUCCEEDED);
    deleted.insert(a.pod());
  }
  CHECK(deleted.size() == 5);
  CHECK(codef.TotalPods() == 0);
  grpc::ClientContext after_context;
  after_context.set_deadline(In(absl::Seconds(10)));
  get.set_application("bookinfo");
  REQUIRE(restarted.stub->GetAssignmentPlan(&after_context, get, &got).ok());
  CHECK(got.plan().id() == removal.id());
  CHECK(got.plan().actions_size() == 5);

  // The same request_id answers the same removal; a new one finds nothing left.
  pb::ReleaseApplicationResponse again;
  REQUIRE(release("bookinfo", "rel-1", &again).ok());
  CHECK(again.plan().id() == removal.id());
  REQUIRE(release("bookinfo", "rel-2", &again).ok());
  CHECK(again.plan().actions().empty());
  CHECK(again.plan().application() == "bookinfo");
  // An application never placed: success, empty plan, no plan stored.
  REQUIRE(release("nope", "rel-3", &again).ok());
  CHECK(again.plan().actions().empty());
  CHECK(again.plan().id().empty());
  // A request_id of a placement cannot be reused for a removal.
  status = release("bookinfo", "req-1", &again);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(status.error_message(), "request_id"));

  // Released, the application can be placed again.
  pb::PlaceApplicationResponse replaced;
  grpc::ClientContext place_context;
  place_context.set_deadline(In(absl::Seconds(60)));
  status = restarted.stub->PlaceApplication(&place_context, Bookinfo("req-4"), &replaced);
  INFO(status.error_message());
  REQUIRE(status.ok());
  CHECK(codef.TotalPods() == 5);

  codef.process.Stop(SIGTERM, absl::Now() + absl::Seconds(10));
  fs::remove_all(work);
}

}  // namespace
}  // namespace codeco::swm
