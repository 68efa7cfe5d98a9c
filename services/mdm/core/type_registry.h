#pragma once
// MDM's type registry (issue 15, docs/mdm.md): entity and relationship types
// whose properties are described by a JSON Schema (draft-07), compiled and
// checked with valijson. Every event's properties are validated against
// their type before the event is accepted; a violation is refused naming
// the property's path.
//
// Pure logic: no I/O. A schema may refer only into itself: a `$ref` to
// another document is refused rather than fetched.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace valijson {
class Schema;
}  // namespace valijson

namespace codeco::mdm {

/// Limits on a schema read from outside.
struct SchemaLimits {
  /// Largest schema document, bytes.
  size_t max_bytes = size_t{256} << 10;
  /// Deepest nesting of objects and arrays in it.
  int max_depth = 32;
};

/// A compiled JSON Schema (draft-07). Cheap to copy; immutable.
class PropertySchema {
 public:
  /// Compiles `schema_json`. INVALID_ARGUMENT, naming `field`, for text that
  /// is not JSON, a document over `limits`, a `$schema` other than draft-07,
  /// a `$ref` to another document, or a schema valijson cannot read.
  static absl::StatusOr<PropertySchema> Compile(const std::string& schema_json,
                                                const std::string& field,
                                                const SchemaLimits& limits = {});

  /// Checks `document`. INVALID_ARGUMENT listing each violation (at most
  /// 10) as `<path>: <what>`, the path starting with `path` (e.g.
  /// "events[3].properties.replicas").
  absl::Status Validate(const nlohmann::json& document, const std::string& path) const;

 private:
  std::shared_ptr<const valijson::Schema> schema_;  // null: any document
  bool uses_patterns_ = false;
};

/// Whether a type describes vertices or edges.
enum class TypeKind { kEntity, kRelationship };

/// What a client registers.
struct TypeSpec {
  /// Type name: a letter, then letters, digits and '_' (at most 63), e.g.
  /// "Pod" or "RUNS_ON".
  std::string name;
  /// Entity or relationship.
  TypeKind kind = TypeKind::kEntity;
  /// What it describes.
  std::string description;
  /// JSON Schema (draft-07) of its properties ("" = any object).
  std::string properties_schema;
  /// Relationships only: the registered entity type of its start ("" = any
  /// entity type).
  std::string from_type;
  /// Relationships only: that of its end, likewise.
  std::string to_type;
};

/// A type as registered.
struct RegisteredType {
  /// The definition.
  TypeSpec spec;
  /// 1 when first registered; +1 each time it is registered changed.
  int64_t version = 0;
  /// The compiled properties schema.
  PropertySchema schema;
};

/// The registered types. Thread-safe.
class TypeRegistry {
 public:
  /// Most types held.
  static constexpr size_t kMaxTypes = 4096;

  /// Registers `spec`, or changes the type of that name (same kind only).
  /// Registering the same definition again keeps its version. INVALID_ARGUMENT
  /// naming the field (`name`, `kind`, `from_type`, `to_type`,
  /// `properties_schema`); RESOURCE_EXHAUSTED past kMaxTypes.
  absl::StatusOr<std::shared_ptr<const RegisteredType>> Register(TypeSpec spec);

  /// Register in two steps, for a caller that stores the type in between:
  /// Prepare checks `spec` against the types now and returns what Register
  /// would hold, changing nothing; Commit makes it the type of its name.
  /// The caller serialises Prepare-Commit pairs.
  absl::StatusOr<std::shared_ptr<RegisteredType>> Prepare(TypeSpec spec) const;
  /// See Prepare.
  void Commit(std::shared_ptr<const RegisteredType> type);

  /// The type named `name`, or null.
  std::shared_ptr<const RegisteredType> Find(const std::string& name) const;

  /// Every type, by name.
  std::vector<std::shared_ptr<const RegisteredType>> List() const;

  /// Checks an entity's properties against type `type`: NOT_FOUND for an
  /// unknown type, INVALID_ARGUMENT for a relationship type or a violation
  /// (paths start with `path`).
  absl::Status CheckEntity(const std::string& type, const nlohmann::json& properties,
                           const std::string& path) const;

  /// Checks a relationship of type `type` from an entity of `from_type` to
  /// one of `to_type`, with `properties`, likewise.
  absl::Status CheckRelationship(const std::string& type, const std::string& from_type,
                                 const std::string& to_type, const nlohmann::json& properties,
                                 const std::string& path) const;

 private:
  absl::Mutex register_mu_;  // serialises Register's Prepare-Commit pairs
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<const RegisteredType>> types_ ABSL_GUARDED_BY(mu_);
};

}  // namespace codeco::mdm
