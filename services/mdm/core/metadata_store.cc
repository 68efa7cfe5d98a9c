#include "mdm/core/metadata_store.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/status.h"
#include "mdm/core/property_predicate.h"

namespace codeco::mdm {
namespace {

// Column families.
constexpr char kEvents[] = "mdm_events";       // offset (8 bytes, big-endian) -> MetadataEvent
constexpr char kEventIds[] = "mdm_event_ids";  // event_id -> offset (decimal)
constexpr char kState[] = "mdm_state";         // "end_offset" -> decimal
constexpr char kEntities[] = "mdm_entities";   // id -> Entity
constexpr char kRelationships[] = "mdm_relationships";  // id -> Relationship
constexpr char kAdjacency[] = "mdm_adjacency";       // entity \0 o|i \0 relationship -> other end
constexpr char kEntityTypes[] = "mdm_entity_types";  // type \0 id -> ""
constexpr char kTypes[] = "mdm_types";               // name -> TypeDefinition
constexpr char kEndKey[] = "end_offset";

std::string OffsetKey(int64_t offset) {
  std::string key(8, '\0');
  for (int i = 7; i >= 0; --i) {
    key[static_cast<size_t>(i)] = static_cast<char>(offset & 0xff);
    offset >>= 8;
  }
  return key;
}

std::string Joined(const std::string& a, const std::string& b) {
  return absl::StrCat(a, absl::string_view("\0", 1), b);
}
std::string AdjacencyKey(const std::string& entity, char direction, const std::string& rel) {
  return Joined(Joined(entity, std::string(1, direction)), rel);
}
std::string AdjacencyPrefix(const std::string& entity) {
  return absl::StrCat(entity, absl::string_view("\0", 1));
}

template <typename Message>
absl::StatusOr<std::optional<Message>> Load(const KvStore& kv, const char* cf,
                                            const std::string& key) {
  absl::StatusOr<std::string> bytes = kv.Get(cf, key);
  if (absl::IsNotFound(bytes.status())) return std::optional<Message>();
  if (!bytes.ok()) return bytes.status();
  Message m;
  if (!m.ParseFromString(*bytes)) {
    return absl::DataLossError(absl::StrCat(cf, " holds an unreadable record at ", key));
  }
  return std::optional<Message>(std::move(m));
}

nlohmann::json ValueToJson(const google::protobuf::Value& v) {
  switch (v.kind_case()) {
    case google::protobuf::Value::kNullValue:
      return nullptr;
    case google::protobuf::Value::kNumberValue: {
      // A Struct holds every number as a double; JSON Schema's "integer"
      // is any number without a fraction, so a whole one goes as an integer.
      const double d = v.number_value();
      if (std::isfinite(d) && std::trunc(d) == d && std::abs(d) < 9007199254740992.0) {
        return static_cast<int64_t>(d);
      }
      return d;
    }
    case google::protobuf::Value::kStringValue:
      return v.string_value();
    case google::protobuf::Value::kBoolValue:
      return v.bool_value();
    case google::protobuf::Value::kStructValue:
      return StructToJson(v.struct_value());
    case google::protobuf::Value::kListValue: {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& item : v.list_value().values()) list.push_back(ValueToJson(item));
      return list;
    }
    default:
      return nullptr;
  }
}

// The JSON Schema a TypeDefinition's `properties` list stands for.
std::string SchemaOfPropertyList(const v1::TypeDefinition& d) {
  nlohmann::json schema = {{"type", "object"}, {"properties", nlohmann::json::object()}};
  nlohmann::json required = nlohmann::json::array();
  for (const v1::PropertyDefinition& p : d.properties()) {
    nlohmann::json one = nlohmann::json::object();
    switch (p.type()) {
      case v1::PROPERTY_TYPE_STRING:
        one["type"] = "string";
        break;
      case v1::PROPERTY_TYPE_NUMBER:
        one["type"] = "number";
        break;
      case v1::PROPERTY_TYPE_BOOL:
        one["type"] = "boolean";
        break;
      case v1::PROPERTY_TYPE_OBJECT:
        one["type"] = "object";
        break;
      case v1::PROPERTY_TYPE_LIST:
        one["type"] = "array";
        break;
      default:
        break;
    }
    schema["properties"][p.name()] = one;
    if (p.required()) required.push_back(p.name());
  }
  if (!required.empty()) schema["required"] = required;
  return schema.dump();
}

bool BadId(const std::string& id, size_t most) {
  return id.empty() || id.size() > most || id.find('\0') != std::string::npos;
}

}  // namespace

nlohmann::json StructToJson(const google::protobuf::Struct& properties) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : properties.fields()) out[key] = ValueToJson(value);
  return out;
}

std::vector<std::string> MetadataColumnFamilies() {
  return {kEvents, kEventIds, kState, kEntities, kRelationships, kAdjacency, kEntityTypes, kTypes};
}

// What one checked batch changes: the graph as its events leave it, over
// what the store and the batches checked before it hold. Immutable once the
// batch is staged.
struct MetadataStore::Staged {
  absl::flat_hash_map<std::string, std::optional<v1::Entity>> entities;
  absl::flat_hash_map<std::string, std::optional<v1::Relationship>> relationships;
  std::map<std::string, std::optional<std::string>> adjacency;  // key -> other end, or deleted
  absl::flat_hash_map<std::string, int64_t> event_ids;          // event_id -> offset
  int64_t first_offset = 0;                                     // of its first event
  int64_t end_offset = 0;                                       // after its last event
  int64_t epoch = 0;                                            // the write epoch it was checked in
  std::atomic<bool> finished{false};                            // written, or given up
};

// The batch being checked: its own changes (`own`), over the staged batches
// not known written yet (`earlier`, oldest first), over the store.
struct MetadataStore::Pending {
  const KvStore& kv;
  Staged& own;
  const std::vector<std::shared_ptr<const Staged>>& earlier;
  std::map<std::string, bool> entity_types;  // index key -> present

  absl::StatusOr<std::optional<v1::Entity>> Entity(const std::string& id) const {
    auto it = own.entities.find(id);
    if (it != own.entities.end()) return it->second;
    for (auto s = earlier.rbegin(); s != earlier.rend(); ++s) {
      auto found = (*s)->entities.find(id);
      if (found != (*s)->entities.end()) return found->second;
    }
    return Load<v1::Entity>(kv, kEntities, id);
  }
  absl::StatusOr<std::optional<v1::Relationship>> Relationship(const std::string& id) const {
    auto it = own.relationships.find(id);
    if (it != own.relationships.end()) return it->second;
    for (auto s = earlier.rbegin(); s != earlier.rend(); ++s) {
      auto found = (*s)->relationships.find(id);
      if (found != (*s)->relationships.end()) return found->second;
    }
    return Load<v1::Relationship>(kv, kRelationships, id);
  }
  // The offset of the event with `event_id`, if one is in the log or staged.
  absl::StatusOr<std::optional<int64_t>> EventOffset(const std::string& event_id) const {
    auto it = own.event_ids.find(event_id);
    if (it != own.event_ids.end()) return it->second;
    for (auto s = earlier.rbegin(); s != earlier.rend(); ++s) {
      auto found = (*s)->event_ids.find(event_id);
      if (found != (*s)->event_ids.end()) return found->second;
    }
    absl::StatusOr<std::string> stored = kv.Get(kEventIds, event_id);
    if (absl::IsNotFound(stored.status())) return std::optional<int64_t>();
    if (!stored.ok()) return stored.status();
    int64_t offset = 0;
    if (!absl::SimpleAtoi(*stored, &offset)) {
      return absl::DataLossError(absl::StrCat(kEventIds, " holds an unreadable offset"));
    }
    return offset;
  }
  // The relationships at `entity` (either end), as the batch leaves them.
  absl::StatusOr<std::set<std::string>> RelationshipsAt(const std::string& entity) const {
    const std::string prefix = AdjacencyPrefix(entity);
    std::set<std::string> keys;
    RETURN_IF_ERROR(
        kv.Scan(kAdjacency, {prefix, "", 0}, [&](std::string_view key, std::string_view) {
          keys.insert(std::string(key));
          return true;
        }));
    auto apply = [&](const std::map<std::string, std::optional<std::string>>& adjacency) {
      for (auto it = adjacency.lower_bound(prefix);
           it != adjacency.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
        if (it->second.has_value()) {
          keys.insert(it->first);
        } else {
          keys.erase(it->first);
        }
      }
    };
    for (const auto& s : earlier) apply(s->adjacency);
    apply(own.adjacency);
    std::set<std::string> out;
    for (const std::string& key : keys) out.insert(key.substr(prefix.size() + 2));
    return out;
  }
  void PutRelationship(const v1::Relationship& r) {
    own.adjacency[AdjacencyKey(r.from_id(), 'o', r.id())] = r.to_id();
    own.adjacency[AdjacencyKey(r.to_id(), 'i', r.id())] = r.from_id();
    own.relationships[r.id()] = r;
  }
  void DropRelationship(const v1::Relationship& r) {
    own.adjacency[AdjacencyKey(r.from_id(), 'o', r.id())] = std::nullopt;
    own.adjacency[AdjacencyKey(r.to_id(), 'i', r.id())] = std::nullopt;
    own.relationships[r.id()] = std::nullopt;
  }
};

MetadataStore::MetadataStore(KvStore& kv, const Clock& clock, MetadataLimits limits)
    : kv_(kv), clock_(clock), limits_(limits) {}

absl::StatusOr<std::unique_ptr<MetadataStore>> MetadataStore::Open(KvStore& kv, const Clock& clock,
                                                                   MetadataLimits limits) {
  std::unique_ptr<MetadataStore> store(new MetadataStore(kv, clock, limits));
  absl::StatusOr<std::string> end = kv.Get(kState, kEndKey);
  if (end.ok()) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(*end, &value) || value < 1) {
      return absl::DataLossError(absl::StrCat(kState, " holds an unreadable end offset"));
    }
    {
      absl::MutexLock lock(&store->end_mu_);
      store->end_offset_ = value;
    }
    absl::MutexLock serial(&store->write_mu_);  // always taken before end_mu_
    store->next_offset_ = value;
  } else if (!absl::IsNotFound(end.status())) {
    return end.status();
  }
  // Entity types first: a relationship type needs its ends registered.
  std::vector<v1::TypeDefinition> stored;
  RETURN_IF_ERROR(kv.Scan(kTypes, {}, [&](std::string_view key, std::string_view value) {
    v1::TypeDefinition d;
    if (d.ParseFromArray(value.data(), static_cast<int>(value.size()))) stored.push_back(d);
    return true;
  }));
  std::stable_partition(stored.begin(), stored.end(), [](const v1::TypeDefinition& d) {
    return d.kind() == v1::TYPE_KIND_ENTITY;
  });
  for (const v1::TypeDefinition& d : stored) {
    TypeSpec spec{
        d.name(),
        d.kind() == v1::TYPE_KIND_RELATIONSHIP ? TypeKind::kRelationship : TypeKind::kEntity,
        d.description(),
        d.properties_schema().empty() && d.properties_size() > 0 ? SchemaOfPropertyList(d)
                                                                 : d.properties_schema(),
        d.from_type(),
        d.to_type()};
    absl::StatusOr<std::shared_ptr<RegisteredType>> prepared = store->types_.Prepare(spec);
    if (!prepared.ok()) {
      return absl::DataLossError(absl::StrCat(
          "stored type \"", d.name(), "\" no longer registers: ", prepared.status().message()));
    }
    (*prepared)->version = d.version();
    store->types_.Commit(*prepared);
  }
  return store;
}

absl::StatusOr<v1::TypeDefinition> MetadataStore::RegisterType(
    const v1::TypeDefinition& definition) {
  if (definition.kind() != v1::TYPE_KIND_ENTITY &&
      definition.kind() != v1::TYPE_KIND_RELATIONSHIP) {
    return InvalidFieldError("type_definition.kind", "must be ENTITY or RELATIONSHIP");
  }
  if (!definition.properties_schema().empty() && definition.properties_size() > 0) {
    return InvalidFieldError("type_definition.properties",
                             "give either properties or properties_schema, not both");
  }
  for (int i = 0; i < definition.properties_size(); ++i) {
    const std::string& name = definition.properties(i).name();
    if (name.empty() || name.size() > limits_.max_id_bytes) {
      return InvalidFieldError(absl::StrCat("type_definition.properties[", i, "].name"),
                               absl::StrCat("must be 1-", limits_.max_id_bytes, " bytes"));
    }
  }
  if (definition.description().size() > 4096) {
    return InvalidFieldError("type_definition.description", "must be at most 4096 bytes");
  }
  TypeSpec spec{
      definition.name(),
      definition.kind() == v1::TYPE_KIND_RELATIONSHIP ? TypeKind::kRelationship : TypeKind::kEntity,
      definition.description(),
      definition.properties_size() > 0 ? SchemaOfPropertyList(definition)
                                       : definition.properties_schema(),
      definition.from_type(),
      definition.to_type()};
  absl::MutexLock serial(&write_mu_);
  absl::StatusOr<std::shared_ptr<RegisteredType>> prepared = types_.Prepare(std::move(spec));
  if (!prepared.ok()) {
    return absl::Status(prepared.status().code(),
                        absl::StrCat("type_definition.", prepared.status().message()));
  }
  v1::TypeDefinition stored = definition;
  stored.set_version((*prepared)->version);
  RETURN_IF_ERROR(kv_.Put(kTypes, stored.name(), stored.SerializeAsString()));
  types_.Commit(*prepared);
  return stored;
}

absl::Status MetadataStore::RegisterTypes(const std::vector<v1::TypeDefinition>& definitions) {
  for (const v1::TypeDefinition& type : definitions) {
    absl::StatusOr<v1::TypeDefinition> registered = RegisterType(type);
    if (!registered.ok()) {
      return absl::Status(
          registered.status().code(),
          absl::StrCat("registering type ", type.name(), ": ", registered.status().message()));
    }
  }
  return absl::OkStatus();
}

std::vector<v1::TypeDefinition> MetadataStore::ListTypes() const {
  std::vector<v1::TypeDefinition> out;
  (void)kv_.Scan(kTypes, {}, [&](std::string_view, std::string_view value) {
    v1::TypeDefinition d;
    if (d.ParseFromArray(value.data(), static_cast<int>(value.size()))) out.push_back(d);
    return true;
  });
  return out;
}

absl::StatusOr<PublishResult> MetadataStore::Publish(const std::vector<v1::MetadataEvent>& events) {
  if (events.empty()) return InvalidFieldError("events", "must hold at least one event");
  if (events.size() > limits_.max_batch_events) {
    return InvalidFieldError("events", absl::StrCat("holds ", events.size(), " events, over the ",
                                                    limits_.max_batch_events, " a batch may"));
  }
  // Checked one batch at a time against the store and the batches checked
  // before it (staged_), which may still be being written; then written in
  // offset order (Commit), so a batch is checked while the one before it is
  // written.
  const absl::Time now = clock_.Now();
  auto own = std::make_shared<Staged>();
  std::vector<std::shared_ptr<const Staged>> earlier;
  PublishResult result;
  KvWriteBatch batch;
  int64_t committed, epoch;
  // The newest offset an event_id already staged but not yet written was
  // answered with: this batch is acknowledged only once that one is written.
  int64_t answered_staged = 0;
  absl::ReleasableMutexLock serial(&write_mu_);
  {
    absl::MutexLock lock(&end_mu_);
    committed = end_offset_;
    epoch = epoch_;
  }
  if (epoch != staged_epoch_) {
    // A write failed: the batches staged after it will fail too.
    staged_.clear();
    next_offset_ = committed;
    staged_epoch_ = epoch;
  }
  while (!staged_.empty() && staged_.front()->finished.load()) staged_.pop_front();
  earlier.assign(staged_.begin(), staged_.end());
  int64_t next = next_offset_;
  const int64_t first = next;
  Pending pending{kv_, *own, earlier, {}};

  for (size_t i = 0; i < events.size(); ++i) {
    const v1::MetadataEvent& in = events[i];
    const std::string at = absl::StrCat("events[", i, "]");
    auto field = [&](const char* name) { return absl::StrCat(at, ".", name); };
    if (in.event_id().size() > 256 || in.event_id().find('\0') != std::string::npos) {
      return InvalidFieldError(field("event_id"), "must be at most 256 bytes, without NUL");
    }
    if (!in.event_id().empty()) {
      ASSIGN_OR_RETURN(std::optional<int64_t> seen, pending.EventOffset(in.event_id()));
      if (seen.has_value()) {
        result.offsets.push_back(*seen);
        if (*seen >= committed && *seen < first) answered_staged = std::max(answered_staged, *seen);
        continue;
      }
    }
    if (in.op() != v1::METADATA_OP_INSERT && in.op() != v1::METADATA_OP_UPDATE &&
        in.op() != v1::METADATA_OP_DELETE) {
      return InvalidFieldError(field("op"), "must be INSERT, UPDATE or DELETE");
    }
    if (BadId(in.id(), limits_.max_id_bytes)) {
      return InvalidFieldError(
          field("id"), absl::StrCat("must be 1-", limits_.max_id_bytes, " bytes, without NUL"));
    }
    for (const auto& [name, value] :
         {std::pair<const char*, const std::string*>{"type", &in.type()},
          {"source", &in.source()},
          {"cluster", &in.cluster()},
          {"from_id", &in.from_id()},
          {"to_id", &in.to_id()}}) {
      if (value->size() > limits_.max_id_bytes || value->find('\0') != std::string::npos) {
        return InvalidFieldError(field(name), absl::StrCat("must be at most ", limits_.max_id_bytes,
                                                           " bytes, without NUL"));
      }
    }
    if (in.properties().ByteSizeLong() > limits_.max_properties_bytes) {
      return InvalidFieldError(
          field("properties"),
          absl::StrCat("must be at most ", limits_.max_properties_bytes, " bytes serialized"));
    }
    ASSIGN_OR_RETURN(std::optional<v1::Entity> entity, pending.Entity(in.id()));
    // An id is one kind: an entity found is not also a relationship.
    std::optional<v1::Relationship> relationship;
    if (!entity.has_value()) {
      ASSIGN_OR_RETURN(relationship, pending.Relationship(in.id()));
    }
    const bool names_ends = !in.from_id().empty() || !in.to_id().empty();
    // Who owns what the event changes; only its own source may change it.
    const std::string owner = entity.has_value()         ? entity->source()
                              : relationship.has_value() ? relationship->source()
                                                         : "";
    if (!owner.empty() && in.source() != owner) {
      return InvalidFieldError(field("source"),
                               absl::StrCat("\"", in.id(), "\" belongs to source \"", owner,
                                            "\", not \"", in.source(), "\""));
    }
    const std::string& new_owner = owner.empty() ? in.source() : owner;
    const std::string properties_path = field("properties");

    switch (in.op()) {
      case v1::METADATA_OP_INSERT: {
        if (in.type().empty()) return InvalidFieldError(field("type"), "is required to insert");
        if (!names_ends) {
          if (relationship.has_value()) {
            return InvalidFieldError(field("id"),
                                     absl::StrCat("\"", in.id(), "\" is a relationship"));
          }
          if (entity.has_value() && entity->type() != in.type()) {
            return InvalidFieldError(
                field("type"),
                absl::StrCat("\"", in.id(), "\" is a ", entity->type(), ", not a ", in.type()));
          }
          absl::Status valid =
              types_.CheckEntity(in.type(), StructToJson(in.properties()), properties_path);
          if (absl::IsNotFound(valid))
            return InvalidFieldError(field("type"), std::string(valid.message()));
          if (!valid.ok()) {
            return absl::InvalidArgumentError(absl::StrCat(
                absl::StartsWith(valid.message(), "type:") ? at + "." : "", valid.message()));
          }
          v1::Entity e;
          e.set_id(in.id());
          e.set_type(in.type());
          *e.mutable_properties() = in.properties();
          e.set_cluster(in.cluster());
          e.set_source(new_owner);
          e.set_last_offset(next);
          e.set_insert_offset(next);
          *e.mutable_create_time() =
              entity.has_value() ? entity->create_time() : ToProtoTimestamp(now);
          *e.mutable_update_time() = ToProtoTimestamp(now);
          pending.own.entities[e.id()] = e;
          pending.entity_types[Joined(e.type(), e.id())] = true;
        } else {
          if (in.from_id().empty() || in.to_id().empty()) {
            return InvalidFieldError(field(in.from_id().empty() ? "from_id" : "to_id"),
                                     "a relationship needs both ends");
          }
          if (entity.has_value()) {
            return InvalidFieldError(field("id"), absl::StrCat("\"", in.id(), "\" is an entity"));
          }
          if (relationship.has_value() && relationship->type() != in.type()) {
            return InvalidFieldError(field("type"),
                                     absl::StrCat("\"", in.id(), "\" is a ", relationship->type(),
                                                  ", not a ", in.type()));
          }
          ASSIGN_OR_RETURN(std::optional<v1::Entity> from, pending.Entity(in.from_id()));
          ASSIGN_OR_RETURN(std::optional<v1::Entity> to, pending.Entity(in.to_id()));
          if (!from.has_value()) {
            return InvalidFieldError(field("from_id"),
                                     absl::StrCat("no entity \"", in.from_id(), "\""));
          }
          if (!to.has_value()) {
            return InvalidFieldError(field("to_id"),
                                     absl::StrCat("no entity \"", in.to_id(), "\""));
          }
          absl::Status valid = types_.CheckRelationship(
              in.type(), from->type(), to->type(), StructToJson(in.properties()), properties_path);
          if (absl::IsNotFound(valid))
            return InvalidFieldError(field("type"), std::string(valid.message()));
          if (!valid.ok()) {
            const bool names_field = absl::StartsWith(valid.message(), "type:") ||
                                     absl::StartsWith(valid.message(), "from_id:") ||
                                     absl::StartsWith(valid.message(), "to_id:");
            return absl::InvalidArgumentError(
                absl::StrCat(names_field ? at + "." : "", valid.message()));
          }
          if (relationship.has_value()) pending.DropRelationship(*relationship);
          v1::Relationship r;
          r.set_id(in.id());
          r.set_type(in.type());
          r.set_from_id(in.from_id());
          r.set_to_id(in.to_id());
          *r.mutable_properties() = in.properties();
          r.set_source(new_owner);
          r.set_last_offset(next);
          r.set_insert_offset(next);
          pending.PutRelationship(r);
        }
        break;
      }
      case v1::METADATA_OP_UPDATE: {
        if (names_ends) {
          return InvalidFieldError(field(in.from_id().empty() ? "to_id" : "from_id"),
                                   "an update cannot move a relationship (insert it again)");
        }
        if (!entity.has_value() && !relationship.has_value()) {
          return InvalidFieldError(
              field("id"), absl::StrCat("no entity or relationship \"", in.id(), "\" to update"));
        }
        const std::string& type = entity.has_value() ? entity->type() : relationship->type();
        if (!in.type().empty() && in.type() != type) {
          return InvalidFieldError(
              field("type"), absl::StrCat("\"", in.id(), "\" is a ", type, ", not a ", in.type()));
        }
        google::protobuf::Struct merged =
            entity.has_value() ? entity->properties() : relationship->properties();
        for (const auto& [key, value] : in.properties().fields()) {
          (*merged.mutable_fields())[key] = value;
        }
        if (merged.ByteSizeLong() > limits_.max_properties_bytes) {
          return InvalidFieldError(field("properties"),
                                   absl::StrCat("the merged properties exceed ",
                                                limits_.max_properties_bytes, " bytes"));
        }
        if (entity.has_value()) {
          RETURN_IF_ERROR(types_.CheckEntity(type, StructToJson(merged), properties_path));
          *entity->mutable_properties() = std::move(merged);
          if (!in.cluster().empty()) entity->set_cluster(in.cluster());
          entity->set_last_offset(next);
          *entity->mutable_update_time() = ToProtoTimestamp(now);
          pending.own.entities[in.id()] = *entity;
        } else {
          ASSIGN_OR_RETURN(std::optional<v1::Entity> from, pending.Entity(relationship->from_id()));
          ASSIGN_OR_RETURN(std::optional<v1::Entity> to, pending.Entity(relationship->to_id()));
          RETURN_IF_ERROR(types_.CheckRelationship(type, from->type(), to->type(),
                                                   StructToJson(merged), properties_path));
          *relationship->mutable_properties() = std::move(merged);
          relationship->set_last_offset(next);
          pending.own.relationships[in.id()] = *relationship;
        }
        break;
      }
      case v1::METADATA_OP_DELETE: {
        if (entity.has_value()) {
          ASSIGN_OR_RETURN(std::set<std::string> at_entity, pending.RelationshipsAt(in.id()));
          for (const std::string& rel_id : at_entity) {
            ASSIGN_OR_RETURN(std::optional<v1::Relationship> r, pending.Relationship(rel_id));
            if (r.has_value()) pending.DropRelationship(*r);
          }
          pending.own.entities[in.id()] = std::nullopt;
          pending.entity_types[Joined(entity->type(), in.id())] = false;
        } else if (relationship.has_value()) {
          pending.DropRelationship(*relationship);
        }
        // Deleting what is not there is accepted (a connector may repeat itself).
        break;
      }
      default:
        break;
    }

    // The event as logged: its bytes followed by those of its offset (and
    // event time when it has none), which parsing merges over them; this
    // spares a copy of the event's properties.
    v1::MetadataEvent logged_fields;
    logged_fields.set_offset(next);
    if (!in.has_event_time()) *logged_fields.mutable_event_time() = ToProtoTimestamp(now);
    std::string logged = in.SerializeAsString();
    logged_fields.AppendToString(&logged);
    batch.Put(kEvents, OffsetKey(next), std::move(logged));
    if (!in.event_id().empty()) {
      batch.Put(kEventIds, in.event_id(), absl::StrCat(next));
      own->event_ids[in.event_id()] = next;
    }
    result.offsets.push_back(next);
    ++next;
    ++result.appended;
  }

  if (result.appended == 0) {
    serial.Release();
    RETURN_IF_ERROR(AwaitWritten(answered_staged, epoch));
    return result;
  }
  own->first_offset = first;
  own->end_offset = next;
  own->epoch = epoch;
  staged_.push_back(own);
  next_offset_ = next;
  std::map<std::string, bool> entity_types = std::move(pending.entity_types);
  serial.Release();

  // What the batch writes besides its events, built outside the lock: the
  // staged changes no longer change.
  for (const auto& [id, e] : own->entities) {
    if (e.has_value()) {
      batch.Put(kEntities, id, e->SerializeAsString());
    } else {
      batch.Delete(kEntities, id);
    }
  }
  for (const auto& [id, r] : own->relationships) {
    if (r.has_value()) {
      batch.Put(kRelationships, id, r->SerializeAsString());
    } else {
      batch.Delete(kRelationships, id);
    }
  }
  for (const auto& [key, other] : own->adjacency) {
    if (other.has_value()) {
      batch.Put(kAdjacency, key, *other);
    } else {
      batch.Delete(kAdjacency, key);
    }
  }
  for (const auto& [key, present] : entity_types) {
    if (present) {
      batch.Put(kEntityTypes, key, "");
    } else {
      batch.Delete(kEntityTypes, key);
    }
  }
  batch.Put(kState, kEndKey, absl::StrCat(next));
  RETURN_IF_ERROR(Commit(*own, batch));
  RETURN_IF_ERROR(AwaitWritten(answered_staged, epoch));
  std::vector<AppendListener> listeners;
  {
    absl::MutexLock lock(&listeners_mu_);
    for (const auto& [handle, listener] : listeners_) listeners.push_back(listener);
  }
  for (const AppendListener& listener : listeners) listener(next);
  return result;
}

namespace {
// Whether the batch from `first` may be written: the log ends where it
// starts, or a write failed since it was checked (epoch).
struct CommitTurn {
  const int64_t* end_offset;
  const int64_t* epoch;
  int64_t first;
  int64_t checked_in;
  static bool Ready(CommitTurn* t) {
    return *t->end_offset == t->first || *t->epoch != t->checked_in;
  }
};
}  // namespace

absl::Status MetadataStore::Commit(Staged& staged, const KvWriteBatch& batch) {
  {
    absl::MutexLock lock(&end_mu_);
    CommitTurn turn{&end_offset_, &epoch_, staged.first_offset, staged.epoch};
    end_mu_.Await(absl::Condition(&CommitTurn::Ready, &turn));
    if (epoch_ != staged.epoch) {
      staged.finished.store(true);
      return absl::UnavailableError(
          "a batch published just before this one could not be written, so this one was not "
          "either: publish it again");
    }
  }
  // Only this batch can be written now: the next waits for end_offset_.
  absl::Status written = kv_.Write(batch);
  {
    absl::MutexLock lock(&end_mu_);
    if (written.ok()) {
      end_offset_ = staged.end_offset;
    } else {
      ++epoch_;
    }
  }
  staged.finished.store(true);
  return written;
}

namespace {
// Whether offset `offset` is written, or a write failed since `checked_in`.
struct WrittenThrough {
  const int64_t* end_offset;
  const int64_t* epoch;
  int64_t offset;
  int64_t checked_in;
  static bool Ready(WrittenThrough* w) {
    return *w->end_offset > w->offset || *w->epoch != w->checked_in;
  }
};
}  // namespace

absl::Status MetadataStore::AwaitWritten(int64_t offset, int64_t checked_in) {
  if (offset <= 0) return absl::OkStatus();
  absl::MutexLock lock(&end_mu_);
  WrittenThrough w{&end_offset_, &epoch_, offset, checked_in};
  end_mu_.Await(absl::Condition(&WrittenThrough::Ready, &w));
  if (end_offset_ > offset) return absl::OkStatus();
  return absl::UnavailableError(
      "an event of this batch was already published by a batch that could not be written: "
      "publish it again");
}

int64_t MetadataStore::end_offset() const {
  absl::MutexLock lock(&end_mu_);
  return end_offset_;
}

absl::StatusOr<EventPage> MetadataStore::ReadEvents(int64_t from_offset, size_t limit,
                                                    const std::vector<std::string>& types) const {
  if (from_offset < 1) from_offset = 1;
  limit = std::clamp<size_t>(limit == 0 ? 100 : limit, 1, limits_.max_page);
  EventPage page;
  page.end_offset = end_offset();
  page.next_offset = from_offset;
  // A type filter may skip much of the log: look at a bounded number of
  // events per call, and say where to go on.
  const size_t most_scanned = std::max<size_t>(limit * 64, 10000);
  size_t scanned = 0;
  const std::set<std::string> wanted(types.begin(), types.end());
  absl::Status status = kv_.Scan(
      kEvents, {"", OffsetKey(from_offset - 1), 0}, [&](std::string_view, std::string_view value) {
        v1::MetadataEvent e;
        if (!e.ParseFromArray(value.data(), static_cast<int>(value.size()))) return true;
        if (e.offset() >= page.end_offset) return false;  // appended after end_offset was read
        page.next_offset = e.offset() + 1;
        if (wanted.empty() || wanted.count(e.type())) page.events.push_back(std::move(e));
        return page.events.size() < limit && ++scanned < most_scanned;
      });
  RETURN_IF_ERROR(status);
  if (page.events.size() < limit && scanned < most_scanned) page.next_offset = page.end_offset;
  return page;
}

absl::Status ValidateCompactionOptions(const CompactionOptions& options) {
  if (options.keep_recent_events < 0) {
    return InvalidFieldError("keep_recent_events", "must not be negative");
  }
  if (options.keep_tombstone_events < options.keep_recent_events) {
    return InvalidFieldError("keep_tombstone_events", "must be at least keep_recent_events");
  }
  return absl::OkStatus();
}

absl::StatusOr<CompactionResult> MetadataStore::Compact(const CompactionOptions& options) {
  RETURN_IF_ERROR(ValidateCompactionOptions(options));
  const int64_t end = end_offset();
  CompactionResult result;
  result.compacted_below = std::max<int64_t>(1, end - options.keep_recent_events);
  const int64_t tombstones_below = end - options.keep_tombstone_events;
  // The log in chunks; each chunk's records are read after its scan (a
  // visitor must not call back into the store), its removals written as
  // one batch.
  constexpr size_t kChunk = 1024;
  std::string cursor;
  bool done = false;
  while (!done) {
    std::vector<v1::MetadataEvent> chunk;
    size_t visited = 0;
    RETURN_IF_ERROR(
        kv_.Scan(kEvents, {"", cursor, kChunk}, [&](std::string_view key, std::string_view value) {
          ++visited;
          cursor = std::string(key);
          v1::MetadataEvent e;
          if (!e.ParseFromArray(value.data(), static_cast<int>(value.size()))) return true;
          if (e.offset() >= result.compacted_below) {
            done = true;
            return false;
          }
          chunk.push_back(std::move(e));
          return true;
        }));
    KvWriteBatch removals;
    for (const v1::MetadataEvent& e : chunk) {
      ++result.looked_at;
      // The offset of the INSERT that set the id's current state, or none
      // when the id is gone.
      std::optional<int64_t> inserted_at;
      ASSIGN_OR_RETURN(std::optional<v1::Entity> entity, Load<v1::Entity>(kv_, kEntities, e.id()));
      if (entity.has_value()) {
        inserted_at = entity->insert_offset();
      } else {
        ASSIGN_OR_RETURN(std::optional<v1::Relationship> relationship,
                         Load<v1::Relationship>(kv_, kRelationships, e.id()));
        if (relationship.has_value()) inserted_at = relationship->insert_offset();
      }
      bool remove = false;
      if (inserted_at.has_value()) {
        remove = e.offset() < *inserted_at;
      } else if (e.op() != v1::METADATA_OP_DELETE) {
        remove = true;  // a deletion after it (its own or an end's) removed the id
      } else if (e.offset() < tombstones_below) {
        remove = true;
        ++result.tombstones_removed;
      }
      if (remove) {
        removals.Delete(kEvents, OffsetKey(e.offset()));
        ++result.removed;
      }
    }
    if (!removals.empty()) RETURN_IF_ERROR(kv_.Write(removals));
    if (visited < kChunk) break;
  }
  return result;
}

absl::StatusOr<v1::Entity> MetadataStore::GetEntity(const std::string& id) const {
  ASSIGN_OR_RETURN(std::optional<v1::Entity> e, Load<v1::Entity>(kv_, kEntities, id));
  if (!e.has_value()) return absl::NotFoundError(absl::StrCat("no entity \"", id, "\""));
  return *std::move(e);
}

absl::StatusOr<v1::Relationship> MetadataStore::GetRelationship(const std::string& id) const {
  ASSIGN_OR_RETURN(std::optional<v1::Relationship> r,
                   Load<v1::Relationship>(kv_, kRelationships, id));
  if (!r.has_value()) return absl::NotFoundError(absl::StrCat("no relationship \"", id, "\""));
  return *std::move(r);
}

absl::StatusOr<EntityPage> MetadataStore::ListEntities(const EntityFilter& filter,
                                                       const std::string& after,
                                                       size_t limit) const {
  RETURN_IF_ERROR(ValidatePredicates(filter.where));
  limit = std::clamp<size_t>(limit == 0 ? 100 : limit, 1, limits_.max_page);
  EntityPage page;
  std::string last;
  bool more = false;
  size_t looked_at = 0;
  // False to stop: the page is full, or this call looked at enough.
  auto take = [&](v1::Entity e) {
    if (page.entities.size() == limit || looked_at == limits_.max_list_scan) {
      more = true;
      return false;
    }
    ++looked_at;
    last = e.id();
    if ((filter.cluster.empty() || e.cluster() == filter.cluster) &&
        MatchesAll(e.properties(), filter.where)) {
      page.entities.push_back(std::move(e));
    }
    return true;
  };
  absl::Status status;
  if (filter.type.empty()) {
    status = kv_.Scan(kEntities, {"", after, 0}, [&](std::string_view, std::string_view value) {
      v1::Entity e;
      if (!e.ParseFromArray(value.data(), static_cast<int>(value.size()))) return true;
      return take(std::move(e));
    });
  } else {
    // The type's index in chunks, each loaded after its scan (a visitor
    // must not call back into the store).
    const std::string prefix = Joined(filter.type, "");
    std::string cursor = after.empty() ? "" : prefix + after;
    constexpr size_t kChunk = 256;
    bool go_on = true;
    while (go_on && status.ok()) {
      std::vector<std::string> ids;
      status = kv_.Scan(kEntityTypes, {prefix, cursor, kChunk},
                        [&](std::string_view key, std::string_view) {
                          ids.emplace_back(key.substr(prefix.size()));
                          return true;
                        });
      if (!status.ok() || ids.empty()) break;
      cursor = prefix + ids.back();
      for (const std::string& id : ids) {
        absl::StatusOr<std::optional<v1::Entity>> e = Load<v1::Entity>(kv_, kEntities, id);
        if (!e.ok()) return e.status();
        if (!e->has_value()) continue;
        if (!take(**std::move(e))) {
          go_on = false;
          break;
        }
      }
      if (ids.size() < kChunk) break;
    }
  }
  RETURN_IF_ERROR(status);
  if (more) page.next_after = last;
  return page;
}

absl::StatusOr<GraphResult> MetadataStore::Query(const GraphQuery& query) const {
  if (query.depth < 1 || query.depth > limits_.max_query_depth) {
    return InvalidFieldError("depth", absl::StrCat("must be 1-", limits_.max_query_depth));
  }
  const size_t most = query.max_entities == 0
                          ? limits_.max_query_entities
                          : std::min(query.max_entities, limits_.max_query_entities);
  ASSIGN_OR_RETURN(v1::Entity start, GetEntity(query.entity_id));
  const std::set<std::string> types(query.relationship_types.begin(),
                                    query.relationship_types.end());
  GraphResult result;
  std::set<std::string> seen = {start.id()}, followed;
  result.entities.push_back(std::move(start));
  std::vector<std::string> frontier = {query.entity_id};
  for (int hop = 0; hop < query.depth && !frontier.empty() && !result.truncated; ++hop) {
    std::vector<std::string> next;
    for (const std::string& id : frontier) {
      const std::string prefix = AdjacencyPrefix(id);
      std::vector<std::pair<std::string, std::string>> edges;  // relationship, other end
      RETURN_IF_ERROR(
          kv_.Scan(kAdjacency, {prefix, "", 0}, [&](std::string_view key, std::string_view other) {
            const char dir = key[prefix.size()];
            if ((dir == 'o' && query.direction == Direction::kIncoming) ||
                (dir == 'i' && query.direction == Direction::kOutgoing)) {
              return true;
            }
            edges.emplace_back(std::string(key.substr(prefix.size() + 2)), std::string(other));
            return true;
          }));
      for (const auto& [rel_id, other] : edges) {
        ASSIGN_OR_RETURN(std::optional<v1::Relationship> r,
                         Load<v1::Relationship>(kv_, kRelationships, rel_id));
        if (!r.has_value() || (!types.empty() && !types.count(r->type()))) continue;
        if (!seen.count(other)) {
          if (result.entities.size() >= most) {
            result.truncated = true;
            break;
          }
          ASSIGN_OR_RETURN(std::optional<v1::Entity> e, Load<v1::Entity>(kv_, kEntities, other));
          if (!e.has_value()) continue;
          seen.insert(other);
          result.entities.push_back(*std::move(e));
          next.push_back(other);
        }
        if (followed.insert(rel_id).second) result.relationships.push_back(*std::move(r));
      }
      if (result.truncated) break;
    }
    frontier = std::move(next);
  }
  return result;
}

int MetadataStore::AddListener(AppendListener listener) {
  absl::MutexLock lock(&listeners_mu_);
  const int handle = next_listener_++;
  listeners_.emplace_back(handle, std::move(listener));
  return handle;
}

void MetadataStore::RemoveListener(int handle) {
  absl::MutexLock lock(&listeners_mu_);
  listeners_.erase(std::remove_if(listeners_.begin(), listeners_.end(),
                                  [&](const auto& l) { return l.first == handle; }),
                   listeners_.end());
}

}  // namespace codeco::mdm
