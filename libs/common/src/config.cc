#include "codeco/common/config.h"

#include <algorithm>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codeco/common/status.h"
#include "yaml-cpp/yaml.h"

namespace codeco {
namespace {

// Config files are small; anything larger is a mistake (or an attack).
constexpr size_t kMaxConfigBytes = 1 << 20;

const char* TypeName(ConfigType type) {
  switch (type) {
    case ConfigType::kString: return "string";
    case ConfigType::kInt: return "int";
    case ConfigType::kBool: return "bool";
    case ConfigType::kDuration: return "duration";
    case ConfigType::kEnum: return "enum";
    case ConfigType::kAddress: return "host:port";
  }
  return "string";
}

[[noreturn]] void UndeclaredKey(const std::string& path) {
  std::cerr << "Config: read of undeclared key " << path << std::endl;
  std::abort();
}

// Returns an empty string when `value` is acceptable for `field`, else why not.
std::string CheckValue(const ConfigField& field, const std::string& value) {
  switch (field.type) {
    case ConfigType::kString:
      return "";
    case ConfigType::kInt: {
      int64_t v;
      return absl::SimpleAtoi(value, &v) ? "" : absl::StrCat("not an integer: \"", value, "\"");
    }
    case ConfigType::kBool:
      return value == "true" || value == "false"
                 ? ""
                 : absl::StrCat("not a bool (true|false): \"", value, "\"");
    case ConfigType::kDuration: {
      absl::Duration d;
      if (!absl::ParseDuration(value, &d)) {
        return absl::StrCat("not a duration (e.g. 250ms, 30s, 5m): \"", value, "\"");
      }
      return d < absl::ZeroDuration() ? "must not be negative" : "";
    }
    case ConfigType::kEnum:
      for (const auto& allowed : field.allowed_values) {
        if (value == allowed) return "";
      }
      return absl::StrCat("must be one of ", absl::StrJoin(field.allowed_values, "|"), ", got \"",
                          value, "\"");
    case ConfigType::kAddress: {
      size_t colon = value.rfind(':');
      if (colon == std::string::npos || colon == 0) {
        return absl::StrCat("not a host:port address: \"", value, "\"");
      }
      int port;
      if (!absl::SimpleAtoi(value.substr(colon + 1), &port) || port < 0 || port > 65535) {
        return absl::StrCat("bad port in \"", value, "\" (0-65535)");
      }
      return "";
    }
  }
  return "";
}

bool HasSection(const std::map<std::string, ConfigField>& fields, const std::string& path) {
  std::string prefix = path + ".";
  auto it = fields.lower_bound(prefix);
  return it != fields.end() && absl::StartsWith(it->first, prefix);
}

void Walk(const YAML::Node& node, const std::string& prefix,
          const std::map<std::string, ConfigField>& fields,
          std::map<std::string, std::string>* values, FieldErrors* errors) {
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) {
      errors->Add(prefix.empty() ? "<root>" : prefix, "keys must be plain strings");
      continue;
    }
    const std::string key = entry.first.Scalar();
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    const YAML::Node& value = entry.second;
    if (value.IsMap()) {
      if (HasSection(fields, path)) {
        Walk(value, path, fields, values, errors);
      } else if (fields.contains(path)) {
        errors->Add(path, absl::StrCat("expected a ", TypeName(fields.at(path).type),
                                       ", got a mapping"));
      } else {
        errors->Add(path, "unknown key");
      }
    } else if (value.IsSequence()) {
      errors->Add(path, fields.contains(path) ? "expected a scalar, got a list" : "unknown key");
    } else if (fields.contains(path)) {
      if (!value.IsNull()) (*values)[path] = value.Scalar();
    } else if (HasSection(fields, path)) {
      errors->Add(path, "expected a mapping");
    } else {
      errors->Add(path, "unknown key");
    }
  }
}

}  // namespace

const std::string& Config::GetString(const std::string& path) const {
  auto it = values_.find(path);
  if (it == values_.end()) UndeclaredKey(path);
  return it->second;
}

int64_t Config::GetInt(const std::string& path) const {
  int64_t v = 0;
  const std::string& text = GetString(path);
  if (!text.empty() && !absl::SimpleAtoi(text, &v)) UndeclaredKey(path);
  return v;
}

bool Config::GetBool(const std::string& path) const { return GetString(path) == "true"; }

absl::Duration Config::GetDuration(const std::string& path) const {
  absl::Duration d = absl::ZeroDuration();
  const std::string& text = GetString(path);
  if (!text.empty() && !absl::ParseDuration(text, &d)) UndeclaredKey(path);
  return d;
}

bool Config::Has(const std::string& path) const {
  auto it = values_.find(path);
  return it != values_.end() && !it->second.empty();
}

ConfigSchema& ConfigSchema::Add(ConfigField field) {
  if (fields_.contains(field.path)) {
    std::cerr << "ConfigSchema: key declared twice: " << field.path << std::endl;
    std::abort();
  }
  std::string path = field.path;
  fields_.emplace(std::move(path), std::move(field));
  return *this;
}

absl::StatusOr<Config> ConfigSchema::Load(
    const std::string& yaml_text, const std::map<std::string, std::string>& overrides) const {
  FieldErrors errors;
  std::map<std::string, std::string> values;
  if (yaml_text.size() > kMaxConfigBytes) {
    return InvalidFieldError("<file>", absl::StrCat("config is ", yaml_text.size(),
                                                    " bytes, more than the ", kMaxConfigBytes,
                                                    " allowed"));
  }
  try {
    YAML::Node root = YAML::Load(yaml_text);
    if (root.IsMap()) {
      Walk(root, "", fields_, &values, &errors);
    } else if (!root.IsNull()) {
      errors.Add("<root>", "a config file must be a mapping of keys");
    }
  } catch (const YAML::Exception& e) {
    return InvalidFieldError(absl::StrCat("<line ", e.mark.line + 1, ">"),
                             absl::StrCat("invalid YAML: ", e.msg));
  }
  for (const auto& [path, value] : overrides) {
    if (!fields_.contains(path)) {
      errors.Add(path, "unknown key");
      continue;
    }
    values[path] = value;
  }
  Config config;
  for (const auto& [path, field] : fields_) {
    auto it = values.find(path);
    std::string value = it != values.end() ? it->second : field.default_value;
    if (value.empty()) {
      if (field.required) errors.Add(path, "required");
    } else if (std::string why = CheckValue(field, value); !why.empty()) {
      errors.Add(path, why);
    }
    config.values_[path] = value;
  }
  RETURN_IF_ERROR(errors.ToStatus());
  return config;
}

absl::StatusOr<Config> ConfigSchema::LoadFile(
    const std::string& file_path, const std::map<std::string, std::string>& overrides) const {
  std::string text;
  if (!file_path.empty()) {
    std::ifstream in(file_path, std::ios::binary);
    if (!in) return InvalidFieldError("--config", absl::StrCat("cannot read ", file_path));
    std::ostringstream buffer;
    buffer << in.rdbuf();
    text = buffer.str();
  }
  return Load(text, overrides);
}

std::string ConfigSchema::HelpText() const {
  std::string out;
  for (const auto& [path, field] : fields_) {
    std::string flag = path;
    std::replace(flag.begin(), flag.end(), '_', '-');
    absl::StrAppend(&out, "  --", flag, " (", TypeName(field.type));
    if (field.type == ConfigType::kEnum) {
      absl::StrAppend(&out, ": ", absl::StrJoin(field.allowed_values, "|"));
    }
    if (field.required) absl::StrAppend(&out, ", required");
    if (!field.default_value.empty()) absl::StrAppend(&out, ", default ", field.default_value);
    absl::StrAppend(&out, ")\n      ", field.help, "\n");
  }
  return out;
}

absl::StatusOr<ParsedFlags> ParseFlags(int argc, const char* const* argv,
                                       const ConfigSchema& schema) {
  ParsedFlags parsed;
  FieldErrors errors;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (!absl::StartsWith(arg, "--")) {
      errors.Add(arg, "unexpected argument (flags start with --)");
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (name == "help") {
      parsed.help = true;
      continue;
    }
    // Flags spell keys with '-', config files with '_'; sections use '.'.
    std::string key = name;
    std::replace(key.begin(), key.end(), '-', '_');
    auto take_value = [&]() -> bool {
      if (has_value) return true;
      if (i + 1 >= argc) {
        errors.Add("--" + name, "needs a value");
        return false;
      }
      value = argv[++i];
      return true;
    };
    if (key == "config") {
      if (take_value()) parsed.config_file = value;
    } else if (key == "set") {
      if (!take_value()) continue;
      size_t eq = value.find('=');
      if (eq == std::string::npos) {
        errors.Add("--set", absl::StrCat("expected path=value, got \"", value, "\""));
      } else {
        parsed.overrides[value.substr(0, eq)] = value.substr(eq + 1);
      }
    } else if (auto field = schema.fields().find(key); field != schema.fields().end()) {
      if (field->second.type == ConfigType::kBool && !has_value) {
        parsed.overrides[key] = "true";  // `--insecure` alone means true
      } else if (take_value()) {
        parsed.overrides[key] = value;
      }
    } else {
      errors.Add("--" + name, "unknown flag (see --help)");
    }
  }
  RETURN_IF_ERROR(errors.ToStatus());
  return parsed;
}

absl::Status CheckHostPort(absl::string_view field, absl::string_view value) {
  const size_t colon = value.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(value.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return InvalidFieldError(std::string(field),
                             absl::StrCat("want host:port with a port 1-65535, got \"",
                                          value.substr(0, 256), "\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, std::string>> ParseNamedAddresses(absl::string_view key,
                                                                       absl::string_view text,
                                                                       absl::string_view name_kind) {
  std::map<std::string, std::string> out;
  if (absl::StripAsciiWhitespace(text).empty()) return out;
  std::vector<std::string> entries = absl::StrSplit(text, ',');
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string entry(absl::StripAsciiWhitespace(entries[i]));
    std::vector<std::string> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    auto bad = [&](absl::string_view why) {
      return InvalidFieldError(std::string(key),
                               absl::StrCat("entry ", i + 1, " \"", entry, "\": ", why, " (want ",
                                            name_kind, "=host:port)"));
    };
    if (kv.size() != 2 || kv[0].empty() || kv[1].empty()) {
      return bad(absl::StrCat("not ", name_kind, "=host:port"));
    }
    const std::string& name = kv[0];
    if (name.size() > 63 || !std::all_of(name.begin(), name.end(), [](char c) {
          return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
        })) {
      return bad(absl::StrCat("the ", name_kind,
                              " name must be a DNS label (a-z, 0-9, '-', at most 63)"));
    }
    if (!CheckHostPort(key, kv[1]).ok()) return bad("the address needs a host and a port 1-65535");
    if (!out.emplace(kv[0], kv[1]).second) {
      return bad(absl::StrCat(name_kind, " ", kv[0], " listed twice"));
    }
  }
  return out;
}

}  // namespace codeco
