// The hub's memory of the PDLCs' recommendations: merging, expiry, custom
// weights kept apart, bounded size.
#include <catch2/catch.hpp>

#include "codeco/common/clock.h"
#include "swm/core/recommendation_book.h"

namespace codeco::swm {
namespace {

ClusterRecommendation Rec(double cluster, std::map<std::string, double> nodes) {
  return ClusterRecommendation{.cluster_score = cluster, .node_scores = std::move(nodes)};
}

TEST_CASE("the book merges the clusters' recommendations and lets them expire") {
  SimulatedClock clock(absl::FromUnixSeconds(1000));
  RecommendationBook book(clock);
  CHECK_FALSE(book.Collect({"a", "b"}, "greenness").has_value());
  book.Record("a", "greenness", Rec(70, {{"n1", 80}, {"n2", 60}}), absl::Seconds(60));
  book.Record("b", "greenness", Rec(40, {{"n1", 40}}), absl::Seconds(10));
  book.Record("a", "latency", Rec(20, {}), absl::Seconds(60));
  auto recs = book.Collect({"a", "b", "c"}, "greenness");
  REQUIRE(recs.has_value());
  CHECK(recs->cluster_scores == std::map<std::string, double>{{"a", 70}, {"b", 40}});
  CHECK(recs->node_scores.at({"a", "n2"}) == 60);
  CHECK(recs->node_scores.at({"b", "n1"}) == 40);
  // Only the asked clusters.
  CHECK(book.Collect({"b"}, "greenness")->cluster_scores.count("a") == 0);
  // b's entry expires first.
  clock.Advance(absl::Seconds(10));
  CHECK_FALSE(book.Has("b", "greenness"));
  CHECK(book.Collect({"a", "b"}, "greenness")->cluster_scores.count("b") == 0);
  // A newer record replaces the older one.
  book.Record("a", "greenness", Rec(10, {{"n1", 10}}), absl::Seconds(60));
  recs = book.Collect({"a"}, "greenness");
  CHECK(recs->cluster_scores.at("a") == 10);
  CHECK(recs->node_scores.count({"a", "n2"}) == 0);
  // Forget drops a cluster's every profile.
  book.Forget("a");
  CHECK_FALSE(book.Has("a", "latency"));
  CHECK_FALSE(book.Collect({"a", "b"}, "greenness").has_value());
}

TEST_CASE("custom profiles with different weights never share an entry") {
  Application a{.name = "x", .performance_profile = "custom", .custom_profile_weights = {{"energy", 1}}};
  Application b = a;
  b.custom_profile_weights["carbon"] = 2;
  Application c{.name = "y", .performance_profile = "custom", .custom_profile_weights = {{"energy", 1}}};
  CHECK(RecommendationBook::ProfileKey(a) != RecommendationBook::ProfileKey(b));
  CHECK(RecommendationBook::ProfileKey(a) == RecommendationBook::ProfileKey(c));
  CHECK(RecommendationBook::ProfileKey(Application{.performance_profile = "greenness"}) == "greenness");
}

TEST_CASE("the book keeps at most max_entries and drops the one expiring first") {
  SimulatedClock clock;
  RecommendationBook book(clock, RecommendationBookOptions{.max_entries = 2});
  book.Record("a", "p", Rec(1, {}), absl::Seconds(30));
  book.Record("b", "p", Rec(2, {}), absl::Seconds(10));
  book.Record("c", "p", Rec(3, {}), absl::Seconds(20));
  CHECK(book.Has("a", "p"));
  CHECK_FALSE(book.Has("b", "p"));
  CHECK(book.Has("c", "p"));
}

}  // namespace
}  // namespace codeco::swm
