#pragma once
// MigrationGovernor: what keeps runtime adaptation from thrashing. Triggers
// (a node or cluster that fails, a node that runs hot, a much better
// placement, a failed place that is back) propose moves; the governor says
// which may go ahead. Pure logic under an injected clock; its caller is the
// loop that observes the federation (CODEF's simulate mode today) and
// carries the moves out.
//
// The rules:
//   - Grace periods: a condition counts only once it has held for its grace
//     (`failure_grace` for an unhealthy node or cluster, `overload_grace`
//     for a hot one): a blip shorter than that moves nothing.
//   - Hysteresis: a subject turns overloaded at `overload_high` of its CPU
//     and stops being so only below `overload_low`.
//   - Minimum gain: a move for load or a better placement must gain at
//     least `min_gain` score points (0-100).
//   - Cooldown: a workload moved for load, placement, failback or a
//     channel out of QoS is not moved again for those reasons within
//     `cooldown`.
//   - Budget: at most `budget` such moves in any `budget_interval`.
//   - Failures bypass gain, cooldown and budget: a workload on a failed
//     place must move; that forced move starts no cooldown, so the way
//     home is open once the place has recovered.
//   - Failback: once a subject that failed has been healthy again for
//     `failback_grace`, Recovered() reports it (once), and the caller
//     proposes the moves home (kFailback, under cooldown and budget).

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "codeco/common/clock.h"

namespace codeco::swm {

/// Why a move is proposed.
enum class MoveTrigger {
  kFailure,          ///< Its node or cluster failed.
  kOverload,         ///< Its node runs hot.
  kBetterPlacement,  ///< A much better placement is available.
  kFailback,         ///< Back to where its policy prefers, after a recovery.
  /// A channel of it is out of QoS (past the channel's own grace): no
  /// minimum gain (its bound is broken now), under cooldown and budget.
  kLinkFailure,
  /// Its node is forecast to breach (PDLC's BREACH_AHEAD advisory, held
  /// for overload_grace): no minimum gain (the forecast is the reason),
  /// under cooldown and budget.
  kForecastBreach,
};

/// "failure", "overload", "better-placement", "failback", "link-failure",
/// "forecast-breach".
std::string MoveTriggerName(MoveTrigger trigger);

/// Settings of the governor.
struct MigrationGovernorOptions {
  /// How long a subject must stay unhealthy before it counts as failed. Default 60 s.
  absl::Duration failure_grace = absl::Seconds(60);
  /// How long a subject must stay above overload_high before it counts as
  /// overloaded. Default 3 min.
  absl::Duration overload_grace = absl::Minutes(3);
  /// CPU share at which a subject turns overloaded. Default 0.9.
  double overload_high = 0.9;
  /// CPU share below which it stops being overloaded. Default 0.7.
  double overload_low = 0.7;
  /// Least score gain (0-100) of a move for load or placement. Default 10.
  double min_gain = 10;
  /// How long a moved workload is left alone (failures excepted). Default 1 h.
  absl::Duration cooldown = absl::Hours(1);
  /// Most moves (failures excepted) in any budget_interval. Default 10.
  int budget = 10;
  /// The budget's window. Default 10 min.
  absl::Duration budget_interval = absl::Minutes(10);
  /// How long a failed subject must be healthy again before failback. Default 5 min.
  absl::Duration failback_grace = absl::Minutes(5);
};

/// Checks `options`; INVALID_ARGUMENT naming the field ("adaptation.<field>").
absl::Status ValidateMigrationGovernorOptions(const MigrationGovernorOptions& options);

/// A proposed move.
struct MoveProposal {
  std::string workload;                         ///< Which workload.
  MoveTrigger trigger = MoveTrigger::kOverload;  ///< Why.
  double gain = 0;                              ///< Expected score gain, 0-100.
};

/// The anti-oscillation rules of runtime adaptation (see the file comment).
/// Subjects are free-form names ("cluster" or "cluster/node"). Not thread-safe.
class MigrationGovernor {
 public:
  /// `options` must pass ValidateMigrationGovernorOptions. Reads time from `clock` only.
  MigrationGovernor(const Clock& clock, MigrationGovernorOptions options);

  /// Records whether `subject` is healthy now.
  void ObserveHealth(const std::string& subject, bool healthy);
  /// Takes `subject` as failed before this governor started (a restarted
  /// hub's evacuations): once it has been seen healthy for failback_grace,
  /// Recovered() reports it. Failed() stays false until it is seen
  /// unhealthy for failure_grace again.
  void RestoreFailed(const std::string& subject);
  /// Records `subject`'s CPU share now (0-1, may exceed 1).
  void ObserveUtilization(const std::string& subject, double share);

  /// True once `subject` has been unhealthy for failure_grace (until it is
  /// healthy again).
  bool Failed(const std::string& subject) const;
  /// True once `subject` has been above overload_high for overload_grace,
  /// until it falls below overload_low.
  bool Overloaded(const std::string& subject) const;
  /// Subjects that had failed and have now been healthy for failback_grace;
  /// each is reported once per recovery.
  std::vector<std::string> Recovered();

  /// OK when `move` may go ahead, and then it is recorded; otherwise
  /// FAILED_PRECONDITION saying which rule holds it back (gain, cooldown,
  /// budget).
  absl::Status Admit(const MoveProposal& move);
  /// What Admit would answer now, recording nothing: for a move that may
  /// not happen (a pull back into clusters that may still be full), checked
  /// first and recorded with Record only once it happened.
  absl::Status Allows(const MoveProposal& move);
  /// Records `move` as done (cooldown and budget), as Admit does.
  void Record(const MoveProposal& move);

  /// Moves admitted so far.
  int64_t admitted() const { return admitted_; }

 private:
  struct Health {
    std::optional<absl::Time> unhealthy_since;
    std::optional<absl::Time> healthy_since;
    bool failed = false;  // confirmed failure not yet recovered
  };
  struct Load {
    std::optional<absl::Time> high_since;
    bool overloaded = false;
  };

  const Clock& clock_;
  MigrationGovernorOptions options_;
  std::map<std::string, Health> health_;
  std::map<std::string, Load> load_;
  std::map<std::string, absl::Time> last_move_;
  std::deque<absl::Time> budget_used_;
  int64_t admitted_ = 0;
};

}  // namespace codeco::swm
