#include "swm/core/solve.h"

#include <algorithm>
#include <limits>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codeco/common/status.h"

namespace codeco::swm {
namespace {

// The most clusters a pending workload's data may pin it to for them to join
// a cluster-level request's context.
constexpr size_t kMaxLocatedContext = 8;

absl::StatusOr<const Framework*> CachedFramework(
    std::map<std::string, std::unique_ptr<Framework>>& cache, const std::string& profile,
    const PluginRegistry& registry, RecommendationSource* recs) {
  std::string name = profile.empty() ? "codeco" : profile;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  absl::StatusOr<Profile> p = BuiltinProfile(name);
  if (!p.ok()) return InvalidFieldError("profile", "unknown profile \"" + name + "\"");
  ASSIGN_OR_RETURN(std::unique_ptr<Framework> fw, Framework::Create(*p, registry, recs));
  const Framework* raw = fw.get();
  cache[name] = std::move(fw);
  return raw;
}

// Why one cluster did not take a workload.
struct ClusterReason {
  std::string cluster;
  std::string why;
};

// Why a workload was left unplaced, from the per-cluster reasons of every
// attempt: repeats dropped, clusters that failed for the same reason named
// together, the rarer reasons first (the cluster that almost took it says
// most), at most four groups.
std::string UnplacedReason(const std::vector<ClusterReason>& per_cluster) {
  if (per_cluster.empty()) return "no cluster in the neighborhood could take it";
  struct Group {
    std::string why;
    std::vector<std::string> clusters;
  };
  std::vector<Group> groups;
  for (const ClusterReason& reason : per_cluster) {
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const Group& group) { return group.why == reason.why; });
    if (g == groups.end()) {
      groups.push_back({reason.why, {}});
      g = groups.end() - 1;
    }
    if (std::find(g->clusters.begin(), g->clusters.end(), reason.cluster) == g->clusters.end()) {
      g->clusters.push_back(reason.cluster);
    }
  }
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
    return a.clusters.size() < b.clusters.size();
  });
  constexpr size_t kShown = 4;
  std::vector<std::string> parts;
  for (size_t i = 0; i < std::min(kShown, groups.size()); ++i) {
    const Group& g = groups[i];
    parts.push_back(absl::StrCat(absl::StrJoin(g.clusters, ", "), ": ", g.why));
  }
  std::string text = "no cluster fits: " + absl::StrJoin(parts, " | ");
  if (groups.size() > kShown) absl::StrAppend(&text, " | and ", groups.size() - kShown, " more");
  return text;
}

}  // namespace

InProcessL2Solver::InProcessL2Solver(const PluginRegistry& registry,
                                     RecommendationSource* recommendations)
    : registry_(registry), recommendations_(recommendations) {}

absl::StatusOr<const Framework*> InProcessL2Solver::FrameworkFor(const std::string& profile) {
  return CachedFramework(frameworks_, profile, registry_, recommendations_);
}

absl::StatusOr<L2Result> InProcessL2Solver::Solve(const L2Request& req) {
  if (req.app == nullptr) return absl::InvalidArgumentError("app: required");
  const Application& app = *req.app;
  ASSIGN_OR_RETURN(const Framework* fw, FrameworkFor(req.profile));
  Federation topo;
  topo.AddCluster(req.cluster);
  std::set<std::string> unvisited(req.unvisited.begin(), req.unvisited.end());
  std::vector<ClusterAggregate> unvisited_aggs;
  for (const ClusterAggregate& a : req.others) {
    topo.AddCluster(
        Cluster{.name = a.name, .labels = a.labels, .intra_latency_ns = a.intra_latency_ns});
    if (unvisited.count(a.name)) unvisited_aggs.push_back(a);
  }
  for (const Link& l : req.links) topo.AddLink(l);
  Cluster* solving = topo.MutableCluster(req.cluster.name);
  CycleState state(app, topo, solving, req.relax_soft);
  for (const auto& [w, p] : req.placed) state.Bind(w, p);

  L2Result result;
  for (const std::string& name : req.pending) {
    int wi = app.WorkloadIndex(name);
    if (wi < 0) return InvalidFieldError("pending", "unknown workload \"" + name + "\"");
    const Workload& w = app.workloads[wi];
    ClusterAggregate self = AggregateOf(*solving);
    std::vector<Candidate> nodes;
    for (size_t i = 0; i < solving->nodes.size(); ++i) {
      nodes.push_back(Candidate{Level::kNode, &self, &solving->nodes[i], static_cast<int>(i)});
    }
    ASSIGN_OR_RETURN(Selection sel, fw->Select(state, w, nodes));
    if (sel.best < 0) {
      result.unfit[name] = sel.reason;
      continue;
    }
    if (req.allow_defer && !unvisited_aggs.empty()) {
      std::vector<Candidate> clusters{Candidate{Level::kCluster, &self}};
      for (const ClusterAggregate& a : unvisited_aggs) {
        clusters.push_back(Candidate{Level::kCluster, &a});
      }
      ASSIGN_OR_RETURN(Selection l1, fw->Select(state, w, clusters));
      if (l1.best > 0 && l1.scores[0] >= 0 && l1.scores[l1.best] > l1.scores[0] + 1e-9) {
        result.deferred.push_back(name);
        continue;
      }
    }
    std::vector<int> ranked;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (sel.scores[i] >= 0) ranked.push_back(static_cast<int>(i));
    }
    std::stable_sort(ranked.begin(), ranked.end(),
                     [&](int a, int b) { return sel.scores[a] > sel.scores[b]; });
    std::string why;
    bool bound = false;
    for (int i : ranked) {
      PluginStatus st = fw->ReserveAndPermit(state, w, nodes[i]);
      if (st.is_error()) return st.error();
      if (st.ok()) {
        state.Bind(name, Placement{solving->name, solving->nodes[i].name});
        result.node_of[name] = solving->nodes[i].name;
        bound = true;
        break;
      }
      why = st.reason();
    }
    if (!bound) result.unfit[name] = why;
  }
  return result;
}

Coordinator::Coordinator(L2Solver& l2, const PluginRegistry& registry,
                         RecommendationSource* recommendations, CoordinatorOptions options)
    : l2_(l2), registry_(registry), recommendations_(recommendations), options_(options) {}

absl::StatusOr<const Framework*> Coordinator::FrameworkFor(const std::string& profile) {
  return CachedFramework(frameworks_, profile, registry_, recommendations_);
}

namespace {

// Sum of the latencies of `w`'s channels to placed peers if `w` were at `at`.
double ChannelLatencySum(const CycleState& state, const Workload& w, const Placement& at) {
  double total = 0;
  for (int ci : state.ChannelsOf(w.name)) {
    const Channel& ch = state.app().channels[ci];
    auto peer = state.placed().find(ch.from == w.name ? ch.to : ch.from);
    if (peer == state.placed().end()) continue;
    std::optional<int64_t> lat = ch.from == w.name
                                     ? PathLatencyNs(state.topology(), at, peer->second)
                                     : PathLatencyNs(state.topology(), peer->second, at);
    total += lat.has_value() ? static_cast<double>(*lat) : 1e18;
  }
  return total;
}

// Adds (sign +1) or removes (-1) the bandwidth of `w`'s inter-cluster channels
// to placed peers.
void AccountChannels(CycleState& state, const Workload& w, const Placement& at, int sign) {
  for (int ci : state.ChannelsOf(w.name)) {
    const Channel& ch = state.app().channels[ci];
    auto peer = state.placed().find(ch.from == w.name ? ch.to : ch.from);
    if (peer == state.placed().end() || peer->second.cluster == at.cluster) continue;
    const std::string& from = ch.from == w.name ? at.cluster : peer->second.cluster;
    const std::string& to = ch.from == w.name ? peer->second.cluster : at.cluster;
    state.AddBandwidth(from, to, ch.service_class, sign * ch.min_bandwidth_bps);
  }
}

// Binds the pinned workloads in `state` without adding bandwidth: the
// caller's federation already holds what their channels use. Bind them
// before anything else so a channel between two of them is never counted.
void BindPinned(CycleState& state, const std::map<std::string, Placement>& pinned) {
  for (const auto& [name, p] : pinned) state.Bind(name, p);
}

// `order` with, when a pending workload may burst beyond its service's
// numberOfLocations, the clusters sorted (stably) by the lowest link latency
// from a cluster the application runs in (those first); `order` otherwise.
std::vector<const Cluster*> NearestFirstForBursting(const Application& app,
                                                    const Federation& federation,
                                                    const std::map<std::string, Placement>& placed,
                                                    const std::vector<std::string>& pending,
                                                    const std::vector<const Cluster*>& order) {
  const bool bursting = std::any_of(pending.begin(), pending.end(), [&](const std::string& name) {
    const Workload& w = app.workloads[app.WorkloadIndex(name)];
    return w.bursting && w.max_locations > 0;
  });
  std::set<std::string> footprint;
  for (const auto& [name, at] : placed) footprint.insert(at.cluster);
  if (!bursting || footprint.empty()) return order;
  std::vector<std::pair<int64_t, const Cluster*>> ranked;
  for (const Cluster* c : order) {
    int64_t nearest = footprint.count(c->name) ? 0 : std::numeric_limits<int64_t>::max();
    for (const std::string& from : footprint) {
      if (const Link* l = federation.FindLink(from, c->name); l != nullptr) {
        nearest = std::min(nearest, l->latency_ns);
      }
    }
    ranked.push_back({nearest, c});
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<const Cluster*> out;
  for (const auto& [latency, c] : ranked) out.push_back(c);
  return out;
}

// INVALID_ARGUMENT naming pinned["<workload>"] for each entry that is not a
// workload of `app` or whose place is not a node of `federation`.
absl::Status ValidatePinned(const Application& app, const Federation& federation,
                            const std::map<std::string, Placement>& pinned) {
  FieldErrors errors;
  for (const auto& [name, p] : pinned) {
    const std::string field = absl::StrCat("pinned[\"", name, "\"]");
    const Cluster* c = federation.FindCluster(p.cluster);
    if (app.WorkloadIndex(name) < 0) {
      errors.Add(field, "unknown workload \"" + name + "\"");
    } else if (c == nullptr) {
      errors.Add(field + ".cluster", "unknown cluster \"" + p.cluster + "\"");
    } else if (c->NodeIndex(p.node) < 0) {
      errors.Add(field + ".node",
                 "unknown node \"" + p.node + "\" in cluster \"" + p.cluster + "\"");
    }
  }
  return errors.ToStatus();
}

}  // namespace

absl::Status Coordinator::Polish(const Application& app, const Federation& federation,
                                 const Framework& fw, const std::set<std::string>& clusters,
                                 const std::map<std::string, Placement>& pinned,
                                 std::map<std::string, Placement>& placed) const {
  CycleState state(app, federation, nullptr, /*relax_soft=*/true);
  BindPinned(state, pinned);
  std::map<std::pair<std::string, std::string>, Resources> extra;  // not counting the pinned
  for (const auto& [name, p] : placed) {
    if (pinned.count(name)) continue;
    const Workload& w = app.workloads[app.WorkloadIndex(name)];
    AccountChannels(state, w, p, +1);  // counts each channel once: the peer is bound later
    state.Bind(name, p);
    extra[{p.cluster, p.node}] += w.requests;
  }
  for (int round = 0; round < options_.polish_rounds; ++round) {
    bool improved = false;
    for (const Workload& w : app.workloads) {
      auto it = placed.find(w.name);
      if (it == placed.end() || pinned.count(w.name) || state.ChannelsOf(w.name).empty()) {
        continue;
      }
      const Placement cur = it->second;
      state.Unbind(w.name);
      AccountChannels(state, w, cur, -1);
      extra[{cur.cluster, cur.node}] -= w.requests;
      Placement best = cur;
      double best_lat = ChannelLatencySum(state, w, cur);
      // Its own cluster and its peers' (a pinned peer's may be outside the
      // neighborhood: not a place to move to).
      std::set<std::string> targets{cur.cluster};
      for (int ci : state.ChannelsOf(w.name)) {
        const Channel& ch = app.channels[ci];
        auto peer = state.placed().find(ch.from == w.name ? ch.to : ch.from);
        if (peer != state.placed().end() && clusters.count(peer->second.cluster)) {
          targets.insert(peer->second.cluster);
        }
      }
      for (const std::string& name : targets) {
        const Cluster* base = federation.FindCluster(name);
        if (base == nullptr) continue;
        // Never to a cluster beyond its service's numberOfLocations.
        if (name != cur.cluster &&
            !LocationSpreadRefusal(app, state.placed(), w, name, false, false).empty()) {
          continue;
        }
        Cluster view = *base;
        for (Node& n : view.nodes) {
          auto e = extra.find({name, n.name});
          if (e != extra.end()) n.allocated += e->second;
        }
        ClusterAggregate agg = AggregateOf(view);
        std::vector<Candidate> cands;
        for (size_t i = 0; i < view.nodes.size(); ++i) {
          cands.push_back(Candidate{Level::kNode, &agg, &view.nodes[i], static_cast<int>(i)});
        }
        ASSIGN_OR_RETURN(Selection sel, fw.Select(state, w, cands));
        for (size_t i = 0; i < cands.size(); ++i) {
          if (sel.scores[i] < 0) continue;
          Placement at{name, view.nodes[i].name};
          double lat = ChannelLatencySum(state, w, at);
          if (lat < best_lat - 0.5 && CheckChannels(state, w, at).ok()) {
            best = at;
            best_lat = lat;
          }
        }
      }
      AccountChannels(state, w, best, +1);
      state.Bind(w.name, best);
      extra[{best.cluster, best.node}] += w.requests;
      if (best.cluster != cur.cluster || best.node != cur.node) {
        it->second = best;
        improved = true;
      }
    }
    if (!improved) break;
  }
  return absl::OkStatus();
}

absl::StatusOr<PlacementResult> Coordinator::Place(const Application& app,
                                                   const Federation& federation,
                                                   const std::vector<std::string>& neighborhood,
                                                   const std::map<std::string, Placement>& pinned) {
  RETURN_IF_ERROR(app.Validate());
  RETURN_IF_ERROR(ValidatePinned(app, federation, pinned));
  ASSIGN_OR_RETURN(const Framework* fw, FrameworkFor(app.profile));
  std::vector<const Cluster*> members;
  if (neighborhood.empty()) {
    for (const Cluster& c : federation.clusters()) members.push_back(&c);
  } else {
    FieldErrors errors;
    std::set<std::string> seen;
    for (size_t i = 0; i < neighborhood.size(); ++i) {
      const Cluster* c = federation.FindCluster(neighborhood[i]);
      if (c == nullptr) {
        errors.Add(absl::StrCat("neighborhood[", i, "]"),
                   "unknown cluster \"" + neighborhood[i] + "\"");
      } else if (seen.insert(c->name).second) {
        members.push_back(c);
      }
    }
    RETURN_IF_ERROR(errors.ToStatus());
  }
  std::set<std::string> member_names;
  for (const Cluster* c : members) member_names.insert(c->name);

  // Scratch state for scoring clusters while ordering them.
  CycleState ordering(app, federation, nullptr, false);
  BindPinned(ordering, pinned);

  // 1. Order the clusters: the auction's winner, then recommendations,
  // faster links, policy score.
  std::optional<Recommendations> recs;
  if (recommendations_ != nullptr) {
    ASSIGN_OR_RETURN(recs, recommendations_->Get(app));
  }
  // The workloads to place, in queue order: the pinned ones stay.
  std::vector<int> queue;
  for (int i : fw->QueueOrder(app)) {
    if (!pinned.count(app.workloads[i].name)) queue.push_back(i);
  }
  std::set<std::string> origins;
  for (int i : queue) {
    const Workload& w = app.workloads[i];
    if (!w.origin_cluster.empty()) origins.insert(w.origin_cluster);
  }
  absl::flat_hash_map<std::string, std::pair<int64_t, int>> out_latency;  // sum, count
  if (origins.empty()) {
    for (const Link& l : federation.links()) {
      if (member_names.count(l.from) && member_names.count(l.to)) {
        auto& [sum, n] = out_latency[l.from];
        sum += l.latency_ns;
        ++n;
      }
    }
  }
  std::vector<ClusterAggregate> aggs;
  aggs.reserve(members.size());
  for (const Cluster* c : members) aggs.push_back(AggregateOf(*c));
  std::vector<double> policy(members.size(), -1);
  if (!queue.empty()) {
    std::vector<Candidate> cands;
    for (const ClusterAggregate& a : aggs) cands.push_back(Candidate{Level::kCluster, &a});
    ASSIGN_OR_RETURN(Selection sel, fw->Select(ordering, app.workloads[queue[0]], cands));
    policy = sel.scores;
  }
  struct Key {
    bool advised;  // the auction's winner
    bool has_rec;
    double rec;
    int64_t bucket;
    double policy;
    size_t index;
  };
  std::vector<Key> keys;
  for (size_t i = 0; i < members.size(); ++i) {
    const std::string& name = members[i]->name;
    Key k{false, false, 0, std::numeric_limits<int64_t>::max(), policy[i], i};
    if (recs.has_value()) {
      k.advised = !recs->advised_cluster.empty() && recs->advised_cluster == name;
      auto it = recs->cluster_scores.find(name);
      if (it != recs->cluster_scores.end()) {
        k.has_rec = true;
        k.rec = it->second;
      }
    }
    std::optional<int64_t> lat;
    if (!origins.empty()) {
      for (const std::string& o : origins) {
        std::optional<int64_t> d = OriginLatencyNs(federation, o, name);
        if (d.has_value() && (!lat.has_value() || *d < *lat)) lat = d;
      }
    } else if (auto it = out_latency.find(name); it != out_latency.end()) {
      lat = it->second.first / it->second.second;
    }
    if (lat.has_value()) k.bucket = *lat / std::max<int64_t>(1, options_.latency_bucket_ns);
    keys.push_back(k);
  }
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    if (a.advised != b.advised) return a.advised;
    if (a.has_rec != b.has_rec) return a.has_rec;
    if (a.rec != b.rec) return a.rec > b.rec;
    if (a.bucket != b.bucket) return a.bucket < b.bucket;
    if (a.policy != b.policy) return a.policy > b.policy;
    return a.index < b.index;
  });
  std::vector<const Cluster*> order;
  for (const Key& k : keys) order.push_back(members[k.index]);

  PlacementResult result;
  for (const Cluster* c : order) result.visit_order.push_back(c->name);
  // 2. Visit clusters one at a time, then a reconsideration round with soft
  // plugins off. If workloads are left, solve again with them first in the
  // queue and keep the better outcome (more placed, then lower latency).
  struct Attempt {
    std::map<std::string, Placement> placed;
    std::vector<std::string> pending;
    std::map<std::string, std::vector<ClusterReason>> reasons;
  };
  auto attempt = [&](const std::vector<std::string>& initial,
                     const std::vector<const Cluster*>& order) {
    std::map<std::string, std::vector<Resources>> extra;
    CycleState hub(app, federation, nullptr, false);
    BindPinned(hub, pinned);
    auto overlay = [&](const Cluster& c) {
      Cluster copy = c;
      auto it = extra.find(c.name);
      if (it != extra.end()) {
        for (size_t i = 0; i < copy.nodes.size(); ++i) copy.nodes[i].allocated += it->second[i];
      }
      return copy;
    };
    std::vector<std::string> pending = initial;
    std::map<std::string, std::vector<ClusterReason>> reasons;  // by workload

    for (int round = 0; round < (options_.reconsider ? 2 : 1) && !pending.empty(); ++round) {
      // A replica bursting beyond its service's numberOfLocations goes to
      // the nearest cluster first (mck8s's nearest-first), measured from
      // where the application runs.
      const std::vector<const Cluster*> visit =
          round == 1 ? NearestFirstForBursting(app, federation, hub.placed(), pending, order)
                     : order;
      for (size_t ci = 0; ci < visit.size() && !pending.empty(); ++ci) {
        const Cluster& cluster = *visit[ci];
        L2Request req{.app = &app, .profile = app.profile, .cluster = overlay(cluster)};
        std::set<std::string> context;
        for (const auto& [w, p] : hub.placed()) context.insert(p.cluster);
        for (const std::string& name : pending) {
          const Workload& w = app.workloads[app.WorkloadIndex(name)];
          if (!w.origin_cluster.empty()) context.insert(w.origin_cluster);
          for (const std::string& p : w.preferred_clusters) context.insert(p);
          // Where its data pins it, so the channels of its peers placed
          // first are checked against them (a handful; a region-wide pin
          // would grow every request by the region's links).
          const std::vector<const Cluster*> located = LocatedClusters(federation, w);
          if (located.size() <= kMaxLocatedContext) {
            for (const Cluster* c : located) context.insert(c->name);
          }
        }
        if (round == 0) {
          for (size_t k = ci + 1; k < order.size() && k <= ci + options_.lookahead; ++k) {
            context.insert(order[k]->name);
            req.unvisited.push_back(order[k]->name);
          }
        }
        context.erase(cluster.name);
        for (const std::string& name : context) {
          const Cluster* other = federation.FindCluster(name);
          if (other == nullptr) continue;
          req.others.push_back(AggregateOf(overlay(*other)));
        }
        std::vector<std::string> all(context.begin(), context.end());
        all.push_back(cluster.name);
        for (const std::string& a : all) {
          for (const std::string& b : all) {
            const Link* l = a == b ? nullptr : federation.FindLink(a, b);
            if (l == nullptr) continue;
            Link net = *l;
            for (int k = 0; k < kNumServiceClasses; ++k) {
              net.free_bandwidth_bps[k] -= hub.UsedBandwidth(a, b, static_cast<ServiceClass>(k));
            }
            req.links.push_back(net);
          }
        }
        req.placed = hub.placed();
        req.pending = pending;
        req.allow_defer = round == 0 && options_.defer;
        req.relax_soft = round == 1;
        ++result.l2_calls;
        absl::StatusOr<L2Result> l2 = l2_.Solve(req);
        if (!l2.ok()) {
          for (const std::string& w : pending) {
            reasons[w].push_back(
                {cluster.name, absl::StrCat("unavailable (", l2.status().message(), ")")});
          }
          continue;
        }
        std::vector<std::string> still;
        for (const std::string& name : pending) {
          const Workload& w = app.workloads[app.WorkloadIndex(name)];
          auto node_it = l2->node_of.find(name);
          if (node_it == l2->node_of.end()) {
            auto unfit = l2->unfit.find(name);
            if (unfit != l2->unfit.end())
              reasons[name].push_back({cluster.name, unfit->second});
            still.push_back(name);
            continue;
          }
          // Merge: the hub re-checks capacity and channels on its own view.
          int ni = cluster.NodeIndex(node_it->second);
          std::string reject;
          if (ni < 0 || !cluster.nodes[ni].schedulable) {
            reject = "unknown or unschedulable node " + node_it->second;
          } else {
            std::vector<Resources>& ex = extra[cluster.name];
            if (ex.empty()) ex.resize(cluster.nodes.size());
            Node view = cluster.nodes[ni];
            view.allocated += ex[ni];
            if (!view.Free().Fits(w.requests)) reject = "node " + view.name + " is full";
          }
          Placement at{cluster.name, node_it->second};
          if (reject.empty()) {
            reject =
                LocationSpreadRefusal(app, hub.placed(), w, cluster.name,
                                      round == 0 && options_.reconsider, round == 1 && w.bursting);
          }
          if (reject.empty()) {
            PluginStatus ch = CheckChannels(hub, w, at);
            if (!ch.ok()) reject = ch.reason();
          }
          if (!reject.empty()) {
            reasons[name].push_back({cluster.name, "rejected by the coordinator: " + reject});
            still.push_back(name);
            continue;
          }
          extra[cluster.name][ni] += w.requests;
          AccountChannels(hub, w, at, +1);  // to peers placed or pinned so far
          hub.Bind(name, at);
        }
        pending = std::move(still);
      }
    }

    return Attempt{hub.placed(), std::move(pending), std::move(reasons)};
  };
  auto latency_of = [&](const std::map<std::string, Placement>& placed) {
    double total = 0;
    for (const Channel& ch : app.channels) {
      auto a = placed.find(ch.from), b = placed.find(ch.to);
      if (a != placed.end() && b != placed.end()) {
        total += static_cast<double>(PathLatencyNs(federation, a->second, b->second).value_or(0));
      }
    }
    return total;
  };
  std::vector<std::string> first;
  for (int i : queue) first.push_back(app.workloads[i].name);
  Attempt best = attempt(first, order);
  for (int k = 1; k < options_.max_attempts && !best.pending.empty(); ++k) {
    // Retry 1 visits the roomiest clusters first (the LCM study's batch
    // idea: keep the application together where it fits); later retries
    // start at the (k-1)-th cluster of the usual order. Unplaced go first.
    std::vector<const Cluster*> rotated = order;
    if (k == 1) {
      std::vector<std::pair<double, const Cluster*>> room;
      for (size_t i = 0; i < order.size(); ++i) {
        Resources f = order[i]->Free();
        room.push_back({static_cast<double>(f.cpu_millis) * 1e-3 +
                            static_cast<double>(f.memory_bytes) / double(int64_t{1} << 30),
                        order[i]});
      }
      std::stable_sort(room.begin(), room.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      for (size_t i = 0; i < room.size(); ++i) rotated[i] = room[i].second;
    } else if (!rotated.empty()) {
      std::rotate(rotated.begin(), rotated.begin() + ((k - 1) % rotated.size()), rotated.end());
    }
    std::vector<std::string> retry = best.pending;
    for (const std::string& w : first) {
      if (std::find(best.pending.begin(), best.pending.end(), w) == best.pending.end()) {
        retry.push_back(w);
      }
    }
    Attempt next = attempt(retry, rotated);
    if (next.placed.size() > best.placed.size() ||
        (next.placed.size() == best.placed.size() &&
         latency_of(next.placed) < latency_of(best.placed))) {
      best = std::move(next);
    }
  }
  std::vector<std::string>& pending = best.pending;
  std::map<std::string, std::vector<ClusterReason>>& reasons = best.reasons;
  if (options_.polish_rounds > 0 && !app.channels.empty()) {
    RETURN_IF_ERROR(Polish(app, federation, *fw, member_names, pinned, best.placed));
  }
  result.placements = best.placed;
  for (const std::string& name : pending) result.unplaced[name] = UnplacedReason(reasons[name]);
  for (const Channel& ch : app.channels) {
    auto a = result.placements.find(ch.from);
    auto b = result.placements.find(ch.to);
    if (a == result.placements.end() || b == result.placements.end()) continue;
    ChannelResult cr{.channel = ch.name,
                     .max_delay_ns = ch.max_delay_ns,
                     .min_bandwidth_bps = ch.min_bandwidth_bps};
    cr.path.push_back(a->second.cluster);
    if (b->second.cluster != a->second.cluster) cr.path.push_back(b->second.cluster);
    std::optional<int64_t> lat = PathLatencyNs(federation, a->second, b->second);
    cr.expected_latency_ns = lat.value_or(-1);
    cr.satisfied = lat.has_value() && (ch.max_delay_ns == 0 || *lat <= ch.max_delay_ns);
    result.channels.push_back(cr);
  }
  return result;
}

void ApplyPlacement(const Application& app, const PlacementResult& result, Federation& federation) {
  for (const auto& [name, p] : result.placements) {
    int wi = app.WorkloadIndex(name);
    Cluster* c = federation.MutableCluster(p.cluster);
    if (wi < 0 || c == nullptr) continue;
    int ni = c->NodeIndex(p.node);
    if (ni >= 0) c->nodes[ni].allocated += app.workloads[wi].requests;
  }
  for (const Channel& ch : app.channels) {
    auto a = result.placements.find(ch.from);
    auto b = result.placements.find(ch.to);
    if (a == result.placements.end() || b == result.placements.end()) continue;
    if (a->second.cluster == b->second.cluster) continue;
    if (Link* l = federation.MutableLink(a->second.cluster, b->second.cluster)) {
      l->free_bandwidth_bps[static_cast<int>(ch.service_class)] -= ch.min_bandwidth_bps;
    }
  }
}

absl::Status VerifyPlacement(const Application& app, const Federation& federation,
                             const PlacementResult& result) {
  std::map<std::pair<std::string, std::string>, Resources> load;
  for (const auto& [name, p] : result.placements) {
    int wi = app.WorkloadIndex(name);
    if (wi < 0) return absl::FailedPreconditionError("unknown workload " + name);
    load[{p.cluster, p.node}] += app.workloads[wi].requests;
  }
  for (const auto& [key, req] : load) {
    const Cluster* c = federation.FindCluster(key.first);
    int ni = c == nullptr ? -1 : c->NodeIndex(key.second);
    if (ni < 0)
      return absl::FailedPreconditionError("unknown node " + key.first + "/" + key.second);
    const Node& n = c->nodes[ni];
    if (!(n.capacity - n.allocated).Fits(req)) {
      return absl::FailedPreconditionError("node " + key.first + "/" + key.second +
                                           " over capacity");
    }
  }
  std::map<std::tuple<std::string, std::string, int>, int64_t> bw;
  for (const Channel& ch : app.channels) {
    auto a = result.placements.find(ch.from);
    auto b = result.placements.find(ch.to);
    if (a == result.placements.end() || b == result.placements.end()) continue;
    std::optional<int64_t> lat = PathLatencyNs(federation, a->second, b->second);
    if (!lat.has_value()) {
      return absl::FailedPreconditionError("channel " + ch.name + " has no single-hop path");
    }
    if (ch.max_delay_ns > 0 && *lat > ch.max_delay_ns) {
      return absl::FailedPreconditionError(
          absl::StrCat("channel ", ch.name, " latency ", *lat, " > ", ch.max_delay_ns));
    }
    if (a->second.cluster != b->second.cluster) {
      bw[{a->second.cluster, b->second.cluster, static_cast<int>(ch.service_class)}] +=
          ch.min_bandwidth_bps;
    }
  }
  for (const auto& [key, bps] : bw) {
    const auto& [from, to, cls] = key;
    const Link* l = federation.FindLink(from, to);
    if (l == nullptr || l->free_bandwidth_bps[cls] < bps) {
      return absl::FailedPreconditionError("link " + from + " -> " + to + " over bandwidth");
    }
  }
  return absl::OkStatus();
}

}  // namespace codeco::swm
