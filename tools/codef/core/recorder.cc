#include "recorder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace codeco::codef {
namespace {

const std::map<std::string, std::string>& Headers() {
  static const auto* headers = new std::map<std::string, std::string>{
      {"node_usage",
       "time_s,cluster,node,cpu_millicores,memory_bytes,cpu_utilization,cpu_requested_millicores,"
       "cpu_allocatable_millicores"},
      {"node_energy", "time_s,cluster,node,watts"},
      {"pod_phases", "time_s,cluster,pending,running,succeeded,failed"},
      {"pending_pods",
       "time_s,pending,unplaced,placed,unplaced_cpu_millicores,placed_cpu_millicores"},
      {"link_conditions", "time_s,from,to,one_way_latency_ns,bandwidth_bps,loss,cut"},
      {"placement", "time_s,cluster,node,pod,phase"},
  };
  return *headers;
}

const char* PhaseName(codeco::lms::v1::PodPhase phase) {
  switch (phase) {
    case codeco::lms::v1::POD_PHASE_PENDING:
      return "Pending";
    case codeco::lms::v1::POD_PHASE_RUNNING:
      return "Running";
    case codeco::lms::v1::POD_PHASE_SUCCEEDED:
      return "Succeeded";
    case codeco::lms::v1::POD_PHASE_FAILED:
      return "Failed";
    default:
      return "Unknown";
  }
}

}  // namespace

Recorder::Recorder(const RecordSpec& spec, Federation* federation)
    : spec_(spec), federation_(federation) {}

std::map<std::string, std::string> Recorder::Sample(absl::Time now, absl::Time start,
                                                    const UnplacedPods& unplaced) {
  auto wants = [&](const std::string& metric) {
    return std::find(spec_.metrics.begin(), spec_.metrics.end(), metric) != spec_.metrics.end();
  };
  std::map<std::string, std::string> out;
  for (const std::string& metric : spec_.metrics) {
    auto header = Headers().find(metric);
    if (header == Headers().end()) continue;
    out[metric + ".csv"] = headers_written_ ? "" : header->second + "\n";
  }
  headers_written_ = true;
  std::string t = absl::StrFormat("%.3f", absl::ToDoubleSeconds(now - start));
  const bool wants_placement = wants("placement");
  int64_t pending_total = 0;
  int64_t placed_total = 0;
  int64_t placed_cpu = 0;
  for (const std::string& cluster : federation_->ClusterNames()) {
    SynchronizedCluster* lms = federation_->FindLms(cluster);
    if (lms == nullptr) continue;
    lms->Run([&](EmulatedCluster& c) {
      codeco::lms::v1::ListNodesRequest nodes_request;
      nodes_request.set_page_size(1000);
      auto nodes = c.ListNodes(nodes_request);
      if (nodes.ok()) {
        for (const auto& node : nodes->nodes()) {
          if (wants("node_usage")) {
            double capacity = static_cast<double>(node.capacity().cpu_millicores());
            double utilization =
                capacity > 0 ? static_cast<double>(node.usage().cpu_millicores()) / capacity : 0;
            absl::StrAppend(&out["node_usage.csv"], t, ",", cluster, ",", node.name(), ",",
                            node.usage().cpu_millicores(), ",", node.usage().memory_bytes(), ",",
                            absl::StrFormat("%.4f", utilization), ",",
                            node.requested().cpu_millicores(), ",",
                            node.allocatable().cpu_millicores(), "\n");
          }
          if (wants("node_energy")) {
            absl::StrAppend(&out["node_energy.csv"], t, ",", cluster, ",", node.name(), ",",
                            absl::StrFormat("%.2f", node.energy_watts()), "\n");
          }
        }
      }
      std::map<codeco::lms::v1::PodPhase, int64_t> phases;
      c.VisitPods([&](const codeco::lms::v1::Pod& pod) {
        phases[pod.phase()]++;
        if (pod.phase() == codeco::lms::v1::POD_PHASE_PENDING ||
            pod.phase() == codeco::lms::v1::POD_PHASE_RUNNING) {
          ++placed_total;
          for (const auto& container : pod.containers()) {
            placed_cpu += container.requests().cpu_millicores();
          }
        }
        if (wants_placement) {
          absl::StrAppend(&out["placement.csv"], t, ",", cluster, ",", pod.node_name(), ",",
                          pod.name(), ",", PhaseName(pod.phase()), "\n");
        }
      });
      if (wants("pod_phases")) {
        absl::StrAppend(&out["pod_phases.csv"], t, ",", cluster, ",",
                        phases[codeco::lms::v1::POD_PHASE_PENDING], ",",
                        phases[codeco::lms::v1::POD_PHASE_RUNNING], ",",
                        phases[codeco::lms::v1::POD_PHASE_SUCCEEDED], ",",
                        phases[codeco::lms::v1::POD_PHASE_FAILED], "\n");
      }
      pending_total += phases[codeco::lms::v1::POD_PHASE_PENDING];
      return 0;
    });
  }
  if (wants("pending_pods")) {
    absl::StrAppend(&out["pending_pods.csv"], t, ",", pending_total + unplaced.count, ",",
                    unplaced.count, ",", placed_total, ",", unplaced.cpu_millicores, ",",
                    placed_cpu, "\n");
  }
  if (wants("link_conditions")) {
    for (const std::string& from : federation_->ClusterNames()) {
      for (const std::string& to : federation_->ClusterNames()) {
        if (from == to) continue;
        auto link = federation_->GetLink(from, to);
        if (!link.ok()) continue;
        absl::StrAppend(&out["link_conditions.csv"], t, ",", from, ",", to, ",",
                        link->one_way_latency_ns, ",", link->bandwidth_bps, ",",
                        absl::StrFormat("%.4f", link->loss), ",", link->cut ? 1 : 0, "\n");
      }
    }
  }
  return out;
}

}  // namespace codeco::codef
