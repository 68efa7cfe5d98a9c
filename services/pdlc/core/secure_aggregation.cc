#include "pdlc/core/secure_aggregation.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codeco/common/status.h"

namespace codeco::pdlc {
namespace {

// HKDF salt: separates these seeds from any other use of the same keys.
constexpr char kHkdfSalt[] = "codeco.pdlc.secure-aggregation.v1";
// Mask elements generated per AES-CTR call.
constexpr size_t kMaskChunkElements = 4096;

struct PkeyCtxDeleter {
  void operator()(EVP_PKEY_CTX* ctx) const { EVP_PKEY_CTX_free(ctx); }
};
using PkeyCtxPtr = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxDeleter>;
struct PkeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyDeleter>;
struct CipherCtxDeleter {
  void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
};

const unsigned char* Bytes(absl::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

absl::Status OpenSslError(absl::string_view what) {
  return absl::InternalError(absl::StrCat("OpenSSL: ", what, " failed"));
}

void AppendUint64(uint64_t value, std::string* out) {
  for (int shift = 56; shift >= 0; shift -= 8) {
    out->push_back(static_cast<char>((value >> shift) & 0xff));
  }
}

// A length-prefixed field, so that no two different field lists encode alike.
void AppendField(absl::string_view field, std::string* out) {
  AppendUint64(field.size(), out);
  out->append(field.data(), field.size());
}

absl::StatusOr<std::string> Sha256(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr) != 1) {
    return OpenSslError("SHA-256");
  }
  return std::string(reinterpret_cast<const char*>(digest), length);
}

absl::StatusOr<std::string> Sha256(const std::vector<uint64_t>& elements) {
  return Sha256(absl::string_view(reinterpret_cast<const char*>(elements.data()),
                                  elements.size() * sizeof(uint64_t)));
}

// Largest magnitude one peer may encode so that the sum over
// `participant_count` peers stays within int64.
uint64_t PerPeerBound(size_t participant_count) {
  return static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) /
         std::max<uint64_t>(participant_count, 1);
}

// Adds (or subtracts) the mask keyed by `seed` to `target`, element-wise mod 2^64.
absl::Status AccumulateMask(const PairSeed& seed, bool add, std::vector<uint64_t>& target) {
  std::unique_ptr<EVP_CIPHER_CTX, CipherCtxDeleter> ctx(EVP_CIPHER_CTX_new());
  const unsigned char iv[16] = {};
  if (ctx == nullptr ||
      EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_ctr(), nullptr, seed.data(), iv) != 1) {
    return OpenSslError("AES-256-CTR init");
  }
  const std::vector<unsigned char> zeros(kMaskChunkElements * sizeof(uint64_t), 0);
  std::vector<unsigned char> stream(zeros.size());
  for (size_t start = 0; start < target.size(); start += kMaskChunkElements) {
    const size_t count = std::min(kMaskChunkElements, target.size() - start);
    int produced = 0;
    if (EVP_EncryptUpdate(ctx.get(), stream.data(), &produced, zeros.data(),
                          static_cast<int>(count * sizeof(uint64_t))) != 1 ||
        static_cast<size_t>(produced) != count * sizeof(uint64_t)) {
      return OpenSslError("AES-256-CTR");
    }
    for (size_t i = 0; i < count; ++i) {
      uint64_t value = 0;
      for (size_t b = 0; b < sizeof(uint64_t); ++b) {
        value |= static_cast<uint64_t>(stream[i * sizeof(uint64_t) + b]) << (8 * b);
      }
      if (add) {
        target[start + i] += value;
      } else {
        target[start + i] -= value;
      }
    }
  }
  OPENSSL_cleanse(stream.data(), stream.size());
  return absl::OkStatus();
}

// The participant `peer_id` of a validated spec, or INVALID_ARGUMENT naming `field`.
absl::StatusOr<const Participant*> FindParticipant(const RoundSpec& spec, absl::string_view peer_id,
                                                   absl::string_view field) {
  for (const Participant& participant : spec.participants) {
    if (participant.peer_id == peer_id) return &participant;
  }
  return InvalidFieldError(std::string(field),
                           absl::StrCat("\"", peer_id, "\" is not a participant of round ",
                                        spec.context.round, " of model \"", spec.context.model_name,
                                        "\" in neighborhood \"", spec.context.neighborhood, "\""));
}

// Checks the spec and that it lists `self_id` with `self_key`'s public key.
absl::Status CheckSelf(const RoundSpec& spec, absl::string_view self_id,
                       const X25519KeyPair& self_key) {
  RETURN_IF_ERROR(ValidateRoundSpec(spec));
  ASSIGN_OR_RETURN(const Participant* self, FindParticipant(spec, self_id, "self_id"));
  if (self->public_key != self_key.public_key()) {
    return InvalidFieldError(
        "self_key", absl::StrCat("the round lists another public key for \"", self_id, "\""));
  }
  return absl::OkStatus();
}

}  // namespace

void X25519KeyPair::KeyDeleter::operator()(evp_pkey_st* key) const { EVP_PKEY_free(key); }

X25519KeyPair::X25519KeyPair(std::unique_ptr<evp_pkey_st, KeyDeleter> key, std::string public_key)
    : key_(std::move(key)), public_key_(std::move(public_key)) {}
X25519KeyPair::X25519KeyPair(X25519KeyPair&& other) noexcept = default;
X25519KeyPair& X25519KeyPair::operator=(X25519KeyPair&& other) noexcept = default;
X25519KeyPair::~X25519KeyPair() = default;

absl::StatusOr<X25519KeyPair> X25519KeyPair::Generate() {
  PkeyCtxPtr ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, nullptr));
  EVP_PKEY* raw_key = nullptr;
  if (ctx == nullptr || EVP_PKEY_keygen_init(ctx.get()) != 1 ||
      EVP_PKEY_keygen(ctx.get(), &raw_key) != 1) {
    return OpenSslError("X25519 key generation");
  }
  std::unique_ptr<evp_pkey_st, KeyDeleter> key(raw_key);
  std::string public_key(kPublicKeyBytes, '\0');
  size_t length = public_key.size();
  if (EVP_PKEY_get_raw_public_key(key.get(), reinterpret_cast<unsigned char*>(public_key.data()),
                                  &length) != 1 ||
      length != kPublicKeyBytes) {
    return OpenSslError("reading the X25519 public key");
  }
  return X25519KeyPair(std::move(key), std::move(public_key));
}

absl::StatusOr<PairSeed> X25519KeyPair::DeriveSeed(const RoundContext& context,
                                                   absl::string_view self_id,
                                                   absl::string_view peer_id,
                                                   absl::string_view peer_public_key) const {
  if (key_ == nullptr) return absl::FailedPreconditionError("key pair was moved from");
  if (self_id.empty()) return InvalidFieldError("self_id", "must not be empty");
  if (peer_id.empty()) return InvalidFieldError("peer_id", "must not be empty");
  if (self_id == peer_id) {
    return InvalidFieldError("peer_id", absl::StrCat("\"", peer_id, "\" is the deriving peer"));
  }
  if (peer_public_key.size() != kPublicKeyBytes) {
    return InvalidFieldError("peer_public_key",
                             absl::StrCat("an X25519 public key has ", kPublicKeyBytes,
                                          " bytes, got ", peer_public_key.size()));
  }
  PkeyPtr peer(EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, Bytes(peer_public_key),
                                           peer_public_key.size()));
  if (peer == nullptr) {
    return InvalidFieldError("peer_public_key", "not an X25519 public key");
  }

  // X25519 shared secret. OpenSSL refuses a low-order peer point (the all-zero output).
  unsigned char secret[32];
  size_t secret_length = sizeof(secret);
  PkeyCtxPtr dh(EVP_PKEY_CTX_new(key_.get(), nullptr));
  if (dh == nullptr || EVP_PKEY_derive_init(dh.get()) != 1) return OpenSslError("X25519 init");
  if (EVP_PKEY_derive_set_peer(dh.get(), peer.get()) != 1 ||
      EVP_PKEY_derive(dh.get(), secret, &secret_length) != 1 || secret_length != sizeof(secret)) {
    OPENSSL_cleanse(secret, sizeof(secret));
    return InvalidFieldError("peer_public_key",
                             "X25519 with it gives no shared secret (a low-order point)");
  }
  const unsigned char zero[sizeof(secret)] = {};
  if (CRYPTO_memcmp(secret, zero, sizeof(secret)) == 0) {
    return InvalidFieldError("peer_public_key", "X25519 with it gives the all-zero secret");
  }

  // HKDF info: SHA-256 of the round context and both (id, public key) in id
  // order, hashed because OpenSSL caps the info at 1024 bytes.
  const bool self_first = self_id < peer_id;
  std::string binding;
  AppendField(context.model_name, &binding);
  AppendField(context.neighborhood, &binding);
  AppendUint64(context.round, &binding);
  AppendField(self_first ? self_id : peer_id, &binding);
  AppendField(self_first ? absl::string_view(public_key_) : peer_public_key, &binding);
  AppendField(self_first ? peer_id : self_id, &binding);
  AppendField(self_first ? peer_public_key : absl::string_view(public_key_), &binding);
  absl::StatusOr<std::string> info = Sha256(binding);
  if (!info.ok()) {
    OPENSSL_cleanse(secret, sizeof(secret));
    return info.status();
  }

  PairSeed seed{};
  size_t seed_length = seed.size();
  PkeyCtxPtr kdf(EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr));
  const bool derived =
      kdf != nullptr && EVP_PKEY_derive_init(kdf.get()) == 1 &&
      EVP_PKEY_CTX_set_hkdf_md(kdf.get(), EVP_sha256()) == 1 &&
      EVP_PKEY_CTX_set1_hkdf_salt(kdf.get(), reinterpret_cast<const unsigned char*>(kHkdfSalt),
                                  static_cast<int>(sizeof(kHkdfSalt) - 1)) == 1 &&
      EVP_PKEY_CTX_set1_hkdf_key(kdf.get(), secret, static_cast<int>(sizeof(secret))) == 1 &&
      EVP_PKEY_CTX_add1_hkdf_info(kdf.get(), Bytes(*info), static_cast<int>(info->size())) == 1 &&
      EVP_PKEY_derive(kdf.get(), seed.data(), &seed_length) == 1 && seed_length == seed.size();
  OPENSSL_cleanse(secret, sizeof(secret));
  if (!derived) return OpenSslError("HKDF-SHA256");
  return seed;
}

absl::Status ValidateRoundSpec(const RoundSpec& spec) {
  FieldErrors errors;
  if (spec.context.model_name.empty()) errors.Add("context.model_name", "must not be empty");
  if (spec.context.neighborhood.empty()) errors.Add("context.neighborhood", "must not be empty");
  if (spec.participants.size() < 2) {
    errors.Add("participants", absl::StrCat("a round needs at least 2 participants, got ",
                                            spec.participants.size()));
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < spec.participants.size(); ++i) {
    const Participant& participant = spec.participants[i];
    const std::string path = absl::StrCat("participants[", i, "]");
    if (participant.peer_id.empty()) {
      errors.Add(path + ".peer_id", "must not be empty");
    } else if (!seen.insert(participant.peer_id).second) {
      errors.Add(path + ".peer_id", absl::StrCat("\"", participant.peer_id, "\" is listed twice"));
    }
    if (participant.public_key.size() != kPublicKeyBytes) {
      errors.Add(path + ".public_key", absl::StrCat("an X25519 public key has ", kPublicKeyBytes,
                                                    " bytes, got ", participant.public_key.size()));
    }
  }
  return errors.ToStatus();
}

absl::StatusOr<std::vector<uint64_t>> ExpandMask(const PairSeed& seed, size_t length) {
  std::vector<uint64_t> mask(length, 0);
  RETURN_IF_ERROR(AccumulateMask(seed, /*add=*/true, mask));
  return mask;
}

absl::StatusOr<std::vector<uint64_t>> EncodeWeightedUpdate(const std::vector<float>& weights,
                                                           uint64_t sample_count,
                                                           size_t participant_count) {
  const uint64_t bound = PerPeerBound(participant_count);
  if (sample_count >= bound) {
    return InvalidFieldError(
        "sample_count", absl::StrCat(sample_count, " is outside the fixed-point range (< ", bound,
                                     " for ", participant_count, " participants)"));
  }
  // `scaled` is an integer-valued double; scaled < double(bound) implies
  // scaled < bound (doubles below double(bound) are at least one ulp below it).
  const double limit = static_cast<double>(bound);
  const double scale = std::ldexp(1.0, kFixedPointFractionBits);
  std::vector<uint64_t> encoded(weights.size() + 1);
  for (size_t k = 0; k < weights.size(); ++k) {
    const double weighted = static_cast<double>(sample_count) * static_cast<double>(weights[k]);
    const double scaled = std::round(weighted * scale);
    if (!std::isfinite(weights[k]) || !(std::fabs(scaled) < limit)) {
      return InvalidFieldError(
          absl::StrCat("weights[", k, "]"),
          absl::StrCat("sample_count * weight = ", sample_count, " * ", weights[k], " = ", weighted,
                       " is outside the fixed-point range (|x| < ", limit / scale, " for ",
                       participant_count, " participants)"));
    }
    encoded[k] = static_cast<uint64_t>(static_cast<int64_t>(scaled));
  }
  encoded.back() = sample_count;
  return encoded;
}

double DecodeFixedPoint(uint64_t element) {
  return std::ldexp(static_cast<double>(static_cast<int64_t>(element)), -kFixedPointFractionBits);
}

absl::StatusOr<MaskedUpdate> MakeMaskedUpdate(const RoundSpec& spec, absl::string_view self_id,
                                              const X25519KeyPair& self_key,
                                              const std::vector<float>& weights,
                                              uint64_t sample_count) {
  RETURN_IF_ERROR(CheckSelf(spec, self_id, self_key));
  if (weights.empty()) return InvalidFieldError("weights", "must not be empty");
  MaskedUpdate update;
  update.peer_id = std::string(self_id);
  ASSIGN_OR_RETURN(update.elements,
                   EncodeWeightedUpdate(weights, sample_count, spec.participants.size()));
  for (const Participant& other : spec.participants) {
    if (other.peer_id == self_id) continue;
    ASSIGN_OR_RETURN(PairSeed seed,
                     self_key.DeriveSeed(spec.context, self_id, other.peer_id, other.public_key));
    // +mask towards larger ids, -mask towards smaller ones: each pair cancels.
    absl::Status masked = AccumulateMask(seed, self_id < other.peer_id, update.elements);
    OPENSSL_cleanse(seed.data(), seed.size());
    RETURN_IF_ERROR(masked);
  }
  return update;
}

absl::StatusOr<std::vector<SeedReveal>> MakeSeedReveals(const RoundSpec& spec,
                                                        absl::string_view self_id,
                                                        const X25519KeyPair& self_key,
                                                        const std::vector<std::string>& dropped) {
  RETURN_IF_ERROR(CheckSelf(spec, self_id, self_key));
  std::vector<SeedReveal> reveals;
  reveals.reserve(dropped.size());
  for (size_t i = 0; i < dropped.size(); ++i) {
    const std::string field = absl::StrCat("dropped[", i, "]");
    if (dropped[i] == self_id) {
      return InvalidFieldError(field, absl::StrCat("\"", self_id,
                                                   "\" is the revealing peer; it reveals nothing "
                                                   "once reported dropped"));
    }
    ASSIGN_OR_RETURN(const Participant* peer, FindParticipant(spec, dropped[i], field));
    SeedReveal reveal;
    reveal.survivor_id = std::string(self_id);
    reveal.dropped_id = dropped[i];
    ASSIGN_OR_RETURN(reveal.seed,
                     self_key.DeriveSeed(spec.context, self_id, peer->peer_id, peer->public_key));
    reveals.push_back(std::move(reveal));
  }
  return reveals;
}

SecureAggregationRound::SecureAggregationRound(RoundSpec spec, size_t weight_count,
                                               SecureAggregationOptions options)
    : spec_(std::move(spec)),
      length_(weight_count + 1),
      options_(options),
      sum_(weight_count + 1, 0) {}

absl::StatusOr<SecureAggregationRound> SecureAggregationRound::Create(
    RoundSpec spec, size_t weight_count, SecureAggregationOptions options) {
  RETURN_IF_ERROR(ValidateRoundSpec(spec));
  if (weight_count == 0) return InvalidFieldError("weight_count", "must be at least 1");
  if (options.min_survivors < 2) {
    return InvalidFieldError("options.min_survivors",
                             "must be at least 2: one survivor's sum is its own update");
  }
  if (options.min_survivors > spec.participants.size()) {
    return InvalidFieldError("options.min_survivors",
                             absl::StrCat(options.min_survivors, " exceeds the ",
                                          spec.participants.size(), " participants"));
  }
  return SecureAggregationRound(std::move(spec), weight_count, options);
}

absl::Status SecureAggregationRound::Submit(const std::string& peer_id,
                                            const std::vector<uint64_t>& masked) {
  if (closed_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "round ", spec_.context.round, " is closed; \"", peer_id, "\" submitted too late"));
  }
  RETURN_IF_ERROR(FindParticipant(spec_, peer_id, "peer_id").status());
  if (masked.size() != length_) {
    return InvalidFieldError(
        "masked", absl::StrCat("has ", masked.size(), " elements, the round expects ", length_,
                               " (weights + sample count)"));
  }
  ASSIGN_OR_RETURN(std::string digest, Sha256(masked));
  auto [it, inserted] = digests_.emplace(peer_id, digest);
  if (!inserted) {
    if (it->second == digest) return absl::OkStatus();
    return absl::AlreadyExistsError(
        absl::StrCat("\"", peer_id, "\" already submitted a different update this round"));
  }
  for (size_t i = 0; i < length_; ++i) sum_[i] += masked[i];
  return absl::OkStatus();
}

std::vector<std::string> SecureAggregationRound::Close() {
  if (!closed_) {
    closed_ = true;
    for (const Participant& participant : spec_.participants) {
      if (!digests_.contains(participant.peer_id)) dropped_.push_back(participant.peer_id);
    }
    std::sort(dropped_.begin(), dropped_.end());
  }
  return dropped_;
}

absl::Status SecureAggregationRound::RevealSeed(const std::string& survivor_id,
                                                const std::string& dropped_id,
                                                const PairSeed& seed) {
  if (!closed_) {
    return absl::FailedPreconditionError(
        "seeds are revealed only after Close has reported the dropped peers");
  }
  if (!digests_.contains(survivor_id)) {
    return InvalidFieldError(
        "survivor_id",
        absl::StrCat("\"", survivor_id, "\" is not a survivor of round ", spec_.context.round));
  }
  if (!std::binary_search(dropped_.begin(), dropped_.end(), dropped_id)) {
    return InvalidFieldError(
        "dropped_id",
        absl::StrCat("\"", dropped_id, "\" did not drop out of round ", spec_.context.round));
  }
  auto [it, inserted] = reveals_.emplace(std::make_pair(survivor_id, dropped_id), seed);
  if (!inserted && CRYPTO_memcmp(it->second.data(), seed.data(), seed.size()) != 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        "\"", survivor_id, "\" already revealed a different seed for \"", dropped_id, "\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<AggregateResult> SecureAggregationRound::Finish() const {
  if (!closed_) return absl::FailedPreconditionError("Finish before Close");
  AggregateResult result;
  for (const auto& [peer_id, digest] : digests_) result.survivors.push_back(peer_id);
  result.dropped = dropped_;
  if (result.survivors.size() < options_.min_survivors) {
    return absl::FailedPreconditionError(
        absl::StrCat("round ", spec_.context.round, " has ", result.survivors.size(),
                     " survivors (", absl::StrJoin(result.survivors, ", "), "), fewer than the ",
                     options_.min_survivors, " needed"));
  }
  std::vector<std::string> missing;
  for (const std::string& survivor : result.survivors) {
    for (const std::string& dropped : dropped_) {
      if (!reveals_.contains(std::make_pair(survivor, dropped))) {
        missing.push_back(absl::StrCat("\"", survivor, "\" for dropped \"", dropped, "\""));
      }
    }
  }
  if (!missing.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("missing seed reveals: ", absl::StrJoin(missing, ", ")));
  }

  std::vector<uint64_t> sum = sum_;
  for (const auto& [pair, seed] : reveals_) {
    // The survivor added +mask when its id is smaller: take it back out.
    RETURN_IF_ERROR(AccumulateMask(seed, /*add=*/!(pair.first < pair.second), sum));
  }
  const uint64_t total = sum.back();
  if (total == 0) {
    return absl::FailedPreconditionError("the survivors' sample counts sum to 0");
  }
  if (total > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return absl::DataLossError(
        absl::StrCat("the unmasked sample count is out of range (", total,
                     "): a revealed seed or a submitted update does not match the round"));
  }
  result.total_samples = total;
  result.weights.resize(length_ - 1);
  for (size_t k = 0; k + 1 < length_; ++k) {
    result.weights[k] = static_cast<float>(DecodeFixedPoint(sum[k]) / static_cast<double>(total));
  }
  return result;
}

}  // namespace codeco::pdlc
