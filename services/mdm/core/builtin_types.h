#pragma once
// The types every codeco-mdm registers at start (docs/mdm.md), whatever
// connectors it runs:
//
//   DataSet   DataSet/<name>   {clusters: [cluster, ...], sizeBytes, description}
//
// A data set is where a workload's dataLocality may point: the hub SWM
// (swm.mdm) places such a workload only in the clusters the data set's
// `clusters` lists.

#include <vector>

#include "absl/status/status.h"
#include "codeco/mdm/v1/metadata.pb.h"
#include "mdm/core/metadata_store.h"

namespace codeco::mdm {

/// The built-in types.
std::vector<v1::TypeDefinition> BuiltInTypes();

/// Registers BuiltInTypes() in `store` (a no-op when registered as is).
absl::Status RegisterBuiltInTypes(MetadataStore& store);

}  // namespace codeco::mdm
