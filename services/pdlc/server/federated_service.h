#pragma once
// codeco.pdlc.v1.FederatedLearningService over FederatedRounds: the
// neighborhood's aggregator PDLC serves one model's rounds. Handlers
// translate protos to the core and back; every call runs on a small bounded
// executor under one mutex (the core is not thread-safe, and its work per
// call is a vector sum or a few mask expansions).
//
// Bindings beyond the authz table: a peer acts only as itself (JoinRound,
// SubmitMaskedUpdate and RevealSeeds take a peer_id that must be the mTLS
// caller's cluster, with service "pdlc"); reads by a member need it to be in
// the neighborhood (when the members are configured).

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "codeco/common/executor.h"
#include "codeco/pdlc/v1/federated_learning.grpc.pb.h"
#include "pdlc/core/federated_round.h"

namespace codeco::pdlc {

/// The weights_format of GlobalModel.weights: little-endian IEEE float32.
inline constexpr char kFloat32LeFormat[] = "float32-le";

/// `weights` as little-endian float32 bytes.
std::string EncodeFloat32Le(const std::vector<float>& weights);
/// The weights in `bytes` (little-endian float32); INVALID_ARGUMENT naming
/// `field` for a length that is not a multiple of 4.
absl::StatusOr<std::vector<float>> DecodeFloat32Le(const std::string& bytes,
                                                   const std::string& field);

/// The gRPC face of an aggregator.
class FederatedLearningServiceImpl : public v1::FederatedLearningService::CallbackService {
 public:
  /// Serves `rounds`; `clock_ms` says the time now, Unix ms; `hub_cluster`
  /// classifies mTLS callers (ServiceConfig::hub_cluster).
  FederatedLearningServiceImpl(FederatedRounds rounds, std::function<int64_t()> clock_ms,
                               std::string hub_cluster);

  grpc::ServerUnaryReactor* JoinRound(grpc::CallbackServerContext* context,
                                      const v1::JoinRoundRequest* request,
                                      v1::JoinRoundResponse* response) override;
  grpc::ServerUnaryReactor* GetRound(grpc::CallbackServerContext* context,
                                     const v1::GetRoundRequest* request,
                                     v1::GetRoundResponse* response) override;
  grpc::ServerUnaryReactor* SubmitMaskedUpdate(grpc::CallbackServerContext* context,
                                               const v1::SubmitMaskedUpdateRequest* request,
                                               v1::SubmitMaskedUpdateResponse* response) override;
  grpc::ServerUnaryReactor* RevealSeeds(grpc::CallbackServerContext* context,
                                        const v1::RevealSeedsRequest* request,
                                        v1::RevealSeedsResponse* response) override;
  grpc::ServerUnaryReactor* GetGlobalModel(grpc::CallbackServerContext* context,
                                           const v1::GetGlobalModelRequest* request,
                                           v1::GetGlobalModelResponse* response) override;

 private:
  // NOT_FOUND naming the field when the request is not about the served model
  // and neighborhood.
  absl::Status CheckServed(const std::string& model_name, const std::string& neighborhood) const;
  // The caller must be "<peer_id>/pdlc" (any caller on a plaintext server).
  absl::Status RequireSelf(const grpc::CallbackServerContext& context, const char* method,
                           const std::string& peer_id) const;
  // A member caller must belong to the neighborhood (when members are configured).
  absl::Status RequireReader(const grpc::CallbackServerContext& context, const char* method) const;
  v1::Round ToProto(const RoundStatus& status) const;

  const FederatedRoundOptions options_;
  std::function<int64_t()> clock_ms_;
  const std::string hub_cluster_;
  absl::Mutex mu_;
  FederatedRounds rounds_ ABSL_GUARDED_BY(mu_);
  BoundedExecutor io_;
};

}  // namespace codeco::pdlc
