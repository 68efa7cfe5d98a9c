#pragma once
// Percent-encoding for the services' outbound HTTP calls: query values,
// path segments and application/x-www-form-urlencoded bodies.

#include <string>
#include <string_view>

namespace codeco {

/// `text` with every byte but the RFC 3986 unreserved characters
/// (A-Z a-z 0-9 - . _ ~) written as %XX: safe as a query value, a path
/// segment or a form field.
std::string PercentEncode(std::string_view text);

}  // namespace codeco
