// Redis moved with its state through the registry, under a write load:
// fence and save (RedisCheckpointHook), pack the RDB as a checkpoint image,
// push, pull, unpack, restore on another port, cut the writer over, retire
// the source. Every write Redis acknowledged must be there afterwards.
#include "checkpointer/drivers/redis_hook.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "checkpointer/image/oci_image.h"
#include "checkpointer/image/registry_client.h"
#include "checkpointer/tests/test_registry.h"

namespace codeco::checkpointer {
namespace {

namespace fs = std::filesystem;
using testing::FreePort;
using testing::Registry;

// A redis-server for the first source; fails the test when it cannot start.
std::unique_ptr<RedisServer> StartRedis(const fs::path& dir, int port) {
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(
      "/usr/bin/redis-server", dir, RedisInstance{.port = port}, absl::Seconds(20));
  INFO(server.status());
  REQUIRE(server.ok());
  return *std::move(server);
}

// Writes key-N = value-N one after the other to whichever port `target`
// names; a write counts once Redis acknowledged it. A failed write (the
// connection dropped at a cut-over) is retried against the current target.
class Writer {
 public:
  explicit Writer(std::atomic<int>& target) : target_(target) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Writer() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::map<std::string, std::string> Acknowledged() {
    std::lock_guard<std::mutex> lock(mu_);
    return acknowledged_;
  }
  int64_t Retries() const { return retries_; }

 private:
  void Run() {
    std::unique_ptr<RedisConnection> c;
    int connected_to = 0;
    for (int64_t n = 0; !stop_;) {
      if (c == nullptr || connected_to != target_.load()) {
        connected_to = target_.load();
        auto made = RedisConnection::Connect("127.0.0.1", connected_to, absl::Seconds(30));
        c = made.ok() ? *std::move(made) : nullptr;
        if (c == nullptr) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          continue;
        }
      }
      const std::string key = absl::StrCat("key-", n);
      const std::string value = absl::StrCat("value-", n, "-", std::string(n % 64, 'v'));
      if (c->Command({"SET", key, value}).ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        acknowledged_[key] = value;
        ++n;
      } else {
        ++retries_;
        c.reset();
      }
    }
  }

  std::atomic<int>& target_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> retries_{0};
  std::mutex mu_;
  std::map<std::string, std::string> acknowledged_;
  std::thread thread_;
};

// The sha256 over "key=value\n" of `pairs` in key order.
std::string Checksum(const std::map<std::string, std::string>& pairs) {
  Sha256 hash;
  for (const auto& [k, v] : pairs) hash.Update(absl::StrCat(k, "=", v, "\n"));
  return hash.Finish();
}

TEST_CASE("ten migrations of a Redis under a write load through the registry lose no write") {
  Registry registry;
  RegistryClient client(registry.Options());
  const fs::path work = registry.dir / "work";
  fs::create_directories(work);
  // Some state to carry from the start.
  int source_port = FreePort();
  std::unique_ptr<RedisServer> first = StartRedis(work / "source", source_port);
  {
    auto c = RedisConnection::Connect("127.0.0.1", source_port, absl::Seconds(5));
    REQUIRE(c.ok());
    for (int i = 0; i < 2000; ++i) {
      REQUIRE((*c)->Command({"SET", absl::StrCat("seed-", i), std::string(512, 'a' + i % 26)}).ok());
    }
  }
  std::atomic<int> target{source_port};
  Writer writer(target);
  RedisCheckpointHook hook({});
  std::vector<std::unique_ptr<RedisServer>> restored_servers;
  absl::Duration longest_fence, total_fence;
  const ImageReference repository{.registry = registry.Address(), .repository = "codeco/redis"};
  for (int round = 0; round < 10; ++round) {
    INFO("migration " << round);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // writes in between
    const RedisInstance source{.port = source_port};
    const fs::path step = work / absl::StrCat("m", round);
    absl::StatusOr<RedisSnapshot> snapshot = hook.Checkpoint(source, step / "checkpoint");
    REQUIRE(snapshot.ok());
    absl::StatusOr<Descriptor> layer =
        WriteLayer({{.name = "checkpoint/dump.rdb", .source = snapshot->rdb}}, step / "layer.tar",
                   snapshot->fenced_at);
    REQUIRE(layer.ok());
    absl::StatusOr<CheckpointImage> image = BuildCheckpointImage(
        *layer, CheckpointMetadata{.container = "redis", .pod = "cache-0", .runtime = "redis-hook",
                                   .created = snapshot->fenced_at});
    REQUIRE(image.ok());
    ImageReference tagged = repository;
    tagged.tag = absl::StrCat("m", round);
    REQUIRE(client.PushBlobFile(tagged, step / "layer.tar", image->layer).ok());
    REQUIRE(client.PushBlob(tagged, image->config, image->config_descriptor).ok());
    absl::StatusOr<std::string> digest = client.PushManifest(tagged, image->manifest);
    REQUIRE(digest.ok());
    // The destination side: pull by digest, unpack, restore, cut over.
    ImageReference pinned = repository;
    pinned.digest = *digest;
    absl::StatusOr<std::string> manifest = client.PullManifest(pinned);
    REQUIRE(manifest.ok());
    absl::StatusOr<ParsedManifest> parsed = ParseManifest(*manifest);
    REQUIRE(parsed.ok());
    REQUIRE(client.PullBlobToFile(repository, parsed->layers[0], step / "pulled.tar").ok());
    REQUIRE(ExtractLayer(step / "pulled.tar", step / "unpacked", int64_t{1} << 30).ok());
    const int destination_port = FreePort();
    absl::StatusOr<std::unique_ptr<RedisServer>> restored =
        hook.Restore(step / "unpacked/checkpoint/dump.rdb", step / "data",
                     RedisInstance{.port = destination_port}, snapshot->keys);
    INFO(restored.status());
    REQUIRE(restored.ok());
    restored_servers.push_back(*std::move(restored));
    target = destination_port;  // the cut-over: new connections go there
    REQUIRE(hook.Retire(source).ok());
    const absl::Duration fenced = absl::Now() - snapshot->fenced_at;
    longest_fence = std::max(longest_fence, fenced);
    total_fence += fenced;
    source_port = destination_port;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  writer.Stop();
  const std::map<std::string, std::string> acknowledged = writer.Acknowledged();
  REQUIRE(acknowledged.size() > 100);
  // Every acknowledged write, and every seed key, on the last destination.
  auto c = RedisConnection::Connect("127.0.0.1", source_port, absl::Seconds(5));
  REQUIRE(c.ok());
  std::map<std::string, std::string> found;
  for (const auto& [key, value] : acknowledged) {
    absl::StatusOr<std::string> got = (*c)->Command({"GET", key});
    REQUIRE(got.ok());
    found[key] = *got;
  }
  CHECK(Checksum(found) == Checksum(acknowledged));
  for (int i = 0; i < 2000; i += 97) {
    CHECK((*c)->Command({"GET", absl::StrCat("seed-", i)}).value_or("") ==
          std::string(512, 'a' + i % 26));
  }
  WARN(acknowledged.size() << " acknowledged writes over 10 migrations, " << writer.Retries()
                           << " retried after a cut-over; all present; writes fenced "
                           << absl::FormatDuration(total_fence / 10) << " on average, "
                           << absl::FormatDuration(longest_fence) << " at most (~1 MB of state)");
}

TEST_CASE("an abandoned migration lifts the fence and the source serves on") {
  Registry registry;  // only for its scratch directory
  const int port = FreePort();
  std::unique_ptr<RedisServer> source = StartRedis(registry.dir / "source", port);
  RedisCheckpointHook hook({});
  absl::StatusOr<RedisSnapshot> snapshot =
      hook.Checkpoint(RedisInstance{.port = port}, registry.dir / "checkpoint");
  REQUIRE(snapshot.ok());
  // Fenced: a write waits.
  std::atomic<bool> written{false};
  std::thread late([&] {
    auto c = RedisConnection::Connect("127.0.0.1", port, absl::Seconds(30));
    if (c.ok() && (*c)->Command({"SET", "late", "1"}).ok()) written = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK_FALSE(written);
  REQUIRE(hook.Abort(RedisInstance{.port = port}).ok());
  late.join();
  CHECK(written);
  // A restore of a checkpoint that does not hold what it says is refused and
  // leaves nothing behind.
  absl::StatusOr<std::unique_ptr<RedisServer>> wrong =
      hook.Restore(snapshot->rdb, registry.dir / "restore", RedisInstance{.port = FreePort()},
                   snapshot->keys + 1);
  REQUIRE(absl::IsDataLoss(wrong.status()));
  CHECK_FALSE(std::filesystem::exists(registry.dir / "restore"));
}

}  // namespace
}  // namespace codeco::checkpointer
