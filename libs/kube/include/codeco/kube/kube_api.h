#pragma once
// The port through which codeco talks to one Kubernetes API server, and the
// small readers every caller of it shares: the status of a failed call, a
// field of a JSON object, a time in the API's format. Pure: no I/O.
//
// codeco-kubelms (the Kubernetes LMS) and codeco-kubeapps (CodecoApp objects
// forwarded to ACM) both call kube-apiserver through this port; http_kube_api.h
// implements it over HTTPS, tests with a stand-in kube-apiserver.

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/timestamp.pb.h"
#include "nlohmann/json_fwd.hpp"

namespace codeco::kube {

/// What kube-apiserver answered to one call.
struct KubeAnswer {
  /// HTTP status code.
  long status = 0;
  /// The body (for a stream: only of a non-2xx answer).
  std::string body;
};

/// Calls to one kube-apiserver (the port). Paths are absolute API paths with
/// their query ("/api/v1/nodes?limit=500"). Transport failures are errors;
/// any HTTP status is an answer.
class KubeApi {
 public:
  virtual ~KubeApi() = default;
  /// One request: `method` with a JSON `body` (may be empty), answered
  /// within `timeout`. A PATCH body is a JSON merge patch (RFC 7386).
  virtual absl::StatusOr<KubeAnswer> Call(const std::string& method, const std::string& path,
                                          const std::string& body, absl::Duration timeout) = 0;
  /// A watch (GET): each line of a 2xx answer goes to `on_line` as it
  /// arrives (false stops); returns when the server ends the stream,
  /// `on_line` stops it, or `cancelled` turns true (CANCELLED).
  virtual absl::StatusOr<KubeAnswer> Stream(const std::string& path,
                                            const std::function<bool(std::string_view)>& on_line,
                                            const std::function<bool()>& cancelled) = 0;
};

/// Whether an HTTP status is a success (2xx).
inline bool Is2xx(long http_status) { return http_status >= 200 && http_status < 300; }

/// The status for a non-2xx kube-apiserver answer: the Status object's
/// message, reason and causes when the body is one, else an excerpt of the
/// body. `what` names the call ("GET /api/v1/nodes/x"). 400 and 422 are
/// INVALID_ARGUMENT, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404
/// NOT_FOUND, 409 ALREADY_EXISTS (reason AlreadyExists) or ABORTED, 410
/// OUT_OF_RANGE, 429 and 5xx UNAVAILABLE (504 DEADLINE_EXCEEDED).
absl::Status StatusFromKube(long http_status, std::string_view body, const std::string& what);

/// The string at `key` of object `o`, or "" when `o` is not an object or the
/// value is absent or not a string.
std::string JsonString(const nlohmann::json& o, const char* key);

/// The member `key` of object `o`, or null when `o` is not an object or has
/// no such member.
const nlohmann::json& JsonMember(const nlohmann::json& o, const char* key);

/// Parses an RFC 3339 time as the API writes it ("2024-05-01T10:00:00Z");
/// false when `text` is not one.
bool ParseKubeTime(std::string_view text, google::protobuf::Timestamp* out);

/// The same time in the API's format (seconds, UTC: "2024-05-01T10:00:00Z").
std::string FormatKubeTime(absl::Time t);

}  // namespace codeco::kube
