#include "pdlc/server/pdlc_service.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <iterator>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "codeco/common/authz.h"
#include "codeco/common/serve_on_executor.h"
#include "codeco/common/status.h"
#include "codeco/common/watch_stream.h"
#include "google/protobuf/util/time_util.h"

namespace codeco::pdlc {
namespace {

using google::protobuf::util::TimeUtil;

constexpr int64_t kNanosPerMinute = 60'000'000'000;
// Share of a forecast's distribution its served interval covers.
constexpr double kIntervalConfidence = 0.8;

const char* MetricName(UsageMetric metric) { return metric == UsageMetric::kCpu ? "cpu_percent" : "memory_percent"; }

std::optional<SubjectKind> FromProto(v1::SubjectKind kind) {
  switch (kind) {
    case v1::SUBJECT_KIND_NODE: return SubjectKind::kNode;
    case v1::SUBJECT_KIND_POD: return SubjectKind::kPod;
    case v1::SUBJECT_KIND_LINK: return SubjectKind::kLink;
    default: return std::nullopt;
  }
}

ScoringProfile FromProto(common::v1::PerformanceProfile profile) {
  switch (profile) {
    case common::v1::PERFORMANCE_PROFILE_GREENNESS: return ScoringProfile::kGreenness;
    case common::v1::PERFORMANCE_PROFILE_RESILIENCE: return ScoringProfile::kResilience;
    case common::v1::PERFORMANCE_PROFILE_COST: return ScoringProfile::kCost;
    case common::v1::PERFORMANCE_PROFILE_CUSTOM: return ScoringProfile::kCustom;
    default: return ScoringProfile::kLatency;
  }
}

common::v1::PerformanceProfile ToProto(ScoringProfile profile) {
  switch (profile) {
    case ScoringProfile::kGreenness: return common::v1::PERFORMANCE_PROFILE_GREENNESS;
    case ScoringProfile::kResilience: return common::v1::PERFORMANCE_PROFILE_RESILIENCE;
    case ScoringProfile::kCost: return common::v1::PERFORMANCE_PROFILE_COST;
    case ScoringProfile::kCustom: return common::v1::PERFORMANCE_PROFILE_CUSTOM;
    case ScoringProfile::kLatency: break;
  }
  return common::v1::PERFORMANCE_PROFILE_LATENCY;
}

google::protobuf::Timestamp TimestampOfMs(int64_t ms) { return TimeUtil::MillisecondsToTimestamp(ms); }

// Every forecast of `f` as protos: CPU then memory, by horizon.
void AppendForecasts(const NodeForecast& f, std::vector<v1::Forecast>* out) {
  for (UsageMetric metric : {UsageMetric::kCpu, UsageMetric::kMemory}) {
    const auto& values = f.forecast.values(metric);
    const auto& spreads = metric == UsageMetric::kCpu ? f.forecast.cpu_log_spread : f.forecast.mem_log_spread;
    for (size_t h = 0; h < kHorizonCount; ++h) {
      v1::Forecast p;
      p.set_subject_kind(v1::SUBJECT_KIND_NODE);
      p.set_subject(f.node);
      p.set_metric(MetricName(metric));
      p.set_horizon_ns(kHorizonSteps[h] * kSampleStepMinutes * kNanosPerMinute);
      p.set_predicted_value(values[h]);
      if (spreads[h] > 0) {
        // The central interval of the Laplace distribution of the log-level.
        const double half = spreads[h] * std::log(1.0 / (1.0 - kIntervalConfidence));
        const double mu = LogLevel(values[h]);
        p.set_lower_bound(FromLogLevel(mu - half));
        p.set_upper_bound(FromLogLevel(mu + half));
        p.set_confidence(kIntervalConfidence);
      } else {
        p.set_lower_bound(values[h]);
        p.set_upper_bound(values[h]);
      }
      *p.mutable_generate_time() = TimestampOfMs(f.origin_ms);
      out->push_back(std::move(p));
    }
  }
}

// Most WatchRecommendations streams open at once; more are refused.
constexpr int kMaxRecommendationWatchers = 64;

// The profiles a WatchRecommendations request asks for, checked.
absl::StatusOr<std::vector<ScoringProfile>> WatchedProfiles(const v1::WatchRecommendationsRequest& request) {
  if (request.performance_profiles().empty()) {
    return std::vector<ScoringProfile>(std::begin(kBuiltInProfiles), std::end(kBuiltInProfiles));
  }
  std::vector<ScoringProfile> out;
  for (int i = 0; i < request.performance_profiles_size(); ++i) {
    const std::string field = absl::StrCat("performance_profiles[", i, "]");
    const auto p = static_cast<common::v1::PerformanceProfile>(request.performance_profiles(i));
    if (p == common::v1::PERFORMANCE_PROFILE_CUSTOM) {
      return absl::InvalidArgumentError(field + ": CUSTOM is not streamed; ask GetRecommendation with its weights");
    }
    if (p == common::v1::PERFORMANCE_PROFILE_UNSPECIFIED || !common::v1::PerformanceProfile_IsValid(p)) {
      return absl::InvalidArgumentError(field + ": must be LATENCY, GREENNESS, RESILIENCE or COST");
    }
    const ScoringProfile profile = FromProto(p);
    if (std::find(out.begin(), out.end(), profile) != out.end()) {
      return absl::InvalidArgumentError(field + ": listed twice");
    }
    out.push_back(profile);
  }
  return out;
}

// One WatchRecommendations stream: every asked profile's recommendation
// after each refresh of the advisor (the first at once if there was one).
class RecommendationWatch final : public WatchStream<v1::WatchRecommendationsResponse> {
 public:
  RecommendationWatch(Advisor& advisor, std::function<int64_t()> clock_ms, std::atomic<int>& watchers,
                      const v1::WatchRecommendationsRequest& request)
      : advisor_(advisor), clock_ms_(std::move(clock_ms)), watchers_(watchers), scores_only_(request.scores_only()) {
    absl::StatusOr<std::vector<ScoringProfile>> profiles = WatchedProfiles(request);
    if (!profiles.ok()) {
      Fail(ToGrpcStatus(profiles.status()));
      return;
    }
    profiles_ = *std::move(profiles);
    if (watchers_.fetch_add(1) >= kMaxRecommendationWatchers) {
      watchers_.fetch_sub(1);
      Fail(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "too many WatchRecommendations streams open; retry later"));
      return;
    }
    counted_ = true;
    listener_ = advisor_.refreshed().Add([this] { Poke(); });
    Start();
  }

 private:
  absl::StatusOr<Batch> Next() override {
    Batch batch;
    const uint64_t refreshes = advisor_.refresh_count();
    if (refreshes == 0 || refreshes == served_) return batch;
    v1::WatchRecommendationsResponse message;
    for (ScoringProfile profile : profiles_) {
      RecommendationQuery query;
      query.profile = profile;
      ASSIGN_OR_RETURN(RecommendationResult result, advisor_.Recommend(query, clock_ms_()));
      if (scores_only_) {
        result.forecasts.clear();
        for (NodeScore& s : result.node_scores) s.components.clear();
      }
      *message.add_recommendations() = ToProto(result);
    }
    served_ = refreshes;
    batch.messages.push_back(std::move(message));
    return batch;
  }
  void Closed() override {
    if (!counted_) return;
    advisor_.refreshed().Remove(listener_);
    watchers_.fetch_sub(1);
  }

  Advisor& advisor_;
  std::function<int64_t()> clock_ms_;
  std::atomic<int>& watchers_;
  const bool scores_only_;
  std::vector<ScoringProfile> profiles_;
  bool counted_ = false;
  int listener_ = 0;
  uint64_t served_ = 0;  // the advisor's refresh count last streamed
};

}  // namespace

absl::StatusOr<size_t> HorizonIndex(int64_t horizon_ns) {
  if (horizon_ns < 0) return absl::InvalidArgumentError("horizon_ns: must not be negative");
  for (size_t h = 0; h < kHorizonCount; ++h) {
    if (horizon_ns <= kHorizonSteps[h] * kSampleStepMinutes * kNanosPerMinute) return h;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("horizon_ns: ", horizon_ns, " is past the longest forecast horizon (",
                   kMaxHorizonSteps * kSampleStepMinutes, " minutes)"));
}

v1::Recommendation ToProto(const RecommendationResult& result) {
  v1::Recommendation rec;
  rec.set_cluster(result.cluster);
  rec.set_performance_profile(ToProto(result.profile));
  for (const NodeScore& s : result.node_scores) {
    v1::NodeScore* p = rec.add_node_scores();
    p->set_node(s.node);
    p->set_score(s.score);
    p->set_stability(s.stability);
    for (const auto& [name, value] : s.components) (*p->mutable_components())[name] = value;
  }
  rec.set_cluster_score(result.cluster_score);
  rec.set_stability(result.stability);
  std::vector<v1::Forecast> forecasts;
  for (const NodeForecast& f : result.forecasts) AppendForecasts(f, &forecasts);
  for (auto& f : forecasts) *rec.add_forecasts() = std::move(f);
  for (const BreachAdvisory& a : result.advisories) {
    v1::Advisory* p = rec.add_advisories();
    p->set_type(v1::ADVISORY_TYPE_BREACH_AHEAD);
    p->set_subject_kind(v1::SUBJECT_KIND_NODE);
    p->set_subject(a.node);
    p->set_metric(MetricName(a.metric));
    p->set_threshold(a.threshold_percent);
    p->set_predicted_value(a.predicted_percent);
    p->set_time_to_breach_ns(a.time_to_breach_ms * 1'000'000);
    p->set_confidence(a.confidence);
    p->set_message(absl::StrCat(UsageMetricName(a.metric), " of node ", a.node, " is forecast at ",
                                absl::SixDigits(a.predicted_percent), " % within ", a.time_to_breach_ms / 60'000,
                                " minutes (threshold ", absl::SixDigits(a.threshold_percent), " %, confidence ",
                                absl::SixDigits(a.confidence), ")"));
  }
  rec.set_model_version(result.model_version);
  *rec.mutable_generate_time() = TimestampOfMs(result.generated_ms);
  return rec;
}

PdlcServiceImpl::PdlcServiceImpl(Advisor& advisor, TelemetryStore& store,
                                 std::function<int64_t()> clock_ms, AuctionOptions auction)
    : advisor_(advisor),
      store_(store),
      clock_ms_(std::move(clock_ms)),
      auction_(std::move(auction)),
      io_(2, 256),
      auctions_(2, 32) {}

namespace {

// The auction_id (required or not) and neighborhood_id of an auction
// request, checked: INVALID_ARGUMENT naming the field.
absl::Status CheckAuctionNames(const std::string& auction_id, bool id_required,
                               const std::string& neighborhood_id) {
  if (id_required && auction_id.empty()) return InvalidFieldError("auction_id", "required");
  if (auction_id.size() > 128) return InvalidFieldError("auction_id", "at most 128 characters");
  if (neighborhood_id.empty()) return InvalidFieldError("neighborhood_id", "required");
  if (neighborhood_id.size() > 253) {
    return InvalidFieldError("neighborhood_id", "at most 253 characters");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AuctionWorkload> FromProto(const v1::AuctionWorkload& workload,
                                          const std::string& field) {
  AuctionWorkload out;
  if (workload.name().empty()) return InvalidFieldError(field + ".name", "required");
  if (workload.name().size() > 253) {
    return InvalidFieldError(field + ".name", "at most 253 characters");
  }
  out.name = workload.name();
  if (workload.cpu_millicores() < 0) {
    return InvalidFieldError(field + ".cpu_millicores", "must not be negative");
  }
  if (workload.memory_bytes() < 0) {
    return InvalidFieldError(field + ".memory_bytes", "must not be negative");
  }
  out.cpu_millicores = static_cast<double>(workload.cpu_millicores());
  out.memory_bytes = static_cast<double>(workload.memory_bytes());
  const common::v1::PerformanceProfile profile = workload.performance_profile();
  if (profile == common::v1::PERFORMANCE_PROFILE_CUSTOM ||
      !common::v1::PerformanceProfile_IsValid(profile)) {
    return InvalidFieldError(field + ".performance_profile",
                             "must be LATENCY, GREENNESS, RESILIENCE or COST");
  }
  out.profile = FromProto(profile);
  return out;
}

absl::StatusOr<v1::Bid> PdlcServiceImpl::OwnBid(const std::string& auction_id,
                                                const std::string& neighborhood,
                                                const v1::AuctionWorkload& workload) {
  ASSIGN_OR_RETURN(AuctionWorkload wanted, FromProto(workload, "workload"));
  const int64_t now = clock_ms_();
  ASSIGN_OR_RETURN(BidDecision decision, DecideBid(advisor_, wanted, now));
  v1::Bid bid;
  bid.set_auction_id(auction_id);
  bid.set_neighborhood_id(neighborhood);
  bid.set_bidder_cluster(auction_.cluster);
  bid.set_workload(wanted.name);
  bid.set_score(decision.value);
  bid.set_stability(decision.stability);
  bid.mutable_offered()->set_cpu_millicores(static_cast<int64_t>(decision.offered_cpu_millicores));
  bid.mutable_offered()->set_memory_bytes(static_cast<int64_t>(decision.offered_memory_bytes));
  *bid.mutable_valid_until() =
      TimestampOfMs(now + absl::ToInt64Milliseconds(auction_.bid_validity));
  bid.set_breach_probability(decision.breach_probability);
  bid.set_reason(decision.reason);
  return bid;
}

grpc::ServerUnaryReactor* PdlcServiceImpl::RequestBid(grpc::CallbackServerContext* context,
                                                      const v1::RequestBidRequest* request,
                                                      v1::RequestBidResponse* response) {
  return ServeOnExecutor(io_, context, [this, context, request, response](absl::Time) -> absl::Status {
    // Only the auctioneer's own PDLC asks in its name.
    ASSIGN_OR_RETURN(Caller caller, CallerOf(*context, auction_.hub_cluster));
    if (!caller.plaintext && !(caller.identity.service == "pdlc" &&
                               caller.identity.cluster == request->auctioneer_cluster())) {
      return absl::PermissionDeniedError(
          absl::StrCat("RequestBid: ", caller.Describe(),
                       " may ask only as its own cluster's pdlc, but auctioneer_cluster is \"",
                       request->auctioneer_cluster().substr(0, 64), "\""));
    }
    RETURN_IF_ERROR(CheckAuctionNames(request->auction_id(), /*id_required=*/true,
                                      request->neighborhood_id()));
    ASSIGN_OR_RETURN(*response->mutable_bid(),
                     OwnBid(request->auction_id(), request->neighborhood_id(), request->workload()));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* PdlcServiceImpl::RunAuction(grpc::CallbackServerContext* context,
                                                      const v1::RunAuctionRequest* request,
                                                      v1::RunAuctionResponse* response) {
  return ServeOnExecutor(auctions_, context, [this, request, response](absl::Time deadline) -> absl::Status {
    RETURN_IF_ERROR(CheckAuctionNames(request->auction_id(), /*id_required=*/false,
                                      request->neighborhood_id()));
    if (request->bid_timeout_ms() < 0 || request->bid_timeout_ms() > 30'000) {
      return InvalidFieldError("bid_timeout_ms", "must be 0-30000");
    }
    // The peers asked: every configured one, or those named.
    std::vector<std::string> bidders;
    std::set<std::string> named;
    for (int i = 0; i < request->bidders_size(); ++i) {
      const std::string& b = request->bidders(i);
      const std::string field = absl::StrCat("bidders[", i, "]");
      if (!named.insert(b).second) return InvalidFieldError(field, "named twice");
      if (b == auction_.cluster) continue;  // the auctioneer always bids
      if (auction_.peers.count(b) == 0) {
        return InvalidFieldError(field, absl::StrCat("\"", b.substr(0, 64),
                                                     "\" is not a peer of this PDLC "
                                                     "(pdlc.auction.peers)"));
      }
      bidders.push_back(b);
    }
    if (request->bidders().empty()) {
      for (const auto& [cluster, channel] : auction_.peers) bidders.push_back(cluster);
    }
    const std::string auction_id =
        request->auction_id().empty()
            ? absl::StrCat(auction_.cluster, "-", clock_ms_(), "-", auctions_run_.fetch_add(1))
            : request->auction_id();
    ASSIGN_OR_RETURN(v1::Bid own, OwnBid(auction_id, request->neighborhood_id(), request->workload()));

    // Every peer is asked at once; each answers or is missing by the deadline.
    struct Ask {
      std::string cluster;
      std::unique_ptr<v1::PdlcService::Stub> stub;
      grpc::ClientContext context;
      v1::RequestBidRequest request;
      v1::RequestBidResponse response;
      grpc::Status status;
      bool done = false;
    };
    // Shared with the callbacks, so it outlives the last of them.
    struct Asks {
      absl::Mutex mu;
      std::vector<std::unique_ptr<Ask>> all;
    };
    const absl::Duration timeout = absl::Milliseconds(
        request->bid_timeout_ms() == 0 ? 2'000 : request->bid_timeout_ms());
    const absl::Time ask_deadline = std::min(absl::Now() + timeout, deadline);
    auto asks = std::make_shared<Asks>();
    for (const std::string& cluster : bidders) {
      auto ask = std::make_unique<Ask>();
      ask->cluster = cluster;
      ask->stub = v1::PdlcService::NewStub(auction_.peers.at(cluster));
      ask->context.set_deadline(absl::ToChronoTime(ask_deadline));
      ask->request.set_auction_id(auction_id);
      ask->request.set_neighborhood_id(request->neighborhood_id());
      ask->request.set_auctioneer_cluster(auction_.cluster);
      *ask->request.mutable_workload() = request->workload();
      asks->all.push_back(std::move(ask));
    }
    for (auto& ask : asks->all) {
      Ask* a = ask.get();
      a->stub->async()->RequestBid(&a->context, &a->request, &a->response,
                                   [asks, a](grpc::Status status) {
                                     absl::MutexLock lock(&asks->mu);
                                     a->status = std::move(status);
                                     a->done = true;
                                   });
    }
    {
      // The calls carry the deadline, so each ends by it; wait for all.
      absl::MutexLock lock(&asks->mu);
      auto all_done = [&asks]() {
        return std::all_of(asks->all.begin(), asks->all.end(),
                           [](const auto& a) { return a->done; });
      };
      asks->mu.Await(absl::Condition(&all_done));
    }
    std::vector<RankedBid> ranked = {{own.bidder_cluster(), own.score(), own.stability()}};
    std::map<std::string, v1::Bid> by_cluster = {{own.bidder_cluster(), own}};
    auto miss = [response](const std::string& cluster, std::string reason) {
      v1::MissingBid* missing = response->add_missing();
      missing->set_cluster(cluster);
      missing->set_reason(std::move(reason));
    };
    for (const auto& a : asks->all) {
      const v1::Bid& bid = a->response.bid();
      if (!a->status.ok()) {
        miss(a->cluster, absl::StrCat(absl::StatusCodeToString(
                                          static_cast<absl::StatusCode>(a->status.error_code())),
                                      ": ", a->status.error_message().substr(0, 200)));
        continue;
      }
      if (bid.bidder_cluster() != a->cluster || bid.auction_id() != auction_id ||
          !(bid.score() >= 0 && bid.score() <= 100) || !(bid.stability() >= 0 && bid.stability() <= 1)) {
        miss(a->cluster, "its bid was malformed (another cluster's or auction's, or out of range)");
        continue;
      }
      ranked.push_back({a->cluster, bid.score(), bid.stability()});
      by_cluster[a->cluster] = bid;
    }
    response->set_auction_id(auction_id);
    response->set_winner_cluster(RankBids(ranked));
    for (const RankedBid& r : ranked) *response->add_bids() = by_cluster.at(r.cluster);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* PdlcServiceImpl::IngestMetrics(grpc::CallbackServerContext* context,
                                                         const v1::IngestMetricsRequest* request,
                                                         v1::IngestMetricsResponse* response) {
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) -> absl::Status {
    const TelemetryLimits limits;
    if (request->samples_size() > static_cast<int>(limits.max_batch_samples)) {
      return absl::InvalidArgumentError(absl::StrCat("samples: ", request->samples_size(),
                                                     " samples, at most ", limits.max_batch_samples, " per call"));
    }
    std::string batch_id = request->request_id();
    if (batch_id.empty()) {
      return absl::InvalidArgumentError("request_id: required, so that a retried batch is stored once");
    }
    RETURN_IF_ERROR(ValidateTelemetryName(batch_id, limits.max_batch_id_bytes, "request_id"));
    std::vector<TelemetrySample> accepted;
    auto reject = [&](const std::string& subject, const std::string& reason) {
      common::v1::ErrorCause* cause = response->add_rejections();
      cause->set_subject(subject);
      cause->set_reason(reason);
    };
    for (int i = 0; i < request->samples_size(); ++i) {
      const v1::MetricSample& s = request->samples(i);
      const std::string field = absl::StrCat("samples[", i, "]");
      const std::optional<SubjectKind> kind = FromProto(s.subject_kind());
      if (!kind) {
        reject(field + ".subject_kind", "must be NODE, POD or LINK");
        continue;
      }
      if (!s.has_sample_time()) {
        reject(field + ".sample_time", "required");
        continue;
      }
      TelemetrySample sample{*kind, s.subject(), s.metric(), TimeUtil::TimestampToMilliseconds(s.sample_time()),
                             s.value()};
      if (absl::Status valid = ValidateTelemetrySample(sample, limits, field); !valid.ok()) {
        const std::string message(valid.message());
        const size_t colon = message.find(": ");
        reject(colon == std::string::npos ? field : message.substr(0, colon),
               colon == std::string::npos ? message : message.substr(colon + 2));
        continue;
      }
      if (!s.labels().empty()) {
        // Accepted, but its labels are not kept: said, never silently dropped.
        reject(field + ".labels", "not stored: PDLC keeps one series per subject and metric (sample accepted)");
      }
      accepted.push_back(std::move(sample));
    }
    const int rejected = request->samples_size() - static_cast<int>(accepted.size());
    response->set_rejected_count(rejected);
    if (accepted.empty()) {
      response->set_accepted_count(0);
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(AppendResult appended, store_.Append(batch_id, accepted));
    // A retried batch was stored the first time: its samples count as accepted.
    response->set_accepted_count(appended.duplicate ? static_cast<int>(accepted.size())
                                                    : static_cast<int>(appended.stored));
    if (appended.expired > 0) {
      common::v1::ErrorCause* cause = response->add_rejections();
      cause->set_subject("samples");
      cause->set_reason(absl::StrCat(appended.expired, " samples older than the retention window were not stored"));
      response->set_rejected_count(rejected + static_cast<int>(appended.expired));
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* PdlcServiceImpl::GetRecommendation(grpc::CallbackServerContext* context,
                                                             const v1::GetRecommendationRequest* request,
                                                             v1::GetRecommendationResponse* response) {
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) -> absl::Status {
    RecommendationQuery query;
    query.profile = FromProto(request->performance_profile());
    if (query.profile != ScoringProfile::kCustom && !request->custom_weights().empty()) {
      return absl::InvalidArgumentError("custom_weights: only used with the CUSTOM performance_profile");
    }
    for (const auto& [name, weight] : request->custom_weights()) query.custom_weights[name] = weight;
    query.nodes.assign(request->nodes().begin(), request->nodes().end());
    const auto& req = request->workload_requests();
    if (req.cpu_millicores() < 0 || req.memory_bytes() < 0) {
      return absl::InvalidArgumentError("workload_requests: quantities must not be negative");
    }
    if (req.gpu() != 0 || req.ephemeral_storage_bytes() != 0) {
      return absl::InvalidArgumentError(
          "workload_requests: only cpu_millicores and memory_bytes are scored (PDLC has no GPU or storage telemetry)");
    }
    query.requests.cpu_millicores = static_cast<double>(req.cpu_millicores());
    query.requests.memory_bytes = static_cast<double>(req.memory_bytes());
    ASSIGN_OR_RETURN(query.horizon, HorizonIndex(request->horizon_ns()));
    ASSIGN_OR_RETURN(RecommendationResult result, advisor_.Recommend(query, clock_ms_()));
    *response->mutable_recommendation() = ToProto(result);
    return absl::OkStatus();
  });
}

grpc::ServerWriteReactor<v1::WatchRecommendationsResponse>* PdlcServiceImpl::WatchRecommendations(
    grpc::CallbackServerContext*, const v1::WatchRecommendationsRequest* request) {
  return new RecommendationWatch(advisor_, clock_ms_, watchers_, *request);
}

grpc::ServerUnaryReactor* PdlcServiceImpl::ListForecasts(grpc::CallbackServerContext* context,
                                                         const v1::ListForecastsRequest* request,
                                                         v1::ListForecastsResponse* response) {
  return ServeOnExecutor(io_, context, [this, request, response](absl::Time) -> absl::Status {
    if (request->page_size() < 0) return absl::InvalidArgumentError("page_size: must not be negative");
    const size_t page = request->page_size() == 0 ? 100 : std::min(request->page_size(), 1000);
    size_t offset = 0;
    if (!request->page_token().empty() && !absl::SimpleAtoi(request->page_token(), &offset)) {
      return absl::InvalidArgumentError("page_token: not a token this service gave");
    }
    const v1::SubjectKind kind = request->subject_kind();
    if (kind != v1::SUBJECT_KIND_UNSPECIFIED && kind != v1::SUBJECT_KIND_NODE) {
      // Only node forecasts exist; other kinds match nothing.
      return absl::OkStatus();
    }
    std::vector<v1::Forecast> all;
    for (const NodeForecast& f : advisor_.Forecasts()) {
      if (!request->subject().empty() && f.node != request->subject()) continue;
      AppendForecasts(f, &all);
    }
    if (!request->metric().empty()) {
      std::erase_if(all, [&](const v1::Forecast& f) { return f.metric() != request->metric(); });
    }
    for (size_t i = offset; i < all.size() && i < offset + page; ++i) *response->add_forecasts() = all[i];
    if (offset + page < all.size()) response->set_next_page_token(absl::StrCat(offset + page));
    return absl::OkStatus();
  });
}

}  // namespace codeco::pdlc
