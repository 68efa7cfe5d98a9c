#pragma once
// The port through which a migration moves a stateful workload's state: the
// source cluster's checkpointer reads the state of the pod the workload
// leaves (fencing its writes), has it loaded into the pod the migration
// created empty at the target, verifies it and retires the source
// (docs/checkpointer.md). SWM drives it between committing the target pod
// and writing the new plan (PlacementService::Migrate); the gRPC side is
// server/checkpointer_state_mover.h.

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

  /// Follows operation `id` of `source_cluster`'s checkpointer until it is
  /// done or `deadline` passes (then answered not done).
  virtual absl::StatusOr<StateMoveProgress> Await(const std::string& source_cluster,
                                                  const std::string& id,
                                                  absl::Time deadline) = 0;
};

}  // namespace codeco::swm
