#pragma once
// The checkpointer's ImageStore over the OCI distribution API. A state
// directory becomes uncompressed tar layers of about `layer_bytes` each (a
// larger file is split into parts, one per layer), a config and an
// annotated manifest; layers are pushed with chunked uploads one at a time,
// each published at once under the tag as an incomplete image, so a pull can
// follow the push layer by layer. Pulls check every digest and unpack
// safely (no links, no "..", a size cap), joining split files again.

#include <cstdint>
#include <filesystem>
#include <string>

#include "absl/time/time.h"
#include "checkpointer/core/ports.h"
#include "checkpointer/image/registry_client.h"

namespace codeco::checkpointer {

/// How a RegistryImageStore cuts, publishes and follows images.
struct ImageStoreOptions {
  /// Largest image a pull unpacks (summed over its layers): a bigger one is
  /// refused before it fills the disk. Default 8 GiB.
  int64_t max_state_bytes = int64_t{8} << 30;
  /// Most bytes of state per layer. A state is cut into about
  /// sqrt(state / 8 MB) layers (of at least 1 MiB): each layer costs a
  /// registry a few requests (about as long as moving 8 MB here), while
  /// more layers let the restore follow the push more closely. Default 64 MiB.
  int64_t layer_bytes = int64_t{64} << 20;
  /// How long a followed image may stay incomplete without growing before
  /// the pull gives up. Default 60 s.
  absl::Duration stall_timeout = absl::Seconds(60);
  /// How often an incomplete image's manifest is read again. Default 10 ms.
  absl::Duration poll_interval = absl::Milliseconds(10);
};

/// ImageStore on registries reached with one set of RegistryOptions.
/// Thread-safe (a client per call).
class RegistryImageStore final : public ImageStore {
 public:
  /// A store reaching registries with `registry`, cutting and following
  /// images as `options` say.
  RegistryImageStore(RegistryOptions registry, ImageStoreOptions options)
      : registry_(std::move(registry)), options_(options) {}

  absl::StatusOr<PushedImage> Push(StateDump& dump, const CheckpointMetadata& metadata,
                                   const std::string& reference,
                                   const std::function<void()>& published,
                                   const std::atomic<bool>& cancel) override;
  absl::StatusOr<CheckpointMetadata> Inspect(const std::string& reference) override;
  absl::StatusOr<PulledImage> Pull(const std::string& reference,
                                   const std::filesystem::path& directory,
                                   const StreamedFile& streamed) override;
  absl::Status Abandon(const std::string& reference) override;
  absl::Status Delete(const std::string& reference) override;

 private:
  RegistryOptions registry_;
  ImageStoreOptions options_;
};

}  // namespace codeco::checkpointer
