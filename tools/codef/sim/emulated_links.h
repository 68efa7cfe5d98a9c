#pragma once
// The emulated federation's links as SWM's LinkSource, read in process: what
// NetMA would measure on them (a cut link is none; a link without a bandwidth
// cap is unlimited). CODEF's simulate mode plans with it, and the placement
// benchmark uses it for the one links read a placement makes.

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "federation.h"
#include "swm/core/federation_source.h"

namespace codeco::codef {

/// A link without a bandwidth cap, as the scheduler sees it.
inline constexpr int64_t kUnlimitedBandwidthBps = int64_t{1} << 50;

/// A link of one-way latency `latency_ns` and bandwidth cap `bandwidth_bps`
/// (0 = none) as the scheduler sees it.
swm::Link SchedulerLink(const std::string& from, const std::string& to, int64_t latency_ns,
                        int64_t bandwidth_bps);

/// The link from -> to of `federation` as the scheduler sees it; nullopt
/// when cut or unknown.
std::optional<swm::Link> EmulatedLink(const Federation& federation, const std::string& from,
                                      const std::string& to);

/// LinkSource over an emulated federation (which must outlive it).
class EmulatedLinks final : public swm::LinkSource {
 public:
  explicit EmulatedLinks(const Federation& federation) : federation_(federation) {}
  absl::StatusOr<std::optional<swm::Link>> GetLink(const std::string& from,
                                                   const std::string& to) override {
    return EmulatedLink(federation_, from, to);
  }

 private:
  const Federation& federation_;
};

}  // namespace codeco::codef
