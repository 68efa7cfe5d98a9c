#pragma once
// `codecoctl get metadata`: the metadata graph of the federation's MDMs
// (docs/mdm.md), as a table of entities or one entity with its neighbours.

#include <string>

#include "absl/status/statusor.h"
#include "cli.h"
#include "codeco/mdm/v1/mdm_service.pb.h"

namespace codeco::ctl {

/// `codecoctl get metadata [ID] [--type T] [--cluster C] [--where EXPR]...
/// [--depth N] [--mdm ADDR] [-o table|yaml|json]`: without ID, the entities
/// of every MDM `codecoctl up` started (or of --mdm), of type T and cluster C
/// when given, meeting every --where (ParseWhere);
/// with ID, that entity and what is up to N hops (default 1) from it.
int RunGetMetadata(const Args& args);

/// One `--where` expression as a property predicate: `P=V` (or `P==V`),
/// `P!=V`, `P<V`, `P<=V`, `P>V`, `P>=V`, `P in (V1,V2,...)`,
/// `P contains V`, `P` (exists) or `!P` (missing). A value is a number when
/// it reads as one, true or false, or else a string ("quoted" to keep a
/// number or a boolean a string). INVALID_ARGUMENT says what is wrong.
absl::StatusOr<mdm::v1::PropertyPredicate> ParseWhere(const std::string& expression);

/// The entities as a table: ID, TYPE, CLUSTER, SOURCE, UPDATED and the
/// properties as one line of JSON (cut at `properties_width` characters).
std::string EntitiesTable(const mdm::v1::ListEntitiesResponse& entities,
                          size_t properties_width = 80);

/// One entity and its neighbourhood as text: the entity's fields and
/// properties, then each relationship as "FROM -TYPE-> TO".
std::string NeighbourhoodText(const mdm::v1::QueryGraphResponse& graph);

}  // namespace codeco::ctl
