#pragma once
// CloudAutoscaler: when the federation's fixed clusters cannot host every
// workload, the hub bursts to a cloud cluster it provisions on demand, grows
// and shrinks that cluster's nodes, and removes it once it has been idle
// (mck8s's Cluster Provisioner and Cluster Autoscaler, CPCA). This is the
// decision alone, pure logic under an injected clock: the caller observes
// the cloud cluster, the pods nothing can place and the fixed clusters'
// allocation, asks Decide, and carries the answer out through whatever
// provisions the cloud (CODEF emulates the provisioning delay and the nodes
// in simulate mode).
//
// Two policies share the shrinking rules and differ in sizing:
//   - kMck8s, the study's Algorithm 4: reacts to pending pods only; adds
//     ceil(total pending request / node size) nodes (CPU and memory each),
//     less the room of nodes still booting.
//   - kPacked, codeco's: packs the pending pods first-fit decreasing into
//     the free room of the cloud's nodes (booting ones included) and adds
//     the nodes the rest need; and provisions ahead of demand: the total
//     CPU demand's growth over `demand_window`, times the time a node
//     ordered now takes to be Ready (`provisioning_delay` while there is no
//     cluster, `node_boot_delay` once there is), is what will arrive before
//     it is up; the part of it the fixed clusters' usable free room
//     (`fixed_fill_limit` of their CPU, less what is allocated) cannot take
//     is kept free in the cloud.
// Shrinking (both): a node whose pods have all ended is removed once it has
// stayed empty for `scale_down_delay` (the last node stays while the
// cluster does); the cluster is removed once none of its nodes has held a
// pod, and nothing was pending, for `deprovision_delay`. kPacked keeps the
// empty nodes its headroom still needs.

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "codeco/common/clock.h"
#include "swm/core/model.h"

namespace codeco::swm {

/// How the cloud cluster is sized (see the file comment).
enum class CloudScalingPolicy {
  kMck8s,   ///< The mck8s study's reactive sizing ("mck8s").
  kPacked,  ///< codeco's packed sizing with headroom ahead of demand ("codeco").
};

/// "mck8s" or "codeco".
std::string CloudScalingPolicyName(CloudScalingPolicy policy);
/// The policy called `name`; INVALID_ARGUMENT naming `field` otherwise.
absl::StatusOr<CloudScalingPolicy> ParseCloudScalingPolicy(absl::string_view name,
                                                           absl::string_view field);

/// Settings of the cloud autoscaler.
struct CloudAutoscalerOptions {
  /// How it sizes. Default kPacked.
  CloudScalingPolicy policy = CloudScalingPolicy::kPacked;
  /// Allocatable resources of one cloud node (the flavor it orders). Required.
  Resources node_capacity;
  /// Most nodes the cloud cluster may have (booting ones count). Default 16.
  int max_nodes = 16;
  /// From ordering the cluster to its first nodes being Ready (kPacked's
  /// headroom while there is no cluster). Default 5 min.
  absl::Duration provisioning_delay = absl::Minutes(5);
  /// How long a node added to the running cluster takes to become Ready
  /// (kPacked's headroom once there is one). Default 2 min.
  absl::Duration node_boot_delay = absl::Minutes(2);
  /// How long a node stays empty before it is removed. Default 10 min (the study's).
  absl::Duration scale_down_delay = absl::Minutes(10);
  /// How long the whole cluster stays idle before it is removed. Default
  /// 20 min (the study's).
  absl::Duration deprovision_delay = absl::Minutes(20);
  /// Over how long kPacked measures the demand's growth. Default 5 min.
  absl::Duration demand_window = absl::Minutes(5);
  /// The share of the fixed clusters' CPU kPacked counts as usable: pods of
  /// mixed sizes leave slivers no pod fits, so a federation starts leaving
  /// pods pending before it is 100 % allocated. Default 0.9.
  double fixed_fill_limit = 0.9;
};

/// Checks `options`; INVALID_ARGUMENT naming the field ("cloud.<field>").
absl::Status ValidateCloudAutoscalerOptions(const CloudAutoscalerOptions& options);

/// One node of the cloud cluster as observed.
struct CloudNode {
  std::string name;     ///< Node name.
  Resources allocated;  ///< Requests of the pods bound to it that have not ended.
  int pods = 0;         ///< Pods bound to it that have not ended.
  bool ready = false;   ///< False while it boots.
};

/// What the autoscaler looks at, once per decision.
struct CloudObservation {
  /// The cloud cluster exists (ordered, maybe still booting).
  bool cluster_exists = false;
  /// Its nodes, booting ones included.
  std::vector<CloudNode> nodes;
  /// Requests of the pods no cluster could place in the last cycle.
  std::vector<Resources> pending;
  /// Capacity of the fixed clusters' schedulable nodes.
  Resources fixed_capacity;
  /// What pods (and holds) take of it.
  Resources fixed_allocated;
};

/// What to do to the cloud cluster now.
struct CloudScaling {
  bool create_cluster = false;            ///< Order the cluster (with add_nodes nodes).
  int add_nodes = 0;                      ///< Nodes to order.
  std::vector<std::string> remove_nodes;  ///< Empty nodes to give back.
  bool delete_cluster = false;            ///< Give the whole cluster back.
  std::string reason;                     ///< Why, for the event log ("" when nothing).

  /// True when there is nothing to do.
  bool Empty() const {
    return !create_cluster && add_nodes == 0 && remove_nodes.empty() && !delete_cluster;
  }
};

/// The decision of the cloud provisioner and cluster autoscaler. Keeps the
/// state its delays need (since when each node and the cluster are idle,
/// the recent demand). Not thread-safe.
class CloudAutoscaler {
 public:
  /// `options` must pass ValidateCloudAutoscalerOptions. Reads time from `clock` only.
  CloudAutoscaler(const Clock& clock, CloudAutoscalerOptions options);

  /// What to do given `observation`; the caller carries it out before the
  /// next call (nodes it adds appear there as booting).
  CloudScaling Decide(const CloudObservation& observation);

  /// The settings in force.
  const CloudAutoscalerOptions& options() const { return options_; }

 private:
  // Nodes to add for the pending pods.
  int NodesForPending(const CloudObservation& observation, std::string& why) const;
  // CPU (millicores) kPacked keeps free in the cloud for the demand expected
  // while a node boots; 0 for kMck8s.
  int64_t Headroom(const CloudObservation& observation) const;

  const Clock& clock_;
  CloudAutoscalerOptions options_;
  // Since when each node has held no pod.
  std::map<std::string, absl::Time> empty_since_;
  // Since when the whole cluster has been idle.
  std::optional<absl::Time> idle_since_;
  // (time, total CPU demand in millicores), oldest first, over demand_window.
  std::deque<std::pair<absl::Time, int64_t>> demand_;
};

}  // namespace codeco::swm
