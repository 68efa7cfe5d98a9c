#pragma once
// Deadline propagation: an outgoing call made while serving a call ends no
// later than the caller's deadline. ServeOnExecutor and ServeOnQueue set the
// caller's deadline for the thread that runs the work (CallerDeadline());
// OutgoingContext and SetOutgoingDeadline cap every outgoing call at it, at
// the call's own timeout and at any deadline the code passes down, so a
// caller that gives up does not leave calls running on its behalf. Work
// handed to another thread passes its deadline explicitly.

#include <memory>

#include "absl/time/time.h"
#include "grpcpp/client_context.h"

namespace codeco {

/// How a server bounds the calls it serves (rpc.default_deadline and
/// rpc.max_deadline of the service configuration).
struct CallDeadlineLimits {
  /// A call that carries no deadline is served as if it had this one.
  absl::Duration when_none = absl::Seconds(30);
  /// No call is served longer than this, whatever its deadline.
  absl::Duration longest = absl::Minutes(10);
};

/// Sets the limits of this process (RunServiceMain does, from its
/// configuration, before it serves). Default: CallDeadlineLimits{}.
void SetCallDeadlineLimits(const CallDeadlineLimits& limits);

/// The deadline a call due at `caller_deadline` (InfiniteFuture: none) is
/// served with when it starts at `now`, under the process's limits.
absl::Time ServedDeadline(absl::Time caller_deadline, absl::Time now);

/// The deadline of the call the current thread serves; InfiniteFuture on a
/// thread that serves none (background loops).
absl::Time CallerDeadline();

/// Sets CallerDeadline() on this thread while in scope (nested scopes keep
/// the earlier of the two deadlines).
class ScopedCallerDeadline {
 public:
  /// Serves a call due at `deadline` until destroyed.
  explicit ScopedCallerDeadline(absl::Time deadline);
  ~ScopedCallerDeadline();
  ScopedCallerDeadline(const ScopedCallerDeadline&) = delete;
  ScopedCallerDeadline& operator=(const ScopedCallerDeadline&) = delete;

 private:
  absl::Time previous_;
};

/// The deadline of an outgoing call: `timeout` from now, `deadline`, or the
/// caller's deadline, whichever comes first.
absl::Time OutgoingDeadline(absl::Duration timeout, absl::Time deadline = absl::InfiniteFuture());

/// Sets `context`'s deadline to OutgoingDeadline(timeout, deadline).
void SetOutgoingDeadline(grpc::ClientContext& context, absl::Duration timeout,
                         absl::Time deadline = absl::InfiniteFuture());

/// A new ClientContext with OutgoingDeadline(timeout, deadline).
std::unique_ptr<grpc::ClientContext> OutgoingContext(absl::Duration timeout,
                                                     absl::Time deadline = absl::InfiniteFuture());

}  // namespace codeco
