#pragma once
// A bounded executor for the server: gRPC callback reactions must not block,
// so handlers hand their RocksDB work (fsync'ed writes) to a few worker
// threads and finish the call from there. A full queue is refused, so a
// burst is answered RESOURCE_EXHAUSTED instead of queueing without bound.

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace codeco {

/// A fixed pool of worker threads with a bounded queue.
class BoundedExecutor {
 public:
  /// Starts `threads` workers; at most `max_queue` tasks wait.
  BoundedExecutor(int threads, size_t max_queue);
  /// Runs every task already accepted, then joins the workers.
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

}  // namespace codeco
