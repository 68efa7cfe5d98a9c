#pragma once
// The storage port of the application lifecycle. Every change is one
// ApplicationCommit, applied all-or-nothing: the application's new state, the
// spec revision it created (if any), the watch event it produced and the
// idempotency record of the request that caused it.
//
// Revisions: one counter for the whole store. Each commit takes the next
// value; it becomes the changed application's metadata.revision and the
// revision of the commit's watch event, so a watcher that saw revision N
// resumes with the events after N, for one application or for all.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "codeco/acm/v1/acm_service.pb.h"
#include "codeco/common/v1/operation.pb.h"

namespace codeco::acm {

/// The stored answer of a request that carried a request_id.
struct StoredRequest {
  /// Hash of the request with its request_id cleared; a reuse of the id with
  /// different content is refused.
  std::string fingerprint;
  /// The serialized response first given.
  std::string response;
};

/// One atomic change of the application state.
struct ApplicationCommit {
  /// The revision this commit takes (the store's last revision + 1).
  int64_t revision = 0;
  /// New current state of an application, or unset when `erase` is set.
  std::optional<v1::Application> put;
  /// Name of an application to remove, with all its spec revisions.
  std::optional<std::string> erase;
  /// A new spec revision of the application in `put`.
  std::optional<v1::ApplicationRevision> spec_revision;
  /// The watch event of the change; its application's metadata.revision == revision.
  v1::WatchApplicationResponse event;
  /// Idempotency record: key (e.g. "apply/<request_id>") and content.
  std::optional<std::pair<std::string, StoredRequest>> request;
  /// Operations created or changed by this commit (stored under their id).
  std::vector<common::v1::Operation> operations;
  /// When the commit is made (the manager's clock); dates `request` for
  /// PruneHistory.
  absl::Time time = absl::InfinitePast();
};

/// What one ApplicationStore::PruneHistory call deletes.
struct HistoryPruning {
  /// Now, by the manager's clock (dates records found without a date).
  absl::Time now = absl::InfinitePast();
  /// Done operations that last changed at or before this go...
  absl::Time operations_done_by = absl::InfinitePast();
  /// ...unless this says to keep them (an application still names them):
  /// those are looked at again one retention after `now`.
  std::function<bool(const common::v1::Operation&)> keep;
  /// Idempotency records committed at or before this go.
  absl::Time requests_done_by = absl::InfinitePast();
  /// Most index entries one call looks at (bounds one write). Default: 1000.
  size_t max_entries = 1000;
};

/// What one PruneHistory call did.
struct PrunedHistory {
  /// Operations deleted.
  size_t operations = 0;
  /// Idempotency records deleted.
  size_t requests = 0;
  /// True when it stopped at max_entries with more due: call again.
  bool more = false;
};

/// Where applications, their spec revisions and their change log live.
class ApplicationStore {
 public:
  virtual ~ApplicationStore() = default;

  /// The current state of `name`, or nullopt when absent.
  virtual absl::StatusOr<std::optional<v1::Application>> Get(const std::string& name) const = 0;
  /// Visits applications in name order, starting after `start_after`; the
  /// visitor returns false to stop.
  virtual absl::Status List(const std::string& start_after,
                            const std::function<bool(const v1::Application&)>& visitor) const = 0;
  /// Spec revision `spec_revision` of `name`; NOT_FOUND when absent.
  virtual absl::StatusOr<v1::ApplicationRevision> GetSpecRevision(const std::string& name,
                                                                  int64_t spec_revision) const = 0;
  /// Every stored spec revision of `name`, oldest first.
  virtual absl::StatusOr<std::vector<v1::ApplicationRevision>> ListSpecRevisions(
      const std::string& name) const = 0;
  /// The idempotency record under `key`, or nullopt.
  virtual absl::StatusOr<std::optional<StoredRequest>> GetRequest(const std::string& key) const = 0;
  /// The revision of the last commit (0 for an empty store).
  virtual absl::StatusOr<int64_t> LastRevision() const = 0;
  /// The oldest revision whose event is still kept (LastRevision() + 1 when none).
  virtual absl::StatusOr<int64_t> OldestEventRevision() const = 0;
  /// Visits the events with revision > `after` in revision order until the
  /// visitor returns false.
  virtual absl::Status ReadEvents(
      int64_t after,
      const std::function<bool(const v1::WatchApplicationResponse&)>& visitor) const = 0;
  /// Applies `commit` atomically; `commit.revision` must be LastRevision() + 1.
  virtual absl::Status Commit(const ApplicationCommit& commit) = 0;
  /// The operation `id`, or nullopt.
  virtual absl::StatusOr<std::optional<common::v1::Operation>> GetOperation(
      const std::string& id) const = 0;
  /// Visits the stored operations newest first (by create time, then id),
  /// starting after `start_after` (a `position` an earlier visit gave; empty:
  /// from the newest), until the visitor returns false; INVALID_ARGUMENT for
  /// a `start_after` it did not give. Memory does not grow with the number
  /// of operations.
  virtual absl::Status ListOperations(
      const std::string& start_after,
      const std::function<bool(const std::string& position, const common::v1::Operation&)>&
          visitor) const = 0;
  /// Stores `operation` on its own, outside the change log (an operation
  /// that changes no application, e.g. UnregisterCluster's).
  virtual absl::Status PutOperation(const common::v1::Operation& operation) = 0;
  /// Deletes done operations and idempotency records past their time (see
  /// HistoryPruning), looking only at the ones due: the work is the number
  /// of records deleted, not the number stored.
  virtual absl::StatusOr<PrunedHistory> PruneHistory(const HistoryPruning& pruning) = 0;
};

}  // namespace codeco::acm
