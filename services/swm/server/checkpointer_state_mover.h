#pragma once
// The hub SWM's StateMover over gRPC: a stateful migration's state goes
// through the source cluster's checkpointer (codeco.checkpointer.v1.
// CheckpointerService/MigrateContainer with restore_into_existing: the
// target pod exists, committed empty by the migration), or, restoring a
// backup, through the target cluster's (RestoreCheckpoint). Backups are
// CreateCheckpoint without stopping the pod, deleted with DeleteCheckpoint
// (delete_image). The checkpointer of
// a cluster is the neighborhood's endpoints["checkpointer"] (each MC's agent
// advertises it); endpoints are remembered in the PlanStore so a restarted
// hub still follows the moves it started.

#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "codeco/common/v1/operation.pb.h"
#include "codeco/common/peer_channels.h"
#include "swm/core/state_mover.h"
#include "swm/server/plan_store.h"

namespace codeco::swm {

/// Settings of the CheckpointerStateMover.
struct CheckpointerStateMoverOptions {
  /// Deadline of MigrateContainer and of each read of an operation. Default: 10 s.
  absl::Duration call_timeout = absl::Seconds(10);
};

/// Moves state through the checkpointers of the member clusters. Thread-safe.
class CheckpointerStateMover final : public StateMover {
 public:
  /// Reaches checkpointers through `channels`; remembers their endpoints in
  /// `plans`. Both must outlive the mover.
  CheckpointerStateMover(PeerChannels& channels, PlanStore& plans,
                         CheckpointerStateMoverOptions options = {});

  absl::StatusOr<std::string> Start(const StateMove& move, absl::Time deadline) override;
  /// Follows the operation with WatchOperation until it is done or
  /// `deadline` passes.
  absl::StatusOr<StateMoveProgress> Await(const std::string& cluster, const std::string& id,
                                          absl::Time deadline) override;
  absl::StatusOr<std::string> StartBackup(const StateBackupRequest& backup,
                                          absl::Time deadline) override;
  /// As Await; the checkpoint comes from the operation's result.
  absl::StatusOr<StateBackupProgress> AwaitBackup(const std::string& cluster,
                                                  const std::string& id,
                                                  absl::Time deadline) override;
  absl::Status DeleteBackup(const std::string& cluster, const std::string& checkpoint_id,
                            absl::Time deadline) override;

 private:
  // The checkpointer of `cluster`: `given` (remembered before any call to
  // it), else the one remembered; FAILED_PRECONDITION when none is known.
  absl::StatusOr<std::string> EndpointOf(const std::string& cluster, const std::string& given);
  // Operation `id` of `cluster`'s checkpointer, followed (WatchOperation)
  // until done or `deadline`: the last state seen (nullopt: none yet).
  absl::StatusOr<std::optional<codeco::common::v1::Operation>> Watch(const std::string& cluster,
                                                                    const std::string& id,
                                                                    absl::Time deadline);

  PeerChannels& channels_;
  PlanStore& plans_;
  CheckpointerStateMoverOptions options_;
};

}  // namespace codeco::swm
