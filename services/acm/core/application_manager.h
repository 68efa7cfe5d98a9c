#pragma once
// The application lifecycle of the hub's ACM: apply (create or update, dry
// run, idempotent by request_id), get, list, delete, rollback, the spec
// revision history, the change log watchers read, and the scheduler's answers
// folded into status. Pure logic over two ports (ApplicationStore,
// PlacementScheduler) and a Clock; thread-safe, with writes serialized.
//
// Durable placement intent: the stored application is its own intent. Apply
// commits the new spec revision and the application PENDING at that revision
// in one store write; MoveOffCluster commits it MIGRATING; Delete commits it
// DELETING with its operation id. Until the scheduler's answer is recorded
// the intent stands, and Reconcile (at start, then periodically) asks the
// scheduler again for every PENDING (with a neighborhood), MIGRATING and
// DELETING application that has no request in flight, with the same
// request_id, so an acknowledged apply is placed even if ACM dies right after
// it, and never placed twice.
//
// Retries: a scheduler that cannot answer (IsTransientSchedulerError) never
// fails an application. It stays in its phase with status WARNING and an
// error_msg naming the error and the next attempt time; the next attempt is
// due after a capped exponential backoff with jitter (BackoffPolicy) measured
// on the injected clock. Only the scheduler's definitive answers (unplaced
// workloads, INVALID_ARGUMENT, FAILED_PRECONDITION...) make it FAILED.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "codeco/common/listeners.h"
#include "acm/core/admission.h"
#include "acm/core/application_store.h"
#include "acm/core/cam_parser.h"
#include "acm/core/cluster_report.h"
#include "acm/core/neighborhood_manager.h"
#include "acm/core/placement_scheduler.h"
#include "codeco/acm/v1/acm_service.pb.h"
#include "codeco/common/backoff.h"
#include "codeco/common/clock.h"

namespace codeco::acm {

/// Settings of an ApplicationManager.
struct ApplicationManagerOptions {
  /// Bounds on CAM documents. Default: CamLimits defaults.
  CamLimits cam_limits;
  /// Page size when a List request gives none. Default: 100.
  int default_page_size = 100;
  /// Largest page size honoured. Default: 1000.
  int max_page_size = 1000;
  /// Waits between placement attempts the scheduler could not answer.
  /// Default: 1 s doubling up to 60 s, 20% jitter.
  BackoffPolicy placement_retry{.initial = absl::Seconds(1), .max = absl::Seconds(60)};
  /// Seed of the retry jitter. Default: 1.
  uint64_t retry_seed = 1;
  /// Waits before placing again the replicas a scale could not place (a
  /// DEGRADED application whose replicas found no node): Reconcile asks the
  /// scheduler for the same spec again once a wait is over, so they run
  /// once room frees, with no apply. Default: 30 s doubling up to 5 min,
  /// 20% jitter; `initial` 0 turns it off.
  BackoffPolicy unplaced_retry{.initial = absl::Seconds(30), .max = absl::Minutes(5)};
  /// A request sent with no answer recorded this long is sent again by
  /// Reconcile (the answer was lost, e.g. the scheduler restarted). Default: 5 min.
  absl::Duration answer_timeout = absl::Minutes(5);
  /// A done operation is deleted this long after it last changed, unless an
  /// application still names it in status.operation_id (Reconcile looks at
  /// most once a minute). Default: 7 days.
  absl::Duration operation_retention = absl::Hours(24 * 7);
  /// How long a request_id is remembered: a request repeated with the same
  /// request_id within it gets the first answer, not a second change.
  /// Records past it are deleted (Reconcile looks at most once a minute).
  /// Default: 24 h.
  absl::Duration request_retention = absl::Hours(24);
};

/// The scheduler's answer for one spec revision of an application.
struct PlacementResult {
  /// True if every service was placed; false if placement failed.
  bool placed = false;
  /// Why placement failed (or what is degraded), in words.
  std::string message;
  /// Where each replica runs.
  std::vector<v1::ServicePlacement> placements;
  /// Revision of the scheduler's plan.
  int64_t plan_revision = 0;
  /// Neighborhood the placement was made in.
  std::string neighborhood_id;
  /// "<workload>: <why>" of each replica a scale in place found no node
  /// for (placed stays true: the others run); the application is then
  /// DEGRADED (WARNING) naming them, and placed again after a wait
  /// (ApplicationManagerOptions::unplaced_retry).
  std::vector<std::string> unplaced_replicas;
  /// True when the scheduler scaled the placement in place: a placement
  /// the application already held (same service, cluster, node and pod) is
  /// the same pod, ready as it was. False after a redeploy, where a pod of
  /// the same name is a new one.
  bool in_place = false;
  /// Not OK when the scheduler gave no plan: a transient error
  /// (IsTransientSchedulerError) is retried, any other is its answer and
  /// fails the application. `placed` and `placements` are then unused.
  absl::Status error;
};

/// A consistent view for a watcher: the state at `revision`.
struct ApplicationSnapshot {
  /// Revision of the last commit included.
  int64_t revision = 0;
  /// The applications selected, in name order.
  std::vector<v1::Application> applications;
};

/// What MoveOffCluster does with applications that have nowhere else to go.
enum class StuckApplications {
  /// FAILED_PRECONDITION naming them, and nothing changes (a drain without force).
  kRefuse,
  /// They wait PENDING for a neighborhood (a forced drain).
  kPend,
  /// They stay as they are and only the others move; applications already
  /// MIGRATING are left to finish (re-evaluation after sustained degradation).
  kLeave,
};

/// When `spec` waits for a start time later than `now`
/// (intents.earliest_start_time, set by the carbon admission policy), that
/// time: ACM asks for its placement only from then on.
std::optional<absl::Time> HeldUntil(const v1::ApplicationSpec& spec, absl::Time now);

/// Records that `pod` of `service` failed when that service is a job of
/// `app` (status.jobs; each pod counted once). A job with a failed pod has
/// failed: no pod is retried yet.
void NoteFailedJobPod(v1::Application& app, const std::string& service, const std::string& pod);

/// Rebuilds status.jobs of `app`, one entry per job in spec order, from the
/// entries it had (their failed and succeeded pods stay counted) and the
/// placements whose pod succeeded.
void FoldJobs(v1::Application& app);

/// A job's replica slot whose pod ended.
struct JobSlot {
  std::string workload;  ///< The SWM workload, "<service>-<i>".
  std::string pod;       ///< Its ended pod.
};

/// The slots of `app`'s jobs whose pod ended (succeeded, or failed within
/// the job's backoff_limit) and that the job still needs a new pod in: as
/// many as its completions lack beyond the pods succeeded and running, none
/// for a job that failed.
std::vector<JobSlot> JobPodsToReplace(const v1::Application& app);

/// What ApplicationManager::ReadmitWaiting did.
struct ReadmitOutcome {
  /// Applications whose schedule changed (a new spec revision each).
  std::vector<std::string> changed;
  /// Applications the policies now refuse, "name: reason"; they keep theirs.
  std::vector<std::string> refused;
};

/// The hub's application lifecycle.
class ApplicationManager {
 public:
  /// `store`, `scheduler`, `clock` and `neighborhoods` must outlive the
  /// manager. Without `neighborhoods` the scheduler is asked with an empty one.
  /// With `admission` (which must outlive it too), every applied or rolled
  /// back spec passes its policies first (acm/core/admission.h).
  ApplicationManager(ApplicationStore& store, PlacementScheduler& scheduler, Clock& clock,
                     ApplicationManagerOptions options = {},
                     NeighborhoodProvider* neighborhoods = nullptr,
                     const AdmissionChain* admission = nullptr);

  /// Creates or updates an application from a CAM (YAML or parsed).
  absl::StatusOr<v1::ApplyApplicationResponse> Apply(const v1::ApplyApplicationRequest& request);
  /// The application, with the spec of an older spec revision when asked.
  absl::StatusOr<v1::GetApplicationResponse> Get(const v1::GetApplicationRequest& request) const;
  /// One page of applications, filtered by phase and labels.
  absl::StatusOr<v1::ListApplicationsResponse> List(
      const v1::ListApplicationsRequest& request) const;
  /// Starts removing an application: marks it DELETING (stored, so a restart
  /// carries on) and asks the scheduler to release its pods. The record and
  /// its revisions go once the scheduler reports the release (RecordRelease);
  /// while the scheduler is away the application stays DELETING, saying why.
  /// Deleting a DELETING application asks the scheduler again. With
  /// `codeco_app` set, only the services that CodecoApp declared go (a new
  /// spec revision, placed again); the whole application goes when it was the
  /// last CodecoApp with services.
  absl::StatusOr<v1::DeleteApplicationResponse> Delete(const v1::DeleteApplicationRequest& request);
  /// Day 2 of the carbon policy: admits again, as submitted, every PENDING
  /// application still waiting for its start time, under the policies and
  /// forecasts in force now (call it when a new policy bundle is installed).
  /// One whose region or start changes gets a new spec revision ("re-admitted
  /// under policy bundle V"). One the policies now refuse keeps its schedule.
  absl::StatusOr<ReadmitOutcome> ReadmitWaiting();
  /// The autoscaler's change (application_autoscaler.h): the services named
  /// in `replicas` get those replica counts in a new spec revision made
  /// from the one submitted for spec revision `expected_spec_revision`
  /// (admission runs again; the CAM YAML is not kept, the spec is), with
  /// `cause` as its change cause; then placed like an apply (SWM scales it
  /// in place). FAILED_PRECONDITION when the application is no longer at
  /// that spec revision (a user's apply won meanwhile: nothing changes);
  /// NOT_FOUND for an unknown application or service.
  absl::StatusOr<v1::Application> ScaleServices(const std::string& name,
                                                int64_t expected_spec_revision,
                                                const std::map<std::string, int>& replicas,
                                                const std::string& cause);
  /// Replaces status.app_metrics.services of `name` (the autoscaler's
  /// measure of its services) when it differs: one commit (a MODIFIED event) then.
  /// NOT_FOUND for an unknown application.
  absl::Status RecordMetrics(const std::string& name,
                             const std::vector<v1::ServiceMetrics>& metrics);
  /// Makes an older spec current again, as a new spec revision.
  absl::StatusOr<v1::RollbackApplicationResponse> Rollback(
      const v1::RollbackApplicationRequest& request);
  /// The stored spec revisions, newest first, paged.
  absl::StatusOr<v1::ListApplicationRevisionsResponse> ListRevisions(
      const v1::ListApplicationRevisionsRequest& request) const;

  /// Folds the scheduler's answer for `spec_revision` into the status.
  /// FAILED_PRECONDITION when the spec moved on since (a stale answer). A
  /// transient `result.error` keeps a PENDING or MIGRATING application in its
  /// phase, WARNING, with the next attempt scheduled (see Reconcile); on an
  /// application no longer waiting for a placement it changes nothing.
  absl::StatusOr<v1::Application> RecordPlacement(const std::string& name, int64_t spec_revision,
                                                  const PlacementResult& result);

  /// Folds the pods `cluster` reports (BuildPodReports of its LMS) into the
  /// status of every placed application (DEPLOYING, RUNNING or DEGRADED)
  /// with placements there: each placement's `ready` is whether its pod runs;
  /// the application is RUNNING (OK) once every placement is ready, DEGRADED
  /// with WARNING (every service still has a running pod) or ERROR (some
  /// service has none) and the failed pods in error_msg when pods fail, else
  /// DEPLOYING. A pod the cluster does not report is not ready. Each changed
  /// application is one commit (a MODIFIED event); returns how many changed.
  absl::StatusOr<int> RecordPods(const std::string& cluster, const std::vector<PodReport>& pods);
  /// Folds the channel status the scheduler reports for plan
  /// `plan_revision` of `name` into status.channels: an OOQOS or REJECTED
  /// channel makes a running application DEGRADED (WARNING) with the
  /// channel named in error_msg, until it runs within bounds again. A report
  /// for a plan the application does not hold yet is kept (in memory) and
  /// folded in when RecordPlacement brings that plan; one for an older plan
  /// or a removed application (plan_revision 0) is dropped. One commit (a
  /// MODIFIED event) when something changed; NOT_FOUND for an unknown
  /// application.
  absl::Status RecordChannels(const std::string& name, int64_t plan_revision,
                              const std::vector<v1::ChannelStatus>& channels);
  /// Folds in a plan the scheduler wrote without being asked — a migration
  /// moved a workload — when it is newer than the plan the application holds
  /// and made for its current spec revision, and the application is placed
  /// (DEPLOYING, RUNNING or DEGRADED): `placements` become status.placements
  /// (a placement that did not change keeps its readiness; a moved one is
  /// ready when its cluster's last report showed the pod running, else once
  /// it does), plan_revision moves
  /// to `plan_revision`, channels reported early for that plan are folded
  /// in, and the phase follows. One commit (a MODIFIED event) when something
  /// changed; anything else (an application waiting for its own placement,
  /// a stale or older plan, no placements) changes nothing. NOT_FOUND for
  /// an unknown application.
  absl::Status RecordMove(const std::string& name, int64_t spec_revision, int64_t plan_revision,
                          const std::vector<v1::ServicePlacement>& placements);
  /// Moves every application off `cluster` (unregistered or long
  /// unreachable, already excluded from neighborhood selection): each one
  /// with a placement there or a neighborhood containing it gets a
  /// neighborhood chosen again and is asked to be placed again (phase
  /// MIGRATING until the scheduler answers; `why` goes into error_msg).
  /// `stuck` says what happens to those that can get no neighborhood. Returns
  /// the names of the applications moved.
  absl::StatusOr<std::vector<std::string>> MoveOffCluster(const std::string& cluster,
                                                          StuckApplications stuck,
                                                          const std::string& why);
  /// Folds the scheduler's release outcome into a DELETING application: OK
  /// removes it (a DELETED event) and its neighborhood; an error is recorded
  /// in status.error_msg (once per distinct error) and the app stays DELETING.
  /// OK when the application is already gone; FAILED_PRECONDITION when it is
  /// not DELETING (a stale outcome).
  absl::Status RecordRelease(const std::string& name, const absl::Status& outcome);
  /// Asks the scheduler again for what a restart may have interrupted: the
  /// release of every DELETING application and the placement of every
  /// MIGRATING one and every PENDING one with a neighborhood. Call once at
  /// start (it is the first Reconcile). Returns how many were asked.
  absl::StatusOr<int> Resume();
  /// One reconcile pass: sends the placement or release each stored intent
  /// (PENDING with a neighborhood, MIGRATING, DELETING) calls for, unless a
  /// request is in flight (sent less than answer_timeout ago) or its retry
  /// is not due yet on the clock; sends the placement of each DEGRADED
  /// application whose replicas found no node again once its
  /// `unplaced_retry` wait is over; and, at most once a minute, deletes the
  /// operations past operation_retention. Call periodically. Returns how
  /// many requests were sent.
  absl::StatusOr<int> Reconcile();
  /// Makes every placement retry that waits out its backoff due now, so the
  /// next Reconcile sends it: call when the scheduler is reachable again
  /// after an outage. Requests in flight keep their answer deadline. Returns
  /// how many retries were brought forward.
  int RetryNow();

  /// GetOperation: an operation ACM answered apply, rollback, delete or
  /// unregister with, as stored. NOT_FOUND (naming `id`) when unknown.
  absl::StatusOr<v1::GetOperationResponse> GetOperation(
      const v1::GetOperationRequest& request) const;
  /// ListOperations: newest first, filtered by kind, resource and
  /// active_only, paged.
  absl::StatusOr<v1::ListOperationsResponse> ListOperations(
      const v1::ListOperationsRequest& request) const;
  /// Stores an operation that changes no application (UnregisterCluster's)
  /// and tells the listeners.
  absl::Status RecordOperation(const common::v1::Operation& operation);

  /// The current state of `name` (empty = every application) and the
  /// revision it is at, read atomically with respect to writes.
  absl::StatusOr<ApplicationSnapshot> Snapshot(const std::string& name) const;
  /// Up to `limit` changes of `name` (empty = all) with revision > `after`,
  /// in order. OUT_OF_RANGE when changes after `after` are no longer kept.
  absl::StatusOr<std::vector<v1::WatchApplicationResponse>> ReadChanges(const std::string& name,
                                                                        int64_t after,
                                                                        size_t limit) const;
  /// The revision of the last change.
  absl::StatusOr<int64_t> CurrentRevision() const;

  /// Registers `listener`, called (outside any lock) after every commit; returns its id.
  int AddListener(std::function<void()> listener);
  /// Unregisters a listener; after it returns the listener is not running and not called again,
  /// not even by a Notify that had already copied the listener list.
  void RemoveListener(int id);
  /// Runs `hook` in every Notify between copying the listener list and calling the
  /// listeners (the window a RemoveListener may fall into). Set before any Notify.
  void SetNotifyHookForTest(std::function<void()> hook);

 private:
  // The idempotency record a write stores with its commit (none when key is empty).
  struct RequestRecord {
    std::string key;
    std::string fingerprint;
    std::function<std::string(const v1::ApplyApplicationResponse&)> encode;
  };

  absl::StatusOr<v1::ApplyApplicationResponse> ApplyLocked(
      const v1::ApplyApplicationRequest& request, const std::string& change_cause,
      const RequestRecord& record, const std::string& spec_yaml = "")
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  absl::StatusOr<std::optional<std::string>> CheckRequest(const std::string& key,
                                                          const std::string& fingerprint) const;
  absl::Status CommitNext(ApplicationCommit& commit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Adds to `commit` the operation of the application it writes (its
  // status.operation_id), brought in step with it.
  absl::Status FoldOperationLocked(ApplicationCommit& commit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Adds to `commit` operation `id`, ended as superseded by `by` (unless done).
  absl::Status SupersedeLocked(const std::string& id, const std::string& by,
                               ApplicationCommit& commit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Stamps `app` with the next revision and the time, and commits it with a
  // MODIFIED event.
  absl::Status CommitModified(v1::Application& app) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Notes that a request for `name` was just sent: Reconcile leaves it alone
  // for answer_timeout.
  void MarkSentLocked(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Counts a failed attempt for `name` and returns when the next one is due.
  absl::Time ScheduleRetryLocked(const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Sends a placement of `app` (outside write_mu_); a refusal is recorded as
  // a transient error.
  void SendPlacement(const v1::Application& app, const v1::Neighborhood& neighborhood);
  // `app` as the scheduler is asked to place it: its spec's SchedulableSpec
  // (pending channels left out, channel names unique in the application).
  static v1::Application ForScheduler(const v1::Application& app);
  void Notify();
  // Deletes the operations and idempotency records past their retention
  // (operations in `named_operations` stay), a bounded batch at a time.
  absl::Status PruneHistory(absl::Time now, const std::set<std::string>& named_operations);
  google::protobuf::Timestamp NowProto() const;
  int PageSize(int requested) const;

  // Sets phase, status and error_msg of a placed application from its
  // placements' readiness and the pod failures known for it.
  void FoldPodStatus(v1::Application& app) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // The error_msg of application `name` while replicas found no node:
  // kUnplacedReplicas, when they are tried again, and `detail`.
  std::string UnplacedMessageLocked(const std::string& name, const std::string& detail) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Plan `plan_revision` of `name` now held: the channels SWM reported for
  // it before (kept in early_channels_) become status.channels; reports for
  // it or an older plan are dropped.
  void TakeEarlyChannelsLocked(const std::string& name, int64_t plan_revision,
                               v1::ApplicationStatus& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  ApplicationStore& store_;
  PlacementScheduler& scheduler_;
  Clock& clock_;
  NeighborhoodProvider* const neighborhoods_;
  const AdmissionChain* const admission_;
  const ApplicationManagerOptions options_;

  // Serializes writes, so revisions are taken in order and snapshots are consistent.
  mutable absl::Mutex write_mu_;
  // application -> cluster -> its failed pods, in words, from the last report
  // of that cluster (memory only: the next reports rebuild it after a restart).
  // cluster -> (application, pod) of each pod its last report showed
  // Running, with where it serves: a placement a migration moved there is
  // ready at once when its pod was reported before the move's plan arrived.
  std::map<std::string, std::map<std::pair<std::string, std::string>, std::vector<std::string>>>
      running_pods_ ABSL_GUARDED_BY(write_mu_);
  std::map<std::string, std::map<std::string, std::vector<std::string>>> pod_failures_
      ABSL_GUARDED_BY(write_mu_);
  // Requests outstanding per application (memory only: after a restart every
  // stored intent is sent again, with the same request_id).
  struct Attempt {
    // Failed attempts in a row.
    int failures = 0;
    // When Reconcile sends again: the retry time, or the answer deadline.
    absl::Time due = absl::InfinitePast();
    // True while `due` is a retry time (after a failure), false while it is
    // an answer deadline.
    bool backing_off = false;
  };
  std::map<std::string, Attempt> attempts_ ABSL_GUARDED_BY(write_mu_);
  // Per DEGRADED application with replicas no node took. Memory only: after
  // a restart the first retry waits one `unplaced_retry.initial` and the
  // status counts the replicas instead of quoting the scheduler.
  struct UnplacedRetry {
    // Placements that left them out in a row (0: none seen since a restart).
    int failures = 0;
    // When Reconcile asks again.
    absl::Time due = absl::InfinitePast();
    // Why they found no node, as the scheduler said ("" after a restart).
    std::string detail;
  };
  std::map<std::string, UnplacedRetry> unplaced_ ABSL_GUARDED_BY(write_mu_);
  // "application/pod" of each ended job pod whose slot Reconcile asked to
  // run again, and when; asked again after kJobPodAskAgain.
  std::map<std::string, absl::Time> job_pods_asked_ ABSL_GUARDED_BY(write_mu_);
  static constexpr absl::Duration kJobPodAskAgain = absl::Seconds(30);
  // Channel reports for a plan an application does not hold yet (the
  // scheduler's channel stream ran ahead of its placement answer).
  struct ChannelReport {
    int64_t plan_revision = 0;
    std::vector<v1::ChannelStatus> channels;
  };
  std::map<std::string, ChannelReport> early_channels_ ABSL_GUARDED_BY(write_mu_);
  Backoff backoff_ ABSL_GUARDED_BY(write_mu_);
  Backoff unplaced_backoff_ ABSL_GUARDED_BY(write_mu_);
  // When Reconcile next deletes old operations.
  absl::Time next_prune_ ABSL_GUARDED_BY(write_mu_) = absl::InfinitePast();

  Listeners listeners_;
  std::function<void()> notify_hook_for_test_;
};

/// True if `labels` satisfy `selector` (match_labels and match_expressions).
bool MatchesLabels(const common::v1::LabelSelector& selector,
                   const google::protobuf::Map<std::string, std::string>& labels);

}  // namespace codeco::acm
