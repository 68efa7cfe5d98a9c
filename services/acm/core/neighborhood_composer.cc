#include "acm/core/neighborhood_composer.h"
#include "codeco/common/proto_util.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace codeco::acm {
namespace {

constexpr double kEarthRadiusKm = 6371.0;
constexpr int64_t kBaseLatencyNs = 1'000'000;  // 1 ms inside a region
constexpr int64_t kNsPerKm = 10'000;           // 10 us per km

// CODECO's securityClass scale, None < Low < Medium < Good < High (its CRD
// lists High, Good, Medium, Low, None); 0 asks for nothing.
int SecurityLevel(std::string text) {
  text = absl::AsciiStrToLower(text);
  if (text == "low") return 1;
  if (text == "medium") return 2;
  if (text == "good") return 3;
  if (text == "high") return 4;
  return 0;
}

// CODECO's complianceClass scale, Low < Medium < High; 0 for anything else
// (a regulation name such as gdpr, matched by name).
int ComplianceLevel(std::string_view text) {
  if (text == "low") return 1;
  if (text == "medium") return 2;
  if (text == "high") return 3;
  return 0;
}

// True if a cluster whose codeco.io/compliance label lists `have` (lower
// case) meets `wanted` (lower case): a level on CODECO's scale is met by that
// level or a higher one; a regulation name only by itself.
bool MeetsCompliance(const std::vector<std::string>& have, const std::string& wanted) {
  const int level = ComplianceLevel(wanted);
  return std::any_of(have.begin(), have.end(), [&](const std::string& h) {
    return h == wanted || (level > 0 && ComplianceLevel(h) >= level);
  });
}

double DistanceKm(double lat1, double lon1, double lat2, double lon2) {
  constexpr double kRad = M_PI / 180.0;
  double dlat = (lat2 - lat1) * kRad;
  double dlon = (lon2 - lon1) * kRad;
  double a = std::sin(dlat / 2) * std::sin(dlat / 2) + std::cos(lat1 * kRad) *
                                                           std::cos(lat2 * kRad) *
                                                           std::sin(dlon / 2) * std::sin(dlon / 2);
  return 2 * kEarthRadiusKm * std::asin(std::min(1.0, std::sqrt(a)));
}

// Capacity band: log2 of allocatable whole cores (0 for under one core).
int CpuBand(const v1::Cluster& c) {
  int64_t cores = c.capacity().allocatable().cpu_millicores() / 1000;
  int band = 0;
  while (cores > 1) {
    cores >>= 1;
    ++band;
  }
  return band;
}

}  // namespace

void NeighborhoodComposer::Partition(std::vector<v1::Cluster> clusters) {
  entries_.clear();
  classes_.clear();
  by_name_.clear();
  region_centroids_.clear();
  std::map<std::string, int> class_index;
  std::map<std::string, std::pair<Point, int>> sums;
  for (v1::Cluster& c : clusters) {
    Entry e;
    const auto& l = c.cluster_labels();
    e.has_geo = l.latitude() != 0 || l.longitude() != 0;
    auto sec = c.metadata().labels().find("codeco.io/security-class");
    e.security_level = sec == c.metadata().labels().end() ? 0 : SecurityLevel(sec->second);
    auto comp = c.metadata().labels().find("codeco.io/compliance");
    if (comp != c.metadata().labels().end()) {
      for (absl::string_view part : absl::StrSplit(comp->second, ',', absl::SkipWhitespace())) {
        e.compliance.push_back(absl::AsciiStrToLower(absl::StripAsciiWhitespace(part)));
      }
    }
    std::string id = absl::StrCat(
        TierName(l.tier()), "/", l.region().empty() ? "-" : l.region(), "/cpu", CpuBand(c), "/co2-",
        static_cast<int>(c.energy_profile().carbon_intensity_g_per_kwh() / 100));
    auto [it, added] = class_index.emplace(id, static_cast<int>(classes_.size()));
    if (added) classes_.push_back(Class{id, l.region(), {}});
    e.class_index = it->second;
    classes_[it->second].members.push_back(static_cast<int>(entries_.size()));
    if (e.has_geo && !l.region().empty()) {
      auto& [sum, n] = sums[l.region()];
      sum.lat += l.latitude();
      sum.lon += l.longitude();
      ++n;
    }
    by_name_[c.metadata().name()] = static_cast<int>(entries_.size());
    e.cluster = std::move(c);
    entries_.push_back(std::move(e));
  }
  for (auto& [region, s] : sums) {
    region_centroids_[region] = Point{s.first.lat / s.second, s.first.lon / s.second};
  }
}

std::string NeighborhoodComposer::ClassOf(const std::string& cluster) const {
  auto it = by_name_.find(cluster);
  return it == by_name_.end() ? "" : classes_[entries_[it->second].class_index].id;
}

absl::StatusOr<v1::Neighborhood> NeighborhoodComposer::Select(
    const v1::ApplicationSpec& spec, const SelectionOptions& options) const {
  if (options.max_members <= 0) {
    return absl::InvalidArgumentError("max_members: must be at least 1");
  }
  const v1::Intents& intents = spec.intents();
  std::set<std::string> regions(intents.allowed_regions().begin(), intents.allowed_regions().end());
  std::set<std::string> countries(intents.allowed_countries().begin(),
                                  intents.allowed_countries().end());
  const int wanted_security = SecurityLevel(spec.security_class());
  const std::string wanted_compliance = absl::AsciiStrToLower(spec.compliance_class());

  // The smallest replica any member must be able to host.
  int64_t min_cpu = INT64_MAX, min_mem = INT64_MAX;
  for (const auto& s : spec.services()) {
    min_cpu = std::min(min_cpu, s.requests().cpu_millicores());
    min_mem = std::min(min_mem, s.requests().memory_bytes());
  }
  if (spec.services().empty()) min_cpu = min_mem = 0;

  // Where the origin is, when a latency bound needs it.
  std::optional<Point> origin;
  std::string origin_region;
  if (!intents.origin().empty()) {
    auto cl = by_name_.find(intents.origin());
    if (cl != by_name_.end()) {
      const auto& l = entries_[cl->second].cluster.cluster_labels();
      origin_region = l.region();
      if (entries_[cl->second].has_geo) origin = Point{l.latitude(), l.longitude()};
    } else {
      origin_region = intents.origin();
      auto rc = region_centroids_.find(intents.origin());
      if (rc != region_centroids_.end()) origin = rc->second;
    }
  }
  auto latency_to_origin = [&](const Entry& e) -> std::optional<int64_t> {
    const auto& l = e.cluster.cluster_labels();
    if (origin && e.has_geo) {
      return kBaseLatencyNs +
             static_cast<int64_t>(
                 DistanceKm(origin->lat, origin->lon, l.latitude(), l.longitude()) * kNsPerKm);
    }
    if (!origin_region.empty() && l.region() == origin_region) return kBaseLatencyNs;
    return std::nullopt;
  };

  struct Candidate {
    int entry;
    double score;
  };
  std::vector<Candidate> candidates;
  int rejected_region = 0, rejected_health = 0, rejected_country = 0, rejected_compliance = 0,
      rejected_security = 0, rejected_capacity = 0, rejected_latency = 0;
  const auto profile = spec.performance_profile();
  const auto& weights = spec.custom_profile_weights();
  auto weight = [&](const char* key) {
    auto it = weights.find(key);
    return it == weights.end() ? 0.0 : it->second;
  };
  for (const Class& cls : classes_) {
    if (!regions.empty() && !regions.count(cls.region)) {
      rejected_region += static_cast<int>(cls.members.size());
      continue;  // the whole class is out: never visit its clusters
    }
    for (int index : cls.members) {
      const Entry& e = entries_[index];
      const v1::Cluster& c = e.cluster;
      if (c.role() != v1::CLUSTER_ROLE_MC || c.health() == v1::CLUSTER_HEALTH_UNREACHABLE ||
          c.health() == v1::CLUSTER_HEALTH_UNSPECIFIED) {
        ++rejected_health;
        continue;
      }
      if (!countries.empty() && !countries.count(c.cluster_labels().country())) {
        ++rejected_country;
        continue;
      }
      if (!wanted_compliance.empty() && !MeetsCompliance(e.compliance, wanted_compliance)) {
        ++rejected_compliance;
        continue;
      }
      if (wanted_security > 0 && e.security_level < wanted_security) {
        ++rejected_security;
        continue;
      }
      const auto& largest = c.capacity().largest_free_node();
      if (largest.cpu_millicores() < min_cpu || largest.memory_bytes() < min_mem) {
        ++rejected_capacity;
        continue;
      }
      std::optional<int64_t> latency = latency_to_origin(e);
      if (intents.max_latency_to_origin_ns() > 0 &&
          (!latency || *latency > intents.max_latency_to_origin_ns())) {
        ++rejected_latency;
        continue;
      }
      // Criteria, each in 0..1, higher is better.
      const auto& alloc = c.capacity().allocatable();
      const auto& free = c.capacity().free();
      double free_ratio = alloc.cpu_millicores() > 0
                              ? static_cast<double>(free.cpu_millicores()) / alloc.cpu_millicores()
                              : 0.0;
      double near = latency ? 1.0 / (1.0 + static_cast<double>(*latency) / 1e7) : 0.0;
      double green = 1.0 / (1.0 + c.energy_profile().carbon_intensity_g_per_kwh() / 100.0);
      double ready =
          c.capacity().node_count() > 0
              ? static_cast<double>(c.capacity().ready_node_count()) / c.capacity().node_count()
              : 0.0;
      double resilience =
          0.5 * ready + 0.5 * free_ratio - (c.health() == v1::CLUSTER_HEALTH_DEGRADED ? 0.5 : 0.0);
      double cores = std::max<double>(1.0, alloc.cpu_millicores() / 1000.0);
      double cheap = 1.0 / (1.0 + c.energy_profile().max_watts() / cores / 10.0);
      double score;
      switch (profile) {
        case common::v1::PERFORMANCE_PROFILE_LATENCY:
          score = latency ? near : 0.1 * free_ratio;
          break;
        case common::v1::PERFORMANCE_PROFILE_GREENNESS:
          score = green;
          break;
        case common::v1::PERFORMANCE_PROFILE_RESILIENCE:
          score = resilience;
          break;
        case common::v1::PERFORMANCE_PROFILE_COST:
          score = cheap;
          break;
        case common::v1::PERFORMANCE_PROFILE_CUSTOM:
          score = weight("latency") * near + weight("greenness") * green +
                  weight("resilience") * resilience + weight("cost") * cheap;
          break;
        default:
          score = free_ratio;
      }
      candidates.push_back({index, score});
    }
  }
  if (candidates.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no cluster meets the hard constraints of \"", spec.app_name(), "\" among ",
        entries_.size(), " (outside allowed regions: ", rejected_region,
        ", not ready or not an MC: ", rejected_health, ", outside allowed countries: ",
        rejected_country, ", without compliance \"", spec.compliance_class(),
        "\": ", rejected_compliance, ", below security class: ", rejected_security,
        ", too small: ", rejected_capacity, ", too far from the origin: ", rejected_latency, ")"));
  }
  auto better = [&](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return a.score > b.score;
    return entries_[a.entry].cluster.metadata().name() <
           entries_[b.entry].cluster.metadata().name();
  };
  std::vector<Candidate> chosen;
  const size_t k = std::min<size_t>(options.max_members, candidates.size());
  if (profile == common::v1::PERFORMANCE_PROFILE_RESILIENCE) {
    // Spread over similarity classes: the best of each class in turn.
    std::sort(candidates.begin(), candidates.end(), better);
    std::map<int, int> per_class;
    for (int round = 0; chosen.size() < k; ++round) {
      for (const Candidate& cand : candidates) {
        if (chosen.size() == k) break;
        int cls = entries_[cand.entry].class_index;
        if (per_class[cls] == round) {
          ++per_class[cls];
          chosen.push_back(cand);
        }
      }
    }
  } else {
    std::partial_sort(candidates.begin(), candidates.begin() + k, candidates.end(), better);
    chosen.assign(candidates.begin(), candidates.begin() + k);
  }

  v1::Neighborhood nb;
  nb.set_id(absl::StrCat("nb-", spec.app_name()));
  nb.set_application(spec.app_name());
  std::set<std::string> classes;
  for (const Candidate& cand : chosen) {
    const Entry& e = entries_[cand.entry];
    v1::NeighborhoodMember* m = nb.add_members();
    m->set_cluster(e.cluster.metadata().name());
    m->set_partition_class(classes_[e.class_index].id);
    *m->mutable_endpoints() = e.cluster.endpoints();
    classes.insert(classes_[e.class_index].id);
  }
  for (const auto& c : classes) nb.add_partition_classes(c);
  if (!regions.empty()) nb.add_satisfied_constraints("allowed_regions");
  if (!countries.empty()) nb.add_satisfied_constraints("allowed_countries");
  if (!spec.compliance_class().empty()) nb.add_satisfied_constraints("compliance_class");
  if (wanted_security > 0) nb.add_satisfied_constraints("security_class");
  if (intents.max_latency_to_origin_ns() > 0) {
    nb.add_satisfied_constraints("max_latency_to_origin_ns");
  }
  return nb;
}

}  // namespace codeco::acm
