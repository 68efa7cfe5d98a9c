#include "acm/server/policy_webhook.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "codeco/common/excerpt.h"
#include "codeco/common/http_client.h"
#include "codeco/common/status.h"

namespace codeco::acm {

absl::Status ValidatePolicyWebhookOptions(const PolicyWebhookOptions& options) {
  if (!absl::StartsWith(options.url, "http://") && !absl::StartsWith(options.url, "https://")) {
    return InvalidFieldError("acm.policy_webhook", "must be an http:// or https:// URL");
  }
  if (options.timeout < absl::Milliseconds(10) || options.timeout > absl::Seconds(30)) {
    return InvalidFieldError("acm.policy_webhook_timeout", "must be between 10ms and 30s");
  }
  if (options.max_response_bytes == 0) {
    return InvalidFieldError("max_response_bytes", "must be positive");
  }
  return absl::OkStatus();
}

HttpPolicyDecisionPort::HttpPolicyDecisionPort(PolicyWebhookOptions options)
    : options_(std::move(options)) {}

absl::StatusOr<std::string> HttpPolicyDecisionPort::Query(const std::string& request_json) const {
  HttpRequest post;
  post.method = "POST";
  post.url = options_.url;
  post.body = request_json;
  post.content_type = "application/json";
  post.timeout = options_.timeout;
  post.connect_timeout = options_.timeout;
  post.max_response_bytes = options_.max_response_bytes;
  post.ca_file = options_.ca_file;
  absl::StatusOr<HttpAnswer> sent = SendHttp(post, "policy webhook");
  if (!sent.ok()) {
    // The chain names the endpoint already: keep what happened.
    absl::string_view why = sent.status().message();
    absl::ConsumePrefix(&why, absl::StrCat("policy webhook ", options_.url, ": "));
    return absl::Status(sent.status().code(), why);
  }
  HttpAnswer& answer = *sent;
  if (answer.status != 200) {
    return absl::UnavailableError(
        absl::StrCat("answered HTTP ", answer.status, ": ", PrintableExcerpt(answer.body)));
  }
  return std::move(answer.body);
}

}  // namespace codeco::acm
