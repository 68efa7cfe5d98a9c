#include "kv_store_contract.h"

#include <algorithm>
#include <catch2/catch.hpp>

namespace codeco::testing {

std::vector<std::pair<std::string, std::string>> ScanAll(const KvStore& store,
                                                         const std::string& cf,
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

  // A key named twice in one batch ends as its last mutation says.
  KvWriteBatch twice;
  twice.Put("apps", "d", "1").Put("apps", "d", "2").Put("apps", "e", "x").Delete("apps", "e");
  REQUIRE(store.Write(twice).ok());
  REQUIRE(store.Get("apps", "d").value() == "2");
  REQUIRE(store.Get("apps", "e").status().code() == absl::StatusCode::kNotFound);

  // Binary-safe values.
  std::string binary("\0\x01\xff", 3);
  REQUIRE(store.Put("apps", "bin", binary).ok());
  REQUIRE(store.Get("apps", "bin").value() == binary);
}

}  // namespace codeco::testing
