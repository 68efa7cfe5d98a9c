#include "codeco/kube/kube_api.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codeco/common/excerpt.h"
#include "codeco/common/proto_util.h"
#include "nlohmann/json.hpp"

namespace codeco::kube {

using json = nlohmann::json;

absl::Status StatusFromKube(long http_status, std::string_view body, const std::string& what) {
  std::string detail;
  std::string reason;
  const json status = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (status.is_object() && JsonString(status, "kind") == "Status") {
    reason = JsonString(status, "reason");
    detail = JsonString(status, "message");
    const json& causes = JsonMember(JsonMember(status, "details"), "causes");
    if (causes.is_array()) {
      std::vector<std::string> listed;
      for (const json& cause : causes) {
        const std::string field = JsonString(cause, "field");
        const std::string message = JsonString(cause, "message");
        if (message.empty() || detail.find(message) != std::string::npos) continue;
        listed.push_back(field.empty() ? message : absl::StrCat(field, ": ", message));
      }
      if (!listed.empty()) absl::StrAppend(&detail, " (", absl::StrJoin(listed, "; "), ")");
    }
  } else {
    detail = PrintableExcerpt(absl::string_view(body.data(), body.size()));
  }
  const std::string message =
      absl::StrCat("kube-apiserver ", what, ": HTTP ", http_status, reason.empty() ? "" : " ",
                   reason, detail.empty() ? "" : ": ", detail);
  switch (http_status) {
    case 400:
    case 422:
      return absl::InvalidArgumentError(message);
    case 401:
      return absl::UnauthenticatedError(message);
    case 403:
      return absl::PermissionDeniedError(message);
    case 404:
      return absl::NotFoundError(message);
    case 409:
      return reason == "AlreadyExists" ? absl::AlreadyExistsError(message)
                                       : absl::AbortedError(message);
    case 410:
      return absl::OutOfRangeError(message);
    case 504:
      return absl::DeadlineExceededError(message);
    default:
      if (http_status == 429 || http_status >= 500) return absl::UnavailableError(message);
      return absl::UnknownError(message);
  }
}

std::string JsonString(const json& o, const char* key) {
  if (!o.is_object()) return "";
  auto it = o.find(key);
  if (it == o.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

const json& JsonMember(const json& o, const char* key) {
  static const json kNull;
  if (!o.is_object()) return kNull;
  auto it = o.find(key);
  return it == o.end() ? kNull : *it;
}

bool ParseKubeTime(std::string_view text, google::protobuf::Timestamp* out) {
  absl::Time t;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, std::string(text), &t, &error)) return false;
  *out = ToProtoTimestamp(t);
  return true;
}

std::string FormatKubeTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

}  // namespace codeco::kube
