#pragma once
// Property predicates of ListEntities: conditions on an entity's properties
// (`region == "eu-west"`, `restarts > 3`, `labels.tier in [edge, far-edge]`),
// checked before a query runs and matched against each entity it looks at.

#include <string>

#include "absl/status/status.h"
#include "codeco/mdm/v1/mdm_service.pb.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "google/protobuf/struct.pb.h"

namespace codeco::mdm {

/// The most predicates one query may carry.
inline constexpr int kMaxPredicates = 16;
/// The most values of one IN predicate.
inline constexpr int kMaxPredicateValues = 64;
/// The longest property path, bytes.
inline constexpr size_t kMaxPropertyPathBytes = 256;

/// Checks `where` (the field named `field`, e.g. "where"): a property path
/// of non-empty names, an operator, and the value or values its operator
/// needs, of a kind it can compare. INVALID_ARGUMENT names the field, as
/// "where[1].values[0]".
absl::Status ValidatePredicates(
    const google::protobuf::RepeatedPtrField<v1::PropertyPredicate>& where,
    const std::string& field = "where");

/// True when `properties` meet `predicate` (one ValidatePredicates accepted).
bool Matches(const google::protobuf::Struct& properties, const v1::PropertyPredicate& predicate);

/// True when `properties` meet every predicate of `where`.
bool MatchesAll(const google::protobuf::Struct& properties,
                const google::protobuf::RepeatedPtrField<v1::PropertyPredicate>& where);

}  // namespace codeco::mdm
