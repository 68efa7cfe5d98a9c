// codeco-mdm: wires the mdm service into the shared bootstrap.
#include "codeco/mdm/v1/mdm_service.grpc.pb.h"
#include "codeco/common/server.h"

int main(int argc, char** argv) {
  return codeco::RunServiceMain(
      argc, argv,
      {.name = "mdm",
       .column_families = {"events", "entities", "relationships", "types"},
       .make_services = codeco::ServeNotYetImplemented<codeco::mdm::v1::MdmService::CallbackService>(),
       .unimplemented_notes = {{"codeco.mdm.v1.MdmService",
                                "metadata management lands with its own issue"}}});
}
