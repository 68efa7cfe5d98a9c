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
//   default               acm/last_revision               -> decimal revision
// Every commit is one KvWriteBatch, so a crash leaves either all of it or none.
// Events older than `max_events` revisions are deleted in the commit that
// makes them too old.

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
      const std::function<bool(const common::v1::Operation&)>& visitor) const override;
  absl::Status PutOperation(const common::v1::Operation& operation) override;
  absl::Status DeleteOperations(const std::vector<std::string>& ids) override;

 private:
  KvStore& kv_;
  const KvApplicationStoreOptions options_;
};

}  // namespace codeco::acm
