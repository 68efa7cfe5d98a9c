#pragma once
// SWM's recommendation port over gRPC: the clusters' PDLCs. For each cluster
// whose PDLC it knows (the neighborhood's endpoints["pdlc"], or
// swm.pdlc_endpoints), a thread keeps a WatchRecommendations stream open and
// records every built-in profile's scores in a RecommendationBook as they
// come, one refresh of that PDLC after the other. A placement reads the book,
// so it waits on no PDLC; a "custom" application follows the built-in
// profiles' scores blended by its custom_profile_weights. Only a cluster
// whose stream has not delivered yet is asked with one GetRecommendation per
// profile (short deadline, answers kept briefly). A PDLC that does not
// answer leaves its cluster without a recommendation (score 0): PDLC
// advises, SWM decides alone.
//
// With `auction` on, Get also runs the neighborhood auction for the
// application (PdlcService.RunAuction on one member's PDLC, which asks its
// peers for bids from their scores and 15-minute forecasts): each bidder's
// bid, on the same 0-100 scale, replaces its cluster score for this
// application, and the winner is Recommendations::advised_cluster. An
// application's auction is reused for `auction_cache`; a failed one leaves
// the placement to the scores alone.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/common/clock.h"
#include "codeco/common/peer_channels.h"
#include "codeco/pdlc/v1/pdlc_service.pb.h"
#include "grpcpp/client_context.h"
#include "swm/core/adaptation_loop.h"
#include "swm/core/plugins.h"
#include "swm/core/recommendation_book.h"

namespace codeco::swm {

/// Settings of PdlcRecommendations.
struct PdlcRecommendationsOptions {
  /// How long a streamed recommendation steers placements when no newer one
  /// comes (a PDLC refreshes every few seconds). Default: 3 min.
  absl::Duration max_age = absl::Minutes(3);
  /// Deadline of a GetRecommendation call. Default: 2 s.
  absl::Duration call_timeout = absl::Seconds(2);
  /// How long such a call's answer is reused, and how long a PDLC that
  /// failed one is not asked again. Default: 10 s.
  absl::Duration call_cache = absl::Seconds(10);
  /// Wait before opening a failed stream again; doubles up to retry_max.
  /// Default: 200 ms.
  absl::Duration retry_min = absl::Milliseconds(200);
  /// Longest wait before opening a failed stream again. Default: 10 s.
  absl::Duration retry_max = absl::Seconds(10);
  /// Run the neighborhood auction for each application placed (swm.pdlc_auction).
  bool auction = false;
  /// Deadline of a RunAuction call (its peers get 500 ms less). Default: 3 s.
  absl::Duration auction_timeout = absl::Seconds(3);
  /// How long an application's auction outcome is reused for placements of
  /// the same demand and profile. Default: 30 s.
  absl::Duration auction_cache = absl::Seconds(30);
  /// The neighborhood the auctions are named for. Default: "federation".
  std::string neighborhood = "federation";
};

/// The recommendation, as SWM keeps it, of one PDLC message: its cluster and
/// node scores.
ClusterRecommendation FromProto(const codeco::pdlc::v1::Recommendation& rec);

/// The nodes `rec` advises a breach ahead for (BREACH_AHEAD advisories of
/// SUBJECT_KIND_NODE), in its cluster.
std::vector<BreachAdvisory> BreachesOf(const codeco::pdlc::v1::Recommendation& rec);

/// The RecommendationSource of the clusters' PDLCs, and the adaptation
/// loop's BreachAdvisorySource: the BREACH_AHEAD advisories of each PDLC's
/// last streamed message, for max_age. Thread-safe.
class PdlcRecommendations final : public RecommendationSource, public BreachAdvisorySource {
 public:
  /// Reaches PDLCs through `channels` (mTLS identity, egress proxy); time
  /// from `clock`. Both must outlive it.
  PdlcRecommendations(PeerChannels& channels, const Clock& clock, PdlcRecommendationsOptions options = {});
  /// Ends every stream and joins their threads.
  ~PdlcRecommendations() override;

  /// Watches `cluster`'s PDLC at `address` (host:port). No-op when it is
  /// watched there already; a moved PDLC's old stream ends and its
  /// recommendations are forgotten. INVALID_ARGUMENT for an empty name or
  /// address, or a channel that cannot be made (e.g. a plaintext channel to
  /// a remote address); the message does not name the field (callers do).
  absl::Status SetEndpoint(const std::string& cluster, const std::string& address);

  /// Every known cluster's recommendation for `app`'s profile (a custom
  /// one: the blend of RecommendationBook::ProfileWeights); nullopt when no
  /// PDLC has one. Never an error: a PDLC that cannot be reached is left
  /// out (and logged).
  absl::StatusOr<std::optional<Recommendations>> Get(const Application& app) override;

  /// The nodes the last streamed message of each PDLC advises a breach
  /// ahead for (one no older than max_age).
  std::vector<BreachAdvisory> BreachesAhead() override;

  /// Whether `cluster`'s stream has delivered since it (last) opened (tests).
  bool Streaming(const std::string& cluster);

  /// Auctions run so far (RunAuction calls answered or failed).
  int auctions_run();

 private:
  struct Peer {
    std::string cluster;
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    bool delivered = false;                 // the open stream has delivered
    absl::Time call_again;                  // a failed call: not before this
    grpc::ClientContext* stream = nullptr;  // the open stream, to cancel it
    bool stop = false;
    std::thread thread;
  };
  // One peer's stream, opened again after each failure until stopped.
  void Run(Peer* peer);
  // Stops `peer`'s stream and joins its thread (mu_ not held).
  void Stop(Peer& peer);
  // Asks `cluster`'s PDLC for built-in `profile` and records the answer (or
  // the failure).
  void Ask(const std::string& cluster, std::shared_ptr<grpc::Channel> channel, const std::string& profile);
  // An auction's outcome: its winner ("" when none) and every bid, by cluster.
  struct AuctionResult {
    std::string winner;
    std::map<std::string, double> bids;
  };
  // The auction for `app` (nullopt when none ran or it failed), from the
  // cache or a RunAuction on the first member PDLC that answers.
  std::optional<AuctionResult> Auction(const Application& app);

  PeerChannels& channels_;
  const Clock& clock_;
  const PdlcRecommendationsOptions options_;
  RecommendationBook book_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Peer>> peers_ ABSL_GUARDED_BY(mu_);
  // Peers replaced by a new address, stopped and joined in the destructor.
  std::vector<std::unique_ptr<Peer>> retired_ ABSL_GUARDED_BY(mu_);
  // An application's last auction: what it was for, its winner, until when
  // it is reused.
  struct AuctionOutcome {
    std::string key;
    AuctionResult result;
    absl::Time until;
  };
  std::map<std::string, AuctionOutcome> auctions_ ABSL_GUARDED_BY(mu_);
  // cluster -> the breach advisories of its PDLC's last message, and when
  // they came.
  std::map<std::string, std::pair<absl::Time, std::vector<BreachAdvisory>>> breaches_
      ABSL_GUARDED_BY(mu_);
  int auctions_run_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace codeco::swm
