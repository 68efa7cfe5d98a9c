#include "cluster_tree.h"

#include <functional>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cli.h"
#include "codeco/common/proto_util.h"

namespace codeco::ctl {
namespace {

std::string HealthText(const ClusterTreeNode& node) {
  if (node.cluster == nullptr) return "-";
  std::string name = acm::v1::ClusterHealth_Name(node.cluster->health());
  const std::string prefix = "CLUSTER_HEALTH_";
  if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  return name;
}

std::string HeartbeatText(const ClusterTreeNode& node) {
  if (node.cluster == nullptr) return "-";
  const auto& ts = node.cluster->last_heartbeat_time();
  if (ts.seconds() == 0 && ts.nanos() == 0) return "-";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", FromProtoTimestamp(ts), absl::UTCTimeZone());
}

}  // namespace

std::vector<ClusterTreeNode> BuildClusterTree(const acm::v1::ListClustersResponse& clusters) {
  std::map<std::string, const acm::v1::Cluster*> by_name;
  for (const acm::v1::Cluster& c : clusters.clusters()) by_name[c.metadata().name()] = &c;
  std::map<std::string, std::set<std::string>> children_of;
  std::set<std::string> top;  // under the hub
  for (const auto& [name, c] : by_name) {
    const std::string& parent = c->parent_cluster();
    if (parent.empty()) {
      top.insert(name);
    } else {
      children_of[parent].insert(name);
      if (!by_name.count(parent)) top.insert(parent);  // a parent not registered
    }
  }
  std::set<std::string> placed;
  std::function<ClusterTreeNode(const std::string&)> build = [&](const std::string& name) {
    placed.insert(name);
    auto it = by_name.find(name);
    ClusterTreeNode node{.name = name, .cluster = it == by_name.end() ? nullptr : it->second};
    if (node.cluster == nullptr) node.note = "not registered";
    if (node.cluster != nullptr) {
      node.subtree_clusters = 1;
      node.subtree_nodes = node.cluster->capacity().node_count();
      node.subtree_ready_nodes = node.cluster->capacity().ready_node_count();
      node.subtree_unreachable =
          node.cluster->health() == acm::v1::CLUSTER_HEALTH_UNREACHABLE ? 1 : 0;
    }
    for (const std::string& child : children_of[name]) {
      if (placed.count(child)) continue;  // a loop closes here
      ClusterTreeNode sub = build(child);
      node.subtree_clusters += sub.subtree_clusters;
      node.subtree_nodes += sub.subtree_nodes;
      node.subtree_ready_nodes += sub.subtree_ready_nodes;
      node.subtree_unreachable += sub.subtree_unreachable;
      node.children.push_back(std::move(sub));
    }
    return node;
  };
  std::vector<ClusterTreeNode> roots;
  for (const std::string& name : top) roots.push_back(build(name));
  // Clusters only reachable through a loop of parents: cut where it closes.
  for (const auto& [name, c] : by_name) {
    if (placed.count(name)) continue;
    roots.push_back(build(name));
    roots.back().note =
        absl::StrCat("its parents loop back to it (parent ", c->parent_cluster(), ")");
  }
  return roots;
}

std::string ClusterTreeTable(const std::vector<ClusterTreeNode>& roots) {
  std::vector<std::vector<std::string>> rows = {{"CLUSTER", "HEALTH", "NODES", "SUBTREE CLUSTERS",
                                                 "SUBTREE NODES", "UNREACHABLE BELOW",
                                                 "LAST HEARTBEAT"}};
  rows.push_back({"(hub)", "", "", "", "", "", ""});
  std::function<void(const ClusterTreeNode&, const std::string&, bool)> add =
      [&](const ClusterTreeNode& node, const std::string& indent, bool last) {
        const std::string nodes = node.cluster == nullptr
                                      ? "-"
                                      : absl::StrCat(node.cluster->capacity().ready_node_count(),
                                                     "/", node.cluster->capacity().node_count());
        const int below = node.subtree_unreachable -
                          (node.cluster != nullptr &&
                                   node.cluster->health() == acm::v1::CLUSTER_HEALTH_UNREACHABLE
                               ? 1
                               : 0);
        rows.push_back({absl::StrCat(indent, last ? "`- " : "|- ", node.name,
                                     node.note.empty() ? "" : " (" + node.note + ")"),
                        HealthText(node), nodes, absl::StrCat(node.subtree_clusters),
                        absl::StrCat(node.subtree_ready_nodes, "/", node.subtree_nodes),
                        absl::StrCat(below), HeartbeatText(node)});
        for (size_t i = 0; i < node.children.size(); ++i) {
          add(node.children[i], indent + (last ? "   " : "|  "), i + 1 == node.children.size());
        }
      };
  for (size_t i = 0; i < roots.size(); ++i) add(roots[i], "", i + 1 == roots.size());
  return Columns(rows);
}

nlohmann::json ClusterTreeJson(const std::vector<ClusterTreeNode>& roots) {
  std::function<nlohmann::json(const ClusterTreeNode&)> one = [&](const ClusterTreeNode& node) {
    nlohmann::json out = {{"name", node.name}, {"health", HealthText(node)}};
    if (node.cluster != nullptr) {
      out["nodes"] = node.cluster->capacity().node_count();
      out["ready_nodes"] = node.cluster->capacity().ready_node_count();
      out["last_heartbeat_time"] = HeartbeatText(node);
    }
    if (!node.note.empty()) out["note"] = node.note;
    out["subtree"] = {{"clusters", node.subtree_clusters},
                      {"nodes", node.subtree_nodes},
                      {"ready_nodes", node.subtree_ready_nodes},
                      {"unreachable_clusters", node.subtree_unreachable}};
    out["children"] = nlohmann::json::array();
    for (const ClusterTreeNode& c : node.children) out["children"].push_back(one(c));
    return out;
  };
  nlohmann::json doc = {{"clusters", nlohmann::json::array()}};
  for (const ClusterTreeNode& r : roots) doc["clusters"].push_back(one(r));
  return doc;
}

}  // namespace codeco::ctl
