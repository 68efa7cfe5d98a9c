#include "codeco/common/metrics.h"

#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"

namespace codeco {

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

}  // namespace codeco
