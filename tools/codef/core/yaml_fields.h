#pragma once
// Helpers to read untrusted YAML into typed values while recording every
// problem with its field path: a map reader that reports unknown keys, and
// scalar readers for strings, numbers and Kubernetes quantities. Shared by the
// scenario parser and the usage-profile parser.

#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "codeco/common/status.h"
#include "yaml-cpp/yaml.h"

namespace codeco::codef {

/// `parent.key`, or `key` when parent is empty.
std::string JoinPath(const std::string& parent, const std::string& key);
/// `parent[index]`.
std::string IndexPath(const std::string& parent, size_t index);

/// Reads the keys of one YAML mapping; Finish() reports the keys nobody read.
class MapReader {
 public:
  /// Records an error at `path` when `node` is defined but not a mapping.
  MapReader(const YAML::Node& node, std::string path, FieldErrors* errors);
  /// The value at `key` (undefined when absent); marks the key as known.
  YAML::Node Get(const std::string& key);
  /// True when `key` is present; marks it as known.
  bool Has(const std::string& key);
  /// The path of `key` under this map.
  std::string PathOf(const std::string& key) const { return JoinPath(path_, key); }
  /// The path of this map.
  const std::string& path() const { return path_; }
  /// True when the node is a mapping.
  bool valid() const { return valid_; }
  /// Records "unknown key" for every key not read through Get or Has.
  void Finish();

 private:
  YAML::Node node_;
  std::string path_;
  FieldErrors* errors_;
  bool valid_ = false;
  std::set<std::string> known_;
};

/// A scalar's text; records "must be a string" at `path` otherwise.
bool ReadScalar(const YAML::Node& node, const std::string& path, FieldErrors* errors,
                std::string* out);
/// A finite number.
bool ReadDouble(const YAML::Node& node, const std::string& path, FieldErrors* errors, double* out);
/// A whole number.
bool ReadInt(const YAML::Node& node, const std::string& path, FieldErrors* errors, int64_t* out);
/// true or false.
bool ReadBool(const YAML::Node& node, const std::string& path, FieldErrors* errors, bool* out);
/// A value parsed from a scalar by `parse` (ParseCpuMillicores, ParseBytes, ...).
bool ReadParsed(const YAML::Node& node, const std::string& path, FieldErrors* errors,
                const std::function<absl::StatusOr<int64_t>(std::string_view)>& parse,
                int64_t* out);
/// A ratio from "5%" or "0.05".
bool ReadRatio(const YAML::Node& node, const std::string& path, FieldErrors* errors, double* out);

/// Parses YAML text, turning a syntax error into INVALID_ARGUMENT at `path`
/// with the line and column.
absl::StatusOr<YAML::Node> ParseYaml(const std::string& text, const std::string& path);

}  // namespace codeco::codef
