// MDM's type registry (mdm/core/type_registry.h): schemas compile or are
// refused naming why; violations name the property's path; types keep
// their kind and count their versions; relationships join registered
// entity types.
#include "mdm/core/type_registry.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace codeco::mdm {
namespace {

const char* kPodSchema = R"({
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "required": ["namespace", "restarts"],
  "properties": {
    "namespace": {"type": "string", "pattern": "^[a-z0-9-]+$"},
    "restarts": {"type": "integer", "minimum": 0},
    "containers": {"type": "array", "items": {"type": "object", "required": ["image"]}}
  }
})";

TypeSpec Entity(const std::string& name, const std::string& schema = "") {
  return {name, TypeKind::kEntity, "", schema, "", ""};
}

TEST_CASE("A property schema refuses what is wrong and names the path", "[mdm][types]") {
  absl::StatusOr<PropertySchema> pod = PropertySchema::Compile(kPodSchema, "properties_schema");
  INFO(pod.status().ToString());
  REQUIRE(pod.ok());
  CHECK(pod->Validate(nlohmann::json::parse(R"({"namespace": "shop", "restarts": 2})"),
                      "events[0].properties")
            .ok());

  absl::Status bad = pod->Validate(
      nlohmann::json::parse(
          R"({"namespace": "Shop!", "restarts": -1, "containers": [{"image": "a"}, {}]})"),
      "events[3].properties");
  REQUIRE(bad.code() == absl::StatusCode::kInvalidArgument);
  const std::string message(bad.message());
  CHECK_THAT(message, Catch::Contains("events[3].properties.namespace: ") &&
                          Catch::Contains("events[3].properties.restarts: ") &&
                          Catch::Contains("events[3].properties.containers[1]: "));
  absl::Status missing = pod->Validate(nlohmann::json::parse(R"({"restarts": 0})"), "props");
  CHECK_THAT(std::string(missing.message()), Catch::Contains("namespace"));
}

TEST_CASE("Schemas that are not draft-07 JSON or that reach outside are refused", "[mdm][types]") {
  auto message = [](const std::string& schema) {
    absl::StatusOr<PropertySchema> s = PropertySchema::Compile(schema, "properties_schema");
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(s.status().message());
  };
  CHECK_THAT(message("{"), Catch::StartsWith("properties_schema: is not JSON"));
  CHECK_THAT(message("[1]"), Catch::Contains("must be a JSON object"));
  CHECK_THAT(message(R"({"$schema": "https://json-schema.org/draft/2020-12/schema"})"),
             Catch::StartsWith("properties_schema.$schema: only draft-07"));
  CHECK_THAT(message(R"({"$ref": "http://example.org/other.json"})"),
             Catch::Contains("another document"));
  CHECK_THAT(message(R"({"type": 3})"), Catch::Contains("not a valid draft-07 schema"));
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += R"({"not": )";
  deep += "{}";
  for (int i = 0; i < 40; ++i) deep += "}";
  CHECK_THAT(message(deep), Catch::Contains("nests deeper than 32"));
  CHECK_THAT(message(std::string(300 << 10, ' ')), Catch::Contains("over the 262144-byte limit"));
  // A pattern std::regex cannot read is refused when applied, not crashed on.
  absl::StatusOr<PropertySchema> broken =
      PropertySchema::Compile(R"({"properties": {"a": {"pattern": "(("}}})", "schema");
  REQUIRE(broken.ok());
  absl::Status applied = broken->Validate(nlohmann::json::parse(R"({"a": "x"})"), "p");
  CHECK(applied.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(applied.message()), Catch::Contains("cannot be applied"));
}

TEST_CASE("Long strings under a pattern schema are refused before the regex sees them",
          "[mdm][types]") {
  absl::StatusOr<PropertySchema> s =
      PropertySchema::Compile(R"({"properties": {"a": {"pattern": "^(a|b)*$"}}})", "schema");
  REQUIRE(s.ok());
  // At the limit it is matched, on a thread of its own (a service's stack).
  absl::Status at_limit;
  std::thread([&] {
    at_limit = s->Validate(nlohmann::json{{"a", std::string(1024, 'a')}}, "p");
  }).join();
  CHECK(at_limit.ok());
  absl::Status over = s->Validate(nlohmann::json{{"b", std::string(100000, 'a')}}, "p");
  CHECK(over.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(over.message()), Catch::StartsWith("p.b: a string longer than 1024"));
}

TEST_CASE("The registry versions types and joins relationships to entity types", "[mdm][types]") {
  TypeRegistry registry;
  auto pod = registry.Register(Entity("Pod", kPodSchema));
  REQUIRE(pod.ok());
  CHECK((*pod)->version == 1);
  CHECK((*registry.Register(Entity("Pod", kPodSchema)))->version == 1);  // unchanged
  TypeSpec described = Entity("Pod", kPodSchema);
  described.description = "a Kubernetes pod";
  CHECK((*registry.Register(described))->version == 2);
  REQUIRE(registry.Register(Entity("Node")).ok());

  TypeSpec runs_on{"RUNS_ON", TypeKind::kRelationship, "", "", "Pod", "Node"};
  REQUIRE(registry.Register(runs_on).ok());
  CHECK(registry.List().size() == 3);

  TypeSpec dangling{"HOLDS", TypeKind::kRelationship, "", "", "Pod", "DataSet"};
  CHECK_THAT(std::string(registry.Register(dangling).status().message()),
             Catch::StartsWith("to_type: \"DataSet\" is not a registered entity type"));
  TypeSpec ends = Entity("Cluster");
  ends.from_type = "Pod";
  CHECK_THAT(std::string(registry.Register(ends).status().message()),
             Catch::StartsWith("from_type: is for relationship types only"));
  // An empty end takes any entity type.
  TypeSpec contains{"CONTAINS", TypeKind::kRelationship, "", "", "", ""};
  REQUIRE(registry.Register(contains).ok());
  CHECK(registry.CheckRelationship("CONTAINS", "Node", "Pod", nlohmann::json::object(), "p").ok());
  CHECK(registry.CheckRelationship("CONTAINS", "Pod", "Pod", nlohmann::json::object(), "p").ok());
  CHECK_FALSE(
      registry.CheckRelationship("RUNS_ON", "Node", "Node", nlohmann::json::object(), "p").ok());
  TypeSpec switched{"Pod", TypeKind::kRelationship, "", "", "Pod", "Node"};
  CHECK_THAT(std::string(registry.Register(switched).status().message()),
             Catch::StartsWith("kind: "));
  CHECK_THAT(std::string(registry.Register(Entity("1pod")).status().message()),
             Catch::StartsWith("name: "));
  CHECK_THAT(std::string(registry.Register(Entity("Bad", "{")).status().message()),
             Catch::StartsWith("properties_schema: is not JSON"));

  const nlohmann::json ok_pod = nlohmann::json::parse(R"({"namespace": "a", "restarts": 0})");
  CHECK(registry.CheckEntity("Pod", ok_pod, "properties").ok());
  CHECK(registry.CheckEntity("Volume", ok_pod, "properties").code() == absl::StatusCode::kNotFound);
  CHECK(registry.CheckEntity("RUNS_ON", ok_pod, "properties").code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(registry.CheckRelationship("RUNS_ON", "Pod", "Node", nlohmann::json::object(), "p").ok());
  CHECK_THAT(
      std::string(
          registry.CheckRelationship("RUNS_ON", "Node", "Node", nlohmann::json::object(), "p")
              .message()),
      Catch::StartsWith("from_id: a RUNS_ON starts at a Pod, not a Node"));
}

}  // namespace
}  // namespace codeco::mdm
