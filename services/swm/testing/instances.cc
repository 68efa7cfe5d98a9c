#include "swm/testing/instances.h"

#include <random>
#include <set>

#include "absl/strings/str_cat.h"

namespace codeco::swm::testing {

std::string NodeName(int cluster, int node) { return absl::StrCat("c", cluster, "-n", node); }

Instance RandomInstance(uint64_t seed, const InstanceOptions& o) {
  std::mt19937_64 rng(seed);
  auto uniform_int = [&rng](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto uniform = [&rng](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  Instance inst;
  static const char* kRegions[] = {"eu-west", "eu-central", "us-east"};
  static const char* kCountries[] = {"FR", "DE", "US"};
  for (int c = 0; c < o.clusters; ++c) {
    Cluster cl{.name = absl::StrCat("c", c),
               .labels = {.region = kRegions[c % 3],
                          .country = kCountries[c % 3],
                          .tier = c % 2 == 0 ? "edge" : "cloud",
                          .provider = "sim"},
               .intra_latency_ns = o.intra_latency_ns};
    int nodes = static_cast<int>(uniform_int(o.min_nodes, o.max_nodes));
    for (int n = 0; n < nodes; ++n) {
      Node node{.name = NodeName(c, n), .capacity = {o.node_cpu_millis, o.node_memory_bytes, 0}};
      double used_cpu = 1.0 - uniform(o.min_free, o.max_free);
      double used_mem = 1.0 - uniform(o.min_free, o.max_free);
      node.allocated = {static_cast<int64_t>(used_cpu * o.node_cpu_millis),
                        static_cast<int64_t>(used_mem * o.node_memory_bytes), 0};
      cl.nodes.push_back(node);
    }
    inst.federation.AddCluster(std::move(cl));
  }
  for (int a = 0; a < o.clusters; ++a) {
    for (int b = 0; b < o.clusters; ++b) {
      if (a == b || uniform(0, 1) >= o.link_probability) continue;
      Link l{.from = absl::StrCat("c", a),
             .to = absl::StrCat("c", b),
             .latency_ns = uniform_int(o.min_link_latency_ns, o.max_link_latency_ns)};
      l.free_bandwidth_bps[0] = uniform_int(0, o.max_link_bandwidth_bps);
      l.free_bandwidth_bps[1] = uniform_int(0, o.max_link_bandwidth_bps / 2);
      inst.federation.AddLink(l);
    }
  }
  inst.app.name = absl::StrCat("app", seed);
  inst.app.profile = o.profile;
  for (int i = 0; i < o.workloads; ++i) {
    Workload w{.name = absl::StrCat("w", i),
               .service = absl::StrCat("s", i / 2),
               .requests = {uniform_int(100, o.max_cpu_request),
                            uniform_int(int64_t{64} << 20, o.max_memory_request), 0},
               .stateful = uniform(0, 1) < 0.3,
               .availability_kpi = static_cast<int>(uniform_int(50, 100))};
    inst.app.workloads.push_back(std::move(w));
  }
  std::set<std::pair<int, int>> edges;
  int64_t possible = static_cast<int64_t>(o.workloads) * (o.workloads - 1) / 2;
  for (int tries = 0; static_cast<int>(edges.size()) < o.channels &&
                      static_cast<int64_t>(edges.size()) < possible && tries < o.channels * 20;
       ++tries) {
    int a = static_cast<int>(uniform_int(0, o.workloads - 1));
    int b = static_cast<int>(uniform_int(0, o.workloads - 1));
    if (a == b) continue;
    if (a > b) std::swap(a, b);  // edges go forward: a DAG
    if (!edges.insert({a, b}).second) continue;
    Channel ch{
        .name = absl::StrCat("c", edges.size() - 1),
        .from = absl::StrCat("w", a),
        .to = absl::StrCat("w", b),
        .min_bandwidth_bps = uniform_int(0, o.max_channel_bandwidth_bps),
        .max_delay_ns = uniform_int(o.min_channel_delay_ns, o.max_channel_delay_ns),
        .service_class = uniform(0, 1) < 0.3 ? ServiceClass::kAssured : ServiceClass::kBestEffort};
    inst.app.channels.push_back(std::move(ch));
  }
  return inst;
}

}  // namespace codeco::swm::testing
