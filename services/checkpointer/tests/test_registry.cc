#include "checkpointer/tests/test_registry.h"

#include <catch2/catch.hpp>

#include <stdlib.h>

#include <fstream>
#include <iterator>
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

Scratch::Scratch(const std::string& prefix) {
  std::string name = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  REQUIRE(mkdtemp(name.data()) != nullptr);
  path = name;
}

Scratch::~Scratch() {
  std::error_code ignored;
  fs::remove_all(path, ignored);
}

fs::path Scratch::Write(const std::string& name, const std::string& contents) const {
  const fs::path file = path / name;
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << contents;
  return file;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
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
