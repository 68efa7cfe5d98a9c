#pragma once
// The CodecoApp shim running: CodecoAppSync's threads (one list-and-watch per
// resource, one worker) beside the service's gRPC server, ACM reached over
// gRPC with the shim's identity, and its counts as Prometheus metrics.

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "codeco/acm/v1/acm_service.grpc.pb.h"
#include "codeco/common/server.h"
#include "kubeapps/core/codecoapp_sync.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace codeco::kubeapps {

/// AcmApplications over gRPC to the hub ACM.
class GrpcAcmApplications final : public AcmApplications {
 public:
  /// Calls ACM on `channel`, each call bounded by `call_timeout`.
  GrpcAcmApplications(std::shared_ptr<grpc::Channel> channel, absl::Duration call_timeout);

  absl::StatusOr<codeco::acm::v1::ApplyApplicationResponse> Apply(
      const std::string& cam, const std::string& request_id) override;
  absl::Status Delete(const std::string& application, const std::string& codeco_app,
                      const std::string& request_id) override;
  absl::StatusOr<codeco::acm::v1::Application> Get(const std::string& application) override;

 private:
  std::unique_ptr<codeco::acm::v1::AcmService::Stub> stub_;
  absl::Duration call_timeout_;
};

/// Runs a CodecoAppSync until stopped.
class KubeAppsWork final : public BackgroundWork {
 public:
  /// Starts the threads over `kube_api` and `acm` (owned); counts go to
  /// `metrics` (must outlive this).
  KubeAppsWork(std::unique_ptr<kube::KubeApi> kube_api, std::unique_ptr<AcmApplications> acm,
               Clock* clock, CodecoAppSyncOptions options, prometheus::Registry& metrics);
  ~KubeAppsWork() override;

  void Stop() override;

 private:
  void PublishStats(const CodecoAppSyncStats& now);

  std::unique_ptr<kube::KubeApi> kube_api_;
  std::unique_ptr<AcmApplications> acm_;
  std::unique_ptr<CodecoAppSync> sync_;
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> threads_;
  CodecoAppSyncStats published_;
  prometheus::Counter* applied_;
  prometheus::Counter* refused_;
  prometheus::Counter* deleted_;
  prometheus::Counter* retried_;
  prometheus::Counter* status_writes_;
  prometheus::Gauge* objects_;
};

}  // namespace codeco::kubeapps
