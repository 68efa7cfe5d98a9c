// codeco-acm: wires the acm service into the shared bootstrap.
#include <iterator>

#include "acm/server/acm_service.h"
#include "acm/store/kv_application_store.h"
#include "codeco/common/server.h"

namespace {

std::vector<std::string> ColumnFamilies() {
  std::vector<std::string> families = codeco::acm::ApplicationColumnFamilies();
  for (const char* f : {"clusters", "neighborhoods", "operations"}) families.push_back(f);
  return families;
}

}  // namespace

int main(int argc, char** argv) {
  return codeco::RunServiceMain(
      argc, argv,
      {.name = "acm",
       .column_families = ColumnFamilies(),
       .make_services = [](codeco::ServiceContext& context)
           -> absl::StatusOr<std::vector<std::unique_ptr<grpc::Service>>> {
         std::vector<std::unique_ptr<grpc::Service>> services;
         services.push_back(codeco::acm::NewAcmService(context.store, context.clock));
         return services;
       },
       .unimplemented_notes = {{"codeco.acm.v1.AcmService",
                                "the MC agent's Push* and the operation RPCs of ACM land "
                                "with issue #4"}}});
}
