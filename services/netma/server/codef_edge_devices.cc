#include "netma/server/codef_edge_devices.h"

#include "absl/strings/str_cat.h"
#include "codeco/common/grpc_status.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace codeco::netma {

CodefEdgeDevices::CodefEdgeDevices(const std::string& address, absl::Duration timeout)
    : stub_(codeco::codef::v1::CodefService::NewStub(
          grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))),
      timeout_(timeout) {}

absl::Status CodefEdgeDevices::Install(const v1::VirtualLink& link) {
  codeco::codef::v1::InstallVirtualLinkRequest request;
  request.set_id(link.id());
  request.set_source_cluster(link.source_cluster());
  request.set_target_cluster(link.target_cluster());
  request.set_target_endpoint(link.target_endpoint());
  codeco::codef::v1::InstallVirtualLinkResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  grpc::Status status = stub_->InstallVirtualLink(&context, request, &response);
  if (!status.ok()) {
    absl::Status s = FromGrpcStatus(status);
    return absl::Status(s.code(), absl::StrCat("CODEF: ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status CodefEdgeDevices::Remove(const std::string& id) {
  codeco::codef::v1::RemoveVirtualLinkRequest request;
  request.set_id(id);
  codeco::codef::v1::RemoveVirtualLinkResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  grpc::Status status = stub_->RemoveVirtualLink(&context, request, &response);
  if (status.ok() || status.error_code() == grpc::StatusCode::NOT_FOUND) return absl::OkStatus();
  absl::Status s = FromGrpcStatus(status);
  return absl::Status(s.code(), absl::StrCat("CODEF: ", s.message()));
}

}  // namespace codeco::netma
