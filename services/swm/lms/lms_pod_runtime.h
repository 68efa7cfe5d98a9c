#pragma once
// The core's PodRuntime port over one cluster's codeco.lms.v1.LmsService (the
// CODEF emulator, or the Kubernetes adapter). Every call carries a deadline.
//
// The port speaks in PodInfo (name, node, requests); what else a pod needs
// (image, ports, labels) comes from a template registered under the pod's
// name before the plan runs. A pod without a template gets one container
// "main" with no image (enough for the emulator, refused by a real LMS).

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "grpcpp/channel.h"
#include "swm/core/execution.h"

namespace codeco::swm {

/// How an LmsPodRuntime calls its LMS.
struct LmsPodRuntimeOptions {
  /// Cluster name, for error messages. Default: empty.
  std::string cluster;
  /// Deadline of every call from when it starts. Default: 10 s.
  absl::Duration call_timeout = absl::Seconds(10);
  /// Page size of ListNodes and ListPods. Default: 500.
  int page_size = 500;
};

/// PodRuntime over an LmsService channel. Thread-safe.
class LmsPodRuntime final : public PodRuntime {
 public:
  /// Calls the LMS behind `channel` (from PeerChannels).
  LmsPodRuntime(std::shared_ptr<grpc::Channel> channel, LmsPodRuntimeOptions options);

  /// Ready, not cordoned nodes are schedulable; `capacity` is the node's
  /// allocatable and `allocated` the sum of the requests of its non-terminal
  /// pods (Pending or Running).
  absl::StatusOr<std::vector<Node>> ListNodes() override;
  /// Every pod of the cluster (any phase), with the summed container requests.
  absl::StatusOr<std::vector<PodInfo>> ListPods() override;
  /// Creates the pod bound to `pod.node`, from its template (and with its
  /// request_id, so a retry is harmless) if one is registered.
  absl::Status CreatePod(const PodInfo& pod) override;
  /// Deletes the pod; NOT_FOUND if there is none.
  absl::Status DeletePod(const std::string& name) override;
  /// Removes the pod at once, without waiting for its node (the LMS's
  /// force delete): for a pod of a node that stopped answering, which would
  /// otherwise stay Terminating and keep its name. NOT_FOUND if there is none.
  absl::Status ForceDeletePod(const std::string& name);
  /// Creates exactly `pod` (name, labels, containers) bound to `node`, its
  /// first container requesting `requests` (the others nothing), with
  /// `request_id` so that a retry is harmless (the LMS remembers ids after
  /// the pod is gone). A pod without containers gets one named "main".
  absl::Status CreatePodFrom(codeco::lms::v1::Pod pod, const std::string& node,
                             const Resources& requests, const std::string& request_id);

  /// The LMS's pods whose label `key` is `value`, whole (containers, labels).
  absl::StatusOr<std::vector<codeco::lms::v1::Pod>> ListPodsLabelled(const std::string& key,
                                                                     const std::string& value);
  /// Registers the LMS pod to create for pod `pod.name()` (containers,
  /// labels, annotations) and the request_id to create it with (unique per
  /// plan: the LMS remembers ids after the pod is gone); node and requests
  /// still come from the plan.
  void SetPodTemplate(const codeco::lms::v1::Pod& pod, const std::string& request_id);
  /// Forgets the template of pod `name` (no-op if none).
  void ClearPodTemplate(const std::string& name);
  /// Calls from now on end by `deadline` at the latest (what is left of the
  /// caller's deadline); absl::InfiniteFuture() lifts the cap.
  void SetDeadline(absl::Time deadline);

 private:
  // DeletePod, forced or not.
  absl::Status Delete(const std::string& name, bool force);
  std::unique_ptr<grpc::ClientContext> NewContext();
  absl::StatusOr<std::vector<codeco::lms::v1::Pod>> ListLmsPods(const std::string& key = "",
                                                                const std::string& value = "");
  absl::Status Wrap(const grpc::Status& status, const std::string& what) const;

  std::unique_ptr<codeco::lms::v1::LmsService::Stub> stub_;
  LmsPodRuntimeOptions options_;
  absl::Mutex mu_;
  struct Template {
    codeco::lms::v1::Pod pod;
    std::string request_id;
  };
  std::map<std::string, Template> templates_ ABSL_GUARDED_BY(mu_);
  absl::Time deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

}  // namespace codeco::swm
