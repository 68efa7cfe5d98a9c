#pragma once
// The aggregator's side of PDLC's federated training rounds: a state machine
// over SecureAggregationRound (secure_aggregation.h) for one model of one
// neighborhood. Pure: no sockets, no clock; every call takes the time now as
// Unix ms, and deadlines are acted on by the first call at or after them.
//
// A round goes
//   JOINING     peers join with a fresh public key; the join window opens at
//               the first join and closes after join_window_ms, or at once
//               when every configured member (or max_participants) joined.
//               Fewer than min_participants joined: ABANDONED.
//   COLLECTING  the spec (every joiner and its key) is fixed; participants
//               submit masked updates until collection_window_ms passed or
//               everyone submitted. Then collection closes: fewer than
//               min_survivors submitted: ABANDONED; nobody dropped: FINISHED;
//               else
//   REVEALING   every survivor reveals its seed with every dropped peer; all
//               in: FINISHED; reveal_window_ms passed first: ABANDONED.
//   FINISHED    the FedAvg model is stored with its round, contributors and
//               sample count (GlobalModel).
// A FINISHED or ABANDONED round goes to a bounded history and the next round
// opens (JOINING, no window until its first join).
//
// Every message is idempotent: a re-sent join, submission or reveal with the
// same content answers as the first did; different content is ALREADY_EXISTS.
// Inputs are bounded (participants, weights, id lengths, kept history), so no
// message makes the aggregator hold more than about
// max_participants * 64 bytes + (max_weight_count + 1) * 8 bytes per round.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pdlc/core/secure_aggregation.h"

namespace codeco::pdlc {

/// Longest peer id (a cluster name, a DNS name) a round accepts.
inline constexpr size_t kMaxPeerIdBytes = 253;

/// Settings of a FederatedRounds.
struct FederatedRoundOptions {
  /// The model trained, e.g. "lstm-cpu-mem". Required.
  std::string model_name;
  /// The neighborhood training it. Required.
  std::string neighborhood;
  /// The clusters that may join; empty admits any peer id (the server layer
  /// still binds a peer to its own identity). Default: empty.
  std::set<std::string> members;
  /// How long a round takes joins after the first one, ms. Default: 60 s.
  int64_t join_window_ms = 60'000;
  /// How long after the join window closed masked updates are taken, ms.
  /// Default: 5 min.
  int64_t collection_window_ms = 300'000;
  /// How long after collection closed the survivors have to reveal their
  /// seeds before the round is abandoned, ms. Default: 60 s.
  int64_t reveal_window_ms = 60'000;
  /// Fewest joiners a round starts collecting with. Default 2, at least 2
  /// and at least min_survivors.
  size_t min_participants = 2;
  /// Fewest survivors a round finishes with (SecureAggregationOptions).
  /// Default 2, at least 2.
  size_t min_survivors = 2;
  /// Most peers one round takes; further joins are RESOURCE_EXHAUSTED.
  /// Default: 64.
  size_t max_participants = 64;
  /// Largest model, in weights. Default: 262144 (a masked update of 2 MiB;
  /// PDLC's LSTM has about 14 000).
  size_t max_weight_count = size_t{1} << 18;
  /// Finished and abandoned rounds kept for GetRound. Default: 16.
  size_t history_rounds = 16;
};

/// Where a round is.
enum class RoundState { kJoining, kCollecting, kRevealing, kFinished, kAbandoned };

/// "joining", "collecting", "revealing", "finished" or "abandoned".
const char* RoundStateName(RoundState state);

/// A round as the aggregator reports it.
struct RoundStatus {
  /// Round number, from 1.
  uint64_t round = 0;
  /// Where it is.
  RoundState state = RoundState::kJoining;
  /// Weights of the model (0 before the first join).
  size_t weight_count = 0;
  /// The spec's participants in id order; empty while joining.
  std::vector<Participant> participants;
  /// Peers that joined.
  size_t joined_count = 0;
  /// Participants whose update was accepted.
  size_t submitted_count = 0;
  /// Participants that did not submit, in id order (set when collection closed).
  std::vector<std::string> dropped;
  /// When joins close, Unix ms (0 before the first join).
  int64_t join_deadline_ms = 0;
  /// When collection closes, Unix ms (0 while joining).
  int64_t collect_deadline_ms = 0;
  /// When a round missing reveals is abandoned, Unix ms (0 before revealing).
  int64_t reveal_deadline_ms = 0;
  /// Why it was abandoned (empty otherwise).
  std::string abandon_reason;
};

/// A finished round's model.
struct GlobalModelRecord {
  /// The round that produced it.
  uint64_t round = 0;
  /// The FedAvg weights.
  std::vector<float> weights;
  /// Samples behind them: the survivors' sum.
  uint64_t total_samples = 0;
  /// The survivors, in id order.
  std::vector<std::string> contributors;
  /// When the round finished, Unix ms.
  int64_t finished_ms = 0;
};

/// One seed a survivor reveals: the dropped peer's id and the pair's seed.
struct DroppedSeed {
  /// The dropped peer.
  std::string dropped_id;
  /// The survivor's seed with it.
  PairSeed seed{};
};

/// The aggregator of one model in one neighborhood. Not thread-safe: the
/// server layer serializes calls.
class FederatedRounds {
 public:
  /// Rounds under `options`; round 1 is open. INVALID_ARGUMENT naming the
  /// option for a missing name, a non-positive window or inconsistent minimums.
  static absl::StatusOr<FederatedRounds> Create(FederatedRoundOptions options);

  /// `peer_id` joins the open round with `public_key` for a model of
  /// `weight_count` weights. Re-sending the same join answers the round it
  /// joined. INVALID_ARGUMENT naming peer_id, public_key or weight_count
  /// (also for a count other than the round's); PERMISSION_DENIED for a
  /// peer not in options.members; ALREADY_EXISTS for a second, different key
  /// in the same round; RESOURCE_EXHAUSTED when the round is full;
  /// FAILED_PRECONDITION when the current round is past its join window
  /// (join the next).
  absl::StatusOr<RoundStatus> Join(const std::string& peer_id, const std::string& public_key,
                                   size_t weight_count, int64_t now_ms);

  /// Round `round` (0 = the current one). NOT_FOUND for a round not yet
  /// opened or no longer kept.
  absl::StatusOr<RoundStatus> Get(uint64_t round, int64_t now_ms);

  /// Participant `peer_id`'s masked update for `round` (weight_count + 1
  /// elements). INVALID_ARGUMENT naming peer_id or masked_elements;
  /// ALREADY_EXISTS for different content than an earlier submission;
  /// FAILED_PRECONDITION when `round` is not collecting (naming its state).
  absl::StatusOr<RoundStatus> Submit(uint64_t round, const std::string& peer_id,
                                     const std::vector<uint64_t>& masked, int64_t now_ms);

  /// Survivor `peer_id`'s seeds with dropped peers for `round`. A re-send
  /// after the round finished is OK. INVALID_ARGUMENT naming
  /// reveals[i].dropped_peer_id or peer_id; ALREADY_EXISTS for a different
  /// seed than revealed before; FAILED_PRECONDITION when `round` is not
  /// revealing.
  absl::StatusOr<RoundStatus> Reveal(uint64_t round, const std::string& peer_id,
                                     const std::vector<DroppedSeed>& reveals, int64_t now_ms);

  /// The latest finished round's model, if its round is at least
  /// `min_round`. NOT_FOUND otherwise.
  absl::StatusOr<GlobalModelRecord> GlobalModel(uint64_t min_round, int64_t now_ms);

  /// Acts on every deadline passed by `now_ms` (closing windows, finishing
  /// or abandoning the round). Every other call does this first.
  void Advance(int64_t now_ms);

  /// The options.
  const FederatedRoundOptions& options() const { return options_; }

 private:
  explicit FederatedRounds(FederatedRoundOptions options);

  // The open round.
  struct Current {
    RoundStatus status;
    std::map<std::string, std::string> keys;            // joiner -> public key
    std::optional<SecureAggregationRound> aggregation;  // from COLLECTING on
  };

  void CloseJoins(int64_t now_ms);
  void CloseCollection(int64_t now_ms);
  void TryFinish(int64_t now_ms);
  void Abandon(std::string reason);
  void OpenNext();
  bool AllMembersJoined() const;
  absl::StatusOr<RoundStatus> Kept(uint64_t round) const;

  FederatedRoundOptions options_;
  Current current_;
  std::deque<RoundStatus> history_;  // oldest first
  std::optional<GlobalModelRecord> global_;
};

}  // namespace codeco::pdlc
