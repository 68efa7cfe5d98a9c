// ACM figures: neighborhood selection among 10,000 registered clusters (the
// issue's bound is 5 ms), the periodic partitioning behind it, and parsing
// the bookinfo CAM. Clusters are generated from a fixed seed.
#include <benchmark/benchmark.h>

#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "acm/core/cam_parser.h"
#include "acm/core/neighborhood_composer.h"

namespace codeco::acm {
namespace {

struct Region {
  const char* name;
  const char* country;
  double lat;
  double lon;
};
constexpr Region kRegions[] = {
    {"eu-west", "PT", 39.0, -8.5},   {"eu-south", "ES", 40.4, -3.7},
    {"eu-central", "DE", 50.1, 8.7}, {"eu-north", "SE", 59.3, 18.1},
    {"eu-east", "PL", 52.2, 21.0},   {"us-east", "US", 38.0, -78.5},
    {"us-west", "US", 37.4, -122.1}, {"ap-south", "IN", 19.1, 72.9},
    {"ap-east", "JP", 35.7, 139.7},  {"sa-east", "BR", -23.5, -46.6},
};

constexpr const char* kSecurity[] = {"Low", "Medium", "High"};

std::vector<v1::Cluster> Clusters(int n) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int> region(0, std::size(kRegions) - 1);
  std::uniform_int_distribution<int> tier(1, 3);
  std::uniform_real_distribution<double> jitter(-2.0, 2.0);
  std::uniform_int_distribution<int> cores(2, 512);
  std::uniform_real_distribution<double> used(0.0, 0.95);
  std::uniform_real_distribution<double> carbon(20, 700);
  std::bernoulli_distribution gdpr(0.5), unreachable(0.05);
  std::uniform_int_distribution<int> security(0, 2);
  std::vector<v1::Cluster> out;
  for (int i = 0; i < n; ++i) {
    const Region& r = kRegions[region(rng)];
    v1::Cluster c;
    c.mutable_metadata()->set_name(absl::StrCat("mc-", i));
    auto& labels = *c.mutable_metadata()->mutable_labels();
    if (gdpr(rng)) labels["codeco.io/compliance"] = "gdpr";
    labels["codeco.io/security-class"] = kSecurity[security(rng)];
    c.set_role(v1::CLUSTER_ROLE_MC);
    c.set_health(unreachable(rng) ? v1::CLUSTER_HEALTH_UNREACHABLE : v1::CLUSTER_HEALTH_READY);
    auto* l = c.mutable_cluster_labels();
    l->set_region(r.name);
    l->set_country(r.country);
    l->set_tier(static_cast<common::v1::Tier>(tier(rng)));
    l->set_latitude(r.lat + jitter(rng));
    l->set_longitude(r.lon + jitter(rng));
    int64_t alloc = int64_t{cores(rng)} * 1000;
    int64_t free = static_cast<int64_t>(alloc * (1 - used(rng)));
    auto* cap = c.mutable_capacity();
    cap->mutable_allocatable()->set_cpu_millicores(alloc);
    cap->mutable_allocatable()->set_memory_bytes(alloc << 22);
    cap->mutable_free()->set_cpu_millicores(free);
    cap->mutable_free()->set_memory_bytes(free << 22);
    cap->mutable_largest_free_node()->set_cpu_millicores(free / 4);
    cap->mutable_largest_free_node()->set_memory_bytes(free << 20);
    cap->set_node_count(8);
    cap->set_ready_node_count(8);
    c.mutable_energy_profile()->set_carbon_intensity_g_per_kwh(carbon(rng));
    c.mutable_energy_profile()->set_max_watts(alloc / 10.0);
    out.push_back(std::move(c));
  }
  return out;
}

std::string Bookinfo() {
  std::ifstream in(std::string(ACM_EXAMPLES_DIR) + "/bookinfo.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

v1::ApplicationSpec Spec(common::v1::PerformanceProfile profile, bool constrained) {
  v1::ApplicationSpec spec = ParseCam(Bookinfo()).value().spec;
  spec.set_performance_profile(profile);
  spec.clear_compliance_class();  // bookinfo asks for "High"; the generated clusters offer gdpr
  if (constrained) {
    spec.set_compliance_class("gdpr");
    for (const char* c : {"PT", "ES", "DE"}) spec.mutable_intents()->add_allowed_countries(c);
    spec.mutable_intents()->set_origin("eu-west");
    spec.mutable_intents()->set_max_latency_to_origin_ns(20'000'000);
  }
  return spec;
}

void BM_SelectNeighborhood(benchmark::State& state) {
  NeighborhoodComposer cnc;
  cnc.Partition(Clusters(static_cast<int>(state.range(0))));
  const auto profile = static_cast<common::v1::PerformanceProfile>(state.range(1));
  v1::ApplicationSpec spec = Spec(profile, state.range(2) != 0);
  size_t members = 0;
  for (auto _ : state) {
    auto nb = cnc.Select(spec, {.max_members = 8});
    if (!nb.ok()) {
      state.SkipWithError("no neighborhood");
      break;
    }
    members = nb->members_size();
    benchmark::DoNotOptimize(nb);
  }
  state.counters["members"] = static_cast<double>(members);
  state.counters["classes"] = static_cast<double>(cnc.class_count());
}
// Args: clusters, performance profile (1 latency, 2 greenness, 3 resilience), hard constraints.
BENCHMARK(BM_SelectNeighborhood)
    ->Args({10000, common::v1::PERFORMANCE_PROFILE_LATENCY, 1})
    ->Args({10000, common::v1::PERFORMANCE_PROFILE_LATENCY, 0})
    ->Args({10000, common::v1::PERFORMANCE_PROFILE_GREENNESS, 0})
    ->Args({10000, common::v1::PERFORMANCE_PROFILE_RESILIENCE, 0})
    ->Args({1000, common::v1::PERFORMANCE_PROFILE_LATENCY, 1})
    ->Unit(benchmark::kMicrosecond);

void BM_Partition(benchmark::State& state) {
  std::vector<v1::Cluster> clusters = Clusters(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    NeighborhoodComposer cnc;
    cnc.Partition(clusters);
    benchmark::DoNotOptimize(cnc);
  }
}
BENCHMARK(BM_Partition)->Arg(10000)->Unit(benchmark::kMillisecond);

void BM_ParseBookinfo(benchmark::State& state) {
  std::string yaml = Bookinfo();
  for (auto _ : state) {
    auto cam = ParseCam(yaml);
    benchmark::DoNotOptimize(cam);
  }
}
BENCHMARK(BM_ParseBookinfo)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace codeco::acm

BENCHMARK_MAIN();
