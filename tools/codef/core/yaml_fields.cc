#include "yaml_fields.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "codeco/common/quantity.h"

namespace codeco::codef {

std::string JoinPath(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : absl::StrCat(parent, ".", key);
}

std::string IndexPath(const std::string& parent, size_t index) {
  return absl::StrCat(parent, "[", index, "]");
}

MapReader::MapReader(const YAML::Node& node, std::string path, FieldErrors* errors)
    : node_(node), path_(std::move(path)), errors_(errors) {
  if (!node_.IsDefined() || node_.IsNull()) return;
  if (!node_.IsMap()) {
    errors_->Add(path_.empty() ? "(root)" : path_, "must be a mapping");
    return;
  }
  valid_ = true;
}

YAML::Node MapReader::Get(const std::string& key) {
  known_.insert(key);
  if (!valid_) return YAML::Node(YAML::NodeType::Undefined);
  const YAML::Node& const_node = node_;
  YAML::Node value = const_node[key];
  // A missing key yields an invalid node that throws on most calls; hand out
  // a plain undefined node instead.
  if (!value.IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
  return value;
}

bool MapReader::Has(const std::string& key) {
  YAML::Node value = Get(key);
  return value.IsDefined();
}

void MapReader::Finish() {
  if (!valid_) return;
  for (const auto& entry : node_) {
    std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "?";
    if (known_.count(key) == 0) errors_->Add(JoinPath(path_, key), "unknown key");
  }
}

bool ReadScalar(const YAML::Node& node, const std::string& path, FieldErrors* errors,
                std::string* out) {
  if (!node.IsScalar()) {
    errors->Add(path, "must be a scalar value");
    return false;
  }
  *out = node.Scalar();
  return true;
}

bool ReadDouble(const YAML::Node& node, const std::string& path, FieldErrors* errors, double* out) {
  std::string text;
  if (!ReadScalar(node, path, errors, &text)) return false;
  double value = 0;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) {
    errors->Add(path, absl::StrCat("not a number: \"", text, "\""));
    return false;
  }
  *out = value;
  return true;
}

bool ReadInt(const YAML::Node& node, const std::string& path, FieldErrors* errors, int64_t* out) {
  std::string text;
  if (!ReadScalar(node, path, errors, &text)) return false;
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    errors->Add(path, absl::StrCat("not a whole number: \"", text, "\""));
    return false;
  }
  *out = value;
  return true;
}

bool ReadBool(const YAML::Node& node, const std::string& path, FieldErrors* errors, bool* out) {
  std::string text;
  if (!ReadScalar(node, path, errors, &text)) return false;
  if (text == "true") {
    *out = true;
  } else if (text == "false") {
    *out = false;
  } else {
    errors->Add(path, absl::StrCat("not a bool (true|false): \"", text, "\""));
    return false;
  }
  return true;
}

bool ReadParsed(const YAML::Node& node, const std::string& path, FieldErrors* errors,
                const std::function<absl::StatusOr<int64_t>(std::string_view)>& parse,
                int64_t* out) {
  std::string text;
  if (!ReadScalar(node, path, errors, &text)) return false;
  absl::StatusOr<int64_t> value = parse(text);
  if (!value.ok()) {
    errors->Add(path, std::string(value.status().message()));
    return false;
  }
  *out = *value;
  return true;
}

bool ReadRatio(const YAML::Node& node, const std::string& path, FieldErrors* errors, double* out) {
  std::string text;
  if (!ReadScalar(node, path, errors, &text)) return false;
  absl::StatusOr<double> value = ParseRatio(text);
  if (!value.ok()) {
    errors->Add(path, std::string(value.status().message()));
    return false;
  }
  *out = *value;
  return true;
}

absl::StatusOr<YAML::Node> ParseYaml(const std::string& text, const std::string& path) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidFieldError(path, absl::StrCat("not valid YAML (line ", e.mark.line + 1,
                                                ", column ", e.mark.column + 1, "): ", e.msg));
  }
}

}  // namespace codeco::codef
