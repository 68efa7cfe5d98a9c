// ALTO documents: the RFC 7285 examples (sections 11.2.1.7 and 11.2.3.7) as
// fixtures parse and validate; generated documents have the same structure;
// vtags change exactly when content changes; cost maps per metric and mode.
#include "netma/core/alto.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <set>

namespace codeco::netma {
namespace {

using codeco::netma::v1::CostMap;
using nlohmann::json;

json LoadFixture(const std::string& name) {
  std::ifstream in(std::string(CODECO_NETMA_FIXTURES) + "/" + name);
  REQUIRE(in.good());
  return json::parse(in);
}

std::set<std::string> Keys(const json& object) {
  std::set<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.insert(key);
  return keys;
}

TEST_CASE("the RFC 7285 example network map parses and validates") {
  json doc = LoadFixture("rfc7285_network_map.json");
  REQUIRE(ValidateAltoNetworkMap(doc).ok());
  REQUIRE(doc["meta"]["vtag"]["resource-id"] == "my-default-network-map");
  REQUIRE(doc["network-map"]["PID3"]["ipv6"][0] == "::/0");

  SECTION("broken variants are refused with the JSON path") {
    json bad = doc;
    bad["meta"].erase("vtag");
    REQUIRE_THAT(std::string(ValidateAltoNetworkMap(bad).message()), Catch::Contains("meta.vtag"));
    bad = doc;
    bad["network-map"]["PID1"]["ipv4"][1] = "198.51.100.300/25";
    REQUIRE_THAT(std::string(ValidateAltoNetworkMap(bad).message()),
                 Catch::Contains("network-map.PID1.ipv4[1]"));
    bad = doc;
    bad["network-map"]["PID2"]["ipx"] = json::array();
    REQUIRE_FALSE(ValidateAltoNetworkMap(bad).ok());
    bad = doc;
    bad["meta"]["vtag"]["tag"] = "has space";
    REQUIRE_FALSE(ValidateAltoNetworkMap(bad).ok());
  }
}

TEST_CASE("the RFC 7285 example cost map parses and validates") {
  json doc = LoadFixture("rfc7285_cost_map.json");
  REQUIRE(ValidateAltoCostMap(doc).ok());
  REQUIRE(doc["cost-map"]["PID3"]["PID1"] == 20);
  REQUIRE_FALSE(doc["cost-map"]["PID3"].contains("PID3"));

  json bad = doc;
  bad["meta"]["cost-type"]["cost-mode"] = "fuzzy";
  REQUIRE_THAT(std::string(ValidateAltoCostMap(bad).message()),
               Catch::Contains("meta.cost-type.cost-mode"));
  bad = doc;
  bad["cost-map"]["PID1"]["PID2"] = "five";
  REQUIRE_THAT(std::string(ValidateAltoCostMap(bad).message()),
               Catch::Contains("cost-map.PID1.PID2"));
  bad = doc;
  bad["meta"]["dependent-vtags"] = json::array();
  REQUIRE_FALSE(ValidateAltoCostMap(bad).ok());
}

std::vector<LinkCost> SampleCosts() {
  return {{"edge-a", "cloud", 5'000'000, 100'000'000, 0.01, 2e-7},
          {"cloud", "edge-a", 5'000'000, 80'000'000, 0.0, 1e-7},
          {"edge-a", "edge-b", 1'000'000, 10'000'000, 0.05, 8e-7},
          {"edge-b", "unknown", 1, 1, 0, 0}};
}

v1::NetworkMap SampleMap() {
  return BuildNetworkMap({{"cloud", {"10.0.3.1"}},
                          {"edge-a", {"127.0.1.1", "fd00::1"}},
                          {"edge-b", {"10.2.0.0/16", "gw.example"}}});
}

TEST_CASE("generated network map has the RFC example's structure") {
  json fixture = LoadFixture("rfc7285_network_map.json");
  json doc = NetworkMapToAltoJson(SampleMap(), "networkmap");
  REQUIRE(ValidateAltoNetworkMap(doc).ok());
  REQUIRE(Keys(doc) == Keys(fixture));
  REQUIRE(Keys(doc["meta"]) == Keys(fixture["meta"]));
  REQUIRE(Keys(doc["meta"]["vtag"]) == Keys(fixture["meta"]["vtag"]));
  REQUIRE(doc["network-map"]["edge-a"]["ipv4"] == json::array({"127.0.1.1/32"}));
  REQUIRE(doc["network-map"]["edge-a"]["ipv6"] == json::array({"fd00::1/128"}));
  REQUIRE(doc["network-map"]["edge-b"]["ipv4"] == json::array({"10.2.0.0/16"}));  // name dropped
  REQUIRE(doc["meta"]["vtag"]["tag"] == SampleMap().vtag());
}

TEST_CASE("the network map vtag changes exactly when the content changes") {
  auto a = BuildNetworkMap({{"x", {"10.0.0.1", "10.0.0.2"}}, {"y", {}}});
  auto same = BuildNetworkMap({{"y", {}}, {"x", {"10.0.0.2", "10.0.0.1", "10.0.0.1"}}});
  REQUIRE(a.vtag() == same.vtag());
  REQUIRE(BuildNetworkMap({{"x", {"10.0.0.1"}}, {"y", {}}}).vtag() != a.vtag());
  REQUIRE(BuildNetworkMap({{"x", {"10.0.0.1", "10.0.0.2"}}}).vtag() != a.vtag());
  REQUIRE(BuildNetworkMap({{"x", {"10.0.0.1", "10.0.0.2"}}, {"z", {}}}).vtag() != a.vtag());
  // Field boundaries count: moving a character between name and endpoint is a change.
  REQUIRE(BuildNetworkMap({{"ab", {"c"}}}).vtag() != BuildNetworkMap({{"a", {"bc"}}}).vtag());
}

TEST_CASE("generated cost maps have the RFC example's structure for every metric") {
  json fixture = LoadFixture("rfc7285_cost_map.json");
  v1::NetworkMap map = SampleMap();
  for (auto metric : {v1::COST_METRIC_DELAY, v1::COST_METRIC_BANDWIDTH, v1::COST_METRIC_LOSS,
                      v1::COST_METRIC_ENERGY}) {
    auto cost_map = BuildCostMap(map, SampleCosts(), metric, v1::COST_MODE_UNSPECIFIED, {}, {});
    REQUIRE(cost_map.ok());
    REQUIRE(cost_map->dependent_vtag() == map.vtag());
    REQUIRE(cost_map->entries_size() == 3);  // the link to an unknown PID is left out
    json doc = CostMapToAltoJson(*cost_map, "networkmap");
    REQUIRE(ValidateAltoCostMap(doc).ok());
    REQUIRE(Keys(doc) == Keys(fixture));
    REQUIRE(Keys(doc["meta"]) == Keys(fixture["meta"]));
    REQUIRE(Keys(doc["meta"]["dependent-vtags"][0]) == Keys(fixture["meta"]["dependent-vtags"][0]));
    REQUIRE(doc["meta"]["dependent-vtags"][0]["tag"] == map.vtag());
    REQUIRE(doc["meta"]["cost-type"]["cost-mode"] == "numerical");
    REQUIRE(doc["meta"]["cost-type"]["cost-metric"] == AltoCostMetricName(metric));
  }
  auto delay =
      BuildCostMap(map, SampleCosts(), v1::COST_METRIC_DELAY, v1::COST_MODE_NUMERICAL, {}, {});
  json doc = CostMapToAltoJson(*delay, "networkmap");
  REQUIRE(doc["cost-map"]["edge-a"]["edge-b"] == 1'000'000.0);
  REQUIRE(doc["cost-map"]["cloud"]["edge-a"] == 5'000'000.0);
}

TEST_CASE("ordinal cost maps rank 1 = best and rank bandwidth higher first") {
  v1::NetworkMap map = SampleMap();
  auto bw =
      BuildCostMap(map, SampleCosts(), v1::COST_METRIC_BANDWIDTH, v1::COST_MODE_ORDINAL, {}, {});
  REQUIRE(bw.ok());
  json doc = CostMapToAltoJson(*bw, "networkmap");
  REQUIRE(ValidateAltoCostMap(doc).ok());
  REQUIRE(doc["meta"]["cost-type"]["cost-mode"] == "ordinal");
  REQUIRE(doc["cost-map"]["edge-a"]["cloud"] == 1);
  REQUIRE(doc["cost-map"]["cloud"]["edge-a"] == 2);
  REQUIRE(doc["cost-map"]["edge-a"]["edge-b"] == 3);
  auto delay =
      BuildCostMap(map, SampleCosts(), v1::COST_METRIC_DELAY, v1::COST_MODE_ORDINAL, {}, {});
  json d = CostMapToAltoJson(*delay, "networkmap");
  REQUIRE(d["cost-map"]["edge-a"]["edge-b"] == 1);
  REQUIRE(d["cost-map"]["edge-a"]["cloud"] == 2);  // tie shares the rank
  REQUIRE(d["cost-map"]["cloud"]["edge-a"] == 2);
}

TEST_CASE("cost map filters and bad requests") {
  v1::NetworkMap map = SampleMap();
  auto filtered = BuildCostMap(map, SampleCosts(), v1::COST_METRIC_LOSS, v1::COST_MODE_NUMERICAL,
                               {"edge-a"}, {"edge-b"});
  REQUIRE(filtered.ok());
  REQUIRE(filtered->entries_size() == 1);
  REQUIRE(filtered->entries(0).cost() == Approx(0.05));
  auto bad = BuildCostMap(map, SampleCosts(), v1::COST_METRIC_UNSPECIFIED, v1::COST_MODE_NUMERICAL,
                          {"nope"}, {});
  REQUIRE(bad.status().code() == absl::StatusCode::kInvalidArgument);
  REQUIRE_THAT(std::string(bad.status().message()), Catch::Contains("metric"));
  REQUIRE_THAT(std::string(bad.status().message()), Catch::Contains("source_pids[0]"));
  REQUIRE(ParseCostMetricSegment("energy").value() == v1::COST_METRIC_ENERGY);
  REQUIRE_FALSE(ParseCostMetricSegment("jitter").ok());
}

}  // namespace
}  // namespace codeco::netma
