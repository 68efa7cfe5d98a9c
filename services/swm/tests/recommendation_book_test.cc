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

const std::map<std::string, double> kGreen = {{"greenness", 1}};

TEST_CASE("the book merges the clusters' recommendations and lets them expire") {
  SimulatedClock clock(absl::FromUnixSeconds(1000));
  RecommendationBook book(clock);
  CHECK_FALSE(book.Collect({"a", "b"}, kGreen).has_value());
  book.Record("a", "greenness", Rec(70, {{"n1", 80}, {"n2", 60}}), absl::Seconds(60));
  book.Record("b", "greenness", Rec(40, {{"n1", 40}}), absl::Seconds(10));
  book.Record("a", "latency", Rec(20, {}), absl::Seconds(60));
  auto recs = book.Collect({"a", "b", "c"}, kGreen);
  REQUIRE(recs.has_value());
  CHECK(recs->cluster_scores == std::map<std::string, double>{{"a", 70}, {"b", 40}});
  CHECK(recs->node_scores.at({"a", "n2"}) == 60);
  CHECK(recs->node_scores.at({"b", "n1"}) == 40);
  // Only the asked clusters.
  CHECK(book.Collect({"b"}, kGreen)->cluster_scores.count("a") == 0);
  // b's entry expires first.
  clock.Advance(absl::Seconds(10));
  CHECK_FALSE(book.Has("b", "greenness"));
  CHECK(book.Collect({"a", "b"}, kGreen)->cluster_scores.count("b") == 0);
  // A newer record replaces the older one.
  book.Record("a", "greenness", Rec(10, {{"n1", 10}}), absl::Seconds(60));
  recs = book.Collect({"a"}, kGreen);
  CHECK(recs->cluster_scores.at("a") == 10);
  CHECK(recs->node_scores.count({"a", "n2"}) == 0);
  // Forget drops a cluster's every profile.
  book.Forget("a");
  CHECK_FALSE(book.Has("a", "latency"));
  CHECK_FALSE(book.Collect({"a", "b"}, kGreen).has_value());
}

TEST_CASE("a custom profile blends the built-in profiles' scores by its weights") {
  const Application custom{.name = "x", .performance_profile = "custom",
                           .custom_profile_weights = {{"greenness", 3}, {"latency", 1}, {"cost", 0}}};
  const auto weights = RecommendationBook::ProfileWeights(custom);
  CHECK(weights == std::map<std::string, double>{{"greenness", 3}, {"latency", 1}});
  CHECK(RecommendationBook::ProfileWeights(Application{.performance_profile = "cost"}) ==
        std::map<std::string, double>{{"cost", 1}});
  CHECK(RecommendationBook::ProfileWeights(Application{.performance_profile = "custom"}).empty());

  SimulatedClock clock;
  RecommendationBook book(clock);
  book.Record("a", "greenness", Rec(80, {{"n1", 100}, {"n2", 60}}), absl::Seconds(60));
  book.Record("a", "latency", Rec(40, {{"n1", 20}}), absl::Seconds(60));
  book.Record("b", "greenness", Rec(90, {{"n1", 90}}), absl::Seconds(60));  // no latency: left out
  auto recs = book.Collect({"a", "b"}, weights);
  REQUIRE(recs.has_value());
  CHECK(recs->cluster_scores == std::map<std::string, double>{{"a", 0.75 * 80 + 0.25 * 40}});
  CHECK(recs->node_scores.at({"a", "n1"}) == Approx(0.75 * 100 + 0.25 * 20));
  CHECK(recs->node_scores.count({"a", "n2"}) == 0);  // not scored for latency
  CHECK_FALSE(book.Collect({"b"}, weights).has_value());
  CHECK_FALSE(book.Collect({"a"}, {}).has_value());
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
