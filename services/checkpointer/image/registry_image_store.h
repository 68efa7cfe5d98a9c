#pragma once
// The checkpointer's ImageStore over the OCI distribution API: a state
// directory becomes one uncompressed tar layer with a config and an
// annotated manifest, pushed with chunked uploads and pulled with every
// digest checked, then unpacked safely (no links, no "..", a size cap).

#include <cstdint>
#include <filesystem>
#include <string>

#include "checkpointer/core/ports.h"
#include "checkpointer/image/registry_client.h"

namespace codeco::checkpointer {

/// ImageStore on registries reached with one set of RegistryOptions.
/// Thread-safe (a client per call).
class RegistryImageStore final : public ImageStore {
 public:
  /// Images are unpacked up to `max_layer_bytes` (a bigger layer is refused
  /// before it fills the disk).
  RegistryImageStore(RegistryOptions options, int64_t max_layer_bytes)
      : options_(std::move(options)), max_layer_bytes_(max_layer_bytes) {}

  absl::StatusOr<BuiltImage> Build(const std::filesystem::path& state_directory,
                                   const CheckpointMetadata& metadata,
                                   const std::filesystem::path& layer_file) override;
  absl::StatusOr<std::string> Push(const BuiltImage& image, const std::string& reference) override;
  absl::StatusOr<PulledImage> Pull(const std::string& reference,
                                   const std::filesystem::path& directory) override;
  absl::Status Delete(const std::string& reference) override;

 private:
  RegistryOptions options_;
  int64_t max_layer_bytes_;
};

}  // namespace codeco::checkpointer
