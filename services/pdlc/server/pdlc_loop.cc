#include "pdlc/server/pdlc_loop.h"

#include "absl/strings/str_cat.h"
#include "codeco/common/call_deadline.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/logging.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"

namespace codeco::pdlc {

LmsNodeInventory::LmsNodeInventory(std::shared_ptr<grpc::Channel> channel, absl::Duration timeout)
    : channel_(std::move(channel)), timeout_(timeout) {}

absl::StatusOr<std::vector<NodeContext>> LmsNodeInventory::ListNodes() {
  auto lms = lms::v1::LmsService::NewStub(channel_);
  std::vector<NodeContext> nodes;
  std::string token;
  do {
    lms::v1::ListNodesRequest request;
    request.set_page_token(token);
    lms::v1::ListNodesResponse response;
    grpc::Status status = lms->ListNodes(OutgoingContext(timeout_).get(), request, &response);
    if (!status.ok()) return FromGrpcStatus(status);
    for (const lms::v1::Node& n : response.nodes()) {
      NodeContext c;
      c.node = n.name();
      c.ready = n.condition() == lms::v1::NODE_CONDITION_READY;
      c.cpu_capacity_millicores = static_cast<double>(n.capacity().cpu_millicores());
      c.memory_capacity_bytes = static_cast<double>(n.capacity().memory_bytes());
      const auto& energy = n.energy_profile();
      const double cores = c.cpu_capacity_millicores / 1000.0;
      if (cores > 0 && energy.max_watts() > 0) {
        c.watts_per_core = std::max(0.0, energy.max_watts() - energy.idle_watts()) / cores;
      }
      if (energy.carbon_intensity_g_per_kwh() > 0) c.carbon_g_per_kwh = energy.carbon_intensity_g_per_kwh();
      nodes.push_back(std::move(c));
    }
    token = response.next_page_token();
  } while (!token.empty());
  return nodes;
}

PdlcLoop::PdlcLoop(Advisor& advisor, TelemetryStore& store, TelemetryScraper* scraper,
                   NodeInventorySource* inventory, Clock& clock, PdlcLoopOptions options)
    : advisor_(advisor), store_(store), scraper_(scraper), inventory_(inventory), clock_(clock),
      options_(std::move(options)) {}

PdlcLoop::~PdlcLoop() { Stop(); }

void PdlcLoop::Start() {
  thread_ = std::thread([this] {
    while (true) {
      RunOnce(clock_.Now());
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.refresh_interval)) return;
    }
  });
}

void PdlcLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

LoopReport PdlcLoop::RunOnce(absl::Time now) {
  LoopReport report;
  const int64_t now_ms = absl::ToUnixMillis(now);
  if (scraper_ != nullptr) {
    const PullReport pull = scraper_->Pull(now_ms);
    report.pulled = pull.stored();
    if (!pull.status().ok()) {
      log::Warn("pdlc: Prometheus pull incomplete", {{"error", std::string(pull.status().message())}});
    }
  }
  std::vector<NodeContext> nodes;
  if (inventory_ != nullptr) {
    auto listed = inventory_->ListNodes();
    if (!listed.ok()) {
      log::Warn("pdlc: node inventory unavailable, scores keep the last one",
                {{"error", std::string(listed.status().message())}});
      return report;
    }
    nodes = std::move(*listed);
  }
  report.nodes = nodes.size();
  if (absl::Status s = advisor_.Refresh(nodes, now_ms); !s.ok()) {
    log::Warn("pdlc: refresh failed", {{"error", std::string(s.message())}});
  }
  if (now >= next_training_) {
    report.trained = true;
    report.training = advisor_.Train(now_ms, absl::StrCat("local-", trainings_ + 1, "@", absl::FormatTime(now)));
    if (report.training.ok()) {
      ++trainings_;
      next_training_ = now + options_.retrain_interval;
      log::Info("pdlc: forecaster trained", {{"version", absl::StrCat(trainings_)}});
      advisor_.Refresh(std::move(nodes), now_ms).IgnoreError();  // forecasts with the new model
    } else {
      // Too little history yet: try again after a refresh interval's more data.
      next_training_ = now + std::max(options_.refresh_interval, absl::Minutes(5));
    }
  }
  if (now >= next_retention_) {
    report.retained = true;
    auto retained = store_.ApplyRetention(options_.retention, now_ms);
    if (!retained.ok()) log::Warn("pdlc: retention failed", {{"error", std::string(retained.status().message())}});
    next_retention_ = now + options_.retention_interval;
  }
  return report;
}

}  // namespace codeco::pdlc
