#pragma once
// The PlacementScheduler that asks the hub's SWM over gRPC
// (codeco.swm.v1.SwmService/PlaceApplication and ReleaseApplication).
// Requests are queued and sent by `workers` threads, so Apply and Delete
// never wait on the scheduler: several applications' requests are in flight
// at once (SWM overlaps their commits), one application's requests go one
// after the other in arrival order. Each placement answer goes to the
// placement sink (ApplicationManager::RecordPlacement), each release outcome
// to the release sink (ApplicationManager::RecordRelease).
//
// Every call carries the request's request_id, so SWM answers a resent one
// from the first. PlaceApplication is sent in PLACE_MODE_RUNNING: SWM answers
// at once with the running operation and the scheduler follows it with
// WatchOperation to its end, within the same timeout; a watch that ends
// first (SWM restarted, the deadline) is a transient error, and the retry's
// request_id gets the same operation from SWM again (or a new placement when
// that operation ended transiently, e.g. ABORTED by SWM's restart). A placement SWM could not answer (unreachable, deadline)
// goes to the sink as PlacementResult::error; the ApplicationManager retries.
// A release SWM does not confirm (unreachable, deadline, an SWM without the
// RPC yet) is retried with capped exponential backoff with jitter
// (release_retry_min growing up to release_retry_max) until it succeeds or
// the scheduler stops; the application stays DELETING meanwhile, and after a
// restart ApplicationManager::Reconcile queues it again, so no deletion is lost.
// A release supersedes a queued placement of the same application.
//
// Placing an application that was placed before (status.plan_revision > 0:
// a changed spec, or a move off an unregistered or unreachable cluster) asks
// SWM first to scale it in place (PlaceApplication with scale_in_place,
// request_id "<request_id>/in-place"): a change of replica counts adds or
// removes replicas with every other pod left running. When SWM answers
// ALREADY_EXISTS (the spec or the neighborhood changed otherwise) the
// application is released first, then placed: a redeploy, with a gap in
// service.

#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "acm/core/application_manager.h"
#include "acm/core/placement_scheduler.h"
#include "codeco/common/backoff.h"
#include "codeco/swm/v1/swm_service.grpc.pb.h"
#include "grpcpp/channel.h"

namespace codeco::acm {

/// Where SWM answers go: application name, spec revision, result.
using PlacementSink =
    std::function<void(const std::string&, int64_t, const PlacementResult&)>;

/// PlacementScheduler over SWM's gRPC API.
class SwmPlacementScheduler final : public PlacementScheduler {
 public:
  /// Sends to SWM over `channel` from `workers` threads (at least one);
  /// each call gets `timeout`; an unconfirmed release is retried after
  /// `release_retry_min`, doubling up to `release_retry_max`.
  SwmPlacementScheduler(std::shared_ptr<grpc::Channel> channel, absl::Duration timeout,
                        absl::Duration release_retry_min = absl::Seconds(1),
                        absl::Duration release_retry_max = absl::Seconds(30), int workers = 4);
  /// Stops the workers (pending requests are dropped; ACM asks again on the
  /// next apply).
  ~SwmPlacementScheduler() override;

  /// Sets where placement answers go; call once, before the first request.
  void SetSink(PlacementSink sink);
  /// Sets where release outcomes go; call once, before the first request.
  void SetReleaseSink(ReleaseSink sink);
  /// Stops the worker threads; idempotent.
  void Stop();
  /// Makes every release waiting out its retry backoff due now (SWM is
  /// reachable again); returns how many were brought forward.
  int RetryNow();

  absl::Status RequestPlacement(const v1::Application& application,
                                const v1::Neighborhood& neighborhood,
                                const std::string& request_id) override;
  /// Queues SWM ReleaseApplication for `application` (retried until confirmed).
  absl::Status ReleasePlacement(const std::string& application,
                                const std::string& request_id) override;
  /// Queues SWM MigrateWorkload (reason JOB_NEXT_POD) for `workload`; not
  /// retried here: ACM asks again while the job still lacks the pod.
  absl::Status RunNextJobPod(const std::string& application, const std::string& workload,
                             const std::string& request_id) override;

 private:
  // The end of placement operation `first` (answered by PlaceApplication),
  // followed with WatchOperation until `deadline`; UNAVAILABLE or
  // DEADLINE_EXCEEDED (transient) when the watch ends before it is done.
  static absl::StatusOr<common::v1::Operation> Follow(swm::v1::SwmService::Stub& stub,
                                                     const common::v1::Operation& first,
                                                     absl::Time deadline);
  struct Request {
    // False: a placement of `application` (or, with `workload`, the next
    // pod of that job slot of `name`); true: a release of `name`.
    bool release = false;
    v1::Application application;
    v1::Neighborhood neighborhood;
    std::string name;
    std::string workload;
    // Idempotency key sent to SWM.
    std::string request_id;
    // Release retries: when the next attempt is due, and the failures so far.
    absl::Time due = absl::InfinitePast();
    int failures = 0;
  };
  void Loop();
  PlacementResult Place(const Request& request);
  // Sends `place` (PLACE_MODE_RUNNING) and follows its operation to its end
  // within the timeout: the done operation, or the error it (or the call)
  // ended with.
  absl::StatusOr<common::v1::Operation> Call(swm::v1::SwmService::Stub& stub,
                                             const swm::v1::PlaceApplicationRequest& place);
  // What the sink is told for `answer` to `request`.
  PlacementResult ToResult(const Request& request,
                           const absl::StatusOr<common::v1::Operation>& answer);
  absl::Status Release(const std::string& application, const std::string& request_id);
  // Sends MigrateWorkload for the job slot of `request` and logs the outcome.
  void NextJobPod(const Request& request);
  // The name a request is about.
  static const std::string& NameOf(const Request& request);

  std::shared_ptr<grpc::Channel> channel_;
  const absl::Duration timeout_;
  PlacementSink sink_;
  ReleaseSink release_sink_;
  absl::Mutex mu_;
  Backoff release_backoff_ ABSL_GUARDED_BY(mu_);
  // Work in arrival order; a release waiting for its retry stays in place
  // (so it still orders against later requests of the same application).
  std::deque<Request> queue_ ABSL_GUARDED_BY(mu_);
  // Applications a worker is sending a request of now.
  std::set<std::string> in_flight_ ABSL_GUARDED_BY(mu_);
  // Applications this scheduler placed and has not released since (their
  // status may not say so yet when a newer request of theirs is queued).
  std::set<std::string> placed_ ABSL_GUARDED_BY(mu_);
  // Counts what may let a waiting worker take a request (a new or retried
  // request, an application no longer in flight).
  uint64_t changes_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace codeco::acm
