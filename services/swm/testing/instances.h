#pragma once
// Seeded random placement instances for the property test, the MILP
// comparison and the benchmarks. Same seed, same instance.

#include <cstdint>
#include <string>
#include <vector>

#include "swm/core/model.h"

namespace codeco::swm::testing {

/// Shape of a random instance.
struct InstanceOptions {
  int clusters = 5;                                 ///< Clusters in the federation.
  int min_nodes = 2;                                ///< Nodes per cluster, lower bound.
  int max_nodes = 4;                                ///< Nodes per cluster, upper bound.
  int64_t node_cpu_millis = 4000;                   ///< Capacity of every node.
  int64_t node_memory_bytes = int64_t{8} << 30;     ///< Capacity of every node.
  double min_free = 0.2;                            ///< Free share of each node, lower bound.
  double max_free = 0.8;                            ///< Free share of each node, upper bound.
  double link_probability = 0.6;                    ///< Chance that a directed link exists.
  int64_t min_link_latency_ns = 1'000'000;          ///< Link latency, lower bound.
  int64_t max_link_latency_ns = 5'000'000;          ///< Link latency, upper bound.
  int64_t intra_latency_ns = 100'000;               ///< Latency inside every cluster.
  int64_t max_link_bandwidth_bps = 1'000'000'000;   ///< Link free bandwidth, upper bound.
  int workloads = 8;                                ///< Workloads in the application.
  int channels = 6;                                 ///< Channels (DAG edges; fewer if impossible).
  int64_t max_cpu_request = 1500;                   ///< Largest CPU request (millicores).
  int64_t max_memory_request = int64_t{3} << 30;    ///< Largest memory request.
  int64_t max_channel_bandwidth_bps = 200'000'000;  ///< Largest channel bandwidth.
  int64_t min_channel_delay_ns = 500'000;           ///< Channel bound, lower bound.
  int64_t max_channel_delay_ns = 15'000'000;        ///< Channel bound, upper bound.
  std::string profile;                              ///< Profile name for the application.
};

/// A federation and an application to place on it.
struct Instance {
  Federation federation;  ///< Clusters, nodes (partly allocated) and links.
  Application app;        ///< Workloads "w<i>" and channels "c<i>" (a DAG).
};

/// The instance for `seed` and `options`.
Instance RandomInstance(uint64_t seed, const InstanceOptions& options);

/// Name of node `n` of cluster `c` in generated instances: "c<c>-n<n>".
std::string NodeName(int cluster, int node);

}  // namespace codeco::swm::testing
