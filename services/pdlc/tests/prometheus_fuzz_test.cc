// A seeded mutation fuzzer for PDLC's Prometheus answer parser (the bytes a
// Prometheus, or whatever answers at its address, sends): thousands of
// corrupted variants of real answers must each parse or be refused with one
// of the documented codes, never crash, hang, hold more than max_points
// points or answer anything else.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "pdlc/server/prometheus_client.h"

namespace codeco::pdlc {
namespace {

// Answers of the shapes Prometheus gives (vector, matrix, scalar, string, error).
const std::vector<std::string>& Seeds() {
  static const std::vector<std::string> kSeeds = {
      R"({"status":"success","data":{"resultType":"vector","result":[)"
      R"({"metric":{"__name__":"instance:node_cpu:rate1m","cluster":"rennes","node":"worker-1"},"value":[1795734411.202,"0.139"]},)"
      R"({"metric":{"cluster":"rennes","node":"worker-2"},"value":[1795734411.202,"NaN"]}]}})",
      R"({"status":"success","data":{"resultType":"matrix","result":[)"
      R"({"metric":{"node":"vm-1"},"values":[[1795734400,"0.5"],[1795734405,"0.52"],[1795734410,"+Inf"]]},)"
      R"({"metric":{"node":"vm-2"},"values":[[1795734400,"1e-3"]]}]}})",
      R"({"status":"success","data":{"resultType":"scalar","result":[1795734411.2,"42"]}})",
      R"({"status":"success","data":{"resultType":"string","result":[1795734411.2,"hello"]}})",
      R"({"status":"error","errorType":"bad_data","error":"parse error at char 3: unexpected \"}\""})",
      R"({"status":"success","warnings":["too many series"],"data":{"resultType":"vector","result":[]}})",
  };
  return kSeeds;
}

bool Documented(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kInternal:
      return true;
    default:
      return false;
  }
}

TEST_CASE("mutated Prometheus answers parse or are refused with a documented code") {
  const std::string alphabet = "{}[]:,\"\\ 0123456789.eE+-naNIfmrstuv_";
  const long statuses[] = {200, 200, 200, 400, 422, 503, 302};
  constexpr size_t kMaxPoints = 16;
  std::mt19937 rng(20261126);
  int parsed = 0, refused = 0;
  for (int round = 0; round < 5000; ++round) {
    std::string body = Seeds()[rng() % Seeds().size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !body.empty(); ++e) {
      const size_t at = rng() % body.size();
      switch (rng() % 5) {
        case 0:
          body[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          body.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 2:
          body.erase(at, 1 + rng() % 6);
          break;
        case 3:
          body.resize(at);  // a truncated answer
          break;
        default:
          // A repeated stretch: more series or points than anyone asked for.
          body.insert(at, body.substr(at, std::min<size_t>(body.size() - at, 64)));
          break;
      }
    }
    const long status = statuses[rng() % std::size(statuses)];
    absl::StatusOr<PrometheusAnswer> answer = ParsePrometheusAnswer(status, body, kMaxPoints, "fuzz");
    INFO("status " << status << " body " << body);
    REQUIRE(Documented(answer.status().code()));
    if (answer.ok()) {
      ++parsed;
      size_t points = answer->instant.samples.size();
      for (const auto& series : answer->range.series) points += series.points.size();
      REQUIRE(points <= kMaxPoints);
    } else {
      ++refused;
      REQUIRE(std::string(answer.status().message()).find("fuzz") != std::string::npos);
    }
  }
  // Both outcomes were exercised.
  CHECK(parsed > 20);
  CHECK(refused > 100);
}

}  // namespace
}  // namespace codeco::pdlc
