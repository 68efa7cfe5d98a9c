// Stateful migration of a Redis through the registry, phase by phase (issue
// 12), against a plain copy of the same bytes through the same registry.
// For each state size it starts Debian's redis-server as a pod of a
// loopback cluster "north", fills it with 1 MB random values up to the size,
// and migrates it with the checkpointer's core (the same code the service
// runs) to a second loopback cluster "south": fence and SAVE (checkpoint),
// tar layers of 16 MiB with their sha256 (build), chunked upload (push),
// and, as soon as the first layer is published, the restore at the target —
// pulling each layer while later ones are pushed and loading it into an
// empty redis-server that replicates from the checkpointer (pull, restore)
// — then the key count check (verify) and the source's retirement
// (cutover). Push, pull and restore overlap, so the total is less than
// their sum. The baseline pushes the same dataset's RDB (saved as the
// checkpoint saves it) as one blob to another repository and pulls it
// back. Both go to Debian's docker-registry on loopback.
//
//   checkpoint_bench [--quick] [--sizes 10,50,100,200,500] [--layer-mb N] [--keep DIR]
//
// --quick: 10 and 50 MB. --layer-mb: the most state per layer (default 64). Sizes in MB (10^6 bytes of values). Wall-clock
// time is read here (a benchmark, not the core).

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "checkpointer/core/checkpointer.h"
#include "checkpointer/drivers/redis_hook.h"
#include "checkpointer/image/local_registry.h"
#include "checkpointer/image/oci_image.h"
#include "checkpointer/image/registry_client.h"
#include "checkpointer/image/registry_image_store.h"
#include "checkpointer/testing/loopback_cluster.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"
#include "codeco/common/ports.h"

namespace {

namespace fs = std::filesystem;
using namespace codeco::checkpointer;
namespace lms = codeco::lms;
namespace common = codeco::common;

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
  int layers = 0;
  double checkpoint = 0, build = 0, push = 0, pull = 0, restore = 0, verify = 0, cutover = 0,
         total = 0, plain_push = 0, plain_pull = 0;
  double Plain() const { return plain_push + plain_pull; }
};

double Secs(int64_t nanos) { return static_cast<double>(nanos) / 1e9; }

// One loopback cluster: its pods, store and checkpointer.
struct Cluster {
  Cluster(const std::string& name, const fs::path& dir, ImageStore& images,
          PeerCheckpointers& peers, const std::string& repository)
      : lms(dir / name / "pods", int64_t{64} << 30),
        store(codeco::NewInMemoryKvStore({kCheckpointsFamily, kOperationsFamily})),
        checkpointer(CheckpointerOptions{.cluster = name,
                                         .work_directory = dir / name / "work",
                                         .default_repository = repository},
                     *store, codeco::RealClock::Default(), lms, images, peers, {&redis}) {}
  LoopbackLms lms;
  std::unique_ptr<codeco::KvStore> store;
  RedisHookDriver redis{RedisCheckpointHook::Options{}};
  Checkpointer checkpointer;
};

Row Measure(int megabytes, const fs::path& work, LocalRegistry& registry,
            const ImageStoreOptions& image_options) {
  Row row{.megabytes = megabytes};
  const fs::path dir = work / absl::StrCat(megabytes, "MB");
  fs::create_directories(dir);
  const std::string repository = registry.Address() + "/bench/redis";
  RegistryImageStore images(registry.ClientOptions(), image_options);
  InProcessPeers peers;
  Cluster north("north", dir, images, peers, repository);
  Cluster south("south", dir, images, peers, repository);
  peers.Add("north", &north.checkpointer);
  peers.Add("south", &south.checkpointer);
  const lms::v1::Pod pod = Must(north.lms.AddRedisPod("cache", "north-1"), "starting redis");
  const RedisInstance source = Must(
      ParseRedisEndpoint(pod.annotations().at(kEndpointAnnotation), "endpoint"), "endpoint");
  std::unique_ptr<RedisConnection> c =
      Must(RedisConnection::Connect(source.host, source.port, absl::Minutes(1)), "connecting");
  {
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

  // The baseline's bytes: the dataset's RDB saved as a checkpoint saves it (uncompressed).
  const std::string compression =
      Must(c->ArrayCommand({"CONFIG", "GET", "rdbcompression"}), "config").at(1);
  Must(c->Command({"CONFIG", "SET", "rdbcompression", "no"}).status(), "config");
  Must(c->Command({"SAVE"}).status(), "SAVE");
  Must(c->Command({"CONFIG", "SET", "rdbcompression", compression}).status(), "config");
  const fs::path rdb_dir = Must(c->ArrayCommand({"CONFIG", "GET", "dir"}), "config").at(1);
  const fs::path rdb = dir / "plain-source.rdb";
  fs::copy_file(rdb_dir / "dump.rdb", rdb);
  c.reset();

  v1::MigrateContainerRequest move;
  move.mutable_source()->set_pod("cache");
  move.set_target_cluster("south");
  move.set_target_node("south-1");
  common::v1::Operation op = Must(north.checkpointer.MigrateContainer(move), "migrating");
  while (!op.done()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    op = Must(north.checkpointer.GetOperation(op.id()), "following the migration");
  }
  if (op.has_error()) {
    Die("migrating", absl::Status(static_cast<absl::StatusCode>(op.error().code()),
                                  op.error().message()));
  }
  v1::Checkpoint done;
  op.result().UnpackTo(&done);
  const v1::PhaseTimings& t = done.timings();
  row.rdb_bytes = done.state_bytes();
  row.layers = done.layers();
  row.checkpoint = Secs(t.checkpoint_ns());
  row.build = Secs(t.build_ns());
  row.push = Secs(t.push_ns());
  row.pull = Secs(t.pull_ns());
  row.restore = Secs(t.restore_ns());
  row.verify = Secs(t.verify_ns());
  row.cutover = Secs(t.cutover_ns());
  row.total = Secs(t.total_ns());

  // The baseline: the same bytes as one blob, pushed and pulled.
  RegistryClient client(registry.ClientOptions());
  const FileDigest raw = Must(DigestFile(rdb), "digesting the RDB");
  const Descriptor blob{.media_type = "application/octet-stream", .digest = raw.digest,
                        .size = raw.size};
  const ImageReference plain{.registry = registry.Address(), .repository = "bench/plain"};
  absl::Time start = absl::Now();
  Must(client.PushBlobFile(plain, rdb, blob), "plain push");
  row.plain_push = Seconds(start);
  start = absl::Now();
  Must(client.PullBlobToFile(plain, blob, dir / "plain.rdb"), "plain pull");
  row.plain_pull = Seconds(start);
  south.lms.DeletePod("cache").IgnoreError();
  fs::remove_all(dir);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {10, 50, 100, 200, 500};
  std::string keep;
  ImageStoreOptions image_options;
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
    } else if (arg == "--layer-mb" && i + 1 < argc) {
      int mb = 0;
      if (!absl::SimpleAtoi(argv[++i], &mb) || mb <= 0 || mb > 1024) {
        std::fprintf(stderr, "checkpoint_bench: --layer-mb: 1-1024\n");
        return 2;
      }
      image_options.layer_bytes = int64_t{mb} << 20;
    } else if (arg == "--keep" && i + 1 < argc) {
      keep = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: checkpoint_bench [--quick] [--sizes 10,50,...] [--layer-mb N] "
                   "[--keep DIR]\n");
      return 2;
    }
  }
  const fs::path work = keep.empty() ? fs::temp_directory_path() /
                                           absl::StrCat("codeco-checkpoint-bench-", getpid())
                                     : fs::path(keep);
  std::unique_ptr<LocalRegistry> registry =
      Must(LocalRegistry::Start({.directory = work / "registry"}), "starting docker-registry");
  std::printf(
      "Redis migrated between two loopback clusters through docker-registry; seconds per phase\n"
      "(push, pull and restore overlap: the total is less than their sum)\n");
  std::printf("%6s %8s %6s %10s %6s %6s %6s %8s %7s %8s %7s %11s %7s\n", "state", "rdb MB",
              "layers", "checkpoint", "build", "push", "pull", "restore", "verify", "cutover",
              "total", "plain copy", "ratio");
  for (int mb : sizes) {
    Row r = Measure(mb, work, *registry, image_options);
    std::printf("%4dMB %8.1f %6d %10.2f %6.2f %6.2f %6.2f %8.2f %7.2f %8.2f %7.2f %11.2f %6.2fx\n",
                r.megabytes, static_cast<double>(r.rdb_bytes) / 1e6, r.layers, r.checkpoint,
                r.build, r.push, r.pull, r.restore, r.verify, r.cutover, r.total, r.Plain(),
                r.total / r.Plain());
    std::fflush(stdout);
  }
  registry->Stop();
  if (keep.empty()) fs::remove_all(work);
  return 0;
}
