#pragma once
// Test doubles shared by the netma tests.

#include <functional>
#include <map>
#include <string>

#include "absl/synchronization/mutex.h"
#include "codeco/common/clock.h"
#include "netma/core/probe_scheduler.h"

namespace codeco::netma::testing {

/// A Prober that answers from a per-peer script and advances a SimulatedClock
/// by the RTT (plus the bulk time) so probe completion times are realistic.
/// Thread-safe: NetmaServer probes several peers at once, and tests change a
/// link while the server probes.
class ScriptedProber final : public Prober {
 public:
  /// What the link to one peer does.
  struct LinkBehavior {
    /// Round-trip time.
    absl::Duration rtt = absl::Milliseconds(10);
    /// Throughput of bulk transfers, bits per second.
    int64_t bps = 100'000'000;
    /// When true, every probe fails.
    bool down = false;
  };

  explicit ScriptedProber(SimulatedClock* clock) : clock_(clock) {}

  /// Sets the behavior of the link to `cluster`.
  void Set(const std::string& cluster, LinkBehavior behavior) {
    absl::MutexLock lock(&mu_);
    links_[cluster] = behavior;
  }

  absl::StatusOr<Result> Probe(const ProbeTask& task) override {
    LinkBehavior link;
    bool known = false;
    {
      absl::MutexLock lock(&mu_);
      ++probes_;
      auto it = links_.find(task.peer.cluster);
      if (it != links_.end()) {
        known = true;
        link = it->second;
      }
    }
    if (!known || link.down) {
      // SimulatedClock is thread-safe on its own.
      if (clock_ != nullptr) clock_->Advance(task.timeout);
      return absl::UnavailableError("peer " + task.peer.cluster + " unreachable");
    }
    Result r;
    r.rtt = link.rtt;
    r.wire_bytes = 100;
    if (task.bulk_bytes > 0) {
      r.bulk_bytes = task.bulk_bytes;
      r.bulk_duration = absl::Seconds(static_cast<double>(task.bulk_bytes) * 8 /
                                      static_cast<double>(link.bps));
      r.wire_bytes += task.bulk_bytes;
    }
    return r;
  }

  /// Probes run so far.
  int probes() const {
    absl::MutexLock lock(&mu_);
    return probes_;
  }

 private:
  SimulatedClock* clock_;
  mutable absl::Mutex mu_;
  std::map<std::string, LinkBehavior> links_ ABSL_GUARDED_BY(mu_);
  int probes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace codeco::netma::testing
