#pragma once
// A client of the Prometheus HTTP API (v1) over libcurl: instant queries
// (/api/v1/query) and range queries (/api/v1/query_range), answered as
// labelled samples. It is PDLC's TelemetrySource: TelemetryScraper pulls the
// series of CODECO's recording rules through it.
//
// Errors say what failed and carry Prometheus' own words:
//   UNAVAILABLE        cannot connect (refused, unresolvable), HTTP 5xx, errorType "unavailable"
//   DEADLINE_EXCEEDED  no answer within the timeout, errorType "timeout"
//   INVALID_ARGUMENT   bad PromQL or parameters (errorType "bad_data", "execution"), other 4xx
//   RESOURCE_EXHAUSTED the answer is over max_response_bytes or holds over max_points points
//   INTERNAL           the answer is not the JSON the API documents (a proxy's page, a
//                      truncated body, a value that is not a number)
// A Prometheus error answer ({"status":"error"}) is quoted as
// "<errorType>: <error>". NaN and infinite values are skipped and counted.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "pdlc/core/telemetry.h"

namespace codeco::pdlc {

/// How to reach Prometheus.
struct PrometheusClientOptions {
  /// Base URL, e.g. "http://127.0.0.1:9090" (a path prefix such as
  /// "/prometheus" is kept). Required.
  std::string base_url;
  /// Whole-request timeout. Default 10 s.
  absl::Duration timeout = absl::Seconds(10);
  /// Connection timeout. Default 3 s.
  absl::Duration connect_timeout = absl::Seconds(3);
  /// Largest answer accepted, bytes after decompression; larger ones are
  /// cut off while they arrive (the parsed document takes a few times this
  /// much memory for as long as a call runs). Default 16 MiB: about 80 000
  /// labelled samples.
  size_t max_response_bytes = size_t{16} << 20;
  /// Most points (instant samples, or range points over all series) one
  /// answer may hold. Default 2 000 000.
  size_t max_points = 2'000'000;
};

/// What a range query answered.
struct RangeQueryResult {
  /// One entry per series, in answer order.
  std::vector<LabelledSeries> series;
  /// Points left out because their value was NaN or infinite.
  size_t non_finite_skipped = 0;
  /// Warnings Prometheus returned with the answer.
  std::vector<std::string> warnings;
};

/// A parsed answer of the query API, before it is split by kind.
struct PrometheusAnswer {
  /// "vector", "matrix", "scalar" or "string".
  std::string result_type;
  /// Vector and scalar results (a scalar has no labels).
  InstantQueryResult instant;
  /// Matrix results.
  RangeQueryResult range;
};

/// Parses a query API answer: `http_status` and `body` as received. The
/// errors of the file comment; `what` (e.g. the URL) prefixes their
/// messages. Exposed for tests and fuzzing; the client calls it.
absl::StatusOr<PrometheusAnswer> ParsePrometheusAnswer(long http_status, const std::string& body,
                                                       size_t max_points, const std::string& what);

/// Prometheus HTTP API client. Each call makes its own connection; calls may
/// run on several threads at once.
class PrometheusClient final : public TelemetrySource {
 public:
  /// A client with `options`; Check() says whether they are usable.
  explicit PrometheusClient(PrometheusClientOptions options);

  /// OK when the options are usable: an http(s) base URL, positive timeouts
  /// and limits. INVALID_ARGUMENT naming the field otherwise.
  absl::Status Check() const;

  /// Evaluates `query` at `time_ms` (/api/v1/query). A scalar answer is one
  /// sample without labels; a string answer is INVALID_ARGUMENT.
  absl::StatusOr<InstantQueryResult> QueryInstant(const std::string& query,
                                                  int64_t time_ms) const override;

  /// Evaluates `query` at every `step` from `start_ms` to `end_ms`
  /// (/api/v1/query_range). Prometheus refuses more than 11 000 points per
  /// series (INVALID_ARGUMENT).
  absl::StatusOr<RangeQueryResult> QueryRange(const std::string& query, int64_t start_ms,
                                              int64_t end_ms, absl::Duration step) const;

  /// The options it was made with.
  const PrometheusClientOptions& options() const { return options_; }

 private:
  // POSTs the form `fields` to `path` and parses the answer.
  absl::StatusOr<PrometheusAnswer> Call(
      const std::string& path,
      const std::vector<std::pair<std::string, std::string>>& fields) const;

  PrometheusClientOptions options_;
};

}  // namespace codeco::pdlc
