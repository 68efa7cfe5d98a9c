#pragma once
// JSON calls, paged lists and resumable watches over the KubeApi port: what
// client-go's REST client and reflector do, for codeco's adapters. Pure logic
// with an injected clock and wait.

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "codeco/common/backoff.h"
#include "codeco/common/clock.h"
#include "codeco/common/v1/types.pb.h"
#include "codeco/kube/kube_api.h"
#include "nlohmann/json_fwd.hpp"

namespace codeco::kube {

/// How calls, lists and watches are made.
struct KubeClientOptions {
  /// Timeout of one ordinary API call.
  absl::Duration call_timeout = absl::Seconds(10);
  /// Each watch asks the server to end after this long (timeoutSeconds); the
  /// client then resumes from the last version seen.
  absl::Duration watch_timeout = absl::Minutes(5);
  /// Failed attempts in a row after which a watch gives up (UNAVAILABLE).
  int watch_attempts = 6;
  /// Waits between watch attempts.
  BackoffPolicy watch_backoff{absl::Milliseconds(200), absl::Seconds(5), 2.0, 0.2};
  /// Items per page of a list.
  int list_page = 500;
};

/// Waits `d`, or less when the caller is cancelled; returns false when it was.
using WaitFn = std::function<bool(absl::Duration d)>;

/// JSON over one kube-apiserver. Thread-safe (holds no state between calls).
class KubeClient {
 public:
  /// What a watch hands on: one object and its event type (ADDED for each
  /// object of the first list). An error ends the watch with it;
  /// ConsumerDone() ends it with OK.
  using OnEvent = std::function<absl::Status(const nlohmann::json& object,
                                             codeco::common::v1::WatchEventType type)>;

  /// Calls through `api` (must outlive this). `clock` seeds the backoff;
  /// `wait` spaces retries.
  KubeClient(KubeApi* api, Clock* clock, WaitFn wait, KubeClientOptions options);

  /// The status an OnEvent returns to end a watch cleanly.
  static const absl::Status& ConsumerDone();

  /// `method` `path` with `body`, answered within `timeout`: the parsed JSON
  /// of a 2xx answer, StatusFromKube of any other; `what` names the call in
  /// errors ("GET /api/v1/nodes").
  absl::StatusOr<nlohmann::json> Send(const std::string& method, const std::string& path,
                                      const std::string& body, absl::Duration timeout,
                                      const std::string& what) const;
  /// GET `path` within the call timeout.
  absl::StatusOr<nlohmann::json> Get(const std::string& path, const std::string& what) const;
  /// Every item of the (paged) list at `path` to `item`, in order; returns the
  /// list's resourceVersion. An error from `item` stops the list with it.
  absl::StatusOr<std::string> ListAll(
      const std::string& path,
      const std::function<absl::Status(const nlohmann::json&)>& item) const;
  /// Watches `collection` (an API path) with `query` ("" or "?labelSelector=..."):
  /// with an empty `from_version` it lists first, every item as ADDED, then
  /// watches from the list's version (nothing falls between the two). A
  /// stream the server ends is resumed from the last version seen, from an
  /// event or a bookmark; server failures are retried with backoff, up to
  /// watch_attempts in a row; a version too old is OUT_OF_RANGE ("list
  /// again"). Returns OK when `cancelled` (may be null) turns true or
  /// `on_event` returns ConsumerDone().
  absl::Status Watch(const std::string& collection, const std::string& query,
                     const std::string& from_version, const OnEvent& on_event,
                     const std::function<bool()>& cancelled) const;
  /// Waits `d` in short slices; false as soon as `cancelled` (may be null).
  bool WaitUnlessCancelled(absl::Duration d, const std::function<bool()>& cancelled) const;

  /// The options in use.
  const KubeClientOptions& options() const { return options_; }
  /// The port.
  KubeApi* api() const { return api_; }

 private:
  KubeApi* api_;
  Clock* clock_;
  WaitFn wait_;
  KubeClientOptions options_;
};

/// The resourceVersion in an object's metadata ("" when absent).
std::string ResourceVersionOf(const nlohmann::json& object);

}  // namespace codeco::kube
