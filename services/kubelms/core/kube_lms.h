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
#include "codeco/common/backoff.h"
#include "codeco/common/clock.h"
#include "codeco/lms/v1/lms_service.pb.h"
#include "kubelms/core/kube_objects.h"

namespace codeco::kubelms {

/// What kube-apiserver answered to one call.
struct KubeAnswer {
  /// HTTP status code.
  long status = 0;
  /// The body (for a stream: only of a non-2xx answer).
  std::string body;
};

/// Calls to one kube-apiserver (the port). Paths are absolute API paths with
/// their query ("/api/v1/nodes?limit=500"). Transport failures are errors;
/// any HTTP status is an answer.
class KubeApi {
 public:
  virtual ~KubeApi() = default;
  /// One request: `method` with a JSON `body` (may be empty), answered
  /// within `timeout`.
  virtual absl::StatusOr<KubeAnswer> Call(const std::string& method, const std::string& path,
                                          const std::string& body, absl::Duration timeout) = 0;
  /// A watch (GET): each line of a 2xx answer goes to `on_line` as it
  /// arrives (false stops); returns when the server ends the stream,
  /// `on_line` stops it, or `cancelled` turns true (CANCELLED).
  virtual absl::StatusOr<KubeAnswer> Stream(const std::string& path,
                                            const std::function<bool(std::string_view)>& on_line,
                                            const std::function<bool()>& cancelled) = 0;
};

/// How the adapter uses the cluster.
struct KubeLmsOptions {
  /// Namespace of the pods codeco creates and sees.
  std::string ns = "default";
  /// Names of the resources codeco counts (GPUs).
  ResourceNames resources;
  /// Timeout of one ordinary API call.
  absl::Duration call_timeout = absl::Seconds(10);
  /// Longest a kubelet checkpoint may take.
  absl::Duration checkpoint_timeout = absl::Minutes(5);
  /// Longest RestoreContainer waits for the restored pod to run (the call's
  /// own deadline may be shorter).
  absl::Duration restore_timeout = absl::Minutes(5);
  /// How often RestoreContainer looks at the restored pod.
  absl::Duration restore_poll = absl::Milliseconds(250);
  /// Each kube watch asks the server to end after this long
  /// (timeoutSeconds); the adapter then resumes from the last version seen.
  absl::Duration watch_timeout = absl::Minutes(5);
  /// Failed attempts in a row after which a watch gives up (UNAVAILABLE).
  int watch_attempts = 6;
  /// Waits between watch attempts.
  BackoffPolicy watch_backoff{absl::Milliseconds(200), absl::Seconds(5), 2.0, 0.2};
  /// Items per page when the adapter lists for itself (sums of requests,
  /// the first state of a watch).
  int list_page = 500;
};

/// Waits `d`, or less when the caller is cancelled; returns false when it was.
using WaitFn = std::function<bool(absl::Duration d)>;

/// The LMS of one Kubernetes cluster. Thread-safe.
class KubeLms {
 public:
  /// Calls the cluster through `api` (must outlive this). `clock` measures
  /// durations; `wait` spaces retries and polls.
  KubeLms(KubeApi* api, Clock* clock, WaitFn wait, KubeLmsOptions options);

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
  // Hands one object of a watch (or of the first list) on, as an event of
  // `type`; CANCELLED when the consumer wants no more.
  using Translate = std::function<absl::Status(const nlohmann::json& object,
                                               codeco::common::v1::WatchEventType type)>;

  absl::StatusOr<nlohmann::json> GetJson(const std::string& path, const std::string& what);
  absl::StatusOr<nlohmann::json> SendJson(const std::string& method, const std::string& path,
                                          const std::string& body, absl::Duration timeout,
                                          const std::string& what);
  // Every item of a (paged) list; returns the list's resourceVersion.
  absl::StatusOr<std::string> ListAll(
      const std::string& path, const std::function<absl::Status(const nlohmann::json&)>& item);
  // Sum of requests of the non-terminated pods, by node (all namespaces;
  // only `node` when not empty).
  absl::StatusOr<std::map<std::string, codeco::common::v1::ResourceQuantities>> RequestedByNode(
      const std::string& node);
  absl::StatusOr<codeco::lms::v1::Pod> CreateKubePod(const codeco::lms::v1::Pod& pod,
                                                     const std::string& request_id,
                                                     const std::string& path);
  absl::Status Watch(const std::string& collection, const std::string& query,
                     const std::string& from_version, const Translate& translate,
                     const std::function<bool()>& cancelled);
  std::string PodPath(const std::string& name) const;
  // Waits `d` in short slices; false as soon as `cancelled` (may be null).
  bool WaitUnlessCancelled(absl::Duration d, const std::function<bool()>& cancelled);

  KubeApi* api_;
  Clock* clock_;
  WaitFn wait_;
  KubeLmsOptions options_;
  absl::Mutex mu_;
  // CheckpointContainer answers by request_id, so a retried call gets the
  // same archive (bounded: the oldest are forgotten).
  std::map<std::string, codeco::lms::v1::CheckpointContainerResponse> checkpoints_
      ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::string> checkpoint_order_ ABSL_GUARDED_BY(mu_);
  int64_t checkpoint_seq_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace codeco::kubelms
