#include "checkpointer/core/stream_pipe.h"

#include <algorithm>
#include <cstring>

namespace codeco::checkpointer {

StreamPipe::StreamPipe(size_t capacity_bytes) : capacity_(std::max<size_t>(1, capacity_bytes)) {}

absl::Status StreamPipe::Write(absl::string_view bytes) {
  while (!bytes.empty()) {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](StreamPipe* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
          return p->buffered_ < p->capacity_ || !p->stop_status_.ok() || p->closed_;
        },
        this));
    if (!stop_status_.ok()) return stop_status_;
    if (closed_) return absl::FailedPreconditionError("write to a closed stream");
    const size_t n = std::min(bytes.size(), capacity_ - buffered_);
    chunks_.emplace_back(bytes.substr(0, n));
    buffered_ += n;
    bytes.remove_prefix(n);
  }
  return absl::OkStatus();
}

void StreamPipe::Close(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  closed_ = true;
  close_status_ = status;
}

void StreamPipe::Stop(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (stop_status_.ok()) {
    stop_status_ = status.ok() ? absl::CancelledError("the reader stopped") : status;
  }
  chunks_.clear();
  front_offset_ = 0;
  buffered_ = 0;
}

absl::StatusOr<size_t> StreamPipe::Read(char* buffer, size_t max) {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](StreamPipe* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
        return p->buffered_ > 0 || p->closed_ || !p->stop_status_.ok();
      },
      this));
  if (!stop_status_.ok()) return stop_status_;
  if (buffered_ == 0) {
    if (!close_status_.ok()) return close_status_;
    return size_t{0};
  }
  // An error closing the stream is reported once the bytes before it are read.
  size_t copied = 0;
  while (copied < max && !chunks_.empty()) {
    const std::string& front = chunks_.front();
    const size_t n = std::min(max - copied, front.size() - front_offset_);
    std::memcpy(buffer + copied, front.data() + front_offset_, n);
    copied += n;
    front_offset_ += n;
    if (front_offset_ == front.size()) {
      chunks_.pop_front();
      front_offset_ = 0;
    }
  }
  buffered_ -= copied;
  return copied;
}

}  // namespace codeco::checkpointer
