#include "swm/core/framework.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codeco/common/status.h"

namespace codeco::swm {

PluginStatus PluginStatus::Error(absl::Status status) {
  PluginStatus s(Code::kError, std::string(status.message()));
  s.error_ = status.ok() ? absl::InternalError("plugin error with OK status") : std::move(status);
  return s;
}

ClusterAggregate AggregateOf(const Cluster& cluster) {
  ClusterAggregate a{
      .name = cluster.name, .labels = cluster.labels, .intra_latency_ns = cluster.intra_latency_ns};
  for (const Node& n : cluster.nodes) {
    if (!n.schedulable) continue;
    Resources f = n.Free();
    a.capacity += n.capacity;
    a.free += f;
    ++a.node_count;
    if (f.cpu_millis > a.largest_free_node.cpu_millis ||
        (f.cpu_millis == a.largest_free_node.cpu_millis &&
         f.memory_bytes > a.largest_free_node.memory_bytes)) {
      a.largest_free_node = f;
    }
  }
  return a;
}

Resources Candidate::Free() const { return node != nullptr ? node->Free() : cluster->free; }
Resources Candidate::Capacity() const {
  return node != nullptr ? node->capacity : cluster->capacity;
}
Resources Candidate::Headroom() const {
  return node != nullptr ? node->Free() : cluster->largest_free_node;
}

CycleState::CycleState(const Application& app, const Federation& topology, Cluster* solving,
                       bool relax_soft)
    : app_(app), topology_(topology), solving_(solving), relax_soft_(relax_soft) {
  for (size_t i = 0; i < app.channels.size(); ++i) {
    channels_of_[app.channels[i].from].push_back(static_cast<int>(i));
    channels_of_[app.channels[i].to].push_back(static_cast<int>(i));
  }
}

const std::vector<int>& CycleState::ChannelsOf(const std::string& name) const {
  static const std::vector<int>* const kEmpty = new std::vector<int>();
  auto it = channels_of_.find(name);
  return it == channels_of_.end() ? *kEmpty : it->second;
}

int64_t CycleState::UsedBandwidth(const std::string& from, const std::string& to,
                                  ServiceClass cls) const {
  auto it = used_bw_.find({from, to, static_cast<int>(cls)});
  return it == used_bw_.end() ? 0 : it->second;
}

int64_t CycleState::FreeBandwidth(const std::string& from, const std::string& to,
                                  ServiceClass cls) const {
  const Link* link = topology_.FindLink(from, to);
  if (link == nullptr) return 0;
  return link->free_bandwidth_bps[static_cast<int>(cls)] - UsedBandwidth(from, to, cls);
}

void CycleState::AddBandwidth(const std::string& from, const std::string& to, ServiceClass cls,
                              int64_t delta) {
  used_bw_[{from, to, static_cast<int>(cls)}] += delta;
}

int CycleState::PlacedCount(const std::string& cluster, const std::string& node) const {
  int n = 0;
  for (const auto& [name, p] : placed_) {
    if (p.cluster == cluster && (node.empty() || p.node == node)) ++n;
  }
  return n;
}

CycleData* CycleState::Data(const std::string& key) const {
  auto it = data_.find(key);
  return it == data_.end() ? nullptr : it->second.get();
}

void CycleState::SetData(const std::string& key, std::unique_ptr<CycleData> data) {
  data_[key] = std::move(data);
}

void ScorePlugin::NormalizeScores(std::vector<double>& scores) const {
  for (double& s : scores) s = std::clamp(s, 0.0, 100.0);
}

void MinMaxNormalize(std::vector<double>& scores, bool invert) {
  if (scores.empty()) return;
  auto [lo, hi] = std::minmax_element(scores.begin(), scores.end());
  double min = *lo, max = *hi;
  for (double& s : scores) {
    if (max == min) {
      s = 0;
    } else {
      double x = (s - min) / (max - min);
      s = 100.0 * (invert ? 1.0 - x : x);
    }
  }
}

absl::Status PluginRegistry::Register(const std::string& name, Factory factory) {
  if (!factories_.emplace(name, std::move(factory)).second) {
    return absl::AlreadyExistsError("plugin \"" + name + "\" registered twice");
  }
  return absl::OkStatus();
}

const PluginRegistry::Factory* PluginRegistry::Find(const std::string& name) const {
  auto it = factories_.find(name);
  return it == factories_.end() ? nullptr : &it->second;
}

std::vector<std::string> PluginRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, f] : factories_) names.push_back(name);
  return names;
}

absl::StatusOr<std::unique_ptr<Framework>> Framework::Create(
    const Profile& profile, const PluginRegistry& registry, RecommendationSource* recommendations) {
  auto fw = std::unique_ptr<Framework>(new Framework());
  fw->name_ = profile.name;
  std::vector<PluginConfig> configs = profile.plugins;
  for (const char* builtin : {"NodeResourcesReserve", "ChannelBandwidthReserve"}) {
    bool present = std::any_of(configs.begin(), configs.end(),
                               [&](const PluginConfig& c) { return c.name == builtin; });
    if (!present) configs.push_back(PluginConfig{.name = builtin});
  }
  FieldErrors errors;
  for (size_t i = 0; i < configs.size(); ++i) {
    std::string path = absl::StrCat("plugins[", i, "]");
    const PluginRegistry::Factory* factory = registry.Find(configs[i].name);
    if (factory == nullptr) {
      errors.Add(path + ".name", "unknown plugin \"" + configs[i].name + "\"");
      continue;
    }
    if (configs[i].weight < 0) errors.Add(path + ".weight", "must be >= 0");
    PluginContext ctx{.config = &configs[i], .recommendations = recommendations};
    absl::StatusOr<std::unique_ptr<Plugin>> plugin = (*factory)(ctx);
    if (!plugin.ok()) {
      errors.Add(path + ".args", std::string(plugin.status().message()));
      continue;
    }
    if (auto* qs = dynamic_cast<const QueueSortPlugin*>(plugin->get())) {
      if (fw->queue_sort_ != nullptr) {
        errors.Add(path + ".name", "a profile has at most one QueueSort plugin");
      }
      fw->queue_sort_ = qs;
    }
    fw->plugins_.push_back(Enabled{std::move(*plugin), configs[i]});
  }
  RETURN_IF_ERROR(errors.ToStatus());
  for (const Enabled& e : fw->plugins_) {
    const Plugin* p = e.plugin.get();
    if (auto* f = dynamic_cast<const FilterPlugin*>(p)) fw->filters_.push_back({f, &e.config});
    if (auto* s = dynamic_cast<const ScorePlugin*>(p)) {
      if (e.config.weight > 0) fw->scorers_.push_back({s, &e.config});
    }
    if (auto* r = dynamic_cast<const ReservePlugin*>(p)) fw->reservers_.push_back({r, &e.config});
    if (auto* m = dynamic_cast<const PermitPlugin*>(p)) fw->permits_.push_back({m, &e.config});
  }
  return fw;
}

std::vector<int> Framework::QueueOrder(const Application& app) const {
  std::vector<int> order(app.workloads.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  if (queue_sort_ != nullptr) queue_sort_->Sort(app, order);
  return order;
}

absl::StatusOr<Selection> Framework::Select(CycleState& state, const Workload& w,
                                            const std::vector<Candidate>& candidates) const {
  Selection sel;
  sel.scores.assign(candidates.size(), -1.0);
  std::vector<int> feasible;
  std::map<std::string, int> reasons;
  for (size_t i = 0; i < candidates.size(); ++i) {
    bool fits = true;
    for (const Hook<FilterPlugin>& h : filters_) {
      if (h.config->soft && state.relax_soft()) continue;
      PluginStatus st = h.plugin->Filter(state, w, candidates[i]);
      if (st.is_error()) return st.error();
      if (!st.ok()) {
        ++reasons[st.reason()];
        fits = false;
        break;
      }
    }
    if (fits) feasible.push_back(static_cast<int>(i));
  }
  if (feasible.empty()) {
    std::vector<std::string> parts;
    bool cluster_level = !candidates.empty() && candidates[0].level == Level::kCluster;
    for (const auto& [reason, count] : reasons) {
      const char* noun =
          cluster_level ? (count == 1 ? "cluster" : "clusters") : (count == 1 ? "node" : "nodes");
      parts.push_back(absl::StrCat(count, " ", noun, ": ", reason));
    }
    sel.reason = candidates.empty() ? "no candidates" : absl::StrJoin(parts, "; ");
    return sel;
  }
  std::vector<double> total(feasible.size(), 0.0);
  std::vector<double> raw(feasible.size());
  for (const Hook<ScorePlugin>& h : scorers_) {
    if (h.config->soft && state.relax_soft()) continue;
    for (size_t k = 0; k < feasible.size(); ++k) {
      ASSIGN_OR_RETURN(raw[k], h.plugin->Score(state, w, candidates[feasible[k]]));
    }
    h.plugin->NormalizeScores(raw);
    for (size_t k = 0; k < feasible.size(); ++k) total[k] += h.config->weight * raw[k];
  }
  double best = -1;
  for (size_t k = 0; k < feasible.size(); ++k) {
    sel.scores[feasible[k]] = total[k];
    if (total[k] > best) {
      best = total[k];
      sel.best = feasible[k];
    }
  }
  return sel;
}

PluginStatus Framework::ReserveAndPermit(CycleState& state, const Workload& w,
                                         const Candidate& c) const {
  for (const Hook<ReservePlugin>& h : reservers_) {
    PluginStatus st = h.plugin->Reserve(state, w, c);
    if (!st.ok()) {
      Unreserve(state, w, c);
      return st;
    }
  }
  for (const Hook<PermitPlugin>& h : permits_) {
    if (h.config->soft && state.relax_soft()) continue;
    PluginStatus st = h.plugin->Permit(state, w, c);
    if (!st.ok()) {
      Unreserve(state, w, c);
      return st;
    }
  }
  return PluginStatus::Success();
}

void Framework::Unreserve(CycleState& state, const Workload& w, const Candidate& c) const {
  for (auto it = reservers_.rbegin(); it != reservers_.rend(); ++it) {
    it->plugin->Unreserve(state, w, c);
  }
}

}  // namespace codeco::swm
