#pragma once
// The checkpoint driver for processes on this node, through CRIU
// (Checkpoint/Restore In Userspace, https://criu.org; Debian package criu).
// It is used only where `criu check` passes: CRIU needs root and kernel
// features that containers and some VMs do not give (our CI machines run in
// containers, where it fails), so Available() says why it is not used.
//
//   Checkpoint  criu dump -t <pid> -D <dir> --shell-job --leave-running
//               [--tcp-established] -o dump.log
//   Restore     criu restore -D <dir> -d --shell-job [--tcp-established]
//               -o restore.log --pidfile <dir>/restore.pid
//
// By default the dump is crash-consistent, not fenced: with --leave-running
// the process tree runs on after the dump, so what it changes afterwards is
// not in the dump; Resume has nothing to lift. With `stop_after_dump` the
// tree is left stopped (--leave-stopped) and the dump is fenced: nothing
// runs in it until Resume (SIGCONT to every process of the tree) or Retire.
// Retire kills the tree (SIGKILL).

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "checkpointer/core/state_driver.h"

namespace codeco::checkpointer {

// Facts the CRIU driver records with each checkpoint (image annotations).
/// The dumped tree's root process id (restore gives it the same one).
inline constexpr char kCriuPidFact[] = "org.codeco.criu.pid";
/// The root process's command name (/proc/<pid>/comm) at the dump.
inline constexpr char kCriuCommFact[] = "org.codeco.criu.comm";
/// CRIU's log of a dump, in the dump directory (kept next to it, as
/// "<directory>.dump.log", when the dump fails).
inline constexpr char kCriuDumpLog[] = "dump.log";
/// CRIU's log of a restore, in the restored directory.
inline constexpr char kCriuRestoreLog[] = "restore.log";

/// Takes and puts back the state of a process tree with CRIU.
class CriuDriver final : public StateDriver {
 public:
  /// Options of the driver.
  struct Options {
    /// The criu binary: a path, or a name looked up in PATH. Default "criu"
    /// (Debian installs /usr/sbin/criu).
    std::string criu_binary = "criu";
    /// Dump and restore established TCP connections (--tcp-established);
    /// CRIU then locks the connections during the dump. Default false: a
    /// tree with established connections fails to dump.
    bool tcp_established = false;
    /// Leave the tree stopped after the dump (--leave-stopped) instead of
    /// running (--leave-running): the dump is fenced until Resume or Retire.
    /// Default false: crash-consistent.
    bool stop_after_dump = false;
    /// Limit of one criu run; it is killed (SIGKILL) after it. Default 10 min.
    absl::Duration timeout = absl::Minutes(10);
  };

  /// A driver with `options`.
  explicit CriuDriver(Options options) : options_(std::move(options)) {}

  /// Runs `criu_binary check` the first time it is asked for that binary and
  /// returns the result from then on: OK when it passes, FAILED_PRECONDITION
  /// with criu's own output (or why it cannot run) otherwise.
  static absl::Status Available(const std::string& criu_binary = "criu");

  /// "criu".
  std::string name() const override { return "criu"; }
  /// True when `target.pid` > 1 (never this namespace's init) and
  /// Available(options.criu_binary) is OK.
  bool Handles(const ContainerTarget& target) const override;
  /// Dumps the process tree of `target.pid` into `directory` (created; it
  /// must not exist). INVALID_ARGUMENT without a pid (or pid 1), NOT_FOUND
  /// when the process does not run, FAILED_PRECONDITION when criu fails (its error
  /// lines and the kept log, "<directory>.dump.log", are named),
  /// DEADLINE_EXCEEDED after `timeout`. On failure the tree runs on.
  absl::StatusOr<StateDump> Checkpoint(const ContainerTarget& target,
                                       const std::filesystem::path& directory) override;
  /// Without `stop_after_dump`: OK, nothing to lift. With it: SIGCONT to
  /// every process of the tree of `source.pid` (OK when it is gone).
  absl::Status Resume(const ContainerTarget& source) override;
  /// SIGKILL to every process of the tree of `source.pid`; OK when it is
  /// already gone. INVALID_ARGUMENT without a pid (or pid 1).
  absl::Status Retire(const ContainerTarget& source) override;
  /// Checks that `facts` are a CRIU checkpoint's (INVALID_ARGUMENT
  /// otherwise), that `restored.pid` runs (NOT_FOUND when gone or a zombie,
  /// FAILED_PRECONDITION when stopped) and runs the program the dump held
  /// (its command name; DATA_LOSS otherwise). It does not compare memory.
  absl::Status Verify(const ContainerTarget& restored,
                      const std::map<std::string, std::string>& facts) override;

  /// Restores the tree dumped in `directory` and detaches from it (criu
  /// restore -d); returns its root's process id (the dumped one: it must be
  /// free). FAILED_PRECONDITION naming `directory`/restore.log when criu fails.
  absl::StatusOr<int64_t> Restore(const std::filesystem::path& directory);

 private:
  Options options_;
};

}  // namespace codeco::checkpointer
