#include "checkpointer/drivers/redis_hook.h"

#include <hiredis.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
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
    ASSIGN_OR_RETURN(std::string keys, redis->Command({"DBSIZE"}));
    if (!absl::SimpleAtoi(keys, &snapshot.keys)) {
      return absl::FailedPreconditionError("redis: DBSIZE gave \"" + keys + "\"");
    }
    if (options_.digest) {
      // Refused unless the server allows DEBUG to this client: then the key
      // count alone is checked.
      absl::StatusOr<std::string> digest = redis->Command({"DEBUG", "DIGEST"});
      if (digest.ok()) snapshot.digest = *digest;
    }
    RETURN_IF_ERROR(redis->Command({"SAVE"}).status());
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
  ASSIGN_OR_RETURN(RedisSnapshot snapshot, hook_.Checkpoint(source, directory));
  StateDump dump;
  dump.directory = directory;
  dump.facts[kDriverFact] = name();
  dump.facts[kRedisKeysFact] = absl::StrCat(snapshot.keys);
  dump.fence_expires = snapshot.fenced_at + hook_.options().max_fence;
  if (!snapshot.digest.empty()) dump.facts[kRedisDigestFact] = snapshot.digest;
  std::error_code error;
  dump.bytes = static_cast<int64_t>(fs::file_size(snapshot.rdb, error));
  if (error) dump.bytes = 0;
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
