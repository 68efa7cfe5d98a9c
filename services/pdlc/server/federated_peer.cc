#include "pdlc/server/federated_peer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codeco/common/call_deadline.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/logging.h"
#include "codeco/common/status.h"
#include "pdlc/core/secure_aggregation.h"
#include "pdlc/server/federated_service.h"

namespace codeco::pdlc {
namespace {

bool Transient(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
}

}  // namespace

SharedWeightsForecaster::SharedWeightsForecaster(std::unique_ptr<UsageForecaster> model,
                                                 Access access)
    : model_(std::move(model)), access_(std::move(access)) {}

std::string SharedWeightsForecaster::name() const {
  absl::ReaderMutexLock lock(&mu_);
  return model_->name();
}

size_t SharedWeightsForecaster::window() const {
  absl::ReaderMutexLock lock(&mu_);
  return model_->window();
}

absl::Status SharedWeightsForecaster::Train(const std::vector<UsageSeries>& history) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(model_->Train(history));
  fresh_samples_ = access_.trained_samples();
  return absl::OkStatus();
}

std::vector<UsageForecast> SharedWeightsForecaster::Predict(
    const std::vector<ForecastOrigin>& origins) const {
  absl::ReaderMutexLock lock(&mu_);
  return model_->Predict(origins);
}

absl::StatusOr<LocalWeights> SharedWeightsForecaster::Snapshot() {
  absl::ReaderMutexLock lock(&mu_);
  if (fresh_samples_ == 0) {
    return absl::FailedPreconditionError("no local training since the last global model");
  }
  return LocalWeights{access_.weights(), fresh_samples_};
}

absl::Status SharedWeightsForecaster::Apply(const std::vector<float>& weights, uint64_t /*round*/) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(access_.set_weights(weights));
  fresh_samples_ = 0;
  return absl::OkStatus();
}

FederatedPeer::FederatedPeer(std::shared_ptr<grpc::Channel> channel, WeightsSource& source,
                             FederatedPeerOptions options)
    : stub_(v1::FederatedLearningService::NewStub(std::move(channel))),
      source_(source),
      options_(std::move(options)) {}

void FederatedPeer::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
}

bool FederatedPeer::Wait(absl::Time deadline) {
  const absl::Time until = std::min(deadline, absl::Now() + options_.poll_interval);
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(&cancelled_), until);
  return !cancelled_ && absl::Now() < deadline;
}

std::unique_ptr<grpc::ClientContext> FederatedPeer::Context(absl::Time deadline) const {
  return OutgoingContext(options_.call_timeout, deadline);
}

absl::StatusOr<v1::Round> FederatedPeer::WaitWhile(uint64_t round, v1::RoundState state,
                                                   absl::Time deadline) {
  v1::GetRoundRequest request;
  request.set_model_name(options_.model_name);
  request.set_neighborhood_id(options_.neighborhood);
  request.set_round(static_cast<int64_t>(round));
  for (;;) {
    v1::GetRoundResponse response;
    grpc::Status status = stub_->GetRound(Context(deadline).get(), request, &response);
    if (status.ok() && response.round().state() != state) return response.round();
    if (!status.ok() && !Transient(status)) return FromGrpcStatus(status);
    if (!Wait(deadline)) {
      return absl::DeadlineExceededError(
          absl::StrCat("round ", round, " still ", v1::RoundState_Name(state)));
    }
  }
}

absl::StatusOr<PeerRoundResult> FederatedPeer::RunRound(absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return absl::CancelledError("peer stopped");
  }
  ASSIGN_OR_RETURN(LocalWeights local, source_.Snapshot());
  ASSIGN_OR_RETURN(X25519KeyPair key, X25519KeyPair::Generate());

  // Join the open round; while another round is in progress, wait for it.
  v1::JoinRoundRequest join;
  join.set_model_name(options_.model_name);
  join.set_neighborhood_id(options_.neighborhood);
  join.set_peer_id(options_.peer_id);
  join.set_public_key(key.public_key());
  join.set_weight_count(static_cast<int64_t>(local.weights.size()));
  v1::Round round;
  for (;;) {
    v1::JoinRoundResponse response;
    grpc::Status status = stub_->JoinRound(Context(deadline).get(), join, &response);
    if (status.ok()) {
      round = response.round();
      break;
    }
    // FAILED_PRECONDITION: a round without us is in progress; ALREADY_EXISTS:
    // one we joined in an earlier, timed-out run is. Either way, wait for it.
    if (status.error_code() != grpc::StatusCode::FAILED_PRECONDITION &&
        status.error_code() != grpc::StatusCode::ALREADY_EXISTS && !Transient(status)) {
      return FromGrpcStatus(status);
    }
    if (!Wait(deadline)) return absl::DeadlineExceededError("could not join a round");
  }
  PeerRoundResult result;
  result.round = static_cast<uint64_t>(round.round());
  auto finish = [&](const v1::Round& r) {
    result.state = r.state();
    result.abandon_reason = r.abandon_reason();
    return result;
  };
  if (round.state() == v1::ROUND_STATE_JOINING) {
    ASSIGN_OR_RETURN(round, WaitWhile(result.round, v1::ROUND_STATE_JOINING, deadline));
  }
  if (round.state() != v1::ROUND_STATE_COLLECTING) return finish(round);

  // The spec: everyone's key. Mask and submit.
  RoundSpec spec;
  spec.context = {options_.model_name, options_.neighborhood, result.round};
  for (const v1::RoundParticipant& p : round.participants()) {
    spec.participants.push_back({p.peer_id(), p.public_key()});
  }
  ASSIGN_OR_RETURN(MaskedUpdate update, MakeMaskedUpdate(spec, options_.peer_id, key, local.weights,
                                                         local.sample_count));
  v1::SubmitMaskedUpdateRequest submit;
  submit.set_model_name(options_.model_name);
  submit.set_neighborhood_id(options_.neighborhood);
  submit.set_round(static_cast<int64_t>(result.round));
  submit.set_peer_id(options_.peer_id);
  submit.mutable_masked_elements()->Assign(update.elements.begin(), update.elements.end());
  update.elements = {};
  for (;;) {
    v1::SubmitMaskedUpdateResponse response;
    grpc::Status status = stub_->SubmitMaskedUpdate(Context(deadline).get(), submit, &response);
    if (status.ok()) {
      round = response.round();
      break;
    }
    if (!Transient(status)) return FromGrpcStatus(status);
    if (!Wait(deadline)) return absl::DeadlineExceededError("could not submit the masked update");
  }
  if (round.state() == v1::ROUND_STATE_COLLECTING) {
    ASSIGN_OR_RETURN(round, WaitWhile(result.round, v1::ROUND_STATE_COLLECTING, deadline));
  }

  // Reveal our seeds with the peers that dropped.
  if (round.state() == v1::ROUND_STATE_REVEALING) {
    const std::vector<std::string> dropped(round.dropped_peer_ids().begin(),
                                           round.dropped_peer_ids().end());
    if (std::find(dropped.begin(), dropped.end(), options_.peer_id) != dropped.end()) {
      return finish(round);  // our update came too late: nothing to reveal
    }
    ASSIGN_OR_RETURN(std::vector<SeedReveal> seeds,
                     MakeSeedReveals(spec, options_.peer_id, key, dropped));
    v1::RevealSeedsRequest reveal;
    reveal.set_model_name(options_.model_name);
    reveal.set_neighborhood_id(options_.neighborhood);
    reveal.set_round(static_cast<int64_t>(result.round));
    reveal.set_peer_id(options_.peer_id);
    for (const SeedReveal& s : seeds) {
      v1::SeedReveal* r = reveal.add_reveals();
      r->set_dropped_peer_id(s.dropped_id);
      r->set_seed(std::string(s.seed.begin(), s.seed.end()));
    }
    for (;;) {
      v1::RevealSeedsResponse response;
      grpc::Status status = stub_->RevealSeeds(Context(deadline).get(), reveal, &response);
      if (status.ok()) {
        round = response.round();
        break;
      }
      if (!Transient(status)) return FromGrpcStatus(status);
      if (!Wait(deadline)) return absl::DeadlineExceededError("could not reveal seeds");
    }
    if (round.state() == v1::ROUND_STATE_REVEALING) {
      ASSIGN_OR_RETURN(round, WaitWhile(result.round, v1::ROUND_STATE_REVEALING, deadline));
    }
  }
  if (round.state() != v1::ROUND_STATE_FINISHED) return finish(round);

  // Fetch and apply the round's model.
  v1::GetGlobalModelRequest get;
  get.set_model_name(options_.model_name);
  get.set_neighborhood_id(options_.neighborhood);
  get.set_min_round(static_cast<int64_t>(result.round));
  v1::GetGlobalModelResponse model;
  for (;;) {
    grpc::Status status = stub_->GetGlobalModel(Context(deadline).get(), get, &model);
    if (status.ok()) break;
    if (!Transient(status)) return FromGrpcStatus(status);
    if (!Wait(deadline)) return absl::DeadlineExceededError("could not fetch the global model");
  }
  if (model.model().weights_format() != kFloat32LeFormat) {
    return absl::InvalidArgumentError(absl::StrCat("model.weights_format: \"",
                                                   model.model().weights_format(), "\" is not ",
                                                   kFloat32LeFormat));
  }
  ASSIGN_OR_RETURN(std::vector<float> weights,
                   DecodeFloat32Le(model.model().weights(), "model.weights"));
  RETURN_IF_ERROR(source_.Apply(weights, static_cast<uint64_t>(model.model().round())));
  result.applied = true;
  result.contributors.assign(model.model().contributing_clusters().begin(),
                             model.model().contributing_clusters().end());
  return finish(round);
}

FederatedPeerLoop::FederatedPeerLoop(std::unique_ptr<FederatedPeer> peer, absl::Duration interval)
    : peer_(std::move(peer)), interval_(interval) {
  thread_ = std::thread([this] { Run(); });
}

FederatedPeerLoop::~FederatedPeerLoop() { Stop(); }

void FederatedPeerLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  peer_->Cancel();
  if (thread_.joinable()) thread_.join();
}

void FederatedPeerLoop::Run() {
  const int64_t interval_ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(interval_));
  // The next multiple of the interval after `t`.
  auto next_start = [interval_ms](absl::Time t) {
    return absl::FromUnixMillis((absl::ToUnixMillis(t) / interval_ms + 1) * interval_ms);
  };
  absl::Time start = next_start(absl::Now());
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithDeadline(absl::Condition(&stopping_), start);
      if (stopping_) return;
    }
    const absl::Time next = next_start(start);
    absl::StatusOr<PeerRoundResult> result = peer_->RunRound(next);
    // The next start, skipping one a round overran.
    start = std::max(next, next_start(absl::Now()));
    if (!result.ok()) {
      if (result.status().code() == absl::StatusCode::kFailedPrecondition) {
        log::Info("pdlc federation: no round this time",
                  {{"reason", std::string(result.status().message())}});
      } else {
        log::Warn("pdlc federation: round failed",
                  {{"error", std::string(result.status().message())}});
      }
      continue;
    }
    log::Info("pdlc federation: round over",
              {{"round", absl::StrCat(result->round)},
               {"state", v1::RoundState_Name(result->state)},
               {"applied", result->applied ? "true" : "false"},
               {"contributors", absl::StrCat(result->contributors.size())},
               {"abandon_reason", result->abandon_reason}});
  }
}

}  // namespace codeco::pdlc
