#include "swm/server/codef_directory.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "codeco/common/call_deadline.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/proto_util.h"

namespace codeco::swm {
namespace {

namespace codef = codeco::codef::v1;

absl::Status Wrap(const grpc::Status& status, const std::string& what) {
  absl::Status s = FromGrpcStatus(status);
  return absl::Status(s.code(), absl::StrCat("CODEF control API: ", what, ": ", s.message()));
}

}  // namespace

CodefDirectory::CodefDirectory(std::shared_ptr<grpc::Channel> channel,
                               CodefDirectoryOptions options)
    : stub_(codef::CodefService::NewStub(std::move(channel))), options_(options) {}

absl::StatusOr<std::vector<ClusterEndpoint>> CodefDirectory::ListClusters() {
  std::vector<ClusterEndpoint> out;
  codef::ListClustersRequest request;
  do {
    codef::ListClustersResponse response;
    grpc::Status status =
        stub_->ListClusters(OutgoingContext(options_.call_timeout).get(), request, &response);
    if (!status.ok()) return Wrap(status, "ListClusters");
    for (const codef::EmulatedCluster& c : response.clusters()) {
      out.push_back(ClusterEndpoint{.name = c.name(),
                                    .labels = {.region = c.labels().region(),
                                               .country = c.labels().country(),
                                               .tier = TierName(c.labels().tier()),
                                               .provider = c.labels().provider()},
                                    .lms = c.lms_endpoint()});
    }
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  return out;
}

absl::StatusOr<std::optional<Link>> CodefDirectory::GetLink(const std::string& from,
                                                            const std::string& to) {
  codef::GetLinkConditionsRequest request;
  request.set_from_cluster(from);
  request.set_to_cluster(to);
  codef::GetLinkConditionsResponse response;
  grpc::Status status =
      stub_->GetLinkConditions(OutgoingContext(options_.call_timeout).get(), request, &response);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) return std::nullopt;
  if (!status.ok()) return Wrap(status, absl::StrCat("GetLinkConditions ", from, " -> ", to));
  const codef::LinkConditions& c = response.conditions();
  if (c.cut()) return std::nullopt;
  int64_t bandwidth = c.bandwidth_bps() > 0 ? c.bandwidth_bps() : options_.unlimited_bandwidth_bps;
  return Link{.from = from,
              .to = to,
              .latency_ns = c.one_way_latency_ns(),
              .free_bandwidth_bps = {bandwidth, bandwidth}};
}

}  // namespace codeco::swm
