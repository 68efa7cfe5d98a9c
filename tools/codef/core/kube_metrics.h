#pragma once
// The series a Kubernetes cluster's usual exporters would publish about an
// emulated cluster, so that the same PromQL (and deploy/prometheus/
// codeco-rules.yml) reads CODEF and a real cluster alike:
//
//  node-exporter (Ready nodes only: a NotReady node's exporter is down)
//    node_cpu_seconds_total{cluster,node,instance,cpu,mode}   counter
//        cpu "0".."N-1" (N = CPU capacity rounded up to cores), mode
//        "user" (the node's pods), "system" (its background load) or
//        "idle"; each CPU gets 1/N of the node's CPU time
//    node_memory_MemTotal_bytes{cluster,node,instance}         gauge
//    node_memory_MemAvailable_bytes{cluster,node,instance}     gauge
//  cAdvisor (containers of Running pods)
//    container_cpu_usage_seconds_total{cluster,namespace,pod,container,image,node}  counter
//    container_memory_working_set_bytes{cluster,namespace,pod,container,image,node} gauge
//  kube-state-metrics (every node and pod the LMS holds)
//    kube_node_status_condition{cluster,node,condition="Ready",status="true"|"false"|"unknown"}
//    kube_node_status_capacity{cluster,node,resource="cpu"|"memory",unit="core"|"byte"}
//    kube_pod_info{cluster,namespace,pod,node}                 gauge (1; the node it is bound to)
//    kube_pod_status_phase{cluster,namespace,pod,phase}        gauge (1 for the current phase)
//    kube_pod_container_status_restarts_total{cluster,namespace,pod,container}  counter (0)
//  CODECO's energy model (as Kepler would report it on a real cluster)
//    codeco_node_power_watts{cluster,node}                     gauge (0 when NotReady)
//    codeco_node_energy_joules_total{cluster,node}             counter
//
// `instance` is the node name (kube-prometheus relabels node-exporter's
// instance so); the namespace is kPodNamespace (the LMS has none). Pure: the
// server turns the families into prometheus-cpp's (tools/codef/server).

#include <string>
#include <utility>
#include <vector>

#include "emulated_cluster.h"

namespace codeco::codef {

/// The namespace every emulated pod is exported in (codeco's LMS model has
/// no namespaces).
inline constexpr char kPodNamespace[] = "default";

/// One sample: labels (in the order given) and value.
struct MetricSample {
  /// Label name and value pairs.
  std::vector<std::pair<std::string, std::string>> labels;
  /// The value.
  double value = 0;
};

/// Counter or gauge.
enum class MetricKind { kCounter, kGauge };

/// A family of samples under one metric name.
struct MetricFamilyData {
  /// Metric name, e.g. "node_cpu_seconds_total".
  std::string name;
  /// HELP text.
  std::string help;
  /// TYPE.
  MetricKind kind = MetricKind::kGauge;
  /// The samples.
  std::vector<MetricSample> samples;
};

/// The families above for cluster `cluster` from its accounting, in the
/// order listed there; a family with no sample is still listed.
std::vector<MetricFamilyData> KubernetesStyleMetrics(const std::string& cluster,
                                                     const ClusterAccounting& accounting);

}  // namespace codeco::codef
