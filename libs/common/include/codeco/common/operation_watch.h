#pragma once
// The one WatchOperation stream every service serves: an operation's
// current state, then each stored change (read again whenever the service's
// listeners fire), ending after the state with done = true. A service counts
// its open watches and refuses past a cap.

#include <atomic>
#include <functional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/listeners.h"
#include "codeco/common/status.h"
#include "codeco/common/v1/operation.pb.h"
#include "codeco/common/watch_stream.h"

namespace codeco {

/// Streams one operation as `Response` messages (a service's
/// WatchOperationResponse, whose `operation` field is set). Owns itself:
/// create it with `new` and return it from the handler.
template <typename Response>
class OperationWatch final : public WatchStream<Response> {
 public:
  /// Reads an operation by id (NOT_FOUND ends the stream with it).
  using Reader = std::function<absl::StatusOr<common::v1::Operation>(const std::string& id)>;

  /// Registers a change callback and returns its id (Listeners::Add's shape).
  using Subscribe = std::function<int(std::function<void()>)>;
  /// Unregisters a callback by id (Listeners::Remove's shape).
  using Unsubscribe = std::function<void(int)>;

  /// Streams operation `id` of `service` (for messages), read with `read`
  /// again whenever `listeners` fire; `watchers` counts the open watches of
  /// the service, at most `max_watchers` (RESOURCE_EXHAUSTED past it).
  /// `listeners` and `watchers` must outlive the stream.
  OperationWatch(const std::string& service, Reader read, Listeners& listeners,
                 std::atomic<int>& watchers, int max_watchers, std::string id)
      : OperationWatch(
            service, std::move(read),
            [&listeners](std::function<void()> f) { return listeners.Add(std::move(f)); },
            [&listeners](int listener) { listeners.Remove(listener); }, watchers, max_watchers,
            std::move(id)) {}

  /// The same for a service whose change callbacks are registered through
  /// `subscribe` and `unsubscribe`.
  OperationWatch(const std::string& service, Reader read, Subscribe subscribe,
                 Unsubscribe unsubscribe, std::atomic<int>& watchers, int max_watchers,
                 std::string id)
      : read_(std::move(read)), unsubscribe_(std::move(unsubscribe)), watchers_(watchers),
        id_(std::move(id)) {
    if (watchers_.fetch_add(1) >= max_watchers) {
      this->Fail(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                              absl::StrCat(service, ": already ", max_watchers,
                                           " open operation watches; retry later")));
      return;
    }
    if (id_.empty()) {
      this->Fail(ToGrpcStatus(InvalidFieldError("id", "is required")));
      return;
    }
    listener_ = subscribe([this] { this->Poke(); });
    this->Start();
  }

 private:
  using Batch = typename WatchStream<Response>::Batch;

  // The operation when it changed since the last write; the last one once done.
  absl::StatusOr<Batch> Next() override {
    absl::StatusOr<common::v1::Operation> op = read_(id_);
    if (!op.ok()) return op.status();
    std::string bytes = op->SerializeAsString();
    if (bytes == sent_) return Batch{};
    sent_ = std::move(bytes);
    Batch batch;
    batch.last = op->done();
    batch.messages.emplace_back();
    *batch.messages.back().mutable_operation() = *std::move(op);
    return batch;
  }

  void Closed() override {
    if (listener_ != 0) unsubscribe_(listener_);
    watchers_.fetch_sub(1);
  }

  Reader read_;
  Unsubscribe unsubscribe_;
  std::atomic<int>& watchers_;
  const std::string id_;
  int listener_ = 0;
  std::string sent_;  // the last operation written, serialized (under the stream's lock)
};

}  // namespace codeco
