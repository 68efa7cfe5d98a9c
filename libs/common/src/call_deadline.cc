#include "codeco/common/call_deadline.h"

#include <algorithm>
#include <atomic>

namespace codeco {
namespace {

thread_local absl::Time caller_deadline = absl::InfiniteFuture();
// The limits, as nanoseconds (read by every served call, set once at start).
std::atomic<int64_t> when_none_ns{absl::ToInt64Nanoseconds(CallDeadlineLimits{}.when_none)};
std::atomic<int64_t> longest_ns{absl::ToInt64Nanoseconds(CallDeadlineLimits{}.longest)};

}  // namespace

void SetCallDeadlineLimits(const CallDeadlineLimits& limits) {
  when_none_ns = absl::ToInt64Nanoseconds(limits.when_none);
  longest_ns = absl::ToInt64Nanoseconds(limits.longest);
}

absl::Time ServedDeadline(absl::Time caller_deadline, absl::Time now) {
  const absl::Time given = caller_deadline == absl::InfiniteFuture()
                               ? now + absl::Nanoseconds(when_none_ns.load())
                               : caller_deadline;
  return std::min(given, now + absl::Nanoseconds(longest_ns.load()));
}

absl::Time CallerDeadline() { return caller_deadline; }

ScopedCallerDeadline::ScopedCallerDeadline(absl::Time deadline) : previous_(caller_deadline) {
  caller_deadline = std::min(previous_, deadline);
}

ScopedCallerDeadline::~ScopedCallerDeadline() { caller_deadline = previous_; }

absl::Time OutgoingDeadline(absl::Duration timeout, absl::Time deadline) {
  return std::min({absl::Now() + timeout, deadline, caller_deadline});
}

void SetOutgoingDeadline(grpc::ClientContext& context, absl::Duration timeout,
                         absl::Time deadline) {
  context.set_deadline(absl::ToChronoTime(OutgoingDeadline(timeout, deadline)));
}

std::unique_ptr<grpc::ClientContext> OutgoingContext(absl::Duration timeout, absl::Time deadline) {
  auto context = std::make_unique<grpc::ClientContext>();
  SetOutgoingDeadline(*context, timeout, deadline);
  return context;
}

}  // namespace codeco
