#pragma once
// Conversions around the shared codeco.common.v1 messages that every service
// and tool needs: times to proto timestamps, and cluster tiers and
// performance profiles to and from their names as labels, files and
// command lines spell them.

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "codeco/common/v1/operation.pb.h"
#include "codeco/common/v1/types.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace codeco {

/// `t` as a protobuf Timestamp (normalized, also before the epoch).
google::protobuf::Timestamp ToProtoTimestamp(absl::Time t);

/// The time a protobuf Timestamp names (an unset one is the Unix epoch).
absl::Time FromProtoTimestamp(const google::protobuf::Timestamp& t);

/// "far-edge", "edge", "cloud", or "" for an unset tier.
std::string TierName(common::v1::Tier tier);

/// The tier called `name` ("far-edge", "edge", "cloud"); TIER_UNSPECIFIED for
/// any other text.
common::v1::Tier ParseTier(std::string_view name);

/// "latency", "greenness", "resilience", "cost" or "custom" ("latency" for
/// an unset profile, the API's default).
std::string PerformanceProfileName(common::v1::PerformanceProfile profile);

/// The profile called `name` (one of PerformanceProfileName's names), or
/// nullopt for any other text.
std::optional<common::v1::PerformanceProfile> ParsePerformanceProfile(std::string_view name);

/// The status a stored Error stands for: its code and message (OK for an
/// unset code).
absl::Status StatusFromError(const common::v1::Error& error);

/// Writes `status`'s code and message into `error`.
void SetError(const absl::Status& status, common::v1::Error* error);

}  // namespace codeco
