#pragma once
// `codecoctl get tree`: the registered clusters as the tree their
// parent_cluster fields make (Centaurus' cluster tree, DESIGN.md section 1),
// each with what its subtree holds, built from the hub ACM's ListClusters.

#include <string>
#include <vector>

#include "codeco/acm/v1/acm_service.pb.h"
#include "nlohmann/json.hpp"

namespace codeco::ctl {

/// One cluster of the tree, with its subtree's totals.
struct ClusterTreeNode {
  std::string name;                       ///< Cluster name.
  const acm::v1::Cluster* cluster;        ///< Its record; null for a parent not registered.
  std::string note;                       ///< Why it sits where it does, when unusual.
  std::vector<ClusterTreeNode> children;  ///< Its subordinate clusters, by name.
  int subtree_clusters = 0;               ///< Registered clusters in its subtree, itself included.
  int subtree_nodes = 0;                  ///< Their nodes.
  int subtree_ready_nodes = 0;            ///< Their ready nodes.
  int subtree_unreachable = 0;            ///< Those of them UNREACHABLE.
};

/// The forest under the hub: clusters without a parent, and parents named
/// but not registered (with the note "not registered"), each with its
/// subordinates, by name. A parent chain that loops (the registry refuses
/// one; older records may hold one) is cut where it closes, with a note.
/// `clusters` must outlive the result.
std::vector<ClusterTreeNode> BuildClusterTree(const acm::v1::ListClustersResponse& clusters);

/// The tree as indented rows: cluster, health, nodes (ready/all), its
/// subtree's clusters, ready nodes and unreachable clusters, last heartbeat.
std::string ClusterTreeTable(const std::vector<ClusterTreeNode>& roots);

/// The tree as JSON: {"clusters": [{"name", "health", "nodes", "ready_nodes",
/// "last_heartbeat_time", "note", "subtree": {...}, "children": [...]}]}.
nlohmann::json ClusterTreeJson(const std::vector<ClusterTreeNode>& roots);

}  // namespace codeco::ctl
