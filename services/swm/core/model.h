#pragma once
// The SWM domain model: clusters and nodes with capacity, the inter-cluster
// network view, and the application (workloads, channels, policy) to place.
// Units follow docs/api.md: CPU millicores, memory bytes, latency ns,
// bandwidth bits per second.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace codeco::swm {

/// An amount of each schedulable resource.
struct Resources {
  int64_t cpu_millis = 0;    ///< CPU in millicores.
  int64_t memory_bytes = 0;  ///< Memory in bytes.
  int64_t gpu = 0;           ///< Whole GPUs.

  /// Component-wise sum.
  Resources operator+(const Resources& o) const;
  /// Component-wise difference.
  Resources operator-(const Resources& o) const;
  /// Adds `o` component-wise.
  Resources& operator+=(const Resources& o);
  /// Subtracts `o` component-wise.
  Resources& operator-=(const Resources& o);
  /// True when every component of `request` is <= this one's.
  bool Fits(const Resources& request) const;
  /// Equality of every component.
  bool operator==(const Resources& o) const = default;
};

/// A worker node of a managed cluster as the scheduler sees it.
struct Node {
  std::string name;                           ///< Node name, unique in its cluster.
  Resources capacity;                         ///< Allocatable capacity.
  Resources allocated;                        ///< Requests of pods bound (and reserved).
  std::map<std::string, std::string> labels;  ///< Node labels.
  bool schedulable = true;                    ///< False when cordoned or not ready.

  /// capacity - allocated (never negative per component).
  Resources Free() const;
};

/// Well-known labels of a cluster.
struct ClusterLabels {
  std::string region;    ///< e.g. "eu-west".
  std::string country;   ///< ISO 3166 alpha-2, e.g. "FR".
  std::string tier;      ///< "far-edge", "edge" or "cloud".
  std::string provider;  ///< e.g. "grid5000".
};

/// A managed cluster with node detail.
struct Cluster {
  std::string name;              ///< Cluster name, unique in the federation.
  ClusterLabels labels;          ///< Region/country/tier/provider.
  std::vector<Node> nodes;       ///< Its nodes.
  int64_t intra_latency_ns = 0;  ///< Node-to-node (and node-to-gateway) latency inside it.

  /// Sum of the nodes' capacity (schedulable nodes only).
  Resources Capacity() const;
  /// Sum of the nodes' free resources (schedulable nodes only).
  Resources Free() const;
  /// Index of `node` in `nodes`, or -1.
  int NodeIndex(const std::string& node) const;
};

/// Network service classes of CODECO channels.
enum class ServiceClass { kBestEffort = 0, kAssured = 1 };
/// Number of ServiceClass values.
inline constexpr int kNumServiceClasses = 2;

/// A directed, single-hop link between two clusters' gateways.
struct Link {
  std::string from;                                         ///< Source cluster.
  std::string to;                                           ///< Destination cluster.
  int64_t latency_ns = 0;                                   ///< One-way latency.
  int64_t free_bandwidth_bps[kNumServiceClasses] = {0, 0};  ///< Free capacity per class.
};

/// The federation as one solve sees it: clusters with nodes and the links.
class Federation {
 public:
  /// Adds (or replaces) a cluster.
  void AddCluster(Cluster cluster);
  /// Adds (or replaces) the directed link link.from -> link.to.
  void AddLink(const Link& link);
  /// The cluster called `name`, or null.
  const Cluster* FindCluster(const std::string& name) const;
  /// Mutable access to the cluster called `name`, or null.
  Cluster* MutableCluster(const std::string& name);
  /// The direct link from -> to, or null (no multi-hop paths exist).
  const Link* FindLink(const std::string& from, const std::string& to) const;
  /// Mutable access to the direct link from -> to, or null.
  Link* MutableLink(const std::string& from, const std::string& to);
  /// Every cluster, in insertion order.
  const std::vector<Cluster>& clusters() const { return clusters_; }
  /// Every link.
  const std::vector<Link>& links() const { return links_; }
  /// INVALID_ARGUMENT naming the field path when a value is out of range or
  /// a name is duplicated or a link refers to an unknown cluster.
  absl::Status Validate() const;

 private:
  std::vector<Cluster> clusters_;
  std::map<std::string, size_t> cluster_index_;
  std::vector<Link> links_;
  std::map<std::pair<std::string, std::string>, size_t> link_index_;
};

/// One replica of an application service to place.
struct Workload {
  std::string name;                             ///< "<service>-<replica>", unique in the app.
  std::string service;                          ///< Service it is a replica of.
  Resources requests;                           ///< Resources it needs.
  bool stateful = false;                        ///< Keeps state (moves via checkpointer).
  int availability_kpi = 0;                     ///< Required availability, 0-100.
  std::vector<std::string> allowed_regions;     ///< Hard: empty = any region.
  std::vector<std::string> allowed_countries;   ///< Hard: empty = any country.
  std::string data_locality;                    ///< Hard: region or cluster of its data ("" = any).
  /// Hard: the clusters holding the data set `data_locality` names, when MDM
  /// knows it as one (PlacementService resolves it); empty: `data_locality`
  /// is a region or cluster.
  std::vector<std::string> data_clusters;
  std::string origin_cluster;                   ///< Where its users are ("" = none).
  int64_t max_latency_to_origin_ns = 0;         ///< Hard bound to the origin (0 = none).
  std::vector<std::string> preferred_clusters;  ///< mck8s cluster affinity (soft).
  /// mck8s numberOfLocations: the replicas of its service spread over this
  /// many clusters, and no more (0 = as the policy decides). See
  /// LocationSpreadRefusal below.
  int max_locations = 0;
  /// mck8s bursting (nearest-first): when the `max_locations` clusters are
  /// full, a replica may go to the nearest other cluster.
  bool bursting = false;
  /// A job (mck8s MCJ): its pods end when their work is done instead of
  /// running until removed. Profiles pack jobs where they spread services
  /// (see FreeCapacity in docs/placement.md).
  bool run_to_completion = false;
};

/// A directed communication requirement between two workloads.
struct Channel {
  std::string name;                                        ///< Channel name, unique in the app.
  std::string from;                                        ///< Sending workload.
  std::string to;                                          ///< Receiving workload.
  int64_t min_bandwidth_bps = 0;                           ///< Bandwidth it needs.
  int64_t max_delay_ns = 0;                                ///< Latency bound (0 = unbounded).
  ServiceClass service_class = ServiceClass::kBestEffort;  ///< Network class.
  int to_port = 0;  ///< Port on the receiving workload (0: none named; 80 is used).
};

/// An application to place: its workloads, channels and the profile to use.
struct Application {
  std::string name;                 ///< Application name.
  std::vector<Workload> workloads;  ///< Replicas to place.
  std::vector<Channel> channels;    ///< Channels between them.
  std::string profile;              ///< Scheduling profile name ("" = default).
  std::string performance_profile;  ///< PDLC performance profile, e.g. "latency".
  /// Built-in profile ("latency", "greenness", "resilience", "cost") ->
  /// weight when performance_profile is "custom": PDLC's scores for those
  /// profiles, blended.
  std::map<std::string, double> custom_profile_weights;

  /// Index of workload `name`, or -1.
  int WorkloadIndex(const std::string& name) const;
  /// INVALID_ARGUMENT naming every bad field (e.g. `channels[1].to: unknown
  /// workload "db-0"`): empty or duplicate names, negative requests, KPI out
  /// of 0-100, channels with unknown ends or negative bounds.
  absl::Status Validate() const;
};

/// Where one workload is placed.
struct Placement {
  std::string cluster;  ///< Target cluster.
  std::string node;     ///< Target node.
};

/// Expected one-way latency between two placements under `federation`:
/// 0 on the same node, the cluster's intra latency on the same cluster, and
/// intra(A) + link(A,B) + intra(B) across a direct link; nullopt when the
/// clusters have no direct link (channels are single-hop).
std::optional<int64_t> PathLatencyNs(const Federation& federation, const Placement& a,
                                     const Placement& b);

/// The mck8s numberOfLocations rule for putting `w` in `cluster`, given where
/// the application's workloads are (`placed`; `w` itself is not counted):
/// "" when it may go there, else why not, in words a user can act on. Let S
/// be the clusters the other replicas of `w.service` run in, and N =
/// `w.max_locations` (0: no rule, always ""):
///   - a cluster of S: refused while |S| < N and `spread_first` (the
///     service reaches N clusters before a second replica shares one);
///   - another cluster: allowed while |S| < N; beyond, only when
///     `may_burst` (the coordinator passes `w.bursting` in its
///     reconsideration round, after every cluster of S was tried).
std::string LocationSpreadRefusal(const Application& app,
                                  const std::map<std::string, Placement>& placed, const Workload& w,
                                  const std::string& cluster, bool spread_first, bool may_burst);

}  // namespace codeco::swm
