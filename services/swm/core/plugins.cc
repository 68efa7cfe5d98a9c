#include "swm/core/plugins.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"

namespace codeco::swm {

void InMemoryRecommendationSource::Set(const std::string& application,
                                       const std::string& performance_profile,
                                       Recommendations recs) {
  absl::MutexLock lock(&mu_);
  recs_[{application, performance_profile}] = std::move(recs);
}

absl::StatusOr<std::optional<Recommendations>> InMemoryRecommendationSource::Get(
    const Application& app) {
  absl::MutexLock lock(&mu_);
  auto it = recs_.find({app.name, app.performance_profile});
  if (it == recs_.end()) return std::optional<Recommendations>();
  return std::optional<Recommendations>(it->second);
}

std::optional<int64_t> OriginLatencyNs(const Federation& topology, const std::string& origin,
                                       const std::string& cluster) {
  const Cluster* c = topology.FindCluster(cluster);
  if (c == nullptr) return std::nullopt;
  if (origin == cluster) return c->intra_latency_ns;
  const Link* link = topology.FindLink(origin, cluster);
  if (link == nullptr) return std::nullopt;
  return link->latency_ns + c->intra_latency_ns;
}

bool DataMayLiveIn(const Workload& w, const std::string& cluster, const std::string& region) {
  if (!w.data_clusters.empty()) {
    return std::find(w.data_clusters.begin(), w.data_clusters.end(), cluster) !=
           w.data_clusters.end();
  }
  return w.data_locality.empty() || w.data_locality == cluster || w.data_locality == region;
}

std::vector<const Cluster*> LocatedClusters(const Federation& topology, const Workload& w) {
  std::vector<const Cluster*> out;
  if (!w.data_clusters.empty()) {
    for (const std::string& name : w.data_clusters) {
      const Cluster* c = topology.FindCluster(name);
      if (c == nullptr) return {};  // held somewhere this view does not show
      out.push_back(c);
    }
    return out;
  }
  if (w.data_locality.empty()) return out;
  if (const Cluster* c = topology.FindCluster(w.data_locality)) return {c};
  for (const Cluster& c : topology.clusters()) {
    if (DataMayLiveIn(w, c.name, c.labels.region)) out.push_back(&c);  // the region's clusters
  }
  return out;
}

namespace {

// The check of a channel to a peer not placed yet whose data pins it to a
// few clusters: `at` passes when one of them is close enough, or when the
// view lacks a link to tell. Placing the other end first where the peer
// cannot follow would fail the application later.
PluginStatus CheckChannelToLocatedPeer(const CycleState& state, const Channel& ch,
                                       const Workload& peer, const Placement& at) {
  if (ch.max_delay_ns <= 0) return PluginStatus::Success();
  const std::vector<const Cluster*> where = LocatedClusters(state.topology(), peer);
  if (where.empty()) return PluginStatus::Success();
  int64_t nearest = std::numeric_limits<int64_t>::max();
  std::string nearest_cluster;
  for (const Cluster* c : where) {
    std::optional<int64_t> lat = PathLatencyNs(state.topology(), at, Placement{c->name, ""});
    if (!lat.has_value()) return PluginStatus::Success();  // cannot tell
    if (*lat < nearest) {
      nearest = *lat;
      nearest_cluster = c->name;
    }
  }
  if (nearest <= ch.max_delay_ns) return PluginStatus::Success();
  return PluginStatus::Unschedulable(
      absl::StrCat("channel ", ch.name, ": latency ", nearest, "ns to ", peer.name,
                   " (its data is in ", nearest_cluster, ") > max ", ch.max_delay_ns, "ns"));
}

}  // namespace

PluginStatus CheckChannels(const CycleState& state, const Workload& w, const Placement& at) {
  const Application& app = state.app();
  std::map<std::tuple<std::string, std::string, int>, int64_t> need;
  for (int ci : state.ChannelsOf(w.name)) {
    const Channel& ch = app.channels[ci];
    const std::string& peer = ch.from == w.name ? ch.to : ch.from;
    auto it = state.placed().find(peer);
    if (it == state.placed().end()) {
      const int pi = app.WorkloadIndex(peer);
      if (pi < 0) continue;
      PluginStatus ahead = CheckChannelToLocatedPeer(state, ch, app.workloads[pi], at);
      if (!ahead.ok()) return ahead;
      continue;
    }
    Placement from = ch.from == w.name ? at : it->second;
    Placement to = ch.from == w.name ? it->second : at;
    std::optional<int64_t> lat = PathLatencyNs(state.topology(), from, to);
    if (!lat.has_value()) {
      return PluginStatus::Unschedulable(
          absl::StrCat("channel ", ch.name, ": no direct link ", from.cluster, " -> ", to.cluster));
    }
    if (ch.max_delay_ns > 0 && *lat > ch.max_delay_ns) {
      return PluginStatus::Unschedulable(absl::StrCat("channel ", ch.name, ": latency ", *lat,
                                                      "ns > max ", ch.max_delay_ns, "ns"));
    }
    if (from.cluster != to.cluster && ch.min_bandwidth_bps > 0) {
      need[{from.cluster, to.cluster, static_cast<int>(ch.service_class)}] += ch.min_bandwidth_bps;
    }
  }
  for (const auto& [key, bps] : need) {
    const auto& [from, to, cls] = key;
    int64_t free = state.FreeBandwidth(from, to, static_cast<ServiceClass>(cls));
    if (bps > free) {
      return PluginStatus::Unschedulable(
          absl::StrCat("link ", from, " -> ", to, ": needs ", bps, "bps, ", free, "bps free"));
    }
  }
  return PluginStatus::Success();
}

namespace {

double Arg(const PluginContext& ctx, const std::string& name, double def) {
  auto it = ctx.config->args.find(name);
  return it == ctx.config->args.end() ? def : it->second;
}

absl::Status CheckArgs(const PluginContext& ctx, const std::set<std::string>& known) {
  for (const auto& [name, value] : ctx.config->args) {
    if (!known.count(name)) return absl::InvalidArgumentError("unknown argument \"" + name + "\"");
  }
  return absl::OkStatus();
}

Placement PlacementOf(const Candidate& c) {
  return Placement{c.cluster->name, c.node != nullptr ? c.node->name : ""};
}

double Ratio(int64_t num, int64_t den) {
  return den <= 0 ? 0.0 : static_cast<double>(num) / static_cast<double>(den);
}

// ---- Filters ----

class NodeResourcesFit final : public FilterPlugin {
 public:
  std::string Name() const override { return "NodeResourcesFit"; }
  PluginStatus Filter(CycleState&, const Workload& w, const Candidate& c) const override {
    Resources h = c.Headroom();
    if (w.requests.cpu_millis > h.cpu_millis)
      return PluginStatus::Unschedulable("insufficient cpu");
    if (w.requests.memory_bytes > h.memory_bytes) {
      return PluginStatus::Unschedulable("insufficient memory");
    }
    if (w.requests.gpu > h.gpu) return PluginStatus::Unschedulable("insufficient gpu");
    if (c.node != nullptr && !c.node->schedulable) {
      return PluginStatus::Unschedulable("node not schedulable");
    }
    return PluginStatus::Success();
  }
};

class SafetyThreshold final : public FilterPlugin {
 public:
  explicit SafetyThreshold(double threshold) : threshold_(threshold) {}
  std::string Name() const override { return "SafetyThreshold"; }
  PluginStatus Filter(CycleState&, const Workload& w, const Candidate& c) const override {
    Resources cap = c.Capacity();
    Resources used = cap - c.Free() + w.requests;
    if (Ratio(used.cpu_millis, cap.cpu_millis) > threshold_ ||
        Ratio(used.memory_bytes, cap.memory_bytes) > threshold_) {
      return PluginStatus::Unschedulable(
          absl::StrCat("usage would exceed the safety threshold of ", threshold_ * 100, "%"));
    }
    return PluginStatus::Success();
  }

 private:
  double threshold_;
};

class AllowedLocations final : public FilterPlugin {
 public:
  std::string Name() const override { return "AllowedLocations"; }
  PluginStatus Filter(CycleState&, const Workload& w, const Candidate& c) const override {
    const ClusterLabels& l = c.cluster->labels;
    if (!w.allowed_regions.empty() && std::find(w.allowed_regions.begin(), w.allowed_regions.end(),
                                                l.region) == w.allowed_regions.end()) {
      return PluginStatus::Unschedulable("region \"" + l.region + "\" not allowed");
    }
    if (!w.allowed_countries.empty() &&
        std::find(w.allowed_countries.begin(), w.allowed_countries.end(), l.country) ==
            w.allowed_countries.end()) {
      return PluginStatus::Unschedulable("country \"" + l.country + "\" not allowed");
    }
    if (!DataMayLiveIn(w, c.cluster->name, l.region)) {
      return PluginStatus::Unschedulable(
          w.data_clusters.empty() ? "its data lives in \"" + w.data_locality + "\""
                                  : "its data set \"" + w.data_locality + "\" is not held here");
    }
    return PluginStatus::Success();
  }
};

class OriginLatency final : public FilterPlugin {
 public:
  std::string Name() const override { return "OriginLatency"; }
  PluginStatus Filter(CycleState& state, const Workload& w, const Candidate& c) const override {
    if (w.origin_cluster.empty() || w.max_latency_to_origin_ns <= 0) {
      return PluginStatus::Success();
    }
    std::optional<int64_t> lat =
        OriginLatencyNs(state.topology(), w.origin_cluster, c.cluster->name);
    if (!lat.has_value()) {
      return PluginStatus::Unschedulable("no direct link from origin " + w.origin_cluster);
    }
    if (*lat > w.max_latency_to_origin_ns) {
      return PluginStatus::Unschedulable(
          absl::StrCat("latency to origin ", *lat, "ns > max ", w.max_latency_to_origin_ns, "ns"));
    }
    return PluginStatus::Success();
  }
};

class ChannelConstraints final : public FilterPlugin {
 public:
  std::string Name() const override { return "ChannelConstraints"; }
  PluginStatus Filter(CycleState& state, const Workload& w, const Candidate& c) const override {
    return CheckChannels(state, w, PlacementOf(c));
  }
};

class NumberOfLocations final : public FilterPlugin {
 public:
  explicit NumberOfLocations(int max) : max_(max) {}
  std::string Name() const override { return "NumberOfLocations"; }
  PluginStatus Filter(CycleState& state, const Workload& w, const Candidate& c) const override {
    // An application's own numberOfLocations is the coordinator's to apply
    // (it spreads first, and bursts); this caps the others at `max`.
    if (w.max_locations > 0) return PluginStatus::Success();
    const Workload capped{.name = w.name, .service = w.service, .max_locations = max_};
    std::string refused =
        LocationSpreadRefusal(state.app(), state.placed(), capped, c.cluster->name, false, false);
    if (!refused.empty()) return PluginStatus::Unschedulable(std::move(refused));
    return PluginStatus::Success();
  }

 private:
  int max_;
};

// mck8s cluster affinity: preferred clusters first; with substitution (and
// bursting when they are full) the nearest other clusters by measured latency.
class ClusterAffinity final : public FilterPlugin, public ScorePlugin {
 public:
  ClusterAffinity(bool substitute, int64_t burst_radius_ns)
      : substitute_(substitute), burst_radius_ns_(burst_radius_ns) {}
  std::string Name() const override { return "ClusterAffinity"; }
  PluginStatus Filter(CycleState& state, const Workload& w, const Candidate& c) const override {
    if (w.preferred_clusters.empty()) return PluginStatus::Success();
    std::optional<int64_t> d = Distance(state.topology(), w, c.cluster->name);
    if (d == 0) return PluginStatus::Success();
    if (!substitute_) return PluginStatus::Unschedulable("not a preferred cluster");
    if (!d.has_value()) return PluginStatus::Unschedulable("no link to a preferred cluster");
    if (burst_radius_ns_ > 0 && *d > burst_radius_ns_) {
      return PluginStatus::Unschedulable("beyond the burst radius of the preferred clusters");
    }
    return PluginStatus::Success();
  }
  absl::StatusOr<double> Score(CycleState& state, const Workload& w,
                               const Candidate& c) const override {
    if (w.preferred_clusters.empty()) return 0.0;
    std::optional<int64_t> d = Distance(state.topology(), w, c.cluster->name);
    return d.has_value() ? -static_cast<double>(*d) : -1e15;
  }
  void NormalizeScores(std::vector<double>& s) const override { MinMaxNormalize(s, false); }

 private:
  // 0 for a preferred cluster, else the lowest link latency from one.
  static std::optional<int64_t> Distance(const Federation& topo, const Workload& w,
                                         const std::string& cluster) {
    std::optional<int64_t> best;
    for (const std::string& p : w.preferred_clusters) {
      if (p == cluster) return 0;
      if (const Link* l = topo.FindLink(p, cluster)) {
        if (!best.has_value() || l->latency_ns < *best) best = l->latency_ns;
      }
    }
    return best;
  }
  bool substitute_;
  int64_t burst_radius_ns_;
};

// ---- Scores ----

class WorstFit final : public ScorePlugin {
 public:
  explicit WorstFit(bool best) : best_(best) {}
  std::string Name() const override { return best_ ? "BestFit" : "WorstFit"; }
  absl::StatusOr<double> Score(CycleState&, const Workload& w, const Candidate& c) const override {
    Resources cap = c.Capacity();
    Resources after = c.Free() - w.requests;
    double free = 50.0 * (Ratio(after.cpu_millis, cap.cpu_millis) +
                          Ratio(after.memory_bytes, cap.memory_bytes));
    return best_ ? 100.0 - free : free;
  }

 private:
  bool best_;
};

// Services go where the most stays free, so they have room to grow; with
// `pack_jobs`, jobs (run-to-completion workloads) go where the least stays
// free once they land (best fit), so the partly used nodes fill first and
// whole nodes stay free for the large requests that need them.
class FreeCapacity final : public ScorePlugin {
 public:
  FreeCapacity(double alpha, bool pack_jobs) : alpha_(alpha), pack_jobs_(pack_jobs) {}
  std::string Name() const override { return "FreeCapacity"; }
  absl::StatusOr<double> Score(CycleState&, const Workload& w, const Candidate& c) const override {
    Resources cap = c.Capacity();
    if (pack_jobs_ && w.run_to_completion) {
      Resources after = c.Free() - w.requests;
      return 100.0 * (1 - ((1 - alpha_) * Ratio(after.cpu_millis, cap.cpu_millis) +
                           alpha_ * Ratio(after.memory_bytes, cap.memory_bytes)));
    }
    Resources free = c.Free();
    return 100.0 * ((1 - alpha_) * Ratio(free.cpu_millis, cap.cpu_millis) +
                    alpha_ * Ratio(free.memory_bytes, cap.memory_bytes));
  }

 private:
  double alpha_;
  bool pack_jobs_;
};

class TrafficAware final : public ScorePlugin {
 public:
  std::string Name() const override { return "TrafficAware"; }
  absl::StatusOr<double> Score(CycleState& state, const Workload& w,
                               const Candidate& c) const override {
    double traffic = 0;
    for (int ci : state.ChannelsOf(w.name)) {
      const Channel& ch = state.app().channels[ci];
      auto it = state.placed().find(ch.from == w.name ? ch.to : ch.from);
      if (it != state.placed().end() && it->second.cluster == c.cluster->name) {
        traffic += static_cast<double>(ch.min_bandwidth_bps);
      }
    }
    return traffic;
  }
  void NormalizeScores(std::vector<double>& s) const override { MinMaxNormalize(s, false); }
};

class BatchColocation final : public ScorePlugin {
 public:
  std::string Name() const override { return "BatchColocation"; }
  absl::StatusOr<double> Score(CycleState& state, const Workload&,
                               const Candidate& c) const override {
    return state.PlacedCount(c.cluster->name, "");
  }
  void NormalizeScores(std::vector<double>& s) const override { MinMaxNormalize(s, false); }
};

class ChannelLatency final : public ScorePlugin {
 public:
  std::string Name() const override { return "ChannelLatency"; }
  absl::StatusOr<double> Score(CycleState& state, const Workload& w,
                               const Candidate& c) const override {
    double total = 0;
    Placement at = PlacementOf(c);
    for (int ci : state.ChannelsOf(w.name)) {
      const Channel& ch = state.app().channels[ci];
      auto it = state.placed().find(ch.from == w.name ? ch.to : ch.from);
      if (it == state.placed().end()) continue;
      std::optional<int64_t> lat = ch.from == w.name
                                       ? PathLatencyNs(state.topology(), at, it->second)
                                       : PathLatencyNs(state.topology(), it->second, at);
      total += lat.has_value() ? static_cast<double>(*lat) : 1e15;
    }
    return total;
  }
  void NormalizeScores(std::vector<double>& s) const override { MinMaxNormalize(s, true); }
};

class RecommendationScore final : public ScorePlugin {
 public:
  explicit RecommendationScore(RecommendationSource* source) : source_(source) {}
  std::string Name() const override { return "Recommendation"; }
  absl::StatusOr<double> Score(CycleState& state, const Workload&,
                               const Candidate& c) const override {
    if (source_ == nullptr) return 0.0;
    auto* data = static_cast<Cached*>(state.Data(kKey));
    if (data == nullptr) {
      auto fresh = std::make_unique<Cached>();
      ASSIGN_OR_RETURN(fresh->recs, source_->Get(state.app()));
      data = fresh.get();
      state.SetData(kKey, std::move(fresh));
    }
    if (!data->recs.has_value()) return 0.0;
    if (c.node != nullptr) {
      auto it = data->recs->node_scores.find({c.cluster->name, c.node->name});
      if (it != data->recs->node_scores.end()) return it->second;
    }
    auto it = data->recs->cluster_scores.find(c.cluster->name);
    return it == data->recs->cluster_scores.end() ? 0.0 : it->second;
  }

 private:
  struct Cached : CycleData {
    std::optional<Recommendations> recs;
  };
  static constexpr const char* kKey = "Recommendation";
  RecommendationSource* source_;
};

// ---- Queue sort ----

class KpiOrder final : public QueueSortPlugin {
 public:
  std::string Name() const override { return "KpiOrder"; }
  void Sort(const Application& app, std::vector<int>& order) const override {
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return app.workloads[a].availability_kpi > app.workloads[b].availability_kpi;
    });
  }
};

// Breadth-first over the channel graph so that peers are placed one after the
// other and each channel is checked as soon as its second end is placed.
class ChannelOrder final : public QueueSortPlugin {
 public:
  std::string Name() const override { return "ChannelOrder"; }
  void Sort(const Application& app, std::vector<int>& order) const override {
    std::vector<std::vector<int>> adj(app.workloads.size());
    for (const Channel& ch : app.channels) {
      int a = app.WorkloadIndex(ch.from), b = app.WorkloadIndex(ch.to);
      if (a < 0 || b < 0) continue;
      adj[a].push_back(b);
      adj[b].push_back(a);
    }
    std::vector<int> seeds = order;
    std::stable_sort(seeds.begin(), seeds.end(), [&](int a, int b) {
      return app.workloads[a].availability_kpi > app.workloads[b].availability_kpi;
    });
    std::vector<bool> seen(app.workloads.size(), false);
    order.clear();
    for (int s : seeds) {
      if (seen[s]) continue;
      std::deque<int> queue{s};
      seen[s] = true;
      while (!queue.empty()) {
        int v = queue.front();
        queue.pop_front();
        order.push_back(v);
        for (int u : adj[v]) {
          if (!seen[u]) {
            seen[u] = true;
            queue.push_back(u);
          }
        }
      }
    }
  }
};

// ---- Permit ----

class HighAvailabilitySpread final : public PermitPlugin {
 public:
  explicit HighAvailabilitySpread(int min_kpi) : min_kpi_(min_kpi) {}
  std::string Name() const override { return "HighAvailabilitySpread"; }
  PluginStatus Permit(CycleState& state, const Workload& w, const Candidate& c) const override {
    if (c.node == nullptr || w.availability_kpi < min_kpi_) return PluginStatus::Success();
    for (const auto& [name, p] : state.placed()) {
      int idx = state.app().WorkloadIndex(name);
      if (name != w.name && idx >= 0 && state.app().workloads[idx].service == w.service &&
          p.cluster == c.cluster->name && p.node == c.node->name) {
        return PluginStatus::Unschedulable("another replica of " + w.service + " is on node " +
                                           c.node->name);
      }
    }
    return PluginStatus::Success();
  }

 private:
  int min_kpi_;
};

// ---- Reserve (built in) ----

class NodeResourcesReserve final : public ReservePlugin {
 public:
  std::string Name() const override { return "NodeResourcesReserve"; }
  PluginStatus Reserve(CycleState& state, const Workload& w, const Candidate& c) const override {
    if (c.node == nullptr) return PluginStatus::Success();
    Cluster* cl = state.solving();
    if (cl == nullptr || cl->name != c.cluster->name || c.node_index < 0 ||
        c.node_index >= static_cast<int>(cl->nodes.size())) {
      return PluginStatus::Error(absl::InternalError("node candidate outside the solving cluster"));
    }
    std::string key = "res/" + w.name;
    if (state.reserved().count(key)) return PluginStatus::Success();
    Node& node = cl->nodes[c.node_index];
    if (!node.Free().Fits(w.requests)) return PluginStatus::Unschedulable("insufficient resources");
    node.allocated += w.requests;
    state.reserved().insert(key);
    return PluginStatus::Success();
  }
  void Unreserve(CycleState& state, const Workload& w, const Candidate& c) const override {
    std::string key = "res/" + w.name;
    if (c.node == nullptr || state.solving() == nullptr || !state.reserved().erase(key)) return;
    state.solving()->nodes[c.node_index].allocated -= w.requests;
  }
};

class ChannelBandwidthReserve final : public ReservePlugin {
 public:
  std::string Name() const override { return "ChannelBandwidthReserve"; }
  PluginStatus Reserve(CycleState& state, const Workload& w, const Candidate& c) const override {
    if (c.node == nullptr) return PluginStatus::Success();
    std::string key = "bw/" + w.name;
    if (state.Data(key) != nullptr) return PluginStatus::Success();
    PluginStatus check = CheckChannels(state, w, PlacementOf(c));
    if (!check.ok()) return check;
    auto rec = std::make_unique<Claimed>();
    for (int ci : state.ChannelsOf(w.name)) {
      const Channel& ch = state.app().channels[ci];
      auto it = state.placed().find(ch.from == w.name ? ch.to : ch.from);
      if (it == state.placed().end() || it->second.cluster == c.cluster->name) continue;
      std::string from = ch.from == w.name ? c.cluster->name : it->second.cluster;
      std::string to = ch.from == w.name ? it->second.cluster : c.cluster->name;
      state.AddBandwidth(from, to, ch.service_class, ch.min_bandwidth_bps);
      rec->claims.push_back({from, to, ch.service_class, ch.min_bandwidth_bps});
    }
    state.SetData(key, std::move(rec));
    return PluginStatus::Success();
  }
  void Unreserve(CycleState& state, const Workload& w, const Candidate&) const override {
    std::string key = "bw/" + w.name;
    auto* rec = static_cast<Claimed*>(state.Data(key));
    if (rec == nullptr) return;
    for (const Claim& cl : rec->claims) state.AddBandwidth(cl.from, cl.to, cl.cls, -cl.bps);
    state.SetData(key, nullptr);
  }

 private:
  struct Claim {
    std::string from, to;
    ServiceClass cls;
    int64_t bps;
  };
  struct Claimed : CycleData {
    std::vector<Claim> claims;
  };
};

template <typename T>
absl::StatusOr<std::unique_ptr<Plugin>> Make(std::unique_ptr<T> p) {
  return std::unique_ptr<Plugin>(std::move(p));
}

PluginRegistry::Factory NoArgs(std::function<std::unique_ptr<Plugin>()> make) {
  return [make](const PluginContext& ctx) -> absl::StatusOr<std::unique_ptr<Plugin>> {
    RETURN_IF_ERROR(CheckArgs(ctx, {}));
    return make();
  };
}

}  // namespace

PluginRegistry NewDefaultRegistry() {
  PluginRegistry r;
  auto add = [&r](const std::string& name, PluginRegistry::Factory f) {
    absl::Status st = r.Register(name, std::move(f));
    (void)st;  // names below are distinct
  };
  add("NodeResourcesFit", NoArgs([] { return std::make_unique<NodeResourcesFit>(); }));
  add("AllowedLocations", NoArgs([] { return std::make_unique<AllowedLocations>(); }));
  add("OriginLatency", NoArgs([] { return std::make_unique<OriginLatency>(); }));
  add("ChannelConstraints", NoArgs([] { return std::make_unique<ChannelConstraints>(); }));
  add("WorstFit", NoArgs([] { return std::make_unique<WorstFit>(false); }));
  add("BestFit", NoArgs([] { return std::make_unique<WorstFit>(true); }));
  add("TrafficAware", NoArgs([] { return std::make_unique<TrafficAware>(); }));
  add("BatchColocation", NoArgs([] { return std::make_unique<BatchColocation>(); }));
  add("ChannelLatency", NoArgs([] { return std::make_unique<ChannelLatency>(); }));
  add("KpiOrder", NoArgs([] { return std::make_unique<KpiOrder>(); }));
  add("ChannelOrder", NoArgs([] { return std::make_unique<ChannelOrder>(); }));
  add("NodeResourcesReserve", NoArgs([] { return std::make_unique<NodeResourcesReserve>(); }));
  add("ChannelBandwidthReserve",
      NoArgs([] { return std::make_unique<ChannelBandwidthReserve>(); }));
  add("SafetyThreshold", [](const PluginContext& ctx) -> absl::StatusOr<std::unique_ptr<Plugin>> {
    RETURN_IF_ERROR(CheckArgs(ctx, {"threshold"}));
    double t = Arg(ctx, "threshold", 0.9);
    if (t <= 0 || t > 1) return absl::InvalidArgumentError("threshold must be in (0, 1]");
    return Make(std::make_unique<SafetyThreshold>(t));
  });
  add("NumberOfLocations", [](const PluginContext& ctx) -> absl::StatusOr<std::unique_ptr<Plugin>> {
    RETURN_IF_ERROR(CheckArgs(ctx, {"max"}));
    double m = Arg(ctx, "max", 1);
    if (m < 1) return absl::InvalidArgumentError("max must be >= 1");
    return Make(std::make_unique<NumberOfLocations>(static_cast<int>(m)));
  });
  add("ClusterAffinity", [](const PluginContext& ctx) -> absl::StatusOr<std::unique_ptr<Plugin>> {
    RETURN_IF_ERROR(CheckArgs(ctx, {"substitute", "burst_radius_ns"}));
    double radius = Arg(ctx, "burst_radius_ns", 0);
    if (radius < 0) return absl::InvalidArgumentError("burst_radius_ns must be >= 0");
    return Make(std::make_unique<ClusterAffinity>(Arg(ctx, "substitute", 1) != 0,
                                                  static_cast<int64_t>(radius)));
  });
  add("FreeCapacity", [](const PluginContext& ctx) -> absl::StatusOr<std::unique_ptr<Plugin>> {
    RETURN_IF_ERROR(CheckArgs(ctx, {"alpha", "pack_jobs"}));
    double a = Arg(ctx, "alpha", 0.5);
    if (a < 0 || a > 1) return absl::InvalidArgumentError("alpha must be in [0, 1]");
    double pack = Arg(ctx, "pack_jobs", 1);
    if (pack != 0 && pack != 1) return absl::InvalidArgumentError("pack_jobs must be 0 or 1");
    return Make(std::make_unique<FreeCapacity>(a, pack != 0));
  });
  add("Recommendation", [](const PluginContext& ctx) -> absl::StatusOr<std::unique_ptr<Plugin>> {
    RETURN_IF_ERROR(CheckArgs(ctx, {}));
    return Make(std::make_unique<RecommendationScore>(ctx.recommendations));
  });
  add("HighAvailabilitySpread",
      [](const PluginContext& ctx) -> absl::StatusOr<std::unique_ptr<Plugin>> {
        RETURN_IF_ERROR(CheckArgs(ctx, {"min_kpi"}));
        return Make(
            std::make_unique<HighAvailabilitySpread>(static_cast<int>(Arg(ctx, "min_kpi", 99))));
      });
  return r;
}

absl::StatusOr<Profile> BuiltinProfile(const std::string& name) {
  auto hard = [] {
    return std::vector<PluginConfig>{{.name = "NodeResourcesFit"},
                                     {.name = "AllowedLocations"},
                                     {.name = "OriginLatency"},
                                     {.name = "ChannelConstraints"}};
  };
  Profile p{.name = name, .plugins = hard()};
  auto add = [&p](PluginConfig c) { p.plugins.push_back(std::move(c)); };
  if (name == "codeco" || name.empty()) {
    p.name = "codeco";
    add({.name = "ChannelOrder"});
    add({.name = "SafetyThreshold", .soft = true, .args = {{"threshold", 0.9}}});
    add({.name = "ClusterAffinity", .weight = 1, .args = {{"substitute", 1}}});
    add({.name = "Recommendation", .weight = 2});
    add({.name = "ChannelLatency", .weight = 3});
    add({.name = "BatchColocation", .weight = 2});
    add({.name = "FreeCapacity", .weight = 1, .args = {{"alpha", 0.5}}});
    add({.name = "HighAvailabilitySpread", .soft = true, .args = {{"min_kpi", 99}}});
  } else if (name == "mck8s-worst-fit") {
    add({.name = "WorstFit"});
  } else if (name == "mck8s-best-fit") {
    add({.name = "BestFit"});
  } else if (name == "mck8s-traffic-aware") {
    add({.name = "TrafficAware", .weight = 2});
    add({.name = "WorstFit"});
  } else if (name == "mck8s-cluster-affinity") {
    add({.name = "ClusterAffinity", .weight = 2, .args = {{"substitute", 1}}});
    add({.name = "WorstFit"});
  } else if (name == "lcm-two-tier") {
    add({.name = "KpiOrder"});
    add({.name = "SafetyThreshold", .soft = true, .args = {{"threshold", 0.9}}});
    add({.name = "BatchColocation", .weight = 2});
    add({.name = "FreeCapacity", .args = {{"alpha", 0.5}}});
  } else {
    return absl::NotFoundError("no built-in profile \"" + name + "\"");
  }
  return p;
}

}  // namespace codeco::swm
