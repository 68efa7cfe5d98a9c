#pragma once
// Usage profiles of emulated pods: how much CPU and memory a pod uses over
// time. A pod picks its profile with the "codef.codeco.io/usage-profile"
// annotation, a YAML flow mapping such as
//   {type: constant, cpu: 500m, memory: 256Mi}
//   {type: step, steps: [{after: 0s, cpu: 100m}, {after: 60s, cpu: 800m}]}
//   {type: diurnal, min_cpu: 100m, max_cpu: 900m, period: 24h, peak_at: 14h,
//    noise: 0.1, seed: 7}
//   {type: trace, file: traces/web.csv, loop: true}   (CSV: offset,cpu,memory)
//   {type: trace, points: [[0s, 100m, 64Mi], [30s, 400m, 80Mi]]}
// Without the annotation a pod uses exactly its requests. docs/codef.md is
// the reference.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace codeco::codef {

/// CPU and memory in use.
struct Usage {
  /// CPU, millicores.
  int64_t cpu_millicores = 0;
  /// Memory, bytes.
  int64_t memory_bytes = 0;
};

/// Usage of one pod as a function of time.
class UsageProfile {
 public:
  virtual ~UsageProfile() = default;
  /// Usage at `now` of a pod that has been running for `elapsed`.
  virtual Usage At(absl::Time now, absl::Duration elapsed) const = 0;
};

/// Reads a file (a trace) by path; injected so that the core does no I/O.
using FileReader = std::function<absl::StatusOr<std::string>(const std::string& path)>;

/// A profile that always answers `usage`.
std::unique_ptr<UsageProfile> MakeConstantProfile(Usage usage);

/// Parses a profile from annotation text. `requests` fills values the text
/// leaves out; `noise_key` makes the noise of diurnal profiles differ per pod
/// yet stay reproducible; `read_file` loads trace files (relative paths are
/// passed through unchanged). Errors are INVALID_ARGUMENT at `path` + the
/// field inside the profile.
absl::StatusOr<std::unique_ptr<UsageProfile>> ParseUsageProfile(const std::string& text,
                                                                const std::string& path,
                                                                const Usage& requests,
                                                                const std::string& noise_key,
                                                                const FileReader& read_file);

}  // namespace codeco::codef
