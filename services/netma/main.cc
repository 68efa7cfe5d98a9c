// codeco-netma: wires the netma service into the shared bootstrap.
#include "codeco/netma/v1/netma_service.grpc.pb.h"
#include "codeco/common/server.h"

int main(int argc, char** argv) {
  return codeco::RunServiceMain(
      argc, argv,
      {.name = "netma",
       .column_families = {"link_metrics", "topology", "virtual_links", "operations"},
       .make_services = codeco::ServeNotYetImplemented<codeco::netma::v1::NetmaService::CallbackService>(),
       .unimplemented_notes = {{"codeco.netma.v1.NetmaService",
                                "network management lands with issue #6"}}});
}
