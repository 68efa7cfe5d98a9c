#pragma once
// A plain HTTP GET for tests that read /metrics or other HTTP endpoints.

#include <string>

namespace codeco::testing {

/// The body of `url`; fails the current Catch2 test when the request fails.
std::string HttpGet(const std::string& url);

}  // namespace codeco::testing
