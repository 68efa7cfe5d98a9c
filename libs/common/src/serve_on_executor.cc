#include "codeco/common/serve_on_executor.h"

#include <chrono>
#include <utility>

#include "codeco/common/call_deadline.h"
#include "codeco/common/grpc_status.h"
#include "grpcpp/server_context.h"

namespace codeco {

grpc::ServerUnaryReactor* ServeOnExecutor(BoundedExecutor& executor,
                                          grpc::CallbackServerContext* context,
                                          std::function<absl::Status(absl::Time)> work) {
  return ServeOnQueue(
      [&executor](std::function<void()> task) { return executor.Submit(std::move(task)); },
      context, std::move(work));
}

grpc::ServerUnaryReactor* ServeOnQueue(const std::function<bool(std::function<void()>)>& submit,
                                       grpc::CallbackServerContext* context,
                                       std::function<absl::Status(absl::Time)> work) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  bool queued = submit([context, reactor, work = std::move(work)] {
    if (context->IsCancelled()) {
      reactor->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled while queued"));
      return;
    }
    const auto chrono_deadline = context->deadline();
    if (chrono_deadline <= std::chrono::system_clock::now()) {
      reactor->Finish(
          grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed while queued"));
      return;
    }
    // The caller's deadline, or rpc.default_deadline without one, capped at
    // rpc.max_deadline.
    const absl::Time deadline =
        ServedDeadline(chrono_deadline == std::chrono::system_clock::time_point::max()
                           ? absl::InfiniteFuture()
                           : absl::FromChrono(chrono_deadline),
                       absl::Now());
    absl::Status status;
    {
      ScopedCallerDeadline serving(deadline);  // outgoing calls end by it
      status = work(deadline);
    }
    reactor->Finish(ToGrpcStatus(status));
  });
  if (!queued) {
    reactor->Finish(
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "too many calls queued; retry later"));
  }
  return reactor;
}

}  // namespace codeco
