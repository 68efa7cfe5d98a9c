#pragma once
// The MC swm's cluster view as it changes (what WatchClusterView streams):
// the LMS's nodes with what the reservation ledger holds added
// (ClusterReservations::NodesWithHolds), computed again after every change
// the MC makes (Changed(), called after each Reserve, Commit and Release)
// and every `resync_interval` (pods and nodes changed by others on the LMS).
// Each view carries a ViewVersion: the incarnation (this run's start) and a
// revision that grows with every change, so that a caller told "your Reserve
// is in views of version >= V" knows when a watched copy counts it.
//
// One thread computes the views; subscribers are told (from that thread)
// when a new one is published and read it with Current().

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/common/clock.h"
#include "codeco/common/listeners.h"
#include "codeco/swm/v1/swm_service.pb.h"
#include "swm/server/cluster_reservations.h"

namespace codeco::swm {

/// Settings of a ClusterViewFeed.
struct ClusterViewFeedOptions {
  /// How often the view is computed again without a change of its own (to
  /// see pods and nodes others changed on the LMS). Default: 1 s.
  absl::Duration resync_interval = absl::Seconds(1);
  /// Share of resync_interval a resync may come early, drawn at random each
  /// time (0..1), so that many clusters' feeds spread out. Default: 0.2.
  double resync_jitter = 0.2;
  /// Wait before computing again after a failed read of the LMS. Default: 200 ms.
  absl::Duration retry_after = absl::Milliseconds(200);
};

/// One published view.
struct ClusterViewSnapshot {
  codeco::swm::v1::ViewVersion version;              ///< Its version.
  std::vector<codeco::swm::v1::ClusterNode> nodes;  ///< Nodes, by name.
};

/// The MC's view, kept current. Thread-safe.
class ClusterViewFeed {
 public:
  /// Reads the view from `reservations`; `clock` gives the incarnation (both
  /// must outlive the feed). Starts the thread that computes views.
  ClusterViewFeed(ClusterReservations& reservations, const Clock& clock,
                  ClusterViewFeedOptions options = {});
  /// Stops the thread.
  ~ClusterViewFeed();
  ClusterViewFeed(const ClusterViewFeed&) = delete;
  ClusterViewFeed& operator=(const ClusterViewFeed&) = delete;

  /// Records a change made by the caller (call it after the change is
  /// visible to NodesWithHolds) and answers the version from which views
  /// count it.
  codeco::swm::v1::ViewVersion Changed();
  /// The version of the changes recorded so far: a view read from now on
  /// counts them all.
  codeco::swm::v1::ViewVersion Version();
  /// The newest published view; null until the first is computed.
  std::shared_ptr<const ClusterViewSnapshot> Current();
  /// Calls `notify` (on the feed's thread, without the feed's lock) after
  /// each published view; answers a handle for Unsubscribe.
  int Subscribe(std::function<void()> notify);
  /// Stops the calls to a subscriber; once it returns none is running.
  void Unsubscribe(int handle);

 private:
  void Loop();
  // The wait before the next resync (the feed's thread only).
  absl::Duration NextResync();

  ClusterReservations& reservations_;
  ClusterViewFeedOptions options_;
  const int64_t incarnation_;

  absl::Mutex mu_;
  int64_t wanted_ ABSL_GUARDED_BY(mu_) = 1;     // newest revision asked for
  int64_t published_ ABSL_GUARDED_BY(mu_) = 0;  // revision of current_
  std::shared_ptr<const ClusterViewSnapshot> current_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  Listeners subscribers_;

  // Resync pacing, used by the feed's thread only.
  std::mt19937_64 rng_;
  bool first_resync_ = true;

  std::thread thread_;
};

}  // namespace codeco::swm
