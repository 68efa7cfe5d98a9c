#pragma once
// The LMS operations (codeco.lms.v1) over one Kubernetes cluster's API, as
// pure logic over a port (KubeApi) that carries the HTTP calls: server/
// implements it with libcurl, tests with a stand-in kube-apiserver.
//
// Pods live in one namespace (KubeLmsOptions::ns); nodes are the cluster's.
// What each call does in Kubernetes terms is in docs/deploy.md ("The
// Kubernetes LMS adapter").

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/common/clock.h"
#include "codeco/kube/kube_client.h"
#include "codeco/lms/v1/lms_service.pb.h"
#include "kubelms/core/kube_objects.h"

namespace codeco::kubelms {

using kube::KubeAnswer;
using kube::KubeApi;

/// How the adapter uses the cluster.
struct KubeLmsOptions {
  /// Namespace of the pods codeco creates and sees.
  std::string ns = "default";
  /// Names of the resources codeco counts (GPUs).
  ResourceNames resources;
  /// Calls, lists and watches.
  kube::KubeClientOptions kube;
  /// Longest a kubelet checkpoint may take.
  absl::Duration checkpoint_timeout = absl::Minutes(5);
  /// Longest RestoreContainer waits for the restored pod to run (the call's
  /// own deadline may be shorter).
  absl::Duration restore_timeout = absl::Minutes(5);
  /// How often RestoreContainer looks at the restored pod.
  absl::Duration restore_poll = absl::Milliseconds(250);
};

/// The LMS of one Kubernetes cluster. Thread-safe.
class KubeLms {
 public:
  /// Calls the cluster through `api` (must outlive this). `clock` measures
  /// durations; `wait` spaces retries and polls.
  KubeLms(KubeApi* api, Clock* clock, kube::WaitFn wait, KubeLmsOptions options);

  // The RPCs of codeco.lms.v1.LmsService (lms_service.proto documents
  // each). `cancelled` (may be null) ends a wait early.

  absl::StatusOr<codeco::lms::v1::ListNodesResponse> ListNodes(
      const codeco::lms::v1::ListNodesRequest& request);
  absl::StatusOr<codeco::lms::v1::Node> GetNode(const std::string& name);
  absl::StatusOr<codeco::lms::v1::Pod> CreatePod(const codeco::lms::v1::CreatePodRequest& request);
  absl::StatusOr<codeco::lms::v1::Pod> GetPod(const std::string& name);
  absl::StatusOr<codeco::lms::v1::ListPodsResponse> ListPods(
      const codeco::lms::v1::ListPodsRequest& request);
  absl::StatusOr<codeco::lms::v1::Pod> DeletePod(const codeco::lms::v1::DeletePodRequest& request);
  absl::StatusOr<codeco::lms::v1::NodeUsage> GetNodeUsage(const std::string& node);
  absl::StatusOr<codeco::lms::v1::CheckpointContainerResponse> CheckpointContainer(
      const codeco::lms::v1::CheckpointContainerRequest& request);
  absl::StatusOr<codeco::lms::v1::RestoreContainerResponse> RestoreContainer(
      const codeco::lms::v1::RestoreContainerRequest& request, absl::Duration budget,
      const std::function<bool()>& cancelled);

  /// Streams node changes to `emit` (false from it ends the watch, OK) until
  /// `cancelled`: first every node as ADDED when the request's version is
  /// empty, then changes. A stream the server ends is resumed from the last
  /// version seen (events or bookmarks); a version too old is OUT_OF_RANGE.
  absl::Status WatchNodes(const codeco::lms::v1::WatchNodesRequest& request,
                          const std::function<bool(codeco::lms::v1::WatchNodesResponse)>& emit,
                          const std::function<bool()>& cancelled);
  /// The same for pods of the namespace, filtered as the request says.
  absl::Status WatchPods(const codeco::lms::v1::WatchPodsRequest& request,
                         const std::function<bool(codeco::lms::v1::WatchPodsResponse)>& emit,
                         const std::function<bool()>& cancelled);

 private:
  // Sum of requests of the non-terminated pods, by node (all namespaces;
  // only `node` when not empty).
  absl::StatusOr<std::map<std::string, codeco::common::v1::ResourceQuantities>> RequestedByNode(
      const std::string& node);
  absl::StatusOr<codeco::lms::v1::Pod> CreateKubePod(const codeco::lms::v1::Pod& pod,
                                                     const std::string& request_id,
                                                     const std::string& path);
  std::string PodPath(const std::string& name) const;

  KubeApi* api_;
  Clock* clock_;
  KubeLmsOptions options_;
  kube::KubeClient client_;
  absl::Mutex mu_;
  // CheckpointContainer answers by request_id, so a retried call gets the
  // same archive (bounded: the oldest are forgotten).
  std::map<std::string, codeco::lms::v1::CheckpointContainerResponse> checkpoints_
      ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::string> checkpoint_order_ ABSL_GUARDED_BY(mu_);
  int64_t checkpoint_seq_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace codeco::kubelms
