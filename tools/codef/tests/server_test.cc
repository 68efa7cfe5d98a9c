// The LMS and control services over real gRPC on loopback, on a small
// federation driven by a SimulatedClock: errors map to the right codes with
// field paths, watches stream in version order, and faults show through the
// LMS of the cluster they hit.
#include "codeco/common/server.h"

#include <catch2/catch.hpp>

#include "cluster_metrics.h"
#include "codeco/codef/v1/codef_service.grpc.pb.h"
#include "codeco/common/clock.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "codef_service.h"
#include "federation.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "lms_contract.h"
#include "lms_service.h"
#include "prometheus/text_serializer.h"

namespace codeco::codef {
namespace {

using codeco::lms::v1::LmsService;

constexpr char kScenario[] = R"(
name: small
federation:
  hub: {name: hub}
  clusters:
    - name: edge-a
      labels: {tier: edge, country: FR}
      pod_start_delay: 1s
      nodes: [{name: n, count: 2, capacity: {cpu: 2, memory: 4Gi},
               energy: {idle_watts: 50, max_watts: 150}}]
    - name: cloud-b
      labels: {tier: cloud}
      nodes: [{name: big, capacity: {cpu: 16, memory: 64Gi}}]
links:
  matrix:
    - {between: [hub, edge-a], rtt: 10ms}
    - {between: [hub, cloud-b], rtt: 30ms, bandwidth: 1Gbps}
    - {between: [edge-a, cloud-b], rtt: 24ms, loss: 1%}
)";

std::chrono::system_clock::time_point In(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

codeco::lms::v1::Pod MakePod(const std::string& name, const std::string& node, int64_t cpu) {
  codeco::lms::v1::Pod pod;
  pod.set_name(name);
  pod.set_node_name(node);
  auto* c = pod.add_containers();
  c->set_name("main");
  c->mutable_requests()->set_cpu_millicores(cpu);
  c->mutable_requests()->set_memory_bytes(1 << 20);
  return pod;
}

struct Harness {
  Harness() : clock(absl::FromUnixSeconds(1'800'000'000)) {
    auto scenario = ParseScenario(kScenario, "");
    REQUIRE(scenario.ok());
    auto created = Federation::Create(*scenario, clock, &links, &archives, nullptr);
    REQUIRE(created.ok());
    federation = std::move(*created);
    for (std::string name : {"edge-a", "cloud-b"}) {
      lms_services.push_back(std::make_unique<EmulatedLmsService>(federation->FindLms(name)));
      GrpcServerOptions options;
      options.service = "codef-lms";
      options.insecure = true;
      options.services = {lms_services.back().get()};
      auto server = GrpcServer::Start(options);
      REQUIRE(server.ok());
      federation->SetEndpoints(name, (*server)->address(), "");
      stubs[name] = LmsService::NewStub(
          grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
      servers.push_back(std::move(*server));
    }
    control = std::make_unique<CodefControlService>(federation.get());
    GrpcServerOptions options;
    options.service = "codef";
    options.insecure = true;
    options.services = {control.get()};
    auto server = GrpcServer::Start(options);
    REQUIRE(server.ok());
    control_stub = codeco::codef::v1::CodefService::NewStub(
        grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
    servers.push_back(std::move(*server));
  }

  std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(In(absl::Seconds(10)));
    return context;
  }

  grpc::Status CreatePod(const std::string& cluster, const codeco::lms::v1::Pod& pod,
                         codeco::lms::v1::CreatePodResponse* response) {
    codeco::lms::v1::CreatePodRequest request;
    *request.mutable_pod() = pod;
    return stubs[cluster]->CreatePod(Context().get(), request, response);
  }

  codeco::lms::v1::Pod GetPod(const std::string& cluster, const std::string& name) {
    codeco::lms::v1::GetPodRequest request;
    request.set_name(name);
    codeco::lms::v1::GetPodResponse response;
    REQUIRE(stubs[cluster]->GetPod(Context().get(), request, &response).ok());
    return response.pod();
  }

  SimulatedClock clock;
  InMemoryLinkControl links;
  InMemoryCheckpointArchiveStore archives;
  std::unique_ptr<Federation> federation;
  std::vector<std::unique_ptr<EmulatedLmsService>> lms_services;
  std::unique_ptr<CodefControlService> control;
  std::vector<std::unique_ptr<GrpcServer>> servers;
  std::map<std::string, std::unique_ptr<LmsService::Stub>> stubs;
  std::unique_ptr<codeco::codef::v1::CodefService::Stub> control_stub;
};

TEST_CASE("CODEF's emulated LMS passes the LMS contract") {
  // The same check the Kubernetes adapter passes (services/kubelms/tests).
  Harness h;
  codeco::testing::CheckLmsContract(
      {.stub = h.stubs["edge-a"].get(), .node = "n-1", .advance = [&h] {
         h.clock.Advance(absl::Milliseconds(100));
         // Any call moves the emulated cluster to the clock's time.
         codeco::lms::v1::ListNodesResponse nodes;
         (void)h.stubs["edge-a"]->ListNodes(h.Context().get(), {}, &nodes);
       }});
}

TEST_CASE("LmsService lists nodes and maps core errors to gRPC codes") {
  Harness h;
  codeco::lms::v1::ListNodesResponse nodes;
  REQUIRE(h.stubs["edge-a"]->ListNodes(h.Context().get(), {}, &nodes).ok());
  REQUIRE(nodes.nodes_size() == 2);
  REQUIRE(nodes.nodes(0).name() == "n-1");
  REQUIRE(nodes.nodes(0).capacity().cpu_millicores() == 2000);
  REQUIRE(nodes.nodes(0).labels().at("codeco.io/tier") == "edge");
  REQUIRE(nodes.nodes(0).energy_watts() == 50);

  codeco::lms::v1::CreatePodResponse created;
  REQUIRE(h.CreatePod("edge-a", MakePod("web", "n-1", 1500), &created).ok());
  REQUIRE(created.pod().phase() == codeco::lms::v1::POD_PHASE_PENDING);
  grpc::Status full = h.CreatePod("edge-a", MakePod("db", "n-1", 1000), &created);
  REQUIRE(full.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  REQUIRE(full.error_message().find("lacks cpu") != std::string::npos);
  grpc::Status bad = h.CreatePod("edge-a", MakePod("db", "", 1000), &created);
  REQUIRE(bad.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  REQUIRE(bad.error_message().rfind("pod.node_name: ", 0) == 0);
  codeco::lms::v1::GetPodRequest missing;
  missing.set_name("nope");
  codeco::lms::v1::GetPodResponse got;
  REQUIRE(h.stubs["edge-a"]->GetPod(h.Context().get(), missing, &got).error_code() ==
          grpc::StatusCode::NOT_FOUND);
  // Pods are per cluster.
  REQUIRE(h.stubs["cloud-b"]->GetPod(h.Context().get(), missing, &got).error_code() ==
          grpc::StatusCode::NOT_FOUND);

  h.clock.Advance(absl::Seconds(1));
  REQUIRE(h.GetPod("edge-a", "web").phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  codeco::lms::v1::GetNodeUsageRequest usage_request;
  usage_request.set_node("n-1");
  codeco::lms::v1::GetNodeUsageResponse usage;
  REQUIRE(h.stubs["edge-a"]->GetNodeUsage(h.Context().get(), usage_request, &usage).ok());
  REQUIRE(usage.usage().usage().cpu_millicores() == 1500);
  REQUIRE(usage.usage().energy_watts() == Approx(50 + 100 * 0.75));
}

TEST_CASE("WatchPods streams the initial state then changes in version order") {
  Harness h;
  codeco::lms::v1::CreatePodResponse created;
  REQUIRE(h.CreatePod("edge-a", MakePod("first", "n-1", 100), &created).ok());

  auto context = h.Context();
  codeco::lms::v1::WatchPodsRequest request;
  auto reader = h.stubs["edge-a"]->WatchPods(context.get(), request);
  codeco::lms::v1::WatchPodsResponse event;
  REQUIRE(reader->Read(&event));
  REQUIRE(event.type() == codeco::common::v1::WATCH_EVENT_TYPE_ADDED);
  REQUIRE(event.pod().name() == "first");

  REQUIRE(h.CreatePod("edge-a", MakePod("second", "n-2", 100), &created).ok());
  h.clock.Advance(absl::Seconds(1));
  h.GetPod("edge-a", "first");  // any call moves the cluster to the clock's time
  std::vector<std::pair<std::string, codeco::lms::v1::PodPhase>> seen;
  int64_t last_version = std::stoll(event.resource_version());
  for (int i = 0; i < 3; ++i) {
    REQUIRE(reader->Read(&event));
    int64_t version = std::stoll(event.resource_version());
    REQUIRE(version > last_version);
    last_version = version;
    seen.emplace_back(event.pod().name(), event.pod().phase());
  }
  REQUIRE(seen[0] == std::make_pair(std::string("second"), codeco::lms::v1::POD_PHASE_PENDING));
  REQUIRE(seen[1] == std::make_pair(std::string("first"), codeco::lms::v1::POD_PHASE_RUNNING));
  REQUIRE(seen[2] == std::make_pair(std::string("second"), codeco::lms::v1::POD_PHASE_RUNNING));
  context->TryCancel();
  while (reader->Read(&event)) {
  }
  REQUIRE(reader->Finish().error_code() == grpc::StatusCode::CANCELLED);

  // A bad version is refused with its field.
  auto bad_context = h.Context();
  request.set_resource_version("yesterday");
  auto bad = h.stubs["edge-a"]->WatchPods(bad_context.get(), request);
  REQUIRE_FALSE(bad->Read(&event));
  grpc::Status status = bad->Finish();
  REQUIRE(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  REQUIRE(status.error_message().rfind("resource_version: ", 0) == 0);
}

TEST_CASE("WatchNodes resumes from a list version and reports requests and readiness") {
  Harness h;
  codeco::lms::v1::ListNodesResponse nodes;
  REQUIRE(h.stubs["edge-a"]->ListNodes(h.Context().get(), {}, &nodes).ok());
  auto context = h.Context();
  codeco::lms::v1::WatchNodesRequest request;
  request.set_resource_version(nodes.resource_version());
  auto reader = h.stubs["edge-a"]->WatchNodes(context.get(), request);
  codeco::lms::v1::CreatePodResponse created;
  REQUIRE(h.CreatePod("edge-a", MakePod("web", "n-2", 700), &created).ok());
  codeco::codef::v1::FailNodeRequest fail;
  fail.set_cluster("edge-a");
  fail.set_node("n-1");
  codeco::codef::v1::FailNodeResponse failed;
  REQUIRE(h.control_stub->FailNode(h.Context().get(), fail, &failed).ok());
  codeco::lms::v1::WatchNodesResponse event;
  REQUIRE(reader->Read(&event));
  REQUIRE(event.type() == codeco::common::v1::WATCH_EVENT_TYPE_MODIFIED);
  REQUIRE(event.node().name() == "n-2");
  REQUIRE(event.node().requested().cpu_millicores() == 700);
  REQUIRE(std::stoll(event.resource_version()) > std::stoll(nodes.resource_version()));
  REQUIRE(reader->Read(&event));
  REQUIRE(event.node().name() == "n-1");
  REQUIRE(event.node().condition() == codeco::lms::v1::NODE_CONDITION_NOT_READY);
  context->TryCancel();
  while (reader->Read(&event)) {
  }
  reader->Finish();
}

TEST_CASE("CodefService injects faults that the LMS and links reflect") {
  Harness h;
  codeco::codef::v1::ListClustersResponse clusters;
  REQUIRE(h.control_stub->ListClusters(h.Context().get(), {}, &clusters).ok());
  REQUIRE(clusters.clusters_size() == 3);
  REQUIRE(clusters.clusters(0).name() == "hub");
  REQUIRE(clusters.clusters(0).hub());
  REQUIRE(clusters.clusters(0).service_ip() == "127.0.1.1");
  REQUIRE(clusters.clusters(0).lms_endpoint().empty());
  REQUIRE(clusters.clusters(1).service_ip() == "127.0.2.1");
  REQUIRE(clusters.clusters(2).service_ip() == "127.0.3.1");
  REQUIRE_FALSE(clusters.clusters(1).lms_endpoint().empty());
  REQUIRE(clusters.clusters(1).node_count() == 2);

  // Links: the matrix (RTT halved), and the default "no link" is a cut.
  codeco::codef::v1::GetLinkConditionsRequest get;
  get.set_from_cluster("edge-a");
  get.set_to_cluster("cloud-b");
  codeco::codef::v1::GetLinkConditionsResponse link;
  REQUIRE(h.control_stub->GetLinkConditions(h.Context().get(), get, &link).ok());
  REQUIRE(link.conditions().one_way_latency_ns() == 12'000'000);
  REQUIRE(link.conditions().loss_ratio() == Approx(0.01));
  codeco::codef::v1::SetLinkConditionsRequest set;
  set.set_from_cluster("edge-a");
  set.set_to_cluster("cloud-b");
  set.mutable_conditions()->set_one_way_latency_ns(40'000'000);
  set.set_symmetric(true);
  codeco::codef::v1::SetLinkConditionsResponse set_response;
  REQUIRE(h.control_stub->SetLinkConditions(h.Context().get(), set, &set_response).ok());
  REQUIRE(h.links.GetLink("cloud-b", "edge-a")->one_way_latency_ns == 40'000'000);
  set.mutable_conditions()->set_loss_ratio(2);
  grpc::Status bad_loss = h.control_stub->SetLinkConditions(h.Context().get(), set, &set_response);
  REQUIRE(bad_loss.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  REQUIRE(bad_loss.error_message().rfind("conditions.loss_ratio: ", 0) == 0);
  codeco::codef::v1::ResetLinkConditionsRequest reset;
  reset.set_from_cluster("cloud-b");
  reset.set_to_cluster("edge-a");
  codeco::codef::v1::ResetLinkConditionsResponse reset_response;
  REQUIRE(h.control_stub->ResetLinkConditions(h.Context().get(), reset, &reset_response).ok());
  REQUIRE(reset_response.conditions().one_way_latency_ns() == 12'000'000);

  // Partition and hub cut show in ListClusters and on the links.
  codeco::codef::v1::PartitionClusterRequest partition;
  partition.set_cluster("cloud-b");
  codeco::codef::v1::PartitionClusterResponse partitioned;
  REQUIRE(h.control_stub->PartitionCluster(h.Context().get(), partition, &partitioned).ok());
  REQUIRE(h.links.GetLink("hub", "cloud-b")->cut);
  REQUIRE_FALSE(h.links.GetLink("hub", "edge-a")->cut);
  codeco::codef::v1::CutHubResponse cut;
  REQUIRE(h.control_stub->CutHub(h.Context().get(), {}, &cut).ok());
  REQUIRE(h.links.GetLink("edge-a", "hub")->cut);
  clusters.Clear();
  REQUIRE(h.control_stub->ListClusters(h.Context().get(), {}, &clusters).ok());
  REQUIRE(clusters.clusters(0).partitioned());
  REQUIRE(clusters.clusters(2).partitioned());
  REQUIRE_FALSE(clusters.clusters(1).partitioned());
  codeco::codef::v1::HealHubResponse healed;
  REQUIRE(h.control_stub->HealHub(h.Context().get(), {}, &healed).ok());
  REQUIRE_FALSE(h.links.GetLink("edge-a", "hub")->cut);
  partition.set_cluster("hub");
  REQUIRE(
      h.control_stub->PartitionCluster(h.Context().get(), partition, &partitioned).error_code() ==
      grpc::StatusCode::INVALID_ARGUMENT);
  partition.set_cluster("mars");
  REQUIRE(
      h.control_stub->PartitionCluster(h.Context().get(), partition, &partitioned).error_code() ==
      grpc::StatusCode::NOT_FOUND);

  // A failed node fails its pods, as the LMS shows.
  codeco::lms::v1::CreatePodResponse created;
  REQUIRE(h.CreatePod("edge-a", MakePod("web", "n-2", 500), &created).ok());
  codeco::codef::v1::FailNodeRequest fail;
  fail.set_cluster("edge-a");
  fail.set_node("n-2");
  codeco::codef::v1::FailNodeResponse failed;
  REQUIRE(h.control_stub->FailNode(h.Context().get(), fail, &failed).ok());
  REQUIRE(failed.failed_pod_count() == 1);
  REQUIRE(h.GetPod("edge-a", "web").phase() == codeco::lms::v1::POD_PHASE_FAILED);
  codeco::codef::v1::RecoverNodeRequest recover;
  recover.set_cluster("edge-a");
  recover.set_node("n-2");
  codeco::codef::v1::RecoverNodeResponse recovered;
  REQUIRE(h.control_stub->RecoverNode(h.Context().get(), recover, &recovered).ok());
  codeco::codef::v1::ListClustersResponse after;
  REQUIRE(h.control_stub->ListClusters(h.Context().get(), {}, &after).ok());
  REQUIRE(after.clusters(1).ready_node_count() == 2);

  // Load: a pod profile and a cluster-wide surge.
  REQUIRE(h.CreatePod("cloud-b", MakePod("batch", "big", 1000), &created).ok());
  h.clock.Advance(absl::Seconds(1));
  codeco::codef::v1::SetPodLoadRequest load;
  load.set_cluster("cloud-b");
  load.set_pod("batch");
  load.set_usage_profile("{type: constant, cpu: 4}");
  codeco::codef::v1::SetPodLoadResponse load_response;
  REQUIRE(h.control_stub->SetPodLoad(h.Context().get(), load, &load_response).ok());
  codeco::codef::v1::SetClusterLoadRequest surge;
  surge.set_cluster("cloud-b");
  surge.set_load_factor(2);
  codeco::codef::v1::SetClusterLoadResponse surge_response;
  REQUIRE(h.control_stub->SetClusterLoad(h.Context().get(), surge, &surge_response).ok());
  codeco::lms::v1::GetNodeUsageRequest usage_request;
  usage_request.set_node("big");
  codeco::lms::v1::GetNodeUsageResponse usage;
  REQUIRE(h.stubs["cloud-b"]->GetNodeUsage(h.Context().get(), usage_request, &usage).ok());
  REQUIRE(usage.usage().usage().cpu_millicores() == 8000);
  load.set_usage_profile("{type: sawtooth}");
  grpc::Status bad_profile = h.control_stub->SetPodLoad(h.Context().get(), load, &load_response);
  REQUIRE(bad_profile.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  REQUIRE(bad_profile.error_message().rfind("usage_profile.type: ", 0) == 0);
}

TEST_CASE("SetNodeLoad makes a load step that the LMS and the metrics show") {
  Harness h;
  h.federation->SetMetricsEndpoint("edge-a", "127.0.2.1:7401");
  codeco::codef::v1::ListClustersResponse clusters;
  REQUIRE(h.control_stub->ListClusters(h.Context().get(), {}, &clusters).ok());
  REQUIRE(clusters.clusters(1).metrics_endpoint() == "127.0.2.1:7401");
  REQUIRE(clusters.clusters(2).metrics_endpoint().empty());

  ClusterMetricsCollector collector(h.federation->FindLms("edge-a"));
  auto idle_of = [&](const std::vector<prometheus::MetricFamily>& families) {
    double idle = 0;
    for (const auto& family : families) {
      if (family.name != "node_cpu_seconds_total") continue;
      REQUIRE(family.type == prometheus::MetricType::Counter);
      for (const auto& metric : family.metric) {
        std::map<std::string, std::string> labels;
        for (const auto& label : metric.label) labels[label.name] = label.value;
        if (labels["node"] == "n-1" && labels["mode"] == "idle") idle += metric.counter.value;
      }
    }
    return idle;
  };
  double idle_before = idle_of(collector.Collect());

  codeco::codef::v1::SetNodeLoadRequest request;
  request.set_cluster("edge-a");
  request.set_node("n-1");
  request.set_cpu_fraction(0.9);
  request.set_memory_bytes(1 << 30);
  codeco::codef::v1::SetNodeLoadResponse response;
  grpc::Status status = h.control_stub->SetNodeLoad(h.Context().get(), request, &response);
  INFO(status.error_message());
  REQUIRE(status.ok());
  REQUIRE(response.cpu_millicores() == 1800);
  REQUIRE(response.memory_bytes() == 1 << 30);
  REQUIRE(response.cpu_capacity_millicores() == 2000);
  codeco::lms::v1::GetNodeUsageRequest usage_request;
  usage_request.set_node("n-1");
  codeco::lms::v1::GetNodeUsageResponse usage;
  REQUIRE(h.stubs["edge-a"]->GetNodeUsage(h.Context().get(), usage_request, &usage).ok());
  REQUIRE(usage.usage().usage().cpu_millicores() == 1800);
  REQUIRE(usage.usage().energy_watts() == Approx(50 + 100 * 0.9));

  // Each scrape advances the cluster: 10 s at 90 % busy leaves 2 s of idle
  // time over its 2 CPUs.
  h.clock.Advance(absl::Seconds(10));
  std::vector<prometheus::MetricFamily> families = collector.Collect();
  REQUIRE(idle_of(families) - idle_before == Approx(2));
  std::string text = prometheus::TextSerializer().Serialize(families);
  REQUIRE_THAT(text, Catch::Contains("# TYPE node_cpu_seconds_total counter"));
  REQUIRE_THAT(text,
               Catch::Contains("node_memory_MemAvailable_bytes{cluster=\"edge-a\",node=\"n-1\","
                               "instance=\"n-1\"} 3221225472"));
  REQUIRE_THAT(text, Catch::Contains("kube_node_status_condition{cluster=\"edge-a\",node=\"n-1\","
                                     "condition=\"Ready\",status=\"true\"} 1"));

  // Only what is given changes; bad values name their field.
  codeco::codef::v1::SetNodeLoadRequest memory_only;
  memory_only.set_cluster("edge-a");
  memory_only.set_node("n-1");
  memory_only.set_memory_bytes(0);
  REQUIRE(h.control_stub->SetNodeLoad(h.Context().get(), memory_only, &response).ok());
  REQUIRE(response.cpu_millicores() == 1800);
  REQUIRE(response.memory_bytes() == 0);
  request.set_cpu_millicores(5000);
  status = h.control_stub->SetNodeLoad(h.Context().get(), request, &response);
  REQUIRE(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  REQUIRE(status.error_message().rfind("cpu_millicores: ", 0) == 0);
  request.set_node("n-9");
  REQUIRE(h.control_stub->SetNodeLoad(h.Context().get(), request, &response).error_code() ==
          grpc::StatusCode::NOT_FOUND);
  request.set_cluster("hub");
  REQUIRE(h.control_stub->SetNodeLoad(h.Context().get(), request, &response).error_code() ==
          grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_CASE("the fault timeline applies faults when they are due") {
  constexpr char kTimeline[] = R"(
name: timeline
federation:
  hub: {name: hub}
  clusters:
    - name: a
      nodes: [{name: n, capacity: {cpu: 1, memory: 1Gi}}]
links:
  default: {rtt: 20ms}
faults:
  - {at: 10s, action: node_fail, node: a/n}
  - {at: 20s, action: link_degrade, between: [hub, a], rtt: 100ms}
  - {at: 30s, action: load_surge, cluster: a, factor: 2, duration: 5s}
  - {at: 40s, action: link_heal, between: [hub, a]}
  - {at: 60s, action: node_load, node: a/n, cpu: 50%, duration: 5s}
)";
  SimulatedClock clock(absl::FromUnixSeconds(1000));
  InMemoryLinkControl links;
  InMemoryCheckpointArchiveStore archives;
  auto scenario = ParseScenario(kTimeline, "");
  REQUIRE(scenario.ok());
  auto federation = Federation::Create(*scenario, clock, &links, &archives, nullptr);
  REQUIRE(federation.ok());
  (*federation)->StartTimeline(clock.Now());
  REQUIRE((*federation)->Tick().empty());
  clock.Advance(absl::Seconds(10));
  auto applied = (*federation)->Tick();
  REQUIRE(applied.size() == 1);
  REQUIRE(applied[0] == "at 10s: node_fail a/n: ok");
  auto* lms = (*federation)->FindLms("a");
  REQUIRE(lms->Run([](EmulatedCluster& c) { return c.NodeCounts(); }) == std::make_pair(1, 0));
  clock.Advance(absl::Seconds(10));
  REQUIRE((*federation)->Tick().size() == 1);
  REQUIRE(links.GetLink("a", "hub")->one_way_latency_ns == 50'000'000);
  clock.Advance(absl::Seconds(30));  // surge starts and ends, link heals
  auto later = (*federation)->Tick();
  REQUIRE(later.size() == 3);
  REQUIRE(links.GetLink("a", "hub")->one_way_latency_ns == 10'000'000);
  REQUIRE((*federation)->RecoverNode("a", "n").ok());
  auto cpu = [&] {
    return lms->Run(
        [](EmulatedCluster& c) { return c.GetNodeUsage("n")->usage().cpu_millicores(); });
  };
  clock.Advance(absl::Seconds(10));  // the node load step
  auto step = (*federation)->Tick();
  REQUIRE(step.size() == 1);
  REQUIRE(step[0] == "at 60s: node_load a/n: ok");
  REQUIRE(cpu() == 500);
  clock.Advance(absl::Seconds(5));
  auto over = (*federation)->Tick();
  REQUIRE(over.size() == 1);
  REQUIRE(over[0] == "node_load over a/n: ok");
  REQUIRE(cpu() == 0);
}

}  // namespace
}  // namespace codeco::codef
