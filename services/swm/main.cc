// codeco-swm: wires the swm service into the shared bootstrap.
#include "codeco/swm/v1/swm_service.grpc.pb.h"
#include "codeco/common/server.h"

int main(int argc, char** argv) {
  return codeco::RunServiceMain(
      argc, argv,
      {.name = "swm",
       .column_families = {"plans", "reservations", "migrations", "operations"},
       .make_services = codeco::ServeNotYetImplemented<codeco::swm::v1::SwmService::CallbackService>(),
       .unimplemented_notes = {{"codeco.swm.v1.SwmService",
                                "federated placement lands with issue #5"}}});
}
