#include "checkpointer/image/registry_image_store.h"

#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"

namespace codeco::checkpointer {

namespace fs = std::filesystem;

absl::StatusOr<BuiltImage> RegistryImageStore::Build(const fs::path& state_directory,
                                                     const CheckpointMetadata& metadata,
                                                     const fs::path& layer_file) {
  std::vector<LayerEntry> entries;
  std::error_code error;
  for (fs::recursive_directory_iterator it(state_directory, error), end; !error && it != end;
       it.increment(error)) {
    if (!it->is_regular_file(error)) continue;
    entries.push_back(LayerEntry{.name = fs::relative(it->path(), state_directory).string(),
                                 .source = it->path()});
  }
  if (error) {
    return absl::InternalError(absl::StrCat("reading ", state_directory.string(), ": ",
                                            error.message()));
  }
  if (entries.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the driver wrote no file under ", state_directory.string()));
  }
  std::sort(entries.begin(), entries.end(),
            [](const LayerEntry& a, const LayerEntry& b) { return a.name < b.name; });
  ASSIGN_OR_RETURN(Descriptor layer, WriteLayer(entries, layer_file, metadata.created));
  ASSIGN_OR_RETURN(CheckpointImage image, BuildCheckpointImage(layer, metadata));
  return BuiltImage{.image = std::move(image), .layer_file = layer_file};
}

absl::StatusOr<std::string> RegistryImageStore::Push(const BuiltImage& built,
                                                     const std::string& reference) {
  ASSIGN_OR_RETURN(ImageReference tagged, ParseImageReference(reference, "target_repository"));
  RegistryClient client(options_);
  RETURN_IF_ERROR(client.Check());
  RETURN_IF_ERROR(client.PushBlobFile(tagged, built.layer_file, built.image.layer).status());
  RETURN_IF_ERROR(
      client.PushBlob(tagged, built.image.config, built.image.config_descriptor).status());
  return client.PushManifest(tagged, built.image.manifest);
}

absl::StatusOr<PulledImage> RegistryImageStore::Pull(const std::string& reference,
                                                     const fs::path& directory) {
  ASSIGN_OR_RETURN(ImageReference named, ParseImageReference(reference, "image_reference"));
  RegistryClient client(options_);
  RETURN_IF_ERROR(client.Check());
  ASSIGN_OR_RETURN(std::string manifest_text, client.PullManifest(named));
  ASSIGN_OR_RETURN(ParsedManifest manifest, ParseManifest(manifest_text));
  ASSIGN_OR_RETURN(CheckpointMetadata metadata, CheckpointMetadataOf(manifest));
  if (manifest.layers.size() != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a checkpoint image has one layer; ", reference, " has ", manifest.layers.size()));
  }
  const Descriptor& layer = manifest.layers[0];
  if (layer.size > max_layer_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat("the layer of ", reference, " is ",
                                                     layer.size, " bytes, over the limit of ",
                                                     max_layer_bytes_));
  }
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) {
    return absl::InternalError(absl::StrCat("creating ", directory.string(), ": ",
                                            error.message()));
  }
  const fs::path layer_file = directory / "layer.tar";
  const fs::path unpacked = directory / "state";
  auto fail = [&](absl::Status status) {
    fs::remove_all(directory, error);
    return status;
  };
  if (absl::Status s = client.PullBlobToFile(named, layer, layer_file); !s.ok()) return fail(s);
  absl::StatusOr<std::vector<std::string>> files =
      ExtractLayer(layer_file, unpacked, max_layer_bytes_);
  if (!files.ok()) return fail(files.status());
  fs::remove(layer_file, error);
  return PulledImage{.metadata = std::move(metadata), .directory = unpacked,
                     .layer_bytes = layer.size};
}

absl::Status RegistryImageStore::Delete(const std::string& reference) {
  ASSIGN_OR_RETURN(ImageReference named, ParseImageReference(reference, "image_reference"));
  RegistryClient client(options_);
  RETURN_IF_ERROR(client.Check());
  std::string digest = named.digest;
  if (digest.empty()) {
    absl::StatusOr<std::string> manifest = client.PullManifest(named);
    if (absl::IsNotFound(manifest.status())) return absl::OkStatus();
    RETURN_IF_ERROR(manifest.status());
    digest = DigestOf(*manifest);
  }
  absl::Status deleted = client.DeleteManifest(named, digest);
  return absl::IsNotFound(deleted) ? absl::OkStatus() : deleted;
}

}  // namespace codeco::checkpointer
