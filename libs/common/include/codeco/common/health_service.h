#pragma once
// The standard grpc.health.v1.Health service, generated from the published
// contract so that server reflection lists it and buf curl, grpcurl and
// Kubernetes gRPC probes can call it. "" is the whole server's status.

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace codeco {

/// Serving status per service name, with Check and streaming Watch.
class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

  HealthService();
  ~HealthService() override;

  /// Sets the status of `service` ("" for the whole server) and tells watchers.
  void SetServingStatus(const std::string& service, ServingStatus status);
  /// Marks every service NOT_SERVING and refuses later changes (on shutdown).
  void Shutdown();

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  class WatchReactor;
  void RemoveWatcher(WatchReactor* watcher);
  ServingStatus StatusOfLocked(const std::string& service) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::map<std::string, ServingStatus> statuses_ ABSL_GUARDED_BY(mu_);
  // Open Watch streams and the service name each watches.
  std::map<WatchReactor*, std::string> watchers_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace codeco
