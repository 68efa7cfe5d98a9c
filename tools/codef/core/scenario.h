#pragma once
// CODEF scenarios: the YAML file that describes an emulated federation (hub,
// clusters, nodes, labels, energy), the inter-cluster link matrix, the
// workloads (CAM files and a synthetic task stream), a fault timeline, what to
// record and where results go. ParseScenario validates everything and names
// the path of every bad field (unknown keys too); docs/codef.md is the
// reference of the format.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "codeco/common/v1/types.pb.h"

namespace codeco::codef {

/// Capacity and energy of one node.
struct NodeSpec {
  /// Node name, unique in its cluster.
  std::string name;
  /// CPU, millicores.
  int64_t cpu_millicores = 0;
  /// Memory, bytes.
  int64_t memory_bytes = 0;
  /// Number of GPUs.
  int64_t gpu = 0;
  /// Node labels (the cluster's well-known labels are added by the emulator).
  std::map<std::string, std::string> labels;
  /// Power drawn idle, watts.
  double idle_watts = 0;
  /// Power drawn at full CPU load, watts.
  double max_watts = 0;
  /// Carbon intensity of the node's supply, gCO2eq/kWh (0 = unknown).
  double carbon_intensity_g_per_kwh = 0;
};

/// One cluster of the federation (the hub or a managed cluster).
struct ClusterSpec {
  /// Cluster name (DNS label), unique in the federation.
  std::string name;
  /// Region, country, provider, tier and position.
  codeco::common::v1::ClusterLabels labels;
  /// Parent cluster in a cluster tree; empty for none.
  std::string parent;
  /// Default energy of its nodes (idle/max watts, joules per byte, carbon).
  codeco::common::v1::EnergyProfile energy;
  /// Nodes, in file order (a `count` entry expands to count nodes).
  std::vector<NodeSpec> nodes;
  /// Delay from pod creation to Running, nanoseconds.
  int64_t pod_start_delay_ns = 0;
};

/// Conditions of one direction of a link.
struct LinkSpec {
  /// Source cluster.
  std::string from;
  /// Destination cluster.
  std::string to;
  /// One-way latency, nanoseconds.
  int64_t one_way_latency_ns = 0;
  /// Bandwidth cap, bits per second (0 = unlimited).
  int64_t bandwidth_bps = 0;
  /// Loss ratio, 0-1.
  double loss = 0;
};

/// A random distribution of a quantity (durations in ns, CPU in millicores,
/// memory in bytes, counts as plain numbers).
struct Distribution {
  /// Shape of the distribution.
  enum class Kind { kConstant, kUniform, kExponential, kLogNormal, kChoice };
  /// The shape.
  Kind kind = Kind::kConstant;
  /// kConstant: the value; kExponential: the mean; kLogNormal: the median.
  double value = 0;
  /// kLogNormal: standard deviation of the log.
  double sigma = 0;
  /// kUniform: bounds; others: clamps when set (max 0 = no clamp).
  double min = 0;
  /// Upper bound (0 = none, except kUniform where it is required).
  double max = 0;
  /// kChoice: the values and their weights (all 1 when not given).
  std::vector<double> choices;
  /// kChoice: weights, same length as choices.
  std::vector<double> weights;
};

/// A synthetic stream of tasks in the style of the Google cluster traces, as
/// used in the mck8s study: arrivals over a window, durations, requests and a
/// preferred cluster per task.
struct TaskStreamSpec {
  /// Number of tasks.
  int64_t count = 0;
  /// Arrivals are spread over [start, start + window), nanoseconds.
  int64_t start_ns = 0;
  /// Length of the arrival window, nanoseconds.
  int64_t window_ns = 0;
  /// How long each task runs, nanoseconds.
  Distribution duration;
  /// CPU request, millicores.
  Distribution cpu;
  /// Memory request, bytes.
  Distribution memory;
  /// Tasks at least this long are long-running services, shorter ones jobs
  /// (0 = every task is a job).
  int64_t long_running_after_ns = 0;
  /// Preferred cluster weights (cluster name -> weight); empty = uniform over
  /// the managed clusters.
  std::vector<std::pair<std::string, double>> locations;
  /// Managed clusters the scheduler may place the tasks on, in file order
  /// (empty = every managed cluster with nodes). Simulate mode honours it;
  /// it lets a scenario keep a site aside (e.g. a cloud kept for bursting).
  std::vector<std::string> clusters;
  /// Seed of the generator.
  uint64_t seed = 1;
};

/// A CAM file to apply at a point of the timeline.
struct CamRef {
  /// Path of the CAM, resolved against the scenario file's directory.
  std::string file;
  /// When to apply it, nanoseconds after the start.
  int64_t at_ns = 0;
};

/// What the workloads of a scenario are.
struct WorkloadSpec {
  /// CAM files.
  std::vector<CamRef> cams;
  /// Synthetic tasks, when given.
  std::optional<TaskStreamSpec> task_stream;
};

/// Kind of a fault on the timeline.
enum class FaultAction {
  kLinkDegrade,       ///< new latency, bandwidth or loss on a link
  kLinkCut,           ///< a link delivers nothing
  kLinkHeal,          ///< a link back to the scenario's conditions
  kNodeFail,          ///< a node goes NotReady, its pods fail
  kNodeRecover,       ///< a failed node is Ready again
  kClusterPartition,  ///< every link of a managed cluster is cut
  kClusterHeal,       ///< a partitioned cluster's links are restored
  kHubCut,            ///< every link of the hub is cut
  kHubHeal,           ///< the hub's links are restored
  kLoadSurge,         ///< every pod of a cluster uses `factor` times its CPU
  kNodeLoad,          ///< a node's background load (outside its pods) changes
};

/// The scenario keyword of a fault action ("link_degrade", ...).
const char* FaultActionName(FaultAction action);

/// One fault at a point of the timeline.
struct FaultSpec {
  /// When, nanoseconds after the start.
  int64_t at_ns = 0;
  /// What happens.
  FaultAction action = FaultAction::kLinkCut;
  /// Link faults: the two ends (from, to).
  std::string from;
  /// Link faults: the other end.
  std::string to;
  /// Link faults: both directions (default true).
  bool symmetric = true;
  /// link_degrade: new one-way latency, ns (nullopt = unchanged).
  std::optional<int64_t> one_way_latency_ns;
  /// link_degrade: new bandwidth, bps (nullopt = unchanged).
  std::optional<int64_t> bandwidth_bps;
  /// link_degrade: new loss ratio (nullopt = unchanged).
  std::optional<double> loss;
  /// Node and cluster faults, load surges: the cluster.
  std::string cluster;
  /// Node faults: the node.
  std::string node;
  /// load_surge: usage factor.
  double factor = 1;
  /// load_surge, node_load: how long it lasts, ns (0 = until the end).
  int64_t duration_ns = 0;
  /// node_load: background CPU as a share of the node's capacity ("90%").
  std::optional<double> cpu_fraction;
  /// node_load: background CPU, millicores ("1500m", "2").
  std::optional<int64_t> cpu_millicores;
  /// node_load: background memory, bytes.
  std::optional<int64_t> memory_bytes;
};

/// Whom the managed clusters report to (the scenario's `federation.mode`).
enum class FederationMode {
  /// Every managed cluster registers and heartbeats with the hub ACM (the
  /// default); `parent` only arranges the tree `codecoctl get tree` shows.
  kFlat,
  /// A cluster tree in layers: a managed cluster with a `parent` registers
  /// and heartbeats with its parent's ACM (which relays missions down and
  /// reports its subtree up); clusters without one report to the hub.
  kLayered,
};

/// "flat" or "layered".
const char* FederationModeName(FederationMode mode);

/// What a run records and where its results go.
struct RecordSpec {
  /// Sampling interval, nanoseconds.
  int64_t interval_ns = 0;
  /// Metric families to record (node_usage, node_energy, pod_phases,
  /// pending_pods, link_conditions, placement).
  std::vector<std::string> metrics;
  /// Output directory (resolved against the scenario file's directory).
  std::string output_dir;
  /// Write a Markdown report with SVG plots.
  bool report = true;
};

/// A whole scenario.
struct Scenario {
  /// Scenario name (DNS label).
  std::string name;
  /// Free text.
  std::string description;
  /// How long a run lasts, nanoseconds (0 = until stopped).
  int64_t duration_ns = 0;
  /// The hub.
  ClusterSpec hub;
  /// Managed clusters, in file order.
  std::vector<ClusterSpec> clusters;
  /// Whom the managed clusters report to (`federation.mode`, default flat).
  FederationMode mode = FederationMode::kFlat;
  /// Every directed link between two clusters the matrix mentions (both
  /// directions of symmetric entries), plus the default for every other pair.
  std::vector<LinkSpec> links;
  /// Conditions of pairs the matrix does not mention; nullopt = no link.
  std::optional<LinkSpec> default_link;
  /// Workloads.
  WorkloadSpec workloads;
  /// Fault timeline, sorted by time (stable for equal times).
  std::vector<FaultSpec> faults;
  /// Recording.
  RecordSpec record;

  /// The cluster called `name` (the hub included), or null.
  const ClusterSpec* FindCluster(const std::string& name) const;
  /// The conditions from `from` to `to`: the matrix entry, else the default;
  /// nullopt when there is no link.
  std::optional<LinkSpec> LinkBetween(const std::string& from, const std::string& to) const;
};

/// Parses and validates a scenario. `base_dir` resolves relative file paths
/// (CAMs, traces, output dir); it may be empty. Every error names its field
/// path; all errors are reported at once.
absl::StatusOr<Scenario> ParseScenario(const std::string& yaml_text, const std::string& base_dir);

/// Reads and parses a scenario file.
absl::StatusOr<Scenario> LoadScenarioFile(const std::string& path);

/// One task of a generated stream.
struct GeneratedTask {
  /// Task name ("task-00042").
  std::string name;
  /// Arrival, nanoseconds after the start.
  int64_t at_ns = 0;
  /// Preferred cluster.
  std::string cluster;
  /// CPU request, millicores.
  int64_t cpu_millicores = 0;
  /// Memory request, bytes.
  int64_t memory_bytes = 0;
  /// Run time, nanoseconds.
  int64_t duration_ns = 0;
  /// True for a long-running service, false for a job.
  bool long_running = false;
};

/// Expands a task stream into tasks sorted by arrival; the same spec always
/// gives the same tasks. `managed_clusters` is used when the spec has no
/// location weights.
std::vector<GeneratedTask> GenerateTasks(const TaskStreamSpec& spec,
                                         const std::vector<std::string>& managed_clusters);

}  // namespace codeco::codef
