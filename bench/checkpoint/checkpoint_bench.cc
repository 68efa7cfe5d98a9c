// Stateful migration of a Redis through the registry, phase by phase (issue
// 12), against a plain copy of the same bytes through the same registry.
// For each state size it starts Debian's redis-server, fills it with 1 MiB
// random values up to the size, then times
//   checkpoint  fence writes (CLIENT PAUSE WRITE), SAVE, copy the RDB
//   build       the checkpoint layer (tar, sha256), config and manifest
//   push        layer and config blobs (chunked) and the manifest
//   pull        manifest by digest, then the layer, digest checked
//   restore     unpack, start redis-server on the RDB, wait until loaded,
//               check the key count
// and, for the baseline, pushes the RDB file alone as one blob to another
// repository and pulls it back (the same bytes over the same registry, no
// checkpoint, no image, no restore). Both go to Debian's docker-registry on
// loopback, storage in a scratch directory.
//
//   checkpoint_bench [--quick] [--sizes 10,50,100,200,500] [--keep DIR]
//
// --quick: 10 and 50 MB. Sizes in MB (10^6 bytes of values). Wall-clock
// time is read here (a benchmark, not the core).

#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "checkpointer/drivers/redis_hook.h"
#include "checkpointer/image/local_registry.h"
#include "checkpointer/image/oci_image.h"
#include "checkpointer/image/registry_client.h"
#include "codeco/common/ports.h"

namespace {

namespace fs = std::filesystem;
using namespace codeco::checkpointer;

[[noreturn]] void Die(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "checkpoint_bench: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::exit(1);
}

template <typename T>
T Must(absl::StatusOr<T> value, const std::string& what) {
  if (!value.ok()) Die(what, value.status());
  return *std::move(value);
}

void Must(const absl::Status& status, const std::string& what) {
  if (!status.ok()) Die(what, status);
}

double Seconds(absl::Time since) { return absl::ToDoubleSeconds(absl::Now() - since); }

struct Row {
  int megabytes = 0;
  int64_t rdb_bytes = 0;
  double checkpoint = 0, build = 0, push = 0, pull = 0, restore = 0, plain_push = 0,
         plain_pull = 0;
  double Total() const { return checkpoint + build + push + pull + restore; }
  double Plain() const { return plain_push + plain_pull; }
};

Row Measure(int megabytes, const fs::path& work, LocalRegistry& registry) {
  Row row{.megabytes = megabytes};
  const fs::path dir = work / absl::StrCat(megabytes, "MB");
  fs::create_directories(dir);
  RedisCheckpointHook hook({});
  const RedisInstance source{.port = Must(codeco::FreePort("127.0.0.1"), "a port")};
  std::unique_ptr<RedisServer> server = Must(
      RedisServer::Start("/usr/bin/redis-server", dir / "source", source, absl::Minutes(2)),
      "starting redis-server");
  {
    std::unique_ptr<RedisConnection> c =
        Must(RedisConnection::Connect(source.host, source.port, absl::Minutes(1)), "connecting");
    std::mt19937_64 rng(static_cast<uint64_t>(megabytes));
    std::string value(1'000'000, '\0');
    for (int i = 0; i < megabytes; ++i) {
      for (size_t k = 0; k + 8 <= value.size(); k += 8) {
        const uint64_t r = rng();
        std::memcpy(value.data() + k, &r, 8);
      }
      Must(c->Command({"SET", absl::StrCat("blob-", i), value}).status(), "filling redis");
    }
  }
  RegistryClient client(registry.ClientOptions());
  const ImageReference repository{.registry = registry.Address(), .repository = "bench/redis"};

  absl::Time t = absl::Now();
  RedisSnapshot snapshot = Must(hook.Checkpoint(source, dir / "checkpoint"), "checkpoint");
  row.checkpoint = Seconds(t);
  row.rdb_bytes = static_cast<int64_t>(fs::file_size(snapshot.rdb));

  t = absl::Now();
  Descriptor layer = Must(WriteLayer({{.name = "checkpoint/dump.rdb", .source = snapshot.rdb}},
                                     dir / "layer.tar", snapshot.fenced_at),
                          "building the layer");
  CheckpointImage image =
      Must(BuildCheckpointImage(layer, CheckpointMetadata{.container = "redis",
                                                          .runtime = "redis-hook",
                                                          .created = snapshot.fenced_at}),
           "building the image");
  row.build = Seconds(t);

  t = absl::Now();
  ImageReference tagged = repository;
  tagged.tag = absl::StrCat("size-", megabytes);
  Must(client.PushBlobFile(tagged, dir / "layer.tar", image.layer), "pushing the layer");
  Must(client.PushBlob(tagged, image.config, image.config_descriptor), "pushing the config");
  const std::string digest = Must(client.PushManifest(tagged, image.manifest), "pushing");
  row.push = Seconds(t);

  t = absl::Now();
  ImageReference pinned = repository;
  pinned.digest = digest;
  ParsedManifest manifest =
      Must(ParseManifest(Must(client.PullManifest(pinned), "pulling the manifest")), "manifest");
  Must(client.PullBlobToFile(repository, manifest.layers[0], dir / "pulled.tar"),
       "pulling the layer");
  row.pull = Seconds(t);

  t = absl::Now();
  Must(ExtractLayer(dir / "pulled.tar", dir / "unpacked", int64_t{1} << 40).status(), "unpacking");
  const RedisInstance target{.port = Must(codeco::FreePort("127.0.0.1"), "a port")};
  std::unique_ptr<RedisServer> restored = Must(
      hook.Restore(dir / "unpacked/checkpoint/dump.rdb", dir / "restored", target, snapshot.keys),
      "restoring");
  row.restore = Seconds(t);
  Must(hook.Retire(source), "retiring the source");

  // The baseline: the RDB's bytes as one blob, pushed and pulled.
  const FileDigest raw = Must(DigestFile(snapshot.rdb), "digesting the RDB");
  const Descriptor blob{.media_type = "application/octet-stream", .digest = raw.digest,
                        .size = raw.size};
  const ImageReference plain{.registry = registry.Address(), .repository = "bench/plain"};
  t = absl::Now();
  Must(client.PushBlobFile(plain, snapshot.rdb, blob), "plain push");
  row.plain_push = Seconds(t);
  t = absl::Now();
  Must(client.PullBlobToFile(plain, blob, dir / "plain.rdb"), "plain pull");
  row.plain_pull = Seconds(t);
  fs::remove_all(dir);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {10, 50, 100, 200, 500};
  std::string keep;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      sizes = {10, 50};
    } else if (arg == "--sizes" && i + 1 < argc) {
      sizes.clear();
      for (absl::string_view s : absl::StrSplit(argv[++i], ',')) {
        int mb = 0;
        if (!absl::SimpleAtoi(s, &mb) || mb <= 0 || mb > 100'000) {
          std::fprintf(stderr, "checkpoint_bench: --sizes: \"%s\" is not a size in MB\n",
                       std::string(s).c_str());
          return 2;
        }
        sizes.push_back(mb);
      }
    } else if (arg == "--keep" && i + 1 < argc) {
      keep = argv[++i];
    } else {
      std::fprintf(stderr, "usage: checkpoint_bench [--quick] [--sizes 10,50,...] [--keep DIR]\n");
      return 2;
    }
  }
  const fs::path work = keep.empty() ? fs::temp_directory_path() /
                                           absl::StrCat("codeco-checkpoint-bench-", getpid())
                                     : fs::path(keep);
  std::unique_ptr<LocalRegistry> registry =
      Must(LocalRegistry::Start({.directory = work / "registry"}), "starting docker-registry");
  std::printf("Redis through docker-registry on loopback; seconds per phase\n");
  std::printf("%6s %8s %10s %7s %7s %7s %8s %7s %11s %7s\n", "state", "rdb MB", "checkpoint",
              "build", "push", "pull", "restore", "total", "plain copy", "ratio");
  for (int mb : sizes) {
    Row r = Measure(mb, work, *registry);
    std::printf("%4dMB %8.1f %10.2f %7.2f %7.2f %7.2f %8.2f %7.2f %11.2f %6.2fx\n", r.megabytes,
                static_cast<double>(r.rdb_bytes) / 1e6, r.checkpoint, r.build, r.push, r.pull,
                r.restore, r.Total(), r.Plain(), r.Total() / r.Plain());
    std::fflush(stdout);
  }
  registry->Stop();
  if (keep.empty()) fs::remove_all(work);
  return 0;
}
