#include "swm/server/netma_link_source.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codeco/common/call_deadline.h"
#include "codeco/common/logging.h"
#include "codeco/common/status.h"

namespace codeco::swm {

namespace netma = codeco::netma::v1;

NetmaLinkSource::NetmaLinkSource(std::shared_ptr<grpc::Channel> channel,
                                 std::shared_ptr<LinkSource> fallback, const Clock& clock,
                                 NetmaLinkSourceOptions options)
    : stub_(netma::NetmaService::NewStub(std::move(channel))),
      fallback_(std::move(fallback)),
      clock_(clock),
      options_(options) {}

void NetmaLinkSource::RefreshLocked() {
  absl::Time now = clock_.Now();
  if (now - fetched_at_ < options_.refresh) return;
  fetched_at_ = now;
  measured_.clear();
  grpc::ClientContext context;
  SetOutgoingDeadline(context, options_.call_timeout);
  netma::GetNetworkTopologyResponse response;
  grpc::Status status =
      stub_->GetNetworkTopology(&context, netma::GetNetworkTopologyRequest(), &response);
  if (!status.ok()) {
    log::Warn("netma topology unavailable; planning with configured links",
              {{"error", status.error_message()}});
    return;
  }
  for (const netma::NetworkLink& l : response.topology().links()) {
    if (l.stale()) continue;
    Measured m;
    m.failed = l.failed();
    m.link.from = l.source();
    m.link.to = l.target();
    bool have_capability = false;
    for (const netma::LinkCapability& c : l.capabilities()) {
      int index = c.service_class() == codeco::common::v1::SERVICE_CLASS_ASSURED
                      ? static_cast<int>(ServiceClass::kAssured)
                      : static_cast<int>(ServiceClass::kBestEffort);
      m.link.free_bandwidth_bps[index] = c.bandwidth_bps();
      // Classes share the path: plan with the larger measured latency.
      m.link.latency_ns = std::max(m.link.latency_ns, c.latency_ns());
      have_capability = true;
    }
    if (!m.failed && !have_capability) continue;  // listed but never answered
    measured_[absl::StrCat(l.source(), "->", l.target())] = std::move(m);
  }
}

absl::StatusOr<std::optional<Link>> NetmaLinkSource::GetLink(const std::string& from,
                                                             const std::string& to) {
  {
    absl::MutexLock lock(&mu_);
    RefreshLocked();
    auto it = measured_.find(absl::StrCat(from, "->", to));
    if (it != measured_.end()) {
      if (it->second.failed) return std::nullopt;
      return it->second.link;
    }
  }
  if (fallback_ == nullptr) return std::nullopt;
  return fallback_->GetLink(from, to);
}

absl::StatusOr<std::vector<Link>> NetmaLinkSource::ListLinks(
    const std::vector<std::string>& clusters) {
  std::vector<Link> out;
  std::set<std::pair<std::string, std::string>> unmeasured;
  {
    absl::MutexLock lock(&mu_);
    RefreshLocked();
    for (const std::string& from : clusters) {
      for (const std::string& to : clusters) {
        if (from == to) continue;
        auto it = measured_.find(absl::StrCat(from, "->", to));
        if (it == measured_.end()) {
          unmeasured.insert({from, to});
        } else if (!it->second.failed) {
          out.push_back(it->second.link);
        }
      }
    }
  }
  if (unmeasured.empty() || fallback_ == nullptr) return out;
  ASSIGN_OR_RETURN(std::vector<Link> configured, fallback_->ListLinks(clusters));
  for (Link& l : configured) {
    if (unmeasured.count({l.from, l.to})) out.push_back(std::move(l));
  }
  return out;
}

}  // namespace codeco::swm
