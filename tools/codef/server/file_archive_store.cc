#include "file_archive_store.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace codeco::codef {
namespace {

namespace fs = std::filesystem;

constexpr char kMemberName[] = "codef-checkpoint.json";
constexpr size_t kBlock = 512;
// Archives hold a small JSON document; anything bigger is not ours.
constexpr uintmax_t kMaxArchiveBytes = 16 << 20;

// Writes `value` as zero-padded octal into `field` of `width` bytes (NUL-terminated).
void PutOctal(char* field, size_t width, uint64_t value) {
  std::string text = absl::StrFormat("%0*o", static_cast<int>(width - 1), value);
  std::memcpy(field, text.data(), width - 1);
  field[width - 1] = '\0';
}

}  // namespace

std::string EncodeCheckpointArchive(const ContainerCheckpoint& cp) {
  nlohmann::json json = {{"archive_path", cp.archive_path},
                         {"image_reference", cp.image_reference},
                         {"cluster", cp.cluster},
                         {"node", cp.node},
                         {"pod", cp.pod},
                         {"container", cp.container},
                         {"state", cp.state},
                         {"progress_ns", cp.progress_ns},
                         {"size_bytes", cp.size_bytes}};
  std::string body = json.dump();
  char header[kBlock] = {};
  std::strncpy(header, kMemberName, 100);
  PutOctal(header + 100, 8, 0644);
  PutOctal(header + 108, 8, 0);
  PutOctal(header + 116, 8, 0);
  PutOctal(header + 124, 12, body.size());
  PutOctal(header + 136, 12, 0);
  header[156] = '0';
  std::memcpy(header + 257, "ustar", 6);
  std::memcpy(header + 263, "00", 2);
  std::memset(header + 148, ' ', 8);
  unsigned checksum = 0;
  for (size_t i = 0; i < kBlock; ++i) checksum += static_cast<unsigned char>(header[i]);
  std::string sum = absl::StrFormat("%06o", checksum);
  std::memcpy(header + 148, sum.data(), 6);
  header[154] = '\0';
  header[155] = ' ';
  std::string out(header, kBlock);
  out += body;
  out.append((kBlock - body.size() % kBlock) % kBlock, '\0');
  out.append(2 * kBlock, '\0');  // end-of-archive marker
  return out;
}

absl::StatusOr<ContainerCheckpoint> DecodeCheckpointArchive(const std::string& bytes) {
  auto bad = [](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("not a codef checkpoint archive: ", why));
  };
  if (bytes.size() < kBlock) return bad("too short");
  const char* header = bytes.data();
  if (std::strncmp(header, kMemberName, 100) != 0) return bad("unexpected member name");
  if (std::memcmp(header + 257, "ustar", 5) != 0) return bad("not a ustar archive");
  unsigned checksum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    checksum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(header[i]);
  }
  uint64_t stored = 0;
  if (std::sscanf(std::string(header + 148, 8).c_str(), "%lo", &stored) != 1 ||
      stored != checksum) {
    return bad("bad header checksum");
  }
  uint64_t size = 0;
  if (std::sscanf(std::string(header + 124, 12).c_str(), "%lo", &size) != 1 ||
      size > bytes.size() - kBlock) {
    return bad("bad member size");
  }
  nlohmann::json json = nlohmann::json::parse(bytes.substr(kBlock, size), nullptr, false);
  if (json.is_discarded() || !json.is_object()) return bad("member is not a JSON object");
  ContainerCheckpoint cp;
  try {
    cp.archive_path = json.at("archive_path").get<std::string>();
    cp.image_reference = json.at("image_reference").get<std::string>();
    cp.cluster = json.at("cluster").get<std::string>();
    cp.node = json.at("node").get<std::string>();
    cp.pod = json.at("pod").get<std::string>();
    cp.container = json.at("container").get<std::string>();
    cp.state = json.at("state").get<std::string>();
    cp.progress_ns = json.at("progress_ns").get<int64_t>();
    cp.size_bytes = json.at("size_bytes").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    return bad(e.what());
  }
  return cp;
}

absl::StatusOr<std::string> FileCheckpointArchiveStore::Put(const ContainerCheckpoint& checkpoint) {
  fs::path dir = fs::path(dir_) / "checkpoints" / checkpoint.cluster;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", dir.string()));
  ContainerCheckpoint stored = checkpoint;
  stored.archive_path = fs::absolute(dir / fs::path(checkpoint.archive_path).filename()).string();
  fs::path tmp = stored.archive_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << EncodeCheckpointArchive(stored);
    out.close();
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", tmp.string()));
  }
  fs::rename(tmp, stored.archive_path, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot write ", stored.archive_path));
  absl::MutexLock lock(&mu_);
  if (!stored.image_reference.empty()) images_[stored.image_reference] = stored.archive_path;
  return stored.archive_path;
}

absl::StatusOr<ContainerCheckpoint> FileCheckpointArchiveStore::Get(const std::string& key) const {
  std::string path = key;
  {
    absl::MutexLock lock(&mu_);
    auto it = images_.find(key);
    if (it != images_.end()) path = it->second;
  }
  if (!fs::path(path).is_absolute()) {
    return absl::NotFoundError(absl::StrCat("no checkpoint archive or image ", key));
  }
  std::error_code ec;
  uintmax_t size = fs::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("no checkpoint archive ", path));
  if (size > kMaxArchiveBytes) {
    return absl::InvalidArgumentError(absl::StrCat("archive ", path, " is too large"));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read checkpoint archive ", path));
  return DecodeCheckpointArchive(ss.str());
}

}  // namespace codeco::codef
