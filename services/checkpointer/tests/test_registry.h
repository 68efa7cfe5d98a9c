#pragma once
// What the checkpointer's tests share: a free loopback port, and Debian's
// docker-registry serving plain HTTP on 127.0.0.1 from a scratch directory,
// stopped and removed with the test.

#include <filesystem>
#include <memory>
#include <string>

#include "checkpointer/image/registry_client.h"
#include "process.h"

namespace codeco::checkpointer::testing {

/// A loopback port nobody listens on now.
int FreePort();

/// docker-registry on 127.0.0.1:<free port>, storage in a scratch directory.
struct Registry {
  /// Starts it and waits until it answers (fails the test after 30 s).
  Registry();
  /// Stops it and removes its directory.
  ~Registry();
  /// Starts it (again) on the same port and storage.
  void Start();
  /// Stops it (SIGTERM).
  void Stop();
  /// "127.0.0.1:<port>".
  std::string Address() const;
  /// Client options for it (plain HTTP).
  RegistryOptions Options() const;
  /// Where the registry keeps blob `digest` on disk.
  std::filesystem::path BlobFile(const std::string& digest) const;

  /// Scratch directory (storage in data/, config.yml, registry.log).
  std::filesystem::path dir;
  /// Its port.
  int port = 0;
  /// The process.
  std::unique_ptr<codeco::testing::ChildProcess> process;
};

}  // namespace codeco::checkpointer::testing
