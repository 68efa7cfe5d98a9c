#pragma once
// Configuration from a YAML file plus command-line flags, checked against a
// schema. Every key a service accepts is declared once in a ConfigSchema with
// its type, default and help; unknown keys, wrong types and bad values are
// rejected with their path (e.g. `tls.refresh_interval: not a duration`).
// Flags override the file.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace codeco {

/// The type of one configuration value.
enum class ConfigType { kString, kInt, kBool, kDuration, kEnum, kAddress };

/// One accepted configuration key.
struct ConfigField {
  /// Dotted path, e.g. "tls.ca_file".
  std::string path;
  /// Value type; values are validated against it.
  ConfigType type = ConfigType::kString;
  /// Default as text; empty with `required` false means "unset".
  std::string default_value;
  /// For kEnum: the accepted values.
  std::vector<std::string> allowed_values;
  /// True when a value must come from the file or a flag.
  bool required = false;
  /// One line saying what the key does (shown by --help).
  std::string help;
};

/// A validated configuration: typed reads of declared keys.
class Config {
 public:
  /// Reads a declared key; reading an undeclared key is a programming error.
  const std::string& GetString(const std::string& path) const;
  /// Reads a kInt key.
  int64_t GetInt(const std::string& path) const;
  /// Reads a kBool key.
  bool GetBool(const std::string& path) const;
  /// Reads a kDuration key ("30s", "250ms", "1h").
  absl::Duration GetDuration(const std::string& path) const;
  /// True when the key has a non-empty value.
  bool Has(const std::string& path) const;
  /// Every key with its value, sorted by path.
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  friend class ConfigSchema;
  std::map<std::string, std::string> values_;
};

/// The set of keys a program accepts.
class ConfigSchema {
 public:
  /// Declares a key. Declaring the same path twice is a programming error.
  ConfigSchema& Add(ConfigField field);
  /// Loads `yaml_text` (may be empty), applies `overrides` (path -> value, from
  /// flags) on top and validates everything. Errors name every bad path.
  absl::StatusOr<Config> Load(const std::string& yaml_text,
                              const std::map<std::string, std::string>& overrides) const;
  /// Like Load, reading the YAML from `file_path` (empty: no file).
  absl::StatusOr<Config> LoadFile(const std::string& file_path,
                                  const std::map<std::string, std::string>& overrides) const;
  /// The declared keys, sorted by path.
  const std::map<std::string, ConfigField>& fields() const { return fields_; }
  /// A help text listing every key, its type, default and help line.
  std::string HelpText() const;

 private:
  std::map<std::string, ConfigField> fields_;
};

/// What a command line asked for: a config file and key overrides.
struct ParsedFlags {
  /// Value of --config (empty when absent).
  std::string config_file;
  /// Overrides by config path, from `--some-key value`, `--some-key=value` and
  /// `--set path=value`; a bare boolean flag (`--insecure`) means "true".
  std::map<std::string, std::string> overrides;
  /// True when --help was given.
  bool help = false;
};

/// Parses `argv[1..argc)`. A flag `--foo-bar` maps to key `foo_bar`; it must
/// be declared in `schema` (or be --config, --set, --help). Positional
/// arguments are rejected.
absl::StatusOr<ParsedFlags> ParseFlags(int argc, const char* const* argv,
                                       const ConfigSchema& schema);

/// OK when `value` is host:port with a non-empty host and a port 1-65535;
/// INVALID_ARGUMENT naming `field` otherwise.
absl::Status CheckHostPort(absl::string_view field, absl::string_view value);

/// Parses a config value that names addresses, "name=host:port,name=host:port"
/// (spaces around entries ignored, empty text = none), as swm.cluster_endpoints,
/// acm.advertise and netma.peers use. `name_kind` says what a name is ("cluster",
/// "service") in errors. INVALID_ARGUMENT naming `key` and the bad entry for a
/// missing name, a port outside 1-65535 or a name given twice.
absl::StatusOr<std::map<std::string, std::string>> ParseNamedAddresses(absl::string_view key,
                                                                       absl::string_view text,
                                                                       absl::string_view name_kind);

}  // namespace codeco
