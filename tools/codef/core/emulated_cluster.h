#pragma once
// The emulated local management system (LMS) of one cluster: nodes with
// capacity and labels, pods bound to nodes, phases driven by time, watch
// events with increasing resource versions, usage from profiles, a background
// load per node (load steps), energy from a linear power model, the
// cumulative accounting a node-exporter, cAdvisor and kube-state-metrics
// would report (kube_metrics.h), and checkpoint/restore of container state.
//
// Pure logic: no threads, no I/O, and time moves only through AdvanceTo().
// Not thread-safe: the server serializes calls. Semantics (docs/codef.md):
//  - CreatePod binds to the named node or fails: NOT_FOUND for an unknown
//    node, FAILED_PRECONDITION when it is not ready, cordoned or lacks room
//    (the message says which resource); idempotent by request_id.
//  - Pods start Pending, turn Running `pod_start_delay` after creation, and a
//    pod annotated "codef.codeco.io/duration" (a job) turns Succeeded once it
//    has run that long. FailNode fails every pod on the node.
//  - Succeeded and Failed pods no longer count in the node's requests.
//  - Every stored change gets the next resource version (one counter for
//    nodes and pods); usage and energy are sampled on read, not versioned.
//  - A node's usage is the sum over its running pods plus its background
//    load (SetNodeLoad) while it is Ready; a NotReady node uses nothing.
//  - Accounting: every AdvanceTo integrates, over the time since the last
//    one, each pod's usage (sampled at the start of the interval, or at the
//    moment it started running) into per-container CPU seconds, and each
//    Ready node's CPU time into user (its pods), system (its background
//    load) and idle seconds over its whole CPUs, and its power into joules.
//    Changes made between advances (a new profile, a load step, a node
//    failure) count from the advance before them, so callers advance first
//    (SynchronizedCluster::Run does).
//  - With a PodProcessRunner, a pod whose container is a Redis image is a
//    real process (pod_processes.h): it reports its endpoint in
//    "codef.codeco.io/endpoint" from creation on, stays Pending until the
//    process has loaded (pod_start_delay does not apply), and is Failed with
//    the reason when it cannot load. A terminal phase stops the process and
//    DeletePod removes it with its data. A restore of such a container
//    starts it on the RDB at `archive_path`; one that fails to load leaves no
//    pod (RestoreOutcome gives the error).

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "codeco/common/clock.h"
#include "codeco/lms/v1/lms_service.pb.h"
#include "pod_processes.h"
#include "scenario.h"
#include "usage_profile.h"

namespace codeco::codef {

/// Pod annotation: the usage profile (see usage_profile.h).
inline constexpr char kUsageProfileAnnotation[] = "codef.codeco.io/usage-profile";
/// Pod annotation: run time of a job; the pod succeeds after it.
inline constexpr char kDurationAnnotation[] = "codef.codeco.io/duration";
/// Pod annotation: the opaque state blob of the pod's containers.
inline constexpr char kStateAnnotation[] = "codef.codeco.io/state";
/// Pod annotation set on restore: the archive the state came from.
inline constexpr char kRestoredFromAnnotation[] = "codef.codeco.io/restored-from";
/// Pod annotation set on restore: run time accumulated before the checkpoint.
inline constexpr char kRestoredProgressAnnotation[] = "codef.codeco.io/restored-progress";
/// Pod annotation set by codef on a pod backed by a real process (a Redis
/// container): where it serves, "127.0.0.1:<port>". Set when the pod is
/// created; the process answers there once the pod is Running.
inline constexpr char kEndpointAnnotation[] = "codef.codeco.io/endpoint";

/// What a checkpoint captured of one container.
struct ContainerCheckpoint {
  /// Archive path (unique in the federation).
  std::string archive_path;
  /// Image reference under which the emulator also serves the archive.
  std::string image_reference;
  /// Where it was taken.
  std::string cluster;
  /// Node that holds the archive.
  std::string node;
  /// Source pod.
  std::string pod;
  /// Source container.
  std::string container;
  /// The container's state blob.
  std::string state;
  /// How long the pod had run when checkpointed, nanoseconds.
  int64_t progress_ns = 0;
  /// Archive size, bytes.
  int64_t size_bytes = 0;
};

/// Where checkpoint archives live; shared by every cluster of a federation so
/// that a restore in another cluster finds them (as if the archive had been
/// shipped as an image). Thread-safe.
class CheckpointArchiveStore {
 public:
  virtual ~CheckpointArchiveStore() = default;
  /// Stores an archive under its image reference and an archive path, and
  /// returns that path: `checkpoint.archive_path` or one the store chose
  /// (e.g. a real file).
  virtual absl::StatusOr<std::string> Put(const ContainerCheckpoint& checkpoint) = 0;
  /// The archive stored under `archive_path_or_image`, or NOT_FOUND.
  virtual absl::StatusOr<ContainerCheckpoint> Get(
      const std::string& archive_path_or_image) const = 0;
};

/// A CheckpointArchiveStore in memory.
class InMemoryCheckpointArchiveStore final : public CheckpointArchiveStore {
 public:
  absl::StatusOr<std::string> Put(const ContainerCheckpoint& checkpoint) override;
  absl::StatusOr<ContainerCheckpoint> Get(const std::string& key) const override;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, ContainerCheckpoint> by_key_ ABSL_GUARDED_BY(mu_);
};

/// One change seen by a watch.
struct WatchEvent {
  /// ADDED, MODIFIED or DELETED.
  codeco::common::v1::WatchEventType type = codeco::common::v1::WATCH_EVENT_TYPE_UNSPECIFIED;
  /// Resource version of the change.
  int64_t version = 0;
  /// The node, for node events.
  std::optional<codeco::lms::v1::Node> node;
  /// The pod, for pod events.
  std::optional<codeco::lms::v1::Pod> pod;
};

/// CPU and memory used on a node outside its pods (system daemons, a noisy
/// neighbour): the node's background load, a load step when it changes.
struct NodeLoad {
  /// CPU, millicores (0 to the node's capacity).
  int64_t cpu_millicores = 0;
  /// Memory, bytes (0 to the node's capacity).
  int64_t memory_bytes = 0;
};

/// A change of a node's background load; what is left empty stays as it is.
struct NodeLoadChange {
  /// CPU as a share of the node's CPU capacity, 0-1 (not with cpu_millicores).
  std::optional<double> cpu_fraction;
  /// CPU, millicores (not with cpu_fraction).
  std::optional<int64_t> cpu_millicores;
  /// Memory, bytes.
  std::optional<int64_t> memory_bytes;
};

/// What a node-exporter would count on one node since the node was added.
struct NodeAccounting {
  /// Node name.
  std::string name;
  /// Whole CPUs: the CPU capacity rounded up to cores, at least 1.
  int cpus = 1;
  /// CPU capacity, millicores.
  int64_t cpu_capacity_millicores = 0;
  /// True while the node is Ready (a NotReady node counts nothing).
  bool ready = true;
  /// CPU time its pods used, seconds, summed over its CPUs.
  double user_seconds = 0;
  /// CPU time its background load used, seconds, summed over its CPUs.
  double system_seconds = 0;
  /// CPU time nothing used, seconds, summed over its CPUs.
  double idle_seconds = 0;
  /// Memory capacity, bytes.
  int64_t memory_total_bytes = 0;
  /// Memory not used by its running pods nor its background load, bytes.
  int64_t memory_available_bytes = 0;
  /// Power drawn now, watts (0 when NotReady).
  double power_watts = 0;
  /// Energy drawn since it was added, joules.
  double energy_joules = 0;
};

/// One container of a pod as cAdvisor and kube-state-metrics would see it.
struct ContainerAccounting {
  /// Pod name.
  std::string pod;
  /// Container name.
  std::string container;
  /// Container image.
  std::string image;
  /// Node the pod is bound to.
  std::string node;
  /// Phase of the pod.
  codeco::lms::v1::PodPhase phase = codeco::lms::v1::POD_PHASE_UNSPECIFIED;
  /// CPU time used since the pod started, seconds: the pod's usage split
  /// between its containers by their CPU requests (evenly when none asks).
  double cpu_seconds = 0;
  /// Memory in use now, bytes (0 unless Running): the pod's usage split by
  /// memory requests in the same way.
  int64_t memory_working_set_bytes = 0;
  /// Restarts (codef never restarts a container: always 0).
  int64_t restarts = 0;
};

/// The cumulative accounting of one cluster at one moment.
struct ClusterAccounting {
  /// The moment (the cluster's time).
  absl::Time at;
  /// Every node, in name order.
  std::vector<NodeAccounting> nodes;
  /// Every container of every pod the cluster holds, by pod then container order.
  std::vector<ContainerAccounting> containers;
};

/// Settings of one emulated cluster.
struct EmulatedClusterOptions {
  /// Cluster name (put in node labels and archive paths).
  std::string name;
  /// Well-known labels, copied to every node as codeco.io/<key>.
  codeco::common::v1::ClusterLabels labels;
  /// Delay from pod creation to Running.
  absl::Duration pod_start_delay = absl::Milliseconds(500);
  /// Number of past events kept for watches that resume (default 10000).
  size_t event_history = 10000;
  /// Pod IPs are "<pod_ip_prefix>.<n / 250>.<n % 250 + 1>" (default "10.0").
  std::string pod_ip_prefix = "10.0";
  /// Modelled checkpoint dump and restore speed, bytes per second (default 500 MB/s).
  int64_t checkpoint_bytes_per_second = 500'000'000;
};

/// The emulated LMS of one cluster.
class EmulatedCluster {
 public:
  /// `clock` stamps creation times; `archives` and `read_file` are not owned
  /// and must outlive the cluster (`read_file` may be empty: no trace files).
  /// `processes` (not owned, outlives the cluster) runs the real processes
  /// of Redis pods; null: every pod is bookkeeping only.
  EmulatedCluster(EmulatedClusterOptions options, const Clock& clock,
                  CheckpointArchiveStore* archives, FileReader read_file,
                  PodProcessRunner* processes = nullptr);
  /// Removes the processes of the pods still here.
  ~EmulatedCluster();
  EmulatedCluster(const EmulatedCluster&) = delete;
  EmulatedCluster& operator=(const EmulatedCluster&) = delete;

  /// Adds a node (Ready). ALREADY_EXISTS for a duplicate name.
  absl::Status AddNode(const NodeSpec& spec);
  /// Removes a node (a cloud node given back) and the ended pods bound to
  /// it. NOT_FOUND for an unknown node; FAILED_PRECONDITION naming a pod
  /// that has not ended.
  absl::Status RemoveNode(const std::string& name);
  /// Called with every event right after the change, in version order.
  void SetEventListener(std::function<void(const WatchEvent&)> listener);

  /// Moves time to `now`: starts pending pods and completes jobs that are due.
  void AdvanceTo(absl::Time now);

  /// Nodes by name, one page; INVALID_ARGUMENT for a bad selector or token.
  absl::StatusOr<codeco::lms::v1::ListNodesResponse> ListNodes(
      const codeco::lms::v1::ListNodesRequest& request) const;
  /// One node with its current usage and power.
  absl::StatusOr<codeco::lms::v1::Node> GetNode(const std::string& name) const;
  /// Creates a pod bound to `pod.node_name`.
  absl::StatusOr<codeco::lms::v1::Pod> CreatePod(const codeco::lms::v1::Pod& pod,
                                                 const std::string& request_id);
  /// One pod.
  absl::StatusOr<codeco::lms::v1::Pod> GetPod(const std::string& name) const;
  /// Pods by name, one page.
  absl::StatusOr<codeco::lms::v1::ListPodsResponse> ListPods(
      const codeco::lms::v1::ListPodsRequest& request) const;
  /// Calls `visit` with every pod as stored, in name order, without copying
  /// (for samplers that only read; do not call back into the cluster).
  void VisitPods(const std::function<void(const codeco::lms::v1::Pod&)>& visit) const;
  /// Calls `visit` with every node as stored (capacity, allocatable,
  /// requested, condition, labels), in name order, without usage or power.
  void VisitNodes(const std::function<void(const codeco::lms::v1::Node&)>& visit) const;
  /// Deletes a pod at once and frees its resources; returns its last state.
  absl::StatusOr<codeco::lms::v1::Pod> DeletePod(const std::string& name);
  /// Usage of a node and of each of its running pods, and its power.
  absl::StatusOr<codeco::lms::v1::NodeUsage> GetNodeUsage(const std::string& node) const;
  /// Dumps a running container's state to an archive; idempotent by
  /// request_id. A Redis container with a process is saved for real (SAVE):
  /// the archive is a directory holding dump.rdb.
  absl::StatusOr<codeco::lms::v1::CheckpointContainerResponse> CheckpointContainer(
      const codeco::lms::v1::CheckpointContainerRequest& request);
  /// Creates a pod whose container resumes from an archive; idempotent by
  /// request_id. A Redis container with a process restores from
  /// `archive_path` (a directory holding dump.rdb, or an RDB file): the pod
  /// comes back Pending while redis-server loads; RestoreOutcome tells how
  /// it ended.
  absl::StatusOr<codeco::lms::v1::RestoreContainerResponse> RestoreContainer(
      const codeco::lms::v1::RestoreContainerRequest& request);
  /// The restore that created pod `pod`, as it stands: the pod (Pending
  /// while its process loads, then Running) and the time the restore took;
  /// the error naming `archive_path` when its process could not load it (the
  /// pod is gone then); FAILED_PRECONDITION when the pod failed meanwhile;
  /// NOT_FOUND when there is no such pod.
  absl::StatusOr<codeco::lms::v1::RestoreContainerResponse> RestoreOutcome(
      const std::string& pod) const;

  /// Events after `resource_version` for nodes ("" or "0": every node as
  /// ADDED), and the version the stream continues from. OUT_OF_RANGE when
  /// the history no longer reaches back that far.
  absl::StatusOr<std::pair<std::vector<WatchEvent>, int64_t>> NodeEventsSince(
      const std::string& resource_version) const;
  /// The same for pods.
  absl::StatusOr<std::pair<std::vector<WatchEvent>, int64_t>> PodEventsSince(
      const std::string& resource_version) const;

  /// Fails a node: NotReady, every pod on it Failed. Returns the failed pod count.
  absl::StatusOr<int> FailNode(const std::string& name);
  /// Makes a failed node Ready again.
  absl::Status RecoverNode(const std::string& name);
  /// Replaces a pod's usage profile (text as in the annotation).
  absl::Status SetPodLoad(const std::string& pod, const std::string& profile_text);
  /// Ends running pod `pod` Succeeded (`succeeded`) or Failed with
  /// `message`, as its containers exiting would: its node's resources are
  /// released. FAILED_PRECONDITION when it is not running, NOT_FOUND when
  /// there is no such pod.
  absl::Status EndPod(const std::string& pod, bool succeeded, const std::string& message);
  /// Scales every pod's CPU usage by `factor` (> 0).
  absl::Status SetLoadFactor(double factor);
  /// Changes a node's background load and returns the load now in force.
  /// NOT_FOUND for an unknown node; INVALID_ARGUMENT naming the field for a
  /// share outside 0-1, both CPU forms, or a value below 0 or above the
  /// node's capacity.
  absl::StatusOr<NodeLoad> SetNodeLoad(const std::string& node, const NodeLoadChange& change);
  /// The cumulative accounting as of the last AdvanceTo.
  ClusterAccounting Accounting() const;

  /// Cluster name.
  const std::string& name() const { return options_.name; }
  /// Latest resource version.
  int64_t resource_version() const { return version_; }
  /// Number of nodes and of ready nodes.
  std::pair<int, int> NodeCounts() const;

 private:
  struct NodeState {
    codeco::lms::v1::Node node;
    NodeLoad load;
    // Whole CPUs (capacity rounded up, at least 1).
    int cpus = 1;
    // Accounting (see the header comment).
    double user_seconds = 0;
    double system_seconds = 0;
    double idle_seconds = 0;
    double energy_joules = 0;
  };
  struct PodState {
    codeco::lms::v1::Pod pod;
    Usage requests;
    int64_t gpu = 0;
    absl::Time created;
    absl::Time started;
    // When it reached a terminal phase.
    std::optional<absl::Time> ended;
    std::optional<absl::Duration> job_duration;
    absl::Duration restored_progress;
    std::unique_ptr<UsageProfile> profile;
    bool terminal = false;
    // Index of the container a runner process stands for (-1: none).
    int process_container = -1;
    // While a restore waits for its process: the archive_path it loads.
    std::string restoring_from;
    // The restore's request_id, whose cached response follows the pod.
    std::string restore_request_id;
    // How long the restore took, once the process loaded.
    absl::Duration restore_took;
    // Per container: its share of the pod's CPU and memory usage, and the
    // CPU seconds it used.
    std::vector<double> cpu_share;
    std::vector<double> memory_share;
    std::vector<double> cpu_seconds;
  };

  absl::Status ValidatePod(const codeco::lms::v1::Pod& pod, const std::string& path) const;
  absl::StatusOr<std::unique_ptr<PodState>> BuildPod(const codeco::lms::v1::Pod& pod,
                                                     const std::string& path) const;
  // ALREADY_EXISTS, NOT_FOUND (its node) or CheckFits's refusal when `pod`
  // cannot be bound as it is.
  absl::Status CheckAdmissible(const PodState& pod) const;
  absl::Status CheckFits(const NodeState& node, const PodState& pod) const;
  absl::Status StartProcess(PodState& pod, const std::string& state_source);
  absl::StatusOr<codeco::lms::v1::RestoreContainerResponse> RestoreProcess(
      const codeco::lms::v1::RestoreContainerRequest& request);
  void DropFailedRestore(const std::string& name, const std::string& why);
  codeco::lms::v1::RestoreContainerResponse RestoreResponse(const PodState& pod) const;
  void Bind(std::unique_ptr<PodState> pod);
  void Emit(codeco::common::v1::WatchEventType type, const codeco::lms::v1::Node* node,
            const codeco::lms::v1::Pod* pod);
  void Touch(codeco::lms::v1::Node* node);
  void Touch(codeco::lms::v1::Pod* pod);
  void SetPhase(PodState& pod, codeco::lms::v1::PodPhase phase, const std::string& message,
                absl::Time at);
  void Release(const PodState& pod);
  Usage PodUsage(const PodState& pod, absl::Time now) const;
  // The usage of `pod` at `at` as if it were running then.
  Usage RunningUsage(const PodState& pod, absl::Time at) const;
  // Integrates usage over [from, to) into the accounting.
  void Account(absl::Time from, absl::Time to);
  // Power of a Ready node at `cpu_millicores` of use.
  static double PowerAt(const codeco::lms::v1::Node& node, double cpu_millicores);
  codeco::lms::v1::Node WithUsage(const NodeState& node) const;
  absl::StatusOr<std::pair<std::vector<WatchEvent>, int64_t>> EventsSince(
      const std::string& resource_version, bool nodes) const;

  EmulatedClusterOptions options_;
  const Clock& clock_;
  CheckpointArchiveStore* archives_;
  FileReader read_file_;
  PodProcessRunner* processes_;
  std::function<void(const WatchEvent&)> listener_;
  absl::Time now_;
  int64_t version_ = 0;
  int64_t dropped_through_ = 0;  // history holds every event after this version
  std::deque<WatchEvent> history_;
  std::map<std::string, NodeState> nodes_;
  std::map<std::string, std::unique_ptr<PodState>> pods_;
  std::map<std::string, codeco::lms::v1::Pod> created_by_request_;
  std::map<std::string, codeco::lms::v1::CheckpointContainerResponse> checkpoints_by_request_;
  std::map<std::string, codeco::lms::v1::RestoreContainerResponse> restores_by_request_;
  // Restores whose process could not load, by pod name, until the name is reused.
  std::map<std::string, absl::Status> failed_restores_;
  double load_factor_ = 1.0;
  int64_t pod_ip_counter_ = 0;
  int64_t checkpoint_counter_ = 0;
};

/// True when `labels` match `selector` (Kubernetes semantics). INVALID_ARGUMENT
/// at `path` for a malformed selector.
absl::StatusOr<bool> MatchesSelector(const google::protobuf::Map<std::string, std::string>& labels,
                                     const codeco::common::v1::LabelSelector& selector,
                                     const std::string& path);

}  // namespace codeco::codef
