// The checkpointer's domain metrics, read back as Prometheus serves them.

#include "checkpointer/server/checkpointer_metrics.h"

#include <catch2/catch.hpp>

#include <string>

#include "absl/strings/match.h"
#include "prometheus/text_serializer.h"

namespace codeco::checkpointer {
namespace {

std::string Scrape(prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

TEST_CASE("finished operations are counted by kind and code with their phase times") {
  prometheus::Registry registry;
  CheckpointerMetrics metrics(registry);

  common::v1::Operation migrated;
  migrated.set_kind("checkpointer.MigrateContainer");
  migrated.set_done(true);
  v1::Checkpoint moved;
  moved.set_state_bytes(1'000'000);
  moved.mutable_timings()->set_checkpoint_ns(30'000'000);
  moved.mutable_timings()->set_push_ns(2'000'000'000);
  moved.mutable_timings()->set_total_ns(2'500'000'000);
  metrics.Record(migrated, moved);

  common::v1::Operation failed;
  failed.set_kind("checkpointer.RestoreCheckpoint");
  failed.set_done(true);
  failed.mutable_error()->set_code(common::v1::ERROR_CODE_DATA_LOSS);
  metrics.Record(failed, v1::Checkpoint());

  const std::string text = Scrape(registry);
  INFO(text);
  CHECK(absl::StrContains(
      text, "codeco_checkpointer_operations_total{code=\"OK\",kind=\"MigrateContainer\"} 1"));
  CHECK(absl::StrContains(
      text,
      "codeco_checkpointer_operations_total{code=\"DATA_LOSS\",kind=\"RestoreCheckpoint\"} 1"));
  CHECK(absl::StrContains(text, "codeco_checkpointer_state_bytes_total 1000000"));
  CHECK(absl::StrContains(
      text,
      "codeco_checkpointer_phase_duration_seconds_count{kind=\"MigrateContainer\",phase=\"push\"} 1"));
  CHECK(absl::StrContains(
      text,
      "codeco_checkpointer_phase_duration_seconds_sum{kind=\"MigrateContainer\",phase=\"push\"} 2"));
  // Phases an operation did not run, and failed operations, observe nothing.
  CHECK_FALSE(absl::StrContains(text, "phase=\"pull\""));
  CHECK_FALSE(absl::StrContains(text, "kind=\"RestoreCheckpoint\",phase="));
}

}  // namespace
}  // namespace codeco::checkpointer
