#pragma once
// ApplicationAutoscaler: mck8s's multi-cluster horizontal pod autoscaler
// (MCHPA) run live by the hub ACM. The managed clusters' agents report the
// CPU and memory each pod of a placed application uses (their LMS's
// GetNodeUsage, with every heartbeat); each tick, for every service with
// `autoscaling` of an application that runs its current spec (RUNNING or
// DEGRADED, the placement for its spec revision in), the replicas' average
// CPU over their requests goes into the service's ReplicaAutoscaler
// (replica_autoscaler.h: min/max, target, scale-down cooldown), and a
// different count becomes a new spec revision (ApplicationManager::
// ScaleServices), which SWM carries out in place: new replicas spread by
// the placement policy, every other pod left running. The measure is
// written to status.app_metrics.services. Pure logic: the clock is
// injected, the server feeds usage and ticks it.
//
// A scale-down cooldown starts again after a restart of the hub ACM (the
// wishes are kept in memory): replicas then go later, never earlier.

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "acm/core/application_manager.h"
#include "acm/core/cluster_report.h"
#include "acm/core/replica_autoscaler.h"
#include "codeco/common/clock.h"

namespace codeco::acm {

/// One change the autoscaler made (or could not make), for logs and tests.
struct AutoscaleDecision {
  std::string application;      ///< Application name.
  std::string service;          ///< Service name.
  int from = 0;                 ///< Replicas in the spec before.
  int to = 0;                   ///< Replicas wanted now.
  int utilization_percent = 0;  ///< CPU used over requested by the measured replicas.
  /// Empty when the new spec revision is stored; else why not.
  std::string error;
};

/// The live multi-cluster autoscaler of the hub. Thread-safe.
class ApplicationAutoscaler {
 public:
  /// `manager` and `clock` must outlive it.
  ApplicationAutoscaler(ApplicationManager& manager, const Clock& clock);

  /// Takes the pods `cluster` reported (its complete list): their usage
  /// replaces what it reported before.
  void RecordUsage(const std::string& cluster, const std::vector<PodReport>& pods);
  /// Forgets what `cluster` reported (it left the federation).
  void ForgetCluster(const std::string& cluster);

  /// One pass over every application with an autoscaled service: measures,
  /// writes the measure into the status, and stores a new spec revision
  /// for each application whose wanted replica counts changed.
  std::vector<AutoscaleDecision> Tick();

 private:
  struct Scaler {
    ReplicaAutoscalerOptions options;
    std::unique_ptr<ReplicaAutoscaler> autoscaler;
  };
  // The scaler of `service` of `app`, built again when its settings changed.
  ReplicaAutoscaler& ScalerFor(const std::string& app, const std::string& service,
                               const ReplicaAutoscalerOptions& options)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ApplicationManager& manager_;
  const Clock& clock_;
  absl::Mutex mu_;
  // cluster -> pod -> what it reported.
  std::map<std::string, std::map<std::string, PodReport>> pods_ ABSL_GUARDED_BY(mu_);
  // (application, service) -> its autoscaler.
  std::map<std::pair<std::string, std::string>, Scaler> scalers_ ABSL_GUARDED_BY(mu_);
};

/// The ReplicaAutoscaler settings of a service's CAM `autoscaling`: target
/// 75 % and a 10-minute scale-down cooldown when not given.
ReplicaAutoscalerOptions AutoscalerOptionsOf(const v1::Autoscaling& autoscaling);

}  // namespace codeco::acm
