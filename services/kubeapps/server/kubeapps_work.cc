#include "kubeapps/server/kubeapps_work.h"

#include <chrono>
#include <utility>

#include "codeco/common/call_deadline.h"
#include "codeco/common/grpc_status.h"

namespace codeco::kubeapps {

namespace acm = codeco::acm::v1;

GrpcAcmApplications::GrpcAcmApplications(std::shared_ptr<grpc::Channel> channel,
                                         absl::Duration call_timeout)
    : stub_(acm::AcmService::NewStub(std::move(channel))), call_timeout_(call_timeout) {}

absl::StatusOr<acm::ApplyApplicationResponse> GrpcAcmApplications::Apply(
    const std::string& cam, const std::string& request_id) {
  acm::ApplyApplicationRequest request;
  request.set_cam_yaml(cam);
  request.set_request_id(request_id);
  acm::ApplyApplicationResponse response;
  auto context = OutgoingContext(call_timeout_);
  grpc::Status status = stub_->ApplyApplication(context.get(), request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::Status GrpcAcmApplications::Delete(const std::string& application,
                                         const std::string& codeco_app,
                                         const std::string& request_id) {
  acm::DeleteApplicationRequest request;
  request.set_name(application);
  request.set_codeco_app(codeco_app);
  request.set_request_id(request_id);
  acm::DeleteApplicationResponse response;
  auto context = OutgoingContext(call_timeout_);
  return FromGrpcStatus(stub_->DeleteApplication(context.get(), request, &response));
}

absl::StatusOr<acm::Application> GrpcAcmApplications::Get(const std::string& application) {
  acm::GetApplicationRequest request;
  request.set_name(application);
  acm::GetApplicationResponse response;
  auto context = OutgoingContext(call_timeout_);
  grpc::Status status = stub_->GetApplication(context.get(), request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return std::move(*response.mutable_application());
}

KubeAppsWork::KubeAppsWork(std::unique_ptr<kube::KubeApi> kube_api,
                           std::unique_ptr<AcmApplications> acm, Clock* clock,
                           CodecoAppSyncOptions options, prometheus::Registry& metrics)
    : kube_api_(std::move(kube_api)), acm_(std::move(acm)) {
  auto& reconciles = prometheus::BuildCounter()
                         .Name("codeco_kubeapps_reconciles_total")
                         .Help(
                             "CodecoApp reconciles of the shim, by result: applied (ACM took "
                             "the spec), refused (ACM refused it; the status says why), "
                             "deleted (services removed from ACM), retried (failed; queued "
                             "again)")
                         .Register(metrics);
  applied_ = &reconciles.Add({{"result", "applied"}});
  refused_ = &reconciles.Add({{"result", "refused"}});
  deleted_ = &reconciles.Add({{"result", "deleted"}});
  retried_ = &reconciles.Add({{"result", "retried"}});
  status_writes_ = &prometheus::BuildCounter()
                        .Name("codeco_kubeapps_status_writes_total")
                        .Help("CodecoApp status subresource writes")
                        .Register(metrics)
                        .Add({});
  objects_ = &prometheus::BuildGauge()
                  .Name("codeco_kubeapps_objects")
                  .Help("CodecoApp objects the shim follows (live or being deleted)")
                  .Register(metrics)
                  .Add({});
  auto wait = [this](absl::Duration d) {
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(d));
    return !stopping_.load();
  };
  sync_ =
      std::make_unique<CodecoAppSync>(kube_api_.get(), acm_.get(), clock, wait, std::move(options));
  auto cancelled = [this] { return stopping_.load(); };
  for (size_t r = 0; r < sync_->options().resources.size(); ++r) {
    threads_.emplace_back([this, r, cancelled] { sync_->Follow(r, cancelled); });
  }
  threads_.emplace_back([this, cancelled] {
    absl::Time published_at = absl::InfinitePast();
    sync_->Work([&] {
      if (absl::Now() - published_at >= absl::Seconds(1)) {
        PublishStats(sync_->Stats());
        published_at = absl::Now();
      }
      return cancelled();
    });
    PublishStats(sync_->Stats());
  });
}

KubeAppsWork::~KubeAppsWork() { Stop(); }

void KubeAppsWork::Stop() {
  stopping_ = true;
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void KubeAppsWork::PublishStats(const CodecoAppSyncStats& now) {
  applied_->Increment(static_cast<double>(now.applied - published_.applied));
  refused_->Increment(static_cast<double>(now.refused - published_.refused));
  deleted_->Increment(static_cast<double>(now.deleted - published_.deleted));
  retried_->Increment(static_cast<double>(now.retries - published_.retries));
  status_writes_->Increment(static_cast<double>(now.status_writes - published_.status_writes));
  objects_->Set(static_cast<double>(now.objects));
  published_ = now;
}

}  // namespace codeco::kubeapps
