#pragma once
// What the checkpointer's core talks to, besides its StateDrivers: the
// cluster's LMS (pods), a registry (checkpoint images) and the checkpointers
// of other clusters (the restore half of a migration). server/ and image/
// implement them over gRPC and the OCI distribution API; tests may use the
// real ones on loopback.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "checkpointer/core/state_driver.h"
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
  /// Creates `pod` (bound to its node) with its containers started empty
  /// and returns it (idempotent by request_id); a restore then streams the
  /// state in (StateDriver::RestoreInto).
  virtual absl::StatusOr<lms::v1::Pod> CreatePod(const lms::v1::Pod& pod,
                                                 const std::string& request_id) = 0;
  /// Deletes a pod; OK when it is already gone.
  virtual absl::Status DeletePod(const std::string& name) = 0;
};

/// What a push published.
struct PushedImage {
  /// Digest of the complete image's manifest: what a pull by digest names.
  std::string manifest_digest;
  /// Bytes of the layers, the config and the manifest.
  int64_t size_bytes = 0;
  /// Layers the state was cut into.
  int layers = 0;
  /// Bytes of state packed (the streamed file's as read).
  int64_t state_bytes = 0;
  /// Time spent writing layers (tar and sha256).
  absl::Duration build_time;
  /// Time spent uploading them and the manifests.
  absl::Duration push_time;
};

/// A checkpoint image pulled and unpacked.
struct PulledImage {
  /// What the manifest says (container, pod, driver, facts).
  CheckpointMetadata metadata;
  /// Where its files were unpacked (split files joined; the streamed file
  /// is not there).
  std::filesystem::path directory;
  /// Layer bytes.
  int64_t layer_bytes = 0;
};

/// Where a pull sends the one file a restore reads while it arrives.
struct StreamedFile {
  /// The file's path in the image ("dump.rdb"); empty: nothing is streamed.
  std::string name;
  /// Called with its bytes in order; an error stops the pull with it.
  std::function<absl::Status(absl::string_view)> write;
};

/// Checkpoint images in registries.
class ImageStore {
 public:
  virtual ~ImageStore() = default;
  /// Packs the dump into layers and pushes the image as `reference`
  /// ("registry/repository:tag") one layer at a time: every regular file
  /// under `dump.directory` (a large one split across several layers, joined
  /// again on a pull), then the streamed file, if any, cut into parts as its
  /// bytes arrive (so the push overlaps taking the state). While layers
  /// follow, each pushed one is published at once — the tag names a
  /// manifest of the layers so far marked incomplete (kIncompleteAnnotation)
  /// — and `published` is called, so a restore can pull while the push goes
  /// on. Layers are built in memory, each of a size the store bounds. Gives
  /// up with CANCELLED once `cancel` is true; a push given up after
  /// publishing marks the tag abandoned where the registry answers.
  virtual absl::StatusOr<PushedImage> Push(StateDump& dump, const CheckpointMetadata& metadata,
                                           const std::string& reference,
                                           const std::function<void()>& published,
                                           const std::atomic<bool>& cancel) = 0;
  /// What the image `reference` names says about its checkpoint (from its
  /// manifest alone; an incomplete image's too).
  virtual absl::StatusOr<CheckpointMetadata> Inspect(const std::string& reference) = 0;
  /// Pulls `reference` (a tag or a digest), checks every digest and unpacks
  /// its files into `directory` (created), except `streamed`, which goes to
  /// its writer as it arrives. An incomplete image is followed until its
  /// push completes; it fails when the push was abandoned or the image
  /// stops growing for the store's stall timeout. Nothing is left in
  /// `directory` on failure.
  virtual absl::StatusOr<PulledImage> Pull(const std::string& reference,
                                           const std::filesystem::path& directory,
                                           const StreamedFile& streamed) = 0;
  /// Marks the incomplete image under tag `reference` abandoned (its push
  /// will not finish), so that a restore following it stops; OK when the
  /// tag names a complete image or nothing.
  virtual absl::Status Abandon(const std::string& reference) = 0;
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
