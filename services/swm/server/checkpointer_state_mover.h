#pragma once
// The hub SWM's StateMover over gRPC: a stateful migration's state goes
// through the source cluster's checkpointer (codeco.checkpointer.v1.
// CheckpointerService/MigrateContainer with restore_into_existing: the
// target pod exists, committed empty by the migration). The checkpointer of
// a cluster is the neighborhood's endpoints["checkpointer"] (each MC's agent
// advertises it); endpoints are remembered in the PlanStore so a restarted
// hub still follows the moves it started.

#include <memory>
#include <string>

#include "absl/time/time.h"
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
  absl::StatusOr<StateMoveProgress> Await(const std::string& source_cluster, const std::string& id,
                                          absl::Time deadline) override;

 private:
  // The checkpointer of `cluster`: `given` (remembered before any call to
  // it), else the one remembered; FAILED_PRECONDITION when none is known.
  absl::StatusOr<std::string> EndpointOf(const std::string& cluster, const std::string& given);

  PeerChannels& channels_;
  PlanStore& plans_;
  CheckpointerStateMoverOptions options_;
};

}  // namespace codeco::swm
