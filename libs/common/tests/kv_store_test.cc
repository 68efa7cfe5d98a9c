#include <catch2/catch.hpp>

#include <filesystem>
#include <random>

#include "codeco/common/kv_store.h"
#include "codeco/common/rocksdb_kv_store.h"

namespace codeco {
namespace {

std::string TempDir(const std::string& name) {
  std::random_device rd;
  auto dir = std::filesystem::temp_directory_path() /
             ("codeco-" + name + "-" + std::to_string(rd()));
  std::filesystem::remove_all(dir);
  return dir.string();
}

std::vector<std::pair<std::string, std::string>> ScanAll(const KvStore& store, const std::string& cf,
                                                         const KvScanOptions& options) {
  std::vector<std::pair<std::string, std::string>> out;
  REQUIRE(store
              .Scan(cf, options,
                    [&](std::string_view k, std::string_view v) {
                      out.emplace_back(std::string(k), std::string(v));
                      return true;
                    })
              .ok());
  return out;
}

// The behaviour every KvStore implementation shares.
void CheckStoreContract(KvStore& store) {
  REQUIRE(store.Put("apps", "a/1", "one").ok());
  REQUIRE(store.Put("apps", "a/2", "two").ok());
  REQUIRE(store.Put("apps", "b/1", "bee").ok());
  REQUIRE(store.Put("clusters", "a/1", "other family").ok());
  REQUIRE(store.Get("apps", "a/1").value() == "one");
  REQUIRE(store.Get("clusters", "a/1").value() == "other family");
  REQUIRE(store.Get("apps", "zzz").status().code() == absl::StatusCode::kNotFound);

  // Prefix scan, resumption and limits (the shape of paginated lists).
  auto a = ScanAll(store, "apps", {.prefix = "a/"});
  REQUIRE(a.size() == 2);
  REQUIRE(a[0].first == "a/1");
  REQUIRE(a[1].second == "two");
  auto after = ScanAll(store, "apps", {.prefix = "a/", .start_after = "a/1"});
  REQUIRE(after.size() == 1);
  REQUIRE(after[0].first == "a/2");
  auto limited = ScanAll(store, "apps", {.limit = 2});
  REQUIRE(limited.size() == 2);
  auto all = ScanAll(store, "apps", {});
  REQUIRE(all.size() == 3);

  // A batch is atomic: one unknown family and nothing of it is written.
  KvWriteBatch bad;
  bad.Put("apps", "c/1", "x").Put("no-such-family", "k", "v");
  REQUIRE_FALSE(store.Write(bad).ok());
  REQUIRE(store.Get("apps", "c/1").status().code() == absl::StatusCode::kNotFound);

  KvWriteBatch good;
  good.Delete("apps", "a/1").Put("apps", "c/1", "sea").Put("clusters", "x", "y");
  REQUIRE(store.Write(good).ok());
  REQUIRE(store.Get("apps", "a/1").status().code() == absl::StatusCode::kNotFound);
  REQUIRE(store.Get("apps", "c/1").value() == "sea");
  REQUIRE(store.Delete("apps", "never-there").ok());

  auto families = store.ColumnFamilies();
  REQUIRE(std::find(families.begin(), families.end(), "default") != families.end());
  REQUIRE(std::find(families.begin(), families.end(), "apps") != families.end());

  // Binary-safe values.
  std::string binary("\0\x01\xff", 3);
  REQUIRE(store.Put("apps", "bin", binary).ok());
  REQUIRE(store.Get("apps", "bin").value() == binary);
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
