#include "pdlc/core/federated_round.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codeco/common/status.h"

namespace codeco::pdlc {
namespace {

absl::Status CheckPeerId(const std::string& field, const std::string& peer_id) {
  if (peer_id.empty()) return InvalidFieldError(field, "must not be empty");
  if (peer_id.size() > kMaxPeerIdBytes) {
    return InvalidFieldError(field, absl::StrCat("longer than ", kMaxPeerIdBytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status NotInState(uint64_t round, RoundState state, const char* wanted) {
  return absl::FailedPreconditionError(
      absl::StrCat("round ", round, " is ", RoundStateName(state), ", not ", wanted));
}

}  // namespace

const char* RoundStateName(RoundState state) {
  switch (state) {
    case RoundState::kJoining:
      return "joining";
    case RoundState::kCollecting:
      return "collecting";
    case RoundState::kRevealing:
      return "revealing";
    case RoundState::kFinished:
      return "finished";
    case RoundState::kAbandoned:
      return "abandoned";
  }
  return "unknown";
}

absl::StatusOr<FederatedRounds> FederatedRounds::Create(FederatedRoundOptions options) {
  FieldErrors errors;
  if (options.model_name.empty()) errors.Add("model_name", "must not be empty");
  if (options.neighborhood.empty()) errors.Add("neighborhood", "must not be empty");
  for (const std::string& member : options.members) {
    if (absl::Status s = CheckPeerId("members", member); !s.ok()) {
      errors.Add("members", std::string(s.message()));
    }
  }
  if (options.join_window_ms <= 0) errors.Add("join_window_ms", "must be positive");
  if (options.collection_window_ms <= 0) errors.Add("collection_window_ms", "must be positive");
  if (options.reveal_window_ms <= 0) errors.Add("reveal_window_ms", "must be positive");
  if (options.min_survivors < 2) errors.Add("min_survivors", "must be at least 2");
  if (options.min_participants < std::max<size_t>(2, options.min_survivors)) {
    errors.Add("min_participants", "must be at least 2 and at least min_survivors");
  }
  if (options.max_participants < options.min_participants) {
    errors.Add("max_participants", "must be at least min_participants");
  }
  if (options.max_weight_count == 0) errors.Add("max_weight_count", "must be positive");
  if (options.history_rounds == 0) errors.Add("history_rounds", "must be positive");
  RETURN_IF_ERROR(errors.ToStatus());
  return FederatedRounds(std::move(options));
}

FederatedRounds::FederatedRounds(FederatedRoundOptions options) : options_(std::move(options)) {
  current_.status.round = 1;
}

bool FederatedRounds::AllMembersJoined() const {
  if (current_.keys.size() >= options_.max_participants) return true;
  if (options_.members.empty()) return false;
  for (const std::string& member : options_.members) {
    if (!current_.keys.count(member)) return false;
  }
  return true;
}

void FederatedRounds::Advance(int64_t now_ms) {
  RoundStatus& s = current_.status;
  if (s.state == RoundState::kJoining && s.join_deadline_ms != 0 && now_ms >= s.join_deadline_ms) {
    CloseJoins(now_ms);
  }
  if (s.state == RoundState::kCollecting && now_ms >= s.collect_deadline_ms) {
    CloseCollection(now_ms);
  }
  if (s.state == RoundState::kRevealing && now_ms >= s.reveal_deadline_ms) {
    TryFinish(now_ms);
    if (s.state == RoundState::kRevealing) {
      absl::StatusOr<AggregateResult> result = current_.aggregation->Finish();
      Abandon(absl::StrCat("reveal window passed: ", result.status().message()));
    }
  }
}

void FederatedRounds::CloseJoins(int64_t now_ms) {
  RoundStatus& s = current_.status;
  if (current_.keys.size() < options_.min_participants) {
    Abandon(absl::StrCat(current_.keys.size(), " peer(s) joined, fewer than the ",
                         options_.min_participants, " a round needs"));
    return;
  }
  RoundSpec spec;
  spec.context = {options_.model_name, options_.neighborhood, s.round};
  for (const auto& [peer, key] : current_.keys) spec.participants.push_back({peer, key});
  absl::StatusOr<SecureAggregationRound> aggregation = SecureAggregationRound::Create(
      spec, s.weight_count, SecureAggregationOptions{.min_survivors = options_.min_survivors});
  if (!aggregation.ok()) {
    // Joins were checked one by one; a spec that still fails is abandoned, not fatal.
    Abandon(absl::StrCat("bad spec: ", aggregation.status().message()));
    return;
  }
  current_.aggregation.emplace(*std::move(aggregation));
  s.participants = spec.participants;
  s.state = RoundState::kCollecting;
  s.collect_deadline_ms = now_ms + options_.collection_window_ms;
}

void FederatedRounds::CloseCollection(int64_t now_ms) {
  RoundStatus& s = current_.status;
  s.dropped = current_.aggregation->Close();
  const size_t survivors = s.participants.size() - s.dropped.size();
  if (survivors < options_.min_survivors) {
    Abandon(absl::StrCat(survivors, " participant(s) submitted, fewer than the ",
                         options_.min_survivors, " a round needs"));
    return;
  }
  s.state = RoundState::kRevealing;
  s.reveal_deadline_ms = now_ms + options_.reveal_window_ms;
  TryFinish(now_ms);
}

void FederatedRounds::TryFinish(int64_t now_ms) {
  absl::StatusOr<AggregateResult> result = current_.aggregation->Finish();
  if (!result.ok()) return;  // reveals missing: wait for them or the deadline
  RoundStatus& s = current_.status;
  global_ = GlobalModelRecord{s.round, std::move(result->weights), result->total_samples,
                              std::move(result->survivors), now_ms};
  s.state = RoundState::kFinished;
  OpenNext();
}

void FederatedRounds::Abandon(std::string reason) {
  current_.status.state = RoundState::kAbandoned;
  current_.status.abandon_reason = std::move(reason);
  OpenNext();
}

void FederatedRounds::OpenNext() {
  history_.push_back(std::move(current_.status));
  while (history_.size() > options_.history_rounds) history_.pop_front();
  current_ = Current{};
  current_.status.round = history_.back().round + 1;
}

absl::StatusOr<RoundStatus> FederatedRounds::Kept(uint64_t round) const {
  if (round == 0 || round == current_.status.round) return current_.status;
  for (const RoundStatus& kept : history_) {
    if (kept.round == round) return kept;
  }
  if (round > current_.status.round) {
    return absl::NotFoundError(
        absl::StrCat("round ", round, " is not open yet (current: ", current_.status.round, ")"));
  }
  return absl::NotFoundError(absl::StrCat("round ", round, " is no longer kept"));
}

absl::StatusOr<RoundStatus> FederatedRounds::Join(const std::string& peer_id,
                                                  const std::string& public_key,
                                                  size_t weight_count, int64_t now_ms) {
  RETURN_IF_ERROR(CheckPeerId("peer_id", peer_id));
  if (public_key.size() != kPublicKeyBytes) {
    return InvalidFieldError(
        "public_key", absl::StrCat("must be ", kPublicKeyBytes, " bytes, got ", public_key.size()));
  }
  if (weight_count == 0 || weight_count > options_.max_weight_count) {
    return InvalidFieldError("weight_count", absl::StrCat("must be 1-", options_.max_weight_count,
                                                          ", got ", weight_count));
  }
  if (!options_.members.empty() && !options_.members.count(peer_id)) {
    return absl::PermissionDeniedError(absl::StrCat("peer_id: \"", peer_id,
                                                    "\" is not a member of neighborhood \"",
                                                    options_.neighborhood, "\""));
  }
  Advance(now_ms);
  RoundStatus& s = current_.status;
  auto joined = current_.keys.find(peer_id);
  if (joined != current_.keys.end()) {
    if (joined->second != public_key) {
      return absl::AlreadyExistsError(absl::StrCat(
          "peer_id: \"", peer_id, "\" already joined round ", s.round, " with another public_key"));
    }
    if (weight_count != s.weight_count) {
      return InvalidFieldError("weight_count", absl::StrCat(weight_count, " differs from the ",
                                                            s.weight_count, " it joined with"));
    }
    return s;  // a re-sent join
  }
  if (s.state != RoundState::kJoining) {
    return absl::FailedPreconditionError(
        absl::StrCat("round ", s.round, " is ", RoundStateName(s.state), ": join the next round"));
  }
  if (current_.keys.size() >= options_.max_participants) {
    return absl::ResourceExhaustedError(
        absl::StrCat("round ", s.round, " is full (", options_.max_participants, " participants)"));
  }
  if (current_.keys.empty()) {
    s.weight_count = weight_count;
    s.join_deadline_ms = now_ms + options_.join_window_ms;
  } else if (weight_count != s.weight_count) {
    return InvalidFieldError("weight_count", absl::StrCat(weight_count, " differs from round ",
                                                          s.round, "'s ", s.weight_count));
  }
  current_.keys.emplace(peer_id, public_key);
  s.joined_count = current_.keys.size();
  RoundStatus answer = s;
  if (AllMembersJoined()) CloseJoins(now_ms);
  // The answer is the joined round; when joining completed the spec, it is
  // the round now collecting (or abandoned).
  if (current_.status.round == answer.round) return current_.status;
  return Kept(answer.round);
}

absl::StatusOr<RoundStatus> FederatedRounds::Get(uint64_t round, int64_t now_ms) {
  Advance(now_ms);
  return Kept(round);
}

absl::StatusOr<RoundStatus> FederatedRounds::Submit(uint64_t round, const std::string& peer_id,
                                                    const std::vector<uint64_t>& masked,
                                                    int64_t now_ms) {
  RETURN_IF_ERROR(CheckPeerId("peer_id", peer_id));
  Advance(now_ms);
  RoundStatus& s = current_.status;
  if (round != s.round || s.state != RoundState::kCollecting) {
    ASSIGN_OR_RETURN(RoundStatus kept, Kept(round));
    return NotInState(round, kept.state, "collecting");
  }
  if (!current_.keys.count(peer_id)) {
    return InvalidFieldError(
        "peer_id", absl::StrCat("\"", peer_id, "\" is not a participant of round ", round));
  }
  if (masked.size() != s.weight_count + 1) {
    return InvalidFieldError("masked_elements",
                             absl::StrCat("must have weight_count + 1 = ", s.weight_count + 1,
                                          " elements, got ", masked.size()));
  }
  RETURN_IF_ERROR(current_.aggregation->Submit(peer_id, masked));
  s.submitted_count = current_.aggregation->submitted_count();
  if (s.submitted_count == s.participants.size()) CloseCollection(now_ms);
  if (current_.status.round == round) return current_.status;
  return Kept(round);
}

absl::StatusOr<RoundStatus> FederatedRounds::Reveal(uint64_t round, const std::string& peer_id,
                                                    const std::vector<DroppedSeed>& reveals,
                                                    int64_t now_ms) {
  RETURN_IF_ERROR(CheckPeerId("peer_id", peer_id));
  Advance(now_ms);
  RoundStatus& s = current_.status;
  if (round != s.round || s.state != RoundState::kRevealing) {
    ASSIGN_OR_RETURN(RoundStatus kept, Kept(round));
    // A reveal re-sent after the round finished changes nothing.
    if (kept.state == RoundState::kFinished) return kept;
    return NotInState(round, kept.state, "revealing");
  }
  if (reveals.size() > s.dropped.size()) {
    return InvalidFieldError("reveals", absl::StrCat("at most one per dropped peer (",
                                                     s.dropped.size(), "), got ", reveals.size()));
  }
  for (size_t i = 0; i < reveals.size(); ++i) {
    const std::string field = absl::StrCat("reveals[", i, "].dropped_peer_id");
    RETURN_IF_ERROR(CheckPeerId(field, reveals[i].dropped_id));
    if (!std::binary_search(s.dropped.begin(), s.dropped.end(), reveals[i].dropped_id)) {
      return InvalidFieldError(
          field, absl::StrCat("\"", reveals[i].dropped_id, "\" did not drop from round ", round));
    }
  }
  for (const DroppedSeed& reveal : reveals) {
    absl::Status recorded =
        current_.aggregation->RevealSeed(peer_id, reveal.dropped_id, reveal.seed);
    if (recorded.code() == absl::StatusCode::kInvalidArgument) {
      return InvalidFieldError("peer_id", std::string(recorded.message()));
    }
    RETURN_IF_ERROR(recorded);
  }
  TryFinish(now_ms);
  if (current_.status.round == round) return current_.status;
  return Kept(round);
}

absl::StatusOr<GlobalModelRecord> FederatedRounds::GlobalModel(uint64_t min_round, int64_t now_ms) {
  Advance(now_ms);
  if (!global_) return absl::NotFoundError("no round finished yet");
  if (global_->round < min_round) {
    return absl::NotFoundError(absl::StrCat("the latest model is of round ", global_->round,
                                            ", older than min_round ", min_round));
  }
  return *global_;
}

}  // namespace codeco::pdlc
