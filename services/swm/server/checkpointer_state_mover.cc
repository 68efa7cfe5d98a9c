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
  const bool from_backup = !move.from_backup.empty();
  ASSIGN_OR_RETURN(std::string endpoint,
                   EndpointOf(move.RunsAt(), from_backup ? move.target_checkpointer
                                                         : move.source_checkpointer));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, channels_.Get(endpoint));
  std::unique_ptr<cp::CheckpointerService::Stub> stub = cp::CheckpointerService::NewStub(channel);
  grpc::ClientContext context;
  SetOutgoingDeadline(context, options_.call_timeout, deadline);
  grpc::Status status;
  std::string what;
  codeco::common::v1::Operation operation;
  if (from_backup) {
    // The source cannot be read: the backup's image goes into the target
    // pod through the target cluster's checkpointer.
    cp::RestoreCheckpointRequest request;
    request.set_image_reference(move.from_backup);
    request.set_target_node(move.target_node);
    request.set_pod(move.target_pod);
    request.set_restore_into_existing(true);
    request.set_request_id(move.request_id);
    cp::RestoreCheckpointResponse response;
    status = stub->RestoreCheckpoint(&context, request, &response);
    what = "RestoreCheckpoint of " + move.from_backup + " into " + move.target_pod;
    operation = response.operation();
  } else {
    cp::MigrateContainerRequest request;
    request.mutable_source()->set_cluster(move.source_cluster);
    request.mutable_source()->set_node(move.source_node);
    request.mutable_source()->set_pod(move.source_pod);
    request.set_target_cluster(move.target_cluster);
    request.set_target_node(move.target_node);
    request.set_target_pod(move.target_pod);
    request.set_restore_into_existing(true);
    request.set_request_id(move.request_id);
    cp::MigrateContainerResponse response;
    status = stub->MigrateContainer(&context, request, &response);
    what = "MigrateContainer of " + move.source_pod;
    operation = response.operation();
  }
  if (!status.ok()) return Named(FromGrpcStatus(status), what, move.RunsAt(), endpoint);
  if (operation.id().empty()) {
    return absl::UnknownError(absl::StrCat("the checkpointer of ", move.RunsAt(), " answered ",
                                           what, " without an operation"));
  }
  return operation.id();
}

absl::StatusOr<std::optional<codeco::common::v1::Operation>> CheckpointerStateMover::Watch(
    const std::string& cluster, const std::string& id, absl::Time deadline) {
  ASSIGN_OR_RETURN(std::string endpoint, EndpointOf(cluster, ""));
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
  std::optional<codeco::common::v1::Operation> last;
  while (stream->Read(&response)) {
    last = response.operation();
    if (last->done()) {
      context.TryCancel();
      break;
    }
  }
  grpc::Status status = stream->Finish();
  if (last.has_value() && last->done()) return last;
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED || absl::Now() >= deadline) {
    return last;  // not done yet: that is an answer too
  }
  if (!status.ok()) {
    return Named(FromGrpcStatus(status), "following operation " + id, cluster, endpoint);
  }
  return last;
}

absl::StatusOr<StateMoveProgress> CheckpointerStateMover::Await(const std::string& cluster,
                                                                const std::string& id,
                                                                absl::Time deadline) {
  ASSIGN_OR_RETURN(std::optional<codeco::common::v1::Operation> op, Watch(cluster, id, deadline));
  if (!op.has_value()) return StateMoveProgress{.done = false, .phase = "not reported yet"};
  return ProgressOf(*op);
}

absl::StatusOr<std::string> CheckpointerStateMover::StartBackup(const StateBackupRequest& backup,
                                                                absl::Time deadline) {
  ASSIGN_OR_RETURN(std::string endpoint, EndpointOf(backup.cluster, backup.checkpointer));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, channels_.Get(endpoint));
  std::unique_ptr<cp::CheckpointerService::Stub> stub = cp::CheckpointerService::NewStub(channel);
  cp::CreateCheckpointRequest request;
  request.mutable_source()->set_cluster(backup.cluster);
  request.mutable_source()->set_node(backup.node);
  request.mutable_source()->set_pod(backup.pod);
  request.set_stop_after_checkpoint(false);
  request.set_request_id(backup.request_id);
  grpc::ClientContext context;
  SetOutgoingDeadline(context, options_.call_timeout, deadline);
  cp::CreateCheckpointResponse response;
  grpc::Status status = stub->CreateCheckpoint(&context, request, &response);
  if (!status.ok()) {
    return Named(FromGrpcStatus(status), "CreateCheckpoint of " + backup.pod, backup.cluster,
                 endpoint);
  }
  if (response.operation().id().empty()) {
    return absl::UnknownError(absl::StrCat("the checkpointer of ", backup.cluster,
                                           " answered CreateCheckpoint without an operation"));
  }
  return response.operation().id();
}

absl::StatusOr<StateBackupProgress> CheckpointerStateMover::AwaitBackup(
    const std::string& cluster, const std::string& id, absl::Time deadline) {
  ASSIGN_OR_RETURN(std::optional<codeco::common::v1::Operation> op, Watch(cluster, id, deadline));
  if (!op.has_value()) return StateBackupProgress{.done = false, .phase = "not reported yet"};
  const StateMoveProgress progress = ProgressOf(*op);
  StateBackupProgress out{.done = progress.done, .status = progress.status,
                          .phase = progress.phase};
  if (out.done && out.status.ok()) {
    cp::Checkpoint checkpoint;
    if (!op->result().UnpackTo(&checkpoint) || checkpoint.image_reference().empty()) {
      out.status = absl::UnknownError(absl::StrCat(
          "backup operation ", id, " at the checkpointer of ", cluster, " ended without an image"));
      return out;
    }
    out.checkpoint_id = checkpoint.id();
    out.image_reference = checkpoint.image_reference();
    out.state_bytes = checkpoint.state_bytes();
  }
  return out;
}

absl::Status CheckpointerStateMover::DeleteBackup(const std::string& cluster,
                                                  const std::string& checkpoint_id,
                                                  absl::Time deadline) {
  ASSIGN_OR_RETURN(std::string endpoint, EndpointOf(cluster, ""));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, channels_.Get(endpoint));
  std::unique_ptr<cp::CheckpointerService::Stub> stub = cp::CheckpointerService::NewStub(channel);
  cp::DeleteCheckpointRequest request;
  request.set_id(checkpoint_id);
  request.set_delete_image(true);
  grpc::ClientContext context;
  SetOutgoingDeadline(context, options_.call_timeout, deadline);
  cp::DeleteCheckpointResponse response;
  grpc::Status status = stub->DeleteCheckpoint(&context, request, &response);
  if (status.ok() || status.error_code() == grpc::StatusCode::NOT_FOUND) return absl::OkStatus();
  return Named(FromGrpcStatus(status), "DeleteCheckpoint of " + checkpoint_id, cluster, endpoint);
}

}  // namespace codeco::swm
