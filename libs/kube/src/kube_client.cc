#include "codeco/kube/kube_client.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codeco/common/excerpt.h"
#include "codeco/common/logging.h"
#include "codeco/common/status.h"
#include "codeco/common/url.h"
#include "nlohmann/json.hpp"

namespace codeco::kube {
namespace {

using codeco::common::v1::WatchEventType;
using json = nlohmann::json;

// Errors of a watch that a new attempt may not meet again.
bool Retryable(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable ||
         s.code() == absl::StatusCode::kDeadlineExceeded || s.code() == absl::StatusCode::kInternal;
}

WatchEventType EventType(const std::string& type) {
  if (type == "ADDED") return codeco::common::v1::WATCH_EVENT_TYPE_ADDED;
  if (type == "MODIFIED") return codeco::common::v1::WATCH_EVENT_TYPE_MODIFIED;
  if (type == "DELETED") return codeco::common::v1::WATCH_EVENT_TYPE_DELETED;
  return codeco::common::v1::WATCH_EVENT_TYPE_UNSPECIFIED;
}

}  // namespace

std::string ResourceVersionOf(const json& object) {
  return JsonString(JsonMember(object, "metadata"), "resourceVersion");
}

KubeClient::KubeClient(KubeApi* api, Clock* clock, WaitFn wait, KubeClientOptions options)
    : api_(api), clock_(clock), wait_(std::move(wait)), options_(std::move(options)) {}

const absl::Status& KubeClient::ConsumerDone() {
  static const absl::Status kDone = absl::CancelledError("the consumer stopped the watch");
  return kDone;
}

absl::StatusOr<json> KubeClient::Send(const std::string& method, const std::string& path,
                                      const std::string& body, absl::Duration timeout,
                                      const std::string& what) const {
  ASSIGN_OR_RETURN(KubeAnswer answer, api_->Call(method, path, body, timeout));
  if (!Is2xx(answer.status)) return StatusFromKube(answer.status, answer.body, what);
  json parsed = json::parse(answer.body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return absl::InternalError(absl::StrCat(
        "kube-apiserver ", what, ": the answer is not JSON: ", PrintableExcerpt(answer.body)));
  }
  return parsed;
}

absl::StatusOr<json> KubeClient::Get(const std::string& path, const std::string& what) const {
  return Send("GET", path, "", options_.call_timeout, what);
}

absl::StatusOr<std::string> KubeClient::ListAll(
    const std::string& path, const std::function<absl::Status(const json&)>& item) const {
  const char* glue = absl::StrContains(path, '?') ? "&" : "?";
  std::string token;
  std::string version;
  do {
    const std::string page = absl::StrCat(path, glue, "limit=", options_.list_page,
                                          token.empty() ? "" : "&continue=", PercentEncode(token));
    ASSIGN_OR_RETURN(json list, Get(page, absl::StrCat("GET ", page)));
    const json& items = JsonMember(list, "items");
    if (items.is_array()) {
      for (const json& i : items) RETURN_IF_ERROR(item(i));
    }
    if (version.empty()) version = ResourceVersionOf(list);
    token = JsonString(JsonMember(list, "metadata"), "continue");
  } while (!token.empty());
  return version;
}

bool KubeClient::WaitUnlessCancelled(absl::Duration d,
                                     const std::function<bool()>& cancelled) const {
  // In slices, so a watch whose client left stops within one.
  constexpr absl::Duration kSlice = absl::Milliseconds(100);
  while (d > absl::ZeroDuration()) {
    if (cancelled && cancelled()) return false;
    const absl::Duration step = std::min(d, kSlice);
    if (!wait_(step)) return false;
    d -= step;
  }
  return !(cancelled && cancelled());
}

absl::Status KubeClient::Watch(const std::string& collection, const std::string& query,
                               const std::string& from_version, const OnEvent& translate,
                               const std::function<bool()>& cancelled) const {
  auto is_cancelled = [&] { return cancelled && cancelled(); };
  std::string version = from_version;
  if (version.empty()) {
    // The first state: list, then watch from the list's version (the
    // informer pattern; nothing falls between the two).
    absl::StatusOr<std::string> listed =
        ListAll(absl::StrCat(collection, query), [&](const json& item) {
          return translate(item, codeco::common::v1::WATCH_EVENT_TYPE_ADDED);
        });
    if (listed.status() == ConsumerDone()) return absl::OkStatus();
    RETURN_IF_ERROR(listed.status());
    version = *listed;
  }
  const std::string glue = query.empty() ? "?" : "&";
  const int64_t timeout_seconds =
      std::max<int64_t>(1, absl::ToInt64Seconds(options_.watch_timeout));
  Backoff backoff(options_.watch_backoff, static_cast<uint64_t>(absl::ToUnixNanos(clock_->Now())));
  int failures = 0;
  while (!is_cancelled()) {
    const std::string path =
        absl::StrCat(collection, query, glue,
                     "watch=true&allowWatchBookmarks=true&timeoutSeconds=", timeout_seconds,
                     "&resourceVersion=", PercentEncode(version));
    const std::string what = "GET " + path;
    absl::Status stream_error;
    bool consumer_done = false;
    int lines = 0;
    auto on_line = [&](std::string_view line) -> bool {
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) return true;
      ++lines;
      const json event = json::parse(line, nullptr, /*allow_exceptions=*/false);
      const std::string type = JsonString(event, "type");
      const json& object = JsonMember(event, "object");
      if (event.is_discarded() || type.empty() || !object.is_object()) {
        stream_error = absl::InternalError(absl::StrCat(
            "kube-apiserver ", what,
            ": a watch line that is not an event: ", PrintableExcerpt(std::string(line))));
        return false;
      }
      if (type == "ERROR") {
        const long code = JsonMember(object, "code").is_number_integer()
                              ? JsonMember(object, "code").get<long>()
                              : 500;
        stream_error = StatusFromKube(code, object.dump(), what);
        return false;
      }
      const std::string object_version = ResourceVersionOf(object);
      if (type == "BOOKMARK") {
        if (!object_version.empty()) version = object_version;
        return true;
      }
      const WatchEventType kind = EventType(type);
      if (kind == codeco::common::v1::WATCH_EVENT_TYPE_UNSPECIFIED) return true;
      absl::Status handed = translate(object, kind);
      if (handed == ConsumerDone()) {
        consumer_done = true;
        return false;
      }
      if (!object_version.empty()) version = object_version;
      failures = 0;
      return true;
    };
    absl::StatusOr<KubeAnswer> answer = api_->Stream(path, on_line, cancelled);
    if (consumer_done || is_cancelled()) return absl::OkStatus();
    if (!answer.ok()) {
      stream_error = answer.status();
    } else if (!Is2xx(answer->status)) {
      stream_error = StatusFromKube(answer->status, answer->body, what);
    }
    if (absl::IsOutOfRange(stream_error)) {
      return absl::OutOfRangeError(absl::StrCat("resource_version ", version,
                                                " is too old for kube-apiserver: list again (",
                                                stream_error.message(), ")"));
    }
    if (!stream_error.ok() && !Retryable(stream_error)) return stream_error;
    if (!stream_error.ok()) {
      if (++failures >= options_.watch_attempts) return stream_error;
      log::Warn("kube watch failed; resuming",
                {{"path", collection}, {"error", std::string(stream_error.message())}});
      if (!WaitUnlessCancelled(backoff.Delay(failures), cancelled)) return absl::OkStatus();
      continue;
    }
    // The server ended the stream (its timeout): resume where it stopped. A
    // server that ends streams at once gets them spaced out.
    if (lines == 0 && !WaitUnlessCancelled(backoff.policy().initial, cancelled)) {
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

}  // namespace codeco::kube
