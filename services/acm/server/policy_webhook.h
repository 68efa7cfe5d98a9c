#pragma once
// The admission chain's external policy source over HTTP: an OPA-compatible
// decision endpoint (OPA's Data API, `POST /v1/data/<path>`), asked with
// `{"input": ...}` and answering `{"result": ...}` (docs/policies.md).

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "acm/core/admission.h"

namespace codeco::acm {

/// Where the endpoint is and how long to wait for it.
struct PolicyWebhookOptions {
  /// The decision's URL, e.g. "http://127.0.0.1:8181/v1/data/codeco/admit".
  std::string url;
  /// Whole-call timeout: every apply waits at most this long for it.
  absl::Duration timeout = absl::Seconds(2);
  /// PEM CAs that sign an https endpoint's certificate ("" = the system's).
  std::string ca_file;
  /// Largest answer read.
  size_t max_response_bytes = size_t{1} << 20;
};

/// Checks `options`; INVALID_ARGUMENT naming the acm.policy_webhook* key.
absl::Status ValidatePolicyWebhookOptions(const PolicyWebhookOptions& options);

/// Posts each question to the endpoint; an answer other than 200 is an error
/// (no decision) that quotes the start of its body.
class HttpPolicyDecisionPort final : public PolicyDecisionPort {
 public:
  /// `options` must pass ValidatePolicyWebhookOptions.
  explicit HttpPolicyDecisionPort(PolicyWebhookOptions options);
  std::string Name() const override { return options_.url; }
  absl::StatusOr<std::string> Query(const std::string& request_json) const override;

 private:
  PolicyWebhookOptions options_;
};

}  // namespace codeco::acm
