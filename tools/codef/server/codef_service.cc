#include "codef_service.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/status.h"

namespace codeco::codef {
namespace {

namespace v1 = codeco::codef::v1;

constexpr int kDefaultPageSize = 100;
constexpr int kMaxPageSize = 1000;

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

v1::LinkConditions ToProto(const LinkProperties& p) {
  v1::LinkConditions out;
  out.set_one_way_latency_ns(p.one_way_latency_ns);
  out.set_bandwidth_bps(p.bandwidth_bps);
  out.set_loss_ratio(p.loss);
  out.set_cut(p.cut);
  return out;
}

LinkProperties FromProto(const v1::LinkConditions& c) {
  LinkProperties p;
  p.one_way_latency_ns = c.one_way_latency_ns();
  p.bandwidth_bps = c.bandwidth_bps();
  p.loss = c.loss_ratio();
  p.cut = c.cut();
  return p;
}

}  // namespace

grpc::ServerUnaryReactor* CodefControlService::ListClusters(grpc::CallbackServerContext* context,
                                                            const v1::ListClustersRequest* request,
                                                            v1::ListClustersResponse* response) {
  if (request->page_size() < 0) {
    return Answer(context, InvalidFieldError("page_size", "must not be negative"));
  }
  int64_t offset = 0;
  if (!request->page_token().empty() &&
      (!absl::SimpleAtoi(request->page_token(), &offset) || offset < 0)) {
    return Answer(context, InvalidFieldError("page_token", "not a token from this server"));
  }
  int limit =
      request->page_size() == 0 ? kDefaultPageSize : std::min(request->page_size(), kMaxPageSize);
  std::vector<v1::EmulatedCluster> clusters = federation_->ListClusters();
  for (int64_t i = offset; i < static_cast<int64_t>(clusters.size()); ++i) {
    if (response->clusters_size() == limit) {
      response->set_next_page_token(absl::StrCat(i));
      break;
    }
    *response->add_clusters() = std::move(clusters[i]);
  }
  return Answer(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* CodefControlService::SetLinkConditions(
    grpc::CallbackServerContext* context, const v1::SetLinkConditionsRequest* request,
    v1::SetLinkConditionsResponse* response) {
  absl::Status status =
      federation_->SetLink(request->from_cluster(), request->to_cluster(),
                           FromProto(request->conditions()), request->symmetric());
  if (status.ok()) {
    auto now = federation_->GetLink(request->from_cluster(), request->to_cluster());
    status = now.status();
    if (now.ok()) *response->mutable_conditions() = ToProto(*now);
  }
  return Answer(context, status);
}

grpc::ServerUnaryReactor* CodefControlService::GetLinkConditions(
    grpc::CallbackServerContext* context, const v1::GetLinkConditionsRequest* request,
    v1::GetLinkConditionsResponse* response) {
  auto now = federation_->GetLink(request->from_cluster(), request->to_cluster());
  if (now.ok()) *response->mutable_conditions() = ToProto(*now);
  return Answer(context, now.status());
}

grpc::ServerUnaryReactor* CodefControlService::ResetLinkConditions(
    grpc::CallbackServerContext* context, const v1::ResetLinkConditionsRequest* request,
    v1::ResetLinkConditionsResponse* response) {
  absl::Status status = federation_->ResetLink(request->from_cluster(), request->to_cluster());
  if (status.ok()) {
    auto now = federation_->GetLink(request->from_cluster(), request->to_cluster());
    status = now.status();
    if (now.ok()) *response->mutable_conditions() = ToProto(*now);
  }
  return Answer(context, status);
}

grpc::ServerUnaryReactor* CodefControlService::FailNode(grpc::CallbackServerContext* context,
                                                        const v1::FailNodeRequest* request,
                                                        v1::FailNodeResponse* response) {
  auto failed = federation_->FailNode(request->cluster(), request->node());
  if (failed.ok()) response->set_failed_pod_count(*failed);
  return Answer(context, failed.status());
}

grpc::ServerUnaryReactor* CodefControlService::RecoverNode(grpc::CallbackServerContext* context,
                                                           const v1::RecoverNodeRequest* request,
                                                           v1::RecoverNodeResponse*) {
  return Answer(context, federation_->RecoverNode(request->cluster(), request->node()));
}

grpc::ServerUnaryReactor* CodefControlService::PartitionCluster(
    grpc::CallbackServerContext* context, const v1::PartitionClusterRequest* request,
    v1::PartitionClusterResponse*) {
  return Answer(context, federation_->SetPartitioned(request->cluster(), true));
}

grpc::ServerUnaryReactor* CodefControlService::HealCluster(grpc::CallbackServerContext* context,
                                                           const v1::HealClusterRequest* request,
                                                           v1::HealClusterResponse*) {
  return Answer(context, federation_->SetPartitioned(request->cluster(), false));
}

grpc::ServerUnaryReactor* CodefControlService::CutHub(grpc::CallbackServerContext* context,
                                                      const v1::CutHubRequest*,
                                                      v1::CutHubResponse*) {
  return Answer(context, federation_->SetHubCut(true));
}

grpc::ServerUnaryReactor* CodefControlService::HealHub(grpc::CallbackServerContext* context,
                                                       const v1::HealHubRequest*,
                                                       v1::HealHubResponse*) {
  return Answer(context, federation_->SetHubCut(false));
}

grpc::ServerUnaryReactor* CodefControlService::SetPodLoad(grpc::CallbackServerContext* context,
                                                          const v1::SetPodLoadRequest* request,
                                                          v1::SetPodLoadResponse*) {
  return Answer(context, federation_->SetPodLoad(request->cluster(), request->pod(),
                                                 request->usage_profile()));
}

grpc::ServerUnaryReactor* CodefControlService::EndPod(grpc::CallbackServerContext* context,
                                                      const v1::EndPodRequest* request,
                                                      v1::EndPodResponse*) {
  return Answer(context, federation_->EndPod(request->cluster(), request->pod(),
                                             request->succeeded(), request->message()));
}

grpc::ServerUnaryReactor* CodefControlService::InstallVirtualLink(
    grpc::CallbackServerContext* context, const v1::InstallVirtualLinkRequest* request,
    v1::InstallVirtualLinkResponse* response) {
  absl::Status status =
      federation_->PutVirtualLink(request->id(), request->source_cluster(),
                                  request->target_cluster(), request->target_endpoint());
  response->set_installed(static_cast<int32_t>(federation_->VirtualLinkCount()));
  return Answer(context, status);
}

grpc::ServerUnaryReactor* CodefControlService::RemoveVirtualLink(
    grpc::CallbackServerContext* context, const v1::RemoveVirtualLinkRequest* request,
    v1::RemoveVirtualLinkResponse* response) {
  absl::Status status = federation_->DeleteVirtualLink(request->id());
  response->set_installed(static_cast<int32_t>(federation_->VirtualLinkCount()));
  return Answer(context, status);
}

grpc::ServerUnaryReactor* CodefControlService::SetClusterLoad(
    grpc::CallbackServerContext* context, const v1::SetClusterLoadRequest* request,
    v1::SetClusterLoadResponse*) {
  return Answer(context, federation_->SetClusterLoad(request->cluster(), request->load_factor()));
}

grpc::ServerUnaryReactor* CodefControlService::SetNodeLoad(grpc::CallbackServerContext* context,
                                                           const v1::SetNodeLoadRequest* request,
                                                           v1::SetNodeLoadResponse* response) {
  NodeLoadChange change;
  if (request->cpu_case() == v1::SetNodeLoadRequest::kCpuFraction) {
    change.cpu_fraction = request->cpu_fraction();
  } else if (request->cpu_case() == v1::SetNodeLoadRequest::kCpuMillicores) {
    change.cpu_millicores = request->cpu_millicores();
  }
  if (request->has_memory_bytes()) change.memory_bytes = request->memory_bytes();
  absl::StatusOr<v1::SetNodeLoadResponse> result =
      federation_->SetNodeLoad(request->cluster(), request->node(), change);
  if (result.ok()) *response = *std::move(result);
  return Answer(context, result.status());
}

}  // namespace codeco::codef
