#pragma once
// PDLC's background work on an MC: every refresh interval it pulls the
// recording rules' series from Prometheus into the telemetry store, reads
// the cluster's nodes from its LMS, and refreshes the advisor; on their own
// schedules it applies retention and retrains the forecaster on local data.

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "codeco/common/clock.h"
#include "codeco/common/server.h"
#include "pdlc/core/advisor.h"
#include "pdlc/core/telemetry.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace codeco::pdlc {

/// Where the cluster's nodes come from (the LMS in production).
class NodeInventorySource {
 public:
  virtual ~NodeInventorySource() = default;
  /// Every node with capacity, readiness, energy profile and carbon intensity.
  virtual absl::StatusOr<std::vector<NodeContext>> ListNodes() = 0;
};

/// The inventory from a codeco.lms.v1 LMS: capacity, READY condition, and the
/// node's energy profile as watts per busy core ((max - idle) / cores) and
/// carbon intensity (unknown when the profile says 0).
class LmsNodeInventory final : public NodeInventorySource {
 public:
  /// Reads the LMS behind `channel`, each call bounded by `timeout`.
  LmsNodeInventory(std::shared_ptr<grpc::Channel> channel, absl::Duration timeout);
  absl::StatusOr<std::vector<NodeContext>> ListNodes() override;

 private:
  std::shared_ptr<grpc::Channel> channel_;
  absl::Duration timeout_;
};

/// Schedules of the loop.
struct PdlcLoopOptions {
  /// Pull, inventory and refresh every this long (also the scrape-to-score bound).
  absl::Duration refresh_interval = absl::Seconds(15);
  /// Retrain the forecaster every this long (first when enough history exists).
  absl::Duration retrain_interval = absl::Hours(1);
  /// Apply `retention` every this long.
  absl::Duration retention_interval = absl::Minutes(10);
  /// What the store keeps.
  RetentionPolicy retention;
};

/// What one RunOnce did, for logs and tests.
struct LoopReport {
  /// Samples the pull stored (0 without a scraper).
  size_t pulled = 0;
  /// Nodes refreshed.
  size_t nodes = 0;
  /// Whether this pass trained the model, and how that went.
  bool trained = false;
  absl::Status training;
  /// Whether this pass applied retention.
  bool retained = false;
};

/// The loop. Start runs it on a thread of its own until Stop.
class PdlcLoop final : public BackgroundWork {
 public:
  /// A loop over `advisor` and `store`; `scraper` and `inventory` may be null
  /// (no pull; no nodes). Nothing is owned; all outlive the loop.
  PdlcLoop(Advisor& advisor, TelemetryStore& store, TelemetryScraper* scraper, NodeInventorySource* inventory,
           Clock& clock, PdlcLoopOptions options);
  ~PdlcLoop() override;

  /// Starts the thread.
  void Start();
  void Stop() override;
  /// One pass as of `now` (what the thread runs every refresh interval).
  LoopReport RunOnce(absl::Time now);

 private:
  Advisor& advisor_;
  TelemetryStore& store_;
  TelemetryScraper* scraper_;
  NodeInventorySource* inventory_;
  Clock& clock_;
  const PdlcLoopOptions options_;
  absl::Time next_training_ = absl::InfinitePast();
  absl::Time next_retention_ = absl::InfinitePast();
  int trainings_ = 0;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace codeco::pdlc
