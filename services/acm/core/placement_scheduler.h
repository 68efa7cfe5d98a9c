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
//
// Every request carries a request_id that is stable for what it asks
// (PlacementRequestId, ReleaseRequestId), so one resent after an ACM restart
// or a lost answer is answered by the scheduler from the first, not done twice.

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
  /// `neighborhood`, under idempotency key `request_id`. Returns once the
  /// request is accepted, not placed.
  virtual absl::Status RequestPlacement(const v1::Application& application,
                                        const v1::Neighborhood& neighborhood,
                                        const std::string& request_id) = 0;
  /// The application is being deleted: release its reservations and remove
  /// its pods. Returns once the request is accepted; the outcome comes later
  /// through ApplicationManager::RecordRelease. Idempotent: asking again for
  /// an application already released (or never placed) succeeds.
  /// `request_id` is the idempotency key of this release.
  virtual absl::Status ReleasePlacement(const std::string& application,
                                        const std::string& request_id) = 0;
  /// A pod of job `workload` (a replica slot) of `application` ended and the
  /// job needs another: a new pod is to take the slot (SWM's
  /// MigrateWorkload, reason JOB_NEXT_POD). Returns once the request is
  /// accepted; the new pod shows in the placements SWM reports
  /// (ApplicationManager::RecordMove). `request_id` is its idempotency key.
  virtual absl::Status RunNextJobPod(const std::string& application, const std::string& workload,
                                     const std::string& request_id) = 0;
};

/// The idempotency key of running the next pod in place of ended pod `pod`
/// of `application`.
std::string NextJobPodRequestId(const v1::Application& application, const std::string& pod);

/// The idempotency key of placing `application` as it stands: its uid, spec
/// revision and the plan revision it is placed from (a move off a cluster
/// places the same spec again, from a newer plan).
std::string PlacementRequestId(const v1::Application& application);
/// The idempotency key of releasing `application` for the delete operation
/// in its status.operation_id.
std::string ReleaseRequestId(const v1::Application& application);
/// True for the scheduler errors worth retrying (UNAVAILABLE,
/// DEADLINE_EXCEEDED, ABORTED, RESOURCE_EXHAUSTED, INTERNAL, CANCELLED,
/// UNKNOWN): the scheduler could not answer, which says nothing about the
/// application. Any other code is the scheduler's answer.
bool IsTransientSchedulerError(const absl::Status& status);

/// Where a scheduler reports the outcome of a release: application name and
/// OK once its pods are gone, else why not yet (the scheduler retries).
using ReleaseSink = std::function<void(const std::string&, const absl::Status&)>;

/// A PlacementScheduler that only records what it was asked. Thread-safe.
class InMemoryPlacementScheduler final : public PlacementScheduler {
 public:
  absl::Status RequestPlacement(const v1::Application& application,
                                const v1::Neighborhood& neighborhood,
                                const std::string& request_id) override;
  absl::Status ReleasePlacement(const std::string& application,
                                const std::string& request_id) override;
  absl::Status RunNextJobPod(const std::string& application, const std::string& workload,
                             const std::string& request_id) override;

  /// Each RunNextJobPod, "application/workload", in order.
  std::vector<std::string> next_job_pods() const;
  /// The request_id of each placement request, in order.
  std::vector<std::string> request_ids() const;
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
  std::vector<std::string> request_ids_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::Neighborhood> neighborhoods_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> releases_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> next_job_pods_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

}  // namespace codeco::acm
