// Secure aggregation of PDLC's federated training: the masked sum equals
// plain FedAvg, a single masked update says nothing about the update,
// dropouts are unmasked from the survivors' seeds, seeds agree on both sides
// of a pair, and bad submissions, reveals and weights are refused.
//
// Weights and sample counts come from seeded generators; the X25519 keys
// (hence the masks) come from OpenSSL's generator, so only the statistical
// test depends on them, with a bound far out in the tail (see there).

#include "pdlc/core/secure_aggregation.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace codeco::pdlc {
namespace {

struct Peer {
  std::string id;
  X25519KeyPair key;
  std::vector<float> weights;
  uint64_t samples = 0;
};

struct Federation {
  RoundSpec spec;
  std::vector<Peer> peers;  // in id order
};

// `count` peers "peer-a", "peer-b", ... with `weight_count` weights in
// [-1, 1] and 1..5000 samples each; the spec lists them in reverse order so
// that nothing depends on the list's order.
Federation MakeFederation(size_t count, size_t weight_count, uint32_t rng_seed,
                          const std::string& neighborhood = "nbh-1", uint64_t round = 7) {
  std::mt19937_64 rng(rng_seed);
  std::uniform_real_distribution<float> weight(-1.0f, 1.0f);
  std::uniform_int_distribution<uint64_t> samples(1, 5000);
  Federation federation;
  federation.spec.context = {"lstm-cpu-mem", neighborhood, round};
  for (size_t i = 0; i < count; ++i) {
    absl::StatusOr<X25519KeyPair> key = X25519KeyPair::Generate();
    REQUIRE(key.ok());
    Peer peer{std::string("peer-") + static_cast<char>('a' + i), std::move(*key), {}, samples(rng)};
    peer.weights.resize(weight_count);
    for (float& w : peer.weights) w = weight(rng);
    federation.peers.push_back(std::move(peer));
  }
  for (auto it = federation.peers.rbegin(); it != federation.peers.rend(); ++it) {
    federation.spec.participants.push_back({it->id, it->key.public_key()});
  }
  return federation;
}

MaskedUpdate Mask(const Federation& federation, const Peer& peer) {
  absl::StatusOr<MaskedUpdate> update =
      MakeMaskedUpdate(federation.spec, peer.id, peer.key, peer.weights, peer.samples);
  REQUIRE(update.ok());
  return *std::move(update);
}

// Plain FedAvg of `peers`, in double.
std::vector<double> PlainFedAvg(const std::vector<const Peer*>& peers, uint64_t* total) {
  std::vector<double> sum(peers.front()->weights.size(), 0.0);
  *total = 0;
  for (const Peer* peer : peers) {
    for (size_t k = 0; k < sum.size(); ++k) {
      sum[k] += static_cast<double>(peer->samples) * peer->weights[k];
    }
    *total += peer->samples;
  }
  for (double& v : sum) v /= static_cast<double>(*total);
  return sum;
}

double MaxAbsError(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (size_t k = 0; k < got.size(); ++k) {
    worst = std::max(worst, std::fabs(static_cast<double>(got[k]) - want[k]));
  }
  return worst;
}

double Pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double mean_x = 0, mean_y = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    mean_x += x[i] / n;
    mean_y += y[i] / n;
  }
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mean_x) * (y[i] - mean_y);
    sxx += (x[i] - mean_x) * (x[i] - mean_x);
    syy += (y[i] - mean_y) * (y[i] - mean_y);
  }
  return sxy / std::sqrt(sxx * syy);
}

double Rms(const std::vector<double>& x) {
  double sum = 0;
  for (double v : x) sum += v * v;
  return std::sqrt(sum / static_cast<double>(x.size()));
}

bool Contains(const absl::Status& status, const std::string& text) {
  return std::string(status.message()).find(text) != std::string::npos;
}

TEST_CASE("Secure aggregation of five peers equals plain FedAvg", "[pdlc][secagg]") {
  constexpr size_t kWeights = 20000;
  const Federation federation = MakeFederation(5, kWeights, 11);
  absl::StatusOr<SecureAggregationRound> round =
      SecureAggregationRound::Create(federation.spec, kWeights);
  REQUIRE(round.ok());
  std::vector<const Peer*> all;
  for (const Peer& peer : federation.peers) {
    const MaskedUpdate update = Mask(federation, peer);
    REQUIRE(update.elements.size() == kWeights + 1);
    REQUIRE(round->Submit(update.peer_id, update.elements).ok());
    all.push_back(&peer);
  }
  CHECK(round->Close().empty());
  absl::StatusOr<AggregateResult> result = round->Finish();
  REQUIRE(result.ok());

  uint64_t total = 0;
  const std::vector<double> want = PlainFedAvg(all, &total);
  CHECK(result->total_samples == total);
  CHECK(result->dropped.empty());
  CHECK(result->survivors ==
        std::vector<std::string>{"peer-a", "peer-b", "peer-c", "peer-d", "peer-e"});
  CHECK(MaxAbsError(result->weights, want) < 1e-6);
}

TEST_CASE("A masked update is uncorrelated with the peer's update", "[pdlc][secagg]") {
  constexpr size_t kWeights = 20000;
  const Federation federation = MakeFederation(5, kWeights, 12);
  const Peer& peer = federation.peers[2];
  const MaskedUpdate update = Mask(federation, peer);

  // What the aggregator sees, decoded as if it were a plain encoding, next to
  // what it must not learn (n * w, and w).
  std::vector<double> seen(kWeights), weighted(kWeights), weights(kWeights);
  for (size_t k = 0; k < kWeights; ++k) {
    seen[k] = DecodeFixedPoint(update.elements[k]);
    weighted[k] = static_cast<double>(peer.samples) * peer.weights[k];
    weights[k] = peer.weights[k];
  }
  // The masked elements are uniform mod 2^64 and independent of the update,
  // so the sample correlation over n = 20000 pairs is about N(0, 1/n):
  // standard deviation 1/sqrt(20000) = 0.0071. 0.05 is 7 standard deviations,
  // a chance below 1e-11 of failing by accident, while any leak of the update
  // into the masked vector of even 5% of its variance would show.
  CHECK(std::fabs(Pearson(seen, weighted)) < 0.05);
  CHECK(std::fabs(Pearson(seen, weights)) < 0.05);
  // Uniform over the ring, the decoded values have an RMS near
  // 2^63 / 2^24 / sqrt(3) = 3e11; the update's is below 5000.
  CHECK(Rms(seen) > 1e6 * Rms(weighted));
  // The sample count element is masked too.
  CHECK(update.elements.back() != peer.samples);
}

TEST_CASE("A peer dropping out is unmasked from the survivors' seeds", "[pdlc][secagg]") {
  constexpr size_t kWeights = 5000;
  const Federation federation = MakeFederation(5, kWeights, 13);
  absl::StatusOr<SecureAggregationRound> round =
      SecureAggregationRound::Create(federation.spec, kWeights);
  REQUIRE(round.ok());
  // peer-c (the middle id: survivors on both sides) computes its update but
  // drops out before sending it.
  const MaskedUpdate late = Mask(federation, federation.peers[2]);
  std::vector<const Peer*> survivors;
  for (const Peer& peer : federation.peers) {
    if (peer.id == "peer-c") continue;
    REQUIRE(round->Submit(peer.id, Mask(federation, peer).elements).ok());
    survivors.push_back(&peer);
  }
  CHECK(round->RevealSeed("peer-a", "peer-c", PairSeed{}).code() ==
        absl::StatusCode::kFailedPrecondition);

  const std::vector<std::string> dropped = round->Close();
  REQUIRE(dropped == std::vector<std::string>{"peer-c"});
  CHECK(round->Close() == dropped);
  // Too late now: its seeds are about to be revealed.
  CHECK(round->Submit("peer-c", late.elements).code() == absl::StatusCode::kFailedPrecondition);

  absl::StatusOr<AggregateResult> early = round->Finish();
  REQUIRE(early.status().code() == absl::StatusCode::kFailedPrecondition);
  for (const char* survivor : {"peer-a", "peer-b", "peer-d", "peer-e"}) {
    CHECK(Contains(early.status(), std::string("\"") + survivor + "\" for dropped \"peer-c\""));
  }

  std::vector<SeedReveal> reveals;
  for (const Peer* peer : survivors) {
    absl::StatusOr<std::vector<SeedReveal>> mine =
        MakeSeedReveals(federation.spec, peer->id, peer->key, dropped);
    REQUIRE(mine.ok());
    REQUIRE(mine->size() == 1);
    reveals.push_back(mine->front());
  }
  // All but peer-d's reveal: Finish names exactly that pair.
  for (const SeedReveal& reveal : reveals) {
    if (reveal.survivor_id == "peer-d") continue;
    REQUIRE(round->RevealSeed(reveal.survivor_id, reveal.dropped_id, reveal.seed).ok());
  }
  absl::StatusOr<AggregateResult> missing = round->Finish();
  REQUIRE(missing.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(Contains(missing.status(), "\"peer-d\" for dropped \"peer-c\""));
  CHECK_FALSE(Contains(missing.status(), "\"peer-a\""));

  // Reveals are checked: only survivors, only for dropped peers, one seed per pair.
  const SeedReveal& from_d = reveals[2];
  REQUIRE(from_d.survivor_id == "peer-d");
  CHECK(round->RevealSeed("peer-c", "peer-c", from_d.seed).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(round->RevealSeed("peer-d", "peer-a", from_d.seed).code() ==
        absl::StatusCode::kInvalidArgument);
  PairSeed wrong = reveals[0].seed;
  wrong[0] ^= 1;
  CHECK(round->RevealSeed(reveals[0].survivor_id, "peer-c", wrong).code() ==
        absl::StatusCode::kAlreadyExists);
  CHECK(round->RevealSeed(reveals[0].survivor_id, "peer-c", reveals[0].seed).ok());
  CHECK(MakeSeedReveals(federation.spec, "peer-c", federation.peers[2].key, dropped)
            .status()
            .code() == absl::StatusCode::kInvalidArgument);

  REQUIRE(round->RevealSeed(from_d.survivor_id, from_d.dropped_id, from_d.seed).ok());
  absl::StatusOr<AggregateResult> result = round->Finish();
  REQUIRE(result.ok());
  uint64_t total = 0;
  const std::vector<double> want = PlainFedAvg(survivors, &total);
  CHECK(result->total_samples == total);
  CHECK(result->dropped == dropped);
  CHECK(result->survivors == std::vector<std::string>{"peer-a", "peer-b", "peer-d", "peer-e"});
  CHECK(MaxAbsError(result->weights, want) < 1e-6);
}

TEST_CASE("Too few survivors fail the round", "[pdlc][secagg]") {
  constexpr size_t kWeights = 100;
  SECTION("one survivor of three under the default minimum") {
    const Federation federation = MakeFederation(3, kWeights, 14);
    absl::StatusOr<SecureAggregationRound> round =
        SecureAggregationRound::Create(federation.spec, kWeights);
    REQUIRE(round.ok());
    REQUIRE(round->Submit("peer-b", Mask(federation, federation.peers[1]).elements).ok());
    CHECK(round->Close() == std::vector<std::string>{"peer-a", "peer-c"});
    absl::StatusOr<AggregateResult> result = round->Finish();
    CHECK(result.status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK(Contains(result.status(), "fewer than the 2"));
  }
  SECTION("three survivors of five under a minimum of four") {
    const Federation federation = MakeFederation(5, kWeights, 15);
    absl::StatusOr<SecureAggregationRound> round = SecureAggregationRound::Create(
        federation.spec, kWeights, SecureAggregationOptions{.min_survivors = 4});
    REQUIRE(round.ok());
    for (size_t i = 0; i < 3; ++i) {
      const Peer& peer = federation.peers[i];
      REQUIRE(round->Submit(peer.id, Mask(federation, peer).elements).ok());
    }
    CHECK(round->Close().size() == 2);
    CHECK(round->Finish().status().code() == absl::StatusCode::kFailedPrecondition);
  }
  SECTION("Finish before Close") {
    const Federation federation = MakeFederation(2, kWeights, 16);
    absl::StatusOr<SecureAggregationRound> round =
        SecureAggregationRound::Create(federation.spec, kWeights);
    REQUIRE(round.ok());
    CHECK(round->Finish().status().code() == absl::StatusCode::kFailedPrecondition);
  }
  SECTION("a minimum below two or above the participants is refused") {
    const Federation federation = MakeFederation(3, kWeights, 17);
    CHECK(SecureAggregationRound::Create(federation.spec, kWeights, {.min_survivors = 1})
              .status()
              .code() == absl::StatusCode::kInvalidArgument);
    CHECK(SecureAggregationRound::Create(federation.spec, kWeights, {.min_survivors = 4})
              .status()
              .code() == absl::StatusCode::kInvalidArgument);
  }
}

TEST_CASE("Both sides of a pair derive the same seed", "[pdlc][secagg]") {
  absl::StatusOr<X25519KeyPair> a = X25519KeyPair::Generate();
  absl::StatusOr<X25519KeyPair> b = X25519KeyPair::Generate();
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(a->public_key().size() == kPublicKeyBytes);
  CHECK(a->public_key() != b->public_key());
  const RoundContext context{"lstm-cpu-mem", "nbh-1", 3};

  absl::StatusOr<PairSeed> ab = a->DeriveSeed(context, "node-a", "node-b", b->public_key());
  absl::StatusOr<PairSeed> ba = b->DeriveSeed(context, "node-b", "node-a", a->public_key());
  REQUIRE(ab.ok());
  REQUIRE(ba.ok());
  CHECK(*ab == *ba);
  CHECK(*a->DeriveSeed(context, "node-a", "node-b", b->public_key()) == *ab);

  RoundContext next_round = context;
  next_round.round = 4;
  RoundContext other_neighborhood = context;
  other_neighborhood.neighborhood = "nbh-2";
  RoundContext other_model = context;
  other_model.model_name = "lstm-net";
  for (const RoundContext& other : {next_round, other_neighborhood, other_model}) {
    absl::StatusOr<PairSeed> seed = a->DeriveSeed(other, "node-a", "node-b", b->public_key());
    REQUIRE(seed.ok());
    CHECK(*seed != *ab);
  }
  // The ids are bound too: the same keys under other names give another seed.
  CHECK(*a->DeriveSeed(context, "node-x", "node-b", b->public_key()) != *ab);

  // The masks: deterministic per seed, different across seeds.
  absl::StatusOr<std::vector<uint64_t>> mask = ExpandMask(*ab, 10000);
  REQUIRE(mask.ok());
  CHECK(*ExpandMask(*ab, 10000) == *mask);
  CHECK(*ExpandMask(*ab, 10) == std::vector<uint64_t>(mask->begin(), mask->begin() + 10));
  PairSeed other_seed = *ab;
  other_seed[31] ^= 0x80;
  CHECK(*ExpandMask(other_seed, 10000) != *mask);

  SECTION("malformed public keys are refused") {
    absl::StatusOr<PairSeed> short_key =
        a->DeriveSeed(context, "node-a", "node-b", b->public_key().substr(0, 31));
    CHECK(short_key.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(Contains(short_key.status(), "peer_public_key"));
    CHECK(Contains(short_key.status(), "got 31"));
    // The all-zero point has low order: X25519 with it gives no secret.
    absl::StatusOr<PairSeed> low_order =
        a->DeriveSeed(context, "node-a", "node-b", std::string(kPublicKeyBytes, '\0'));
    CHECK(low_order.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(Contains(low_order.status(), "peer_public_key"));
    CHECK(a->DeriveSeed(context, "node-a", "node-a", b->public_key()).status().code() ==
          absl::StatusCode::kInvalidArgument);
  }
}

TEST_CASE("Submissions are checked", "[pdlc][secagg]") {
  constexpr size_t kWeights = 1000;
  const Federation federation = MakeFederation(3, kWeights, 18);
  absl::StatusOr<SecureAggregationRound> round =
      SecureAggregationRound::Create(federation.spec, kWeights);
  REQUIRE(round.ok());
  const MaskedUpdate a = Mask(federation, federation.peers[0]);
  const MaskedUpdate b = Mask(federation, federation.peers[1]);
  const MaskedUpdate c = Mask(federation, federation.peers[2]);

  absl::Status unknown = round->Submit("peer-z", a.elements);
  CHECK(unknown.code() == absl::StatusCode::kInvalidArgument);
  CHECK(Contains(unknown, "peer-z"));
  std::vector<uint64_t> short_vector(a.elements.begin(), a.elements.end() - 1);
  absl::Status wrong_length = round->Submit("peer-a", short_vector);
  CHECK(wrong_length.code() == absl::StatusCode::kInvalidArgument);
  CHECK(Contains(wrong_length, "1001"));
  CHECK(round->submitted_count() == 0);

  REQUIRE(round->Submit("peer-a", a.elements).ok());
  CHECK(round->Submit("peer-a", a.elements).ok());  // a retry: counted once
  CHECK(round->submitted_count() == 1);
  CHECK(round->Submit("peer-a", b.elements).code() == absl::StatusCode::kAlreadyExists);
  REQUIRE(round->Submit("peer-b", b.elements).ok());
  REQUIRE(round->Submit("peer-c", c.elements).ok());
  CHECK(round->Close().empty());

  absl::StatusOr<AggregateResult> result = round->Finish();
  REQUIRE(result.ok());
  uint64_t total = 0;
  const std::vector<double> want =
      PlainFedAvg({&federation.peers[0], &federation.peers[1], &federation.peers[2]}, &total);
  CHECK(result->total_samples == total);
  CHECK(MaxAbsError(result->weights, want) < 1e-6);

  SECTION("a spec listing a peer twice is refused") {
    RoundSpec twice = federation.spec;
    twice.participants[1].peer_id = twice.participants[0].peer_id;
    absl::StatusOr<SecureAggregationRound> bad = SecureAggregationRound::Create(twice, kWeights);
    CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(Contains(bad.status(), "participants[1].peer_id"));
  }
  SECTION("a peer whose key the spec does not list is refused") {
    absl::StatusOr<MaskedUpdate> mismatch =
        MakeMaskedUpdate(federation.spec, "peer-a", federation.peers[1].key,
                         federation.peers[0].weights, federation.peers[0].samples);
    CHECK(mismatch.status().code() == absl::StatusCode::kInvalidArgument);
  }
}

TEST_CASE("Weights outside the fixed-point range are refused with their index", "[pdlc][secagg]") {
  const Federation federation = MakeFederation(3, 16, 19);
  const Peer& peer = federation.peers[0];

  std::vector<float> huge = peer.weights;
  huge[7] = 1e12f;
  absl::StatusOr<MaskedUpdate> too_large =
      MakeMaskedUpdate(federation.spec, peer.id, peer.key, huge, 10);
  CHECK(too_large.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(Contains(too_large.status(), "weights[7]"));

  std::vector<float> not_finite = peer.weights;
  not_finite[3] = std::nanf("");
  absl::StatusOr<MaskedUpdate> nan =
      MakeMaskedUpdate(federation.spec, peer.id, peer.key, not_finite, 10);
  CHECK(nan.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(Contains(nan.status(), "weights[3]"));

  // The range shrinks with the participant count, so that the sum cannot wrap:
  // 2^63 / 2^24 = 2^39 = 5.5e11 for one peer, a tenth of it for ten.
  const std::vector<float> large = {1.0f, -1e11f};
  CHECK(EncodeWeightedUpdate(large, 1, 1).ok());
  absl::StatusOr<std::vector<uint64_t>> crowded = EncodeWeightedUpdate(large, 1, 10);
  CHECK(crowded.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(Contains(crowded.status(), "weights[1]"));

  CHECK(EncodeWeightedUpdate({1.0f}, uint64_t{1} << 62, 3).status().code() ==
        absl::StatusCode::kInvalidArgument);

  // The encoding round-trips within half a step of 2^-24.
  absl::StatusOr<std::vector<uint64_t>> encoded = EncodeWeightedUpdate({0.25f, -3.5f}, 3, 5);
  REQUIRE(encoded.ok());
  CHECK(DecodeFixedPoint((*encoded)[0]) == 0.75);
  CHECK(DecodeFixedPoint((*encoded)[1]) == -10.5);
  CHECK((*encoded)[2] == 3);
}

}  // namespace
}  // namespace codeco::pdlc
