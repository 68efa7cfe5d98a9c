#include "pdlc/server/federated_service.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codeco/common/authz.h"
#include "codeco/common/serve_on_executor.h"
#include "codeco/common/status.h"
#include "google/protobuf/util/time_util.h"

namespace codeco::pdlc {
namespace {

using google::protobuf::util::TimeUtil;

v1::RoundState ToProto(RoundState state) {
  switch (state) {
    case RoundState::kJoining:
      return v1::ROUND_STATE_JOINING;
    case RoundState::kCollecting:
      return v1::ROUND_STATE_COLLECTING;
    case RoundState::kRevealing:
      return v1::ROUND_STATE_REVEALING;
    case RoundState::kFinished:
      return v1::ROUND_STATE_FINISHED;
    case RoundState::kAbandoned:
      return v1::ROUND_STATE_ABANDONED;
  }
  return v1::ROUND_STATE_UNSPECIFIED;
}

absl::StatusOr<uint64_t> RoundNumber(int64_t round, const char* field) {
  if (round < 0) return InvalidFieldError(field, "must not be negative");
  return static_cast<uint64_t>(round);
}

}  // namespace

std::string EncodeFloat32Le(const std::vector<float>& weights) {
  std::string out(weights.size() * 4, '\0');
  for (size_t k = 0; k < weights.size(); ++k) {
    uint32_t bits;
    std::memcpy(&bits, &weights[k], 4);
    for (int b = 0; b < 4; ++b) out[k * 4 + b] = static_cast<char>((bits >> (8 * b)) & 0xff);
  }
  return out;
}

absl::StatusOr<std::vector<float>> DecodeFloat32Le(const std::string& bytes,
                                                   const std::string& field) {
  if (bytes.size() % 4 != 0) {
    return InvalidFieldError(field,
                             absl::StrCat(bytes.size(), " bytes is not a whole number of float32"));
  }
  std::vector<float> out(bytes.size() / 4);
  for (size_t k = 0; k < out.size(); ++k) {
    uint32_t bits = 0;
    for (int b = 0; b < 4; ++b) {
      bits |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[k * 4 + b])) << (8 * b);
    }
    std::memcpy(&out[k], &bits, 4);
  }
  return out;
}

FederatedLearningServiceImpl::FederatedLearningServiceImpl(FederatedRounds rounds,
                                                           std::function<int64_t()> clock_ms,
                                                           std::string hub_cluster)
    : options_(rounds.options()),
      clock_ms_(std::move(clock_ms)),
      hub_cluster_(std::move(hub_cluster)),
      rounds_(std::move(rounds)),
      io_(2, 256) {}

absl::Status FederatedLearningServiceImpl::CheckServed(const std::string& model_name,
                                                       const std::string& neighborhood) const {
  if (model_name != options_.model_name) {
    return absl::NotFoundError(absl::StrCat(
        "model_name: \"", model_name, "\" is not trained here (\"", options_.model_name, "\" is)"));
  }
  if (neighborhood != options_.neighborhood) {
    return absl::NotFoundError(absl::StrCat("neighborhood_id: this aggregator serves \"",
                                            options_.neighborhood, "\", not \"", neighborhood,
                                            "\""));
  }
  return absl::OkStatus();
}

absl::Status FederatedLearningServiceImpl::RequireSelf(const grpc::CallbackServerContext& context,
                                                       const char* method,
                                                       const std::string& peer_id) const {
  ASSIGN_OR_RETURN(Caller caller, CallerOf(context, hub_cluster_));
  if (caller.plaintext) return absl::OkStatus();
  if (caller.identity.service == "pdlc" && caller.identity.cluster == peer_id) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(method, ": ", caller.Describe(),
                                                  " may act only as its own cluster's pdlc, but "
                                                  "peer_id is \"",
                                                  peer_id, "\""));
}

absl::Status FederatedLearningServiceImpl::RequireReader(const grpc::CallbackServerContext& context,
                                                         const char* method) const {
  if (options_.members.empty()) return absl::OkStatus();
  return RequireNeighborhoodMember(context, hub_cluster_, method, options_.neighborhood,
                                   options_.members);
}

v1::Round FederatedLearningServiceImpl::ToProto(const RoundStatus& status) const {
  v1::Round out;
  out.set_model_name(options_.model_name);
  out.set_neighborhood_id(options_.neighborhood);
  out.set_round(static_cast<int64_t>(status.round));
  out.set_state(pdlc::ToProto(status.state));
  out.set_weight_count(static_cast<int64_t>(status.weight_count));
  for (const Participant& p : status.participants) {
    v1::RoundParticipant* participant = out.add_participants();
    participant->set_peer_id(p.peer_id);
    participant->set_public_key(p.public_key);
  }
  out.set_joined_count(static_cast<int32_t>(status.joined_count));
  out.set_submitted_count(static_cast<int32_t>(status.submitted_count));
  for (const std::string& d : status.dropped) out.add_dropped_peer_ids(d);
  if (status.join_deadline_ms) {
    *out.mutable_join_deadline() = TimeUtil::MillisecondsToTimestamp(status.join_deadline_ms);
  }
  if (status.collect_deadline_ms) {
    *out.mutable_collect_deadline() = TimeUtil::MillisecondsToTimestamp(status.collect_deadline_ms);
  }
  if (status.reveal_deadline_ms) {
    *out.mutable_reveal_deadline() = TimeUtil::MillisecondsToTimestamp(status.reveal_deadline_ms);
  }
  out.set_abandon_reason(status.abandon_reason);
  return out;
}

grpc::ServerUnaryReactor* FederatedLearningServiceImpl::JoinRound(
    grpc::CallbackServerContext* context, const v1::JoinRoundRequest* request,
    v1::JoinRoundResponse* response) {
  return ServeOnExecutor(io_, context, [=, this](absl::Time) -> absl::Status {
    RETURN_IF_ERROR(RequireSelf(*context, "JoinRound", request->peer_id()));
    RETURN_IF_ERROR(CheckServed(request->model_name(), request->neighborhood_id()));
    if (request->weight_count() < 0)
      return InvalidFieldError("weight_count", "must not be negative");
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(RoundStatus status,
                     rounds_.Join(request->peer_id(), request->public_key(),
                                  static_cast<size_t>(request->weight_count()), clock_ms_()));
    *response->mutable_round() = ToProto(status);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* FederatedLearningServiceImpl::GetRound(
    grpc::CallbackServerContext* context, const v1::GetRoundRequest* request,
    v1::GetRoundResponse* response) {
  return ServeOnExecutor(io_, context, [=, this](absl::Time) -> absl::Status {
    RETURN_IF_ERROR(RequireReader(*context, "GetRound"));
    RETURN_IF_ERROR(CheckServed(request->model_name(), request->neighborhood_id()));
    ASSIGN_OR_RETURN(uint64_t round, RoundNumber(request->round(), "round"));
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(RoundStatus status, rounds_.Get(round, clock_ms_()));
    *response->mutable_round() = ToProto(status);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* FederatedLearningServiceImpl::SubmitMaskedUpdate(
    grpc::CallbackServerContext* context, const v1::SubmitMaskedUpdateRequest* request,
    v1::SubmitMaskedUpdateResponse* response) {
  return ServeOnExecutor(io_, context, [=, this](absl::Time) -> absl::Status {
    RETURN_IF_ERROR(RequireSelf(*context, "SubmitMaskedUpdate", request->peer_id()));
    RETURN_IF_ERROR(CheckServed(request->model_name(), request->neighborhood_id()));
    ASSIGN_OR_RETURN(uint64_t round, RoundNumber(request->round(), "round"));
    if (round == 0) return InvalidFieldError("round", "must be given");
    const std::vector<uint64_t> masked(request->masked_elements().begin(),
                                       request->masked_elements().end());
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(RoundStatus status,
                     rounds_.Submit(round, request->peer_id(), masked, clock_ms_()));
    *response->mutable_round() = ToProto(status);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* FederatedLearningServiceImpl::RevealSeeds(
    grpc::CallbackServerContext* context, const v1::RevealSeedsRequest* request,
    v1::RevealSeedsResponse* response) {
  return ServeOnExecutor(io_, context, [=, this](absl::Time) -> absl::Status {
    RETURN_IF_ERROR(RequireSelf(*context, "RevealSeeds", request->peer_id()));
    RETURN_IF_ERROR(CheckServed(request->model_name(), request->neighborhood_id()));
    ASSIGN_OR_RETURN(uint64_t round, RoundNumber(request->round(), "round"));
    if (round == 0) return InvalidFieldError("round", "must be given");
    if (request->reveals_size() > static_cast<int>(options_.max_participants)) {
      return InvalidFieldError("reveals", absl::StrCat("at most ", options_.max_participants));
    }
    std::vector<DroppedSeed> reveals;
    for (int i = 0; i < request->reveals_size(); ++i) {
      const v1::SeedReveal& r = request->reveals(i);
      if (r.seed().size() != kPairSeedBytes) {
        return InvalidFieldError(
            absl::StrCat("reveals[", i, "].seed"),
            absl::StrCat("must be ", kPairSeedBytes, " bytes, got ", r.seed().size()));
      }
      DroppedSeed seed{r.dropped_peer_id(), {}};
      std::memcpy(seed.seed.data(), r.seed().data(), kPairSeedBytes);
      reveals.push_back(std::move(seed));
    }
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(RoundStatus status,
                     rounds_.Reveal(round, request->peer_id(), reveals, clock_ms_()));
    *response->mutable_round() = ToProto(status);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* FederatedLearningServiceImpl::GetGlobalModel(
    grpc::CallbackServerContext* context, const v1::GetGlobalModelRequest* request,
    v1::GetGlobalModelResponse* response) {
  return ServeOnExecutor(io_, context, [=, this](absl::Time) -> absl::Status {
    RETURN_IF_ERROR(RequireReader(*context, "GetGlobalModel"));
    RETURN_IF_ERROR(CheckServed(request->model_name(), request->neighborhood_id()));
    ASSIGN_OR_RETURN(uint64_t min_round, RoundNumber(request->min_round(), "min_round"));
    GlobalModelRecord record;
    {
      absl::MutexLock lock(&mu_);
      ASSIGN_OR_RETURN(record, rounds_.GlobalModel(min_round, clock_ms_()));
    }
    v1::GlobalModel* model = response->mutable_model();
    model->set_name(options_.model_name);
    model->set_neighborhood_id(options_.neighborhood);
    model->set_round(static_cast<int64_t>(record.round));
    model->set_weights(EncodeFloat32Le(record.weights));
    model->set_weights_format(kFloat32LeFormat);
    model->set_sample_count(static_cast<int64_t>(record.total_samples));
    for (const std::string& c : record.contributors) model->add_contributing_clusters(c);
    *model->mutable_update_time() = TimeUtil::MillisecondsToTimestamp(record.finished_ms);
    return absl::OkStatus();
  });
}

}  // namespace codeco::pdlc
