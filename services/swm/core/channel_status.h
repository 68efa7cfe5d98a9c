#pragma once
// The status of every placed application's channels, following CODECO's
// channel lifecycle from the plan and from NetMA's measurements of the
// channels' virtual links:
//
//   plan RESERVING / COMMITTING        -> REVIEWED (intra-cluster) or IMPLEMENTING
//   plan DONE, channel inside a cluster -> RUNNING (no virtual link needed)
//   plan DONE, bound not met by plan    -> REJECTED
//   virtual link not seen / PENDING     -> IMPLEMENTING
//   virtual link ESTABLISHING           -> IMPLEMENTED (rules installed, not measured)
//   virtual link UP                     -> RUNNING
//   virtual link DEGRADED               -> RUNNING while the path has been out of
//                                          bounds for less than the grace period,
//                                          then OOQOS
//   virtual link FAILED                 -> OOQOS (the path is down)
//   plan FAILED / ROLLED_BACK           -> REJECTED
//   application removed                 -> DELETED
//
// A channel keeps its reported status (message, delay) while its phase holds
// and its measured delay moves by less than a fifth (at least 1 ms), so
// watchers hear of phase changes and real drifts, not of every probe.
// Entering OOQOS raises a ChannelTrigger (reason LINK_FAILURE) that the
// adaptation loop consumes. Each application's state also says where its
// DONE plan runs its workloads (applications without channels are tracked
// for that alone), so a watcher follows the plan revisions a migration
// writes. Pure logic: plans and links come in, time is passed in.
// Thread-safe.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/acm/v1/application.pb.h"
#include "codeco/netma/v1/topology.pb.h"
#include "codeco/swm/v1/plan.pb.h"
#include "codeco/swm/v1/swm_service.pb.h"
#include "swm/core/execution.h"

namespace codeco::swm {

/// The value of VirtualLink.managed_by for the links SWM sets up.
inline constexpr char kSwmManagedBy[] = "swm";

/// The NetMA virtual link `spec` asks for (pre-created, managed by SWM).
codeco::netma::v1::VirtualLink VirtualLinkFor(const VirtualLinkSpec& spec);

/// Settings of the ChannelTracker.
struct ChannelTrackerOptions {
  /// How long a virtual link must be measured out of bounds (from its
  /// out_of_bounds_since to its newest probe) before its channel is OOQOS.
  /// Default 4 s: two probes in a row at NetMA's default 5 s interval, so a
  /// single slow probe moves nothing.
  absl::Duration grace = absl::Seconds(4);
  /// Removed applications remembered (so a watcher that reconnects learns
  /// their channels were DELETED); the oldest go first. Default 10000.
  size_t max_removed = 10000;
  /// Triggers kept per application for watchers that fell behind. Default 16.
  size_t max_triggers = 16;
};

/// A channel out of QoS now.
struct OutOfQosChannel {
  std::string application;    ///< Its application.
  std::string channel;        ///< Channel name.
  int64_t plan_revision = 0;  ///< The plan it was measured under.
  std::string why;            ///< In words (the measurement against the bound).
};

/// Channels per application, with changes numbered for watchers.
class ChannelTracker {
 public:
  explicit ChannelTracker(ChannelTrackerOptions options = {});

  /// Takes `plan` as the newest plan of its application (a placement, a
  /// migration's, a failed or rolled-back one, or a removal). Returns true
  /// if the application's channels or placements changed.
  bool SetPlan(const codeco::swm::v1::AssignmentPlan& plan, absl::Time now);

  /// Folds in every virtual link NetMA holds (links not listed count as not
  /// set up). Returns the number of applications whose channels changed.
  int ApplyLinks(const std::vector<codeco::netma::v1::VirtualLink>& links, absl::Time now);

  /// Applications whose channels changed after `sequence` (every one known
  /// with 0), only `application` when not empty, each with the triggers
  /// raised after `sequence`; by application name.
  std::vector<codeco::swm::v1::ApplicationChannels> ChangesAfter(
      int64_t sequence, const std::string& application) const;

  /// Every channel OOQOS now, by application name.
  std::vector<OutOfQosChannel> OutOfQos() const;

  /// The number of the newest change (0 before any).
  int64_t sequence() const;

  /// Channels per phase over the applications that hold a plan.
  std::map<codeco::acm::v1::ChannelPhase, int> CountByPhase() const;

  /// Triggers raised so far in all.
  int64_t triggers_raised() const;

  /// True when some channel has a virtual link to follow (NetMA is worth asking).
  bool FollowsLinks() const;

 private:
  struct Entry {
    // id, revisions, phase, error, channels and the targets' places only
    codeco::swm::v1::AssignmentPlan plan;
    codeco::swm::v1::ApplicationChannels state;
    std::vector<codeco::swm::v1::ChannelTrigger> triggers;  // newest last, with sequence in raise
    std::vector<int64_t> trigger_sequences;
    bool removed = false;
  };
  // Recomputes `entry`'s channels from its plan and links_; bumps the
  // sequence and records triggers when they changed.
  bool RecomputeLocked(Entry& entry, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetRemovedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ChannelTrackerOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, codeco::netma::v1::VirtualLink> links_ ABSL_GUARDED_BY(mu_);  // by id
  int64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t triggers_raised_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace codeco::swm
