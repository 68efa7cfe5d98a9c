#include "process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "absl/time/clock.h"

extern char** environ;

namespace codeco::testing {
namespace {

std::vector<char*> CArgs(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const auto& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

int DecodeWaitStatus(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return -1;
}

// Polls waitpid until the child exits or `deadline` passes.
std::optional<int> WaitUntil(pid_t pid, absl::Time deadline) {
  while (true) {
    int wstatus = 0;
    pid_t r = waitpid(pid, &wstatus, WNOHANG);
    if (r == pid) return DecodeWaitStatus(wstatus);
    if (r < 0) return std::nullopt;
    if (absl::Now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::string& stderr_file) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_file.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  auto args = CArgs(argv);
  int rc = posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    throw std::runtime_error("cannot start " + argv[0]);
  }
  stdout_fd_ = fds[0];
}

ChildProcess::~ChildProcess() {
  if (!exited_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

std::optional<std::string> ChildProcess::ReadLine(absl::Time deadline) {
  while (true) {
    if (size_t nl = buffer_.find('\n'); nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    int timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (timeout_ms <= 0) return std::nullopt;
    pollfd pfd{stdout_fd_, POLLIN, 0};
    int r = poll(&pfd, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return std::nullopt;
    char chunk[4096];
    ssize_t n = read(stdout_fd_, chunk, sizeof chunk);
    if (n <= 0) return std::nullopt;
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

std::optional<int> ChildProcess::Stop(int signal, absl::Time deadline) {
  if (exited_) return std::nullopt;
  kill(pid_, signal);
  std::optional<int> code = WaitUntil(pid_, deadline);
  if (code.has_value()) exited_ = true;
  return code;
}

CommandResult RunCommand(const std::vector<std::string>& argv, absl::Duration timeout) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  auto args = CArgs(argv);
  pid_t pid;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  CommandResult result;
  if (rc != 0) {
    close(fds[0]);
    result.output = "cannot start " + argv[0];
    return result;
  }
  absl::Time deadline = absl::Now() + timeout;
  char chunk[4096];
  while (true) {
    int timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (timeout_ms <= 0) break;
    pollfd pfd{fds[0], POLLIN, 0};
    int r = poll(&pfd, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    ssize_t n = read(fds[0], chunk, sizeof chunk);
    if (n <= 0) break;
    result.output.append(chunk, static_cast<size_t>(n));
  }
  close(fds[0]);
  std::optional<int> code = WaitUntil(pid, deadline);
  if (!code.has_value()) {
    kill(pid, SIGKILL);
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    code = DecodeWaitStatus(wstatus);
    result.output += "\n[killed after timeout]";
  }
  result.exit_code = *code;
  return result;
}

ScratchDir::ScratchDir(const std::string& prefix)
    : path(std::filesystem::temp_directory_path() / (prefix + "-" + std::to_string(::getpid()))) {
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path, ignored);
}

std::string ReadWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

}  // namespace codeco::testing
