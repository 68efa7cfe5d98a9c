#pragma once
// The clock port. Cores never read the system time directly: they take a
// Clock, so the same code runs in a real process (RealClock) and inside the
// CODEF simulator or a test under virtual time (SimulatedClock).

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace codeco {

/// A source of the current time.
class Clock {
 public:
  virtual ~Clock() = default;
  /// The current time.
  virtual absl::Time Now() const = 0;
};

/// Wall-clock time from the operating system.
class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  /// A process-wide instance (stateless, never destroyed).
  static RealClock& Default();
};

/// Virtual time that moves only when told to. Thread-safe.
class SimulatedClock final : public Clock {
 public:
  /// Starts at `start` (the Unix epoch by default).
  explicit SimulatedClock(absl::Time start = absl::UnixEpoch()) : now_(start) {}
  absl::Time Now() const override;
  /// Moves time forward by `delta`; a negative delta is a programming error.
  void Advance(absl::Duration delta);
  /// Jumps to `t`, which must not be earlier than Now().
  void SetTime(absl::Time t);

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace codeco
