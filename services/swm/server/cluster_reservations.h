#pragma once
// The reservation ledger of one managed cluster's swm (the MC role), kept in
// the service's KvStore so that an swm killed with SIGKILL and started again
// still holds every reservation it acknowledged. Reservations count against
// the capacity of their nodes until their pods are seen in the LMS; a
// reservation not committed when its lease runs out (on the injected clock)
// is given back. Each item carries the pod to create (ReservedItem.pod: the
// hub's template from the application model, with the codeco.io/plan and
// codeco.io/reservation labels), stored with the reservation, so a Commit
// after a restart creates exactly what the hub asked for. Commit creates the
// pods through the cluster's LMS; Release deletes them (the items' pods and
// any pod labelled with the reservation) and records which it deleted. A
// Release naming some pods (a migration moving one workload) deletes only
// those and drops their items; the reservation lives on with the others
// until none is left.
//
// Key layout (family "reservations", values are serialized codeco protos):
//   r/<reservation id>  -> swm.v1.Reservation: RESERVED or COMMITTED (the
//                          live ones, which every view of the nodes reads)
//   t/<reservation id>  -> swm.v1.Reservation: a RELEASED / EXPIRED tombstone
//                          kept `tombstone_ttl` so that a late retry cannot
//                          bring it back; apart from r/ so that the cost of a
//                          view follows the live reservations, not the history
//                          (a tombstone an older version left under r/ is
//                          moved on the next read)
//   s/<reservation id>  -> "" once every pod of a committed reservation was
//                          seen in the LMS (from then on the LMS counts them)
//   d/<sequence, 20 digits> -> swm.v1.LocalDecision: a pod this swm moved to
//                          another node on its own while the hub was away
//                          (local_rescheduler.h), kept until `tombstone_ttl`
//                          after the hub settled it
//   n/decisions         -> the last decision sequence handed out (never reused)
// A reservation's pod for an item is the name of the item's pod template
// (ReservedItem.pod.name): "<application>-<workload>" as the hub names pods,
// or "<application>-<workload>-r<plan revision>" for a pod a migration
// created (so that a move within the cluster does not clash with the old
// pod); records without a template use "<application>-<workload>".

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"
#include "codeco/swm/v1/swm_service.pb.h"
#include "swm/core/local_rescheduler.h"
#include "swm/core/model.h"
#include "swm/lms/lms_pod_runtime.h"

namespace codeco::swm {

/// Column family of the MC's reservation ledger.
inline constexpr char kReservationsFamily[] = "reservations";

/// Settings of a ClusterReservations.
struct ClusterReservationsOptions {
  /// Name of the cluster (put on every reservation). Default: empty.
  std::string cluster;
  /// Lease of a Reserve that asks for none. Default: 60 s.
  absl::Duration default_lease = absl::Seconds(60);
  /// Longest lease granted (longer requests are cut to it). Default: 10 min.
  absl::Duration max_lease = absl::Minutes(10);
  /// How long a released or expired reservation is remembered. Default: 1 h.
  absl::Duration tombstone_ttl = absl::Hours(1);
};

/// One cluster's durable reservations over its LMS. Thread-safe.
class ClusterReservations {
 public:
  /// Keeps records in `kv` (with the "reservations" family), reads time from
  /// `clock` and drives pods through `lms`; all three must outlive it.
  ClusterReservations(KvStore& kv, const Clock& clock, LmsPodRuntime& lms,
                      ClusterReservationsOptions options = {});

  /// The LMS's nodes with `allocated` raised by what live reservations hold
  /// on each (items whose pod the LMS does not show yet).
  absl::StatusOr<std::vector<Node>> NodesWithHolds();
  /// Holds the items of `request` and stores their pod templates
  /// (INVALID_ARGUMENT naming the field for bad input, a missing or
  /// inconsistent items[i].pod among them; FAILED_PRECONDITION naming the
  /// node when one lacks room, or when the id was released or expired). The
  /// same id with the same items answers the stored reservation again.
  absl::StatusOr<codeco::swm::v1::Reservation> Reserve(
      const codeco::swm::v1::ReserveRequest& request);
  /// Creates the reservation's pods and makes it COMMITTED (its lease no
  /// longer applies). NOT_FOUND for an unknown id, FAILED_PRECONDITION when
  /// it was released or expired; OK again once committed.
  absl::StatusOr<codeco::swm::v1::Reservation> Commit(const std::string& id);
  /// Deletes whatever pods the reservation created (its items' pods and any
  /// pod labelled codeco.io/reservation with its id) and marks it RELEASED
  /// with deleted_pods listing them. A failure part-way keeps what was
  /// deleted in the record, so a retry finishes and reports every pod.
  /// nullopt for an unknown id; the tombstone again for a released one.
  ///
  /// With `pods` non-empty only those of them that are the reservation's
  /// are deleted (a name that is not is ignored, so no other reservation's
  /// pod goes) and listed in deleted_pods, and the items whose pod they are
  /// are dropped; the reservation keeps its state with the other items. Once
  /// `pods` covers every item left it is released as above. A retry deletes
  /// nothing more and answers the same record.
  absl::StatusOr<std::optional<codeco::swm::v1::Reservation>> Release(
      const std::string& id, const std::vector<std::string>& pods = {});
  /// The reservation `id` as stored now (expired ones as EXPIRED), or nullopt.
  absl::StatusOr<std::optional<codeco::swm::v1::Reservation>> Get(const std::string& id);

  /// The pods of the committed reservations, where the ledger binds them
  /// (stateful: the template's codeco.io/stateful annotation).
  absl::StatusOr<std::vector<LocalPod>> CommittedPods();
  /// Carries out a local move (`move.to_node` set): stores a LocalDecision
  /// (MOVING) and the reservation's item on its new node in one write, then
  /// deletes the pod where it was and creates it, from its stored template
  /// and under the same name and labels, on the new node, and marks the
  /// decision PENDING. FAILED_PRECONDITION when the reservation is no longer
  /// committed here or no longer binds the pod to `move.pod.node`; an LMS
  /// error leaves the decision MOVING for FinishLocalMoves.
  absl::StatusOr<codeco::swm::v1::LocalDecision> MoveLocally(const LocalMove& move);
  /// Finishes the decisions still MOVING (a failed LMS call, a restart);
  /// answers how many it finished, or the first error.
  absl::StatusOr<int> FinishLocalMoves();
  /// The stored decisions, oldest first, after sequence `after` (0: all);
  /// settled ones only with `include_settled`; at most `limit`.
  absl::StatusOr<std::vector<codeco::swm::v1::LocalDecision>> LocalDecisions(bool include_settled,
                                                                             int64_t after,
                                                                             int limit);
  /// Records the hub's verdicts (ADOPTED or UNDONE) and answers each
  /// decision as stored after it. INVALID_ARGUMENT naming verdicts[i] for
  /// another state or a malformed id; NOT_FOUND naming it for a decision not
  /// held (never made, or forgotten after tombstone_ttl); FAILED_PRECONDITION
  /// for one still MOVING. A settled decision keeps its first verdict.
  /// Nothing is written unless every verdict is accepted.
  absl::StatusOr<std::vector<codeco::swm::v1::LocalDecision>> SettleLocalDecisions(
      const std::vector<codeco::swm::v1::LocalDecisionVerdict>& verdicts);

 private:
  struct Live {
    codeco::swm::v1::Reservation reservation;
    bool all_seen = false;
  };
  // Every live reservation, turning lapsed leases into EXPIRED tombstones and
  // dropping old tombstones on the way.
  absl::StatusOr<std::vector<Live>> LiveLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::optional<codeco::swm::v1::Reservation>> GetLocked(const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::vector<Node>> NodesWithHoldsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores `reservation` under r/, or under t/ (gone from r/ and s/) when
  // it is a tombstone.
  absl::Status Write(const codeco::swm::v1::Reservation& reservation);
  // Calls `visit` with every stored reservation whose key starts with
  // `prefix` ("r/", "t/"); DATA_LOSS naming the key when one does not parse.
  absl::Status ScanStored(
      std::string_view prefix,
      const std::function<void(std::string_view key, codeco::swm::v1::Reservation& r)>& visit)
      const;
  // Deletes the tombstones and settled local decisions older than
  // tombstone_ttl, at most once per tenth of it.
  absl::Status SweepTombstonesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes `decision`'s pod wherever else it runs, creates it on its
  // to_node and stores the decision PENDING.
  absl::StatusOr<codeco::swm::v1::LocalDecision> FinishMoveLocked(
      codeco::swm::v1::LocalDecision decision) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Calls `visit` with every stored decision after key `start_after` (empty:
  // from the first; stops when it answers false); DATA_LOSS naming the key
  // when one does not parse.
  absl::Status ScanDecisions(
      const std::string& start_after,
      const std::function<bool(const codeco::swm::v1::LocalDecision&)>& visit) const;

  KvStore& kv_;
  const Clock& clock_;
  LmsPodRuntime& lms_;
  ClusterReservationsOptions options_;
  absl::Time next_sweep_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Mutex mu_;  // serialises check-then-write
};

/// The key of local decision `sequence` ("d/" and 20 digits).
std::string LocalDecisionKey(int64_t sequence);

/// The pod name of reservation item `workload` of `application`, as the hub
/// first places it (a migrated pod adds "-r<plan revision>").
std::string ReservedPodName(const std::string& application, const std::string& workload);

/// The pod of reservation item `item` of `application`: its template's name
/// when set, else ReservedPodName (records stored before templates).
std::string ItemPodName(const std::string& application,
                        const codeco::swm::v1::ReservedItem& item);

}  // namespace codeco::swm
