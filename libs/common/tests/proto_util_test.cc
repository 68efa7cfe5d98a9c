#include <catch2/catch.hpp>

#include "codeco/common/proto_util.h"

namespace codeco {
namespace {

TEST_CASE("times become normalized proto timestamps") {
  auto ts = ToProtoTimestamp(absl::FromUnixNanos(1'700'000'000'123'456'789));
  REQUIRE(ts.seconds() == 1'700'000'000);
  REQUIRE(ts.nanos() == 123'456'789);
  auto before_epoch = ToProtoTimestamp(absl::FromUnixNanos(-1));
  REQUIRE(before_epoch.seconds() == -1);
  REQUIRE(before_epoch.nanos() == 999'999'999);
}

TEST_CASE("tiers round-trip through their names") {
  for (auto tier : {common::v1::TIER_FAR_EDGE, common::v1::TIER_EDGE, common::v1::TIER_CLOUD}) {
    REQUIRE(ParseTier(TierName(tier)) == tier);
  }
  REQUIRE(TierName(common::v1::TIER_UNSPECIFIED).empty());
  REQUIRE(ParseTier("Edge") == common::v1::TIER_UNSPECIFIED);
  REQUIRE(ParseTier("") == common::v1::TIER_UNSPECIFIED);
}

TEST_CASE("a status round-trips through a stored Error") {
  common::v1::Error error;
  SetError(absl::FailedPreconditionError("pod cache is not running"), &error);
  REQUIRE(error.code() == common::v1::ERROR_CODE_FAILED_PRECONDITION);
  absl::Status back = StatusFromError(error);
  REQUIRE(absl::IsFailedPrecondition(back));
  REQUIRE(back.message() == "pod cache is not running");
  REQUIRE(StatusFromError(common::v1::Error()).ok());
}

}  // namespace
}  // namespace codeco
