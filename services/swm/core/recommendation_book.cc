#include "swm/core/recommendation_book.h"

#include <cmath>

namespace codeco::swm {

RecommendationBook::RecommendationBook(const Clock& clock, RecommendationBookOptions options)
    : clock_(clock), options_(options) {}

std::map<std::string, double> RecommendationBook::ProfileWeights(const Application& app) {
  if (app.performance_profile != "custom") return {{app.performance_profile, 1.0}};
  std::map<std::string, double> out;
  for (const auto& [profile, weight] : app.custom_profile_weights) {
    if (weight > 0 && std::isfinite(weight) && profile != "custom") out[profile] = weight;
  }
  return out;
}

void RecommendationBook::Record(const std::string& cluster, const std::string& profile,
                                ClusterRecommendation rec, absl::Duration valid_for) {
  const absl::Time now = clock_.Now();
  absl::MutexLock lock(&mu_);
  std::erase_if(entries_, [now](const auto& e) { return e.second.expires <= now; });
  const auto key = std::make_pair(cluster, profile);
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

bool RecommendationBook::Has(const std::string& cluster, const std::string& profile) const {
  const absl::Time now = clock_.Now();
  absl::MutexLock lock(&mu_);
  auto it = entries_.find({cluster, profile});
  return it != entries_.end() && it->second.expires > now;
}

std::optional<Recommendations> RecommendationBook::Collect(
    const std::vector<std::string>& clusters, const std::map<std::string, double>& profile_weights) const {
  const absl::Time now = clock_.Now();
  double total = 0;
  for (const auto& [profile, weight] : profile_weights) total += weight;
  if (!(total > 0)) return std::nullopt;
  absl::MutexLock lock(&mu_);
  std::optional<Recommendations> out;
  for (const std::string& cluster : clusters) {
    std::vector<std::pair<const ClusterRecommendation*, double>> parts;
    for (const auto& [profile, weight] : profile_weights) {
      auto it = entries_.find({cluster, profile});
      if (it == entries_.end() || it->second.expires <= now) break;
      parts.emplace_back(&it->second.rec, weight / total);
    }
    if (parts.size() != profile_weights.size()) continue;  // a profile is missing
    if (!out.has_value()) out.emplace();
    double cluster_score = 0;
    for (const auto& [rec, share] : parts) cluster_score += share * rec->cluster_score;
    out->cluster_scores[cluster] = cluster_score;
    for (const auto& [node, first] : parts.front().first->node_scores) {
      double score = 0;
      bool everywhere = true;
      for (const auto& [rec, share] : parts) {
        auto n = rec->node_scores.find(node);
        if (n == rec->node_scores.end()) {
          everywhere = false;
          break;
        }
        score += share * n->second;
      }
      if (everywhere) out->node_scores[{cluster, node}] = score;
    }
  }
  return out;
}

}  // namespace codeco::swm
