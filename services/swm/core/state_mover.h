#pragma once
// The port through which a migration moves a stateful workload's state: the
// source cluster's checkpointer reads the state of the pod the workload
// leaves (fencing its writes), has it loaded into the pod the migration
// created empty at the target, verifies it and retires the source
// (docs/checkpointer.md). SWM drives it between committing the target pod
// and writing the new plan (PlacementService::Migrate); the gRPC side is
// server/checkpointer_state_mover.h.
//
// The same port keeps backups (StateBackupScheduler): a checkpoint of a
// running pod pushed to the registry, the pod serving on. A move off a node
// or cluster that failed cannot read the source; it restores the newest
// backup into the target pod instead, through the target's checkpointer.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace codeco::swm {

/// One state move: from a running pod into another, already created and
/// empty, possibly in another cluster.
struct StateMove {
  /// Idempotency key: starting the same move again answers the first one's
  /// operation (a restarted hub re-attaches to it this way).
  std::string request_id;
  std::string source_cluster;  ///< Cluster of the pod the workload leaves.
  /// The source cluster's checkpointer, host:port ("" = the one last used
  /// for that cluster).
  std::string source_checkpointer;
  std::string source_node;     ///< Node the source pod runs on.
  std::string source_pod;      ///< The pod the workload leaves.
  std::string target_cluster;  ///< Cluster of the pod the state goes into.
  std::string target_node;     ///< Node of that pod.
  std::string target_pod;      ///< The pod the migration created for it.
  /// Set when the source cannot be read (its node or cluster failed): the
  /// image of the backup to restore into the target pod instead, through
  /// the target cluster's checkpointer; the source is then not touched.
  std::string from_backup;
  /// The target cluster's checkpointer, host:port ("" = the one last used
  /// for that cluster); used with from_backup only.
  std::string target_checkpointer;

  /// The cluster whose checkpointer runs the move: the target's when it
  /// restores a backup, else the source's.
  const std::string& RunsAt() const {
    return from_backup.empty() ? source_cluster : target_cluster;
  }
};

/// A backup to take: a checkpoint of a running pod, pushed to the registry.
struct StateBackupRequest {
  /// Idempotency key (as StateMove::request_id).
  std::string request_id;
  std::string cluster;       ///< The pod's cluster.
  std::string checkpointer;  ///< Its checkpointer, host:port ("" = the one last used).
  std::string node;          ///< The pod's node.
  std::string pod;           ///< The pod.
};

/// Where a backup stands.
struct StateBackupProgress {
  /// True once finished, either way.
  bool done = false;
  /// Once done: OK when the image is in the registry, else why not.
  absl::Status status;
  /// The checkpointer's phase, in words.
  std::string phase;
  /// Once done and OK: the checkpoint's id at its cluster's checkpointer,
  /// its image and the bytes of state in it.
  std::string checkpoint_id;
  std::string image_reference;
  int64_t state_bytes = 0;
};

/// Where a state move stands.
struct StateMoveProgress {
  /// True once finished, either way.
  bool done = false;
  /// Once done: OK when the state is in the target pod, verified, and the
  /// source retired (its pod deleted); otherwise why not — the source then
  /// serves on and the target pod is left to the migration to remove.
  absl::Status status;
  /// The mover's own phase, in words (e.g. "pushing"), for messages.
  std::string phase;
};

/// Port: moves state between pods. Thread-safe.
class StateMover {
 public:
  virtual ~StateMover() = default;

  /// Starts `move` (or finds the one started with its request_id) and
  /// answers its operation id. INVALID_ARGUMENT, FAILED_PRECONDITION or
  /// NOT_FOUND only when the checkpointer refused it (so it never started:
  /// the caller rolls back); any other error (no checkpointer known for the
  /// source cluster, one that does not answer) leaves it unknown.
  virtual absl::StatusOr<std::string> Start(const StateMove& move, absl::Time deadline) = 0;

  /// Follows operation `id` of `cluster`'s checkpointer (the move's
  /// RunsAt()) until it is done or `deadline` passes (then answered not done).
  virtual absl::StatusOr<StateMoveProgress> Await(const std::string& cluster,
                                                  const std::string& id,
                                                  absl::Time deadline) = 0;

  /// Starts taking `backup` (or finds the one started with its request_id)
  /// and answers its operation id; errors as Start's.
  virtual absl::StatusOr<std::string> StartBackup(const StateBackupRequest& backup,
                                                  absl::Time deadline) = 0;

  /// Follows backup operation `id` of `cluster`'s checkpointer until it is
  /// done or `deadline` passes (then answered not done).
  virtual absl::StatusOr<StateBackupProgress> AwaitBackup(const std::string& cluster,
                                                          const std::string& id,
                                                          absl::Time deadline) = 0;

  /// Deletes checkpoint `checkpoint_id` of `cluster`'s checkpointer and its
  /// image; OK when it is gone already.
  virtual absl::Status DeleteBackup(const std::string& cluster, const std::string& checkpoint_id,
                                    absl::Time deadline) = 0;
};

}  // namespace codeco::swm
