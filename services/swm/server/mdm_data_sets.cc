#include "swm/server/mdm_data_sets.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "codeco/common/call_deadline.h"
#include "codeco/common/grpc_status.h"
#include "codeco/mdm/v1/mdm_service.grpc.pb.h"

namespace codeco::swm {

MdmDataSets::MdmDataSets(std::shared_ptr<grpc::Channel> channel, absl::Duration timeout)
    : channel_(std::move(channel)), timeout_(timeout) {}

absl::StatusOr<std::optional<std::vector<std::string>>> MdmDataSets::ClustersHolding(
    const std::string& name) {
  auto mdm = mdm::v1::MdmService::NewStub(channel_);
  mdm::v1::GetEntityRequest request;
  request.set_id(absl::StrCat("DataSet/", name));
  mdm::v1::GetEntityResponse response;
  grpc::Status status = mdm->GetEntity(OutgoingContext(timeout_).get(), request, &response);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
    return std::optional<std::vector<std::string>>();
  }
  if (!status.ok()) return FromGrpcStatus(status);
  const mdm::v1::Entity& e = response.entity();
  if (e.type() != "DataSet") return std::optional<std::vector<std::string>>();
  std::vector<std::string> clusters;
  auto it = e.properties().fields().find("clusters");
  if (it != e.properties().fields().end()) {
    for (const google::protobuf::Value& v : it->second.list_value().values()) {
      if (v.kind_case() == google::protobuf::Value::kStringValue && !v.string_value().empty()) {
        clusters.push_back(v.string_value());
      }
    }
  }
  return std::optional<std::vector<std::string>>(std::move(clusters));
}

}  // namespace codeco::swm
