#pragma once
// What a managed cluster's ACM agent tells the hub about its cluster, derived
// from the nodes its local management system (LMS) reports: labels, capacity
// summary and energy profile.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
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

/// The pod labels SWM sets on the pods it creates (see SWM's convert.cc).
inline constexpr char kApplicationLabel[] = "codeco.io/application";
/// The service a pod runs (SWM's label).
inline constexpr char kServiceLabel[] = "codeco.io/service";

/// One pod of a placed application as the cluster's LMS reports it.
struct PodReport {
  /// Application (label codeco.io/application).
  std::string application;
  /// Service (label codeco.io/service).
  std::string service;
  /// Pod name, unique in the cluster.
  std::string pod;
  /// Node the pod is bound to.
  std::string node;
  /// Phase (Kubernetes semantics).
  lms::v1::PodPhase phase = lms::v1::POD_PHASE_UNSPECIFIED;
  /// Why the pod is in its phase, in words (e.g. why it failed).
  std::string message;
  /// The pod's usage as its node last measured it, when `usage_known`.
  int64_t cpu_millicores = 0;
  /// Memory in use, bytes, when `usage_known`.
  int64_t memory_bytes = 0;
  /// True when the LMS measured the pod's usage (its node answered).
  bool usage_known = false;
  /// Where the pod serves, "ip:port" for each port of its containers in
  /// order (a port's reach_port when the LMS maps it); empty until it runs
  /// with an IP.
  std::vector<std::string> addresses;
};

/// The most addresses a pod report may carry.
inline constexpr int kMaxPodAddresses = 32;

/// The longest address a pod report may carry, bytes.
inline constexpr size_t kMaxPodAddressLength = 262;

/// Checks one reported address: host:port, port 1-65535, at most
/// kMaxPodAddressLength bytes; errors name `field`.
absl::Status CheckPodAddress(const std::string& address, const std::string& field);

/// The pods of placed applications (those labelled codeco.io/application),
/// ordered by application then pod name; other pods are left out.
std::vector<PodReport> BuildPodReports(const std::vector<lms::v1::Pod>& pods);

}  // namespace codeco::acm
