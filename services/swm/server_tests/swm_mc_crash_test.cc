// codeco-swm in the MC role killed with SIGKILL and started again on the same
// data keeps every reservation it acknowledged: the held one still counts
// against its node until its lease runs out, the committed one stays
// committed with its pod. Then a hub codeco-swm given the MC's endpoint
// (swm.cluster_endpoints) places and removes an application through it. The
// cluster's LMS is CODEF's emulated LMS, served by this test on loopback; both
// swm are child processes.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <regex>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "codeco/common/clock.h"
#include "codeco/common/server.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "codeco/swm/v1/swm_service.grpc.pb.h"
#include "federation.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "link_control.h"
#include "lms_service.h"
#include "process.h"
#include "scenario.h"

namespace codeco::swm {
namespace {

namespace fs = std::filesystem;
namespace lms = codeco::lms::v1;
namespace pb = codeco::swm::v1;

constexpr char kScenario[] = R"(
name: mc-crash
federation:
  hub: {name: hub}
  clusters:
    - name: edge
      labels: {tier: edge, country: FR}
      nodes: [{name: n, count: 2, capacity: {cpu: 2, memory: 4Gi}}]
)";

std::chrono::system_clock::time_point In(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

// codeco-swm --role mc on `data`, reaching the LMS at `lms` (or, with
// `hub_args`, --role hub with those extra arguments).
struct McSwm {
  McSwm(const fs::path& work, const std::string& lms_address,
        const std::vector<std::string>& hub_args = {})
      : process(Args(work, lms_address, hub_args), (work / "swm.log").string()) {
    std::optional<std::string> line = process.ReadLine(absl::Now() + absl::Seconds(30));
    INFO("codeco-swm printed: " << line.value_or("<nothing>"));
    REQUIRE(line.has_value());
    std::smatch m;
    REQUIRE(std::regex_search(*line, m, std::regex("listening on (127\\.0\\.0\\.1:[0-9]+)")));
    address = m[1];
    stub =
        pb::SwmService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  }

  static std::vector<std::string> Args(const fs::path& work, const std::string& lms_address,
                                       const std::vector<std::string>& hub_args) {
    bool hub = !hub_args.empty();
    std::vector<std::string> args = {std::string(CODECO_BIN_DIR) + "/codeco-swm",
                                     "--role",
                                     hub ? "hub" : "mc",
                                     "--cluster",
                                     hub ? "hub" : "edge",
                                     "--insecure",
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--metrics-listen",
                                     "127.0.0.1:0",
                                     "--data-dir",
                                     (work / (hub ? "hub-data" : "data")).string(),
                                     "--federation.lms-plaintext"};
    if (!hub) args.insert(args.end(), {"--federation.lms", lms_address});
    args.insert(args.end(), hub_args.begin(), hub_args.end());
    return args;
  }

  grpc::Status Reserve(const std::string& id, const std::string& node, int64_t cpu,
                       absl::Duration lease, pb::ReserveResponse* response) {
    pb::ReserveRequest request;
    request.set_reservation_id(id);
    request.set_application("app");
    request.set_plan_revision(1);
    request.set_lease_duration_ns(absl::ToInt64Nanoseconds(lease));
    pb::ReservedItem* item = request.add_items();
    item->set_workload(id);
    item->set_node(node);
    item->mutable_resources()->set_cpu_millicores(cpu);
    // The pod Commit creates, as the hub sends it.
    lms::Pod* pod = item->mutable_pod();
    pod->set_name("app-" + id);
    (*pod->mutable_labels())["codeco.io/plan"] = "app.1";
    (*pod->mutable_labels())["codeco.io/reservation"] = absl::StrReplaceAll(id, {{"/", "."}});
    lms::Container* c = pod->add_containers();
    c->set_name(id);
    c->set_image("registry.example/" + id + ":1");
    (*c->mutable_env())["ID"] = id;
    c->add_ports()->set_port(8000 + static_cast<int>(id.size()));
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    return stub->Reserve(&context, request, response);
  }

  grpc::Status Commit(const std::string& id, pb::CommitResponse* response) {
    pb::CommitRequest request;
    request.set_reservation_id(id);
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    return stub->Commit(&context, request, response);
  }

  codeco::testing::ChildProcess process;
  std::string address;
  std::unique_ptr<pb::SwmService::Stub> stub;
};

TEST_CASE("an MC swm killed with SIGKILL keeps its reservations and then serves a hub swm") {
  for (const char* v : {"http_proxy", "https_proxy", "grpc_proxy", "HTTP_PROXY", "HTTPS_PROXY"}) {
    unsetenv(v);
  }
  fs::path work = fs::temp_directory_path() / ("swm_mc_crash_test_" + std::to_string(getpid()));
  fs::remove_all(work);
  fs::create_directories(work);

  // The cluster's LMS, in this process.
  codef::InMemoryLinkControl links;
  codef::InMemoryCheckpointArchiveStore archives;
  auto scenario = codef::ParseScenario(kScenario, "");
  REQUIRE(scenario.ok());
  auto federation =
      codef::Federation::Create(*scenario, RealClock::Default(), &links, &archives, nullptr);
  REQUIRE(federation.ok());
  codef::EmulatedLmsService lms_service((*federation)->FindLms("edge"));
  GrpcServerOptions options;
  options.service = "lms";
  options.insecure = true;
  options.services = {&lms_service};
  auto lms_server = GrpcServer::Start(options);
  REQUIRE(lms_server.ok());
  auto lms_stub = lms::LmsService::NewStub(
      grpc::CreateChannel((*lms_server)->address(), grpc::InsecureChannelCredentials()));
  std::vector<std::string> nodes;
  {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    lms::ListNodesResponse response;
    REQUIRE(lms_stub->ListNodes(&context, {}, &response).ok());
    for (const auto& n : response.nodes()) nodes.push_back(n.name());
  }
  REQUIRE(nodes.size() == 2);
  auto pods = [&] {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    lms::ListPodsResponse response;
    REQUIRE(lms_stub->ListPods(&context, {}, &response).ok());
    std::set<std::string> names;
    for (const auto& p : response.pods()) names.insert(p.name());
    return names;
  };

  const absl::Duration lease = absl::Seconds(8);
  google::protobuf::Timestamp held_since;
  {
    McSwm first(work, (*lms_server)->address());
    pb::ReserveResponse reserved;
    grpc::Status status = first.Reserve("held", nodes[0], 1500, lease, &reserved);
    INFO(status.error_message());
    REQUIRE(status.ok());
    held_since = reserved.reservation().create_time();
    REQUIRE(first.Reserve("kept", nodes[1], 1500, lease, &reserved).ok());
    pb::CommitResponse committed;
    REQUIRE(first.Commit("kept", &committed).ok());
    CHECK(pods().count("app-kept") == 1);
    // Reserved, not committed when the MC dies: its pod template must survive.
    REQUIRE(first.Reserve("later", nodes[1], 100, absl::Minutes(5), &reserved).ok());
    REQUIRE(first.process.Stop(SIGKILL, absl::Now() + absl::Seconds(10)) == 128 + SIGKILL);
  }

  McSwm second(work, (*lms_server)->address());
  // The held reservation is the stored one (same creation time), and it counts.
  pb::ReserveResponse again;
  grpc::Status status = second.Reserve("held", nodes[0], 1500, lease, &again);
  INFO(status.error_message());
  REQUIRE(status.ok());
  CHECK(again.reservation().create_time().seconds() == held_since.seconds());
  CHECK(again.reservation().create_time().nanos() == held_since.nanos());
  status = second.Reserve("rival", nodes[0], 1000, lease, &again);
  CHECK(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  // The committed one is still committed, its pod there once.
  pb::CommitResponse committed;
  REQUIRE(second.Commit("kept", &committed).ok());
  CHECK(committed.reservation().state() == pb::RESERVATION_STATE_COMMITTED);
  CHECK(pods().count("app-kept") == 1);
  // The one reserved before the kill is committed from its stored template.
  REQUIRE(second.Commit("later", &committed).ok());
  {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    lms::ListPodsResponse listed;
    REQUIRE(lms_stub->ListPods(&context, {}, &listed).ok());
    bool found = false;
    for (const auto& p : listed.pods()) {
      if (p.name() != "app-later") continue;
      found = true;
      REQUIRE(p.containers_size() == 1);
      CHECK(p.containers(0).image() == "registry.example/later:1");
      CHECK(p.containers(0).env().at("ID") == "later");
      REQUIRE(p.containers(0).ports_size() == 1);
      CHECK(p.containers(0).ports(0).port() == 8005);
      CHECK(p.labels().at("codeco.io/reservation") == "later");
      CHECK(p.node_name() == nodes[1]);
    }
    CHECK(found);
  }

  // Once the lease has run out the node's room is back and "held" is gone.
  bool fits = false;
  for (int k = 0; !fits && absl::Now() < absl::FromUnixSeconds(held_since.seconds()) + lease +
                                             absl::Seconds(60);
       ++k) {
    status = second.Reserve("rival-" + std::to_string(k), nodes[0], 1000, lease, &again);
    if (status.ok()) {
      fits = true;
    } else {
      REQUIRE(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
      absl::SleepFor(absl::Milliseconds(200));  // waiting for the lease, not asserting on time
    }
  }
  REQUIRE(fits);
  status = second.Commit("held", &committed);
  CHECK(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(absl::StrContains(status.error_message(), "expired"));
  CHECK(pods().count("app-held") == 0);

  // The two-layer path with real processes: a hub codeco-swm configured
  // with this MC's endpoint places through it (the MC labels the pods it
  // creates with its reservation) and removes through it.
  McSwm hub(work, "", {"--set", "swm.cluster_endpoints=edge=" + second.address});
  pb::PlaceApplicationRequest place;
  place.set_request_id("p-1");
  auto* spec = place.mutable_application()->mutable_spec();
  spec->set_app_name("web");
  auto* svc = spec->add_services();
  svc->set_name("front");
  svc->set_image("registry.example/front:2");
  svc->set_replicas(1);
  svc->mutable_requests()->set_cpu_millicores(200);
  auto* member = place.mutable_neighborhood()->add_members();
  member->set_cluster("edge");
  (*member->mutable_endpoints())["lms"] = (*lms_server)->address();
  grpc::ClientContext place_context;
  place_context.set_deadline(In(absl::Seconds(30)));
  pb::PlaceApplicationResponse placed;
  status = hub.stub->PlaceApplication(&place_context, place, &placed);
  INFO(status.error_message());
  REQUIRE(status.ok());
  bool by_mc = false;
  {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    lms::ListPodsResponse listed;
    REQUIRE(lms_stub->ListPods(&context, {}, &listed).ok());
    for (const auto& p : listed.pods()) {
      if (p.name() != "web-front-0") continue;
      auto it = p.labels().find("codeco.io/reservation");
      by_mc = it != p.labels().end() && it->second == "web.1.edge";
    }
  }
  CHECK(by_mc);
  grpc::ClientContext release_context;
  release_context.set_deadline(In(absl::Seconds(30)));
  pb::ReleaseApplicationRequest release;
  release.set_application("web");
  pb::ReleaseApplicationResponse released;
  status = hub.stub->ReleaseApplication(&release_context, release, &released);
  INFO(status.error_message());
  REQUIRE(status.ok());
  CHECK(pods().count("web-front-0") == 0);
  // The MC marked the reservation released: the id cannot be reserved again.
  pb::ReserveResponse reused;
  CHECK(second.Reserve("web/1/edge", nodes[0], 100, lease, &reused).error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);

  hub.process.Stop(SIGTERM, absl::Now() + absl::Seconds(10));
  second.process.Stop(SIGTERM, absl::Now() + absl::Seconds(10));
  (*lms_server)->Shutdown(absl::Seconds(5));
  fs::remove_all(work);
}

}  // namespace
}  // namespace codeco::swm
