#include "acm/server/swm_placement_scheduler.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/logging.h"
#include "codeco/common/proto_util.h"
#include "codeco/swm/v1/plan.pb.h"
#include "codeco/swm/v1/swm_service.grpc.pb.h"

namespace codeco::acm {

SwmPlacementScheduler::SwmPlacementScheduler(std::shared_ptr<grpc::Channel> channel,
                                             absl::Duration timeout,
                                             absl::Duration release_retry_min,
                                             absl::Duration release_retry_max, int workers)
    : channel_(std::move(channel)),
      timeout_(timeout),
      release_backoff_(BackoffPolicy{.initial = release_retry_min,
                                     .max = std::max(release_retry_min, release_retry_max)},
                       /*seed=*/1) {
  for (int i = 0; i < std::max(1, workers); ++i) threads_.emplace_back([this] { Loop(); });
}

SwmPlacementScheduler::~SwmPlacementScheduler() { Stop(); }

void SwmPlacementScheduler::SetSink(PlacementSink sink) { sink_ = std::move(sink); }

void SwmPlacementScheduler::SetReleaseSink(ReleaseSink sink) { release_sink_ = std::move(sink); }

void SwmPlacementScheduler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

const std::string& SwmPlacementScheduler::NameOf(const Request& request) {
  return request.release || !request.workload.empty() ? request.name
                                                      : request.application.metadata().name();
}

absl::Status SwmPlacementScheduler::RunNextJobPod(const std::string& application,
                                                  const std::string& workload,
                                                  const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("ACM is shutting down");
  for (const Request& queued : queue_) {
    if (queued.workload == workload && queued.name == application) return absl::OkStatus();
  }
  Request request;
  request.name = application;
  request.workload = workload;
  request.request_id = request_id;
  queue_.push_back(std::move(request));
  ++changes_;
  return absl::OkStatus();
}

void SwmPlacementScheduler::NextJobPod(const Request& request) {
  swm::v1::MigrateWorkloadRequest migrate;
  migrate.set_application(request.name);
  migrate.set_workload(request.workload);
  migrate.set_reason(swm::v1::MIGRATION_REASON_JOB_NEXT_POD);
  migrate.set_request_id(request.request_id);
  swm::v1::MigrateWorkloadResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  grpc::Status status =
      swm::v1::SwmService::NewStub(channel_)->MigrateWorkload(&context, migrate, &response);
  if (!status.ok() || response.operation().has_error()) {
    log::Warn(
        "next job pod not started; ACM asks again",
        {{"application", request.name},
         {"workload", request.workload},
         {"error", status.ok() ? response.operation().error().message() : status.error_message()}});
    return;
  }
  log::Info("next job pod", {{"application", request.name},
                             {"workload", request.workload},
                             {"operation", response.operation().id()}});
}

absl::Status SwmPlacementScheduler::RequestPlacement(const v1::Application& application,
                                                     const v1::Neighborhood& neighborhood,
                                                     const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("ACM is shutting down");
  // A newer request for the same application supersedes a queued one.
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (!it->release && it->application.metadata().name() == application.metadata().name()) {
      queue_.erase(it);
      break;
    }
  }
  Request request;
  request.application = application;
  request.neighborhood = neighborhood;
  request.request_id = request_id;
  queue_.push_back(std::move(request));
  ++changes_;
  return absl::OkStatus();
}

absl::Status SwmPlacementScheduler::ReleasePlacement(const std::string& application,
                                                     const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("ACM is shutting down");
  // A placement still queued for the application is moot now.
  for (auto it = queue_.begin(); it != queue_.end();) {
    it = !it->release && NameOf(*it) == application ? queue_.erase(it) : std::next(it);
  }
  for (Request& queued : queue_) {
    if (queued.release && queued.name == application) {
      queued.due = absl::InfinitePast();  // asked again: try now
      ++changes_;
      return absl::OkStatus();
    }
  }
  Request request;
  request.release = true;
  request.name = application;
  request.request_id = request_id;
  queue_.push_back(std::move(request));
  ++changes_;
  return absl::OkStatus();
}

int SwmPlacementScheduler::RetryNow() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  int brought_forward = 0;
  for (Request& queued : queue_) {
    if (queued.due > now) {
      queued.due = absl::InfinitePast();
      ++brought_forward;
    }
  }
  if (brought_forward > 0) ++changes_;
  return brought_forward;
}

void SwmPlacementScheduler::Loop() {
  while (true) {
    Request request;
    {
      absl::MutexLock lock(&mu_);
      while (true) {
        if (stopping_) return;
        // The first request that is due and whose application has no
        // request in flight (earlier requests of that application, due or
        // not, come first); else wait for the earliest retry or news.
        const absl::Time now = absl::Now();
        absl::Time earliest = absl::InfiniteFuture();
        std::set<std::string> blocked = in_flight_;
        auto it = queue_.begin();
        for (; it != queue_.end(); ++it) {
          if (blocked.count(NameOf(*it))) continue;
          if (it->due <= now) break;
          earliest = std::min(earliest, it->due);
          blocked.insert(NameOf(*it));
        }
        if (it != queue_.end()) {
          request = std::move(*it);
          queue_.erase(it);
          in_flight_.insert(NameOf(request));
          break;
        }
        const uint64_t seen = changes_;
        auto news = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stopping_ || changes_ != seen;
        };
        mu_.AwaitWithDeadline(absl::Condition(&news), earliest);
      }
    }
    if (!request.workload.empty()) {
      NextJobPod(request);
      absl::MutexLock lock(&mu_);
      in_flight_.erase(NameOf(request));
      ++changes_;
      continue;
    }
    if (!request.release) {
      PlacementResult result = Place(request);
      if (sink_) {
        sink_(request.application.metadata().name(), request.application.spec_revision(), result);
      }
      absl::MutexLock lock(&mu_);
      in_flight_.erase(NameOf(request));
      ++changes_;
      continue;
    }
    absl::Status outcome = Release(request.name, request.request_id);
    if (release_sink_) release_sink_(request.name, outcome);
    absl::MutexLock lock(&mu_);
    in_flight_.erase(request.name);
    ++changes_;
    if (!outcome.ok()) {
      const absl::Duration wait = release_backoff_.Delay(++request.failures);
      log::Warn("release not confirmed; will retry",
                {{"application", request.name},
                 {"error", std::string(outcome.message())},
                 {"retry_in", absl::FormatDuration(wait)}});
      // Asked again meanwhile: that request carries on.
      bool queued = std::any_of(queue_.begin(), queue_.end(), [&](const Request& r) {
        return r.release && r.name == request.name;
      });
      if (!queued && !stopping_) {
        request.due = absl::Now() + wait;
        queue_.push_back(request);
      }
    }
  }
}

absl::Status SwmPlacementScheduler::Release(const std::string& application,
                                            const std::string& request_id) {
  swm::v1::ReleaseApplicationRequest release;
  release.set_application(application);
  // The key names the application's uid, so a name that comes back as a new
  // application is not answered from the old one's release.
  release.set_request_id(request_id);
  swm::v1::ReleaseApplicationResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  grpc::Status status =
      swm::v1::SwmService::NewStub(channel_)->ReleaseApplication(&context, release, &response);
  if (!status.ok()) {
    return absl::Status(FromGrpcStatus(status).code(),
                        absl::StrCat("scheduler: ", status.error_message()));
  }
  {
    absl::MutexLock lock(&mu_);
    placed_.erase(application);
  }
  log::Info("released", {{"application", application},
                         {"actions", absl::StrCat(response.plan().actions_size())}});
  return absl::OkStatus();
}

absl::StatusOr<common::v1::Operation> SwmPlacementScheduler::Follow(
    swm::v1::SwmService::Stub& stub, const common::v1::Operation& first, absl::Time deadline) {
  if (first.done()) return first;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  swm::v1::WatchOperationRequest request;
  request.set_id(first.id());
  auto stream = stub.WatchOperation(&context, request);
  swm::v1::WatchOperationResponse event;
  common::v1::Operation last = first;
  while (stream->Read(&event)) last = event.operation();  // it ends after the done state
  grpc::Status status = stream->Finish();
  if (last.done()) return last;
  // Transient either way: the retry sends the same request_id, which SWM
  // answers with the same operation (or places again if it ended transiently).
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::DeadlineExceededError(
        absl::StrCat("scheduler: placement ", first.id(), " still running at the deadline"));
  }
  return absl::UnavailableError(absl::StrCat("scheduler: lost placement ", first.id(),
                                             " before it was done: ", status.error_message()));
}

PlacementResult SwmPlacementScheduler::Place(const Request& request) {
  PlacementResult result;
  result.neighborhood_id = request.neighborhood.id();
  const std::string& name = request.application.metadata().name();
  bool placed_before = request.application.status().plan_revision() > 0;
  if (!placed_before) {
    // Placed by an earlier request whose answer the application's status
    // did not have yet when this one was queued.
    absl::MutexLock lock(&mu_);
    placed_before = placed_.count(name) > 0;
  }
  auto stub = swm::v1::SwmService::NewStub(channel_);
  if (placed_before) {
    // Placed before (a changed spec, or moving off a cluster): SWM changes
    // replica counts in place, with every other pod left running; anything
    // else (ALREADY_EXISTS) is a redeploy, with a gap: the pods go first.
    swm::v1::PlaceApplicationRequest scale;
    *scale.mutable_application() = request.application;
    *scale.mutable_neighborhood() = request.neighborhood;
    scale.set_request_id(absl::StrCat(request.request_id, "/in-place"));
    scale.set_mode(swm::v1::PLACE_MODE_RUNNING);
    scale.set_scale_in_place(true);
    absl::StatusOr<common::v1::Operation> scaled = Call(*stub, scale);
    if (!absl::IsAlreadyExists(scaled.status())) {
      PlacementResult in_place = ToResult(request, scaled);
      in_place.in_place = true;
      return in_place;
    }
    log::Info("redeploying: not a change of replica counts",
              {{"application", name}, {"why", std::string(scaled.status().message())}});
    absl::Status released = Release(name, absl::StrCat(request.request_id, "/release-first"));
    if (!released.ok()) {
      result.error = absl::Status(
          released.code(), absl::StrCat("the current placement could not be released to place "
                                        "again: ",
                                        released.message()));
      return result;
    }
  }
  swm::v1::PlaceApplicationRequest place;
  *place.mutable_application() = request.application;
  *place.mutable_neighborhood() = request.neighborhood;
  place.set_request_id(request.request_id);
  place.set_mode(swm::v1::PLACE_MODE_RUNNING);
  return ToResult(request, Call(*stub, place));
}

absl::StatusOr<common::v1::Operation> SwmPlacementScheduler::Call(
    swm::v1::SwmService::Stub& stub, const swm::v1::PlaceApplicationRequest& place) {
  // Started, then followed within the same timeout: SWM answers at once with
  // the running operation (one that predates the mode answers it done).
  const std::string& name = place.application().metadata().name();
  const absl::Time deadline = absl::Now() + timeout_;
  swm::v1::PlaceApplicationResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  grpc::Status status = stub.PlaceApplication(&context, place, &response);
  if (!status.ok()) {
    log::Warn("placement not answered", {{"application", name}, {"error", status.error_message()}});
    return FromGrpcStatus(status);
  }
  absl::StatusOr<common::v1::Operation> followed = Follow(stub, response.operation(), deadline);
  if (!followed.ok()) {
    log::Warn("placement not followed to its end",
              {{"application", name}, {"error", std::string(followed.status().message())}});
    return followed.status();
  }
  if (followed->has_error() && followed->error().code() != 0) {
    return StatusFromError(followed->error());
  }
  return followed;
}

PlacementResult SwmPlacementScheduler::ToResult(
    const Request& request, const absl::StatusOr<common::v1::Operation>& answer) {
  PlacementResult result;
  result.neighborhood_id = request.neighborhood.id();
  if (!answer.ok()) {
    result.error = answer.status();
    return result;
  }
  const std::string& name = request.application.metadata().name();
  swm::v1::AssignmentPlan plan;
  if (!answer->result().UnpackTo(&plan)) {
    result.message = "scheduler answered without an assignment plan";
    return result;
  }
  result.plan_revision = plan.plan_revision();
  if (!plan.neighborhood_id().empty()) result.neighborhood_id = plan.neighborhood_id();
  for (const auto& target : plan.targets()) {
    v1::ServicePlacement placement;
    placement.set_service(target.service());
    placement.set_cluster(target.cluster());
    placement.set_node(target.node());
    placement.set_pod(target.pod());
    placement.set_workload(target.workload());
    result.placements.push_back(placement);
  }
  // A plan DONE with pods and unplaced workloads is a scale in place whose
  // new replicas did not all fit: the others run.
  const bool partly_scaled = plan.phase() == swm::v1::PLAN_PHASE_DONE && !plan.targets().empty();
  std::string unplaced;
  for (const auto& u : plan.unplaced()) {
    absl::StrAppend(&unplaced, "\n", u.workload(), ": ", u.reason());
    if (partly_scaled) result.unplaced_replicas.push_back(u.workload() + ": " + u.reason());
  }
  result.placed = (plan.unplaced().empty() || partly_scaled) && !plan.targets().empty();
  if (!plan.targets().empty()) {
    absl::MutexLock lock(&mu_);
    placed_.insert(name);
  }
  if (!result.placed) {
    result.message = unplaced.empty() ? "nothing placed" : absl::StrCat("unplaced:", unplaced);
  }
  return result;
}

}  // namespace codeco::acm
