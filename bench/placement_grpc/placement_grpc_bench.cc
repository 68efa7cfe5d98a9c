// Placement latency through gRPC on loopback (issue #5, Speed): p50/p90/p99 of
// placing a 20-workload, 10-channel application over a 100-cluster
// neighborhood (10 nodes each), measured
//   - in process: the Coordinator on the federation the hub reads;
//   - the production path with default settings: every member behind its
//     own MC SWM, the hub planning on its watched copy of each member's view
//     (WatchClusterView, used once it counts the hub's own last change
//     there), SolveCluster over gRPC, the links read once per placement;
//   - through the hub's PlaceApplication (dry run) on a real gRPC server bound
//     to 127.0.0.1, which reads every member's nodes and pods from its LMS and
//     the links from the CODEF control API, then solves;
//   - the federation read alone (what the hub asks the LMS and CODEF per call).
// The clusters are CODEF's emulated LMS (codeco.lms.v1) and control API
// (codeco.codef.v1), hosted in this process, each on its own loopback server.
//
//   placement_grpc_bench [--quick] [--section=latency|exact|all]
//
// A second section measures the cost of CBC as the L2 strategy of small
// clusters (milp/exact_l2.h) against the heuristic, in process.
//
// Wall-clock time is read here (a benchmark, not the core). Prints a summary
// table with Karmada's reported figures for comparison.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"
#include "codeco/common/logging.h"
#include "codeco/common/peer_channels.h"
#include "codeco/common/server.h"
#include "codef_service.h"
#include "emulated_cluster.h"
#include "federation.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "emulated_links.h"
#include "link_control.h"
#include "lms_service.h"
#include "scenario.h"
#include "swm/core/solve.h"
#include "swm/lms/lms_pod_runtime.h"
#include "swm/milp/exact_l2.h"
#include "swm/milp/milp.h"
#include "swm/server/cluster_reservations.h"
#include "swm/server/cluster_service.h"
#include "swm/server/codef_directory.h"
#include "swm/core/convert.h"
#include "swm/server/plan_store.h"
#include "swm/server/swm_service.h"
#include "swm/testing/instances.h"

namespace codeco::swm {
namespace {

namespace pb = codeco::swm::v1;
namespace acm = codeco::acm::v1;

constexpr int64_t kMs = 1'000'000;
constexpr int kClusters = 100;
constexpr int kNodes = 10;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// A CODEF scenario of `kClusters` clusters of `kNodes` nodes (8, 12 or 16
// CPUs) and about ten symmetric links per cluster, 2-40 ms RTT, 10 Gbit/s.
std::string ScenarioYaml(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string yaml = "name: grpc-bench\nfederation:\n  hub: {name: hub}\n  clusters:\n";
  const int cpus[] = {8, 12, 16};
  for (int c = 0; c < kClusters; ++c) {
    int cpu = cpus[std::uniform_int_distribution<int>(0, 2)(rng)];
    absl::StrAppend(&yaml, "    - name: c", c,
                    "\n      labels: {region: eu, country: FR, tier: edge}\n",
                    "      nodes: [{name: n, count: ", kNodes, ", capacity: {cpu: ", cpu,
                    ", memory: 64Gi}}]\n");
  }
  absl::StrAppend(&yaml, "links:\n  symmetric: true\n  matrix:\n");
  std::set<std::pair<int, int>> seen;
  for (int c = 0; c < kClusters; ++c) {
    for (int k = 0; k < 5; ++k) {
      int d = std::uniform_int_distribution<int>(0, kClusters - 1)(rng);
      if (d == c || !seen.insert({std::min(c, d), std::max(c, d)}).second) continue;
      absl::StrAppend(&yaml, "    - {between: [c", c, ", c", d,
                      "], rtt: ", 2 * std::uniform_int_distribution<int>(1, 20)(rng),
                      "ms, bandwidth: 10Gbps}\n");
    }
  }
  return yaml;
}

// The seeded 20-workload, 10-channel application of placement_bench's speed
// section, as the acm.v1.Application ACM would send (one service per workload).
acm::Application BenchApplication(uint64_t seed) {
  testing::InstanceOptions o{.clusters = 1,
                             .workloads = 20,
                             .channels = 10,
                             .max_cpu_request = 2000,
                             .max_memory_request = int64_t{2} << 30,
                             .max_channel_bandwidth_bps = 50'000'000,
                             .min_channel_delay_ns = 5 * kMs,
                             .max_channel_delay_ns = 40 * kMs};
  Application core = testing::RandomInstance(seed, o).app;
  acm::Application app;
  app.mutable_metadata()->set_name(absl::StrCat("bench-", seed));
  acm::ApplicationSpec* spec = app.mutable_spec();
  spec->set_app_name(app.metadata().name());
  std::map<std::string, acm::ServiceSpec*> services;
  for (const Workload& w : core.workloads) {
    acm::ServiceSpec* s = spec->add_services();
    s->set_name(w.name);
    s->set_image("busybox");
    s->set_replicas(1);
    s->mutable_requests()->set_cpu_millicores(w.requests.cpu_millis);
    s->mutable_requests()->set_memory_bytes(w.requests.memory_bytes);
    services[w.name] = s;
  }
  for (const Channel& ch : core.channels) {
    acm::Channel* c = services.at(ch.from)->add_channels();
    c->set_name(ch.name);
    c->set_from_service(ch.from);
    c->set_to_service(ch.to);
    c->set_max_delay_ns(ch.max_delay_ns);
    c->set_min_bandwidth_bps(ch.min_bandwidth_bps);
    c->set_service_class(ch.service_class == ServiceClass::kAssured
                             ? codeco::common::v1::SERVICE_CLASS_ASSURED
                             : codeco::common::v1::SERVICE_CLASS_BESTEFFORT);
  }
  return app;
}

std::unique_ptr<GrpcServer> Serve(grpc::Service* service, const std::string& name) {
  GrpcServerOptions options;
  options.service = name;
  options.insecure = true;
  options.services = {service};
  auto server = GrpcServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "cannot start %s: %s\n", name.c_str(),
                 std::string(server.status().message()).c_str());
    std::exit(1);
  }
  return std::move(*server);
}

// The emulated federation, its LMS and control API, each on 127.0.0.1.
struct Testbed {
  Testbed() {
    auto scenario = codef::ParseScenario(ScenarioYaml(5), "");
    if (!scenario.ok()) {
      std::fprintf(stderr, "scenario: %s\n", std::string(scenario.status().message()).c_str());
      std::exit(1);
    }
    auto created =
        codef::Federation::Create(*scenario, RealClock::Default(), &links, &archives, nullptr);
    if (!created.ok()) {
      std::fprintf(stderr, "federation: %s\n", std::string(created.status().message()).c_str());
      std::exit(1);
    }
    federation = std::move(*created);
    for (const std::string& name : federation->ClusterNames()) {
      codef::SynchronizedCluster* lms = federation->FindLms(name);
      if (lms == nullptr) continue;
      services.push_back(std::make_unique<codef::EmulatedLmsService>(lms));
      servers.push_back(Serve(services.back().get(), "lms-" + name));
      federation->SetEndpoints(name, servers.back()->address(), "");
      members.push_back(name);
    }
    control_service = std::make_unique<codef::CodefControlService>(federation.get());
    control = Serve(control_service.get(), "codef");
  }
  codef::InMemoryLinkControl links;
  codef::InMemoryCheckpointArchiveStore archives;
  std::unique_ptr<codef::Federation> federation;
  std::vector<std::unique_ptr<codef::EmulatedLmsService>> services;
  std::vector<std::unique_ptr<GrpcServer>> servers;
  std::unique_ptr<codef::CodefControlService> control_service;
  std::unique_ptr<GrpcServer> control;
  std::vector<std::string> members;
};

// What the hub reads per placement, read the same way (LmsPodRuntime and
// CodefDirectory), into the core's Federation; adds the time spent on the
// LMS and on the links to `lms_ms` and `links_ms`.
Federation ReadFederation(Testbed& bed, CodefDirectory& directory,
                          std::map<std::string, std::unique_ptr<LmsPodRuntime>>& runtimes,
                          double& lms_ms, double& links_ms) {
  Federation fed;
  absl::Time t0 = absl::Now();
  auto listed = directory.ListClusters();
  if (!listed.ok()) std::exit(1);
  for (const ClusterEndpoint& c : *listed) {
    if (c.lms.empty()) continue;
    auto& rt = runtimes[c.name];
    if (rt == nullptr) {
      rt = std::make_unique<LmsPodRuntime>(
          grpc::CreateChannel(c.lms, grpc::InsecureChannelCredentials()),
          LmsPodRuntimeOptions{.cluster = c.name});
    }
    auto nodes = rt->ListNodes();
    if (!nodes.ok()) std::exit(1);
    fed.AddCluster(Cluster{.name = c.name,
                           .labels = c.labels,
                           .nodes = std::move(*nodes),
                           .intra_latency_ns = SwmServiceOptions{}.intra_cluster_latency_ns});
  }
  absl::Time t1 = absl::Now();
  for (const std::string& a : bed.members) {
    for (const std::string& b : bed.members) {
      if (a == b) continue;
      auto link = directory.GetLink(a, b);
      if (!link.ok()) std::exit(1);
      if (link->has_value()) fed.AddLink(**link);
    }
  }
  lms_ms = absl::ToDoubleMilliseconds(t1 - t0);
  links_ms = absl::ToDoubleMilliseconds(absl::Now() - t1);
  return fed;
}

struct Row {
  std::string name;
  std::vector<double> ms;
  int unplaced = 0;
  int failed = 0;
};

void PrintRow(const Row& r) {
  std::printf("| %s | %zu | %.2f | %.2f | %.2f | %d%s |\n", r.name.c_str(), r.ms.size(),
              Percentile(r.ms, 0.5), Percentile(r.ms, 0.9), Percentile(r.ms, 0.99), r.unplaced,
              r.failed ? absl::StrCat(" (", r.failed, " calls failed)").c_str() : "");
}

void RunLatency(bool quick) {
  std::printf("\n## Placement latency: 20 workloads + 10 channels, 100-cluster neighborhood\n\n");
  Testbed bed;
  std::printf(
      "%d clusters x %d nodes served by CODEF's emulated LMS (one gRPC server each on "
      "127.0.0.1), links from the CODEF control API; the hub's SwmService on 127.0.0.1.\n\n",
      static_cast<int>(bed.members.size()), kNodes);

  auto kv = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  auto channels = PeerChannels::Create({.insecure = true});
  if (!channels.ok()) std::exit(1);
  auto directory = std::make_shared<CodefDirectory>(
      grpc::CreateChannel(bed.control->address(), grpc::InsecureChannelCredentials()));
  SwmServiceImpl hub(*kv, RealClock::Default(), std::move(*channels), directory, directory);
  auto hub_server = Serve(&hub, "swm");
  auto stub = pb::SwmService::NewStub(
      grpc::CreateChannel(hub_server->address(), grpc::InsecureChannelCredentials()));

  const int runs = quick ? 20 : 200;
  const int read_runs = quick ? 3 : 20;
  std::map<std::string, std::unique_ptr<LmsPodRuntime>> runtimes;

  Row read_lms{"read alone: 100 x LMS ListNodes+ListPods"};
  Row read_links{"read alone: 9,900 x CODEF GetLinkConditions"};
  Federation snapshot;
  for (int i = 0; i < read_runs; ++i) {
    double lms_ms = 0, links_ms = 0;
    snapshot = ReadFederation(bed, *directory, runtimes, lms_ms, links_ms);
    read_lms.ms.push_back(lms_ms);
    read_links.ms.push_back(links_ms);
  }

  PluginRegistry registry = NewDefaultRegistry();
  InProcessL2Solver l2(registry, nullptr);
  Coordinator coordinator(l2, registry, nullptr);
  std::set<std::string> names(bed.members.begin(), bed.members.end());
  Row in_process{"in process: Coordinator::Place on that federation"};
  for (int i = 0; i < runs; ++i) {
    auto app = ToCoreApplication(BenchApplication(1000 + i), names);
    if (!app.ok()) {
      std::fprintf(stderr, "app: %s\n", std::string(app.status().message()).c_str());
      std::exit(1);
    }
    absl::Time t0 = absl::Now();
    auto r = coordinator.Place(*app, snapshot, bed.members);
    in_process.ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
    if (!r.ok()) ++in_process.failed;
    if (r.ok()) in_process.unplaced += static_cast<int>(r->unplaced.size());
  }

  // Through gRPC: every link read per placement (the default), then with the
  // links reused across placements (swm.link_cache_ttl).
  auto through_grpc = [&](pb::SwmService::Stub& stub, Row& row, int n,
                          const std::map<std::string, std::string>& swm_endpoints = {}) {
    for (int i = -2; i < n; ++i) {  // two warm-up calls
      pb::PlaceApplicationRequest request;
      *request.mutable_application() = BenchApplication(1000 + std::max(i, 0));
      request.set_dry_run(true);
      request.mutable_neighborhood()->set_id("bench");
      for (const std::string& m : bed.members) {
        auto* member = request.mutable_neighborhood()->add_members();
        member->set_cluster(m);
        if (auto it = swm_endpoints.find(m); it != swm_endpoints.end()) {
          (*member->mutable_endpoints())["swm"] = it->second;
        }
      }
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
      pb::PlaceApplicationResponse response;
      absl::Time t0 = absl::Now();
      grpc::Status status = stub.PlaceApplication(&context, request, &response);
      double ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
      if (i < 0) continue;
      row.ms.push_back(ms);
      pb::AssignmentPlan plan;
      if (status.ok() && response.operation().result().UnpackTo(&plan)) {
        row.unplaced += plan.unplaced_size();
      } else if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
        row.unplaced += 1;  // at least one; the message lists them
      } else {
        ++row.failed;
      }
    }
  };
  Row through{"gRPC PlaceApplication (dry run), every link read per call"};
  through_grpc(*stub, through, quick ? 5 : 50);
  auto kv_cached = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  auto channels_cached = PeerChannels::Create({.insecure = true});
  if (!channels_cached.ok()) std::exit(1);
  SwmServiceImpl cached_hub(*kv_cached, RealClock::Default(), std::move(*channels_cached),
                            directory, directory,
                            SwmServiceOptions{.link_cache_ttl = absl::Hours(1)});
  auto cached_server = Serve(&cached_hub, "swm-cached");
  auto cached_stub = pb::SwmService::NewStub(
      grpc::CreateChannel(cached_server->address(), grpc::InsecureChannelCredentials()));
  Row cached{
      "gRPC PlaceApplication (dry run), links reused (swm.link_cache_ttl), LMS read per call"};
  through_grpc(*cached_stub, cached, runs);
  auto kv_view = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  auto channels_view = PeerChannels::Create({.insecure = true});
  if (!channels_view.ok()) std::exit(1);
  SwmServiceImpl view_hub(
      *kv_view, RealClock::Default(), std::move(*channels_view), directory, directory,
      SwmServiceOptions{.link_cache_ttl = absl::Hours(1), .node_view_ttl = absl::Hours(1)});
  auto view_server = Serve(&view_hub, "swm-view");
  auto view_stub = pb::SwmService::NewStub(
      grpc::CreateChannel(view_server->address(), grpc::InsecureChannelCredentials()));
  Row viewed{"gRPC PlaceApplication (dry run), links and node view reused (swm.node_view_ttl)"};
  through_grpc(*view_stub, viewed, runs);

  // The production path (what `codecoctl up` runs): every member has its own
  // MC SWM on 127.0.0.1 in front of its LMS; the hub plans on its watched
  // copy of each member's view (WatchClusterView; the MC sends it again after
  // every change it makes and every second), solves each member's L2 on that
  // view (swm.member_l2=hub), and reads the links once per placement (in
  // process here, for NetMA's one GetNetworkTopology). Default settings.
  // Then the same with every member solving its own L2 (swm.member_l2=member:
  // one SolveCluster call per visit).
  std::vector<std::unique_ptr<KvStore>> mc_stores;
  std::vector<std::unique_ptr<SwmClusterServiceImpl>> mc_services;
  std::vector<std::unique_ptr<GrpcServer>> mc_servers;
  std::map<std::string, std::string> mc_addresses;
  for (size_t i = 0; i < bed.members.size(); ++i) {
    const std::string& name = bed.members[i];
    mc_stores.push_back(NewInMemoryKvStore({kReservationsFamily}));
    auto lms = std::make_unique<LmsPodRuntime>(
        grpc::CreateChannel(bed.servers[i]->address(), grpc::InsecureChannelCredentials()),
        LmsPodRuntimeOptions{.cluster = name});
    mc_services.push_back(std::make_unique<SwmClusterServiceImpl>(
        *mc_stores.back(), RealClock::Default(), std::move(lms),
        ClusterServiceOptions{.cluster = name, .threads = 2}));
    mc_servers.push_back(Serve(mc_services.back().get(), "swm-" + name));
    mc_addresses[name] = mc_servers.back()->address();
  }
  auto kv_mc = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  auto channels_mc = PeerChannels::Create({.insecure = true});
  if (!channels_mc.ok()) std::exit(1);
  SwmServiceImpl mc_hub(*kv_mc, RealClock::Default(), std::move(*channels_mc), nullptr,
                        std::make_shared<codef::EmulatedLinks>(*bed.federation));
  auto mc_hub_server = Serve(&mc_hub, "swm-mc-path");
  auto mc_hub_stub = pb::SwmService::NewStub(
      grpc::CreateChannel(mc_hub_server->address(), grpc::InsecureChannelCredentials()));
  Row production{
      "gRPC PlaceApplication (dry run), production path: 100 MC SWMs (watched views, L2 "
      "solved on them), links in one read; defaults, fresh data"};
  through_grpc(*mc_hub_stub, production, runs, mc_addresses);
  mc_hub_server->Shutdown(absl::Seconds(5));

  auto kv_member = NewInMemoryKvStore({kPlansFamily, kOperationsFamily});
  auto channels_member = PeerChannels::Create({.insecure = true});
  if (!channels_member.ok()) std::exit(1);
  SwmServiceImpl member_hub(*kv_member, RealClock::Default(), std::move(*channels_member), nullptr,
                            std::make_shared<codef::EmulatedLinks>(*bed.federation),
                            SwmServiceOptions{.member_l2 = MemberL2::kMember});
  auto member_hub_server = Serve(&member_hub, "swm-member-l2");
  auto member_hub_stub = pb::SwmService::NewStub(
      grpc::CreateChannel(member_hub_server->address(), grpc::InsecureChannelCredentials()));
  Row member_l2{
      "same, each member solving its own L2 (swm.member_l2=member: SolveCluster per visit)"};
  through_grpc(*member_hub_stub, member_l2, runs, mc_addresses);

  std::printf("| path | runs | p50 (ms) | p90 (ms) | p99 (ms) | workloads unplaced |\n");
  std::printf("|---|---|---|---|---|---|\n");
  PrintRow(in_process);
  PrintRow(production);
  PrintRow(member_l2);
  PrintRow(through);
  PrintRow(cached);
  PrintRow(viewed);
  PrintRow(read_lms);
  PrintRow(read_links);
  std::printf("| Karmada, reported (one cluster decision) | - | 12 | 15 | 32 | - |\n");
  std::fflush(stdout);
  member_hub_server->Shutdown(absl::Seconds(5));
  // The hubs' watches of the members' views are still open: a grace would
  // wait it out on each of the 100 servers.
  for (auto& server : mc_servers) server->Shutdown(absl::ZeroDuration());
  view_server->Shutdown(absl::Seconds(5));
  cached_server->Shutdown(absl::Seconds(5));
  hub_server->Shutdown(absl::Seconds(5));
}

// CBC as the L2 strategy of small clusters: the same 20-workload, 10-channel
// applications over 100 clusters of 5-8 nodes (20-80 % free), placed by the
// Coordinator in process with the heuristic L2 and with the exact L2
// (swm.exact_l2_max_nodes = 8, other settings at their defaults), and single
// L2 solves of tight batches.
void RunExactL2(bool quick) {
  std::printf("\n## CBC as the L2 strategy of small clusters (in process)\n\n");
  PluginRegistry registry = NewDefaultRegistry();
  const int runs = quick ? 5 : 100;
  Row heuristic_row{"heuristic L2"};
  Row exact_row{"exact L2 (CBC) for clusters of <= 8 nodes, batches of <= 8"};
  double objective_gain = 0;
  int exact_solves = 0, l2_calls = 0;
  for (int i = 0; i < runs; ++i) {
    testing::InstanceOptions o{.clusters = 100,
                               .min_nodes = 5,
                               .max_nodes = 8,
                               .link_probability = 0.1,
                               .workloads = 20,
                               .channels = 10,
                               .max_cpu_request = 2000,
                               .max_memory_request = int64_t{2} << 30,
                               .max_channel_bandwidth_bps = 50'000'000,
                               .min_channel_delay_ns = 5 * kMs,
                               .max_channel_delay_ns = 40 * kMs};
    testing::Instance inst = testing::RandomInstance(3000 + i, o);
    InProcessL2Solver heuristic(registry, nullptr);
    milp::ExactL2Solver exact(registry, nullptr, milp::ExactL2Options{.max_nodes = 8});  // defaults
    double value[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
      L2Solver& l2 = k == 0 ? static_cast<L2Solver&>(heuristic) : exact;
      Coordinator coordinator(l2, registry, nullptr);
      absl::Time t0 = absl::Now();
      auto r = coordinator.Place(inst.app, inst.federation, {});
      Row& row = k == 0 ? heuristic_row : exact_row;
      row.ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
      if (!r.ok()) {
        ++row.failed;
        continue;
      }
      row.unplaced += static_cast<int>(r->unplaced.size());
      value[k] = milp::PlacementObjective(inst.app, inst.federation, r->placements);
      if (k == 1) l2_calls += r->l2_calls;
    }
    exact_solves += exact.exact_solves();
    objective_gain += value[1] - value[0];
  }
  std::printf(
      "100 clusters of 5-8 nodes, 20 workloads + 10 channels, %d seeds; the exact L2 answered "
      "%d of %d L2 solves (the others: no node fits or CBC gave no answer in time).\n\n",
      runs, exact_solves, l2_calls);
  std::printf("| L2 strategy | runs | p50 (ms) | p90 (ms) | p99 (ms) | workloads unplaced |\n");
  std::printf("|---|---|---|---|---|---|\n");
  PrintRow(heuristic_row);
  PrintRow(exact_row);
  std::printf(
      "\nmean objective gain of the exact L2 per application: %.1f (1e6 per placed workload, "
      "minus channel latency in ms)\n",
      objective_gain / runs);

  // Single L2 solves of tight batches on one cluster (about 90 %% of its CPU asked).
  std::printf(
      "\n| one L2 solve (free CPU = 110 %% of the batch, CBC limit 5 s) | solves | heuristic p50 / "
      "p99 (ms) | exact p50 / p99 (ms) |"
      " placed: heuristic / exact |\n|---|---|---|---|---|\n");
  const int solves = quick ? 10 : 100;
  for (int nodes : {4, 8}) {
    for (int batch : {4, 8, 12}) {
      if (quick && batch == 12) continue;  // CBC takes seconds on these: full runs only
      std::vector<double> h_ms, e_ms;
      int h_placed = 0, e_placed = 0;
      std::mt19937_64 rng(nodes * 100 + batch);
      for (int s = 0; s < solves; ++s) {
        // Workloads of 0.5-2.5 CPUs; the nodes' free CPU adds up to 110 %
        // of the batch's, spread unevenly over 4-CPU nodes.
        Application app{.name = "batch"};
        int64_t demand = 0;
        for (int w = 0; w < batch; ++w) {
          int64_t cpu = std::uniform_int_distribution<int64_t>(5, 25)(rng) * 100;
          demand += cpu;
          app.workloads.push_back(Workload{.name = absl::StrCat("w", w),
                                           .service = absl::StrCat("w", w),
                                           .requests = {cpu, int64_t{1} << 30, 0}});
        }
        Cluster cluster{.name = "x", .intra_latency_ns = 100'000};
        int64_t free_left = demand * 11 / 10;
        for (int n = 0; n < nodes; ++n) {
          int64_t share = n + 1 == nodes ? free_left
                                         : std::uniform_int_distribution<int64_t>(
                                               0, 2 * free_left / (nodes - n))(rng);
          share = std::min<int64_t>({share, free_left, 4000});
          free_left -= share;
          cluster.nodes.push_back(Node{.name = absl::StrCat("x-n", n),
                                       .capacity = {4000, int64_t{16} << 30, 0},
                                       .allocated = {4000 - share, 0, 0}});
        }
        L2Request req{.app = &app, .cluster = cluster, .allow_defer = false};
        for (const Workload& w : app.workloads) req.pending.push_back(w.name);
        InProcessL2Solver heuristic(registry, nullptr);
        milp::ExactL2Solver exact(
            registry, nullptr,
            milp::ExactL2Options{
                .max_nodes = 8, .max_workloads = 12, .time_limit = absl::Seconds(5)});
        absl::Time t0 = absl::Now();
        auto h = heuristic.Solve(req);
        h_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
        t0 = absl::Now();
        auto e = exact.Solve(req);
        e_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
        if (h.ok()) h_placed += static_cast<int>(h->node_of.size());
        if (e.ok()) e_placed += static_cast<int>(e->node_of.size());
      }
      std::printf("| %d nodes, %d workloads | %d | %.3f / %.3f | %.2f / %.2f | %d / %d |\n", nodes,
                  batch, solves, Percentile(h_ms, 0.5), Percentile(h_ms, 0.99),
                  Percentile(e_ms, 0.5), Percentile(e_ms, 0.99), h_placed, e_placed);
    }
  }
}

}  // namespace
}  // namespace codeco::swm

int main(int argc, char** argv) {
  bool quick = false;
  std::string section = "all";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strncmp(argv[i], "--section=", 10) == 0) {
      section = argv[i] + 10;
    } else if (std::strncmp(argv[i], "--benchmark_min_time=", 21) == 0) {
      quick = true;  // what scripts/dev.sh bench --quick passes to some binaries
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--section=latency|exact|all]\n", argv[0]);
      return 2;
    }
  }
  codeco::log::SetLevel(codeco::log::Level::kWarn);
  std::printf("# placement_grpc_bench%s\n", quick ? " --quick" : "");
  if (section == "all" || section == "latency") codeco::swm::RunLatency(quick);
  if (section == "all" || section == "exact") codeco::swm::RunExactL2(quick);
  return 0;
}
