// `codecoctl get metadata --where`: each expression form becomes the
// property predicate it reads as.
#include <catch2/catch.hpp>

#include "metadata.h"

namespace codeco::ctl {
namespace {

namespace pb = mdm::v1;

TEST_CASE("where expressions read as property predicates") {
  auto parsed = [](const std::string& expression) {
    absl::StatusOr<pb::PropertyPredicate> p = ParseWhere(expression);
    INFO(expression);
    REQUIRE(p.ok());
    return *p;
  };
  pb::PropertyPredicate p = parsed("restarts>3");
  CHECK(p.property() == "restarts");
  CHECK(p.operator_() == pb::PREDICATE_OPERATOR_GREATER);
  CHECK(p.value().number_value() == 3);
  CHECK(parsed("cpu >= 2.5").operator_() == pb::PREDICATE_OPERATOR_GREATER_OR_EQUAL);
  CHECK(parsed("cpu<=4").operator_() == pb::PREDICATE_OPERATOR_LESS_OR_EQUAL);
  CHECK(parsed("cpu<4").operator_() == pb::PREDICATE_OPERATOR_LESS);
  p = parsed("labels.region=eu-west");
  CHECK(p.property() == "labels.region");
  CHECK(p.operator_() == pb::PREDICATE_OPERATOR_EQUALS);
  CHECK(p.value().string_value() == "eu-west");
  CHECK(parsed("phase==Running").value().string_value() == "Running");
  p = parsed("ready!=true");
  CHECK(p.operator_() == pb::PREDICATE_OPERATOR_NOT_EQUALS);
  CHECK(p.value().bool_value());
  CHECK(parsed("version=\"7\"").value().string_value() == "7");
  p = parsed("tier in (edge, far-edge, 3)");
  CHECK(p.operator_() == pb::PREDICATE_OPERATOR_IN);
  REQUIRE(p.values_size() == 3);
  CHECK(p.values(1).string_value() == "far-edge");
  CHECK(p.values(2).number_value() == 3);
  p = parsed("tags contains gdpr");
  CHECK(p.operator_() == pb::PREDICATE_OPERATOR_CONTAINS);
  CHECK(p.value().string_value() == "gdpr");
  CHECK(parsed("gpu").operator_() == pb::PREDICATE_OPERATOR_EXISTS);
  p = parsed("!gpu");
  CHECK(p.operator_() == pb::PREDICATE_OPERATOR_NOT_EXISTS);
  CHECK(p.property() == "gpu");

  for (const char* bad : {"", "  ", "=3", "tier in edge", "!"}) {
    INFO(bad);
    absl::StatusOr<pb::PropertyPredicate> refused = ParseWhere(bad);
    REQUIRE(absl::IsInvalidArgument(refused.status()));
    CHECK_THAT(std::string(refused.status().message()), Catch::StartsWith("--where"));
  }
}

}  // namespace
}  // namespace codeco::ctl
