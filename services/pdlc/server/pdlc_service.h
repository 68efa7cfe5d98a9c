#pragma once
// codeco.pdlc.v1.PdlcService over the advisor and the telemetry store:
// IngestMetrics appends to the store, GetRecommendation and ListForecasts
// read the advisor, WatchRecommendations streams the built-in profiles'
// recommendations after every refresh (SWM's recommendation port). The
// auction (SubmitBid) and GetOperation are not served yet: they answer
// UNIMPLEMENTED with the service's note. Federated training rounds are
// another service (federated_service.h).

#include <atomic>
#include <functional>

#include "codeco/common/executor.h"
#include "codeco/pdlc/v1/pdlc_service.grpc.pb.h"
#include "pdlc/core/advisor.h"
#include "pdlc/core/telemetry.h"

namespace codeco::pdlc {

/// The Recommendation message for `result`. Forecast intervals are the
/// central 80 % of each forecast's Laplace spread (none without a spread).
v1::Recommendation ToProto(const RecommendationResult& result);

/// The index of kHorizonSteps for `horizon_ns`: the shortest horizon at least
/// that far ahead (0 = 5 minutes); INVALID_ARGUMENT naming horizon_ns past
/// 30 minutes or negative.
absl::StatusOr<size_t> HorizonIndex(int64_t horizon_ns);

/// The gRPC face of one cluster's PDLC (advisor and store not owned; they
/// outlive the service).
class PdlcServiceImpl : public v1::PdlcService::CallbackService {
 public:
  /// Serves `advisor` and `store`; `clock_ms` says the time now, Unix ms.
  PdlcServiceImpl(Advisor& advisor, TelemetryStore& store, std::function<int64_t()> clock_ms);

  grpc::ServerUnaryReactor* IngestMetrics(grpc::CallbackServerContext* context,
                                          const v1::IngestMetricsRequest* request,
                                          v1::IngestMetricsResponse* response) override;
  grpc::ServerUnaryReactor* GetRecommendation(grpc::CallbackServerContext* context,
                                              const v1::GetRecommendationRequest* request,
                                              v1::GetRecommendationResponse* response) override;
  grpc::ServerUnaryReactor* ListForecasts(grpc::CallbackServerContext* context,
                                          const v1::ListForecastsRequest* request,
                                          v1::ListForecastsResponse* response) override;
  grpc::ServerWriteReactor<v1::WatchRecommendationsResponse>* WatchRecommendations(
      grpc::CallbackServerContext* context, const v1::WatchRecommendationsRequest* request) override;

 private:
  Advisor& advisor_;
  TelemetryStore& store_;
  std::function<int64_t()> clock_ms_;
  BoundedExecutor io_;
  std::atomic<int> watchers_{0};  // open WatchRecommendations streams
};

}  // namespace codeco::pdlc
