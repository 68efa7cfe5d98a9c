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

// What the tree knows of one cluster: its record at the hub, or its record
// as a registered cluster reported it (Cluster.subordinates).
struct Known {
  const acm::v1::Cluster* cluster = nullptr;
  const acm::v1::SubtreeCluster* reported = nullptr;
  // The cluster it hangs below ("" = the hub).
  std::string parent;
  std::string note;
};

acm::v1::ClusterHealth Health(const ClusterTreeNode& node) {
  if (node.cluster != nullptr) return node.cluster->health();
  if (node.reported != nullptr) return node.reported->health();
  return acm::v1::CLUSTER_HEALTH_UNSPECIFIED;
}

bool IsKnown(const ClusterTreeNode& node) {
  return node.cluster != nullptr || node.reported != nullptr;
}

std::string HealthText(const ClusterTreeNode& node) {
  if (!IsKnown(node)) return "-";
  std::string name = acm::v1::ClusterHealth_Name(Health(node));
  const std::string prefix = "CLUSTER_HEALTH_";
  if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  return name;
}

int NodeCount(const ClusterTreeNode& node) {
  if (node.cluster != nullptr) return node.cluster->capacity().node_count();
  return node.reported != nullptr ? node.reported->node_count() : 0;
}

int ReadyNodeCount(const ClusterTreeNode& node) {
  if (node.cluster != nullptr) return node.cluster->capacity().ready_node_count();
  return node.reported != nullptr ? node.reported->ready_node_count() : 0;
}

int ReceivedMissions(const ClusterTreeNode& node) {
  if (node.cluster != nullptr) return node.cluster->received_missions();
  return node.reported != nullptr ? node.reported->received_missions() : 0;
}

int ActiveMissions(const ClusterTreeNode& node) {
  if (node.cluster != nullptr) return node.cluster->active_missions();
  return node.reported != nullptr ? node.reported->active_missions() : 0;
}

const google::protobuf::Timestamp* LastHeartbeat(const ClusterTreeNode& node) {
  if (node.cluster != nullptr) return &node.cluster->last_heartbeat_time();
  return node.reported != nullptr ? &node.reported->last_heartbeat_time() : nullptr;
}

std::string HeartbeatText(const ClusterTreeNode& node) {
  const google::protobuf::Timestamp* ts = LastHeartbeat(node);
  if (ts == nullptr || (ts->seconds() == 0 && ts->nanos() == 0)) return "-";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", FromProtoTimestamp(*ts), absl::UTCTimeZone());
}

}  // namespace

std::vector<ClusterTreeNode> BuildClusterTree(const acm::v1::ListClustersResponse& clusters) {
  std::map<std::string, Known> known;
  for (const acm::v1::Cluster& c : clusters.clusters()) {
    known[c.metadata().name()] = {.cluster = &c, .parent = c.parent_cluster()};
  }
  // What the registered clusters report of their layered subtrees.
  std::map<std::string, std::string> reporter_of;
  for (const acm::v1::Cluster& c : clusters.clusters()) {
    for (const acm::v1::SubtreeCluster& s : c.subordinates()) {
      if (s.name().empty()) continue;
      auto it = known.find(s.name());
      if (it != known.end()) {
        const Known& k = it->second;
        if (k.cluster != nullptr || FromProtoTimestamp(k.reported->last_heartbeat_time()) >=
                                        FromProtoTimestamp(s.last_heartbeat_time())) {
          continue;  // the hub's own record, or a fresher report
        }
      }
      known[s.name()] = {.reported = &s, .parent = s.parent()};
      reporter_of[s.name()] = c.metadata().name();
    }
  }
  // A reported cluster whose parent nobody knows hangs below its reporter.
  for (auto& [name, k] : known) {
    if (k.reported == nullptr) continue;
    const std::string& reporter = reporter_of[name];
    if (k.parent.empty()) {
      k.parent = reporter;
    } else if (!known.count(k.parent)) {
      k.note = absl::StrCat("its parent ", k.parent, " is not reported");
      k.parent = reporter;
    }
  }
  std::map<std::string, std::set<std::string>> children_of;
  std::set<std::string> top;  // under the hub
  for (const auto& [name, k] : known) {
    if (k.parent.empty()) {
      top.insert(name);
    } else {
      children_of[k.parent].insert(name);
      if (!known.count(k.parent)) top.insert(k.parent);  // a parent not registered
    }
  }
  std::set<std::string> placed;
  // `unreachable_above`: the nearest UNREACHABLE cluster between `name` and
  // the hub record that reported it ("" = none: its report is current).
  std::function<ClusterTreeNode(const std::string&, const std::string&)> build =
      [&](const std::string& name, const std::string& unreachable_above) {
        placed.insert(name);
        auto it = known.find(name);
        ClusterTreeNode node{.name = name};
        std::string below_unreachable;
        if (it == known.end()) {
          node.note = "not registered";
        } else {
          node.cluster = it->second.cluster;
          node.reported = it->second.reported;
          node.note = it->second.note;
          node.via = node.cluster != nullptr ? "hub" : it->second.parent;
          const bool unreachable = Health(node) == acm::v1::CLUSTER_HEALTH_UNREACHABLE;
          if (node.reported != nullptr && !unreachable_above.empty()) {
            absl::StrAppend(&node.note, node.note.empty() ? "" : "; ", "stale: ", unreachable_above,
                            " unreachable");
          }
          // A hub record starts a fresh reporting chain.
          below_unreachable = node.reported != nullptr && !unreachable_above.empty()
                                  ? unreachable_above
                              : unreachable ? name
                                            : "";
          node.subtree_clusters = 1;
          node.subtree_nodes = NodeCount(node);
          node.subtree_ready_nodes = ReadyNodeCount(node);
          node.subtree_unreachable = unreachable ? 1 : 0;
        }
        for (const std::string& child : children_of[name]) {
          if (placed.count(child)) continue;  // a loop closes here
          ClusterTreeNode sub = build(child, below_unreachable);
          node.subtree_clusters += sub.subtree_clusters;
          node.subtree_nodes += sub.subtree_nodes;
          node.subtree_ready_nodes += sub.subtree_ready_nodes;
          node.subtree_unreachable += sub.subtree_unreachable;
          node.children.push_back(std::move(sub));
        }
        return node;
      };
  std::vector<ClusterTreeNode> roots;
  for (const std::string& name : top) roots.push_back(build(name, ""));
  // Clusters only reachable through a loop of parents: cut where it closes.
  for (const auto& [name, k] : known) {
    if (placed.count(name)) continue;
    roots.push_back(build(name, ""));
    roots.back().note = absl::StrCat("its parents loop back to it (parent ", k.parent, ")");
  }
  return roots;
}

std::string ClusterTreeTable(const std::vector<ClusterTreeNode>& roots) {
  std::vector<std::vector<std::string>> rows = {{"CLUSTER", "HEALTH", "VIA", "NODES", "MISSIONS",
                                                 "SUBTREE CLUSTERS", "SUBTREE NODES",
                                                 "UNREACHABLE BELOW", "LAST HEARTBEAT"}};
  rows.push_back({"(hub)", "", "", "", "", "", "", "", ""});
  std::function<void(const ClusterTreeNode&, const std::string&, bool)> add =
      [&](const ClusterTreeNode& node, const std::string& indent, bool last) {
        const bool known = IsKnown(node);
        const int below = node.subtree_unreachable -
                          (Health(node) == acm::v1::CLUSTER_HEALTH_UNREACHABLE ? 1 : 0);
        rows.push_back(
            {absl::StrCat(indent, last ? "`- " : "|- ", node.name,
                          node.note.empty() ? "" : " (" + node.note + ")"),
             HealthText(node), node.via.empty() ? "-" : node.via,
             known ? absl::StrCat(ReadyNodeCount(node), "/", NodeCount(node)) : "-",
             known ? absl::StrCat(ActiveMissions(node), "/", ReceivedMissions(node)) : "-",
             absl::StrCat(node.subtree_clusters),
             absl::StrCat(node.subtree_ready_nodes, "/", node.subtree_nodes), absl::StrCat(below),
             HeartbeatText(node)});
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
    if (IsKnown(node)) {
      out["via"] = node.via;
      out["nodes"] = NodeCount(node);
      out["ready_nodes"] = ReadyNodeCount(node);
      out["missions"] = {{"received", ReceivedMissions(node)}, {"active", ActiveMissions(node)}};
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
