// RegistryClient against a real registry: Debian's docker-registry on
// loopback, started per test case with its storage in a scratch directory.
#include "checkpointer/image/registry_client.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "checkpointer/tests/test_registry.h"

namespace codeco::checkpointer {
namespace {

namespace fs = std::filesystem;
using testing::Registry;

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A checkpoint image of `bytes` of state, built in `dir`.
struct Built {
  CheckpointImage image;
  fs::path layer_file;
  std::string state;
};

Built BuildImage(const fs::path& dir, size_t bytes) {
  Built b;
  b.state.resize(bytes);
  std::mt19937 rng(static_cast<unsigned>(bytes));
  for (char& c : b.state) c = static_cast<char>(rng());
  std::ofstream(dir / "dump.rdb", std::ios::binary) << b.state;
  b.layer_file = dir / "layer.tar";
  absl::StatusOr<Descriptor> layer =
      WriteLayer({{.name = "checkpoint/dump.rdb", .source = dir / "dump.rdb"}}, b.layer_file,
                 absl::FromUnixSeconds(1'790'000'000));
  REQUIRE(layer.ok());
  absl::StatusOr<CheckpointImage> image =
      BuildCheckpointImage({*layer}, CheckpointMetadata{.container = "redis", .pod = "cache-0"});
  REQUIRE(image.ok());
  b.image = *image;
  return b;
}

// Pushes `b` as `reference` (blobs, then the manifest); the manifest digest.
std::string Push(RegistryClient& client, const ImageReference& reference, const Built& b) {
  absl::StatusOr<bool> layer = client.PushBlobFile(reference, b.layer_file, b.image.layers[0]);
  INFO(layer.status());
  REQUIRE(layer.ok());
  absl::StatusOr<bool> config =
      client.PushBlob(reference, b.image.config, b.image.config_descriptor);
  INFO(config.status());
  REQUIRE(config.ok());
  absl::StatusOr<std::string> digest = client.PushManifest(reference, b.image.manifest);
  INFO(digest.status());
  REQUIRE(digest.ok());
  return *digest;
}

TEST_CASE("image references are parsed strictly and errors name the field") {
  absl::StatusOr<ImageReference> ok =
      ParseImageReference("127.0.0.1:5000/codeco/redis:ck-1", "image");
  REQUIRE(ok.ok());
  CHECK(ok->registry == "127.0.0.1:5000");
  CHECK(ok->repository == "codeco/redis");
  CHECK(ok->tag == "ck-1");
  const std::string digest = DigestOf("m");
  absl::StatusOr<ImageReference> by_digest =
      ParseImageReference("registry.example.org/a/b@" + digest, "image");
  REQUIRE(by_digest.ok());
  CHECK(by_digest->digest == digest);
  CHECK(by_digest->ToString() == "registry.example.org/a/b@" + digest);
  CHECK(ParseImageReference("localhost/x", "repo", /*repository_only=*/true).ok());
  for (const std::string bad :
       {"", "redis", "redis:7", "library/redis:7", "127.0.0.1:5000/Upper:1",
        "127.0.0.1:5000/a//b:1", "127.0.0.1:5000/a:bad tag", "127.0.0.1:5000/a@sha256:12",
        "127.0.0.1:5000/a", "127.0.0.1:5000/-a:1"}) {
    absl::StatusOr<ImageReference> r = ParseImageReference(bad, "spec.image");
    INFO(bad);
    REQUIRE(absl::IsInvalidArgument(r.status()));
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("spec.image"));
  }
}

TEST_CASE("an image pushed in chunks pulls back byte for byte with its digests checked") {
  Registry registry;
  RegistryOptions options = registry.Options();
  options.chunk_bytes = 64 * 1024;  // many PATCHes for the 1 MB layer
  RegistryClient client(options);
  REQUIRE(client.Check().ok());
  Built b = BuildImage(registry.dir, 1 << 20);
  ImageReference ref{.registry = registry.Address(), .repository = "codeco/redis", .tag = "ck-1"};
  const std::string digest = Push(client, ref, b);
  CHECK(digest == b.image.manifest_digest);
  // Pushing again uploads nothing: the registry has the blobs.
  absl::StatusOr<bool> again = client.PushBlobFile(ref, b.layer_file, b.image.layers[0]);
  REQUIRE(again.ok());
  CHECK_FALSE(*again);

  ImageReference pinned = ref;
  pinned.tag.clear();
  pinned.digest = digest;
  absl::StatusOr<std::string> manifest = client.PullManifest(pinned);
  REQUIRE(manifest.ok());
  absl::StatusOr<ParsedManifest> parsed = ParseManifest(*manifest);
  REQUIRE(parsed.ok());
  CHECK(CheckpointMetadataOf(*parsed)->container == "redis");
  absl::StatusOr<std::string> config = client.PullBlob(ref, parsed->config);
  REQUIRE(config.ok());
  CHECK(*config == b.image.config);
  const fs::path pulled = registry.dir / "pulled.tar";
  REQUIRE(client.PullBlobToFile(ref, parsed->layers[0], pulled).ok());
  REQUIRE(ExtractLayer(pulled, registry.dir / "restored", int64_t{1} << 30).ok());
  CHECK(Read(registry.dir / "restored/checkpoint/dump.rdb") == b.state);
  // By tag too.
  CHECK(client.PullManifest(ref).ok());
  CHECK(client.DeleteManifest(ref, digest).ok());
  CHECK(absl::IsNotFound(client.PullManifest(pinned).status()));
}

TEST_CASE("a corrupted layer or an unknown image or a registry that is down fails clearly") {
  Registry registry;
  RegistryClient client(registry.Options());
  Built b = BuildImage(registry.dir, 200'000);
  ImageReference ref{.registry = registry.Address(), .repository = "codeco/redis", .tag = "ck-2"};
  Push(client, ref, b);

  SECTION("a layer changed in the registry's storage") {
    const fs::path stored = registry.BlobFile(b.image.layers[0].digest);
    REQUIRE(fs::exists(stored));
    std::string bytes = Read(stored);
    bytes[bytes.size() / 2] ^= 0x40;
    std::ofstream(stored, std::ios::binary | std::ios::trunc) << bytes;
    const fs::path out = registry.dir / "pulled.tar";
    absl::Status st = client.PullBlobToFile(ref, b.image.layers[0], out);
    REQUIRE(absl::IsDataLoss(st));
    CHECK_THAT(std::string(st.message()), Catch::Contains(b.image.layers[0].digest));
    CHECK_FALSE(fs::exists(out));  // nothing half-pulled is left
  }
  SECTION("an unknown tag and an unknown repository") {
    ImageReference missing = ref;
    missing.tag = "nope";
    absl::Status st = client.PullManifest(missing).status();
    REQUIRE(absl::IsNotFound(st));
    CHECK_THAT(std::string(st.message()), Catch::Contains("MANIFEST_UNKNOWN"));
    ImageReference other{.registry = registry.Address(), .repository = "x/y", .tag = "1"};
    CHECK(absl::IsNotFound(client.PullManifest(other).status()));
  }
  SECTION("the registry down") {
    registry.Stop();
    absl::Status st = client.PullManifest(ref).status();
    REQUIRE(absl::IsUnavailable(st));
    CHECK_THAT(std::string(st.message()), Catch::Contains(registry.Address()));
    absl::StatusOr<bool> push = client.PushBlobFile(ref, b.layer_file, b.image.layers[0]);
    CHECK(absl::IsUnavailable(push.status()));
  }
  SECTION("a descriptor that lies about the size") {
    Descriptor lying = b.image.layers[0];
    lying.size -= 1;
    const fs::path out = registry.dir / "short.tar";
    CHECK(absl::IsDataLoss(client.PullBlobToFile(ref, lying, out)));
    CHECK_FALSE(fs::exists(out));
  }
}

}  // namespace
}  // namespace codeco::checkpointer
