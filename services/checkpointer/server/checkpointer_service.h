#pragma once
// codeco.checkpointer.v1.CheckpointerService over the checkpointer core:
// requests are checked and turned into stored operations, reads come from
// the store, and WatchOperation streams an operation until it is done.

#include <atomic>
#include <memory>

#include "checkpointer/core/checkpointer.h"
#include "codeco/checkpointer/v1/checkpointer_service.grpc.pb.h"
#include "codeco/common/executor.h"

namespace codeco::checkpointer {

/// The gRPC face of one Checkpointer (not owned; must outlive the service;
/// a subclass may own it, as codeco-checkpointer's main does).
class CheckpointerServiceImpl : public v1::CheckpointerService::CallbackService {
 public:
  /// Serves `checkpointer`; at most `max_watchers` WatchOperation streams at once.
  CheckpointerServiceImpl(Checkpointer& checkpointer, int max_watchers);

  grpc::ServerUnaryReactor* CreateCheckpoint(grpc::CallbackServerContext* context,
                                             const v1::CreateCheckpointRequest* request,
                                             v1::CreateCheckpointResponse* response) override;
  grpc::ServerUnaryReactor* GetCheckpoint(grpc::CallbackServerContext* context,
                                          const v1::GetCheckpointRequest* request,
                                          v1::GetCheckpointResponse* response) override;
  grpc::ServerUnaryReactor* ListCheckpoints(grpc::CallbackServerContext* context,
                                            const v1::ListCheckpointsRequest* request,
                                            v1::ListCheckpointsResponse* response) override;
  grpc::ServerUnaryReactor* DeleteCheckpoint(grpc::CallbackServerContext* context,
                                             const v1::DeleteCheckpointRequest* request,
                                             v1::DeleteCheckpointResponse* response) override;
  grpc::ServerUnaryReactor* RestoreCheckpoint(grpc::CallbackServerContext* context,
                                              const v1::RestoreCheckpointRequest* request,
                                              v1::RestoreCheckpointResponse* response) override;
  grpc::ServerUnaryReactor* MigrateContainer(grpc::CallbackServerContext* context,
                                             const v1::MigrateContainerRequest* request,
                                             v1::MigrateContainerResponse* response) override;
  grpc::ServerUnaryReactor* GetOperation(grpc::CallbackServerContext* context,
                                         const v1::GetOperationRequest* request,
                                         v1::GetOperationResponse* response) override;
  grpc::ServerWriteReactor<v1::WatchOperationResponse>* WatchOperation(
      grpc::CallbackServerContext* context, const v1::WatchOperationRequest* request) override;

 private:
  Checkpointer& checkpointer_;
  const int max_watchers_;
  std::atomic<int> watchers_{0};
  BoundedExecutor io_;
};

}  // namespace codeco::checkpointer
