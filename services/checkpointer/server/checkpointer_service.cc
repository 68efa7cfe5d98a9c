#include "checkpointer/server/checkpointer_service.h"

#include "absl/strings/str_cat.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/serve_on_executor.h"
#include "codeco/common/status.h"
#include "codeco/common/watch_stream.h"

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

// Streams one operation: its current state, then each stored change, and
// ends after the state with done = true. Refused past the watcher cap.
class CheckpointerServiceImpl::OperationWatch final
    : public WatchStream<v1::WatchOperationResponse> {
 public:
  OperationWatch(CheckpointerServiceImpl& service, const std::string& id)
      : service_(service), id_(id) {
    if (service_.watchers_.fetch_add(1) >= service_.max_watchers_) {
      Fail(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("checkpointer: already ", service_.max_watchers_,
                                     " open operation watches; retry later")));
      return;
    }
    if (id_.empty()) {
      Fail(ToGrpcStatus(InvalidFieldError("id", "is required")));
      return;
    }
    listener_ = service_.checkpointer_.listeners().Add([this] { Poke(); });
    Start();
  }

 private:
  absl::StatusOr<Batch> Next() override {
    absl::StatusOr<common::v1::Operation> op = service_.checkpointer_.GetOperation(id_);
    if (!op.ok()) return op.status();
    std::string bytes = op->SerializeAsString();
    if (bytes == sent_) return Batch{};
    sent_ = std::move(bytes);
    Batch batch;
    batch.last = op->done();
    batch.messages.emplace_back();
    *batch.messages.back().mutable_operation() = *std::move(op);
    return batch;
  }

  void Closed() override {
    if (listener_ != 0) service_.checkpointer_.listeners().Remove(listener_);
    service_.watchers_.fetch_sub(1);
  }

  CheckpointerServiceImpl& service_;
  const std::string id_;
  int listener_ = 0;
  std::string sent_;
};

grpc::ServerWriteReactor<v1::WatchOperationResponse>* CheckpointerServiceImpl::WatchOperation(
    grpc::CallbackServerContext* /*context*/, const v1::WatchOperationRequest* request) {
  return new OperationWatch(*this, request->id());
}

}  // namespace codeco::checkpointer
