#include "codeco/common/proto_util.h"

#include "google/protobuf/util/time_util.h"

namespace codeco {

google::protobuf::Timestamp ToProtoTimestamp(absl::Time t) {
  return google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(t));
}

absl::Time FromProtoTimestamp(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

std::string TierName(common::v1::Tier tier) {
  switch (tier) {
    case common::v1::TIER_FAR_EDGE:
      return "far-edge";
    case common::v1::TIER_EDGE:
      return "edge";
    case common::v1::TIER_CLOUD:
      return "cloud";
    default:
      return "";
  }
}

common::v1::Tier ParseTier(std::string_view name) {
  if (name == "far-edge") return common::v1::TIER_FAR_EDGE;
  if (name == "edge") return common::v1::TIER_EDGE;
  if (name == "cloud") return common::v1::TIER_CLOUD;
  return common::v1::TIER_UNSPECIFIED;
}

std::string PerformanceProfileName(common::v1::PerformanceProfile profile) {
  switch (profile) {
    case common::v1::PERFORMANCE_PROFILE_GREENNESS:
      return "greenness";
    case common::v1::PERFORMANCE_PROFILE_RESILIENCE:
      return "resilience";
    case common::v1::PERFORMANCE_PROFILE_COST:
      return "cost";
    case common::v1::PERFORMANCE_PROFILE_CUSTOM:
      return "custom";
    default:
      return "latency";
  }
}

std::optional<common::v1::PerformanceProfile> ParsePerformanceProfile(std::string_view name) {
  if (name == "latency") return common::v1::PERFORMANCE_PROFILE_LATENCY;
  if (name == "greenness") return common::v1::PERFORMANCE_PROFILE_GREENNESS;
  if (name == "resilience") return common::v1::PERFORMANCE_PROFILE_RESILIENCE;
  if (name == "cost") return common::v1::PERFORMANCE_PROFILE_COST;
  if (name == "custom") return common::v1::PERFORMANCE_PROFILE_CUSTOM;
  return std::nullopt;
}

absl::Status StatusFromError(const common::v1::Error& error) {
  return absl::Status(static_cast<absl::StatusCode>(error.code()), error.message());
}

void SetError(const absl::Status& status, common::v1::Error* error) {
  error->set_code(static_cast<common::v1::ErrorCode>(status.code()));
  error->set_message(std::string(status.message()));
}

}  // namespace codeco
