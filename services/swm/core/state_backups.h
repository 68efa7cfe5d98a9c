#pragma once
// The hub's backups of stateful workloads. A live move reads the state of
// the pod a workload leaves; a node or cluster that failed cannot be read,
// and CODEF (like a real node that lost power) loses the process's memory
// with it. So every swm.state_backup_interval the hub has each stateful
// workload's cluster checkpointer take a checkpoint of its running pod and
// push it to the registry (StateMover::StartBackup; the pod serves on, its
// writes paused only for the fence). A migration off a failed node or
// cluster restores the newest backup into the pod it creates
// (PlacementService::Migrate): the state is the backup's, verified by its
// digest, and the writes acknowledged after its take_time are lost — at
// most one interval plus the time a backup takes.
//
// The records (swm.v1.StateBackupRecord) live in the PlanRepository, so a
// restarted hub follows the backups it started and deletes the ones it
// replaced. One backup per workload is kept: a newer one retires the older
// (its checkpoint and image are deleted), and the backups of a removed
// application go with it.

#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "codeco/common/clock.h"
#include "codeco/swm/v1/plan.pb.h"
#include "swm/core/placement_service.h"
#include "swm/core/state_mover.h"

namespace codeco::swm {

/// Settings of the StateBackupScheduler.
struct StateBackupOptions {
  /// Time from one backup attempt of a workload to the next. Default 30 s.
  absl::Duration interval = absl::Seconds(30);
  /// How long one pass waits for each backup it started or follows before
  /// leaving it to the next pass (a pass also ends by its deadline; it
  /// visits the workloads attempted longest ago first, so the ones it did
  /// not reach come first in the next). Default 1 s.
  absl::Duration await = absl::Seconds(1);
  /// A backup still not done after this long is given up (its checkpointer
  /// may be gone) and the next one started. Default 10 min.
  absl::Duration pending_timeout = absl::Minutes(10);
};

/// A stateful workload placed now: what a pass backs up.
struct BackupSubject {
  std::string application;
  std::string workload;
  /// Where it runs: cluster, node and pod.
  codeco::swm::v1::WorkloadTarget placed;
  /// Its cluster's checkpointer, host:port ("" = the one last used).
  std::string checkpointer;
};

/// What one pass did, for logs and tests; entries are "<application>/<workload>"
/// (deleted: "<cluster>:<checkpoint id>"), failures with the reason after ": ".
struct StateBackupPass {
  std::vector<std::string> started;
  std::vector<std::string> completed;
  std::vector<std::string> failed;
  std::vector<std::string> deleted;
};

/// Takes, follows, retires and deletes state backups. Not thread-safe: one
/// caller (the hub's adaptation tick) runs its passes.
class StateBackupScheduler {
 public:
  /// `clock` times the schedule (take_time, interval); `plans` keeps the
  /// records; `mover` reaches the checkpointers. All must outlive it.
  StateBackupScheduler(const Clock& clock, PlanRepository& plans, StateMover& mover,
                       StateBackupOptions options = {});

  /// One pass over `subjects` (every stateful workload placed now):
  /// finishes the backups under way, starts the ones due, deletes the
  /// retired ones and those of applications no longer placed. Network calls
  /// end by `deadline`.
  StateBackupPass Run(const std::vector<BackupSubject>& subjects, absl::Time deadline);

 private:
  // Follows the pending backup of `record`; true when the record changed.
  bool Follow(codeco::swm::v1::StateBackupRecord& record, absl::Time deadline,
              StateBackupPass& pass);
  // Deletes the retired backups of `record`; true when the record changed.
  bool DeleteRetired(codeco::swm::v1::StateBackupRecord& record, absl::Time deadline,
                     StateBackupPass& pass);

  const Clock& clock_;
  PlanRepository& plans_;
  StateMover& mover_;
  const StateBackupOptions options_;
};

}  // namespace codeco::swm
