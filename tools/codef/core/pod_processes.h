#pragma once
// The port through which an emulated cluster gives some pods a real process:
// today a pod whose container is a Redis image gets a redis-server on
// loopback (server/redis_pod_processes.h), so that checkpoints move real
// data. The cluster stays pure logic: it asks the runner to start a pod's
// process, polls whether it has loaded (never blocking), and stops it; the
// runner owns the processes and their data directories.
//
// Every call for one (cluster, pod) comes from that cluster, under its lock,
// so calls for one pod never overlap; calls for different pods and clusters
// may. AwaitSettled is the exception: callers use it outside the lock.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace codeco::codef {

/// True when `image` is a Redis image: the repository name of its last path
/// component is exactly "redis" ("redis", "redis:7",
/// "registry:5000/library/redis:7.2", "…/redis@sha256:…"); "redis-stack",
/// "myredis" or "redis/tools" are not.
bool IsRedisImage(absl::string_view image);

/// What to start for one pod.
struct PodProcessSpec {
  /// Cluster of the pod.
  std::string cluster;
  /// Pod name (unique in the cluster).
  std::string pod;
  /// The container the process stands for.
  std::string container;
  /// That container's image.
  std::string image;
  /// State to start from: a directory holding dump.rdb, or the path of an
  /// RDB file; empty for an empty dataset. Never modified.
  std::string state_source;
};

/// Where a pod's process is in its life.
struct PodProcessStatus {
  /// The phases the runner reports.
  enum class State {
    /// Started, still loading its data.
    kStarting,
    /// Loaded and serving at the endpoint Start returned.
    kReady,
    /// It could not start or load (see `message`); nothing runs.
    kFailed,
    /// Stopped by Stop, or never started here.
    kGone,
  };
  /// The phase.
  State state = State::kGone;
  /// Why, when kFailed (e.g. the tail of redis-server's log).
  std::string message;
};

/// A point-in-time dump of a pod's process state.
struct PodProcessDump {
  /// Where it is: a directory holding dump.rdb (what a restore accepts).
  std::string path;
  /// Size of the dump, bytes.
  int64_t size_bytes = 0;
  /// Time the dump took.
  absl::Duration took;
};

/// Runs the real processes of pods. Implementations are thread-safe.
class PodProcessRunner {
 public:
  virtual ~PodProcessRunner() = default;
  /// Starts the process of `spec.pod` and returns the endpoint it serves
  /// on ("127.0.0.1:<port>"). It loads in the background: Poll says when it
  /// is ready. Errors found at once leave nothing behind: NOT_FOUND or
  /// INVALID_ARGUMENT for a state source that is missing or not a dump
  /// (the message names it), FAILED_PRECONDITION when the server binary is
  /// missing, ALREADY_EXISTS when the pod has a process.
  virtual absl::StatusOr<std::string> Start(const PodProcessSpec& spec) = 0;
  /// Where the pod's process is; never blocks.
  virtual PodProcessStatus Poll(const std::string& cluster, const std::string& pod) = 0;
  /// Blocks until the pod's process is no longer kStarting, or `deadline`.
  /// For callers that wait outside the cluster's lock (the LMS service's
  /// RestoreContainer); the cluster itself never calls it.
  virtual void AwaitSettled(const std::string& cluster, const std::string& pod,
                            absl::Time deadline) = 0;
  /// Kills the process (SIGKILL) and keeps its data; idempotent. A process
  /// still loading is killed once its load ends.
  virtual void Stop(const std::string& cluster, const std::string& pod) = 0;
  /// Stops the process, deletes its data directory and forgets the pod;
  /// idempotent.
  virtual void Remove(const std::string& cluster, const std::string& pod) = 0;
  /// Dumps the state of a ready process as `name` (unique per cluster), a
  /// point-in-time copy that later writes do not change.
  /// FAILED_PRECONDITION when the process is not ready.
  virtual absl::StatusOr<PodProcessDump> Dump(const std::string& cluster, const std::string& pod,
                                              const std::string& name) = 0;
};

}  // namespace codeco::codef
