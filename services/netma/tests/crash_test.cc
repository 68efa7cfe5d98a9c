// Crash recovery of the virtual-link store: a child process creates virtual
// links through the controller on RocksDB and reports each acknowledged id;
// the parent SIGKILLs it mid-stream, reopens the store and finds every
// acknowledged link intact, every record decodable and every request id
// pointing at a stored link.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <random>
#include <set>

#include "codeco/common/rocksdb_kv_store.h"
#include "netma/core/virtual_links.h"
#include "netma/store/kv_virtual_link_repository.h"

namespace codeco::netma {
namespace {

namespace fs = std::filesystem;

v1::VirtualLink Spec(int i) {
  v1::VirtualLink spec;
  spec.set_application("app");
  spec.set_channel("ch-" + std::to_string(i));
  spec.set_source_cluster("mc1");
  spec.set_target_cluster("mc2");
  spec.set_target_endpoint("10.0.0.1:80");
  spec.set_service_class(codeco::common::v1::SERVICE_CLASS_BESTEFFORT);
  return spec;
}

[[noreturn]] void Writer(const std::string& path, int out_fd) {
  auto store = OpenRocksDbKvStore({.path = path, .column_families = {kVirtualLinksColumnFamily}});
  if (!store.ok()) _exit(2);
  auto repository = NewKvVirtualLinkRepository(**store);
  VirtualLinkController controller(*repository, RealClock::Default(), {"idco-0"});
  for (int i = 0;; ++i) {
    auto link = controller.Create(Spec(i), "req-" + std::to_string(i));
    if (!link.ok()) _exit(3);
    std::string line = link->id() + "\n";
    if (write(out_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(4);
  }
}

TEST_CASE("acknowledged virtual links survive SIGKILL") {
  std::mt19937_64 rng(std::random_device{}());
  fs::path dir = fs::temp_directory_path() / ("codeco-netma-crash-" + std::to_string(rng()));
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(fds[0]);
    Writer(dir.string(), fds[1]);
  }
  close(fds[1]);
  // Read acknowledged ids until 50 arrived, then kill without warning.
  std::vector<std::string> acked;
  std::string buffer;
  char chunk[4096];
  while (acked.size() < 50) {
    ssize_t n = read(fds[0], chunk, sizeof(chunk));
    REQUIRE(n > 0);
    buffer.append(chunk, static_cast<size_t>(n));
    for (size_t nl; (nl = buffer.find('\n')) != std::string::npos; buffer.erase(0, nl + 1)) {
      acked.push_back(buffer.substr(0, nl));
    }
  }
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  close(fds[0]);
  REQUIRE(WIFSIGNALED(status));

  auto store =
      OpenRocksDbKvStore({.path = dir.string(), .column_families = {kVirtualLinksColumnFamily}});
  REQUIRE(store.ok());
  auto repository = NewKvVirtualLinkRepository(**store);
  auto all = repository->List("", 0);
  REQUIRE(all.ok());  // every record decodes
  std::set<std::string> stored;
  for (const auto& link : *all) stored.insert(link.id());
  for (const std::string& id : acked) {
    INFO(id);
    REQUIRE(stored.count(id));
  }
  for (size_t i = 0; i < stored.size(); ++i) {
    auto id = repository->FindByRequestId("req-" + std::to_string(i));
    REQUIRE(id.ok());
    REQUIRE(id->has_value());
    REQUIRE(stored.count(**id));
  }
  store->reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace codeco::netma
