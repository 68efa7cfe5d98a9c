#pragma once
// codeco.lms.v1.LmsService over one emulated cluster (callback API). Unary
// calls run inline: the core is in memory and each call holds the cluster's
// lock only briefly. Watches are write reactors fed by the cluster's events.
// With a PodProcessRunner, RestoreContainer runs on a small executor: a
// restored Redis pod's redis-server loads its RDB outside the cluster's lock
// and the call answers once it has loaded (the pod Running) or failed (the
// error, no pod left).

#include <memory>

#include "codeco/common/executor.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "federation.h"
#include "pod_processes.h"

namespace codeco::codef {

/// The LMS of one emulated cluster, served over gRPC.
class EmulatedLmsService final : public codeco::lms::v1::LmsService::CallbackService {
 public:
  /// Serves `cluster`, which must outlive the service. `processes` (may be
  /// null) is the runner the cluster was built with; restores wait on it.
  explicit EmulatedLmsService(SynchronizedCluster* cluster, PodProcessRunner* processes = nullptr);

  // The RPCs of codeco.lms.v1.LmsService; lms_service.proto documents each
  // and docs/codef.md the emulator's semantics.

  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* context,
                                      const codeco::lms::v1::ListNodesRequest* request,
                                      codeco::lms::v1::ListNodesResponse* response) override;
  grpc::ServerUnaryReactor* GetNode(grpc::CallbackServerContext* context,
                                    const codeco::lms::v1::GetNodeRequest* request,
                                    codeco::lms::v1::GetNodeResponse* response) override;
  grpc::ServerWriteReactor<codeco::lms::v1::WatchNodesResponse>* WatchNodes(
      grpc::CallbackServerContext* context,
      const codeco::lms::v1::WatchNodesRequest* request) override;
  grpc::ServerUnaryReactor* CreatePod(grpc::CallbackServerContext* context,
                                      const codeco::lms::v1::CreatePodRequest* request,
                                      codeco::lms::v1::CreatePodResponse* response) override;
  grpc::ServerUnaryReactor* GetPod(grpc::CallbackServerContext* context,
                                   const codeco::lms::v1::GetPodRequest* request,
                                   codeco::lms::v1::GetPodResponse* response) override;
  grpc::ServerUnaryReactor* ListPods(grpc::CallbackServerContext* context,
                                     const codeco::lms::v1::ListPodsRequest* request,
                                     codeco::lms::v1::ListPodsResponse* response) override;
  grpc::ServerUnaryReactor* DeletePod(grpc::CallbackServerContext* context,
                                      const codeco::lms::v1::DeletePodRequest* request,
                                      codeco::lms::v1::DeletePodResponse* response) override;
  grpc::ServerWriteReactor<codeco::lms::v1::WatchPodsResponse>* WatchPods(
      grpc::CallbackServerContext* context,
      const codeco::lms::v1::WatchPodsRequest* request) override;
  grpc::ServerUnaryReactor* GetNodeUsage(grpc::CallbackServerContext* context,
                                         const codeco::lms::v1::GetNodeUsageRequest* request,
                                         codeco::lms::v1::GetNodeUsageResponse* response) override;
  grpc::ServerUnaryReactor* CheckpointContainer(
      grpc::CallbackServerContext* context,
      const codeco::lms::v1::CheckpointContainerRequest* request,
      codeco::lms::v1::CheckpointContainerResponse* response) override;
  grpc::ServerUnaryReactor* RestoreContainer(
      grpc::CallbackServerContext* context, const codeco::lms::v1::RestoreContainerRequest* request,
      codeco::lms::v1::RestoreContainerResponse* response) override;

 private:
  SynchronizedCluster* cluster_;
  PodProcessRunner* processes_;
  std::unique_ptr<BoundedExecutor> restores_;  // with processes_ only
};

}  // namespace codeco::codef
