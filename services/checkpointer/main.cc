// codeco-checkpointer: wires the checkpointer service into the shared bootstrap.
#include "codeco/checkpointer/v1/checkpointer_service.grpc.pb.h"
#include "codeco/common/server.h"

int main(int argc, char** argv) {
  return codeco::RunServiceMain(
      argc, argv,
      {.name = "checkpointer",
       .column_families = {"checkpoints", "operations"},
       .make_services = codeco::ServeNotYetImplemented<codeco::checkpointer::v1::CheckpointerService::CallbackService>(),
       .unimplemented_notes = {{"codeco.checkpointer.v1.CheckpointerService",
                                "stateful migration lands with its own issue"}}});
}
