#pragma once
// One bounded HTTP(S) POST through libcurl, for the services' outbound calls
// to HTTP APIs (Prometheus, policy webhooks): a whole-call timeout, a cap on
// the answer's size that holds while it arrives, and transport failures as
// statuses that say what was called.

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace codeco {

/// What to send, and the limits of the call.
struct HttpPost {
  /// Absolute http:// or https:// URL.
  std::string url;
  /// The request body, sent as is.
  std::string body;
  /// Its Content-Type header.
  std::string content_type = "application/x-www-form-urlencoded";
  /// Whole-call timeout.
  absl::Duration timeout = absl::Seconds(10);
  /// Connection timeout (at most `timeout`).
  absl::Duration connect_timeout = absl::Seconds(3);
  /// Largest answer accepted, bytes after decompression; a larger one is cut
  /// off while it arrives.
  size_t max_response_bytes = size_t{16} << 20;
  /// PEM file of the CAs that sign an https server's certificate ("" = the
  /// system's).
  std::string ca_file;
};

/// What the server answered.
struct HttpAnswer {
  /// The HTTP status code.
  long status = 0;
  /// The body, at most `max_response_bytes`.
  std::string body;
};

/// Sends `post`; any HTTP status is an answer. Errors start with `what` and
/// the URL: RESOURCE_EXHAUSTED for an answer over the cap, DEADLINE_EXCEEDED
/// for no answer in time, UNAVAILABLE for a failed connection or transfer,
/// INVALID_ARGUMENT for a URL that is not http(s).
absl::StatusOr<HttpAnswer> SendHttpPost(const HttpPost& post, const std::string& what);

}  // namespace codeco
