#pragma once
// Checkpoint archives as real files, so that the checkpointer can build an
// OCI image from what CheckpointContainer returns (checkpoint -> image ->
// push -> pull -> restore). Each archive is a tar holding one member,
// "codef-checkpoint.json", with the container's state and run time. A restore
// accepts any path to such a tar (e.g. one extracted from a pulled image), the
// paths this store wrote, and the image references it registered.

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "emulated_cluster.h"

namespace codeco::codef {

/// A CheckpointArchiveStore writing tar files under a directory. Thread-safe.
class FileCheckpointArchiveStore final : public CheckpointArchiveStore {
 public:
  /// Writes archives under `<dir>/checkpoints/<cluster>/`.
  explicit FileCheckpointArchiveStore(std::string dir) : dir_(std::move(dir)) {}
  absl::StatusOr<std::string> Put(const ContainerCheckpoint& checkpoint) override;
  absl::StatusOr<ContainerCheckpoint> Get(const std::string& key) const override;

 private:
  std::string dir_;
  mutable absl::Mutex mu_;
  // Image reference -> archive path.
  std::map<std::string, std::string> images_ ABSL_GUARDED_BY(mu_);
};

/// The bytes of a one-member tar archive holding `checkpoint` as JSON.
std::string EncodeCheckpointArchive(const ContainerCheckpoint& checkpoint);
/// Reads an archive made by EncodeCheckpointArchive; INVALID_ARGUMENT when
/// `bytes` is not one.
absl::StatusOr<ContainerCheckpoint> DecodeCheckpointArchive(const std::string& bytes);

}  // namespace codeco::codef
