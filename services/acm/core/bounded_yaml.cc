#include "acm/core/bounded_yaml.h"

#include <algorithm>
#include <exception>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"
#include "yaml-cpp/anchor.h"
#include "yaml-cpp/eventhandler.h"

namespace codeco::acm {
namespace {

// ---------------------------------------------------------------------------
// Pre-scan: bounds depth and the alias-expanded node count from parser
// events, before yaml-cpp builds (and expands) a tree.

struct ScanLimitExceeded : std::exception {
  std::string message;
  explicit ScanLimitExceeded(std::string m) : message(std::move(m)) {}
};

class BoundsScanner final : public YAML::EventHandler {
 public:
  explicit BoundsScanner(const YamlBounds& limits) : limits_(limits) {}

  int documents() const { return documents_; }

  void OnDocumentStart(const YAML::Mark&) override {
    if (++documents_ > 1) throw ScanLimitExceeded("exactly one YAML document expected");
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t anchor) override { Leaf(anchor); }
  void OnAlias(const YAML::Mark&, YAML::anchor_t anchor) override {
    auto it = anchor_sizes_.find(anchor);
    Add(it == anchor_sizes_.end() ? 1 : it->second);
  }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                const std::string&) override {
    Leaf(anchor);
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(anchor);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(anchor);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Frame {
    YAML::anchor_t anchor;
    size_t nodes;
  };

  void Add(size_t n) {
    total_ += n;
    if (total_ > limits_.max_nodes) {
      throw ScanLimitExceeded(
          absl::StrCat("more than ", limits_.max_nodes, " YAML nodes once aliases are expanded"));
    }
    if (!stack_.empty()) stack_.back().nodes += n;
  }
  void Leaf(YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor) anchor_sizes_[anchor] = 1;
    Add(1);
  }
  void Open(YAML::anchor_t anchor) {
    if (static_cast<int>(stack_.size()) >= limits_.max_depth) {
      throw ScanLimitExceeded(absl::StrCat("nested deeper than ", limits_.max_depth, " levels"));
    }
    Add(1);
    stack_.push_back({anchor, 1});
  }
  void Close() {
    Frame frame = stack_.back();
    stack_.pop_back();
    // The frame's own node was already counted in its parent when opened.
    if (!stack_.empty()) stack_.back().nodes += frame.nodes - 1;
    if (frame.anchor != YAML::NullAnchor) anchor_sizes_[frame.anchor] = frame.nodes;
  }

  const YamlBounds& limits_;
  int documents_ = 0;
  size_t total_ = 0;
  std::vector<Frame> stack_;
  std::unordered_map<YAML::anchor_t, size_t> anchor_sizes_;
};

// The deepest nesting of flow collections ([ and {) outside quoted scalars
// and comments. yaml-cpp queues every token of a line that may still start a
// simple key, so "[[[[..." on one line costs memory per level before any
// event reaches BoundsScanner; this lexical pass refuses it first. A quote
// opens a quoted scalar only where a token may start.
int MaxFlowDepth(std::string_view text) {
  int depth = 0;
  int deepest = 0;
  char quote = 0;
  bool comment = false;
  char prev = '\n';
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (comment) {
      if (c == '\n') comment = false;
    } else if (quote != 0) {
      if (quote == '"' && c == '\\') {
        ++i;  // the escaped character
      } else if (c == quote) {
        quote = 0;
      }
    } else if (c == '#' && (prev == ' ' || prev == '\t' || prev == '\n' || prev == '\r')) {
      comment = true;
    } else if ((c == '"' || c == '\'') &&
               std::string_view(" \t\r\n[{,:-?").find(prev) != std::string_view::npos) {
      quote = c;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
    prev = c;
  }
  return deepest;
}

}  // namespace

absl::StatusOr<YAML::Node> LoadBoundedYaml(std::string_view yaml, const YamlBounds& bounds,
                                           const std::string& field) {
  if (yaml.size() > bounds.max_bytes) {
    return InvalidFieldError(
        field, absl::StrCat("larger than ", bounds.max_bytes, " bytes (", yaml.size(), ")"));
  }
  if (yaml.find('\0') != std::string_view::npos) {
    return InvalidFieldError(field, "contains a NUL byte");
  }
  if (MaxFlowDepth(yaml) > bounds.max_depth) {
    return InvalidFieldError(field,
                             absl::StrCat("nested deeper than ", bounds.max_depth, " levels"));
  }
  std::string text(yaml);
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    BoundsScanner scanner(bounds);
    while (parser.HandleNextDocument(scanner)) {
    }
    if (scanner.documents() == 0) return InvalidFieldError(field, "empty");
    return YAML::Load(text);
  } catch (const ScanLimitExceeded& e) {
    return InvalidFieldError(field, e.message);
  } catch (const YAML::Exception& e) {
    return InvalidFieldError(field, absl::StrCat("not valid YAML: line ", e.mark.line + 1,
                                                 " column ", e.mark.column + 1, ": ", e.msg));
  }
}

}  // namespace codeco::acm
