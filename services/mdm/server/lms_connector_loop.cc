#include "mdm/server/lms_connector_loop.h"

#include <grpcpp/grpcpp.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codeco/common/call_deadline.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/logging.h"
#include "codeco/common/metrics.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"

namespace codeco::mdm {

absl::StatusOr<ClusterInventory> ReadClusterInventory(const std::shared_ptr<grpc::Channel>& channel,
                                                      absl::Duration timeout) {
  auto lms = lms::v1::LmsService::NewStub(channel);
  ClusterInventory inventory;
  std::string token;
  do {
    lms::v1::ListNodesRequest request;
    request.set_page_token(token);
    lms::v1::ListNodesResponse response;
    grpc::Status status = lms->ListNodes(OutgoingContext(timeout).get(), request, &response);
    if (!status.ok()) return FromGrpcStatus(status);
    for (lms::v1::Node& n : *response.mutable_nodes()) inventory.nodes.push_back(std::move(n));
    token = response.next_page_token();
  } while (!token.empty());
  do {
    lms::v1::ListPodsRequest request;
    request.set_page_token(token);
    lms::v1::ListPodsResponse response;
    grpc::Status status = lms->ListPods(OutgoingContext(timeout).get(), request, &response);
    if (!status.ok()) return FromGrpcStatus(status);
    for (lms::v1::Pod& p : *response.mutable_pods()) inventory.pods.push_back(std::move(p));
    token = response.next_page_token();
  } while (!token.empty());
  return inventory;
}

struct LmsConnectorLoop::Metrics {
  explicit Metrics(prometheus::Registry& registry)
      : syncs(prometheus::BuildCounter()
                  .Name(MetricName("mdm", "connector_syncs_total"))
                  .Help("LMS connector syncs by result (ok, read_failed, sync_failed)")
                  .Register(registry)),
        events(prometheus::BuildCounter()
                   .Name(MetricName("mdm", "connector_events_total"))
                   .Help("Events the LMS connector published")
                   .Register(registry)
                   .Add({})) {}
  prometheus::Family<prometheus::Counter>& syncs;
  prometheus::Counter& events;
};

LmsConnectorLoop::LmsConnectorLoop(std::shared_ptr<MetadataStore> store, std::string cluster,
                                   std::shared_ptr<grpc::Channel> channel,
                                   prometheus::Registry& metrics, LmsConnectorLoopOptions options)
    : store_(std::move(store)),
      connector_(*store_, std::move(cluster)),
      channel_(std::move(channel)),
      metrics_(std::make_unique<Metrics>(metrics)),
      options_(options) {
  thread_ = std::thread([this] {
    while (true) {
      RunOnce();
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.interval)) return;
    }
  });
}

LmsConnectorLoop::~LmsConnectorLoop() { Stop(); }

void LmsConnectorLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void LmsConnectorLoop::RunOnce() {
  const std::string source = connector_.source();
  if (!types_registered_) {
    absl::Status registered = connector_.RegisterTypes();
    if (!registered.ok()) {
      metrics_->syncs.Add({{"result", "sync_failed"}}).Increment();
      log::Error("mdm: the LMS connector cannot register its types",
                 {{"source", source}, {"error", std::string(registered.message())}});
      return;
    }
    types_registered_ = true;
  }
  absl::StatusOr<ClusterInventory> inventory =
      ReadClusterInventory(channel_, options_.call_timeout);
  if (!inventory.ok()) {
    metrics_->syncs.Add({{"result", "read_failed"}}).Increment();
    log::Warn("mdm: cannot read the LMS; trying again at the next sync",
              {{"source", source}, {"error", std::string(inventory.status().message())}});
    return;
  }
  absl::StatusOr<LmsSyncReport> report = connector_.Sync(*inventory);
  if (!report.ok()) {
    metrics_->syncs.Add({{"result", "sync_failed"}}).Increment();
    log::Error("mdm: LMS sync failed; trying again at the next sync",
               {{"source", source}, {"error", std::string(report.status().message())}});
    return;
  }
  metrics_->syncs.Add({{"result", "ok"}}).Increment();
  metrics_->events.Increment(static_cast<double>(report->published));
  if (report->published > 0) {
    log::Info("mdm: LMS sync published changes", {{"source", source},
                                                  {"events", absl::StrCat(report->published)},
                                                  {"deleted", absl::StrCat(report->deleted)},
                                                  {"unchanged", absl::StrCat(report->unchanged)}});
  }
  if (report->warnings != last_warnings_ && !report->warnings.empty()) {
    log::Warn("mdm: LMS sync left objects out",
              {{"source", source}, {"warnings", absl::StrJoin(report->warnings, "; ")}});
  }
  last_warnings_ = std::move(report->warnings);
}

}  // namespace codeco::mdm
