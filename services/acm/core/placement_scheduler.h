#pragma once
// The port through which ACM asks the hub scheduler (SWM) for a placement.
// Asking is asynchronous: the scheduler answers later through
// ApplicationManager::RecordPlacement, and until then the application stays
// PENDING. SWM's gRPC client implements it once the scheduler lands; the
// in-memory one below records the requests (tests, and a hub with no
// scheduler wired yet, whose applications then honestly stay PENDING).

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
  /// The application is gone: release its reservations and remove its pods.
  virtual absl::Status ReleasePlacement(const std::string& application) = 0;
};

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

 private:
  mutable absl::Mutex mu_;
  std::vector<v1::Application> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::Neighborhood> neighborhoods_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> releases_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

}  // namespace codeco::acm
