#pragma once
// The bounds every application must keep, checked the same way by ACM (at
// apply, on a parsed CAM or a given spec) and by SWM (at PlaceApplication,
// before the spec is expanded into workloads and channels). A spec is read,
// never expanded: a few hundred bytes asking for 1,000 replicas on both ends
// of a channel is refused here, not after 10^6 channels were allocated.
// Resource totals (replicas x requests, summed over services) are computed
// with overflow checks. Errors name the field path of the document the spec
// came from (see SpecFieldNames).

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "codeco/acm/v1/application.pb.h"

namespace codeco::acm {

/// Most replicas one service may ask for (replicas and autoscaling.maxReplicas).
inline constexpr int kMaxServiceReplicas = 1000;
/// Most workloads an application expands to (its services' replicas summed).
inline constexpr int64_t kMaxApplicationWorkloads = 10000;
/// Most channels an application expands to: each channel counts sender
/// replicas x receiver replicas, summed over the channels.
inline constexpr int64_t kMaxApplicationChannels = 50000;

/// How errors name the fields of the spec (proto names, or the CAM's YAML keys).
struct SpecFieldNames {
  /// Path of the services list, e.g. "spec.services".
  std::string services;
  /// Path of service `i`, e.g. "spec.services[2]".
  std::function<std::string(int)> service;
  /// A service's replicas field, relative to the service.
  std::string replicas = "replicas";
  /// A service's autoscaling maximum, relative to the service.
  std::string autoscaling_max = "autoscaling.max_replicas";
  /// A service's channel list, relative to the service.
  std::string channels = "channels";
  /// A service's resource requests, relative to the service.
  std::string requests = "requests";
};

/// Field names of a spec in proto form rooted at `root` ("spec",
/// "application.spec").
SpecFieldNames ProtoSpecFieldNames(const std::string& root);

/// What a spec expands to, every sum checked against overflow.
struct ApplicationTotals {
  /// Workloads (replicas, 0 counting as 1, summed over services).
  int64_t workloads = 0;
  /// Channels (sender x receiver replicas, summed over channels).
  int64_t channels = 0;
  /// Requested CPU, millicores, over every replica.
  int64_t cpu_millicores = 0;
  /// Requested memory, bytes, over every replica.
  int64_t memory_bytes = 0;
  /// Requested GPUs over every replica.
  int64_t gpu = 0;
};

/// Checks `spec` against the replica, workload and channel caps above and
/// computes its totals without overflow, before anything is expanded.
/// INVALID_ARGUMENT lists every violation with its field path. Channels to
/// unknown services are skipped (the callers' validators report them).
absl::StatusOr<ApplicationTotals> CheckApplicationBounds(const v1::ApplicationSpec& spec,
                                                         const SpecFieldNames& names);

}  // namespace codeco::acm
