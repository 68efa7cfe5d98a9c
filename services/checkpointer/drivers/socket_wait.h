#pragma once
// What the Redis replication code (both sides, redis_feed and
// redis_snapshot_stream) shares about non-blocking POSIX sockets.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace codeco::checkpointer {

/// The text of an errno value.
std::string ErrnoText(int error);

/// Waits until `fd` is ready for `events` (poll(2) flags; or in error: the
/// next read or write says which) or `deadline`: DEADLINE_EXCEEDED naming
/// `what` then. EINTR is retried.
absl::Status WaitFor(int fd, short events, absl::Time deadline, absl::string_view what);

}  // namespace codeco::checkpointer
