// LinkTable: registration, validation with field names, directed links,
// partitions applied to the effective path state.
#include "tools/codef/relay/link_table.h"

#include <catch2/catch.hpp>

namespace codeco::codef {
namespace {

TEST_CASE("clusters are registered once per name and per address") {
  LinkTable table;
  REQUIRE(table.AddCluster("c2", "127.0.2.1").ok());
  REQUIRE(table.AddCluster("c2", "127.0.9.1").code() == absl::StatusCode::kAlreadyExists);
  REQUIRE(table.AddCluster("c9", "127.0.2.1").code() == absl::StatusCode::kAlreadyExists);
  REQUIRE(table.AddCluster("", "127.0.4.1").code() == absl::StatusCode::kInvalidArgument);
  absl::Status bad_ip = table.AddCluster("c4", "localhost");
  REQUIRE(bad_ip.code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(bad_ip.message().find("service_ip") != std::string::npos);
  REQUIRE(table.ClusterForIp("127.0.2.1") == "c2");
  REQUIRE_FALSE(table.ClusterForIp("127.0.5.1").has_value());
  REQUIRE(table.HasCluster("c2"));
  REQUIRE_FALSE(table.HasCluster("c4"));
}

TEST_CASE("links are directed validated and default to unshaped") {
  LinkTable table;
  REQUIRE(table.AddCluster("a", "127.0.2.1").ok());
  REQUIRE(table.AddCluster("b", "127.0.3.1").ok());
  REQUIRE(table.GetLink("a", "b")->one_way_latency_ns == 0);
  REQUIRE(table.SetLink("a", "b", {.one_way_latency_ns = 5'000'000, .bandwidth_bps = 1000}).ok());
  REQUIRE(table.SetLink("b", "a", {.one_way_latency_ns = 7'000'000}).ok());
  REQUIRE(table.GetLink("a", "b")->one_way_latency_ns == 5'000'000);
  REQUIRE(table.GetLink("a", "b")->bandwidth_bps == 1000);
  REQUIRE(table.GetLink("b", "a")->one_way_latency_ns == 7'000'000);

  absl::StatusOr<PathState> path = table.Path("a", "b");
  REQUIRE(path.ok());
  REQUIRE(path->forward.one_way_latency_ns == 5'000'000);
  REQUIRE(path->reverse_latency_ns == 7'000'000);
  REQUIRE_FALSE(path->forward.cut);

  absl::Status bad = table.SetLink("a", "b", {.one_way_latency_ns = -1, .loss = 1.5});
  REQUIRE(bad.code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(bad.message().find("one_way_latency_ns") != std::string::npos);
  REQUIRE(bad.message().find("loss") != std::string::npos);
  REQUIRE(table.SetLink("a", "b", {.bandwidth_bps = -5}).code() ==
          absl::StatusCode::kInvalidArgument);
  REQUIRE(table.GetLink("a", "b")->one_way_latency_ns == 5'000'000);  // unchanged
  REQUIRE(table.SetLink("a", "zz", {}).code() == absl::StatusCode::kNotFound);
  REQUIRE(table.SetLink("a", "a", {}).code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(table.GetLink("zz", "a").status().code() == absl::StatusCode::kNotFound);
  // Inside one cluster nothing is shaped.
  REQUIRE(table.Path("a", "a")->forward.one_way_latency_ns == 0);
}

TEST_CASE("a partition cuts every path to and from the cluster") {
  LinkTable table;
  REQUIRE(table.AddCluster("a", "127.0.2.1").ok());
  REQUIRE(table.AddCluster("b", "127.0.3.1").ok());
  REQUIRE(table.AddCluster("c", "127.0.4.1").ok());
  REQUIRE(table.SetPartitioned("b", true).ok());
  REQUIRE(*table.IsPartitioned("b"));
  REQUIRE(table.Path("a", "b")->forward.cut);
  REQUIRE(table.Path("b", "c")->forward.cut);
  REQUIRE_FALSE(table.Path("a", "c")->forward.cut);
  REQUIRE_FALSE(table.GetLink("a", "b")->cut);  // the link itself is unchanged
  REQUIRE(table.SetPartitioned("b", false).ok());
  REQUIRE_FALSE(table.Path("a", "b")->forward.cut);
  REQUIRE(table.SetPartitioned("nope", true).code() == absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace codeco::codef
