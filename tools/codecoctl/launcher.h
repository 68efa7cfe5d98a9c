#pragma once
// Starting and stopping the long-lived processes of `codecoctl up`: each runs
// in its own session (it outlives codecoctl), writes stdout and stderr to
// files in the run directory, and is found again by pid for `codecoctl down`.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace codeco::ctl {

/// Starts `argv` detached (new session), stdout to `out_file`, stderr to
/// `log_file`; returns its pid.
absl::StatusOr<pid_t> StartDetached(const std::vector<std::string>& argv,
                                    const std::string& out_file, const std::string& log_file);

/// Waits until `out_file` has a line containing `marker`, and returns that
/// line; DEADLINE_EXCEEDED after `deadline`, FAILED_PRECONDITION when `pid`
/// exits first.
absl::StatusOr<std::string> WaitForLine(const std::string& out_file, const std::string& marker,
                                        pid_t pid, absl::Time deadline);

/// Like WaitForLine, for the first line containing any of `markers`.
absl::StatusOr<std::string> WaitForAnyLine(const std::string& out_file,
                                           const std::vector<std::string>& markers, pid_t pid,
                                           absl::Time deadline);

/// True while `pid` runs a program whose command line contains `expected`
/// (guards against signalling a reused pid).
bool IsRunning(pid_t pid, const std::string& expected);

/// Sends SIGTERM to each of `pids` still running `expected[i]`, waits up to
/// `grace` for them to exit, then SIGKILLs the rest. Returns how many needed
/// SIGKILL.
int StopAll(const std::vector<pid_t>& pids, const std::vector<std::string>& expected,
            absl::Duration grace);


}  // namespace codeco::ctl
