#include "codeco/common/kv_store.h"

#include <map>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace codeco {

KvWriteBatch& KvWriteBatch::Put(std::string column_family, std::string key, std::string value) {
  mutations_.push_back({std::move(column_family), std::move(key), std::move(value), false});
  return *this;
}

KvWriteBatch& KvWriteBatch::Delete(std::string column_family, std::string key) {
  mutations_.push_back({std::move(column_family), std::move(key), "", true});
  return *this;
}

absl::Status KvStore::Put(std::string_view column_family, std::string_view key,
                          std::string_view value) {
  KvWriteBatch batch;
  batch.Put(std::string(column_family), std::string(key), std::string(value));
  return Write(batch);
}

absl::Status KvStore::Delete(std::string_view column_family, std::string_view key) {
  KvWriteBatch batch;
  batch.Delete(std::string(column_family), std::string(key));
  return Write(batch);
}

namespace {

class InMemoryKvStore final : public KvStore {
 public:
  explicit InMemoryKvStore(const std::vector<std::string>& column_families) {
    tables_["default"];
    for (const auto& cf : column_families) tables_[cf];
  }

  absl::StatusOr<std::string> Get(std::string_view column_family,
                                  std::string_view key) const override {
    absl::ReaderMutexLock lock(&mu_);
    auto table = tables_.find(std::string(column_family));
    if (table == tables_.end()) return UnknownFamily(column_family);
    auto it = table->second.find(std::string(key));
    if (it == table->second.end()) return absl::NotFoundError(absl::StrCat("key not found: ", std::string(key)));
    return it->second;
  }

  absl::Status Write(const KvWriteBatch& batch) override {
    absl::MutexLock lock(&mu_);
    // Check every family first so a bad batch changes nothing.
    for (const auto& m : batch.mutations()) {
      if (!tables_.contains(m.column_family)) return UnknownFamily(m.column_family);
    }
    for (const auto& m : batch.mutations()) {
      auto& table = tables_[m.column_family];
      if (m.is_delete) {
        table.erase(m.key);
      } else {
        table[m.key] = m.value;
      }
    }
    return absl::OkStatus();
  }

  absl::Status Scan(std::string_view column_family, const KvScanOptions& options,
                    const KvVisitor& visitor) const override {
    absl::ReaderMutexLock lock(&mu_);
    auto table = tables_.find(std::string(column_family));
    if (table == tables_.end()) return UnknownFamily(column_family);
    // Start after `start_after` when it is past the prefix, else at the prefix.
    auto it = options.start_after > options.prefix ? table->second.upper_bound(options.start_after)
                                                   : table->second.lower_bound(options.prefix);
    size_t visited = 0;
    for (; it != table->second.end(); ++it) {
      if (!std::string_view(it->first).starts_with(options.prefix)) break;
      if (options.limit != 0 && visited == options.limit) break;
      ++visited;
      if (!visitor(it->first, it->second)) break;
    }
    return absl::OkStatus();
  }

  std::vector<std::string> ColumnFamilies() const override {
    absl::ReaderMutexLock lock(&mu_);
    std::vector<std::string> names;
    for (const auto& [name, table] : tables_) names.push_back(name);
    return names;
  }

 private:
  static absl::Status UnknownFamily(std::string_view name) {
    return absl::InvalidArgumentError(absl::StrCat("unknown column family: ", std::string(name)));
  }

  mutable absl::Mutex mu_;
  std::map<std::string, std::map<std::string, std::string>> tables_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<KvStore> NewInMemoryKvStore(const std::vector<std::string>& column_families) {
  return std::make_unique<InMemoryKvStore>(column_families);
}

}  // namespace codeco
