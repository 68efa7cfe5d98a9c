#include "checkpointer/image/local_registry.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "codeco/common/ports.h"

extern char** environ;

namespace codeco::checkpointer {

namespace fs = std::filesystem;

absl::StatusOr<std::unique_ptr<LocalRegistry>> LocalRegistry::Start(Options options) {
  if (options.directory.empty()) {
    return absl::InvalidArgumentError("directory: is required");
  }
  if (options.port == 0) {
    absl::StatusOr<int> port = FreePort(options.host);
    if (!port.ok()) return port.status();
    options.port = *port;
  }
  std::unique_ptr<LocalRegistry> registry(new LocalRegistry(std::move(options)));
  absl::Status started = registry->Launch();
  if (!started.ok()) return started;
  return registry;
}

std::string LocalRegistryConfig(const fs::path& storage, const std::string& address) {
  return absl::StrCat("version: 0.1\n", "log: {level: warn}\n", "storage:\n",
                      "  filesystem: {rootdirectory: \"", storage.string(), "\"}\n",
                      "  delete: {enabled: true}\n", "http: {addr: \"", address, "\"}\n");
}

LocalRegistry::~LocalRegistry() { Stop(); }

absl::Status LocalRegistry::Launch() {
  std::error_code error;
  fs::create_directories(options_.directory / "data", error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("creating ", options_.directory.string(), ": ", error.message()));
  }
  const fs::path config = options_.directory / "config.yml";
  std::ofstream(config) << LocalRegistryConfig(options_.directory / "data", Address());
  const fs::path log = options_.directory / "registry.log";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<std::string> args = {options_.binary, "serve", config.string()};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc =
      posix_spawn(&pid_, options_.binary.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    pid_ = -1;
    return absl::FailedPreconditionError(
        absl::StrCat("cannot start ", options_.binary, " (install docker-registry)"));
  }
  RegistryClient probe(ClientOptions());
  const ImageReference repository{.registry = Address(), .repository = "codeco/probe"};
  for (absl::Time end = absl::Now() + options_.ready_timeout; absl::Now() < end;) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::FailedPreconditionError(
          absl::StrCat("docker-registry exited at start; see ", log.string()));
    }
    if (probe.HasBlob(repository, DigestOf("probe")).ok()) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Stop();
  return absl::DeadlineExceededError(absl::StrCat("docker-registry did not answer on ", Address(),
                                                  " within ",
                                                  absl::FormatDuration(options_.ready_timeout),
                                                  "; see ", log.string()));
}

void LocalRegistry::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  for (absl::Time end = absl::Now() + absl::Seconds(10); absl::Now() < end;) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

absl::Status LocalRegistry::Restart() {
  Stop();
  return Launch();
}

std::string LocalRegistry::Address() const {
  return absl::StrCat(options_.host, ":", options_.port);
}

RegistryOptions LocalRegistry::ClientOptions() const {
  RegistryOptions o;
  o.scheme = "http";
  o.timeout = absl::Seconds(60);
  return o;
}

fs::path LocalRegistry::BlobFile(const std::string& digest) const {
  const std::string hex = digest.substr(digest.find(':') + 1);
  return options_.directory / "data/docker/registry/v2/blobs/sha256" / hex.substr(0, 2) / hex /
         "data";
}

}  // namespace codeco::checkpointer
