#pragma once
// Clusters on loopback for the checkpointer's tests and benchmark: an LMS
// whose Redis pods are real redis-server processes on 127.0.0.1, and peers
// that are other Checkpointers in the same process. Everything the core
// does runs for real; only the gRPC hops between services are left out.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "checkpointer/core/checkpointer.h"
#include "checkpointer/core/ports.h"
#include "checkpointer/drivers/redis_hook.h"

namespace codeco::checkpointer {

/// An LmsPort whose pods each run one redis-server (endpoint in the
/// kEndpointAnnotation); a node takes pods asking up to `node_memory`
/// bytes each. Thread-safe.
class LoopbackLms final : public LmsPort {
 public:
  /// Pods keep their data under `dir`.
  LoopbackLms(std::filesystem::path dir, int64_t node_memory);

  /// Starts an empty Redis pod `name` on `node` (image redis:7, container "redis").
  absl::StatusOr<lms::v1::Pod> AddRedisPod(const std::string& name, const std::string& node);

  absl::StatusOr<lms::v1::Pod> GetPod(const std::string& name) override;
  absl::StatusOr<lms::v1::Pod> RestoreContainer(
      const lms::v1::RestoreContainerRequest& request) override;
  absl::StatusOr<lms::v1::Pod> CreatePod(const lms::v1::Pod& pod,
                                         const std::string& request_id) override;
  absl::Status DeletePod(const std::string& name) override;

  /// Pods now.
  size_t size();

 private:
  struct Running {
    lms::v1::Pod pod;
    std::unique_ptr<RedisServer> server;
  };
  // Admits and starts `pod`, on the dump.rdb in `archive` when set.
  absl::StatusOr<lms::v1::Pod> Start(lms::v1::Pod pod, const std::string& archive);

  const std::filesystem::path dir_;
  const int64_t node_memory_;
  absl::Mutex mu_;
  int generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, Running> pods_ ABSL_GUARDED_BY(mu_);
};

/// Checkpointers by cluster in this process; a peer's restore runs in the
/// other one, followed until done.
class InProcessPeers final : public PeerCheckpointers {
 public:
  /// `checkpointer` serves `cluster` (not owned).
  void Add(const std::string& cluster, Checkpointer* checkpointer);

  absl::StatusOr<v1::Checkpoint> Restore(
      const std::string& cluster, const v1::RestoreCheckpointRequest& request,
      const std::function<void(const common::v1::Operation&)>& progress) override;

 private:
  std::map<std::string, Checkpointer*> by_cluster_;
};

}  // namespace codeco::checkpointer
