// A plan that fails half-way is undone everywhere: the hub's SWM (in process,
// over gRPC) places three replicas over a CODEF-emulated cluster and a cluster
// whose LMS refuses to create pods; the pods already created in the first are
// deleted, the answer is ABORTED naming the broken cluster, and the stored
// plan is ROLLED_BACK. Member LMS endpoints come from the neighborhood. A
// removal whose pods cannot be deleted is stored FAILED and finished by a retry.
#include <catch2/catch.hpp>
#include <set>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "codeco/common/clock.h"
#include "codeco/common/peer_channels.h"
#include "codeco/common/server.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "federation.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "link_control.h"
#include "lms_service.h"
#include "prometheus/registry.h"
#include "scenario.h"
#include "swm/server/plan_store.h"
#include "swm/server/swm_service.h"

namespace codeco::swm {
namespace {

namespace lms = codeco::lms::v1;
namespace pb = codeco::swm::v1;

constexpr char kScenario[] = R"(
name: rollback
federation:
  hub: {name: hub}
  clusters:
    - name: a-edge
      labels: {tier: edge, country: FR}
      nodes: [{name: n, count: 2, capacity: {cpu: 2, memory: 4Gi}}]
)";

// An LMS with one 2-CPU node whose kubelet never starts a pod.
class BrokenLms final : public lms::LmsService::CallbackService {
 public:
  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* context,
                                      const lms::ListNodesRequest*,
                                      lms::ListNodesResponse* response) override {
    lms::Node* node = response->add_nodes();
    node->set_name("z-node");
    node->mutable_allocatable()->set_cpu_millicores(2000);
    node->mutable_allocatable()->set_memory_bytes(int64_t{4} << 30);
    node->set_condition(lms::NODE_CONDITION_READY);
    return Finish(context, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ListPods(grpc::CallbackServerContext* context,
                                     const lms::ListPodsRequest*, lms::ListPodsResponse*) override {
    return Finish(context, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* CreatePod(grpc::CallbackServerContext* context,
                                      const lms::CreatePodRequest*,
                                      lms::CreatePodResponse*) override {
    return Finish(context, grpc::Status(grpc::StatusCode::UNAVAILABLE, "kubelet down"));
  }
  grpc::ServerUnaryReactor* DeletePod(grpc::CallbackServerContext* context,
                                      const lms::DeletePodRequest* request,
                                      lms::DeletePodResponse*) override {
    return Finish(context, grpc::Status(grpc::StatusCode::NOT_FOUND, "no pod " + request->name()));
  }

 private:
  static grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context,
                                          const grpc::Status& status) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }
};

// An LMS with one 4-CPU node that keeps pods in memory and refuses to delete
// them while `refuse_deletes` is set (a kubelet away during a removal).
class FlakyLms final : public lms::LmsService::CallbackService {
 public:
  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* context,
                                      const lms::ListNodesRequest*,
                                      lms::ListNodesResponse* response) override {
    lms::Node* node = response->add_nodes();
    node->set_name("f-node");
    node->mutable_allocatable()->set_cpu_millicores(4000);
    node->mutable_allocatable()->set_memory_bytes(int64_t{8} << 30);
    node->set_condition(lms::NODE_CONDITION_READY);
    return Finish(context, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ListPods(grpc::CallbackServerContext* context,
                                     const lms::ListPodsRequest*,
                                     lms::ListPodsResponse* response) override {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, pod] : pods_) *response->add_pods() = pod;
    return Finish(context, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* CreatePod(grpc::CallbackServerContext* context,
                                      const lms::CreatePodRequest* request,
                                      lms::CreatePodResponse* response) override {
    absl::MutexLock lock(&mu_);
    pods_[request->pod().name()] = request->pod();
    *response->mutable_pod() = request->pod();
    return Finish(context, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* DeletePod(grpc::CallbackServerContext* context,
                                      const lms::DeletePodRequest* request,
                                      lms::DeletePodResponse*) override {
    absl::MutexLock lock(&mu_);
    if (refuse_deletes_) {
      return Finish(context, grpc::Status(grpc::StatusCode::UNAVAILABLE, "kubelet away"));
    }
    if (pods_.erase(request->name()) == 0) {
      return Finish(context, grpc::Status(grpc::StatusCode::NOT_FOUND, "no pod"));
    }
    return Finish(context, grpc::Status::OK);
  }
  void RefuseDeletes(bool refuse) {
    absl::MutexLock lock(&mu_);
    refuse_deletes_ = refuse;
  }
  size_t PodCount() {
    absl::MutexLock lock(&mu_);
    return pods_.size();
  }

 private:
  static grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context,
                                          const grpc::Status& status) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }
  absl::Mutex mu_;
  std::map<std::string, lms::Pod> pods_ ABSL_GUARDED_BY(mu_);
  bool refuse_deletes_ ABSL_GUARDED_BY(mu_) = false;
};

std::unique_ptr<GrpcServer> Serve(grpc::Service* service) {
  GrpcServerOptions options;
  options.service = "test";
  options.insecure = true;
  options.services = {service};
  auto server = GrpcServer::Start(options);
  REQUIRE(server.ok());
  return std::move(*server);
}

std::chrono::system_clock::time_point In(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

TEST_CASE("a plan whose commit fails in one cluster leaves no pod in any cluster") {
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  codef::InMemoryLinkControl links;
  codef::InMemoryCheckpointArchiveStore archives;
  auto scenario = codef::ParseScenario(kScenario, "");
  REQUIRE(scenario.ok());
  auto federation = codef::Federation::Create(*scenario, clock, &links, &archives, nullptr);
  REQUIRE(federation.ok());
  codef::EmulatedLmsService edge_service((*federation)->FindLms("a-edge"));
  auto edge = Serve(&edge_service);
  BrokenLms broken_service;
  auto broken = Serve(&broken_service);

  auto kv = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  auto channels = PeerChannels::Create({.insecure = true});
  REQUIRE(channels.ok());
  prometheus::Registry registry;
  SwmServiceImpl service(*kv, clock, std::move(*channels), nullptr, nullptr, {}, &registry);
  auto swm = Serve(&service);
  auto stub = pb::SwmService::NewStub(
      grpc::CreateChannel(swm->address(), grpc::InsecureChannelCredentials()));

  // Three 1.5-CPU replicas need three 2-CPU nodes: two in a-edge, one in
  // z-broken. a-edge commits first (clusters in name order), then z-broken fails.
  pb::PlaceApplicationRequest request;
  request.set_request_id("rb-1");
  auto* app = request.mutable_application();
  app->mutable_metadata()->set_name("batch");
  auto* s = app->mutable_spec()->add_services();
  s->set_name("worker");
  s->set_image("busybox");
  s->set_replicas(3);
  s->mutable_requests()->set_cpu_millicores(1500);
  s->mutable_requests()->set_memory_bytes(64 << 20);
  auto* a = request.mutable_neighborhood()->add_members();
  a->set_cluster("a-edge");
  (*a->mutable_endpoints())["lms"] = edge->address();
  auto* z = request.mutable_neighborhood()->add_members();
  z->set_cluster("z-broken");
  (*z->mutable_endpoints())["lms"] = broken->address();

  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(30)));
  pb::PlaceApplicationResponse response;
  grpc::Status status = stub->PlaceApplication(&context, request, &response);
  INFO(status.error_message());
  CHECK(status.error_code() == grpc::StatusCode::ABORTED);
  CHECK(absl::StrContains(status.error_message(), "z-broken"));

  auto pods = (*federation)->FindLms("a-edge")->Run([](codef::EmulatedCluster& c) {
    return c.ListPods(lms::ListPodsRequest());
  });
  REQUIRE(pods.ok());
  CHECK(pods->pods_size() == 0);

  PlanStore plans(*kv);
  auto plan = plans.Get("batch", 0);
  REQUIRE(plan.ok());
  CHECK(plan->phase() == pb::PLAN_PHASE_ROLLED_BACK);
  CHECK(plan->targets_size() == 3);
  CHECK(absl::StrContains(plan->error().message(), "z-broken"));
  int rolled_back = 0;
  for (const auto& action : plan->actions()) {
    if (action.result() == pb::ACTION_RESULT_ROLLED_BACK) ++rolled_back;
  }
  CHECK(rolled_back == 2);

  // The same request_id answers the same failure again, placing nothing.
  grpc::ClientContext again;
  again.set_deadline(In(absl::Seconds(30)));
  CHECK(stub->PlaceApplication(&again, request, &response).error_code() ==
        grpc::StatusCode::ABORTED);
  pods = (*federation)->FindLms("a-edge")->Run([](codef::EmulatedCluster& c) {
    return c.ListPods(lms::ListPodsRequest());
  });
  CHECK(pods->pods_size() == 0);

  // Both answers are counted by code.
  double aborted = 0;
  for (const auto& family : registry.Collect()) {
    if (family.name != "codeco_swm_placements_total") continue;
    for (const auto& metric : family.metric) {
      for (const auto& label : metric.label) {
        if (label.name == "code" && label.value == "ABORTED") aborted = metric.counter.value;
      }
    }
  }
  CHECK(aborted == 2);
  swm->Shutdown(absl::Seconds(5));
}

TEST_CASE("a member whose LMS does not answer is left out of the placement") {
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  codef::InMemoryLinkControl links;
  codef::InMemoryCheckpointArchiveStore archives;
  auto scenario = codef::ParseScenario(kScenario, "");
  REQUIRE(scenario.ok());
  auto federation = codef::Federation::Create(*scenario, clock, &links, &archives, nullptr);
  REQUIRE(federation.ok());
  codef::EmulatedLmsService edge_service((*federation)->FindLms("a-edge"));
  auto edge = Serve(&edge_service);
  std::string gone;
  {
    BrokenLms unused;
    gone = Serve(&unused)->address();  // a port nobody listens on any more
  }
  auto kv = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  auto channels = PeerChannels::Create({.insecure = true});
  REQUIRE(channels.ok());
  SwmServiceOptions options;
  options.lms_timeout = absl::Seconds(3);
  SwmServiceImpl service(*kv, clock, std::move(*channels), nullptr, nullptr, options);

  pb::PlaceApplicationRequest request;
  auto* s = request.mutable_application()->mutable_spec();
  s->set_app_name("web");
  auto* svc = s->add_services();
  svc->set_name("front");
  svc->set_replicas(2);
  svc->mutable_requests()->set_cpu_millicores(1500);
  auto* away = request.mutable_neighborhood()->add_members();
  away->set_cluster("away");
  (*away->mutable_endpoints())["lms"] = gone;
  auto* a = request.mutable_neighborhood()->add_members();
  a->set_cluster("a-edge");
  (*a->mutable_endpoints())["lms"] = edge->address();

  auto op = service.Place(request);
  REQUIRE(op.ok());
  pb::AssignmentPlan plan;
  REQUIRE(op->result().UnpackTo(&plan));
  CHECK(plan.phase() == pb::PLAN_PHASE_DONE);
  for (const auto& t : plan.targets()) CHECK(t.cluster() == "a-edge");

  // Three replicas no longer fit, and the answer says which member was missing.
  svc->set_replicas(3);
  s->set_app_name("web2");
  auto refused = service.Place(request);
  CHECK(absl::IsFailedPrecondition(refused.status()));
  CHECK(absl::StrContains(refused.status().message(), "front-"));
  CHECK(absl::StrContains(refused.status().message(), "LMS does not answer: away"));

  // Nobody answers: UNAVAILABLE.
  request.mutable_neighborhood()->mutable_members()->RemoveLast();
  CHECK(absl::IsUnavailable(service.Place(request).status()));
}

TEST_CASE("a removal that cannot delete a pod is stored FAILED and retried") {
  FlakyLms flaky;
  auto lms_server = Serve(&flaky);
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  auto kv = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  auto channels = PeerChannels::Create({.insecure = true});
  REQUIRE(channels.ok());
  SwmServiceImpl service(*kv, clock, std::move(*channels), nullptr, nullptr);

  pb::PlaceApplicationRequest request;
  auto* spec = request.mutable_application()->mutable_spec();
  spec->set_app_name("web");
  auto* svc = spec->add_services();
  svc->set_name("front");
  svc->set_replicas(2);
  svc->mutable_requests()->set_cpu_millicores(500);
  auto* member = request.mutable_neighborhood()->add_members();
  member->set_cluster("f");
  (*member->mutable_endpoints())["lms"] = lms_server->address();
  auto placed = service.Place(request);
  INFO(placed.status().message());
  REQUIRE(placed.ok());
  REQUIRE(flaky.PodCount() == 2);

  flaky.RefuseDeletes(true);
  pb::ReleaseApplicationRequest release;
  release.set_application("web");
  release.set_request_id("rm-1");
  auto failed = service.Release(release);
  CHECK(absl::IsUnavailable(failed.status()));
  CHECK(absl::StrContains(failed.status().message(), "web-front-"));
  PlanStore plans(*kv);
  auto stored = plans.Get("web", 0);
  REQUIRE(stored.ok());
  CHECK(stored->plan_revision() == 2);
  CHECK(stored->phase() == pb::PLAN_PHASE_FAILED);
  CHECK(stored->targets_size() == 2);  // both pods are still there
  for (const auto& a : stored->actions()) CHECK(a.result() == pb::ACTION_RESULT_FAILED);
  // Placing again is refused while pods of the application remain.
  CHECK(absl::IsFailedPrecondition(service.Place(request).status()));

  // The kubelet is back: the same request_id retries and finishes the removal.
  flaky.RefuseDeletes(false);
  auto done = service.Release(release);
  INFO(done.status().message());
  REQUIRE(done.ok());
  CHECK(done->phase() == pb::PLAN_PHASE_DONE);
  CHECK(done->plan_revision() == 3);
  CHECK(done->incumbent_plan_revision() == 1);
  CHECK(done->actions_size() == 2);
  CHECK(done->targets().empty());
  CHECK(flaky.PodCount() == 0);
  auto again = service.Release(release);
  REQUIRE(again.ok());
  CHECK(again->id() == done->id());
  lms_server->Shutdown(absl::Seconds(5));
}

TEST_CASE("a reused node view never overcommits a node") {
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  codef::InMemoryLinkControl links;
  codef::InMemoryCheckpointArchiveStore archives;
  auto scenario = codef::ParseScenario(kScenario, "");
  REQUIRE(scenario.ok());
  auto federation = codef::Federation::Create(*scenario, clock, &links, &archives, nullptr);
  REQUIRE(federation.ok());
  codef::EmulatedLmsService edge_service((*federation)->FindLms("a-edge"));
  auto edge = Serve(&edge_service);
  auto lms_stub = lms::LmsService::NewStub(
      grpc::CreateChannel(edge->address(), grpc::InsecureChannelCredentials()));
  auto kv = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  auto channels = PeerChannels::Create({.insecure = true});
  REQUIRE(channels.ok());
  SwmServiceOptions options;
  options.node_view_ttl = absl::Minutes(1);
  SwmServiceImpl service(*kv, clock, std::move(*channels), nullptr, nullptr, options);

  auto app = [&](const std::string& name, bool dry_run) {
    pb::PlaceApplicationRequest request;
    request.set_dry_run(dry_run);
    auto* spec = request.mutable_application()->mutable_spec();
    spec->set_app_name(name);
    auto* svc = spec->add_services();
    svc->set_name("w");
    svc->mutable_requests()->set_cpu_millicores(1500);
    auto* member = request.mutable_neighborhood()->add_members();
    member->set_cluster("a-edge");
    (*member->mutable_endpoints())["lms"] = edge->address();
    return request;
  };
  auto pod_count = [&] {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    lms::ListPodsResponse response;
    REQUIRE(lms_stub->ListPods(&context, {}, &response).ok());
    return response.pods_size();
  };

  // The first placement takes one of the two 2-CPU nodes; its cluster's view
  // is dropped after the plan, so a dry run reads (and keeps) the new state.
  REQUIRE(service.Place(app("first", false)).ok());
  REQUIRE(service.Place(app("probe", true)).ok());
  // Someone else fills the other node behind the hub's back.
  std::string free_node;
  {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    lms::ListPodsResponse pods;
    REQUIRE(lms_stub->ListPods(&context, {}, &pods).ok());
    REQUIRE(pods.pods_size() == 1);
    grpc::ClientContext nodes_context;
    nodes_context.set_deadline(In(absl::Seconds(10)));
    lms::ListNodesResponse nodes;
    REQUIRE(lms_stub->ListNodes(&nodes_context, {}, &nodes).ok());
    for (const auto& n : nodes.nodes()) {
      if (n.name() != pods.pods(0).node_name()) free_node = n.name();
    }
  }
  REQUIRE(!free_node.empty());
  lms::CreatePodRequest other;
  other.mutable_pod()->set_name("someone-else");
  other.mutable_pod()->set_node_name(free_node);
  auto* c = other.mutable_pod()->add_containers();
  c->set_name("main");
  c->mutable_requests()->set_cpu_millicores(1500);
  grpc::ClientContext create_context;
  create_context.set_deadline(In(absl::Seconds(10)));
  lms::CreatePodResponse created;
  REQUIRE(lms_stub->CreatePod(&create_context, other, &created).ok());
  REQUIRE(pod_count() == 2);

  // The hub's view is stale: it plans onto the filled node, the cluster's
  // reservation check refuses, the plan is rolled back and nothing is added.
  auto stale = service.Place(app("second", false));
  INFO(stale.status().message());
  CHECK(absl::IsAborted(stale.status()));
  CHECK(pod_count() == 2);
  // Read again (that cluster's view was dropped): no room, said as such.
  auto fresh = service.Place(app("third", false));
  CHECK(absl::IsFailedPrecondition(fresh.status()));
  CHECK(pod_count() == 2);
}

TEST_CASE("a starting hub deletes pods labelled with a plan it does not hold") {
  SimulatedClock clock(absl::FromUnixSeconds(1'800'000'000));
  codef::InMemoryLinkControl links;
  codef::InMemoryCheckpointArchiveStore archives;
  auto scenario = codef::ParseScenario(kScenario, "");
  REQUIRE(scenario.ok());
  auto federation = codef::Federation::Create(*scenario, clock, &links, &archives, nullptr);
  REQUIRE(federation.ok());
  codef::SynchronizedCluster* edge_lms = (*federation)->FindLms("a-edge");
  codef::EmulatedLmsService edge_service(edge_lms);
  auto edge = Serve(&edge_service);
  auto kv = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});

  pb::PlaceApplicationRequest request;
  auto* app = request.mutable_application();
  app->mutable_metadata()->set_name("web");
  auto* s = app->mutable_spec()->add_services();
  s->set_name("front");
  s->set_image("busybox");
  s->mutable_requests()->set_cpu_millicores(500);
  auto* member = request.mutable_neighborhood()->add_members();
  member->set_cluster("a-edge");
  (*member->mutable_endpoints())["lms"] = edge->address();
  {
    auto channels = PeerChannels::Create({.insecure = true});
    REQUIRE(channels.ok());
    SwmServiceImpl hub(*kv, clock, std::move(*channels), nullptr, nullptr);
    auto placed = hub.Place(request);
    INFO(placed.status());
    REQUIRE(placed.ok());
  }
  // Meanwhile pods appear that no stored plan accounts for: one labelled
  // with a plan and reservation (a hub that lost its store, a plan whose
  // removal never reached the cluster) and one the hub never labels.
  std::string node;
  edge_lms->Run([&](codef::EmulatedCluster& c) {
    c.VisitNodes([&](const lms::Node& n) { node = n.name(); });
    return 0;
  });
  for (std::string name : {"ghost-front-0", "someone-elses"}) {
    lms::Pod pod;
    pod.set_name(name);
    pod.set_node_name(node);
    auto* c = pod.add_containers();
    c->set_name("main");
    c->mutable_requests()->set_cpu_millicores(100);
    if (name == "ghost-front-0") {
      (*pod.mutable_labels())["codeco.io/plan"] = "ghost.1";
      (*pod.mutable_labels())["codeco.io/reservation"] = "ghost.1.a-edge";
    }
    auto created = edge_lms->Run(
        [&](codef::EmulatedCluster& cluster) { return cluster.CreatePod(pod, name); });
    REQUIRE(created.ok());
  }
  auto pod_names = [&] {
    std::set<std::string> names;
    edge_lms->Run([&](codef::EmulatedCluster& c) {
      c.VisitPods([&](const lms::Pod& p) { names.insert(p.name()); });
      return 0;
    });
    return names;
  };
  REQUIRE(pod_names().size() == 3);

  // A hub starting on the same store reconciles once at start (the next
  // round is an hour away): the stray labelled pod goes, the others stay.
  auto channels = PeerChannels::Create({.insecure = true});
  REQUIRE(channels.ok());
  SwmServiceOptions options;
  options.reconcile_interval = absl::Hours(1);
  SwmServiceImpl hub(*kv, clock, std::move(*channels), nullptr, nullptr, options);
  hub.DrainForTest();
  CHECK(pod_names() == std::set<std::string>{"web-front-0", "someone-elses"});
}

}  // namespace
}  // namespace codeco::swm
