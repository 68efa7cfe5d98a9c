#pragma once
// A client of the OCI distribution API (distribution-spec v1.1) over
// libcurl: blobs pushed in bounded chunks (POST, PATCH…, PUT ?digest=) unless
// the registry has them already, manifests pushed by tag, and blobs and
// manifests pulled with their size and digest checked before anything is
// handed on. Works against any registry; Debian's docker-registry on
// loopback in the tests and in `codecoctl up`.
//
// Errors name the registry, the repository and the step, and carry the
// registry's own error codes: UNAVAILABLE when it cannot be reached or
// answers 5xx, NOT_FOUND for an unknown repository, tag or blob,
// PERMISSION_DENIED for 401/403, DATA_LOSS when content does not match its
// digest or size (a pulled file that does not match is removed).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "checkpointer/image/oci_image.h"

namespace codeco::checkpointer {

/// "registry/repository[:tag][@digest]", e.g. "127.0.0.1:5000/codeco/redis:ck-1".
struct ImageReference {
  /// Host and optional port of the registry.
  std::string registry;
  /// Repository path, lowercase components separated by "/".
  std::string repository;
  /// Tag (may be empty when digest is set).
  std::string tag;
  /// "sha256:…" (may be empty when tag is set).
  std::string digest;

  /// The reference as text (digest preferred over tag).
  std::string ToString() const;
  /// What a manifest URL names: the digest if set, else the tag.
  const std::string& ManifestName() const { return digest.empty() ? tag : digest; }
};

/// Parses `text`; INVALID_ARGUMENT naming `field` when the registry (a host
/// with a dot, a port or "localhost" is required: codeco never guesses
/// Docker Hub), the repository, the tag or the digest is malformed. A
/// repository alone (no tag, no digest) is accepted when `repository_only`.
absl::StatusOr<ImageReference> ParseImageReference(absl::string_view text, const std::string& field,
                                                   bool repository_only = false);

/// How the client talks to registries.
struct RegistryOptions {
  /// "https" (default) or "http" (loopback test registries only).
  std::string scheme = "https";
  /// CA bundle to verify the registry with (empty: the system's).
  std::string ca_file;
  /// Client certificate and key for registries that ask for one.
  std::string cert_file;
  /// Key of cert_file.
  std::string key_file;
  /// Per-request timeout. Default 60 s.
  absl::Duration timeout = absl::Seconds(60);
  /// Bytes sent per PATCH of a chunked upload. Default 8 MiB.
  int64_t chunk_bytes = int64_t{8} << 20;
  /// Largest manifest or config accepted on a pull. Default 4 MiB.
  int64_t max_document_bytes = int64_t{4} << 20;
};

/// OCI distribution client. Thread-compatible; one per thread or guarded.
class RegistryClient {
 public:
  /// A client with `options`; INVALID_ARGUMENT from Check() when they are bad.
  explicit RegistryClient(RegistryOptions options);

  /// OK when the options are usable (scheme, chunk size, timeout).
  absl::Status Check() const;

  /// Uploads the blob in `file` (whose descriptor is `blob`) to `repository`
  /// unless the registry holds it already; returns true when it uploaded.
  absl::StatusOr<bool> PushBlobFile(const ImageReference& repository,
                                    const std::filesystem::path& file, const Descriptor& blob);
  /// Uploads a small blob held in memory (a config) the same way.
  absl::StatusOr<bool> PushBlob(const ImageReference& repository, absl::string_view bytes,
                                const Descriptor& blob);
  /// Puts `manifest` under `reference.tag`; returns the digest the registry
  /// stored it under (checked against the manifest's own).
  absl::StatusOr<std::string> PushManifest(const ImageReference& reference,
                                           absl::string_view manifest);
  /// Gets the manifest `reference` names; with a digest, checks it.
  absl::StatusOr<std::string> PullManifest(const ImageReference& reference);
  /// Gets a small blob (a config) and checks its size and digest; one
  /// larger than max_document_bytes is refused.
  absl::StatusOr<std::string> PullBlob(const ImageReference& repository, const Descriptor& blob);
  /// Streams blob `blob` of `repository` to `sink` (false stops it),
  /// checking its size and digest once all of it arrived: a caller uses
  /// what it got only after an OK.
  absl::Status PullBlobTo(const ImageReference& repository, const Descriptor& blob,
                          const std::function<bool(absl::string_view)>& sink);
  /// Streams blob `blob` of `repository` into `out`, checking its size and
  /// digest; on any failure `out` is removed.
  absl::Status PullBlobToFile(const ImageReference& repository, const Descriptor& blob,
                              const std::filesystem::path& out);
  /// True when `repository` holds blob `digest`.
  absl::StatusOr<bool> HasBlob(const ImageReference& repository, const std::string& digest);
  /// Deletes the manifest with `digest` (the registry must allow deletes).
  absl::Status DeleteManifest(const ImageReference& repository, const std::string& digest);

 private:
  struct Response;
  // Uploads the chunks `read(offset, n)` returns (a view valid until the
  // next call); the common part of both pushes.
  template <typename Read>
  absl::StatusOr<bool> PushBlobFrom(const ImageReference& repository, const Descriptor& blob,
                                    Read read);

  std::string BaseUrl(const ImageReference& reference) const;

  RegistryOptions options_;
};

}  // namespace codeco::checkpointer
