#pragma once
// The LMS connector (issue 15, docs/mdm.md): what one cluster's local
// management system (codeco.lms.v1: the CODEF emulator, or Kubernetes
// through an adapter) holds, mirrored into the metadata graph.
//
//   Cluster   Cluster/<cluster>                 {name}
//   Namespace Namespace/<cluster>/<namespace>   {name, cluster}
//   Node      Node/<cluster>/<node>             {name, ready, unschedulable,
//                                                cpuMillicores, memoryBytes, labels}
//   Pod       Pod/<cluster>/<namespace>/<pod>   {name, namespace, phase, node,
//                                                application, service, podIp, labels}
//   CONTAINS  CONTAINS/<child id>   Cluster -> Namespace, Cluster -> Node, Namespace -> Pod
//   RUNS_ON   RUNS_ON/<pod id>      Pod -> Node
//
// Ids are made from stable attributes (cluster, namespace, name), so the
// same object always has the same id, on any instance and after any
// restart. The LMS API has no namespaces: a pod's namespace is its
// `codeco.io/namespace` label, "default" without one.
//
// The connector publishes as source "lms/<cluster>" and so owns what it
// inserts. A sync compares the inventory with what the store holds (not
// with a memory of its own, so a restarted connector picks up where it
// was): it inserts what is new or changed, deletes what it owns that the
// LMS no longer has, and publishes nothing when nothing changed. What it
// cannot publish (an id too long, an object another source owns, an event
// the store refuses) is left out and reported as a warning; the rest goes on.

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codeco/lms/v1/lms.pb.h"
#include "codeco/mdm/v1/metadata.pb.h"
#include "mdm/core/metadata_store.h"

namespace codeco::mdm {

/// The label that names a pod's namespace.
inline constexpr char kNamespaceLabel[] = "codeco.io/namespace";

/// What one cluster's LMS holds at one moment.
struct ClusterInventory {
  /// Every node.
  std::vector<lms::v1::Node> nodes;
  /// Every pod.
  std::vector<lms::v1::Pod> pods;
};

/// What one Sync did.
struct LmsSyncReport {
  /// Events appended (inserts and deletes).
  size_t published = 0;
  /// Objects already as the inventory has them.
  size_t unchanged = 0;
  /// Entities deleted (with their relationships).
  size_t deleted = 0;
  /// What was left out, and why.
  std::vector<std::string> warnings;
};

/// The deterministic ids.
std::string ClusterEntityId(const std::string& cluster);
/// See ClusterEntityId.
std::string NamespaceEntityId(const std::string& cluster, const std::string& name);
/// See ClusterEntityId.
std::string NodeEntityId(const std::string& cluster, const std::string& node);
/// See ClusterEntityId.
std::string PodEntityId(const std::string& cluster, const std::string& name_space,
                        const std::string& pod);

/// The types the connector publishes: Cluster, Namespace, Node, Pod,
/// CONTAINS and RUNS_ON.
std::vector<v1::TypeDefinition> LmsConnectorTypes();

/// Mirrors one cluster's LMS into a MetadataStore.
class LmsConnector {
 public:
  /// For `cluster`, into `store` (which must outlive it).
  LmsConnector(MetadataStore& store, std::string cluster);

  /// The source its events carry: "lms/<cluster>".
  const std::string& source() const { return source_; }

  /// Registers LmsConnectorTypes() (a no-op when they are registered as is).
  absl::Status RegisterTypes();

  /// Brings the graph to `inventory`. An error only when the store cannot be
  /// read or written; what is left out is in the report's warnings.
  absl::StatusOr<LmsSyncReport> Sync(const ClusterInventory& inventory);

 private:
  // Publishes `events` in batches; a refused batch is published event by
  // event, and the refused ones become warnings.
  absl::Status PublishAll(std::vector<v1::MetadataEvent> events, LmsSyncReport& report);

  MetadataStore& store_;
  const std::string cluster_;
  const std::string source_;
};

}  // namespace codeco::mdm
