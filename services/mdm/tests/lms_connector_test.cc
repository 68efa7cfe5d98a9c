// The LMS connector (mdm/core/lms_connector.h) on an in-memory store: the
// graph a cluster's inventory gives, a sync of nothing new publishing
// nothing (also for a new connector after a restart), changes and removals
// mirrored, and what another source owns left alone with a warning.
#include "mdm/core/lms_connector.h"

#include <catch2/catch.hpp>
#include <set>

#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"
#include "mdm/core/metadata_store.h"

namespace codeco::mdm {
namespace {

lms::v1::Node Node(const std::string& name, bool ready = true) {
  lms::v1::Node n;
  n.set_name(name);
  n.set_condition(ready ? lms::v1::NODE_CONDITION_READY : lms::v1::NODE_CONDITION_NOT_READY);
  n.mutable_allocatable()->set_cpu_millicores(4000);
  n.mutable_allocatable()->set_memory_bytes(8LL << 30);
  (*n.mutable_labels())["topology.kubernetes.io/zone"] = "z1";
  return n;
}

lms::v1::Pod Pod(const std::string& name, const std::string& node, const std::string& ns = "") {
  lms::v1::Pod p;
  p.set_name(name);
  p.set_node_name(node);
  p.set_phase(lms::v1::POD_PHASE_RUNNING);
  (*p.mutable_labels())["codeco.io/application"] = "shop";
  (*p.mutable_labels())["codeco.io/service"] = name;
  if (!ns.empty()) (*p.mutable_labels())[kNamespaceLabel] = ns;
  return p;
}

struct Fixture {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore(MetadataColumnFamilies());
  SimulatedClock clock{absl::FromUnixSeconds(1'800'000'000)};
  std::unique_ptr<MetadataStore> store = *MetadataStore::Open(*kv, clock);

  LmsSyncReport Sync(const ClusterInventory& inventory) {
    LmsConnector connector(*store, "edge-1");
    REQUIRE(connector.RegisterTypes().ok());
    absl::StatusOr<LmsSyncReport> report = connector.Sync(inventory);
    INFO(report.status().message());
    REQUIRE(report.ok());
    return *report;
  }
  std::set<std::string> Neighbours(const std::string& id, const std::string& relationship) {
    absl::StatusOr<GraphResult> r = store->Query({id, 1, {relationship}, Direction::kBoth, 0});
    REQUIRE(r.ok());
    std::set<std::string> out;
    for (size_t i = 1; i < r->entities.size(); ++i) out.insert(r->entities[i].id());
    return out;
  }
};

TEST_CASE("An inventory becomes clusters nodes namespaces and pods with their relationships",
          "[mdm][connector]") {
  Fixture f;
  const ClusterInventory inventory{
      {Node("n1"), Node("n2", false)},
      {Pod("web-0", "n1"), Pod("db-0", "n2", "data"), Pod("queued", "")}};
  LmsSyncReport first = f.Sync(inventory);
  // 1 cluster, 2 namespaces, 2 nodes, 3 pods; CONTAINS for 7; RUNS_ON for 2.
  CHECK(first.published == 17);
  CHECK(first.warnings.empty());

  absl::StatusOr<v1::Entity> db = f.store->GetEntity("Pod/edge-1/data/db-0");
  REQUIRE(db.ok());
  CHECK(db->source() == "lms/edge-1");
  CHECK(db->cluster() == "edge-1");
  CHECK(db->properties().fields().at("phase").string_value() == "Running");
  CHECK(db->properties().fields().at("application").string_value() == "shop");
  CHECK(f.store->GetEntity("Node/edge-1/n2")->properties().fields().at("ready").bool_value() ==
        false);
  CHECK(f.Neighbours("Node/edge-1/n1", "RUNS_ON") ==
        std::set<std::string>{"Pod/edge-1/default/web-0"});
  CHECK(f.Neighbours("Cluster/edge-1", "CONTAINS") ==
        std::set<std::string>{"Namespace/edge-1/data", "Namespace/edge-1/default", "Node/edge-1/n1",
                              "Node/edge-1/n2"});
  CHECK(f.Neighbours("Pod/edge-1/default/queued", "RUNS_ON").empty());

  // Nothing new: nothing published, also by a fresh connector (a restart).
  const int64_t end = f.store->end_offset();
  LmsSyncReport again = f.Sync(inventory);
  CHECK(again.published == 0);
  CHECK(again.unchanged == 17);
  CHECK(f.store->end_offset() == end);
}

TEST_CASE("Changes and removals in the LMS are mirrored and only those are published",
          "[mdm][connector]") {
  Fixture f;
  f.Sync({{Node("n1"), Node("n2")}, {Pod("web-0", "n1"), Pod("web-1", "n2"), Pod("db-0", "n2")}});

  // web-0 moves to n2, web-1 is gone, n1 is gone, n3 arrives, db-0 is queued again.
  LmsSyncReport changed = f.Sync({{Node("n2"), Node("n3")}, {Pod("web-0", "n2"), Pod("db-0", "")}});
  CHECK(changed.deleted == 2);  // web-1, n1
  // Inserts: n3, its CONTAINS, web-0 (node), its RUNS_ON, db-0 (node);
  // deletes: web-1, n1, db-0's RUNS_ON.
  CHECK(changed.published == 8);
  CHECK(f.store->GetEntity("Node/edge-1/n1").status().code() == absl::StatusCode::kNotFound);
  CHECK(f.store->GetEntity("Pod/edge-1/default/web-1").status().code() ==
        absl::StatusCode::kNotFound);
  CHECK(f.Neighbours("Node/edge-1/n2", "RUNS_ON") ==
        std::set<std::string>{"Pod/edge-1/default/web-0"});
  CHECK(f.Neighbours("Pod/edge-1/default/db-0", "RUNS_ON").empty());
  CHECK(f.store->GetEntity("Pod/edge-1/default/db-0")->properties().fields().count("node") == 0);

  // An empty LMS leaves the cluster alone.
  LmsSyncReport emptied = f.Sync({});
  CHECK(emptied.deleted == 5);  // 2 pods, 2 nodes, 1 namespace
  absl::StatusOr<EntityPage> left = f.store->ListEntities({.cluster = "edge-1"}, "", 100);
  REQUIRE(left.ok());
  REQUIRE(left->entities.size() == 1);
  CHECK(left->entities[0].id() == "Cluster/edge-1");
}

TEST_CASE("What another source owns is left alone with a warning and the rest goes on",
          "[mdm][connector]") {
  Fixture f;
  LmsConnector connector(*f.store, "edge-1");
  REQUIRE(connector.RegisterTypes().ok());
  v1::MetadataEvent foreign;
  foreign.set_op(v1::METADATA_OP_INSERT);
  foreign.set_type("Node");
  foreign.set_id("Node/edge-1/n1");
  (*foreign.mutable_properties()->mutable_fields())["name"].set_string_value("n1");
  (*foreign.mutable_properties()->mutable_fields())["ready"].set_bool_value(true);
  foreign.set_source("inventory-import");
  REQUIRE(f.store->Publish({foreign}).ok());

  absl::StatusOr<LmsSyncReport> report =
      connector.Sync({{Node("n1"), Node("n2")}, {Pod("web-0", "n1"), Pod("web-1", "n2")}});
  REQUIRE(report.ok());
  REQUIRE_FALSE(report->warnings.empty());
  CHECK_THAT(report->warnings[0],
             Catch::StartsWith("Node/edge-1/n1 belongs to source \"inventory-import\""));
  CHECK(f.store->GetEntity("Node/edge-1/n1")->source() == "inventory-import");
  CHECK(f.store->GetEntity("Pod/edge-1/default/web-0").ok());
  CHECK(f.Neighbours("Node/edge-1/n2", "RUNS_ON") ==
        std::set<std::string>{"Pod/edge-1/default/web-1"});
  CHECK(f.Neighbours("Node/edge-1/n1", "RUNS_ON").empty());

  // A name too long for an id is left out, named in a warning.
  report = connector.Sync({{Node(std::string(600, 'n'))}, {}});
  REQUIRE(report.ok());
  REQUIRE(report->warnings.size() == 1);
  CHECK_THAT(report->warnings[0], Catch::Contains("its id is over 512 bytes"));
}

}  // namespace
}  // namespace codeco::mdm
