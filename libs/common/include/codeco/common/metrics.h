#pragma once
// Prometheus exposition: a registry per process served on /metrics. Metric
// names follow `codeco_<svc>_<name>_<unit>`; MetricName() builds them.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/registry.h"

namespace prometheus {
class Collectable;
class Exposer;
}

namespace codeco {

class KvStore;

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

  /// Also serves, read at each scrape, the process's memory as gauges:
  /// `codeco_<service>_resident_memory_bytes` (VmRSS),
  /// `codeco_<service>_heap_bytes{state="in_use"|"free_held"}` (glibc malloc:
  /// allocated, and freed but kept by the allocator) and, when `store` is
  /// set, `codeco_<service>_store_memory_bytes{part="memtables"|
  /// "block_cache"|"table_readers"}`. `store` must outlive this object.
  void ExportMemory(const std::string& service, const KvStore* store);

  /// Also serves, read at each scrape, what `collectable` collects (kept
  /// alive here until the exposer stops).
  void AddCollectable(std::shared_ptr<prometheus::Collectable> collectable);

 private:
  MetricsExposer() = default;
  std::shared_ptr<prometheus::Registry> registry_;
  // Collectors registered with the exposer (which keeps weak pointers);
  // declared before it so the exposer stops serving before they go.
  std::vector<std::shared_ptr<prometheus::Collectable>> collectors_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string address_;
};

}  // namespace codeco
