#pragma once
// The one way a callback-API handler runs its work off gRPC's threads:
// ServeOnExecutor queues `work` on a BoundedExecutor and finishes the call
// with its status. One policy for every service: a full queue answers
// RESOURCE_EXHAUSTED at once; a call cancelled, or whose deadline passed,
// while it waited answers CANCELLED or DEADLINE_EXCEEDED without running;
// the work gets the caller's deadline (rpc.default_deadline when it has
// none, never more than rpc.max_deadline: ServedDeadline), also as
// CallerDeadline() for the outgoing calls it makes (call_deadline.h).

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "codeco/common/executor.h"
#include "grpcpp/support/server_callback.h"

namespace codeco {

/// Runs `work(deadline)` on `executor` and finishes `context`'s call with its
/// status (the work fills the response before returning). Returns the
/// reactor to hand back to gRPC.
grpc::ServerUnaryReactor* ServeOnExecutor(BoundedExecutor& executor,
                                          grpc::CallbackServerContext* context,
                                          std::function<absl::Status(absl::Time deadline)> work);

/// The same with a queue of the caller's own: `submit` queues a task and
/// answers false when the queue is full (e.g. a service's worker threads).
grpc::ServerUnaryReactor* ServeOnQueue(const std::function<bool(std::function<void()>)>& submit,
                                       grpc::CallbackServerContext* context,
                                       std::function<absl::Status(absl::Time deadline)> work);

}  // namespace codeco
