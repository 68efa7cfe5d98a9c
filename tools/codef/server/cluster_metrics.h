#pragma once
// Serves one emulated cluster's Kubernetes-style series (core/kube_metrics.h)
// to Prometheus: a prometheus-cpp Collectable that, at each scrape, advances
// the cluster to now (so the counters include the time up to the scrape),
// reads its accounting and converts the families.

#include <memory>
#include <vector>

#include "federation.h"
#include "kube_metrics.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace codeco::codef {

/// prometheus-cpp families from the core's.
std::vector<prometheus::MetricFamily> ToPrometheusFamilies(
    const std::vector<MetricFamilyData>& families);

/// The series of one cluster, read at each scrape.
class ClusterMetricsCollector final : public prometheus::Collectable {
 public:
  /// Reads `cluster`, which must outlive the collector.
  explicit ClusterMetricsCollector(SynchronizedCluster* cluster) : cluster_(cluster) {}
  /// The cluster's families, as of now.
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  SynchronizedCluster* cluster_;
};

}  // namespace codeco::codef
