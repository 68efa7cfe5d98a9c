#pragma once
// Nodes and pods the CODEF core tests build their clusters from.

#include <string>

#include "emulated_cluster.h"

namespace codeco::codef::testing {

/// A node of `cpu` millicores and `memory` bytes drawing 100 W idle, 300 W at full load.
inline NodeSpec MakeNode(const std::string& name, int64_t cpu, int64_t memory) {
  NodeSpec spec;
  spec.name = name;
  spec.cpu_millicores = cpu;
  spec.memory_bytes = memory;
  spec.idle_watts = 100;
  spec.max_watts = 300;
  return spec;
}

/// A pod bound to `node` with one container "main" of `image` requesting `cpu` and `memory`.
inline lms::v1::Pod MakePod(const std::string& name, const std::string& node, int64_t cpu, int64_t memory,
                            const std::string& image = "busybox:1.36") {
  lms::v1::Pod pod;
  pod.set_name(name);
  pod.set_node_name(node);
  auto* c = pod.add_containers();
  c->set_name("main");
  c->set_image(image);
  c->mutable_requests()->set_cpu_millicores(cpu);
  c->mutable_requests()->set_memory_bytes(memory);
  return pod;
}

}  // namespace codeco::codef::testing
