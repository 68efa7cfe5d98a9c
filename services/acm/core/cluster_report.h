#pragma once
// What a managed cluster's ACM agent tells the hub about its cluster, derived
// from the nodes its local management system (LMS) reports: labels, capacity
// summary and energy profile.

#include <map>
#include <string>
#include <vector>

#include "codeco/common/v1/types.pb.h"
#include "codeco/lms/v1/lms.pb.h"

namespace codeco::acm {

/// The agent's view of its cluster.
struct ClusterReport {
  /// Region, country, provider and tier, from the nodes' codeco.io/* labels.
  common::v1::ClusterLabels labels;
  /// Allocatable and free resources of ready, schedulable nodes.
  common::v1::CapacitySummary capacity;
  /// Sum of the nodes' idle and maximum power.
  common::v1::EnergyProfile energy;
  /// Cluster-wide labels the hub's neighborhood composer matches on
  /// (codeco.io/compliance, codeco.io/security-class): set when every ready
  /// node carries the same value.
  std::map<std::string, std::string> cluster_labels;
};

/// Builds the report from every node of the cluster. Free = allocatable -
/// requested (never negative); the largest free node is the one with the
/// most free CPU.
ClusterReport BuildClusterReport(const std::vector<lms::v1::Node>& nodes);

}  // namespace codeco::acm
