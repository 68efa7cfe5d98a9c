// RegistryImageStore against Debian's docker-registry on loopback: a state
// cut into layers (large files split, joined again on a pull), a pull that
// follows an image while it is pushed, and the ways a followed push ends
// (abandoned, stalled).

#include "checkpointer/image/registry_image_store.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "checkpointer/image/registry_client.h"
#include "checkpointer/tests/test_registry.h"

namespace codeco::checkpointer {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::Registry;
using testing::Scratch;

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

CheckpointMetadata Metadata() {
  return CheckpointMetadata{.container = "redis", .pod = "cache", .runtime = "redis-hook",
                            .facts = {{"org.codeco.redis.keys", "3"}}};
}

// A state directory: a 3.5 MiB dump and a small file beside it.
struct State {
  Scratch scratch{"codeco-image-store"};
  std::string dump = RandomBytes((size_t{7} << 20) / 2, 7);
  std::string notes = "small file";
  State() {
    scratch.Write("state/dump.rdb", dump);
    scratch.Write("state/notes.txt", notes);
  }
  fs::path dir() const { return scratch.path / "state"; }
  // The dump of its files.
  StateDump Dump() const {
    StateDump dump;
    dump.directory = dir();
    return dump;
  }
};

TEST_CASE("a state larger than a layer is split across layers and a pull joins it") {
  Registry registry;
  State state;
  RegistryImageStore store(registry.Options(), ImageStoreOptions{.layer_bytes = 1 << 20});
  const std::string tagged = registry.Address() + "/codeco/split:t1";
  std::atomic<bool> cancel{false};
  int published = 0;
  StateDump dump = state.Dump();
  absl::StatusOr<PushedImage> pushed = store.Push(dump, Metadata(), tagged,
                                                  [&] { ++published; }, cancel);
  INFO(pushed.status());
  REQUIRE(pushed.ok());
  CHECK(pushed->layers == 5);  // four parts of the dump, then the small file
  CHECK(published == pushed->layers - 1);

  // The complete image names the split file; a pull by digest gets both files back.
  RegistryClient client(registry.Options());
  absl::StatusOr<ImageReference> pinned =
      ParseImageReference(registry.Address() + "/codeco/split@" + pushed->manifest_digest, "ref");
  REQUIRE(pinned.ok());
  absl::StatusOr<ParsedManifest> manifest = ParseManifest(*client.PullManifest(*pinned));
  REQUIRE(manifest.ok());
  CHECK(manifest->annotations.at(kSplitFilesAnnotation) == "dump.rdb");
  CHECK_FALSE(manifest->annotations.count(kIncompleteAnnotation));
  absl::StatusOr<PulledImage> pulled =
      store.Pull(pinned->ToString(), state.scratch.path / "pulled", {});
  INFO(pulled.status());
  REQUIRE(pulled.ok());
  CHECK(ReadFile(pulled->directory / "dump.rdb") == state.dump);
  CHECK(ReadFile(pulled->directory / "notes.txt") == state.notes);
  CHECK(pulled->metadata.facts.at("org.codeco.redis.keys") == "3");
  CHECK_FALSE(pulled->metadata.facts.count(kSplitFilesAnnotation));

  // The streamed file goes to its writer, in order, and not to the directory.
  std::string streamed;
  absl::StatusOr<PulledImage> again = store.Pull(
      tagged, state.scratch.path / "streamed",
      StreamedFile{.name = "dump.rdb", .write = [&](absl::string_view bytes) {
                     streamed.append(bytes.data(), bytes.size());
                     return absl::OkStatus();
                   }});
  REQUIRE(again.ok());
  CHECK(streamed == state.dump);
  CHECK_FALSE(fs::exists(again->directory / "dump.rdb"));
  CHECK(ReadFile(again->directory / "notes.txt") == state.notes);
}

// A stream over bytes held in memory, handed out a little at a time.
class SlowStream final : public StateStream {
 public:
  explicit SlowStream(std::string bytes) : bytes_(std::move(bytes)) {}
  absl::StatusOr<size_t> Read(char* buffer, size_t max) override {
    const size_t n = std::min({max, bytes_.size() - offset_, size_t{100'000}});
    std::memcpy(buffer, bytes_.data() + offset_, n);
    offset_ += n;
    return n;
  }

 private:
  std::string bytes_;
  size_t offset_ = 0;
};

TEST_CASE("a streamed file is cut into parts as it arrives and a pull joins them") {
  Registry registry;
  State state;
  RegistryImageStore store(registry.Options(), ImageStoreOptions{.layer_bytes = 1 << 20});
  const std::string tagged = registry.Address() + "/codeco/streamed:t1";
  StateDump dump;
  dump.directory = state.scratch.path / "only-notes";
  state.scratch.Write("only-notes/notes.txt", state.notes);
  dump.streamed_file = "dump.rdb";
  dump.stream = std::make_unique<SlowStream>(state.dump);
  dump.bytes = static_cast<int64_t>(state.dump.size());  // the driver's estimate
  std::atomic<bool> cancel{false};
  absl::StatusOr<PushedImage> pushed =
      store.Push(dump, Metadata(), tagged, nullptr, cancel);
  INFO(pushed.status());
  REQUIRE(pushed.ok());
  CHECK(pushed->layers == 5);  // the small file, then four parts of the stream
  CHECK(pushed->state_bytes == static_cast<int64_t>(state.dump.size() + state.notes.size()));
  absl::StatusOr<PulledImage> pulled = store.Pull(tagged, state.scratch.path / "pulled", {});
  REQUIRE(pulled.ok());
  CHECK(ReadFile(pulled->directory / "dump.rdb") == state.dump);
  CHECK(ReadFile(pulled->directory / "notes.txt") == state.notes);

  // An empty stream still leaves its (empty) file in the image.
  StateDump empty;
  empty.directory = state.scratch.path / "nothing";
  fs::create_directories(empty.directory);
  empty.streamed_file = "dump.rdb";
  empty.stream = std::make_unique<SlowStream>("");
  absl::StatusOr<PushedImage> nothing = store.Push(
      empty, Metadata(), registry.Address() + "/codeco/streamed:empty", nullptr, cancel);
  REQUIRE(nothing.ok());
  CHECK(nothing->layers == 1);
  absl::StatusOr<PulledImage> back = store.Pull(registry.Address() + "/codeco/streamed:empty",
                                                state.scratch.path / "pulled-empty", {});
  REQUIRE(back.ok());
  CHECK(fs::exists(back->directory / "dump.rdb"));
  CHECK(fs::file_size(back->directory / "dump.rdb") == 0);
}

TEST_CASE("a pull follows an image while it is still being pushed") {
  Registry registry;
  State state;
  RegistryImageStore store(registry.Options(), ImageStoreOptions{.layer_bytes = 1 << 20});
  const std::string tagged = registry.Address() + "/codeco/follow:t1";
  std::mutex mu;
  std::condition_variable changed;
  std::string streamed;
  absl::StatusOr<PulledImage> pulled = absl::UnknownError("not pulled");
  std::thread puller;
  std::atomic<bool> cancel{false};
  StateDump dump = state.Dump();
  absl::StatusOr<PushedImage> pushed = store.Push(
      dump, Metadata(), tagged,
      [&] {
        if (puller.joinable()) return;
        // At the first published layer: start pulling, and go on pushing only
        // once the pull has bytes of the incomplete image.
        puller = std::thread([&] {
          pulled = store.Pull(tagged, state.scratch.path / "pulled",
                              StreamedFile{.name = "dump.rdb",
                                           .write = [&](absl::string_view bytes) {
                                             std::lock_guard<std::mutex> lock(mu);
                                             streamed.append(bytes.data(), bytes.size());
                                             changed.notify_all();
                                             return absl::OkStatus();
                                           }});
          changed.notify_all();
        });
        std::unique_lock<std::mutex> lock(mu);
        changed.wait(lock, [&] { return !streamed.empty(); });
      },
      cancel);
  REQUIRE(puller.joinable());
  puller.join();
  REQUIRE(pushed.ok());
  INFO(pulled.status());
  REQUIRE(pulled.ok());
  CHECK(streamed == state.dump);
  CHECK(ReadFile(pulled->directory / "notes.txt") == state.notes);
}

TEST_CASE("a push given up marks its image abandoned and a following pull stops") {
  Registry registry;
  State state;
  RegistryImageStore store(registry.Options(), ImageStoreOptions{.layer_bytes = 1 << 20});
  const std::string tagged = registry.Address() + "/codeco/abandoned:t1";
  std::atomic<bool> cancel{false};
  StateDump dump = state.Dump();
  absl::StatusOr<PushedImage> pushed = store.Push(dump, Metadata(), tagged,
                                                  [&] { cancel.store(true); }, cancel);
  CHECK(absl::IsCancelled(pushed.status()));
  absl::StatusOr<PulledImage> pulled = store.Pull(tagged, state.scratch.path / "pulled", {});
  CHECK(absl::IsAborted(pulled.status()));
  CHECK(absl::StrContains(pulled.status().message(), "given up"));
  CHECK_FALSE(fs::exists(state.scratch.path / "pulled"));
  CHECK(absl::IsAborted(store.Inspect(tagged).status()));
}

TEST_CASE("an image that stays incomplete is given up after the stall timeout") {
  Registry registry;
  State state;
  // An incomplete image nobody finishes: its first layer, published, and nothing more.
  RegistryClient client(registry.Options());
  absl::StatusOr<ImageReference> tagged =
      ParseImageReference(registry.Address() + "/codeco/stalled:t1", "ref");
  REQUIRE(tagged.ok());
  const std::string tar_path = (state.scratch.path / "layer.tar").string();
  absl::StatusOr<Descriptor> layer =
      WriteLayer({{.name = "notes.txt", .source = state.dir() / "notes.txt"}}, tar_path,
                 absl::UnixEpoch());
  REQUIRE(layer.ok());
  REQUIRE(client.PushBlobFile(*tagged, tar_path, *layer).ok());
  absl::StatusOr<CheckpointImage> image =
      BuildCheckpointImage({*layer}, Metadata(), {{kIncompleteAnnotation, "true"}});
  REQUIRE(image.ok());
  REQUIRE(client.PushBlob(*tagged, image->config, image->config_descriptor).ok());
  absl::StatusOr<std::string> digest = client.PushManifest(*tagged, image->manifest);
  REQUIRE(digest.ok());

  RegistryImageStore store(registry.Options(),
                           ImageStoreOptions{.stall_timeout = absl::Milliseconds(200)});
  absl::StatusOr<PulledImage> pulled =
      store.Pull(tagged->ToString(), state.scratch.path / "pulled", {});
  CHECK(absl::IsDeadlineExceeded(pulled.status()));
  CHECK(absl::StrContains(pulled.status().message(), "its push stopped"));
  CHECK_FALSE(fs::exists(state.scratch.path / "pulled"));
  // Pinned by digest, an incomplete image is refused at once.
  ImageReference pinned = *tagged;
  pinned.tag.clear();
  pinned.digest = *digest;
  CHECK(absl::IsFailedPrecondition(
      store.Pull(pinned.ToString(), state.scratch.path / "pinned", {}).status()));
  // Marking it abandoned is what a restarted migrator does: pulls then stop at once.
  REQUIRE(store.Abandon(tagged->ToString()).ok());
  CHECK(absl::IsAborted(store.Pull(tagged->ToString(), state.scratch.path / "p2", {}).status()));
}

}  // namespace
}  // namespace codeco::checkpointer
