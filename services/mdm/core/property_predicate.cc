#include "mdm/core/property_predicate.h"

#include <optional>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "codeco/common/status.h"

namespace codeco::mdm {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

bool IsOrdering(v1::PredicateOperator op) {
  return op == v1::PREDICATE_OPERATOR_LESS || op == v1::PREDICATE_OPERATOR_LESS_OR_EQUAL ||
         op == v1::PREDICATE_OPERATOR_GREATER || op == v1::PREDICATE_OPERATOR_GREATER_OR_EQUAL;
}

// OK when `value` is a number, a string or (unless `ordered`) a boolean.
absl::Status CheckScalar(const Value& value, bool ordered, const std::string& field) {
  switch (value.kind_case()) {
    case Value::kNumberValue:
    case Value::kStringValue:
      return absl::OkStatus();
    case Value::kBoolValue:
      if (!ordered) return absl::OkStatus();
      return InvalidFieldError(field, "a boolean cannot be ordered; want a number or a string");
    case Value::KIND_NOT_SET:
      return InvalidFieldError(field, "required");
    default:
      return InvalidFieldError(field, "want a number, a string or a boolean");
  }
}

// The value at `path` ("a.b.c") in `properties`, or null when missing.
const Value* Find(const Struct& properties, const std::string& path) {
  const Struct* at = &properties;
  const Value* found = nullptr;
  for (absl::string_view name : absl::StrSplit(path, '.')) {
    if (at == nullptr) return nullptr;
    auto it = at->fields().find(std::string(name));
    if (it == at->fields().end()) return nullptr;
    found = &it->second;
    at = found->has_struct_value() ? &found->struct_value() : nullptr;
  }
  return found;
}

bool Equal(const Value& a, const Value& b) {
  if (a.kind_case() != b.kind_case()) return false;
  switch (a.kind_case()) {
    case Value::kNumberValue:
      return a.number_value() == b.number_value();
    case Value::kStringValue:
      return a.string_value() == b.string_value();
    case Value::kBoolValue:
      return a.bool_value() == b.bool_value();
    case Value::kNullValue:
      return true;
    default:
      return false;  // lists and objects are never equal to a scalar
  }
}

// -1, 0 or 1 when `a` and `b` are both numbers or both strings.
std::optional<int> Compare(const Value& a, const Value& b) {
  if (a.kind_case() != b.kind_case()) return std::nullopt;
  if (a.has_number_value()) {
    if (a.number_value() < b.number_value()) return -1;
    return a.number_value() > b.number_value() ? 1 : 0;
  }
  if (a.has_string_value()) {
    const int c = a.string_value().compare(b.string_value());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  return std::nullopt;
}

}  // namespace

absl::Status ValidatePredicates(
    const google::protobuf::RepeatedPtrField<v1::PropertyPredicate>& where,
    const std::string& field) {
  if (where.size() > kMaxPredicates) {
    return InvalidFieldError(
        field, absl::StrCat("at most ", kMaxPredicates, " predicates, got ", where.size()));
  }
  for (int i = 0; i < where.size(); ++i) {
    const v1::PropertyPredicate& p = where[i];
    const std::string at = absl::StrCat(field, "[", i, "]");
    if (p.property().empty()) return InvalidFieldError(at + ".property", "required");
    if (p.property().size() > kMaxPropertyPathBytes) {
      return InvalidFieldError(at + ".property",
                               absl::StrCat("longer than ", kMaxPropertyPathBytes, " bytes"));
    }
    for (absl::string_view name : absl::StrSplit(p.property(), '.')) {
      if (name.empty()) {
        return InvalidFieldError(at + ".property",
                                 absl::StrCat("\"", p.property(), "\" has an empty name"));
      }
    }
    const v1::PredicateOperator op = p.operator_();
    switch (op) {
      case v1::PREDICATE_OPERATOR_EQUALS:
      case v1::PREDICATE_OPERATOR_NOT_EQUALS:
      case v1::PREDICATE_OPERATOR_LESS:
      case v1::PREDICATE_OPERATOR_LESS_OR_EQUAL:
      case v1::PREDICATE_OPERATOR_GREATER:
      case v1::PREDICATE_OPERATOR_GREATER_OR_EQUAL:
      case v1::PREDICATE_OPERATOR_CONTAINS:
        if (!p.values().empty()) {
          return InvalidFieldError(at + ".values", "only IN takes values; use value");
        }
        RETURN_IF_ERROR(CheckScalar(p.value(), IsOrdering(op), at + ".value"));
        break;
      case v1::PREDICATE_OPERATOR_EXISTS:
      case v1::PREDICATE_OPERATOR_NOT_EXISTS:
        if (p.value().kind_case() != Value::KIND_NOT_SET || !p.values().empty()) {
          return InvalidFieldError(at + ".value", "EXISTS and NOT_EXISTS take no value");
        }
        break;
      case v1::PREDICATE_OPERATOR_IN:
        if (p.value().kind_case() != Value::KIND_NOT_SET) {
          return InvalidFieldError(at + ".value", "IN takes values, not value");
        }
        if (p.values().empty() || p.values_size() > kMaxPredicateValues) {
          return InvalidFieldError(at + ".values", absl::StrCat("want 1-", kMaxPredicateValues,
                                                                " values, got ", p.values_size()));
        }
        for (int j = 0; j < p.values_size(); ++j) {
          RETURN_IF_ERROR(CheckScalar(p.values(j), false, absl::StrCat(at, ".values[", j, "]")));
        }
        break;
      default:
        return InvalidFieldError(at + ".operator", "required (EQUALS, NOT_EQUALS, LESS, ...)");
    }
  }
  return absl::OkStatus();
}

bool Matches(const Struct& properties, const v1::PropertyPredicate& predicate) {
  const Value* found = Find(properties, predicate.property());
  switch (predicate.operator_()) {
    case v1::PREDICATE_OPERATOR_EXISTS:
      return found != nullptr;
    case v1::PREDICATE_OPERATOR_NOT_EXISTS:
      return found == nullptr;
    case v1::PREDICATE_OPERATOR_NOT_EQUALS:
      return found == nullptr || !Equal(*found, predicate.value());
    default:
      break;
  }
  if (found == nullptr) return false;
  switch (predicate.operator_()) {
    case v1::PREDICATE_OPERATOR_EQUALS:
      return Equal(*found, predicate.value());
    case v1::PREDICATE_OPERATOR_IN:
      for (const Value& v : predicate.values()) {
        if (Equal(*found, v)) return true;
      }
      return false;
    case v1::PREDICATE_OPERATOR_CONTAINS:
      if (found->has_string_value() && predicate.value().has_string_value()) {
        return found->string_value().find(predicate.value().string_value()) != std::string::npos;
      }
      if (found->has_list_value()) {
        for (const Value& element : found->list_value().values()) {
          if (Equal(element, predicate.value())) return true;
        }
      }
      return false;
    default:
      break;
  }
  const std::optional<int> c = Compare(*found, predicate.value());
  if (!c.has_value()) return false;
  switch (predicate.operator_()) {
    case v1::PREDICATE_OPERATOR_LESS:
      return *c < 0;
    case v1::PREDICATE_OPERATOR_LESS_OR_EQUAL:
      return *c <= 0;
    case v1::PREDICATE_OPERATOR_GREATER:
      return *c > 0;
    case v1::PREDICATE_OPERATOR_GREATER_OR_EQUAL:
      return *c >= 0;
    default:
      return false;
  }
}

bool MatchesAll(const Struct& properties,
                const google::protobuf::RepeatedPtrField<v1::PropertyPredicate>& where) {
  for (const v1::PropertyPredicate& p : where) {
    if (!Matches(properties, p)) return false;
  }
  return true;
}

}  // namespace codeco::mdm
