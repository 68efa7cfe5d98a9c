// Redis moved with its state through the registry, under a write load:
// fence and save (RedisCheckpointHook), pack the RDB as a checkpoint image,
// push, pull, unpack, restore on another port, cut the writer over, retire
// the source. Every write Redis acknowledged must be there afterwards. And
// the streamed restore: an RDB fed through a StreamPipe into an empty Redis
// as its replication master (RestoreInto), whole, cut short or corrupted.
// And the streamed checkpoint: the RDB of the fenced dataset read from the
// source as its replica (StreamCheckpoint, the driver's Checkpoint), from a
// real Redis and from a stand-in master framing it every way a master may.
#include "checkpointer/drivers/redis_hook.h"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "checkpointer/core/stream_pipe.h"
#include "checkpointer/drivers/redis_feed.h"
#include "checkpointer/drivers/redis_snapshot_stream.h"
#include "checkpointer/image/oci_image.h"
#include "checkpointer/image/registry_client.h"
#include "checkpointer/tests/test_registry.h"

namespace codeco::checkpointer {
namespace {

namespace fs = std::filesystem;
using testing::FreePort;
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

// Everything `stream` holds: a first read of `first` bytes, then reads of
// `rest` (small odd sizes catch framing kept across reads); fails the test
// on an error.
std::string ReadStream(StateStream& stream, size_t first = 7, size_t rest = 64 << 10) {
  std::string out;
  std::vector<char> buffer(std::max(first, rest));
  for (size_t want = first;; want = rest) {
    absl::StatusOr<size_t> n = stream.Read(buffer.data(), want);
    INFO(n.status());
    REQUIRE(n.ok());
    REQUIRE(*n <= want);
    if (*n == 0) break;
    out.append(buffer.data(), *n);
  }
  return out;
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
    REQUIRE(dump.streamed_file == "dump.rdb");
    REQUIRE(dump.stream != nullptr);
    rdb = ReadStream(*dump.stream);
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

TEST_CASE("the dataset digest is recorded only up to digest_max_bytes and RDBs are uncompressed") {
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
    // Streamed uncompressed (LZF would make the 1 MiB of 'a' a few KiB), the
    // setting put back; the estimate counts the dataset.
    CHECK(dump->bytes > (1 << 20));
    REQUIRE(dump->stream != nullptr);
    CHECK(ReadStream(*dump->stream).size() > (1 << 20));
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

// The streamed checkpoint: the RDB read from the source as a replica that
// wants only the RDB (RedisCheckpointHook::StreamCheckpoint,
// RedisSnapshotStream), through a real Redis and through a stand-in master
// that frames it in every way a master may.
namespace codeco::checkpointer {
namespace {

// The settings a streamed checkpoint changes on the source and puts back.
const std::vector<std::string> kStreamSettings = {"repl-diskless-sync", "repl-diskless-sync-delay",
                                                  "rdbcompression"};

std::map<std::string, std::string> StreamSettings(RedisConnection& c) {
  std::map<std::string, std::string> out;
  for (const std::string& name : kStreamSettings) out[name] = Config(c, name);
  return out;
}

// Waits (30 s at most) until `done` holds; false when it never does.
bool Eventually(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// Starts a Redis on `rdb` (as dump.rdb in `dir`) and returns its DBSIZE and
// DEBUG DIGEST.
std::pair<std::string, std::string> Loaded(const fs::path& dir, const std::string& rdb) {
  fs::create_directories(dir);
  {
    std::ofstream out(dir / "dump.rdb", std::ios::binary);
    out.write(rdb.data(), static_cast<std::streamsize>(rdb.size()));
    REQUIRE(out.good());
  }
  const int port = FreePort();
  std::unique_ptr<RedisServer> server = StartRedis(dir, port);
  std::unique_ptr<RedisConnection> c = Connect(port);
  return {Run(*c, {"DBSIZE"}), Run(*c, {"DEBUG", "DIGEST"})};
}

TEST_CASE("a streamed checkpoint reads the RDB of the fenced dataset from the source") {
  Scratch scratch("codeco-redis-snapshot");
  const int port = FreePort();
  std::unique_ptr<RedisServer> source = StartRedis(scratch.path / "source", port);
  Fill(port, 3000, 4, 11);
  std::unique_ptr<RedisConnection> c = Connect(port);
  const std::string digest = Run(*c, {"DEBUG", "DIGEST"});
  const std::map<std::string, std::string> settings = StreamSettings(*c);
  RedisCheckpointHook hook({});
  const RedisInstance instance{.port = port};

  absl::StatusOr<RedisStreamedSnapshot> snapshot = hook.StreamCheckpoint(instance);
  INFO(snapshot.status());
  REQUIRE(snapshot.ok());
  REQUIRE(snapshot->rdb != nullptr);
  CHECK(snapshot->keys == 3006);
  CHECK(snapshot->digest == digest);  // a small dataset: its digest is taken
  CHECK(snapshot->estimated_bytes > (4 << 20));
  CHECK(StreamSettings(*c) == settings);  // put back once the source forked
  // The RDB comes diskless, EOF-marked, without the replication stream.
  const auto* stream = dynamic_cast<const RedisSnapshotStream*>(snapshot->rdb.get());
  REQUIRE(stream != nullptr);
  CHECK(stream->rdb_only());
  // The first bytes; the RDB starts with its magic.
  std::string rdb(7, '\0');
  absl::StatusOr<size_t> first = snapshot->rdb->Read(rdb.data(), rdb.size());
  REQUIRE(first.ok());
  rdb.resize(*first);
  CHECK(absl::StartsWith("REDIS00", rdb));
  CHECK(stream->eof_marked());

  // Fenced: a write from another client does not complete (this one gives
  // up waiting; the write stays queued on the source) ...
  absl::StatusOr<std::unique_ptr<RedisConnection>> late =
      RedisConnection::Connect("127.0.0.1", port, absl::Milliseconds(300));
  REQUIRE(late.ok());
  CHECK_FALSE((*late)->Command({"SET", "late", "1"}).ok());
  CHECK(Run(*c, {"EXISTS", "late"}) == "0");
  // ... until the fence is lifted: then it goes through, and the source
  // serves writes again, while the RDB of the fence is still being read.
  REQUIRE(hook.Abort(instance).ok());
  CHECK(Eventually([&] { return c->Command({"GET", "late"}).value_or("") == "1"; }));
  Run(*c, {"SET", "after", "1"});
  Run(*c, {"DEL", "small-0", "big-0"});
  rdb += ReadStream(*snapshot->rdb, 1, 64 << 10);
  std::vector<char> buffer(16);
  CHECK(snapshot->rdb->Read(buffer.data(), buffer.size()).value_or(1) == 0);  // ended
  // What the stream held is the dataset at the fence.
  const auto [keys, loaded_digest] = Loaded(scratch.path / "loaded", rdb);
  CHECK(keys == "3006");
  CHECK(loaded_digest == digest);
  CHECK(StreamSettings(*c) == settings);
  // The stream hung up: the source has no replica left.
  CHECK(Eventually([&] { return Info(*c, "replication", "connected_slaves") == "0"; }));
}

// A checkpoint through the driver of the Redis on `port`, read from its
// stream; checks what the dump says and that the directory stays empty.
std::string DriverCheckpoint(int port, const fs::path& directory, int64_t keys) {
  RedisHookDriver driver({});
  absl::StatusOr<StateDump> dump = driver.Checkpoint(RedisContainer(port), directory);
  INFO(dump.status());
  REQUIRE(dump.ok());
  CHECK(dump->directory == directory);
  CHECK(dump->streamed_file == "dump.rdb");
  REQUIRE(dump->stream != nullptr);
  CHECK(dump->facts.at(kRedisKeysFact) == absl::StrCat(keys));
  CHECK(dump->facts.at(kDriverFact) == "redis-hook");
  CHECK(dump->facts.contains(kRedisDigestFact));
  CHECK(dump->bytes > 0);
  CHECK(dump->fence_expires < absl::InfiniteFuture());
  REQUIRE(fs::is_directory(directory));
  std::string rdb = ReadStream(*dump->stream);
  CHECK(fs::is_empty(directory));
  REQUIRE(driver.Resume(RedisContainer(port)).ok());
  // A directory that exists is refused, the source left alone.
  CHECK(absl::IsFailedPrecondition(driver.Checkpoint(RedisContainer(port), directory).status()));
  return rdb;
}

TEST_CASE("the driver streams its checkpoint and writes nothing under the dump directory") {
  Scratch scratch("codeco-redis-snapshot");
  const int port = FreePort();
  std::unique_ptr<RedisServer> source = StartRedis(scratch.path / "source", port);
  Fill(port, 2000, 2, 12);  // 2004 keys with the hash and the list
  std::unique_ptr<RedisConnection> c = Connect(port);
  const std::string digest = Run(*c, {"DEBUG", "DIGEST"});
  const std::map<std::string, std::string> settings = StreamSettings(*c);

  const std::string rdb = DriverCheckpoint(port, scratch.path / "checkpoint", 2004);
  const auto [keys, loaded_digest] = Loaded(scratch.path / "loaded", rdb);
  CHECK(keys == "2004");
  CHECK(loaded_digest == digest);
  CHECK(StreamSettings(*c) == settings);
  CHECK(Run(*c, {"SET", "after", "1"}) == "OK");  // resumed
}

TEST_CASE("a source syncing replicas from disk is streamed and keeps its settings") {
  Scratch scratch("codeco-redis-snapshot");
  const int port = FreePort();
  std::unique_ptr<RedisServer> source = StartRedis(scratch.path / "source", port);
  Fill(port, 2000, 2, 13);
  std::unique_ptr<RedisConnection> c = Connect(port);
  Run(*c, {"CONFIG", "SET", "repl-diskless-sync", "no"});
  Run(*c, {"CONFIG", "SET", "repl-diskless-sync-delay", "3"});
  const std::string digest = Run(*c, {"DEBUG", "DIGEST"});
  const std::map<std::string, std::string> settings = StreamSettings(*c);
  REQUIRE(settings.at("repl-diskless-sync") == "no");

  // The driver streams it diskless all the same and puts "no" back.
  const std::string rdb = DriverCheckpoint(port, scratch.path / "checkpoint", 2004);
  CHECK(StreamSettings(*c) == settings);
  const auto [keys, loaded_digest] = Loaded(scratch.path / "loaded", rdb);
  CHECK(keys == "2004");
  CHECK(loaded_digest == digest);

  // Asked as the master is configured, it saves to disk and sends
  // "$<length>": the stream reads exactly that many bytes.
  absl::StatusOr<std::unique_ptr<RedisSnapshotStream>> direct =
      RedisSnapshotStream::Open("127.0.0.1", port, absl::Minutes(1));
  INFO(direct.status());
  REQUIRE(direct.ok());
  CHECK((*direct)->rdb_only());  // Redis 7
  const std::string from_disk = ReadStream(**direct);
  CHECK_FALSE((*direct)->eof_marked());
  CHECK((*direct)->rdb_bytes_read() == static_cast<int64_t>(from_disk.size()));
  const auto [disk_keys, disk_digest] = Loaded(scratch.path / "loaded-from-disk", from_disk);
  CHECK(disk_keys == "2004");
  CHECK(disk_digest == digest);
}

TEST_CASE("a source that dies while its RDB is read ends the stream with an error") {
  Scratch scratch("codeco-redis-snapshot");
  const int port = FreePort();
  std::unique_ptr<RedisServer> source = StartRedis(scratch.path / "source", port);
  Fill(port, 100, 50, 14);  // ~50 MB: far more than the socket buffers hold
  RedisCheckpointHook hook({});
  absl::StatusOr<RedisStreamedSnapshot> snapshot =
      hook.StreamCheckpoint(RedisInstance{.port = port});
  INFO(snapshot.status());
  REQUIRE(snapshot.ok());
  std::vector<char> buffer(64 << 10);
  int64_t read = 0;
  while (read < (1 << 20)) {
    absl::StatusOr<size_t> n = snapshot->rdb->Read(buffer.data(), buffer.size());
    REQUIRE(n.ok());
    REQUIRE(*n > 0);
    read += static_cast<int64_t>(*n);
  }
  source->Kill();
  absl::Status ended;
  for (;;) {
    absl::StatusOr<size_t> n = snapshot->rdb->Read(buffer.data(), buffer.size());
    if (!n.ok()) {
      ended = n.status();
      break;
    }
    REQUIRE(*n > 0);  // never a clean end: the RDB was cut short
    read += static_cast<int64_t>(*n);
  }
  INFO(ended);
  CHECK(absl::IsUnavailable(ended));
  CHECK(absl::StrContains(ended.message(), absl::StrCat("127.0.0.1:", port)));
  CHECK(read < (50 << 20));
  // The error stays.
  CHECK(snapshot->rdb->Read(buffer.data(), buffer.size()).status() == ended);
}

TEST_CASE("a stream dropped before its end leaves the source serving and ready for the next") {
  Scratch scratch("codeco-redis-snapshot");
  const int port = FreePort();
  std::unique_ptr<RedisServer> source = StartRedis(scratch.path / "source", port);
  Fill(port, 100, 8, 15);
  std::unique_ptr<RedisConnection> c = Connect(port);
  const std::string digest = Run(*c, {"DEBUG", "DIGEST"});
  RedisCheckpointHook hook({});
  const RedisInstance instance{.port = port};
  {
    absl::StatusOr<RedisStreamedSnapshot> dropped = hook.StreamCheckpoint(instance);
    REQUIRE(dropped.ok());
    std::vector<char> buffer(4096);
    REQUIRE(dropped->rdb->Read(buffer.data(), buffer.size()).ok());
    REQUIRE(hook.Abort(instance).ok());
  }  // destroyed unread
  CHECK(Eventually([&] { return Info(*c, "replication", "connected_slaves") == "0"; }));
  absl::StatusOr<RedisStreamedSnapshot> next = hook.StreamCheckpoint(instance);
  INFO(next.status());
  REQUIRE(next.ok());
  const std::string rdb = ReadStream(*next->rdb);
  REQUIRE(hook.Abort(instance).ok());
  const auto [keys, loaded_digest] = Loaded(scratch.path / "loaded", rdb);
  CHECK(keys == "110");
  CHECK(loaded_digest == digest);
  CHECK(Run(*c, {"SET", "after", "1"}) == "OK");
}

// A stand-in master for one RedisSnapshotStream: accepts one connection on
// 127.0.0.1, answers its three handshake commands with `replies` (one each,
// in order), then sends `pieces` one after the other; before a piece that
// is kGate it waits until Release(). Hangs up after the last piece unless
// told to keep the connection (a master that stalls).
class FakeMaster {
 public:
  static constexpr char kGate[] = "<gate>";

  FakeMaster(std::vector<std::string> replies, std::vector<std::string> pieces, bool keep = false)
      : replies_(std::move(replies)), pieces_(std::move(pieces)), keep_(keep) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listener_ >= 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(listener_, reinterpret_cast<sockaddr*>(&at), sizeof(at)) == 0);
    REQUIRE(listen(listener_, 1) == 0);
    socklen_t length = sizeof(at);
    REQUIRE(getsockname(listener_, reinterpret_cast<sockaddr*>(&at), &length) == 0);
    port_ = ntohs(at.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeMaster() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    released_.notify_all();
    shutdown(listener_, SHUT_RDWR);
    thread_.join();
    close(listener_);
  }
  int port() const { return port_; }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    ++releases_;
    released_.notify_all();
  }

 private:
  void Serve() {
    const int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    std::string input;
    char buffer[1024];
    // Each handshake command is a RESP array of 3 bulk strings: 7 CRLFs.
    for (size_t answered = 0; answered < replies_.size();) {
      const size_t lines = static_cast<size_t>(std::count(input.begin(), input.end(), '\n'));
      if (lines >= 7 * (answered + 1)) {
        SendAll(fd, replies_[answered++]);
        continue;
      }
      const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) {
        close(fd);
        return;
      }
      input.append(buffer, static_cast<size_t>(n));
    }
    int gates = 0;
    for (const std::string& piece : pieces_) {
      if (piece == kGate) {
        std::unique_lock<std::mutex> lock(mu_);
        ++gates;
        released_.wait(lock, [&] { return stop_ || releases_ >= gates; });
        if (stop_) break;
        continue;
      }
      SendAll(fd, piece);
    }
    if (keep_) {
      std::unique_lock<std::mutex> lock(mu_);
      released_.wait(lock, [&] { return stop_; });
    }
    close(fd);
  }
  static void SendAll(int fd, const std::string& bytes) {
    for (size_t at = 0; at < bytes.size();) {
      const ssize_t n = send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return;
      at += static_cast<size_t>(n);
    }
  }

  const std::vector<std::string> replies_;
  const std::vector<std::string> pieces_;
  const bool keep_;
  int listener_ = -1;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable released_;
  int releases_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

// The usual answers: keepalives before replies, rdb-only refused (Redis
// before 7.0), a full resynchronisation.
const std::vector<std::string> kHandshake = {"\n+OK\r\n", "-ERR Unrecognized REPLCONF option\r\n",
                                             "\n\n+FULLRESYNC 0123abcd 42\r\n"};

// 40 characters of a diskless master's EOF mark.
const std::string kMark = "f00dbabef00dbabef00dbabef00dbabef00dbabe";

absl::StatusOr<std::unique_ptr<RedisSnapshotStream>> OpenFake(
    const FakeMaster& master, absl::Duration timeout = absl::Seconds(30)) {
  return RedisSnapshotStream::Open("127.0.0.1", master.port(), timeout);
}

TEST_CASE("an EOF-marked RDB is read up to its mark and never hands out the mark") {
  // The payload holds most of the mark, and ends with a piece that could be
  // the mark's beginning but is data.
  const std::string payload = absl::StrCat("REDIS0010", std::string(100000, 'x'),
                                           kMark.substr(0, 39), "tail-", kMark.substr(0, 20));
  FakeMaster master(
      kHandshake, {"\n\n", absl::StrCat("$EOF:", kMark, "\r\n"), payload.substr(0, 5000),
                   payload.substr(5000), kMark.substr(0, 20), FakeMaster::kGate, kMark.substr(20)});
  absl::StatusOr<std::unique_ptr<RedisSnapshotStream>> stream = OpenFake(master);
  INFO(stream.status());
  REQUIRE(stream.ok());
  CHECK((*stream)->replication_id() == "0123abcd");
  CHECK((*stream)->replication_offset() == 42);
  CHECK_FALSE((*stream)->rdb_only());
  // All but the last 40 bytes received can be handed out before the rest
  // of the mark comes: read that much, then let it come.
  const size_t before_gate = payload.size() + 20 - 40;
  std::string read;
  std::vector<char> buffer(4099);
  while (read.size() < before_gate) {
    absl::StatusOr<size_t> n = (*stream)->Read(buffer.data(), buffer.size());
    REQUIRE(n.ok());
    REQUIRE(*n > 0);
    read.append(buffer.data(), *n);
  }
  CHECK(read.size() == before_gate);
  CHECK((*stream)->eof_marked());
  master.Release();
  read += ReadStream(**stream, 3, 11);
  CHECK(read == payload);
  CHECK((*stream)->rdb_bytes_read() == static_cast<int64_t>(payload.size()));
}

TEST_CASE("a length-prefixed RDB is read to its length and what follows is left") {
  const std::string payload = absl::StrCat("REDIS0010", std::string(70000, 'y'));
  FakeMaster master({"+OK\r\n", "+OK\r\n", "+FULLRESYNC 0123abcd 0\r\n"},
                    {"\n", "\n", absl::StrCat("$", payload.size(), "\r\n", payload.substr(0, 9)),
                     payload.substr(9), "*1\r\n$4\r\nPING\r\n"});
  absl::StatusOr<std::unique_ptr<RedisSnapshotStream>> stream = OpenFake(master);
  REQUIRE(stream.ok());
  CHECK((*stream)->rdb_only());
  CHECK(ReadStream(**stream) == payload);
  CHECK_FALSE((*stream)->eof_marked());
}

TEST_CASE("a stream whose master misbehaves fails without hanging") {
  SECTION("a malformed header is data loss") {
    for (const std::string& header : {std::string("$EOF:short\r\n"), std::string("$-5\r\n"),
                                      std::string("+OK\r\n"), std::string("$12")}) {
      INFO(absl::CHexEscape(header));
      // A header that never ends: kept open, more than a header can be.
      FakeMaster master(kHandshake, {header, header.back() == '\n' ? "" : std::string(5000, 'z')},
                        /*keep=*/true);
      absl::StatusOr<std::unique_ptr<RedisSnapshotStream>> stream = OpenFake(master);
      REQUIRE(stream.ok());
      std::vector<char> buffer(100);
      absl::StatusOr<size_t> n = (*stream)->Read(buffer.data(), buffer.size());
      INFO(n.status());
      CHECK(absl::IsDataLoss(n.status()));
    }
  }
  SECTION("a master that hangs up mid-RDB or mid-mark is unavailable") {
    for (const std::string& cut :
         {std::string("REDIS0010 and no more"),
          absl::StrCat("REDIS0010", std::string(50, 'x'), kMark.substr(0, 39))}) {
      FakeMaster master(kHandshake, {absl::StrCat("$EOF:", kMark, "\r\n"), cut});
      absl::StatusOr<std::unique_ptr<RedisSnapshotStream>> stream = OpenFake(master);
      REQUIRE(stream.ok());
      std::vector<char> buffer(1 << 16);
      absl::StatusOr<size_t> n;
      while ((n = (*stream)->Read(buffer.data(), buffer.size())).ok()) REQUIRE(*n > 0);
      INFO(n.status());
      CHECK(absl::IsUnavailable(n.status()));
      CHECK(absl::StrContains(n.status().message(), absl::StrCat("127.0.0.1:", master.port())));
    }
  }
  SECTION("a master that stops sending is unavailable after the timeout") {
    FakeMaster master(kHandshake, {"$100\r\nREDIS"}, /*keep=*/true);
    absl::StatusOr<std::unique_ptr<RedisSnapshotStream>> stream =
        OpenFake(master, absl::Milliseconds(200));
    REQUIRE(stream.ok());
    std::vector<char> buffer(100);
    size_t read = 0;
    absl::StatusOr<size_t> n;
    while ((n = (*stream)->Read(buffer.data(), buffer.size())).ok()) {
      REQUIRE(*n > 0);
      read += *n;
    }
    INFO(n.status());
    CHECK(read == 5);
    CHECK(absl::IsUnavailable(n.status()));
    CHECK(absl::StrContains(n.status().message(), "sent nothing"));
  }
  SECTION("a refused PSYNC fails the open") {
    FakeMaster master({"+OK\r\n", "+OK\r\n", "-LOADING Redis is loading the dataset\r\n"}, {});
    absl::StatusOr<std::unique_ptr<RedisSnapshotStream>> stream = OpenFake(master);
    CHECK(absl::IsFailedPrecondition(stream.status()));
    CHECK(absl::StrContains(stream.status().message(), "LOADING"));
  }
  SECTION("a master that never answers times out") {
    FakeMaster master({}, {}, /*keep=*/true);
    absl::StatusOr<std::unique_ptr<RedisSnapshotStream>> stream =
        OpenFake(master, absl::Milliseconds(200));
    CHECK(absl::IsDeadlineExceeded(stream.status()));
  }
}

}  // namespace
}  // namespace codeco::checkpointer
