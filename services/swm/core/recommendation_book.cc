#include "swm/core/recommendation_book.h"

#include "absl/strings/str_cat.h"

namespace codeco::swm {

RecommendationBook::RecommendationBook(const Clock& clock, RecommendationBookOptions options)
    : clock_(clock), options_(options) {}

std::string RecommendationBook::ProfileKey(const Application& app) {
  if (app.performance_profile != "custom") return app.performance_profile;
  std::string key = "custom";
  // std::map iterates in key order: equal weights give equal keys.
  for (const auto& [name, weight] : app.custom_profile_weights) {
    absl::StrAppend(&key, ";", name, "=", weight);
  }
  return key;
}

void RecommendationBook::Record(const std::string& cluster, const std::string& profile_key,
                                ClusterRecommendation rec, absl::Duration valid_for) {
  const absl::Time now = clock_.Now();
  absl::MutexLock lock(&mu_);
  std::erase_if(entries_, [now](const auto& e) { return e.second.expires <= now; });
  const auto key = std::make_pair(cluster, profile_key);
  if (!entries_.count(key) && entries_.size() >= options_.max_entries && !entries_.empty()) {
    auto soonest = entries_.begin();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second.expires < soonest->second.expires) soonest = it;
    }
    entries_.erase(soonest);
  }
  entries_[key] = Entry{std::move(rec), now + valid_for};
}

void RecommendationBook::Forget(const std::string& cluster) {
  absl::MutexLock lock(&mu_);
  std::erase_if(entries_, [&cluster](const auto& e) { return e.first.first == cluster; });
}

bool RecommendationBook::Has(const std::string& cluster, const std::string& profile_key) const {
  const absl::Time now = clock_.Now();
  absl::MutexLock lock(&mu_);
  auto it = entries_.find({cluster, profile_key});
  return it != entries_.end() && it->second.expires > now;
}

std::optional<Recommendations> RecommendationBook::Collect(const std::vector<std::string>& clusters,
                                                           const std::string& profile_key) const {
  const absl::Time now = clock_.Now();
  absl::MutexLock lock(&mu_);
  std::optional<Recommendations> out;
  for (const std::string& cluster : clusters) {
    auto it = entries_.find({cluster, profile_key});
    if (it == entries_.end() || it->second.expires <= now) continue;
    if (!out.has_value()) out.emplace();
    out->cluster_scores[cluster] = it->second.rec.cluster_score;
    for (const auto& [node, score] : it->second.rec.node_scores) out->node_scores[{cluster, node}] = score;
  }
  return out;
}

}  // namespace codeco::swm
