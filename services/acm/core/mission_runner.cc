#include "acm/core/mission_runner.h"

#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/quantity.h"

namespace codeco::acm {
namespace {

struct Room {
  int64_t cpu = 0;
  int64_t memory = 0;
};

bool Ended(const lms::v1::Pod& pod) {
  return pod.phase() == lms::v1::POD_PHASE_FAILED || pod.phase() == lms::v1::POD_PHASE_SUCCEEDED;
}

// What a pod of these containers requests.
Room Requests(const google::protobuf::RepeatedPtrField<lms::v1::Container>& containers) {
  Room r;
  for (const auto& c : containers) {
    r.cpu += c.requests().cpu_millicores();
    r.memory += c.requests().memory_bytes();
  }
  return r;
}

}  // namespace

MissionPodPlan PlanMissionPods(const std::string& cluster, const std::vector<v1::Mission>& missions,
                               const std::vector<lms::v1::Pod>& pods,
                               const std::vector<lms::v1::Node>& nodes, absl::Time now) {
  MissionPodPlan plan;
  // Free room per ready, schedulable node; what this pass deletes gives room back.
  std::map<std::string, Room> free;
  for (const lms::v1::Node& n : nodes) {
    if (n.condition() != lms::v1::NODE_CONDITION_READY || n.unschedulable()) continue;
    free[n.name()] = {n.allocatable().cpu_millicores() - n.requested().cpu_millicores(),
                      n.allocatable().memory_bytes() - n.requested().memory_bytes()};
  }
  auto give_back = [&](const lms::v1::Pod& pod) {
    auto it = free.find(pod.node_name());
    if (it == free.end()) return;
    Room r = Requests(pod.containers());
    it->second.cpu += r.cpu;
    it->second.memory += r.memory;
  };
  std::map<std::string, const v1::Mission*> addressed;
  for (const v1::Mission& m : missions) addressed[m.metadata().name()] = &m;
  // mission -> its pods that stay (current generation, not ended), by name.
  std::map<std::string, std::map<std::string, const lms::v1::Pod*>> kept;
  for (const lms::v1::Pod& pod : pods) {
    auto label = pod.labels().find(kMissionLabel);
    if (label == pod.labels().end()) continue;
    auto m = addressed.find(label->second);
    int64_t generation = 0;
    auto gen_label = pod.labels().find(kMissionGenerationLabel);
    const bool current = m != addressed.end() && gen_label != pod.labels().end() &&
                         absl::SimpleAtoi(gen_label->second, &generation) &&
                         generation == m->second->generation();
    if (!current || Ended(pod)) {
      plan.remove.push_back(pod.name());
      give_back(pod);
      continue;
    }
    kept[label->second][pod.name()] = &pod;
  }
  for (const v1::Mission& m : missions) {
    const std::string& name = m.metadata().name();
    const auto& have = kept[name];
    v1::MissionClusterStatus state;
    state.set_mission(name);
    state.set_cluster(cluster);
    state.set_generation(m.generation());
    state.set_desired_pods(m.workload().replicas());
    *state.mutable_report_time() = ToProtoTimestamp(now);
    int running = 0;
    std::set<std::string> wanted;
    for (int i = 0; i < m.workload().replicas(); ++i) {
      wanted.insert(absl::StrCat(name, "-", m.generation(), "-", i));
    }
    // Pods past the replica count (the mission shrank) go.
    for (const auto& [pod_name, pod] : have) {
      if (!wanted.count(pod_name)) {
        plan.remove.push_back(pod_name);
        give_back(*pod);
      } else if (pod->phase() == lms::v1::POD_PHASE_RUNNING) {
        ++running;
      }
    }
    const Room need = Requests(m.workload().containers());
    int waiting = 0;
    for (const std::string& pod_name : wanted) {
      if (have.count(pod_name)) continue;
      // The ready node with the most free CPU after the pod lands.
      auto best = free.end();
      for (auto it = free.begin(); it != free.end(); ++it) {
        if (it->second.cpu < need.cpu || it->second.memory < need.memory) continue;
        if (best == free.end() || it->second.cpu > best->second.cpu) best = it;
      }
      if (best == free.end()) {
        ++waiting;
        continue;
      }
      best->second.cpu -= need.cpu;
      best->second.memory -= need.memory;
      lms::v1::Pod pod;
      pod.set_name(pod_name);
      pod.set_node_name(best->first);
      for (const auto& [k, v] : m.workload().labels()) (*pod.mutable_labels())[k] = v;
      (*pod.mutable_labels())[kMissionLabel] = name;
      (*pod.mutable_labels())[kMissionGenerationLabel] = absl::StrCat(m.generation());
      *pod.mutable_containers() = m.workload().containers();
      pod.set_restart_policy(lms::v1::RESTART_POLICY_ALWAYS);
      plan.create.push_back(std::move(pod));
    }
    state.set_running_pods(running);
    if (running == m.workload().replicas()) {
      state.set_phase(v1::MISSION_PHASE_RUNNING);
    } else {
      state.set_phase(v1::MISSION_PHASE_RECEIVED);
      if (waiting > 0) {
        state.set_message(absl::StrCat(waiting, " pod(s) wait: no ready node has room for ",
                                       FormatCpu(need.cpu), " CPU and ", FormatBytes(need.memory),
                                       " memory"));
      } else {
        state.set_message(
            absl::StrCat(running, " of ", m.workload().replicas(), " pod(s) running"));
      }
    }
    plan.states.push_back(std::move(state));
  }
  return plan;
}

}  // namespace codeco::acm
