// codeco-acm: wires the acm service into the shared bootstrap.
#include "codeco/acm/v1/acm_service.grpc.pb.h"
#include "codeco/common/server.h"

int main(int argc, char** argv) {
  return codeco::RunServiceMain(
      argc, argv,
      {.name = "acm",
       .column_families = {"applications", "application_revisions", "clusters", "neighborhoods", "operations"},
       .make_services = codeco::ServeNotYetImplemented<codeco::acm::v1::AcmService::CallbackService>(),
       .unimplemented_notes = {{"codeco.acm.v1.AcmService",
                                "the ACM gateway lands with issue #4"}}});
}
