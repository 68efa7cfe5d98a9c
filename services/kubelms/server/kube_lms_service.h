#pragma once
// codeco.lms.v1.LmsService served from a Kubernetes cluster (KubeLms) on
// gRPC's callback API. Unary calls block on kube-apiserver, so they run on a
// bounded executor (serve_on_executor.h); each watch runs on a thread of its
// own that follows the kube watch and feeds the stream, and stops when the
// client goes away.

#include <atomic>
#include <memory>

#include "codeco/common/executor.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "kubelms/core/kube_lms.h"

namespace codeco::kubelms {

/// The LMS of one Kubernetes cluster, served over gRPC.
class KubeLmsService final : public codeco::lms::v1::LmsService::CallbackService {
 public:
  /// Serves the cluster `api` reaches, as `options` say, with `threads`
  /// workers for unary calls and at most `max_watches` watches at once.
  /// `clock` (must outlive the service) measures durations; waits are real.
  KubeLmsService(std::unique_ptr<KubeApi> api, Clock* clock, KubeLmsOptions options, int threads,
                 int max_watches);
  ~KubeLmsService() override;

  // The RPCs of codeco.lms.v1.LmsService; lms_service.proto documents each
  // and docs/deploy.md what they do in Kubernetes terms.

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
  std::unique_ptr<KubeApi> api_;
  std::unique_ptr<KubeLms> lms_;
  std::unique_ptr<BoundedExecutor> executor_;
  int max_watches_;
  std::shared_ptr<std::atomic<int>> watches_;
};

}  // namespace codeco::kubelms
