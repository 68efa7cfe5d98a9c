#pragma once
// Exact parsing of the quantities users write in CAMs, scenarios and flags,
// into the integer units of the contracts (DESIGN section 5):
//   CPU        "500m", "2", "0.25", "1e3m"        -> millicores
//   memory     "512Mi", "1.5G", "1e9", "100Ki"     -> bytes
//   durations  "20ms", "1.5s", "250us", "2m", "1h"; a bare number is seconds
//              ("10e-3" = 10 ms)                   -> nanoseconds
//   bandwidth  "100Mbps", "1.5Gbps", "64kbps", "10Mbit/s"; a bare quantity
//              is bits per second ("100M")         -> bits per second
// Kubernetes quantity syntax (decimal or exponent number, then one of
// n u m k M G T P E Ki Mi Gi Ti Pi Ei) is read exactly, with no floating
// point; a value that is not a whole number of the target unit rounds up (as
// Kubernetes does for CPU). Negative values and values beyond int64 are
// errors. Messages do not include a field path: callers prepend theirs.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace codeco {

/// A CPU quantity in millicores.
absl::StatusOr<int64_t> ParseCpuMillicores(std::string_view text);

/// A memory or storage quantity in bytes.
absl::StatusOr<int64_t> ParseBytes(std::string_view text);

/// A duration in nanoseconds (Go-style units, or a bare number of seconds).
absl::StatusOr<int64_t> ParseDurationNanos(std::string_view text);

/// A bandwidth in bits per second.
absl::StatusOr<int64_t> ParseBandwidthBps(std::string_view text);

/// A ratio in [0, 1] from "5%" or "0.05".
absl::StatusOr<double> ParseRatio(std::string_view text);

/// "500m" or "2" (whole cores) for display.
std::string FormatCpu(int64_t millicores);
/// "512Mi", "1.5Gi" or "1000" for display.
std::string FormatBytes(int64_t bytes);
/// "20ms", "1.5s", "250us" for display.
std::string FormatDurationNanos(int64_t nanos);
/// "100Mbps", "1.5Gbps" for display.
std::string FormatBandwidth(int64_t bps);

}  // namespace codeco
