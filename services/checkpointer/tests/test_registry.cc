#include "checkpointer/tests/test_registry.h"

#include <catch2/catch.hpp>
#include <signal.h>

#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
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
  fs::create_directories(dir / "data");
  Start();
}

Registry::~Registry() {
  process.reset();
  fs::remove_all(dir);
}

void Registry::Start() {
  if (port == 0) port = FreePort();
  std::ofstream(dir / "config.yml") << "version: 0.1\n"
                                    << "log: {level: warn}\n"
                                    << "storage:\n  filesystem: {rootdirectory: "
                                    << (dir / "data").string() << "}\n"
                                    << "  delete: {enabled: true}\n"
                                    << "http: {addr: \"127.0.0.1:" << port << "\"}\n";
  process = std::make_unique<codeco::testing::ChildProcess>(
      std::vector<std::string>{"/usr/bin/docker-registry", "serve", (dir / "config.yml").string()},
      (dir / "registry.log").string());
  RegistryClient probe(Options());
  ImageReference repo{.registry = Address(), .repository = "probe"};
  for (absl::Time end = absl::Now() + absl::Seconds(30); absl::Now() < end;) {
    if (probe.HasBlob(repo, DigestOf("probe")).ok()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  FAIL("docker-registry did not answer on " << Address());
}

void Registry::Stop() { process->Stop(SIGTERM, absl::Now() + absl::Seconds(10)); }

std::string Registry::Address() const { return absl::StrCat("127.0.0.1:", port); }

RegistryOptions Registry::Options() const {
  RegistryOptions o;
  o.scheme = "http";
  o.timeout = absl::Seconds(20);
  return o;
}

fs::path Registry::BlobFile(const std::string& digest) const {
  const std::string hex = digest.substr(7);
  return dir / "data/docker/registry/v2/blobs/sha256" / hex.substr(0, 2) / hex / "data";
}

}  // namespace codeco::checkpointer::testing
