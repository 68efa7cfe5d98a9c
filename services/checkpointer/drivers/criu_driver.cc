#include "checkpointer/drivers/criu_driver.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "codeco/common/status.h"

extern char** environ;

namespace codeco::checkpointer {
namespace {

namespace fs = std::filesystem;

// Output of a command kept, and criu's text kept in an error.
constexpr size_t kMaxOutput = 64 << 10;
constexpr size_t kMaxErrorText = 512;

std::string Excerpt(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text.size() <= kMaxErrorText) return std::string(text);
  return absl::StrCat("…", text.substr(text.size() - kMaxErrorText), " (last ", kMaxErrorText,
                      " of ", text.size(), " bytes)");
}

// How a command ended.
struct Ran {
  // Exit code, or -1 when killed by a signal.
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  // Its stdout and stderr, interleaved, up to kMaxOutput bytes.
  std::string output;

  std::string How() const {
    if (timed_out) return "timed out and was killed";
    if (signal != 0) return absl::StrCat("was killed by signal ", signal);
    return absl::StrCat("exited with ", exit_code);
  }
};

// Runs `args` (args[0] looked up in PATH) with stdin from /dev/null, its
// output captured, for at most `timeout`. An error only when it cannot start.
absl::StatusOr<Ran> RunCommand(const std::vector<std::string>& args, absl::Duration timeout) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, out[1], 2);
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (spawned != 0) {
    close(out[0]);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", args[0], ": ", std::strerror(spawned)));
  }
  fcntl(out[0], F_SETFL, O_NONBLOCK);

  Ran ran;
  const absl::Time deadline = absl::Now() + timeout;
  auto drain = [&] {  // true at the end of the output
    char buffer[4096];
    for (;;) {
      const ssize_t n = read(out[0], buffer, sizeof buffer);
      if (n <= 0) return n == 0;
      const size_t room = kMaxOutput - std::min(kMaxOutput, ran.output.size());
      ran.output.append(buffer, std::min(room, static_cast<size_t>(n)));
    }
  };
  int status = 0;
  bool eof = false;
  for (;;) {
    // The output until it ends, and the exit checked each slice: a process
    // the command leaves behind may hold the pipe, or the command may close
    // it and run on.
    const int slice = static_cast<int>(
        std::clamp<int64_t>(absl::ToInt64Milliseconds(deadline - absl::Now()), 0, eof ? 10 : 50));
    if (eof) {
      poll(nullptr, 0, slice);
    } else {
      pollfd p{out[0], POLLIN, 0};
      poll(&p, 1, slice);
      eof = drain();
    }
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    if (absl::Now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ran.timed_out = true;
      break;
    }
  }
  drain();
  close(out[0]);
  if (WIFEXITED(status)) ran.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) ran.signal = WTERMSIG(status);
  return ran;
}

// Fields of /proc/<pid>/stat after the command name: state, ppid.
struct ProcStat {
  char state = '?';
  int64_t ppid = 0;
};

bool ReadProcStat(int64_t pid, ProcStat* stat) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(in, line)) return false;
  // "pid (comm) S ppid ...": comm may hold spaces and parentheses.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(line).substr(close + 1), ' ', absl::SkipEmpty());
  if (fields.size() < 2 || fields[0].size() != 1) return false;
  stat->state = fields[0][0];
  return absl::SimpleAtoi(fields[1], &stat->ppid);
}

std::string ReadComm(int64_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/comm"));
  std::string comm;
  std::getline(in, comm);
  return comm;
}

// `root` and its descendants, root first, parents before their children.
std::vector<int64_t> ProcessTree(int64_t root) {
  std::multimap<int64_t, int64_t> children;
  std::error_code error;
  for (const fs::directory_entry& e : fs::directory_iterator("/proc", error)) {
    int64_t pid = 0;
    ProcStat stat;
    if (absl::SimpleAtoi(e.path().filename().string(), &pid) && ReadProcStat(pid, &stat)) {
      children.emplace(stat.ppid, pid);
    }
  }
  std::vector<int64_t> tree = {root};
  for (size_t i = 0; i < tree.size(); ++i) {
    auto [begin, end] = children.equal_range(tree[i]);
    for (auto it = begin; it != end; ++it) tree.push_back(it->second);
  }
  return tree;
}

// Sends `signal` to the tree of `root`; OK when the root is already gone.
absl::Status SignalTree(int64_t root, int signal, const std::string& what) {
  for (int64_t pid : ProcessTree(root)) {
    if (kill(static_cast<pid_t>(pid), signal) != 0 && errno != ESRCH) {
      return absl::PermissionDeniedError(
          absl::StrCat(what, ": signal ", signal, " to pid ", pid, ": ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

// The error lines of a criu log ("Error (criu/...): ..."), the last few.
std::string LogErrors(const fs::path& log) {
  std::ifstream in(log);
  std::vector<std::string> errors;
  for (std::string line; std::getline(in, line);) {
    if (absl::StrContains(line, "Error")) errors.push_back(line);
  }
  if (errors.size() > 6) errors.erase(errors.begin(), errors.end() - 6);
  return absl::StrJoin(errors, "\n");
}

// What a failed criu run said: its error lines, else its output.
std::string CriuSaid(const Ran& ran, const fs::path& log) {
  std::string said = LogErrors(log);
  if (said.empty()) said = ran.output;
  return said.empty() ? std::string("(it said nothing)") : Excerpt(said);
}

int64_t BytesUnder(const fs::path& directory) {
  int64_t bytes = 0;
  std::error_code error;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(directory, error)) {
    if (e.is_regular_file(error)) bytes += static_cast<int64_t>(e.file_size(error));
  }
  return bytes;
}

}  // namespace

absl::Status CriuDriver::Available(const std::string& criu_binary) {
  // Once per binary: later callers wait for the first check and share it.
  static std::mutex mu;
  static auto* checked = new std::map<std::string, absl::Status>();
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = checked->find(criu_binary); it != checked->end()) return it->second;
  absl::Status status;
  absl::StatusOr<Ran> ran = RunCommand({criu_binary, "check"}, absl::Minutes(1));
  if (!ran.ok()) {
    status = absl::FailedPreconditionError(absl::StrCat("criu check: ", ran.status().message(),
                                                        " (install criu: Debian package criu)"));
  } else if (ran->exit_code != 0) {
    status = absl::FailedPreconditionError(
        absl::StrCat(criu_binary, " check ", ran->How(), ": ",
                     ran->output.empty() ? std::string("(no output)") : Excerpt(ran->output)));
  }
  checked->emplace(criu_binary, status);
  return status;
}

bool CriuDriver::Handles(const ContainerTarget& target) const {
  return target.pid > 1 && Available(options_.criu_binary).ok();
}

absl::StatusOr<StateDump> CriuDriver::Checkpoint(const ContainerTarget& target,
                                                 const fs::path& directory) {
  if (target.pid <= 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("target.pid: ", target.pid, " is no workload's process id (criu needs one)"));
  }
  const std::string what = absl::StrCat("criu dump of pid ", target.pid, " (", target.pod_namespace,
                                        "/", target.pod, "/", target.container, ")");
  std::error_code error;
  if (fs::exists(directory, error)) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": ", directory.string(), " exists"));
  }
  ProcStat stat;
  if (!ReadProcStat(target.pid, &stat) || stat.state == 'Z' || stat.state == 'X') {
    return absl::NotFoundError(absl::StrCat(what, ": the process does not run"));
  }
  const std::string comm = ReadComm(target.pid);
  fs::create_directories(directory.parent_path(), error);
  if (!fs::create_directory(directory, error)) {
    return absl::FailedPreconditionError(absl::StrCat(what, ": cannot create ", directory.string(),
                                                      ": ", error ? error.message() : "it exists"));
  }

  std::vector<std::string> args = {options_.criu_binary, "dump", "-t", absl::StrCat(target.pid),
                                   "-D", directory.string(), "--shell-job",
                                   options_.stop_after_dump ? "--leave-stopped" : "--leave-running",
                                   // Relative to the image directory.
                                   "-o", kCriuDumpLog};
  if (options_.tcp_established) args.push_back("--tcp-established");
  absl::StatusOr<Ran> ran = RunCommand(args, options_.timeout);
  if (ran.ok() && !ran->timed_out && ran->exit_code == 0) {
    StateDump dump;
    dump.directory = directory;
    dump.bytes = BytesUnder(directory);
    dump.facts[kDriverFact] = name();
    dump.facts[kCriuPidFact] = absl::StrCat(target.pid);
    dump.facts[kCriuCommFact] = comm;
    return dump;
  }

  // Failed: the log goes next to the directory, which goes; the tree runs on.
  const fs::path log = directory / kCriuDumpLog;
  fs::path kept = directory;
  kept += ".dump.log";
  const std::string said = ran.ok() ? CriuSaid(*ran, log) : std::string(ran.status().message());
  fs::rename(log, kept, error);
  const std::string log_note =
      error ? std::string("no log was written") : absl::StrCat("log kept at ", kept.string());
  fs::remove_all(directory, error);
  if (options_.stop_after_dump) SignalTree(target.pid, SIGCONT, what).IgnoreError();
  if (!ran.ok()) return ran.status();
  const std::string why =
      absl::StrCat(what, ": ", options_.criu_binary, " ", ran->How(), " (", log_note, "): ", said);
  if (ran->timed_out) return absl::DeadlineExceededError(why);
  return absl::FailedPreconditionError(why);
}

absl::Status CriuDriver::Resume(const ContainerTarget& source) {
  if (!options_.stop_after_dump || source.pid <= 1) return absl::OkStatus();
  return SignalTree(source.pid, SIGCONT, absl::StrCat("resuming pid ", source.pid));
}

absl::Status CriuDriver::Retire(const ContainerTarget& source) {
  // Never pid 1: signalling this namespace's init would end the node's agent.
  if (source.pid <= 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("source.pid: ", source.pid, " is no workload's process id"));
  }
  return SignalTree(source.pid, SIGKILL, absl::StrCat("retiring pid ", source.pid));
}

absl::Status CriuDriver::Verify(const ContainerTarget& restored,
                                const std::map<std::string, std::string>& facts) {
  const std::string what = absl::StrCat("verifying the restored pid ", restored.pid);
  auto driver = facts.find(kDriverFact);
  if (driver == facts.end() || driver->second != name()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the checkpoint was not taken by the criu driver (", kDriverFact,
                     " is \"", driver == facts.end() ? "" : driver->second, "\")"));
  }
  if (restored.pid <= 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("restored.pid: ", restored.pid, " is no process id"));
  }
  ProcStat stat;
  if (!ReadProcStat(restored.pid, &stat) || stat.state == 'Z' || stat.state == 'X') {
    return absl::NotFoundError(absl::StrCat(what, ": the process does not run"));
  }
  if (stat.state == 'T' || stat.state == 't') {
    return absl::FailedPreconditionError(absl::StrCat(what, ": the process is stopped"));
  }
  auto comm = facts.find(kCriuCommFact);
  if (comm != facts.end()) {
    const std::string now = ReadComm(restored.pid);
    if (now != comm->second) {
      return absl::DataLossError(absl::StrCat(what, ": it runs \"", now,
                                              "\", the checkpoint held \"", comm->second, "\""));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CriuDriver::Restore(const fs::path& directory) {
  const std::string what = absl::StrCat("criu restore of ", directory.string());
  std::error_code error;
  if (!fs::is_directory(directory, error)) {
    return absl::NotFoundError(absl::StrCat(what, ": no such directory"));
  }
  const fs::path pidfile = fs::absolute(directory, error) / "restore.pid";
  fs::remove(pidfile, error);
  std::vector<std::string> args = {options_.criu_binary,
                                   "restore",
                                   "-D",
                                   directory.string(),
                                   "-d",
                                   "--shell-job",
                                   "-o",
                                   kCriuRestoreLog,
                                   "--pidfile",
                                   pidfile.string()};
  if (options_.tcp_established) args.push_back("--tcp-established");
  ASSIGN_OR_RETURN(Ran ran, RunCommand(args, options_.timeout));
  const fs::path log = directory / kCriuRestoreLog;
  if (ran.timed_out || ran.exit_code != 0) {
    const std::string why = absl::StrCat(what, ": ", options_.criu_binary, " ", ran.How(),
                                         " (log at ", log.string(), "): ", CriuSaid(ran, log));
    if (ran.timed_out) return absl::DeadlineExceededError(why);
    return absl::FailedPreconditionError(why);
  }
  std::ifstream in(pidfile);
  std::string text;
  std::getline(in, text);
  int64_t pid = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &pid) || pid <= 0) {
    return absl::InternalError(absl::StrCat(what, ": criu succeeded but ", pidfile.string(),
                                            " holds no process id (\"", Excerpt(text), "\")"));
  }
  return pid;
}

}  // namespace codeco::checkpointer
