#include <catch2/catch.hpp>

#include <filesystem>
#include <random>

#include "codeco/common/kv_store.h"
#include "codeco/common/rocksdb_kv_store.h"
#include "kv_store_contract.h"

namespace codeco {
namespace {

using testing::CheckStoreContract;

std::string TempDir(const std::string& name) {
  std::random_device rd;
  auto dir = std::filesystem::temp_directory_path() /
             ("codeco-" + name + "-" + std::to_string(rd()));
  std::filesystem::remove_all(dir);
  return dir.string();
}

TEST_CASE("in-memory store keeps the KvStore contract") {
  auto store = NewInMemoryKvStore({"apps", "clusters"});
  CheckStoreContract(*store);
}

TEST_CASE("RocksDB store keeps the contract and survives reopening") {
  std::string dir = TempDir("kv");
  {
    auto store = OpenRocksDbKvStore({.path = dir, .column_families = {"apps", "clusters"}});
    REQUIRE(store.ok());
    CheckStoreContract(**store);
  }
  {
    // Reopen asking for fewer families: existing ones come back too.
    auto store = OpenRocksDbKvStore({.path = dir, .column_families = {"apps"}, .sync = false});
    REQUIRE(store.ok());
    REQUIRE((*store)->Get("apps", "c/1").value() == "sea");
    REQUIRE((*store)->Get("clusters", "x").value() == "y");
    // A second open of the same database while it is held fails cleanly.
    auto second = OpenRocksDbKvStore({.path = dir});
    REQUIRE_FALSE(second.ok());
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("RocksDB store reports the memory its memtables and block cache hold") {
  std::string dir = TempDir("kv-memory");
  {
    auto store = OpenRocksDbKvStore({.path = dir, .column_families = {"apps"}, .sync = false});
    REQUIRE(store.ok());
    const KvStoreMemory empty = (*store)->MemoryUsage();
    const std::string value(1000, 'v');
    for (int i = 0; i < 1000; ++i) {
      REQUIRE((*store)->Put("apps", "k/" + std::to_string(i), value).ok());
    }
    const KvStoreMemory written = (*store)->MemoryUsage();
    REQUIRE(written.memtables >= empty.memtables + 1000 * 1000);
  }
  {
    // Reopened, the data is in a table file: reading it fills the block cache.
    auto store = OpenRocksDbKvStore({.path = dir, .column_families = {"apps"}, .sync = false});
    REQUIRE(store.ok());
    for (int i = 0; i < 1000; ++i) REQUIRE((*store)->Get("apps", "k/" + std::to_string(i)).ok());
    REQUIRE((*store)->MemoryUsage().block_cache >= 1000 * 1000);
  }
  REQUIRE(NewInMemoryKvStore({"apps"})->MemoryUsage().memtables == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("RocksDB store needs a path") {
  auto store = OpenRocksDbKvStore({});
  REQUIRE(store.status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace codeco
