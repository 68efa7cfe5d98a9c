#pragma once
// A plain HTTP GET for tests that read /metrics, ALTO documents or other
// HTTP endpoints.

#include <string>

namespace codeco::testing {

/// What a GET answered.
struct HttpResponse {
  /// HTTP status code.
  long status = 0;
  /// Content-Type header ("" when absent).
  std::string content_type;
  /// The body.
  std::string body;
};

/// GETs `url`; fails the current Catch2 test when no answer arrives.
HttpResponse HttpGet(const std::string& url);

}  // namespace codeco::testing
