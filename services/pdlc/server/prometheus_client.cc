#include "pdlc/server/prometheus_client.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "codeco/common/excerpt.h"
#include "codeco/common/http_client.h"
#include "codeco/common/status.h"
#include "codeco/common/url.h"

namespace codeco::pdlc {
namespace {

using Json = nlohmann::json;

// The canonical code of a Prometheus errorType.
absl::StatusCode CodeOfErrorType(std::string_view type, long http_status) {
  if (type == "bad_data" || type == "execution") return absl::StatusCode::kInvalidArgument;
  if (type == "timeout") return absl::StatusCode::kDeadlineExceeded;
  if (type == "canceled") return absl::StatusCode::kCancelled;
  if (type == "unavailable") return absl::StatusCode::kUnavailable;
  if (type == "not_found") return absl::StatusCode::kNotFound;
  if (type == "internal") return absl::StatusCode::kInternal;
  return http_status >= 500 ? absl::StatusCode::kUnavailable : absl::StatusCode::kInvalidArgument;
}

// The canonical code of an HTTP error status without a Prometheus error body.
absl::StatusCode CodeOfHttpStatus(long status) {
  if (status == 401) return absl::StatusCode::kUnauthenticated;
  if (status == 403) return absl::StatusCode::kPermissionDenied;
  if (status == 404) return absl::StatusCode::kNotFound;
  if (status == 429 || status >= 500) return absl::StatusCode::kUnavailable;
  return absl::StatusCode::kInvalidArgument;
}

// Reads "[<unix seconds>, "<value>"]". Returns false for a malformed pair;
// sets *finite to false (and *value untouched) for NaN and infinities.
bool ParsePoint(const Json& pair, int64_t* time_ms, double* value, bool* finite) {
  if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number() || !pair[1].is_string()) {
    return false;
  }
  const double seconds = pair[0].get<double>();
  if (!std::isfinite(seconds) || seconds < 0 || seconds > 1e13) return false;
  *time_ms = std::llround(seconds * 1000.0);
  const std::string& text = pair[1].get_ref<const std::string&>();
  if (text == "NaN" || text == "+Inf" || text == "-Inf" || text == "Inf") {
    *finite = false;
    return true;
  }
  double parsed = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, parsed);
  if (ec == std::errc::result_out_of_range) {
    *finite = false;  // e.g. "1e999": infinite as a double
    return true;
  }
  if (ec != std::errc() || ptr != end || text.empty()) return false;
  *finite = std::isfinite(parsed);
  *value = parsed;
  return true;
}

// The labels of a result's "metric" object; false when it is not an object of strings.
bool ParseLabels(const Json& result, std::map<std::string, std::string>* labels) {
  auto metric = result.find("metric");
  if (metric == result.end()) return true;  // scalars and some expressions have none
  if (!metric->is_object()) return false;
  for (auto it = metric->begin(); it != metric->end(); ++it) {
    if (!it.value().is_string()) return false;
    (*labels)[it.key()] = it.value().get<std::string>();
  }
  return true;
}

// Formats Unix milliseconds as the API's seconds, "1700000000.123".
std::string ApiTime(int64_t time_ms) {
  return absl::StrFormat("%d.%03d", time_ms / 1000, time_ms % 1000);
}

}  // namespace

absl::StatusOr<PrometheusAnswer> ParsePrometheusAnswer(long http_status, const std::string& body,
                                                       size_t max_points, const std::string& what) {
  const Json doc = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  const bool is_object = !doc.is_discarded() && doc.is_object();
  const auto status = is_object ? doc.find("status") : doc.end();
  const bool has_status = is_object && status != doc.end() && status->is_string();

  if (has_status && status->get_ref<const std::string&>() == "error") {
    std::string type = "unknown";
    std::string message;
    if (auto t = doc.find("errorType"); t != doc.end() && t->is_string())
      type = t->get<std::string>();
    if (auto e = doc.find("error"); e != doc.end() && e->is_string())
      message = e->get<std::string>();
    return absl::Status(CodeOfErrorType(type, http_status),
                        absl::StrCat(what, ": prometheus error (HTTP ", http_status, ") ", type,
                                     ": ", PrintableExcerpt(message, 1000)));
  }
  if (http_status < 200 || http_status >= 300) {
    return absl::Status(CodeOfHttpStatus(http_status),
                        absl::StrCat(what, ": HTTP ", http_status, ": ", PrintableExcerpt(body)));
  }
  auto malformed = [&](absl::string_view why) {
    return absl::InternalError(absl::StrCat(
        what, ": malformed answer: ", why,
        doc.is_discarded() ? absl::StrCat(": ", PrintableExcerpt(body)) : std::string()));
  };
  if (doc.is_discarded()) return malformed("not JSON");
  if (!is_object) return malformed("not a JSON object");
  if (!has_status || status->get_ref<const std::string&>() != "success") {
    return malformed("\"status\" is not \"success\" or \"error\"");
  }
  auto data = doc.find("data");
  if (data == doc.end() || !data->is_object()) return malformed("no \"data\" object");
  auto type = data->find("resultType");
  auto result = data->find("result");
  if (type == data->end() || !type->is_string()) return malformed("no \"data.resultType\"");

  PrometheusAnswer answer;
  answer.result_type = type->get<std::string>();
  if (auto warnings = doc.find("warnings"); warnings != doc.end() && warnings->is_array()) {
    for (const Json& w : *warnings) {
      if (w.is_string()) answer.instant.warnings.push_back(w.get<std::string>());
    }
    answer.range.warnings = answer.instant.warnings;
  }
  if (result == data->end()) return malformed("no \"data.result\"");
  size_t points = 0;
  auto count_point = [&]() -> absl::Status {
    if (++points > max_points) {
      return absl::ResourceExhaustedError(
          absl::StrCat(what, ": the answer holds more than ", max_points, " points"));
    }
    return absl::OkStatus();
  };

  if (answer.result_type == "scalar") {
    LabelledSample sample;
    bool finite = true;
    if (!ParsePoint(*result, &sample.time_ms, &sample.value, &finite)) {
      return malformed("data.result: not a [time, \"value\"] pair");
    }
    if (finite) {
      answer.instant.samples.push_back(std::move(sample));
    } else {
      ++answer.instant.non_finite_skipped;
    }
    return answer;
  }
  if (answer.result_type == "string") return answer;
  if (!result->is_array()) return malformed("data.result: not an array");

  if (answer.result_type == "vector") {
    for (size_t i = 0; i < result->size(); ++i) {
      const Json& item = (*result)[i];
      RETURN_IF_ERROR(count_point());
      LabelledSample sample;
      bool finite = true;
      auto value = item.is_object() ? item.find("value") : item.end();
      if (!item.is_object() || !ParseLabels(item, &sample.labels) || value == item.end() ||
          !ParsePoint(*value, &sample.time_ms, &sample.value, &finite)) {
        return malformed(absl::StrCat("data.result[", i, "]: not {metric, value: [time, \"v\"]}"));
      }
      if (finite) {
        answer.instant.samples.push_back(std::move(sample));
      } else {
        ++answer.instant.non_finite_skipped;
      }
    }
    return answer;
  }
  if (answer.result_type == "matrix") {
    for (size_t i = 0; i < result->size(); ++i) {
      const Json& item = (*result)[i];
      LabelledSeries series;
      auto values = item.is_object() ? item.find("values") : item.end();
      if (!item.is_object() || !ParseLabels(item, &series.labels) || values == item.end() ||
          !values->is_array()) {
        return malformed(absl::StrCat("data.result[", i, "]: not {metric, values: [...]}"));
      }
      series.points.reserve(std::min(values->size(), max_points));
      for (size_t j = 0; j < values->size(); ++j) {
        RETURN_IF_ERROR(count_point());
        TimedValue point;
        bool finite = true;
        if (!ParsePoint((*values)[j], &point.time_ms, &point.value, &finite)) {
          return malformed(
              absl::StrCat("data.result[", i, "].values[", j, "]: not a [time, \"value\"] pair"));
        }
        if (finite) {
          series.points.push_back(point);
        } else {
          ++answer.range.non_finite_skipped;
        }
      }
      answer.range.series.push_back(std::move(series));
    }
    return answer;
  }
  return malformed(
      absl::StrCat("unknown resultType \"", PrintableExcerpt(answer.result_type, 40), "\""));
}

PrometheusClient::PrometheusClient(PrometheusClientOptions options) : options_(std::move(options)) {
  while (absl::EndsWith(options_.base_url, "/")) options_.base_url.pop_back();
}

absl::Status PrometheusClient::Check() const {
  if (!absl::StartsWith(options_.base_url, "http://") &&
      !absl::StartsWith(options_.base_url, "https://")) {
    return InvalidFieldError("base_url",
                             absl::StrCat("must start with http:// or https://, got \"",
                                          PrintableExcerpt(options_.base_url, 100), "\""));
  }
  if (options_.timeout <= absl::ZeroDuration()) {
    return InvalidFieldError("timeout", "must be positive");
  }
  if (options_.connect_timeout <= absl::ZeroDuration()) {
    return InvalidFieldError("connect_timeout", "must be positive");
  }
  if (options_.max_response_bytes == 0) {
    return InvalidFieldError("max_response_bytes", "must be positive");
  }
  if (options_.max_points == 0) return InvalidFieldError("max_points", "must be positive");
  return absl::OkStatus();
}

absl::StatusOr<PrometheusAnswer> PrometheusClient::Call(
    const std::string& path, const std::vector<std::pair<std::string, std::string>>& fields) const {
  RETURN_IF_ERROR(Check());
  HttpRequest post;
  post.method = "POST";
  post.url = options_.base_url + path;
  post.content_type = "application/x-www-form-urlencoded";
  for (const auto& [name, value] : fields) {
    absl::StrAppend(&post.body, post.body.empty() ? "" : "&", name, "=", PercentEncode(value));
  }
  post.timeout = options_.timeout;
  post.connect_timeout = options_.connect_timeout;
  post.max_response_bytes = options_.max_response_bytes;
  ASSIGN_OR_RETURN(HttpAnswer answer, SendHttp(post, "prometheus"));
  const std::string what = absl::StrCat("prometheus ", post.url);
  return ParsePrometheusAnswer(answer.status, answer.body, options_.max_points, what);
}

absl::StatusOr<InstantQueryResult> PrometheusClient::QueryInstant(const std::string& query,
                                                                  int64_t time_ms) const {
  if (query.empty()) return InvalidFieldError("query", "must not be empty");
  if (time_ms < 0) return InvalidFieldError("time_ms", "must not be negative");
  ASSIGN_OR_RETURN(PrometheusAnswer answer,
                   Call("/api/v1/query", {{"query", query}, {"time", ApiTime(time_ms)}}));
  if (answer.result_type != "vector" && answer.result_type != "scalar") {
    return absl::InvalidArgumentError(
        absl::StrCat("prometheus query \"", PrintableExcerpt(query, 100), "\": answered a ",
                     answer.result_type, ", not a vector or a scalar"));
  }
  return std::move(answer.instant);
}

absl::StatusOr<RangeQueryResult> PrometheusClient::QueryRange(const std::string& query,
                                                              int64_t start_ms, int64_t end_ms,
                                                              absl::Duration step) const {
  if (query.empty()) return InvalidFieldError("query", "must not be empty");
  if (start_ms < 0 || end_ms < start_ms) {
    return InvalidFieldError(
        "end_ms", absl::StrCat("must be >= start_ms >= 0, got [", start_ms, ", ", end_ms, "]"));
  }
  const int64_t step_ms = absl::ToInt64Milliseconds(step);
  if (step_ms <= 0) return InvalidFieldError("step", "must be at least 1 ms");
  ASSIGN_OR_RETURN(PrometheusAnswer answer,
                   Call("/api/v1/query_range", {{"query", query},
                                                {"start", ApiTime(start_ms)},
                                                {"end", ApiTime(end_ms)},
                                                {"step", ApiTime(step_ms)}}));
  if (answer.result_type != "matrix") {
    return absl::InvalidArgumentError(absl::StrCat("prometheus range query \"",
                                                   PrintableExcerpt(query, 100), "\": answered a ",
                                                   answer.result_type, ", not a matrix"));
  }
  return std::move(answer.range);
}

}  // namespace codeco::pdlc
