#include "swm/server/cluster_reservations.h"

#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/status.h"
#include "google/protobuf/util/message_differencer.h"
#include "swm/core/convert.h"

namespace codeco::swm {
namespace {

namespace pb = codeco::swm::v1;

bool SameItems(const pb::Reservation& stored, const pb::ReserveRequest& request) {
  if (stored.items_size() != request.items_size()) return false;
  for (int i = 0; i < stored.items_size(); ++i) {
    if (!google::protobuf::util::MessageDifferencer::Equals(stored.items(i), request.items(i))) {
      return false;
    }
  }
  return true;
}

Resources ToResources(const codeco::common::v1::ResourceQuantities& q) {
  return Resources{q.cpu_millicores(), q.memory_bytes(), q.gpu()};
}

bool IsTombstone(const pb::Reservation& r) {
  return r.state() == pb::RESERVATION_STATE_RELEASED || r.state() == pb::RESERVATION_STATE_EXPIRED;
}

// The checks of items[i].pod (at `path`) of a ReserveRequest.
void CheckPodTemplate(const pb::ReserveRequest& request, const pb::ReservedItem& item,
                      const std::string& path, FieldErrors& errors) {
  if (!item.has_pod()) {
    errors.Add(path, "is required (the pod Commit creates: containers, labels)");
    return;
  }
  const codeco::lms::v1::Pod& pod = item.pod();
  if (!request.application().empty() && !item.workload().empty()) {
    // As first placed, or as a migration under this plan revision renames it.
    const std::string placed = ReservedPodName(request.application(), item.workload());
    const std::string migrated = absl::StrCat(placed, "-r", request.plan_revision());
    if (pod.name() != placed && pod.name() != migrated) {
      errors.Add(path + ".name", absl::StrCat("must be \"", placed, "\" or, for a migrated pod, \"",
                                              migrated, "\", not \"", pod.name(), "\""));
    }
  }
  if (!pod.node_name().empty() && pod.node_name() != item.node()) {
    errors.Add(path + ".node_name", "must be empty or the item's node \"" + item.node() + "\"");
  }
  const std::pair<const char*, std::string> wanted_labels[] = {
      {kPlanLabel, LabelValue(absl::StrCat(request.application(), "/", request.plan_revision()))},
      {kReservationLabel, LabelValue(request.reservation_id())}};
  for (const auto& [key, value] : wanted_labels) {
    auto it = pod.labels().find(key);
    if (it == pod.labels().end() || it->second != value) {
      errors.Add(absl::StrCat(path, ".labels[\"", key, "\"]"),
                 absl::StrCat("must be \"", value, "\""));
    }
  }
  if (pod.containers().empty()) errors.Add(path + ".containers", "must list a container");
  std::set<std::string> names;
  for (int c = 0; c < pod.containers_size(); ++c) {
    const codeco::lms::v1::Container& container = pod.containers(c);
    const std::string at = absl::StrCat(path, ".containers[", c, "]");
    if (container.name().empty()) {
      errors.Add(at + ".name", "is required");
    } else if (!names.insert(container.name()).second) {
      errors.Add(at + ".name", "duplicate container \"" + container.name() + "\"");
    }
    if (container.image().empty()) errors.Add(at + ".image", "is required");
    for (int k = 0; k < container.ports_size(); ++k) {
      int port = container.ports(k).port();
      if (port < 1 || port > 65535) {
        errors.Add(absl::StrCat(at, ".ports[", k, "].port"), "must be 1-65535");
      }
    }
    const auto& l = container.limits();
    if (l.cpu_millicores() < 0 || l.memory_bytes() < 0 || l.gpu() < 0) {
      errors.Add(at + ".limits", "must not be negative");
    }
  }
}

// Deletes `pods` through `lms`, adding those deleted now to r's deleted_pods
// and every one no longer there (deleted now or not found) to `gone`; stops
// at the first other error and returns it.
absl::Status DeletePods(LmsPodRuntime& lms, const std::set<std::string>& pods,
                        pb::Reservation& r, std::set<std::string>& gone) {
  std::set<std::string> already(r.deleted_pods().begin(), r.deleted_pods().end());
  for (const std::string& pod : pods) {
    absl::Status deleted = lms.DeletePod(pod);
    if (!deleted.ok() && !absl::IsNotFound(deleted)) return deleted;
    if (deleted.ok() && already.insert(pod).second) r.add_deleted_pods(pod);
    gone.insert(pod);
  }
  return absl::OkStatus();
}

// True for a decision the hub settled (ADOPTED or UNDONE).
bool IsSettled(const pb::LocalDecision& d) {
  return d.state() == pb::LOCAL_DECISION_STATE_ADOPTED ||
         d.state() == pb::LOCAL_DECISION_STATE_UNDONE;
}

// The sequence of decision id "<cluster>/<sequence>", or 0 when it has none.
int64_t DecisionSequence(std::string_view id) {
  const size_t slash = id.rfind('/');
  int64_t sequence = 0;
  if (slash == std::string_view::npos ||
      !absl::SimpleAtoi(absl::string_view(id.substr(slash + 1).data(), id.size() - slash - 1),
                        &sequence)) {
    return 0;
  }
  return sequence;
}

// Drops the items of `r` whose pod is in `pods`.
void DropItems(pb::Reservation& r, const std::set<std::string>& pods) {
  google::protobuf::RepeatedPtrField<pb::ReservedItem> kept;
  for (pb::ReservedItem& item : *r.mutable_items()) {
    if (!pods.count(ItemPodName(r.application(), item))) *kept.Add() = std::move(item);
  }
  r.mutable_items()->Swap(&kept);
}

}  // namespace

std::string LocalDecisionKey(int64_t sequence) {
  return absl::StrFormat("d/%020d", std::max<int64_t>(sequence, 0));
}

std::string ReservedPodName(const std::string& application, const std::string& workload) {
  return application + "-" + workload;
}

std::string ItemPodName(const std::string& application, const pb::ReservedItem& item) {
  return item.pod().name().empty() ? ReservedPodName(application, item.workload())
                                   : item.pod().name();
}

ClusterReservations::ClusterReservations(KvStore& kv, const Clock& clock, LmsPodRuntime& lms,
                                         ClusterReservationsOptions options)
    : kv_(kv), clock_(clock), lms_(lms), options_(std::move(options)) {}

absl::Status ClusterReservations::Write(const pb::Reservation& reservation) {
  if (!IsTombstone(reservation)) {
    return kv_.Put(kReservationsFamily, "r/" + reservation.id(), reservation.SerializeAsString());
  }
  KvWriteBatch batch;
  batch.Put(kReservationsFamily, "t/" + reservation.id(), reservation.SerializeAsString());
  batch.Delete(kReservationsFamily, "r/" + reservation.id());
  batch.Delete(kReservationsFamily, "s/" + reservation.id());
  return kv_.Write(batch);
}

absl::Status ClusterReservations::ScanStored(
    std::string_view prefix,
    const std::function<void(std::string_view key, pb::Reservation& r)>& visit) const {
  absl::Status parse = absl::OkStatus();
  RETURN_IF_ERROR(kv_.Scan(kReservationsFamily, {.prefix = std::string(prefix)},
                           [&](std::string_view key, std::string_view value) {
                             pb::Reservation r;
                             if (!r.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
                               parse = absl::DataLossError("stored reservation " +
                                                           std::string(key) + " does not parse");
                               return false;
                             }
                             visit(key, r);
                             return true;
                           }));
  return parse;
}

absl::Status ClusterReservations::SweepTombstonesLocked() {
  const absl::Time now = clock_.Now();
  if (now < next_sweep_) return absl::OkStatus();
  next_sweep_ = now + options_.tombstone_ttl / 10;
  KvWriteBatch batch;
  RETURN_IF_ERROR(ScanStored("t/", [&](std::string_view key, pb::Reservation& r) {
    if (FromProtoTimestamp(r.update_time()) + options_.tombstone_ttl <= now) {
      batch.Delete(kReservationsFamily, std::string(key));
    }
  }));
  RETURN_IF_ERROR(ScanDecisions("", [&](const pb::LocalDecision& d) {
    if (IsSettled(d) && FromProtoTimestamp(d.settle_time()) + options_.tombstone_ttl <= now) {
      batch.Delete(kReservationsFamily, LocalDecisionKey(DecisionSequence(d.id())));
    }
    return true;
  }));
  return batch.empty() ? absl::OkStatus() : kv_.Write(batch);
}

absl::Status ClusterReservations::ScanDecisions(
    const std::string& start_after,
    const std::function<bool(const pb::LocalDecision&)>& visit) const {
  absl::Status parse = absl::OkStatus();
  RETURN_IF_ERROR(kv_.Scan(kReservationsFamily, {.prefix = "d/", .start_after = start_after},
                           [&](std::string_view key, std::string_view value) {
                             pb::LocalDecision d;
                             if (!d.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
                               parse = absl::DataLossError("stored local decision " +
                                                           std::string(key) + " does not parse");
                               return false;
                             }
                             return visit(d);
                           }));
  return parse;
}

absl::StatusOr<std::vector<LocalPod>> ClusterReservations::CommittedPods() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::vector<Live> live, LiveLocked());
  std::vector<LocalPod> pods;
  for (const Live& l : live) {
    const pb::Reservation& r = l.reservation;
    if (r.state() != pb::RESERVATION_STATE_COMMITTED) continue;
    for (const pb::ReservedItem& item : r.items()) {
      auto stateful = item.pod().annotations().find(kStatefulAnnotation);
      pods.push_back(LocalPod{
          .reservation = r.id(),
          .application = r.application(),
          .workload = item.workload(),
          .pod = ItemPodName(r.application(), item),
          .node = item.node(),
          .requests = ToResources(item.resources()),
          .stateful = stateful != item.pod().annotations().end() && stateful->second == "true"});
    }
  }
  return pods;
}

absl::StatusOr<pb::LocalDecision> ClusterReservations::MoveLocally(const LocalMove& move) {
  if (move.to_node.empty()) return InvalidFieldError("to_node", "is required");
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::optional<pb::Reservation> r, GetLocked(move.pod.reservation));
  if (!r.has_value() || r->state() != pb::RESERVATION_STATE_COMMITTED) {
    return absl::FailedPreconditionError(
        absl::StrCat("reservation ", move.pod.reservation, " is no longer committed here"));
  }
  pb::ReservedItem* item = nullptr;
  for (pb::ReservedItem& i : *r->mutable_items()) {
    if (ItemPodName(r->application(), i) == move.pod.pod) item = &i;
  }
  if (item == nullptr || item->node() != move.pod.node) {
    return absl::FailedPreconditionError(absl::StrCat("reservation ", move.pod.reservation,
                                                      " no longer binds pod ", move.pod.pod,
                                                      " to node ", move.pod.node));
  }
  // The next sequence, never reused (settled decisions are swept).
  int64_t last = 0;
  absl::StatusOr<std::string> stored = kv_.Get(kReservationsFamily, "n/decisions");
  if (stored.ok()) {
    if (!absl::SimpleAtoi(*stored, &last)) {
      return absl::DataLossError("stored n/decisions does not parse: " + *stored);
    }
  } else if (!absl::IsNotFound(stored.status())) {
    return stored.status();
  }
  const int64_t sequence = last + 1;
  const absl::Time now = clock_.Now();
  pb::LocalDecision decision;
  decision.set_id(absl::StrCat(options_.cluster, "/", sequence));
  decision.set_cluster(options_.cluster);
  decision.set_application(r->application());
  decision.set_workload(item->workload());
  decision.set_reservation(r->id());
  decision.set_pod(move.pod.pod);
  decision.set_from_node(move.pod.node);
  decision.set_to_node(move.to_node);
  decision.set_reason(move.reason);
  decision.set_state(pb::LOCAL_DECISION_STATE_MOVING);
  *decision.mutable_decide_time() = ToTimestamp(now);
  item->set_node(move.to_node);
  if (!item->pod().node_name().empty()) item->mutable_pod()->set_node_name(move.to_node);
  *r->mutable_update_time() = ToTimestamp(now);
  KvWriteBatch batch;
  batch.Put(kReservationsFamily, "r/" + r->id(), r->SerializeAsString());
  batch.Put(kReservationsFamily, LocalDecisionKey(sequence), decision.SerializeAsString());
  batch.Put(kReservationsFamily, "n/decisions", absl::StrCat(sequence));
  RETURN_IF_ERROR(kv_.Write(batch));
  return FinishMoveLocked(std::move(decision));
}

absl::StatusOr<pb::LocalDecision> ClusterReservations::FinishMoveLocked(
    pb::LocalDecision decision) {
  ASSIGN_OR_RETURN(std::optional<pb::Reservation> r, GetLocked(decision.reservation()));
  const pb::ReservedItem* item = nullptr;
  if (r.has_value() && r->state() == pb::RESERVATION_STATE_COMMITTED) {
    for (const pb::ReservedItem& i : r->items()) {
      if (ItemPodName(r->application(), i) == decision.pod()) item = &i;
    }
  }
  if (item != nullptr && item->node() == decision.to_node()) {
    // The pod under this name runs on to_node, or is deleted and made again there.
    ASSIGN_OR_RETURN(std::vector<codeco::lms::v1::Pod> labelled,
                     lms_.ListPodsLabelled(kReservationLabel, LabelValue(decision.reservation())));
    bool there = false;
    for (const codeco::lms::v1::Pod& p : labelled) {
      if (p.name() != decision.pod()) continue;
      if (p.node_name() == decision.to_node() && !PodEnded(p.phase())) {
        there = true;
        continue;
      }
      // Off its failed node the pod is forced out (its kubelet does not
      // answer: a plain delete would leave it Terminating, its name taken);
      // an ended copy on the new node goes the usual way.
      absl::Status deleted = p.node_name() == decision.to_node() ? lms_.DeletePod(p.name())
                                                                 : lms_.ForceDeletePod(p.name());
      if (!deleted.ok() && !absl::IsNotFound(deleted)) {
        return absl::Status(deleted.code(),
                            absl::StrCat("local decision ", decision.id(), ": deleting pod ",
                                         p.name(), " on ", p.node_name(), ": ", deleted.message()));
      }
    }
    if (!there) {
      absl::Status created =
          lms_.CreatePodFrom(item->pod(), item->node(), ToResources(item->resources()),
                             absl::StrCat("swm/", decision.reservation(), "/", decision.pod(),
                                          "/local/", DecisionSequence(decision.id())));
      if (absl::IsAlreadyExists(created)) {
        // The old pod is deleted but not gone yet (an LMS that removes pods
        // after a while): the decision stays MOVING and the next pass tries
        // again.
        return absl::UnavailableError(absl::StrCat(
            "local decision ", decision.id(), ": pod ", decision.pod(),
            " is still going away; created on ", decision.to_node(), " once it is gone"));
      }
      if (!created.ok()) {
        return absl::Status(
            created.code(),
            absl::StrCat("local decision ", decision.id(), ": creating pod ", decision.pod(),
                         " on ", decision.to_node(), ": ", created.message()));
      }
    }
  }
  // A reservation the hub released (or moved the pod of) since: nothing
  // of it is left to move, and the decision stands for the hub to settle.
  decision.set_state(pb::LOCAL_DECISION_STATE_PENDING);
  RETURN_IF_ERROR(kv_.Put(kReservationsFamily, LocalDecisionKey(DecisionSequence(decision.id())),
                          decision.SerializeAsString()));
  return decision;
}

absl::StatusOr<int> ClusterReservations::FinishLocalMoves() {
  absl::MutexLock lock(&mu_);
  std::vector<pb::LocalDecision> moving;
  RETURN_IF_ERROR(ScanDecisions("", [&](const pb::LocalDecision& d) {
    if (d.state() == pb::LOCAL_DECISION_STATE_MOVING) moving.push_back(d);
    return true;
  }));
  int finished = 0;
  for (pb::LocalDecision& d : moving) {
    RETURN_IF_ERROR(FinishMoveLocked(std::move(d)).status());
    ++finished;
  }
  return finished;
}

absl::StatusOr<std::vector<pb::LocalDecision>> ClusterReservations::LocalDecisions(
    bool include_settled, int64_t after, int limit) {
  absl::MutexLock lock(&mu_);
  std::vector<pb::LocalDecision> out;
  RETURN_IF_ERROR(
      ScanDecisions(after > 0 ? LocalDecisionKey(after) : "", [&](const pb::LocalDecision& d) {
        if (include_settled || !IsSettled(d)) out.push_back(d);
        return static_cast<int>(out.size()) < limit;
      }));
  return out;
}

absl::StatusOr<std::vector<pb::LocalDecision>> ClusterReservations::SettleLocalDecisions(
    const std::vector<pb::LocalDecisionVerdict>& verdicts) {
  absl::MutexLock lock(&mu_);
  FieldErrors errors;
  std::vector<pb::LocalDecision> out;
  std::map<std::string, pb::LocalDecision> settled;  // key -> as written
  const absl::Time now = clock_.Now();
  for (size_t i = 0; i < verdicts.size(); ++i) {
    const pb::LocalDecisionVerdict& v = verdicts[i];
    const std::string path = absl::StrCat("verdicts[", i, "]");
    if (v.state() != pb::LOCAL_DECISION_STATE_ADOPTED &&
        v.state() != pb::LOCAL_DECISION_STATE_UNDONE) {
      errors.Add(path + ".state", "must be ADOPTED or UNDONE");
      continue;
    }
    const int64_t sequence = DecisionSequence(v.id());
    if (sequence <= 0 || v.id() != absl::StrCat(options_.cluster, "/", sequence)) {
      errors.Add(path + ".id", absl::StrCat("\"", v.id(), "\" is not a decision of cluster ",
                                            options_.cluster, " (\"", options_.cluster, "/<n>\")"));
      continue;
    }
    const std::string key = LocalDecisionKey(sequence);
    pb::LocalDecision d;
    if (auto seen = settled.find(key); seen != settled.end()) {
      d = seen->second;
    } else {
      absl::StatusOr<std::string> stored = kv_.Get(kReservationsFamily, key);
      if (absl::IsNotFound(stored.status())) {
        return absl::NotFoundError(absl::StrCat(path, ".id: no local decision ", v.id(),
                                                " is held (never made, or forgotten since)"));
      }
      RETURN_IF_ERROR(stored.status());
      if (!d.ParseFromString(*stored)) {
        return absl::DataLossError("stored local decision " + key + " does not parse");
      }
    }
    if (d.state() == pb::LOCAL_DECISION_STATE_MOVING) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ".id: local decision ", v.id(),
                       " is still moving its pod; settle it once PENDING"));
    }
    if (!IsSettled(d)) {
      d.set_state(v.state());
      d.set_settle_note(v.note());
      *d.mutable_settle_time() = ToTimestamp(now);
      settled[key] = d;
    }
    out.push_back(std::move(d));
  }
  RETURN_IF_ERROR(errors.ToStatus());
  KvWriteBatch batch;
  for (const auto& [key, d] : settled) batch.Put(kReservationsFamily, key, d.SerializeAsString());
  if (!batch.empty()) RETURN_IF_ERROR(kv_.Write(batch));
  return out;
}

absl::StatusOr<std::vector<ClusterReservations::Live>> ClusterReservations::LiveLocked() {
  const absl::Time now = clock_.Now();
  std::vector<Live> live;
  KvWriteBatch batch;
  RETURN_IF_ERROR(ScanStored("r/", [&](std::string_view key, pb::Reservation& r) {
    const bool lapsed =
        r.state() == pb::RESERVATION_STATE_RESERVED && FromProtoTimestamp(r.expire_time()) <= now;
    if (lapsed) {
      r.set_state(pb::RESERVATION_STATE_EXPIRED);
      *r.mutable_update_time() = ToTimestamp(now);
    }
    if (IsTombstone(r)) {
      // To t/ (a lapsed lease, or a tombstone of the older layout).
      batch.Put(kReservationsFamily, "t/" + r.id(), r.SerializeAsString());
      batch.Delete(kReservationsFamily, std::string(key));
      batch.Delete(kReservationsFamily, "s/" + r.id());
      return;
    }
    live.push_back(Live{std::move(r), false});
  }));
  for (Live& l : live) {
    if (l.reservation.state() != pb::RESERVATION_STATE_COMMITTED) continue;
    absl::StatusOr<std::string> seen = kv_.Get(kReservationsFamily, "s/" + l.reservation.id());
    if (seen.ok()) {
      l.all_seen = true;
    } else if (!absl::IsNotFound(seen.status())) {
      return seen.status();
    }
  }
  if (!batch.empty()) RETURN_IF_ERROR(kv_.Write(batch));
  RETURN_IF_ERROR(SweepTombstonesLocked());
  return live;
}

absl::StatusOr<std::vector<Node>> ClusterReservations::NodesWithHoldsLocked() {
  ASSIGN_OR_RETURN(std::vector<Node> nodes, lms_.ListNodes());
  ASSIGN_OR_RETURN(std::vector<PodInfo> pods, lms_.ListPods());
  ASSIGN_OR_RETURN(std::vector<Live> live, LiveLocked());
  std::set<std::string> present;
  for (const PodInfo& p : pods) present.insert(p.name);
  std::map<std::string, Resources> held;
  KvWriteBatch latch;
  for (const Live& l : live) {
    if (l.all_seen) continue;
    bool all_present = true;
    for (const pb::ReservedItem& item : l.reservation.items()) {
      if (present.count(ItemPodName(l.reservation.application(), item))) continue;
      all_present = false;
      held[item.node()] += ToResources(item.resources());
    }
    // A committed reservation whose pods are all in the LMS stops counting
    // for good: the LMS counts them from now on (and a pod deleted later
    // frees its room).
    if (all_present && l.reservation.state() == pb::RESERVATION_STATE_COMMITTED) {
      latch.Put(kReservationsFamily, "s/" + l.reservation.id(), "");
    }
  }
  if (!latch.empty()) RETURN_IF_ERROR(kv_.Write(latch));
  for (Node& n : nodes) {
    if (auto it = held.find(n.name); it != held.end()) n.allocated += it->second;
  }
  return nodes;
}

absl::StatusOr<std::vector<Node>> ClusterReservations::NodesWithHolds() {
  absl::MutexLock lock(&mu_);
  return NodesWithHoldsLocked();
}

absl::StatusOr<std::optional<pb::Reservation>> ClusterReservations::GetLocked(
    const std::string& id) {
  absl::StatusOr<std::string> value = kv_.Get(kReservationsFamily, "r/" + id);
  if (absl::IsNotFound(value.status())) value = kv_.Get(kReservationsFamily, "t/" + id);
  if (absl::IsNotFound(value.status())) return std::nullopt;
  if (!value.ok()) return value.status();
  pb::Reservation r;
  if (!r.ParseFromString(*value)) {
    return absl::DataLossError("stored reservation r/" + id + " does not parse");
  }
  if (r.state() == pb::RESERVATION_STATE_RESERVED &&
      FromProtoTimestamp(r.expire_time()) <= clock_.Now()) {
    r.set_state(pb::RESERVATION_STATE_EXPIRED);
    *r.mutable_update_time() = ToTimestamp(clock_.Now());
    RETURN_IF_ERROR(Write(r));
  }
  return r;
}

absl::StatusOr<std::optional<pb::Reservation>> ClusterReservations::Get(const std::string& id) {
  absl::MutexLock lock(&mu_);
  return GetLocked(id);
}

absl::StatusOr<pb::Reservation> ClusterReservations::Reserve(const pb::ReserveRequest& request) {
  FieldErrors errors;
  if (request.reservation_id().empty()) errors.Add("reservation_id", "is required");
  if (request.application().empty()) errors.Add("application", "is required");
  if (request.items().empty()) errors.Add("items", "must hold at least one item");
  if (request.lease_duration_ns() < 0) errors.Add("lease_duration_ns", "must not be negative");
  std::set<std::string> workloads;
  for (int i = 0; i < request.items_size(); ++i) {
    const pb::ReservedItem& item = request.items(i);
    std::string path = absl::StrCat("items[", i, "]");
    if (item.workload().empty()) {
      errors.Add(path + ".workload", "is required");
    } else if (!workloads.insert(item.workload()).second) {
      errors.Add(path + ".workload", "duplicate workload \"" + item.workload() + "\"");
    }
    if (item.node().empty()) errors.Add(path + ".node", "is required");
    const auto& q = item.resources();
    if (q.cpu_millicores() < 0 || q.memory_bytes() < 0 || q.gpu() < 0) {
      errors.Add(path + ".resources", "must not be negative");
    }
    CheckPodTemplate(request, item, path + ".pod", errors);
  }
  RETURN_IF_ERROR(errors.ToStatus());

  absl::MutexLock lock(&mu_);
  const std::string& id = request.reservation_id();
  ASSIGN_OR_RETURN(std::optional<pb::Reservation> known, GetLocked(id));
  if (known.has_value()) {
    if (IsTombstone(*known)) {
      return absl::FailedPreconditionError(
          absl::StrCat("reservation ", id, " was ",
                       known->state() == pb::RESERVATION_STATE_RELEASED ? "released" : "expired",
                       "; reserve again under a new id"));
    }
    if (known->application() != request.application() || !SameItems(*known, request)) {
      return InvalidFieldError("reservation_id", "already used for other items");
    }
    return *known;
  }

  ASSIGN_OR_RETURN(std::vector<Node> nodes, NodesWithHoldsLocked());
  std::map<std::string, Resources> want;
  for (const pb::ReservedItem& item : request.items()) {
    want[item.node()] += ToResources(item.resources());
  }
  for (const auto& [node_name, need] : want) {
    const Node* node = nullptr;
    for (const Node& n : nodes) {
      if (n.name == node_name) node = &n;
    }
    if (node == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("cluster ", options_.cluster, " has no node ", node_name));
    }
    if (!node->schedulable) {
      return absl::FailedPreconditionError(
          absl::StrCat("node ", node_name, " of cluster ", options_.cluster, " is unschedulable"));
    }
    Resources free = node->Free();
    if (!free.Fits(need)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "node ", node_name, " of cluster ", options_.cluster, " has no room left: needs ",
          need.cpu_millis, "m CPU and ", need.memory_bytes, " B memory, ", free.cpu_millis,
          "m and ", free.memory_bytes, " B free after reservations"));
    }
  }
  absl::Duration lease = request.lease_duration_ns() == 0
                             ? options_.default_lease
                             : absl::Nanoseconds(request.lease_duration_ns());
  lease = std::min(lease, options_.max_lease);
  const absl::Time now = clock_.Now();
  pb::Reservation r;
  r.set_id(id);
  r.set_application(request.application());
  r.set_plan_revision(request.plan_revision());
  r.set_cluster(options_.cluster);
  *r.mutable_items() = request.items();
  r.set_state(pb::RESERVATION_STATE_RESERVED);
  r.set_lease_duration_ns(absl::ToInt64Nanoseconds(lease));
  *r.mutable_expire_time() = ToTimestamp(now + lease);
  *r.mutable_create_time() = ToTimestamp(now);
  *r.mutable_update_time() = ToTimestamp(now);
  RETURN_IF_ERROR(Write(r));
  return r;
}

absl::StatusOr<pb::Reservation> ClusterReservations::Commit(const std::string& id) {
  if (id.empty()) return InvalidFieldError("reservation_id", "is required");
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::optional<pb::Reservation> known, GetLocked(id));
  if (!known.has_value()) return absl::NotFoundError("no reservation " + id);
  if (known->state() == pb::RESERVATION_STATE_COMMITTED) return *known;
  if (IsTombstone(*known)) {
    return absl::FailedPreconditionError(
        absl::StrCat("reservation ", id, " was ",
                     known->state() == pb::RESERVATION_STATE_RELEASED ? "released" : "expired",
                     " before the commit"));
  }
  for (const pb::ReservedItem& item : known->items()) {
    // The stored template, as the hub sent it; the LMS remembers request ids,
    // so a retried commit does not create twice.
    const std::string& pod = item.pod().name();
    absl::Status created = lms_.CreatePodFrom(
        item.pod(), item.node(), ToResources(item.resources()), absl::StrCat("swm/", id, "/", pod));
    if (!created.ok() && !absl::IsAlreadyExists(created)) {
      return absl::Status(created.code(), absl::StrCat("committing ", id, ": creating pod ", pod,
                                                       ": ", created.message()));
    }
  }
  known->set_state(pb::RESERVATION_STATE_COMMITTED);
  *known->mutable_update_time() = ToTimestamp(clock_.Now());
  RETURN_IF_ERROR(Write(*known));
  return *known;
}

absl::StatusOr<std::optional<pb::Reservation>> ClusterReservations::Release(
    const std::string& id, const std::vector<std::string>& pods) {
  if (id.empty()) return InvalidFieldError("reservation_id", "is required");
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::optional<pb::Reservation> known, GetLocked(id));
  if (!known.has_value()) return std::nullopt;
  if (known->state() == pb::RESERVATION_STATE_RELEASED) return known;
  // Pods exist after a commit, or after one that failed half-way: the
  // items' pods and any pod the LMS shows labelled with this reservation.
  std::set<std::string> own;
  for (const pb::ReservedItem& item : known->items()) {
    own.insert(ItemPodName(known->application(), item));
  }
  ASSIGN_OR_RETURN(std::vector<codeco::lms::v1::Pod> labelled,
                   lms_.ListPodsLabelled(kReservationLabel, LabelValue(id)));
  for (const codeco::lms::v1::Pod& p : labelled) own.insert(p.name());
  // Some pods only (a migration moving a workload) while an item would be
  // left; `pods` covering every item releases the reservation.
  const std::set<std::string> named(pods.begin(), pods.end());
  bool partial = false;
  for (const pb::ReservedItem& item : known->items()) {
    if (!named.empty() && !named.count(ItemPodName(known->application(), item))) partial = true;
  }
  std::set<std::string> targets;
  if (partial) {
    // Only the reservation's own: a name from elsewhere deletes nothing.
    for (const std::string& pod : named) {
      if (own.count(pod)) targets.insert(pod);
    }
  } else {
    targets = std::move(own);
  }
  std::set<std::string> gone;
  absl::Status deleted = DeletePods(lms_, targets, *known, gone);
  if (partial) DropItems(*known, gone);
  if (!deleted.ok()) {
    // What was deleted so far is kept: a retry reports it too.
    absl::Status kept = Write(*known);
    if (!kept.ok()) {
      return absl::Status(kept.code(), absl::StrCat("releasing ", id, ": ", kept.message()));
    }
    return absl::Status(deleted.code(), absl::StrCat("releasing ", id, ": ", deleted.message()));
  }
  if (partial) {
    if (gone.empty()) return known;  // a retry: nothing left to do
    *known->mutable_update_time() = ToTimestamp(clock_.Now());
    RETURN_IF_ERROR(Write(*known));
    return known;
  }
  known->set_state(pb::RESERVATION_STATE_RELEASED);
  *known->mutable_update_time() = ToTimestamp(clock_.Now());
  RETURN_IF_ERROR(Write(*known));
  return known;
}

}  // namespace codeco::swm
