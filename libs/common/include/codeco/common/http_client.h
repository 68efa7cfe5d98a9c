#pragma once
// Bounded HTTP(S) calls through libcurl, for the services' outbound calls to
// HTTP APIs (Prometheus, policy webhooks, kube-apiserver, kubelets): a
// whole-call timeout, a cap on the answer's size that holds while it arrives,
// TLS with a CA and an optional client certificate (files or PEM text), and
// transport failures as statuses that say what was called. SendHttp reads a
// whole answer; StreamHttpLines hands a long-lived answer (a watch) to the
// caller line by line.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace codeco {

/// What to send, and the limits of the call.
struct HttpRequest {
  /// "GET", "POST", "PUT", "PATCH" or "DELETE".
  std::string method = "GET";
  /// Absolute http:// or https:// URL.
  std::string url;
  /// The request body, sent as is (always for POST, PUT and PATCH; for other
  /// methods only when not empty).
  std::string body;
  /// Content-Type header of the body ("" = none sent).
  std::string content_type;
  /// Further headers, e.g. {"Accept", "application/json"} or
  /// {"Authorization", "Bearer ..."}.
  std::vector<std::pair<std::string, std::string>> headers;
  /// Whole-call timeout (for StreamHttpLines: the longest the stream lasts).
  absl::Duration timeout = absl::Seconds(10);
  /// Connection timeout (at most `timeout`).
  absl::Duration connect_timeout = absl::Seconds(3);
  /// Largest answer accepted, bytes after decompression; a larger one is cut
  /// off while it arrives. For StreamHttpLines: the largest line, and the
  /// largest non-2xx answer.
  size_t max_response_bytes = size_t{16} << 20;
  /// PEM file of the CAs that sign an https server's certificate. With
  /// neither this nor `ca_pem`, the system's CAs.
  std::string ca_file;
  /// The same CAs as PEM text (e.g. a kubeconfig's certificate-authority-data).
  std::string ca_pem;
  /// Client certificate and key for mutual TLS, as PEM files ...
  std::string client_cert_file;
  std::string client_key_file;
  /// ... or as PEM text (a kubeconfig's client-certificate-data / client-key-data).
  std::string client_cert_pem;
  std::string client_key_pem;
};

/// What the server answered.
struct HttpAnswer {
  /// The HTTP status code.
  long status = 0;
  /// The Content-Type header ("" when absent).
  std::string content_type;
  /// The body, at most `max_response_bytes` (for StreamHttpLines: only of a
  /// non-2xx answer; a 2xx body went to the line handler).
  std::string body;
};

/// Sends `request`; any HTTP status is an answer. Errors start with `what`
/// and the URL: RESOURCE_EXHAUSTED for an answer over the cap,
/// DEADLINE_EXCEEDED for no answer in time, UNAVAILABLE for a failed
/// connection, TLS handshake or transfer, INVALID_ARGUMENT for a URL that is
/// not http(s), an unknown method or a client certificate without its key.
absl::StatusOr<HttpAnswer> SendHttp(const HttpRequest& request, const std::string& what);

/// Handles one line of a streamed answer (without its '\n'); false stops
/// the stream (the call then returns the answer, OK).
using HttpLineHandler = std::function<bool(std::string_view line)>;

/// Sends `request` and, when the answer is 2xx, passes its body to `on_line`
/// one line at a time as it arrives (a last line without '\n' is passed
/// too); a non-2xx answer's body is returned whole in the answer instead.
/// `cancelled` (may be null) is polled at least every 100 ms; once it
/// returns true the stream ends with CANCELLED. Reaching `request.timeout`
/// mid-stream is DEADLINE_EXCEEDED; a line over `max_response_bytes` is
/// RESOURCE_EXHAUSTED; a server that closes the stream is the answer (OK).
/// Other errors as SendHttp.
absl::StatusOr<HttpAnswer> StreamHttpLines(const HttpRequest& request, const std::string& what,
                                           const HttpLineHandler& on_line,
                                           const std::function<bool()>& cancelled);

}  // namespace codeco
