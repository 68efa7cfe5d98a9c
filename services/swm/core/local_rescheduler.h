#pragma once
// LocalRescheduler: what a managed cluster's swm decides on its own while the
// hub is out of reach (DESIGN.md, "Hub away"). It keeps track of the hub's
// answers (probes of the hub ACM, and calls the hub makes to this swm) and,
// once the hub has been silent for `hub_away_after`, moves the pods of a node
// that has not been ready for `failure_grace` onto other ready nodes of the
// same cluster. A pod keeps its name and labels, so every constraint the hub
// placed it under (region, country, data locality, latency to its peers and
// origin) still holds: they are all properties of the cluster. Inside the
// cluster the only constraint is room: a pod goes to the ready node with the
// most free CPU share after it lands (largest pods first), and waits, tried
// again every pass, when none has room. A pod that keeps state is held: its
// state backups are recorded at the hub, so a local restart would lose it.
// While the hub answers, nothing is decided here: the hub's AdaptationLoop
// owns failures then.
//
// Pure logic under an injected clock; the MC's SwmClusterServiceImpl probes
// the hub and carries the moves out through its reservation ledger, which
// stores each one as a LocalDecision for the hub to settle on its return.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "codeco/common/clock.h"
#include "swm/core/model.h"

namespace codeco::swm {

/// Settings of a LocalRescheduler.
struct LocalReschedulerOptions {
  /// The hub counts as away once it has not answered for this long.
  /// Default: 15 s.
  absl::Duration hub_away_after = absl::Seconds(15);
  /// A node not ready (or gone) for this long, while the hub is away, has
  /// its pods moved. Default: 30 s.
  absl::Duration failure_grace = absl::Seconds(30);
};

/// INVALID_ARGUMENT naming the field (hub_away_after, failure_grace) when
/// one is not positive.
absl::Status ValidateLocalReschedulerOptions(const LocalReschedulerOptions& options);

/// A pod of one of this cluster's committed reservations, as its ledger holds it.
struct LocalPod {
  std::string reservation;  ///< Reservation the pod belongs to.
  std::string application;  ///< Its application.
  std::string workload;     ///< The workload it runs.
  std::string pod;          ///< Pod name.
  std::string node;         ///< Node it is bound to.
  Resources requests;       ///< What it requests.
  bool stateful = false;    ///< It keeps state (annotation codeco.io/stateful).
};

/// One pod to move, or held where it is, decided by a pass.
struct LocalMove {
  LocalPod pod;         ///< The pod, where it is now.
  std::string to_node;  ///< Node to move it to; empty: held.
  std::string reason;   ///< Why it moves, or why it is held, in words.
};

/// Decides the local moves of one cluster while the hub is away. Not
/// thread-safe: one caller drives it.
class LocalRescheduler {
 public:
  /// The hub counts as seen at construction (a freshly started swm waits
  /// hub_away_after before it acts alone). `clock` must outlive it;
  /// `options` must pass ValidateLocalReschedulerOptions.
  LocalRescheduler(const Clock& clock, LocalReschedulerOptions options);

  /// Records that the hub answered (a probe, or a call it made) now.
  void HubSeen();
  /// True once the hub has not been seen for hub_away_after.
  bool HubAway() const;
  /// When the hub was last seen.
  absl::Time hub_last_seen() const { return hub_last_seen_; }

  /// One pass over the cluster: `nodes` as the LMS shows them now
  /// (schedulable = ready and not cordoned; a node missing is gone) and
  /// `pods` the ledger's committed pods. While the hub is away, answers a
  /// move for every pod whose node has not been ready for failure_grace
  /// (held, with the reason, when it keeps state or no node has room);
  /// answers nothing while the hub is present. Nodes are tracked on every
  /// pass, so the grace of a node that failed before the hub went away
  /// counts from when it failed.
  std::vector<LocalMove> Decide(const std::vector<Node>& nodes, const std::vector<LocalPod>& pods);

 private:
  const Clock& clock_;
  const LocalReschedulerOptions options_;
  absl::Time hub_last_seen_;
  // Node -> when a pass first saw it not ready (or gone).
  std::map<std::string, absl::Time> not_ready_since_;
};

}  // namespace codeco::swm
