// MDM's event log and graph (mdm/core/metadata_store.h) on an in-memory
// KvStore: batches all or nothing, idempotent event ids, the graph as the
// log leaves it, traversals, pages, and a reopen that finds it all again.
#include "mdm/core/metadata_store.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"
#include "mdm_test_util.h"

namespace codeco::mdm {
namespace {

using testing::Type;

google::protobuf::Struct Props(const std::string& json) {
  google::protobuf::Struct s;
  const nlohmann::json parsed = nlohmann::json::parse(json);
  for (const auto& [key, value] : parsed.items()) {
    google::protobuf::Value& v = (*s.mutable_fields())[key];
    if (value.is_string()) {
      v.set_string_value(value.get<std::string>());
    } else if (value.is_number()) {
      v.set_number_value(value.get<double>());
    } else if (value.is_boolean()) {
      v.set_bool_value(value.get<bool>());
    }
  }
  return s;
}

v1::MetadataEvent Insert(const std::string& type, const std::string& id,
                         const std::string& props = "{}", const std::string& cluster = "edge-1") {
  v1::MetadataEvent e;
  e.set_op(v1::METADATA_OP_INSERT);
  e.set_type(type);
  e.set_id(id);
  *e.mutable_properties() = Props(props);
  e.set_cluster(cluster);
  e.set_source("lms");
  return e;
}

v1::MetadataEvent Link(const std::string& type, const std::string& from, const std::string& to) {
  v1::MetadataEvent e = Insert(type, type + "/" + from + "/" + to);
  e.set_from_id(from);
  e.set_to_id(to);
  return e;
}

struct Fixture {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore(MetadataColumnFamilies());
  SimulatedClock clock{absl::FromUnixSeconds(1'800'000'000)};
  std::unique_ptr<MetadataStore> store = Open();

  std::unique_ptr<MetadataStore> Open() {
    absl::StatusOr<std::unique_ptr<MetadataStore>> s = MetadataStore::Open(*kv, clock);
    REQUIRE(s.ok());
    return *std::move(s);
  }
  void RegisterKubernetesTypes() {
    REQUIRE(store->RegisterType(Type("Cluster")).ok());
    REQUIRE(
        store->RegisterType(Type("Node", R"({"properties": {"cpu": {"type": "number"}}})")).ok());
    REQUIRE(store
                ->RegisterType(Type("Pod", R"({"type": "object", "required": ["restarts"],
                  "properties": {"restarts": {"type": "integer", "minimum": 0}}})"))
                .ok());
    REQUIRE(store->RegisterType(Type("CONTAINS", "", "Cluster", "Node")).ok());
    REQUIRE(store->RegisterType(Type("RUNS_ON", "", "Pod", "Node")).ok());
  }
  void PublishSmallCluster() {
    absl::StatusOr<PublishResult> r = store->Publish({
        Insert("Cluster", "Cluster/edge-1"),
        Insert("Node", "Node/edge-1/n1", R"({"cpu": 8})"),
        Insert("Node", "Node/edge-1/n2", R"({"cpu": 4})"),
        Insert("Pod", "Pod/edge-1/web-0", R"({"restarts": 0})"),
        Insert("Pod", "Pod/edge-1/db-0", R"({"restarts": 3})"),
        Link("CONTAINS", "Cluster/edge-1", "Node/edge-1/n1"),
        Link("CONTAINS", "Cluster/edge-1", "Node/edge-1/n2"),
        Link("RUNS_ON", "Pod/edge-1/web-0", "Node/edge-1/n1"),
        Link("RUNS_ON", "Pod/edge-1/db-0", "Node/edge-1/n2"),
    });
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    REQUIRE(r->appended == 9);
  }
};

std::vector<std::string> Ids(const std::vector<v1::Entity>& entities) {
  std::vector<std::string> ids;
  for (const auto& e : entities) ids.push_back(e.id());
  return ids;
}

TEST_CASE("Published events build the graph and traversals follow it", "[mdm][store]") {
  Fixture f;
  f.RegisterKubernetesTypes();
  f.PublishSmallCluster();
  CHECK(f.store->end_offset() == 10);

  absl::StatusOr<v1::Entity> web = f.store->GetEntity("Pod/edge-1/web-0");
  REQUIRE(web.ok());
  CHECK(web->type() == "Pod");
  CHECK(web->cluster() == "edge-1");
  CHECK(web->last_offset() == 4);

  // One hop out of the cluster: its nodes; two hops both ways: the pods too.
  GraphQuery q;
  q.entity_id = "Cluster/edge-1";
  q.direction = Direction::kOutgoing;
  absl::StatusOr<GraphResult> out = f.store->Query(q);
  REQUIRE(out.ok());
  CHECK(Ids(out->entities) ==
        std::vector<std::string>{"Cluster/edge-1", "Node/edge-1/n1", "Node/edge-1/n2"});
  CHECK(out->relationships.size() == 2);
  q.depth = 2;
  q.direction = Direction::kBoth;
  absl::StatusOr<GraphResult> both = f.store->Query(q);
  REQUIRE(both.ok());
  CHECK(both->entities.size() == 5);
  CHECK(both->relationships.size() == 4);
  // Only RUNS_ON, from a pod: its node.
  GraphQuery runs{"Pod/edge-1/db-0", 3, {"RUNS_ON"}, Direction::kBoth, 0};
  absl::StatusOr<GraphResult> db = f.store->Query(runs);
  REQUIRE(db.ok());
  CHECK(Ids(db->entities) == std::vector<std::string>{"Pod/edge-1/db-0", "Node/edge-1/n2"});
  // Cut short.
  q.max_entities = 2;
  absl::StatusOr<GraphResult> cut = f.store->Query(q);
  REQUIRE(cut.ok());
  CHECK(cut->entities.size() == 2);
  CHECK(cut->truncated);
  q.depth = 9;
  CHECK_THAT(std::string(f.store->Query(q).status().message()),
             Catch::StartsWith("depth: must be 1-5"));
  CHECK(f.store->Query({"Pod/none", 1, {}, Direction::kBoth, 0}).status().code() ==
        absl::StatusCode::kNotFound);

  // Lists by type, in pages.
  absl::StatusOr<EntityPage> first = f.store->ListEntities({.type = "Node"}, "", 1);
  REQUIRE(first.ok());
  CHECK(Ids(first->entities) == std::vector<std::string>{"Node/edge-1/n1"});
  absl::StatusOr<EntityPage> second = f.store->ListEntities({.type = "Node"}, first->next_after, 1);
  REQUIRE(second.ok());
  CHECK(Ids(second->entities) == std::vector<std::string>{"Node/edge-1/n2"});
  CHECK(f.store->ListEntities({.cluster = "edge-1"}, "", 100)->entities.size() == 5);
  CHECK(f.store->ListEntities({.cluster = "edge-2"}, "", 100)->entities.empty());
}

v1::PropertyPredicate Where(const std::string& property, v1::PredicateOperator op,
                            std::optional<double> number = std::nullopt) {
  v1::PropertyPredicate p;
  p.set_property(property);
  p.set_operator_(op);
  if (number) p.mutable_value()->set_number_value(*number);
  return p;
}

TEST_CASE("Entities are listed by property predicates in pages that look at a bounded number",
          "[mdm][store]") {
  Fixture f;
  f.RegisterKubernetesTypes();
  f.PublishSmallCluster();
  EntityFilter restarted{.type = "Pod"};
  *restarted.where.Add() = Where("restarts", v1::PREDICATE_OPERATOR_GREATER, 0);
  absl::StatusOr<EntityPage> page = f.store->ListEntities(restarted, "", 100);
  REQUIRE(page.ok());
  CHECK(Ids(page->entities) == std::vector<std::string>{"Pod/edge-1/db-0"});
  CHECK(page->next_after.empty());

  // Every predicate must hold; across types, a missing property fails an ordering.
  EntityFilter big{};
  *big.where.Add() = Where("cpu", v1::PREDICATE_OPERATOR_GREATER_OR_EQUAL, 4);
  *big.where.Add() = Where("cpu", v1::PREDICATE_OPERATOR_LESS, 8);
  CHECK(Ids(f.store->ListEntities(big, "", 100)->entities) ==
        std::vector<std::string>{"Node/edge-1/n2"});
  EntityFilter no_cpu{};
  *no_cpu.where.Add() = Where("cpu", v1::PREDICATE_OPERATOR_NOT_EXISTS);
  CHECK(f.store->ListEntities(no_cpu, "", 100)->entities.size() == 3);

  // A bad predicate is refused naming it.
  EntityFilter bad{.type = "Pod"};
  *bad.where.Add() = Where("restarts", v1::PREDICATE_OPERATOR_LESS);
  absl::StatusOr<EntityPage> refused = f.store->ListEntities(bad, "", 100);
  REQUIRE(absl::IsInvalidArgument(refused.status()));
  CHECK_THAT(std::string(refused.status().message()), Catch::StartsWith("where[0].value"));

  // With two entities looked at per call, the one match among five takes
  // short pages that still reach it, then end.
  MetadataLimits limits;
  limits.max_list_scan = 2;
  absl::StatusOr<std::unique_ptr<MetadataStore>> narrow =
      MetadataStore::Open(*f.kv, f.clock, limits);
  REQUIRE(narrow.ok());
  for (const std::string& type : {std::string(), std::string("Pod")}) {
    EntityFilter filter{.type = type};
    *filter.where.Add() = Where("restarts", v1::PREDICATE_OPERATOR_EQUALS, 3);
    std::vector<std::string> found;
    std::string after;
    int calls = 0;
    do {
      absl::StatusOr<EntityPage> part = (*narrow)->ListEntities(filter, after, 100);
      REQUIRE(part.ok());
      CHECK(part->entities.size() <= 2);
      for (const auto& e : part->entities) found.push_back(e.id());
      after = part->next_after;
      REQUIRE(++calls < 10);
    } while (!after.empty());
    INFO(type);
    CHECK(found == std::vector<std::string>{"Pod/edge-1/db-0"});
    CHECK(calls == (type.empty() ? 3 : 1));  // five entities of any type, two pods
  }
}

// Every entity and relationship of `store`, as "id type properties-json".
std::set<std::string> Graph(MetadataStore& store) {
  std::set<std::string> out;
  absl::StatusOr<EntityPage> all = store.ListEntities(EntityFilter{}, "", 1000);
  REQUIRE(all.ok());
  for (const v1::Entity& e : all->entities) {
    out.insert(absl::StrCat(e.id(), " ", e.type(), " ", StructToJson(e.properties()).dump()));
    absl::StatusOr<GraphResult> around = store.Query({e.id(), 1, {}, Direction::kBoth, 0});
    REQUIRE(around.ok());
    for (const v1::Relationship& r : around->relationships) {
      out.insert(absl::StrCat(r.id(), " ", r.type(), " ", r.from_id(), "->", r.to_id()));
    }
  }
  return out;
}

std::vector<int64_t> Offsets(MetadataStore& store) {
  std::vector<int64_t> out;
  absl::StatusOr<EventPage> log = store.ReadEvents(1, 1000, {});
  REQUIRE(log.ok());
  for (const v1::MetadataEvent& e : log->events) {
    out.push_back(e.offset());
  }
  return out;
}

TEST_CASE("Compaction keeps each id's last insert and what followed and replays to the same graph",
          "[mdm][store]") {
  Fixture f;
  f.RegisterKubernetesTypes();
  auto update = [](const std::string& id, const std::string& props) {
    v1::MetadataEvent e = Insert("", id, props);
    e.set_op(v1::METADATA_OP_UPDATE);
    return e;
  };
  auto drop = [](const std::string& id) {
    v1::MetadataEvent e;
    e.set_op(v1::METADATA_OP_DELETE);
    e.set_id(id);
    e.set_source("lms");
    return e;
  };
  const std::vector<v1::MetadataEvent> history = {
      Insert("Node", "Node/n1", R"({"cpu": 8})"),    // 1: replaced by 6
      Insert("Node", "Node/n2", R"({"cpu": 2})"),    // 2
      Insert("Pod", "Pod/p", R"({"restarts": 0})"),  // 3: gone (7)
      Link("RUNS_ON", "Pod/p", "Node/n1"),           // 4: gone with its pod
      update("Node/n1", R"({"cpu": 16})"),           // 5: replaced by 6
      Insert("Node", "Node/n1", R"({"cpu": 4})"),    // 6
      drop("Pod/p"),                                 // 7: a tombstone
      Insert("Pod", "Pod/q", R"({"restarts": 1})"),  // 8
      update("Pod/q", R"({"restarts": 2})"),         // 9
      Link("RUNS_ON", "Pod/q", "Node/n2"),           // 10
      drop("Node/gone"),                             // 11: a deletion of nothing
  };
  for (const v1::MetadataEvent& e : history) REQUIRE(f.store->Publish({e}).ok());
  const std::set<std::string> graph = Graph(*f.store);

  // The newest five are left alone.
  absl::StatusOr<CompactionResult> kept_recent = f.store->Compact({5, 100});
  REQUIRE(kept_recent.ok());
  CHECK(kept_recent->compacted_below == 7);
  CHECK(kept_recent->removed == 4);
  CHECK(Offsets(*f.store) == std::vector<int64_t>{2, 6, 7, 8, 9, 10, 11});

  // Everything: the tombstones stay while they are recent enough.
  absl::StatusOr<CompactionResult> all = f.store->Compact({0, 100});
  REQUIRE(all.ok());
  CHECK(all->removed == 0);
  all = f.store->Compact({0, 0});
  REQUIRE(all.ok());
  CHECK(all->removed == 2);
  CHECK(all->tombstones_removed == 2);
  CHECK(Offsets(*f.store) == std::vector<int64_t>{2, 6, 8, 9, 10});
  CHECK(Graph(*f.store) == graph);  // the graph is untouched

  // What is left, replayed into an empty store, ends in the same graph.
  Fixture replay;
  replay.RegisterKubernetesTypes();
  absl::StatusOr<EventPage> left = f.store->ReadEvents(1, 1000, {});
  REQUIRE(left.ok());
  for (v1::MetadataEvent e : left->events) {
    e.clear_offset();
    INFO(e.id());
    REQUIRE(replay.store->Publish({e}).ok());
  }
  CHECK(Graph(*replay.store) == graph);

  CHECK(absl::IsInvalidArgument(f.store->Compact({-1, 0}).status()));
  CHECK_THAT(std::string(f.store->Compact({10, 5}).status().message()),
             Catch::StartsWith("keep_tombstone_events"));
}

TEST_CASE("A batch with one bad event is refused whole naming the event and field",
          "[mdm][store]") {
  Fixture f;
  f.RegisterKubernetesTypes();
  auto refused = [&](std::vector<v1::MetadataEvent> events) {
    absl::StatusOr<PublishResult> r = f.store->Publish(events);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  CHECK_THAT(
      refused({Insert("Cluster", "Cluster/a"), Insert("Pod", "Pod/a/x", R"({"restarts": -1})")}),
      Catch::StartsWith("events[1].properties.restarts: "));
  CHECK_THAT(refused({Insert("Pod", "Pod/a/x", "{}")}), Catch::Contains("restarts"));
  CHECK_THAT(refused({Insert("Volume", "Volume/a")}),
             Catch::StartsWith("events[0].type: type \"Volume\" is not registered"));
  CHECK_THAT(refused({Link("RUNS_ON", "Pod/a/x", "Node/a/n")}),
             Catch::StartsWith("events[0].from_id: no entity \"Pod/a/x\""));
  CHECK_THAT(refused({Insert("Cluster", "Cluster/a"), Insert("Node", "Node/a/n"),
                      Link("RUNS_ON", "Cluster/a", "Node/a/n")}),
             Catch::StartsWith("events[2].from_id: a RUNS_ON starts at a Pod, not a Cluster"));
  CHECK_THAT(refused({Insert("Cluster", "Cluster/a"), Insert("Node", "Cluster/a")}),
             Catch::StartsWith("events[1].type: \"Cluster/a\" is a Cluster, not a Node"));
  v1::MetadataEvent no_op = Insert("Cluster", "c");
  no_op.set_op(v1::METADATA_OP_UNSPECIFIED);
  CHECK_THAT(refused({no_op}), Catch::StartsWith("events[0].op: "));
  CHECK_THAT(refused({Insert("Cluster", std::string(600, 'c'))}),
             Catch::StartsWith("events[0].id: "));
  v1::MetadataEvent update = Insert("Pod", "Pod/a/none");
  update.set_op(v1::METADATA_OP_UPDATE);
  CHECK_THAT(refused({update}), Catch::StartsWith("events[0].id: no entity or relationship"));
  CHECK_THAT(refused({}), Catch::StartsWith("events: "));
  // Nothing of any of them is stored.
  CHECK(f.store->end_offset() == 1);
  CHECK(f.store->GetEntity("Cluster/a").status().code() == absl::StatusCode::kNotFound);
  CHECK(f.store->ListEntities(EntityFilter{}, "", 100)->entities.empty());
}

TEST_CASE("Event ids make a repeated publish a no-op", "[mdm][store]") {
  Fixture f;
  f.RegisterKubernetesTypes();
  std::vector<v1::MetadataEvent> batch = {Insert("Cluster", "Cluster/a"),
                                          Insert("Node", "Node/a/1")};
  batch[0].set_event_id("lms-1");
  batch[1].set_event_id("lms-2");
  absl::StatusOr<PublishResult> first = f.store->Publish(batch);
  REQUIRE(first.ok());
  CHECK(first->offsets == std::vector<int64_t>{1, 2});
  absl::StatusOr<PublishResult> again = f.store->Publish(batch);
  REQUIRE(again.ok());
  CHECK(again->offsets == std::vector<int64_t>{1, 2});
  CHECK(again->appended == 0);
  // Within one batch too; a new event after them gets the next offset.
  batch.push_back(Insert("Node", "Node/a/2"));
  batch.push_back(batch[2]);
  batch[2].set_event_id("lms-3");
  batch[3].set_event_id("lms-3");
  absl::StatusOr<PublishResult> mixed = f.store->Publish(batch);
  REQUIRE(mixed.ok());
  CHECK(mixed->offsets == std::vector<int64_t>{1, 2, 3, 3});
  CHECK(f.store->end_offset() == 4);
}

TEST_CASE("Updates merge and are checked and deletes take the relationships along",
          "[mdm][store]") {
  Fixture f;
  f.RegisterKubernetesTypes();
  f.PublishSmallCluster();
  v1::MetadataEvent update = Insert("Pod", "Pod/edge-1/web-0", R"({"restarts": 5})");
  update.set_op(v1::METADATA_OP_UPDATE);
  update.clear_type();
  REQUIRE(f.store->Publish({update}).ok());
  CHECK(
      f.store->GetEntity("Pod/edge-1/web-0")->properties().fields().at("restarts").number_value() ==
      5);
  *update.mutable_properties() = Props(R"({"restarts": "many"})");
  CHECK_THAT(std::string(f.store->Publish({update}).status().message()),
             Catch::StartsWith("events[0].properties.restarts: "));

  v1::MetadataEvent drop;
  drop.set_op(v1::METADATA_OP_DELETE);
  drop.set_id("Node/edge-1/n1");
  drop.set_source("lms");
  REQUIRE(f.store->Publish({drop}).ok());
  CHECK(f.store->GetEntity("Node/edge-1/n1").status().code() == absl::StatusCode::kNotFound);
  absl::StatusOr<GraphResult> web =
      f.store->Query({"Pod/edge-1/web-0", 2, {}, Direction::kBoth, 0});
  REQUIRE(web.ok());
  CHECK(web->entities.size() == 1);
  CHECK(web->relationships.empty());
  CHECK(f.store->ListEntities({.type = "Node"}, "", 10)->entities.size() == 1);
  // Deleting it again is accepted, and logged.
  const int64_t end = f.store->end_offset();
  REQUIRE(f.store->Publish({drop}).ok());
  CHECK(f.store->end_offset() == end + 1);
}

TEST_CASE("Only the source that inserted an entity may change or delete it", "[mdm][store]") {
  Fixture f;
  f.RegisterKubernetesTypes();
  f.PublishSmallCluster();
  CHECK(f.store->GetEntity("Node/edge-1/n1")->source() == "lms");
  CHECK(f.store->GetRelationship("RUNS_ON/Pod/edge-1/web-0/Node/edge-1/n1")->source() == "lms");
  CHECK(f.store->GetRelationship("Node/edge-1/n1").status().code() == absl::StatusCode::kNotFound);

  v1::MetadataEvent update = Insert("Node", "Node/edge-1/n1", R"({"cpu": 2})");
  update.set_op(v1::METADATA_OP_UPDATE);
  update.set_source("compliance");
  CHECK(std::string(f.store->Publish({update}).status().message()) ==
        "events[0].source: \"Node/edge-1/n1\" belongs to source \"lms\", not \"compliance\"");
  v1::MetadataEvent drop;
  drop.set_op(v1::METADATA_OP_DELETE);
  drop.set_id("RUNS_ON/Pod/edge-1/web-0/Node/edge-1/n1");
  CHECK_THAT(std::string(f.store->Publish({drop}).status().message()),
             Catch::StartsWith("events[0].source: "));
  CHECK(f.store->GetEntity("Node/edge-1/n1")->properties().fields().at("cpu").number_value() == 8);

  // An entity inserted without a source is anyone's, and the first source
  // to insert it again takes it.
  v1::MetadataEvent shared = Insert("Cluster", "Cluster/shared");
  shared.clear_source();
  REQUIRE(f.store->Publish({shared}).ok());
  shared.set_source("compliance");
  REQUIRE(f.store->Publish({shared}).ok());
  CHECK(f.store->GetEntity("Cluster/shared")->source() == "compliance");
  shared.set_source("lms");
  CHECK_FALSE(f.store->Publish({shared}).ok());
}

TEST_CASE("The log reads in pages by type and a reopened store has everything", "[mdm][store]") {
  Fixture f;
  f.RegisterKubernetesTypes();
  std::vector<int64_t> seen;
  const int handle = f.store->AddListener([&](int64_t end) { seen.push_back(end); });
  f.PublishSmallCluster();
  f.store->RemoveListener(handle);
  f.PublishSmallCluster();  // the same facts again: new events, same graph
  CHECK(seen == std::vector<int64_t>{10});

  absl::StatusOr<EventPage> page = f.store->ReadEvents(1, 4, {});
  REQUIRE(page.ok());
  REQUIRE(page->events.size() == 4);
  CHECK(page->events[0].offset() == 1);
  CHECK(page->next_offset == 5);
  CHECK(page->end_offset == 19);
  absl::StatusOr<EventPage> pods = f.store->ReadEvents(page->next_offset, 100, {"Pod"});
  REQUIRE(pods.ok());
  CHECK(pods->events.size() == 3);  // offsets 5, 13, 14
  CHECK(pods->next_offset == 19);

  // Reopen on the same store: types with their versions, the end, the graph.
  REQUIRE(f.store->RegisterType(Type("Cluster", R"({"type": "object"})"))->version() == 2);
  f.store.reset();
  f.store = f.Open();
  CHECK(f.store->end_offset() == 19);
  CHECK(f.store->ListTypes().size() == 5);
  CHECK(f.store->GetEntity("Pod/edge-1/db-0").ok());
  v1::TypeDefinition again = Type("Cluster", R"({"type": "object"})");
  CHECK(f.store->RegisterType(again)->version() == 2);
  CHECK_THAT(
      std::string(
          f.store->Publish({Insert("Pod", "Pod/x", R"({"restarts": -2})")}).status().message()),
      Catch::StartsWith("events[0].properties.restarts"));
}

// A KvStore whose writes can be held at a gate and made to fail.
class GatedKvStore final : public KvStore {
 public:
  explicit GatedKvStore(std::unique_ptr<KvStore> inner) : inner_(std::move(inner)) {}
  absl::StatusOr<std::string> Get(std::string_view cf, std::string_view key) const override {
    {
      absl::MutexLock lock(&mu_);
      if (key == watched_) watched_read_ = true;
    }
    return inner_->Get(cf, key);
  }
  absl::Status Write(const KvWriteBatch& batch) override {
    absl::MutexLock lock(&mu_);
    ++waiting_;
    mu_.Await(absl::Condition(&open_));
    --waiting_;
    if (fail_next_) {
      fail_next_ = false;
      return absl::UnavailableError("disk on fire");
    }
    return inner_->Write(batch);
  }
  absl::Status Scan(std::string_view cf, const KvScanOptions& options,
                    const KvVisitor& visit) const override {
    return inner_->Scan(cf, options, visit);
  }
  std::vector<std::string> ColumnFamilies() const override { return inner_->ColumnFamilies(); }

  void Close() {
    absl::MutexLock lock(&mu_);
    open_ = false;
  }
  void Open(bool fail_next) {
    absl::MutexLock lock(&mu_);
    fail_next_ = fail_next;
    open_ = true;
  }
  // Notes when `key` is read; AwaitRead waits for it.
  void Watch(const std::string& key) {
    absl::MutexLock lock(&mu_);
    watched_ = key;
    watched_read_ = false;
  }
  void AwaitRead() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&watched_read_));
  }
  // Waits until `n` writes wait at the closed gate.
  void AwaitWaiting(int n) {
    absl::MutexLock lock(&mu_);
    awaited_ = n;
    mu_.Await(absl::Condition(
        +[](GatedKvStore* g) ABSL_NO_THREAD_SAFETY_ANALYSIS { return g->waiting_ >= g->awaited_; },
        this));
  }

 private:
  std::unique_ptr<KvStore> inner_;
  mutable absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
  bool fail_next_ ABSL_GUARDED_BY(mu_) = false;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
  int awaited_ ABSL_GUARDED_BY(mu_) = 0;
  std::string watched_ ABSL_GUARDED_BY(mu_);
  mutable bool watched_read_ ABSL_GUARDED_BY(mu_) = false;
};

TEST_CASE("Publishers in parallel get every event logged once in order with a consistent graph",
          "[mdm][store]") {
  Fixture f;
  f.RegisterKubernetesTypes();
  constexpr int kPublishers = 4, kBatches = 30, kPods = 20;
  std::vector<std::thread> threads;
  std::vector<absl::Status> failures(kPublishers);
  for (int p = 0; p < kPublishers; ++p) {
    threads.emplace_back([&, p] {
      const std::string cluster = absl::StrCat("c", p);
      const std::string node = absl::StrCat("Node/", cluster, "/n");
      absl::StatusOr<PublishResult> r =
          f.store->Publish({Insert("Cluster", "Cluster/" + cluster), Insert("Node", node)});
      for (int b = 0; b < kBatches && r.ok(); ++b) {
        std::vector<v1::MetadataEvent> batch;
        for (int i = 0; i < kPods; ++i) {
          const std::string pod = absl::StrCat("Pod/", cluster, "/p", b, "-", i);
          batch.push_back(Insert("Pod", pod, R"({"restarts": 0})"));
          // Every publisher also sends one event the others send too.
          if (i == 0) {
            v1::MetadataEvent shared = Insert("Cluster", "Cluster/shared");
            shared.set_event_id(absl::StrCat("shared-", b));
            batch.push_back(shared);
          }
          batch.push_back(Link("RUNS_ON", pod, node));
        }
        // The previous batch's pods move to this node again (checked against it).
        if (b > 0)
          batch.push_back(Link("RUNS_ON", absl::StrCat("Pod/", cluster, "/p", b - 1, "-0"), node));
        r = f.store->Publish(batch);
      }
      if (!r.ok()) failures[p] = r.status();
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : failures) CHECK(s.ok());

  // The log: offsets 1..end, each once, each shared event once.
  absl::StatusOr<EventPage> all = f.store->ReadEvents(1, 1000, {});
  std::vector<v1::MetadataEvent> events;
  int64_t from = 1;
  while (true) {
    absl::StatusOr<EventPage> page = f.store->ReadEvents(from, 1000, {});
    REQUIRE(page.ok());
    for (auto& e : page->events) events.push_back(e);
    if (page->next_offset >= page->end_offset) break;
    from = page->next_offset;
  }
  REQUIRE(static_cast<int64_t>(events.size()) == f.store->end_offset() - 1);
  std::set<std::string> shared_ids;
  for (size_t i = 0; i < events.size(); ++i) {
    CHECK(events[i].offset() == static_cast<int64_t>(i) + 1);
    if (!events[i].event_id().empty()) CHECK(shared_ids.insert(events[i].event_id()).second);
  }
  CHECK(shared_ids.size() == kBatches);
  // The graph: every pod with its RUNS_ON to its cluster's node.
  for (int p = 0; p < kPublishers; ++p) {
    absl::StatusOr<GraphResult> node =
        f.store->Query({absl::StrCat("Node/c", p, "/n"), 1, {"RUNS_ON"}, Direction::kBoth, 0});
    REQUIRE(node.ok());
    CHECK(node->entities.size() == 1 + kBatches * kPods);
  }
}

TEST_CASE("A batch that cannot be written fails the batches checked after it and nothing is lost",
          "[mdm][store]") {
  auto gated = std::make_unique<GatedKvStore>(NewInMemoryKvStore(MetadataColumnFamilies()));
  GatedKvStore& gate = *gated;
  std::unique_ptr<KvStore> kv = std::move(gated);
  SimulatedClock clock{absl::FromUnixSeconds(1'800'000'000)};
  std::unique_ptr<MetadataStore> store = *MetadataStore::Open(*kv, clock);
  REQUIRE(store->RegisterType(Type("Node")).ok());
  REQUIRE(store->Publish({Insert("Node", "Node/a")}).ok());  // offset 1

  // Two batches checked while the first waits to be written, which fails.
  gate.Close();
  gate.Watch("Node/c");
  absl::StatusOr<PublishResult> first, second;
  std::thread one([&] { first = store->Publish({Insert("Node", "Node/b")}); });
  gate.AwaitWaiting(1);
  std::thread two([&] {
    v1::MetadataEvent c = Insert("Node", "Node/c");
    c.set_event_id("c-1");
    second = store->Publish({c});
  });
  // The second is being checked (over Node/b, staged) when the first fails.
  gate.AwaitRead();
  gate.Open(/*fail_next=*/true);
  one.join();
  two.join();
  CHECK(absl::IsUnavailable(first.status()));
  CHECK(absl::IsUnavailable(second.status()));
  CHECK(store->end_offset() == 2);
  CHECK(store->GetEntity("Node/b").status().code() == absl::StatusCode::kNotFound);

  // Published again, both land right after what was written, once.
  absl::StatusOr<PublishResult> again = store->Publish({Insert("Node", "Node/b")});
  REQUIRE(again.ok());
  CHECK(again->offsets == std::vector<int64_t>{2});
  v1::MetadataEvent c = Insert("Node", "Node/c");
  c.set_event_id("c-1");
  again = store->Publish({c});
  REQUIRE(again.ok());
  CHECK(again->offsets == std::vector<int64_t>{3});
  CHECK(store->end_offset() == 4);
  CHECK(store->GetEntity("Node/c").ok());
}

}  // namespace
}  // namespace codeco::mdm
