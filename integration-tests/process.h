#pragma once
// Child processes for multi-process tests: start a binary with its stdout on
// a pipe, read lines with a deadline, stop it with SIGTERM (or SIGKILL), and
// never leave it running when the test ends. Also the scratch directory a
// test keeps its children's data and logs in, and reading those files back.

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace codeco::testing {

/// A fresh directory `<temp>/<prefix>-<pid>`, emptied first and removed
/// (with everything in it) when the object goes.
struct ScratchDir {
  /// Creates it; `prefix` names the test.
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  /// The directory.
  std::filesystem::path path;
};

/// The whole content of the file at `path` ("" when it cannot be read).
std::string ReadWholeFile(const std::filesystem::path& path);

/// Result of running a command to completion.
struct CommandResult {
  /// Exit code, or 128 + signal number when killed.
  int exit_code = -1;
  /// Everything written to stdout and stderr, interleaved.
  std::string output;
};

/// Runs `argv` to completion (killed after `timeout`) and captures its output.
CommandResult RunCommand(const std::vector<std::string>& argv, absl::Duration timeout);

/// A running child process whose stdout is readable line by line.
class ChildProcess {
 public:
  /// Starts `argv[0]` with `argv`; stderr goes to `stderr_file` (appended).
  ChildProcess(const std::vector<std::string>& argv, const std::string& stderr_file);
  /// Kills the process (SIGKILL) if it is still running.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  /// The next stdout line, or nullopt on EOF or when `deadline` passes.
  std::optional<std::string> ReadLine(absl::Time deadline);
  /// Sends `signal` and waits until `deadline` for the exit; returns the exit
  /// code (128 + signal when killed by one), or nullopt if still running.
  std::optional<int> Stop(int signal, absl::Time deadline);
  /// The process id.
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffer_;
  bool exited_ = false;
};

}  // namespace codeco::testing
