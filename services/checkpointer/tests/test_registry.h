#pragma once
// What the checkpointer's tests share: a free loopback port, scratch
// directories and file reads, and a LocalRegistry (Debian's docker-registry
// on 127.0.0.1) in a scratch directory removed with the test.

#include <filesystem>
#include <memory>
#include <string>

#include "checkpointer/image/local_registry.h"

namespace codeco::checkpointer::testing {

/// A TCP port free on 127.0.0.1 now (fails the test when there is none).
int FreePort();

/// A scratch directory under the system's temporary directory, removed with
/// the object.
struct Scratch {
  /// A new directory named "<prefix>-XXXXXX" (fails the test when it cannot).
  explicit Scratch(const std::string& prefix = "codeco-checkpointer");
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  /// Writes `contents` to `name` under it (parents created); the file's path.
  std::filesystem::path Write(const std::string& name, const std::string& contents) const;
  /// The directory.
  std::filesystem::path path;
};

/// The whole file at `path` ("" when it cannot be read).
std::string ReadFile(const std::filesystem::path& path);

/// A LocalRegistry in a scratch directory; fails the test when it cannot start.
struct Registry {
  Registry();
  ~Registry();
  /// Stops it (the storage stays until the test ends).
  void Stop() { registry->Stop(); }
  /// "127.0.0.1:<port>".
  std::string Address() const { return registry->Address(); }
  /// Client options for it (plain HTTP).
  RegistryOptions Options() const { return registry->ClientOptions(); }
  /// Where the registry keeps blob `digest` on disk.
  std::filesystem::path BlobFile(const std::string& digest) const {
    return registry->BlobFile(digest);
  }

  /// Scratch directory (the registry's storage is under registry/).
  std::filesystem::path dir;
  /// The registry.
  std::unique_ptr<LocalRegistry> registry;
};

}  // namespace codeco::checkpointer::testing
