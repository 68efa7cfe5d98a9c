#pragma once
// The application-consistent checkpoint driver for Redis, the default where
// CRIU cannot run. Writes are fenced (CLIENT PAUSE … WRITE, reads go on),
// the key count (and, for a small dataset, its digest) recorded, and the
// RDB of that moment streamed straight from the source: this process
// connects to it as a replica that wants only the RDB, the source forks
// (diskless, uncompressed) and sends it over the socket, and whoever packs
// the image reads it as it comes (RedisSnapshotStream), so packing and
// pushing overlap taking the state and the source's disk is not touched.
// Every write Redis acknowledged before the fence is in the RDB; a write
// sent after it waits, unacknowledged, until the migration either cuts over
// (the source shuts down, the client's connection drops and it retries
// against the destination) or aborts (the fence is lifted and the source
// serves on, nothing lost). The older path, SAVE and the RDB file
// (RedisCheckpointHook::Checkpoint), remains for callers that want a file.
// Restoring either starts redis-server on the RDB and checks that it loaded
// the same number of keys, or, to overlap loading with the transfer,
// streams the RDB into an empty Redis just started, this process acting as
// its replication master (RestoreInto, redis_feed.h).

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "checkpointer/core/state_driver.h"

namespace codeco::checkpointer {

/// A connection to one Redis server (hiredis, RESP2). Not thread-safe.
class RedisConnection {
 public:
  /// Connects to `host`:`port` within `timeout` (also each command's).
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Connect(const std::string& host,
                                                                  int port,
                                                                  absl::Duration timeout);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  /// Runs one command; its reply as text (a status, a bulk string, or an
  /// integer in decimal; a nil is ""). A Redis error is FAILED_PRECONDITION
  /// with Redis's message; a broken connection UNAVAILABLE.
  absl::StatusOr<std::string> Command(const std::vector<std::string>& argv);
  /// Runs a command whose reply is an array of bulk strings.
  absl::StatusOr<std::vector<std::string>> ArrayCommand(const std::vector<std::string>& argv);
  /// Sets the timeout of each command from now on.
  void SetTimeout(absl::Duration timeout);

 private:
  explicit RedisConnection(void* context) : context_(context) {}
  void* context_;  // redisContext
};

/// Where a Redis instance is and what it keeps.
struct RedisInstance {
  /// Address Redis listens on.
  std::string host = "127.0.0.1";
  /// Port.
  int port = 0;
};

/// A redis-server process this process started; killed (SIGKILL) when the
/// object goes.
class RedisServer {
 public:
  /// Starts `binary` bound to `instance`, its data in `directory` (created)
  /// as dump.rdb (loaded at start when present), with no persistence of its
  /// own; waits up to `timeout` until it has loaded. FAILED_PRECONDITION when
  /// it cannot start or exits (its log, redis.log in `directory`, is named),
  /// DEADLINE_EXCEEDED when it never finishes loading.
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start(const std::string& binary,
                                                            const std::filesystem::path& directory,
                                                            const RedisInstance& instance,
                                                            absl::Duration timeout);
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  /// Where it listens.
  const RedisInstance& instance() const { return instance_; }
  /// Its process id (-1 once stopped).
  int pid() const { return pid_; }
  /// Kills it now (SIGKILL) and reaps it; idempotent.
  void Kill();

 private:
  RedisServer(int pid, RedisInstance instance) : pid_(pid), instance_(std::move(instance)) {}
  int pid_;
  RedisInstance instance_;
};

/// A fenced, saved Redis: the RDB to pack and what restoring must find.
struct RedisSnapshot {
  /// The RDB as saved while writes were fenced (a hard link or a copy).
  std::filesystem::path rdb;
  /// Keys in the dataset at the fence (DBSIZE of db 0).
  int64_t keys = 0;
  /// DEBUG DIGEST of the dataset at the fence (empty when the server does
  /// not allow DEBUG from this client, or the dataset is larger than
  /// Options::digest_max_bytes).
  std::string digest;
  /// When the fence was raised.
  absl::Time fenced_at;
};

/// A fenced Redis whose RDB is being streamed from it: what restoring must
/// find, and the RDB itself as it arrives.
struct RedisStreamedSnapshot {
  /// Keys in the dataset at the fence (DBSIZE of db 0).
  int64_t keys = 0;
  /// DEBUG DIGEST of the dataset at the fence (empty when the server does
  /// not allow DEBUG from this client, or the dataset is larger than
  /// Options::digest_max_bytes).
  std::string digest;
  /// When the fence was raised.
  absl::Time fenced_at;
  /// What the RDB will probably weigh, in bytes: used_memory_dataset of
  /// INFO memory at the fence. An estimate only (an uncompressed RDB of
  /// incompressible strings is about that size; small keys, integers and
  /// compact encodings make it smaller, allocator overhead counts in it);
  /// 0 when the server does not say.
  int64_t estimated_bytes = 0;
  /// The RDB of the dataset at the fence, uncompressed, read from the
  /// source's socket as the source produces it (a RedisSnapshotStream). Its
  /// snapshot is fixed already (the source forks for it in the turn of its
  /// event loop that answered the replica, before it runs another command):
  /// the fence may be lifted or the source written to before it is read,
  /// but the source must live until it is, and it must not be left unread
  /// for longer than the source's repl-timeout (60 s by default): a source
  /// then drops a replica that takes nothing, and Read fails.
  std::unique_ptr<StateStream> rdb;
};

/// The checkpoint hook for Redis.
class RedisCheckpointHook {
 public:
  /// Options of the hook.
  struct Options {
    /// How long writes may stay fenced before Redis lifts the pause by
    /// itself (a crashed migrator never freezes a source for good). Default 5 min.
    absl::Duration max_fence = absl::Minutes(5);
    /// Per-command timeout (SAVE of a large dataset included); also how
    /// long a streamed checkpoint waits for the source to fork and, while
    /// its RDB is read, for each next byte. Default 2 min.
    absl::Duration command_timeout = absl::Minutes(2);
    /// The redis-server binary restores start. Default /usr/bin/redis-server.
    std::string server_binary = "/usr/bin/redis-server";
    /// Also record the dataset's DEBUG DIGEST at the fence (where the server
    /// allows DEBUG), for Verify to compare, when the dataset
    /// (used_memory_dataset of INFO memory) is at most this many bytes; 0:
    /// never, negative: always. The digest walks the whole dataset while
    /// writes are fenced (0.6 s for 500 MB of 1 MB values here, more for
    /// many small keys), and a restored RDB is checked anyway: Redis checks
    /// its CRC64 as it loads it, the image layer's sha256 digest covers the
    /// transfer, Verify the key count.
    /// Default 64 MiB.
    int64_t digest_max_bytes = int64_t{64} << 20;
    /// The address of this process a restored Redis reaches it at:
    /// RestoreInto serves the RDB from there as that Redis's replication
    /// master. Default 127.0.0.1.
    std::string feed_host = "127.0.0.1";
    /// How long RestoreInto waits, once the whole RDB is sent, for the
    /// restored Redis to report it loaded. Zero (the default): command_timeout.
    absl::Duration restore_timeout = absl::ZeroDuration();
  };

  /// A hook with `options`.
  explicit RedisCheckpointHook(Options options) : options_(std::move(options)) {}

  /// The options it runs with.
  const Options& options() const { return options_; }

  /// Fences writes on `source`, records its key count (and digest, see
  /// Options::digest_max_bytes) and the size of its dataset, and streams its
  /// RDB: it sets `repl-diskless-sync yes`, `repl-diskless-sync-delay 0`
  /// and `rdbcompression no` on `source` (those that differ), connects to
  /// it as a replica wanting only the RDB (RedisSnapshotStream::Open), and
  /// once the source has answered "+FULLRESYNC" (it forks in that same turn
  /// of its event loop, before it runs another command) puts the three
  /// settings back (the fork keeps its own copy). Returns with writes still
  /// fenced, until Abort or Retire; the RDB is read from the returned
  /// stream. Commands and waits time out after command_timeout (the source
  /// may first finish a save already under way for another replica). On
  /// failure the settings are put back, the fence lifted, the connection
  /// closed: the source serves on as before. Without `digest` no DEBUG
  /// DIGEST is taken at the fence, whatever the dataset's size.
  absl::StatusOr<RedisStreamedSnapshot> StreamCheckpoint(const RedisInstance& source,
                                                         bool digest = true);
  /// The checkpoint as a file: fences writes on `source`, saves
  /// (uncompressed: rdbcompression is set to no for the SAVE and put back
  /// after it), and links (or, across filesystems, copies) the RDB into
  /// `directory` (created; must not exist). On failure the fence is lifted
  /// again. Nothing can be read before SAVE ends (about 1-2 s per 500 MB);
  /// the driver streams instead (StreamCheckpoint).
  absl::StatusOr<RedisSnapshot> Checkpoint(const RedisInstance& source,
                                           const std::filesystem::path& directory);
  /// Lifts the fence on `source`: the migration was abandoned and the source serves on.
  absl::Status Abort(const RedisInstance& source);
  /// Ends `source` for good after a cut-over (SHUTDOWN NOSAVE): clients
  /// blocked on the fence see their connection drop, unacknowledged.
  absl::Status Retire(const RedisInstance& source);

  /// Checks that `restored` holds `expected_keys` keys and, when
  /// `expected_digest` is set, the same DEBUG DIGEST; DATA_LOSS naming both
  /// otherwise.
  absl::Status Verify(const RedisInstance& restored, int64_t expected_keys,
                      const std::string& expected_digest);

  /// Starts redis-server on `rdb` (moved into `data_directory`, created) at
  /// `target`, waits until it has loaded, and checks it holds
  /// `expected_keys` (DATA_LOSS otherwise); on any failure the process is
  /// stopped and the directory removed (nothing half-restored is left).
  absl::StatusOr<std::unique_ptr<RedisServer>> Restore(
      const std::filesystem::path& rdb, const std::filesystem::path& data_directory,
      const RedisInstance& target, int64_t expected_keys);

  /// Loads the RDB read from `rdb` as it arrives into `restored`, an empty
  /// Redis master (it may have just been started: connecting is retried
  /// for command_timeout), by serving it as that Redis's replication
  /// master on feed_host: its repl-diskless-load is set to on-empty-db
  /// (it parses the RDB from the socket as it arrives), REPLICAOF points
  /// it here, and once it reports the RDB loaded it is made a master again
  /// (REPLICAOF NO ONE) and repl-diskless-load is put back. Returns then.
  /// FAILED_PRECONDITION, nothing changed, when `restored` holds keys or is
  /// a replica; `rdb`'s error (its code, what was happening prefixed) when
  /// the stream fails; DATA_LOSS when Redis refuses the RDB (a corrupted
  /// one fails its CRC64 check, and Redis then exits), drops the link or
  /// does not finish loading within restore_timeout. Every failure after
  /// REPLICAOF also tries REPLICAOF NO ONE (no reconnecting to a feed that
  /// is gone); Redis itself empties a half-loaded dataset. It may stop
  /// reading `rdb` before its end: a writer feeding it must be stopped by
  /// the caller (StreamPipe::Stop) once this returns.
  absl::Status RestoreInto(const RedisInstance& restored, StateStream& rdb);

 private:
  Options options_;
};

/// The Redis hook as a StateDriver: handles containers whose image is a
/// Redis image ("redis", "redis:<tag>", "<registry>/…/redis[:tag|@digest]")
/// and that have an endpoint. Checkpoint streams (StreamCheckpoint): the
/// dump directory it creates stays empty, and the dump's one file,
/// dump.rdb, is its `stream`, read from the source as the source produces
/// it (the dump's `bytes` are the dataset's size, an estimate until it is
/// read). The facts are the key count and, where the server allows DEBUG
/// and the dataset is small enough (Options::digest_max_bytes), the dataset
/// digest, both checked by Verify on the restored server. Fenced: a write
/// after the dump waits unacknowledged until Resume or Retire. Restores
/// stream dump.rdb into the empty Redis of the restored container
/// (RedisCheckpointHook::RestoreInto).
class RedisHookDriver final : public StateDriver {
 public:
  /// A driver over a hook with `options`.
  explicit RedisHookDriver(RedisCheckpointHook::Options options) : hook_(std::move(options)) {}

  std::string name() const override { return "redis-hook"; }
  bool Handles(const ContainerTarget& target) const override;
  /// Creates `directory` (empty; it must not exist) and streams the RDB
  /// (RedisCheckpointHook::StreamCheckpoint): the dump's streamed_file is
  /// "dump.rdb", its stream the RDB. On failure `directory` is removed.
  absl::StatusOr<StateDump> Checkpoint(const ContainerTarget& target,
                                       const std::filesystem::path& directory) override;
  absl::Status Resume(const ContainerTarget& source) override;
  absl::Status Retire(const ContainerTarget& source) override;
  /// "dump.rdb".
  std::string StreamedFile() const override { return "dump.rdb"; }
  /// Streams dump.rdb into the empty Redis at `restored`'s endpoint
  /// (RedisCheckpointHook::RestoreInto).
  absl::Status RestoreInto(const ContainerTarget& restored, StateStream& state) override;
  absl::Status Verify(const ContainerTarget& restored,
                      const std::map<std::string, std::string>& facts) override;

 private:
  RedisCheckpointHook hook_;
};

/// Fact names the Redis driver records.
inline constexpr char kRedisKeysFact[] = "org.codeco.redis.keys";
/// DEBUG DIGEST of the dataset at the fence.
inline constexpr char kRedisDigestFact[] = "org.codeco.redis.digest";

/// True when `image` names a Redis image (the repository's last path component is "redis").
bool IsRedisImage(const std::string& image);

/// The host and port of an endpoint "host:port"; INVALID_ARGUMENT naming
/// `field` otherwise.
absl::StatusOr<RedisInstance> ParseRedisEndpoint(const std::string& endpoint,
                                                 const std::string& field);

}  // namespace codeco::checkpointer
