#include "checkpointer/server/checkpointer_service.h"

#include "absl/strings/str_cat.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/serve_on_executor.h"
#include "codeco/common/status.h"
#include "codeco/common/operation_watch.h"

namespace codeco::checkpointer {

CheckpointerServiceImpl::CheckpointerServiceImpl(Checkpointer& checkpointer, int max_watchers)
    : checkpointer_(checkpointer), max_watchers_(max_watchers), io_(2, 256) {}

grpc::ServerUnaryReactor* CheckpointerServiceImpl::CreateCheckpoint(
    grpc::CallbackServerContext* context, const v1::CreateCheckpointRequest* request,
    v1::CreateCheckpointResponse* response) {
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) {
    absl::StatusOr<common::v1::Operation> op = checkpointer_.CreateCheckpoint(*request);
    if (op.ok()) *response->mutable_operation() = *std::move(op);
    return op.status();
  });
}

grpc::ServerUnaryReactor* CheckpointerServiceImpl::GetCheckpoint(
    grpc::CallbackServerContext* context, const v1::GetCheckpointRequest* request,
    v1::GetCheckpointResponse* response) {
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) {
    absl::StatusOr<v1::Checkpoint> checkpoint = checkpointer_.GetCheckpoint(request->id());
    if (checkpoint.ok()) *response->mutable_checkpoint() = *std::move(checkpoint);
    return checkpoint.status();
  });
}

grpc::ServerUnaryReactor* CheckpointerServiceImpl::ListCheckpoints(
    grpc::CallbackServerContext* context, const v1::ListCheckpointsRequest* request,
    v1::ListCheckpointsResponse* response) {
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) {
    absl::StatusOr<v1::ListCheckpointsResponse> page = checkpointer_.ListCheckpoints(*request);
    if (page.ok()) *response = *std::move(page);
    return page.status();
  });
}

grpc::ServerUnaryReactor* CheckpointerServiceImpl::DeleteCheckpoint(
    grpc::CallbackServerContext* context, const v1::DeleteCheckpointRequest* request,
    v1::DeleteCheckpointResponse* /*response*/) {
  return ServeOnExecutor(io_, context, [this, request](absl::Time) {
    return checkpointer_.DeleteCheckpoint(*request);
  });
}

grpc::ServerUnaryReactor* CheckpointerServiceImpl::RestoreCheckpoint(
    grpc::CallbackServerContext* context, const v1::RestoreCheckpointRequest* request,
    v1::RestoreCheckpointResponse* response) {
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) {
    absl::StatusOr<common::v1::Operation> op = checkpointer_.RestoreCheckpoint(*request);
    if (op.ok()) *response->mutable_operation() = *std::move(op);
    return op.status();
  });
}

grpc::ServerUnaryReactor* CheckpointerServiceImpl::MigrateContainer(
    grpc::CallbackServerContext* context, const v1::MigrateContainerRequest* request,
    v1::MigrateContainerResponse* response) {
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) {
    absl::StatusOr<common::v1::Operation> op = checkpointer_.MigrateContainer(*request);
    if (op.ok()) *response->mutable_operation() = *std::move(op);
    return op.status();
  });
}

grpc::ServerUnaryReactor* CheckpointerServiceImpl::GetOperation(
    grpc::CallbackServerContext* context, const v1::GetOperationRequest* request,
    v1::GetOperationResponse* response) {
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) {
    absl::StatusOr<common::v1::Operation> op = checkpointer_.GetOperation(request->id());
    if (op.ok()) *response->mutable_operation() = *std::move(op);
    return op.status();
  });
}

grpc::ServerWriteReactor<v1::WatchOperationResponse>* CheckpointerServiceImpl::WatchOperation(
    grpc::CallbackServerContext* /*context*/, const v1::WatchOperationRequest* request) {
  return new OperationWatch<v1::WatchOperationResponse>(
      "checkpointer",
      [this](const std::string& id) { return checkpointer_.GetOperation(id); },
      checkpointer_.listeners(), watchers_, max_watchers_, request->id());
}

}  // namespace codeco::checkpointer
