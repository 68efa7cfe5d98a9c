#pragma once
// Helpers the MDM tests and bench share.

#include <string>

#include "codeco/mdm/v1/metadata.pb.h"

namespace codeco::mdm::testing {

/// An entity type (no `from`), or a relationship type from `from` to `to`,
/// whose properties follow `schema` (JSON Schema; "" = any).
inline v1::TypeDefinition Type(const std::string& name, const std::string& schema = "",
                               const std::string& from = "", const std::string& to = "") {
  v1::TypeDefinition d;
  d.set_name(name);
  d.set_kind(from.empty() ? v1::TYPE_KIND_ENTITY : v1::TYPE_KIND_RELATIONSHIP);
  d.set_properties_schema(schema);
  d.set_from_type(from);
  d.set_to_type(to);
  return d;
}

}  // namespace codeco::mdm::testing
