#pragma once
// The storage port every service's state goes through. A KvStore is a set of
// named column families (one per record type), each an ordered map of byte
// strings. Writes are atomic batches; an acknowledged write is durable as the
// implementation promises (RocksDbKvStore: in the WAL before Write returns).
// Implementations: RocksDbKvStore (store/rocksdb_kv_store.h) and
// InMemoryKvStore (below, for unit tests and the simulator).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace codeco {

/// One mutation inside a KvWriteBatch.
struct KvMutation {
  /// Column family the key lives in.
  std::string column_family;
  /// The key.
  std::string key;
  /// The new value (ignored for deletes).
  std::string value;
  /// True to delete `key`, false to put `value`.
  bool is_delete = false;
};

/// An ordered group of mutations applied all-or-nothing.
class KvWriteBatch {
 public:
  /// Sets `key` in `column_family` to `value`.
  KvWriteBatch& Put(std::string column_family, std::string key, std::string value);
  /// Removes `key` from `column_family` (no error when absent).
  KvWriteBatch& Delete(std::string column_family, std::string key);
  /// The mutations in the order they were added.
  const std::vector<KvMutation>& mutations() const { return mutations_; }
  /// True when the batch holds no mutation.
  bool empty() const { return mutations_.empty(); }

 private:
  std::vector<KvMutation> mutations_;
};

/// What a Scan visits.
struct KvScanOptions {
  /// Only keys starting with this prefix (empty: every key).
  std::string prefix;
  /// Start strictly after this key (empty: from the first key); used for
  /// paginated listing with the last key of the previous page.
  std::string start_after;
  /// Stop after this many entries (0: no limit).
  size_t limit = 0;
};

/// Called for each entry in key order; return false to stop the scan.
using KvVisitor = std::function<bool(std::string_view key, std::string_view value)>;

/// What a store holds in memory, in bytes (zeros where it does not say).
struct KvStoreMemory {
  /// Memtables, active and waiting for a flush.
  uint64_t memtables = 0;
  /// The block cache in use (data, index and filter blocks).
  uint64_t block_cache = 0;
  /// Table readers outside the block cache.
  uint64_t table_readers = 0;
};

/// Ordered key-value storage with column families and atomic batches.
class KvStore {
 public:
  virtual ~KvStore() = default;

  /// The value of `key` in `column_family`; NOT_FOUND when absent.
  virtual absl::StatusOr<std::string> Get(std::string_view column_family,
                                          std::string_view key) const = 0;
  /// Applies every mutation of `batch` atomically, or none of them.
  virtual absl::Status Write(const KvWriteBatch& batch) = 0;
  /// Visits the entries of `column_family` selected by `options` in key order.
  virtual absl::Status Scan(std::string_view column_family, const KvScanOptions& options,
                            const KvVisitor& visitor) const = 0;
  /// The column families this store holds (always includes "default").
  virtual std::vector<std::string> ColumnFamilies() const = 0;
  /// What the store holds in memory now; zeros for a store that does not say.
  virtual KvStoreMemory MemoryUsage() const { return {}; }

  /// Convenience: a batch with one put.
  absl::Status Put(std::string_view column_family, std::string_view key, std::string_view value);
  /// Convenience: a batch with one delete.
  absl::Status Delete(std::string_view column_family, std::string_view key);
};

/// A thread-safe KvStore held in memory, with the given column families plus
/// "default". Nothing survives the object; for unit tests and simulations.
std::unique_ptr<KvStore> NewInMemoryKvStore(const std::vector<std::string>& column_families);

}  // namespace codeco
