// `codecoctl get tree`: the registered clusters arranged by parent_cluster.
#include "cluster_tree.h"

#include <catch2/catch.hpp>

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
