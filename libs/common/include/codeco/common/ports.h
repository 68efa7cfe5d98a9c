#pragma once
// Free TCP ports, for programs that must be told their port instead of
// binding port 0 (child servers such as docker-registry, redis-server and
// codeco's own services started by `codecoctl up`).

#include <string>

#include "absl/status/statusor.h"

namespace codeco {

/// A free TCP port on `ip` (bound and released). With `from` > 0, the first
/// free port of [from, from + 1000): below the kernel's ephemeral range, no
/// process binding port 0 can be handed it before its owner starts;
/// otherwise any port the kernel picks. INVALID_ARGUMENT for an `ip` that is
/// not IPv4, UNAVAILABLE when none is free.
absl::StatusOr<int> FreePort(const std::string& ip, int from = 0);

}  // namespace codeco
