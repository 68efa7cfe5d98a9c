#include "checkpointer/testing/loopback_cluster.h"

#include <chrono>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "codeco/common/ports.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/status.h"

namespace codeco::checkpointer {

namespace fs = std::filesystem;

LoopbackLms::LoopbackLms(fs::path dir, int64_t node_memory)
    : dir_(std::move(dir)), node_memory_(node_memory) {}

absl::StatusOr<lms::v1::Pod> LoopbackLms::AddRedisPod(const std::string& name,
                                                      const std::string& node) {
  lms::v1::Pod pod;
  pod.set_name(name);
  pod.set_node_name(node);
  lms::v1::Container* c = pod.add_containers();
  c->set_name("redis");
  c->set_image("redis:7");
  c->mutable_requests()->set_memory_bytes(64 << 20);
  return Start(pod, "");
}

absl::StatusOr<lms::v1::Pod> LoopbackLms::GetPod(const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = pods_.find(name);
  if (it == pods_.end()) return absl::NotFoundError("no pod " + name);
  return it->second.pod;
}

absl::StatusOr<lms::v1::Pod> LoopbackLms::RestoreContainer(
    const lms::v1::RestoreContainerRequest& request) {
  return Start(request.pod(), request.archive_path());
}

absl::StatusOr<lms::v1::Pod> LoopbackLms::CreatePod(const lms::v1::Pod& pod,
                                                    const std::string& /*request_id*/) {
  return Start(pod, "");
}

absl::Status LoopbackLms::DeletePod(const std::string& name) {
  std::unique_ptr<RedisServer> server;  // killed outside the lock
  absl::MutexLock lock(&mu_);
  auto it = pods_.find(name);
  if (it != pods_.end()) {
    server = std::move(it->second.server);
    pods_.erase(it);
  }
  return absl::OkStatus();
}

size_t LoopbackLms::size() {
  absl::MutexLock lock(&mu_);
  return pods_.size();
}

absl::StatusOr<lms::v1::Pod> LoopbackLms::Start(lms::v1::Pod pod, const std::string& archive) {
  if (pod.containers_size() == 0) return absl::InvalidArgumentError("pod.containers: empty");
  if (pod.containers(0).requests().memory_bytes() > node_memory_) {
    return absl::ResourceExhaustedError(absl::StrCat("node ", pod.node_name(),
                                                     ": not enough memory"));
  }
  fs::path data;
  {
    absl::MutexLock lock(&mu_);
    if (pods_.count(pod.name())) {
      return absl::AlreadyExistsError(absl::StrCat("pod ", pod.name(), " exists"));
    }
    data = dir_ / absl::StrCat(pod.name(), "-", ++generation_);
  }
  std::error_code error;
  fs::create_directories(data, error);
  if (!archive.empty()) {
    fs::copy_file(fs::path(archive) / "dump.rdb", data / "dump.rdb", error);
    if (error) return absl::InvalidArgumentError("archive_path: no dump.rdb");
  }
  ASSIGN_OR_RETURN(int port, FreePort("127.0.0.1"));
  const RedisInstance instance{.port = port};
  ASSIGN_OR_RETURN(std::unique_ptr<RedisServer> server,
                   RedisServer::Start("/usr/bin/redis-server", data, instance, absl::Seconds(60)));
  pod.set_phase(lms::v1::POD_PHASE_RUNNING);
  (*pod.mutable_annotations())[kEndpointAnnotation] = absl::StrCat("127.0.0.1:", instance.port);
  absl::MutexLock lock(&mu_);
  pods_[pod.name()] = Running{pod, std::move(server)};
  return pod;
}

void InProcessPeers::Add(const std::string& cluster, Checkpointer* checkpointer) {
  by_cluster_[cluster] = checkpointer;
}

absl::StatusOr<v1::Checkpoint> InProcessPeers::Restore(
    const std::string& cluster, const v1::RestoreCheckpointRequest& request,
    const std::function<void(const common::v1::Operation&)>& progress) {
  auto it = by_cluster_.find(cluster);
  if (it == by_cluster_.end()) return absl::NotFoundError("no checkpointer for " + cluster);
  absl::StatusOr<common::v1::Operation> op = it->second->RestoreCheckpoint(request);
  if (!op.ok()) return op.status();
  while (!op->done()) {
    progress(*op);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    op = it->second->GetOperation(op->id());
    if (!op.ok()) return op.status();
  }
  if (op->has_error()) return StatusFromError(op->error());
  v1::Checkpoint restored;
  op->result().UnpackTo(&restored);
  return restored;
}

}  // namespace codeco::checkpointer
