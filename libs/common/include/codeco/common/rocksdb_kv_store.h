#pragma once
// KvStore on RocksDB: one column family per record type, write-ahead log
// always on, every batch atomic across families.
//
// Durability: a Write that returned OK is in the WAL, so it survives a
// process killed with SIGKILL. With `sync` (the default) the WAL is also
// fsync'ed before Write returns, so it survives power loss too.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codeco/common/kv_store.h"

namespace codeco {

/// How to open a RocksDbKvStore.
struct RocksDbOptions {
  /// Directory of the database; created (with parents) when missing. Required.
  std::string path;
  /// Column families to have besides "default"; missing ones are created, and
  /// families already in the database are opened too. Default: none.
  std::vector<std::string> column_families;
  /// fsync the WAL before each Write returns. Default: true.
  bool sync = true;
  /// Shared block cache size in bytes; it holds the files' index and filter
  /// blocks as well as data blocks. Default: 32 MiB.
  size_t block_cache_bytes = 32u << 20;
  /// Background flush and compaction threads. Default: 2 (the CI machine's cores).
  int max_background_jobs = 2;
  /// Memory all column families' memtables may hold together; past it the
  /// largest is flushed to disk, so a service's write memory stays bounded
  /// however many families it has (RocksDB's default is 64 MiB per family).
  /// Default: 16 MiB.
  size_t memtable_budget_bytes = 16u << 20;
};

/// Opens (or creates) the database described by `options`. Fails with
/// UNAVAILABLE when another process holds the database lock.
absl::StatusOr<std::unique_ptr<KvStore>> OpenRocksDbKvStore(const RocksDbOptions& options);

}  // namespace codeco
