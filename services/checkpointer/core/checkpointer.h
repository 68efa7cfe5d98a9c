#pragma once
// The checkpointer of one cluster: checkpoints, restores and migrations as
// long-running operations. Each operation is stored (RocksDB through
// KvStore) before the RPC that started it answers, and again at each step
// with its phase, progress and the time each step took; operations run on a
// pool of workers, so checkpoints of different pods run in parallel.
//
// A migration: the source's driver takes the state (fencing writes); the
// state is cut into OCI image layers pushed one at a time, each published
// under the image's tag as soon as it is up; the target cluster's
// checkpointer (or this one) starts restoring at the first layer, pulling
// each layer while later ones are pushed, and a driver that streams (Redis)
// loads them into an empty container as they arrive; the copy is verified
// against the facts the driver recorded, then the source is retired and its
// pod deleted. Anything failing before the cut-over resumes the source and
// leaves nothing restored. A checkpointer that restarts finishes the
// operations a previous run left unfinished: it marks an image it was still
// pushing abandoned, re-attaches to the restore by its idempotency key (and
// cuts over if that restore had finished while the fence held), or starts
// over under a new tag; a cut-over that had begun is completed.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "checkpointer/core/ports.h"
#include "checkpointer/core/state_driver.h"
#include "codeco/checkpointer/v1/checkpointer_service.pb.h"
#include "codeco/common/clock.h"
#include "codeco/common/executor.h"
#include "codeco/common/kv_store.h"
#include "codeco/common/listeners.h"
#include "codeco/common/status.h"

namespace codeco::checkpointer {

/// Operation kinds.
inline constexpr char kCreateCheckpointKind[] = "checkpointer.CreateCheckpoint";
/// A restore on this cluster.
inline constexpr char kRestoreCheckpointKind[] = "checkpointer.RestoreCheckpoint";
/// A migration from this cluster.
inline constexpr char kMigrateContainerKind[] = "checkpointer.MigrateContainer";

/// Column families the checkpointer stores in.
inline constexpr char kCheckpointsFamily[] = "checkpoints";
/// Operations, their requests and the request_id index.
inline constexpr char kOperationsFamily[] = "operations";

/// The image annotation carrying the source pod (JSON), so that a restore
/// needs nothing but the image.
inline constexpr char kPodTemplateFact[] = "org.codeco.checkpoint.pod";
/// The pod annotation where an LMS running containers on loopback (CODEF)
/// says where a container serves ("host:port").
inline constexpr char kEndpointAnnotation[] = "codef.codeco.io/endpoint";

/// Settings of a Checkpointer.
struct CheckpointerOptions {
  /// The serving cluster.
  std::string cluster;
  /// Where dumps, layers and pulled images are kept while an operation runs.
  std::filesystem::path work_directory;
  /// Repository images go to when a request names none
  /// ("127.0.0.1:5000/codeco/checkpoints"); empty: requests must name one.
  std::string default_repository;
  /// Operations running at once (checkpoints of different pods in parallel). Default 4.
  int parallelism = 4;
  /// Operations accepted but not finished, at most; more are refused
  /// (RESOURCE_EXHAUSTED). Default 256.
  int max_pending = 256;
  /// Largest page ListCheckpoints returns. Default 500.
  int max_page_size = 500;
  /// How long a restore into a pod that exists already (restore_into_existing)
  /// waits for that pod to run: its creator may have made it just before, so
  /// it may still be Pending. Default 60 s (as checkpointer.stall_timeout).
  absl::Duration existing_pod_timeout = absl::Seconds(60);
  /// How often the LMS is asked again while a pod is awaited. Default 100 ms.
  absl::Duration pod_poll_interval = absl::Milliseconds(100);
  /// Called once as each operation ends, after its record is stored, with
  /// the operation and its checkpoint record (the server counts them in
  /// metrics), on the worker that ran it. Unset: nothing is called.
  std::function<void(const common::v1::Operation&, const v1::Checkpoint&)> on_finished;
};

/// The checkpointer's logic. Thread-safe.
class Checkpointer {
 public:
  /// `store` must hold kCheckpointsFamily and kOperationsFamily; every port
  /// and driver must outlive the checkpointer. Drivers are tried in order.
  Checkpointer(CheckpointerOptions options, KvStore& store, const Clock& clock, LmsPort& lms,
               ImageStore& images, PeerCheckpointers& peers, std::vector<StateDriver*> drivers);
  /// Waits for the operations running to finish.
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  /// Resumes the operations a previous run left unfinished (call once,
  /// before serving). Returns how many it resumed.
  absl::StatusOr<int> Recover();

  /// Starts checkpointing a container of this cluster. INVALID_ARGUMENT
  /// naming the field for bad input; the same operation again for a
  /// request_id seen before.
  absl::StatusOr<common::v1::Operation> CreateCheckpoint(const v1::CreateCheckpointRequest& request);
  /// Starts restoring a checkpoint image on a node of this cluster.
  absl::StatusOr<common::v1::Operation> RestoreCheckpoint(
      const v1::RestoreCheckpointRequest& request);
  /// Starts moving a container of this cluster, with its state, to a node
  /// of this or another cluster.
  absl::StatusOr<common::v1::Operation> MigrateContainer(
      const v1::MigrateContainerRequest& request);

  /// One checkpoint record.
  absl::StatusOr<v1::Checkpoint> GetCheckpoint(const std::string& id) const;
  /// Checkpoint records, newest first, one page.
  absl::StatusOr<v1::ListCheckpointsResponse> ListCheckpoints(
      const v1::ListCheckpointsRequest& request) const;
  /// Deletes a record (and its image when asked); FAILED_PRECONDITION while
  /// an operation on it runs.
  absl::Status DeleteCheckpoint(const v1::DeleteCheckpointRequest& request);
  /// One operation.
  absl::StatusOr<common::v1::Operation> GetOperation(const std::string& id) const;

  /// Called after every stored change of an operation.
  Listeners& listeners() { return listeners_; }
  /// Operations accepted and not finished.
  int pending() const { return pending_.load(); }

 private:
  struct Job;
  class Run;

  // Adds what is wrong with a request's source container to `errors`.
  void CheckSource(const v1::ContainerRef& source, FieldErrors& errors) const;
  // The record of a checkpoint of `source` pushed to `repository` (empty:
  // the default); the operation reads the repository back from it.
  v1::Checkpoint SourceRecord(const v1::ContainerRef& source, const std::string& repository) const;
  absl::StatusOr<common::v1::Operation> Accept(const std::string& kind,
                                               const std::string& request_id,
                                               const google::protobuf::Message& request,
                                               v1::Checkpoint checkpoint);
  void Submit(std::shared_ptr<Job> job);
  void Execute(Job& job);
  absl::StatusOr<ContainerTarget> TargetOf(const lms::v1::Pod& pod,
                                           const std::string& container) const;
  absl::StatusOr<StateDriver*> DriverFor(const ContainerTarget& target) const;
  StateDriver* DriverNamed(const std::string& name) const;
  absl::Status Save(const common::v1::Operation& op, const v1::Checkpoint& checkpoint);

  CheckpointerOptions options_;
  KvStore& store_;
  const Clock& clock_;
  LmsPort& lms_;
  ImageStore& images_;
  PeerCheckpointers& peers_;
  std::vector<StateDriver*> drivers_;
  Listeners listeners_;
  std::atomic<int> pending_{0};
  absl::Mutex mu_;  // serializes accepting (request_id index) and id generation
  int64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<BoundedExecutor> workers_;  // last: joined first
};

}  // namespace codeco::checkpointer
