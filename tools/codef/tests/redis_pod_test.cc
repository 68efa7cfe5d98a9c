// Redis pods as real redis-server processes (RedisPodProcesses, Debian's
// /usr/bin/redis-server on loopback) behind the emulated LMS: keys written at
// a pod's endpoint come back in a pod restored from a copy of its RDB or
// from its checkpoint; deleting a pod, failing its node or dropping the
// runner leaves no redis-server behind; a bad archive_path or a node too
// small refuses the restore and leaves no pod; over gRPC a restore answers
// once the data has loaded.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "checkpointer/drivers/redis_hook.h"
#include "codeco/common/clock.h"
#include "codeco/common/ports.h"
#include "codeco/common/server.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "emulated_cluster.h"
#include "federation.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "lms_service.h"
#include "redis_pod_processes.h"

namespace codeco::codef {
namespace {

namespace fs = std::filesystem;
using checkpointer::RedisConnection;
using codeco::lms::v1::Pod;

constexpr char kRedisServer[] = "/usr/bin/redis-server";

// A fresh directory for one test case, removed at the end.
struct TempDir {
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() / absl::StrCat("codef_redis_test_", getpid(), "_", ++counter);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path path;
};

// Process ids of the redis-servers whose working directory is under `dir`
// (what `pgrep redis-server` plus a look at each one's cwd would find).
std::vector<int> RedisServersUnder(const fs::path& dir) {
  std::vector<int> pids;
  const std::string exe = fs::canonical(kRedisServer).string();
  const std::string under = fs::weakly_canonical(dir).string();
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator("/proc", error)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    std::error_code e;
    if (fs::read_symlink(entry.path() / "exe", e).string() != exe || e) continue;
    std::string cwd = fs::read_symlink(entry.path() / "cwd", e).string();
    if (!e && (cwd == under || absl::StartsWith(cwd, under + "/"))) pids.push_back(pid);
  }
  return pids;
}

// True while process `pid` exists and is not a zombie.
bool Alive(int pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return false;
  size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

std::unique_ptr<RedisConnection> Connect(const std::string& endpoint) {
  size_t colon = endpoint.rfind(':');
  int port = 0;
  REQUIRE(absl::SimpleAtoi(endpoint.substr(colon + 1), &port));
  auto c = RedisConnection::Connect(endpoint.substr(0, colon), port, absl::Seconds(10));
  INFO(c.status());
  REQUIRE(c.ok());
  return *std::move(c);
}

bool Answers(const std::string& endpoint) {
  size_t colon = endpoint.rfind(':');
  int port = 0;
  if (!absl::SimpleAtoi(endpoint.substr(colon + 1), &port)) return false;
  auto c = RedisConnection::Connect(endpoint.substr(0, colon), port, absl::Seconds(2));
  return c.ok() && (*c)->Command({"PING"}).ok();
}

Pod RedisPod(const std::string& name, const std::string& node, int64_t memory = 64 << 20) {
  Pod pod;
  pod.set_name(name);
  pod.set_node_name(node);
  auto* c = pod.add_containers();
  c->set_name("cache");
  c->set_image("docker.io/library/redis:7");
  c->mutable_requests()->set_cpu_millicores(100);
  c->mutable_requests()->set_memory_bytes(memory);
  return pod;
}

codeco::lms::v1::RestoreContainerRequest RestoreRequest(const std::string& name,
                                                        const std::string& node,
                                                        const std::string& archive_path,
                                                        int64_t memory = 64 << 20) {
  codeco::lms::v1::RestoreContainerRequest request;
  *request.mutable_pod() = RedisPod(name, node, memory);
  request.set_container("cache");
  request.set_archive_path(archive_path);
  return request;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Two clusters ("a", "b") over one runner; the runner outlives them.
struct Harness {
  explicit Harness(int64_t b_memory = 1 << 30) : clock(absl::FromUnixSeconds(1'700'000'000)) {
    RedisPodProcessesOptions options;
    options.data_dir = dir.path.string();
    options.load_timeout = absl::Seconds(30);
    options.command_timeout = absl::Seconds(30);
    auto made = RedisPodProcesses::Create(options);
    INFO(made.status());
    REQUIRE(made.ok());
    runner = std::move(*made);
    for (const char* name : {"a", "b"}) {
      EmulatedClusterOptions cluster_options;
      cluster_options.name = name;
      auto cluster = std::make_unique<EmulatedCluster>(cluster_options, clock, &archives, nullptr,
                                                       runner.get());
      NodeSpec node;
      node.name = "n1";
      node.cpu_millicores = 4000;
      node.memory_bytes = std::string(name) == "b" ? b_memory : 1 << 30;
      REQUIRE(cluster->AddNode(node).ok());
      node.name = "n2";
      node.memory_bytes = 1 << 30;
      REQUIRE(cluster->AddNode(node).ok());
      clusters[name] = std::move(cluster);
    }
  }
  ~Harness() {
    clusters.clear();
    runner.reset();
  }
  EmulatedCluster& operator[](const std::string& name) { return *clusters.at(name); }

  // Waits (deadline 60 s) until `pod` in `cluster` is past its process's
  // load, and returns it as the cluster has it then.
  absl::StatusOr<Pod> Settle(const std::string& cluster, const std::string& pod) {
    runner->AwaitSettled(cluster, pod, absl::Now() + absl::Seconds(60));
    clusters.at(cluster)->AdvanceTo(clock.Now());
    return clusters.at(cluster)->GetPod(pod);
  }
  // Creates a Redis pod and waits until it runs; returns its endpoint.
  std::string Running(const std::string& cluster, const std::string& pod,
                      const std::string& node = "n1") {
    auto created = (*this)[cluster].CreatePod(RedisPod(pod, node), "");
    INFO(created.status());
    REQUIRE(created.ok());
    auto settled = Settle(cluster, pod);
    REQUIRE(settled.ok());
    INFO(settled->message());
    REQUIRE(settled->phase() == codeco::lms::v1::POD_PHASE_RUNNING);
    return settled->annotations().at(kEndpointAnnotation);
  }

  TempDir dir;
  SimulatedClock clock;
  InMemoryCheckpointArchiveStore archives;
  std::unique_ptr<RedisPodProcesses> runner;
  std::map<std::string, std::unique_ptr<EmulatedCluster>> clusters;
};

void WriteKeys(const std::string& endpoint, int n) {
  auto redis = Connect(endpoint);
  for (int i = 0; i < n; ++i) {
    REQUIRE(redis->Command({"SET", absl::StrCat("key-", i), absl::StrCat("value-", i)}).ok());
  }
}

void CheckKeys(const std::string& endpoint, int n) {
  auto redis = Connect(endpoint);
  REQUIRE(redis->Command({"DBSIZE"}).value() == absl::StrCat(n));
  for (int i = 0; i < n; ++i) {
    REQUIRE(redis->Command({"GET", absl::StrCat("key-", i)}).value() == absl::StrCat("value-", i));
  }
}

TEST_CASE("a Redis pod is a real redis-server and a restore from a copy of its RDB has the keys") {
  Harness h;
  const std::string endpoint = h.Running("a", "cache");
  REQUIRE(absl::StartsWith(endpoint, "127.0.0.1:"));
  REQUIRE(h["a"].GetPod("cache")->pod_ip() == "127.0.0.1");
  REQUIRE(RedisServersUnder(h.dir.path / "pods" / "a" / "cache").size() == 1);
  WriteKeys(endpoint, 200);
  REQUIRE(Connect(endpoint)->Command({"SAVE"}).ok());

  // A copy of the RDB, as a directory holding dump.rdb and as the file.
  const fs::path copy = h.dir.path / "copy";
  fs::create_directories(copy);
  fs::copy_file(h.runner->PodDirectory("a", "cache") / "dump.rdb", copy / "dump.rdb");
  const std::string before = ReadFile(copy / "dump.rdb");

  auto restored = h["b"].RestoreContainer(RestoreRequest("cache", "n1", copy.string()));
  INFO(restored.status());
  REQUIRE(restored.ok());
  REQUIRE(restored->pod().annotations().at(kRestoredFromAnnotation) == copy.string());
  REQUIRE(h.Settle("b", "cache").ok());
  auto outcome = h["b"].RestoreOutcome("cache");
  REQUIRE(outcome.ok());
  REQUIRE(outcome->pod().phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  const std::string restored_endpoint = outcome->pod().annotations().at(kEndpointAnnotation);
  REQUIRE(restored_endpoint != endpoint);
  CheckKeys(restored_endpoint, 200);

  auto from_file =
      h["b"].RestoreContainer(RestoreRequest("cache-2", "n2", (copy / "dump.rdb").string()));
  REQUIRE(from_file.ok());
  REQUIRE(h.Settle("b", "cache-2")->phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  CheckKeys(h["b"].GetPod("cache-2")->annotations().at(kEndpointAnnotation), 200);

  // Writes and saves in the restored pods never touch the source.
  WriteKeys(restored_endpoint, 300);
  REQUIRE(Connect(restored_endpoint)->Command({"SAVE"}).ok());
  REQUIRE(ReadFile(copy / "dump.rdb") == before);

  // Deleting the pods kills their servers and removes their data.
  for (const auto& [cluster, pod] : std::vector<std::pair<std::string, std::string>>{
           {"a", "cache"}, {"b", "cache"}, {"b", "cache-2"}}) {
    REQUIRE(h[cluster].DeletePod(pod).ok());
    REQUIRE_FALSE(fs::exists(h.runner->PodDirectory(cluster, pod)));
  }
  REQUIRE(RedisServersUnder(h.dir.path).empty());
  REQUIRE_FALSE(Answers(endpoint));
  REQUIRE_FALSE(Answers(restored_endpoint));
}

TEST_CASE("a checkpoint of a Redis pod is its saved RDB and restores in another cluster") {
  Harness h;
  const std::string endpoint = h.Running("a", "cache");
  WriteKeys(endpoint, 50);
  codeco::lms::v1::CheckpointContainerRequest checkpoint;
  checkpoint.set_pod("cache");
  checkpoint.set_container("cache");
  auto dumped = h["a"].CheckpointContainer(checkpoint);
  INFO(dumped.status());
  REQUIRE(dumped.ok());
  REQUIRE(dumped->archive_path() ==
          (h.dir.path / "checkpoints" / "a" / "checkpoint-cache_cache-1").string());
  REQUIRE(fs::is_regular_file(fs::path(dumped->archive_path()) / "dump.rdb"));
  REQUIRE(dumped->size_bytes() ==
          static_cast<int64_t>(fs::file_size(fs::path(dumped->archive_path()) / "dump.rdb")));
  // Later writes are not in the checkpoint.
  WriteKeys(endpoint, 80);

  REQUIRE(h["b"].RestoreContainer(RestoreRequest("cache", "n1", dumped->archive_path())).ok());
  auto settled = h.Settle("b", "cache");
  REQUIRE(settled->phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  CheckKeys(settled->annotations().at(kEndpointAnnotation), 50);
}

TEST_CASE("a bad archive_path gives an error naming it and leaves no pod") {
  Harness h;
  auto expect_refused = [&](const std::string& path, absl::StatusCode code,
                            const std::string& why) {
    INFO(path);
    auto refused = h["b"].RestoreContainer(RestoreRequest("cache", "n1", path));
    INFO(refused.status());
    REQUIRE(refused.status().code() == code);
    REQUIRE(absl::StartsWith(refused.status().message(), "archive_path " + path + ": "));
    REQUIRE(absl::StrContains(refused.status().message(), why));
    REQUIRE(absl::IsNotFound(h["b"].GetPod("cache").status()));
    REQUIRE(h["b"].GetNode("n1")->requested().memory_bytes() == 0);
  };
  const fs::path empty = h.dir.path / "empty";
  fs::create_directories(empty);
  const fs::path text = h.dir.path / "notes.txt";
  std::ofstream(text) << "not an RDB\n";
  expect_refused((h.dir.path / "missing").string(), absl::StatusCode::kNotFound,
                 "no such file or directory");
  expect_refused(empty.string(), absl::StatusCode::kNotFound, "holds no dump.rdb");
  expect_refused(text.string(), absl::StatusCode::kInvalidArgument, "not a Redis RDB file");
  expect_refused("relative/dump.rdb", absl::StatusCode::kInvalidArgument, "absolute path");

  // An RDB that redis-server cannot load: the pod goes once the load fails.
  const fs::path corrupt = h.dir.path / "corrupt";
  fs::create_directories(corrupt);
  std::ofstream(corrupt / "dump.rdb", std::ios::binary) << "REDIS0009" << std::string(64, '\xfe');
  auto restored = h["b"].RestoreContainer(RestoreRequest("cache", "n1", corrupt.string()));
  REQUIRE(restored.ok());
  REQUIRE(absl::IsNotFound(h.Settle("b", "cache").status()));
  auto outcome = h["b"].RestoreOutcome("cache");
  INFO(outcome.status());
  REQUIRE(outcome.status().code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(absl::StartsWith(outcome.status().message(), "archive_path " + corrupt.string() +
                                                           ": redis-server could not load it"));
  REQUIRE(h["b"].GetNode("n1")->requested().memory_bytes() == 0);
  REQUIRE_FALSE(fs::exists(h.runner->PodDirectory("b", "cache")));
  REQUIRE(RedisServersUnder(h.dir.path).empty());
  REQUIRE(fs::file_size(corrupt / "dump.rdb") == 73);  // the source as it was
}

TEST_CASE("a node too small refuses a Redis restore and starts nothing") {
  Harness h(/*b_memory=*/32 << 20);
  const std::string endpoint = h.Running("a", "cache");
  REQUIRE(Connect(endpoint)->Command({"SAVE"}).ok());
  auto refused = h["b"].RestoreContainer(
      RestoreRequest("cache", "n1", h.runner->PodDirectory("a", "cache").string(), 1 << 30));
  REQUIRE(refused.status().code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(absl::StrContains(refused.status().message(), "node n1 lacks memory"));
  REQUIRE(absl::IsNotFound(h["b"].GetPod("cache").status()));
  REQUIRE_FALSE(fs::exists(h.runner->PodDirectory("b", "cache")));
  REQUIRE(RedisServersUnder(h.dir.path / "pods" / "b").empty());
}

TEST_CASE("a failed node kills its Redis servers and the runner kills the rest when it goes") {
  auto h = std::make_unique<Harness>();
  const fs::path dir = h->dir.path;
  const std::string on_n1 = h->Running("a", "one", "n1");
  const std::string on_n2 = h->Running("a", "two", "n2");
  const int pid_one = h->runner->PidForTest("a", "one");
  REQUIRE(Alive(pid_one));
  REQUIRE(h->runner->Poll("a", "one").state == PodProcessStatus::State::kReady);
  REQUIRE((*h)["a"].FailNode("n1").value() == 1);
  REQUIRE((*h)["a"].GetPod("one")->phase() == codeco::lms::v1::POD_PHASE_FAILED);
  REQUIRE_FALSE(Alive(pid_one));
  REQUIRE_FALSE(Answers(on_n1));
  REQUIRE(fs::exists(h->runner->PodDirectory("a", "one")));  // kept until the pod is deleted
  REQUIRE(Answers(on_n2));
  REQUIRE(RedisServersUnder(dir).size() == 1);

  // Codef shutting down: the clusters go, then the runner, which kills
  // what is left (a server still loading included) and removes its data.
  REQUIRE((*h)["a"].CreatePod(RedisPod("three", "n2"), "").ok());
  h->clusters.clear();
  h->runner.reset();
  REQUIRE(RedisServersUnder(dir).empty());
  REQUIRE_FALSE(Answers(on_n2));
  REQUIRE(fs::is_empty(dir / "pods" / "a"));
}

TEST_CASE("a new runner kills the redis-servers a killed codef left in its directory") {
  TempDir dir;
  // A server in a pod directory that no runner owns, as a killed codef leaves it.
  const fs::path pod_dir = dir.path / "pods" / "a" / "orphan";
  absl::StatusOr<int> port = FreePort("127.0.0.1");
  REQUIRE(port.ok());
  auto orphan = checkpointer::RedisServer::Start(
      kRedisServer, pod_dir, checkpointer::RedisInstance{.port = *port}, absl::Seconds(30));
  REQUIRE(orphan.ok());
  const int pid = (*orphan)->pid();
  REQUIRE(Alive(pid));
  RedisPodProcessesOptions options;
  options.data_dir = dir.path.string();
  auto runner = RedisPodProcesses::Create(options);
  REQUIRE(runner.ok());
  // SIGKILL is delivered at once but the kernel needs a moment to tear the
  // process down.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (Alive(pid) && absl::Now() < deadline) std::this_thread::yield();
  REQUIRE_FALSE(Alive(pid));
  REQUIRE_FALSE(fs::exists(pod_dir));
  orphan->reset();  // reaps it
}

constexpr char kScenario[] = R"(
name: redis-pods
federation:
  hub: {name: hub}
  clusters:
    - name: a
      nodes: [{name: n1, capacity: {cpu: 4, memory: 4Gi}}]
    - name: b
      nodes: [{name: n1, capacity: {cpu: 4, memory: 4Gi}}]
links:
  matrix:
    - {between: [hub, a], rtt: 1ms}
    - {between: [hub, b], rtt: 1ms}
    - {between: [a, b], rtt: 1ms}
)";

// Both clusters' LMS over real gRPC, as codef serves them.
struct GrpcHarness {
  GrpcHarness() : clock(absl::FromUnixSeconds(1'700'000'000)) {
    RedisPodProcessesOptions options;
    options.data_dir = dir.path.string();
    auto made = RedisPodProcesses::Create(options);
    REQUIRE(made.ok());
    runner = std::move(*made);
    auto scenario = ParseScenario(kScenario, "");
    INFO(scenario.status());
    REQUIRE(scenario.ok());
    auto created = Federation::Create(*scenario, clock, &links, &archives, nullptr, runner.get());
    REQUIRE(created.ok());
    federation = std::move(*created);
    for (std::string name : {"a", "b"}) {
      services.push_back(
          std::make_unique<EmulatedLmsService>(federation->FindLms(name), runner.get()));
      GrpcServerOptions server_options;
      server_options.service = "codef-lms";
      server_options.insecure = true;
      server_options.services = {services.back().get()};
      auto server = GrpcServer::Start(server_options);
      REQUIRE(server.ok());
      stubs[name] = codeco::lms::v1::LmsService::NewStub(
          grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
      servers.push_back(std::move(*server));
    }
  }
  ~GrpcHarness() {
    for (auto& server : servers) server->Shutdown(absl::Seconds(1));
  }

  TempDir dir;
  SimulatedClock clock;
  InMemoryLinkControl links;
  InMemoryCheckpointArchiveStore archives;
  std::unique_ptr<RedisPodProcesses> runner;
  std::unique_ptr<Federation> federation;
  std::vector<std::unique_ptr<EmulatedLmsService>> services;
  std::vector<std::unique_ptr<GrpcServer>> servers;
  std::map<std::string, std::unique_ptr<codeco::lms::v1::LmsService::Stub>> stubs;
};

TEST_CASE("over gRPC a Redis restore answers once its data has loaded") {
  GrpcHarness h;
  grpc::ClientContext create_context;
  codeco::lms::v1::CreatePodRequest create;
  *create.mutable_pod() = RedisPod("cache", "n1");
  codeco::lms::v1::CreatePodResponse created;
  REQUIRE(h.stubs["a"]->CreatePod(&create_context, create, &created).ok());
  h.runner->AwaitSettled("a", "cache", absl::Now() + absl::Seconds(60));
  grpc::ClientContext get_context;
  codeco::lms::v1::GetPodRequest get;
  get.set_name("cache");
  codeco::lms::v1::GetPodResponse got;
  REQUIRE(h.stubs["a"]->GetPod(&get_context, get, &got).ok());
  REQUIRE(got.pod().phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  const std::string endpoint = got.pod().annotations().at(kEndpointAnnotation);
  WriteKeys(endpoint, 100);
  REQUIRE(Connect(endpoint)->Command({"SAVE"}).ok());
  const fs::path copy = h.dir.path / "copy";
  fs::create_directories(copy);
  fs::copy_file(h.runner->PodDirectory("a", "cache") / "dump.rdb", copy / "dump.rdb");

  grpc::ClientContext restore_context;
  restore_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  codeco::lms::v1::RestoreContainerResponse restored;
  grpc::Status status = h.stubs["b"]->RestoreContainer(
      &restore_context, RestoreRequest("cache", "n1", copy.string()), &restored);
  INFO(status.error_message());
  REQUIRE(status.ok());
  REQUIRE(restored.pod().phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  CheckKeys(restored.pod().annotations().at(kEndpointAnnotation), 100);

  // A dump redis-server cannot load: the error, and no pod.
  const fs::path corrupt = h.dir.path / "corrupt";
  fs::create_directories(corrupt);
  std::ofstream(corrupt / "dump.rdb", std::ios::binary) << "REDIS0009" << std::string(64, '\xfe');
  grpc::ClientContext bad_context;
  status = h.stubs["b"]->RestoreContainer(
      &bad_context, RestoreRequest("cache-2", "n1", corrupt.string()), &restored);
  REQUIRE(status.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  REQUIRE(absl::StartsWith(status.error_message(), "archive_path " + corrupt.string() + ": "));
  grpc::ClientContext list_context;
  codeco::lms::v1::ListPodsResponse pods;
  REQUIRE(h.stubs["b"]->ListPods(&list_context, {}, &pods).ok());
  REQUIRE(pods.pods_size() == 1);
  REQUIRE(pods.pods(0).name() == "cache");
}

}  // namespace
}  // namespace codeco::codef
