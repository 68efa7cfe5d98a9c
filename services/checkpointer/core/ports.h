#pragma once
// What the checkpointer's core talks to, besides its StateDrivers: the
// cluster's LMS (pods), a registry (checkpoint images) and the checkpointers
// of other clusters (the restore half of a migration). server/ and image/
// implement them over gRPC and the OCI distribution API; tests may use the
// real ones on loopback.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpointer/image/oci_image.h"
#include "codeco/checkpointer/v1/checkpointer_service.pb.h"
#include "codeco/lms/v1/lms_service.pb.h"

namespace codeco::checkpointer {

/// The serving cluster's local management system.
class LmsPort {
 public:
  virtual ~LmsPort() = default;
  /// One pod; NOT_FOUND when it does not exist.
  virtual absl::StatusOr<lms::v1::Pod> GetPod(const std::string& name) = 0;
  /// Creates the pod of `request` from its state and returns it once its
  /// container runs (idempotent by request_id).
  virtual absl::StatusOr<lms::v1::Pod> RestoreContainer(
      const lms::v1::RestoreContainerRequest& request) = 0;
  /// Deletes a pod; OK when it is already gone.
  virtual absl::Status DeletePod(const std::string& name) = 0;
};

/// A checkpoint image built on local disk, ready to push.
struct BuiltImage {
  /// The image (layer descriptor, config, manifest).
  CheckpointImage image;
  /// The layer tar it describes.
  std::filesystem::path layer_file;
};

/// A checkpoint image pulled and unpacked.
struct PulledImage {
  /// What the manifest says (container, pod, driver, facts).
  CheckpointMetadata metadata;
  /// Where the layer was unpacked.
  std::filesystem::path directory;
  /// Layer bytes.
  int64_t layer_bytes = 0;
};

/// Checkpoint images in registries.
class ImageStore {
 public:
  virtual ~ImageStore() = default;
  /// Packs every regular file under `state_directory` into a layer written to
  /// `layer_file` and builds the image around it.
  virtual absl::StatusOr<BuiltImage> Build(const std::filesystem::path& state_directory,
                                           const CheckpointMetadata& metadata,
                                           const std::filesystem::path& layer_file) = 0;
  /// Pushes `image` as `reference` ("registry/repository:tag"); returns the
  /// manifest's digest.
  virtual absl::StatusOr<std::string> Push(const BuiltImage& image,
                                           const std::string& reference) = 0;
  /// Pulls `reference` (a tag or a digest), checks every digest, and unpacks
  /// its layer into `directory` (created); nothing is left there on failure.
  virtual absl::StatusOr<PulledImage> Pull(const std::string& reference,
                                           const std::filesystem::path& directory) = 0;
  /// Deletes the image `reference` names (by digest); OK when already gone.
  virtual absl::Status Delete(const std::string& reference) = 0;
};

/// The checkpointers of other clusters.
class PeerCheckpointers {
 public:
  virtual ~PeerCheckpointers() = default;
  /// Starts `request` on `cluster`'s checkpointer and waits until its
  /// operation is done, calling `progress` with each state seen; returns the
  /// restored Checkpoint, or the operation's error. NOT_FOUND for a cluster
  /// with no known checkpointer.
  virtual absl::StatusOr<v1::Checkpoint> Restore(
      const std::string& cluster, const v1::RestoreCheckpointRequest& request,
      const std::function<void(const common::v1::Operation&)>& progress) = 0;
};

}  // namespace codeco::checkpointer
