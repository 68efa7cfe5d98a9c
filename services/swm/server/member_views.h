#pragma once
// MemberViews: the hub's watched copies of its MC members' cluster views,
// informer-style. For each member with an MC swm, one WatchClusterView
// stream (cluster_view_feed.h on the other end) keeps the newest view;
// a stream that ends is opened again with capped exponential backoff, and
// meanwhile the member counts as not synced (the hub then reads it with
// GetClusterView).
//
// Read-your-writes: each Reserve, Commit and Release answers the ViewVersion
// from which the MC's view counts it; the hub records it here (Saw), and
// Fresh() answers a view only once it is at least that version. So the next
// placement never plans on a view that misses the hub's own reservations.
// Changes others make on the member's LMS reach the copy within the MC's
// resync interval; a plan made before that is caught by the MC's Reserve,
// which re-checks room (the placement is rolled back and retried, never
// overcommitted).

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/swm/v1/swm_service.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "swm/core/model.h"
#include "swm/server/remote_cluster.h"

namespace codeco::swm {

/// Settings of MemberViews.
struct MemberViewsOptions {
  /// Longest wait for a watched view to count the hub's own latest change
  /// before the caller reads the member itself. Default: 500 ms.
  absl::Duration fresh_wait = absl::Milliseconds(500);
  /// Wait before opening a failed stream again; doubles up to retry_max.
  /// Default: 200 ms.
  absl::Duration retry_min = absl::Milliseconds(200);
  /// Longest wait before opening a failed stream again. Default: 5 s.
  absl::Duration retry_max = absl::Seconds(5);
};

/// True when a view of `have` counts every change up to `need`.
bool Covers(const codeco::swm::v1::ViewVersion& have, const codeco::swm::v1::ViewVersion& need);

/// Watched views of the MC members. Thread-safe.
class MemberViews {
 public:
  /// Watches nothing yet.
  explicit MemberViews(MemberViewsOptions options = {});
  /// Ends every stream and joins their threads.
  ~MemberViews();
  MemberViews(const MemberViews&) = delete;
  MemberViews& operator=(const MemberViews&) = delete;

  /// Watches `cluster`'s MC swm at `address` over `channel`; no-op when it
  /// is watched there already, a new stream when its address changed.
  void Watch(const std::string& cluster, const std::string& address,
             std::shared_ptr<grpc::Channel> channel);
  /// Records that a call's effect on `cluster` is in its views from `version` on.
  void Saw(const std::string& cluster, const codeco::swm::v1::ViewVersion& version);
  /// The watched view of `cluster` once its stream is synced and its view
  /// counts everything Saw() recorded, waiting for that until
  /// min(`until`, now + fresh_wait); nullopt when it does not come, at once
  /// when the stream is down (the caller reads the member itself), or when
  /// `cluster` is not watched.
  std::optional<McView> Fresh(const std::string& cluster, absl::Time until);
  /// Whether `cluster`'s stream has delivered a view and is open (tests).
  bool Synced(const std::string& cluster);

 private:
  struct Member {
    std::string cluster;
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    bool synced = false;
    bool down = false;                      // the stream failed and is not back yet
    codeco::swm::v1::ViewVersion version;  // of `view`
    McView view;
    codeco::swm::v1::ViewVersion needed;   // newest version a call's effect is in
    grpc::ClientContext* stream = nullptr;  // the open stream, to cancel it
    bool stop = false;
    std::thread thread;
  };
  // One member's stream, opened again after each failure until stopped.
  void Run(Member* member);
  // Stops `member`'s stream and joins its thread (mu_ not held).
  void Stop(Member& member);

  MemberViewsOptions options_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Member>> members_ ABSL_GUARDED_BY(mu_);
  // Members replaced by a new address, stopped and joined in the destructor.
  std::vector<std::unique_ptr<Member>> retired_ ABSL_GUARDED_BY(mu_);
};

}  // namespace codeco::swm
