#include "codeco/common/rocksdb_kv_store.h"

#include <algorithm>

#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/options.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/options_util.h"
#include "rocksdb/utilities/table_properties_collectors.h"
#include "rocksdb/write_batch.h"

namespace codeco {
namespace {

absl::Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return absl::OkStatus();
  std::string message = absl::StrCat(std::string(what), ": ", s.ToString());
  if (s.IsNotFound()) return absl::NotFoundError(message);
  if (s.IsInvalidArgument()) return absl::InvalidArgumentError(message);
  if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
    return absl::UnavailableError(message);
  }
  if (s.IsBusy() || s.IsTryAgain() || s.IsTimedOut()) return absl::UnavailableError(message);
  if (s.IsCorruption()) return absl::DataLossError(message);
  return absl::InternalError(message);
}

class RocksDbKvStore final : public KvStore {
 public:
  RocksDbKvStore(std::unique_ptr<rocksdb::DB> db, std::vector<rocksdb::ColumnFamilyHandle*> handles,
                 std::shared_ptr<rocksdb::Cache> block_cache, bool sync)
      : db_(std::move(db)), handles_(std::move(handles)), block_cache_(std::move(block_cache)) {
    write_options_.sync = sync;
    write_options_.disableWAL = false;
    for (auto* h : handles_) by_name_[h->GetName()] = h;
  }

  ~RocksDbKvStore() override {
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
    db_->Close();
  }

  absl::StatusOr<std::string> Get(std::string_view column_family,
                                  std::string_view key) const override {
    rocksdb::ColumnFamilyHandle* cf = Family(column_family);
    if (cf == nullptr) return UnknownFamily(column_family);
    std::string value;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), cf, rocksdb::Slice(key.data(), key.size()),
                                 &value);
    if (s.IsNotFound()) return absl::NotFoundError(absl::StrCat("key not found: ", std::string(key)));
    if (!s.ok()) return FromRocks(s, "get");
    return value;
  }

  absl::Status Write(const KvWriteBatch& batch) override {
    rocksdb::WriteBatch rb;
    for (const auto& m : batch.mutations()) {
      rocksdb::ColumnFamilyHandle* cf = Family(m.column_family);
      if (cf == nullptr) return UnknownFamily(m.column_family);
      rocksdb::Status s = m.is_delete ? rb.Delete(cf, m.key) : rb.Put(cf, m.key, m.value);
      if (!s.ok()) return FromRocks(s, "batch");
    }
    return FromRocks(db_->Write(write_options_, &rb), "write");
  }

  absl::Status Scan(std::string_view column_family, const KvScanOptions& options,
                    const KvVisitor& visitor) const override {
    rocksdb::ColumnFamilyHandle* cf = Family(column_family);
    if (cf == nullptr) return UnknownFamily(column_family);
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf));
    const std::string& seek =
        options.start_after > options.prefix ? options.start_after : options.prefix;
    it->Seek(seek);
    if (!options.start_after.empty() && it->Valid() && it->key() == options.start_after) it->Next();
    size_t visited = 0;
    for (; it->Valid(); it->Next()) {
      std::string_view key(it->key().data(), it->key().size());
      if (!key.starts_with(options.prefix)) break;
      if (options.limit != 0 && visited == options.limit) break;
      ++visited;
      if (!visitor(key, std::string_view(it->value().data(), it->value().size()))) break;
    }
    return FromRocks(it->status(), "scan");
  }

  std::vector<std::string> ColumnFamilies() const override {
    std::vector<std::string> names;
    for (const auto& [name, handle] : by_name_) names.push_back(name);
    return names;
  }

  KvStoreMemory MemoryUsage() const override {
    KvStoreMemory out;
    uint64_t value = 0;
    if (db_->GetAggregatedIntProperty(rocksdb::DB::Properties::kCurSizeAllMemTables, &value)) {
      out.memtables = value;
    }
    if (db_->GetAggregatedIntProperty(rocksdb::DB::Properties::kEstimateTableReadersMem,
                                      &value)) {
      out.table_readers = value;
    }
    out.block_cache = block_cache_->GetUsage();
    return out;
  }

 private:
  rocksdb::ColumnFamilyHandle* Family(std::string_view name) const {
    auto it = by_name_.find(std::string(name));
    return it == by_name_.end() ? nullptr : it->second;
  }

  static absl::Status UnknownFamily(std::string_view name) {
    return absl::InvalidArgumentError(absl::StrCat("unknown column family: ", std::string(name)));
  }

  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  std::map<std::string, rocksdb::ColumnFamilyHandle*> by_name_;
  std::shared_ptr<rocksdb::Cache> block_cache_;
  rocksdb::WriteOptions write_options_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<KvStore>> OpenRocksDbKvStore(const RocksDbOptions& options) {
  if (options.path.empty()) return absl::InvalidArgumentError("data_dir: required");
  std::error_code ec;
  std::filesystem::create_directories(options.path, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("data_dir: cannot create ", options.path, ": ", ec.message()));
  }

  rocksdb::Options db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.max_background_jobs = options.max_background_jobs;
  db_options.keep_log_file_num = 5;
  db_options.db_write_buffer_size = options.memtable_budget_bytes;
  rocksdb::BlockBasedTableOptions table_options;
  std::shared_ptr<rocksdb::Cache> block_cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  table_options.block_cache = block_cache;
  // Index and filter blocks live in the block cache too, so the store's
  // memory is the memtables plus the cache, however many files it has.
  table_options.cache_index_and_filter_blocks = true;
  table_options.pin_l0_filter_and_index_blocks_in_cache = true;
  // A Bloom filter per file (10 bits a key, about 1 % false positives): a
  // Get of a key that is not there, the common case of a store checking
  // before it inserts, skips a file without reading its blocks.
  table_options.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  // Index and filter partitioned into 4 KiB blocks under a small top level
  // that stays pinned: a lookup loads the partitions it needs, not a whole
  // file's index and filter (megabytes for a file of a million keys), which
  // a small cache would otherwise evict and read again on every Get.
  table_options.index_type = rocksdb::BlockBasedTableOptions::kTwoLevelIndexSearch;
  table_options.partition_filters = true;
  table_options.metadata_block_size = 4096;
  table_options.pin_top_level_index_and_filter = true;
  table_options.cache_index_and_filter_blocks_with_high_priority = true;
  rocksdb::ColumnFamilyOptions cf_options;
  cf_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table_options));
  // Files dense with deletions are compacted soon: the stores delete as
  // much as they write (released reservations, finished requests), and
  // scans would otherwise step over the deletion markers.
  cf_options.table_properties_collector_factories.emplace_back(
      rocksdb::NewCompactOnDeletionCollectorFactory(/*sliding_window_size=*/128,
                                                    /*deletion_trigger=*/32));
  // One family's memtable is at most a quarter of the budget (at least 1 MiB).
  cf_options.write_buffer_size = std::max<size_t>(options.memtable_budget_bytes / 4, 1u << 20);
  // A Bloom filter over the memtable's whole keys (2 % of its size): a Get
  // of a key that is not there (most of what an insert checks) skips the
  // skip list instead of searching it.
  cf_options.memtable_prefix_bloom_size_ratio = 0.02;
  cf_options.memtable_whole_key_filtering = true;

  // Open every family already in the database plus the requested ones.
  std::set<std::string> names = {rocksdb::kDefaultColumnFamilyName};
  names.insert(options.column_families.begin(), options.column_families.end());
  std::vector<std::string> existing;
  if (rocksdb::DB::ListColumnFamilies(db_options, options.path, &existing).ok()) {
    names.insert(existing.begin(), existing.end());
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const auto& name : names) descriptors.emplace_back(name, cf_options);

  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, options.path, descriptors, &handles, &raw);
  if (!s.ok()) return FromRocks(s, absl::StrCat("open ", options.path));
  return std::unique_ptr<KvStore>(
      new RocksDbKvStore(std::unique_ptr<rocksdb::DB>(raw), std::move(handles),
                                            std::move(block_cache), options.sync));
}

}  // namespace codeco
