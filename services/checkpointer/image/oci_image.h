#pragma once
// A container checkpoint packed as an OCI image (image-spec v1.1), the way
// CRI-O and the kubelet expect one: a single uncompressed tar layer holding
// the checkpoint's files, an image config, and a manifest annotated with
// io.kubernetes.cri-o.annotations.checkpoint.* so that a runtime recognises
// it as a checkpoint to restore rather than an image to run.
//
// Everything streams: a layer is written to and read from disk in bounded
// chunks while its sha256 is computed, so 500 MB of state costs a buffer,
// not 500 MB of memory. Reading a layer refuses what could escape the target
// directory (absolute paths, "..", links) and what it does not know.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <istream>
#include <map>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace codeco::checkpointer {

/// Media types of the image-spec.
inline constexpr char kManifestMediaType[] = "application/vnd.oci.image.manifest.v1+json";
inline constexpr char kConfigMediaType[] = "application/vnd.oci.image.config.v1+json";
inline constexpr char kLayerMediaType[] = "application/vnd.oci.image.layer.v1.tar";

/// The annotation that marks an image as a checkpoint: the container's name.
inline constexpr char kCheckpointNameAnnotation[] =
    "io.kubernetes.cri-o.annotations.checkpoint.name";

/// Annotations codeco puts on a checkpoint image's manifest about the image
/// itself (never taken for facts): their common prefix.
inline constexpr char kImageAnnotationPrefix[] = "org.codeco.image.";
/// "true" on the manifest of an image still being pushed: its layers so
/// far, published so that a restore can pull while the push goes on; the
/// complete manifest replaces it under the same tag.
inline constexpr char kIncompleteAnnotation[] = "org.codeco.image.incomplete";
/// "true" on the manifest of an image whose push was given up: a restore
/// following it stops.
inline constexpr char kAbandonedAnnotation[] = "org.codeco.image.abandoned";
/// Files split across layers, comma-separated: file F travels as entries
/// "F.part-00000", "F.part-00001", … one per layer, joined again on a pull.
inline constexpr char kSplitFilesAnnotation[] = "org.codeco.image.split";
/// The entry name of part `index` of a split file.
std::string PartName(const std::string& file, int index);

/// Streaming sha256 in the OCI digest form ("sha256:<64 hex>").
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  /// Hashes `bytes` more.
  void Update(absl::string_view bytes);
  /// The digest of everything hashed; the hasher is spent afterwards.
  std::string Finish();

 private:
  void* context_;  // EVP_MD_CTX, kept out of the header
};

/// The digest of `bytes` ("sha256:…").
std::string DigestOf(absl::string_view bytes);

/// The digest and size of the file at `path`, read in chunks.
struct FileDigest {
  /// "sha256:…".
  std::string digest;
  /// Bytes.
  int64_t size = 0;
};
/// Reads `path` through and digests it; NOT_FOUND when it does not exist.
absl::StatusOr<FileDigest> DigestFile(const std::filesystem::path& path);

/// True when `digest` has the form "sha256:<64 lowercase hex>".
bool IsSha256Digest(absl::string_view digest);

/// An OCI content descriptor.
struct Descriptor {
  /// Media type of the content.
  std::string media_type;
  /// "sha256:…".
  std::string digest;
  /// Bytes.
  int64_t size = 0;
};

/// One file of a checkpoint: where it is in the layer and where its bytes
/// come from.
struct LayerEntry {
  /// Relative path inside the layer ("checkpoint/dump.rdb"); no "..", not absolute.
  std::string name;
  /// The file whose contents go in.
  std::filesystem::path source;
  /// Permission bits. Default 0644.
  uint32_t mode = 0644;
  /// Where in `source` the entry's bytes start (a part of a split file).
  int64_t offset = 0;
  /// How many bytes of `source` go in from `offset`; -1: up to its end.
  int64_t length = -1;
  /// When set, the entry's bytes, held in memory (`source` is not read).
  const std::string* contents = nullptr;
};

/// Writes `entries` as an uncompressed POSIX (ustar) tar to `out`, digesting
/// it on the way; INVALID_ARGUMENT naming the entry for a bad name or a
/// source that cannot be read. `modified` is every entry's mtime, so the same
/// files at the same time give the same digest.
absl::StatusOr<Descriptor> WriteLayer(const std::vector<LayerEntry>& entries,
                                      const std::filesystem::path& out, absl::Time modified);

/// Writes `entries` as WriteLayer does, handing the bytes to `sink` in
/// order instead of a file (false from the sink stops with an error).
absl::StatusOr<Descriptor> WriteLayerTo(const std::vector<LayerEntry>& entries,
                                        absl::Time modified,
                                        const std::function<bool(absl::string_view)>& sink);

/// What ReadLayer calls for the entries of a layer, in order.
struct LayerVisitor {
  /// A directory entry (may be left unset).
  std::function<absl::Status(const std::string& name)> directory;
  /// A regular file begins: its name, size and permission bits.
  std::function<absl::Status(const std::string& name, int64_t size, uint32_t mode)> file;
  /// The next bytes of the file begun last.
  std::function<absl::Status(absl::string_view bytes)> data;
  /// The file begun last is complete.
  std::function<absl::Status()> end;
};

/// Reads a tar layer from `in` and calls `visit` for each entry, with the
/// checks ExtractLayer makes (DATA_LOSS naming the entry for an unsafe
/// name, a link or device, a bad header or a truncated archive;
/// RESOURCE_EXHAUSTED past `max_bytes`). An error from `visit` stops it.
absl::Status ReadLayer(std::istream& in, int64_t max_bytes, const LayerVisitor& visit);

/// Unpacks the tar layer at `layer` into `directory` (created if missing)
/// and returns the relative names of the files it wrote. Only regular files
/// and directories are accepted; absolute names, "..", links and devices are
/// refused with DATA_LOSS naming the entry, as is a truncated archive. A
/// layer larger than `max_bytes` in total is refused before it fills the disk.
absl::StatusOr<std::vector<std::string>> ExtractLayer(const std::filesystem::path& layer,
                                                      const std::filesystem::path& directory,
                                                      int64_t max_bytes);

/// What a checkpoint image says about the container it came from.
struct CheckpointMetadata {
  /// Container name (the checkpoint.name annotation). Required.
  std::string container;
  /// Pod name.
  std::string pod;
  /// Namespace of the pod.
  std::string pod_namespace;
  /// Image the container ran from (checkpoint.rootfsImageName).
  std::string rootfs_image;
  /// The runtime that took the checkpoint (checkpoint.runtime.name), e.g. "redis-hook".
  std::string runtime;
  /// The checkpointing engine (checkpoint.engine), e.g. "codeco".
  std::string engine = "codeco";
  /// When it was taken.
  absl::Time created = absl::UnixEpoch();
  /// What the driver recorded for the restore to check (key count, digest),
  /// carried as manifest annotations under their own names; a name in the
  /// CRI-O checkpoint namespace is refused.
  std::map<std::string, std::string> facts;
};

/// A built image: what to push, in order (layer and config blobs, then the manifest).
struct CheckpointImage {
  /// The layers, in order.
  std::vector<Descriptor> layers;
  /// The config blob.
  std::string config;
  /// Its descriptor.
  Descriptor config_descriptor;
  /// The manifest, canonical JSON.
  std::string manifest;
  /// Its digest: what a pull by digest names.
  std::string manifest_digest;
};

/// The config and manifest of an image of `layers` (in order, at least one),
/// with `image_annotations` (names under kImageAnnotationPrefix) beside
/// the checkpoint's; INVALID_ARGUMENT naming the field when
/// `metadata.container` is empty or a name is out of place.
absl::StatusOr<CheckpointImage> BuildCheckpointImage(
    const std::vector<Descriptor>& layers, const CheckpointMetadata& metadata,
    const std::map<std::string, std::string>& image_annotations = {});

/// A manifest read back: its layers and annotations.
struct ParsedManifest {
  /// The config blob.
  Descriptor config;
  /// The layers, in order.
  std::vector<Descriptor> layers;
  /// The manifest's annotations.
  std::map<std::string, std::string> annotations;
};

/// Parses and checks an image manifest (schemaVersion 2, OCI media type, a
/// sha256 digest and a size on every descriptor); INVALID_ARGUMENT naming
/// the field otherwise.
absl::StatusOr<ParsedManifest> ParseManifest(absl::string_view json);

/// The checkpoint metadata of a parsed manifest; FAILED_PRECONDITION when it
/// is not a checkpoint image (no checkpoint.name annotation).
absl::StatusOr<CheckpointMetadata> CheckpointMetadataOf(const ParsedManifest& manifest);

}  // namespace codeco::checkpointer
