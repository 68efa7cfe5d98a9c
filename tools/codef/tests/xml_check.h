#pragma once
// A tiny XML well-formedness check for the tests of the SVG writer: balanced
// tags, quoted attributes, known entities only, no stray '<' or '&' in text.
// Not a general parser: no DTD, CDATA or comments (the writer emits none).

#include <cctype>
#include <map>
#include <string>
#include <vector>

namespace codeco::codef::testing {

/// What the check found.
struct XmlCheck {
  /// Empty when well-formed; else what is wrong and where.
  std::string error;
  /// Number of elements per tag name.
  std::map<std::string, int> elements;
  /// The attributes of every element, in document order: (tag, name -> value).
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> attributes;
};

/// Checks `text`.
inline XmlCheck CheckXml(const std::string& text) {
  XmlCheck out;
  std::vector<std::string> open;
  size_t i = 0;
  auto fail = [&](const std::string& why) {
    out.error = why + " at offset " + std::to_string(i);
    return out;
  };
  auto entity_ok = [&](size_t at) {
    for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"}) {
      if (text.compare(at, std::char_traits<char>::length(e), e) == 0) return true;
    }
    return false;
  };
  if (text.rfind("<?xml", 0) == 0) {
    i = text.find("?>");
    if (i == std::string::npos) return fail("unterminated XML declaration");
    i += 2;
  }
  bool seen_root = false;
  while (i < text.size()) {
    if (text[i] == '&') {
      if (!entity_ok(i)) return fail("bad entity");
      ++i;
      continue;
    }
    if (text[i] != '<') {
      if (text[i] == '>') return fail("stray '>'");
      if (open.empty() && !std::isspace(static_cast<unsigned char>(text[i]))) {
        return fail("text outside the root");
      }
      ++i;
      continue;
    }
    bool closing = i + 1 < text.size() && text[i + 1] == '/';
    size_t p = i + (closing ? 2 : 1);
    size_t name_start = p;
    while (p < text.size() && (std::isalnum(static_cast<unsigned char>(text[p])) ||
                               text[p] == '-' || text[p] == ':' || text[p] == '_')) {
      ++p;
    }
    std::string name = text.substr(name_start, p - name_start);
    if (name.empty()) return fail("tag without a name");
    if (closing) {
      if (open.empty() || open.back() != name) return fail("unbalanced </" + name + ">");
      open.pop_back();
      if (p >= text.size() || text[p] != '>') return fail("bad closing tag");
      i = p + 1;
      continue;
    }
    if (open.empty() && seen_root) return fail("second root element");
    seen_root = true;
    std::map<std::string, std::string> attrs;
    while (true) {
      while (p < text.size() && std::isspace(static_cast<unsigned char>(text[p]))) ++p;
      if (p >= text.size()) return fail("unterminated tag <" + name + ">");
      if (text[p] == '>' || (text[p] == '/' && p + 1 < text.size() && text[p + 1] == '>')) break;
      size_t a = p;
      while (p < text.size() && text[p] != '=' &&
             !std::isspace(static_cast<unsigned char>(text[p])) && text[p] != '>') {
        ++p;
      }
      std::string attr = text.substr(a, p - a);
      if (attr.empty() || p >= text.size() || text[p] != '=')
        return fail("attribute without value");
      ++p;
      if (p >= text.size() || (text[p] != '"' && text[p] != '\''))
        return fail("unquoted attribute");
      char quote = text[p++];
      size_t v = p;
      while (p < text.size() && text[p] != quote) {
        if (text[p] == '<') return fail("'<' in attribute " + attr);
        if (text[p] == '&' && !entity_ok(p)) return fail("bad entity in attribute " + attr);
        ++p;
      }
      if (p >= text.size()) return fail("unterminated attribute " + attr);
      if (attrs.count(attr) > 0) return fail("duplicate attribute " + attr);
      attrs[attr] = text.substr(v, p - v);
      ++p;
    }
    out.elements[name]++;
    out.attributes.push_back({name, attrs});
    if (text[p] == '/') {
      i = p + 2;
    } else {
      open.push_back(name);
      i = p + 1;
    }
  }
  if (!open.empty()) return fail("unclosed <" + open.back() + ">");
  if (!seen_root) return fail("no root element");
  return out;
}

}  // namespace codeco::codef::testing
