// The two-layer path over real gRPC on loopback: two managed clusters, each
// with CODEF's emulated LMS and its own MC swm (SwmClusterServiceImpl with a
// durable ledger), and the hub's swm configured with their endpoints. The
// hub's placement is solved on the MCs' views (or by the MCs, SolveCluster,
// when an L2 is set on them), reserved and committed
// through them (pods in the LMS, COMMITTED reservations in their ledgers) and
// removed through them; the MC RPCs on their own keep their contracts
// (idempotency, capacity counted until pods are seen, lease expiry on the
// injected clock, field paths for bad input).
#include <catch2/catch.hpp>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "codeco/common/clock.h"
#include "codeco/common/interceptors.h"
#include "codeco/common/kv_store.h"
#include "codeco/common/peer_channels.h"
#include "codeco/common/server.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "federation.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "link_control.h"
#include "prometheus/registry.h"
#include "lms_service.h"
#include "scenario.h"
#include "swm/server/cluster_reservations.h"
#include "swm/server/cluster_service.h"
#include "swm/server/member_views.h"
#include "swm/core/convert.h"
#include "swm/server/plan_store.h"
#include "swm/server/remote_cluster.h"
#include "swm/server/swm_service.h"

namespace codeco::swm {
namespace {

namespace lms = codeco::lms::v1;
namespace pb = codeco::swm::v1;

constexpr int64_t kMi = int64_t{1} << 20;

constexpr char kScenario[] = R"(
name: two-layer
federation:
  hub: {name: hub}
  clusters:
    - name: a-edge
      labels: {tier: edge, country: FR}
      nodes: [{name: n, count: 2, capacity: {cpu: 2, memory: 4Gi}}]
    - name: b-edge
      labels: {tier: edge, country: FR}
      nodes: [{name: n, count: 2, capacity: {cpu: 2, memory: 4Gi}}]
)";

std::unique_ptr<GrpcServer> Serve(grpc::Service* service, RpcMetrics* metrics = nullptr) {
  GrpcServerOptions options;
  options.service = "test";
  options.insecure = true;
  options.services = {service};
  options.metrics = metrics;
  auto server = GrpcServer::Start(options);
  REQUIRE(server.ok());
  return std::move(*server);
}

std::chrono::system_clock::time_point In(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

// The real heuristic, counting the solves it is asked for; a solve waits
// for the gate given to Hold, if any, before it starts.
class CountingL2 final : public L2Solver {
 public:
  absl::StatusOr<L2Result> Solve(const L2Request& request) override {
    absl::Notification* gate = nullptr;
    {
      absl::MutexLock lock(&mu_);
      gate = gate_;
    }
    if (gate != nullptr) gate->WaitForNotification();
    absl::MutexLock lock(&mu_);
    ++calls_;
    return inner_.Solve(request);
  }
  /// Solves wait for `gate` (not owned; null: none) to be notified.
  void Hold(absl::Notification* gate) {
    absl::MutexLock lock(&mu_);
    gate_ = gate;
  }
  int calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  absl::Mutex mu_;
  PluginRegistry registry_ = NewDefaultRegistry();
  InProcessL2Solver inner_{registry_, nullptr};
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Notification* gate_ ABSL_GUARDED_BY(mu_) = nullptr;
};

// One managed cluster: its emulated LMS and its MC swm, both on loopback.
// With `own_l2` its swm solves with `l2` (an L2 set on it, so its views ask
// the hub for SolveCluster); without, with its default heuristic.
struct Member {
  Member(codef::Federation& federation, const std::string& name, const Clock& clock,
         bool own_l2 = true)
      : name(name), kv(NewInMemoryKvStore({kReservationsFamily})) {
    lms_service = std::make_unique<codef::EmulatedLmsService>(federation.FindLms(name));
    lms_server = Serve(lms_service.get());
    auto runtime = std::make_unique<LmsPodRuntime>(
        grpc::CreateChannel(lms_server->address(), grpc::InsecureChannelCredentials()),
        LmsPodRuntimeOptions{.cluster = name});
    service = std::make_unique<SwmClusterServiceImpl>(
        *kv, clock, std::move(runtime),
        ClusterServiceOptions{.cluster = name, .l2 = own_l2 ? &l2 : nullptr});
    swm_server = Serve(service.get(), &rpc_metrics);
    stub = pb::SwmService::NewStub(
        grpc::CreateChannel(swm_server->address(), grpc::InsecureChannelCredentials()));
    lms_stub = lms::LmsService::NewStub(
        grpc::CreateChannel(lms_server->address(), grpc::InsecureChannelCredentials()));
  }
  ~Member() {
    swm_server->Shutdown(absl::Seconds(5));
    lms_server->Shutdown(absl::Seconds(5));
  }

  std::set<std::string> Pods() {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    lms::ListPodsResponse response;
    REQUIRE(lms_stub->ListPods(&context, {}, &response).ok());
    std::set<std::string> names;
    for (const auto& p : response.pods()) names.insert(p.name());
    return names;
  }

  // SolveCluster calls this swm answered (its RPC metrics).
  int SolveClusterCalls() {
    double calls = 0;
    for (const prometheus::MetricFamily& family : registry.Collect()) {
      for (const prometheus::ClientMetric& metric : family.metric) {
        bool solve = false;
        for (const prometheus::ClientMetric::Label& label : metric.label) {
          solve = solve || (label.name == "method" && absl::EndsWith(label.value, "/SolveCluster"));
        }
        if (solve && family.type == prometheus::MetricType::Histogram) {
          calls += static_cast<double>(metric.histogram.sample_count);
        }
      }
    }
    return static_cast<int>(calls);
  }

  std::string name;
  prometheus::Registry registry;
  RpcMetrics rpc_metrics{"swm", registry};
  CountingL2 l2;
  std::unique_ptr<KvStore> kv;
  std::unique_ptr<codef::EmulatedLmsService> lms_service;
  std::unique_ptr<GrpcServer> lms_server;
  std::unique_ptr<SwmClusterServiceImpl> service;
  std::unique_ptr<GrpcServer> swm_server;
  std::unique_ptr<pb::SwmService::Stub> stub;
  std::unique_ptr<lms::LmsService::Stub> lms_stub;
};

struct Testbed {
  // `own_l2`: whether the members' swm solve with an L2 set on them (Member).
  explicit Testbed(bool own_l2 = true) : clock(absl::FromUnixSeconds(1'800'000'000)) {
    auto scenario = codef::ParseScenario(kScenario, "");
    REQUIRE(scenario.ok());
    auto created = codef::Federation::Create(*scenario, clock, &links, &archives, nullptr);
    REQUIRE(created.ok());
    federation = std::move(*created);
    a = std::make_unique<Member>(*federation, "a-edge", clock, own_l2);
    b = std::make_unique<Member>(*federation, "b-edge", clock, own_l2);
  }
  SimulatedClock clock;
  codef::InMemoryLinkControl links;
  codef::InMemoryCheckpointArchiveStore archives;
  std::unique_ptr<codef::Federation> federation;
  std::unique_ptr<Member> a;
  std::unique_ptr<Member> b;
};

// The pod template the hub would send for workload `workload` of "app"
// under reservation `id` (plan "app/1").
lms::Pod TemplateOf(const std::string& id, const std::string& workload) {
  lms::Pod pod;
  pod.set_name("app-" + workload);
  (*pod.mutable_labels())["codeco.io/plan"] = "app.1";
  (*pod.mutable_labels())["codeco.io/reservation"] = LabelValue(id);
  lms::Container* c = pod.add_containers();
  c->set_name("main");
  c->set_image("registry.example/app:1.2");
  c->add_command("/bin/app");
  c->add_args("--serve");
  (*c->mutable_env())["MODE"] = "edge";
  lms::ContainerPort* port = c->add_ports();
  port->set_name("http");
  port->set_port(8080);
  port->set_protocol("TCP");
  c->mutable_limits()->set_cpu_millicores(2000);
  return pod;
}

pb::ReserveRequest ReserveOf(const std::string& id, const std::string& node, int64_t cpu) {
  pb::ReserveRequest r;
  r.set_reservation_id(id);
  r.set_application("app");
  r.set_plan_revision(1);
  r.set_lease_duration_ns(absl::ToInt64Nanoseconds(absl::Seconds(30)));
  pb::ReservedItem* item = r.add_items();
  item->set_workload("w-" + id);
  item->set_node(node);
  item->mutable_resources()->set_cpu_millicores(cpu);
  item->mutable_resources()->set_memory_bytes(64 * kMi);
  *item->mutable_pod() = TemplateOf(id, "w-" + id);
  return r;
}

// The first node of `member`'s LMS.
std::string FirstNode(Member& member) {
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(10)));
  lms::ListNodesResponse nodes;
  REQUIRE(member.lms_stub->ListNodes(&context, {}, &nodes).ok());
  REQUIRE(nodes.nodes_size() > 0);
  return nodes.nodes(0).name();
}

// Pod `name` as `member`'s LMS shows it.
std::optional<lms::Pod> PodIn(Member& member, const std::string& name) {
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(10)));
  lms::ListPodsResponse response;
  REQUIRE(member.lms_stub->ListPods(&context, {}, &response).ok());
  for (const lms::Pod& p : response.pods()) {
    if (p.name() == name) return p;
  }
  return std::nullopt;
}

TEST_CASE("an MC ledger keeps each reservation's pod template until Commit creates the pod") {
  Testbed bed;
  Member& a = *bed.a;
  const std::string node = FirstNode(a);
  auto lms_runtime = [&] {
    return std::make_unique<LmsPodRuntime>(
        grpc::CreateChannel(a.lms_server->address(), grpc::InsecureChannelCredentials()),
        LmsPodRuntimeOptions{.cluster = "a-edge"});
  };
  // Reserve through one ledger, then drop it: only the KvStore remains.
  pb::ReserveRequest request = ReserveOf("app/1/a-edge", node, 500);
  request.mutable_items(0)->set_workload("web-0");
  *request.mutable_items(0)->mutable_pod() = TemplateOf("app/1/a-edge", "web-0");
  auto kv = NewInMemoryKvStore({kReservationsFamily});
  {
    auto runtime = lms_runtime();
    ClusterReservations first(*kv, bed.clock, *runtime, {.cluster = "a-edge"});
    auto reserved = first.Reserve(request);
    INFO(reserved.status());
    REQUIRE(reserved.ok());
    CHECK(reserved->items(0).pod().containers(0).image() == "registry.example/app:1.2");
  }
  CHECK(!PodIn(a, "app-web-0").has_value());

  // A ledger over the same store commits it: the pod is the template,
  // bound to the reserved node, requesting what was reserved.
  auto runtime = lms_runtime();
  ClusterReservations second(*kv, bed.clock, *runtime, {.cluster = "a-edge"});
  auto committed = second.Commit("app/1/a-edge");
  INFO(committed.status());
  REQUIRE(committed.ok());
  const std::string pod_name = request.items(0).pod().name();
  std::optional<lms::Pod> pod = PodIn(a, pod_name);
  REQUIRE(pod.has_value());
  CHECK(pod->node_name() == node);
  CHECK(pod->labels().at("codeco.io/plan") == "app.1");
  CHECK(pod->labels().at("codeco.io/reservation") == "app.1.a-edge");
  REQUIRE(pod->containers_size() == 1);
  const lms::Container& c = pod->containers(0);
  const lms::Container& want = request.items(0).pod().containers(0);
  CHECK(c.name() == "main");
  CHECK(c.image() == want.image());
  CHECK(std::vector<std::string>(c.command().begin(), c.command().end()) ==
        std::vector<std::string>{"/bin/app"});
  CHECK(std::vector<std::string>(c.args().begin(), c.args().end()) ==
        std::vector<std::string>{"--serve"});
  CHECK(c.env().size() == 1);
  CHECK(c.env().at("MODE") == "edge");
  REQUIRE(c.ports_size() == 1);
  CHECK(c.ports(0).port() == 8080);
  CHECK(c.ports(0).name() == "http");
  CHECK(c.requests().cpu_millicores() == 500);
  CHECK(c.limits().cpu_millicores() == 2000);

  // Release deletes it and says so; again, it says the same.
  for (int round = 0; round < 2; ++round) {
    auto released = second.Release("app/1/a-edge");
    REQUIRE(released.ok());
    REQUIRE(released->has_value());
    CHECK((*released)->state() == pb::RESERVATION_STATE_RELEASED);
    REQUIRE((*released)->deleted_pods_size() == 1);
    CHECK((*released)->deleted_pods(0) == pod_name);
  }
  CHECK(!PodIn(a, pod_name).has_value());
}

TEST_CASE("an MC refuses a reservation whose pod template is missing or inconsistent") {
  Testbed bed;
  Member& a = *bed.a;
  const std::string node = FirstNode(a);
  auto call = [&](const pb::ReserveRequest& request) {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    pb::ReserveResponse response;
    return a.stub->Reserve(&context, request, &response);
  };
  pb::ReserveRequest missing = ReserveOf("r1", node, 100);
  missing.mutable_items(0)->clear_pod();
  grpc::Status status = call(missing);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(status.error_message(), "items[0].pod: is required"));

  pb::ReserveRequest bad = ReserveOf("r1", node, 100);
  lms::Pod* pod = bad.mutable_items(0)->mutable_pod();
  pod->set_name("someone-else");
  (*pod->mutable_labels())["codeco.io/reservation"] = "r2";
  pod->mutable_containers(0)->clear_image();
  pod->mutable_containers(0)->mutable_ports(0)->set_port(70000);
  status = call(bad);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  for (const char* field :
       {"items[0].pod.name", "items[0].pod.labels[\"codeco.io/reservation\"]",
        "items[0].pod.containers[0].image", "items[0].pod.containers[0].ports[0].port"}) {
    INFO(field);
    CHECK(absl::StrContains(status.error_message(), field));
  }
  // Nothing was held: the whole node is still free for a valid one.
  CHECK(call(ReserveOf("r1", node, 2000)).ok());
}

TEST_CASE("an MC releases only the pods a migration names and keeps the reservation's others") {
  Testbed bed;
  Member& a = *bed.a;
  const std::string node = FirstNode(a);
  auto lms_runtime = [&] {
    return std::make_unique<LmsPodRuntime>(
        grpc::CreateChannel(a.lms_server->address(), grpc::InsecureChannelCredentials()),
        LmsPodRuntimeOptions{.cluster = "a-edge"});
  };
  // Plan app/1 put web and db in a-edge under one reservation.
  pb::ReserveRequest placed = ReserveOf("app/1/a-edge", node, 500);
  placed.mutable_items(0)->set_workload("web");
  *placed.mutable_items(0)->mutable_pod() = TemplateOf("app/1/a-edge", "web");
  *placed.add_items() = placed.items(0);
  placed.mutable_items(1)->set_workload("db");
  *placed.mutable_items(1)->mutable_pod() = TemplateOf("app/1/a-edge", "db");
  // Migration app/2 moves web within a-edge: its new pod is "app-web-r2".
  pb::ReserveRequest moved = ReserveOf("app/2/a-edge", node, 500);
  moved.set_plan_revision(2);
  moved.mutable_items(0)->set_workload("web");
  lms::Pod* pod = moved.mutable_items(0)->mutable_pod();
  *pod = TemplateOf("app/2/a-edge", "web");
  pod->set_name("app-web-r2");
  (*pod->mutable_labels())["codeco.io/plan"] = LabelValue("app/2");

  auto kv = NewInMemoryKvStore({kReservationsFamily});
  {
    auto runtime = lms_runtime();
    ClusterReservations first(*kv, bed.clock, *runtime, {.cluster = "a-edge"});
    for (const pb::ReserveRequest* request : {&placed, &moved}) {
      auto reserved = first.Reserve(*request);
      INFO(reserved.status());
      REQUIRE(reserved.ok());
      REQUIRE(first.Commit(request->reservation_id()).ok());
    }
    CHECK(a.Pods() == std::set<std::string>{"app-web", "app-db", "app-web-r2"});

    // A migrated name must carry the request's own plan revision.
    pb::ReserveRequest wrong = moved;
    wrong.set_reservation_id("app/3/a-edge");
    wrong.set_plan_revision(3);
    (*wrong.mutable_items(0)->mutable_pod()->mutable_labels())["codeco.io/plan"] =
        LabelValue("app/3");
    (*wrong.mutable_items(0)->mutable_pod()->mutable_labels())["codeco.io/reservation"] =
        LabelValue("app/3/a-edge");
    auto refused = first.Reserve(wrong);
    CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(absl::StrContains(refused.status().message(), "items[0].pod.name"));
    CHECK(absl::StrContains(refused.status().message(), "\"app-web\""));
    CHECK(absl::StrContains(refused.status().message(), "\"app-web-r3\""));

    // The old web pod goes; app/2's pod, named too, is not app/1's: it stays.
    for (int round = 0; round < 2; ++round) {
      INFO("round " << round);
      auto released = first.Release("app/1/a-edge", {"app-web", "app-web-r2"});
      INFO(released.status());
      REQUIRE(released.ok());
      REQUIRE(released->has_value());
      CHECK((*released)->state() == pb::RESERVATION_STATE_COMMITTED);
      REQUIRE((*released)->items_size() == 1);
      CHECK((*released)->items(0).workload() == "db");
      CHECK(std::vector<std::string>((*released)->deleted_pods().begin(),
                                     (*released)->deleted_pods().end()) ==
            std::vector<std::string>{"app-web"});
      CHECK(a.Pods() == std::set<std::string>{"app-db", "app-web-r2"});
    }
  }

  // A ledger over the same store sees the one item left; releasing its pod
  // releases the reservation.
  auto runtime = lms_runtime();
  ClusterReservations second(*kv, bed.clock, *runtime, {.cluster = "a-edge"});
  auto stored = second.Get("app/1/a-edge");
  REQUIRE(stored.ok());
  REQUIRE(stored->has_value());
  CHECK((*stored)->state() == pb::RESERVATION_STATE_COMMITTED);
  REQUIRE((*stored)->items_size() == 1);
  CHECK((*stored)->items(0).pod().name() == "app-db");
  // Items are matched by their pod's name: the pods are in the LMS (app-db
  // and app-web-r2, 500m each), so nothing is held on top.
  auto nodes = second.NodesWithHolds();
  REQUIRE(nodes.ok());
  for (const Node& n : *nodes) {
    if (n.name == node) CHECK(n.allocated.cpu_millis == 1000);
  }
  for (int round = 0; round < 2; ++round) {
    auto released = second.Release("app/1/a-edge", {"app-db"});
    INFO(released.status());
    REQUIRE(released.ok());
    REQUIRE(released->has_value());
    CHECK((*released)->state() == pb::RESERVATION_STATE_RELEASED);
    CHECK(std::set<std::string>((*released)->deleted_pods().begin(),
                                (*released)->deleted_pods().end()) ==
          std::set<std::string>{"app-web", "app-db"});
  }
  CHECK(a.Pods() == std::set<std::string>{"app-web-r2"});
  auto other = second.Get("app/2/a-edge");
  REQUIRE(other.ok());
  REQUIRE(other->has_value());
  CHECK((*other)->state() == pb::RESERVATION_STATE_COMMITTED);
  CHECK((*other)->items_size() == 1);

  // Over gRPC an empty pod name is refused, naming its field.
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(10)));
  pb::ReleaseRequest release;
  release.set_reservation_id("app/2/a-edge");
  release.add_pods("app-web-r2");
  release.add_pods("");
  pb::ReleaseResponse response;
  grpc::Status status = a.stub->Release(&context, release, &response);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(status.error_message(), "pods[1]"));
  CHECK(a.Pods() == std::set<std::string>{"app-web-r2"});
}

// Places `request` through the hub's `stub`; the plan answered, which is DONE.
pb::AssignmentPlan PlaceDone(pb::SwmService::Stub& stub,
                             const pb::PlaceApplicationRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(30)));
  pb::PlaceApplicationResponse response;
  grpc::Status status = stub.PlaceApplication(&context, request, &response);
  INFO(status.error_message());
  REQUIRE(status.ok());
  pb::AssignmentPlan plan;
  REQUIRE(response.operation().result().UnpackTo(&plan));
  CHECK(plan.phase() == pb::PLAN_PHASE_DONE);
  return plan;
}

TEST_CASE("the hub places and removes through the MC swm of each cluster") {
  Testbed bed;
  auto kv = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  auto channels = PeerChannels::Create({.insecure = true});
  REQUIRE(channels.ok());
  // a-edge's swm is configured; b-edge's comes with the neighborhood (as ACM
  // copies it from its registry). The hub is told no LMS: it knows the
  // members only through their swm.
  SwmServiceOptions options;
  options.cluster_endpoints = {{"a-edge", bed.a->swm_server->address()}};
  SwmServiceImpl hub(*kv, bed.clock, std::move(*channels), nullptr, nullptr, options);
  auto hub_server = Serve(&hub);
  auto stub = pb::SwmService::NewStub(
      grpc::CreateChannel(hub_server->address(), grpc::InsecureChannelCredentials()));

  // Three 1.5-CPU replicas need three of the four 2-CPU nodes: both clusters.
  pb::PlaceApplicationRequest request;
  request.set_request_id("place-1");
  auto* spec = request.mutable_application()->mutable_spec();
  spec->set_app_name("batch");
  auto* s = spec->add_services();
  s->set_name("worker");
  s->set_image("busybox");
  (*s->mutable_env())["ROLE"] = "batch";
  auto* port = s->add_ports();
  port->set_name("metrics");
  port->set_port(9100);
  port->set_protocol("TCP");
  s->set_replicas(3);
  s->mutable_requests()->set_cpu_millicores(1500);
  s->mutable_requests()->set_memory_bytes(64 * kMi);
  for (Member* m : {bed.a.get(), bed.b.get()}) {
    auto* member = request.mutable_neighborhood()->add_members();
    member->set_cluster(m->name);
    if (m == bed.b.get()) (*member->mutable_endpoints())["swm"] = m->swm_server->address();
  }
  pb::AssignmentPlan plan = PlaceDone(*stub, request);
  REQUIRE(plan.targets_size() == 3);
  // Their views ask for SolveCluster (an L2 is set on them): both solved their part.
  CHECK(bed.a->l2.calls() + bed.b->l2.calls() >= 2);
  CHECK(bed.a->SolveClusterCalls() + bed.b->SolveClusterCalls() >= 2);
  std::set<std::string> clusters;
  for (const auto& t : plan.targets()) {
    clusters.insert(t.cluster());
    Member* m = t.cluster() == "a-edge" ? bed.a.get() : bed.b.get();
    // The MC created the pod from the template the hub reserved with.
    std::optional<lms::Pod> pod = PodIn(*m, t.pod());
    REQUIRE(pod.has_value());
    REQUIRE(pod->containers_size() == 1);
    CHECK(pod->containers(0).image() == "busybox");
    CHECK(pod->containers(0).env().at("ROLE") == "batch");
    REQUIRE(pod->containers(0).ports_size() == 1);
    CHECK(pod->containers(0).ports(0).port() == 9100);
    CHECK(pod->labels().at("codeco.io/plan") == "batch.1");
    CHECK(pod->labels().at("codeco.io/reservation") == "batch.1." + t.cluster());
  }
  CHECK(clusters.size() == 2);
  for (Member* m : {bed.a.get(), bed.b.get()}) {
    auto r = m->service->reservations().Get("batch/1/" + m->name);
    REQUIRE(r.ok());
    REQUIRE(r->has_value());
    CHECK((*r)->state() == pb::RESERVATION_STATE_COMMITTED);
  }

  // Removal goes through the same MCs: pods gone, reservations released.
  grpc::ClientContext release_context;
  release_context.set_deadline(In(absl::Seconds(30)));
  pb::ReleaseApplicationRequest release;
  release.set_application("batch");
  release.set_request_id("release-1");
  pb::ReleaseApplicationResponse released;
  grpc::Status status = stub->ReleaseApplication(&release_context, release, &released);
  INFO(status.error_message());
  REQUIRE(status.ok());
  REQUIRE(released.plan().actions_size() == 3);
  for (const auto& action : released.plan().actions()) {
    CHECK(action.result() == pb::ACTION_RESULT_SUCCEEDED);  // the MC reported it deleted
  }
  CHECK(bed.a->Pods().empty());
  CHECK(bed.b->Pods().empty());
  for (Member* m : {bed.a.get(), bed.b.get()}) {
    auto r = m->service->reservations().Get("batch/1/" + m->name);
    REQUIRE(r.ok());
    REQUIRE(r->has_value());
    CHECK((*r)->state() == pb::RESERVATION_STATE_RELEASED);
    CHECK((*r)->deleted_pods_size() > 0);
  }
  hub_server->Shutdown(absl::Seconds(5));
}

// A placement request for `replicas` 1.5-CPU replicas of "worker" in
// application `app`, both members given by their swm endpoint only.
pb::PlaceApplicationRequest PlaceThroughSwm(Testbed& bed, const std::string& app, int replicas);

TEST_CASE("the hub solves an MC member's L2 on its view and the member's Reserve re-checks it") {
  const bool member_l2 = GENERATE(false, true);  // swm.member_l2: hub, then member
  INFO("swm.member_l2=" << (member_l2 ? "member" : "hub"));
  Testbed bed(/*own_l2=*/false);
  auto kv = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  auto channels = PeerChannels::Create({.insecure = true});
  REQUIRE(channels.ok());
  SwmServiceOptions options;
  options.member_l2 = member_l2 ? MemberL2::kMember : MemberL2::kHub;
  SwmServiceImpl hub(*kv, bed.clock, std::move(*channels), nullptr, nullptr, options);
  auto hub_server = Serve(&hub);
  auto stub = pb::SwmService::NewStub(
      grpc::CreateChannel(hub_server->address(), grpc::InsecureChannelCredentials()));

  // Three 1.5-CPU replicas need three of the four 2-CPU nodes of the two clusters.
  pb::AssignmentPlan plan = PlaceDone(*stub, PlaceThroughSwm(bed, "batch", 3));
  REQUIRE(plan.targets_size() == 3);
  std::set<std::string> nodes;
  for (const auto& t : plan.targets()) {
    nodes.insert(t.cluster() + "/" + t.node());
    Member* m = t.cluster() == "a-edge" ? bed.a.get() : bed.b.get();
    CHECK(PodIn(*m, t.pod()).has_value());
  }
  CHECK(nodes.size() == 3);  // one 1.5-CPU replica per 2-CPU node
  const int solves = bed.a->SolveClusterCalls() + bed.b->SolveClusterCalls();
  if (member_l2) {
    CHECK(solves >= 2);  // every visit asked the member
  } else {
    CHECK(solves == 0);  // solved on the views the hub read
  }

  // A fourth replica fits on the one node left; a fifth fits nowhere, and
  // the hub knows it from the views without asking the members.
  pb::PlaceApplicationRequest more = PlaceThroughSwm(bed, "more", 2);
  grpc::ClientContext more_context;
  more_context.set_deadline(In(absl::Seconds(30)));
  pb::PlaceApplicationResponse more_response;
  grpc::Status status = stub->PlaceApplication(&more_context, more, &more_response);
  CHECK(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK_THAT(status.error_message(), Catch::Contains("no feasible placement for 1 of 2"));
  CHECK(bed.a->Pods().size() + bed.b->Pods().size() == 3);  // nothing of "more" left behind
  hub_server->Shutdown(absl::Seconds(5));
}

pb::PlaceApplicationRequest PlaceThroughSwm(Testbed& bed, const std::string& app, int replicas) {
  pb::PlaceApplicationRequest request;
  auto* spec = request.mutable_application()->mutable_spec();
  spec->set_app_name(app);
  auto* s = spec->add_services();
  s->set_name("worker");
  s->set_image("busybox");
  s->set_replicas(replicas);
  s->mutable_requests()->set_cpu_millicores(1500);
  s->mutable_requests()->set_memory_bytes(64 * kMi);
  for (Member* m : {bed.a.get(), bed.b.get()}) {
    auto* member = request.mutable_neighborhood()->add_members();
    member->set_cluster(m->name);
    (*member->mutable_endpoints())["swm"] = m->swm_server->address();
  }
  return request;
}

TEST_CASE("the hub removes only through the MCs' Release even after its restart") {
  Testbed bed;
  auto kv = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  {
    auto channels = PeerChannels::Create({.insecure = true});
    REQUIRE(channels.ok());
    SwmServiceImpl hub(*kv, bed.clock, std::move(*channels), nullptr, nullptr);
    auto placed = hub.Place(PlaceThroughSwm(bed, "batch", 2));
    INFO(placed.status());
    REQUIRE(placed.ok());
  }
  // A new hub on the same store, told nothing: it finds the MCs it placed
  // through (remembered from the neighborhood) and releases there.
  auto channels = PeerChannels::Create({.insecure = true});
  REQUIRE(channels.ok());
  SwmServiceImpl hub(*kv, bed.clock, std::move(*channels), nullptr, nullptr);
  pb::ReleaseApplicationRequest release;
  release.set_application("batch");
  auto removed = hub.Release(release);
  INFO(removed.status());
  REQUIRE(removed.ok());
  REQUIRE(removed->actions_size() == 2);
  for (const auto& action : removed->actions()) {
    CHECK(action.result() == pb::ACTION_RESULT_SUCCEEDED);
  }
  CHECK(bed.a->Pods().empty());
  CHECK(bed.b->Pods().empty());

  // With one MC down, its pods stay (the hub does not delete them itself):
  // its actions FAIL, the answer is UNAVAILABLE, and the pods stay targets.
  auto placed = hub.Place(PlaceThroughSwm(bed, "again", 3));
  INFO(placed.status());
  REQUIRE(placed.ok());
  const size_t on_a = bed.a->Pods().size();
  REQUIRE(on_a > 0);
  bed.a->swm_server->Shutdown(absl::Seconds(5));
  release.set_application("again");
  removed = hub.Release(release);
  CHECK(absl::IsUnavailable(removed.status()));
  CHECK(absl::StrContains(removed.status().message(), "a-edge"));
  CHECK(bed.a->Pods().size() == on_a);
  CHECK(bed.b->Pods().empty());
  auto plan = hub.Release(release);  // still UNAVAILABLE: a-edge's swm is gone
  CHECK(absl::IsUnavailable(plan.status()));
}

TEST_CASE("an MC moves a failed node's pods while the hub is away and the hub adopts them") {
  // Members with their default L2: the hub solves on their views.
  Testbed bed(/*own_l2=*/false);
  auto kv = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  // Two 500m replicas on a-edge only: one per node (services spread).
  pb::PlaceApplicationRequest request = PlaceThroughSwm(bed, "web", 2);
  request.mutable_application()
      ->mutable_spec()
      ->mutable_services(0)
      ->mutable_requests()
      ->set_cpu_millicores(500);
  request.mutable_neighborhood()->mutable_members()->DeleteSubrange(1, 1);
  {
    auto channels = PeerChannels::Create({.insecure = true});
    REQUIRE(channels.ok());
    SwmServiceImpl hub(*kv, bed.clock, std::move(*channels), nullptr, nullptr);
    auto placed = hub.Place(request);
    INFO(placed.status());
    REQUIRE(placed.ok());
  }
  // The hub is gone. A node of a-edge fails.
  PlanStore store(*kv);
  const pb::AssignmentPlan placed = store.Latest("web")->value();
  REQUIRE(placed.targets_size() == 2);
  const pb::WorkloadTarget& lost = placed.targets(0);
  const pb::WorkloadTarget& kept = placed.targets(1);
  REQUIRE(lost.node() != kept.node());
  REQUIRE(bed.federation->FailNode("a-edge", lost.node()).ok());
  SwmClusterServiceImpl& a = *bed.a->service;
  // The hub was seen a moment ago: nothing moves yet.
  auto made = a.LocalPass();
  REQUIRE(made.ok());
  CHECK(made->empty());
  bed.clock.Advance(absl::Seconds(31));  // past hub_away_after (15 s) and failure_grace (30 s)
  made = a.LocalPass();
  INFO(made.status());
  REQUIRE(made.ok());
  REQUIRE(made->size() == 1);
  const pb::LocalDecision decision = made->front();
  CHECK(decision.id() == "a-edge/1");
  CHECK(decision.pod() == lost.pod());
  CHECK(decision.from_node() == lost.node());
  CHECK(decision.to_node() == kept.node());
  CHECK(decision.state() == pb::LOCAL_DECISION_STATE_PENDING);
  CHECK_THAT(decision.reason(), Catch::Contains("while the hub is away"));
  // The pod runs on the other node, same name and labels; the ledger binds it there.
  std::optional<lms::Pod> pod = PodIn(*bed.a, lost.pod());
  REQUIRE(pod.has_value());
  CHECK(pod->node_name() == kept.node());
  CHECK(pod->phase() != lms::POD_PHASE_FAILED);
  CHECK(pod->labels().at("codeco.io/reservation") == LabelValue(lost.reservation()));
  CHECK(bed.a->Pods().size() == 2);
  auto r = a.reservations().Get(lost.reservation());
  REQUIRE(r.ok());
  for (const pb::ReservedItem& item : (*r)->items()) {
    if (item.pod().name() == lost.pod()) CHECK(item.node() == kept.node());
  }
  // A second pass moves nothing more.
  made = a.LocalPass();
  REQUIRE(made.ok());
  CHECK(made->empty());
  auto listed = a.ListDecisions([] {
    pb::ListLocalDecisionsRequest list;
    list.set_cluster("a-edge");
    return list;
  }());
  REQUIRE(listed.ok());
  CHECK(listed->hub_away());
  REQUIRE(listed->decisions_size() == 1);

  // The hub is back (started again on its store) with its adaptation loop:
  // it adopts the move into its plan and tells the member.
  SwmServiceOptions options;
  options.adapt_interval = absl::Milliseconds(50);
  auto channels = PeerChannels::Create({.insecure = true});
  REQUIRE(channels.ok());
  SwmServiceImpl hub(*kv, bed.clock, std::move(*channels), nullptr, nullptr, options);
  std::vector<pb::LocalDecision> settled;
  for (int i = 0; i < 600; ++i) {  // waits on the condition, up to a minute
    auto all = a.reservations().LocalDecisions(/*include_settled=*/true, 0, 10);
    REQUIRE(all.ok());
    settled = *all;
    if (!settled.empty() && settled[0].state() != pb::LOCAL_DECISION_STATE_PENDING) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  REQUIRE(settled.size() == 1);
  CHECK(settled[0].state() == pb::LOCAL_DECISION_STATE_ADOPTED);
  CHECK_THAT(settled[0].settle_note(), Catch::Contains("adopted as migration web/1"));
  const pb::AssignmentPlan adopted = store.Latest("web")->value();
  CHECK(adopted.plan_revision() == 2);
  for (const pb::WorkloadTarget& t : adopted.targets()) CHECK(t.node() == kept.node());
  auto m = store.GetMigration("web/1");
  REQUIRE(m.ok());
  CHECK(m->reason() == pb::MIGRATION_REASON_LOCAL_RESCHEDULE);
  CHECK(m->phase() == pb::MIGRATION_PHASE_DONE);
  // The member counts the hub as back; the pods run once each.
  listed = a.ListDecisions([] {
    pb::ListLocalDecisionsRequest list;
    list.set_cluster("a-edge");
    return list;
  }());
  REQUIRE(listed.ok());
  CHECK_FALSE(listed->hub_away());
  CHECK(listed->decisions_size() == 0);  // settled ones only on request
  CHECK(bed.a->Pods() == std::set<std::string>{lost.pod(), kept.pod()});
}

TEST_CASE("SettleLocalDecisions and ListLocalDecisions name their bad fields") {
  Testbed bed(/*own_l2=*/false);
  SwmClusterServiceImpl& a = *bed.a->service;
  pb::SettleLocalDecisionsRequest settle;
  settle.set_cluster("b-edge");
  grpc::ClientContext c1;
  c1.set_deadline(In(absl::Seconds(10)));
  pb::SettleLocalDecisionsResponse response;
  grpc::Status st = bed.a->stub->SettleLocalDecisions(&c1, settle, &response);
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(st.error_message(), Catch::Contains("cluster"));
  std::vector<pb::LocalDecisionVerdict> verdicts(2);
  verdicts[0].set_id("a-edge/1");
  verdicts[0].set_state(pb::LOCAL_DECISION_STATE_PENDING);
  verdicts[1].set_id("elsewhere/1");
  verdicts[1].set_state(pb::LOCAL_DECISION_STATE_ADOPTED);
  auto out = a.reservations().SettleLocalDecisions(verdicts);
  REQUIRE_FALSE(out.ok());
  CHECK_THAT(std::string(out.status().message()), Catch::Contains("verdicts[0].state"));
  CHECK_THAT(std::string(out.status().message()), Catch::Contains("verdicts[1].id"));
  verdicts = {verdicts[0]};
  verdicts[0].set_state(pb::LOCAL_DECISION_STATE_UNDONE);
  out = a.reservations().SettleLocalDecisions(verdicts);
  CHECK(absl::IsNotFound(out.status()));
  CHECK_THAT(std::string(out.status().message()), Catch::Contains("verdicts[0].id"));
  pb::ListLocalDecisionsRequest list;
  list.set_cluster("a-edge");
  list.set_page_token("x");
  list.set_page_size(-1);
  auto listed = a.ListDecisions(list);
  REQUIRE_FALSE(listed.ok());
  CHECK_THAT(std::string(listed.status().message()), Catch::Contains("page_token"));
  CHECK_THAT(std::string(listed.status().message()), Catch::Contains("page_size"));
}

// Holds the reservations of `plan` of `app` at the MCs and stores the
// plan, in `phase`, in `store`.
void InterruptedPlan(Testbed& bed, PlanStore& store, const std::string& app, pb::PlanPhase phase,
                     pb::AssignmentPlan plan) {
  pb::PlaceApplicationRequest request = PlaceThroughSwm(bed, app, 2);
  REQUIRE(plan.targets_size() == 2);
  plan.set_id(app + "/1");
  plan.set_plan_revision(1);
  plan.set_phase(phase);
  plan.set_operation_id("place/" + app + "/1");
  std::map<std::string, std::vector<ReservationItem>> items;
  std::map<std::string, PodTemplates> templates;
  for (const pb::WorkloadTarget& t : plan.targets()) {
    WorkloadTarget target{.workload = t.workload(),
                          .service = t.service(),
                          .cluster = t.cluster(),
                          .node = t.node(),
                          .pod = t.pod(),
                          .requests = {1500, 64 * kMi, 0}};
    items[t.cluster()].push_back({t.pod(), t.node(), target.requests, t.workload()});
    templates[t.cluster()][t.pod()] = PodTemplate(request.application(), target, 1);
  }
  for (auto& [cluster, list] : items) {
    Member* m = cluster == "a-edge" ? bed.a.get() : bed.b.get();
    RemoteClusterExecutor remote(
        grpc::CreateChannel(m->swm_server->address(), grpc::InsecureChannelCredentials()),
        absl::Seconds(10), templates[cluster]);
    REQUIRE(remote.Reserve(app + "/1/" + cluster, list, absl::Minutes(5)).ok());
  }
  codeco::common::v1::Operation op;
  op.set_id(plan.operation_id());
  op.set_kind("swm.PlaceApplication");
  op.set_resource("applications/" + app);
  op.set_request_id("place-" + app);
  REQUIRE(store.Save(&plan, op, "").ok());
}

// Leaves `kv` as a hub killed mid-plan leaves it: each plan of `phases`
// (application -> phase; 2 replicas, solved by a dry run) stored in its
// phase, with every target cluster's reservation held at its MC (pod
// templates included) but not committed.
void KillHubMidPlan(Testbed& bed, KvStore& kv, const std::map<std::string, pb::PlanPhase>& phases) {
  auto channels = PeerChannels::Create({.insecure = true});
  REQUIRE(channels.ok());
  // Each plan is solved on the MCs' views, which count the holds of the
  // plans before it; all are stored once this hub is gone (a hub starting
  // with them stored would recover them).
  std::vector<std::pair<std::string, pb::AssignmentPlan>> plans;
  auto scratch = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  PlanStore later(*scratch);
  {
    SwmServiceImpl hub(kv, bed.clock, std::move(*channels), nullptr, nullptr);
    for (const auto& [app, phase] : phases) {
      pb::PlaceApplicationRequest request = PlaceThroughSwm(bed, app, 2);
      request.set_dry_run(true);
      auto solved = hub.Place(request);
      INFO(solved.status());
      REQUIRE(solved.ok());
      pb::AssignmentPlan plan;
      REQUIRE(solved->result().UnpackTo(&plan));
      InterruptedPlan(bed, later, app, phase, plan);
    }
  }
  PlanStore store(kv);
  for (const auto& [app, phase] : phases) {
    auto plan = later.Latest(app);
    REQUIRE(plan.ok());
    REQUIRE(plan->has_value());
    auto op = later.GetOperation((*plan)->operation_id());
    REQUIRE(op.ok());
    REQUIRE(store.Save(&**plan, *op, "").ok());
  }
}

TEST_CASE("a restarted hub commits a plan it left COMMITTING and rolls back one left RESERVING") {
  Testbed bed;
  auto kv = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  KillHubMidPlan(bed, *kv,
                 {{"ready", pb::PLAN_PHASE_COMMITTING}, {"half", pb::PLAN_PHASE_RESERVING}});
  REQUIRE(bed.a->Pods().size() + bed.b->Pods().size() == 0);

  auto channels = PeerChannels::Create({.insecure = true});
  REQUIRE(channels.ok());
  SwmServiceImpl hub(*kv, bed.clock, std::move(*channels), nullptr, nullptr);
  hub.DrainForTest();  // the recovery runs first on the worker
  PlanStore store(*kv);

  // COMMITTING: committed again in every cluster, DONE, and the caller's
  // retry of the same request gets it.
  auto ready = store.Latest("ready");
  REQUIRE(ready.ok());
  REQUIRE(ready->has_value());
  CHECK((*ready)->phase() == pb::PLAN_PHASE_DONE);
  std::set<std::string> pods;
  for (Member* m : {bed.a.get(), bed.b.get()}) {
    for (const std::string& p : m->Pods()) pods.insert(p);
  }
  CHECK(pods == std::set<std::string>{"ready-worker-0", "ready-worker-1"});
  for (const pb::WorkloadTarget& t : (*ready)->targets()) {
    Member* m = t.cluster() == "a-edge" ? bed.a.get() : bed.b.get();
    auto r = m->service->reservations().Get("ready/1/" + t.cluster());
    REQUIRE(r.ok());
    REQUIRE(r->has_value());
    CHECK((*r)->state() == pb::RESERVATION_STATE_COMMITTED);
  }
  pb::PlaceApplicationRequest retry = PlaceThroughSwm(bed, "ready", 2);
  retry.set_request_id("place-ready");
  auto answered = hub.Place(retry);
  INFO(answered.status());
  REQUIRE(answered.ok());
  CHECK(answered->id() == "place/ready/1");

  // RESERVING: every MC released the reservation; no pod; ROLLED_BACK.
  auto half = store.Latest("half");
  REQUIRE(half.ok());
  REQUIRE(half->has_value());
  CHECK((*half)->phase() == pb::PLAN_PHASE_ROLLED_BACK);
  for (const pb::WorkloadTarget& t : (*half)->targets()) {
    Member* m = t.cluster() == "a-edge" ? bed.a.get() : bed.b.get();
    auto r = m->service->reservations().Get("half/1/" + t.cluster());
    REQUIRE(r.ok());
    REQUIRE(r->has_value());
    CHECK((*r)->state() == pb::RESERVATION_STATE_RELEASED);
  }
}

// Calls PlaceApplication on `stub` with a 30 s deadline.
grpc::Status PlaceOver(pb::SwmService::Stub& stub, const pb::PlaceApplicationRequest& request,
                       pb::PlaceApplicationResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(30)));
  return stub.PlaceApplication(&context, request, response);
}

// Every message WatchOperation streams for `id` until the stream ends, and
// how it ended. `on_message` sees each as it arrives.
grpc::Status WatchAll(pb::SwmService::Stub& stub, const std::string& id,
                      std::vector<codeco::common::v1::Operation>& seen,
                      const std::function<void(const codeco::common::v1::Operation&)>& on_message =
                          nullptr) {
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(60)));
  pb::WatchOperationRequest request;
  request.set_id(id);
  auto stream = stub.WatchOperation(&context, request);
  pb::WatchOperationResponse event;
  while (stream->Read(&event)) {
    seen.push_back(event.operation());
    if (on_message) on_message(event.operation());
  }
  return stream->Finish();
}

TEST_CASE("PlaceApplication in mode RUNNING answers at once and WatchOperation follows it") {
  Testbed bed;
  auto kv = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  auto channels = PeerChannels::Create({.insecure = true});
  REQUIRE(channels.ok());
  SwmServiceImpl hub(*kv, bed.clock, std::move(*channels), nullptr, nullptr);
  auto hub_server = Serve(&hub);
  REQUIRE(absl::StartsWith(hub_server->address(), "127.0.0.1:"));
  auto stub = pb::SwmService::NewStub(
      grpc::CreateChannel(hub_server->address(), grpc::InsecureChannelCredentials()));

  // The MCs' solvers wait at a gate: the placement is held while SOLVING.
  absl::Notification gate;
  bed.a->l2.Hold(&gate);
  bed.b->l2.Hold(&gate);

  pb::PlaceApplicationRequest request = PlaceThroughSwm(bed, "shop", 2);
  request.set_mode(pb::PLACE_MODE_RUNNING);
  request.set_request_id("start-shop");
  pb::PlaceApplicationResponse response;
  grpc::Status status = PlaceOver(*stub, request, &response);
  INFO(status.error_message());
  REQUIRE(status.ok());
  const codeco::common::v1::Operation started = response.operation();
  CHECK(!started.done());
  CHECK(started.phase() == "QUEUED");
  CHECK(started.kind() == "swm.PlaceApplication");
  CHECK(started.resource() == "applications/shop");
  CHECK(started.request_id() == "start-shop");

  // The same request again answers the same operation, not a second placement.
  pb::PlaceApplicationResponse again;
  REQUIRE(PlaceOver(*stub, request, &again).ok());
  CHECK(again.operation().id() == started.id());

  // The watch sees the operation running, with progress, up to SOLVING
  // (where the gate holds it); the gate opens then; the watch follows it to
  // its end: DONE with the plan.
  std::vector<codeco::common::v1::Operation> seen;
  status = WatchAll(*stub, started.id(), seen, [&](const codeco::common::v1::Operation& op) {
    if (op.phase() == "SOLVING" && !gate.HasBeenNotified()) gate.Notify();
  });
  INFO(status.error_message());
  REQUIRE(status.ok());
  if (!gate.HasBeenNotified()) gate.Notify();
  REQUIRE(seen.size() >= 2);
  bool solving = false;
  for (size_t i = 0; i < seen.size(); ++i) {
    CHECK(seen[i].id() == started.id());
    CHECK(seen[i].done() == (i + 1 == seen.size()));
    if (i > 0) CHECK(seen[i].progress_percent() >= seen[i - 1].progress_percent());
    if (seen[i].phase() == "SOLVING") {
      solving = true;
      CHECK(seen[i].progress_percent() == 20);
      CHECK(!seen[i].done());
    }
  }
  CHECK(solving);
  const codeco::common::v1::Operation& last = seen.back();
  CHECK(last.phase() == "DONE");
  CHECK(last.progress_percent() == 100);
  CHECK(!last.has_error());
  pb::AssignmentPlan plan;
  REQUIRE(last.result().UnpackTo(&plan));
  CHECK(plan.phase() == pb::PLAN_PHASE_DONE);
  CHECK(plan.operation_id() == started.id());
  CHECK(plan.targets_size() == 2);
  CHECK(bed.a->Pods().size() + bed.b->Pods().size() == 2);
  // The operation kept its creation time through the core's writes.
  CHECK(last.create_time().seconds() == started.create_time().seconds());
  CHECK(last.create_time().nanos() == started.create_time().nanos());

  // GetOperation answers the same end; a watch of a done operation sends it once.
  {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    pb::GetOperationRequest get;
    get.set_id(started.id());
    pb::GetOperationResponse got;
    REQUIRE(stub->GetOperation(&context, get, &got).ok());
    CHECK(got.operation().SerializeAsString() == last.SerializeAsString());
  }
  std::vector<codeco::common::v1::Operation> once;
  REQUIRE(WatchAll(*stub, started.id(), once).ok());
  REQUIRE(once.size() == 1);
  CHECK(once[0].done());

  // The request_id now answers the finished operation.
  REQUIRE(PlaceOver(*stub, request, &again).ok());
  CHECK(again.operation().id() == started.id());
  CHECK(again.operation().done());

  // A second application that does not fit ends FAILED in its operation
  // (not in the call's status), with the unplaced workloads as causes.
  pb::PlaceApplicationRequest huge = PlaceThroughSwm(bed, "huge", 5);
  huge.set_mode(pb::PLACE_MODE_RUNNING);
  pb::PlaceApplicationResponse huge_started;
  REQUIRE(PlaceOver(*stub, huge, &huge_started).ok());
  std::vector<codeco::common::v1::Operation> huge_seen;
  REQUIRE(WatchAll(*stub, huge_started.operation().id(), huge_seen).ok());
  REQUIRE(!huge_seen.empty());
  CHECK(huge_seen.back().done());
  CHECK(huge_seen.back().phase() == "FAILED");
  CHECK(huge_seen.back().error().code() == codeco::common::v1::ERROR_CODE_FAILED_PRECONDITION);
  CHECK(huge_seen.back().error().causes_size() > 0);

  // Bad input is still the call's INVALID_ARGUMENT, naming the field.
  pb::PlaceApplicationRequest bad = request;
  bad.set_request_id("");
  bad.mutable_neighborhood()->clear_members();
  pb::PlaceApplicationResponse refused;
  status = PlaceOver(*stub, bad, &refused);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(status.error_message(), "neighborhood.members"));
  // A request_id that placed another application is refused, naming it.
  pb::PlaceApplicationRequest reused = PlaceThroughSwm(bed, "other", 1);
  reused.set_mode(pb::PLACE_MODE_RUNNING);
  reused.set_request_id("start-shop");
  status = PlaceOver(*stub, reused, &refused);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(status.error_message(), "request_id"));

  // Watches of an unknown or missing id end with NOT_FOUND / INVALID_ARGUMENT.
  std::vector<codeco::common::v1::Operation> none;
  CHECK(WatchAll(*stub, "place/nothing/1", none).error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(WatchAll(*stub, "", none).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(none.empty());
  hub_server->Shutdown(absl::Seconds(5));
}

TEST_CASE("ListOperations pages through the hub's operations newest first") {
  Testbed bed;
  auto kv = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  auto channels = PeerChannels::Create({.insecure = true});
  REQUIRE(channels.ok());
  SwmServiceImpl hub(*kv, bed.clock, std::move(*channels), nullptr, nullptr);
  auto hub_server = Serve(&hub);
  auto stub = pb::SwmService::NewStub(
      grpc::CreateChannel(hub_server->address(), grpc::InsecureChannelCredentials()));
  // Four one-replica applications, one after the other (the clock moves
  // between them), then one removal.
  std::vector<std::string> placed;
  for (const std::string app : {"one", "two", "three", "four"}) {
    pb::PlaceApplicationResponse response;
    grpc::Status status = PlaceOver(*stub, PlaceThroughSwm(bed, app, 1), &response);
    INFO(status.error_message());
    REQUIRE(status.ok());
    placed.push_back(response.operation().id());
    bed.clock.Advance(absl::Seconds(1));
  }
  {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(30)));
    pb::ReleaseApplicationRequest release;
    release.set_application("one");
    pb::ReleaseApplicationResponse released;
    REQUIRE(stub->ReleaseApplication(&context, release, &released).ok());
  }
  auto list = [&](pb::ListOperationsRequest request, pb::ListOperationsResponse* page) {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    return stub->ListOperations(&context, request, page);
  };

  // Page by page, two at a time: every operation once, newest first.
  std::vector<std::string> ids;
  pb::ListOperationsRequest request;
  request.set_page_size(2);
  int pages = 0;
  while (true) {
    pb::ListOperationsResponse page;
    grpc::Status status = list(request, &page);
    INFO(status.error_message());
    REQUIRE(status.ok());
    ++pages;
    CHECK(page.operations_size() <= 2);
    for (const auto& op : page.operations()) ids.push_back(op.id());
    if (page.next_page_token().empty()) break;
    request.set_page_token(page.next_page_token());
    REQUIRE(pages < 10);
  }
  REQUIRE(ids.size() == 5);
  CHECK(pages == 3);
  CHECK(absl::StartsWith(ids[0], "release/one/"));
  CHECK(std::vector<std::string>(ids.begin() + 1, ids.end()) ==
        std::vector<std::string>{placed[3], placed[2], placed[1], placed[0]});

  // Filters: kind, resource, active only.
  pb::ListOperationsRequest by_kind;
  by_kind.set_kind("swm.PlaceApplication");
  pb::ListOperationsResponse page;
  REQUIRE(list(by_kind, &page).ok());
  CHECK(page.operations_size() == 4);
  pb::ListOperationsRequest by_resource;
  by_resource.set_resource("applications/one");
  REQUIRE(list(by_resource, &page).ok());
  CHECK(page.operations_size() == 2);
  pb::ListOperationsRequest active;
  active.set_active_only(true);
  REQUIRE(list(active, &page).ok());
  CHECK(page.operations_size() == 0);

  // Bad input names the field.
  pb::ListOperationsRequest negative;
  negative.set_page_size(-1);
  grpc::Status status = list(negative, &page);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(status.error_message(), "page_size"));
  pb::ListOperationsRequest forged;
  forged.set_page_token("not-a-token");
  status = list(forged, &page);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(status.error_message(), "page_token"));
  hub_server->Shutdown(absl::Seconds(5));
}

TEST_CASE("a restarted hub finishes the running operations a crash interrupted") {
  Testbed bed;
  auto kv = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  // A hub that died while solving a started placement left its operation
  // stored RUNNING with no plan; one that died while committing left the
  // plan COMMITTING carrying its operation.
  KillHubMidPlan(bed, *kv, {{"ready", pb::PLAN_PHASE_COMMITTING}});
  {
    PlanStore store(*kv);
    auto carried = store.GetOperation("place/ready/1");
    REQUIRE(carried.ok());
    CHECK(!carried->done());
    codeco::common::v1::Operation solving;
    solving.set_id("place/lost/started-1-1");
    solving.set_kind("swm.PlaceApplication");
    solving.set_resource("applications/lost");
    solving.set_request_id("start-lost");
    solving.set_phase("SOLVING");
    solving.set_progress_percent(20);
    REQUIRE(store.Save(nullptr, solving, "").ok());
  }

  auto channels = PeerChannels::Create({.insecure = true});
  REQUIRE(channels.ok());
  SwmServiceImpl hub(*kv, bed.clock, std::move(*channels), nullptr, nullptr);
  hub.DrainForTest();  // the recovery runs first on the worker
  auto hub_server = Serve(&hub);
  auto stub = pb::SwmService::NewStub(
      grpc::CreateChannel(hub_server->address(), grpc::InsecureChannelCredentials()));

  // The plan's operation took the plan's outcome: committed, DONE.
  std::vector<codeco::common::v1::Operation> ready;
  REQUIRE(WatchAll(*stub, "place/ready/1", ready).ok());
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].done());
  CHECK(ready[0].phase() == "DONE");
  pb::AssignmentPlan plan;
  REQUIRE(ready[0].result().UnpackTo(&plan));
  CHECK(plan.phase() == pb::PLAN_PHASE_DONE);

  // The one with no plan ended ABORTED: nothing was reserved for it.
  std::vector<codeco::common::v1::Operation> lost;
  REQUIRE(WatchAll(*stub, "place/lost/started-1-1", lost).ok());
  REQUIRE(lost.size() == 1);
  CHECK(lost[0].done());
  CHECK(lost[0].error().code() == codeco::common::v1::ERROR_CODE_ABORTED);

  // Its request_id is free: the caller's retry places it.
  pb::PlaceApplicationRequest retry = PlaceThroughSwm(bed, "lost", 1);
  retry.set_mode(pb::PLACE_MODE_RUNNING);
  retry.set_request_id("start-lost");
  pb::PlaceApplicationResponse response;
  REQUIRE(PlaceOver(*stub, retry, &response).ok());
  CHECK(response.operation().id() != "place/lost/started-1-1");
  std::vector<codeco::common::v1::Operation> placed;
  REQUIRE(WatchAll(*stub, response.operation().id(), placed).ok());
  REQUIRE(!placed.empty());
  CHECK(placed.back().phase() == "DONE");
  hub_server->Shutdown(absl::Seconds(5));
}

TEST_CASE("an MC swm holds reservations against capacity until their lease runs out") {
  Testbed bed;
  Member& a = *bed.a;
  auto call = [&](auto method, const auto& request, auto* response) {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    return ((*a.stub).*method)(&context, request, response);
  };
  std::vector<std::string> names;
  {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    lms::ListNodesResponse nodes;
    REQUIRE(a.lms_stub->ListNodes(&context, {}, &nodes).ok());
    for (const auto& n : nodes.nodes()) names.push_back(n.name());
  }
  REQUIRE(names.size() == 2);
  const std::string node = names[0];
  const std::string other = names[1];

  // Bad input names the fields; nothing is held.
  pb::ReserveRequest bad = ReserveOf("r0", "", -1);
  bad.clear_application();
  pb::ReserveResponse reserved;
  grpc::Status status = call(&pb::SwmService::Stub::Reserve, bad, &reserved);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(status.error_message(), "application"));
  CHECK(absl::StrContains(status.error_message(), "items[0].node"));
  CHECK(absl::StrContains(status.error_message(), "items[0].resources"));

  // r1 takes 1.5 of the node's 2 CPUs; the same id again answers the same one.
  status = call(&pb::SwmService::Stub::Reserve, ReserveOf("r1", node, 1500), &reserved);
  INFO(status.error_message());
  REQUIRE(status.ok());
  CHECK(reserved.reservation().state() == pb::RESERVATION_STATE_RESERVED);
  const auto created = reserved.reservation().create_time();
  bed.clock.Advance(absl::Seconds(1));
  pb::ReserveResponse again;
  REQUIRE(call(&pb::SwmService::Stub::Reserve, ReserveOf("r1", node, 1500), &again).ok());
  CHECK(again.reservation().create_time().seconds() == created.seconds());
  // Other items under the same id are refused.
  status = call(&pb::SwmService::Stub::Reserve, ReserveOf("r1", node, 100), &again);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);

  // It counts: a second 1-CPU reservation on that node does not fit, and the
  // L2 solve of the MC does not put a 1-CPU workload there either.
  status = call(&pb::SwmService::Stub::Reserve, ReserveOf("r2", node, 1000), &again);
  CHECK(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(absl::StrContains(status.error_message(), node));
  pb::SolveClusterRequest solve;
  solve.set_cluster("a-edge");
  for (int i = 0; i < 2; ++i) {
    pb::Workload* w = solve.add_workloads();
    w->set_name("big-" + std::to_string(i));
    w->set_application("other");
    w->mutable_requests()->set_cpu_millicores(1000);
  }
  pb::SolveClusterResponse solved;
  status = call(&pb::SwmService::Stub::SolveCluster, solve, &solved);
  INFO(status.error_message());
  REQUIRE(status.ok());
  REQUIRE(solved.assignments_size() == 1);  // only the other node has room
  CHECK(solved.assignments(0).node() != node);
  CHECK(solved.unplaced_size() == 1);
  solve.set_cluster("b-edge");
  CHECK(call(&pb::SwmService::Stub::SolveCluster, solve, &solved).error_code() ==
        grpc::StatusCode::INVALID_ARGUMENT);

  // Commit creates the pod; once the LMS shows it the reservation stops
  // counting on its own (the LMS counts the pod).
  pb::CommitRequest commit;
  commit.set_reservation_id("r1");
  pb::CommitResponse committed;
  REQUIRE(call(&pb::SwmService::Stub::Commit, commit, &committed).ok());
  CHECK(committed.reservation().state() == pb::RESERVATION_STATE_COMMITTED);
  CHECK(a.Pods().count("app-w-r1") == 1);
  REQUIRE(call(&pb::SwmService::Stub::Commit, commit, &committed).ok());  // idempotent
  CHECK(a.Pods().size() == 1);

  // A reservation not committed before its lease runs out is given back.
  status = call(&pb::SwmService::Stub::Reserve, ReserveOf("r3", other, 1500), &again);
  REQUIRE(status.ok());
  CHECK(call(&pb::SwmService::Stub::Reserve, ReserveOf("r4", other, 1000), &again).error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);
  bed.clock.Advance(absl::Seconds(31));
  REQUIRE(call(&pb::SwmService::Stub::Reserve, ReserveOf("r4", other, 1000), &again).ok());
  commit.set_reservation_id("r3");
  status = call(&pb::SwmService::Stub::Commit, commit, &committed);
  CHECK(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(absl::StrContains(status.error_message(), "expired"));
  // The committed r1 has no lease: it is still there.
  auto r1 = a.service->reservations().Get("r1");
  REQUIRE(r1.ok());
  REQUIRE(r1->has_value());
  CHECK((*r1)->state() == pb::RESERVATION_STATE_COMMITTED);

  // Release deletes the pod; unknown ids are fine; a released id stays released.
  pb::ReleaseRequest release;
  release.set_reservation_id("r1");
  pb::ReleaseResponse gone;
  REQUIRE(call(&pb::SwmService::Stub::Release, release, &gone).ok());
  CHECK(gone.reservation().state() == pb::RESERVATION_STATE_RELEASED);
  CHECK(a.Pods().empty());
  release.set_reservation_id("never-seen");
  REQUIRE(call(&pb::SwmService::Stub::Release, release, &gone).ok());
  CHECK(!gone.has_reservation());
  CHECK(call(&pb::SwmService::Stub::Reserve, ReserveOf("r1", node, 1500), &again).error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_CASE("an MC swm's cluster view counts its holds and pages by node name") {
  Testbed bed;
  Member& a = *bed.a;
  const std::string node = FirstNode(a);
  grpc::ClientContext reserve_context;
  reserve_context.set_deadline(In(absl::Seconds(10)));
  pb::ReserveResponse reserved;
  REQUIRE(a.stub->Reserve(&reserve_context, ReserveOf("r1", node, 1500), &reserved).ok());

  auto view = [&](const pb::GetClusterViewRequest& request, pb::GetClusterViewResponse* out) {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    return a.stub->GetClusterView(&context, request, out);
  };
  pb::GetClusterViewRequest request;
  request.set_cluster("a-edge");
  request.set_page_size(1);
  std::vector<pb::ClusterNode> nodes;
  for (int page = 0; page < 3; ++page) {
    pb::GetClusterViewResponse response;
    grpc::Status status = view(request, &response);
    INFO(status.error_message());
    REQUIRE(status.ok());
    CHECK(response.cluster() == "a-edge");
    CHECK(response.nodes_size() <= 1);
    nodes.insert(nodes.end(), response.nodes().begin(), response.nodes().end());
    request.set_page_token(response.next_page_token());
    if (request.page_token().empty()) break;
  }
  REQUIRE(nodes.size() == 2);
  CHECK(nodes[0].name() < nodes[1].name());
  for (const pb::ClusterNode& n : nodes) {
    INFO(n.name());
    CHECK(n.schedulable());
    CHECK(n.capacity().cpu_millicores() == 2000);
    CHECK(n.allocated().cpu_millicores() == (n.name() == node ? 1500 : 0));
    CHECK(n.labels().at("codeco.io/tier") == "edge");
    CHECK(n.labels().at("codeco.io/country") == "FR");
  }
  std::vector<Node> core;
  for (const pb::ClusterNode& n : nodes) core.push_back(FromClusterNode(n));
  ClusterLabels labels = LabelsFromNodes(core);
  CHECK(labels.tier == "edge");
  CHECK(labels.country == "FR");

  pb::GetClusterViewRequest other;
  other.set_cluster("b-edge");
  other.set_page_size(-1);
  pb::GetClusterViewResponse response;
  grpc::Status status = view(other, &response);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(status.error_message(), "cluster: "));
  CHECK(absl::StrContains(status.error_message(), "page_size: "));
}

TEST_CASE("the hub's watched copy of an MC's view counts each Reserve and Release it was answered") {
  Testbed bed;
  Member& a = *bed.a;
  const std::string node = FirstNode(a);
  MemberViews views;
  views.Watch("a-edge", a.swm_server->address(),
              grpc::CreateChannel(a.swm_server->address(), grpc::InsecureChannelCredentials()));
  auto allocated_on = [&](const std::vector<Node>& nodes) {
    for (const Node& n : nodes) {
      if (n.name == node) return n.allocated.cpu_millis;
    }
    return int64_t{-1};
  };
  // The first view arrives without any change.
  std::optional<McView> first;
  while (!(first = views.Fresh("a-edge", absl::InfiniteFuture())).has_value()) {
  }
  CHECK(first->nodes.size() == 2);
  CHECK(allocated_on(first->nodes) == 0);
  CHECK(first->solves_own_l2);  // an L2 is set on a-edge's swm

  // Each answer's version is waited for: the copy never misses the hold.
  RemoteClusterExecutor remote(
      grpc::CreateChannel(a.swm_server->address(), grpc::InsecureChannelCredentials()),
      absl::Seconds(10), {{"app-w", TemplateOf("app/1/a-edge", "w")}},
      [&views](const pb::ViewVersion& version) { views.Saw("a-edge", version); });
  REQUIRE(remote
              .Reserve("app/1/a-edge",
                       {ReservationItem{.pod = "app-w",
                                        .node = node,
                                        .requests = Resources{.cpu_millis = 1500,
                                                              .memory_bytes = 64 * kMi},
                                        .workload = "w"}},
                       absl::Seconds(30))
              .ok());
  std::optional<McView> held;
  while (!(held = views.Fresh("a-edge", absl::InfiniteFuture())).has_value()) {
  }
  CHECK(allocated_on(held->nodes) == 1500);
  REQUIRE(remote.Release("app/1/a-edge").ok());
  std::optional<McView> freed;
  while (!(freed = views.Fresh("a-edge", absl::InfiniteFuture())).has_value()) {
  }
  CHECK(allocated_on(freed->nodes) == 0);
  CHECK(views.Synced("a-edge"));

  // A stream for another cluster is refused with the field.
  auto stub = pb::SwmService::NewStub(
      grpc::CreateChannel(a.swm_server->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(10)));
  pb::WatchClusterViewRequest other;
  other.set_cluster("b-edge");
  auto reader = stub->WatchClusterView(&context, other);
  pb::WatchClusterViewResponse page;
  CHECK_FALSE(reader->Read(&page));
  grpc::Status status = reader->Finish();
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(status.error_message(), "cluster: "));
}

TEST_CASE("versions of a cluster view order by incarnation then revision") {
  auto version = [](int64_t incarnation, int64_t revision) {
    pb::ViewVersion v;
    v.set_incarnation(incarnation);
    v.set_revision(revision);
    return v;
  };
  CHECK(Covers(version(5, 3), version(5, 3)));
  CHECK(Covers(version(5, 4), version(5, 3)));
  CHECK_FALSE(Covers(version(5, 2), version(5, 3)));
  CHECK(Covers(version(6, 1), version(5, 9)));  // a restarted MC's view is newer
  CHECK_FALSE(Covers(version(4, 9), version(5, 1)));
  CHECK(Covers(version(5, 1), version(0, 0)));  // nothing needed yet
}

TEST_CASE("swm.cluster_endpoints is parsed and bad entries are named") {
  auto ok = ParseClusterEndpoints("a=127.0.0.1:7001, b=host.example:7002");
  REQUIRE(ok.ok());
  CHECK(ok->size() == 2);
  CHECK(ok->at("b") == "host.example:7002");
  CHECK(ParseClusterEndpoints("")->empty());
  for (const char* bad : {"a", "a=127.0.0.1", "a=:80", "a=h:0", "a=h:1,a=h:2", "=h:1"}) {
    auto parsed = ParseClusterEndpoints(bad);
    INFO(bad);
    CHECK(absl::IsInvalidArgument(parsed.status()));
    CHECK(absl::StrContains(parsed.status().message(), "swm.cluster_endpoints"));
  }
}

}  // namespace
}  // namespace codeco::swm
