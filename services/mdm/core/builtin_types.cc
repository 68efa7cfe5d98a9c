#include "mdm/core/builtin_types.h"

#include "absl/strings/str_cat.h"

namespace codeco::mdm {

std::vector<v1::TypeDefinition> BuiltInTypes() {
  v1::TypeDefinition data_set;
  data_set.set_name("DataSet");
  data_set.set_kind(v1::TYPE_KIND_ENTITY);
  data_set.set_description(
      "A data set; `clusters` lists the clusters holding a copy (a workload whose dataLocality "
      "names it is placed only there).");
  data_set.set_properties_schema(R"({"type": "object", "required": ["clusters"],
    "properties": {
      "clusters": {"type": "array", "items": {"type": "string", "minLength": 1}},
      "sizeBytes": {"type": "integer", "minimum": 0},
      "description": {"type": "string"}}})");
  return {data_set};
}

absl::Status RegisterBuiltInTypes(MetadataStore& store) {
  absl::Status registered = store.RegisterTypes(BuiltInTypes());
  if (registered.ok()) return registered;
  return absl::Status(registered.code(), absl::StrCat("built-in types: ", registered.message()));
}

}  // namespace codeco::mdm
