#include "cluster_metrics.h"

#include <string>

namespace codeco::codef {

std::vector<prometheus::MetricFamily> ToPrometheusFamilies(
    const std::vector<MetricFamilyData>& families) {
  std::vector<prometheus::MetricFamily> out;
  out.reserve(families.size());
  for (const MetricFamilyData& family : families) {
    prometheus::MetricFamily f;
    f.name = family.name;
    f.help = family.help;
    f.type = family.kind == MetricKind::kCounter ? prometheus::MetricType::Counter
                                                 : prometheus::MetricType::Gauge;
    for (const MetricSample& sample : family.samples) {
      prometheus::ClientMetric metric;
      for (const auto& [name, value] : sample.labels) metric.label.push_back({name, value});
      if (family.kind == MetricKind::kCounter) {
        metric.counter.value = sample.value;
      } else {
        metric.gauge.value = sample.value;
      }
      f.metric.push_back(std::move(metric));
    }
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<prometheus::MetricFamily> ClusterMetricsCollector::Collect() const {
  std::vector<MetricFamilyData> families = cluster_->Run([](EmulatedCluster& cluster) {
    return KubernetesStyleMetrics(cluster.name(), cluster.Accounting());
  });
  return ToPrometheusFamilies(families);
}

}  // namespace codeco::codef
