#pragma once
// Small hand-built federations and helpers shared by the SWM tests.

#include <string>
#include <vector>

#include "swm/core/framework.h"
#include "swm/core/model.h"
#include "swm/core/plugins.h"

namespace codeco::swm::test {

inline constexpr int64_t kGi = int64_t{1} << 30;
inline constexpr int64_t kMs = 1'000'000;

/// A cluster of `nodes` identical nodes named "<name>-n<i>".
inline Cluster MakeCluster(const std::string& name, int nodes, int64_t cpu, int64_t mem,
                           const std::string& region = "eu", const std::string& country = "FR",
                           int64_t intra_ns = 100'000) {
  Cluster c{.name = name,
            .labels = {.region = region, .country = country, .tier = "edge"},
            .intra_latency_ns = intra_ns};
  for (int i = 0; i < nodes; ++i) {
    c.nodes.push_back(Node{.name = name + "-n" + std::to_string(i), .capacity = {cpu, mem, 0}});
  }
  return c;
}

/// A link a -> b and b -> a with the same latency and bandwidth.
inline void Connect(Federation& f, const std::string& a, const std::string& b, int64_t lat_ns,
                    int64_t bw_bps) {
  Link l{.from = a, .to = b, .latency_ns = lat_ns, .free_bandwidth_bps = {bw_bps, bw_bps}};
  f.AddLink(l);
  std::swap(l.from, l.to);
  f.AddLink(l);
}

/// A workload with the given CPU (millicores) and memory (GiB).
inline Workload MakeWorkload(const std::string& name, int64_t cpu, int64_t mem_gi = 1) {
  return Workload{.name = name, .service = name, .requests = {cpu, mem_gi * kGi, 0}};
}

/// A profile with only the hard filters plus `extra`.
inline Profile ProfileWith(std::vector<PluginConfig> extra) {
  Profile p{.name = "test",
            .plugins = {{.name = "NodeResourcesFit"}, {.name = "ChannelConstraints"}}};
  for (auto& e : extra) p.plugins.push_back(std::move(e));
  return p;
}

}  // namespace codeco::swm::test
