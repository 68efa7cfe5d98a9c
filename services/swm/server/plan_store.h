#pragma once
// Assignment plans and placement operations on the service's KvStore
// (RocksDB in the binary), so plans survive a restart.
//
// Key layout (values are serialized codeco protos):
//   plans       <application>/<999...9 - plan revision, 20 digits> -> swm.v1.AssignmentPlan
//               (newest revision first within an application)
//   operations  o/<operation id>                                 -> common.v1.Operation
//   operations  r/<request_id>                                   -> operation id
//   operations  l/<cluster>                                      -> host:port of its LMS
//               (learned from neighborhoods, so a restarted hub can still
//               reach the clusters its plans placed on)
//   operations  m/<cluster>                                      -> host:port of its MC swm
//               (the same, for clusters with an swm of their own)
//   operations  a/<application>                                  -> "" while its newest
//               plan holds pods (HoldsPods), so LivePlans reads the running
//               applications only, not every application ever removed
//   operations  a!                                               -> "" once the a/ index is
//               complete (a store written before it gets it built on first use)
//   operations  g/<application>/<999...9 - number, 20 digits>    -> swm.v1.Migration
//               (newest first within an application)
//   operations  gx/<migration id>                                -> "" while the migration
//               is not final, so recovery reads the interrupted ones only
//   operations  p/<application>                                  -> swm.v1.PlaceApplicationRequest
//               of its newest placement (the model and neighborhood a
//               migration re-creates pods from)
//   operations  b/<application>/<workload>                       -> swm.v1.StateBackupRecord
//               (the hub's backups of a stateful workload, state_backups.h)
//   operations  k/<cluster>                                      -> host:port of its
//               checkpointer (as l/ and m/)
// A placement's plan, operation and request index are written in one batch;
// so are a migration's record, its plan and its operation.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codeco/common/kv_store.h"
#include "codeco/common/v1/operation.pb.h"
#include "codeco/swm/v1/swm_service.pb.h"
#include "swm/core/placement_service.h"

namespace codeco::swm {

/// Column families a PlanStore needs.
inline constexpr char kPlansFamily[] = "plans";
/// Column family of operations and request ids.
inline constexpr char kOperationsFamily[] = "operations";

/// Plans and operations on a KvStore: the PlacementService's
/// PlanRepository. Thread-safe as the KvStore is.
class PlanStore final : public PlanRepository {
 public:
  /// Uses `kv`, which must hold the "plans" and "operations" families and
  /// outlive the store.
  explicit PlanStore(KvStore& kv) : kv_(kv) {}

  /// The newest plan of `application`, or nullopt.
  absl::StatusOr<std::optional<codeco::swm::v1::AssignmentPlan>> Latest(
      const std::string& application) const override;
  /// The newest plan of every application that holds pods (the a/ index;
  /// built from one scan of the plans family the first time on a store
  /// that lacks it).
  absl::StatusOr<std::vector<codeco::swm::v1::AssignmentPlan>> LivePlans() const override;
  /// Plan `revision` of `application` (0 = newest); NOT_FOUND when absent.
  absl::StatusOr<codeco::swm::v1::AssignmentPlan> Get(const std::string& application,
                                                      int64_t revision) const;
  /// One page of plans as ListAssignmentPlans defines it; INVALID_ARGUMENT
  /// for a negative page size or a token from another listing.
  absl::StatusOr<codeco::swm::v1::ListAssignmentPlansResponse> List(
      const codeco::swm::v1::ListAssignmentPlansRequest& request) const;
  /// The operation started by `request_id`, or nullopt.
  absl::StatusOr<std::optional<codeco::common::v1::Operation>> OperationForRequest(
      const std::string& request_id) const override;
  /// Operation `id`; NOT_FOUND when absent.
  absl::StatusOr<codeco::common::v1::Operation> GetOperation(
      const std::string& id) const override;
  /// Stores `plan` (if it has an id), `operation` and, when non-empty,
  /// `request_id` -> operation, atomically; then calls the save observer.
  absl::Status Save(const codeco::swm::v1::AssignmentPlan* plan,
                    const codeco::common::v1::Operation& operation,
                    const std::string& request_id) override;
  absl::StatusOr<codeco::swm::v1::Migration> GetMigration(const std::string& id) const override;
  absl::StatusOr<std::optional<codeco::swm::v1::Migration>> NewestMigration(
      const std::string& application) const override;
  /// The migrations the gx/ index names.
  absl::StatusOr<std::vector<codeco::swm::v1::Migration>> ActiveMigrations() const override;
  /// Stores the migration (and its gx/ entry while not final), the plan,
  /// the operation and the request index in one batch; then calls the save
  /// observer.
  absl::Status SaveMigration(const codeco::swm::v1::Migration& migration,
                             const codeco::swm::v1::AssignmentPlan* plan,
                             const codeco::common::v1::Operation& operation,
                             const std::string& request_id) override;
  /// One page of migrations as ListMigrations defines it: by application
  /// name, newest first within one; the token is the page's last key.
  /// INVALID_ARGUMENT naming page_size or page_token.
  absl::StatusOr<codeco::swm::v1::ListMigrationsResponse> ListMigrations(
      const codeco::swm::v1::ListMigrationsRequest& request) const;
  /// The state backup records (b/ keys).
  absl::StatusOr<std::vector<codeco::swm::v1::StateBackupRecord>> StateBackups() const override;
  absl::StatusOr<std::optional<codeco::swm::v1::StateBackupRecord>> StateBackupOf(
      const std::string& application, const std::string& workload) const override;
  absl::Status SaveStateBackup(const codeco::swm::v1::StateBackupRecord& record) override;
  absl::Status DeleteStateBackup(const std::string& application,
                                 const std::string& workload) override;
  /// One page of state backup records as ListStateBackups defines it;
  /// INVALID_ARGUMENT naming page_size or page_token.
  absl::StatusOr<codeco::swm::v1::ListStateBackupsResponse> ListStateBackups(
      const codeco::swm::v1::ListStateBackupsRequest& request) const;
  /// Remembers the request of `request.application()`'s newest placement.
  absl::Status SavePlacementRequest(const std::string& application,
                                    const codeco::swm::v1::PlaceApplicationRequest& request);
  /// The request of the application's newest placement, or nullopt.
  absl::StatusOr<std::optional<codeco::swm::v1::PlaceApplicationRequest>> PlacementRequest(
      const std::string& application) const;

  /// Every stored operation (one scan of the o/ keys), in id order.
  absl::StatusOr<std::vector<codeco::common::v1::Operation>> Operations() const;
  /// One page of operations as ListOperations defines it (newest
  /// create_time first, the id breaking ties; the token is the last id of
  /// the page); INVALID_ARGUMENT naming page_size or page_token.
  absl::StatusOr<codeco::swm::v1::ListOperationsResponse> ListOperations(
      const codeco::swm::v1::ListOperationsRequest& request) const;
  /// Calls `observer` after every successful Save (operation watchers read
  /// again then). Set once, before the store is shared between threads.
  void SetSaveObserver(std::function<void()> observer) { on_save_ = std::move(observer); }

  /// Remembers that `cluster`'s LMS is at `lms`.
  absl::Status SaveLmsEndpoint(const std::string& cluster, const std::string& lms);
  /// The LMS endpoint last saved for `cluster`, or nullopt.
  absl::StatusOr<std::optional<std::string>> LmsEndpoint(const std::string& cluster) const;
  /// Every cluster whose LMS endpoint was saved.
  absl::StatusOr<std::vector<std::string>> LmsClusters() const;
  /// Remembers that `cluster`'s MC swm is at `swm` (so that a restarted hub
  /// still removes through it).
  absl::Status SaveSwmEndpoint(const std::string& cluster, const std::string& swm);
  /// The MC swm endpoint last saved for `cluster`, or nullopt.
  absl::StatusOr<std::optional<std::string>> SwmEndpoint(const std::string& cluster) const;
  /// Remembers that `cluster`'s checkpointer is at `checkpointer` (so that a
  /// restarted hub follows the state moves it started there).
  absl::Status SaveCheckpointerEndpoint(const std::string& cluster,
                                        const std::string& checkpointer);
  /// The checkpointer endpoint last saved for `cluster`, or nullopt.
  absl::StatusOr<std::optional<std::string>> CheckpointerEndpoint(
      const std::string& cluster) const;

  /// The plans-family key of (application, revision).
  static std::string PlanKey(const std::string& application, int64_t revision);
  /// The operations-family key of migration `id` ("<application>/<number>").
  static std::string MigrationKey(const std::string& id);

 private:
  // The endpoint remembered under operations-family `key`, or nullopt.
  absl::StatusOr<std::optional<std::string>> Remembered(const std::string& key) const;
  // Writes the a/ index from one scan of every plan, then its marker.
  absl::Status BuildLiveIndex() const;
  // Adds Save's writes (plan with its a/ entry, operation, request index) to `batch`.
  static void AddSave(const codeco::swm::v1::AssignmentPlan* plan,
                      const codeco::common::v1::Operation& operation,
                      const std::string& request_id, KvWriteBatch& batch);
  KvStore& kv_;
  std::function<void()> on_save_;
};

}  // namespace codeco::swm
