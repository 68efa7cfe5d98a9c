#include "checkpointer/tests/test_registry.h"

#include <catch2/catch.hpp>

#include <random>

#include "codeco/common/ports.h"

namespace codeco::checkpointer::testing {

namespace fs = std::filesystem;

int FreePort() {
  absl::StatusOr<int> port = codeco::FreePort("127.0.0.1");
  INFO(port.status());
  REQUIRE(port.ok());
  return *port;
}

Registry::Registry() {
  std::random_device rd;
  dir = fs::temp_directory_path() / ("codeco-registry-" + std::to_string(rd()));
  fs::create_directories(dir);
  absl::StatusOr<std::unique_ptr<LocalRegistry>> started =
      LocalRegistry::Start({.directory = dir / "registry"});
  INFO(started.status());
  REQUIRE(started.ok());
  registry = *std::move(started);
}

Registry::~Registry() {
  registry.reset();
  fs::remove_all(dir);
}

}  // namespace codeco::checkpointer::testing
