#include "acm/core/placement_scheduler.h"

namespace codeco::acm {

absl::Status InMemoryPlacementScheduler::RequestPlacement(const v1::Application& application,
                                                          const v1::Neighborhood& neighborhood) {
  absl::MutexLock lock(&mu_);
  if (!failure_.ok()) return failure_;
  requests_.push_back(application);
  neighborhoods_.push_back(neighborhood);
  return absl::OkStatus();
}

absl::Status InMemoryPlacementScheduler::ReleasePlacement(const std::string& application) {
  {
    absl::MutexLock lock(&mu_);
    if (!failure_.ok()) return failure_;
    releases_.push_back(application);
  }
  // Outside the lock: the sink writes to the application manager.
  if (release_sink_) release_sink_(application, absl::OkStatus());
  return absl::OkStatus();
}

void InMemoryPlacementScheduler::CompleteReleasesWith(ReleaseSink sink) {
  release_sink_ = std::move(sink);
}

std::vector<v1::Application> InMemoryPlacementScheduler::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
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
