#include "swm/milp/milp.h"

#include <algorithm>
#include <vector>

#include "CoinFinite.hpp"
#include "CoinPackedVector.hpp"
#include "codeco/common/status.h"
#include "swm/milp/cbc_solve.h"
#include "swm/core/plugins.h"

namespace codeco::swm::milp {
namespace {

struct Slot {
  const Cluster* cluster;
  const Node* node;
};

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

bool HardAllowed(const Workload& w, const Federation& fed, const Cluster& c) {
  if (!w.allowed_regions.empty() && std::find(w.allowed_regions.begin(), w.allowed_regions.end(),
                                              c.labels.region) == w.allowed_regions.end()) {
    return false;
  }
  if (!w.allowed_countries.empty() &&
      std::find(w.allowed_countries.begin(), w.allowed_countries.end(), c.labels.country) ==
          w.allowed_countries.end()) {
    return false;
  }
  if (!w.origin_cluster.empty() && w.max_latency_to_origin_ns > 0) {
    std::optional<int64_t> lat = OriginLatencyNs(fed, w.origin_cluster, c.name);
    if (!lat.has_value() || *lat > w.max_latency_to_origin_ns) return false;
  }
  return true;
}

}  // namespace

double PlacementObjective(const Application& app, const Federation& federation,
                          const std::map<std::string, Placement>& placements) {
  double value = kPlacedWeight * static_cast<double>(placements.size());
  for (const Channel& ch : app.channels) {
    auto a = placements.find(ch.from);
    auto b = placements.find(ch.to);
    if (a == placements.end() || b == placements.end()) continue;
    value -= Ms(PathLatencyNs(federation, a->second, b->second).value_or(0));
  }
  return value;
}

absl::StatusOr<MilpResult> SolveExact(const Application& app, const Federation& federation,
                                      const MilpOptions& options) {
  RETURN_IF_ERROR(app.Validate());
  RETURN_IF_ERROR(federation.Validate());
  std::vector<Slot> slots;
  for (const Cluster& c : federation.clusters()) {
    for (const Node& n : c.nodes) {
      if (n.schedulable) slots.push_back({&c, &n});
    }
  }
  const int W = static_cast<int>(app.workloads.size());
  const int N = static_cast<int>(slots.size());
  std::vector<double> col_lb, col_ub, obj;
  std::vector<bool> integer;
  std::vector<std::vector<int>> x(W, std::vector<int>(N, -1));
  auto add_col = [&](double lb, double ub, double cost, bool is_int) {
    col_lb.push_back(lb);
    col_ub.push_back(ub);
    obj.push_back(cost);
    integer.push_back(is_int);
    return static_cast<int>(obj.size()) - 1;
  };
  for (int w = 0; w < W; ++w) {
    for (int n = 0; n < N; ++n) {
      if (!slots[n].node->Free().Fits(app.workloads[w].requests)) continue;
      if (!HardAllowed(app.workloads[w], federation, *slots[n].cluster)) continue;
      x[w][n] = add_col(0, 1, -kPlacedWeight, true);  // CBC minimises
    }
  }
  std::vector<double> row_lb, row_ub;
  std::vector<CoinPackedVector> rows;
  auto add_row = [&](CoinPackedVector row, double lb, double ub) {
    rows.push_back(std::move(row));
    row_lb.push_back(lb);
    row_ub.push_back(ub);
  };
  for (int w = 0; w < W; ++w) {  // placed at most once
    CoinPackedVector row;
    for (int n = 0; n < N; ++n) {
      if (x[w][n] >= 0) row.insert(x[w][n], 1.0);
    }
    if (row.getNumElements() > 0) add_row(row, 0, 1);
  }
  for (int n = 0; n < N; ++n) {  // node capacity
    Resources free = slots[n].node->Free();
    CoinPackedVector cpu, mem, gpu;
    for (int w = 0; w < W; ++w) {
      if (x[w][n] < 0) continue;
      const Resources& r = app.workloads[w].requests;
      if (r.cpu_millis > 0) cpu.insert(x[w][n], static_cast<double>(r.cpu_millis));
      if (r.memory_bytes > 0) mem.insert(x[w][n], static_cast<double>(r.memory_bytes) / 1e6);
      if (r.gpu > 0) gpu.insert(x[w][n], static_cast<double>(r.gpu));
    }
    if (cpu.getNumElements() > 1) add_row(cpu, -COIN_DBL_MAX, static_cast<double>(free.cpu_millis));
    if (mem.getNumElements() > 1) {
      add_row(mem, -COIN_DBL_MAX, static_cast<double>(free.memory_bytes) / 1e6);
    }
    if (gpu.getNumElements() > 1) add_row(gpu, -COIN_DBL_MAX, static_cast<double>(free.gpu));
  }
  std::map<std::tuple<std::string, std::string, int>, CoinPackedVector> link_rows;
  for (const Channel& ch : app.channels) {
    int a = app.WorkloadIndex(ch.from), b = app.WorkloadIndex(ch.to);
    for (int na = 0; na < N; ++na) {
      if (x[a][na] < 0) continue;
      for (int nb = 0; nb < N; ++nb) {
        if (x[b][nb] < 0) continue;
        Placement pa{slots[na].cluster->name, slots[na].node->name};
        Placement pb{slots[nb].cluster->name, slots[nb].node->name};
        std::optional<int64_t> lat = PathLatencyNs(federation, pa, pb);
        bool inter = pa.cluster != pb.cluster;
        int64_t link_free = 0;
        if (inter && lat.has_value()) {
          link_free = federation.FindLink(pa.cluster, pb.cluster)
                          ->free_bandwidth_bps[static_cast<int>(ch.service_class)];
        }
        bool infeasible = !lat.has_value() || (ch.max_delay_ns > 0 && *lat > ch.max_delay_ns) ||
                          (inter && ch.min_bandwidth_bps > link_free);
        CoinPackedVector row;
        row.insert(x[a][na], 1.0);
        row.insert(x[b][nb], 1.0);
        if (infeasible) {
          add_row(row, -COIN_DBL_MAX, 1);
          continue;
        }
        bool uses_link = inter && ch.min_bandwidth_bps > 0;
        if (*lat == 0 && !uses_link) continue;
        int z = add_col(0, 1, Ms(*lat), false);
        row.insert(z, -1.0);  // x_a + x_b - z <= 1
        add_row(row, -COIN_DBL_MAX, 1);
        if (uses_link) {
          link_rows[{pa.cluster, pb.cluster, static_cast<int>(ch.service_class)}].insert(
              z, static_cast<double>(ch.min_bandwidth_bps) / 1e3);
        }
      }
    }
  }
  for (auto& [key, row] : link_rows) {
    const auto& [from, to, cls] = key;
    double cap = static_cast<double>(federation.FindLink(from, to)->free_bandwidth_bps[cls]) / 1e3;
    add_row(row, -COIN_DBL_MAX, cap);
  }
  MilpResult result;
  result.variables = static_cast<int>(obj.size());
  result.constraints = static_cast<int>(rows.size());
  if (obj.empty()) {
    result.optimal = true;
    return result;
  }
  CbcAnswer answer = SolveWithCbc(
      RowProgram{std::move(col_lb), std::move(col_ub), std::move(obj), std::move(integer),
                 std::move(rows), std::move(row_lb), std::move(row_ub)},
      options.time_limit_seconds);
  if (answer.solution.empty()) return absl::InternalError("CBC found no solution");
  const std::vector<double>& sol = answer.solution;
  result.optimal = answer.optimal;
  for (int w = 0; w < W; ++w) {
    for (int n = 0; n < N; ++n) {
      if (x[w][n] >= 0 && sol[x[w][n]] > 0.5) {
        result.placements[app.workloads[w].name] =
            Placement{slots[n].cluster->name, slots[n].node->name};
      }
    }
  }
  result.objective = PlacementObjective(app, federation, result.placements);
  return result;
}

}  // namespace codeco::swm::milp
