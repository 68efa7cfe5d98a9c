#pragma once
// The port through which ACM asks the hub scheduler (SWM) for a placement
// and for the release of a deleted application's pods. Both are
// asynchronous: the scheduler answers later through
// ApplicationManager::RecordPlacement and ApplicationManager::RecordRelease;
// until then the application stays PENDING, or DELETING. SWM's gRPC client
// implements it (server/swm_placement_scheduler); the in-memory one below
// records the requests (tests, and a hub with no scheduler wired, whose
// applications then honestly stay PENDING and whose releases, having no pods
// to remove, complete at once).

#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "codeco/acm/v1/application.pb.h"
#include "codeco/acm/v1/cluster.pb.h"

namespace codeco::acm {

/// Asks for placements and releases them.
class PlacementScheduler {
 public:
  virtual ~PlacementScheduler() = default;
  /// Asks for a placement of `application` at its spec_revision within
  /// `neighborhood`. Returns once the request is accepted, not placed.
  virtual absl::Status RequestPlacement(const v1::Application& application,
                                        const v1::Neighborhood& neighborhood) = 0;
  /// The application is being deleted: release its reservations and remove
  /// its pods. Returns once the request is accepted; the outcome comes later
  /// through ApplicationManager::RecordRelease. Idempotent: asking again for
  /// an application already released (or never placed) succeeds.
  virtual absl::Status ReleasePlacement(const std::string& application) = 0;
};

/// Where a scheduler reports the outcome of a release: application name and
/// OK once its pods are gone, else why not yet (the scheduler retries).
using ReleaseSink = std::function<void(const std::string&, const absl::Status&)>;

/// A PlacementScheduler that only records what it was asked. Thread-safe.
class InMemoryPlacementScheduler final : public PlacementScheduler {
 public:
  absl::Status RequestPlacement(const v1::Application& application,
                                const v1::Neighborhood& neighborhood) override;
  absl::Status ReleasePlacement(const std::string& application) override;

  /// Applications asked for, in order.
  std::vector<v1::Application> requests() const;
  /// The neighborhood of each request, in order.
  std::vector<v1::Neighborhood> neighborhoods() const;
  /// Applications released, in order.
  std::vector<std::string> releases() const;
  /// Makes every later call fail with `status` (OK to succeed again).
  void SetFailure(absl::Status status);
  /// When set, each accepted release is reported to `sink` at once, as done
  /// (nothing was placed, so nothing is left to remove). Call before use.
  void CompleteReleasesWith(ReleaseSink sink);

 private:
  ReleaseSink release_sink_;
  mutable absl::Mutex mu_;
  std::vector<v1::Application> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::Neighborhood> neighborhoods_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> releases_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

}  // namespace codeco::acm
