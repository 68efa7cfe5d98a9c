// The aggregator's round state machine (FederatedRounds) with injected time:
// a full round equals plain FedAvg, joins close early when every member is
// in, a dropped peer is unmasked from the survivors' reveals, rounds that
// cannot finish are abandoned and the next one opens, re-sends are
// idempotent, and bad or oversized inputs are refused naming the field.
//
// Weights come from a seeded generator; keys from OpenSSL's.

#include "pdlc/core/federated_round.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace codeco::pdlc {
namespace {

constexpr size_t kWeights = 64;
constexpr int64_t kT0 = 1'700'000'000'000;

struct Peer {
  std::string id;
  X25519KeyPair key;
  std::vector<float> weights;
  uint64_t samples = 0;
};

std::vector<Peer> MakePeers(const std::vector<std::string>& ids, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> weight(-2.0f, 2.0f);
  std::vector<Peer> peers;
  uint64_t samples = 100;
  for (const std::string& id : ids) {
    absl::StatusOr<X25519KeyPair> key = X25519KeyPair::Generate();
    REQUIRE(key.ok());
    Peer peer{id, *std::move(key), std::vector<float>(kWeights), samples};
    samples += 250;
    for (float& w : peer.weights) w = weight(rng);
    peers.push_back(std::move(peer));
  }
  return peers;
}

FederatedRoundOptions Options() {
  FederatedRoundOptions options;
  options.model_name = "lstm-cpu-mem";
  options.neighborhood = "nbh-1";
  options.join_window_ms = 1'000;
  options.collection_window_ms = 5'000;
  options.reveal_window_ms = 2'000;
  return options;
}

RoundSpec SpecOf(const FederatedRoundOptions& options, const RoundStatus& status) {
  return RoundSpec{{options.model_name, options.neighborhood, status.round}, status.participants};
}

std::vector<uint64_t> Masked(const RoundSpec& spec, const Peer& peer) {
  absl::StatusOr<MaskedUpdate> update =
      MakeMaskedUpdate(spec, peer.id, peer.key, peer.weights, peer.samples);
  REQUIRE(update.ok());
  return update->elements;
}

std::vector<double> FedAvg(const std::vector<const Peer*>& peers) {
  std::vector<double> sum(kWeights, 0.0);
  double total = 0;
  for (const Peer* p : peers) {
    for (size_t k = 0; k < kWeights; ++k) sum[k] += static_cast<double>(p->samples) * p->weights[k];
    total += static_cast<double>(p->samples);
  }
  for (double& v : sum) v /= total;
  return sum;
}

double MaxError(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (size_t k = 0; k < got.size(); ++k) worst = std::max(worst, std::fabs(got[k] - want[k]));
  return worst;
}

bool Contains(const absl::Status& status, const std::string& text) {
  return std::string(status.message()).find(text) != std::string::npos;
}

TEST_CASE("A round runs join then collect then finish to plain FedAvg", "[pdlc][federated]") {
  absl::StatusOr<FederatedRounds> rounds = FederatedRounds::Create(Options());
  REQUIRE(rounds.ok());
  std::vector<Peer> peers = MakePeers({"c-1", "c-2", "c-3"}, 1);

  // No window before the first join.
  rounds->Advance(kT0 + 1'000'000);
  absl::StatusOr<RoundStatus> open = rounds->Get(0, kT0);
  REQUIRE(open.ok());
  CHECK(open->round == 1);
  CHECK(open->state == RoundState::kJoining);
  CHECK(open->join_deadline_ms == 0);

  for (const Peer& p : peers) {
    absl::StatusOr<RoundStatus> joined = rounds->Join(p.id, p.key.public_key(), kWeights, kT0);
    REQUIRE(joined.ok());
    CHECK(joined->state == RoundState::kJoining);
    CHECK(joined->participants.empty());
  }
  // A re-sent join answers the same round.
  absl::StatusOr<RoundStatus> again = rounds->Join("c-1", peers[0].key.public_key(), kWeights, kT0);
  REQUIRE(again.ok());
  CHECK(again->joined_count == 3);

  // The window closes at its deadline: the spec lists everyone in id order.
  absl::StatusOr<RoundStatus> spec_status = rounds->Get(1, kT0 + 1'000);
  REQUIRE(spec_status.ok());
  REQUIRE(spec_status->state == RoundState::kCollecting);
  REQUIRE(spec_status->participants.size() == 3);
  CHECK(spec_status->participants[0].peer_id == "c-1");
  CHECK(spec_status->collect_deadline_ms == kT0 + 6'000);
  const RoundSpec spec = SpecOf(rounds->options(), *spec_status);

  // Too late to join round 1.
  CHECK(rounds->Join("c-4", std::string(kPublicKeyBytes, '\x09'), kWeights, kT0 + 1'001)
            .status()
            .code() == absl::StatusCode::kFailedPrecondition);

  for (const Peer& p : peers) {
    const std::vector<uint64_t> masked = Masked(spec, p);
    REQUIRE(rounds->Submit(1, p.id, masked, kT0 + 2'000).ok());
    if (&p == &peers[0]) {
      // A re-send is counted once; other content is refused.
      absl::StatusOr<RoundStatus> resent = rounds->Submit(1, p.id, masked, kT0 + 2'000);
      REQUIRE(resent.ok());
      CHECK(resent->submitted_count == 1);
      std::vector<uint64_t> other = masked;
      other[0] += 1;
      CHECK(rounds->Submit(1, p.id, other, kT0 + 2'000).status().code() ==
            absl::StatusCode::kAlreadyExists);
    }
  }
  // The last submission finished the round: nobody dropped, round 2 is open.
  absl::StatusOr<RoundStatus> done = rounds->Get(1, kT0 + 2'000);
  REQUIRE(done.ok());
  CHECK(done->state == RoundState::kFinished);
  CHECK(done->dropped.empty());
  CHECK(rounds->Get(0, kT0 + 2'000)->round == 2);

  absl::StatusOr<GlobalModelRecord> model = rounds->GlobalModel(1, kT0 + 2'000);
  REQUIRE(model.ok());
  CHECK(model->round == 1);
  CHECK(model->contributors == std::vector<std::string>{"c-1", "c-2", "c-3"});
  CHECK(model->total_samples == 100 + 350 + 600);
  CHECK(model->finished_ms == kT0 + 2'000);
  CHECK(MaxError(model->weights, FedAvg({&peers[0], &peers[1], &peers[2]})) < 1e-6);
  CHECK(rounds->GlobalModel(2, kT0 + 2'000).status().code() == absl::StatusCode::kNotFound);
  // A submission to the finished round is refused naming its state.
  absl::Status late = rounds->Submit(1, "c-1", Masked(spec, peers[0]), kT0 + 3'000).status();
  CHECK(late.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(Contains(late, "finished"));
}

TEST_CASE("A dropped peer does not block the round", "[pdlc][federated]") {
  FederatedRoundOptions options = Options();
  options.members = {"c-1", "c-2", "c-3", "c-4"};
  absl::StatusOr<FederatedRounds> rounds = FederatedRounds::Create(options);
  REQUIRE(rounds.ok());
  std::vector<Peer> peers = MakePeers({"c-1", "c-2", "c-3", "c-4"}, 2);
  CHECK(rounds->Join("c-9", peers[0].key.public_key(), kWeights, kT0).status().code() ==
        absl::StatusCode::kPermissionDenied);
  absl::StatusOr<RoundStatus> status;
  for (const Peer& p : peers) status = rounds->Join(p.id, p.key.public_key(), kWeights, kT0);
  // Every member joined: the spec is fixed at once.
  REQUIRE(status.ok());
  REQUIRE(status->state == RoundState::kCollecting);
  const RoundSpec spec = SpecOf(options, *status);

  // c-3 joined and went away.
  for (const Peer& p : peers) {
    if (p.id != "c-3") REQUIRE(rounds->Submit(1, p.id, Masked(spec, p), kT0 + 100).ok());
  }
  CHECK(rounds->Get(1, kT0 + 4'999)->state == RoundState::kCollecting);
  absl::StatusOr<RoundStatus> closed = rounds->Get(1, kT0 + 5'000);
  REQUIRE(closed.ok());
  REQUIRE(closed->state == RoundState::kRevealing);
  REQUIRE(closed->dropped == std::vector<std::string>{"c-3"});
  CHECK(rounds->Submit(1, "c-3", Masked(spec, peers[2]), kT0 + 5'200).status().code() ==
        absl::StatusCode::kFailedPrecondition);

  // Reveals are checked: only dropped peers, only survivors.
  absl::Status not_dropped =
      rounds->Reveal(1, "c-1", {DroppedSeed{"c-2", PairSeed{}}}, kT0 + 5'200).status();
  CHECK(not_dropped.code() == absl::StatusCode::kInvalidArgument);
  CHECK(Contains(not_dropped, "reveals[0].dropped_peer_id"));
  CHECK(rounds->Reveal(1, "c-3", {DroppedSeed{"c-3", PairSeed{}}}, kT0 + 5'200).status().code() ==
        absl::StatusCode::kInvalidArgument);

  std::vector<const Peer*> survivors;
  for (const Peer& p : peers) {
    if (p.id == "c-3") continue;
    survivors.push_back(&p);
    absl::StatusOr<std::vector<SeedReveal>> mine =
        MakeSeedReveals(spec, p.id, p.key, closed->dropped);
    REQUIRE(mine.ok());
    std::vector<DroppedSeed> reveals;
    for (const SeedReveal& r : *mine) reveals.push_back({r.dropped_id, r.seed});
    absl::StatusOr<RoundStatus> after = rounds->Reveal(1, p.id, reveals, kT0 + 5'300);
    REQUIRE(after.ok());
    if (p.id == "c-4") {
      CHECK(after->state == RoundState::kFinished);
      // Re-sent after the finish: still OK.
      CHECK(rounds->Reveal(1, p.id, reveals, kT0 + 5'400).ok());
    } else {
      CHECK(after->state == RoundState::kRevealing);
    }
  }
  absl::StatusOr<GlobalModelRecord> model = rounds->GlobalModel(0, kT0 + 5'400);
  REQUIRE(model.ok());
  CHECK(model->contributors == std::vector<std::string>{"c-1", "c-2", "c-4"});
  CHECK(MaxError(model->weights, FedAvg(survivors)) < 1e-6);
}

TEST_CASE("Rounds that cannot finish are abandoned and the next opens", "[pdlc][federated]") {
  std::vector<Peer> peers = MakePeers({"c-1", "c-2", "c-3"}, 3);
  absl::StatusOr<FederatedRounds> rounds = FederatedRounds::Create(Options());
  REQUIRE(rounds.ok());

  SECTION("too few joiners") {
    REQUIRE(rounds->Join("c-1", peers[0].key.public_key(), kWeights, kT0).ok());
    absl::StatusOr<RoundStatus> r1 = rounds->Get(1, kT0 + 1'000);
    REQUIRE(r1.ok());
    CHECK(r1->state == RoundState::kAbandoned);
    CHECK(Contains(absl::InternalError(r1->abandon_reason), "1 peer(s) joined"));
    CHECK(rounds->Get(0, kT0 + 1'000)->round == 2);
  }
  SECTION("too few survivors") {
    for (const Peer& p : peers) REQUIRE(rounds->Join(p.id, p.key.public_key(), kWeights, kT0).ok());
    absl::StatusOr<RoundStatus> collecting = rounds->Get(1, kT0 + 1'000);
    REQUIRE(collecting->state == RoundState::kCollecting);
    REQUIRE(rounds->Submit(1, "c-2", Masked(SpecOf(Options(), *collecting), peers[1]), kT0 + 1'500)
                .ok());
    absl::StatusOr<RoundStatus> r1 = rounds->Get(1, kT0 + 6'000);
    REQUIRE(r1.ok());
    CHECK(r1->state == RoundState::kAbandoned);
    CHECK(r1->dropped == std::vector<std::string>{"c-1", "c-3"});
    CHECK(Contains(absl::InternalError(r1->abandon_reason), "1 participant(s) submitted"));
  }
  SECTION("a survivor that never reveals") {
    for (const Peer& p : peers) REQUIRE(rounds->Join(p.id, p.key.public_key(), kWeights, kT0).ok());
    absl::StatusOr<RoundStatus> collecting = rounds->Get(1, kT0 + 1'000);
    const RoundSpec spec = SpecOf(Options(), *collecting);
    REQUIRE(rounds->Submit(1, "c-1", Masked(spec, peers[0]), kT0 + 1'500).ok());
    REQUIRE(rounds->Submit(1, "c-2", Masked(spec, peers[1]), kT0 + 1'500).ok());
    REQUIRE(rounds->Get(1, kT0 + 6'000)->state == RoundState::kRevealing);
    auto mine = MakeSeedReveals(spec, "c-1", peers[0].key, {"c-3"});
    REQUIRE(mine.ok());
    REQUIRE(rounds->Reveal(1, "c-1", {{"c-3", mine->front().seed}}, kT0 + 6'500).ok());
    CHECK(rounds->Get(1, kT0 + 7'999)->state == RoundState::kRevealing);
    absl::StatusOr<RoundStatus> r1 = rounds->Get(1, kT0 + 8'000);
    CHECK(r1->state == RoundState::kAbandoned);
    CHECK(Contains(absl::InternalError(r1->abandon_reason), "\"c-2\" for dropped \"c-3\""));
    CHECK(rounds->GlobalModel(0, kT0 + 8'000).status().code() == absl::StatusCode::kNotFound);
  }
  // Whatever happened to round 1, round 2 runs.
  std::vector<Peer> next = MakePeers({"c-1", "c-2"}, 4);
  const int64_t t = kT0 + 20'000;
  for (const Peer& p : next) {
    absl::StatusOr<RoundStatus> joined = rounds->Join(p.id, p.key.public_key(), kWeights, t);
    REQUIRE(joined.ok());
    CHECK(joined->round == 2);
  }
  absl::StatusOr<RoundStatus> r2 = rounds->Get(2, t + 1'000);
  REQUIRE(r2->state == RoundState::kCollecting);
  for (const Peer& p : next)
    REQUIRE(rounds->Submit(2, p.id, Masked(SpecOf(Options(), *r2), p), t + 1'000).ok());
  absl::StatusOr<GlobalModelRecord> model = rounds->GlobalModel(2, t + 1'000);
  REQUIRE(model.ok());
  CHECK(MaxError(model->weights, FedAvg({&next[0], &next[1]})) < 1e-6);
}

TEST_CASE("Bad and oversized inputs are refused naming the field", "[pdlc][federated]") {
  FederatedRoundOptions options = Options();
  options.max_participants = 2;
  options.max_weight_count = 1000;
  options.history_rounds = 2;
  absl::StatusOr<FederatedRounds> rounds = FederatedRounds::Create(options);
  REQUIRE(rounds.ok());
  const std::string key(kPublicKeyBytes, '\x05');

  absl::Status empty = rounds->Join("", key, 10, kT0).status();
  CHECK(empty.code() == absl::StatusCode::kInvalidArgument);
  CHECK(Contains(empty, "peer_id"));
  CHECK(Contains(rounds->Join(std::string(300, 'x'), key, 10, kT0).status(), "peer_id"));
  absl::Status short_key = rounds->Join("c-1", "abc", 10, kT0).status();
  CHECK(short_key.code() == absl::StatusCode::kInvalidArgument);
  CHECK(Contains(short_key, "public_key"));
  CHECK(Contains(rounds->Join("c-1", key, 0, kT0).status(), "weight_count"));
  absl::Status huge = rounds->Join("c-1", key, 1001, kT0).status();
  CHECK(huge.code() == absl::StatusCode::kInvalidArgument);
  CHECK(Contains(huge, "weight_count"));

  REQUIRE(rounds->Join("c-1", key, 10, kT0).ok());
  CHECK(rounds->Join("c-1", std::string(kPublicKeyBytes, '\x06'), 10, kT0).status().code() ==
        absl::StatusCode::kAlreadyExists);
  absl::Status mismatch =
      rounds->Join("c-2", std::string(kPublicKeyBytes, '\x06'), 11, kT0).status();
  CHECK(mismatch.code() == absl::StatusCode::kInvalidArgument);
  CHECK(Contains(mismatch, "weight_count"));
  // Full at two: the spec is fixed at once (these fake keys are fine for a spec).
  absl::StatusOr<RoundStatus> full =
      rounds->Join("c-2", std::string(kPublicKeyBytes, '\x06'), 10, kT0);
  REQUIRE(full.ok());
  CHECK(full->state == RoundState::kCollecting);
  CHECK(rounds->Join("c-3", std::string(kPublicKeyBytes, '\x07'), 10, kT0).status().code() ==
        absl::StatusCode::kFailedPrecondition);

  absl::Status short_update = rounds->Submit(1, "c-1", std::vector<uint64_t>(5), kT0).status();
  CHECK(short_update.code() == absl::StatusCode::kInvalidArgument);
  CHECK(Contains(short_update, "masked_elements"));
  CHECK(Contains(short_update, "11"));
  absl::Status stranger = rounds->Submit(1, "c-7", std::vector<uint64_t>(11), kT0).status();
  CHECK(stranger.code() == absl::StatusCode::kInvalidArgument);
  CHECK(Contains(stranger, "peer_id"));
  CHECK(rounds->Submit(9, "c-1", std::vector<uint64_t>(11), kT0).status().code() ==
        absl::StatusCode::kNotFound);
  CHECK(rounds->Reveal(1, "c-1", {}, kT0).status().code() == absl::StatusCode::kFailedPrecondition);

  // History is bounded (two rounds): after two more abandoned rounds round 1 is forgotten.
  rounds->Advance(kT0 + 10'000);  // round 1: nobody submitted
  for (int64_t r = 2; r <= 3; ++r) {
    const int64_t t = kT0 + 20'000 * r;
    REQUIRE(rounds->Join("c-1", key, 10, t).ok());
    rounds->Advance(t + 1'000);  // one joiner: abandoned
  }
  CHECK(rounds->Get(1, kT0 + 100'000).status().code() == absl::StatusCode::kNotFound);
  CHECK(rounds->Get(3, kT0 + 100'000)->state == RoundState::kAbandoned);
  CHECK(rounds->Get(5, kT0 + 100'000).status().code() == absl::StatusCode::kNotFound);

  SECTION("options are checked") {
    FederatedRoundOptions bad = Options();
    bad.model_name.clear();
    bad.join_window_ms = 0;
    bad.min_survivors = 3;  // above min_participants 2
    absl::Status s = FederatedRounds::Create(bad).status();
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK(Contains(s, "model_name"));
    CHECK(Contains(s, "join_window_ms"));
    CHECK(Contains(s, "min_participants"));
  }
}

}  // namespace
}  // namespace codeco::pdlc
