#pragma once
// The placement framework, modelled on the Kubernetes scheduler framework:
// plugins implement only the stages they need (QueueSort, Filter, Score +
// NormalizeScores, Reserve/Unreserve, Permit); a Profile enables plugins and
// weights their scores; the same Framework runs at cluster level (L1, over
// cluster aggregates) and at node level (L2, over one cluster's nodes).

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "swm/core/model.h"

namespace codeco::swm {

/// The level a framework call runs at.
enum class Level { kCluster, kNode };

/// Outcome of a Filter, Reserve or Permit stage. "Does not fit" (with a
/// reason a user can read) is not an error; errors are broken inputs or ports.
class PluginStatus {
 public:
  /// The candidate fits.
  static PluginStatus Success() { return PluginStatus(Code::kSuccess, ""); }
  /// The candidate does not fit; `reason` says why, e.g. "insufficient cpu".
  static PluginStatus Unschedulable(std::string reason) {
    return PluginStatus(Code::kUnschedulable, std::move(reason));
  }
  /// Something failed (a port, an invariant); `status` is not OK.
  static PluginStatus Error(absl::Status status);
  /// True on success.
  bool ok() const { return code_ == Code::kSuccess; }
  /// True when the candidate simply does not fit.
  bool unschedulable() const { return code_ == Code::kUnschedulable; }
  /// True on an error.
  bool is_error() const { return code_ == Code::kError; }
  /// The reason (unschedulable) or error message.
  const std::string& reason() const { return reason_; }
  /// The error as an absl::Status (OK unless is_error()).
  absl::Status error() const { return error_; }

 private:
  enum class Code { kSuccess, kUnschedulable, kError };
  PluginStatus(Code code, std::string reason) : code_(code), reason_(std::move(reason)) {}
  Code code_;
  std::string reason_;
  absl::Status error_;
};

/// Aggregate view of a cluster: what L1 decisions use.
struct ClusterAggregate {
  std::string name;              ///< Cluster name.
  ClusterLabels labels;          ///< Its labels.
  int64_t intra_latency_ns = 0;  ///< Latency inside it.
  Resources capacity;            ///< Sum of schedulable nodes' capacity.
  Resources free;                ///< Sum of schedulable nodes' free resources.
  Resources largest_free_node;   ///< Free resources of the freest node (by CPU, then memory).
  int node_count = 0;            ///< Schedulable nodes.
};

/// The aggregate view of `cluster`.
ClusterAggregate AggregateOf(const Cluster& cluster);

/// A place a workload may go: a cluster (L1) or one of its nodes (L2).
struct Candidate {
  Level level = Level::kNode;                 ///< Which level this candidate belongs to.
  const ClusterAggregate* cluster = nullptr;  ///< Always set.
  const Node* node = nullptr;                 ///< Set at Level::kNode only.
  int node_index = -1;                        ///< Index of `node` in its cluster.

  /// Free resources of the candidate (node free, or cluster free).
  Resources Free() const;
  /// Capacity of the candidate.
  Resources Capacity() const;
  /// Resources a single workload could get here at most (node free, or the
  /// freest node's free resources).
  Resources Headroom() const;
};

/// Plugin-owned data kept for one cycle (subclass it).
class CycleData {
 public:
  virtual ~CycleData() = default;
};

/// Explicit per-cycle scratch state: the application being placed, the
/// topology, the partial assignment so far and the bandwidth it consumes.
class CycleState {
 public:
  /// `topology` gives links and intra-cluster latencies; `solving` is the
  /// cluster whose nodes the cycle may allocate on (null at L1 only).
  CycleState(const Application& app, const Federation& topology, Cluster* solving, bool relax_soft);
  /// The application.
  const Application& app() const { return app_; }
  /// Links and latencies.
  const Federation& topology() const { return topology_; }
  /// The cluster being solved at L2, or null.
  Cluster* solving() const { return solving_; }
  /// True in the reconsideration round: soft plugins are skipped.
  bool relax_soft() const { return relax_soft_; }
  /// Workloads placed so far (this cycle's and earlier visits').
  const std::map<std::string, Placement>& placed() const { return placed_; }
  /// Records that `workload` is placed at `p`.
  void Bind(const std::string& workload, const Placement& p) { placed_[workload] = p; }
  /// Forgets `workload`'s placement (no-op if absent).
  void Unbind(const std::string& workload) { placed_.erase(workload); }
  /// Indices into app().channels of the channels touching workload `name`.
  const std::vector<int>& ChannelsOf(const std::string& name) const;
  /// Bandwidth of class `cls` the plan already uses on link from -> to.
  int64_t UsedBandwidth(const std::string& from, const std::string& to, ServiceClass cls) const;
  /// Link free bandwidth minus what the plan uses; 0 if there is no link.
  int64_t FreeBandwidth(const std::string& from, const std::string& to, ServiceClass cls) const;
  /// Adds `delta` (may be negative) to the plan's use of link from -> to.
  void AddBandwidth(const std::string& from, const std::string& to, ServiceClass cls,
                    int64_t delta);
  /// Number of the app's workloads placed in `cluster` (and on `node` if non-empty).
  int PlacedCount(const std::string& cluster, const std::string& node) const;
  /// Reservations made this cycle (keys owned by the reserve plugins).
  std::set<std::string>& reserved() { return reserved_; }
  /// Plugin data stored under `key`, or null.
  CycleData* Data(const std::string& key) const;
  /// Stores `data` under `key`, replacing what was there.
  void SetData(const std::string& key, std::unique_ptr<CycleData> data);

 private:
  const Application& app_;
  const Federation& topology_;
  Cluster* solving_;
  bool relax_soft_;
  std::map<std::string, Placement> placed_;
  std::map<std::string, std::vector<int>> channels_of_;
  std::map<std::tuple<std::string, std::string, int>, int64_t> used_bw_;
  std::set<std::string> reserved_;
  std::map<std::string, std::unique_ptr<CycleData>> data_;
};

/// Base of every plugin. A plugin also derives from the stage interfaces it
/// implements.
class Plugin {
 public:
  virtual ~Plugin() = default;
  /// Registry name, e.g. "WorstFit".
  virtual std::string Name() const = 0;
};

/// Orders the workloads of an application before placement.
class QueueSortPlugin : public virtual Plugin {
 public:
  /// Reorders `order` (indices into app.workloads) in place.
  virtual void Sort(const Application& app, std::vector<int>& order) const = 0;
};

/// Rejects candidates that cannot host a workload.
class FilterPlugin : public virtual Plugin {
 public:
  /// Success, Unschedulable(reason) or Error.
  virtual PluginStatus Filter(CycleState& state, const Workload& w, const Candidate& c) const = 0;
};

/// Ranks feasible candidates.
class ScorePlugin : public virtual Plugin {
 public:
  /// A raw score; higher is better.
  virtual absl::StatusOr<double> Score(CycleState& state, const Workload& w,
                                       const Candidate& c) const = 0;
  /// Maps raw scores to 0-100 in place. The default clamps to 0-100.
  virtual void NormalizeScores(std::vector<double>& scores) const;
};

/// Claims per-cycle resources for a chosen candidate, and gives them back.
class ReservePlugin : public virtual Plugin {
 public:
  /// Claims what `w` needs at `c`.
  virtual PluginStatus Reserve(CycleState& state, const Workload& w, const Candidate& c) const = 0;
  /// Gives back what Reserve claimed; idempotent, safe without a Reserve.
  virtual void Unreserve(CycleState& state, const Workload& w, const Candidate& c) const = 0;
};

/// Last say on a reserved candidate before it is bound.
class PermitPlugin : public virtual Plugin {
 public:
  /// Success or Unschedulable(reason) (the framework then unreserves).
  virtual PluginStatus Permit(CycleState& state, const Workload& w, const Candidate& c) const = 0;
};

/// Min-max normalisation of raw scores to 0-100 (all equal -> all 0); with
/// `invert`, lower raw scores get higher normalised ones.
void MinMaxNormalize(std::vector<double>& scores, bool invert);

/// One plugin enabled in a profile.
struct PluginConfig {
  std::string name;                    ///< Registry name.
  double weight = 1.0;                 ///< Score weight (score plugins).
  bool soft = false;                   ///< Skipped in the reconsideration round.
  std::map<std::string, double> args;  ///< Plugin arguments, e.g. {"alpha", 0.5}.
};

/// A named set of enabled plugins.
struct Profile {
  std::string name;                   ///< Profile name, e.g. "codeco".
  std::vector<PluginConfig> plugins;  ///< Enabled plugins, in stage order.
};

/// Ports and arguments a plugin factory may use.
class RecommendationSource;
/// Everything a factory gets.
struct PluginContext {
  const PluginConfig* config = nullptr;             ///< The plugin's config.
  RecommendationSource* recommendations = nullptr;  ///< PDLC port (may be null).
};

/// name -> factory, filled explicitly in one place (NewDefaultRegistry).
class PluginRegistry {
 public:
  /// Creates a plugin from its config.
  using Factory = std::function<absl::StatusOr<std::unique_ptr<Plugin>>(const PluginContext&)>;
  /// Registers `factory` under `name`; ALREADY_EXISTS if taken.
  absl::Status Register(const std::string& name, Factory factory);
  /// The factory for `name`, or null.
  const Factory* Find(const std::string& name) const;
  /// Every registered name.
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, Factory> factories_;
};

/// The outcome of ranking candidates for one workload.
struct Selection {
  int best = -1;               ///< Index of the chosen candidate, -1 if none fits.
  std::vector<double> scores;  ///< Weighted total per candidate (-1 = filtered out).
  std::string reason;          ///< Why nothing fits, e.g. "3 nodes: insufficient cpu".
};

/// A profile instantiated: runs the stages in order.
class Framework {
 public:
  /// Builds every plugin of `profile`; INVALID_ARGUMENT naming
  /// `plugins[i].name` for an unknown plugin or a bad argument. The built-in
  /// accounting plugins ("NodeResourcesReserve", "ChannelBandwidthReserve")
  /// are always appended.
  static absl::StatusOr<std::unique_ptr<Framework>> Create(const Profile& profile,
                                                           const PluginRegistry& registry,
                                                           RecommendationSource* recommendations);
  /// Profile name.
  const std::string& name() const { return name_; }
  /// Workload indices of `app` in placement order (the QueueSort plugin's,
  /// else application order).
  std::vector<int> QueueOrder(const Application& app) const;
  /// Filters and scores `candidates` for `w`; an error only when a plugin fails.
  absl::StatusOr<Selection> Select(CycleState& state, const Workload& w,
                                   const std::vector<Candidate>& candidates) const;
  /// Runs Reserve then Permit for `c`; on failure unreserves everything.
  PluginStatus ReserveAndPermit(CycleState& state, const Workload& w, const Candidate& c) const;
  /// Runs every Unreserve (idempotent).
  void Unreserve(CycleState& state, const Workload& w, const Candidate& c) const;

 private:
  struct Enabled {
    std::unique_ptr<Plugin> plugin;
    PluginConfig config;
  };
  Framework() = default;
  std::string name_;
  template <typename Stage>
  struct Hook {
    const Stage* plugin;
    const PluginConfig* config;
  };
  std::vector<Enabled> plugins_;
  const QueueSortPlugin* queue_sort_ = nullptr;
  std::vector<Hook<FilterPlugin>> filters_;
  std::vector<Hook<ScorePlugin>> scorers_;
  std::vector<Hook<ReservePlugin>> reservers_;
  std::vector<Hook<PermitPlugin>> permits_;
};

}  // namespace codeco::swm
