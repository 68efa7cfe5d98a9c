// The emulated LMS core under a SimulatedClock: capacity rejection, phases,
// job completion, node failure, watch order and resume, usage profiles,
// energy, idempotency, and checkpoint/restore across clusters.
#include "emulated_cluster.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "codeco/common/clock.h"
#include "test_objects.h"

namespace codeco::codef {
namespace {

using codeco::common::v1::WATCH_EVENT_TYPE_ADDED;
using codeco::common::v1::WATCH_EVENT_TYPE_DELETED;
using codeco::common::v1::WATCH_EVENT_TYPE_MODIFIED;
using codeco::lms::v1::Pod;

using testing::MakeNode;
using testing::MakePod;

struct Fixture {
  Fixture() : clock(absl::FromUnixSeconds(1'700'000'000)) {
    EmulatedClusterOptions options;
    options.name = "edge-a";
    options.labels.set_region("eu-west");
    options.labels.set_tier(codeco::common::v1::TIER_EDGE);
    options.pod_start_delay = absl::Seconds(1);
    options.event_history = 64;
    cluster = std::make_unique<EmulatedCluster>(options, clock, &archives, files);
    cluster->SetEventListener([this](const WatchEvent& e) { events.push_back(e); });
    REQUIRE(cluster->AddNode(MakeNode("n1", 2000, 4 << 20)).ok());
    REQUIRE(cluster->AddNode(MakeNode("n2", 4000, 8 << 20)).ok());
  }
  void Advance(absl::Duration d) {
    clock.Advance(d);
    cluster->AdvanceTo(clock.Now());
  }

  SimulatedClock clock;
  InMemoryCheckpointArchiveStore archives;
  FileReader files = [](const std::string& path) -> absl::StatusOr<std::string> {
    if (path == "trace.csv") return std::string("offset,cpu,memory\n0s,100m,1Mi\n10s,900m,2Mi\n");
    return absl::NotFoundError("no file " + path);
  };
  std::unique_ptr<EmulatedCluster> cluster;
  std::vector<WatchEvent> events;
};

TEST_CASE("a pod that does not fit its node is rejected with the reason") {
  Fixture f;
  REQUIRE(f.cluster->CreatePod(MakePod("a", "n1", 1500, 1 << 20), "").ok());
  auto rejected = f.cluster->CreatePod(MakePod("b", "n1", 600, 1 << 20), "");
  REQUIRE(rejected.status().code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(rejected.status().message().find("n1 lacks cpu") != std::string::npos);
  auto memory = f.cluster->CreatePod(MakePod("c", "n1", 100, 8 << 20), "");
  REQUIRE(memory.status().code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(memory.status().message().find("lacks memory") != std::string::npos);
  // What is left still fits exactly.
  REQUIRE(f.cluster->CreatePod(MakePod("d", "n1", 500, 1 << 20), "").ok());
  auto node = f.cluster->GetNode("n1");
  REQUIRE(node->requested().cpu_millicores() == 2000);
  REQUIRE(f.cluster->CreatePod(MakePod("e", "nope", 1, 1), "").status().code() ==
          absl::StatusCode::kNotFound);
}

TEST_CASE("bad pods are rejected with field paths") {
  Fixture f;
  Pod pod = MakePod("Bad_Name", "", 1, 1);
  pod.mutable_containers(0)->mutable_requests()->set_cpu_millicores(-1);
  auto status = f.cluster->CreatePod(pod, "").status();
  REQUIRE(status.code() == absl::StatusCode::kInvalidArgument);
  std::string message(status.message());
  REQUIRE(message.find("pod.name: ") != std::string::npos);
  REQUIRE(message.find("pod.node_name: ") != std::string::npos);
  REQUIRE(message.find("pod.containers[0].requests.cpu_millicores: ") != std::string::npos);
  Pod profiled = MakePod("p", "n1", 1, 1);
  (*profiled.mutable_annotations())[kUsageProfileAnnotation] = "{type: wave}";
  auto bad_profile = f.cluster->CreatePod(profiled, "").status();
  REQUIRE(bad_profile.code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(absl::StartsWith(bad_profile.message(),
                           "pod.annotations[codef.codeco.io/usage-profile].type: "));
}

TEST_CASE("create is idempotent by request_id") {
  Fixture f;
  auto first = f.cluster->CreatePod(MakePod("a", "n1", 1000, 1), "req-1");
  REQUIRE(first.ok());
  auto again = f.cluster->CreatePod(MakePod("a", "n1", 1000, 1), "req-1");
  REQUIRE(again.ok());
  REQUIRE(again->resource_version() == first->resource_version());
  REQUIRE(f.cluster->GetNode("n1")->requested().cpu_millicores() == 1000);
  auto other = f.cluster->CreatePod(MakePod("a", "n1", 1000, 1), "req-2");
  REQUIRE(other.status().code() == absl::StatusCode::kAlreadyExists);
}

TEST_CASE("pods go Pending Running and jobs Succeeded after their duration") {
  Fixture f;
  Pod job = MakePod("job", "n2", 1000, 1 << 20);
  (*job.mutable_annotations())[kDurationAnnotation] = "30s";
  REQUIRE(f.cluster->CreatePod(job, "").ok());
  REQUIRE(f.cluster->CreatePod(MakePod("svc", "n2", 1000, 1 << 20), "").ok());
  REQUIRE(f.cluster->GetPod("job")->phase() == codeco::lms::v1::POD_PHASE_PENDING);
  f.Advance(absl::Milliseconds(999));
  REQUIRE(f.cluster->GetPod("job")->phase() == codeco::lms::v1::POD_PHASE_PENDING);
  f.Advance(absl::Milliseconds(1));
  REQUIRE(f.cluster->GetPod("job")->phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  REQUIRE_FALSE(f.cluster->GetPod("job")->pod_ip().empty());
  f.Advance(absl::Seconds(29));
  REQUIRE(f.cluster->GetPod("job")->phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  REQUIRE(f.cluster->GetNode("n2")->requested().cpu_millicores() == 2000);
  f.Advance(absl::Seconds(1));
  REQUIRE(f.cluster->GetPod("job")->phase() == codeco::lms::v1::POD_PHASE_SUCCEEDED);
  REQUIRE(f.cluster->GetPod("svc")->phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  // A finished job frees its requests.
  REQUIRE(f.cluster->GetNode("n2")->requested().cpu_millicores() == 1000);
  // One big advance does both steps, in order.
  Pod quick = MakePod("quick", "n1", 100, 1);
  (*quick.mutable_annotations())[kDurationAnnotation] = "5s";
  REQUIRE(f.cluster->CreatePod(quick, "").ok());
  f.events.clear();
  f.Advance(absl::Hours(1));
  std::vector<codeco::lms::v1::PodPhase> phases;
  for (const auto& e : f.events) {
    if (e.pod && e.pod->name() == "quick") phases.push_back(e.pod->phase());
  }
  REQUIRE(phases == std::vector<codeco::lms::v1::PodPhase>{codeco::lms::v1::POD_PHASE_RUNNING,
                                                           codeco::lms::v1::POD_PHASE_SUCCEEDED});
}

TEST_CASE("a running pod is ended Succeeded or Failed on request and frees its node") {
  Fixture f;
  Pod job = MakePod("job", "n2", 1000, 1 << 20);
  job.set_restart_policy(codeco::lms::v1::RESTART_POLICY_NEVER);
  REQUIRE(f.cluster->CreatePod(job, "").ok());
  REQUIRE(f.cluster->CreatePod(MakePod("other", "n2", 500, 1 << 20), "").ok());
  // Not running yet: refused, and nothing changes.
  CHECK(f.cluster->EndPod("job", true, "").code() == absl::StatusCode::kFailedPrecondition);
  f.Advance(absl::Seconds(1));
  REQUIRE(f.cluster->GetPod("job")->phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  REQUIRE(f.cluster->GetNode("n2")->requested().cpu_millicores() == 1500);
  REQUIRE(f.cluster->EndPod("job", true, "").ok());
  CHECK(f.cluster->GetPod("job")->phase() == codeco::lms::v1::POD_PHASE_SUCCEEDED);
  CHECK(f.cluster->GetPod("job")->message() == "completed");
  CHECK(f.cluster->GetNode("n2")->requested().cpu_millicores() == 500);
  // Ended once: a second end is refused.
  CHECK(f.cluster->EndPod("job", false, "").code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(f.cluster->EndPod("other", false, "exit code 2").ok());
  CHECK(f.cluster->GetPod("other")->phase() == codeco::lms::v1::POD_PHASE_FAILED);
  CHECK(f.cluster->GetPod("other")->message() == "exit code 2");
  CHECK(f.cluster->EndPod("none", true, "").code() == absl::StatusCode::kNotFound);
}

TEST_CASE("a failed node fails its pods and refuses new ones until it recovers") {
  Fixture f;
  REQUIRE(f.cluster->CreatePod(MakePod("a", "n1", 500, 1), "").ok());
  REQUIRE(f.cluster->CreatePod(MakePod("b", "n1", 500, 1), "").ok());
  REQUIRE(f.cluster->CreatePod(MakePod("c", "n2", 500, 1), "").ok());
  f.Advance(absl::Seconds(2));
  auto failed = f.cluster->FailNode("n1");
  REQUIRE(failed.ok());
  REQUIRE(*failed == 2);
  REQUIRE(f.cluster->GetPod("a")->phase() == codeco::lms::v1::POD_PHASE_FAILED);
  REQUIRE(f.cluster->GetPod("a")->message() == "node n1 failed");
  REQUIRE(f.cluster->GetPod("c")->phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  REQUIRE(f.cluster->GetNode("n1")->condition() == codeco::lms::v1::NODE_CONDITION_NOT_READY);
  REQUIRE(f.cluster->GetNode("n1")->requested().cpu_millicores() == 0);
  REQUIRE(f.cluster->GetNode("n1")->energy_watts() == 0);
  REQUIRE(f.cluster->NodeCounts() == std::make_pair(2, 1));
  auto refused = f.cluster->CreatePod(MakePod("d", "n1", 1, 1), "");
  REQUIRE(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(f.cluster->RecoverNode("n1").ok());
  REQUIRE(f.cluster->CreatePod(MakePod("d", "n1", 1, 1), "").ok());
  REQUIRE(f.cluster->GetPod("a")->phase() == codeco::lms::v1::POD_PHASE_FAILED);
}

TEST_CASE("a node is removed only once its pods have ended and takes the ended ones along") {
  Fixture f;
  REQUIRE(f.cluster->CreatePod(MakePod("a", "n1", 500, 1), "").ok());
  REQUIRE(f.cluster->CreatePod(MakePod("b", "n2", 500, 1), "").ok());
  f.Advance(absl::Seconds(2));
  absl::Status busy = f.cluster->RemoveNode("n1");
  REQUIRE(busy.code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(absl::StrContains(busy.message(), "still runs pod a"));
  REQUIRE(f.cluster->RemoveNode("n9").code() == absl::StatusCode::kNotFound);
  REQUIRE(f.cluster->FailNode("n1").ok());  // a ends Failed
  f.events.clear();
  REQUIRE(f.cluster->RemoveNode("n1").ok());
  REQUIRE(f.cluster->GetNode("n1").status().code() == absl::StatusCode::kNotFound);
  REQUIRE(f.cluster->GetPod("a").status().code() == absl::StatusCode::kNotFound);
  REQUIRE(f.cluster->GetPod("b").ok());
  REQUIRE(f.cluster->NodeCounts() == std::make_pair(1, 1));
  // The pod's deletion, then the node's.
  REQUIRE(f.events.size() == 2);
  REQUIRE(f.events[0].type == WATCH_EVENT_TYPE_DELETED);
  REQUIRE(f.events[0].pod.has_value());
  REQUIRE(f.events[1].type == WATCH_EVENT_TYPE_DELETED);
  REQUIRE(f.events[1].node.has_value());
  REQUIRE(f.events[1].node->name() == "n1");
}

TEST_CASE("watch events carry increasing versions and resume from any version") {
  Fixture f;
  auto [initial_nodes, node_version] = *f.cluster->NodeEventsSince("");
  REQUIRE(initial_nodes.size() == 2);
  REQUIRE(initial_nodes[0].type == WATCH_EVENT_TYPE_ADDED);
  std::string list_version = f.cluster->ListPods({})->resource_version();
  REQUIRE(f.cluster->CreatePod(MakePod("a", "n1", 500, 1), "").ok());
  f.Advance(absl::Seconds(1));
  REQUIRE(f.cluster->DeletePod("a").ok());
  for (size_t i = 1; i < f.events.size(); ++i) {
    REQUIRE(f.events[i].version == f.events[i - 1].version + 1);
  }
  auto since = f.cluster->PodEventsSince(list_version);
  REQUIRE(since.ok());
  const auto& pod_events = since->first;
  REQUIRE(pod_events.size() == 3);
  REQUIRE(pod_events[0].type == WATCH_EVENT_TYPE_ADDED);
  REQUIRE(pod_events[0].pod->phase() == codeco::lms::v1::POD_PHASE_PENDING);
  REQUIRE(pod_events[1].type == WATCH_EVENT_TYPE_MODIFIED);
  REQUIRE(pod_events[1].pod->phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  REQUIRE(pod_events[2].type == WATCH_EVENT_TYPE_DELETED);
  REQUIRE(pod_events[0].version < pod_events[1].version);
  REQUIRE(pod_events[1].version < pod_events[2].version);
  REQUIRE(since->second == f.cluster->resource_version());
  // Node events saw the requests go up and down again.
  auto node_events = f.cluster->NodeEventsSince(list_version)->first;
  REQUIRE(node_events.size() == 2);
  REQUIRE(node_events[0].node->requested().cpu_millicores() == 500);
  REQUIRE(node_events[1].node->requested().cpu_millicores() == 0);
  // Bad and too-old versions.
  REQUIRE(f.cluster->PodEventsSince("abc").status().code() == absl::StatusCode::kInvalidArgument);
  for (int i = 0; i < 40; ++i) {
    REQUIRE(f.cluster->CreatePod(MakePod("p" + std::to_string(i), "n2", 1, 1), "").ok());
  }
  REQUIRE(f.cluster->PodEventsSince(list_version).status().code() == absl::StatusCode::kOutOfRange);
}

TEST_CASE("node usage is the sum of pod usage and power follows utilization") {
  Fixture f;
  // n2: 4000m, 100 W idle, 300 W max.
  REQUIRE(f.cluster->CreatePod(MakePod("a", "n2", 1000, 1 << 20), "").ok());
  Pod b = MakePod("b", "n2", 500, 1 << 20);
  (*b.mutable_annotations())[kUsageProfileAnnotation] = "{type: constant, cpu: 1, memory: 3Mi}";
  REQUIRE(f.cluster->CreatePod(b, "").ok());
  REQUIRE(f.cluster->GetNodeUsage("n2")->usage().cpu_millicores() == 0);  // still pending
  REQUIRE(f.cluster->GetNodeUsage("n2")->energy_watts() == 100);
  f.Advance(absl::Seconds(1));
  auto usage = f.cluster->GetNodeUsage("n2");
  REQUIRE(usage->pods_size() == 2);
  REQUIRE(usage->usage().cpu_millicores() == 2000);
  REQUIRE(usage->usage().memory_bytes() == (1 << 20) + (3 << 20));
  REQUIRE(usage->energy_watts() == Approx(100 + 200 * 0.5));
  REQUIRE(f.cluster->GetNode("n2")->energy_watts() == Approx(200));
  // A load surge scales CPU; power saturates at max.
  REQUIRE(f.cluster->SetLoadFactor(3).ok());
  REQUIRE(f.cluster->GetNodeUsage("n2")->usage().cpu_millicores() == 6000);
  REQUIRE(f.cluster->GetNodeUsage("n2")->energy_watts() == Approx(300));
  REQUIRE(f.cluster->SetLoadFactor(0).code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(f.cluster->SetLoadFactor(1).ok());
  REQUIRE(f.cluster->SetPodLoad("a", "{type: constant, cpu: 0}").ok());
  REQUIRE(f.cluster->GetNodeUsage("n2")->usage().cpu_millicores() == 1000);
  REQUIRE(f.cluster->SetPodLoad("zz", "{type: constant}").code() == absl::StatusCode::kNotFound);
}

TEST_CASE("usage profiles: step trace replay and diurnal with seeded noise") {
  Fixture f;
  Pod step = MakePod("step", "n2", 100, 1 << 20);
  (*step.mutable_annotations())[kUsageProfileAnnotation] =
      "{type: step, steps: [{after: 10s, cpu: 700m}, {after: 20s, cpu: 300m, memory: 2Mi}]}";
  Pod trace = MakePod("trace", "n1", 100, 1 << 20);
  (*trace.mutable_annotations())[kUsageProfileAnnotation] =
      "{type: trace, file: trace.csv, loop: true}";
  REQUIRE(f.cluster->CreatePod(step, "").ok());
  REQUIRE(f.cluster->CreatePod(trace, "").ok());
  f.Advance(absl::Seconds(1));  // both running from here
  auto cpu = [&](const std::string& node) {
    return f.cluster->GetNodeUsage(node)->usage().cpu_millicores();
  };
  REQUIRE(cpu("n2") == 100);  // requests before the first step
  REQUIRE(cpu("n1") == 100);
  f.Advance(absl::Seconds(10));
  REQUIRE(cpu("n2") == 700);
  REQUIRE(cpu("n1") == 900);
  f.Advance(absl::Seconds(10));
  REQUIRE(cpu("n2") == 300);
  REQUIRE(f.cluster->GetNodeUsage("n2")->usage().memory_bytes() == 2 << 20);
  REQUIRE(cpu("n1") == 100);  // trace looped (period 20s)

  // Diurnal: peak at the set hour, trough 12 h later, noise bounded and reproducible.
  auto profile = ParseUsageProfile(
      "{type: diurnal, min_cpu: 100m, max_cpu: 1100m, period: 24h, peak_at: 12h, noise: 0.1, "
      "seed: 3}",
      "p", Usage{100, 1}, "c/p", nullptr);
  REQUIRE(profile.ok());
  absl::Time noon = absl::FromUnixSeconds(12 * 3600);
  absl::Time midnight = absl::FromUnixSeconds(24 * 3600);
  int64_t peak = (*profile)->At(noon, absl::ZeroDuration()).cpu_millicores;
  int64_t trough = (*profile)->At(midnight, absl::ZeroDuration()).cpu_millicores;
  REQUIRE(peak >= 990);
  REQUIRE(peak <= 1210);
  REQUIRE(trough >= 90);
  REQUIRE(trough <= 110);
  auto same = ParseUsageProfile(
      "{type: diurnal, min_cpu: 100m, max_cpu: 1100m, period: 24h, peak_at: 12h, noise: 0.1, "
      "seed: 3}",
      "p", Usage{100, 1}, "c/p", nullptr);
  bool any_noise = false;
  for (int s = 0; s < 20; ++s) {
    absl::Time t = noon + absl::Seconds(s);
    int64_t a = (*profile)->At(t, absl::ZeroDuration()).cpu_millicores;
    REQUIRE(a == (*same)->At(t, absl::ZeroDuration()).cpu_millicores);
    any_noise |= a != peak;
  }
  REQUIRE(any_noise);

  auto missing = ParseUsageProfile("{type: trace, file: nope.csv}", "p", {}, "k", f.files);
  REQUIRE(missing.status().code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(absl::StartsWith(missing.status().message(), "p.file: "));
  auto unsorted =
      ParseUsageProfile("{type: trace, points: [[5s, 1], [2s, 1]]}", "p", {}, "k", nullptr);
  REQUIRE(absl::StartsWith(unsorted.status().message(), "p.points[1]: "));
}

TEST_CASE("list pages and label selectors") {
  Fixture f;
  for (int i = 0; i < 5; ++i) {
    Pod pod = MakePod("p" + std::to_string(i), "n2", 1, 1);
    (*pod.mutable_labels())["app"] = i % 2 == 0 ? "even" : "odd";
    REQUIRE(f.cluster->CreatePod(pod, "").ok());
  }
  codeco::lms::v1::ListPodsRequest request;
  request.set_page_size(2);
  std::vector<std::string> names;
  do {
    auto page = f.cluster->ListPods(request);
    REQUIRE(page.ok());
    for (const auto& p : page->pods()) names.push_back(p.name());
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty());
  REQUIRE(names == std::vector<std::string>{"p0", "p1", "p2", "p3", "p4"});
  codeco::lms::v1::ListPodsRequest odd;
  (*odd.mutable_label_selector()->mutable_match_labels())["app"] = "odd";
  REQUIRE(f.cluster->ListPods(odd)->pods_size() == 2);
  codeco::lms::v1::ListNodesRequest nodes;
  auto* expr = nodes.mutable_label_selector()->add_match_expressions();
  expr->set_key("codeco.io/tier");
  expr->set_op(codeco::common::v1::LABEL_SELECTOR_OPERATOR_IN);
  expr->add_values("edge");
  REQUIRE(f.cluster->ListNodes(nodes)->nodes_size() == 2);
  expr->clear_values();
  expr->add_values("cloud");
  REQUIRE(f.cluster->ListNodes(nodes)->nodes_size() == 0);
  expr->set_op(codeco::common::v1::LABEL_SELECTOR_OPERATOR_UNSPECIFIED);
  auto bad = f.cluster->ListNodes(nodes);
  REQUIRE(absl::StartsWith(bad.status().message(), "label_selector.match_expressions[0].op: "));
}

TEST_CASE("a checkpoint restored in another cluster resumes the container") {
  Fixture f;
  EmulatedClusterOptions other_options;
  other_options.name = "edge-b";
  other_options.pod_start_delay = absl::Seconds(1);
  EmulatedCluster other(other_options, f.clock, &f.archives, nullptr);
  REQUIRE(other.AddNode(MakeNode("m1", 4000, 8 << 20)).ok());

  Pod job = MakePod("job", "n1", 500, 2 << 20);
  (*job.mutable_annotations())[kDurationAnnotation] = "100s";
  (*job.mutable_annotations())[kStateAnnotation] = "counter=42";
  REQUIRE(f.cluster->CreatePod(job, "").ok());
  codeco::lms::v1::CheckpointContainerRequest checkpoint;
  checkpoint.set_pod("job");
  checkpoint.set_container("main");
  checkpoint.set_request_id("cp-1");
  REQUIRE(f.cluster->CheckpointContainer(checkpoint).status().code() ==
          absl::StatusCode::kFailedPrecondition);  // still pending
  f.Advance(absl::Seconds(41));                    // running for 40 s
  auto dumped = f.cluster->CheckpointContainer(checkpoint);
  REQUIRE(dumped.ok());
  REQUIRE(dumped->node() == "n1");
  REQUIRE(dumped->size_bytes() > (2 << 20));
  REQUIRE(dumped->duration_ns() > 0);
  REQUIRE(f.cluster->CheckpointContainer(checkpoint)->archive_path() == dumped->archive_path());
  REQUIRE(f.cluster->DeletePod("job").ok());

  other.AdvanceTo(f.clock.Now());
  codeco::lms::v1::RestoreContainerRequest restore;
  *restore.mutable_pod() = MakePod("job", "m1", 500, 2 << 20);
  (*restore.mutable_pod()->mutable_annotations())[kDurationAnnotation] = "100s";
  restore.set_container("main");
  restore.set_archive_path(dumped->archive_path());
  restore.set_request_id("rs-1");
  auto restored = other.RestoreContainer(restore);
  INFO(restored.status().ToString());
  REQUIRE(restored.ok());
  REQUIRE(restored->pod().annotations().at(kStateAnnotation) == "counter=42");
  REQUIRE(restored->pod().annotations().at(kRestoredProgressAnnotation) == "40s");
  // It has 60 s left: 1 s to start, then done at 61 s.
  f.clock.Advance(absl::Seconds(60));
  other.AdvanceTo(f.clock.Now());
  REQUIRE(other.GetPod("job")->phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  f.clock.Advance(absl::Seconds(1));
  other.AdvanceTo(f.clock.Now());
  REQUIRE(other.GetPod("job")->phase() == codeco::lms::v1::POD_PHASE_SUCCEEDED);
  REQUIRE(other.RestoreContainer(restore)->pod().name() == "job");  // idempotent
  restore.set_request_id("rs-2");
  restore.set_archive_path("/nope.tar");
  REQUIRE(other.RestoreContainer(restore).status().code() == absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace codeco::codef
