// The Kubernetes-style series of an emulated cluster under a SimulatedClock:
// the counters advance by usage times elapsed time (so a rate over them is
// the emulated usage), a node load step shows as system time, CPU time is
// capped at the node's CPUs, containers share their pod's usage by
// requests, a failed node leaves node-exporter's series and counts nothing,
// and every family carries the labels Kubernetes users query by.
#include "kube_metrics.h"

#include <catch2/catch.hpp>
#include <map>
#include <optional>

#include "codeco/common/clock.h"
#include "emulated_cluster.h"
#include "test_objects.h"

namespace codeco::codef {
namespace {

using codeco::lms::v1::Pod;
using LabelMap = std::map<std::string, std::string>;

using testing::MakeNode;
using testing::MakePod;

constexpr int64_t kMi = 1 << 20;

struct Fixture {
  Fixture() : clock(absl::FromUnixSeconds(1'700'000'000)) {
    EmulatedClusterOptions options;
    options.name = "edge-a";
    options.pod_start_delay = absl::Seconds(1);
    cluster = std::make_unique<EmulatedCluster>(options, clock, &archives, nullptr);
    REQUIRE(cluster->AddNode(MakeNode("n1", 2000, 64 * kMi)).ok());
    REQUIRE(cluster->AddNode(MakeNode("n2", 2500, 128 * kMi)).ok());
  }
  void Advance(absl::Duration d) {
    clock.Advance(d);
    cluster->AdvanceTo(clock.Now());
  }
  const NodeAccounting& Node(const ClusterAccounting& a, const std::string& name) {
    for (const NodeAccounting& n : a.nodes) {
      if (n.name == name) return n;
    }
    FAIL("no node " << name);
    return a.nodes.front();
  }
  std::vector<MetricFamilyData> Metrics() {
    return KubernetesStyleMetrics(cluster->name(), cluster->Accounting());
  }

  SimulatedClock clock;
  InMemoryCheckpointArchiveStore archives;
  std::unique_ptr<EmulatedCluster> cluster;
};

const MetricFamilyData* FindFamily(const std::vector<MetricFamilyData>& families,
                                   const std::string& name) {
  for (const MetricFamilyData& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// The samples of `name` whose labels include `match`.
std::vector<MetricSample> Samples(const std::vector<MetricFamilyData>& families,
                                  const std::string& name, const LabelMap& match) {
  std::vector<MetricSample> out;
  const MetricFamilyData* family = FindFamily(families, name);
  if (family == nullptr) return out;
  for (const MetricSample& s : family->samples) {
    LabelMap labels(s.labels.begin(), s.labels.end());
    bool ok = true;
    for (const auto& [k, v] : match) ok = ok && labels.count(k) > 0 && labels.at(k) == v;
    if (ok) out.push_back(s);
  }
  return out;
}

// The one sample of `name` matching `match`, or nullopt.
std::optional<double> Value(const std::vector<MetricFamilyData>& families, const std::string& name,
                            const LabelMap& match) {
  std::vector<MetricSample> found = Samples(families, name, match);
  if (found.size() != 1) return std::nullopt;
  return found.front().value;
}

TEST_CASE("node CPU counters advance by usage times elapsed time") {
  Fixture f;
  REQUIRE(f.cluster->CreatePod(MakePod("web", "n1", 500, 8 * kMi), "").ok());
  f.Advance(absl::Seconds(1));  // the pod starts at the end of this second
  ClusterAccounting before = f.cluster->Accounting();
  f.Advance(absl::Seconds(10));
  ClusterAccounting after = f.cluster->Accounting();
  const NodeAccounting& n1 = f.Node(after, "n1");
  REQUIRE(n1.cpus == 2);
  // Rates over the 10 s: 0.5 cores of user time, 1.5 cores idle.
  REQUIRE((n1.user_seconds - f.Node(before, "n1").user_seconds) / 10 == Approx(0.5));
  REQUIRE((n1.idle_seconds - f.Node(before, "n1").idle_seconds) / 10 == Approx(1.5));
  REQUIRE(n1.system_seconds == 0);
  // Every CPU second is counted once: 2 CPUs x 11 s.
  REQUIRE(n1.user_seconds + n1.system_seconds + n1.idle_seconds == Approx(22));
  // 2500m rounds up to 3 whole CPUs, all idle.
  REQUIRE(f.Node(after, "n2").cpus == 3);
  REQUIRE(f.Node(after, "n2").idle_seconds == Approx(33));

  auto metrics = f.Metrics();
  // node-exporter splits the node's time evenly over its CPUs.
  REQUIRE(Value(metrics, "node_cpu_seconds_total", {{"node", "n1"}, {"cpu", "0"}, {"mode", "user"}})
              .value() == Approx(2.5));
  REQUIRE(Value(metrics, "node_cpu_seconds_total", {{"node", "n1"}, {"cpu", "1"}, {"mode", "idle"}})
              .value() == Approx(8.5));
  REQUIRE(Samples(metrics, "node_cpu_seconds_total", {{"node", "n1"}}).size() == 6);
  REQUIRE(Samples(metrics, "node_cpu_seconds_total", {{"node", "n2"}}).size() == 9);
  REQUIRE(Value(metrics, "container_cpu_usage_seconds_total", {{"pod", "web"}}).value() ==
          Approx(5));
  REQUIRE(Value(metrics, "container_memory_working_set_bytes", {{"pod", "web"}}).value() ==
          8 * kMi);
  REQUIRE(Value(metrics, "node_memory_MemTotal_bytes", {{"node", "n1"}}).value() == 64 * kMi);
  REQUIRE(Value(metrics, "node_memory_MemAvailable_bytes", {{"node", "n1"}}).value() == 56 * kMi);
  // Power at 25 % of the CPU: 100 + 200 * 0.25 W; energy: 1 s idle, 10 s at 150 W.
  REQUIRE(Value(metrics, "codeco_node_power_watts", {{"node", "n1"}}).value() == Approx(150));
  REQUIRE(Value(metrics, "codeco_node_energy_joules_total", {{"node", "n1"}}).value() ==
          Approx(100 + 1500));
}

TEST_CASE("a pod that starts or ends between advances counts only while it ran") {
  Fixture f;
  Pod job = MakePod("job", "n1", 1000, kMi);
  (*job.mutable_annotations())[kDurationAnnotation] = "4s";
  REQUIRE(f.cluster->CreatePod(job, "").ok());
  // One advance over the whole life: Running at 1 s, Succeeded at 5 s.
  f.Advance(absl::Seconds(30));
  ClusterAccounting a = f.cluster->Accounting();
  REQUIRE(f.Node(a, "n1").user_seconds == Approx(4));
  REQUIRE(a.containers.size() == 1);
  REQUIRE(a.containers[0].cpu_seconds == Approx(4));
  REQUIRE(a.containers[0].phase == codeco::lms::v1::POD_PHASE_SUCCEEDED);
  auto metrics = f.Metrics();
  // cAdvisor no longer sees the container; kube-state-metrics still lists the pod.
  REQUIRE(Samples(metrics, "container_cpu_usage_seconds_total", {}).empty());
  REQUIRE(Value(metrics, "kube_pod_status_phase", {{"pod", "job"}, {"phase", "Succeeded"}}) == 1);
  REQUIRE(Value(metrics, "kube_pod_status_phase", {{"pod", "job"}, {"phase", "Running"}}) == 0);
  REQUIRE(Value(metrics, "kube_pod_container_status_restarts_total",
                {{"pod", "job"}, {"container", "main"}}) == 0);
  REQUIRE(Value(metrics, "kube_pod_info", {{"pod", "job"}, {"node", "n1"}}) == 1);
}

TEST_CASE("kube_pod_info puts each pod once on its node") {
  // The restart counter has no node label: codeco-rules.yml joins it to
  // kube_pod_info by (cluster, namespace, pod) to count restarts per node.
  Fixture f;
  Pod duo = MakePod("duo", "n2", 300, kMi);
  duo.add_containers()->set_name("sidecar");
  REQUIRE(f.cluster->CreatePod(duo, "").ok());
  REQUIRE(f.cluster->CreatePod(MakePod("web", "n1", 500, kMi), "").ok());
  auto metrics = f.Metrics();  // still Pending: kube-state-metrics lists them already
  REQUIRE(Samples(metrics, "kube_pod_info", {}).size() == 2);
  REQUIRE(Value(metrics, "kube_pod_info", {{"pod", "duo"}}) == 1);
  REQUIRE(Value(metrics, "kube_pod_info", {{"pod", "web"}}) == 1);
  const MetricSample duo_info = Samples(metrics, "kube_pod_info", {{"pod", "duo"}}).front();
  REQUIRE(
      LabelMap(duo_info.labels.begin(), duo_info.labels.end()) ==
      LabelMap{{"cluster", "edge-a"}, {"namespace", "default"}, {"pod", "duo"}, {"node", "n2"}});
  REQUIRE(Samples(metrics, "kube_pod_container_status_restarts_total", {{"pod", "duo"}}).size() ==
          2);
  f.Advance(absl::Seconds(2));
  REQUIRE(Value(f.Metrics(), "kube_pod_info", {{"pod", "web"}, {"node", "n1"}}) == 1);
}

TEST_CASE("a step profile integrates exactly when advances fall on its steps") {
  Fixture f;
  Pod pod = MakePod("step", "n2", 100, kMi);
  (*pod.mutable_annotations())[kUsageProfileAnnotation] =
      "{type: step, steps: [{after: 0s, cpu: 100m}, {after: 10s, cpu: 900m}]}";
  REQUIRE(f.cluster->CreatePod(pod, "").ok());
  f.Advance(absl::Seconds(1));
  f.Advance(absl::Seconds(10));
  REQUIRE(f.cluster->Accounting().containers[0].cpu_seconds == Approx(1));
  f.Advance(absl::Seconds(10));
  REQUIRE(f.cluster->Accounting().containers[0].cpu_seconds == Approx(1 + 9));
}

TEST_CASE("a node load step adds system time and shows in usage and power") {
  Fixture f;
  REQUIRE(f.cluster->CreatePod(MakePod("web", "n1", 500, 8 * kMi), "").ok());
  f.Advance(absl::Seconds(1));
  ClusterAccounting before = f.cluster->Accounting();
  auto load = f.cluster->SetNodeLoad("n1", {.cpu_fraction = 0.5, .memory_bytes = 16 * kMi});
  REQUIRE(load.ok());
  REQUIRE(load->cpu_millicores == 1000);
  REQUIRE(load->memory_bytes == 16 * kMi);
  auto usage = f.cluster->GetNodeUsage("n1");
  REQUIRE(usage->usage().cpu_millicores() == 1500);
  REQUIRE(usage->usage().memory_bytes() == 24 * kMi);
  REQUIRE(usage->energy_watts() == Approx(100 + 200 * 0.75));
  f.Advance(absl::Seconds(20));
  ClusterAccounting after = f.cluster->Accounting();
  const NodeAccounting& n1 = f.Node(after, "n1");
  const NodeAccounting& old = f.Node(before, "n1");
  REQUIRE((n1.system_seconds - old.system_seconds) / 20 == Approx(1.0));
  REQUIRE((n1.user_seconds - old.user_seconds) / 20 == Approx(0.5));
  // Busy share, as instance:node_cpu:rate1m computes it: 1 - idle rate / CPUs.
  REQUIRE(1 - (n1.idle_seconds - old.idle_seconds) / 20 / n1.cpus == Approx(0.75));
  REQUIRE(n1.memory_available_bytes == 64 * kMi - 24 * kMi);
  // Only the CPU changes; memory stays.
  load = f.cluster->SetNodeLoad("n1", {.cpu_millicores = 0});
  REQUIRE(load->cpu_millicores == 0);
  REQUIRE(load->memory_bytes == 16 * kMi);

  auto bad = f.cluster->SetNodeLoad("n1", {.cpu_fraction = 1.5});
  REQUIRE(bad.status().code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(bad.status().message().rfind("cpu_fraction: ", 0) == 0);
  bad = f.cluster->SetNodeLoad("n1", {.cpu_millicores = 2001});
  REQUIRE(bad.status().message().rfind("cpu_millicores: ", 0) == 0);
  bad = f.cluster->SetNodeLoad("n1", {.cpu_fraction = 0.1, .cpu_millicores = 100});
  REQUIRE(bad.status().code() == absl::StatusCode::kInvalidArgument);
  bad = f.cluster->SetNodeLoad("n1", {.memory_bytes = -1});
  REQUIRE(bad.status().message().rfind("memory_bytes: ", 0) == 0);
  REQUIRE(f.cluster->SetNodeLoad("n9", {.cpu_millicores = 1}).status().code() ==
          absl::StatusCode::kNotFound);
}

TEST_CASE("busy CPU time is capped at the node's CPUs") {
  Fixture f;
  REQUIRE(f.cluster->CreatePod(MakePod("hog", "n1", 1500, kMi), "").ok());
  f.Advance(absl::Seconds(1));
  REQUIRE(f.cluster->SetLoadFactor(4).ok());  // the pod wants 6 cores of 2
  REQUIRE(f.cluster->SetNodeLoad("n1", {.cpu_fraction = 1}).ok());
  ClusterAccounting before = f.cluster->Accounting();
  f.Advance(absl::Seconds(10));
  const ClusterAccounting after = f.cluster->Accounting();
  const NodeAccounting& n1 = f.Node(after, "n1");
  const NodeAccounting& old = f.Node(before, "n1");
  REQUIRE(n1.user_seconds - old.user_seconds == Approx(20));
  REQUIRE(n1.system_seconds - old.system_seconds == Approx(0));
  REQUIRE(n1.idle_seconds - old.idle_seconds == Approx(0));
  // The container counts what the LMS reports for the pod.
  REQUIRE(f.cluster->Accounting().containers[0].cpu_seconds == Approx(60));
  REQUIRE(f.cluster->Accounting().nodes[0].power_watts == Approx(300));
}

TEST_CASE("containers share their pod's usage by requests") {
  Fixture f;
  Pod pod = MakePod("duo", "n2", 300, 3 * kMi);
  auto* sidecar = pod.add_containers();
  sidecar->set_name("sidecar");
  sidecar->set_image("envoy");
  sidecar->mutable_requests()->set_cpu_millicores(100);
  sidecar->mutable_requests()->set_memory_bytes(kMi);
  (*pod.mutable_annotations())[kUsageProfileAnnotation] =
      "{type: constant, cpu: 800m, memory: 8Mi}";
  REQUIRE(f.cluster->CreatePod(pod, "").ok());
  Pod even = MakePod("even", "n2", 0, 0);
  even.add_containers()->set_name("second");
  (*even.mutable_annotations())[kUsageProfileAnnotation] = "{type: constant, cpu: 1, memory: 2Mi}";
  REQUIRE(f.cluster->CreatePod(even, "").ok());
  f.Advance(absl::Seconds(1));
  f.Advance(absl::Seconds(10));
  auto metrics = f.Metrics();
  REQUIRE(
      Value(metrics, "container_cpu_usage_seconds_total", {{"pod", "duo"}, {"container", "main"}})
          .value() == Approx(6));
  REQUIRE(Value(metrics, "container_cpu_usage_seconds_total",
                {{"pod", "duo"}, {"container", "sidecar"}})
              .value() == Approx(2));
  REQUIRE(Value(metrics, "container_memory_working_set_bytes",
                {{"pod", "duo"}, {"container", "sidecar"}})
              .value() == 2 * kMi);
  REQUIRE(Value(metrics, "container_cpu_usage_seconds_total",
                {{"pod", "even"}, {"container", "second"}})
              .value() == Approx(5));
  REQUIRE(
      Value(metrics, "container_memory_working_set_bytes", {{"pod", "even"}, {"container", "main"}})
          .value() == kMi);
}

TEST_CASE("a failed node leaves node-exporter's series and counts nothing until it recovers") {
  Fixture f;
  f.Advance(absl::Seconds(5));
  REQUIRE(f.cluster->FailNode("n1").ok());
  double idle = f.Node(f.cluster->Accounting(), "n1").idle_seconds;
  f.Advance(absl::Seconds(5));
  REQUIRE(f.Node(f.cluster->Accounting(), "n1").idle_seconds == idle);
  auto metrics = f.Metrics();
  REQUIRE(Samples(metrics, "node_cpu_seconds_total", {{"node", "n1"}}).empty());
  REQUIRE(Samples(metrics, "node_memory_MemAvailable_bytes", {{"node", "n1"}}).empty());
  REQUIRE(Value(metrics, "kube_node_status_condition",
                {{"node", "n1"}, {"condition", "Ready"}, {"status", "false"}}) == 1);
  REQUIRE(Value(metrics, "kube_node_status_condition",
                {{"node", "n1"}, {"condition", "Ready"}, {"status", "true"}}) == 0);
  REQUIRE(Value(metrics, "kube_node_status_condition",
                {{"node", "n2"}, {"condition", "Ready"}, {"status", "true"}}) == 1);
  REQUIRE(Value(metrics, "codeco_node_power_watts", {{"node", "n1"}}) == 0);
  REQUIRE(f.cluster->RecoverNode("n1").ok());
  f.Advance(absl::Seconds(5));
  // The counters go on from where they stopped (no reset).
  REQUIRE(f.Node(f.cluster->Accounting(), "n1").idle_seconds == Approx(idle + 10));
  REQUIRE(Samples(f.Metrics(), "node_cpu_seconds_total", {{"node", "n1"}}).size() == 6);
}

TEST_CASE("every family carries the labels Kubernetes users query by") {
  Fixture f;
  REQUIRE(f.cluster->CreatePod(MakePod("web", "n1", 500, kMi), "").ok());
  f.Advance(absl::Seconds(2));
  auto metrics = f.Metrics();
  auto label_names = [&](const std::string& family) {
    std::vector<std::string> names;
    const MetricFamilyData* found = FindFamily(metrics, family);
    REQUIRE(found != nullptr);
    REQUIRE_FALSE(found->samples.empty());
    for (const auto& [name, value] : found->samples.front().labels) names.push_back(name);
    return names;
  };
  using V = std::vector<std::string>;
  REQUIRE(label_names("node_cpu_seconds_total") == V{"cluster", "node", "instance", "cpu", "mode"});
  REQUIRE(label_names("node_memory_MemTotal_bytes") == V{"cluster", "node", "instance"});
  REQUIRE(label_names("node_memory_MemAvailable_bytes") == V{"cluster", "node", "instance"});
  REQUIRE(label_names("container_cpu_usage_seconds_total") ==
          V{"cluster", "namespace", "pod", "container", "image", "node"});
  REQUIRE(label_names("container_memory_working_set_bytes") ==
          V{"cluster", "namespace", "pod", "container", "image", "node"});
  REQUIRE(label_names("kube_node_status_condition") == V{"cluster", "node", "condition", "status"});
  REQUIRE(label_names("kube_node_status_capacity") == V{"cluster", "node", "resource", "unit"});
  REQUIRE(label_names("kube_pod_info") == V{"cluster", "namespace", "pod", "node"});
  REQUIRE(label_names("kube_pod_status_phase") == V{"cluster", "namespace", "pod", "phase"});
  REQUIRE(label_names("kube_pod_container_status_restarts_total") ==
          V{"cluster", "namespace", "pod", "container"});
  REQUIRE(label_names("codeco_node_power_watts") == V{"cluster", "node"});
  REQUIRE(label_names("codeco_node_energy_joules_total") == V{"cluster", "node"});
  const MetricSample cpu = Samples(metrics, "node_cpu_seconds_total", {}).front();
  REQUIRE(LabelMap(cpu.labels.begin(), cpu.labels.end()) == LabelMap{{"cluster", "edge-a"},
                                                                     {"node", "n1"},
                                                                     {"instance", "n1"},
                                                                     {"cpu", "0"},
                                                                     {"mode", "idle"}});
  const MetricSample container = Samples(metrics, "container_cpu_usage_seconds_total", {}).front();
  REQUIRE(LabelMap(container.labels.begin(), container.labels.end()) ==
          LabelMap{{"cluster", "edge-a"},
                   {"namespace", "default"},
                   {"pod", "web"},
                   {"container", "main"},
                   {"image", "busybox:1.36"},
                   {"node", "n1"}});
  REQUIRE(Value(metrics, "kube_node_status_capacity",
                {{"node", "n2"}, {"resource", "cpu"}, {"unit", "core"}}) == 2.5);
  for (const MetricFamilyData& family : metrics) {
    bool counter = family.name.size() > 6 && family.name.substr(family.name.size() - 6) == "_total";
    INFO(family.name);
    REQUIRE((family.kind == MetricKind::kCounter) == counter);
  }
}

}  // namespace
}  // namespace codeco::codef
