#include "redis_pod_processes.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "checkpointer/drivers/redis_hook.h"
#include "codeco/common/ports.h"
#include "codeco/common/status.h"

namespace codeco::codef {

namespace fs = std::filesystem;
using State = PodProcessStatus::State;

/// One pod's server. `dir` and `port` are fixed at Start; the rest is
/// guarded by the runner's mutex, except `loader`, which only the calls for
/// this pod (serialized by its cluster) and the destructor touch.
struct RedisPodProcesses::Pod {
  fs::path dir;
  int port = 0;
  State state = State::kStarting;
  std::string message;
  std::unique_ptr<checkpointer::RedisServer> server;
  std::thread loader;
};

namespace {

// Names that become one path component each.
absl::Status CheckComponent(const std::string& value, const std::string& field) {
  if (value.empty() || value == "." || value == ".." || value.find('/') != std::string::npos ||
      value.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " \"", value, "\" cannot name a directory"));
  }
  return absl::OkStatus();
}

// The RDB file `source` names (the file, or dump.rdb in the directory).
absl::StatusOr<fs::path> FindRdb(const std::string& source) {
  fs::path path(source);
  if (!path.is_absolute()) return absl::InvalidArgumentError("must be an absolute path");
  std::error_code error;
  fs::file_status status = fs::status(path, error);
  if (error || !fs::exists(status)) return absl::NotFoundError("no such file or directory");
  if (fs::is_directory(status)) {
    path /= "dump.rdb";
    if (!fs::is_regular_file(path, error)) {
      return absl::NotFoundError("the directory holds no dump.rdb");
    }
  } else if (!fs::is_regular_file(status)) {
    return absl::InvalidArgumentError("is neither a directory nor a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  char magic[5] = {};
  if (!in.read(magic, sizeof magic) || std::string(magic, sizeof magic) != "REDIS") {
    return absl::InvalidArgumentError(
        absl::StrCat(path.string(), " is not a Redis RDB file (no REDIS signature)"));
  }
  return path;
}

// Links `from` to `to`, or copies it across filesystems.
absl::Status LinkOrCopy(const fs::path& from, const fs::path& to) {
  std::error_code error;
  fs::create_hard_link(from, to, error);
  if (!error) return absl::OkStatus();
  error.clear();
  fs::copy_file(from, to, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("copying ", from.string(), " to ", to.string(), ": ", error.message()));
  }
  return absl::OkStatus();
}

// The last lines of a redis-server log, for an error message ("" when none).
std::string LogTail(const fs::path& log) {
  std::ifstream in(log);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    // "pid:role date time level message": keep the message.
    for (const char* level : {" # ", " * ", " - ", " . "}) {
      if (size_t at = line.find(level); at != std::string::npos && at < 40) {
        line = line.substr(at + 3);
        break;
      }
    }
    // Redis warns about the host's settings at every start: not the reason.
    if (absl::StartsWith(line, "WARNING")) continue;
    lines.push_back(line);
  }
  if (lines.empty()) return "";
  const size_t first = lines.size() > 2 ? lines.size() - 2 : 0;
  return absl::StrJoin(lines.begin() + first, lines.end(), " | ");
}

// The target of a /proc symlink ("" when unreadable).
std::string ReadLink(const fs::path& link) {
  std::error_code error;
  fs::path target = fs::read_symlink(link, error);
  return error ? "" : target.string();
}

// Kills (SIGKILL) every `binary` process working in a directory under `dir`:
// servers of a codef that was killed before it could stop them.
void KillLeftovers(const fs::path& binary, const fs::path& dir) {
  std::error_code error;
  const std::string exe = fs::canonical(binary, error).string();
  const std::string prefix = fs::canonical(dir, error).string() + "/";
  if (exe.empty() || prefix.size() < 2) return;
  for (const fs::directory_entry& entry : fs::directory_iterator("/proc", error)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid) || pid <= 1) continue;
    if (pid == getpid()) continue;
    std::string running = ReadLink(entry.path() / "exe");
    if (running != exe && running != exe + " (deleted)") continue;
    if (!absl::StartsWith(ReadLink(entry.path() / "cwd"), prefix)) continue;
    kill(pid, SIGKILL);
  }
}

}  // namespace

RedisPodProcesses::RedisPodProcesses(RedisPodProcessesOptions options)
    : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<RedisPodProcesses>> RedisPodProcesses::Create(
    RedisPodProcessesOptions options) {
  if (options.data_dir.empty()) return absl::InvalidArgumentError("data_dir: is required");
  if (access(options.server_binary.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("server_binary: ", options.server_binary,
                                                      " is not executable (install redis-server)"));
  }
  options.data_dir = fs::absolute(options.data_dir).string();
  const fs::path pods = fs::path(options.data_dir) / "pods";
  std::error_code error;
  fs::create_directories(pods, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("data_dir: cannot create ", pods.string(), ": ", error.message()));
  }
  KillLeftovers(options.server_binary, pods);
  for (const fs::directory_entry& entry : fs::directory_iterator(pods, error)) {
    std::error_code ignored;
    fs::remove_all(entry.path(), ignored);
  }
  return std::unique_ptr<RedisPodProcesses>(new RedisPodProcesses(std::move(options)));
}

RedisPodProcesses::~RedisPodProcesses() {
  std::vector<Key> keys;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, pod] : pods_) keys.push_back(key);
  }
  for (const Key& key : keys) Remove(key.first, key.second);
  if (options_.remove_data_dir) {
    std::error_code ignored;
    fs::remove_all(options_.data_dir, ignored);
  }
}

fs::path RedisPodProcesses::PodDirectory(const std::string& cluster, const std::string& pod) const {
  return fs::path(options_.data_dir) / "pods" / cluster / pod;
}

absl::StatusOr<std::string> RedisPodProcesses::Start(const PodProcessSpec& spec) {
  RETURN_IF_ERROR(CheckComponent(spec.cluster, "cluster"));
  RETURN_IF_ERROR(CheckComponent(spec.pod, "pod"));
  fs::path rdb;
  if (!spec.state_source.empty()) {
    ASSIGN_OR_RETURN(rdb, FindRdb(spec.state_source));
  }
  if (access(options_.server_binary.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(options_.server_binary, " is not executable (install redis-server)"));
  }
  const Key key{spec.cluster, spec.pod};
  Pod* pod = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (pods_.count(key) > 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("pod ", spec.cluster, "/", spec.pod, " already has a redis-server"));
    }
    // FreePort binds and releases: skip ports handed out but maybe not bound yet.
    int port = 0;
    for (int attempt = 0; attempt < 100 && port == 0; ++attempt) {
      absl::StatusOr<int> free = FreePort(options_.host);
      if (!free.ok()) return free.status();
      if (ports_.count(*free) == 0) port = *free;
    }
    if (port == 0) return absl::UnavailableError("no free port for redis-server");
    auto entry = std::make_unique<Pod>();
    entry->dir = PodDirectory(spec.cluster, spec.pod);
    entry->port = port;
    pod = entry.get();
    pods_[key] = std::move(entry);
    ports_.insert(port);
  }
  // No live pod owns the directory: whatever is there is a leftover.
  std::error_code error;
  fs::remove_all(pod->dir, error);
  fs::create_directories(pod->dir, error);
  if (error) {
    absl::MutexLock lock(&mu_);
    ports_.erase(pod->port);
    pods_.erase(key);
    return absl::InternalError(absl::StrCat(
        "cannot create ", PodDirectory(spec.cluster, spec.pod).string(), ": ", error.message()));
  }
  const std::string endpoint = absl::StrCat(options_.host, ":", pod->port);
  pod->loader = std::thread([this, pod, rdb] { Load(pod, rdb); });
  return endpoint;
}

void RedisPodProcesses::Load(Pod* pod, fs::path rdb) {
  absl::Status placed = rdb.empty() ? absl::OkStatus() : LinkOrCopy(rdb, pod->dir / "dump.rdb");
  absl::StatusOr<std::unique_ptr<checkpointer::RedisServer>> server =
      placed.ok() ? checkpointer::RedisServer::Start(
                        options_.server_binary, pod->dir,
                        checkpointer::RedisInstance{.host = options_.host, .port = pod->port},
                        options_.load_timeout)
                  : placed;
  std::string message;
  if (!server.ok()) {
    message = std::string(server.status().message());
    std::string tail = LogTail(pod->dir / "redis.log");
    if (!tail.empty()) {
      // The log's own words instead of its path (a failed restore's
      // directory goes with it).
      if (size_t see = message.find(" (see "); see != std::string::npos) message.resize(see);
      absl::StrAppend(&message, ": ", tail);
    }
  }
  absl::MutexLock lock(&mu_);
  if (server.ok()) {
    pod->server = std::move(*server);
    pod->state = State::kReady;
  } else {
    pod->state = State::kFailed;
    pod->message = std::move(message);
    ports_.erase(pod->port);
  }
}

PodProcessStatus RedisPodProcesses::Poll(const std::string& cluster, const std::string& pod) {
  absl::MutexLock lock(&mu_);
  auto it = pods_.find(Key{cluster, pod});
  if (it == pods_.end()) return PodProcessStatus{};
  return PodProcessStatus{.state = it->second->state, .message = it->second->message};
}

void RedisPodProcesses::AwaitSettled(const std::string& cluster, const std::string& pod,
                                     absl::Time deadline) {
  const Key key{cluster, pod};
  absl::MutexLock lock(&mu_);
  auto settled = [this, &key]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    auto it = pods_.find(key);
    return it == pods_.end() || it->second->state != State::kStarting;
  };
  mu_.AwaitWithDeadline(absl::Condition(&settled), deadline);
}

RedisPodProcesses::Pod* RedisPodProcesses::SettledLocked(const Key& key) {
  auto it = pods_.find(key);
  if (it == pods_.end()) return nullptr;
  Pod* pod = it->second.get();
  // The process id is known once the load ends; a kill has to wait for it.
  auto settled = [pod]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return pod->state != State::kStarting; };
  mu_.Await(absl::Condition(&settled));
  return pod;
}

void RedisPodProcesses::Stop(const std::string& cluster, const std::string& pod_name) {
  std::unique_ptr<checkpointer::RedisServer> server;
  Pod* pod = nullptr;
  {
    absl::MutexLock lock(&mu_);
    pod = SettledLocked(Key{cluster, pod_name});
    if (pod == nullptr) return;
    server = std::move(pod->server);
    if (pod->state == State::kReady) pod->state = State::kGone;
    ports_.erase(pod->port);
  }
  server.reset();  // SIGKILL, and reaped
  if (pod->loader.joinable()) pod->loader.join();
}

void RedisPodProcesses::Remove(const std::string& cluster, const std::string& pod_name) {
  Stop(cluster, pod_name);
  fs::path dir;
  {
    absl::MutexLock lock(&mu_);
    auto it = pods_.find(Key{cluster, pod_name});
    if (it == pods_.end()) return;
    dir = it->second->dir;
    pods_.erase(it);
  }
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

absl::StatusOr<PodProcessDump> RedisPodProcesses::Dump(const std::string& cluster,
                                                       const std::string& pod_name,
                                                       const std::string& name) {
  RETURN_IF_ERROR(CheckComponent(name, "dump name"));
  int port = 0;
  fs::path dir;
  {
    absl::MutexLock lock(&mu_);
    auto it = pods_.find(Key{cluster, pod_name});
    if (it == pods_.end() || it->second->state != State::kReady) {
      return absl::FailedPreconditionError(
          absl::StrCat("pod ", pod_name, " has no redis-server serving"));
    }
    port = it->second->port;
    dir = it->second->dir;
  }
  const absl::Time start = absl::Now();
  const fs::path out = fs::path(options_.data_dir) / "checkpoints" / cluster / name;
  std::error_code error;
  if (fs::exists(out, error)) {
    return absl::AlreadyExistsError(absl::StrCat(out.string(), " exists"));
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<checkpointer::RedisConnection> redis,
      checkpointer::RedisConnection::Connect(options_.host, port, options_.command_timeout));
  RETURN_IF_ERROR(redis->Command({"SAVE"}).status());
  fs::create_directories(out, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot create ", out.string(), ": ", error.message()));
  }
  // Redis renames its next save over dump.rdb: the linked inode stays as saved.
  absl::Status placed = LinkOrCopy(dir / "dump.rdb", out / "dump.rdb");
  if (!placed.ok()) {
    fs::remove_all(out, error);
    return placed;
  }
  PodProcessDump dump;
  dump.path = out.string();
  dump.size_bytes = static_cast<int64_t>(fs::file_size(out / "dump.rdb", error));
  dump.took = absl::Now() - start;
  return dump;
}

int RedisPodProcesses::PidForTest(const std::string& cluster, const std::string& pod) {
  absl::MutexLock lock(&mu_);
  auto it = pods_.find(Key{cluster, pod});
  if (it == pods_.end() || it->second->server == nullptr) return -1;
  return it->second->server->pid();
}

}  // namespace codeco::codef
