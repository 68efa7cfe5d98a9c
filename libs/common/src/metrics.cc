#include "codeco/common/metrics.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "codeco/common/kv_store.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/metric_family.h"

namespace codeco {
namespace {

// The resident set of this process in bytes, from /proc/self/statm (0 if
// it cannot be read).
double ResidentBytes() {
  std::FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr) return 0;
  long size_pages = 0;
  long resident_pages = 0;
  int read = std::fscanf(statm, "%ld %ld", &size_pages, &resident_pages);
  std::fclose(statm);
  return read == 2 ? static_cast<double>(resident_pages) * sysconf(_SC_PAGESIZE) : 0;
}

// A gauge family with one sample per (label value, value) pair.
prometheus::MetricFamily Gauges(std::string name, std::string help, const std::string& label,
                                const std::vector<std::pair<std::string, double>>& samples) {
  prometheus::MetricFamily family{std::move(name), std::move(help),
                                  prometheus::MetricType::Gauge, {}};
  for (const auto& [label_value, value] : samples) {
    prometheus::ClientMetric metric;
    if (!label.empty()) metric.label.push_back({label, label_value});
    metric.gauge.value = value;
    family.metric.push_back(std::move(metric));
  }
  return family;
}

// Reads the process's and its store's memory at each scrape.
class MemoryCollector final : public prometheus::Collectable {
 public:
  MemoryCollector(const std::string& service, const KvStore* store)
      : resident_(MetricName(service, "resident_memory_bytes")),
        heap_(MetricName(service, "heap_bytes")),
        store_memory_(MetricName(service, "store_memory_bytes")),
        store_(store) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> out;
    out.push_back(Gauges(resident_, "Resident memory of the process (VmRSS).", "",
                         {{"", ResidentBytes()}}));
    struct mallinfo2 heap = mallinfo2();
    out.push_back(Gauges(heap_,
                         "glibc malloc heap: in_use is allocated, free_held is freed but "
                         "kept by the allocator.",
                         "state",
                         {{"in_use", static_cast<double>(heap.uordblks + heap.hblkhd)},
                          {"free_held", static_cast<double>(heap.fordblks)}}));
    if (store_ != nullptr) {
      KvStoreMemory memory = store_->MemoryUsage();
      out.push_back(Gauges(store_memory_, "Memory the RocksDB store holds, by part.", "part",
                           {{"memtables", static_cast<double>(memory.memtables)},
                            {"block_cache", static_cast<double>(memory.block_cache)},
                            {"table_readers", static_cast<double>(memory.table_readers)}}));
    }
    return out;
  }

 private:
  const std::string resident_;
  const std::string heap_;
  const std::string store_memory_;
  const KvStore* const store_;
};

}  // namespace

std::string MetricName(const std::string& service, const std::string& name) {
  return absl::StrCat("codeco_", service, "_", name);
}

MetricsExposer::~MetricsExposer() = default;

absl::StatusOr<std::unique_ptr<MetricsExposer>> MetricsExposer::Start(const std::string& listen) {
  std::unique_ptr<MetricsExposer> out(new MetricsExposer());
  out->registry_ = std::make_shared<prometheus::Registry>();
  try {
    // civetweb: one listening thread is plenty for a scrape every few seconds.
    out->exposer_ = std::make_unique<prometheus::Exposer>(listen, 2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("metrics_listen: cannot listen on ", listen, ": ", e.what()));
  }
  out->exposer_->RegisterCollectable(out->registry_);
  std::vector<int> ports = out->exposer_->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(absl::StrCat("metrics_listen: no port bound for ", listen));
  }
  out->address_ = absl::StrCat(listen.substr(0, listen.rfind(':')), ":", ports.front());
  return out;
}

void MetricsExposer::ExportMemory(const std::string& service, const KvStore* store) {
  auto collector = std::make_shared<MemoryCollector>(service, store);
  exposer_->RegisterCollectable(collector);
  collectors_.push_back(std::move(collector));
}

void MetricsExposer::AddCollectable(std::shared_ptr<prometheus::Collectable> collectable) {
  exposer_->RegisterCollectable(collectable);
  collectors_.push_back(std::move(collectable));
}

}  // namespace codeco
