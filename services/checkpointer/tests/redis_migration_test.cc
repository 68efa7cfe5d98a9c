// Redis moved with its state through the registry, under a write load:
// fence and save (RedisCheckpointHook), pack the RDB as a checkpoint image,
// push, pull, unpack, restore on another port, cut the writer over, retire
// the source. Every write Redis acknowledged must be there afterwards. And
// the streamed restore: an RDB fed through a StreamPipe into an empty Redis
// as its replication master (RestoreInto), whole, cut short or corrupted.
#include "checkpointer/drivers/redis_hook.h"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "checkpointer/core/stream_pipe.h"
#include "checkpointer/drivers/redis_feed.h"
#include "checkpointer/image/oci_image.h"
#include "checkpointer/image/registry_client.h"
#include "checkpointer/tests/test_registry.h"

namespace codeco::checkpointer {
namespace {

namespace fs = std::filesystem;
using testing::FreePort;
using testing::ReadFile;
using testing::Registry;
using testing::Scratch;

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
        {*layer}, CheckpointMetadata{.container = "redis", .pod = "cache-0", .runtime = "redis-hook",
                                   .created = snapshot->fenced_at});
    REQUIRE(image.ok());
    ImageReference tagged = repository;
    tagged.tag = absl::StrCat("m", round);
    REQUIRE(client.PushBlobFile(tagged, step / "layer.tar", image->layers[0]).ok());
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

// A connection to the Redis on `port`; fails the test when there is none.
std::unique_ptr<RedisConnection> Connect(int port) {
  absl::StatusOr<std::unique_ptr<RedisConnection>> c =
      RedisConnection::Connect("127.0.0.1", port, absl::Seconds(30));
  INFO(c.status());
  REQUIRE(c.ok());
  return *std::move(c);
}

// The reply to `argv` on `c`; fails the test on an error.
std::string Run(RedisConnection& c, const std::vector<std::string>& argv) {
  absl::StatusOr<std::string> reply = c.Command(argv);
  INFO(argv[0] << ": " << reply.status());
  REQUIRE(reply.ok());
  return *reply;
}

// The value of `field` in INFO `section` of `c` ("" when absent).
std::string Info(RedisConnection& c, const std::string& section, const std::string& field) {
  const std::string info = Run(c, {"INFO", section});
  const std::string key = "\n" + field + ":";
  const size_t at = ("\n" + info).find(key);
  if (at == std::string::npos) return "";
  const size_t start = at + key.size() - 1;
  return info.substr(start, info.find_first_of("\r\n", start) - start);
}

// A config value of `c`.
std::string Config(RedisConnection& c, const std::string& name) {
  absl::StatusOr<std::vector<std::string>> got = c.ArrayCommand({"CONFIG", "GET", name});
  REQUIRE(got.ok());
  REQUIRE(got->size() == 2);
  return (*got)[1];
}

// Writes `keys` small keys and `big` values of 1 MiB of random bytes (from
// `seed`) into the Redis on `port`.
void Fill(int port, int keys, int big, uint64_t seed) {
  std::unique_ptr<RedisConnection> c = Connect(port);
  std::mt19937_64 random(seed);
  for (int i = 0; i < keys; ++i) {
    Run(*c, {"SET", absl::StrCat("small-", i), absl::StrCat("value-", random() % 100000)});
  }
  for (int i = 0; i < big; ++i) {
    std::string value(1 << 20, '\0');
    for (size_t at = 0; at < value.size(); at += 8) {
      const uint64_t word = random();
      std::memcpy(value.data() + at, &word, 8);
    }
    Run(*c, {"SET", absl::StrCat("big-", i), value});
  }
  Run(*c, {"HSET", "a-hash", "f1", "1", "f2", "2"});
  Run(*c, {"RPUSH", "a-list", "x", "y", "z"});
}

// The writer side of a StreamPipe, as the pull of an image feeds it: a
// thread writing the first `limit` bytes of `bytes` in 16 KiB pieces, a
// short pause every 16 of them, then closing the pipe with `end`. The test
// stops the pipe once the reader returned, so a writer blocked on a full
// pipe ends too.
class Feeder {
 public:
  Feeder(StreamPipe& pipe, std::string bytes, size_t limit, absl::Status end)
      : pipe_(pipe), bytes_(std::move(bytes)), limit_(std::min(limit, bytes_.size())) {
    thread_ = std::thread([this, end] { Run(end); });
  }
  ~Feeder() { thread_.join(); }

 private:
  void Run(const absl::Status& end) {
    constexpr size_t kPiece = 16 << 10;
    for (size_t at = 0, n = 0; at < limit_; at += kPiece, ++n) {
      if (!pipe_.Write(absl::string_view(bytes_).substr(at, std::min(kPiece, limit_ - at))).ok()) {
        return;
      }
      if (n % 16 == 15) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    pipe_.Close(end);
  }

  StreamPipe& pipe_;
  const std::string bytes_;
  const size_t limit_;
  std::thread thread_;
};

// What RestoreInto of `driver` returns for the first `limit` bytes of `rdb`
// streamed into `restored`, the stream then closed with `end`.
absl::Status StreamInto(RedisHookDriver& driver, const ContainerTarget& restored,
                        const std::string& rdb, size_t limit, absl::Status end) {
  StreamPipe pipe(256 << 10);
  Feeder feeder(pipe, rdb, limit, std::move(end));
  absl::Status status = driver.RestoreInto(restored, pipe);
  pipe.Stop(absl::CancelledError("the restore returned"));
  return status;
}

ContainerTarget RedisContainer(int port) {
  return ContainerTarget{.pod = "cache-0",
                         .container = "redis",
                         .image = "redis:7",
                         .endpoint = absl::StrCat("127.0.0.1:", port)};
}

// A checkpoint of a Redis holding a few thousand keys and four 1 MiB values.
struct Checkpointed {
  Checkpointed() {
    const int port = FreePort();
    source = StartRedis(scratch.path / "source", port);
    Fill(port, 3000, 4, 7);
    absl::StatusOr<StateDump> taken =
        driver.Checkpoint(RedisContainer(port), scratch.path / "checkpoint");
    INFO(taken.status());
    REQUIRE(taken.ok());
    dump = *std::move(taken);
    digest = Run(*Connect(port), {"DEBUG", "DIGEST"});
    REQUIRE(driver.Resume(RedisContainer(port)).ok());
    REQUIRE(driver.StreamedFile() == "dump.rdb");
    rdb = ReadFile(dump.directory / driver.StreamedFile());
    REQUIRE(rdb.size() > (4 << 20));
  }

  Scratch scratch{"codeco-redis-stream"};
  RedisHookDriver driver{RedisCheckpointHook::Options{}};
  std::unique_ptr<RedisServer> source;
  StateDump dump;
  std::string digest;  // of the source at the checkpoint
  std::string rdb;     // its dump.rdb
};

TEST_CASE(
    "an RDB streamed through a pipe into an empty Redis loads every key and leaves a master") {
  Checkpointed checkpoint;
  const int port = FreePort();
  std::unique_ptr<RedisServer> target = StartRedis(checkpoint.scratch.path / "target", port);
  const std::string default_load = Config(*Connect(port), "repl-diskless-load");

  absl::Status restored = StreamInto(checkpoint.driver, RedisContainer(port), checkpoint.rdb,
                                     checkpoint.rdb.size(), absl::OkStatus());
  INFO(restored);
  REQUIRE(restored.ok());
  std::unique_ptr<RedisConnection> c = Connect(port);
  CHECK(Run(*c, {"DBSIZE"}) == "3006");
  CHECK(Run(*c, {"DEBUG", "DIGEST"}) == checkpoint.digest);
  CHECK(checkpoint.dump.facts.contains(kRedisDigestFact));
  CHECK(checkpoint.driver.Verify(RedisContainer(port), checkpoint.dump.facts).ok());
  // A master again, as it was configured, and writable.
  CHECK(Info(*c, "replication", "role") == "master");
  CHECK(Config(*c, "repl-diskless-load") == default_load);
  CHECK(Run(*c, {"SET", "after-restore", "1"}) == "OK");
  CHECK(Run(*c, {"DBSIZE"}) == "3007");
}

TEST_CASE("a stream that fails halfway is reported and leaves the Redis an empty master") {
  Checkpointed checkpoint;
  const int port = FreePort();
  std::unique_ptr<RedisServer> target = StartRedis(checkpoint.scratch.path / "target", port);
  const std::string default_load = Config(*Connect(port), "repl-diskless-load");

  absl::Status restored =
      StreamInto(checkpoint.driver, RedisContainer(port), checkpoint.rdb, checkpoint.rdb.size() / 2,
                 absl::UnavailableError("the image pull broke"));
  INFO(restored);
  CHECK(absl::IsUnavailable(restored));
  CHECK(absl::StrContains(restored.message(), "the image pull broke"));
  CHECK(absl::StrContains(restored.message(), absl::StrCat("127.0.0.1:", port)));
  std::unique_ptr<RedisConnection> c = Connect(port);
  CHECK(Info(*c, "replication", "role") == "master");
  CHECK(Config(*c, "repl-diskless-load") == default_load);
  CHECK(Run(*c, {"DBSIZE"}) == "0");  // Redis dropped what it half loaded
  CHECK(Run(*c, {"SET", "after-restore", "1"}) == "OK");
}

TEST_CASE("a corrupted stream is refused as data loss and leaves no replica behind") {
  Checkpointed checkpoint;
  const int port = FreePort();
  std::unique_ptr<RedisServer> target = StartRedis(checkpoint.scratch.path / "target", port);
  std::string corrupted = checkpoint.rdb;
  for (size_t i = corrupted.size() / 2; i < corrupted.size() / 2 + 16; ++i) corrupted[i] ^= 0x5a;

  absl::Status restored = StreamInto(checkpoint.driver, RedisContainer(port), corrupted,
                                     corrupted.size(), absl::OkStatus());
  INFO(restored);
  CHECK(absl::IsDataLoss(restored));
  CHECK(absl::StrContains(restored.message(), absl::StrCat("127.0.0.1:", port)));
  // Redis exits when an RDB it loads from a replication link fails its
  // CRC64; should one survive, it must be a master.
  absl::StatusOr<std::unique_ptr<RedisConnection>> c =
      RedisConnection::Connect("127.0.0.1", port, absl::Seconds(5));
  if (c.ok()) {
    absl::StatusOr<std::string> info = (*c)->Command({"INFO", "replication"});
    if (info.ok()) CHECK(absl::StrContains(*info, "role:master"));
  }
}

TEST_CASE("a Redis that is not empty is not restored into and keeps its keys") {
  Scratch scratch("codeco-redis-stream");
  const int port = FreePort();
  std::unique_ptr<RedisServer> target = StartRedis(scratch.path / "target", port);
  std::unique_ptr<RedisConnection> c = Connect(port);
  Run(*c, {"SELECT", "3"});
  Run(*c, {"SET", "kept", "yes"});  // not in db 0: every database counts
  const std::string default_load = Config(*c, "repl-diskless-load");
  RedisHookDriver driver({});

  absl::Status restored = StreamInto(driver, RedisContainer(port), "REDIS0010 not read",
                                     std::string::npos, absl::OkStatus());
  INFO(restored);
  CHECK(absl::IsFailedPrecondition(restored));
  CHECK(Run(*c, {"GET", "kept"}) == "yes");
  CHECK(Info(*c, "replication", "role") == "master");
  CHECK(Config(*c, "repl-diskless-load") == default_load);
}

TEST_CASE("the dataset digest is recorded only up to digest_max_bytes and SAVE is uncompressed") {
  Scratch scratch("codeco-redis-digest");
  const int port = FreePort();
  std::unique_ptr<RedisServer> source = StartRedis(scratch.path / "source", port);
  std::unique_ptr<RedisConnection> c = Connect(port);
  for (int i = 0; i < 100; ++i) Run(*c, {"SET", absl::StrCat("k", i), absl::StrCat(i)});
  Run(*c, {"SET", "compressible", std::string(1 << 20, 'a')});
  const std::string digest = Run(*c, {"DEBUG", "DIGEST"});
  const std::string compression = Config(*c, "rdbcompression");
  const RedisInstance instance{.port = port};
  struct Case {
    int64_t max_bytes;
    bool recorded;
  };
  int round = 0;
  for (const Case& t : {Case{1, false}, Case{0, false}, Case{-1, true},
                        Case{RedisCheckpointHook::Options{}.digest_max_bytes, true}}) {
    INFO("digest_max_bytes " << t.max_bytes);
    RedisHookDriver driver({.digest_max_bytes = t.max_bytes});
    absl::StatusOr<StateDump> dump =
        driver.Checkpoint(RedisContainer(port), scratch.path / absl::StrCat("c", round++));
    REQUIRE(dump.ok());
    REQUIRE(driver.Resume(RedisContainer(port)).ok());
    CHECK(dump->facts.at(kRedisKeysFact) == "101");
    CHECK(dump->facts.contains(kRedisDigestFact) == t.recorded);
    if (t.recorded) CHECK(dump->facts.at(kRedisDigestFact) == digest);
    // Verify checks the key count whether or not there is a digest.
    CHECK(driver.Verify(RedisContainer(port), dump->facts).ok());
    std::map<std::string, std::string> wrong = dump->facts;
    wrong[kRedisKeysFact] = "102";
    CHECK(absl::IsDataLoss(driver.Verify(RedisContainer(port), wrong)));
    // Saved uncompressed (LZF would make the 1 MiB of 'a' a few KiB), the
    // setting put back.
    CHECK(dump->bytes > (1 << 20));
    CHECK(Config(*c, "rdbcompression") == compression);
  }
}

}  // namespace
}  // namespace codeco::checkpointer

namespace codeco::checkpointer {
namespace {

// A raw client of the feed: connects, sends `commands`, returns the first reply line.
std::string AskFeed(int port, const std::string& commands) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(static_cast<uint16_t>(port));
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&at), sizeof(at)) == 0);
  REQUIRE(send(fd, commands.data(), commands.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(commands.size()));
  std::string replies;
  char buffer[256];
  // Every command gets a reply line; the last one ends what we wait for.
  const size_t lines = static_cast<size_t>(std::count(commands.begin(), commands.end(), '\n'));
  while (static_cast<size_t>(std::count(replies.begin(), replies.end(), '\n')) < lines) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    replies.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return replies;
}

TEST_CASE("the restore feed serves only a replica that knows its password") {
  absl::StatusOr<std::unique_ptr<RedisFeed>> feed = RedisFeed::Listen("127.0.0.1");
  REQUIRE(feed.ok());
  absl::Status accepted;
  std::thread serving([&] { accepted = (*feed)->AcceptReplica(absl::Now() + absl::Seconds(60)); });
  // A stranger asking for the RDB, with no password or a wrong one, is refused and dropped.
  CHECK(absl::StrContains(AskFeed((*feed)->port(), "REPLCONF capa eof\r\nPSYNC ? -1\r\n"),
                          "-NOAUTH"));
  CHECK(absl::StrContains(
      AskFeed((*feed)->port(), "AUTH guess\r\nREPLCONF capa eof\r\nPSYNC ? -1\r\n"), "-NOAUTH"));
  // The replica with the password gets the full resynchronisation.
  const std::string replies = AskFeed(
      (*feed)->port(),
      absl::StrCat("AUTH ", (*feed)->password(), "\r\nREPLCONF capa eof\r\nPSYNC ? -1\r\n"));
  serving.join();
  CHECK(accepted.ok());
  CHECK(absl::StrContains(replies, "+FULLRESYNC"));
}

}  // namespace
}  // namespace codeco::checkpointer
