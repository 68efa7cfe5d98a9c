#pragma once
// Prometheus exposition: a registry per process served on /metrics. Metric
// names follow `codeco_<svc>_<name>_<unit>`; MetricName() builds them.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/registry.h"

namespace prometheus {
class Exposer;
}

namespace codeco {

/// "codeco_<service>_<name>", e.g. MetricName("acm", "rpc_duration_seconds").
std::string MetricName(const std::string& service, const std::string& name);

/// Serves a registry's metrics over HTTP at /metrics.
class MetricsExposer {
 public:
  /// Starts serving on `listen` (host:port; port 0 picks a free port).
  static absl::StatusOr<std::unique_ptr<MetricsExposer>> Start(const std::string& listen);
  ~MetricsExposer();

  /// Where metrics are registered; lives as long as this object.
  prometheus::Registry& registry() { return *registry_; }
  /// The bound address, host:port with the real port.
  const std::string& address() const { return address_; }

 private:
  MetricsExposer() = default;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string address_;
};

}  // namespace codeco
