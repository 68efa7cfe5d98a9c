// Stateful migration end to end on the five-site federation (`codecoctl up`,
// with Debian's docker-registry): a Redis pod of CODEF (a real redis-server)
// moves ten times between two clusters with `codecoctl migrate` while a
// client writes to it; every write Redis acknowledged must be there at the
// end, every key with its value. Then a bad image reference and a full
// destination fail with a clear error while the source serves on. Timings
// are reported (WARN), never asserted. Last, a node failure under a
// stateful Redis: the hub restores the newest backup of its state elsewhere.

#include <catch2/catch.hpp>

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "checkpointer/drivers/redis_hook.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "federation_util.h"
#include "grpcpp/create_channel.h"
#include "nlohmann/json.hpp"
#include "process.h"

namespace {

using codeco::checkpointer::ParseRedisEndpoint;
using codeco::checkpointer::RedisConnection;
using codeco::checkpointer::RedisInstance;
using codeco::testing::CommandResult;
using codeco::testing::CtlBinary;
using codeco::testing::FederationHome;
using codeco::testing::FiveSiteScenario;
using codeco::testing::RunCommand;
namespace lms = codeco::lms::v1;

std::unique_ptr<lms::LmsService::Stub> Lms(const std::string& address) {
  return lms::LmsService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

// The pod `name` of the cluster behind `address`, if it exists.
std::optional<lms::Pod> GetPod(const std::string& address, const std::string& name) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  lms::GetPodRequest request;
  request.set_name(name);
  lms::GetPodResponse response;
  if (!Lms(address)->GetPod(&context, request, &response).ok()) return std::nullopt;
  return response.pod();
}

// The first node of the cluster behind `address`.
std::string FirstNode(const std::string& address) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  lms::ListNodesResponse nodes;
  REQUIRE(Lms(address)->ListNodes(&context, lms::ListNodesRequest(), &nodes).ok());
  REQUIRE(nodes.nodes_size() > 0);
  return nodes.nodes(0).name();
}

std::string Endpoint(const lms::Pod& pod) {
  return pod.annotations().at("codef.codeco.io/endpoint");
}

// Waits until pod `name` of `address` runs; its state.
lms::Pod WaitRunning(const std::string& address, const std::string& name) {
  for (absl::Time end = absl::Now() + absl::Minutes(1); absl::Now() < end;) {
    std::optional<lms::Pod> pod = GetPod(address, name);
    if (pod && pod->phase() == lms::POD_PHASE_RUNNING) return *pod;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  FAIL("pod " << name << " never ran");
  return {};
}

// A connection to the Redis of `pod` (its CODEF endpoint), or null.
std::unique_ptr<RedisConnection> ConnectTo(const lms::Pod& pod) {
  absl::StatusOr<RedisInstance> at = ParseRedisEndpoint(Endpoint(pod), "endpoint");
  if (!at.ok()) return nullptr;
  auto made = RedisConnection::Connect(at->host, at->port, absl::Seconds(60));
  return made.ok() ? *std::move(made) : nullptr;
}

// What the multi-cluster service name `name` resolves to first, as an
// outside client asks (`codecoctl get endpoints NAME -o json`): the ready
// endpoint's cluster and address, or nullopt while there is none.
std::optional<std::pair<std::string, std::string>> Resolve(const std::string& name) {
  CommandResult got =
      RunCommand({CtlBinary(), "get", "endpoints", name, "-o", "json"}, absl::Seconds(20));
  if (got.exit_code != 0) return std::nullopt;
  nlohmann::json all = nlohmann::json::parse(got.output, nullptr, /*allow_exceptions=*/false);
  if (!all.is_object() || !all.contains("endpoints")) return std::nullopt;
  for (const nlohmann::json& e : all["endpoints"]) {
    if (!e.value("ready", false) || !e.contains("addresses") || e["addresses"].empty()) continue;
    return std::make_pair(e.value("cluster", ""), e["addresses"][0].get<std::string>());
  }
  return std::nullopt;
}

// A client writing <prefix>N = v-N for N = 0, 1, ... on its own thread; a
// write that fails (fenced, then its connection dropped at the cut-over) is
// retried on a new connection from `connect` (null: nowhere to write now,
// asked again shortly). Stopped however the test ends (a failed REQUIRE
// included).
class Writer {
 public:
  Writer(std::function<std::unique_ptr<RedisConnection>()> connect, std::string prefix)
      : thread_([this, connect = std::move(connect), prefix = std::move(prefix)] {
          std::unique_ptr<RedisConnection> c;
          int next = 0;
          while (!stop_.load()) {
            if (c == nullptr) c = connect();
            if (c == nullptr) {
              std::this_thread::sleep_for(std::chrono::milliseconds(20));
              continue;
            }
            if (c->Command({"SET", absl::StrCat(prefix, next), absl::StrCat("v-", next)}).ok()) {
              acknowledged_.store(++next);
            } else {
              c.reset();
            }
          }
        }) {}
  ~Writer() { Stop(); }
  // Writes Redis acknowledged so far.
  int acknowledged() const { return acknowledged_.load(); }
  // Stops the client; the writes acknowledged.
  int Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    return acknowledged_.load();
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> acknowledged_{0};
  std::thread thread_;  // last: it starts once the counters exist
};

TEST_CASE("Ten migrations of a Redis between clusters under a write load lose no acknowledged write") {
  FederationHome home;
  CommandResult up = RunCommand(
      {CtlBinary(), "up", "--scenario", FiveSiteScenario(), "--no-prometheus"}, absl::Minutes(3));
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  REQUIRE(absl::StrContains(up.output, "Registry:"));
  std::map<std::string, std::string> lms_of = codeco::testing::LmsEndpoints(up.output);
  REQUIRE(lms_of.count("nantes") == 1);
  REQUIRE(lms_of.count("lille") == 1);
  const std::map<std::string, std::string> node_of = {{"nantes", FirstNode(lms_of["nantes"])},
                                                      {"lille", FirstNode(lms_of["lille"])}};

  // A Redis pod in nantes, as SWM would create it.
  {
    lms::CreatePodRequest create;
    lms::Pod* pod = create.mutable_pod();
    pod->set_name("cache");
    pod->set_node_name(node_of.at("nantes"));
    lms::Container* c = pod->add_containers();
    c->set_name("redis");
    c->set_image("redis:7");
    c->mutable_requests()->set_cpu_millicores(100);
    c->mutable_requests()->set_memory_bytes(128 << 20);
    create.set_request_id("cache-1");
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    lms::CreatePodResponse created;
    grpc::Status status = Lms(lms_of["nantes"])->CreatePod(&context, create, &created);
    INFO(status.error_message());
    REQUIRE(status.ok());
  }
  WaitRunning(lms_of["nantes"], "cache");

  // The client writes w-N wherever the pod runs now.
  Writer writer(
      [&]() -> std::unique_ptr<RedisConnection> {
        for (const std::string cluster : {"nantes", "lille"}) {
          std::optional<lms::Pod> pod = GetPod(lms_of[cluster], "cache");
          if (pod && pod->phase() == lms::POD_PHASE_RUNNING) return ConnectTo(*pod);
        }
        return nullptr;
      },
      "w-");

  std::string from = "nantes", to = "lille";
  for (int i = 0; i < 10; ++i) {
    const absl::Time start = absl::Now();
    CommandResult moved =
        RunCommand({CtlBinary(), "migrate", "cache", "--from", from, "--to", to, "--node",
                    node_of.at(to)},
                   absl::Minutes(3));
    INFO("migration " << i << ": " << moved.output);
    REQUIRE(moved.exit_code == 0);
    REQUIRE(absl::StrContains(moved.output, "100%"));
    REQUIRE(absl::StrContains(moved.output, "moved cache/redis from " + from + " to " + to));
    WARN("migration " << i << " " << from << " -> " << to << ": "
                      << absl::ToDoubleSeconds(absl::Now() - start) << " s, "
                      << writer.acknowledged() << " writes acknowledged so far");
    REQUIRE_FALSE(GetPod(lms_of[from], "cache").has_value());
    std::swap(from, to);
  }
  const int written = writer.Stop();
  REQUIRE(written > 100);

  // Every acknowledged write, with its value, where the pod runs now.
  const lms::Pod pod = WaitRunning(lms_of[from], "cache");
  absl::StatusOr<RedisInstance> at = ParseRedisEndpoint(Endpoint(pod), "endpoint");
  REQUIRE(at.ok());
  auto c = RedisConnection::Connect(at->host, at->port, absl::Seconds(10));
  REQUIRE(c.ok());
  int missing = 0;
  for (int i = 0; i < written; ++i) {
    absl::StatusOr<std::string> value = (*c)->Command({"GET", absl::StrCat("w-", i)});
    if (!value.ok() || *value != absl::StrCat("v-", i)) ++missing;
  }
  CHECK(missing == 0);
  WARN(written << " acknowledged writes over ten migrations, " << missing << " lost");

  // A destination node that cannot hold the pod: refused, named, the source serves on.
  CommandResult full = RunCommand({CtlBinary(), "migrate", "cache", "--from", from, "--to",
                                   from == "nantes" ? "lille" : "nantes", "--node", "no-such-node"},
                                  absl::Minutes(2));
  INFO(full.output);
  CHECK(full.exit_code != 0);
  CHECK(absl::StrContains(full.output, "no-such-node"));
  CHECK(absl::StrContains(full.output, "serves on"));
  CHECK((*c)->Command({"SET", "after-failure", "1"}).ok());

  // A bad repository: refused at once, naming the field.
  CommandResult bad = RunCommand({CtlBinary(), "migrate", "cache", "--from", from, "--to",
                                  from == "nantes" ? "lille" : "nantes", "--node",
                                  node_of.at(from == "nantes" ? "lille" : "nantes"),
                                  "--repository", "Not A Registry"},
                                 absl::Minutes(1));
  INFO(bad.output);
  CHECK(bad.exit_code != 0);
  CHECK(absl::StrContains(bad.output, "target_repository"));
  CHECK((*c)->Command({"GET", "after-failure"}).ok());
  RunCommand({CtlBinary(), "down"}, absl::Minutes(1));
}

// Where ACM says `service` of `app` runs: (cluster, pod), from `codecoctl
// describe app` (nullopt when it shows no such placement).
std::optional<std::pair<std::string, std::string>> PlacedAt(const std::string& app,
                                                            const std::string& service) {
  CommandResult describe =
      RunCommand({CtlBinary(), "describe", "app", app}, absl::Seconds(30));
  std::smatch m;
  if (!std::regex_search(describe.output, m,
                         std::regex("\\n  " + service + " +(\\S+) +\\S+ +(\\S+) +(yes|no)"))) {
    return std::nullopt;
  }
  return std::make_pair(m[1].str(), m[2].str());
}

// `codecoctl up` with `settings` (--set values), the six clusters ready and
// examples/cams/session-cache.yaml applied; each cluster's LMS endpoint.
std::map<std::string, std::string> UpWithSessionCache(const std::vector<std::string>& settings) {
  std::vector<std::string> command = {CtlBinary(), "up", "--scenario", FiveSiteScenario(),
                                      "--no-prometheus"};
  for (const std::string& s : settings) command.insert(command.end(), {"--set", s});
  CommandResult up = RunCommand(command, absl::Minutes(3));
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  std::map<std::string, std::string> lms_of = codeco::testing::LmsEndpoints(up.output);
  REQUIRE(codeco::testing::WaitUntilClustersReady(6));
  CommandResult apply = RunCommand(
      {CtlBinary(), "apply", "-f",
       std::string(CODECO_SOURCE_DIR) + "/examples/cams/session-cache.yaml", "--wait"},
      absl::Minutes(2));
  INFO(apply.output);
  REQUIRE(apply.exit_code == 0);
  return lms_of;
}

TEST_CASE("SWM moves a stateful Redis with its data under a write load and ACM follows it") {
  FederationHome home;
  std::map<std::string, std::string> lms_of = UpWithSessionCache({});
  std::optional<std::pair<std::string, std::string>> at = PlacedAt("session-cache", "sessions");
  REQUIRE(at.has_value());
  const std::string first_cluster = at->first;

  // The client finds the Redis by its multi-cluster service name, as an
  // application would: during a move the copy at the target is not used
  // before the plan names it.
  auto connect = [&]() -> std::unique_ptr<RedisConnection> {
    std::optional<std::pair<std::string, std::string>> where = Resolve("sessions.session-cache");
    if (!where) return nullptr;
    absl::StatusOr<RedisInstance> at = ParseRedisEndpoint(where->second, "address");
    if (!at.ok()) return nullptr;
    auto made = RedisConnection::Connect(at->host, at->port, absl::Seconds(60));
    return made.ok() ? *std::move(made) : nullptr;
  };
  Writer writer(connect, "s-");
  for (absl::Time end = absl::Now() + absl::Seconds(30);
       writer.acknowledged() < 200 && absl::Now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(writer.acknowledged() >= 200);

  // Away to another cluster (the first one whose links keep the channel to
  // web within its bound) and back: each move through the placement
  // pipeline, the state through the source cluster's checkpointer. A
  // cluster that cannot take it is refused (a FAILED record) and the next
  // one is tried.
  std::string from = first_cluster;
  int moves = 0;
  std::string refusals;  // why each cluster tried could not take it
  for (const std::string candidate : {"grenoble", "luxembourg", "nantes", "lille", "rennes",
                                      "nancy-cloud", "back"}) {
    const bool back = candidate == "back";
    if (back && moves == 0) break;  // no cluster took it: nothing to come back from
    if (candidate == from || (moves == 1 && !back) || moves == 2) continue;
    const std::string target = back ? first_cluster : candidate;
    const absl::Time start = absl::Now();
    CommandResult moved = RunCommand(
        {CtlBinary(), "migrate", "session-cache/sessions-0", "--to", target}, absl::Minutes(2));
    INFO("move to " << target << ": " << moved.output);
    if (!back && moved.exit_code != 0 && absl::StrContains(moved.output, "no node can take")) {
      absl::StrAppend(&refusals, moved.output, "\n");
      continue;
    }
    REQUIRE(moved.exit_code == 0);
    REQUIRE(absl::StrContains(moved.output, "(done)"));
    REQUIRE(absl::StrContains(moved.output, "state moved with it by the checkpointer of " + from));
    ++moves;
    WARN("stateful move " << moves << " " << from << " -> " << target << ": "
                          << absl::ToDoubleSeconds(absl::Now() - start) << " s, "
                          << writer.acknowledged() << " writes acknowledged so far");
    // ACM follows the plan the move wrote.
    std::optional<std::pair<std::string, std::string>> now;
    for (absl::Time end = absl::Now() + absl::Seconds(30); absl::Now() < end;) {
      now = PlacedAt("session-cache", "sessions");
      if (now && now->first == target) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    REQUIRE(now.has_value());
    CHECK(now->first == target);
    CHECK(absl::StartsWith(now->second, "session-cache-sessions-0-r"));
    // So does the service name, once the target's agent reports the pod.
    std::optional<std::pair<std::string, std::string>> resolved;
    for (absl::Time end = absl::Now() + absl::Seconds(30); absl::Now() < end;) {
      resolved = Resolve("sessions.session-cache");
      if (resolved && resolved->first == target) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    REQUIRE(resolved.has_value());
    CHECK(resolved->first == target);
    from = target;
  }
  INFO("refused: " << refusals);
  REQUIRE(moves == 2);
  const int before_stop = writer.acknowledged();
  for (absl::Time end = absl::Now() + absl::Seconds(30);
       writer.acknowledged() < before_stop + 100 && absl::Now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const int written = writer.Stop();
  REQUIRE(written >= before_stop + 100);  // the client found the moved Redis

  std::unique_ptr<RedisConnection> c = connect();
  REQUIRE(c != nullptr);
  int missing = 0;
  for (int i = 0; i < written; ++i) {
    absl::StatusOr<std::string> value = c->Command({"GET", absl::StrCat("s-", i)});
    if (!value.ok() || *value != absl::StrCat("v-", i)) ++missing;
  }
  CHECK(missing == 0);
  WARN(written << " acknowledged writes over two stateful moves, " << missing << " lost");
  CommandResult migrations =
      RunCommand({CtlBinary(), "get", "migrations", "--app", "session-cache"}, absl::Seconds(30));
  INFO(migrations.output);
  const std::regex done_move("session-cache/sessions-0 +manual +DONE");
  const std::ptrdiff_t done =
      std::distance(std::sregex_iterator(migrations.output.begin(), migrations.output.end(),
                                         done_move),
                    std::sregex_iterator());
  CHECK(done == 2);
  RunCommand({CtlBinary(), "down"}, absl::Minutes(1));
}

// The newest backup the hub took of `workload` of `app` (`codecoctl get
// backups -o json`): its pod and take time, or nullopt while there is none.
std::optional<std::pair<std::string, absl::Time>> NewestBackup(const std::string& app,
                                                              const std::string& workload) {
  CommandResult got = RunCommand({CtlBinary(), "get", "backups", "--app", app, "-o", "json"},
                                 absl::Seconds(30));
  if (got.exit_code != 0) return std::nullopt;
  nlohmann::json all = nlohmann::json::parse(got.output, nullptr, /*allow_exceptions=*/false);
  if (!all.is_object() || !all.contains("backups")) return std::nullopt;
  for (const nlohmann::json& r : all["backups"]) {
    if (r.value("workload", "") != workload || !r.contains("latest")) continue;
    const nlohmann::json& latest = r["latest"];
    absl::Time taken;
    std::string error;
    if (!absl::ParseTime(absl::RFC3339_full, latest.value("take_time", ""), &taken, &error)) {
      return std::nullopt;
    }
    return std::make_pair(latest["source"].value("pod", ""), taken);
  }
  return std::nullopt;
}

TEST_CASE("A node failure under a stateful Redis moves it with the data of its newest backup") {
  FederationHome home;
  // Short grace, ticks and backup interval: the test waits on conditions,
  // these only make them come sooner.
  std::map<std::string, std::string> lms_of = UpWithSessionCache(
      {"swm.adapt_interval=2s", "swm.failure_grace=6s", "swm.state_backup_interval=2s"});
  std::optional<std::pair<std::string, std::string>> at = PlacedAt("session-cache", "sessions");
  REQUIRE(at.has_value());
  const auto [cluster, pod_name] = *at;
  const lms::Pod pod = WaitRunning(lms_of[cluster], pod_name);
  const std::string node = pod.node_name();
  std::unique_ptr<RedisConnection> c = ConnectTo(pod);
  REQUIRE(c != nullptr);
  constexpr int kKeys = 3000;
  int refused = 0;
  for (int i = 0; i < kKeys; ++i) {
    if (!c->Command({"SET", absl::StrCat("b-", i), absl::StrCat("v-", i)}).ok()) ++refused;
  }
  REQUIRE(refused == 0);
  absl::StatusOr<std::string> digest = c->Command({"DEBUG", "DIGEST"});
  REQUIRE(digest.ok());
  c.reset();
  const absl::Time written = absl::Now();

  // A backup of that pod taken after the writes (every 2 s here).
  std::optional<std::pair<std::string, absl::Time>> backup;
  for (absl::Time end = absl::Now() + absl::Minutes(1); absl::Now() < end;) {
    backup = NewestBackup("session-cache", "sessions-0");
    if (backup && backup->first == pod_name && backup->second > written) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  REQUIRE(backup.has_value());
  REQUIRE(backup->second > written);

  // The node fails (CODEF kills its Redis: its memory is gone).
  const absl::Time failed = absl::Now();
  CommandResult fault =
      RunCommand({CtlBinary(), "fault", "node", cluster + "/" + node, "--fail"}, absl::Seconds(30));
  INFO(fault.output);
  REQUIRE(fault.exit_code == 0);

  // After the grace, the hub moves it, restoring the backup; ACM follows.
  std::optional<std::pair<std::string, std::string>> now;
  for (absl::Time end = absl::Now() + absl::Minutes(2); absl::Now() < end;) {
    now = PlacedAt("session-cache", "sessions");
    if (now && now->second != pod_name) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  REQUIRE(now.has_value());
  REQUIRE(now->second != pod_name);
  CHECK(absl::StartsWith(now->second, "session-cache-sessions-0-r"));
  WARN("node " << cluster << "/" << node << " failed; sessions-0 runs on " << now->first
               << " after " << absl::ToDoubleSeconds(absl::Now() - failed) << " s (grace 6 s)");
  CommandResult migrations =
      RunCommand({CtlBinary(), "get", "migrations", "--app", "session-cache"}, absl::Seconds(30));
  INFO(migrations.output);
  CHECK(std::regex_search(migrations.output,
                          std::regex("session-cache/sessions-0 +node_failure +DONE")));
  CHECK(absl::StrContains(migrations.output,
                          "state restored from the backup of pod " + pod_name));

  // Its data: every key, the same digest.
  const lms::Pod moved = WaitRunning(lms_of[now->first], now->second);
  std::unique_ptr<RedisConnection> after = ConnectTo(moved);
  REQUIRE(after != nullptr);
  absl::StatusOr<std::string> keys = after->Command({"DBSIZE"});
  REQUIRE(keys.ok());
  CHECK(*keys == absl::StrCat(kKeys));
  absl::StatusOr<std::string> moved_digest = after->Command({"DEBUG", "DIGEST"});
  REQUIRE(moved_digest.ok());
  CHECK(*moved_digest == *digest);
  RunCommand({CtlBinary(), "down"}, absl::Minutes(1));
}

}  // namespace
