#include "swm/server/checkpointer_state_mover.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "codeco/checkpointer/v1/checkpointer_service.grpc.pb.h"
#include "codeco/common/call_deadline.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/status.h"

namespace codeco::swm {
namespace {

namespace cp = codeco::checkpointer::v1;

// Where a checkpointer operation stands, as the StateMover reports it.
StateMoveProgress ProgressOf(const codeco::common::v1::Operation& op) {
  StateMoveProgress progress;
  progress.done = op.done();
  progress.phase = op.phase();
  if (op.done() && op.has_error()) progress.status = StatusFromError(op.error());
  return progress;
}

// `status` with what was asked of whom in front.
absl::Status Named(const absl::Status& status, const std::string& what,
                   const std::string& cluster, const std::string& endpoint) {
  return absl::Status(status.code(), absl::StrCat(what, " at the checkpointer of ", cluster, " (",
                                                  endpoint, "): ", status.message()));
}

}  // namespace

CheckpointerStateMover::CheckpointerStateMover(PeerChannels& channels, PlanStore& plans,
                                               CheckpointerStateMoverOptions options)
    : channels_(channels), plans_(plans), options_(options) {}

absl::StatusOr<std::string> CheckpointerStateMover::EndpointOf(const std::string& cluster,
                                                               const std::string& given) {
  if (!given.empty()) {
    absl::StatusOr<std::optional<std::string>> known = plans_.CheckpointerEndpoint(cluster);
    if (!known.ok() || !known->has_value() || **known != given) {
      RETURN_IF_ERROR(plans_.SaveCheckpointerEndpoint(cluster, given));
    }
    return given;
  }
  ASSIGN_OR_RETURN(std::optional<std::string> known, plans_.CheckpointerEndpoint(cluster));
  if (!known.has_value()) {
    // A refusal: an endpoint is remembered before the first call to it, so
    // no move was ever started there.
    return absl::FailedPreconditionError(absl::StrCat(
        "no checkpointer is known for cluster ", cluster,
        " (its agent advertises none: acm.advertise checkpointer=host:port)"));
  }
  return *known;
}

absl::StatusOr<std::string> CheckpointerStateMover::Start(const StateMove& move,
                                                          absl::Time deadline) {
  ASSIGN_OR_RETURN(std::string endpoint, EndpointOf(move.source_cluster, move.source_checkpointer));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, channels_.Get(endpoint));
  std::unique_ptr<cp::CheckpointerService::Stub> stub = cp::CheckpointerService::NewStub(channel);
  cp::MigrateContainerRequest request;
  request.mutable_source()->set_cluster(move.source_cluster);
  request.mutable_source()->set_node(move.source_node);
  request.mutable_source()->set_pod(move.source_pod);
  request.set_target_cluster(move.target_cluster);
  request.set_target_node(move.target_node);
  request.set_target_pod(move.target_pod);
  request.set_restore_into_existing(true);
  request.set_request_id(move.request_id);
  grpc::ClientContext context;
  SetOutgoingDeadline(context, options_.call_timeout, deadline);
  cp::MigrateContainerResponse response;
  grpc::Status status = stub->MigrateContainer(&context, request, &response);
  if (!status.ok()) {
    return Named(FromGrpcStatus(status), "MigrateContainer of " + move.source_pod,
                 move.source_cluster, endpoint);
  }
  if (response.operation().id().empty()) {
    return absl::UnknownError(absl::StrCat("the checkpointer of ", move.source_cluster,
                                           " answered MigrateContainer without an operation"));
  }
  return response.operation().id();
}

absl::StatusOr<StateMoveProgress> CheckpointerStateMover::Await(const std::string& source_cluster,
                                                                const std::string& id,
                                                                absl::Time deadline) {
  ASSIGN_OR_RETURN(std::string endpoint, EndpointOf(source_cluster, ""));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, channels_.Get(endpoint));
  std::unique_ptr<cp::CheckpointerService::Stub> stub = cp::CheckpointerService::NewStub(channel);
  // The stream sends the operation's state, then each change, and ends
  // once it is done; our deadline ends it earlier.
  grpc::ClientContext context;
  if (deadline != absl::InfiniteFuture()) context.set_deadline(absl::ToChronoTime(deadline));
  cp::WatchOperationRequest request;
  request.set_id(id);
  std::unique_ptr<grpc::ClientReader<cp::WatchOperationResponse>> stream =
      stub->WatchOperation(&context, request);
  cp::WatchOperationResponse response;
  std::optional<StateMoveProgress> last;
  while (stream->Read(&response)) {
    last = ProgressOf(response.operation());
    if (last->done) {
      context.TryCancel();
      break;
    }
  }
  grpc::Status status = stream->Finish();
  if (last.has_value() && last->done) return *last;
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED || absl::Now() >= deadline) {
    // Not done yet: that is an answer too.
    if (last.has_value()) return *last;
    return StateMoveProgress{.done = false, .phase = "not reported yet"};
  }
  if (!status.ok()) {
    return Named(FromGrpcStatus(status), "following operation " + id, source_cluster, endpoint);
  }
  return last.has_value() ? *last : StateMoveProgress{.done = false, .phase = "not reported"};
}

}  // namespace codeco::swm
