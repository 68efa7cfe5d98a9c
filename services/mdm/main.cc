// codeco-mdm: the metadata store (event log, graph, types) on the service's
// RocksDB, served over gRPC (docs/mdm.md).
#include <memory>

#include "codeco/common/server.h"
#include "codeco/common/status.h"
#include "mdm/core/metadata_store.h"
#include "mdm/server/mdm_service.h"

namespace {

absl::StatusOr<std::vector<std::unique_ptr<grpc::Service>>> MakeServices(
    codeco::ServiceContext& context) {
  ASSIGN_OR_RETURN(std::unique_ptr<codeco::mdm::MetadataStore> store,
                   codeco::mdm::MetadataStore::Open(context.store, context.clock));
  std::vector<std::unique_ptr<grpc::Service>> services;
  services.push_back(std::make_unique<codeco::mdm::MdmServiceImpl>(std::move(store)));
  return services;
}

}  // namespace

int main(int argc, char** argv) {
  return codeco::RunServiceMain(argc, argv,
                                {.name = "mdm",
                                 .column_families = codeco::mdm::MetadataColumnFamilies(),
                                 .make_services = MakeServices});
}
