#include "launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace codeco::ctl {

absl::StatusOr<pid_t> StartDetached(const std::vector<std::string>& argv,
                                    const std::string& out_file, const std::string& log_file) {
  if (access(argv[0].c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("cannot run ", argv[0]));
  }
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    setsid();
    int out = open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int in = open("/dev/null", O_RDONLY);
    if (out < 0 || err < 0 || in < 0) _exit(127);
    dup2(in, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    // Children must not inherit codecoctl's blocked signals.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

absl::StatusOr<std::string> WaitForLine(const std::string& out_file, const std::string& marker,
                                        pid_t pid, absl::Time deadline) {
  return WaitForAnyLine(out_file, {marker}, pid, deadline);
}

absl::StatusOr<std::string> WaitForAnyLine(const std::string& out_file,
                                           const std::vector<std::string>& markers, pid_t pid,
                                           absl::Time deadline) {
  const std::string marker = absl::StrJoin(markers, "\" or \"");
  while (true) {
    std::ifstream in(out_file);
    std::string line;
    while (std::getline(in, line)) {
      for (const std::string& wanted : markers) {
        if (line.find(wanted) != std::string::npos) return line;
      }
    }
    // Reap the child if it died (it is ours until codecoctl exits).
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid || kill(pid, 0) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("process ", pid, " exited before \"", marker, "\""));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("no \"", marker, "\" in ", out_file));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool IsRunning(pid_t pid, const std::string& expected) {
  if (pid <= 0 || kill(pid, 0) != 0) return false;
  std::ifstream cmdline(absl::StrCat("/proc/", pid, "/cmdline"), std::ios::binary);
  std::stringstream buffer;
  buffer << cmdline.rdbuf();
  std::string text = buffer.str();
  for (char& c : text) {
    if (c == '\0') c = ' ';
  }
  // A zombie has an empty command line; it is not running.
  return !text.empty() && text.find(expected) != std::string::npos;
}

int StopAll(const std::vector<pid_t>& pids, const std::vector<std::string>& expected,
            absl::Duration grace) {
  std::vector<size_t> alive;
  for (size_t i = 0; i < pids.size(); ++i) {
    if (IsRunning(pids[i], expected[i])) {
      kill(pids[i], SIGTERM);
      alive.push_back(i);
    }
  }
  absl::Time deadline = absl::Now() + grace;
  while (!alive.empty() && absl::Now() < deadline) {
    std::vector<size_t> still;
    for (size_t i : alive) {
      waitpid(pids[i], nullptr, WNOHANG);
      if (IsRunning(pids[i], expected[i])) still.push_back(i);
    }
    alive.swap(still);
    if (!alive.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (size_t i : alive) {
    kill(pids[i], SIGKILL);
    waitpid(pids[i], nullptr, WNOHANG);
  }
  return static_cast<int>(alive.size());
}

}  // namespace codeco::ctl
