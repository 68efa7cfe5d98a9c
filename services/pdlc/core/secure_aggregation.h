#pragma once
// Secure aggregation of PDLC's federated training (FedAvg over a
// neighborhood): the aggregator learns the weighted sum of the peers'
// updates, never one peer's update. A simplified form of pairwise additive
// masking from Bonawitz et al., "Practical Secure Aggregation for
// Privacy-Preserving Machine Learning" (CCS 2017). Pure logic: no sockets;
// the messages are plain structs a server layer maps onto its wire format.
//
// One round:
//  1. Every participant makes an X25519 key pair for the round
//     (X25519KeyPair::Generate) and publishes its public key; the round's
//     RoundSpec lists every participant's id and public key.
//  2. Each pair of participants (i, j) shares a 32-byte seed s_ij, which
//     both derive on their own side: X25519 between one's private key and
//     the other's public key, then HKDF-SHA256 bound to the model name, the
//     neighborhood, the round and both (id, public key) in id order.
//  3. Each peer encodes sample_count * w (and sample_count itself as one
//     extra element) as fixed-point integers mod 2^64, then for every other
//     participant j adds PRG(s_ij) when its id is smaller than j's and
//     subtracts it otherwise (MakeMaskedUpdate). Summed over all
//     participants the masks cancel exactly.
//  4. The aggregator (SecureAggregationRound) sums the masked vectors it
//     receives. When it closes collection, the participants that did not
//     submit are dropped: their masks are still in the survivors' vectors.
//     Every survivor reveals its seed with every dropped peer (MakeSeedReveals,
//     RevealSeed) and the aggregator removes those masks (Finish), leaving
//     sum(n_i * w_i) and sum(n_i) over the survivors, hence the FedAvg result.
//
// What the aggregator learns: the survivors' sums sum(n_i * w_i) and
// sum(n_i), and who submitted. A single masked vector is uniformly
// distributed mod 2^64 for an aggregator that knows fewer than all of the
// sender's pair seeds, so it says nothing about that peer's update.
//
// Limits of this simplified scheme (read them before relying on it):
//  - No secret sharing of keys: the full protocol has every peer
//    Shamir-share its key so that t of n peers can rebuild a dropped peer's
//    masks. Here every survivor reveals its own pair seed with each dropped
//    peer, so the round needs a reveal from every survivor for every
//    dropped peer; a survivor that also goes away after Close blocks Finish
//    (the round must then be abandoned and run again).
//  - No self masks (the full protocol's b_i): a peer whose update arrives
//    after Close is refused rather than recovered, because once its seeds
//    are revealed its update would be readable from its masked vector.
//  - Honest-but-curious aggregator only: an aggregator that lies about who
//    dropped can ask the survivors for their seeds with a peer that did
//    submit and unmask that peer's update. Peers cannot check the claim
//    here (the full protocol adds consistency checks and signatures).
//  - The aggregator cannot verify a revealed seed (it has no private key):
//    a wrong seed silently corrupts the result; a peer can likewise submit
//    garbage. There is no authentication of public keys or messages; the
//    layer that distributes the RoundSpec must authenticate the peers.
//  - Collusion: peers that hand their seeds to the aggregator let it
//    remove their own masks only; it still learns just the sum of the
//    other survivors' updates, which is one peer's update when only one
//    honest survivor is left (inherent to releasing a sum; min_survivors
//    bounds it only for a non-colluding aggregator).
//
// Fixed point: values are scaled by 2^kFixedPointFractionBits and rounded,
// so each peer's n * w is off by at most 2^-(kFixedPointFractionBits + 1).
// So that the sum over a round's P participants cannot wrap, each encoded
// element must be below (2^63 - 1) / P in magnitude; a peer whose
// n * w is outside that range is refused with the offending index.

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

// OpenSSL's EVP_PKEY, declared here so that users of this header do not
// include OpenSSL.
struct evp_pkey_st;

namespace codeco::pdlc {

/// Bytes of an X25519 public key.
inline constexpr size_t kPublicKeyBytes = 32;
/// Bytes of a pair seed.
inline constexpr size_t kPairSeedBytes = 32;
/// Fractional bits of the fixed-point encoding: values are multiplied by
/// 2^24 before rounding (resolution about 6e-8).
inline constexpr int kFixedPointFractionBits = 24;

/// The secret two participants share in one round, keying their mask.
using PairSeed = std::array<uint8_t, kPairSeedBytes>;

/// What identifies a round; bound into every pair seed, so seeds (and
/// masks) of different rounds, neighborhoods or models are unrelated.
struct RoundContext {
  /// The model being trained, e.g. "lstm-cpu-mem".
  std::string model_name;
  /// The neighborhood whose peers train it together.
  std::string neighborhood;
  /// The round number (a new key pair per round).
  uint64_t round = 0;
};

/// One participant of a round as every peer and the aggregator see it.
struct Participant {
  /// The peer's id; ids are ordered bytewise (std::string's operator<).
  std::string peer_id;
  /// Its X25519 public key for this round, kPublicKeyBytes raw bytes.
  std::string public_key;
};

/// A round: its context and everyone taking part. Peers and the aggregator
/// must be given the same spec (the list's order does not matter).
struct RoundSpec {
  /// Model, neighborhood and round number.
  RoundContext context;
  /// Every participant, ids distinct, at least two.
  std::vector<Participant> participants;
};

/// The message a peer sends the aggregator: its masked update.
struct MaskedUpdate {
  /// The sender.
  std::string peer_id;
  /// weight_count + 1 ring elements (mod 2^64): the masked fixed-point
  /// encodings of sample_count * w[k], then of sample_count.
  std::vector<uint64_t> elements;
};

/// The message a survivor sends after Close: its seed with a dropped peer.
struct SeedReveal {
  /// The survivor revealing the seed.
  std::string survivor_id;
  /// The dropped peer the seed is shared with.
  std::string dropped_id;
  /// The pair's seed.
  PairSeed seed{};
};

/// A participant's X25519 key pair for one round. Move-only; the private
/// key never leaves it.
class X25519KeyPair {
 public:
  /// A fresh key pair from OpenSSL's random generator. INTERNAL if OpenSSL fails.
  static absl::StatusOr<X25519KeyPair> Generate();

  /// Takes over `other`'s key; `other` is left empty.
  X25519KeyPair(X25519KeyPair&& other) noexcept;
  /// Takes over `other`'s key, freeing this one's.
  X25519KeyPair& operator=(X25519KeyPair&& other) noexcept;
  /// Frees the key (OpenSSL clears the private key's memory).
  ~X25519KeyPair();

  /// The public key, kPublicKeyBytes raw bytes, to publish in the RoundSpec.
  const std::string& public_key() const { return public_key_; }

  /// The seed this participant (`self_id`, owning this key pair) shares with
  /// `peer_id` whose public key is `peer_public_key`, in the round
  /// `context`. The peer, deriving with its own private key and this pair's
  /// public key, gets the same seed. INVALID_ARGUMENT for an empty or equal
  /// id, or a malformed public key (wrong length or a low-order point).
  absl::StatusOr<PairSeed> DeriveSeed(const RoundContext& context, absl::string_view self_id,
                                      absl::string_view peer_id,
                                      absl::string_view peer_public_key) const;

 private:
  struct KeyDeleter {
    void operator()(evp_pkey_st* key) const;
  };
  X25519KeyPair(std::unique_ptr<evp_pkey_st, KeyDeleter> key, std::string public_key);

  std::unique_ptr<evp_pkey_st, KeyDeleter> key_;
  std::string public_key_;
};

/// Checks a spec: non-empty model name and neighborhood, at least two
/// participants, ids non-empty and distinct, public keys kPublicKeyBytes
/// long. INVALID_ARGUMENT naming the field, e.g. "participants[2].public_key".
absl::Status ValidateRoundSpec(const RoundSpec& spec);

/// The mask of a pair: `length` pseudo-random ring elements, AES-256-CTR
/// keyed by `seed` (zero IV) over zero bytes, read as little-endian uint64.
/// Deterministic: the same seed and length give the same vector.
absl::StatusOr<std::vector<uint64_t>> ExpandMask(const PairSeed& seed, size_t length);

/// The fixed-point encoding of one peer's contribution: element k is
/// round(sample_count * weights[k] * 2^kFixedPointFractionBits) in two's
/// complement, and a last element holds sample_count (unscaled).
/// `participant_count` (>= 1) sets the range: an encoded magnitude must be
/// below (2^63 - 1) / participant_count. INVALID_ARGUMENT naming
/// "weights[k]" for a value out of range or not finite, or "sample_count".
absl::StatusOr<std::vector<uint64_t>> EncodeWeightedUpdate(const std::vector<float>& weights,
                                                           uint64_t sample_count,
                                                           size_t participant_count);

/// A ring element read as a signed fixed-point number (two's complement,
/// divided by 2^kFixedPointFractionBits).
double DecodeFixedPoint(uint64_t element);

/// Peer side: `self_id`'s masked update for the round `spec`, from its key
/// pair, its weights and its sample count (the FedAvg weight). The spec must
/// list `self_id` with `self_key`'s public key. INVALID_ARGUMENT for a bad
/// spec, an unlisted peer, a key mismatch or a weight out of range (naming
/// the index).
absl::StatusOr<MaskedUpdate> MakeMaskedUpdate(const RoundSpec& spec, absl::string_view self_id,
                                              const X25519KeyPair& self_key,
                                              const std::vector<float>& weights,
                                              uint64_t sample_count);

/// Survivor side, after the aggregator reported `dropped`: the seeds
/// `self_id` shares with each of them. INVALID_ARGUMENT when a dropped id is
/// not a participant, or is `self_id` (a peer that is told it dropped
/// reveals nothing).
absl::StatusOr<std::vector<SeedReveal>> MakeSeedReveals(const RoundSpec& spec,
                                                        absl::string_view self_id,
                                                        const X25519KeyPair& self_key,
                                                        const std::vector<std::string>& dropped);

/// Settings of a SecureAggregationRound.
struct SecureAggregationOptions {
  /// Fewest survivors Finish accepts. Default 2; at least 2, since the sum
  /// of a single survivor is its update.
  size_t min_survivors = 2;
};

/// The outcome of a round.
struct AggregateResult {
  /// The FedAvg model: sum(n_i * w_i) / sum(n_i) over the survivors.
  std::vector<float> weights;
  /// sum(n_i) over the survivors.
  uint64_t total_samples = 0;
  /// The peers whose updates are in the result, in id order.
  std::vector<std::string> survivors;
  /// The peers that did not submit, in id order.
  std::vector<std::string> dropped;
};

/// Aggregator side of one round: collects masked updates, then seed reveals
/// for the peers that dropped, then unmasks the survivors' sum. Holds the
/// running sum and a digest per submission, not the submissions. Not
/// thread-safe: the server layer serializes calls.
class SecureAggregationRound {
 public:
  /// A round over `spec` for models of `weight_count` (>= 1) weights, so
  /// masked updates have weight_count + 1 elements. INVALID_ARGUMENT for a
  /// bad spec, weight_count 0, options.min_survivors below 2 or above the
  /// participant count.
  static absl::StatusOr<SecureAggregationRound> Create(RoundSpec spec, size_t weight_count,
                                                       SecureAggregationOptions options = {});

  /// Adds `peer_id`'s masked update. INVALID_ARGUMENT for a peer not in the
  /// spec or a vector of the wrong length; ALREADY_EXISTS if the peer
  /// already submitted different content (the same content again is OK and
  /// counted once); FAILED_PRECONDITION after Close.
  absl::Status Submit(const std::string& peer_id, const std::vector<uint64_t>& masked);

  /// Ends collection and returns the dropped peers (participants that did
  /// not submit), in id order. Calling it again returns the same list.
  std::vector<std::string> Close();

  /// Records `survivor_id`'s seed with `dropped_id`. FAILED_PRECONDITION
  /// before Close; INVALID_ARGUMENT if `survivor_id` is not a survivor or
  /// `dropped_id` not dropped; ALREADY_EXISTS for a second, different seed
  /// for the same pair (the same seed again is OK).
  absl::Status RevealSeed(const std::string& survivor_id, const std::string& dropped_id,
                          const PairSeed& seed);

  /// The FedAvg result over the survivors. FAILED_PRECONDITION before
  /// Close, with fewer than min_survivors survivors, when reveals are
  /// missing (naming every missing survivor/dropped pair), or when the
  /// survivors' sample counts sum to 0.
  absl::StatusOr<AggregateResult> Finish() const;

  /// True once Close was called.
  bool closed() const { return closed_; }
  /// Peers whose update was accepted so far.
  size_t submitted_count() const { return digests_.size(); }
  /// The round's spec.
  const RoundSpec& spec() const { return spec_; }

 private:
  SecureAggregationRound(RoundSpec spec, size_t weight_count, SecureAggregationOptions options);

  RoundSpec spec_;
  size_t length_;  // weight_count + 1
  SecureAggregationOptions options_;
  std::vector<uint64_t> sum_;                   // running sum mod 2^64
  std::map<std::string, std::string> digests_;  // submitter -> SHA-256 of its vector
  bool closed_ = false;
  std::vector<std::string> dropped_;  // set by Close, id order
  // (survivor, dropped) -> the survivor's seed with the dropped peer.
  std::map<std::pair<std::string, std::string>, PairSeed> reveals_;
};

}  // namespace codeco::pdlc
