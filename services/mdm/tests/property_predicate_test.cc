// ListEntities' property predicates (mdm/core/property_predicate.h): what
// each operator matches, across kinds and nested paths, and what is refused.
#include "mdm/core/property_predicate.h"

#include <catch2/catch.hpp>

#include "google/protobuf/util/json_util.h"

namespace codeco::mdm {
namespace {

google::protobuf::Struct Json(const std::string& json) {
  google::protobuf::Struct s;
  REQUIRE(google::protobuf::util::JsonStringToMessage(json, &s).ok());
  return s;
}

// A predicate from its JSON form, e.g. {"property": "a", "operator": "PREDICATE_OPERATOR_EQUALS",
// "value": 1}.
v1::PropertyPredicate Predicate(const std::string& json) {
  v1::PropertyPredicate p;
  REQUIRE(google::protobuf::util::JsonStringToMessage(json, &p).ok());
  return p;
}

bool Holds(const std::string& properties, const std::string& predicate) {
  google::protobuf::RepeatedPtrField<v1::PropertyPredicate> where;
  *where.Add() = Predicate(predicate);
  REQUIRE(ValidatePredicates(where).ok());
  return MatchesAll(Json(properties), where);
}

TEST_CASE("each predicate operator matches by kind and nested path") {
  const std::string node = R"({"cpu": 8, "region": "eu-west", "ready": true, "zone": null,
      "labels": {"tier": "edge", "gpu": {"count": 2}}, "tags": ["gdpr", "low-carbon", 3]})";
  auto op = [](const std::string& property, const std::string& op, const std::string& value) {
    return R"({"property": ")" + property + R"(", "operator": "PREDICATE_OPERATOR_)" + op +
           R"(", "value": )" + value + "}";
  };
  CHECK(Holds(node, op("cpu", "EQUALS", "8")));
  CHECK_FALSE(Holds(node, op("cpu", "EQUALS", "\"8\"")));  // a string never equals a number
  CHECK(Holds(node, op("region", "EQUALS", "\"eu-west\"")));
  CHECK(Holds(node, op("ready", "EQUALS", "true")));
  CHECK(Holds(node, op("ready", "NOT_EQUALS", "false")));
  CHECK(Holds(node, op("missing", "NOT_EQUALS", "1")));  // as a label selector's !=
  CHECK(Holds(node, op("cpu", "GREATER", "4")));
  CHECK_FALSE(Holds(node, op("cpu", "GREATER", "8")));
  CHECK(Holds(node, op("cpu", "GREATER_OR_EQUAL", "8")));
  CHECK(Holds(node, op("cpu", "LESS", "16")));
  CHECK(Holds(node, op("cpu", "LESS_OR_EQUAL", "8")));
  CHECK(Holds(node, op("region", "LESS", "\"eu-wf\"")));
  CHECK_FALSE(Holds(node, op("region", "GREATER", "1")));  // no order across kinds
  CHECK_FALSE(Holds(node, op("missing", "LESS", "1")));
  CHECK(Holds(node, op("labels.tier", "EQUALS", "\"edge\"")));
  CHECK(Holds(node, op("labels.gpu.count", "GREATER_OR_EQUAL", "2")));
  CHECK_FALSE(Holds(node, op("labels.tier.x", "EQUALS", "\"edge\"")));
  CHECK(Holds(node, op("region", "CONTAINS", "\"west\"")));
  CHECK(Holds(node, op("tags", "CONTAINS", "\"gdpr\"")));
  CHECK(Holds(node, op("tags", "CONTAINS", "3")));
  CHECK_FALSE(Holds(node, op("tags", "CONTAINS", "\"gd\"")));
  CHECK_FALSE(Holds(node, op("cpu", "CONTAINS", "8")));
  CHECK(Holds(node, R"({"property": "zone", "operator": "PREDICATE_OPERATOR_EXISTS"})"));
  CHECK(Holds(node, R"({"property": "labels.gpu", "operator": "PREDICATE_OPERATOR_EXISTS"})"));
  CHECK(Holds(node, R"({"property": "nope", "operator": "PREDICATE_OPERATOR_NOT_EXISTS"})"));
  CHECK_FALSE(Holds(node, R"({"property": "cpu", "operator": "PREDICATE_OPERATOR_NOT_EXISTS"})"));
  CHECK(Holds(node,
              R"({"property": "labels.tier", "operator": "PREDICATE_OPERATOR_IN",
                  "values": ["far-edge", "edge"]})"));
  CHECK_FALSE(Holds(node, R"({"property": "cpu", "operator": "PREDICATE_OPERATOR_IN",
                              "values": [4, "8"]})"));
}

TEST_CASE("bad predicates are refused naming the field") {
  auto refused = [](const std::string& json) {
    google::protobuf::RepeatedPtrField<v1::PropertyPredicate> where;
    *where.Add() = Predicate(R"({"property": "a", "operator": "PREDICATE_OPERATOR_EXISTS"})");
    *where.Add() = Predicate(json);
    absl::Status status = ValidatePredicates(where);
    REQUIRE(absl::IsInvalidArgument(status));
    return std::string(status.message());
  };
  CHECK_THAT(refused(R"({"operator": "PREDICATE_OPERATOR_EXISTS"})"),
             Catch::StartsWith("where[1].property: required"));
  CHECK_THAT(refused(R"({"property": "a..b", "operator": "PREDICATE_OPERATOR_EXISTS"})"),
             Catch::StartsWith("where[1].property") && Catch::Contains("empty name"));
  CHECK_THAT(refused(R"({"property": "a"})"), Catch::StartsWith("where[1].operator"));
  CHECK_THAT(refused(R"({"property": "a", "operator": "PREDICATE_OPERATOR_EQUALS"})"),
             Catch::StartsWith("where[1].value: required"));
  CHECK_THAT(refused(R"({"property": "a", "operator": "PREDICATE_OPERATOR_LESS", "value": true})"),
             Catch::StartsWith("where[1].value") && Catch::Contains("boolean"));
  CHECK_THAT(refused(R"({"property": "a", "operator": "PREDICATE_OPERATOR_EQUALS", "value": [1]})"),
             Catch::StartsWith("where[1].value"));
  CHECK_THAT(refused(R"({"property": "a", "operator": "PREDICATE_OPERATOR_EXISTS", "value": 1})"),
             Catch::StartsWith("where[1].value"));
  CHECK_THAT(refused(R"({"property": "a", "operator": "PREDICATE_OPERATOR_IN"})"),
             Catch::StartsWith("where[1].values"));
  CHECK_THAT(refused(R"({"property": "a", "operator": "PREDICATE_OPERATOR_IN", "value": 1})"),
             Catch::StartsWith("where[1].value"));
  CHECK_THAT(
      refused(R"({"property": "a", "operator": "PREDICATE_OPERATOR_IN", "values": [1, {}]})"),
      Catch::StartsWith("where[1].values[1]"));
  CHECK_THAT(refused(R"({"property": "a", "operator": "PREDICATE_OPERATOR_EQUALS", "value": 1,
                        "values": [1]})"),
             Catch::StartsWith("where[1].values"));
  CHECK_THAT(refused(R"({"property": ")" + std::string(300, 'a') +
                     R"(", "operator": "PREDICATE_OPERATOR_EXISTS"})"),
             Catch::StartsWith("where[1].property") && Catch::Contains("256"));

  google::protobuf::RepeatedPtrField<v1::PropertyPredicate> many;
  for (int i = 0; i < 17; ++i) {
    *many.Add() = Predicate(R"({"property": "a", "operator": "PREDICATE_OPERATOR_EXISTS"})");
  }
  CHECK_THAT(std::string(ValidatePredicates(many).message()),
             Catch::StartsWith("where: at most 16"));
}

}  // namespace
}  // namespace codeco::mdm
