#pragma once
// The port every way of taking a container's state sits behind: the
// application-consistent hook (Redis: fence, SAVE, the RDB), CRIU on the
// node, and the kubelet checkpoint API of a real Kubernetes node. The
// checkpointer picks the first driver that handles a container, packs what
// Checkpoint wrote into an OCI image, and after a restore asks the same
// driver to verify, then to retire the source (cut-over) or resume it
// (the migration was abandoned: the source serves on).

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace codeco::checkpointer {

/// The fact every driver records: its own name (a restore checks it came
/// from the driver that verifies it).
inline constexpr char kDriverFact[] = "org.codeco.checkpoint.driver";

/// The container whose state is taken or put back, as its LMS reports it.
struct ContainerTarget {
  /// Cluster name.
  std::string cluster;
  /// Node the pod runs on.
  std::string node;
  /// Pod namespace (Kubernetes; "default" on CODEF).
  std::string pod_namespace = "default";
  /// Pod name.
  std::string pod;
  /// Container name.
  std::string container;
  /// The container's image reference ("redis:7", ...).
  std::string image;
  /// Where the container serves, "host:port" (empty when it has no port).
  std::string endpoint;
  /// The container's process id on this node, when the LMS knows it (CRIU).
  int64_t pid = 0;
  /// The checkpoint leaves the container running (CreateCheckpoint without
  /// stop_after_checkpoint: a copy, not a move), so its writes must wait as
  /// little as possible: the Redis hook takes no digest at the fence (the
  /// restore is checked by key count and the RDB's CRC64).
  bool keeps_running = false;
};

/// One file of a dump arriving while it is read: its bytes in order, as a
/// checkpoint produces them (packing then overlaps taking the state) or as
/// the pull of an image delivers them (a restore then overlaps the pull).
class StateStream {
 public:
  virtual ~StateStream() = default;
  /// Copies the next bytes, at most `max`, into `buffer`, waiting until some
  /// arrive; returns how many, 0 at the end of the file, or the error that
  /// ended the stream.
  virtual absl::StatusOr<size_t> Read(char* buffer, size_t max) = 0;
};

/// What a driver wrote for one checkpoint.
struct StateDump {
  /// Directory holding the state; every regular file under it is packed
  /// into the image's layer, with its path relative to the directory.
  std::filesystem::path directory;
  /// A file of the dump still arriving when Checkpoint returns (Redis streams
  /// the RDB of the snapshot it forked at the fence): its name as if it were
  /// under `directory` (it is not there); empty when every file is.
  std::string streamed_file;
  /// Its bytes, in order, read once by whoever packs the image; the snapshot
  /// they come from is already fixed (the fence may be lifted before they
  /// are all read, but the source must live until then).
  std::unique_ptr<StateStream> stream;
  /// Facts a restore checks (e.g. "org.codeco.redis.keys": "1000"); they
  /// travel as image annotations.
  std::map<std::string, std::string> facts;
  /// Bytes of state, summed over the files (for a streamed file, an
  /// estimate until it has been read).
  int64_t bytes = 0;
  /// When the fence the driver raised lifts by itself (a driver's guard
  /// against a migrator that died); a cut-over after it could lose writes,
  /// so the migration is abandoned instead. InfiniteFuture: no fence or no limit.
  absl::Time fence_expires = absl::InfiniteFuture();
};

/// One way of taking and putting back a container's state. Implementations
/// are thread-safe: checkpoints of different containers run in parallel.
class StateDriver {
 public:
  virtual ~StateDriver() = default;

  /// Short name ("redis-hook", "criu", "kubelet"), recorded with each checkpoint.
  virtual std::string name() const = 0;
  /// True when this driver can checkpoint `target`.
  virtual bool Handles(const ContainerTarget& target) const = 0;
  /// Takes the state of `target` into `directory` (created by the driver;
  /// it must not exist). Writes the source acknowledged before the dump are
  /// in it; the source accepts no write the dump lacks until Resume or
  /// Retire (drivers that cannot fence say so in their comment). On failure
  /// nothing is left in `directory` and the source serves on.
  virtual absl::StatusOr<StateDump> Checkpoint(const ContainerTarget& target,
                                               const std::filesystem::path& directory) = 0;
  /// The migration was abandoned: the source serves on (lifts a fence).
  virtual absl::Status Resume(const ContainerTarget& source) = 0;
  /// The restored copy took over: the source ends without accepting another
  /// write (its pod is deleted by the LMS afterwards).
  virtual absl::Status Retire(const ContainerTarget& source) = 0;
  /// The dump file (relative to the dump directory, e.g. "dump.rdb") this
  /// driver restores by streaming it into an empty container the LMS has
  /// just started (RestoreInto); "" when it restores only through the LMS
  /// from a complete dump (the default).
  virtual std::string StreamedFile() const { return ""; }
  /// Loads the file StreamedFile() names, read from `state` as it arrives,
  /// into `restored` (an empty container just started) and returns once
  /// all of it is loaded. On failure the caller deletes the pod.
  virtual absl::Status RestoreInto(const ContainerTarget& restored, StateStream& state) {
    (void)restored;
    (void)state;
    return absl::UnimplementedError(name() + " restores only from a complete dump");
  }
  /// Checks that `restored` holds what the dump held (`facts` as Checkpoint
  /// returned them, read back from the image): DATA_LOSS when not.
  virtual absl::Status Verify(const ContainerTarget& restored,
                              const std::map<std::string, std::string>& facts) = 0;
};

}  // namespace codeco::checkpointer
