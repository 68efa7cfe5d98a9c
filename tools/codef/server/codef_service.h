#pragma once
// codeco.codef.v1.CodefService: the control API of the emulated federation
// (fault and traffic injection), translated onto Federation.

#include "codeco/codef/v1/codef_service.grpc.pb.h"
#include "federation.h"

namespace codeco::codef {

/// The control API over one Federation.
class CodefControlService final : public codeco::codef::v1::CodefService::CallbackService {
 public:
  /// Serves `federation`, which must outlive the service.
  explicit CodefControlService(Federation* federation) : federation_(federation) {}

  // The RPCs of codeco.codef.v1.CodefService, documented in codef_service.proto.

  grpc::ServerUnaryReactor* ListClusters(
      grpc::CallbackServerContext* context, const codeco::codef::v1::ListClustersRequest* request,
      codeco::codef::v1::ListClustersResponse* response) override;
  grpc::ServerUnaryReactor* SetLinkConditions(
      grpc::CallbackServerContext* context,
      const codeco::codef::v1::SetLinkConditionsRequest* request,
      codeco::codef::v1::SetLinkConditionsResponse* response) override;
  grpc::ServerUnaryReactor* GetLinkConditions(
      grpc::CallbackServerContext* context,
      const codeco::codef::v1::GetLinkConditionsRequest* request,
      codeco::codef::v1::GetLinkConditionsResponse* response) override;
  grpc::ServerUnaryReactor* ResetLinkConditions(
      grpc::CallbackServerContext* context,
      const codeco::codef::v1::ResetLinkConditionsRequest* request,
      codeco::codef::v1::ResetLinkConditionsResponse* response) override;
  grpc::ServerUnaryReactor* FailNode(grpc::CallbackServerContext* context,
                                     const codeco::codef::v1::FailNodeRequest* request,
                                     codeco::codef::v1::FailNodeResponse* response) override;
  grpc::ServerUnaryReactor* RecoverNode(grpc::CallbackServerContext* context,
                                        const codeco::codef::v1::RecoverNodeRequest* request,
                                        codeco::codef::v1::RecoverNodeResponse* response) override;
  grpc::ServerUnaryReactor* PartitionCluster(
      grpc::CallbackServerContext* context,
      const codeco::codef::v1::PartitionClusterRequest* request,
      codeco::codef::v1::PartitionClusterResponse* response) override;
  grpc::ServerUnaryReactor* HealCluster(grpc::CallbackServerContext* context,
                                        const codeco::codef::v1::HealClusterRequest* request,
                                        codeco::codef::v1::HealClusterResponse* response) override;
  grpc::ServerUnaryReactor* CutHub(grpc::CallbackServerContext* context,
                                   const codeco::codef::v1::CutHubRequest* request,
                                   codeco::codef::v1::CutHubResponse* response) override;
  grpc::ServerUnaryReactor* HealHub(grpc::CallbackServerContext* context,
                                    const codeco::codef::v1::HealHubRequest* request,
                                    codeco::codef::v1::HealHubResponse* response) override;
  grpc::ServerUnaryReactor* SetPodLoad(grpc::CallbackServerContext* context,
                                       const codeco::codef::v1::SetPodLoadRequest* request,
                                       codeco::codef::v1::SetPodLoadResponse* response) override;
  grpc::ServerUnaryReactor* EndPod(grpc::CallbackServerContext* context,
                                   const codeco::codef::v1::EndPodRequest* request,
                                   codeco::codef::v1::EndPodResponse* response) override;
  grpc::ServerUnaryReactor* SetClusterLoad(
      grpc::CallbackServerContext* context, const codeco::codef::v1::SetClusterLoadRequest* request,
      codeco::codef::v1::SetClusterLoadResponse* response) override;
  grpc::ServerUnaryReactor* SetNodeLoad(grpc::CallbackServerContext* context,
                                        const codeco::codef::v1::SetNodeLoadRequest* request,
                                        codeco::codef::v1::SetNodeLoadResponse* response) override;
  grpc::ServerUnaryReactor* InstallVirtualLink(
      grpc::CallbackServerContext* context,
      const codeco::codef::v1::InstallVirtualLinkRequest* request,
      codeco::codef::v1::InstallVirtualLinkResponse* response) override;
  grpc::ServerUnaryReactor* RemoveVirtualLink(
      grpc::CallbackServerContext* context,
      const codeco::codef::v1::RemoveVirtualLinkRequest* request,
      codeco::codef::v1::RemoveVirtualLinkResponse* response) override;

 private:
  Federation* federation_;
};

}  // namespace codeco::codef
