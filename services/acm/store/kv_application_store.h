#pragma once
// ApplicationStore on a KvStore (RocksDB in the binary, in memory in tests).
//
// Key layout (values are serialized codeco.acm.v1 protos):
//   applications          <name>                          -> Application
//   application_revisions <name>/<spec revision, 20 digits> -> ApplicationRevision
//   application_events    <revision, 20 digits>           -> WatchApplicationResponse
//   application_requests  f/<kind>/<request_id>           -> request fingerprint
//   application_requests  r/<kind>/<request_id>           -> the serialized response
//   application_operations <operation id>                 -> codeco.common.v1.Operation
//   application_history   c/<inverted create µs, 20 digits>/<operation id> -> ""
//   application_history   d/<done µs, 20 digits>/<operation id>  -> "" (done operations)
//   application_history   q/<commit µs, 20 digits>/<request key> -> "" (idempotency records)
//   default               acm/last_revision               -> decimal revision
//   default               acm/operation_index, acm/request_index -> "" (indexes built)
// The history family orders operations newest first for listing, and done
// operations and idempotency records by age for PruneHistory. Stores written
// before it existed are indexed on first use (requests dated then).
// Every commit is one KvWriteBatch, so a crash leaves either all of it or none.
// Events older than `max_events` revisions are deleted in the commit that
// makes them too old.

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "acm/core/application_store.h"
#include "codeco/common/kv_store.h"

namespace codeco::acm {

/// Settings of a KvApplicationStore.
struct KvApplicationStoreOptions {
  /// Change events kept for watchers to resume from. Default: 100000.
  int64_t max_events = 100000;
};

/// The column families a KvApplicationStore needs.
std::vector<std::string> ApplicationColumnFamilies();

/// ApplicationStore on `kv`, which must hold ApplicationColumnFamilies() and outlive it.
class KvApplicationStore final : public ApplicationStore {
 public:
  /// Uses `kv` with `options`.
  explicit KvApplicationStore(KvStore& kv, KvApplicationStoreOptions options = {});

  absl::StatusOr<std::optional<v1::Application>> Get(const std::string& name) const override;
  absl::Status List(const std::string& start_after,
                    const std::function<bool(const v1::Application&)>& visitor) const override;
  absl::StatusOr<v1::ApplicationRevision> GetSpecRevision(const std::string& name,
                                                          int64_t spec_revision) const override;
  absl::StatusOr<std::vector<v1::ApplicationRevision>> ListSpecRevisions(
      const std::string& name) const override;
  absl::StatusOr<std::optional<StoredRequest>> GetRequest(const std::string& key) const override;
  absl::StatusOr<int64_t> LastRevision() const override;
  absl::StatusOr<int64_t> OldestEventRevision() const override;
  absl::Status ReadEvents(
      int64_t after,
      const std::function<bool(const v1::WatchApplicationResponse&)>& visitor) const override;
  absl::Status Commit(const ApplicationCommit& commit) override;
  absl::StatusOr<std::optional<common::v1::Operation>> GetOperation(
      const std::string& id) const override;
  absl::Status ListOperations(
      const std::string& start_after,
      const std::function<bool(const std::string& position, const common::v1::Operation&)>&
          visitor) const override;
  absl::Status PutOperation(const common::v1::Operation& operation) override;
  absl::StatusOr<PrunedHistory> PruneHistory(const HistoryPruning& pruning) override;

 private:
  // Indexes the operations of a store written before the history family
  // (once; a marker records it).
  absl::Status EnsureOperationIndex() const;
  // Indexes its idempotency records, dated `now` (once).
  absl::Status EnsureRequestIndex(absl::Time now);
  // Up to `limit` history keys with `prefix`, after `after`, before `end`
  // (empty: no end), in key order.
  absl::StatusOr<std::vector<std::string>> IndexKeys(const char* prefix,
                                                     const std::string& after, size_t limit,
                                                     const std::string& end = "") const;

  KvStore& kv_;
  const KvApplicationStoreOptions options_;
  // Set once EnsureOperationIndex found or wrote its marker.
  mutable std::atomic<bool> operations_indexed_{false};
  // Set once EnsureRequestIndex found or wrote its marker.
  std::atomic<bool> requests_indexed_{false};
};

}  // namespace codeco::acm
