#pragma once
// Redis pods as real processes: the PodProcessRunner (core/pod_processes.h)
// that gives each pod whose container is a Redis image its own redis-server
// on loopback, through the checkpointer's Redis driver (RedisServer,
// RedisConnection), so that checkpoint and restore move real data.
//
// Layout under the data directory (codef's --state-dir, or a temporary one):
//   pods/<cluster>/<pod>/        the server's --dir: dump.rdb, redis.log
//   checkpoints/<cluster>/<name>/dump.rdb   what Dump leaves (a hard link)
//
// A server starts on a free port (codeco::FreePort) with no persistence of
// its own; it loads on a thread of its own, so Start returns at once. A
// restore's RDB is hard-linked into the pod's directory (copied across
// filesystems): Redis only ever replaces dump.rdb by renaming a new file
// over it, so the source is never modified. Stop kills with SIGKILL; a server
// still loading is killed as soon as its load ends (its process id is known
// only then). The runner's destructor kills every server and removes the
// pods' directories; a runner created on a directory that a killed codef
// left behind first kills the redis-servers still working in its pods/
// directory (found by /proc/<pid>/cwd), then clears it.

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "pod_processes.h"

namespace codeco::codef {

/// Settings of RedisPodProcesses.
struct RedisPodProcessesOptions {
  /// Root of the servers' data (layout above); created. Required.
  std::string data_dir;
  /// The redis-server binary. Default /usr/bin/redis-server (Debian's).
  std::string server_binary = "/usr/bin/redis-server";
  /// Address every server listens on, and the endpoints' host. Default 127.0.0.1.
  std::string host = "127.0.0.1";
  /// How long a server may take to start and load its RDB. Default 5 min.
  absl::Duration load_timeout = absl::Minutes(5);
  /// Timeout of each command to a server (a Dump's SAVE included). Default 2 min.
  absl::Duration command_timeout = absl::Minutes(2);
  /// Remove `data_dir` itself when the runner goes (a temporary directory).
  /// Default false: checkpoint dumps stay.
  bool remove_data_dir = false;
};

/// The PodProcessRunner of codef: one redis-server per Redis pod. Thread-safe.
class RedisPodProcesses final : public PodProcessRunner {
 public:
  /// A runner over `options.data_dir`, after clearing what an earlier one
  /// left in its pods/ directory (see above). INVALID_ARGUMENT when data_dir
  /// is empty, FAILED_PRECONDITION when the binary is not executable,
  /// UNAVAILABLE when the directory cannot be created.
  static absl::StatusOr<std::unique_ptr<RedisPodProcesses>> Create(
      RedisPodProcessesOptions options);
  /// Kills every server (waiting for those still loading) and removes the
  /// pods' directories. Every cluster using the runner must be gone first.
  ~RedisPodProcesses() override;
  RedisPodProcesses(const RedisPodProcesses&) = delete;
  RedisPodProcesses& operator=(const RedisPodProcesses&) = delete;

  absl::StatusOr<std::string> Start(const PodProcessSpec& spec) override;
  PodProcessStatus Poll(const std::string& cluster, const std::string& pod) override;
  void AwaitSettled(const std::string& cluster, const std::string& pod,
                    absl::Time deadline) override;
  void Stop(const std::string& cluster, const std::string& pod) override;
  void Remove(const std::string& cluster, const std::string& pod) override;
  absl::StatusOr<PodProcessDump> Dump(const std::string& cluster, const std::string& pod,
                                      const std::string& name) override;

  /// The data directory of a pod's server.
  std::filesystem::path PodDirectory(const std::string& cluster, const std::string& pod) const;
  /// The process id of a pod's server when it is ready, else -1.
  int PidForTest(const std::string& cluster, const std::string& pod);

 private:
  struct Pod;
  using Key = std::pair<std::string, std::string>;  // (cluster, pod)

  explicit RedisPodProcesses(RedisPodProcessesOptions options);
  void Load(Pod* pod, std::filesystem::path rdb);
  // Waits until `key` is not starting; returns it (null when unknown).
  Pod* SettledLocked(const Key& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RedisPodProcessesOptions options_;
  absl::Mutex mu_;
  std::map<Key, std::unique_ptr<Pod>> pods_ ABSL_GUARDED_BY(mu_);
  std::set<int> ports_ ABSL_GUARDED_BY(mu_);  // handed to servers not yet stopped
};

}  // namespace codeco::codef
