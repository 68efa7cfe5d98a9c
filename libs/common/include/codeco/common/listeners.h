#pragma once
// Listeners: the one way a component tells watchers "something changed"
// (ACM's application log, the MC swm's cluster view). Add registers a
// callback; Notify calls every registered one outside the registry's lock;
// Remove waits for a call in progress and guarantees no call after it
// returns, even from a Notify that had already copied the list.

#include <functional>
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace codeco {

/// A set of change callbacks. Thread-safe.
class Listeners {
 public:
  /// Registers `listener`; returns its id for Remove.
  int Add(std::function<void()> listener);
  /// Unregisters listener `id` (no-op if unknown); once it returns the
  /// listener is not running and is never called again. Must not be called
  /// from inside the listener itself.
  void Remove(int id);
  /// Calls every registered listener, on the caller's thread. `between`
  /// (tests only) runs after the list is copied and before the calls.
  void Notify(const std::function<void()>& between = nullptr);

 private:
  // `mu` is held while the listener runs, so Remove can wait for a running
  // call and mark it removed for Notify calls that already copied it.
  struct Entry {
    absl::Mutex mu;
    bool removed ABSL_GUARDED_BY(mu) = false;
    std::function<void()> run;
  };
  absl::Mutex mu_;
  int next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<int, std::shared_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace codeco
