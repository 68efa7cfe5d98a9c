#include "acm/core/placement_scheduler.h"

#include "absl/strings/str_cat.h"

namespace codeco::acm {

std::string PlacementRequestId(const v1::Application& application) {
  return absl::StrCat("acm/", application.metadata().uid(), "/place/s",
                      application.spec_revision(), "/p", application.status().plan_revision());
}

std::string ReleaseRequestId(const v1::Application& application) {
  return absl::StrCat("acm/", application.metadata().uid(), "/release/",
                      application.status().operation_id());
}

std::string NextJobPodRequestId(const v1::Application& application, const std::string& pod) {
  return absl::StrCat("acm/", application.metadata().uid(), "/next-job-pod/s",
                      application.spec_revision(), "/", pod);
}

bool IsTransientSchedulerError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kUnknown:
      return true;
    default:
      return false;
  }
}

absl::Status InMemoryPlacementScheduler::RequestPlacement(const v1::Application& application,
                                                          const v1::Neighborhood& neighborhood,
                                                          const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  if (!failure_.ok()) return failure_;
  requests_.push_back(application);
  request_ids_.push_back(request_id);
  neighborhoods_.push_back(neighborhood);
  return absl::OkStatus();
}

absl::Status InMemoryPlacementScheduler::ReleasePlacement(const std::string& application,
                                                          const std::string& /*request_id*/) {
  {
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) return failure_;
    releases_.push_back(application);
  }
  // Outside the lock: the sink writes to the application manager.
  if (release_sink_) release_sink_(application, absl::OkStatus());
  return absl::OkStatus();
}

absl::Status InMemoryPlacementScheduler::RunNextJobPod(const std::string& application,
                                                       const std::string& workload,
                                                       const std::string& /*request_id*/) {
  absl::MutexLock lock(&mu_);
  if (!failure_.ok()) return failure_;
  next_job_pods_.push_back(application + "/" + workload);
  return absl::OkStatus();
}

std::vector<std::string> InMemoryPlacementScheduler::next_job_pods() const {
  absl::MutexLock lock(&mu_);
  return next_job_pods_;
}

void InMemoryPlacementScheduler::CompleteReleasesWith(ReleaseSink sink) {
  release_sink_ = std::move(sink);
}

std::vector<v1::Application> InMemoryPlacementScheduler::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

std::vector<std::string> InMemoryPlacementScheduler::request_ids() const {
  absl::MutexLock lock(&mu_);
  return request_ids_;
}

std::vector<v1::Neighborhood> InMemoryPlacementScheduler::neighborhoods() const {
  absl::MutexLock lock(&mu_);
  return neighborhoods_;
}

std::vector<std::string> InMemoryPlacementScheduler::releases() const {
  absl::MutexLock lock(&mu_);
  return releases_;
}

void InMemoryPlacementScheduler::SetFailure(absl::Status status) {
  absl::MutexLock lock(&mu_);
  failure_ = std::move(status);
}

}  // namespace codeco::acm
