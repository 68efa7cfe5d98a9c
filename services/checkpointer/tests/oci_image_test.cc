#include "checkpointer/image/oci_image.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>

#include "nlohmann/json.hpp"

#include "checkpointer/tests/test_registry.h"

namespace codeco::checkpointer {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::Scratch;

const absl::Time kWhen = absl::FromUnixSeconds(1'790'000'000);

TEST_CASE("sha256 digests match the published test vectors") {
  CHECK(DigestOf("") ==
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(DigestOf("abc") ==
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 streamed;
  streamed.Update("a");
  streamed.Update("bc");
  CHECK(streamed.Finish() == DigestOf("abc"));
  CHECK(IsSha256Digest(DigestOf("x")));
  CHECK_FALSE(IsSha256Digest("sha256:ABC"));
  CHECK_FALSE(IsSha256Digest("md5:" + std::string(64, 'a')));
}

TEST_CASE("a layer round-trips its files byte for byte and its digest is its file's") {
  Scratch scratch;
  std::string big(3 * 1024 * 1024 + 17, '\0');
  std::mt19937 rng(7);
  for (char& c : big) c = static_cast<char>(rng());
  const std::string long_dir(120, 'd');
  std::vector<LayerEntry> entries = {
      {.name = "checkpoint/dump.rdb", .source = scratch.Write("in/dump.rdb", big)},
      {.name = "checkpoint/empty", .source = scratch.Write("in/empty", "")},
      {.name = long_dir + "/appendonly.aof", .source = scratch.Write("in/aof", "SET k v\n"),
       .mode = 0600},
  };
  absl::StatusOr<Descriptor> layer = WriteLayer(entries, scratch.path / "layer.tar", kWhen);
  REQUIRE(layer.ok());
  CHECK(layer->media_type == kLayerMediaType);
  absl::StatusOr<FileDigest> file = DigestFile(scratch.path / "layer.tar");
  REQUIRE(file.ok());
  CHECK(file->digest == layer->digest);
  CHECK(file->size == layer->size);
  CHECK(layer->size % 512 == 0);
  // The same files at the same time: the same digest.
  absl::StatusOr<Descriptor> again = WriteLayer(entries, scratch.path / "again.tar", kWhen);
  REQUIRE(again.ok());
  CHECK(again->digest == layer->digest);

  absl::StatusOr<std::vector<std::string>> names =
      ExtractLayer(scratch.path / "layer.tar", scratch.path / "out", int64_t{1} << 30);
  REQUIRE(names.ok());
  CHECK(*names == std::vector<std::string>{"checkpoint/dump.rdb", "checkpoint/empty",
                                           long_dir + "/appendonly.aof"});
  CHECK(ReadFile(scratch.path / "out/checkpoint/dump.rdb") == big);
  CHECK(ReadFile(scratch.path / "out/checkpoint/empty").empty());
  CHECK(ReadFile(scratch.path / "out" / long_dir / "appendonly.aof") == "SET k v\n");
  CHECK((fs::status(scratch.path / "out" / long_dir / "appendonly.aof").permissions() &
         fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
}

TEST_CASE("a layer refuses entry names that could escape and says which") {
  Scratch scratch;
  const fs::path source = scratch.Write("f", "x");
  for (const std::string bad : {"/etc/passwd", "../up", "a/../../b", ""}) {
    absl::StatusOr<Descriptor> layer =
        WriteLayer({{.name = "ok", .source = source}, {.name = bad, .source = source}},
                   scratch.path / "l.tar", kWhen);
    INFO(bad);
    REQUIRE(absl::IsInvalidArgument(layer.status()));
    CHECK_THAT(std::string(layer.status().message()), Catch::Contains("entries[1].name"));
  }
  absl::StatusOr<Descriptor> missing =
      WriteLayer({{.name = "x", .source = scratch.path / "nope"}}, scratch.path / "l.tar", kWhen);
  REQUIRE(absl::IsInvalidArgument(missing.status()));
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("entries[0].source"));
  absl::StatusOr<Descriptor> too_long = WriteLayer(
      {{.name = std::string(300, 'n'), .source = source}}, scratch.path / "l.tar", kWhen);
  CHECK(absl::IsInvalidArgument(too_long.status()));
}

TEST_CASE("extracting a damaged or oversized layer leaves nothing behind") {
  Scratch scratch;
  std::vector<LayerEntry> entries = {{.name = "a", .source = scratch.Write("a", std::string(5000, 'a'))},
                                     {.name = "b", .source = scratch.Write("b", "bbb")}};
  REQUIRE(WriteLayer(entries, scratch.path / "l.tar", kWhen).ok());
  const std::string whole = ReadFile(scratch.path / "l.tar");

  SECTION("truncated") {
    std::ofstream(scratch.path / "cut.tar", std::ios::binary) << whole.substr(0, 3000);
    auto r = ExtractLayer(scratch.path / "cut.tar", scratch.path / "out", 1 << 20);
    REQUIRE(absl::IsDataLoss(r.status()));
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("\"a\""));
  }
  SECTION("a header bit flipped") {
    std::string bad = whole;
    bad[10] ^= 1;
    std::ofstream(scratch.path / "bad.tar", std::ios::binary) << bad;
    auto r = ExtractLayer(scratch.path / "bad.tar", scratch.path / "out", 1 << 20);
    REQUIRE(absl::IsDataLoss(r.status()));
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("checksum"));
  }
  SECTION("over the size limit") {
    auto r = ExtractLayer(scratch.path / "l.tar", scratch.path / "out", 4096);
    REQUIRE(absl::IsResourceExhausted(r.status()));
  }
  CHECK_FALSE(fs::exists(scratch.path / "out"));
}

TEST_CASE("a checkpoint image's manifest carries the CRI-O checkpoint annotations") {
  const Descriptor layer{.media_type = kLayerMediaType, .digest = DigestOf("layer"), .size = 5};
  CheckpointMetadata m{.container = "redis",
                       .pod = "cache-0",
                       .pod_namespace = "default",
                       .rootfs_image = "docker.io/library/redis:7",
                       .runtime = "redis-hook",
                       .created = kWhen};
  absl::StatusOr<CheckpointImage> image = BuildCheckpointImage({layer}, m);
  REQUIRE(image.ok());
  CHECK(image->manifest_digest == DigestOf(image->manifest));
  CHECK(image->config_descriptor.digest == DigestOf(image->config));
  nlohmann::json config = nlohmann::json::parse(image->config);
  CHECK(config["rootfs"]["diff_ids"][0] == layer.digest);

  absl::StatusOr<ParsedManifest> parsed = ParseManifest(image->manifest);
  REQUIRE(parsed.ok());
  REQUIRE(parsed->layers.size() == 1);
  CHECK(parsed->layers[0].digest == layer.digest);
  CHECK(parsed->config.digest == image->config_descriptor.digest);
  CHECK(parsed->annotations.at("io.kubernetes.cri-o.annotations.checkpoint.name") == "redis");
  CHECK(parsed->annotations.at("io.kubernetes.cri-o.annotations.checkpoint.pod") == "cache-0");
  absl::StatusOr<CheckpointMetadata> back = CheckpointMetadataOf(*parsed);
  REQUIRE(back.ok());
  CHECK(back->container == "redis");
  CHECK(back->pod_namespace == "default");
  CHECK(back->runtime == "redis-hook");
  CHECK(back->created == kWhen);

  CHECK(absl::IsInvalidArgument(BuildCheckpointImage({layer}, CheckpointMetadata{}).status()));
}

TEST_CASE("a manifest that is not a checkpoint image or is malformed is refused by field") {
  const std::string digest = DigestOf("x");
  auto manifest = [&](nlohmann::json patch) {
    nlohmann::json m = {
        {"schemaVersion", 2},
        {"mediaType", kManifestMediaType},
        {"config", {{"mediaType", kConfigMediaType}, {"digest", digest}, {"size", 1}}},
        {"layers", {{{"mediaType", kLayerMediaType}, {"digest", digest}, {"size", 1}}}}};
    m.merge_patch(patch);
    return m.dump();
  };
  auto plain = ParseManifest(manifest(nlohmann::json::object()));
  REQUIRE(plain.ok());
  CHECK(absl::IsFailedPrecondition(CheckpointMetadataOf(*plain).status()));
  struct Case {
    nlohmann::json patch;
    const char* field;
  };
  for (const Case& c : {Case{{{"schemaVersion", 1}}, "schemaVersion"},
                        Case{{{"layers", nlohmann::json::array()}}, "layers"},
                        Case{{{"config", {{"digest", "sha256:short"}}}}, "config.digest"},
                        Case{{{"config", {{"size", -1}}}}, "config.size"},
                        Case{{{"annotations", {{"k", 1}}}}, "annotations"}}) {
    auto r = ParseManifest(manifest(c.patch));
    INFO(c.patch.dump());
    REQUIRE(absl::IsInvalidArgument(r.status()));
    CHECK_THAT(std::string(r.status().message()), Catch::Contains(c.field));
  }
  CHECK(absl::IsInvalidArgument(ParseManifest("not json").status()));
  CHECK(absl::IsInvalidArgument(ParseManifest(std::string(10, '\0')).status()));
}

}  // namespace
}  // namespace codeco::checkpointer
