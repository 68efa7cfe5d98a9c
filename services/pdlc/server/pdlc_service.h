#pragma once
// codeco.pdlc.v1.PdlcService over the advisor and the telemetry store:
// IngestMetrics appends to the store, GetRecommendation and ListForecasts
// read the advisor, WatchRecommendations streams the built-in profiles'
// recommendations after every refresh (SWM's recommendation port).
// RunAuction runs a neighborhood auction: this cluster's bid (DecideBid) and
// the peers' (RequestBid, asked in parallel over mTLS), ranked (RankBids).
// GetOperation is not served yet: it answers UNIMPLEMENTED with the
// service's note. Federated training rounds are another service
// (federated_service.h).

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "codeco/common/executor.h"
#include "codeco/pdlc/v1/pdlc_service.grpc.pb.h"
#include "grpcpp/channel.h"
#include "pdlc/core/advisor.h"
#include "pdlc/core/auction.h"
#include "pdlc/core/telemetry.h"

namespace codeco::pdlc {

/// The Recommendation message for `result`. Forecast intervals are the
/// central 80 % of each forecast's Laplace spread (none without a spread).
v1::Recommendation ToProto(const RecommendationResult& result);

/// The index of kHorizonSteps for `horizon_ns`: the shortest horizon at least
/// that far ahead (0 = 5 minutes); INVALID_ARGUMENT naming horizon_ns past
/// 30 minutes or negative.
absl::StatusOr<size_t> HorizonIndex(int64_t horizon_ns);

/// The neighborhood auction as this PDLC takes part in it.
struct AuctionOptions {
  /// This PDLC's cluster: the name its bids carry.
  std::string cluster;
  /// The hub's cluster name (callers from it are the hub's services).
  std::string hub_cluster;
  /// The peer PDLCs RunAuction asks for bids, by cluster (pdlc.auction.peers).
  std::map<std::string, std::shared_ptr<grpc::Channel>> peers;
  /// How long a bid holds (its valid_until).
  absl::Duration bid_validity = absl::Minutes(1);
};

/// The AuctionWorkload for `workload`; INVALID_ARGUMENT naming the field
/// (prefixed with `field`) for a missing or overlong name, negative
/// requests or a CUSTOM or unknown profile.
absl::StatusOr<AuctionWorkload> FromProto(const v1::AuctionWorkload& workload,
                                          const std::string& field);

/// The gRPC face of one cluster's PDLC (advisor and store not owned; they
/// outlive the service).
class PdlcServiceImpl : public v1::PdlcService::CallbackService {
 public:
  /// Serves `advisor` and `store`; `clock_ms` says the time now, Unix ms;
  /// `auction` names this cluster and its peers for the auction.
  PdlcServiceImpl(Advisor& advisor, TelemetryStore& store, std::function<int64_t()> clock_ms,
                  AuctionOptions auction = {});

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
  grpc::ServerUnaryReactor* RunAuction(grpc::CallbackServerContext* context,
                                       const v1::RunAuctionRequest* request,
                                       v1::RunAuctionResponse* response) override;
  grpc::ServerUnaryReactor* RequestBid(grpc::CallbackServerContext* context,
                                       const v1::RequestBidRequest* request,
                                       v1::RequestBidResponse* response) override;

 private:
  // This cluster's bid for `workload` in auction `auction_id`.
  absl::StatusOr<v1::Bid> OwnBid(const std::string& auction_id, const std::string& neighborhood,
                                 const v1::AuctionWorkload& workload);

  Advisor& advisor_;
  TelemetryStore& store_;
  std::function<int64_t()> clock_ms_;
  AuctionOptions auction_;
  BoundedExecutor io_;
  // RunAuction waits for its peers' bids here, not on io_.
  BoundedExecutor auctions_;
  std::atomic<int> watchers_{0};  // open WatchRecommendations streams
  std::atomic<uint64_t> auctions_run_{0};  // for made-up auction ids
};

}  // namespace codeco::pdlc
