// The emulated LMS core with a fake PodProcessRunner: which images are
// Redis, how a pod backed by a process moves Pending -> Running (or Failed),
// that a terminal phase stops the process and DeletePod removes it, and how
// a Redis restore ends (Running, refused before starting, or no pod left
// with the error naming archive_path). The real runner is tested in
// redis_pod_test.cc.
#include "pod_processes.h"

#include <catch2/catch.hpp>
#include <map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codeco/common/clock.h"
#include "emulated_cluster.h"

namespace codeco::codef {
namespace {

using codeco::common::v1::WATCH_EVENT_TYPE_DELETED;
using codeco::lms::v1::Pod;
using State = PodProcessStatus::State;

// Records what the cluster asks; the test decides when a process is ready.
class FakeRunner final : public PodProcessRunner {
 public:
  absl::StatusOr<std::string> Start(const PodProcessSpec& spec) override {
    if (!start_error.ok()) return start_error;
    started.push_back(spec);
    status[spec.pod] = PodProcessStatus{State::kStarting, ""};
    return absl::StrCat("127.0.0.1:", 7000 + started.size());
  }
  PodProcessStatus Poll(const std::string&, const std::string& pod) override {
    auto it = status.find(pod);
    return it == status.end() ? PodProcessStatus{} : it->second;
  }
  void AwaitSettled(const std::string&, const std::string&, absl::Time) override {}
  void Stop(const std::string&, const std::string& pod) override {
    stopped.push_back(pod);
    auto it = status.find(pod);
    if (it != status.end() && it->second.state != State::kFailed) it->second.state = State::kGone;
  }
  void Remove(const std::string&, const std::string& pod) override {
    removed.push_back(pod);
    status.erase(pod);
  }
  absl::StatusOr<PodProcessDump> Dump(const std::string&, const std::string&,
                                      const std::string& name) override {
    dumps.push_back(name);
    return PodProcessDump{
        .path = "/dumps/" + name, .size_bytes = 4096, .took = absl::Milliseconds(3)};
  }

  absl::Status start_error;
  std::vector<PodProcessSpec> started;
  std::map<std::string, PodProcessStatus> status;  // by pod
  std::vector<std::string> stopped;
  std::vector<std::string> removed;
  std::vector<std::string> dumps;
};

Pod MakePod(const std::string& name, const std::string& node, const std::string& image,
            int64_t memory = 64 << 20) {
  Pod pod;
  pod.set_name(name);
  pod.set_node_name(node);
  auto* c = pod.add_containers();
  c->set_name("main");
  c->set_image(image);
  c->mutable_requests()->set_cpu_millicores(100);
  c->mutable_requests()->set_memory_bytes(memory);
  return pod;
}

struct Fixture {
  Fixture() : clock(absl::FromUnixSeconds(1'700'000'000)) {
    EmulatedClusterOptions options;
    options.name = "edge";
    options.pod_start_delay = absl::Seconds(1);
    cluster = std::make_unique<EmulatedCluster>(options, clock, &archives, nullptr, &runner);
    cluster->SetEventListener([this](const WatchEvent& e) { events.push_back(e); });
    NodeSpec node;
    node.name = "n1";
    node.cpu_millicores = 2000;
    node.memory_bytes = 1 << 30;
    REQUIRE(cluster->AddNode(node).ok());
    node.name = "small";
    node.memory_bytes = 32 << 20;
    REQUIRE(cluster->AddNode(node).ok());
  }
  void Advance(absl::Duration d) {
    clock.Advance(d);
    cluster->AdvanceTo(clock.Now());
  }
  int64_t RequestedMemory(const std::string& node) {
    return cluster->GetNode(node)->requested().memory_bytes();
  }
  codeco::lms::v1::RestoreContainerRequest Restore(const std::string& name, const std::string& node,
                                                   int64_t memory) {
    codeco::lms::v1::RestoreContainerRequest request;
    *request.mutable_pod() = MakePod(name, node, "docker.io/library/redis:7.2", memory);
    request.set_container("main");
    request.set_archive_path("/srv/pulled/cache");
    return request;
  }

  SimulatedClock clock;
  InMemoryCheckpointArchiveStore archives;
  FakeRunner runner;
  std::unique_ptr<EmulatedCluster> cluster;
  std::vector<WatchEvent> events;
};

TEST_CASE("Redis images are told by the repository of their last path component") {
  for (const char* image : {"redis", "redis:7", "redis:7.2-alpine", "docker.io/library/redis:7.2",
                            "registry.local:5000/mirror/redis", "ghcr.io/x/redis@sha256:0123abcd",
                            "registry.local:5000/redis:7@sha256:0123abcd"}) {
    INFO(image);
    REQUIRE(IsRedisImage(image));
  }
  for (const char* image : {"", "busybox", "redis-stack:7", "myredis", "bitnami/redis-cluster:7",
                            "redis/tools:1", "registry.local:5000", "rediss"}) {
    INFO(image);
    REQUIRE_FALSE(IsRedisImage(image));
  }
}

TEST_CASE("a Redis pod starts its process and runs once it has loaded") {
  Fixture f;
  Pod other = MakePod("web", "n1", "busybox");
  (*other.mutable_annotations())[kEndpointAnnotation] = "10.9.9.9:1";  // not for users to set
  auto web = f.cluster->CreatePod(other, "");
  REQUIRE(web.ok());
  REQUIRE_FALSE(web->annotations().contains(kEndpointAnnotation));
  REQUIRE(f.runner.started.empty());

  Pod cache = MakePod("cache", "n1", "redis:7");
  auto* port = cache.mutable_containers(0)->add_ports();
  port->set_port(6379);
  port->set_reach_port(1);  // the runtime's to say, not the creator's
  auto created = f.cluster->CreatePod(cache, "");
  REQUIRE(created.ok());
  REQUIRE(created->containers(0).ports(0).reach_port() == 0);
  REQUIRE(f.runner.started.size() == 1);
  const PodProcessSpec& spec = f.runner.started[0];
  REQUIRE(spec.cluster == "edge");
  REQUIRE(spec.pod == "cache");
  REQUIRE(spec.container == "main");
  REQUIRE(spec.image == "redis:7");
  REQUIRE(spec.state_source.empty());
  REQUIRE(created->annotations().at(kEndpointAnnotation) == "127.0.0.1:7001");
  REQUIRE(created->phase() == codeco::lms::v1::POD_PHASE_PENDING);

  // The start delay is not what starts it: the load is.
  f.Advance(absl::Seconds(5));
  REQUIRE(f.cluster->GetPod("web")->phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  REQUIRE(f.cluster->GetPod("cache")->phase() == codeco::lms::v1::POD_PHASE_PENDING);
  f.runner.status["cache"].state = State::kReady;
  f.Advance(absl::Milliseconds(10));
  auto running = f.cluster->GetPod("cache");
  REQUIRE(running->phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  REQUIRE(running->pod_ip() == "127.0.0.1");
  // Its container port is reached at the process's own port.
  REQUIRE(running->containers(0).ports(0).port() == 6379);
  REQUIRE(running->containers(0).ports(0).reach_port() == 7001);
  REQUIRE(running->start_time().seconds() == absl::ToUnixSeconds(f.clock.Now()));
}

TEST_CASE("a Redis pod whose process fails to load is Failed with the reason") {
  Fixture f;
  REQUIRE(f.cluster->CreatePod(MakePod("cache", "n1", "redis"), "").ok());
  REQUIRE(f.RequestedMemory("n1") == 64 << 20);
  f.runner.status["cache"] = PodProcessStatus{State::kFailed, "port 7001 in use"};
  f.Advance(absl::Milliseconds(10));
  auto failed = f.cluster->GetPod("cache");
  REQUIRE(failed->phase() == codeco::lms::v1::POD_PHASE_FAILED);
  REQUIRE(failed->message() == "redis-server did not start: port 7001 in use");
  REQUIRE(f.RequestedMemory("n1") == 0);
  REQUIRE(f.runner.stopped == std::vector<std::string>{"cache"});
}

TEST_CASE("a Redis pod whose process cannot start is refused and leaves nothing") {
  Fixture f;
  f.runner.start_error = absl::FailedPreconditionError("/usr/bin/redis-server is not executable");
  auto refused = f.cluster->CreatePod(MakePod("cache", "n1", "redis:7"), "req-1");
  REQUIRE(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(refused.status().message() ==
          "pod.containers[0]: cannot start redis-server: /usr/bin/redis-server is not executable");
  REQUIRE(absl::IsNotFound(f.cluster->GetPod("cache").status()));
  REQUIRE(f.RequestedMemory("n1") == 0);
  // Not cached: the same request succeeds once the runner can start it.
  f.runner.start_error = absl::OkStatus();
  REQUIRE(f.cluster->CreatePod(MakePod("cache", "n1", "redis:7"), "req-1").ok());
}

TEST_CASE("a failed node stops its Redis pods and DeletePod removes them") {
  Fixture f;
  REQUIRE(f.cluster->CreatePod(MakePod("a", "n1", "redis"), "").ok());
  REQUIRE(f.cluster->CreatePod(MakePod("b", "n1", "redis"), "").ok());
  f.runner.status["a"].state = State::kReady;
  f.runner.status["b"].state = State::kReady;
  f.Advance(absl::Milliseconds(10));
  REQUIRE(f.cluster->DeletePod("a").ok());
  REQUIRE(f.runner.removed == std::vector<std::string>{"a"});
  REQUIRE(f.cluster->FailNode("n1").value() == 1);
  REQUIRE(f.runner.stopped == std::vector<std::string>{"b"});
  REQUIRE(f.cluster->GetPod("b")->phase() == codeco::lms::v1::POD_PHASE_FAILED);
  REQUIRE(f.cluster->DeletePod("b").ok());
  REQUIRE(f.runner.removed == std::vector<std::string>{"a", "b"});
}

TEST_CASE("a Redis pod gets one process and a second Redis container is refused") {
  Fixture f;
  Pod pod = MakePod("cache", "n1", "redis:7");
  auto* second = pod.add_containers();
  second->set_name("replica");
  second->set_image("redis:7");
  auto refused = f.cluster->CreatePod(pod, "");
  REQUIRE(absl::IsInvalidArgument(refused.status()));
  REQUIRE(absl::StartsWith(refused.status().message(), "pod.containers[1].image: "));
  REQUIRE(f.runner.started.empty());
}

TEST_CASE("a Redis restore starts on the archive and turns Running once loaded") {
  Fixture f;
  auto request = f.Restore("cache", "n1", 64 << 20);
  request.set_request_id("restore-1");
  (*request.mutable_pod()->mutable_annotations())[kEndpointAnnotation] = "127.0.0.1:1";  // source's
  auto restored = f.cluster->RestoreContainer(request);
  REQUIRE(restored.ok());
  REQUIRE(f.runner.started.size() == 1);
  REQUIRE(f.runner.started[0].state_source == "/srv/pulled/cache");
  REQUIRE(restored->pod().phase() == codeco::lms::v1::POD_PHASE_PENDING);
  REQUIRE(restored->pod().annotations().at(kEndpointAnnotation) == "127.0.0.1:7001");
  REQUIRE(restored->pod().annotations().at(kRestoredFromAnnotation) == "/srv/pulled/cache");
  REQUIRE(f.cluster->RestoreOutcome("cache")->pod().phase() == codeco::lms::v1::POD_PHASE_PENDING);

  f.clock.Advance(absl::Milliseconds(1500));  // the load took 1.5 s
  f.runner.status["cache"].state = State::kReady;
  f.cluster->AdvanceTo(f.clock.Now());
  auto outcome = f.cluster->RestoreOutcome("cache");
  REQUIRE(outcome.ok());
  REQUIRE(outcome->pod().phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  REQUIRE(outcome->duration_ns() == 1'500'000'000);
  // The same request_id answers the pod as it is now.
  auto again = f.cluster->RestoreContainer(request);
  REQUIRE(again.ok());
  REQUIRE(again->pod().phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  REQUIRE(f.runner.started.size() == 1);
}

TEST_CASE("a Redis restore that cannot load leaves no pod and names archive_path") {
  Fixture f;
  auto request = f.Restore("cache", "n1", 64 << 20);
  request.set_request_id("restore-1");
  REQUIRE(f.cluster->RestoreContainer(request).ok());
  REQUIRE(f.RequestedMemory("n1") == 64 << 20);
  f.runner.status["cache"] = PodProcessStatus{State::kFailed, "Short read or OOM loading DB"};
  f.Advance(absl::Milliseconds(10));
  REQUIRE(absl::IsNotFound(f.cluster->GetPod("cache").status()));
  bool deleted = false;
  for (const WatchEvent& e : f.events) {
    deleted |= e.pod.has_value() && e.pod->name() == "cache" && e.type == WATCH_EVENT_TYPE_DELETED;
  }
  REQUIRE(deleted);
  REQUIRE(f.RequestedMemory("n1") == 0);
  REQUIRE(f.runner.removed == std::vector<std::string>{"cache"});
  auto outcome = f.cluster->RestoreOutcome("cache");
  REQUIRE(outcome.status().code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(outcome.status().message() ==
          "archive_path /srv/pulled/cache: redis-server could not load it: Short read or OOM "
          "loading DB");

  // Errors found at once name archive_path too, and leave nothing.
  f.runner.start_error = absl::NotFoundError("the directory holds no dump.rdb");
  auto missing = f.cluster->RestoreContainer(request);
  REQUIRE(absl::IsNotFound(missing.status()));
  REQUIRE(missing.status().message() ==
          "archive_path /srv/pulled/cache: the directory holds no dump.rdb");
  REQUIRE(absl::IsNotFound(f.cluster->GetPod("cache").status()));
  REQUIRE(f.RequestedMemory("n1") == 0);
}

TEST_CASE("a Redis restore on a full node is refused before any process starts") {
  Fixture f;
  auto refused = f.cluster->RestoreContainer(f.Restore("cache", "small", 64 << 20));
  REQUIRE(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(absl::StrContains(refused.status().message(), "node small lacks memory"));
  REQUIRE(f.runner.started.empty());
  REQUIRE(absl::IsNotFound(f.cluster->GetPod("cache").status()));
}

TEST_CASE("a Redis restore from an image reference is refused") {
  Fixture f;
  auto request = f.Restore("cache", "n1", 64 << 20);
  request.set_image_reference("registry.local/checkpoints/cache:1");
  auto refused = f.cluster->RestoreContainer(request);
  REQUIRE(absl::IsInvalidArgument(refused.status()));
  REQUIRE(absl::StartsWith(refused.status().message(), "image_reference: "));
  REQUIRE(f.runner.started.empty());
}

TEST_CASE("a checkpoint of a Redis container is the runner's dump") {
  Fixture f;
  REQUIRE(f.cluster->CreatePod(MakePod("cache", "n1", "redis"), "").ok());
  codeco::lms::v1::CheckpointContainerRequest request;
  request.set_pod("cache");
  request.set_container("main");
  REQUIRE(absl::IsFailedPrecondition(f.cluster->CheckpointContainer(request).status()));
  f.runner.status["cache"].state = State::kReady;
  f.Advance(absl::Milliseconds(10));
  auto dumped = f.cluster->CheckpointContainer(request);
  REQUIRE(dumped.ok());
  REQUIRE(f.runner.dumps == std::vector<std::string>{"checkpoint-cache_main-1"});
  REQUIRE(dumped->archive_path() == "/dumps/checkpoint-cache_main-1");
  REQUIRE(dumped->size_bytes() == 4096);
  REQUIRE(dumped->duration_ns() == 3'000'000);
  REQUIRE(dumped->node() == "n1");
}

TEST_CASE("without a runner Redis pods stay bookkeeping") {
  SimulatedClock clock(absl::FromUnixSeconds(1'700'000'000));
  InMemoryCheckpointArchiveStore archives;
  EmulatedClusterOptions options;
  options.name = "edge";
  options.pod_start_delay = absl::ZeroDuration();
  EmulatedCluster cluster(options, clock, &archives, nullptr);
  NodeSpec node;
  node.name = "n1";
  node.cpu_millicores = 1000;
  node.memory_bytes = 1 << 30;
  REQUIRE(cluster.AddNode(node).ok());
  auto created = cluster.CreatePod(MakePod("cache", "n1", "redis:7"), "");
  REQUIRE(created.ok());
  REQUIRE_FALSE(created->annotations().contains(kEndpointAnnotation));
  cluster.AdvanceTo(clock.Now());
  REQUIRE(cluster.GetPod("cache")->phase() == codeco::lms::v1::POD_PHASE_RUNNING);
}

}  // namespace
}  // namespace codeco::codef
