#pragma once
// `codecoctl get tree`: the registered clusters as the tree their
// parent_cluster fields make (Centaurus' cluster tree, DESIGN.md section 1),
// with the layered subtrees their agents report (Cluster.subordinates: the
// clusters registered at a cluster's own ACM, every level) hung below them,
// each with what its subtree holds, built from the hub ACM's ListClusters.

#include <string>
#include <vector>

#include "codeco/acm/v1/acm_service.pb.h"
#include "nlohmann/json.hpp"

namespace codeco::ctl {

/// One cluster of the tree, with its subtree's totals.
struct ClusterTreeNode {
  /// Cluster name.
  std::string name;
  /// Its record at the hub; null when not registered there.
  const acm::v1::Cluster* cluster = nullptr;
  /// Its record as its parent reported it up (layered tree); null for hub records.
  const acm::v1::SubtreeCluster* reported = nullptr;
  /// Whose view its health is: "hub", or the parent that reported it.
  std::string via;
  /// Why it sits where it does, when unusual.
  std::string note;
  /// Its subordinate clusters, by name.
  std::vector<ClusterTreeNode> children;
  /// Known clusters in its subtree (at the hub or reported), itself included.
  int subtree_clusters = 0;
  /// Their nodes.
  int subtree_nodes = 0;
  /// Their ready nodes.
  int subtree_ready_nodes = 0;
  /// Those of them UNREACHABLE.
  int subtree_unreachable = 0;
};

/// The forest under the hub: clusters without a parent, and parents named
/// but not registered (with the note "not registered"), each with its
/// subordinates, by name. The clusters a registered cluster reports in its
/// `subordinates` hang below their `parent` (below the reporting cluster when
/// that parent is unknown); a record at the hub wins over a reported one, and
/// of two reports the one with the later heartbeat. A reported cluster whose
/// reporting chain holds an UNREACHABLE cluster gets the note "stale: X
/// unreachable". A parent chain that loops (the registry refuses one; older
/// records may hold one) is cut where it closes, with a note. `clusters` must
/// outlive the result.
std::vector<ClusterTreeNode> BuildClusterTree(const acm::v1::ListClustersResponse& clusters);

/// The tree as indented rows: cluster, health, via (whose view: "hub" or its
/// parent), nodes (ready/all), missions (active/received), its subtree's
/// clusters, ready nodes and unreachable clusters, last heartbeat.
std::string ClusterTreeTable(const std::vector<ClusterTreeNode>& roots);

/// The tree as JSON: {"clusters": [{"name", "health", "via", "nodes",
/// "ready_nodes", "missions": {"received", "active"}, "last_heartbeat_time",
/// "note", "subtree": {...}, "children": [...]}]}.
nlohmann::json ClusterTreeJson(const std::vector<ClusterTreeNode>& roots);

}  // namespace codeco::ctl
