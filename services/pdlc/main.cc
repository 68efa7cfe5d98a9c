// codeco-pdlc: wires the pdlc service into the shared bootstrap.
#include "codeco/pdlc/v1/pdlc_service.grpc.pb.h"
#include "codeco/common/server.h"

int main(int argc, char** argv) {
  return codeco::RunServiceMain(
      argc, argv,
      {.name = "pdlc",
       .column_families = {"telemetry", "profiles", "models", "operations"},
       .make_services = codeco::ServeNotYetImplemented<codeco::pdlc::v1::PdlcService::CallbackService>(),
       .unimplemented_notes = {{"codeco.pdlc.v1.PdlcService",
                                "learning and context awareness land with their own issue"}}});
}
