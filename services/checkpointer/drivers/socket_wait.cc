#include "checkpointer/drivers/socket_wait.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace codeco::checkpointer {

std::string ErrnoText(int error) { return std::generic_category().message(error); }

absl::Status WaitFor(int fd, short events, absl::Time deadline, absl::string_view what) {
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat("timed out waiting for ", what));
    }
    pollfd p{.fd = fd, .events = events, .revents = 0};
    const int64_t ms = std::min<int64_t>(
        absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), int64_t{3600000});
    const int ready = poll(&p, 1, static_cast<int>(ms));
    if (ready > 0) return absl::OkStatus();
    if (ready < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("poll: ", ErrnoText(errno)));
    }
  }
}

}  // namespace codeco::checkpointer
