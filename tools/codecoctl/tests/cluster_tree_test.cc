// `codecoctl get tree`: the registered clusters arranged by parent_cluster.
#include "cluster_tree.h"

#include <catch2/catch.hpp>
#include <sstream>

namespace codeco::ctl {
namespace {

void Add(acm::v1::ListClustersResponse& list, const std::string& name, const std::string& parent,
         int nodes, int ready, acm::v1::ClusterHealth health = acm::v1::CLUSTER_HEALTH_READY) {
  acm::v1::Cluster* c = list.add_clusters();
  c->mutable_metadata()->set_name(name);
  c->set_parent_cluster(parent);
  c->mutable_capacity()->set_node_count(nodes);
  c->mutable_capacity()->set_ready_node_count(ready);
  c->set_health(health);
}

TEST_CASE("clusters are arranged under their parents with their subtrees' totals") {
  acm::v1::ListClustersResponse list;
  Add(list, "site-a", "", 2, 2);
  Add(list, "a-1", "site-a", 3, 3);
  Add(list, "a-2", "site-a", 3, 1, acm::v1::CLUSTER_HEALTH_UNREACHABLE);
  Add(list, "a-2-x", "a-2", 1, 1);
  Add(list, "orphan", "gone", 4, 4);
  Add(list, "flat", "", 5, 5);
  const std::vector<ClusterTreeNode> tree = BuildClusterTree(list);
  REQUIRE(tree.size() == 3);  // flat, gone (not registered), site-a
  CHECK(tree[0].name == "flat");
  CHECK(tree[1].name == "gone");
  CHECK(tree[1].cluster == nullptr);
  CHECK(tree[1].note == "not registered");
  REQUIRE(tree[1].children.size() == 1);
  CHECK(tree[1].subtree_clusters == 1);
  const ClusterTreeNode& a = tree[2];
  CHECK(a.name == "site-a");
  REQUIRE(a.children.size() == 2);
  CHECK(a.children[1].name == "a-2");
  CHECK(a.children[1].children.at(0).name == "a-2-x");
  CHECK(a.subtree_clusters == 4);
  CHECK(a.subtree_nodes == 9);
  CHECK(a.subtree_ready_nodes == 7);
  CHECK(a.subtree_unreachable == 1);

  const std::string table = ClusterTreeTable(tree);
  CHECK_THAT(table, Catch::Contains("`- site-a"));
  CHECK_THAT(table, Catch::Contains("   |- a-1"));
  CHECK_THAT(table, Catch::Contains("      `- a-2-x"));
  CHECK_THAT(table, Catch::Contains("gone (not registered)"));
  const nlohmann::json doc = ClusterTreeJson(tree);
  CHECK(doc["clusters"][2]["subtree"]["clusters"] == 4);
  CHECK(doc["clusters"][2]["children"][1]["health"] == "UNREACHABLE");
}

// The words of the line of `table` that contains `marker` (none: empty).
std::vector<std::string> Row(const std::string& table, const std::string& marker) {
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(marker) == std::string::npos) continue;
    std::istringstream words(line);
    std::vector<std::string> out;
    for (std::string w; words >> w;) out.push_back(w);
    return out;
  }
  return {};
}

// A cluster of `reporter`'s layered subtree, below `parent`.
acm::v1::SubtreeCluster* AddBelow(acm::v1::Cluster& reporter, const std::string& name,
                                  const std::string& parent, int nodes, int ready,
                                  acm::v1::ClusterHealth health = acm::v1::CLUSTER_HEALTH_READY) {
  acm::v1::SubtreeCluster* s = reporter.add_subordinates();
  s->set_name(name);
  s->set_parent(parent);
  s->set_node_count(nodes);
  s->set_ready_node_count(ready);
  s->set_health(health);
  s->mutable_last_heartbeat_time()->set_seconds(1'800'000'000);
  return s;
}

TEST_CASE("a layered subtree hangs below the cluster that reports it with its missions") {
  acm::v1::ListClustersResponse list;
  Add(list, "region", "", 2, 2);
  Add(list, "flat", "", 1, 1);
  acm::v1::Cluster& region = *list.mutable_clusters(0);
  region.set_received_missions(2);
  region.set_active_missions(1);
  AddBelow(region, "site-a", "region", 2, 2);
  AddBelow(region, "site-b", "region", 1, 1, acm::v1::CLUSTER_HEALTH_UNREACHABLE);
  acm::v1::SubtreeCluster* a1 = AddBelow(region, "leaf-a1", "site-a", 1, 1);
  a1->set_received_missions(1);
  a1->set_active_missions(1);
  AddBelow(region, "leaf-a2", "site-a", 1, 0, acm::v1::CLUSTER_HEALTH_DEGRADED);
  AddBelow(region, "leaf-b1", "site-b", 1, 1);
  AddBelow(region, "lost", "nowhere", 1, 1);  // parent unknown: below its reporter
  AddBelow(region, "flat", "region", 9, 9);   // the hub's own record wins
  const std::vector<ClusterTreeNode> tree = BuildClusterTree(list);
  REQUIRE(tree.size() == 2);
  CHECK(tree[0].name == "flat");
  CHECK(tree[0].cluster != nullptr);
  CHECK(tree[0].subtree_nodes == 1);
  const ClusterTreeNode& r = tree[1];
  CHECK(r.name == "region");
  CHECK(r.via == "hub");
  REQUIRE(r.children.size() == 3);  // lost, site-a, site-b
  CHECK(r.children[0].name == "lost");
  CHECK_THAT(r.children[0].note, Catch::Contains("nowhere is not reported"));
  const ClusterTreeNode& a = r.children[1];
  CHECK(a.name == "site-a");
  CHECK(a.cluster == nullptr);
  REQUIRE(a.reported != nullptr);
  CHECK(a.via == "region");
  REQUIRE(a.children.size() == 2);
  CHECK(a.children[0].via == "site-a");
  CHECK(a.subtree_clusters == 3);
  CHECK(a.subtree_nodes == 4);
  CHECK(a.subtree_ready_nodes == 3);
  // Totals take in every level reported.
  CHECK(r.subtree_clusters == 7);
  CHECK(r.subtree_nodes == 9);
  CHECK(r.subtree_unreachable == 1);
  // What an unreachable site reported of its leaves is stale.
  const ClusterTreeNode& b = r.children[2];
  REQUIRE(b.children.size() == 1);
  CHECK(b.children[0].note == "stale: site-b unreachable");
  CHECK(a.children[0].note.empty());

  const std::string table = ClusterTreeTable(tree);
  INFO(table);
  CHECK_THAT(table, Catch::Contains("MISSIONS"));
  CHECK_THAT(table, Catch::Contains("VIA"));
  CHECK(Row(table, "`- region") == std::vector<std::string>{"`-", "region", "READY", "hub", "2/2",
                                                            "1/2", "7", "8/9", "1", "-"});
  CHECK(Row(table, "|  `- leaf-a2") == std::vector<std::string>{"|", "`-", "leaf-a2", "DEGRADED",
                                                                "site-a", "0/1", "0/0", "1", "0/1",
                                                                "0", "2027-01-15T08:00:00Z"});
  CHECK_THAT(table, Catch::Contains("   |- site-a"));
  CHECK_THAT(table, Catch::Contains("   `- site-b"));
  const nlohmann::json doc = ClusterTreeJson(tree);
  const nlohmann::json& leaf = doc["clusters"][1]["children"][1]["children"][0];
  CHECK(leaf["name"] == "leaf-a1");
  CHECK(leaf["via"] == "site-a");
  CHECK(leaf["missions"]["active"] == 1);
  CHECK(leaf["missions"]["received"] == 1);
  CHECK(leaf["last_heartbeat_time"] == "2027-01-15T08:00:00Z");
  CHECK(doc["clusters"][1]["missions"]["received"] == 2);
  CHECK(doc["clusters"][1]["subtree"]["clusters"] == 7);
}

TEST_CASE("of two reports of one cluster the later heartbeat wins") {
  acm::v1::ListClustersResponse list;
  Add(list, "p", "", 1, 1);
  Add(list, "q", "", 1, 1);
  AddBelow(*list.mutable_clusters(0), "x", "p", 1, 1);
  AddBelow(*list.mutable_clusters(1), "x", "q", 3, 3)
      ->mutable_last_heartbeat_time()
      ->set_seconds(1'900'000'000);
  const std::vector<ClusterTreeNode> tree = BuildClusterTree(list);
  REQUIRE(tree.size() == 2);
  CHECK(tree[0].children.empty());
  REQUIRE(tree[1].children.size() == 1);
  CHECK(tree[1].children[0].subtree_nodes == 3);
}

TEST_CASE("a loop of parents is cut where it closes and every cluster is shown once") {
  acm::v1::ListClustersResponse list;
  Add(list, "x", "y", 1, 1);
  Add(list, "y", "x", 1, 1);
  const std::vector<ClusterTreeNode> tree = BuildClusterTree(list);
  REQUIRE(tree.size() == 1);
  CHECK(tree[0].name == "x");
  CHECK_THAT(tree[0].note, Catch::Contains("loop"));
  REQUIRE(tree[0].children.size() == 1);
  CHECK(tree[0].children[0].name == "y");
  CHECK(tree[0].children[0].children.empty());
  CHECK(tree[0].subtree_clusters == 2);
}

}  // namespace
}  // namespace codeco::ctl
