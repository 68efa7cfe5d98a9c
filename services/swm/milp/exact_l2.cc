#include "swm/milp/exact_l2.h"

#include <set>
#include <tuple>
#include <vector>

#include "CoinError.hpp"
#include "CoinFinite.hpp"
#include "CoinPackedVector.hpp"
#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"
#include "swm/milp/cbc_solve.h"
#include "swm/milp/milp.h"

namespace codeco::swm::milp {
namespace {

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

}  // namespace

ExactL2Solver::ExactL2Solver(const PluginRegistry& registry, RecommendationSource* recommendations,
                             ExactL2Options options)
    : registry_(registry),
      recommendations_(recommendations),
      options_(options),
      heuristic_(registry, recommendations) {}

absl::StatusOr<L2Result> ExactL2Solver::Solve(const L2Request& request) {
  if (request.app == nullptr) return absl::InvalidArgumentError("app: required");
  int schedulable = 0;
  for (const Node& n : request.cluster.nodes) schedulable += n.schedulable ? 1 : 0;
  if (options_.max_nodes > 0 && schedulable <= options_.max_nodes &&
      static_cast<int>(request.pending.size()) <= options_.max_workloads) {
    ASSIGN_OR_RETURN(std::optional<L2Result> exact, SolveExactly(request));
    if (exact.has_value()) {
      ++exact_solves_;
      return *exact;
    }
  }
  return heuristic_.Solve(request);
}

absl::StatusOr<std::optional<L2Result>> ExactL2Solver::SolveExactly(const L2Request& req) {
  const Application& app = *req.app;
  const std::string profile_name = req.profile.empty() ? "codeco" : req.profile;
  if (!frameworks_.count(profile_name)) {
    absl::StatusOr<Profile> p = BuiltinProfile(profile_name);
    if (!p.ok()) return InvalidFieldError("profile", "unknown profile \"" + profile_name + "\"");
    ASSIGN_OR_RETURN(frameworks_[profile_name], Framework::Create(*p, registry_, recommendations_));
  }
  const Framework& fw = *frameworks_[profile_name];

  // The same view the heuristic solves on.
  Federation topo;
  topo.AddCluster(req.cluster);
  for (const ClusterAggregate& a : req.others) {
    topo.AddCluster(
        Cluster{.name = a.name, .labels = a.labels, .intra_latency_ns = a.intra_latency_ns});
  }
  for (const Link& l : req.links) topo.AddLink(l);
  Cluster* solving = topo.MutableCluster(req.cluster.name);
  CycleState state(app, topo, solving, req.relax_soft);
  for (const auto& [w, p] : req.placed) state.Bind(w, p);
  ClusterAggregate self = AggregateOf(*solving);
  std::vector<Candidate> nodes;
  for (size_t i = 0; i < solving->nodes.size(); ++i) {
    nodes.push_back(Candidate{Level::kNode, &self, &solving->nodes[i], static_cast<int>(i)});
  }
  const int N = static_cast<int>(nodes.size());

  // Which nodes each workload may use, by the profile's filters.
  L2Result result;
  std::vector<const Workload*> batch;
  for (const std::string& name : req.pending) {
    int wi = app.WorkloadIndex(name);
    if (wi < 0) return InvalidFieldError("pending", "unknown workload \"" + name + "\"");
    batch.push_back(&app.workloads[wi]);
  }
  const int W = static_cast<int>(batch.size());
  std::vector<double> col_lb, col_ub, obj;
  std::vector<bool> integer;
  auto add_col = [&](double cost, bool is_int) {
    col_lb.push_back(0);
    col_ub.push_back(1);
    obj.push_back(cost);
    integer.push_back(is_int);
    return static_cast<int>(obj.size()) - 1;
  };
  std::vector<std::vector<int>> x(W, std::vector<int>(N, -1));
  std::map<std::string, int> index_of;
  for (int w = 0; w < W; ++w) {
    index_of[batch[w]->name] = w;
    ASSIGN_OR_RETURN(Selection sel, fw.Select(state, *batch[w], nodes));
    if (sel.best < 0) {
      result.unfit[batch[w]->name] = sel.reason;
      continue;
    }
    // Latency of its channels to workloads placed elsewhere, for the objective.
    double peer_ms = 0;
    for (int ci : state.ChannelsOf(batch[w]->name)) {
      const Channel& ch = app.channels[ci];
      auto peer = req.placed.find(ch.from == batch[w]->name ? ch.to : ch.from);
      if (peer == req.placed.end()) continue;
      Placement here{solving->name, solving->nodes[0].name};
      std::optional<int64_t> lat = ch.from == batch[w]->name
                                       ? PathLatencyNs(topo, here, peer->second)
                                       : PathLatencyNs(topo, peer->second, here);
      if (peer->second.cluster != solving->name) peer_ms += Ms(lat.value_or(0));
    }
    for (int n = 0; n < N; ++n) {
      if (sel.scores[n] >= 0) x[w][n] = add_col(-kPlacedWeight + peer_ms, true);
    }
  }
  if (obj.empty()) return result;  // nothing can go here: the filters said why

  std::vector<CoinPackedVector> rows;
  std::vector<double> row_lb, row_ub;
  auto add_row = [&](CoinPackedVector row, double ub) {
    rows.push_back(std::move(row));
    row_lb.push_back(-COIN_DBL_MAX);
    row_ub.push_back(ub);
  };
  for (int w = 0; w < W; ++w) {
    CoinPackedVector row;
    for (int n = 0; n < N; ++n) {
      if (x[w][n] >= 0) row.insert(x[w][n], 1.0);
    }
    if (row.getNumElements() > 1) add_row(row, 1);
  }
  for (int n = 0; n < N; ++n) {
    const Resources free = solving->nodes[n].Free();
    CoinPackedVector cpu, mem, gpu;
    for (int w = 0; w < W; ++w) {
      if (x[w][n] < 0) continue;
      const Resources& r = batch[w]->requests;
      if (r.cpu_millis > 0) cpu.insert(x[w][n], static_cast<double>(r.cpu_millis));
      if (r.memory_bytes > 0) mem.insert(x[w][n], static_cast<double>(r.memory_bytes) / 1e6);
      if (r.gpu > 0) gpu.insert(x[w][n], static_cast<double>(r.gpu));
    }
    if (cpu.getNumElements() > 0) add_row(cpu, static_cast<double>(free.cpu_millis));
    if (mem.getNumElements() > 0) add_row(mem, static_cast<double>(free.memory_bytes) / 1e6);
    if (gpu.getNumElements() > 0) add_row(gpu, static_cast<double>(free.gpu));
  }
  // Channels: inside the batch (node pairs), and to workloads placed in
  // other clusters (bandwidth per link and class).
  // Link key -> column -> bits/s (in kbit/s); a workload may have several
  // channels over one link, so coefficients add up per column.
  std::map<std::tuple<std::string, std::string, int>, std::map<int, double>> link_rows;
  for (const Channel& ch : app.channels) {
    auto a = index_of.find(ch.from), b = index_of.find(ch.to);
    if (a != index_of.end() && b != index_of.end()) {
      for (int na = 0; na < N; ++na) {
        if (x[a->second][na] < 0) continue;
        for (int nb = 0; nb < N; ++nb) {
          if (x[b->second][nb] < 0) continue;
          int64_t lat = na == nb ? 0 : solving->intra_latency_ns;
          CoinPackedVector row;
          row.insert(x[a->second][na], 1.0);
          row.insert(x[b->second][nb], 1.0);
          if (ch.max_delay_ns > 0 && lat > ch.max_delay_ns) {
            add_row(row, 1);
          } else if (lat > 0) {
            row.insert(add_col(Ms(lat), false), -1.0);  // x_a + x_b - z <= 1
            add_row(row, 1);
          }
        }
      }
      continue;
    }
    const bool from_here = a != index_of.end();
    if (!from_here && b == index_of.end()) continue;
    auto peer = req.placed.find(from_here ? ch.to : ch.from);
    if (peer == req.placed.end() || peer->second.cluster == solving->name ||
        ch.min_bandwidth_bps <= 0) {
      continue;
    }
    const int w = from_here ? a->second : b->second;
    auto key = from_here ? std::make_tuple(solving->name, peer->second.cluster,
                                           static_cast<int>(ch.service_class))
                         : std::make_tuple(peer->second.cluster, solving->name,
                                           static_cast<int>(ch.service_class));
    for (int n = 0; n < N; ++n) {
      if (x[w][n] >= 0) {
        link_rows[key][x[w][n]] += static_cast<double>(ch.min_bandwidth_bps) / 1e3;
      }
    }
  }
  for (const auto& [key, coefficients] : link_rows) {
    const auto& [from, to, cls] = key;
    CoinPackedVector row;
    for (const auto& [column, value] : coefficients) row.insert(column, value);
    add_row(
        row,
        static_cast<double>(state.FreeBandwidth(from, to, static_cast<ServiceClass>(cls))) / 1e3);
  }

  // CBC reports trouble with exceptions; a solve it cannot do is the
  // heuristic's, never a crash of the service.
  std::map<std::string, int> chosen;
  try {
    CbcAnswer answer = SolveWithCbc(
        RowProgram{std::move(col_lb), std::move(col_ub), std::move(obj), std::move(integer),
                   std::move(rows), std::move(row_lb), std::move(row_ub)},
        absl::ToDoubleSeconds(options_.time_limit));
    if (answer.solution.empty()) return std::nullopt;  // no answer in time: the heuristic's turn
    const std::vector<double>& sol = answer.solution;
    for (int w = 0; w < W; ++w) {
      for (int n = 0; n < N; ++n) {
        if (x[w][n] >= 0 && sol[x[w][n]] > 0.5) chosen[batch[w]->name] = n;
      }
    }
  } catch (const CoinError&) {
    return std::nullopt;
  }

  // The answer goes through Reserve and Permit in queue order, as the
  // heuristic's choices do; what they refuse stays unfit here.
  for (const std::string& name : req.pending) {
    if (result.unfit.count(name)) continue;
    auto it = chosen.find(name);
    if (it == chosen.end()) {
      result.unfit[name] = absl::StrCat("no room on the ", N,
                                        " nodes for it with the rest of the batch (exact solve)");
      continue;
    }
    const Workload& w = *batch[index_of[name]];
    PluginStatus st = fw.ReserveAndPermit(state, w, nodes[it->second]);
    if (st.is_error()) return st.error();
    if (!st.ok()) {
      result.unfit[name] = st.reason();
      continue;
    }
    state.Bind(name, Placement{solving->name, solving->nodes[it->second].name});
    result.node_of[name] = solving->nodes[it->second].name;
  }
  return result;
}

}  // namespace codeco::swm::milp
