#include "pdlc/core/scores.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace codeco::pdlc {
namespace {

const std::vector<std::string>& BuiltInCriteria() {
  static const std::vector<std::string> kNames = {"carbon",  "cost",          "cpu_headroom", "energy",
                                                  "failure", "latency", "memory_headroom", "stability"};
  return kNames;
}

bool Known(double v) { return std::isfinite(v); }

double Clamp100(double v) { return std::clamp(v, 0.0, 100.0); }

// The worse of the share used now and the forecast one (kUnknown if neither).
double WorseOf(double now, double forecast) {
  if (!Known(now)) return forecast;
  return Known(forecast) ? std::max(now, forecast) : now;
}

// 100 x free share at the worse of now and the forecast.
double Headroom(double now, double forecast) {
  const double used = WorseOf(now, forecast);
  return Known(used) ? Clamp100(100.0 * (1.0 - used)) : kUnknown;
}

// 100 x reference / (reference + value) for each known, non-negative value:
// 100 at 0, 50 at the reference, towards 0 as the value grows. The scale is
// the same in every cluster, so cluster scores compare across a federation.
std::vector<double> Absolute(const std::vector<double>& raw, double reference) {
  std::vector<double> out(raw.size(), kUnknown);
  for (size_t i = 0; i < raw.size(); ++i) {
    if (Known(raw[i]) && raw[i] >= 0) out[i] = 100.0 * reference / (reference + raw[i]);
  }
  return out;
}

// Min-max normalises the known values of `raw` across nodes: best 100, worst 0,
// all equal 100.
std::vector<double> Relative(const std::vector<double>& raw, bool higher_is_better) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double v : raw) {
    if (!Known(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  std::vector<double> out(raw.size(), kUnknown);
  for (size_t i = 0; i < raw.size(); ++i) {
    if (!Known(raw[i])) continue;
    if (hi - lo <= 1e-12 * std::max(1.0, std::abs(hi))) {
      out[i] = 100;
    } else {
      const double t = (raw[i] - lo) / (hi - lo);
      out[i] = 100.0 * (higher_is_better ? t : 1.0 - t);
    }
  }
  return out;
}

bool IsIdentifier(const std::string& name) {
  if (name.empty() || name.size() > 63 || !(name[0] >= 'a' && name[0] <= 'z')) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

}  // namespace

ScoringCriteria::ScoringCriteria() = default;

absl::Status ScoringCriteria::RegisterMetric(const std::string& name, MetricCriterion criterion) {
  if (!IsIdentifier(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("criterion \"", name, "\": must be a lower-case identifier of at most 63 characters"));
  }
  if (Has(name)) return absl::InvalidArgumentError(absl::StrCat("criterion \"", name, "\": already registered"));
  if (criterion.metric.empty()) return absl::InvalidArgumentError(absl::StrCat("criterion \"", name, "\": metric is empty"));
  metric_criteria_.emplace(name, std::move(criterion));
  return absl::OkStatus();
}

bool ScoringCriteria::Has(const std::string& name) const {
  const auto& b = BuiltInCriteria();
  return std::find(b.begin(), b.end(), name) != b.end() || metric_criteria_.count(name) > 0;
}

std::vector<std::string> ScoringCriteria::Names() const {
  std::set<std::string> names(BuiltInCriteria().begin(), BuiltInCriteria().end());
  for (const auto& [name, _] : metric_criteria_) names.insert(name);
  return {names.begin(), names.end()};
}

const char* ScoringProfileName(ScoringProfile profile) {
  switch (profile) {
    case ScoringProfile::kLatency: return "latency";
    case ScoringProfile::kGreenness: return "greenness";
    case ScoringProfile::kResilience: return "resilience";
    case ScoringProfile::kCost: return "cost";
    case ScoringProfile::kCustom: return "custom";
  }
  return "latency";
}

std::map<std::string, double> ProfileWeights(ScoringProfile profile) {
  switch (profile) {
    case ScoringProfile::kLatency:
      return {{"latency", 0.4}, {"cpu_headroom", 0.35}, {"memory_headroom", 0.25}};
    case ScoringProfile::kGreenness:
      return {{"energy", 0.45}, {"carbon", 0.35}, {"cpu_headroom", 0.2}};
    case ScoringProfile::kResilience:
      return {{"failure", 0.45}, {"stability", 0.25}, {"cpu_headroom", 0.15}, {"memory_headroom", 0.15}};
    case ScoringProfile::kCost:
      return {{"cost", 0.7}, {"cpu_headroom", 0.3}};
    case ScoringProfile::kCustom:
      return {};
  }
  return {};
}

absl::Status ValidateWeights(const std::map<std::string, double>& weights, const ScoringCriteria& criteria) {
  double total = 0;
  for (const auto& [name, weight] : weights) {
    const std::string field = absl::StrCat("custom_weights[\"", name.substr(0, 64), "\"]");
    if (!criteria.Has(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": not a criterion (known: ", absl::StrJoin(criteria.Names(), ", "), ")"));
    }
    if (!std::isfinite(weight) || weight < 0) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": must be a finite number >= 0, got ", weight));
    }
    total += weight;
  }
  if (!(total > 0)) return absl::InvalidArgumentError("custom_weights: at least one weight must be > 0");
  return absl::OkStatus();
}

std::vector<NodeScore> ScoreNodes(const std::vector<NodeContext>& nodes, const std::map<std::string, double>& weights,
                                  const ScoringCriteria& criteria, const WorkloadRequests& requests) {
  const size_t n = nodes.size();
  // Each criterion's score per node (kUnknown where it cannot be computed).
  std::map<std::string, std::vector<double>> by_criterion;
  auto column = [&](auto value_of) {
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = value_of(nodes[i]);
    return v;
  };
  for (const auto& [name, weight] : weights) {
    if (weight <= 0) continue;
    std::vector<double>& out = by_criterion[name];
    if (name == "cpu_headroom") {
      out = column([](const NodeContext& c) { return Headroom(c.cpu_used_fraction, c.cpu_forecast_fraction); });
    } else if (name == "memory_headroom") {
      out = column([](const NodeContext& c) { return Headroom(c.memory_used_fraction, c.memory_forecast_fraction); });
    } else if (name == "energy") {
      out = Absolute(column([](const NodeContext& c) { return c.watts_per_core; }), kReferenceWattsPerCore);
    } else if (name == "carbon") {
      out = Absolute(column([](const NodeContext& c) { return c.carbon_g_per_kwh; }), kReferenceCarbonGPerKwh);
    } else if (name == "latency") {
      out = Absolute(column([](const NodeContext& c) { return c.latency_ms; }), kReferenceLatencyMs);
    } else if (name == "cost") {
      out = Absolute(column([](const NodeContext& c) { return c.cost_per_core_hour; }), kReferenceCostPerCoreHour);
    } else if (name == "failure") {
      // Each failure halves the score; a restart counts a quarter of a failure.
      out = column([](const NodeContext& c) {
        return 100.0 * std::pow(0.5, std::max(0, c.failures) + 0.25 * std::max(0, c.restarts));
      });
    } else if (name == "stability") {
      // A forecast spread of 0.1 in log terms (about +-10 %) scores 37.
      out = column([](const NodeContext& c) {
        return c.forecast_spread > 0 ? 100.0 * std::exp(-c.forecast_spread / 0.1) : kUnknown;
      });
    } else if (auto it = criteria.metric_criteria().find(name); it != criteria.metric_criteria().end()) {
      const MetricCriterion& mc = it->second;
      out = Relative(column([&](const NodeContext& c) {
                       auto m = c.metrics.find(mc.metric);
                       return m == c.metrics.end() ? kUnknown : m->second;
                     }),
                     mc.higher_is_better);
    } else {
      out.assign(n, kUnknown);
    }
  }

  std::vector<NodeScore> scores(n);
  for (size_t i = 0; i < n; ++i) {
    NodeScore& s = scores[i];
    const NodeContext& c = nodes[i];
    s.node = c.node;
    double sum = 0, weight_sum = 0;
    for (const auto& [name, values] : by_criterion) {
      if (!Known(values[i])) {
        s.notes.push_back(absl::StrCat(name, ": no data"));
        continue;
      }
      s.components[name] = values[i];
      sum += weights.at(name) * values[i];
      weight_sum += weights.at(name);
    }
    s.score = weight_sum > 0 ? Clamp100(sum / weight_sum) : 0;
    if (weight_sum <= 0) s.notes.push_back("no criterion of the profile has data");
    if (!c.ready) {
      s.score = 0;
      s.notes.push_back("node not ready");
    }
    // Room is what the worse of now and the forecast leaves; with usage
    // unknown, the whole capacity (more than that never fits).
    double cpu_used = WorseOf(c.cpu_used_fraction, c.cpu_forecast_fraction);
    double mem_used = WorseOf(c.memory_used_fraction, c.memory_forecast_fraction);
    if (!Known(cpu_used)) cpu_used = 0;
    if (!Known(mem_used)) mem_used = 0;
    if (requests.cpu_millicores > 0 && c.cpu_capacity_millicores > 0 &&
        c.cpu_capacity_millicores * (1 - cpu_used) < requests.cpu_millicores) {
      s.score = 0;
      s.notes.push_back(absl::StrCat("no room for ", requests.cpu_millicores, " millicores"));
    }
    if (requests.memory_bytes > 0 && c.memory_capacity_bytes > 0 &&
        c.memory_capacity_bytes * (1 - mem_used) < requests.memory_bytes) {
      s.score = 0;
      s.notes.push_back(absl::StrCat("no room for ", requests.memory_bytes, " bytes of memory"));
    }
  }
  return scores;
}

double ClusterScore(const std::vector<NodeContext>& nodes, const std::vector<NodeScore>& scores) {
  double sum = 0, weight_sum = 0;
  bool capacities_known = std::all_of(nodes.begin(), nodes.end(),
                                      [](const NodeContext& c) { return c.cpu_capacity_millicores > 0; });
  for (size_t i = 0; i < nodes.size() && i < scores.size(); ++i) {
    const double w = capacities_known ? nodes[i].cpu_capacity_millicores : 1.0;
    sum += w * scores[i].score;
    weight_sum += w;
  }
  return weight_sum > 0 ? sum / weight_sum : 0;
}

double ScoreHistory::Record(const std::string& profile_key, const std::string& subject, double score) {
  auto& q = scores_[{profile_key, subject}];
  q.push_back(score);
  while (q.size() > depth_) q.pop_front();
  return Stability(profile_key, subject);
}

double ScoreHistory::Stability(const std::string& profile_key, const std::string& subject) const {
  auto it = scores_.find({profile_key, subject});
  if (it == scores_.end() || it->second.size() < 2) return 1.0;
  const auto& q = it->second;
  const double mean = std::accumulate(q.begin(), q.end(), 0.0) / static_cast<double>(q.size());
  double var = 0;
  for (double v : q) var += (v - mean) * (v - mean);
  const double stddev = std::sqrt(var / static_cast<double>(q.size()));
  return std::clamp(1.0 - stddev / 25.0, 0.0, 1.0);
}

void ScoreHistory::Retain(const std::vector<std::string>& keep) {
  const std::set<std::string> k(keep.begin(), keep.end());
  for (auto it = scores_.begin(); it != scores_.end();) {
    it = k.count(it->first.second) ? std::next(it) : scores_.erase(it);
  }
}

}  // namespace codeco::pdlc
