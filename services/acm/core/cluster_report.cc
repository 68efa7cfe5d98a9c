#include "acm/core/cluster_report.h"

#include <algorithm>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "codeco/common/config.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/status.h"

namespace codeco::acm {
namespace {

const std::string* Label(const lms::v1::Node& node, const char* key) {
  auto it = node.labels().find(key);
  return it == node.labels().end() ? nullptr : &it->second;
}

}  // namespace

// Labels that describe the whole cluster when all its ready nodes agree.
constexpr const char* kClusterWideLabels[] = {"codeco.io/compliance", "codeco.io/security-class"};

ClusterReport BuildClusterReport(const std::vector<lms::v1::Node>& nodes) {
  ClusterReport report;
  for (const char* key : kClusterWideLabels) {
    std::optional<std::string> agreed;
    bool all = true;
    for (const auto& node : nodes) {
      if (node.condition() != lms::v1::NODE_CONDITION_READY || node.unschedulable()) continue;
      const std::string* v = Label(node, key);
      if (v == nullptr || (agreed && *agreed != *v)) {
        all = false;
        break;
      }
      agreed = *v;
    }
    if (all && agreed) report.cluster_labels[key] = *agreed;
  }
  auto& cap = report.capacity;
  int64_t largest_free_cpu = -1;
  for (const auto& node : nodes) {
    // Labels: the first node that carries each one.
    if (const auto* v = Label(node, "codeco.io/region"); v && report.labels.region().empty()) {
      report.labels.set_region(*v);
    }
    if (const auto* v = Label(node, "codeco.io/country"); v && report.labels.country().empty()) {
      report.labels.set_country(*v);
    }
    if (const auto* v = Label(node, "codeco.io/provider"); v && report.labels.provider().empty()) {
      report.labels.set_provider(*v);
    }
    if (const auto* v = Label(node, "codeco.io/tier");
        v && report.labels.tier() == common::v1::TIER_UNSPECIFIED) {
      report.labels.set_tier(ParseTier(*v));
    }
    cap.set_node_count(cap.node_count() + 1);
    report.energy.set_idle_watts(report.energy.idle_watts() + node.energy_profile().idle_watts());
    report.energy.set_max_watts(report.energy.max_watts() + node.energy_profile().max_watts());
    bool ready = node.condition() == lms::v1::NODE_CONDITION_READY && !node.unschedulable();
    if (!ready) continue;
    cap.set_ready_node_count(cap.ready_node_count() + 1);
    const auto& alloc = node.allocatable();
    const auto& used = node.requested();
    common::v1::ResourceQuantities free;
    free.set_cpu_millicores(std::max<int64_t>(0, alloc.cpu_millicores() - used.cpu_millicores()));
    free.set_memory_bytes(std::max<int64_t>(0, alloc.memory_bytes() - used.memory_bytes()));
    free.set_gpu(std::max<int64_t>(0, alloc.gpu() - used.gpu()));
    auto* total = cap.mutable_allocatable();
    total->set_cpu_millicores(total->cpu_millicores() + alloc.cpu_millicores());
    total->set_memory_bytes(total->memory_bytes() + alloc.memory_bytes());
    total->set_gpu(total->gpu() + alloc.gpu());
    auto* all_free = cap.mutable_free();
    all_free->set_cpu_millicores(all_free->cpu_millicores() + free.cpu_millicores());
    all_free->set_memory_bytes(all_free->memory_bytes() + free.memory_bytes());
    all_free->set_gpu(all_free->gpu() + free.gpu());
    if (free.cpu_millicores() > largest_free_cpu) {
      largest_free_cpu = free.cpu_millicores();
      *cap.mutable_largest_free_node() = free;
    }
  }
  return report;
}

std::vector<PodReport> BuildPodReports(const std::vector<lms::v1::Pod>& pods) {
  std::vector<PodReport> out;
  for (const auto& pod : pods) {
    auto app = pod.labels().find(kApplicationLabel);
    if (app == pod.labels().end() || app->second.empty()) continue;
    auto service = pod.labels().find(kServiceLabel);
    PodReport& report = out.emplace_back(
        PodReport{app->second, service == pod.labels().end() ? "" : service->second, pod.name(),
                  pod.node_name(), pod.phase(), pod.message()});
    if (pod.phase() != lms::v1::POD_PHASE_RUNNING || pod.pod_ip().empty()) continue;
    const std::string host =
        pod.pod_ip().find(':') == std::string::npos ? pod.pod_ip() : "[" + pod.pod_ip() + "]";
    for (const auto& container : pod.containers()) {
      for (const auto& port : container.ports()) {
        if (report.addresses.size() >= static_cast<size_t>(kMaxPodAddresses)) break;
        report.addresses.push_back(
            absl::StrCat(host, ":", port.reach_port() > 0 ? port.reach_port() : port.port()));
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const PodReport& a, const PodReport& b) {
    return std::tie(a.application, a.pod) < std::tie(b.application, b.pod);
  });
  return out;
}

absl::Status CheckPodAddress(const std::string& address, const std::string& field) {
  if (address.size() > kMaxPodAddressLength) {
    return InvalidFieldError(field, absl::StrCat("longer than ", kMaxPodAddressLength, " bytes"));
  }
  return CheckHostPort(field, address);
}

}  // namespace codeco::acm
