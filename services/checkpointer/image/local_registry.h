#pragma once
// Debian's docker-registry run as a child process on a loopback address,
// plain HTTP, its storage in a directory: what `codecoctl up`, the
// checkpoint benchmark and the tests push checkpoint images to. Stopped
// (SIGTERM, then SIGKILL) when the object goes.

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "checkpointer/image/registry_client.h"

namespace codeco::checkpointer {

/// The config.yml of a docker-registry keeping its blobs under `storage`,
/// listening on `address` (host:port), deletes allowed (DeleteCheckpoint),
/// warnings only in its log. LocalRegistry and `codecoctl up` write it.
std::string LocalRegistryConfig(const std::filesystem::path& storage, const std::string& address);

/// A docker-registry this process started.
class LocalRegistry {
 public:
  /// How to start it.
  struct Options {
    /// Where it keeps its storage (data/), config.yml and registry.log; created.
    std::filesystem::path directory;
    /// Loopback address to bind. Default 127.0.0.1.
    std::string host = "127.0.0.1";
    /// Port (0: a free one).
    int port = 0;
    /// How long to wait for it to answer. Default 30 s.
    absl::Duration ready_timeout = absl::Seconds(30);
    /// The binary. Default /usr/bin/docker-registry.
    std::string binary = "/usr/bin/docker-registry";
  };

  /// Starts it and waits until it answers; FAILED_PRECONDITION when the
  /// binary is missing or it exits, DEADLINE_EXCEEDED when it never answers
  /// (its log is named).
  static absl::StatusOr<std::unique_ptr<LocalRegistry>> Start(Options options);
  ~LocalRegistry();
  LocalRegistry(const LocalRegistry&) = delete;
  LocalRegistry& operator=(const LocalRegistry&) = delete;

  /// Stops it (SIGTERM, SIGKILL after 10 s); idempotent.
  void Stop();
  /// Starts it again on the same address and storage.
  absl::Status Restart();
  /// "host:port".
  std::string Address() const;
  /// Client options for it (plain HTTP).
  RegistryOptions ClientOptions() const;
  /// Where it keeps blob `digest` on disk.
  std::filesystem::path BlobFile(const std::string& digest) const;
  /// The storage directory given at start.
  const std::filesystem::path& directory() const { return options_.directory; }

 private:
  explicit LocalRegistry(Options options) : options_(std::move(options)) {}
  absl::Status Launch();

  Options options_;
  pid_t pid_ = -1;
};

}  // namespace codeco::checkpointer
