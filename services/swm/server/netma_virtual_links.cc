#include "swm/server/netma_virtual_links.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "codeco/common/grpc_status.h"
#include "grpcpp/client_context.h"
#include "swm/core/channel_status.h"

namespace codeco::swm {

namespace netma = codeco::netma::v1;

NetmaVirtualLinks::NetmaVirtualLinks(std::shared_ptr<grpc::Channel> channel,
                                     absl::Duration call_timeout)
    : stub_(netma::NetmaService::NewStub(std::move(channel))), call_timeout_(call_timeout) {}

absl::Time NetmaVirtualLinks::Deadline(absl::Time deadline) const {
  return std::min(deadline, absl::Now() + call_timeout_);
}

absl::StatusOr<std::string> NetmaVirtualLinks::Create(const VirtualLinkSpec& spec,
                                                      const std::string& request_id,
                                                      absl::Time deadline) {
  netma::CreateVirtualLinkRequest request;
  *request.mutable_virtual_link() = VirtualLinkFor(spec);
  request.set_request_id(request_id);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(Deadline(deadline)));
  netma::CreateVirtualLinkResponse response;
  grpc::Status status = stub_->CreateVirtualLink(&context, request, &response);
  if (!status.ok()) {
    absl::Status s = FromGrpcStatus(status);
    return absl::Status(s.code(), absl::StrCat("NetMA: ", s.message()));
  }
  return response.virtual_link().id();
}

absl::Status NetmaVirtualLinks::Delete(const std::string& id, absl::Time deadline) {
  netma::DeleteVirtualLinkRequest request;
  request.set_id(id);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(Deadline(deadline)));
  netma::DeleteVirtualLinkResponse response;
  grpc::Status status = stub_->DeleteVirtualLink(&context, request, &response);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) return absl::OkStatus();
  if (!status.ok()) {
    absl::Status s = FromGrpcStatus(status);
    return absl::Status(s.code(), absl::StrCat("NetMA: ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<netma::VirtualLink>> NetmaVirtualLinks::ListAll(
    const std::string& application, absl::Time deadline) {
  std::vector<netma::VirtualLink> out;
  std::string token;
  const absl::Time until = Deadline(deadline);
  do {
    netma::ListVirtualLinksRequest request;
    request.set_page_size(1000);
    request.set_page_token(token);
    request.set_application(application);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(until));
    netma::ListVirtualLinksResponse response;
    grpc::Status status = stub_->ListVirtualLinks(&context, request, &response);
    if (!status.ok()) {
      absl::Status s = FromGrpcStatus(status);
      return absl::Status(s.code(), absl::StrCat("NetMA: ", s.message()));
    }
    for (netma::VirtualLink& l : *response.mutable_virtual_links()) out.push_back(std::move(l));
    token = response.next_page_token();
  } while (!token.empty());
  return out;
}

absl::StatusOr<std::vector<VirtualLinkRef>> NetmaVirtualLinks::List(const std::string& application,
                                                                    absl::Time deadline) {
  absl::StatusOr<std::vector<netma::VirtualLink>> all = ListAll(application, deadline);
  if (!all.ok()) return all.status();
  std::vector<VirtualLinkRef> out;
  for (const netma::VirtualLink& l : *all) {
    out.push_back(VirtualLinkRef{.id = l.id(),
                                 .application = l.application(),
                                 .channel = l.channel(),
                                 .managed_by_swm = l.managed_by() == kSwmManagedBy});
  }
  return out;
}

}  // namespace codeco::swm
