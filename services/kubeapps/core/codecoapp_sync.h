#pragma once
// The CodecoApp shim: CodecoApp objects in a Kubernetes cluster forwarded to
// the hub ACM, and ACM's view of them written back into their status, so
// `kubectl apply -f bookinfo.yaml` places an application and `kubectl get
// codecoapps` shows where it stands. Pure logic over two ports: KubeApi
// (libs/kube) for the cluster, AcmApplications for ACM.
//
// It is a controller in Kubernetes' sense, level-triggered: it lists and
// watches each CodecoApp resource, keeps the newest state of every object,
// and brings ACM in line with it, so a restart (or a missed event) only
// repeats work ACM answers idempotently:
//   - a live object first gets the finalizer kFinalizer, then its spec is
//     applied (ApplyApplication, request id "<uid>/<generation>") whenever
//     metadata.generation differs from status.observedGeneration;
//   - an object being deleted has its services removed from ACM
//     (DeleteApplication with codeco_app = metadata.name), then loses the
//     finalizer, and Kubernetes lets it go;
//   - every status_interval, ACM's phase and placements go into the status of
//     each accepted object whose ACM state changed.
// ACM names CodecoApps by metadata.name alone: the oldest object claims a
// name, a younger one with the same name (another namespace or resource) is
// not forwarded and says so in its status (reason NameConflict).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/acm/v1/acm_service.pb.h"
#include "codeco/common/backoff.h"
#include "codeco/common/clock.h"
#include "codeco/kube/kube_client.h"
#include "nlohmann/json.hpp"

namespace codeco::kubeapps {

/// The finalizer on every CodecoApp the shim forwarded: the object stays
/// until its services are gone from ACM.
inline constexpr char kFinalizer[] = "codeco.io/acm";

/// One served version of a CodecoApp CustomResourceDefinition.
struct CodecoAppResource {
  /// API group ("codeco.io").
  std::string group;
  /// Version ("v1").
  std::string version;
  /// Plural resource name.
  std::string plural = "codecoapps";
};

/// The resources of deploy/k8s/overlays/hub/codecoapp-crd.yaml: codeco's own
/// (codeco.io/v1) and CODECO's (codeco.he-codeco.eu/v1alpha1).
std::vector<CodecoAppResource> DefaultCodecoAppResources();

/// Parses "group/version[/plural]" ("codeco.io/v1"); errors name `field`.
absl::StatusOr<CodecoAppResource> ParseCodecoAppResource(const std::string& text,
                                                         const std::string& field);

/// The calls to the hub ACM (the port; server/ implements it over gRPC).
class AcmApplications {
 public:
  virtual ~AcmApplications() = default;
  /// ApplyApplication of a CAM document (JSON, which ACM reads as YAML).
  virtual absl::StatusOr<codeco::acm::v1::ApplyApplicationResponse> Apply(
      const std::string& cam, const std::string& request_id) = 0;
  /// DeleteApplication of the services `codeco_app` declared in `application`.
  virtual absl::Status Delete(const std::string& application, const std::string& codeco_app,
                              const std::string& request_id) = 0;
  /// GetApplication.
  virtual absl::StatusOr<codeco::acm::v1::Application> Get(const std::string& application) = 0;
};

/// How the shim works.
struct CodecoAppSyncOptions {
  /// The resources it follows.
  std::vector<CodecoAppResource> resources = DefaultCodecoAppResources();
  /// Namespace it follows ("" = every namespace).
  std::string ns;
  /// How often ACM's state is copied into the objects' status.
  absl::Duration status_interval = absl::Seconds(5);
  /// Waits before an object whose reconcile failed (ACM or the API server
  /// unreachable, a write conflict) is tried again.
  BackoffPolicy retry{absl::Milliseconds(500), absl::Minutes(1), 2.0, 0.2};
  /// Calls, lists and watches of the cluster.
  kube::KubeClientOptions kube;
};

/// Counts of what the shim did, for metrics and tests.
struct CodecoAppSyncStats {
  /// ApplyApplication calls that ACM accepted.
  int64_t applied = 0;
  /// Generations ACM refused (the status says why).
  int64_t refused = 0;
  /// DeleteApplication calls done for deleted objects.
  int64_t deleted = 0;
  /// Status writes.
  int64_t status_writes = 0;
  /// Reconciles that failed and were queued again.
  int64_t retries = 0;
  /// Objects known (live or being deleted).
  int64_t objects = 0;
};

/// The shim. Thread-safe: one Follow per resource and one Work run at once.
class CodecoAppSync {
 public:
  /// Calls the cluster through `kube_api` and ACM through `acm` (both must
  /// outlive this); `clock` times retries and status refreshes, `wait`
  /// spaces the API's retries.
  CodecoAppSync(kube::KubeApi* kube_api, AcmApplications* acm, Clock* clock, kube::WaitFn wait,
                CodecoAppSyncOptions options);

  /// Lists and watches options().resources[resource] until `cancelled`,
  /// handing every object to the queue; lists again after a 410 Gone and
  /// after the watch gave up (an absent CRD is retried, logged). Returns when
  /// `cancelled`.
  void Follow(size_t resource, const std::function<bool()>& cancelled);

  /// Reconciles the queued objects that are due, then, when status_interval
  /// has passed, refreshes the statuses; returns when nothing is due. Does
  /// nothing until every resource has been listed once (a resource whose
  /// CRD is not installed counts as listed, empty).
  void ReconcileDue();

  /// Runs ReconcileDue until `cancelled`, waking when an object is queued.
  void Work(const std::function<bool()>& cancelled);

  /// What it did so far.
  CodecoAppSyncStats Stats() const;

  /// The options in use.
  const CodecoAppSyncOptions& options() const { return options_; }

 private:
  // (resource index, namespace, name).
  using Key = std::tuple<size_t, std::string, std::string>;
  // The newest state of one object, waiting to be reconciled.
  struct Pending {
    nlohmann::json object;  // null when the object is gone
    absl::Time due;
    int failures = 0;
  };
  // What the shim knows of one object between reconciles.
  struct Known {
    nlohmann::json object;           // newest state seen
    std::string application;         // ACM application ("" = not forwarded)
    nlohmann::json status;           // the status last written or read
    int64_t settled_generation = 0;  // ACM answered for it and its status is written
  };

  void Observe(size_t resource, const nlohmann::json& object, bool gone) ABSL_LOCKS_EXCLUDED(mu_);
  // One reconcile; an error queues the object again with backoff.
  absl::Status Reconcile(const Key& key, const nlohmann::json& object);
  absl::Status ReconcileDeleting(const Key& key, const nlohmann::json& object);
  absl::Status ReconcileLive(const Key& key, nlohmann::json object);
  // ACM's state of every accepted object into its status, where it changed.
  void RefreshStatuses();
  absl::Status WriteStatus(const Key& key, nlohmann::json status);
  // Sends the JSON merge patch `patch` to `path`; NOT_FOUND when the object
  // is gone.
  absl::StatusOr<nlohmann::json> MergePatch(const std::string& path, const nlohmann::json& patch);
  // Merge-patches the object's metadata.finalizers (with its
  // resourceVersion as precondition); returns the object as stored.
  absl::StatusOr<nlohmann::json> PatchFinalizers(const Key& key, const nlohmann::json& object,
                                                 const nlohmann::json& finalizers);
  // Whether `key` holds the claim to its metadata.name (the key's name)
  // among the objects known: the oldest wins.
  bool OwnsName(const Key& key) ABSL_LOCKS_EXCLUDED(mu_);
  std::string CollectionPath(size_t resource) const;
  std::string ObjectPath(const Key& key) const;
  std::string Describe(const Key& key) const;

  kube::KubeClient kube_;
  AcmApplications* acm_;
  Clock* clock_;
  CodecoAppSyncOptions options_;

  mutable absl::Mutex mu_;
  Backoff retry_ ABSL_GUARDED_BY(mu_);
  std::map<Key, Pending> pending_ ABSL_GUARDED_BY(mu_);
  std::map<Key, Known> known_ ABSL_GUARDED_BY(mu_);
  int64_t wakeups_ ABSL_GUARDED_BY(mu_) = 0;
  // Resources whose first list is done: nothing is reconciled before every
  // one is, so a name's oldest claimant is known before any claim is judged.
  std::set<size_t> listed_ ABSL_GUARDED_BY(mu_);
  absl::Time next_refresh_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  CodecoAppSyncStats stats_ ABSL_GUARDED_BY(mu_);
};

/// The CAM ACM is given for a CodecoApp object: apiVersion, kind,
/// metadata.name and labels, and spec, as JSON.
std::string CamOf(const nlohmann::json& object);

/// The status fields the shim derives from ACM's application: phase, status,
/// errorMsg, specRevision and the placements of the services `codeco_app`
/// declared.
nlohmann::json StatusFromApplication(const codeco::acm::v1::Application& app,
                                     const std::string& codeco_app);

}  // namespace codeco::kubeapps
