#pragma once
// What SWM last heard from each cluster's PDLC, per performance profile: the
// hub's memory behind its recommendation port. Entries expire, so a PDLC that
// went quiet stops steering placements instead of steering them with old
// scores. Pure: time comes from the injected clock; the server layer
// (swm/server/pdlc_recommendations.h) fills it from PDLC's watch streams and
// calls.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/common/clock.h"
#include "swm/core/plugins.h"

namespace codeco::swm {

/// One cluster's PDLC advice for one profile.
struct ClusterRecommendation {
  /// The cluster's score, 0-100.
  double cluster_score = 0;
  /// Node -> score, 0-100.
  std::map<std::string, double> node_scores;
};

/// Limits of a RecommendationBook.
struct RecommendationBookOptions {
  /// Entries kept at most; the one expiring first goes when a new one comes.
  /// Default: 4096.
  size_t max_entries = 4096;
};

/// Thread-safe.
class RecommendationBook {
 public:
  /// An empty book on `clock` (not owned; outlives the book).
  explicit RecommendationBook(const Clock& clock, RecommendationBookOptions options = {});

  /// The built-in profiles whose scores `app` follows, with their weights:
  /// its profile with weight 1, or for "custom" its custom_profile_weights
  /// that are > 0 (none: no advice).
  static std::map<std::string, double> ProfileWeights(const Application& app);

  /// Records `cluster`'s advice for built-in profile `profile`, valid for
  /// `valid_for` from now (replacing what was there).
  void Record(const std::string& cluster, const std::string& profile, ClusterRecommendation rec,
              absl::Duration valid_for);

  /// Drops every entry of `cluster` (its PDLC moved or its stream ended).
  void Forget(const std::string& cluster);

  /// Whether `cluster` has an unexpired entry for `profile`.
  bool Has(const std::string& cluster, const std::string& profile) const;

  /// The advice for `clusters` under `profile_weights` (ProfileWeights):
  /// each cluster's and node's scores are the weighted mean of its
  /// unexpired entries for those profiles; a cluster missing one of them,
  /// and a node missing from one of them, is left out. Nullopt when no
  /// cluster is left (PDLC has nothing to say).
  std::optional<Recommendations> Collect(const std::vector<std::string>& clusters,
                                         const std::map<std::string, double>& profile_weights) const;

 private:
  struct Entry {
    ClusterRecommendation rec;
    absl::Time expires;
  };
  const Clock& clock_;
  const RecommendationBookOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, std::string>, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace codeco::swm
