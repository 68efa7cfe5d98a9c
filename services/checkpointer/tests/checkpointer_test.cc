// The checkpointer's core with real parts: Redis (Debian's redis-server)
// behind the Redis hook, Debian's docker-registry on loopback, and two
// checkpointers (clusters "north" and "south") whose restore half runs in
// the other one. Each cluster's LMS is a small in-test one that runs a Redis
// pod as a redis-server process, as CODEF's does.

#include <atomic>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "checkpointer/core/checkpointer.h"
#include "checkpointer/drivers/redis_hook.h"
#include "checkpointer/image/registry_image_store.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"
#include "codeco/common/ports.h"
#include "codeco/common/status.h"
#include "checkpointer/testing/loopback_cluster.h"
#include "test_registry.h"

namespace codeco::checkpointer {
namespace {

namespace fs = std::filesystem;
using common::v1::Operation;
using testing::Registry;

// Starts an empty Redis pod on `node` of `lms`.
lms::v1::Pod AddRedisPod(LoopbackLms& lms, const std::string& name, const std::string& node) {
  absl::StatusOr<lms::v1::Pod> pod = lms.AddRedisPod(name, node);
  INFO(pod.status());
  REQUIRE(pod.ok());
  return *pod;
}

// An ImageStore passing every call to another; tests override what they change.
class ForwardingImageStore : public ImageStore {
 public:
  explicit ForwardingImageStore(ImageStore& inner) : inner_(inner) {}
  absl::StatusOr<PushedImage> Push(StateDump& d, const CheckpointMetadata& m,
                                   const std::string& ref,
                                   const std::function<void()>& published,
                                   const std::atomic<bool>& cancel) override {
    return inner_.Push(d, m, ref, published, cancel);
  }
  absl::StatusOr<CheckpointMetadata> Inspect(const std::string& ref) override {
    return inner_.Inspect(ref);
  }
  absl::StatusOr<PulledImage> Pull(const std::string& ref, const fs::path& d,
                                   const StreamedFile& s) override {
    return inner_.Pull(ref, d, s);
  }
  absl::Status Abandon(const std::string& ref) override { return inner_.Abandon(ref); }
  absl::Status Delete(const std::string& ref) override { return inner_.Delete(ref); }

 protected:
  ImageStore& inner_;
};

// A StateDriver passing every call to another; tests override what they change.
class ForwardingDriver : public StateDriver {
 public:
  explicit ForwardingDriver(StateDriver& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  bool Handles(const ContainerTarget& t) const override { return inner_.Handles(t); }
  absl::StatusOr<StateDump> Checkpoint(const ContainerTarget& t, const fs::path& d) override {
    return inner_.Checkpoint(t, d);
  }
  absl::Status Resume(const ContainerTarget& t) override { return inner_.Resume(t); }
  absl::Status Retire(const ContainerTarget& t) override { return inner_.Retire(t); }
  absl::Status Verify(const ContainerTarget& t,
                      const std::map<std::string, std::string>& f) override {
    return inner_.Verify(t, f);
  }
  std::string StreamedFile() const override { return inner_.StreamedFile(); }
  absl::Status RestoreInto(const ContainerTarget& t, StateStream& s) override {
    return inner_.RestoreInto(t, s);
  }

 protected:
  StateDriver& inner_;
};

// A cluster: its LMS, store and checkpointer.
struct Cluster {
  Cluster(const std::string& name, const fs::path& dir, ImageStore& images,
          PeerCheckpointers& peers, const std::string& repository, int64_t node_memory = 1 << 30)
      : lms(dir / name / "pods", node_memory),
        store(NewInMemoryKvStore({kCheckpointsFamily, kOperationsFamily})),
        checkpointer(CheckpointerOptions{.cluster = name,
                                         .work_directory = dir / name / "work",
                                         .default_repository = repository,
                                         .on_finished =
                                             [this](const Operation& op, const v1::Checkpoint&) {
                                               absl::MutexLock lock(&mu);
                                               finished.push_back(op.id());
                                             }},
                     *store, RealClock::Default(), lms, images, peers, {&redis}) {}

  // Operations reported finished (on_finished), in order, once there are
  // `count` (the report follows the stored record that Await sees).
  std::vector<std::string> Finished(size_t count) {
    absl::MutexLock lock(&mu);
    wanted = count;
    mu.Await(absl::Condition(this, &Cluster::EnoughFinished));
    return finished;
  }
  bool EnoughFinished() const { return finished.size() >= wanted; }

  absl::Mutex mu;
  std::vector<std::string> finished;
  size_t wanted = 0;
  LoopbackLms lms;
  std::unique_ptr<KvStore> store;
  RedisHookDriver redis{RedisCheckpointHook::Options{.max_fence = absl::Minutes(2)}};
  Checkpointer checkpointer;
};

// Waits until operation `id` of `c` is done and returns it.
Operation Await(Checkpointer& c, const std::string& id) {
  for (;;) {
    absl::StatusOr<Operation> op = c.GetOperation(id);
    REQUIRE(op.ok());
    if (op->done()) return *op;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::unique_ptr<RedisConnection> Connect(const std::string& endpoint) {
  absl::StatusOr<RedisInstance> at = ParseRedisEndpoint(endpoint, "endpoint");
  REQUIRE(at.ok());
  auto c = RedisConnection::Connect(at->host, at->port, absl::Seconds(10));
  REQUIRE(c.ok());
  return *std::move(c);
}

std::string EndpointOf(const lms::v1::Pod& pod) { return pod.annotations().at(kEndpointAnnotation); }

// Fills `pod` with `keys` keys of 1 KiB.
void Fill(const lms::v1::Pod& pod, int keys) {
  auto c = Connect(EndpointOf(pod));
  for (int i = 0; i < keys; ++i) {
    REQUIRE(c->Command({"SET", absl::StrCat("key-", i), std::string(1024, 'a' + i % 26)}).ok());
  }
}

struct Federation {
  Federation()
      : dir(registry.dir / "clusters"),
        images(registry.Options(), ImageStoreOptions{.layer_bytes = 64 << 10}),
        repository(registry.Address() + "/codeco/checkpoints"),
        north("north", dir, images, peers, repository),
        south("south", dir, images, peers, repository, /*node_memory=*/1 << 30) {
    peers.Add("north", &north.checkpointer);
    peers.Add("south", &south.checkpointer);
  }
  Registry registry;
  fs::path dir;
  RegistryImageStore images;
  InProcessPeers peers;
  std::string repository;
  Cluster north, south;
};

v1::MigrateContainerRequest MoveToSouth(const std::string& pod) {
  v1::MigrateContainerRequest request;
  request.mutable_source()->set_pod(pod);
  request.mutable_source()->set_container("redis");
  request.set_target_cluster("south");
  request.set_target_node("south-1");
  return request;
}

TEST_CASE("A migration moves a Redis and its data to another cluster and retires the source") {
  Federation f;
  lms::v1::Pod pod = AddRedisPod(f.north.lms, "cache", "north-1");
  Fill(pod, 500);
  std::string digest = *Connect(EndpointOf(pod))->Command({"DEBUG", "DIGEST"});

  v1::MigrateContainerRequest request = MoveToSouth("cache");
  request.set_request_id("move-cache-1");
  absl::StatusOr<Operation> started = f.north.checkpointer.MigrateContainer(request);
  REQUIRE(started.ok());
  // The same request_id names the same operation.
  absl::StatusOr<Operation> again = f.north.checkpointer.MigrateContainer(request);
  REQUIRE(again.ok());
  CHECK(again->id() == started->id());

  Operation done = Await(f.north.checkpointer, started->id());
  INFO(done.DebugString());
  REQUIRE_FALSE(done.has_error());
  CHECK(done.progress_percent() == 100);
  v1::Checkpoint result;
  REQUIRE(done.result().UnpackTo(&result));
  CHECK(result.phase() == v1::CHECKPOINT_PHASE_RESTORED);
  CHECK(result.driver() == "redis-hook");
  CHECK(result.restored().cluster() == "south");
  CHECK(result.restored().node() == "south-1");
  CHECK(result.facts().at(kRedisKeysFact) == "500");
  CHECK(result.facts().at(kRedisDigestFact) == digest);
  for (int64_t ns : {result.timings().checkpoint_ns(), result.timings().build_ns(),
                     result.timings().push_ns(), result.timings().pull_ns(),
                     result.timings().restore_ns(), result.timings().verify_ns(),
                     result.timings().cutover_ns(), result.timings().total_ns()}) {
    CHECK(ns > 0);
  }
  CHECK(absl::StrContains(result.image_reference(), f.repository + "@sha256:"));

  // The source is gone; the copy in the south holds every key and value.
  CHECK_FALSE(f.north.lms.GetPod("cache").ok());
  absl::StatusOr<lms::v1::Pod> moved = f.south.lms.GetPod("cache");
  REQUIRE(moved.ok());
  CHECK(*Connect(EndpointOf(*moved))->Command({"DEBUG", "DIGEST"}) == digest);
  // The copy was restored from the tag, followed layer by layer while it was pushed.
  CHECK(moved->annotations().at("checkpointer.codeco.io/restored-from") ==
        f.repository + ":" + result.image_tag());
  CHECK(result.layers() > 1);
  // Each side reported its operation finished, once (the server counts it in metrics).
  CHECK(f.north.Finished(1) == std::vector<std::string>{done.id()});
  const std::vector<std::string> south_finished = f.south.Finished(1);
  REQUIRE(south_finished.size() == 1);
  CHECK(absl::StartsWith(south_finished[0], "restore/"));
  // Both sides keep a record.
  absl::StatusOr<v1::ListCheckpointsResponse> listed =
      f.north.checkpointer.ListCheckpoints(v1::ListCheckpointsRequest());
  REQUIRE(listed.ok());
  CHECK(listed->checkpoints_size() == 1);
}

TEST_CASE("A checkpoint alone leaves the source serving and an image another cluster restores") {
  Federation f;
  lms::v1::Pod pod = AddRedisPod(f.north.lms, "sessions", "north-1");
  Fill(pod, 100);
  v1::CreateCheckpointRequest create;
  create.mutable_source()->set_pod("sessions");
  create.set_tag("nightly");
  absl::StatusOr<Operation> op = f.north.checkpointer.CreateCheckpoint(create);
  REQUIRE(op.ok());
  Operation done = Await(f.north.checkpointer, op->id());
  REQUIRE_FALSE(done.has_error());
  v1::Checkpoint checkpoint;
  REQUIRE(done.result().UnpackTo(&checkpoint));
  CHECK(checkpoint.phase() == v1::CHECKPOINT_PHASE_READY);
  // A copy of a Redis that serves on counts its keys but takes no digest
  // (it would hold the writes while it walks the dataset).
  CHECK(checkpoint.facts().at(kRedisKeysFact) == "100");
  CHECK_FALSE(checkpoint.facts().contains(kRedisDigestFact));
  // The source took writes again right after the dump.
  CHECK(Connect(EndpointOf(pod))->Command({"SET", "after", "1"}).ok());

  v1::RestoreCheckpointRequest restore;
  restore.set_image_reference(f.repository + ":nightly");
  restore.set_target_node("south-2");
  restore.set_pod("sessions-copy");
  absl::StatusOr<Operation> restoring = f.south.checkpointer.RestoreCheckpoint(restore);
  REQUIRE(restoring.ok());
  Operation restored = Await(f.south.checkpointer, restoring->id());
  INFO(restored.DebugString());
  REQUIRE_FALSE(restored.has_error());
  absl::StatusOr<lms::v1::Pod> copy = f.south.lms.GetPod("sessions-copy");
  REQUIRE(copy.ok());
  CHECK(*Connect(EndpointOf(*copy))->Command({"DBSIZE"}) == "100");
}

TEST_CASE("Bad requests are refused naming the field and start nothing") {
  Federation f;
  v1::MigrateContainerRequest no_pod;
  no_pod.set_target_node("south-1");
  absl::Status s = f.north.checkpointer.MigrateContainer(no_pod).status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(s.message(), "source.pod"));

  v1::MigrateContainerRequest bad_node = MoveToSouth("cache");
  bad_node.set_target_node("South_1!");
  s = f.north.checkpointer.MigrateContainer(bad_node).status();
  CHECK(absl::StrContains(s.message(), "target_node"));

  v1::RestoreCheckpointRequest bad_ref;
  bad_ref.set_image_reference("no registry here");
  bad_ref.set_target_node("south-1");
  s = f.south.checkpointer.RestoreCheckpoint(bad_ref).status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(s.message(), "image_reference"));

  v1::MigrateContainerRequest same_name = MoveToSouth("cache");
  same_name.set_target_cluster("north");
  s = f.north.checkpointer.MigrateContainer(same_name).status();
  CHECK(absl::StrContains(s.message(), "target_pod"));

  v1::CreateCheckpointRequest other_cluster;
  other_cluster.mutable_source()->set_cluster("south");
  other_cluster.mutable_source()->set_pod("cache");
  s = f.north.checkpointer.CreateCheckpoint(other_cluster).status();
  CHECK(absl::StrContains(s.message(), "source.cluster"));
  CHECK(f.north.checkpointer.pending() == 0);
}

// A failed migration: an error that says what failed, the source still
// serving (and taking writes), and nothing restored.
void ExpectSourceServes(Federation& f, const Operation& op, const std::string& says) {
  INFO(op.DebugString());
  REQUIRE(op.done());
  REQUIRE(op.has_error());
  CHECK(absl::StrContains(op.error().message(), says));
  CHECK(absl::StrContains(op.error().message(), "serves on"));
  absl::StatusOr<lms::v1::Pod> source = f.north.lms.GetPod("cache");
  REQUIRE(source.ok());
  CHECK(Connect(EndpointOf(*source))->Command({"SET", "after-failure", "1"}).ok());
  CHECK(*Connect(EndpointOf(*source))->Command({"GET", "after-failure"}) == "1");
  CHECK(f.south.lms.size() == 0);
}

TEST_CASE("Registry down: the migration fails naming the push and the source serves on") {
  Federation f;
  Fill(AddRedisPod(f.north.lms, "cache", "north-1"), 50);
  f.registry.Stop();
  absl::StatusOr<Operation> op = f.north.checkpointer.MigrateContainer(MoveToSouth("cache"));
  REQUIRE(op.ok());
  ExpectSourceServes(f, Await(f.north.checkpointer, op->id()), "pushing");
}

TEST_CASE("Destination node full: the restore is refused and the source serves on") {
  Federation f;
  Cluster tiny("tiny", f.dir, f.images, f.peers, f.repository, /*node_memory=*/1 << 20);
  f.peers.Add("tiny", &tiny.checkpointer);
  Fill(AddRedisPod(f.north.lms, "cache", "north-1"), 50);
  v1::MigrateContainerRequest request = MoveToSouth("cache");
  request.set_target_cluster("tiny");
  absl::StatusOr<Operation> op = f.north.checkpointer.MigrateContainer(request);
  REQUIRE(op.ok());
  ExpectSourceServes(f, Await(f.north.checkpointer, op->id()), "not enough memory");
  CHECK(tiny.lms.size() == 0);
}

TEST_CASE("A corrupted layer is caught by its digest: nothing restored and the source serves on") {
  Federation f;
  // Corrupt every blob of the repository as soon as it is pushed.
  class Corrupting final : public ForwardingImageStore {
   public:
    Corrupting(ImageStore& inner, Registry& registry)
        : ForwardingImageStore(inner), registry_(registry) {}
    absl::StatusOr<PushedImage> Push(StateDump& d, const CheckpointMetadata& m,
                                     const std::string& ref,
                                     const std::function<void()>& published,
                                     const std::atomic<bool>& cancel) override {
      // Each layer is corrupted in the registry before it is published.
      absl::StatusOr<PushedImage> pushed = inner_.Push(d, m, ref, [&] {
        Corrupt();
        if (published) published();
      }, cancel);
      Corrupt();
      return pushed;
    }

   private:
    // Flips a byte in every layer blob stored so far (configs are small).
    void Corrupt() {
      std::error_code error;
      for (const auto& entry : fs::recursive_directory_iterator(registry_.dir, error)) {
        if (entry.path().filename() != "data" || entry.file_size(error) < 4096 ||
            !absl::StrContains(entry.path().string(), "/blobs/")) {
          continue;
        }
        if (!corrupted_.insert(entry.path().string()).second) continue;
        std::FILE* blob = std::fopen(entry.path().c_str(), "r+b");
        REQUIRE(blob != nullptr);
        std::fseek(blob, 600, SEEK_SET);
        std::fputc('X', blob);
        std::fclose(blob);
      }
    }
    std::set<std::string> corrupted_;
    Registry& registry_;
  } corrupting(f.images, f.registry);
  Cluster source("west", f.dir, corrupting, f.peers, f.repository);
  Fill(AddRedisPod(source.lms, "cache", "west-1"), 50);
  absl::StatusOr<Operation> op = source.checkpointer.MigrateContainer(MoveToSouth("cache"));
  REQUIRE(op.ok());
  Operation failed = Await(source.checkpointer, op->id());
  INFO(failed.DebugString());
  REQUIRE(failed.has_error());
  CHECK(absl::StrContains(failed.error().message(), "digest"));
  CHECK(absl::StrContains(failed.error().message(), "serves on"));
  absl::StatusOr<lms::v1::Pod> still = source.lms.GetPod("cache");
  REQUIRE(still.ok());
  CHECK(Connect(EndpointOf(*still))->Command({"SET", "after-failure", "1"}).ok());
  CHECK(f.south.lms.size() == 0);
}

TEST_CASE("A move inside the cluster restores the copy under its new name and retires the source") {
  Federation f;
  Fill(AddRedisPod(f.north.lms, "cache", "north-1"), 200);
  v1::MigrateContainerRequest request;
  request.mutable_source()->set_pod("cache");
  request.set_target_node("north-2");
  request.set_target_pod("cache-2");
  absl::StatusOr<Operation> op = f.north.checkpointer.MigrateContainer(request);
  REQUIRE(op.ok());
  Operation done = Await(f.north.checkpointer, op->id());
  INFO(done.DebugString());
  REQUIRE_FALSE(done.has_error());
  CHECK_FALSE(f.north.lms.GetPod("cache").ok());
  absl::StatusOr<lms::v1::Pod> moved = f.north.lms.GetPod("cache-2");
  REQUIRE(moved.ok());
  CHECK(moved->node_name() == "north-2");
  CHECK(*Connect(EndpointOf(*moved))->Command({"DBSIZE"}) == "200");
}

TEST_CASE("Ten migrations back and forth under a write load lose no acknowledged write") {
  Federation f;
  AddRedisPod(f.north.lms, "cache", "north-1");
  // The writer follows the pod: a write that fails (fenced, then the
  // connection dropped at the cut-over) is retried against wherever the pod runs.
  std::atomic<bool> stop{false};
  std::atomic<int> acknowledged{0};
  std::thread writer([&] {
    std::unique_ptr<RedisConnection> c;
    int next = 0;
    while (!stop.load()) {
      if (c == nullptr) {
        for (Cluster* cluster : {&f.north, &f.south}) {
          absl::StatusOr<lms::v1::Pod> pod = cluster->lms.GetPod("cache");
          if (!pod.ok()) continue;
          absl::StatusOr<RedisInstance> at = ParseRedisEndpoint(EndpointOf(*pod), "endpoint");
          auto made = RedisConnection::Connect(at->host, at->port, absl::Seconds(30));
          if (made.ok()) c = *std::move(made);
          break;
        }
        if (c == nullptr) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
          continue;
        }
      }
      if (c->Command({"SET", absl::StrCat("w-", next), absl::StrCat("v-", next)}).ok()) {
        acknowledged.store(++next);
      } else {
        c.reset();
      }
    }
  });
  bool north = true;
  for (int i = 0; i < 10; ++i) {
    Cluster& from = north ? f.north : f.south;
    v1::MigrateContainerRequest request;
    request.mutable_source()->set_pod("cache");
    request.set_target_cluster(north ? "south" : "north");
    request.set_target_node(north ? "south-1" : "north-1");
    absl::StatusOr<Operation> op = from.checkpointer.MigrateContainer(request);
    REQUIRE(op.ok());
    Operation done = Await(from.checkpointer, op->id());
    INFO("migration " << i << ": " << done.DebugString());
    REQUIRE_FALSE(done.has_error());
    north = !north;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  stop.store(true);
  writer.join();
  const int written = acknowledged.load();
  REQUIRE(written > 100);
  absl::StatusOr<lms::v1::Pod> pod = (north ? f.north : f.south).lms.GetPod("cache");
  REQUIRE(pod.ok());
  auto c = Connect(EndpointOf(*pod));
  for (int i = 0; i < written; ++i) {
    absl::StatusOr<std::string> value = c->Command({"GET", absl::StrCat("w-", i)});
    REQUIRE(value.ok());
    REQUIRE(*value == absl::StrCat("v-", i));
  }
}

// A checkpointer "killed" mid-operation: from Crash() on, nothing it does
// reaches its store, its source or a registry any more, as if its process
// had died; a new checkpointer on a copy of its store takes over.
class Crashable {
 public:
  // The store the first checkpointer writes through.
  class Store final : public KvStore {
   public:
    Store(KvStore& inner, std::atomic<bool>& crashed) : inner_(inner), crashed_(crashed) {}
    absl::StatusOr<std::string> Get(std::string_view cf, std::string_view key) const override {
      return inner_.Get(cf, key);
    }
    absl::Status Write(const KvWriteBatch& batch) override {
      if (crashed_.load()) return absl::UnavailableError("crashed");
      return inner_.Write(batch);
    }
    absl::Status Scan(std::string_view cf, const KvScanOptions& options,
                      const KvVisitor& visit) const override {
      return inner_.Scan(cf, options, visit);
    }
    std::vector<std::string> ColumnFamilies() const override { return inner_.ColumnFamilies(); }

   private:
    KvStore& inner_;
    std::atomic<bool>& crashed_;
  };
  // Its Redis driver: after the crash it lifts no fence and retires nothing.
  class Driver final : public ForwardingDriver {
   public:
    Driver(StateDriver& inner, std::atomic<bool>& crashed)
        : ForwardingDriver(inner), crashed_(crashed) {}
    absl::Status Resume(const ContainerTarget& t) override {
      return crashed_.load() ? absl::UnavailableError("crashed") : inner_.Resume(t);
    }
    absl::Status Retire(const ContainerTarget& t) override {
      return crashed_.load() ? absl::UnavailableError("crashed") : inner_.Retire(t);
    }

   private:
    std::atomic<bool>& crashed_;
  };
  // Its image store: the push blocks at `stage` until the crash, then fails.
  class Images final : public ForwardingImageStore {
   public:
    Images(ImageStore& inner, Crashable& owner) : ForwardingImageStore(inner), owner_(owner) {}
    absl::StatusOr<PushedImage> Push(StateDump& d, const CheckpointMetadata& m,
                                     const std::string& ref,
                                     const std::function<void()>& published,
                                     const std::atomic<bool>& cancel) override {
      if (owner_.block_push) owner_.Block();
      if (owner_.crashed.load()) return absl::UnavailableError("crashed");
      return inner_.Push(d, m, ref, published, cancel);
    }

   private:
    Crashable& owner_;
  };
  // Its peers: the restore runs at the peer, then the caller dies before it hears back.
  class Peers final : public PeerCheckpointers {
   public:
    Peers(PeerCheckpointers& inner, Crashable& owner) : inner_(inner), owner_(owner) {}
    absl::StatusOr<v1::Checkpoint> Restore(
        const std::string& cluster, const v1::RestoreCheckpointRequest& request,
        const std::function<void(const Operation&)>& progress) override {
      absl::StatusOr<v1::Checkpoint> restored = inner_.Restore(cluster, request, progress);
      if (!owner_.block_push) owner_.Block();
      return owner_.crashed.load() ? absl::UnavailableError("crashed") : restored;
    }

   private:
    PeerCheckpointers& inner_;
    Crashable& owner_;
  };

  // Waits until the first checkpointer reached the blocking point.
  void AwaitBlocked() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&blocked_));
  }
  // Kills it: it never acts again once it is let go.
  void Crash() {
    crashed.store(true);
    absl::MutexLock lock(&mu_);
    released_ = true;
  }

  std::atomic<bool> crashed{false};
  bool block_push = true;

 private:
  void Block() {
    absl::MutexLock lock(&mu_);
    blocked_ = true;
    mu_.Await(absl::Condition(&released_));
  }
  absl::Mutex mu_;
  bool blocked_ = false;
  bool released_ = false;
};

// Copies every record of `from` into a new in-memory store.
std::unique_ptr<KvStore> CopyOf(const KvStore& from) {
  std::unique_ptr<KvStore> to = NewInMemoryKvStore({kCheckpointsFamily, kOperationsFamily});
  for (const char* cf : {kCheckpointsFamily, kOperationsFamily}) {
    REQUIRE(from.Scan(cf, {}, [&](std::string_view key, std::string_view value) {
                  REQUIRE(to->Put(cf, key, value).ok());
                  return true;
                }).ok());
  }
  return to;
}

// Kills north's checkpointer at the blocking point of `crash`, starts a new
// one on what it had stored, and checks that it finishes the migration.
void MigrationSurvivesACrash(bool during_push) {
  Federation f;
  lms::v1::Pod pod = AddRedisPod(f.north.lms, "cache", "north-1");
  Fill(pod, 300);
  const std::string digest = *Connect(EndpointOf(pod))->Command({"DEBUG", "DIGEST"});

  Crashable crash;
  crash.block_push = during_push;
  std::unique_ptr<KvStore> backing = NewInMemoryKvStore({kCheckpointsFamily, kOperationsFamily});
  Crashable::Store store(*backing, crash.crashed);
  Crashable::Driver driver(f.north.redis, crash.crashed);
  Crashable::Images images(f.images, crash);
  Crashable::Peers peers(f.peers, crash);
  auto first = std::make_unique<Checkpointer>(
      CheckpointerOptions{.cluster = "north", .work_directory = f.dir / "north-first",
                          .default_repository = f.repository},
      store, RealClock::Default(), f.north.lms, images, peers, std::vector<StateDriver*>{&driver});
  v1::MigrateContainerRequest request = MoveToSouth("cache");
  request.set_request_id("move-cache");
  absl::StatusOr<Operation> op = first->MigrateContainer(request);
  REQUIRE(op.ok());
  crash.AwaitBlocked();
  std::unique_ptr<KvStore> survived = CopyOf(*backing);
  crash.Crash();
  first.reset();  // its worker ends without acting

  // The restarted checkpointer: the same store contents, the real ports.
  Checkpointer second(CheckpointerOptions{.cluster = "north",
                                          .work_directory = f.dir / "north-second",
                                          .default_repository = f.repository},
                      *survived, RealClock::Default(), f.north.lms, f.images, f.peers,
                      {&f.north.redis});
  absl::StatusOr<int> resumed = second.Recover();
  REQUIRE(resumed.ok());
  CHECK(*resumed == 1);
  Operation done = Await(second, op->id());
  INFO(done.DebugString());
  REQUIRE_FALSE(done.has_error());
  // The same request_id still names it.
  absl::StatusOr<Operation> again = second.MigrateContainer(request);
  REQUIRE(again.ok());
  CHECK(again->id() == op->id());
  CHECK_FALSE(f.north.lms.GetPod("cache").ok());
  absl::StatusOr<lms::v1::Pod> moved = f.south.lms.GetPod("cache");
  REQUIRE(moved.ok());
  CHECK(*Connect(EndpointOf(*moved))->Command({"DEBUG", "DIGEST"}) == digest);
}

TEST_CASE("A checkpointer killed while pushing redoes the migration when it starts again") {
  MigrationSurvivesACrash(/*during_push=*/true);
}

TEST_CASE("A checkpointer killed after the remote restore finishes the cut-over when it starts again") {
  MigrationSurvivesACrash(/*during_push=*/false);
}

// --- Restores into a pod that exists already (restore_into_existing) ---

// Creates pod `name` on `node` through `lms` (CreatePod), its Redis started
// empty, the way SWM creates the target of a stateful migration under its
// reservation, with a label of its own.
lms::v1::Pod CreateLikeSwm(LmsPort& lms, const std::string& name, const std::string& node,
                           const std::string& container = "redis") {
  lms::v1::Pod pod;
  pod.set_name(name);
  pod.set_node_name(node);
  (*pod.mutable_labels())["codeco.io/reservation"] = "swm-" + name;
  lms::v1::Container* c = pod.add_containers();
  c->set_name(container);
  c->set_image("redis:7");
  c->mutable_requests()->set_memory_bytes(64 << 20);
  absl::StatusOr<lms::v1::Pod> created = lms.CreatePod(pod, "swm/" + name);
  INFO(created.status());
  REQUIRE(created.ok());
  return *created;
}

// Checks that the pod `name` of `lms` is still the one CreateLikeSwm made:
// same label, same Redis (endpoint), no restore annotation.
void ExpectSwmPodKept(LoopbackLms& lms, const lms::v1::Pod& created) {
  absl::StatusOr<lms::v1::Pod> now = lms.GetPod(created.name());
  REQUIRE(now.ok());
  CHECK(now->labels().at("codeco.io/reservation") == "swm-" + created.name());
  CHECK(EndpointOf(*now) == EndpointOf(created));
  CHECK_FALSE(now->annotations().contains("checkpointer.codeco.io/restored-by"));
}

v1::MigrateContainerRequest MoveIntoExisting(const std::string& pod, const std::string& target) {
  v1::MigrateContainerRequest request = MoveToSouth(pod);
  request.set_target_pod(target);
  request.set_restore_into_existing(true);
  return request;
}

TEST_CASE("A migration with restore_into_existing loads the state into the pod SWM created") {
  Federation f;
  lms::v1::Pod pod = AddRedisPod(f.north.lms, "cache", "north-1");
  Fill(pod, 500);
  const std::string digest = *Connect(EndpointOf(pod))->Command({"DEBUG", "DIGEST"});
  const lms::v1::Pod target = CreateLikeSwm(f.south.lms, "cache-s", "south-1");

  absl::StatusOr<Operation> op =
      f.north.checkpointer.MigrateContainer(MoveIntoExisting("cache", "cache-s"));
  REQUIRE(op.ok());
  Operation done = Await(f.north.checkpointer, op->id());
  INFO(done.DebugString());
  REQUIRE_FALSE(done.has_error());
  v1::Checkpoint result;
  REQUIRE(done.result().UnpackTo(&result));
  CHECK(result.phase() == v1::CHECKPOINT_PHASE_RESTORED);
  CHECK(result.restored().cluster() == "south");
  CHECK(result.restored().node() == "south-1");
  CHECK(result.restored().pod() == "cache-s");
  CHECK(result.restored().container() == "redis");
  CHECK(result.facts().at(kRedisKeysFact) == "500");
  CHECK(result.facts().at(kRedisDigestFact) == digest);

  // The source is gone; SWM's pod, not recreated, holds every key and value.
  CHECK_FALSE(f.north.lms.GetPod("cache").ok());
  ExpectSwmPodKept(f.south.lms, target);
  CHECK(f.south.lms.size() == 1);
  auto c = Connect(EndpointOf(target));
  CHECK(*c->Command({"DBSIZE"}) == "500");
  CHECK(*c->Command({"DEBUG", "DIGEST"}) == digest);
  // It serves as a master.
  CHECK(c->Command({"SET", "after", "1"}).ok());
}

TEST_CASE("A move inside the cluster with restore_into_existing loads the pre-created copy") {
  Federation f;
  Fill(AddRedisPod(f.north.lms, "cache", "north-1"), 200);
  const lms::v1::Pod copy = CreateLikeSwm(f.north.lms, "cache-2", "north-2");
  v1::MigrateContainerRequest request;
  request.mutable_source()->set_pod("cache");
  request.set_target_node("north-2");
  request.set_target_pod("cache-2");
  request.set_restore_into_existing(true);
  absl::StatusOr<Operation> op = f.north.checkpointer.MigrateContainer(request);
  REQUIRE(op.ok());
  Operation done = Await(f.north.checkpointer, op->id());
  INFO(done.DebugString());
  REQUIRE_FALSE(done.has_error());
  CHECK_FALSE(f.north.lms.GetPod("cache").ok());
  ExpectSwmPodKept(f.north.lms, copy);
  CHECK(*Connect(EndpointOf(copy))->Command({"DBSIZE"}) == "200");
}

TEST_CASE(
    "restore_into_existing with no target pod fails naming target_pod and the source serves on") {
  Federation f;
  Fill(AddRedisPod(f.north.lms, "cache", "north-1"), 50);
  absl::StatusOr<Operation> op =
      f.north.checkpointer.MigrateContainer(MoveIntoExisting("cache", "cache-s"));
  REQUIRE(op.ok());
  const Operation failed = Await(f.north.checkpointer, op->id());
  ExpectSourceServes(f, failed, "target_pod cache-s");
  CHECK(failed.error().code() == common::v1::ErrorCode(absl::StatusCode::kFailedPrecondition));
  CHECK(absl::StrContains(failed.error().message(), "no pod \"cache-s\" in cluster south"));
  // The next attempt, once SWM made the pod, goes through.
  CreateLikeSwm(f.south.lms, "cache-s", "south-1");
  op = f.north.checkpointer.MigrateContainer(MoveIntoExisting("cache", "cache-s"));
  REQUIRE(op.ok());
  const Operation done = Await(f.north.checkpointer, op->id());
  INFO(done.DebugString());
  CHECK_FALSE(done.has_error());
}

TEST_CASE(
    "A load into a pre-created pod that fails leaves the pod to its creator and the source serves "
    "on") {
  Federation f;
  lms::v1::Pod pod = AddRedisPod(f.north.lms, "cache", "north-1");
  Fill(pod, 50);
  // Not empty: the Redis hook refuses to load into it.
  const lms::v1::Pod target = CreateLikeSwm(f.south.lms, "cache-s", "south-1");
  REQUIRE(Connect(EndpointOf(target))->Command({"SET", "mine", "1"}).ok());
  absl::StatusOr<Operation> op =
      f.north.checkpointer.MigrateContainer(MoveIntoExisting("cache", "cache-s"));
  REQUIRE(op.ok());
  const Operation failed = Await(f.north.checkpointer, op->id());
  INFO(failed.DebugString());
  REQUIRE(failed.has_error());
  CHECK(absl::StrContains(failed.error().message(), "holds 1 keys"));
  CHECK(absl::StrContains(failed.error().message(), "cache-s was left to its creator"));
  CHECK(absl::StrContains(failed.error().message(), "serves on"));
  // Both pods are still there, as they were.
  ExpectSwmPodKept(f.south.lms, target);
  CHECK(*Connect(EndpointOf(target))->Command({"GET", "mine"}) == "1");
  absl::StatusOr<lms::v1::Pod> source = f.north.lms.GetPod("cache");
  REQUIRE(source.ok());
  CHECK(Connect(EndpointOf(*source))->Command({"SET", "after-failure", "1"}).ok());
}

TEST_CASE("restore_into_existing without a pod name is refused naming the field") {
  Federation f;
  v1::MigrateContainerRequest migrate = MoveToSouth("cache");
  migrate.set_restore_into_existing(true);
  absl::Status s = f.north.checkpointer.MigrateContainer(migrate).status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(s.message(), "target_pod: is required with restore_into_existing"));
  // Inside the cluster too (one error for the field).
  migrate.set_target_cluster("north");
  s = f.north.checkpointer.MigrateContainer(migrate).status();
  CHECK(absl::StrContains(s.message(), "target_pod: is required with restore_into_existing"));
  CHECK_FALSE(absl::StrContains(s.message(), "must name the copy"));

  v1::RestoreCheckpointRequest restore;
  restore.set_image_reference(f.repository + ":nightly");
  restore.set_target_node("south-1");
  restore.set_restore_into_existing(true);
  s = f.south.checkpointer.RestoreCheckpoint(restore).status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(s.message(), "pod: is required with restore_into_existing"));
  CHECK(f.north.checkpointer.pending() == 0);
  CHECK(f.south.checkpointer.pending() == 0);
}

// An LmsPort over another that shows pods Pending (no endpoint yet) to the
// first `pending_reads` GetPod calls, as a pod its creator has just made.
class SlowStartLms final : public LmsPort {
 public:
  explicit SlowStartLms(LmsPort& inner) : inner_(inner) {}
  absl::StatusOr<lms::v1::Pod> GetPod(const std::string& name) override {
    absl::StatusOr<lms::v1::Pod> pod = inner_.GetPod(name);
    if (pod.ok() && reads.fetch_add(1) < pending_reads.load()) {
      pod->set_phase(lms::v1::POD_PHASE_PENDING);
      pod->mutable_annotations()->erase(kEndpointAnnotation);
    }
    return pod;
  }
  absl::StatusOr<lms::v1::Pod> RestoreContainer(
      const lms::v1::RestoreContainerRequest& request) override {
    return inner_.RestoreContainer(request);
  }
  absl::StatusOr<lms::v1::Pod> CreatePod(const lms::v1::Pod& pod,
                                         const std::string& request_id) override {
    return inner_.CreatePod(pod, request_id);
  }
  absl::Status DeletePod(const std::string& name) override { return inner_.DeletePod(name); }

  std::atomic<int> pending_reads{0};
  std::atomic<int> reads{0};

 private:
  LmsPort& inner_;
};

// An ImageStore counting pulls.
class CountingImageStore final : public ForwardingImageStore {
 public:
  using ForwardingImageStore::ForwardingImageStore;
  absl::StatusOr<PulledImage> Pull(const std::string& ref, const fs::path& d,
                                   const StreamedFile& s) override {
    pulls.fetch_add(1);
    return inner_.Pull(ref, d, s);
  }
  std::atomic<int> pulls{0};
};

// A cluster "east" restoring with `driver`, whose LMS may show pods Pending
// for a while, and that waits at most a second for a pod to restore into.
struct East {
  East(Federation& f, StateDriver& driver)
      : lms(f.dir / "east" / "pods", 1 << 30),
        slow(lms),
        images(f.images),
        store(NewInMemoryKvStore({kCheckpointsFamily, kOperationsFamily})),
        checkpointer(CheckpointerOptions{.cluster = "east",
                                         .work_directory = f.dir / "east" / "work",
                                         .default_repository = f.repository,
                                         .existing_pod_timeout = absl::Seconds(1),
                                         .pod_poll_interval = absl::Milliseconds(10)},
                     *store, RealClock::Default(), slow, images, f.peers, {&driver}) {}

  // Restores `image` into the existing pod `pod` on `node`; the finished operation.
  Operation RestoreInto(const std::string& image, const std::string& node, const std::string& pod) {
    v1::RestoreCheckpointRequest request;
    request.set_image_reference(image);
    request.set_target_node(node);
    request.set_pod(pod);
    request.set_restore_into_existing(true);
    absl::StatusOr<Operation> op = checkpointer.RestoreCheckpoint(request);
    REQUIRE(op.ok());
    return Await(checkpointer, op->id());
  }

  LoopbackLms lms;
  SlowStartLms slow;
  CountingImageStore images;
  std::unique_ptr<KvStore> store;
  Checkpointer checkpointer;
};

// Checkpoints a new Redis pod of the north holding `keys` keys under image
// tag `tag`; returns the image's reference.
std::string NorthImage(Federation& f, int keys, const std::string& tag) {
  Fill(AddRedisPod(f.north.lms, "sessions", "north-1"), keys);
  v1::CreateCheckpointRequest create;
  create.mutable_source()->set_pod("sessions");
  create.set_tag(tag);
  absl::StatusOr<Operation> op = f.north.checkpointer.CreateCheckpoint(create);
  REQUIRE(op.ok());
  Operation done = Await(f.north.checkpointer, op->id());
  INFO(done.DebugString());
  REQUIRE_FALSE(done.has_error());
  return f.repository + ":" + tag;
}

TEST_CASE("A restore into an existing pod waits for it to run and checks its node and container") {
  Federation f;
  const std::string image = NorthImage(f, 100, "warm");
  RedisHookDriver redis(RedisCheckpointHook::Options{});
  East east(f, redis);

  // Pending for its first reads: waited for.
  const lms::v1::Pod fresh = CreateLikeSwm(east.lms, "sessions-e", "east-1");
  east.slow.pending_reads.store(3);
  Operation done = east.RestoreInto(image, "east-1", "sessions-e");
  INFO(done.DebugString());
  REQUIRE_FALSE(done.has_error());
  CHECK(east.slow.reads.load() >= 4);
  v1::Checkpoint result;
  REQUIRE(done.result().UnpackTo(&result));
  CHECK(result.restored().pod() == "sessions-e");
  CHECK(result.restored().node() == "east-1");
  ExpectSwmPodKept(east.lms, fresh);
  CHECK(*Connect(EndpointOf(fresh))->Command({"DBSIZE"}) == "100");

  // Pending for longer than existing_pod_timeout: given up, the pod left.
  const lms::v1::Pod stuck = CreateLikeSwm(east.lms, "stuck", "east-1");
  east.slow.reads.store(0);
  east.slow.pending_reads.store(1 << 30);
  Operation late = east.RestoreInto(image, "east-1", "stuck");
  INFO(late.DebugString());
  REQUIRE(late.has_error());
  CHECK(late.error().code() == common::v1::ErrorCode(absl::StatusCode::kDeadlineExceeded));
  CHECK(absl::StrContains(late.error().message(), "stuck to restore into did not run within 1s"));
  east.slow.pending_reads.store(0);
  ExpectSwmPodKept(east.lms, stuck);

  // Bound to another node than target_node.
  Operation elsewhere = east.RestoreInto(image, "east-2", "stuck");
  INFO(elsewhere.DebugString());
  REQUIRE(elsewhere.has_error());
  CHECK(elsewhere.error().code() == common::v1::ErrorCode(absl::StatusCode::kInvalidArgument));
  CHECK(elsewhere.error().field_path() == "target_node");
  CHECK(absl::StrContains(elsewhere.error().message(), "is bound to east-1, not east-2"));

  // No such pod.
  Operation missing = east.RestoreInto(image, "east-1", "nobody");
  INFO(missing.DebugString());
  REQUIRE(missing.has_error());
  CHECK(missing.error().code() == common::v1::ErrorCode(absl::StatusCode::kFailedPrecondition));
  CHECK(absl::StrContains(missing.error().message(),
                          "pod: no pod \"nobody\" in cluster east to restore into"));

  // Without the checkpointed container ("redis").
  const lms::v1::Pod other = CreateLikeSwm(east.lms, "other", "east-1", "cache");
  Operation unlike = east.RestoreInto(image, "east-1", "other");
  INFO(unlike.DebugString());
  REQUIRE(unlike.has_error());
  CHECK(unlike.error().code() == common::v1::ErrorCode(absl::StatusCode::kFailedPrecondition));
  CHECK(absl::StrContains(unlike.error().message(), "has no container \"redis\""));
  ExpectSwmPodKept(east.lms, other);
  CHECK(*Connect(EndpointOf(other))->Command({"DBSIZE"}) == "0");
  CHECK(east.lms.size() == 3);
}

TEST_CASE("A restore into an existing pod needs a streaming driver and never deletes the pod") {
  Federation f;
  const std::string image = NorthImage(f, 20, "warm");
  RedisHookDriver redis(RedisCheckpointHook::Options{});

  SECTION("a driver that restores only through the LMS is refused before any pull") {
    class NonStreaming final : public ForwardingDriver {
     public:
      using ForwardingDriver::ForwardingDriver;
      std::string StreamedFile() const override { return ""; }
    } non_streaming(redis);
    East east(f, non_streaming);
    const lms::v1::Pod pod = CreateLikeSwm(east.lms, "sessions-e", "east-1");
    Operation refused = east.RestoreInto(image, "east-1", "sessions-e");
    INFO(refused.DebugString());
    REQUIRE(refused.has_error());
    CHECK(refused.error().code() == common::v1::ErrorCode(absl::StatusCode::kFailedPrecondition));
    CHECK(absl::StrContains(refused.error().message(),
                            "driver redis-hook restores only into a pod it creates; "
                            "restore_into_existing needs a streaming driver (redis-hook)"));
    CHECK(east.images.pulls.load() == 0);
    ExpectSwmPodKept(east.lms, pod);
  }

  SECTION("a failed verification leaves the loaded pod to its creator") {
    class FailingVerify final : public ForwardingDriver {
     public:
      using ForwardingDriver::ForwardingDriver;
      absl::Status Verify(const ContainerTarget&,
                          const std::map<std::string, std::string>&) override {
        return absl::DataLossError("the copy differs");
      }
    } failing(redis);
    East east(f, failing);
    const lms::v1::Pod pod = CreateLikeSwm(east.lms, "sessions-e", "east-1");
    Operation failed = east.RestoreInto(image, "east-1", "sessions-e");
    INFO(failed.DebugString());
    REQUIRE(failed.has_error());
    CHECK(failed.error().code() == common::v1::ErrorCode(absl::StatusCode::kDataLoss));
    CHECK(absl::StrContains(failed.error().message(), "verifying the restored sessions-e"));
    CHECK(absl::StrContains(failed.error().message(), "sessions-e was left to its creator"));
    ExpectSwmPodKept(east.lms, pod);
  }
}

// An ImageStore whose pulls block until released, then fail.
class BlockingPulls final : public ForwardingImageStore {
 public:
  using ForwardingImageStore::ForwardingImageStore;
  absl::StatusOr<PulledImage> Pull(const std::string&, const fs::path&,
                                   const StreamedFile&) override {
    absl::MutexLock lock(&mu_);
    blocked_ = true;
    mu_.Await(absl::Condition(&released_));
    return absl::UnavailableError("crashed");
  }
  // Waits until a pull is blocked.
  void AwaitBlocked() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&blocked_));
  }
  // Lets every pull go on (and fail).
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }

 private:
  absl::Mutex mu_;
  bool blocked_ = false;
  bool released_ = false;
};

TEST_CASE("A restore into an existing pod interrupted by a restart is aborted and leaves the pod") {
  Federation f;
  const std::string image = NorthImage(f, 20, "warm");
  LoopbackLms lms(f.dir / "east" / "pods", 1 << 30);
  const lms::v1::Pod pod = CreateLikeSwm(lms, "sessions-e", "east-1");
  RedisHookDriver redis(RedisCheckpointHook::Options{});

  // The first checkpointer dies while it loads the state into the pod.
  std::atomic<bool> crashed{false};
  std::unique_ptr<KvStore> backing = NewInMemoryKvStore({kCheckpointsFamily, kOperationsFamily});
  Crashable::Store store(*backing, crashed);
  BlockingPulls blocking(f.images);
  auto first = std::make_unique<Checkpointer>(
      CheckpointerOptions{.cluster = "east",
                          .work_directory = f.dir / "east-first",
                          .default_repository = f.repository},
      store, RealClock::Default(), lms, blocking, f.peers, std::vector<StateDriver*>{&redis});
  v1::RestoreCheckpointRequest request;
  request.set_image_reference(image);
  request.set_target_node("east-1");
  request.set_pod("sessions-e");
  request.set_restore_into_existing(true);
  request.set_request_id("restore-sessions");
  absl::StatusOr<Operation> op = first->RestoreCheckpoint(request);
  REQUIRE(op.ok());
  blocking.AwaitBlocked();
  std::unique_ptr<KvStore> survived = CopyOf(*backing);
  crashed.store(true);
  blocking.Release();
  first.reset();

  Checkpointer second(CheckpointerOptions{.cluster = "east",
                                          .work_directory = f.dir / "east-second",
                                          .default_repository = f.repository},
                      *survived, RealClock::Default(), lms, f.images, f.peers, {&redis});
  absl::StatusOr<int> resumed = second.Recover();
  REQUIRE(resumed.ok());
  CHECK(*resumed == 1);
  Operation done = Await(second, op->id());
  INFO(done.DebugString());
  REQUIRE(done.has_error());
  CHECK(done.error().code() == common::v1::ErrorCode(absl::StatusCode::kAborted));
  CHECK(absl::StrContains(done.error().message(), "was interrupted"));
  CHECK(absl::StrContains(done.error().message(), "left to its creator"));
  ExpectSwmPodKept(lms, pod);
}

}  // namespace
}  // namespace codeco::checkpointer
