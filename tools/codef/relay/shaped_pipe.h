#pragma once
// The shaping core of the link emulator: one direction of one relayed
// connection. Bytes are pushed as they arrive; each chunk gets a release time
// from the link's current conditions:
//
//   departure = token bucket at the link's bandwidth (serialization delay)
//   release   = departure + one-way latency
//               + for each loss draw that hits: a retransmission timeout
//                 (max(min_retransmit_timeout, 2 x RTT), doubled per retry)
//   release   = max(release, previous chunk's release)   (a stream is in order)
//
// While the link is cut (or either end partitioned) nothing is released and
// chunks pushed meanwhile are held unscheduled; after healing they are
// scheduled from the heal time, and overdue chunks go at once. Pure logic:
// time comes from the injected Clock, randomness from a seeded generator, and
// the caller provides locking (one pipe is used under one mutex).

#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "codeco/common/clock.h"
#include "tools/codef/relay/link_table.h"

namespace codeco::codef {

/// Tunables of the shaping model.
struct ShapingOptions {
  /// Token bucket depth: bytes that may leave at once after an idle period.
  /// Default 16 KiB (one relay read).
  int64_t burst_bytes = 16 * 1024;
  /// Lower bound of the retransmission timeout. Default 200 ms (Linux TCP's
  /// minimum RTO).
  absl::Duration min_retransmit_timeout = absl::Milliseconds(200);
  /// A chunk is retransmitted at most this many times, so loss = 1 still
  /// delivers eventually. Default 6.
  int max_retransmissions = 6;
};

/// A token bucket: when do `bytes` offered at time `at` have left a link of
/// `rate_bps`? Departures are in order (never before the previous one).
class TokenBucket {
 public:
  /// Starts full (`burst_bytes` tokens).
  explicit TokenBucket(int64_t burst_bytes) : burst_bytes_(burst_bytes) {}
  /// The departure time of `bytes` offered at `at`; `rate_bps` 0 = unlimited.
  absl::Time Depart(int64_t bytes, absl::Time at, int64_t rate_bps);

 private:
  int64_t burst_bytes_;
  double tokens_ = -1;  // < 0: not started (full)
  absl::Time last_ = absl::InfinitePast();
};

/// One piece of a byte stream on its way through the pipe.
struct Chunk {
  /// The bytes (empty for the end-of-stream marker).
  std::string data;
  /// True for the marker that the sender closed its side.
  bool end_of_stream = false;
};

/// One direction (`from` -> `to`) of one relayed connection.
class ShapedPipe {
 public:
  /// `links` and `clock` must outlive the pipe; `seed` drives loss draws.
  ShapedPipe(const LinkTable& links, std::string from, std::string to, const Clock& clock,
             uint64_t seed, ShapingOptions options = {});

  /// Accepts bytes that arrived now.
  void Push(std::string data);
  /// Accepts the end of the stream (delivered after every earlier byte).
  void PushEndOfStream();
  /// When the next chunk may be released under the current conditions:
  /// InfiniteFuture when the pipe is empty or the link is cut.
  absl::Time NextRelease();
  /// Removes and returns, in order, every chunk due now (none while cut).
  std::vector<Chunk> PopDue();
  /// Bytes accepted and not yet released.
  int64_t buffered_bytes() const { return buffered_bytes_; }
  /// True when nothing is waiting.
  bool empty() const { return queue_.empty(); }

 private:
  struct Pending {
    Chunk chunk;
    std::optional<absl::Time> release;  // nullopt: held (arrived while cut)
  };
  // Current path state; unknown clusters count as cut.
  PathState CurrentPath() const;
  // Gives every held chunk a release time, as if it arrived at `now`.
  void ScheduleHeld(absl::Time now, const PathState& path);
  absl::Time ReleaseTime(int64_t bytes, absl::Time arrival, const PathState& path);
  void Accept(Chunk chunk);

  const LinkTable& links_;
  std::string from_;
  std::string to_;
  const Clock& clock_;
  ShapingOptions options_;
  std::mt19937_64 rng_;
  TokenBucket bucket_;
  std::deque<Pending> queue_;
  int64_t buffered_bytes_ = 0;
  absl::Time last_release_ = absl::InfinitePast();
};

}  // namespace codeco::codef
