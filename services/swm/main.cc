// codeco-swm: wires the swm service into the shared bootstrap. The hub serves
// placement (swm/server); the MC role keeps the generated service for now.
#include "codeco/common/server.h"
#include "swm/server/plan_store.h"
#include "swm/server/swm_service.h"

int main(int argc, char** argv) {
  return codeco::RunServiceMain(
      argc, argv,
      {.name = "swm",
       .column_families = {codeco::swm::kPlansFamily, "reservations", "migrations",
                           codeco::swm::kOperationsFamily},
       .add_config = codeco::swm::AddSwmConfig,
       .make_services = codeco::swm::MakeSwmServices,
       .unimplemented_notes = {{"codeco.swm.v1.SwmService",
                                "the MC role (SolveCluster, Reserve/Commit/Release) and "
                                "migration land with the rest of issue #5"}}});
}
