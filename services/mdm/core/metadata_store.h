#pragma once
// MDM's event log and the property graph it materialises (issue 15,
// docs/mdm.md), on the KvStore port.
//
// Publish takes a batch of events, checks every one (types, schemas, ends of
// relationships, sizes) against the graph as the earlier events of the same
// batch leave it, and then writes, in one atomic KvStore batch:
//   - each new event under its offset (the log, offsets 1, 2, ...);
//   - the entities and relationships they change, with their indexes;
//   - the event ids seen, and the next offset.
// So a crash leaves either the whole batch or none of it, and what Publish
// acknowledged is there after a restart. One bad event refuses the batch,
// naming it as `events[i].<field>`.
//
// Semantics of an event:
//   INSERT  puts an entity (no from_id/to_id) or a relationship, replacing
//           one with the same id (create_time kept).
//   UPDATE  merges properties into an existing one (the result is checked
//           against the type's schema).
//   DELETE  removes an entity with every relationship at it, or a
//           relationship.
// An id belongs to one type and one kind for as long as it exists. What an
// event with a `source` inserts belongs to that source (the connector that
// owns it): only events of the same source may change or delete it (an
// entity's deletion still removes every relationship at it).

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"
#include "codeco/mdm/v1/mdm_service.pb.h"
#include "codeco/mdm/v1/metadata.pb.h"
#include "mdm/core/type_registry.h"

namespace codeco::mdm {

/// The column families a MetadataStore needs in its KvStore.
std::vector<std::string> MetadataColumnFamilies();

/// Limits on what one caller may send or ask for.
struct MetadataLimits {
  /// Most events in one Publish.
  size_t max_batch_events = 10000;
  /// Longest id, type name, cluster, source or event id, bytes.
  size_t max_id_bytes = 512;
  /// Largest properties of one event, serialized bytes.
  size_t max_properties_bytes = 64 << 10;
  /// Most entities a graph query returns.
  size_t max_query_entities = 10000;
  /// Deepest graph query.
  int max_query_depth = 5;
  /// Most results of one page.
  size_t max_page = 1000;
  /// Most entities one ListEntities call looks at.
  size_t max_list_scan = 100000;
};

/// What Publish did.
struct PublishResult {
  /// Each event's offset, in request order (the first offset of one already
  /// in the log by event_id).
  std::vector<int64_t> offsets;
  /// How many were appended (the rest were already in the log).
  size_t appended = 0;
};

/// One page of the log.
struct EventPage {
  /// The events, in offset order.
  std::vector<v1::MetadataEvent> events;
  /// Where the next page starts (a type filter may have skipped events).
  int64_t next_offset = 1;
  /// The log's end when read: the offset the next appended event gets.
  int64_t end_offset = 1;
};

/// Which edges a traversal follows.
enum class Direction { kOutgoing, kIncoming, kBoth };

/// A bounded traversal from one entity.
struct GraphQuery {
  /// The start entity.
  std::string entity_id;
  /// Hops, 1..max_query_depth.
  int depth = 1;
  /// Only these relationship types (empty: all).
  std::vector<std::string> relationship_types;
  /// Which edges.
  Direction direction = Direction::kBoth;
  /// Most entities returned, the start included (0: max_query_entities).
  size_t max_entities = 0;
};

/// What a traversal reached.
struct GraphResult {
  /// The start entity first, then in breadth-first order.
  std::vector<v1::Entity> entities;
  /// Every relationship followed.
  std::vector<v1::Relationship> relationships;
  /// True when max_entities cut it short.
  bool truncated = false;
};

/// Which entities ListEntities returns.
struct EntityFilter {
  /// Only entities of this type ("" = every type).
  std::string type;
  /// Only entities of this cluster ("" = any).
  std::string cluster;
  /// Only entities whose properties meet every one (ValidatePredicates'd
  /// by ListEntities).
  google::protobuf::RepeatedPtrField<v1::PropertyPredicate> where;
};

/// One page of entities.
struct EntityPage {
  /// Ordered by id.
  std::vector<v1::Entity> entities;
  /// The last id of this page when more may follow ("" on the last page).
  std::string next_after;
};

/// How far Compact goes.
struct CompactionOptions {
  /// The newest events it leaves alone, superseded or not: a watcher less
  /// than this far behind sees every event.
  int64_t keep_recent_events = 100000;
  /// The newest events among which it keeps deletions (tombstones) of what
  /// is gone: a watcher less than this far behind sees every removal. At
  /// least keep_recent_events.
  int64_t keep_tombstone_events = 1000000;
};

/// What one Compact did.
struct CompactionResult {
  /// Events looked at (those below the compaction point still in the log).
  int64_t looked_at = 0;
  /// Superseded events removed.
  int64_t removed = 0;
  /// Tombstones removed (counted in `removed` too).
  int64_t tombstones_removed = 0;
  /// Events before this offset were compacted.
  int64_t compacted_below = 0;
};

/// Checks `options`; INVALID_ARGUMENT naming the field.
absl::Status ValidateCompactionOptions(const CompactionOptions& options);

/// The log, the graph and the types. Thread-safe. Publish checks one batch at
/// a time, and writes batches in offset order, so one batch is checked while
/// the one before it is written (two publishers use two cores); reads run
/// beside them and see written batches only.
class MetadataStore {
 public:
  /// Called after each append with the new end of the log (the next offset).
  using AppendListener = std::function<void(int64_t end_offset)>;

  /// Opens the store on `kv` (which must hold MetadataColumnFamilies()),
  /// loading the registered types and the log's end. `kv` and `clock` must
  /// outlive it.
  static absl::StatusOr<std::unique_ptr<MetadataStore>> Open(KvStore& kv, const Clock& clock,
                                                             MetadataLimits limits = {});

  /// Registers or changes a type and stores it (see TypeRegistry::Register).
  absl::StatusOr<v1::TypeDefinition> RegisterType(const v1::TypeDefinition& definition);
  /// Registers each of `definitions` in order (entity types before the
  /// relationship types that join them); stops at the first error, which
  /// names the type: "registering type <name>: ...".
  absl::Status RegisterTypes(const std::vector<v1::TypeDefinition>& definitions);
  /// Every type, by name.
  std::vector<v1::TypeDefinition> ListTypes() const;

  /// Appends `events` and applies them, all or none.
  absl::StatusOr<PublishResult> Publish(const std::vector<v1::MetadataEvent>& events);

  /// Up to `limit` events (0: 100; at most max_page) from `from_offset` on,
  /// of `types` only when not empty, in offset order.
  absl::StatusOr<EventPage> ReadEvents(int64_t from_offset, size_t limit,
                                       const std::vector<std::string>& types) const;
  /// The offset the next event will get.
  int64_t end_offset() const;
  /// What one caller may send or ask for.
  const MetadataLimits& limits() const { return limits_; }

  /// One entity; NOT_FOUND when absent.
  absl::StatusOr<v1::Entity> GetEntity(const std::string& id) const;
  /// One relationship; NOT_FOUND when absent.
  absl::StatusOr<v1::Relationship> GetRelationship(const std::string& id) const;
  /// Entities `filter` selects, after id `after`, at most `limit`. At most
  /// MetadataLimits::max_list_scan entities are looked at per call: a
  /// filter few entities meet may end a page short (or empty) with more to
  /// follow. INVALID_ARGUMENT names a bad predicate ("where[0].value").
  absl::StatusOr<EntityPage> ListEntities(const EntityFilter& filter, const std::string& after,
                                          size_t limit) const;
  /// A bounded traversal. NOT_FOUND for an unknown start; INVALID_ARGUMENT
  /// for a depth out of range.
  absl::StatusOr<GraphResult> Query(const GraphQuery& query) const;

  /// Log compaction (as Kafka's, by id): removes, from the events older
  /// than the newest options.keep_recent_events, each event an INSERT
  /// after it replaced (the id's events before the INSERT that gave it its
  /// current state), every event of an id that is gone except its
  /// deletions, and those deletions too when they are older than the newest
  /// options.keep_tombstone_events. The graph is untouched; what is left,
  /// read in order, still ends in the same graph id by id. Runs beside
  /// Publish and the reads.
  absl::StatusOr<CompactionResult> Compact(const CompactionOptions& options);

  /// Calls `listener` after every append; returns a handle for
  /// RemoveListener.
  int AddListener(AppendListener listener);
  /// Stops calling the listener of `handle`.
  void RemoveListener(int handle);

 private:
  MetadataStore(KvStore& kv, const Clock& clock, MetadataLimits limits);
  struct Staged;
  struct Pending;

  // Writes `batch`, the writes of `staged`, once every batch before it is
  // written; UNAVAILABLE (nothing written) when one of those failed.
  absl::Status Commit(Staged& staged, const KvWriteBatch& batch);
  // Waits until the log holds `offset` (0: returns at once); UNAVAILABLE
  // when a write failed since the batch was checked in `checked_in`.
  absl::Status AwaitWritten(int64_t offset, int64_t checked_in);

  KvStore& kv_;
  const Clock& clock_;
  const MetadataLimits limits_;
  TypeRegistry types_;
  absl::Mutex write_mu_;  // serialises the checks of Publish, and RegisterType
  // Batches checked and maybe not written yet, oldest first (the finished
  // ones are dropped by the next Publish).
  std::deque<std::shared_ptr<Staged>> staged_ ABSL_GUARDED_BY(write_mu_);
  // The offset the next checked event gets.
  int64_t next_offset_ ABSL_GUARDED_BY(write_mu_) = 1;
  // epoch_ when staged_ was last filled.
  int64_t staged_epoch_ ABSL_GUARDED_BY(write_mu_) = 0;
  mutable absl::Mutex end_mu_;
  // The end of the written log.
  int64_t end_offset_ ABSL_GUARDED_BY(end_mu_) = 1;
  // Counts failed writes: a batch checked in an older epoch is not written.
  int64_t epoch_ ABSL_GUARDED_BY(end_mu_) = 0;
  absl::Mutex listeners_mu_;
  int next_listener_ ABSL_GUARDED_BY(listeners_mu_) = 1;
  std::vector<std::pair<int, AppendListener>> listeners_ ABSL_GUARDED_BY(listeners_mu_);
};

/// `properties` as JSON, for schema checks.
nlohmann::json StructToJson(const google::protobuf::Struct& properties);

}  // namespace codeco::mdm
