#pragma once
// A bounded pipe of bytes between the thread pulling an image and the
// driver restoring from it (a StateStream): the writer blocks while the
// pipe is full, the reader while it is empty; either end may stop the other
// with an error.

#include <cstddef>
#include <deque>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "checkpointer/core/state_driver.h"

namespace codeco::checkpointer {

/// A StateStream fed by Write. Thread-safe: one writer, one reader.
class StreamPipe final : public StateStream {
 public:
  /// A pipe holding at most `capacity_bytes` unread bytes (at least 1).
  explicit StreamPipe(size_t capacity_bytes);

  /// Appends `bytes`, waiting while the pipe is full; the reader's error
  /// once it has stopped (Stop), FAILED_PRECONDITION after Close.
  absl::Status Write(absl::string_view bytes);
  /// Ends the stream: OK means every byte was written (Read returns 0 once
  /// it has them all); an error is what Read returns next.
  void Close(const absl::Status& status);
  /// The reader gives up with `status`: a blocked or later Write returns it.
  void Stop(const absl::Status& status);

  absl::StatusOr<size_t> Read(char* buffer, size_t max) override;

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::deque<std::string> chunks_ ABSL_GUARDED_BY(mu_);
  size_t front_offset_ ABSL_GUARDED_BY(mu_) = 0;  // read from chunks_.front()
  size_t buffered_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status close_status_ ABSL_GUARDED_BY(mu_);
  absl::Status stop_status_ ABSL_GUARDED_BY(mu_);  // set by Stop
};

}  // namespace codeco::checkpointer
