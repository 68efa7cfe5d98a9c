#include "checkpointer/image/oci_image.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "codeco/common/status.h"
#include "nlohmann/json.hpp"

namespace codeco::checkpointer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kBlock = 512;
constexpr size_t kChunk = size_t{1} << 20;  // bytes read or written at a time
constexpr int64_t kMaxTarFileSize = (int64_t{1} << 33) - 1;  // 11 octal digits

constexpr char kAnnotationPrefix[] = "io.kubernetes.cri-o.annotations.checkpoint.";
constexpr char kCreatedAnnotation[] = "org.opencontainers.image.created";

// A layer name that cannot escape the directory it is unpacked into.
absl::Status CheckEntryName(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("is empty");
  if (name.front() == '/') return absl::InvalidArgumentError("is absolute");
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part == "..") return absl::InvalidArgumentError("contains \"..\"");
  }
  if (name.find('\0') != std::string::npos) return absl::InvalidArgumentError("contains NUL");
  return absl::OkStatus();
}

// `value` as `width - 1` octal digits and a NUL.
void PutOctal(char* field, size_t width, uint64_t value) {
  std::string digits(width - 1, '0');
  for (size_t i = width - 1; i-- > 0 && value > 0; value >>= 3) {
    digits[i] = static_cast<char>('0' + (value & 7));
  }
  std::memcpy(field, digits.data(), width - 1);
  field[width - 1] = '\0';
}

// An octal field (NUL- or space-terminated); -1 when it is not octal.
int64_t GetOctal(const char* field, size_t width) {
  int64_t value = 0;
  size_t i = 0;
  while (i < width && field[i] == ' ') ++i;
  bool any = false;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (value > (int64_t{1} << 60)) return -1;
    value = value * 8 + (field[i] - '0');
    any = true;
  }
  if (!any) return -1;
  if (i < width && field[i] != '\0' && field[i] != ' ') return -1;
  return value;
}

uint32_t HeaderChecksum(const std::array<char, kBlock>& header) {
  uint32_t sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    // The checksum field (148..155) counts as spaces.
    sum += (i >= 148 && i < 156) ? static_cast<unsigned char>(' ')
                                 : static_cast<unsigned char>(header[i]);
  }
  return sum;
}

// A ustar header for a regular file `name` of `size` bytes.
absl::StatusOr<std::array<char, kBlock>> FileHeader(const std::string& name, int64_t size,
                                                    uint32_t mode, int64_t mtime) {
  std::array<char, kBlock> h{};
  // Names longer than 100 bytes go into prefix (155) + "/" + name (100).
  std::string prefix, base = name;
  if (name.size() > 100) {
    // The rightmost "/" that leaves a prefix of at most 155 bytes gives the
    // shortest base; if that base is still over 100, no split fits.
    const size_t cut = name.rfind('/', 155);
    if (cut == std::string::npos || cut == 0 || name.size() - cut - 1 > 100) {
      return absl::InvalidArgumentError("is too long for a tar header (100 + 155 bytes)");
    }
    prefix = name.substr(0, cut);
    base = name.substr(cut + 1);
  }
  if (size > kMaxTarFileSize) return absl::InvalidArgumentError("is larger than 8 GiB");
  std::memcpy(h.data(), base.data(), base.size());
  PutOctal(h.data() + 100, 8, mode & 07777);
  PutOctal(h.data() + 108, 8, 0);  // uid
  PutOctal(h.data() + 116, 8, 0);  // gid
  PutOctal(h.data() + 124, 12, static_cast<uint64_t>(size));
  PutOctal(h.data() + 136, 12, static_cast<uint64_t>(std::max<int64_t>(mtime, 0)));
  h[156] = '0';  // regular file
  std::memcpy(h.data() + 257, "ustar", 6);
  std::memcpy(h.data() + 263, "00", 2);
  std::memcpy(h.data() + 345, prefix.data(), prefix.size());
  const uint32_t sum = HeaderChecksum(h);
  PutOctal(h.data() + 148, 7, sum);  // six digits, NUL, then a space
  h[155] = ' ';
  return h;
}

// Hands what it is given to a sink while digesting it.
class DigestingWriter {
 public:
  explicit DigestingWriter(const std::function<bool(absl::string_view)>& sink) : sink_(sink) {}
  void Write(const char* data, size_t n) {
    if (!ok_) return;
    ok_ = sink_(absl::string_view(data, n));
    hash_.Update(absl::string_view(data, n));
    size_ += static_cast<int64_t>(n);
  }
  absl::StatusOr<Descriptor> Close() {
    if (!ok_) return absl::InternalError("writing the layer failed");
    return Descriptor{.media_type = kLayerMediaType, .digest = hash_.Finish(), .size = size_};
  }

 private:
  const std::function<bool(absl::string_view)>& sink_;
  bool ok_ = true;
  Sha256 hash_;
  int64_t size_ = 0;
};

json DescriptorJson(const Descriptor& d) {
  return json{{"mediaType", d.media_type}, {"digest", d.digest}, {"size", d.size}};
}

absl::StatusOr<Descriptor> DescriptorFrom(const json& j, const std::string& field) {
  if (!j.is_object()) return InvalidFieldError(field, "must be an object");
  Descriptor d;
  if (!j.contains("mediaType") || !j["mediaType"].is_string()) {
    return InvalidFieldError(field + ".mediaType", "is required");
  }
  d.media_type = j["mediaType"].get<std::string>();
  if (!j.contains("digest") || !j["digest"].is_string() ||
      !IsSha256Digest(j["digest"].get<std::string>())) {
    return InvalidFieldError(field + ".digest", "must be \"sha256:\" and 64 lowercase hex digits");
  }
  d.digest = j["digest"].get<std::string>();
  if (!j.contains("size") || !j["size"].is_number_integer() || j["size"].get<int64_t>() < 0) {
    return InvalidFieldError(field + ".size", "must be a non-negative integer");
  }
  d.size = j["size"].get<int64_t>();
  return d;
}

}  // namespace

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(context_), EVP_sha256(), nullptr);
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(context_)); }

void Sha256::Update(absl::string_view bytes) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(context_), bytes.data(), bytes.size());
}

std::string Sha256::Finish() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(context_), digest, &length);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "sha256:";
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 15]);
  }
  return out;
}

std::string DigestOf(absl::string_view bytes) {
  Sha256 hash;
  hash.Update(bytes);
  return hash.Finish();
}

absl::StatusOr<FileDigest> DigestFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  Sha256 hash;
  FileDigest out;
  std::string buffer(kChunk, '\0');
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize n = in.gcount();
    if (n <= 0) break;
    hash.Update(absl::string_view(buffer.data(), static_cast<size_t>(n)));
    out.size += n;
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat("reading ", path.string(), " failed"));
  out.digest = hash.Finish();
  return out;
}

bool IsSha256Digest(absl::string_view digest) {
  if (digest.size() != 7 + 64 || digest.substr(0, 7) != "sha256:") return false;
  return std::all_of(digest.begin() + 7, digest.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

absl::StatusOr<Descriptor> WriteLayer(const std::vector<LayerEntry>& entries, const fs::path& out,
                                      absl::Time modified) {
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  if (!file) return absl::InternalError(absl::StrCat("cannot write ", out.string()));
  absl::StatusOr<Descriptor> layer =
      WriteLayerTo(entries, modified, [&](absl::string_view bytes) {
        file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        return file.good();
      });
  file.close();
  if (layer.ok() && !file) return absl::InternalError(absl::StrCat("writing ", out.string()));
  return layer;
}

absl::StatusOr<Descriptor> WriteLayerTo(const std::vector<LayerEntry>& entries,
                                        absl::Time modified,
                                        const std::function<bool(absl::string_view)>& sink) {
  DigestingWriter writer(sink);
  const int64_t mtime = absl::ToUnixSeconds(modified);
  std::string buffer(kChunk, '\0');
  for (size_t i = 0; i < entries.size(); ++i) {
    const LayerEntry& e = entries[i];
    const std::string field = absl::StrCat("entries[", i, "]");
    if (absl::Status name = CheckEntryName(e.name); !name.ok()) {
      return InvalidFieldError(field + ".name", absl::StrCat("\"", e.name, "\" ", name.message()));
    }
    if (e.contents != nullptr) {
      // Bytes held in memory (a part of a streamed file).
      absl::StatusOr<std::array<char, kBlock>> header =
          FileHeader(e.name, static_cast<int64_t>(e.contents->size()), e.mode, mtime);
      if (!header.ok()) {
        return InvalidFieldError(field + ".name",
                                 absl::StrCat("\"", e.name, "\" ", header.status().message()));
      }
      writer.Write(header->data(), kBlock);
      writer.Write(e.contents->data(), e.contents->size());
      static const std::array<char, kBlock> kPad{};
      writer.Write(kPad.data(), (kBlock - e.contents->size() % kBlock) % kBlock);
      continue;
    }
    std::error_code error;
    const auto file_size = fs::file_size(e.source, error);
    if (error) {
      return InvalidFieldError(field + ".source",
                               absl::StrCat("cannot read ", e.source.string(), ": ", error.message()));
    }
    if (e.offset < 0 || static_cast<uint64_t>(e.offset) > file_size ||
        (e.length >= 0 && static_cast<uint64_t>(e.offset + e.length) > file_size)) {
      return InvalidFieldError(field + ".offset",
                               absl::StrCat("bytes ", e.offset, "+", e.length, " are outside ",
                                            e.source.string(), " (", file_size, " bytes)"));
    }
    const uint64_t size = e.length >= 0 ? static_cast<uint64_t>(e.length)
                                        : file_size - static_cast<uint64_t>(e.offset);
    absl::StatusOr<std::array<char, kBlock>> header =
        FileHeader(e.name, static_cast<int64_t>(size), e.mode, mtime);
    if (!header.ok()) {
      return InvalidFieldError(field + ".name",
                               absl::StrCat("\"", e.name, "\" ", header.status().message()));
    }
    writer.Write(header->data(), kBlock);
    std::ifstream in(e.source, std::ios::binary);
    in.seekg(e.offset);
    uint64_t left = size;
    while (left > 0 && in) {
      in.read(buffer.data(), static_cast<std::streamsize>(std::min<uint64_t>(left, kChunk)));
      const std::streamsize n = in.gcount();
      if (n <= 0) break;
      writer.Write(buffer.data(), static_cast<size_t>(n));
      left -= static_cast<uint64_t>(n);
    }
    if (left > 0) {
      return InvalidFieldError(field + ".source",
                               absl::StrCat(e.source.string(), " changed while it was packed"));
    }
    const size_t pad = (kBlock - size % kBlock) % kBlock;
    static const std::array<char, kBlock> kZeros{};
    writer.Write(kZeros.data(), pad);
  }
  static const std::array<char, 2 * kBlock> kEnd{};
  writer.Write(kEnd.data(), kEnd.size());
  return writer.Close();
}

absl::Status ReadLayer(std::istream& in, int64_t max_bytes, const LayerVisitor& visit) {
  int64_t total = 0;
  std::string buffer(kChunk, '\0');
  for (int64_t index = 0;; ++index) {
    std::array<char, kBlock> h{};
    in.read(h.data(), kBlock);
    if (in.gcount() != static_cast<std::streamsize>(kBlock)) {
      return absl::DataLossError(
          absl::StrCat("layer truncated at entry ", index, " (no end-of-archive blocks)"));
    }
    if (std::all_of(h.begin(), h.end(), [](char c) { return c == '\0'; })) break;
    const int64_t stored_sum = GetOctal(h.data() + 148, 8);
    if (stored_sum < 0 || static_cast<uint32_t>(stored_sum) != HeaderChecksum(h)) {
      return absl::DataLossError(absl::StrCat("entry ", index, ": bad header checksum"));
    }
    std::string name(h.data(), strnlen(h.data(), 100));
    const std::string prefix(h.data() + 345, strnlen(h.data() + 345, 155));
    if (!prefix.empty()) name = prefix + "/" + name;
    while (!name.empty() && name.back() == '/') name.pop_back();
    const char type = h[156];
    const std::string what = absl::StrCat("entry ", index, " \"", name, "\"");
    if (absl::Status ok = CheckEntryName(name); !ok.ok()) {
      return absl::DataLossError(absl::StrCat(what, ": name ", ok.message()));
    }
    const int64_t size = GetOctal(h.data() + 124, 12);
    if (size < 0) return absl::DataLossError(absl::StrCat(what, ": bad size field"));
    if (type == '5') {
      if (visit.directory) RETURN_IF_ERROR(visit.directory(name));
      continue;
    }
    if (type != '0' && type != '\0') {
      return absl::DataLossError(
          absl::StrCat(what, ": entry type '", std::string(1, type),
                       "' is not accepted (only regular files and directories)"));
    }
    total += size;
    if (total > max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("layer holds more than ", max_bytes, " bytes (at ", what, ")"));
    }
    const int64_t mode = GetOctal(h.data() + 100, 8);
    RETURN_IF_ERROR(visit.file(name, size, mode < 0 ? 0644 : static_cast<uint32_t>(mode & 0777)));
    int64_t left = size;
    while (left > 0) {
      in.read(buffer.data(), static_cast<std::streamsize>(std::min<int64_t>(left, kChunk)));
      const std::streamsize n = in.gcount();
      if (n <= 0) return absl::DataLossError(absl::StrCat(what, ": truncated"));
      RETURN_IF_ERROR(visit.data(absl::string_view(buffer.data(), static_cast<size_t>(n))));
      left -= n;
    }
    RETURN_IF_ERROR(visit.end());
    const int64_t pad = (kBlock - size % kBlock) % kBlock;
    in.ignore(pad);
    if (in.gcount() != pad) return absl::DataLossError(absl::StrCat(what, ": truncated"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ExtractLayer(const fs::path& layer,
                                                      const fs::path& directory,
                                                      int64_t max_bytes) {
  std::error_code error;
  if (fs::exists(directory, error)) {
    return absl::FailedPreconditionError(
        absl::StrCat(directory.string(), " exists; a layer is unpacked into a new directory"));
  }
  std::ifstream in(layer, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read layer ", layer.string()));
  fs::create_directories(directory, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", directory.string(), ": ", error.message()));
  }
  std::vector<std::string> written;
  std::ofstream out;
  fs::path target;
  uint32_t target_mode = 0644;
  LayerVisitor visit;
  visit.directory = [&](const std::string& name) -> absl::Status {
    fs::create_directories(directory / name, error);
    if (error) return absl::InternalError(absl::StrCat(name, ": ", error.message()));
    return absl::OkStatus();
  };
  visit.file = [&](const std::string& name, int64_t, uint32_t mode) -> absl::Status {
    target = directory / name;
    target_mode = mode;
    fs::create_directories(target.parent_path(), error);
    if (error) return absl::InternalError(absl::StrCat(name, ": ", error.message()));
    out.open(target, std::ios::binary | std::ios::trunc);
    if (!out) return absl::InternalError(absl::StrCat(name, ": cannot be written"));
    written.push_back(name);
    return absl::OkStatus();
  };
  visit.data = [&](absl::string_view bytes) -> absl::Status {
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return out ? absl::OkStatus() : absl::InternalError(target.string() + ": writing failed");
  };
  visit.end = [&]() -> absl::Status {
    out.close();
    if (!out) return absl::InternalError(target.string() + ": writing failed");
    fs::permissions(target, static_cast<fs::perms>(target_mode), error);
    return absl::OkStatus();
  };
  absl::Status read = ReadLayer(in, max_bytes, visit);
  if (!read.ok()) {
    // Nothing half-unpacked stays behind.
    out.close();
    fs::remove_all(directory, error);
    return read;
  }
  return written;
}

std::string PartName(const std::string& file, int index) {
  char digits[16];
  std::snprintf(digits, sizeof(digits), "%05d", index);
  return absl::StrCat(file, ".part-", digits);
}

absl::StatusOr<CheckpointImage> BuildCheckpointImage(
    const std::vector<Descriptor>& layers, const CheckpointMetadata& metadata,
    const std::map<std::string, std::string>& image_annotations) {
  if (metadata.container.empty()) return InvalidFieldError("container", "is required");
  if (layers.empty()) return InvalidFieldError("layers", "must list at least one layer");
  json diff_ids = json::array();
  json layer_list = json::array();
  for (size_t i = 0; i < layers.size(); ++i) {
    if (!IsSha256Digest(layers[i].digest)) {
      return InvalidFieldError(absl::StrCat("layers[", i, "].digest"),
                               "must be \"sha256:\" and 64 lowercase hex digits");
    }
    diff_ids.push_back(layers[i].digest);  // an uncompressed layer's diff_id is its digest
    layer_list.push_back(DescriptorJson(layers[i]));
  }
  const std::string created = absl::FormatTime(absl::RFC3339_sec, metadata.created,
                                               absl::UTCTimeZone());
  CheckpointImage image;
  image.layers = layers;
  json config = {{"created", created},
                 {"architecture", "amd64"},
                 {"os", "linux"},
                 {"config", json::object()},
                 {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}},
                 {"history", json::array({{{"created", created},
                                           {"created_by", "codeco-checkpointer"},
                                           {"comment", "checkpoint of " + metadata.container}}})}};
  image.config = config.dump();
  image.config_descriptor = Descriptor{.media_type = kConfigMediaType,
                                       .digest = DigestOf(image.config),
                                       .size = static_cast<int64_t>(image.config.size())};
  json annotations = {{kCheckpointNameAnnotation, metadata.container},
                      {kCreatedAnnotation, created}};
  auto annotate = [&](const char* key, const std::string& value) {
    if (!value.empty()) annotations[absl::StrCat(kAnnotationPrefix, key)] = value;
  };
  annotate("pod", metadata.pod);
  annotate("namespace", metadata.pod_namespace);
  annotate("rootfsImageName", metadata.rootfs_image);
  annotate("runtime.name", metadata.runtime);
  annotate("engine", metadata.engine);
  for (const auto& [name, value] : metadata.facts) {
    if (name.empty() || absl::StartsWith(name, kAnnotationPrefix) ||
        absl::StartsWith(name, kImageAnnotationPrefix) || annotations.contains(name)) {
      return InvalidFieldError(absl::StrCat("facts[", name, "]"),
                               "must be a non-empty name outside the checkpoint annotations");
    }
    annotations[name] = value;
  }
  for (const auto& [name, value] : image_annotations) {
    if (!absl::StartsWith(name, kImageAnnotationPrefix)) {
      return InvalidFieldError(absl::StrCat("image_annotations[", name, "]"),
                               absl::StrCat("must start with ", kImageAnnotationPrefix));
    }
    annotations[name] = value;
  }
  json manifest = {{"schemaVersion", 2},
                   {"mediaType", kManifestMediaType},
                   {"config", DescriptorJson(image.config_descriptor)},
                   {"layers", layer_list},
                   {"annotations", annotations}};
  image.manifest = manifest.dump();
  image.manifest_digest = DigestOf(image.manifest);
  return image;
}

absl::StatusOr<ParsedManifest> ParseManifest(absl::string_view text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return InvalidFieldError("manifest", "is not a JSON object");
  }
  if (!doc.contains("schemaVersion") || doc["schemaVersion"] != 2) {
    return InvalidFieldError("schemaVersion", "must be 2");
  }
  if (doc.contains("mediaType") && doc["mediaType"] != kManifestMediaType) {
    return InvalidFieldError("mediaType", absl::StrCat("must be ", kManifestMediaType));
  }
  ParsedManifest out;
  if (!doc.contains("config")) return InvalidFieldError("config", "is required");
  ASSIGN_OR_RETURN(out.config, DescriptorFrom(doc["config"], "config"));
  if (!doc.contains("layers") || !doc["layers"].is_array() || doc["layers"].empty()) {
    return InvalidFieldError("layers", "must list at least one layer");
  }
  for (size_t i = 0; i < doc["layers"].size(); ++i) {
    ASSIGN_OR_RETURN(Descriptor layer,
                     DescriptorFrom(doc["layers"][i], absl::StrCat("layers[", i, "]")));
    out.layers.push_back(std::move(layer));
  }
  if (doc.contains("annotations")) {
    if (!doc["annotations"].is_object()) {
      return InvalidFieldError("annotations", "must be an object of strings");
    }
    for (const auto& [key, value] : doc["annotations"].items()) {
      if (!value.is_string()) {
        return InvalidFieldError(absl::StrCat("annotations[\"", key, "\"]"), "must be a string");
      }
      out.annotations[key] = value.get<std::string>();
    }
  }
  return out;
}

absl::StatusOr<CheckpointMetadata> CheckpointMetadataOf(const ParsedManifest& manifest) {
  auto get = [&](const std::string& key) {
    auto it = manifest.annotations.find(key);
    return it == manifest.annotations.end() ? std::string() : it->second;
  };
  CheckpointMetadata m;
  m.container = get(kCheckpointNameAnnotation);
  if (m.container.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "not a checkpoint image: the manifest has no ", kCheckpointNameAnnotation, " annotation"));
  }
  const std::string prefix = kAnnotationPrefix;
  m.pod = get(prefix + "pod");
  m.pod_namespace = get(prefix + "namespace");
  m.rootfs_image = get(prefix + "rootfsImageName");
  m.runtime = get(prefix + "runtime.name");
  m.engine = get(prefix + "engine");
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, get(kCreatedAnnotation), &m.created, &error)) {
    m.created = absl::UnixEpoch();
  }
  for (const auto& [name, value] : manifest.annotations) {
    if (!absl::StartsWith(name, prefix) && !absl::StartsWith(name, kImageAnnotationPrefix) &&
        name != kCreatedAnnotation) {
      m.facts[name] = value;
    }
  }
  return m;
}

}  // namespace codeco::checkpointer
