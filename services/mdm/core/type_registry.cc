#include "mdm/core/type_registry.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>
#include <utility>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codeco/common/status.h"

namespace codeco::mdm {
namespace {

constexpr size_t kMaxViolationsReported = 10;
// Longest string a schema with `pattern` or `patternProperties` is matched
// against: libstdc++'s std::regex (which valijson uses) recurses a few
// frames per character, and a long subject would exhaust the stack (4 KiB
// against "^(a|b)*$" did, on an 8 MiB stack under AddressSanitizer).
constexpr size_t kMaxPatternSubject = 1024;

// Thrown from the parse callback to stop at the first level too deep.
struct TooDeep {};

// Whether the schema, anywhere, holds a `pattern` or `patternProperties`.
bool UsesPatterns(const nlohmann::json& j) {
  std::vector<const nlohmann::json*> stack = {&j};
  while (!stack.empty()) {
    const nlohmann::json* node = stack.back();
    stack.pop_back();
    if (node->is_object()) {
      if (node->contains("pattern") || node->contains("patternProperties")) return true;
      for (const auto& [key, value] : node->items()) stack.push_back(&value);
    } else if (node->is_array()) {
      for (const auto& value : *node) stack.push_back(&value);
    }
  }
  return false;
}

// The first string (value or key) longer than `most`, as its path; "" when none.
std::string LongString(const nlohmann::json& j, const std::string& path, size_t most) {
  std::vector<std::pair<const nlohmann::json*, std::string>> stack = {{&j, path}};
  while (!stack.empty()) {
    auto [node, at] = stack.back();
    stack.pop_back();
    if (node->is_string() && node->get_ref<const std::string&>().size() > most) return at;
    if (node->is_object()) {
      for (const auto& [key, value] : node->items()) {
        if (key.size() > most) return at;
        stack.push_back({&value, absl::StrCat(at, ".", key)});
      }
    } else if (node->is_array()) {
      for (size_t i = 0; i < node->size(); ++i) {
        stack.push_back({&(*node)[i], absl::StrCat(at, "[", i, "]")});
      }
    }
  }
  return "";
}

// valijson's context ("<root>", "[replicas]", "[0]") as a path under `path`.
std::string PathOf(const std::vector<std::string>& context, const std::string& path) {
  std::string out = path;
  for (const std::string& part : context) {
    if (part == "<root>") continue;
    std::string name = part;
    if (name.size() >= 2 && name.front() == '[' && name.back() == ']') {
      name = name.substr(1, name.size() - 2);
    }
    const bool index = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return absl::ascii_isdigit(static_cast<unsigned char>(c));
    });
    absl::StrAppend(&out, index ? absl::StrCat("[", name, "]") : absl::StrCat(".", name));
  }
  return out.empty() ? "(root)" : out;
}

bool ValidTypeName(const std::string& name) {
  if (name.empty() || name.size() > 63 || !absl::ascii_isalpha(static_cast<unsigned char>(name[0])))
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

}  // namespace

absl::StatusOr<PropertySchema> PropertySchema::Compile(const std::string& schema_json,
                                                       const std::string& field,
                                                       const SchemaLimits& limits) {
  if (schema_json.size() > limits.max_bytes) {
    return InvalidFieldError(field, absl::StrCat("is ", schema_json.size(), " bytes, over the ",
                                                 limits.max_bytes, "-byte limit"));
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(schema_json,
                                [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
                                  if (depth > limits.max_depth) throw TooDeep{};
                                  return true;
                                });
  } catch (const TooDeep&) {
    return InvalidFieldError(field, absl::StrCat("nests deeper than ", limits.max_depth));
  } catch (const nlohmann::json::exception& e) {
    return InvalidFieldError(field, absl::StrCat("is not JSON: ", e.what()));
  }
  if (!doc.is_object() && !doc.is_boolean()) {
    return InvalidFieldError(field, "must be a JSON object (or true/false)");
  }
  if (doc.is_object() && doc.contains("$schema")) {
    const nlohmann::json& s = doc["$schema"];
    if (!s.is_string() || (s != "http://json-schema.org/draft-07/schema#" &&
                           s != "http://json-schema.org/draft-07/schema")) {
      return InvalidFieldError(absl::StrCat(field, ".$schema"),
                               "only draft-07 (http://json-schema.org/draft-07/schema#) is "
                               "supported");
    }
  }
  auto schema = std::make_shared<valijson::Schema>();
  try {
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    valijson::adapters::NlohmannJsonAdapter adapter(doc);
    // No fetchDoc: a $ref to another document fails here instead of being fetched.
    parser.populateSchema(adapter, *schema);
  } catch (const std::exception& e) {
    std::string why = e.what();
    if (absl::StrContains(why, "remote") || absl::StrContains(why, "Fetching")) {
      why = "a $ref to another document is not followed (only refs within the schema)";
    }
    return InvalidFieldError(field, absl::StrCat("is not a valid draft-07 schema: ", why));
  }
  PropertySchema compiled;
  compiled.schema_ = std::move(schema);
  compiled.uses_patterns_ = UsesPatterns(doc);
  return compiled;
}

absl::Status PropertySchema::Validate(const nlohmann::json& document,
                                      const std::string& path) const {
  if (schema_ == nullptr) return absl::OkStatus();
  if (uses_patterns_) {
    const std::string at = LongString(document, path, kMaxPatternSubject);
    if (!at.empty()) {
      return InvalidFieldError(at.empty() ? "(root)" : at,
                               absl::StrCat("a string longer than ", kMaxPatternSubject,
                                            " bytes, where the type's schema matches patterns"));
    }
  }
  valijson::Validator validator;
  valijson::ValidationResults results;
  valijson::adapters::NlohmannJsonAdapter target(document);
  bool ok = false;
  try {
    ok = validator.validate(*schema_, target, &results);
  } catch (const std::exception& e) {
    // A `pattern` std::regex cannot compile throws only now.
    return InvalidFieldError(path.empty() ? "(root)" : path,
                             absl::StrCat("the type's schema cannot be applied: ", e.what()));
  }
  if (ok) return absl::OkStatus();
  // valijson reports the failing leaves and then each enclosing schema
  // ("Failed to validate against schema associated with property ..."):
  // the leaves say what is wrong.
  std::vector<std::string> lines;
  valijson::ValidationResults::Error error;
  while (results.popError(error)) {
    if (absl::StartsWith(error.description, "Failed to validate against schema associated") ||
        absl::StartsWith(error.description, "Failed to validate item #")) {
      continue;
    }
    if (lines.size() < kMaxViolationsReported) {
      lines.push_back(absl::StrCat(PathOf(error.context, path), ": ", error.description));
    }
  }
  if (lines.empty())
    lines.push_back(
        absl::StrCat(path.empty() ? "(root)" : path, ": does not match the type's schema"));
  return absl::InvalidArgumentError(absl::StrJoin(lines, "; "));
}

absl::StatusOr<std::shared_ptr<RegisteredType>> TypeRegistry::Prepare(TypeSpec spec) const {
  if (!ValidTypeName(spec.name)) {
    return InvalidFieldError("name",
                             "must be a letter, then letters, digits or '_', at most 63 bytes");
  }
  auto prepared = std::make_shared<RegisteredType>();
  if (!spec.properties_schema.empty()) {
    ASSIGN_OR_RETURN(prepared->schema,
                     PropertySchema::Compile(spec.properties_schema, "properties_schema"));
  }
  absl::MutexLock lock(&mu_);
  if (spec.kind == TypeKind::kRelationship) {
    for (const auto& [field, end] :
         {std::pair<const char*, const std::string*>{"from_type", &spec.from_type},
          {"to_type", &spec.to_type}}) {
      if (end->empty()) continue;  // any entity type
      auto it = types_.find(*end);
      if (it == types_.end() || it->second->spec.kind != TypeKind::kEntity) {
        return InvalidFieldError(field,
                                 absl::StrCat("\"", *end, "\" is not a registered entity type"));
      }
    }
  } else if (!spec.from_type.empty() || !spec.to_type.empty()) {
    return InvalidFieldError(spec.from_type.empty() ? "to_type" : "from_type",
                             "is for relationship types only");
  }
  auto existing = types_.find(spec.name);
  if (existing != types_.end()) {
    const TypeSpec& old = existing->second->spec;
    if (old.kind != spec.kind) {
      return InvalidFieldError("kind",
                               absl::StrCat("\"", spec.name, "\" is registered as the other kind"));
    }
    prepared->version = existing->second->version;
    if (old.description != spec.description || old.properties_schema != spec.properties_schema ||
        old.from_type != spec.from_type || old.to_type != spec.to_type) {
      ++prepared->version;
    }
  } else {
    if (types_.size() >= kMaxTypes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("at most ", kMaxTypes, " types may be registered"));
    }
    prepared->version = 1;
  }
  prepared->spec = std::move(spec);
  return prepared;
}

void TypeRegistry::Commit(std::shared_ptr<const RegisteredType> type) {
  absl::MutexLock lock(&mu_);
  const std::string name = type->spec.name;
  types_[name] = std::move(type);
}

absl::StatusOr<std::shared_ptr<const RegisteredType>> TypeRegistry::Register(TypeSpec spec) {
  absl::MutexLock serial(&register_mu_);
  ASSIGN_OR_RETURN(std::shared_ptr<RegisteredType> prepared, Prepare(std::move(spec)));
  {
    absl::MutexLock lock(&mu_);
    auto existing = types_.find(prepared->spec.name);
    if (existing != types_.end() && existing->second->version == prepared->version) {
      return existing->second;
    }
  }
  Commit(prepared);
  return std::shared_ptr<const RegisteredType>(prepared);
}

std::shared_ptr<const RegisteredType> TypeRegistry::Find(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = types_.find(name);
  return it == types_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const RegisteredType>> TypeRegistry::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<const RegisteredType>> out;
  out.reserve(types_.size());
  for (const auto& [name, type] : types_) out.push_back(type);
  return out;
}

absl::Status TypeRegistry::CheckEntity(const std::string& type, const nlohmann::json& properties,
                                       const std::string& path) const {
  std::shared_ptr<const RegisteredType> t = Find(type);
  if (t == nullptr)
    return absl::NotFoundError(absl::StrCat("type \"", type, "\" is not registered"));
  if (t->spec.kind != TypeKind::kEntity) {
    return absl::InvalidArgumentError(
        absl::StrCat("type: \"", type, "\" is a relationship type, not an entity type"));
  }
  return t->schema.Validate(properties, path);
}

absl::Status TypeRegistry::CheckRelationship(const std::string& type, const std::string& from_type,
                                             const std::string& to_type,
                                             const nlohmann::json& properties,
                                             const std::string& path) const {
  std::shared_ptr<const RegisteredType> t = Find(type);
  if (t == nullptr)
    return absl::NotFoundError(absl::StrCat("type \"", type, "\" is not registered"));
  if (t->spec.kind != TypeKind::kRelationship) {
    return absl::InvalidArgumentError(
        absl::StrCat("type: \"", type, "\" is an entity type, not a relationship type"));
  }
  if (!t->spec.from_type.empty() && from_type != t->spec.from_type) {
    return absl::InvalidArgumentError(absl::StrCat("from_id: a ", type, " starts at a ",
                                                   t->spec.from_type, ", not a ", from_type));
  }
  if (!t->spec.to_type.empty() && to_type != t->spec.to_type) {
    return absl::InvalidArgumentError(
        absl::StrCat("to_id: a ", type, " ends at a ", t->spec.to_type, ", not a ", to_type));
  }
  return t->schema.Validate(properties, path);
}

}  // namespace codeco::mdm
