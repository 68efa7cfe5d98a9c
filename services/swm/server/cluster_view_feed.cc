#include "swm/server/cluster_view_feed.h"

#include <algorithm>
#include <utility>

#include "codeco/common/backoff.h"
#include "codeco/common/logging.h"
#include "google/protobuf/util/message_differencer.h"
#include "swm/server/remote_cluster.h"

namespace codeco::swm {

namespace pb = codeco::swm::v1;

namespace {

bool SameNodes(const std::vector<pb::ClusterNode>& a, const std::vector<pb::ClusterNode>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!google::protobuf::util::MessageDifferencer::Equals(a[i], b[i])) return false;
  }
  return true;
}

}  // namespace

ClusterViewFeed::ClusterViewFeed(ClusterReservations& reservations, const Clock& clock,
                                 ClusterViewFeedOptions options)
    : reservations_(reservations),
      options_(options),
      incarnation_(absl::ToUnixNanos(clock.Now())),
      rng_(static_cast<uint64_t>(incarnation_) ^ reinterpret_cast<uintptr_t>(this)),
      thread_([this] { Loop(); }) {}

ClusterViewFeed::~ClusterViewFeed() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

pb::ViewVersion ClusterViewFeed::Changed() {
  absl::MutexLock lock(&mu_);
  pb::ViewVersion version;
  version.set_incarnation(incarnation_);
  version.set_revision(++wanted_);
  return version;
}

pb::ViewVersion ClusterViewFeed::Version() {
  absl::MutexLock lock(&mu_);
  pb::ViewVersion version;
  version.set_incarnation(incarnation_);
  version.set_revision(wanted_);
  return version;
}

std::shared_ptr<const ClusterViewSnapshot> ClusterViewFeed::Current() {
  absl::MutexLock lock(&mu_);
  return current_;
}

int ClusterViewFeed::Subscribe(std::function<void()> notify) {
  return subscribers_.Add(std::move(notify));
}

void ClusterViewFeed::Unsubscribe(int handle) { subscribers_.Remove(handle); }

void ClusterViewFeed::Loop() {
  absl::Duration wait = absl::ZeroDuration();
  while (true) {
    int64_t target = 0;
    {
      absl::MutexLock lock(&mu_);
      auto due = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || wanted_ > published_;
      };
      // Real time: a server-side thread's pacing, not a decision of the core.
      mu_.AwaitWithTimeout(absl::Condition(&due), wait);
      if (stopping_) return;
      target = wanted_;
    }
    // Read after every change up to `target` is visible: this view counts them.
    absl::StatusOr<std::vector<Node>> nodes = reservations_.NodesWithHolds();
    if (!nodes.ok()) {
      log::Warn("cannot compute the cluster view",
                {{"error", std::string(nodes.status().message())}});
      // Paced even while changes wait, so an LMS that does not answer is
      // not asked in a loop.
      absl::MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      mu_.AwaitWithTimeout(absl::Condition(&stopping), options_.retry_after);
      wait = absl::ZeroDuration();
      continue;
    }
    std::sort(nodes->begin(), nodes->end(),
              [](const Node& a, const Node& b) { return a.name < b.name; });
    auto snapshot = std::make_shared<ClusterViewSnapshot>();
    snapshot->version.set_incarnation(incarnation_);
    for (const Node& n : *nodes) snapshot->nodes.push_back(ToClusterNode(n));
    bool publish = false;
    {
      absl::MutexLock lock(&mu_);
      if (target > published_) {
        publish = true;
      } else if (current_ == nullptr || !SameNodes(current_->nodes, snapshot->nodes)) {
        // Changed by others (the LMS): a new revision, unless a change of
        // our own came in meanwhile (the next round publishes that one).
        if (wanted_ == target) {
          target = ++wanted_;
          publish = true;
        }
      }
      if (publish) {
        snapshot->version.set_revision(target);
        published_ = target;
        current_ = std::move(snapshot);
      }
      wait = wanted_ > published_ ? absl::ZeroDuration() : NextResync();
    }
    if (publish) subscribers_.Notify();
  }
}

absl::Duration ClusterViewFeed::NextResync() {
  // The first resync comes after a random share of the interval, the next
  // ones after (1 - resync_jitter..1) of it: the feeds of many clusters
  // started together (a federation brought up at once, or 100 in one
  // process) do not read their LMSs at the same moment every interval.
  const double jitter = first_resync_ ? 1.0 : std::clamp(options_.resync_jitter, 0.0, 1.0);
  first_resync_ = false;
  const double unit = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  return BackoffDelay({.initial = options_.resync_interval,
                       .max = options_.resync_interval,
                       .multiplier = 1.0,
                       .jitter = jitter},
                      /*retry=*/1, unit);
}

}  // namespace codeco::swm
