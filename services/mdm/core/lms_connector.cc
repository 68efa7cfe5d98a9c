#include "mdm/core/lms_connector.h"

#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"

namespace codeco::mdm {
namespace {

constexpr char kCluster[] = "Cluster";
constexpr char kNamespace[] = "Namespace";
constexpr char kNode[] = "Node";
constexpr char kPod[] = "Pod";
constexpr char kContains[] = "CONTAINS";
constexpr char kRunsOn[] = "RUNS_ON";

// At most this many warnings per sync (a cluster of bad names would
// otherwise fill the log); the rest are counted.
constexpr size_t kMostWarnings = 20;

google::protobuf::Value Text(const std::string& s) {
  google::protobuf::Value v;
  v.set_string_value(s);
  return v;
}
google::protobuf::Value Number(double d) {
  google::protobuf::Value v;
  v.set_number_value(d);
  return v;
}
google::protobuf::Value Flag(bool b) {
  google::protobuf::Value v;
  v.set_bool_value(b);
  return v;
}
google::protobuf::Value Labels(const google::protobuf::Map<std::string, std::string>& labels) {
  google::protobuf::Value v;
  auto& fields = *v.mutable_struct_value()->mutable_fields();
  for (const auto& [key, value] : labels) fields[key] = Text(value);
  return v;
}

std::string PhaseName(lms::v1::PodPhase phase) {
  switch (phase) {
    case lms::v1::POD_PHASE_PENDING:
      return "Pending";
    case lms::v1::POD_PHASE_RUNNING:
      return "Running";
    case lms::v1::POD_PHASE_SUCCEEDED:
      return "Succeeded";
    case lms::v1::POD_PHASE_FAILED:
      return "Failed";
    default:
      return "Unknown";
  }
}

std::string LabelOr(const google::protobuf::Map<std::string, std::string>& labels,
                    const std::string& key, const std::string& otherwise) {
  auto it = labels.find(key);
  return it == labels.end() || it->second.empty() ? otherwise : it->second;
}

std::string NamespaceOf(const lms::v1::Pod& pod) {
  return LabelOr(pod.labels(), kNamespaceLabel, "default");
}

v1::TypeDefinition Type(const std::string& name, const std::string& description,
                        const std::string& schema, const std::string& from = "",
                        const std::string& to = "", bool relationship = false) {
  v1::TypeDefinition d;
  d.set_name(name);
  d.set_kind(relationship ? v1::TYPE_KIND_RELATIONSHIP : v1::TYPE_KIND_ENTITY);
  d.set_description(description);
  d.set_properties_schema(schema);
  d.set_from_type(from);
  d.set_to_type(to);
  return d;
}

}  // namespace

std::string ClusterEntityId(const std::string& cluster) {
  return absl::StrCat("Cluster/", cluster);
}
std::string NamespaceEntityId(const std::string& cluster, const std::string& name) {
  return absl::StrCat("Namespace/", cluster, "/", name);
}
std::string NodeEntityId(const std::string& cluster, const std::string& node) {
  return absl::StrCat("Node/", cluster, "/", node);
}
std::string PodEntityId(const std::string& cluster, const std::string& name_space,
                        const std::string& pod) {
  return absl::StrCat("Pod/", cluster, "/", name_space, "/", pod);
}

std::vector<v1::TypeDefinition> LmsConnectorTypes() {
  constexpr char kNamed[] = R"({"type": "object", "required": ["name"],
    "properties": {"name": {"type": "string"}}})";
  constexpr char kLabels[] = R"({"type": "object", "additionalProperties": {"type": "string"}})";
  return {
      Type(kCluster, "A member cluster of the federation.", kNamed),
      Type(kNamespace, "A namespace of a cluster (a pod's codeco.io/namespace label).",
           R"({"type": "object", "required": ["name", "cluster"],
               "properties": {"name": {"type": "string"}, "cluster": {"type": "string"}}})"),
      Type(kNode, "A node of a cluster, as its LMS reports it.",
           absl::StrCat(R"({"type": "object", "required": ["name", "ready"],
               "properties": {"name": {"type": "string"}, "ready": {"type": "boolean"},
                 "unschedulable": {"type": "boolean"},
                 "cpuMillicores": {"type": "integer", "minimum": 0},
                 "memoryBytes": {"type": "integer", "minimum": 0},
                 "labels": )",
                        kLabels, "}}")),
      Type(kPod, "A pod of a cluster, as its LMS reports it.",
           absl::StrCat(R"({"type": "object", "required": ["name", "namespace", "phase"],
               "properties": {"name": {"type": "string"}, "namespace": {"type": "string"},
                 "phase": {"enum": ["Pending", "Running", "Succeeded", "Failed", "Unknown"]},
                 "node": {"type": "string"}, "application": {"type": "string"},
                 "service": {"type": "string"}, "podIp": {"type": "string"},
                 "labels": )",
                        kLabels, "}}")),
      Type(kContains, "Ownership: a cluster contains namespaces and nodes, a namespace pods.", "",
           "", "", true),
      Type(kRunsOn, "A pod runs on a node.", "", kPod, kNode, true),
  };
}

LmsConnector::LmsConnector(MetadataStore& store, std::string cluster)
    : store_(store), cluster_(std::move(cluster)), source_(absl::StrCat("lms/", cluster_)) {}

absl::Status LmsConnector::RegisterTypes() { return store_.RegisterTypes(LmsConnectorTypes()); }

absl::StatusOr<LmsSyncReport> LmsConnector::Sync(const ClusterInventory& inventory) {
  LmsSyncReport report;
  size_t warnings_left_out = 0;
  auto warn = [&](std::string warning) {
    if (report.warnings.size() < kMostWarnings) {
      report.warnings.push_back(std::move(warning));
    } else {
      ++warnings_left_out;
    }
  };
  const size_t most_id = store_.limits().max_id_bytes;

  // What the graph should hold, parents before children.
  std::vector<v1::MetadataEvent> entities, relationships;
  std::set<std::string> wanted;  // entity ids
  auto entity = [&](const char* type, const std::string& id, google::protobuf::Struct properties) {
    if (id.size() > most_id) {
      warn(absl::StrCat(type, " \"", id.substr(0, 64), "...\": its id is over ", most_id,
                        " bytes; left out"));
      return false;
    }
    v1::MetadataEvent e;
    e.set_op(v1::METADATA_OP_INSERT);
    e.set_type(type);
    e.set_id(id);
    *e.mutable_properties() = std::move(properties);
    e.set_cluster(cluster_);
    e.set_source(source_);
    entities.push_back(std::move(e));
    wanted.insert(id);
    return true;
  };
  auto relationship = [&](const char* type, const std::string& child, const std::string& from,
                          const std::string& to) {
    v1::MetadataEvent e;
    e.set_op(v1::METADATA_OP_INSERT);
    e.set_type(type);
    e.set_id(absl::StrCat(type, "/", child));
    e.set_from_id(from);
    e.set_to_id(to);
    e.set_cluster(cluster_);
    e.set_source(source_);
    if (e.id().size() > most_id) return;  // its child's id was already too long
    relationships.push_back(std::move(e));
  };

  const std::string cluster_id = ClusterEntityId(cluster_);
  {
    google::protobuf::Struct p;
    (*p.mutable_fields())["name"] = Text(cluster_);
    if (!entity(kCluster, cluster_id, std::move(p))) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster name \"", cluster_.substr(0, 64), "...\" is too long"));
    }
  }
  std::set<std::string> nodes;
  for (const lms::v1::Node& n : inventory.nodes) {
    if (n.name().empty()) continue;
    google::protobuf::Struct p;
    auto& f = *p.mutable_fields();
    f["name"] = Text(n.name());
    f["ready"] = Flag(n.condition() == lms::v1::NODE_CONDITION_READY);
    f["unschedulable"] = Flag(n.unschedulable());
    f["cpuMillicores"] = Number(static_cast<double>(n.allocatable().cpu_millicores()));
    f["memoryBytes"] = Number(static_cast<double>(n.allocatable().memory_bytes()));
    f["labels"] = Labels(n.labels());
    const std::string id = NodeEntityId(cluster_, n.name());
    if (!entity(kNode, id, std::move(p))) continue;
    nodes.insert(n.name());
    relationship(kContains, id, cluster_id, id);
  }
  std::set<std::string> namespaces;
  std::vector<std::pair<std::string, const lms::v1::Pod*>> pods;  // id, pod
  for (const lms::v1::Pod& pod : inventory.pods) {
    if (pod.name().empty()) continue;
    const std::string ns = NamespaceOf(pod);
    const std::string ns_id = NamespaceEntityId(cluster_, ns);
    if (namespaces.insert(ns).second) {
      google::protobuf::Struct p;
      (*p.mutable_fields())["name"] = Text(ns);
      (*p.mutable_fields())["cluster"] = Text(cluster_);
      if (entity(kNamespace, ns_id, std::move(p)))
        relationship(kContains, ns_id, cluster_id, ns_id);
    }
    if (!wanted.count(ns_id)) continue;
    google::protobuf::Struct p;
    auto& f = *p.mutable_fields();
    f["name"] = Text(pod.name());
    f["namespace"] = Text(ns);
    f["phase"] = Text(PhaseName(pod.phase()));
    if (!pod.node_name().empty()) f["node"] = Text(pod.node_name());
    const std::string application = LabelOr(pod.labels(), "codeco.io/application", "");
    if (!application.empty()) f["application"] = Text(application);
    const std::string service = LabelOr(pod.labels(), "codeco.io/service", "");
    if (!service.empty()) f["service"] = Text(service);
    if (!pod.pod_ip().empty()) f["podIp"] = Text(pod.pod_ip());
    f["labels"] = Labels(pod.labels());
    const std::string id = PodEntityId(cluster_, ns, pod.name());
    if (!entity(kPod, id, std::move(p))) continue;
    relationship(kContains, id, ns_id, id);
    if (pod.node_name().empty()) continue;
    if (!nodes.count(pod.node_name())) {
      warn(absl::StrCat("pod ", pod.name(), " is bound to node ", pod.node_name(),
                        ", which the LMS does not list; its RUNS_ON is left out"));
      continue;
    }
    relationship(kRunsOn, id, id, NodeEntityId(cluster_, pod.node_name()));
  }

  // Keep what is already as wanted; leave out what another source owns.
  using google::protobuf::util::MessageDifferencer;
  std::vector<v1::MetadataEvent> changes;
  for (v1::MetadataEvent& e : entities) {
    absl::StatusOr<v1::Entity> current = store_.GetEntity(e.id());
    if (current.ok()) {
      if (current->source() != source_ && !current->source().empty()) {
        warn(absl::StrCat(e.id(), " belongs to source \"", current->source(), "\"; left as is"));
        wanted.erase(e.id());
        continue;
      }
      if (current->type() == e.type() && current->cluster() == e.cluster() &&
          current->source() == source_ &&
          MessageDifferencer::Equals(current->properties(), e.properties())) {
        ++report.unchanged;
        continue;
      }
    } else if (!absl::IsNotFound(current.status())) {
      return current.status();
    }
    changes.push_back(std::move(e));
  }
  for (v1::MetadataEvent& r : relationships) {
    if (!wanted.count(r.from_id()) || !wanted.count(r.to_id())) continue;
    absl::StatusOr<v1::Relationship> current = store_.GetRelationship(r.id());
    if (current.ok()) {
      if (current->source() != source_ && !current->source().empty()) {
        warn(absl::StrCat(r.id(), " belongs to source \"", current->source(), "\"; left as is"));
        continue;
      }
      if (current->type() == r.type() && current->from_id() == r.from_id() &&
          current->to_id() == r.to_id() && current->source() == source_ &&
          MessageDifferencer::Equals(current->properties(), r.properties())) {
        ++report.unchanged;
        continue;
      }
    } else if (!absl::IsNotFound(current.status())) {
      return current.status();
    }
    changes.push_back(std::move(r));
  }

  // What this connector owns that the LMS no longer has: pods first, then
  // what held them. A pod now without a node loses its RUNS_ON.
  std::vector<std::string> stale;
  for (const char* type : {kPod, kNode, kNamespace, kCluster}) {
    std::string after;
    do {
      ASSIGN_OR_RETURN(EntityPage page, store_.ListEntities({.type = type, .cluster = cluster_},
                                                            after, store_.limits().max_page));
      for (const v1::Entity& e : page.entities) {
        if (e.source() == source_ && !wanted.count(e.id())) stale.push_back(e.id());
      }
      after = page.next_after;
    } while (!after.empty());
  }
  for (const lms::v1::Pod& pod : inventory.pods) {
    if (!pod.node_name().empty() && nodes.count(pod.node_name())) continue;
    const std::string runs_on =
        absl::StrCat(kRunsOn, "/", PodEntityId(cluster_, NamespaceOf(pod), pod.name()));
    absl::StatusOr<v1::Relationship> current = store_.GetRelationship(runs_on);
    if (current.ok() && current->source() == source_) stale.push_back(runs_on);
  }
  for (const std::string& id : stale) {
    v1::MetadataEvent drop;
    drop.set_op(v1::METADATA_OP_DELETE);
    drop.set_id(id);
    drop.set_cluster(cluster_);
    drop.set_source(source_);
    changes.push_back(std::move(drop));
    if (!absl::StartsWith(id, kRunsOn)) ++report.deleted;
  }

  RETURN_IF_ERROR(PublishAll(std::move(changes), report));
  if (warnings_left_out > 0) {
    report.warnings.push_back(absl::StrCat(warnings_left_out, " more warnings left out"));
  }
  return report;
}

absl::Status LmsConnector::PublishAll(std::vector<v1::MetadataEvent> events,
                                      LmsSyncReport& report) {
  const size_t batch_size =
      std::max<size_t>(1, std::min<size_t>(store_.limits().max_batch_events, 1000));
  for (size_t start = 0; start < events.size(); start += batch_size) {
    const size_t end = std::min(events.size(), start + batch_size);
    std::vector<v1::MetadataEvent> batch(events.begin() + static_cast<ptrdiff_t>(start),
                                         events.begin() + static_cast<ptrdiff_t>(end));
    absl::StatusOr<PublishResult> published = store_.Publish(batch);
    if (published.ok()) {
      report.published += published->appended;
      continue;
    }
    if (!absl::IsInvalidArgument(published.status())) return published.status();
    // One event spoils the batch: publish them one at a time.
    for (const v1::MetadataEvent& e : batch) {
      absl::StatusOr<PublishResult> one = store_.Publish({e});
      if (one.ok()) {
        report.published += one->appended;
      } else if (absl::IsInvalidArgument(one.status())) {
        if (report.warnings.size() < kMostWarnings) {
          report.warnings.push_back(absl::StrCat(e.id(), ": refused: ", one.status().message()));
        }
      } else {
        return one.status();
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace codeco::mdm
