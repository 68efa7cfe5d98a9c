#include "acm/server/swm_placement_scheduler.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "codeco/common/logging.h"
#include "codeco/swm/v1/plan.pb.h"
#include "codeco/swm/v1/swm_service.grpc.pb.h"

namespace codeco::acm {

SwmPlacementScheduler::SwmPlacementScheduler(std::shared_ptr<grpc::Channel> channel,
                                             absl::Duration timeout)
    : channel_(std::move(channel)), timeout_(timeout) {
  thread_ = std::thread([this] { Loop(); });
}

SwmPlacementScheduler::~SwmPlacementScheduler() { Stop(); }

void SwmPlacementScheduler::SetSink(PlacementSink sink) { sink_ = std::move(sink); }

void SwmPlacementScheduler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status SwmPlacementScheduler::RequestPlacement(const v1::Application& application,
                                                     const v1::Neighborhood& neighborhood) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("ACM is shutting down");
  // A newer request for the same application supersedes a queued one.
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->application.metadata().name() == application.metadata().name()) {
      queue_.erase(it);
      break;
    }
  }
  queue_.push_back({application, neighborhood});
  return absl::OkStatus();
}

absl::Status SwmPlacementScheduler::ReleasePlacement(const std::string& application) {
  return absl::UnimplementedError(
      absl::StrCat("SWM has no release RPC yet; the pods of ", application, " stay until it has"));
}

void SwmPlacementScheduler::Loop() {
  while (true) {
    Request request;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      request = std::move(queue_.front());
      queue_.pop_front();
    }
    PlacementResult result = Place(request);
    if (sink_) {
      sink_(request.application.metadata().name(), request.application.spec_revision(), result);
    }
  }
}

PlacementResult SwmPlacementScheduler::Place(const Request& request) {
  PlacementResult result;
  result.neighborhood_id = request.neighborhood.id();
  swm::v1::PlaceApplicationRequest place;
  *place.mutable_application() = request.application;
  *place.mutable_neighborhood() = request.neighborhood;
  swm::v1::PlaceApplicationResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  grpc::Status status =
      swm::v1::SwmService::NewStub(channel_)->PlaceApplication(&context, place, &response);
  if (!status.ok()) {
    result.message = absl::StrCat("scheduler: ", status.error_message());
    log::Warn("placement failed", {{"application", request.application.metadata().name()},
                                   {"error", status.error_message()}});
    return result;
  }
  const auto& operation = response.operation();
  if (operation.has_error() && operation.error().code() != 0) {
    result.message = absl::StrCat("scheduler: ", operation.error().message());
    return result;
  }
  swm::v1::AssignmentPlan plan;
  if (!operation.result().UnpackTo(&plan)) {
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
    result.placements.push_back(placement);
  }
  std::string unplaced;
  for (const auto& u : plan.unplaced()) absl::StrAppend(&unplaced, "\n", u.workload(), ": ", u.reason());
  result.placed = plan.unplaced().empty() && !plan.targets().empty();
  if (!result.placed) {
    result.message = unplaced.empty() ? "nothing placed" : absl::StrCat("unplaced:", unplaced);
  }
  return result;
}

}  // namespace codeco::acm
