// ThreadSanitizer support for Debian's prebuilt Abseil (compiled into the
// build only with CODECO_SANITIZE=thread).
//
// absl::Mutex, absl::CondVar, absl::Notification and absl::BlockingCounter live in
// libabsl_synchronization.so, which is not instrumented: ThreadSanitizer sees
// neither their atomics nor their futex waits, so every access that an
// absl::Mutex protects would be reported as a race. This file interposes the
// library's out-of-line entry points: each definition below calls the real
// function (found with dlsym(RTLD_NEXT)) and tells ThreadSanitizer what it did
// through the mutex annotation interface. An executable's definition wins over
// a shared library's at dynamic link time, so calls from codeco's code, from
// Abseil's inline helpers (absl::MutexLock) and from gRPC all come here.
//
// A linker anchor (codeco_tsan_absl_sync_anchor, forced undefined by
// libs/common's CMakeLists) pulls this object out of codeco_common_core into
// every executable that links it.

#ifndef __SANITIZE_THREAD__
#error "tsan_absl_sync.cc is for ThreadSanitizer builds only (CODECO_SANITIZE=thread)"
#endif

#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

extern "C" {
/// Referenced by `-Wl,--undefined` so the linker keeps this object.
int codeco_tsan_absl_sync_anchor = 0;
}

namespace {

#define CODECO_STR2(x) #x
#define CODECO_STR(x) CODECO_STR2(x)

/// Whether the member function is const (its mangled name starts _ZNK).
enum class Constness { kNonConst, kConst };

/// The mangled-name prefix of namespace absl::<inline namespace>, e.g.
/// "_ZN4absl7debian3".
std::string AbslPrefix(Constness constness) {
  const std::string inline_ns = CODECO_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  return std::string(constness == Constness::kConst ? "_ZNK" : "_ZN") + "4absl" +
         std::to_string(inline_ns.size()) + inline_ns;
}

/// The real (library) definition of the function whose mangled name is the
/// absl prefix followed by `rest`; aborts when it cannot be found, since a
/// silent fallback would hide every race.
template <typename Fn>
Fn Real(const char* rest, Constness constness = Constness::kNonConst) {
  const std::string name = AbslPrefix(constness) + rest;
  void* symbol = dlsym(RTLD_NEXT, name.c_str());
  if (symbol == nullptr) {
    std::fprintf(stderr, "tsan_absl_sync: cannot find %s in Abseil\n", name.c_str());
    std::abort();
  }
  return reinterpret_cast<Fn>(symbol);
}

using MutexFn = void (*)(absl::Mutex*);
using MutexBoolFn = bool (*)(absl::Mutex*);
using MutexCondFn = void (*)(absl::Mutex*, const absl::Condition&);
using MutexCondDurationFn = bool (*)(absl::Mutex*, const absl::Condition&, absl::Duration);
using MutexCondTimeFn = bool (*)(absl::Mutex*, const absl::Condition&, absl::Time);
using CondVarWaitFn = void (*)(absl::CondVar*, absl::Mutex*);
using CondVarWaitDurationFn = bool (*)(absl::CondVar*, absl::Mutex*, absl::Duration);
using CondVarWaitTimeFn = bool (*)(absl::CondVar*, absl::Mutex*, absl::Time);
using NotifyFn = void (*)(absl::Notification*);
using WaitFn = void (*)(const absl::Notification*);
using WaitDurationFn = bool (*)(const absl::Notification*, absl::Duration);
using WaitTimeFn = bool (*)(const absl::Notification*, absl::Time);

// How many interposed waits this thread is inside: the library's own
// AwaitWithTimeout calls AwaitWithDeadline (and CondVar's WaitWithTimeout
// its WaitWithDeadline) through the PLT, so they come here again; only the
// outermost call annotates, or the inner one would "unlock" a mutex
// ThreadSanitizer already saw released.
thread_local int wait_depth = 0;

// The same for LockWhen*: LockWhenWithTimeout calls LockWhenWithDeadline.
thread_local int lock_when_depth = 0;
void BeforeLockWhen(void* mu, unsigned flags) {
  if (lock_when_depth++ == 0) __tsan_mutex_pre_lock(mu, flags);
}
void AfterLockWhen(void* mu, unsigned flags) {
  if (--lock_when_depth == 0) __tsan_mutex_post_lock(mu, flags, 0);
}

// Annotations for a call that may release and re-acquire a held mutex.
void BeforeWait(void* mu) {
  if (wait_depth++ > 0) return;
  __tsan_mutex_pre_unlock(mu, 0);
  __tsan_mutex_post_unlock(mu, 0);
}
void AfterWait(void* mu) {
  if (--wait_depth > 0) return;
  __tsan_mutex_pre_lock(mu, 0);
  __tsan_mutex_post_lock(mu, 0, 0);
}

// ThreadSanitizer's dynamic-annotation entry points (its runtime defines them).
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);

/// A condition that Abseil evaluates in its uninstrumented code: inside an
/// Await, while ThreadSanitizer believes the mutex released (BeforeWait),
/// the waiter's reads of the state the mutex guards would look like races.
/// They are made with the mutex really held, so they are not reported.
struct UnseenCondition {
  const absl::Condition* cond;
};
/// Takes void* so that the wrapping absl::Condition is built by the library's
/// out-of-line Condition(bool (*)(void*), void*) and evaluated through its
/// CallVoidPtrFunction: Abseil may evaluate a waiter's condition on another
/// thread that is itself inside an uninstrumented Await (so ThreadSanitizer
/// believes it holds no lock), and the template constructor's inline
/// CastAndCallFunction would read the waiter's Condition there in
/// instrumented code, a report with no race behind it.
bool EvalUnseen(void* arg) {
  auto* c = static_cast<UnseenCondition*>(arg);
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
  const bool holds = c->cond->Eval();
  AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  // Abseil may evaluate a waiter's condition on the thread that unlocks,
  // reading the waiter's stack, then wake the waiter through a futex
  // ThreadSanitizer does not see: the waiter acquires this after its wait
  // (Unseen::~Unseen), so its later use of that stack is ordered after.
  __tsan_release(c);
  return holds;
}

/// The wrapped condition of one call, acquired when the call returns.
struct Unseen {
  explicit Unseen(const absl::Condition& cond)
      : wrapped{&cond}, condition(&EvalUnseen, static_cast<void*>(&wrapped)) {}
  ~Unseen() { __tsan_acquire(&wrapped); }
  UnseenCondition wrapped;
  absl::Condition condition;
};

/// Mirrors absl::Notification's layout to find its atomic flag, which the
/// inline HasBeenNotified() reads with acquire order in instrumented code.
struct NotificationLayout {
  absl::Mutex mutex;
  std::atomic<bool> notified_yet;
};
static_assert(sizeof(NotificationLayout) == sizeof(absl::Notification));

void* NotifiedFlag(const absl::Notification* n) {
  return const_cast<char*>(reinterpret_cast<const char*>(n) +
                           offsetof(NotificationLayout, notified_yet));
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static const auto real = Real<MutexFn>("5Mutex4LockEv");
  __tsan_mutex_pre_lock(this, 0);
  real(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::ReaderLock() {
  static const auto real = Real<MutexFn>("5Mutex10ReaderLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

bool Mutex::TryLock() {
  static const auto real = Real<MutexBoolFn>("5Mutex7TryLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed),
                         0);
  return locked;
}

bool Mutex::ReaderTryLock() {
  static const auto real = Real<MutexBoolFn>("5Mutex13ReaderTryLockEv");
  const unsigned flags = __tsan_mutex_read_lock | __tsan_mutex_try_lock;
  __tsan_mutex_pre_lock(this, flags);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, flags | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

void Mutex::Unlock() {
  static const auto real = Real<MutexFn>("5Mutex6UnlockEv");
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

void Mutex::ReaderUnlock() {
  static const auto real = Real<MutexFn>("5Mutex12ReaderUnlockEv");
  __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

void Mutex::LockWhen(const Condition& cond) {
  static const auto real = Real<MutexCondFn>("5Mutex8LockWhenERKNS0_9ConditionE");
  // Wrapped once, by the outermost call (a nested one runs after the
  // outer call's annotations, so what it builds would be unordered).
  std::optional<Unseen> unseen_call;
  if (lock_when_depth == 0) unseen_call.emplace(cond);
  const Condition& unseen = unseen_call ? unseen_call->condition : cond;
  BeforeLockWhen(this, 0);
  real(this, unseen);
  AfterLockWhen(this, 0);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static const auto real = Real<MutexCondFn>("5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  // Wrapped once, by the outermost call (a nested one runs after the
  // outer call's annotations, so what it builds would be unordered).
  std::optional<Unseen> unseen_call;
  if (lock_when_depth == 0) unseen_call.emplace(cond);
  const Condition& unseen = unseen_call ? unseen_call->condition : cond;
  BeforeLockWhen(this, __tsan_mutex_read_lock);
  real(this, unseen);
  AfterLockWhen(this, __tsan_mutex_read_lock);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  static const auto real =
      Real<MutexCondDurationFn>("5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  // Wrapped once, by the outermost call (a nested one runs after the
  // outer call's annotations, so what it builds would be unordered).
  std::optional<Unseen> unseen_call;
  if (lock_when_depth == 0) unseen_call.emplace(cond);
  const Condition& unseen = unseen_call ? unseen_call->condition : cond;
  BeforeLockWhen(this, 0);
  const bool result = real(this, unseen, timeout);
  AfterLockWhen(this, 0);
  return result;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  static const auto real =
      Real<MutexCondTimeFn>("5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  // Wrapped once, by the outermost call (a nested one runs after the
  // outer call's annotations, so what it builds would be unordered).
  std::optional<Unseen> unseen_call;
  if (lock_when_depth == 0) unseen_call.emplace(cond);
  const Condition& unseen = unseen_call ? unseen_call->condition : cond;
  BeforeLockWhen(this, 0);
  const bool result = real(this, unseen, deadline);
  AfterLockWhen(this, 0);
  return result;
}

void Mutex::Await(const Condition& cond) {
  static const auto real = Real<MutexCondFn>("5Mutex5AwaitERKNS0_9ConditionE");
  // Wrapped once, by the outermost call (a nested one runs after the
  // outer call's annotations, so what it builds would be unordered).
  std::optional<Unseen> unseen_call;
  if (wait_depth == 0) unseen_call.emplace(cond);
  const Condition& unseen = unseen_call ? unseen_call->condition : cond;
  BeforeWait(this);
  real(this, unseen);
  AfterWait(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  static const auto real =
      Real<MutexCondDurationFn>("5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  // Wrapped once, by the outermost call (a nested one runs after the
  // outer call's annotations, so what it builds would be unordered).
  std::optional<Unseen> unseen_call;
  if (wait_depth == 0) unseen_call.emplace(cond);
  const Condition& unseen = unseen_call ? unseen_call->condition : cond;
  BeforeWait(this);
  const bool result = real(this, unseen, timeout);
  AfterWait(this);
  return result;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  static const auto real =
      Real<MutexCondTimeFn>("5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  // Wrapped once, by the outermost call (a nested one runs after the
  // outer call's annotations, so what it builds would be unordered).
  std::optional<Unseen> unseen_call;
  if (wait_depth == 0) unseen_call.emplace(cond);
  const Condition& unseen = unseen_call ? unseen_call->condition : cond;
  BeforeWait(this);
  const bool result = real(this, unseen, deadline);
  AfterWait(this);
  return result;
}

void CondVar::Wait(Mutex* mu) {
  static const auto real = Real<CondVarWaitFn>("7CondVar4WaitEPNS0_5MutexE");
  BeforeWait(mu);
  real(this, mu);
  AfterWait(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  static const auto real =
      Real<CondVarWaitDurationFn>("7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  BeforeWait(mu);
  const bool result = real(this, mu, timeout);
  AfterWait(mu);
  return result;
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  static const auto real =
      Real<CondVarWaitTimeFn>("7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  BeforeWait(mu);
  const bool result = real(this, mu, deadline);
  AfterWait(mu);
  return result;
}

void Notification::Notify() {
  static const auto real = Real<NotifyFn>("12Notification6NotifyEv");
  __tsan_release(this);
  __tsan_release(NotifiedFlag(this));
  real(this);
}

void Notification::WaitForNotification() const {
  static const auto real = Real<WaitFn>("12Notification19WaitForNotificationEv", Constness::kConst);
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(absl::Duration timeout) const {
  static const auto real =
      Real<WaitDurationFn>("12Notification30WaitForNotificationWithTimeoutENS0_8DurationE",
                           Constness::kConst);
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(absl::Time deadline) const {
  static const auto real =
      Real<WaitTimeFn>("12Notification31WaitForNotificationWithDeadlineENS0_4TimeE",
                       Constness::kConst);
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

// BlockingCounter: only the last DecrementCount takes the mutex; the others
// touch an atomic the library's uninstrumented code owns. Each decrement
// releases, and Wait acquires, so what a decrementer wrote is ordered before
// what the waiter reads.
bool BlockingCounter::DecrementCount() {
  static const auto real = Real<bool (*)(BlockingCounter*)>("15BlockingCounter14DecrementCountEv");
  __tsan_release(this);
  return real(this);
}

void BlockingCounter::Wait() {
  static const auto real = Real<void (*)(BlockingCounter*)>("15BlockingCounter4WaitEv");
  real(this);
  __tsan_acquire(this);
}

ABSL_NAMESPACE_END
}  // namespace absl
