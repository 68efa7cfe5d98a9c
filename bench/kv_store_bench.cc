// KvStore costs every service pays on each acknowledged change: a batch write
// with and without fsync, a point read, and a 100-entry page scan, for the
// RocksDB store and the in-memory one.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <unistd.h>

#include "codeco/common/rocksdb_kv_store.h"

namespace codeco {
namespace {

std::string Key(int64_t i) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "app/%012ld", static_cast<long>(i));
  return buf;
}

// A fresh store of the kind selected by the benchmark's first argument:
// 0 = in memory, 1 = RocksDB without fsync, 2 = RocksDB with fsync.
struct BenchStore {
  explicit BenchStore(int64_t kind) {
    if (kind == 0) {
      store = NewInMemoryKvStore({"apps"});
      return;
    }
    dir = (std::filesystem::temp_directory_path() /
           ("codeco-bench-" + std::to_string(getpid()) + "-" + std::to_string(kind)))
              .string();
    std::filesystem::remove_all(dir);
    store = std::move(OpenRocksDbKvStore({.path = dir, .column_families = {"apps"}, .sync = kind == 2}).value());
  }
  ~BenchStore() {
    store.reset();
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
  std::unique_ptr<KvStore> store;
  std::string dir;
};

const std::string kValue(512, 'v');  // about the size of a small serialized resource

void BM_WriteBatch(benchmark::State& state) {
  BenchStore s(state.range(0));
  int64_t i = 0;
  for (auto _ : state) {
    KvWriteBatch batch;
    batch.Put("apps", Key(i), kValue).Put("default", Key(i), "rev");
    benchmark::DoNotOptimize(s.store->Write(batch));
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_WriteBatch)->Arg(0)->Arg(1)->Arg(2)->ArgName("store");

void BM_Get(benchmark::State& state) {
  BenchStore s(state.range(0));
  constexpr int64_t kKeys = 10000;
  for (int64_t i = 0; i < kKeys; ++i) (void)s.store->Put("apps", Key(i), kValue);
  int64_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(s.store->Get("apps", Key((i * 7919) % kKeys)));
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Get)->Arg(0)->Arg(1)->ArgName("store");

void BM_ScanPage100(benchmark::State& state) {
  BenchStore s(state.range(0));
  constexpr int64_t kKeys = 10000;
  for (int64_t i = 0; i < kKeys; ++i) (void)s.store->Put("apps", Key(i), kValue);
  int64_t page = 0;
  for (auto _ : state) {
    size_t seen = 0;
    (void)s.store->Scan("apps", {.prefix = "app/", .start_after = Key((page * 100) % kKeys), .limit = 100},
                        [&](std::string_view, std::string_view) { return ++seen, true; });
    benchmark::DoNotOptimize(seen);
    ++page;
  }
  state.SetItemsProcessed(state.iterations() * 100);
}
BENCHMARK(BM_ScanPage100)->Arg(0)->Arg(1)->ArgName("store");

}  // namespace
}  // namespace codeco

BENCHMARK_MAIN();
