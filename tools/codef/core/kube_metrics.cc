#include "kube_metrics.h"

#include "absl/strings/str_cat.h"

namespace codeco::codef {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;
using codeco::lms::v1::PodPhase;

MetricFamilyData Family(std::string name, std::string help, MetricKind kind) {
  MetricFamilyData family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.kind = kind;
  return family;
}

void Add(MetricFamilyData& family, Labels labels, double value) {
  family.samples.push_back(MetricSample{std::move(labels), value});
}

constexpr std::pair<PodPhase, const char*> kPhases[] = {
    {codeco::lms::v1::POD_PHASE_PENDING, "Pending"},
    {codeco::lms::v1::POD_PHASE_RUNNING, "Running"},
    {codeco::lms::v1::POD_PHASE_SUCCEEDED, "Succeeded"},
    {codeco::lms::v1::POD_PHASE_FAILED, "Failed"},
    {codeco::lms::v1::POD_PHASE_UNSPECIFIED, "Unknown"},
};

}  // namespace

std::vector<MetricFamilyData> KubernetesStyleMetrics(const std::string& cluster,
                                                     const ClusterAccounting& accounting) {
  MetricFamilyData cpu = Family("node_cpu_seconds_total",
                                "Seconds the CPUs spent in each mode (user: the node's pods, "
                                "system: its background load).",
                                MetricKind::kCounter);
  MetricFamilyData mem_total = Family(
      "node_memory_MemTotal_bytes", "Memory information field MemTotal_bytes.", MetricKind::kGauge);
  MetricFamilyData mem_available =
      Family("node_memory_MemAvailable_bytes", "Memory information field MemAvailable_bytes.",
             MetricKind::kGauge);
  MetricFamilyData container_cpu =
      Family("container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.",
             MetricKind::kCounter);
  MetricFamilyData container_memory = Family("container_memory_working_set_bytes",
                                             "Current working set in bytes.", MetricKind::kGauge);
  MetricFamilyData condition =
      Family("kube_node_status_condition", "The condition of a cluster node.", MetricKind::kGauge);
  MetricFamilyData capacity =
      Family("kube_node_status_capacity", "The capacity for different resources of a node.",
             MetricKind::kGauge);
  MetricFamilyData pod_info = Family("kube_pod_info", "Information about pod.", MetricKind::kGauge);
  MetricFamilyData phase =
      Family("kube_pod_status_phase", "The pods current phase.", MetricKind::kGauge);
  MetricFamilyData restarts =
      Family("kube_pod_container_status_restarts_total",
             "The number of container restarts per container.", MetricKind::kCounter);
  MetricFamilyData power =
      Family("codeco_node_power_watts", "Power the node draws now (CODEF's linear model), watts.",
             MetricKind::kGauge);
  MetricFamilyData energy = Family("codeco_node_energy_joules_total",
                                   "Energy the node has drawn, joules.", MetricKind::kCounter);

  for (const NodeAccounting& node : accounting.nodes) {
    const Labels node_labels = {{"cluster", cluster}, {"node", node.name}};
    const std::string status = node.ready ? "true" : "false";
    for (const char* s : {"true", "false", "unknown"}) {
      Labels labels = node_labels;
      labels.insert(labels.end(), {{"condition", "Ready"}, {"status", s}});
      Add(condition, std::move(labels), status == s ? 1 : 0);
    }
    Labels cpu_capacity = node_labels;
    cpu_capacity.insert(cpu_capacity.end(), {{"resource", "cpu"}, {"unit", "core"}});
    Add(capacity, std::move(cpu_capacity),
        static_cast<double>(node.cpu_capacity_millicores) / 1000);
    Labels memory_capacity = node_labels;
    memory_capacity.insert(memory_capacity.end(), {{"resource", "memory"}, {"unit", "byte"}});
    Add(capacity, std::move(memory_capacity), static_cast<double>(node.memory_total_bytes));
    Add(power, node_labels, node.power_watts);
    Add(energy, node_labels, node.energy_joules);
    if (!node.ready) continue;
    Labels exporter = node_labels;
    exporter.emplace_back("instance", node.name);
    const double cpus = static_cast<double>(node.cpus);
    for (int i = 0; i < node.cpus; ++i) {
      for (const auto& [mode, seconds] : {std::pair<const char*, double>{"idle", node.idle_seconds},
                                          {"system", node.system_seconds},
                                          {"user", node.user_seconds}}) {
        Labels labels = exporter;
        labels.insert(labels.end(), {{"cpu", absl::StrCat(i)}, {"mode", mode}});
        Add(cpu, std::move(labels), seconds / cpus);
      }
    }
    Add(mem_total, exporter, static_cast<double>(node.memory_total_bytes));
    Add(mem_available, exporter, static_cast<double>(node.memory_available_bytes));
  }

  std::string last_pod;
  for (const ContainerAccounting& c : accounting.containers) {
    const Labels pod_labels = {{"cluster", cluster}, {"namespace", kPodNamespace}, {"pod", c.pod}};
    if (c.pod != last_pod) {
      last_pod = c.pod;
      Labels info = pod_labels;
      info.emplace_back("node", c.node);
      Add(pod_info, std::move(info), 1);
      for (const auto& [value, name] : kPhases) {
        Labels labels = pod_labels;
        labels.emplace_back("phase", name);
        Add(phase, std::move(labels), c.phase == value ? 1 : 0);
      }
    }
    Labels container = pod_labels;
    container.emplace_back("container", c.container);
    Add(restarts, container, static_cast<double>(c.restarts));
    if (c.phase != codeco::lms::v1::POD_PHASE_RUNNING) continue;
    container.insert(container.end(), {{"image", c.image}, {"node", c.node}});
    Add(container_cpu, container, c.cpu_seconds);
    Add(container_memory, std::move(container), static_cast<double>(c.memory_working_set_bytes));
  }

  std::vector<MetricFamilyData> out;
  for (MetricFamilyData* family :
       {&cpu, &mem_total, &mem_available, &container_cpu, &container_memory, &condition, &capacity,
        &pod_info, &phase, &restarts, &power, &energy}) {
    out.push_back(std::move(*family));
  }
  return out;
}

}  // namespace codeco::codef
