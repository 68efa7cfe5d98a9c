#include "codeco/common/proto_util.h"

#include "google/protobuf/util/time_util.h"

namespace codeco {

google::protobuf::Timestamp ToProtoTimestamp(absl::Time t) {
  return google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(t));
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

}  // namespace codeco
