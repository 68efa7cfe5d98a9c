#include "checkpointer/server/checkpointer_metrics.h"

#include <string>

#include "absl/status/status.h"
#include "codeco/common/metrics.h"

namespace codeco::checkpointer {
namespace {

// Phase buckets, seconds: a small state moves in a fraction of a second, a
// large one over a slow link in minutes.
const prometheus::Histogram::BucketBoundaries kPhaseBuckets = {
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};

// "checkpointer.MigrateContainer" -> "MigrateContainer".
std::string KindLabel(const std::string& kind) {
  const size_t dot = kind.rfind('.');
  return dot == std::string::npos ? kind : kind.substr(dot + 1);
}

}  // namespace

CheckpointerMetrics::CheckpointerMetrics(prometheus::Registry& registry)
    : operations_(prometheus::BuildCounter()
                      .Name(MetricName("checkpointer", "operations_total"))
                      .Help("Finished checkpointer operations by kind (CreateCheckpoint, "
                            "RestoreCheckpoint, MigrateContainer) and status code")
                      .Register(registry)),
      phase_seconds_(prometheus::BuildHistogram()
                         .Name(MetricName("checkpointer", "phase_duration_seconds"))
                         .Help("Time of each phase of successful operations (checkpoint, build, "
                               "push, pull, restore, verify, cutover, total); phases overlap")
                         .Register(registry)),
      state_bytes_(prometheus::BuildCounter()
                       .Name(MetricName("checkpointer", "state_bytes_total"))
                       .Help("Bytes of container state checkpointed by successful operations")
                       .Register(registry)
                       .Add({})) {}

void CheckpointerMetrics::Record(const common::v1::Operation& op,
                                 const v1::Checkpoint& checkpoint) {
  const auto code = op.has_error() ? static_cast<absl::StatusCode>(op.error().code())
                                   : absl::StatusCode::kOk;
  operations_.Add({{"kind", KindLabel(op.kind())}, {"code", absl::StatusCodeToString(code)}})
      .Increment();
  if (op.has_error()) return;
  const v1::PhaseTimings& t = checkpoint.timings();
  const std::pair<const char*, int64_t> phases[] = {
      {"checkpoint", t.checkpoint_ns()}, {"build", t.build_ns()},   {"push", t.push_ns()},
      {"pull", t.pull_ns()},             {"restore", t.restore_ns()}, {"verify", t.verify_ns()},
      {"cutover", t.cutover_ns()},       {"total", t.total_ns()}};
  for (const auto& [phase, nanos] : phases) {
    if (nanos <= 0) continue;  // a phase this operation did not run
    phase_seconds_.Add({{"kind", KindLabel(op.kind())}, {"phase", phase}}, kPhaseBuckets)
        .Observe(static_cast<double>(nanos) / 1e9);
  }
  if (op.kind() != "checkpointer.RestoreCheckpoint" && checkpoint.state_bytes() > 0) {
    state_bytes_.Increment(static_cast<double>(checkpoint.state_bytes()));
  }
}

}  // namespace codeco::checkpointer
