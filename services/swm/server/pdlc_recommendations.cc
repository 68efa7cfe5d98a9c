#include "swm/server/pdlc_recommendations.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codeco/common/backoff.h"
#include "codeco/common/logging.h"
#include "codeco/common/proto_util.h"
#include "codeco/pdlc/v1/pdlc_service.grpc.pb.h"

namespace codeco::swm {

namespace pb = codeco::pdlc::v1;

std::vector<BreachAdvisory> BreachesOf(const pb::Recommendation& rec) {
  std::vector<BreachAdvisory> out;
  for (const pb::Advisory& a : rec.advisories()) {
    if (a.type() != pb::ADVISORY_TYPE_BREACH_AHEAD || a.subject_kind() != pb::SUBJECT_KIND_NODE ||
        a.subject().empty()) {
      continue;
    }
    out.push_back(BreachAdvisory{.cluster = rec.cluster(), .node = a.subject(),
                                 .message = a.message()});
  }
  return out;
}

std::vector<BreachAdvisory> PdlcRecommendations::BreachesAhead() {
  const absl::Time now = clock_.Now();
  absl::MutexLock lock(&mu_);
  std::vector<BreachAdvisory> out;
  for (const auto& [cluster, at] : breaches_) {
    if (now - at.first > options_.max_age) continue;  // its PDLC went quiet
    out.insert(out.end(), at.second.begin(), at.second.end());
  }
  return out;
}

ClusterRecommendation FromProto(const pb::Recommendation& rec) {
  ClusterRecommendation out;
  out.cluster_score = rec.cluster_score();
  for (const pb::NodeScore& s : rec.node_scores()) out.node_scores[s.node()] = s.score();
  return out;
}

namespace {

// The error of a PDLC that answers for another cluster than the one it is
// the endpoint of (a wrong endpoint): it says nothing about `cluster`.
grpc::Status WrongCluster(const std::string& cluster, const pb::Recommendation& rec) {
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      absl::StrCat("the PDLC at this endpoint of cluster \"", cluster, "\" serves cluster \"",
                                   rec.cluster(), "\""));
}

}  // namespace

PdlcRecommendations::PdlcRecommendations(PeerChannels& channels, const Clock& clock,
                                         PdlcRecommendationsOptions options)
    : channels_(channels), clock_(clock), options_(options), book_(clock) {}

PdlcRecommendations::~PdlcRecommendations() {
  std::vector<Peer*> all;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [name, p] : peers_) all.push_back(p.get());
    for (auto& p : retired_) all.push_back(p.get());
  }
  for (Peer* p : all) Stop(*p);
}

void PdlcRecommendations::Stop(Peer& peer) {
  {
    absl::MutexLock lock(&mu_);
    peer.stop = true;
    if (peer.stream != nullptr) peer.stream->TryCancel();
  }
  if (peer.thread.joinable()) peer.thread.join();
}

absl::Status PdlcRecommendations::SetEndpoint(const std::string& cluster, const std::string& address) {
  if (cluster.empty()) return absl::InvalidArgumentError("cluster: required");
  if (address.empty()) return absl::InvalidArgumentError("empty address");
  {
    absl::MutexLock lock(&mu_);
    auto it = peers_.find(cluster);
    if (it != peers_.end() && it->second->address == address) return absl::OkStatus();
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = channels_.Get(address);
  if (!channel.ok()) {
    return absl::InvalidArgumentError(channel.status().message());
  }
  absl::MutexLock lock(&mu_);
  auto it = peers_.find(cluster);
  if (it != peers_.end()) {
    if (it->second->address == address) return absl::OkStatus();
    // Moved: the old stream ends (its thread is joined at the end) and what
    // it said is forgotten.
    Peer& old = *it->second;
    old.stop = true;
    if (old.stream != nullptr) old.stream->TryCancel();
    retired_.push_back(std::move(it->second));
    peers_.erase(it);
    book_.Forget(cluster);
    breaches_.erase(cluster);
  }
  auto peer = std::make_unique<Peer>();
  peer->cluster = cluster;
  peer->address = address;
  peer->channel = *std::move(channel);
  Peer* raw = peer.get();
  peers_[cluster] = std::move(peer);
  raw->thread = std::thread([this, raw] { Run(raw); });
  return absl::OkStatus();
}

bool PdlcRecommendations::Streaming(const std::string& cluster) {
  absl::MutexLock lock(&mu_);
  auto it = peers_.find(cluster);
  return it != peers_.end() && it->second->delivered;
}

void PdlcRecommendations::Run(Peer* peer) {
  Backoff backoff(BackoffPolicy{.initial = options_.retry_min, .max = options_.retry_max},
                  /*seed=*/std::hash<std::string>()(peer->cluster));
  auto stub = pb::PdlcService::NewStub(peer->channel);
  int failures = 0;
  while (true) {
    grpc::ClientContext context;
    {
      absl::MutexLock lock(&mu_);
      if (peer->stop) return;
      peer->stream = &context;
    }
    pb::WatchRecommendationsRequest request;  // every built-in profile
    request.set_scores_only(true);
    std::unique_ptr<grpc::ClientReader<pb::WatchRecommendationsResponse>> reader =
        stub->WatchRecommendations(&context, request);
    pb::WatchRecommendationsResponse message;
    bool delivered = false;
    std::optional<grpc::Status> refused;
    while (!refused.has_value() && reader->Read(&message)) {
      // Every profile carries the same advisories: one set per message.
      std::vector<BreachAdvisory> breaches;
      std::set<std::string> advised;
      for (const pb::Recommendation& rec : message.recommendations()) {
        if (rec.cluster() != peer->cluster) continue;
        for (BreachAdvisory& b : BreachesOf(rec)) {
          if (advised.insert(b.node).second) breaches.push_back(std::move(b));
        }
      }
      if (!message.recommendations().empty()) {
        absl::MutexLock lock(&mu_);
        breaches_[peer->cluster] = {clock_.Now(), std::move(breaches)};
      }
      for (const pb::Recommendation& rec : message.recommendations()) {
        if (rec.cluster() != peer->cluster) {
          refused = WrongCluster(peer->cluster, rec);
          context.TryCancel();
          break;
        }
        // A PDLC that knows no node yet has nothing to say.
        if (rec.node_scores_size() == 0) continue;
        book_.Record(peer->cluster, PerformanceProfileName(rec.performance_profile()), FromProto(rec),
                     options_.max_age);
      }
      if (refused.has_value()) break;
      delivered = true;
      absl::MutexLock lock(&mu_);
      peer->delivered = true;
    }
    while (refused.has_value() && reader->Read(&message)) {
    }
    grpc::Status status = reader->Finish();
    if (refused.has_value()) status = *refused;
    {
      absl::MutexLock lock(&mu_);
      peer->stream = nullptr;
      peer->delivered = false;
      if (peer->stop) return;
    }
    failures = delivered ? 1 : failures + 1;
    if (failures == 1) {
      log::Warn("recommendation stream of a PDLC ended; its last scores are used until they age out",
                {{"cluster", peer->cluster}, {"pdlc", peer->address}, {"error", status.error_message()}});
    }
    absl::MutexLock lock(&mu_);
    auto stopped = [peer]() { return peer->stop; };
    mu_.AwaitWithTimeout(absl::Condition(&stopped), backoff.Delay(failures));
  }
}

void PdlcRecommendations::Ask(const std::string& cluster, std::shared_ptr<grpc::Channel> channel,
                              const std::string& profile) {
  pb::GetRecommendationRequest request;
  request.set_performance_profile(ParsePerformanceProfile(profile).value_or(common::v1::PERFORMANCE_PROFILE_LATENCY));
  grpc::ClientContext context;
  // Real time: how long a placement waits for a PDLC, not a decision of the core.
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.call_timeout));
  pb::GetRecommendationResponse response;
  grpc::Status status = pb::PdlcService::NewStub(channel)->GetRecommendation(&context, request, &response);
  if (status.ok() && response.recommendation().cluster() != cluster) {
    status = WrongCluster(cluster, response.recommendation());
  }
  if (!status.ok()) {
    log::Warn("a PDLC did not recommend; its cluster is placed without its advice",
              {{"cluster", cluster}, {"profile", profile}, {"error", status.error_message()}});
    absl::MutexLock lock(&mu_);
    auto it = peers_.find(cluster);
    if (it != peers_.end()) it->second->call_again = clock_.Now() + options_.call_cache;
    return;
  }
  if (response.recommendation().node_scores_size() > 0) {
    book_.Record(cluster, profile, FromProto(response.recommendation()), options_.call_cache);
  }
}

absl::StatusOr<std::optional<Recommendations>> PdlcRecommendations::Get(const Application& app) {
  const std::map<std::string, double> weights = RecommendationBook::ProfileWeights(app);
  if (weights.empty()) return std::optional<Recommendations>();  // custom without weights
  std::vector<std::string> clusters;
  struct Question {
    std::string cluster;
    std::shared_ptr<grpc::Channel> channel;
    std::string profile;
  };
  std::vector<Question> questions;
  {
    const absl::Time now = clock_.Now();
    absl::MutexLock lock(&mu_);
    for (const auto& [name, peer] : peers_) {
      clusters.push_back(name);
      if (now < peer->call_again) continue;
      for (const auto& [profile, weight] : weights) {
        if (!book_.Has(name, profile)) questions.push_back({name, peer->channel, profile});
      }
    }
  }
  // What the book cannot answer is asked at once, in parallel.
  std::vector<std::thread> calls;
  calls.reserve(questions.size());
  for (const Question& q : questions) {
    calls.emplace_back([this, &q] { Ask(q.cluster, q.channel, q.profile); });
  }
  for (std::thread& t : calls) t.join();
  absl::StatusOr<std::optional<Recommendations>> recs = book_.Collect(clusters, weights);
  if (!recs.ok() || !options_.auction) return recs;
  std::optional<AuctionResult> auction = Auction(app);
  if (!auction.has_value()) return recs;
  if (!recs->has_value()) recs->emplace();
  // The bids are the clusters' forecast-aware scores for this very workload.
  for (const auto& [cluster, bid] : auction->bids) (*recs)->cluster_scores[cluster] = bid;
  (*recs)->advised_cluster = auction->winner;
  return recs;
}

int PdlcRecommendations::auctions_run() {
  absl::MutexLock lock(&mu_);
  return auctions_run_;
}

std::optional<PdlcRecommendations::AuctionResult> PdlcRecommendations::Auction(
    const Application& app) {
  // Auctions are over one built-in profile: a custom application has none.
  const std::optional<common::v1::PerformanceProfile> profile =
      ParsePerformanceProfile(app.performance_profile.empty() ? "latency" : app.performance_profile);
  if (!profile.has_value() || *profile == common::v1::PERFORMANCE_PROFILE_CUSTOM) {
    return std::nullopt;
  }
  Resources demand;
  for (const Workload& w : app.workloads) demand += w.requests;
  const std::string key = absl::StrCat(app.performance_profile, "/", demand.cpu_millis, "/",
                                       demand.memory_bytes);
  std::vector<std::pair<std::string, std::shared_ptr<grpc::Channel>>> auctioneers;
  {
    const absl::Time now = clock_.Now();
    absl::MutexLock lock(&mu_);
    auto cached = auctions_.find(app.name);
    if (cached != auctions_.end() && cached->second.key == key && now < cached->second.until) {
      return cached->second.result;
    }
    for (const auto& [name, peer] : peers_) {
      if (now >= peer->call_again) auctioneers.push_back({name, peer->channel});
    }
  }
  pb::RunAuctionRequest request;
  request.set_neighborhood_id(options_.neighborhood);
  pb::AuctionWorkload* workload = request.mutable_workload();
  workload->set_name(app.name);
  workload->set_cpu_millicores(demand.cpu_millis);
  workload->set_memory_bytes(demand.memory_bytes);
  workload->set_performance_profile(*profile);
  request.set_bid_timeout_ms(std::max<int64_t>(
      100, absl::ToInt64Milliseconds(options_.auction_timeout - absl::Milliseconds(500))));
  std::optional<AuctionResult> result;
  // One member's PDLC runs it (it asks its peers); the next if it fails.
  for (const auto& [cluster, channel] : auctioneers) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + options_.auction_timeout));
    pb::RunAuctionResponse response;
    grpc::Status status = pb::PdlcService::NewStub(channel)->RunAuction(&context, request, &response);
    if (!status.ok()) {
      log::Warn("a PDLC did not run the auction; asking the next",
                {{"cluster", cluster}, {"application", app.name}, {"error", status.error_message()}});
      continue;
    }
    result.emplace();
    result->winner = response.winner_cluster();
    std::string bids;
    for (const pb::Bid& b : response.bids()) {
      result->bids[b.bidder_cluster()] = b.score();
      absl::StrAppend(&bids, bids.empty() ? "" : ", ", b.bidder_cluster(), "=", b.score());
    }
    log::Info("neighborhood auction", {{"application", app.name},
                                       {"auctioneer", cluster},
                                       {"winner", result->winner},
                                       {"bids", bids},
                                       {"missing", absl::StrCat(response.missing_size())}});
    break;
  }
  const absl::Time now = clock_.Now();
  absl::MutexLock lock(&mu_);
  ++auctions_run_;
  std::erase_if(auctions_, [now](const auto& e) { return e.second.until <= now; });
  if (result.has_value()) auctions_[app.name] = {key, *result, now + options_.auction_cache};
  return result;
}

}  // namespace codeco::swm
