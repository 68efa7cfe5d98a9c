#include "checkpointer/drivers/redis_hook.h"

#include <hiredis.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "checkpointer/drivers/redis_feed.h"
#include "checkpointer/drivers/redis_snapshot_stream.h"
#include "codeco/common/status.h"

extern char** environ;

namespace codeco::checkpointer {
namespace {

namespace fs = std::filesystem;

redisContext* Ctx(void* context) { return static_cast<redisContext*>(context); }

// The value of `field` in an INFO section ("loading:0").
std::string InfoField(const std::string& info, const std::string& field) {
  const std::string key = field + ":";
  size_t at = info.find("\n" + key);
  if (at == std::string::npos) {
    if (!absl::StartsWith(info, key)) return "";
    at = 0;
  } else {
    at += 1;
  }
  const size_t end = info.find_first_of("\r\n", at);
  return info.substr(at + key.size(), end == std::string::npos ? std::string::npos
                                                                : end - at - key.size());
}

std::string Address(const RedisInstance& instance) {
  return absl::StrCat(instance.host, ":", instance.port);
}

void StopProcess(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Connect(const std::string& host,
                                                                          int port,
                                                                          absl::Duration timeout) {
  redisContext* c = redisConnectWithTimeout(host.c_str(), port, absl::ToTimeval(timeout));
  if (c == nullptr) return absl::ResourceExhaustedError("redis: cannot allocate a connection");
  if (c->err != 0) {
    std::string why = c->errstr;
    redisFree(c);
    return absl::UnavailableError(absl::StrCat("redis at ", host, ":", port, ": ", why));
  }
  redisSetTimeout(c, absl::ToTimeval(timeout));
  return std::unique_ptr<RedisConnection>(new RedisConnection(c));
}

RedisConnection::~RedisConnection() { redisFree(Ctx(context_)); }

void RedisConnection::SetTimeout(absl::Duration timeout) {
  redisSetTimeout(Ctx(context_), absl::ToTimeval(timeout));
}

namespace {

// Sends `argv` and returns the reply (owned by the caller) or the failure.
absl::StatusOr<redisReply*> Send(redisContext* c, const std::vector<std::string>& argv) {
  std::vector<const char*> args;
  std::vector<size_t> lengths;
  for (const std::string& a : argv) {
    args.push_back(a.data());
    lengths.push_back(a.size());
  }
  auto* reply = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(args.size()), args.data(), lengths.data()));
  const std::string name = argv.empty() ? "" : argv[0];
  if (reply == nullptr) {
    return absl::UnavailableError(absl::StrCat("redis ", name, ": ", c->errstr));
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    std::string message(reply->str, reply->len);
    freeReplyObject(reply);
    return absl::FailedPreconditionError(absl::StrCat("redis ", name, ": ", message));
  }
  return reply;
}

}  // namespace

absl::StatusOr<std::string> RedisConnection::Command(const std::vector<std::string>& argv) {
  ASSIGN_OR_RETURN(redisReply * reply, Send(Ctx(context_), argv));
  std::string out;
  switch (reply->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
      out.assign(reply->str, reply->len);
      break;
    case REDIS_REPLY_INTEGER:
      out = absl::StrCat(reply->integer);
      break;
    default:
      break;
  }
  freeReplyObject(reply);
  return out;
}

absl::StatusOr<std::vector<std::string>> RedisConnection::ArrayCommand(
    const std::vector<std::string>& argv) {
  ASSIGN_OR_RETURN(redisReply * reply, Send(Ctx(context_), argv));
  std::vector<std::string> out;
  if (reply->type == REDIS_REPLY_ARRAY) {
    for (size_t i = 0; i < reply->elements; ++i) {
      const redisReply* e = reply->element[i];
      out.emplace_back(e->str == nullptr ? "" : std::string(e->str, e->len));
    }
  }
  freeReplyObject(reply);
  return out;
}

namespace {

// Records what a fenced dataset holds, on `redis`: its key count (DBSIZE)
// in `*keys`; its DEBUG DIGEST in `*digest` when the dataset is at most
// `digest_max_bytes` (0: never, negative: always) and the server allows
// DEBUG; and, when `want_dataset`, its size (used_memory_dataset of INFO
// memory, 0 when the server does not say) in `*dataset`.
absl::Status RecordAtFence(RedisConnection& redis, int64_t digest_max_bytes, bool want_dataset,
                           int64_t* keys, std::string* digest, int64_t* dataset) {
  ASSIGN_OR_RETURN(std::string count, redis.Command({"DBSIZE"}));
  if (!absl::SimpleAtoi(count, keys)) {
    return absl::FailedPreconditionError("redis: DBSIZE gave \"" + count + "\"");
  }
  // The digest walks the whole dataset while writes are fenced (0.6 s for
  // 500 MB of 1 MB values here, more for many small keys), so only a small
  // dataset gets one: the RDB of a large one is checked anyway, by Redis's
  // CRC64 as it loads it and by the image layer's sha256 digest in
  // transit, and Verify counts its keys.
  bool take_digest = digest_max_bytes < 0;
  if (digest_max_bytes > 0 || want_dataset) {
    ASSIGN_OR_RETURN(std::string memory, redis.Command({"INFO", "memory"}));
    int64_t size = 0;
    // A server that does not say how big its dataset is gets no digest.
    const bool known = absl::SimpleAtoi(InfoField(memory, "used_memory_dataset"), &size);
    if (digest_max_bytes > 0) take_digest = known && size <= digest_max_bytes;
    if (want_dataset) *dataset = known ? size : 0;
  }
  if (take_digest) {
    // Refused unless the server allows DEBUG to this client: then the key
    // count alone is checked.
    absl::StatusOr<std::string> taken = redis.Command({"DEBUG", "DIGEST"});
    if (taken.ok()) *digest = *taken;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RedisSnapshot> RedisCheckpointHook::Checkpoint(const RedisInstance& source,
                                                              const fs::path& directory) {
  std::error_code error;
  if (fs::exists(directory, error)) {
    return absl::FailedPreconditionError(absl::StrCat(directory.string(), " exists"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<RedisConnection> redis,
                   RedisConnection::Connect(source.host, source.port, options_.command_timeout));
  // Where Redis writes its RDB.
  ASSIGN_OR_RETURN(std::vector<std::string> dir, redis->ArrayCommand({"CONFIG", "GET", "dir"}));
  ASSIGN_OR_RETURN(std::vector<std::string> file,
                   redis->ArrayCommand({"CONFIG", "GET", "dbfilename"}));
  if (dir.size() != 2 || file.size() != 2) {
    return absl::FailedPreconditionError("redis: CONFIG GET dir/dbfilename gave no answer");
  }
  const fs::path rdb = fs::path(dir[1]) / file[1];

  RedisSnapshot snapshot;
  snapshot.fenced_at = absl::Now();
  RETURN_IF_ERROR(redis
                      ->Command({"CLIENT", "PAUSE",
                                 absl::StrCat(absl::ToInt64Milliseconds(options_.max_fence)),
                                 "WRITE"})
                      .status());
  absl::Status saved = [&]() -> absl::Status {
    RETURN_IF_ERROR(RecordAtFence(*redis, options_.digest_max_bytes, /*want_dataset=*/false,
                                  &snapshot.keys, &snapshot.digest, nullptr));
    // Saved uncompressed: LZF makes SAVE about 3 times slower on data that
    // does not compress, and the layer travels uncompressed anyway. The
    // setting is put back even when SAVE fails (a migrator that dies in
    // between leaves it off: bigger RDBs, nothing lost).
    ASSIGN_OR_RETURN(std::vector<std::string> compression,
                     redis->ArrayCommand({"CONFIG", "GET", "rdbcompression"}));
    if (compression.size() != 2) {
      return absl::FailedPreconditionError("redis: CONFIG GET rdbcompression gave no answer");
    }
    const bool compressed = compression[1] != "no";
    if (compressed) {
      RETURN_IF_ERROR(redis->Command({"CONFIG", "SET", "rdbcompression", "no"}).status());
    }
    absl::Status save = redis->Command({"SAVE"}).status();
    if (compressed) {
      absl::Status reset =
          redis->Command({"CONFIG", "SET", "rdbcompression", compression[1]}).status();
      if (save.ok()) save = reset;
    }
    RETURN_IF_ERROR(save);
    fs::create_directories(directory, error);
    if (error) return absl::InternalError(absl::StrCat("creating ", directory.string(), ": ",
                                                       error.message()));
    snapshot.rdb = directory / "dump.rdb";
    // A hard link is the snapshot at no cost: Redis writes its next RDB to
    // a temporary file and renames it over this name, so the linked inode
    // never changes. Another filesystem: a copy.
    fs::create_hard_link(rdb, snapshot.rdb, error);
    if (error) {
      error.clear();
      fs::copy_file(rdb, snapshot.rdb, error);
    }
    if (error) {
      return absl::InternalError(
          absl::StrCat("copying ", rdb.string(), " to ", snapshot.rdb.string(), ": ",
                       error.message()));
    }
    return absl::OkStatus();
  }();
  if (!saved.ok()) {
    redis->Command({"CLIENT", "UNPAUSE"}).IgnoreError();
    fs::remove_all(directory, error);
    return saved;
  }
  return snapshot;
}

namespace {

// The settings a streamed checkpoint needs on the source, with the values
// it needs: a fork that writes the RDB to the replica's socket, not to a
// file (the source's disk is not touched and the first bytes leave at
// once), started as soon as the replica asks, uncompressed (LZF makes
// saving about 3 times slower on data that does not compress, and the
// layer travels uncompressed anyway).
constexpr std::pair<const char*, const char*> kStreamSettings[] = {
    {"repl-diskless-sync", "yes"},
    {"repl-diskless-sync-delay", "0"},
    {"rdbcompression", "no"},
};

}  // namespace

absl::StatusOr<RedisStreamedSnapshot> RedisCheckpointHook::StreamCheckpoint(
    const RedisInstance& source, bool digest) {
  const std::string where = Address(source);
  ASSIGN_OR_RETURN(std::unique_ptr<RedisConnection> redis,
                   RedisConnection::Connect(source.host, source.port, options_.command_timeout));
  RedisStreamedSnapshot snapshot;
  snapshot.fenced_at = absl::Now();
  RETURN_IF_ERROR(
      redis
          ->Command({"CLIENT", "PAUSE", absl::StrCat(absl::ToInt64Milliseconds(options_.max_fence)),
                     "WRITE"})
          .status());
  // The settings changed on the source, with the values to put back.
  std::vector<std::pair<std::string, std::string>> changed;
  // Puts every changed setting back (a connection that broke is made again
  // once); the first failure, the settings it could not put back kept.
  auto put_back = [&]() -> absl::Status {
    absl::Status first;
    bool reconnected = false;
    std::vector<std::pair<std::string, std::string>> left;
    for (const auto& [name, value] : changed) {
      absl::Status reset = redis->Command({"CONFIG", "SET", name, value}).status();
      if (absl::IsUnavailable(reset) && !reconnected) {
        reconnected = true;
        absl::StatusOr<std::unique_ptr<RedisConnection>> again =
            RedisConnection::Connect(source.host, source.port, options_.command_timeout);
        if (again.ok()) {
          redis = *std::move(again);
          reset = redis->Command({"CONFIG", "SET", name, value}).status();
        }
      }
      if (!reset.ok()) {
        left.emplace_back(name, value);
        if (first.ok()) {
          first = absl::Status(reset.code(),
                               absl::StrCat("putting ", name, " back to \"", value,
                                            "\" on the redis at ", where, ": ", reset.message()));
        }
      }
    }
    changed = std::move(left);
    return first;
  };
  std::unique_ptr<RedisSnapshotStream> rdb;
  absl::Status taken = [&]() -> absl::Status {
    RETURN_IF_ERROR(RecordAtFence(*redis, digest ? options_.digest_max_bytes : 0,
                                  /*want_dataset=*/true, &snapshot.keys, &snapshot.digest,
                                  &snapshot.estimated_bytes));
    for (const auto& [name, wanted] : kStreamSettings) {
      ASSIGN_OR_RETURN(std::vector<std::string> value,
                       redis->ArrayCommand({"CONFIG", "GET", name}));
      if (value.size() != 2) {
        return absl::FailedPreconditionError(
            absl::StrCat("the redis at ", where, " gave no answer to CONFIG GET ", name));
      }
      if (value[1] == wanted) continue;
      // Recorded first: a SET that timed out may have been applied.
      changed.emplace_back(name, value[1]);
      RETURN_IF_ERROR(redis->Command({"CONFIG", "SET", name, wanted}).status());
    }
    ASSIGN_OR_RETURN(rdb,
                     RedisSnapshotStream::Open(source.host, source.port, options_.command_timeout));
    // The source has forked with the settings above: they can go back.
    return put_back();
  }();
  if (!taken.ok()) {
    // The source serves on as before: a diskless fork whose only replica
    // hangs up is ended by the source, the settings go back, the fence lifts.
    rdb.reset();
    put_back().IgnoreError();
    absl::Status unpaused = redis->Command({"CLIENT", "UNPAUSE"}).status();
    if (absl::IsUnavailable(unpaused)) {
      absl::StatusOr<std::unique_ptr<RedisConnection>> again =
          RedisConnection::Connect(source.host, source.port, options_.command_timeout);
      if (again.ok()) (*again)->Command({"CLIENT", "UNPAUSE"}).IgnoreError();
    }
    return taken;
  }
  snapshot.rdb = std::move(rdb);
  return snapshot;
}

absl::Status RedisCheckpointHook::Abort(const RedisInstance& source) {
  ASSIGN_OR_RETURN(std::unique_ptr<RedisConnection> redis,
                   RedisConnection::Connect(source.host, source.port, options_.command_timeout));
  return redis->Command({"CLIENT", "UNPAUSE"}).status();
}

absl::Status RedisCheckpointHook::Retire(const RedisInstance& source) {
  ASSIGN_OR_RETURN(std::unique_ptr<RedisConnection> redis,
                   RedisConnection::Connect(source.host, source.port, options_.command_timeout));
  // SHUTDOWN closes the connection without a reply: that is success.
  absl::Status st = redis->Command({"SHUTDOWN", "NOSAVE"}).status();
  if (st.ok() || absl::IsUnavailable(st)) return absl::OkStatus();
  return st;
}

absl::Status RedisCheckpointHook::Verify(const RedisInstance& restored, int64_t expected_keys,
                                         const std::string& expected_digest) {
  ASSIGN_OR_RETURN(std::unique_ptr<RedisConnection> redis,
                   RedisConnection::Connect(restored.host, restored.port,
                                            options_.command_timeout));
  ASSIGN_OR_RETURN(std::string keys, redis->Command({"DBSIZE"}));
  int64_t count = -1;
  if (!absl::SimpleAtoi(keys, &count) || count != expected_keys) {
    return absl::DataLossError(absl::StrCat("the restored redis on ", restored.host, ":",
                                            restored.port, " holds ", keys,
                                            " keys, the checkpoint ", expected_keys));
  }
  if (expected_digest.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::string digest, redis->Command({"DEBUG", "DIGEST"}));
  if (digest != expected_digest) {
    return absl::DataLossError(absl::StrCat("the restored redis on ", restored.host, ":",
                                            restored.port, " has dataset digest ", digest,
                                            ", the checkpoint ", expected_digest));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::Start(const std::string& binary,
                                                                const fs::path& directory,
                                                                const RedisInstance& instance,
                                                                absl::Duration timeout) {
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) {
    return absl::InternalError(absl::StrCat("creating ", directory.string(), ": ", error.message()));
  }
  const fs::path log = directory / "redis.log";
  std::vector<std::string> args = {binary,
                                   "--bind", instance.host,
                                   "--port", absl::StrCat(instance.port),
                                   "--dir", directory.string(),
                                   "--dbfilename", "dump.rdb",
                                   "--save", "",
                                   "--appendonly", "no",
                                   "--daemonize", "no",
                                   "--logfile", log.string(),
                                   // DEBUG DIGEST from loopback: the restore's checksum.
                                   "--enable-debug-command", "local"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, binary.c_str(), nullptr, nullptr, argv.data(), environ) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot start ", binary,
                                                      " (install redis-server)"));
  }
  std::unique_ptr<RedisServer> server(new RedisServer(pid, instance));
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last = absl::UnavailableError("not started");
  while (absl::Now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      server->pid_ = -1;
      return absl::FailedPreconditionError(
          absl::StrCat("redis-server exited at start (see ", log.string(), ")"));
    }
    absl::StatusOr<std::unique_ptr<RedisConnection>> redis =
        RedisConnection::Connect(instance.host, instance.port, absl::Seconds(5));
    if (redis.ok()) {
      absl::StatusOr<std::string> info = (*redis)->Command({"INFO", "persistence"});
      if (info.ok() && InfoField(*info, "loading") == "0") return server;
      last = info.ok() ? absl::UnavailableError("still loading") : info.status();
    } else {
      last = redis.status();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat("redis-server on ", instance.host, ":",
                                                  instance.port, " did not finish loading: ",
                                                  last.message()));
}

RedisServer::~RedisServer() { Kill(); }

void RedisServer::Kill() {
  StopProcess(pid_);
  pid_ = -1;
}

absl::StatusOr<std::unique_ptr<RedisServer>> RedisCheckpointHook::Restore(
    const fs::path& rdb, const fs::path& data_directory, const RedisInstance& target,
    int64_t expected_keys) {
  std::error_code error;
  if (fs::exists(data_directory, error)) {
    return absl::FailedPreconditionError(absl::StrCat(data_directory.string(), " exists"));
  }
  fs::create_directories(data_directory, error);
  if (error) {
    return absl::InternalError(absl::StrCat("creating ", data_directory.string(), ": ",
                                            error.message()));
  }
  auto fail = [&](absl::Status status) {
    fs::remove_all(data_directory, error);
    return status;
  };
  fs::rename(rdb, data_directory / "dump.rdb", error);
  if (error) fs::copy_file(rdb, data_directory / "dump.rdb", error);
  if (error) return fail(absl::InternalError(absl::StrCat("placing the RDB: ", error.message())));
  absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(
      options_.server_binary, data_directory, target, options_.command_timeout);
  if (!server.ok()) return fail(server.status());
  absl::Status verified = Verify(target, expected_keys, "");
  if (!verified.ok()) {
    (*server)->Kill();
    return fail(verified);
  }
  return server;
}

namespace {

// Connects to `instance` once it answers PING, retrying until `deadline`: a
// container just started may not listen yet. Commands then time out after
// `command_timeout`.
absl::StatusOr<std::unique_ptr<RedisConnection>> ConnectWhenReady(const RedisInstance& instance,
                                                                  absl::Time deadline,
                                                                  absl::Duration command_timeout) {
  absl::Status last = absl::UnavailableError("not tried");
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    absl::StatusOr<std::unique_ptr<RedisConnection>> redis =
        RedisConnection::Connect(instance.host, instance.port, std::min(left, absl::Seconds(5)));
    if (redis.ok()) {
      absl::Status pong = (*redis)->Command({"PING"}).status();
      if (pong.ok()) {
        (*redis)->SetTimeout(command_timeout);
        return redis;
      }
      last = pong;
    } else {
      last = redis.status();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("the redis at ", Address(instance), " does not answer: ", last.message()));
}

// Keys in every database, from INFO keyspace ("db0:keys=12,expires=0,...").
int64_t KeysIn(const std::string& keyspace) {
  int64_t total = 0;
  for (absl::string_view line : absl::StrSplit(keyspace, '\n')) {
    if (!absl::StartsWith(line, "db")) continue;
    const size_t at = line.find("keys=");
    if (at == absl::string_view::npos) continue;
    absl::string_view count = line.substr(at + 5);
    count = count.substr(0, count.find(','));
    int64_t keys = 0;
    if (absl::SimpleAtoi(count, &keys)) total += keys;
  }
  return total;
}

// Makes `*redis`, at `instance`, a master (REPLICAOF NO ONE), retried until
// `deadline` while it is still loading (it refuses with LOADING until it has
// given up a load whose link dropped). A connection that broke is made
// again once; UNAVAILABLE when the server no longer answers.
absl::Status StopReplicating(std::unique_ptr<RedisConnection>& redis, const RedisInstance& instance,
                             absl::Time deadline) {
  bool reconnected = false;
  for (;;) {
    absl::Status stopped = redis->Command({"REPLICAOF", "NO", "ONE"}).status();
    if (stopped.ok() || absl::Now() >= deadline) return stopped;
    if (absl::IsUnavailable(stopped) && !reconnected) {
      reconnected = true;
      absl::StatusOr<std::unique_ptr<RedisConnection>> again = RedisConnection::Connect(
          instance.host, instance.port, std::min(deadline - absl::Now(), absl::Seconds(5)));
      if (!again.ok()) return again.status();
      redis = *std::move(again);
      continue;
    }
    if (!absl::StrContains(stopped.message(), "LOADING")) return stopped;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// Sends the RDB read from `rdb` to `restored` through `feed`, `restored`
// having been made a replica of it, and waits until `restored` reports it
// loaded (see RedisCheckpointHook::RestoreInto for the errors).
absl::Status FeedReplica(RedisConnection& redis, RedisFeed& feed, const RedisInstance& restored,
                         StateStream& rdb, absl::Duration command_timeout,
                         absl::Duration restore_timeout) {
  const std::string where = Address(restored);
  auto dropped = [&](const absl::Status& why) {
    return absl::DataLossError(absl::StrCat("the redis at ", where,
                                            " stopped taking the RDB after ", feed.rdb_bytes_sent(),
                                            " bytes: ", why.message()));
  };
  absl::Status accepted = feed.AcceptReplica(absl::Now() + command_timeout);
  if (!accepted.ok()) {
    return absl::Status(accepted.code(), absl::StrCat("the redis at ", where,
                                                      " did not start replicating from the "
                                                      "restore feed on port ",
                                                      feed.port(), ": ", accepted.message()));
  }
  if (absl::Status begun = feed.BeginRdb(command_timeout); !begun.ok()) return dropped(begun);
  std::vector<char> buffer(size_t{1} << 20);
  for (;;) {
    absl::StatusOr<size_t> n = rdb.Read(buffer.data(), buffer.size());
    if (!n.ok()) {
      return absl::Status(n.status().code(), absl::StrCat("streaming the RDB into the redis at ",
                                                          where, " (", feed.rdb_bytes_sent(),
                                                          " bytes sent): ", n.status().message()));
    }
    if (*n == 0) break;
    absl::Status sent = feed.SendRdb(absl::string_view(buffer.data(), *n), command_timeout);
    if (!sent.ok()) return dropped(sent);
  }
  if (absl::Status ended = feed.EndRdb(command_timeout); !ended.ok()) return dropped(ended);

  // Loaded once the link is up, no sync in progress and nothing loading.
  // The feed is read meanwhile (the replica's first REPLCONF ACK), which
  // also paces the polls.
  const absl::Time deadline = absl::Now() + restore_timeout;
  std::string last = "no answer";
  for (;;) {
    if (absl::Status link = feed.Drain(std::min(deadline, absl::Now() + absl::Milliseconds(10)));
        !link.ok()) {
      return absl::DataLossError(absl::StrCat("the redis at ", where,
                                              " dropped the replication link while loading the "
                                              "RDB (",
                                              feed.rdb_bytes_sent(),
                                              " bytes sent): it refused it as corrupted or cut "
                                              "short"));
    }
    absl::StatusOr<std::string> replication = redis.Command({"INFO", "replication"});
    absl::StatusOr<std::string> persistence =
        replication.ok() ? redis.Command({"INFO", "persistence"}) : replication.status();
    if (!persistence.ok()) {
      if (absl::IsUnavailable(persistence.status())) {
        return absl::DataLossError(absl::StrCat(
            "the redis at ", where,
            " stopped answering while loading the RDB: ", persistence.status().message()));
      }
      last = std::string(persistence.status().message());
    } else {
      const std::string link = InfoField(*replication, "master_link_status");
      const std::string syncing = InfoField(*replication, "master_sync_in_progress");
      const std::string loading = InfoField(*persistence, "loading");
      if (link == "up" && syncing == "0" && loading == "0") return absl::OkStatus();
      last = absl::StrCat("master_link_status:", link, " master_sync_in_progress:", syncing,
                          " loading:", loading);
    }
    if (absl::Now() >= deadline) {
      return absl::DataLossError(
          absl::StrCat("the redis at ", where, " did not finish loading the RDB within ",
                       absl::FormatDuration(restore_timeout), " (", last, ")"));
    }
  }
}

}  // namespace

absl::Status RedisCheckpointHook::RestoreInto(const RedisInstance& restored, StateStream& rdb) {
  const std::string where = Address(restored);
  ASSIGN_OR_RETURN(std::unique_ptr<RedisFeed> feed, RedisFeed::Listen(options_.feed_host));
  ASSIGN_OR_RETURN(
      std::unique_ptr<RedisConnection> redis,
      ConnectWhenReady(restored, absl::Now() + options_.command_timeout, options_.command_timeout));
  // Only into an empty master: a replica drops what it holds for the RDB.
  ASSIGN_OR_RETURN(std::string keyspace, redis->Command({"INFO", "keyspace"}));
  if (const int64_t keys = KeysIn(keyspace); keys != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the redis at ", where, " holds ", keys, " keys: a streamed restore needs an empty one"));
  }
  ASSIGN_OR_RETURN(std::string replication, redis->Command({"INFO", "replication"}));
  if (const std::string role = InfoField(replication, "role"); role != "master") {
    return absl::FailedPreconditionError(absl::StrCat("the redis at ", where, " is a ", role,
                                                      ", not a master: it is not restored into"));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> load,
                   redis->ArrayCommand({"CONFIG", "GET", "repl-diskless-load"}));
  if (load.size() != 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("the redis at ", where, " gave no answer to CONFIG GET repl-diskless-load"));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> auth,
                   redis->ArrayCommand({"CONFIG", "GET", "masterauth"}));
  const std::string old_masterauth = auth.size() == 2 ? auth[1] : "";
  // Parse the RDB from the socket as it arrives instead of buffering it to
  // disk first: loading overlaps the transfer. The feed serves only a
  // replica that knows its one-time password.
  RETURN_IF_ERROR(redis->Command({"CONFIG", "SET", "repl-diskless-load", "on-empty-db"}).status());
  RETURN_IF_ERROR(redis->Command({"CONFIG", "SET", "masterauth", feed->password()}).status());
  absl::Status loaded =
      redis->Command({"REPLICAOF", options_.feed_host, absl::StrCat(feed->port())}).status();
  if (loaded.ok()) {
    loaded =
        FeedReplica(*redis, *feed, restored, rdb, options_.command_timeout,
                    options_.restore_timeout > absl::ZeroDuration() ? options_.restore_timeout
                                                                    : options_.command_timeout);
  }
  // A load still in progress ends as a dropped link (Redis then empties
  // what it half loaded) before the replica is told to stop.
  if (!loaded.ok()) feed->Close();
  absl::Status detached = StopReplicating(redis, restored, absl::Now() + options_.command_timeout);
  absl::Status reset =
      detached.ok() && load[1] != "on-empty-db"
          ? redis->Command({"CONFIG", "SET", "repl-diskless-load", load[1]}).status()
          : absl::OkStatus();
  if (detached.ok()) {
    absl::Status auth_reset =
        redis->Command({"CONFIG", "SET", "masterauth", old_masterauth}).status();
    if (reset.ok()) reset = auth_reset;
  }
  feed->Close();
  if (!loaded.ok()) {
    if (detached.ok()) return loaded;
    if (absl::IsUnavailable(detached) || absl::IsDeadlineExceeded(detached)) {
      return absl::Status(loaded.code(),
                          absl::StrCat(loaded.message(),
                                       "; it no longer answers (Redis exits when an RDB it "
                                       "loads from a replication link fails its checks)"));
    }
    return absl::Status(
        loaded.code(),
        absl::StrCat(loaded.message(), "; and it stays a replica: ", detached.message()));
  }
  if (!detached.ok()) {
    return absl::Status(detached.code(),
                        absl::StrCat("the redis at ", where,
                                     " loaded the RDB but stays a replica: ", detached.message()));
  }
  if (!reset.ok()) {
    return absl::Status(reset.code(), absl::StrCat("the redis at ", where,
                                                   " loaded the RDB but its replication settings "
                                                   "could not be put back: ",
                                                   reset.message()));
  }
  return absl::OkStatus();
}

bool IsRedisImage(const std::string& image) {
  std::string name = image;
  if (const size_t at = name.find('@'); at != std::string::npos) name.resize(at);
  const size_t slash = name.rfind('/');
  if (const size_t colon = name.rfind(':');
      colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    name.resize(colon);
  }
  if (slash != std::string::npos) name = name.substr(slash + 1);
  return name == "redis";
}

absl::StatusOr<RedisInstance> ParseRedisEndpoint(const std::string& endpoint,
                                                 const std::string& field) {
  const size_t colon = endpoint.rfind(':');
  RedisInstance instance;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(endpoint.substr(colon + 1), &instance.port) || instance.port <= 0 ||
      instance.port > 65535) {
    return InvalidFieldError(field, absl::StrCat("\"", endpoint, "\" is not host:port"));
  }
  instance.host = endpoint.substr(0, colon);
  if (instance.host.size() > 2 && instance.host.front() == '[' && instance.host.back() == ']') {
    instance.host = instance.host.substr(1, instance.host.size() - 2);
  }
  return instance;
}

bool RedisHookDriver::Handles(const ContainerTarget& target) const {
  return IsRedisImage(target.image) && !target.endpoint.empty();
}

absl::StatusOr<StateDump> RedisHookDriver::Checkpoint(const ContainerTarget& target,
                                                      const fs::path& directory) {
  ASSIGN_OR_RETURN(RedisInstance source, ParseRedisEndpoint(target.endpoint, "endpoint"));
  std::error_code error;
  if (fs::exists(directory, error)) {
    return absl::FailedPreconditionError(absl::StrCat(directory.string(), " exists"));
  }
  fs::create_directories(directory, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("creating ", directory.string(), ": ", error.message()));
  }
  // A copy of a server that serves on holds its writes only for the fork.
  absl::StatusOr<RedisStreamedSnapshot> snapshot =
      hook_.StreamCheckpoint(source, /*digest=*/!target.keeps_running);
  if (!snapshot.ok()) {
    fs::remove_all(directory, error);
    return snapshot.status();
  }
  StateDump dump;
  dump.directory = directory;
  dump.streamed_file = StreamedFile();
  dump.stream = std::move(snapshot->rdb);
  dump.facts[kDriverFact] = name();
  dump.facts[kRedisKeysFact] = absl::StrCat(snapshot->keys);
  if (!snapshot->digest.empty()) dump.facts[kRedisDigestFact] = snapshot->digest;
  dump.fence_expires = snapshot->fenced_at + hook_.options().max_fence;
  dump.bytes = snapshot->estimated_bytes;
  return dump;
}

absl::Status RedisHookDriver::Resume(const ContainerTarget& source) {
  ASSIGN_OR_RETURN(RedisInstance instance, ParseRedisEndpoint(source.endpoint, "endpoint"));
  return hook_.Abort(instance);
}

absl::Status RedisHookDriver::Retire(const ContainerTarget& source) {
  ASSIGN_OR_RETURN(RedisInstance instance, ParseRedisEndpoint(source.endpoint, "endpoint"));
  return hook_.Retire(instance);
}

absl::Status RedisHookDriver::RestoreInto(const ContainerTarget& restored, StateStream& state) {
  ASSIGN_OR_RETURN(RedisInstance instance, ParseRedisEndpoint(restored.endpoint, "endpoint"));
  return hook_.RestoreInto(instance, state);
}

absl::Status RedisHookDriver::Verify(const ContainerTarget& restored,
                                     const std::map<std::string, std::string>& facts) {
  ASSIGN_OR_RETURN(RedisInstance instance, ParseRedisEndpoint(restored.endpoint, "endpoint"));
  auto keys_fact = facts.find(kRedisKeysFact);
  int64_t expected = -1;
  if (keys_fact == facts.end() || !absl::SimpleAtoi(keys_fact->second, &expected)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the checkpoint has no usable ", kRedisKeysFact, " fact to verify against"));
  }
  return hook_.Verify(instance, expected,
                      facts.contains(kRedisDigestFact) ? facts.at(kRedisDigestFact) : "");
}

}  // namespace codeco::checkpointer
