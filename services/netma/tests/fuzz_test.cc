// Seeded random mutations of untrusted inputs — ALTO documents and peer
// summaries — never crash the parsers and never half-merge a summary.
#include <catch2/catch.hpp>
#include <fstream>
#include <random>

#include "google/protobuf/util/time_util.h"
#include "netma/core/alto.h"
#include "netma/core/federation.h"
#include "netma/core/monitor.h"

namespace codeco::netma {
namespace {

using nlohmann::json;

json Load(const std::string& name) {
  std::ifstream in(std::string(CODECO_NETMA_FIXTURES) + "/" + name);
  return json::parse(in);
}

// Replaces a random node of `doc` with a random value of a random JSON type.
void Mutate(json& doc, std::mt19937_64& rng) {
  json* node = &doc;
  for (int depth = 0; depth < 4 && (node->is_object() || node->is_array()) && !node->empty();
       ++depth) {
    size_t pick = rng() % node->size();
    auto it = node->begin();
    std::advance(it, pick);
    node = &*it;
  }
  switch (rng() % 7) {
    case 0:
      *node = nullptr;
      break;
    case 1:
      *node = static_cast<int64_t>(rng());
      break;
    case 2:
      *node = "x/" + std::to_string(rng() % 300);
      break;
    case 3:
      *node = json::array({1, "2", nullptr});
      break;
    case 4:
      *node = json::object({{"", 1}});
      break;
    case 5:
      *node = -1.5;
      break;
    default:
      *node = std::string(70, '\x7f');
      break;
  }
}

TEST_CASE("ALTO validators survive mutated documents") {
  std::mt19937_64 rng(20261122);
  json network = Load("rfc7285_network_map.json");
  json cost = Load("rfc7285_cost_map.json");
  int refused = 0;
  for (int i = 0; i < 3000; ++i) {
    json n = network, c = cost;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) {
      Mutate(n, rng);
      Mutate(c, rng);
    }
    refused += !ValidateAltoNetworkMap(n).ok();
    refused += !ValidateAltoCostMap(c).ok();
    // Cross-feeding the wrong kind of document is refused, never a crash.
    REQUIRE_FALSE(ValidateAltoCostMap(network).ok());
    REQUIRE_FALSE(ValidateAltoNetworkMap(cost).ok());
  }
  REQUIRE(refused > 1000);  // the mutations do hit validated fields
}

TEST_CASE("random summaries are either merged whole or refused whole") {
  std::mt19937_64 rng(42);
  SimulatedClock clock(absl::FromUnixSeconds(5'000'000));
  Federation federation("a", FederationOptions{}, clock);
  REQUIRE(federation.SetNeighborhood("nb", {"a", "b", "c"}).ok());
  const char* clusters[] = {"a", "b", "c", "d", ""};
  for (int i = 0; i < 2000; ++i) {
    v1::PeerSummary s;
    s.set_cluster(clusters[rng() % 5]);
    s.set_neighborhood_id(rng() % 8 ? "nb" : "other");
    int links = static_cast<int>(rng() % 4);
    for (int k = 0; k < links; ++k) {
      auto* l = s.add_links();
      std::string target = clusters[rng() % 5];
      l->set_source_cluster(rng() % 6 ? s.cluster() : "c");
      l->set_target_cluster(target);
      l->set_link_id(rng() % 6 ? LinkId(l->source_cluster(), target) : "junk");
      l->set_rtt_ema_ns(static_cast<int64_t>(rng() % 100'000'000) - 1'000);
      l->set_loss_ratio(static_cast<double>(rng() % 120) / 100.0);
      if (rng() % 5) {
        *l->mutable_measure_time() = google::protobuf::util::TimeUtil::NanosecondsToTimestamp(
            absl::ToUnixNanos(clock.Now() - absl::Seconds(static_cast<int64_t>(rng() % 100))));
      }
    }
    size_t before = federation.RemoteLinks("").size();
    auto merged = federation.Merge(s.cluster(), s);
    size_t after = federation.RemoteLinks("").size();
    if (!merged.ok()) {
      REQUIRE(after == before);
    } else {
      REQUIRE(after <= before + static_cast<size_t>(links));
    }
    clock.Advance(absl::Seconds(1));
  }
}

}  // namespace
}  // namespace codeco::netma
