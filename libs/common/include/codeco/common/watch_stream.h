#pragma once
// The one server-streaming "watch" of the services, on gRPC's callback API.
// A subclass says what to send next (Next, called whenever the stream is
// idle and after every Poke) and what to undo when the stream is done
// (Closed); WatchStream keeps one write in flight, ends the stream on a
// client that went away, on cancellation, on an error from Next, or once a
// batch marked `last` is written, and deletes itself when gRPC is done with
// it. Writes and Finish are started outside its lock, so a reaction gRPC
// runs inline cannot deadlock.
//
//   class OrderWatch final : public WatchStream<WatchOrdersResponse> {
//    public:
//     OrderWatch(Orders& orders) : orders_(orders) {
//       subscription_ = orders_.Subscribe([this] { Poke(); });
//       Start();
//     }
//    private:
//     absl::StatusOr<Batch> Next() override { ... orders_.ChangesAfter(last_) ... }
//     void Closed() override { orders_.Unsubscribe(subscription_); }
//   };

#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "codeco/common/grpc_status.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"

namespace codeco {

/// A server write reactor that streams what Next() produces. Owns itself:
/// create it with `new` and return it from the handler.
template <typename Response>
class WatchStream : public grpc::ServerWriteReactor<Response> {
 public:
  /// What Next() returns.
  struct Batch {
    /// Messages to write now, in order (empty: nothing new yet).
    std::vector<Response> messages;
    /// The stream ends (OK) once these are written.
    bool last = false;
  };

  void OnWriteDone(bool ok) final {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) {
        finish_ = grpc::Status(grpc::StatusCode::CANCELLED, "client gone");
      } else {
        queue_.pop_front();
      }
    }
    Pump();
  }

  void OnCancel() final {
    {
      absl::MutexLock lock(&mu_);
      if (!finish_.has_value()) finish_ = grpc::Status::CANCELLED;
    }
    Pump();
  }

  void OnDone() final {
    Closed();
    delete this;
  }

 protected:
  WatchStream() = default;
  ~WatchStream() override = default;

  /// The next messages, read when the queue is empty; an error ends the
  /// stream with it. Runs under the stream's lock, never concurrently.
  virtual absl::StatusOr<Batch> Next() = 0;
  /// Called once gRPC is done with the stream, before it is deleted: undo
  /// subscriptions and counts here. Default: nothing.
  virtual void Closed() {}

  /// Begins streaming: writes `first` (e.g. a snapshot), then what Next()
  /// gives. Call at the end of the subclass's constructor.
  void Start(std::vector<Response> first = {}) {
    {
      absl::MutexLock lock(&mu_);
      for (auto& m : first) queue_.push_back(std::move(m));
    }
    Pump();
  }

  /// Something changed: Next() is asked again as soon as the stream is idle.
  /// Any thread, any time before Closed() returns.
  void Poke() { Pump(); }

  /// Ends the stream with `status` (after the write in flight, if any);
  /// e.g. a refusal in the constructor, instead of Start().
  void Fail(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (!finish_.has_value()) finish_ = status;
    }
    Pump();
  }

 private:
  // Decides under the lock, then starts the write or the finish outside it.
  void Pump() {
    enum { kNothing, kWrite, kFinish } action = kNothing;
    grpc::Status status;
    const Response* message = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (finished_ || writing_) return;
      if (!finish_.has_value() && queue_.empty()) {
        if (last_) {
          finish_ = grpc::Status::OK;
        } else {
          absl::StatusOr<Batch> batch = Next();
          if (!batch.ok()) {
            finish_ = ToGrpcStatus(batch.status());
          } else {
            for (auto& m : batch->messages) queue_.push_back(std::move(m));
            last_ = batch->last;
            if (queue_.empty() && last_) finish_ = grpc::Status::OK;
          }
        }
      }
      if (finish_.has_value()) {
        finished_ = true;
        status = *finish_;
        action = kFinish;
      } else if (!queue_.empty()) {
        writing_ = true;
        message = &queue_.front();
        action = kWrite;
      }
    }
    // queue_.front() stays put until OnWriteDone pops it.
    if (action == kWrite) this->StartWrite(message);
    if (action == kFinish) this->Finish(status);
  }

  absl::Mutex mu_;
  std::deque<Response> queue_ ABSL_GUARDED_BY(mu_);
  std::optional<grpc::Status> finish_ ABSL_GUARDED_BY(mu_);  // how to end, once known
  bool last_ ABSL_GUARDED_BY(mu_) = false;      // the queue holds the last batch
  bool writing_ ABSL_GUARDED_BY(mu_) = false;   // a write is in flight
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish was called
};

}  // namespace codeco
