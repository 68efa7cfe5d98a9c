#include "checkpointer/image/registry_image_store.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <fstream>
#include <set>
#include <system_error>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "codeco/common/status.h"

namespace codeco::checkpointer {
namespace {

namespace fs = std::filesystem;

constexpr size_t kCopyChunk = size_t{1} << 20;

// Largest layer pulled into memory (checked, then unpacked from there);
// larger ones, which only other tools' images have, go through a file.
constexpr int64_t kInMemoryLayerBytes = int64_t{96} << 20;

// Smallest layer a state is cut into.
constexpr int64_t kMinLayerBytes = int64_t{1} << 20;
// What one more layer costs, in bytes moved in the same time: docker-registry
// takes about 40 ms for a layer's uploads and manifest, while a restore
// moves and loads about 200 MB/s (2-core VM, loopback).
constexpr int64_t kLayerCostBytes = int64_t{8} * 1000 * 1000;

// The entries of one layer.
using LayerPlan = std::vector<LayerEntry>;

// How the files of a state directory go into layers: files up to
// `layer_bytes` whole (several to a layer while they fit), larger ones
// split into parts of `layer_bytes`, one per layer.
struct Planned {
  /// The layers of the files, in order.
  std::vector<LayerPlan> layers;
  /// Names of the files split into parts.
  std::vector<std::string> split;
  /// Bytes of state per layer (also the size of a streamed file's parts).
  int64_t layer_bytes = 0;
  /// Bytes of the files.
  int64_t file_bytes = 0;
};

absl::StatusOr<Planned> PlanLayers(const fs::path& state_directory,
                                   const ImageStoreOptions& options, int64_t streamed_bytes) {
  struct File {
    std::string name;
    fs::path path;
    int64_t size;
  };
  std::vector<File> files;
  std::error_code error;
  for (fs::recursive_directory_iterator it(state_directory, error), end; !error && it != end;
       it.increment(error)) {
    if (!it->is_regular_file(error)) continue;
    const auto size = it->file_size(error);
    if (error) break;
    files.push_back(File{fs::relative(it->path(), state_directory).string(), it->path(),
                         static_cast<int64_t>(size)});
  }
  if (error) {
    return absl::InternalError(absl::StrCat("reading ", state_directory.string(), ": ",
                                            error.message()));
  }
  std::sort(files.begin(), files.end(),
            [](const File& a, const File& b) { return a.name < b.name; });
  Planned planned;
  for (const File& f : files) planned.file_bytes += f.size;
  const int64_t total = planned.file_bytes + streamed_bytes;
  // n layers cost n registry round trips and leave 1/n of the state to load
  // after the push ends: n = sqrt(total / kLayerCostBytes) balances the two.
  const int64_t most = std::max<int64_t>(1, options.layer_bytes);
  const int64_t balanced = static_cast<int64_t>(
      std::sqrt(static_cast<double>(total) * static_cast<double>(kLayerCostBytes)));
  const int64_t layer_bytes =
      std::clamp<int64_t>(balanced, std::min<int64_t>(most, kMinLayerBytes), most);
  planned.layer_bytes = layer_bytes;
  std::vector<std::string>& split = planned.split;
  std::vector<LayerPlan> layers;
  LayerPlan current;
  int64_t current_bytes = 0;
  auto flush = [&] {
    if (!current.empty()) layers.push_back(std::move(current));
    current.clear();
    current_bytes = 0;
  };
  for (const File& f : files) {
    if (f.size > layer_bytes) {
      flush();
      split.push_back(f.name);
      int index = 0;
      for (int64_t offset = 0; offset < f.size; offset += layer_bytes, ++index) {
        layers.push_back({LayerEntry{.name = PartName(f.name, index), .source = f.path,
                                     .offset = offset,
                                     .length = std::min(layer_bytes, f.size - offset)}});
      }
      continue;
    }
    if (current_bytes + f.size > layer_bytes) flush();
    current.push_back(LayerEntry{.name = f.name, .source = f.path});
    current_bytes += f.size;
  }
  flush();
  planned.layers = std::move(layers);
  return planned;
}

// Bytes of the tar of `entries`: a header and padded contents each, and
// the two end blocks.
size_t TarSize(const LayerPlan& entries) {
  size_t size = 2 * 512;
  std::error_code error;
  for (const LayerEntry& e : entries) {
    const int64_t bytes =
        e.length >= 0 ? e.length : static_cast<int64_t>(fs::file_size(e.source, error)) - e.offset;
    size += 512 + (static_cast<size_t>(std::max<int64_t>(0, bytes)) + 511) / 512 * 512;
  }
  return size;
}

// Builds the layers of a dump, in order, on its own thread into two
// buffers that take turns (reused, so no fresh pages per layer): the planned
// layers of its files, then the parts of its streamed file as its bytes
// arrive. Next() waits for the next one, Release() hands its buffer back for
// the one after.
class LayerBuilder {
 public:
  /// A built layer (its bytes and descriptor, or why it could not be
  /// built), or the end of the layers.
  struct Slot {
    std::string tar;
    absl::StatusOr<Descriptor> layer = absl::UnknownError("not built");
    bool end = false;
    bool ready = false;
  };

  /// Builds `plan`, then the parts of `stream` (when set) named after
  /// `streamed_file`, each of up to `part_bytes`.
  LayerBuilder(const std::vector<LayerPlan>& plan, const std::string& streamed_file,
               StateStream* stream, int64_t part_bytes, absl::Time modified)
      : plan_(plan), streamed_file_(streamed_file), stream_(stream),
        part_bytes_(static_cast<size_t>(std::max<int64_t>(1, part_bytes))), modified_(modified),
        thread_([this] { Run(); }) {}
  ~LayerBuilder() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }

  Slot& Next() {
    Slot& slot = slots_[next_++ % 2];
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return slot.ready; });
    return slot;
  }
  void Release(Slot& slot) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      slot.ready = false;
    }
    changed_.notify_all();
  }
  /// Time spent building (reading the stream included).
  absl::Duration build_time() {
    std::lock_guard<std::mutex> lock(mu_);
    return build_time_;
  }
  /// Bytes of the streamed file read.
  int64_t streamed_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return streamed_bytes_;
  }

 private:
  // Waits for the buffer of layer `index` and fills it with `build`; false
  // once the builder is stopped.
  template <typename Build>
  bool Produce(size_t index, Build build) {
    Slot& slot = slots_[index % 2];
    {
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait(lock, [&] { return !slot.ready || stop_; });
      if (stop_) return false;
    }
    const absl::Time start = absl::Now();
    slot.tar.clear();
    slot.end = false;
    build(slot);
    {
      std::lock_guard<std::mutex> lock(mu_);
      build_time_ += absl::Now() - start;
      slot.ready = true;
    }
    changed_.notify_all();
    return true;
  }

  void Run() {
    size_t index = 0;
    auto append_to = [](Slot& slot) {
      return [&slot](absl::string_view bytes) {
        slot.tar.append(bytes.data(), bytes.size());
        return true;
      };
    };
    for (const LayerPlan& layer : plan_) {
      const bool going = Produce(index++, [&](Slot& slot) {
        slot.tar.reserve(TarSize(layer));
        slot.layer = WriteLayerTo(layer, modified_, append_to(slot));
      });
      if (!going) return;
    }
    for (int part = 0; stream_ != nullptr; ++part) {
      // Up to part_bytes of the stream (a short read is not its end).
      part_.resize(part_bytes_);
      size_t filled = 0;
      absl::Status read = absl::OkStatus();
      while (filled < part_.size()) {
        absl::StatusOr<size_t> n = stream_->Read(part_.data() + filled, part_.size() - filled);
        if (!n.ok()) {
          read = absl::Status(n.status().code(), absl::StrCat("reading ", streamed_file_, ": ",
                                                               n.status().message()));
          break;
        }
        if (*n == 0) break;
        filled += *n;
      }
      part_.resize(filled);
      {
        std::lock_guard<std::mutex> lock(mu_);
        streamed_bytes_ += static_cast<int64_t>(filled);
      }
      // The file has at least one part, even when empty.
      if (read.ok() && filled == 0 && part > 0) break;
      const bool going = Produce(index++, [&](Slot& slot) {
        if (!read.ok()) {
          slot.layer = read;
          return;
        }
        slot.tar.reserve(filled + 3 * 512 + 512);
        slot.layer = WriteLayerTo({LayerEntry{.name = PartName(streamed_file_, part),
                                              .contents = &part_}},
                                  modified_, append_to(slot));
      });
      if (!going || !read.ok()) return;
    }
    Produce(index, [](Slot& slot) { slot.end = true; });
  }

  const std::vector<LayerPlan>& plan_;
  const std::string streamed_file_;
  StateStream* const stream_;
  const size_t part_bytes_;
  const absl::Time modified_;
  std::string part_;  // the part of the stream being packed (builder thread only)
  Slot slots_[2];
  size_t next_ = 0;
  std::mutex mu_;
  std::condition_variable changed_;
  bool stop_ = false;
  absl::Duration build_time_;
  int64_t streamed_bytes_ = 0;
  std::thread thread_;  // last: starts once the rest is ready
};

// The file and part number an entry name of a split file stands for, when
// it is one ("dump.rdb.part-00003" of split file "dump.rdb").
bool SplitPart(const std::string& name, const std::set<std::string>& split, std::string& file,
               int& index) {
  const size_t at = name.rfind(".part-");
  if (at == std::string::npos || name.size() - at != 6 + 5) return false;
  if (!split.count(name.substr(0, at))) return false;
  if (!absl::SimpleAtoi(name.substr(at + 6), &index)) return false;
  file = name.substr(0, at);
  return true;
}

// Reads the manifest `named` names. A registry may answer 5xx to a read
// racing the write of the same tag (docker-registry does): a few quick
// retries ride that out; a registry that stays down fails.
absl::StatusOr<std::string> ReadManifest(RegistryClient& client, const ImageReference& named,
                                         absl::Duration pause) {
  absl::StatusOr<std::string> text = client.PullManifest(named);
  for (int retry = 0; retry < 5 && absl::IsUnavailable(text.status()); ++retry) {
    absl::SleepFor(pause * (retry + 1));
    text = client.PullManifest(named);
  }
  return text;
}

// An istream over bytes held elsewhere (no copy).
class ViewStream : public std::istream {
 public:
  explicit ViewStream(const std::string& bytes) : std::istream(&buffer_) {
    char* begin = const_cast<char*>(bytes.data());
    buffer_.Point(begin, begin + bytes.size());
  }

 private:
  struct Buffer : std::streambuf {
    void Point(char* begin, char* end) { setg(begin, begin, end); }
  } buffer_;
};

bool Marked(const ParsedManifest& manifest, const char* annotation) {
  auto it = manifest.annotations.find(annotation);
  return it != manifest.annotations.end() && it->second == "true";
}

}  // namespace

absl::StatusOr<PushedImage> RegistryImageStore::Push(StateDump& dump,
                                                     const CheckpointMetadata& metadata,
                                                     const std::string& reference,
                                                     const std::function<void()>& published,
                                                     const std::atomic<bool>& cancel) {
  ASSIGN_OR_RETURN(ImageReference tagged, ParseImageReference(reference, "target_repository"));
  if (tagged.tag.empty()) {
    return InvalidFieldError("target_repository", "an image is pushed under a tag");
  }
  RegistryClient client(registry_);
  RETURN_IF_ERROR(client.Check());
  StateStream* stream = dump.streamed_file.empty() ? nullptr : dump.stream.get();
  if (!dump.streamed_file.empty() && stream == nullptr) {
    return absl::InternalError(absl::StrCat("the dump names ", dump.streamed_file,
                                            " as streamed but has no stream"));
  }
  ASSIGN_OR_RETURN(Planned planned,
                   PlanLayers(dump.directory, options_,
                              stream != nullptr ? std::max<int64_t>(0, dump.bytes) : 0));
  const std::vector<LayerPlan>& plan = planned.layers;
  std::vector<std::string>& split = planned.split;
  if (plan.empty() && stream == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("the driver wrote no file under ", dump.directory.string()));
  }
  // A streamed file always travels in parts: its size is known only at its end.
  if (stream != nullptr) split.push_back(dump.streamed_file);
  std::map<std::string, std::string> annotations;
  if (!split.empty()) annotations[kSplitFilesAnnotation] = absl::StrJoin(split, ",");
  PushedImage out;
  std::vector<Descriptor> pushed;
  bool published_any = false;
  // Pushes the manifest of the layers so far with `marks` set to "true".
  auto push_manifest = [&](std::vector<const char*> marks) -> absl::StatusOr<std::string> {
    std::map<std::string, std::string> with = annotations;
    for (const char* mark : marks) with[mark] = "true";
    ASSIGN_OR_RETURN(CheckpointImage image, BuildCheckpointImage(pushed, metadata, with));
    RETURN_IF_ERROR(client.PushBlob(tagged, image.config, image.config_descriptor).status());
    ASSIGN_OR_RETURN(std::string digest, client.PushManifest(tagged, image.manifest));
    out.size_bytes += image.config_descriptor.size;
    return digest;
  };
  // A push given up after publishing says so, so that a pull following it stops.
  auto give_up = [&](absl::Status status) {
    if (published_any) {
      absl::Status marked =
          push_manifest({kIncompleteAnnotation, kAbandonedAnnotation}).status();
      (void)marked;  // best effort: a pull stops at its stall timeout otherwise
    }
    return status;
  };
  // Layers are built on a second thread: building (and reading the stream
  // for) layer i+1 overlaps uploading layer i. A layer is published once the
  // next one is built, which is also when it is known not to be the last.
  LayerBuilder builder(plan, dump.streamed_file, stream, planned.layer_bytes, metadata.created);
  LayerBuilder::Slot* slot = &builder.Next();
  if (slot->end) {
    return absl::FailedPreconditionError("the dump holds no state to push");
  }
  for (;;) {
    if (cancel.load()) return give_up(absl::CancelledError("the push was given up"));
    if (!slot->layer.ok()) return give_up(slot->layer.status());
    absl::Time start = absl::Now();
    absl::Status sent = client.PushBlob(tagged, slot->tar, *slot->layer).status();
    if (sent.ok()) {
      out.size_bytes += slot->layer->size;
      pushed.push_back(*slot->layer);
    }
    builder.Release(*slot);
    out.push_time += absl::Now() - start;
    if (!sent.ok()) return give_up(sent);
    slot = &builder.Next();
    if (slot->end) break;
    start = absl::Now();
    sent = push_manifest({kIncompleteAnnotation}).status();
    out.push_time += absl::Now() - start;
    if (!sent.ok()) return give_up(sent);
    published_any = true;
    if (published) published();
  }
  out.build_time = builder.build_time();
  out.state_bytes = planned.file_bytes + builder.streamed_bytes();
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(CheckpointImage image, BuildCheckpointImage(pushed, metadata, annotations));
  absl::Status config = client.PushBlob(tagged, image.config, image.config_descriptor).status();
  if (!config.ok()) return give_up(config);
  absl::StatusOr<std::string> digest = client.PushManifest(tagged, image.manifest);
  out.push_time += absl::Now() - start;
  if (!digest.ok()) return give_up(digest.status());
  out.manifest_digest = *digest;
  out.size_bytes += image.config_descriptor.size + static_cast<int64_t>(image.manifest.size());
  out.layers = static_cast<int>(pushed.size());
  return out;
}

absl::StatusOr<CheckpointMetadata> RegistryImageStore::Inspect(const std::string& reference) {
  ASSIGN_OR_RETURN(ImageReference named, ParseImageReference(reference, "image_reference"));
  RegistryClient client(registry_);
  RETURN_IF_ERROR(client.Check());
  ASSIGN_OR_RETURN(std::string text, ReadManifest(client, named, options_.poll_interval));
  ASSIGN_OR_RETURN(ParsedManifest manifest, ParseManifest(text));
  if (Marked(manifest, kAbandonedAnnotation)) {
    return absl::AbortedError(absl::StrCat("the push of ", reference, " was given up"));
  }
  return CheckpointMetadataOf(manifest);
}

absl::StatusOr<PulledImage> RegistryImageStore::Pull(const std::string& reference,
                                                     const fs::path& directory,
                                                     const StreamedFile& streamed) {
  ASSIGN_OR_RETURN(ImageReference named, ParseImageReference(reference, "image_reference"));
  RegistryClient client(registry_);
  RETURN_IF_ERROR(client.Check());
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) {
    return absl::InternalError(absl::StrCat("creating ", directory.string(), ": ",
                                            error.message()));
  }
  // A layer too large for memory is fetched beside the directory.
  const fs::path scratch = directory.string() + ".layers";
  fs::remove_all(scratch, error);
  auto fail = [&](absl::Status status) {
    fs::remove_all(directory, error);
    fs::remove_all(scratch, error);
    return status;
  };
  fs::create_directories(scratch, error);
  if (error) return fail(absl::InternalError(absl::StrCat("creating ", scratch.string())));

  std::string buffer;  // the layer being read, when it fits in memory
  std::vector<Descriptor> done;
  std::map<std::string, int> next_part;  // split file -> the part expected next
  int64_t total = 0;
  bool streamed_seen = false;
  absl::Time grew = absl::Now();
  for (;;) {
    absl::StatusOr<std::string> text = ReadManifest(client, named, options_.poll_interval);
    if (!text.ok()) return fail(text.status());
    absl::StatusOr<ParsedManifest> manifest = ParseManifest(*text);
    if (!manifest.ok()) return fail(manifest.status());
    absl::StatusOr<CheckpointMetadata> metadata = CheckpointMetadataOf(*manifest);
    if (!metadata.ok()) return fail(metadata.status());
    if (Marked(*manifest, kAbandonedAnnotation)) {
      return fail(absl::AbortedError(absl::StrCat("the push of ", reference, " was given up")));
    }
    const bool incomplete = Marked(*manifest, kIncompleteAnnotation);
    if (incomplete && !named.digest.empty()) {
      return fail(absl::FailedPreconditionError(absl::StrCat(
          reference, " is an incomplete image (published while its push ran); pull its tag")));
    }
    std::set<std::string> split;
    if (auto it = manifest->annotations.find(kSplitFilesAnnotation);
        it != manifest->annotations.end()) {
      for (absl::string_view name : absl::StrSplit(it->second, ',', absl::SkipEmpty())) {
        split.insert(std::string(name));
      }
    }
    const std::vector<Descriptor>& layers = manifest->layers;
    bool same_start = layers.size() >= done.size();
    for (size_t i = 0; same_start && i < done.size(); ++i) {
      same_start = layers[i].digest == done[i].digest;
    }
    if (!same_start) {
      return fail(absl::DataLossError(absl::StrCat(
          reference, " changed while it was pulled (its layers are not the ones pulled so far)")));
    }
    for (size_t k = done.size(); k < layers.size(); ++k) {
      const Descriptor& layer = layers[k];
      total += layer.size;
      if (total > options_.max_state_bytes) {
        return fail(absl::ResourceExhaustedError(absl::StrCat(
            "the layers of ", reference, " hold more than ", options_.max_state_bytes,
            " bytes, the limit")));
      }
      // Each layer's digest is checked before anything of it is used: a
      // small one in memory, a large one (another tool's image) on disk.
      const fs::path layer_file = scratch / absl::StrCat("layer-", k, ".tar");
      const bool small = layer.size <= kInMemoryLayerBytes;
      if (small) {
        buffer.clear();  // keeps its capacity: no fresh pages per layer
        buffer.reserve(static_cast<size_t>(layer.size));
        absl::Status s = client.PullBlobTo(named, layer, [&](absl::string_view chunk) {
          buffer.append(chunk.data(), chunk.size());
          return true;
        });
        if (!s.ok()) return fail(s);
      } else if (absl::Status s = client.PullBlobToFile(named, layer, layer_file); !s.ok()) {
        return fail(s);
      }
      ViewStream memory_stream(buffer);
      std::ifstream file_stream;
      if (!small) file_stream.open(layer_file, std::ios::binary);
      std::istream& in = small ? static_cast<std::istream&>(memory_stream)
                               : static_cast<std::istream&>(file_stream);
      // Where the entry being read goes: the streamed file's writer, or a file.
      bool to_stream = false;
      std::ofstream out;
      fs::path out_path;
      LayerVisitor visit;
      visit.directory = [&](const std::string& name) -> absl::Status {
        fs::create_directories(directory / name, error);
        return absl::OkStatus();
      };
      visit.file = [&](const std::string& name, int64_t, uint32_t) -> absl::Status {
        std::string file = name;
        int index = 0;
        const bool part = SplitPart(name, split, file, index);
        if (part && index != next_part[file]) {
          return absl::DataLossError(absl::StrCat("layer ", k, " holds part ", index, " of ",
                                                  file, " where part ", next_part[file],
                                                  " was due"));
        }
        if (part) ++next_part[file];
        to_stream = !streamed.name.empty() && file == streamed.name;
        if (to_stream) {
          streamed_seen = true;
          return absl::OkStatus();
        }
        // A part is appended to the file it came from; a whole file replaces it.
        out_path = directory / file;
        fs::create_directories(out_path.parent_path(), error);
        out.open(out_path, std::ios::binary | (part ? std::ios::app : std::ios::trunc));
        if (!out) return absl::InternalError(absl::StrCat("cannot write ", out_path.string()));
        return absl::OkStatus();
      };
      visit.data = [&](absl::string_view bytes) -> absl::Status {
        if (to_stream) return streamed.write(bytes);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        return out ? absl::OkStatus()
                   : absl::InternalError(absl::StrCat("writing ", out_path.string()));
      };
      visit.end = [&]() -> absl::Status {
        if (to_stream) return absl::OkStatus();
        out.close();
        return out ? absl::OkStatus()
                   : absl::InternalError(absl::StrCat("writing ", out_path.string()));
      };
      absl::Status read = ReadLayer(in, options_.max_state_bytes, visit);
      file_stream.close();
      fs::remove(layer_file, error);
      if (!read.ok()) {
        return fail(absl::Status(read.code(), absl::StrCat("layer ", k, ": ", read.message())));
      }
      done.push_back(layer);
      grew = absl::Now();
    }
    if (!incomplete) {
      fs::remove_all(scratch, error);
      if (!streamed.name.empty() && !streamed_seen) {
        return fail(absl::FailedPreconditionError(
            absl::StrCat(reference, " holds no ", streamed.name, " to restore from")));
      }
      return PulledImage{.metadata = *std::move(metadata), .directory = directory,
                         .layer_bytes = total};
    }
    if (absl::Now() - grew > options_.stall_timeout) {
      return fail(absl::DeadlineExceededError(absl::StrCat(
          reference, " stayed incomplete for ", absl::FormatDuration(options_.stall_timeout),
          " without a new layer: its push stopped")));
    }
    absl::SleepFor(options_.poll_interval);
  }
}

absl::Status RegistryImageStore::Abandon(const std::string& reference) {
  ASSIGN_OR_RETURN(ImageReference named, ParseImageReference(reference, "image_reference"));
  RegistryClient client(registry_);
  RETURN_IF_ERROR(client.Check());
  absl::StatusOr<std::string> text = client.PullManifest(named);
  if (absl::IsNotFound(text.status())) return absl::OkStatus();
  RETURN_IF_ERROR(text.status());
  ASSIGN_OR_RETURN(ParsedManifest manifest, ParseManifest(*text));
  if (!Marked(manifest, kIncompleteAnnotation) || Marked(manifest, kAbandonedAnnotation)) {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(CheckpointMetadata metadata, CheckpointMetadataOf(manifest));
  std::map<std::string, std::string> annotations;
  for (const auto& [name, value] : manifest.annotations) {
    if (absl::StartsWith(name, kImageAnnotationPrefix)) annotations[name] = value;
  }
  annotations[kAbandonedAnnotation] = "true";
  ASSIGN_OR_RETURN(CheckpointImage image,
                   BuildCheckpointImage(manifest.layers, metadata, annotations));
  RETURN_IF_ERROR(client.PushBlob(named, image.config, image.config_descriptor).status());
  return client.PushManifest(named, image.manifest).status();
}

absl::Status RegistryImageStore::Delete(const std::string& reference) {
  ASSIGN_OR_RETURN(ImageReference named, ParseImageReference(reference, "image_reference"));
  RegistryClient client(registry_);
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
