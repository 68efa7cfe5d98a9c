#include "tools/codef/relay/shaped_pipe.h"

#include <algorithm>
#include <utility>

namespace codeco::codef {

absl::Time TokenBucket::Depart(int64_t bytes, absl::Time at, int64_t rate_bps) {
  at = std::max(at, last_);
  if (rate_bps <= 0) {  // unlimited: no serialization delay, bucket stays full
    tokens_ = -1;
    last_ = at;
    return at;
  }
  const double bytes_per_second = static_cast<double>(rate_bps) / 8.0;
  const double burst = static_cast<double>(burst_bytes_);
  if (tokens_ < 0) {
    tokens_ = burst;
  } else {
    tokens_ = std::min(burst, tokens_ + absl::ToDoubleSeconds(at - last_) * bytes_per_second);
  }
  last_ = at;
  const double need = static_cast<double>(bytes);
  if (tokens_ >= need) {
    tokens_ -= need;
    return at;
  }
  const absl::Duration wait = absl::Seconds((need - tokens_) / bytes_per_second);
  tokens_ = 0;
  last_ = at + wait;
  return last_;
}

ShapedPipe::ShapedPipe(const LinkTable& links, std::string from, std::string to, const Clock& clock,
                       uint64_t seed, ShapingOptions options)
    : links_(links),
      from_(std::move(from)),
      to_(std::move(to)),
      clock_(clock),
      options_(options),
      rng_(seed),
      bucket_(options.burst_bytes) {}

PathState ShapedPipe::CurrentPath() const {
  absl::StatusOr<PathState> path = links_.Path(from_, to_);
  if (!path.ok()) {
    PathState cut;
    cut.forward.cut = true;
    return cut;
  }
  return *path;
}

absl::Time ShapedPipe::ReleaseTime(int64_t bytes, absl::Time arrival, const PathState& path) {
  absl::Time release = bucket_.Depart(bytes, arrival, path.forward.bandwidth_bps) +
                       absl::Nanoseconds(path.forward.one_way_latency_ns);
  if (path.forward.loss > 0) {
    const absl::Duration rtt =
        absl::Nanoseconds(path.forward.one_way_latency_ns + path.reverse_latency_ns);
    absl::Duration timeout = std::max(options_.min_retransmit_timeout, 2 * rtt);
    std::uniform_real_distribution<double> draw(0.0, 1.0);
    for (int i = 0; i < options_.max_retransmissions && draw(rng_) < path.forward.loss; ++i) {
      release += timeout;
      timeout *= 2;  // exponential backoff, as TCP does
    }
  }
  release = std::max(release, last_release_);
  last_release_ = release;
  return release;
}

void ShapedPipe::ScheduleHeld(absl::Time now, const PathState& path) {
  for (Pending& pending : queue_) {
    if (pending.release.has_value()) continue;
    pending.release = ReleaseTime(static_cast<int64_t>(pending.chunk.data.size()), now, path);
  }
}

void ShapedPipe::Accept(Chunk chunk) {
  const absl::Time now = clock_.Now();
  const PathState path = CurrentPath();
  buffered_bytes_ += static_cast<int64_t>(chunk.data.size());
  const bool held = path.forward.cut || (!queue_.empty() && !queue_.back().release.has_value());
  Pending pending{std::move(chunk), std::nullopt};
  if (!held) {
    pending.release = ReleaseTime(static_cast<int64_t>(pending.chunk.data.size()), now, path);
  }
  queue_.push_back(std::move(pending));
}

void ShapedPipe::Push(std::string data) {
  if (data.empty()) return;
  Accept(Chunk{std::move(data), false});
}

void ShapedPipe::PushEndOfStream() { Accept(Chunk{"", true}); }

absl::Time ShapedPipe::NextRelease() {
  if (queue_.empty()) return absl::InfiniteFuture();
  const PathState path = CurrentPath();
  if (path.forward.cut) return absl::InfiniteFuture();
  ScheduleHeld(clock_.Now(), path);
  return *queue_.front().release;
}

std::vector<Chunk> ShapedPipe::PopDue() {
  std::vector<Chunk> due;
  if (queue_.empty()) return due;
  const PathState path = CurrentPath();
  if (path.forward.cut) return due;
  const absl::Time now = clock_.Now();
  ScheduleHeld(now, path);
  while (!queue_.empty() && *queue_.front().release <= now) {
    buffered_bytes_ -= static_cast<int64_t>(queue_.front().chunk.data.size());
    due.push_back(std::move(queue_.front().chunk));
    queue_.pop_front();
  }
  return due;
}

}  // namespace codeco::codef
