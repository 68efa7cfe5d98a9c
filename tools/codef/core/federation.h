#pragma once
// The emulated federation of one scenario: one EmulatedCluster per cluster
// that has nodes (each behind its own mutex), the loopback address plan, the
// scenario's link matrix applied through the LinkControl port, the fault and
// traffic controls of the CODEF control API, and the scenario's fault
// timeline. No threads: the caller ticks it (Tick) and serves it.
//
// Address plan: the hub's services listen on 127.0.1.1, the i-th managed
// cluster's (0-based, scenario order) on 127.0.<i+2>.1.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "codeco/codef/v1/codef_service.pb.h"
#include "codeco/common/clock.h"
#include "emulated_cluster.h"
#include "link_control.h"
#include "pod_processes.h"
#include "scenario.h"

namespace codeco::codef {

/// Receives the watch events of one cluster. Called with the cluster's lock
/// held: it must not call back into the cluster.
class EventSubscriber {
 public:
  virtual ~EventSubscriber() = default;
  /// One event, in version order.
  virtual void OnEvent(const WatchEvent& event) = 0;
};

/// An EmulatedCluster behind a mutex, with watch subscriptions.
class SynchronizedCluster {
 public:
  /// Wraps `cluster`; `clock` is read before every call to advance time.
  SynchronizedCluster(std::unique_ptr<EmulatedCluster> cluster, const Clock& clock);

  /// Runs `fn(cluster)` under the lock, after advancing the cluster to now.
  template <typename Fn>
  auto Run(Fn&& fn) {
    absl::MutexLock lock(&mu_);
    cluster_->AdvanceTo(clock_.Now());
    return fn(*cluster_);
  }

  /// What a new watch gets: the events to send first, and its subscription.
  struct Subscription {
    /// Events up to the moment of subscribing.
    std::vector<WatchEvent> backlog;
    /// Pass to Unsubscribe.
    int64_t id = 0;
  };
  /// Atomically reads the node (or pod) events after `resource_version` and
  /// subscribes `subscriber` to every later node (or pod) event.
  absl::StatusOr<Subscription> Subscribe(bool nodes, const std::string& resource_version,
                                         EventSubscriber* subscriber);
  /// Stops delivering to a subscription; after it returns no call is running.
  void Unsubscribe(int64_t id);

 private:
  void Dispatch(const WatchEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock& clock_;
  absl::Mutex mu_;
  std::unique_ptr<EmulatedCluster> cluster_ ABSL_GUARDED_BY(mu_);
  struct Subscriber {
    bool nodes;
    EventSubscriber* subscriber;
  };
  std::map<int64_t, Subscriber> subscribers_ ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

/// The service IP of the hub.
inline constexpr char kHubServiceIp[] = "127.0.1.1";
/// The service IP of the `index`-th managed cluster (0-based).
std::string ManagedClusterServiceIp(size_t index);

/// All clusters of a scenario and the controls over them. Thread-safe.
class Federation {
 public:
  /// Builds every cluster and applies the link matrix (one-way latency =
  /// RTT / 2; pairs without a link are cut). `links`, `archives`,
  /// `read_file` and `processes` must outlive the federation; `processes`
  /// runs the real processes of Redis pods (null: none, pods are bookkeeping).
  static absl::StatusOr<std::unique_ptr<Federation>> Create(const Scenario& scenario,
                                                            const Clock& clock, LinkControl* links,
                                                            CheckpointArchiveStore* archives,
                                                            FileReader read_file,
                                                            PodProcessRunner* processes = nullptr);

  /// Names of every cluster: the hub first, then the managed ones in order.
  std::vector<std::string> ClusterNames() const;
  /// The LMS of `name`, or null (unknown, or a hub without nodes).
  SynchronizedCluster* FindLms(const std::string& name) const;
  /// The service IP of a cluster ("127.0.N.1"); NOT_FOUND for an unknown one.
  absl::StatusOr<std::string> ServiceIp(const std::string& name) const;
  /// Records where a cluster's LMS and relay listen (shown by ListClusters).
  void SetEndpoints(const std::string& name, const std::string& lms, const std::string& relay);
  /// Records where a cluster's metrics are served (host:port, shown by ListClusters).
  void SetMetricsEndpoint(const std::string& name, const std::string& metrics);
  /// The clusters as the control API lists them.
  std::vector<codeco::codef::v1::EmulatedCluster> ListClusters() const;

  /// Sets a directed link (and its reverse when `symmetric`).
  absl::Status SetLink(const std::string& from, const std::string& to,
                       const LinkProperties& properties, bool symmetric);
  /// The directed link in force.
  absl::StatusOr<LinkProperties> GetLink(const std::string& from, const std::string& to) const;
  /// Puts both directions back to the scenario's conditions.
  absl::Status ResetLink(const std::string& from, const std::string& to);
  /// Installs a virtual link on the edge devices (the relays): channel
  /// traffic from `source` to `endpoint` in `target` passes. INVALID_ARGUMENT
  /// naming the field (unknown clusters, the same cluster twice, a bad endpoint).
  absl::Status PutVirtualLink(const std::string& id, const std::string& source,
                              const std::string& target, const std::string& endpoint);
  /// Removes virtual link `id`; NOT_FOUND when it is not installed.
  absl::Status DeleteVirtualLink(const std::string& id);
  /// How many virtual links are installed.
  size_t VirtualLinkCount() const { return links_->VirtualLinkCount(); }
  /// Fails a node; returns how many pods failed with it.
  absl::StatusOr<int> FailNode(const std::string& cluster, const std::string& node);
  /// Recovers a node.
  absl::Status RecoverNode(const std::string& cluster, const std::string& node);
  /// Cuts (or restores) every link of a managed cluster.
  absl::Status SetPartitioned(const std::string& cluster, bool partitioned);
  /// Cuts (or restores) every link of the hub.
  absl::Status SetHubCut(bool cut);
  /// Replaces a pod's usage profile.
  absl::Status SetPodLoad(const std::string& cluster, const std::string& pod,
                          const std::string& profile_text);
  /// Ends a running pod (EmulatedCluster::EndPod).
  absl::Status EndPod(const std::string& cluster, const std::string& pod, bool succeeded,
                      const std::string& message);
  /// Scales the CPU usage of every pod of a cluster.
  absl::Status SetClusterLoad(const std::string& cluster, double factor);
  /// Changes the background load of a node (EmulatedCluster::SetNodeLoad);
  /// answers the load now in force and the node's CPU capacity.
  absl::StatusOr<codeco::codef::v1::SetNodeLoadResponse> SetNodeLoad(const std::string& cluster,
                                                                     const std::string& node,
                                                                     const NodeLoadChange& change);

  /// Starts the scenario's fault timeline at `start`.
  void StartTimeline(absl::Time start);
  /// Advances every cluster to now and applies the faults that are due.
  /// Returns one line per fault applied ("at 10m: node_fail edge/n1: ok").
  std::vector<std::string> Tick();

 private:
  Federation(const Scenario& scenario, const Clock& clock, LinkControl* links);
  absl::Status CheckCluster(const std::string& name, const std::string& field) const;
  absl::Status ApplyFault(const FaultSpec& fault);
  SynchronizedCluster* RequireLms(const std::string& name, absl::Status* status) const;

  Scenario scenario_;
  const Clock& clock_;
  LinkControl* links_;
  std::vector<std::string> names_;
  std::map<std::string, std::string> service_ips_;
  std::map<std::string, std::unique_ptr<SynchronizedCluster>> lms_;

  mutable absl::Mutex mu_;
  std::map<std::string, std::pair<std::string, std::string>> endpoints_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> metrics_endpoints_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> partitioned_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Time> timeline_start_ ABSL_GUARDED_BY(mu_);
  size_t next_fault_ ABSL_GUARDED_BY(mu_) = 0;
  // Load surges to undo: (when, cluster).
  std::multimap<absl::Time, std::string> surge_ends_ ABSL_GUARDED_BY(mu_);
  // Node load steps to undo: (when, (cluster, node)).
  std::multimap<absl::Time, std::pair<std::string, std::string>> node_load_ends_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace codeco::codef
