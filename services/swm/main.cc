// codeco-swm: wires the swm service into the shared bootstrap. The hub serves
// placement and removal (swm/server/swm_service.h); an MC serves the L2 solve
// and the two-phase commit of its own cluster (swm/server/cluster_service.h).
#include "codeco/common/server.h"
#include "swm/server/cluster_reservations.h"
#include "swm/server/plan_store.h"
#include "swm/server/swm_service.h"

int main(int argc, char** argv) {
  return codeco::RunServiceMain(
      argc, argv,
      {.name = "swm",
       .column_families = {codeco::swm::kPlansFamily, codeco::swm::kReservationsFamily,
                           "migrations", codeco::swm::kOperationsFamily},
       .add_config = codeco::swm::AddSwmConfig,
       .make_services = codeco::swm::MakeSwmServices,
       .unimplemented_notes = {{"codeco.swm.v1.SwmService",
                                "migration (MigrateWorkload, migrations) lands "
                                "with the rest of issue #5"}}});
}
