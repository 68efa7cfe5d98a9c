#include "acm/server/member_push_client.h"

#include "absl/strings/str_cat.h"
#include "codeco/acm/v1/acm_service.grpc.pb.h"
#include "codeco/common/call_deadline.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/logging.h"

namespace codeco::acm {
namespace {

// Calls `method` on the ACM at `endpoint` with `timeout`.
template <typename Request, typename Response, typename Method>
absl::Status Call(PeerChannels& peers, const std::string& endpoint, absl::Duration timeout,
                  const Request& request, Method method) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = peers.Get(endpoint);
  if (!channel.ok()) return channel.status();
  v1::AcmService::Stub stub(*channel);
  grpc::ClientContext context;
  SetOutgoingDeadline(context, timeout);
  Response response;
  grpc::Status status = (stub.*method)(&context, request, &response);
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(endpoint, ": ", status.error_message()));
}

}  // namespace

absl::Status GrpcMemberPush::PushNeighborhood(const std::string& cluster,
                                              const std::string& endpoint,
                                              const v1::PushNeighborhoodRequest& request) {
  (void)cluster;  // the mTLS peer check at `endpoint` binds it
  return Call<v1::PushNeighborhoodRequest, v1::PushNeighborhoodResponse>(
      peers_, endpoint, timeout_, request, &v1::AcmService::Stub::PushNeighborhood);
}

absl::Status GrpcMemberPush::PushAssignment(const std::string& cluster,
                                            const std::string& endpoint,
                                            const v1::PushAssignmentRequest& request) {
  (void)cluster;
  return Call<v1::PushAssignmentRequest, v1::PushAssignmentResponse>(
      peers_, endpoint, timeout_, request, &v1::AcmService::Stub::PushAssignment);
}

MemberPublisherLoop::MemberPublisherLoop(ApplicationManager& manager,
                                         NeighborhoodProvider& neighborhoods,
                                         const ClusterRegistry& clusters, const Clock& clock,
                                         std::unique_ptr<MemberPushPort> push,
                                         absl::Duration interval)
    : manager_(manager),
      push_(std::move(push)),
      publisher_(std::make_unique<MemberPublisher>(manager, neighborhoods, clusters, *push_, clock)),
      interval_(interval) {
  listener_ = manager_.AddListener([this] {
    absl::MutexLock lock(&mu_);
    changed_ = true;
  });
  thread_ = std::thread([this] { Run(); });
}

MemberPublisherLoop::~MemberPublisherLoop() {
  manager_.RemoveListener(listener_);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void MemberPublisherLoop::Run() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return changed_ || stopping_; };
      mu_.AwaitWithTimeout(absl::Condition(&woken), interval_);
      if (stopping_) return;
      changed_ = false;
    }
    // A full batch means more changes wait: keep going.
    while (true) {
      absl::StatusOr<PublishStats> stats = publisher_->Step();
      if (!stats.ok()) {
        log::Warn("publisher step failed", {{"error", std::string(stats.status().message())}});
        break;
      }
      if (stats->fell_behind) {
        log::Warn("publisher fell behind the change log; agents pull what it skipped");
      }
      if (stats->changes == 0) break;
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
  }
}

}  // namespace codeco::acm
