#pragma once
// A bounded executor: a fixed set of worker threads and a bounded queue, so
// gRPC reactions hand off blocking work (RocksDB writes) instead of running it
// on gRPC's callback threads.

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace codeco::netma {

/// Runs submitted tasks on `threads` workers; at most `max_queue` wait.
class BoundedExecutor {
 public:
  /// Starts the workers.
  BoundedExecutor(int threads, size_t max_queue);
  /// Runs what is queued, then joins the workers.
  ~BoundedExecutor();
  BoundedExecutor(const BoundedExecutor&) = delete;
  BoundedExecutor& operator=(const BoundedExecutor&) = delete;

  /// Queues `task`; false (and `task` not run) when the queue is full.
  bool Submit(std::function<void()> task);

 private:
  void Work();

  const size_t max_queue_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace codeco::netma
