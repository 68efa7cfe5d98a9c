#pragma once
// Loading a YAML document from outside without letting it build a large
// tree: its size, its nesting depth and its node count once aliases are
// expanded are checked on the parser's events (and a lexical pass for flow
// collections) before yaml-cpp builds anything. The CAM parser and the
// policy bundle reader both load through it.

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace codeco::acm {

/// Bounds on one untrusted YAML document.
struct YamlBounds {
  /// Largest document, bytes.
  size_t max_bytes = size_t{1} << 20;
  /// Deepest nesting of mappings and sequences.
  int max_depth = 32;
  /// Most nodes, counted with every alias expanded.
  size_t max_nodes = 100000;
};

/// Parses `text`, which must be exactly one YAML document within `bounds`.
/// INVALID_ARGUMENT whose message starts with `field` (e.g. "document"):
/// larger than the bound, a NUL byte, nested too deep, too many nodes, more
/// than one document, empty, or not YAML (with its line and column).
absl::StatusOr<YAML::Node> LoadBoundedYaml(std::string_view text, const YamlBounds& bounds,
                                           const std::string& field);

}  // namespace codeco::acm
