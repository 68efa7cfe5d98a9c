#include "emulated_cluster.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/quantity.h"
#include "codeco/common/status.h"

namespace codeco::codef {
namespace {

using codeco::common::v1::LabelSelector;
using codeco::common::v1::WatchEventType;
using codeco::lms::v1::Node;
using codeco::lms::v1::Pod;
using codeco::lms::v1::PodPhase;

constexpr int kDefaultPageSize = 100;
constexpr int kMaxPageSize = 1000;

bool IsDnsSubdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
    if (!ok) return false;
  }
  return s.front() != '-' && s.front() != '.' && s.back() != '-' && s.back() != '.';
}

int PageSize(int32_t requested) {
  if (requested <= 0) return kDefaultPageSize;
  return std::min(requested, kMaxPageSize);
}

absl::Status ValidateSelector(const LabelSelector& selector, const std::string& path) {
  for (int i = 0; i < selector.match_expressions_size(); ++i) {
    const auto& e = selector.match_expressions(i);
    std::string p = absl::StrCat(path, ".match_expressions[", i, "]");
    if (e.key().empty()) return InvalidFieldError(p + ".key", "is required");
    switch (e.op()) {
      case codeco::common::v1::LABEL_SELECTOR_OPERATOR_IN:
      case codeco::common::v1::LABEL_SELECTOR_OPERATOR_NOT_IN:
        if (e.values().empty()) return InvalidFieldError(p + ".values", "must not be empty");
        break;
      case codeco::common::v1::LABEL_SELECTOR_OPERATOR_EXISTS:
      case codeco::common::v1::LABEL_SELECTOR_OPERATOR_DOES_NOT_EXIST:
        if (!e.values().empty()) return InvalidFieldError(p + ".values", "must be empty");
        break;
      default:
        return InvalidFieldError(p + ".op", "is required");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<bool> MatchesSelector(const google::protobuf::Map<std::string, std::string>& labels,
                                     const LabelSelector& selector, const std::string& path) {
  RETURN_IF_ERROR(ValidateSelector(selector, path));
  for (const auto& [key, value] : selector.match_labels()) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  for (const auto& e : selector.match_expressions()) {
    auto it = labels.find(e.key());
    bool present = it != labels.end();
    bool in_values =
        present && std::find(e.values().begin(), e.values().end(), it->second) != e.values().end();
    switch (e.op()) {
      case codeco::common::v1::LABEL_SELECTOR_OPERATOR_IN:
        if (!in_values) return false;
        break;
      case codeco::common::v1::LABEL_SELECTOR_OPERATOR_NOT_IN:
        if (in_values) return false;
        break;
      case codeco::common::v1::LABEL_SELECTOR_OPERATOR_EXISTS:
        if (!present) return false;
        break;
      case codeco::common::v1::LABEL_SELECTOR_OPERATOR_DOES_NOT_EXIST:
        if (present) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

absl::StatusOr<std::string> InMemoryCheckpointArchiveStore::Put(
    const ContainerCheckpoint& checkpoint) {
  absl::MutexLock lock(&mu_);
  by_key_[checkpoint.archive_path] = checkpoint;
  if (!checkpoint.image_reference.empty()) by_key_[checkpoint.image_reference] = checkpoint;
  return checkpoint.archive_path;
}

absl::StatusOr<ContainerCheckpoint> InMemoryCheckpointArchiveStore::Get(
    const std::string& key) const {
  absl::MutexLock lock(&mu_);
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return absl::NotFoundError(absl::StrCat("no checkpoint archive ", key));
  return it->second;
}

EmulatedCluster::EmulatedCluster(EmulatedClusterOptions options, const Clock& clock,
                                 CheckpointArchiveStore* archives, FileReader read_file,
                                 PodProcessRunner* processes)
    : options_(std::move(options)),
      clock_(clock),
      archives_(archives),
      read_file_(std::move(read_file)),
      processes_(processes),
      now_(clock.Now()) {}

EmulatedCluster::~EmulatedCluster() {
  for (const auto& [name, pod] : pods_) {
    if (pod->process_container >= 0) processes_->Remove(options_.name, name);
  }
}

void EmulatedCluster::SetEventListener(std::function<void(const WatchEvent&)> listener) {
  listener_ = std::move(listener);
}

absl::Status EmulatedCluster::AddNode(const NodeSpec& spec) {
  if (nodes_.count(spec.name) > 0) {
    return absl::AlreadyExistsError(absl::StrCat("node ", spec.name, " already exists"));
  }
  NodeState state;
  Node& node = state.node;
  node.set_name(spec.name);
  auto& labels = *node.mutable_labels();
  for (const auto& [k, v] : spec.labels) labels[k] = v;
  labels["kubernetes.io/hostname"] = spec.name;
  labels["codeco.io/cluster"] = options_.name;
  if (!options_.labels.region().empty()) labels["codeco.io/region"] = options_.labels.region();
  if (!options_.labels.country().empty()) labels["codeco.io/country"] = options_.labels.country();
  if (!options_.labels.provider().empty()) {
    labels["codeco.io/provider"] = options_.labels.provider();
  }
  if (options_.labels.tier() != codeco::common::v1::TIER_UNSPECIFIED) {
    labels["codeco.io/tier"] = TierName(options_.labels.tier());
  }
  node.mutable_capacity()->set_cpu_millicores(spec.cpu_millicores);
  node.mutable_capacity()->set_memory_bytes(spec.memory_bytes);
  node.mutable_capacity()->set_gpu(spec.gpu);
  *node.mutable_allocatable() = node.capacity();
  node.mutable_requested();
  node.mutable_energy_profile()->set_idle_watts(spec.idle_watts);
  node.mutable_energy_profile()->set_max_watts(spec.max_watts);
  node.mutable_energy_profile()->set_carbon_intensity_g_per_kwh(spec.carbon_intensity_g_per_kwh);
  node.set_condition(codeco::lms::v1::NODE_CONDITION_READY);
  state.cpus = static_cast<int>(std::max<int64_t>(1, (spec.cpu_millicores + 999) / 1000));
  Touch(&node);
  auto [it, inserted] = nodes_.emplace(spec.name, std::move(state));
  Emit(codeco::common::v1::WATCH_EVENT_TYPE_ADDED, &it->second.node, nullptr);
  return absl::OkStatus();
}

absl::Status EmulatedCluster::RemoveNode(const std::string& name) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat("no node ", name));
  std::vector<std::string> ended;
  for (const auto& [pod_name, pod] : pods_) {
    if (pod->pod.node_name() != name) continue;
    if (!pod->terminal) {
      return absl::FailedPreconditionError(
          absl::StrCat("node ", name, " still runs pod ", pod_name));
    }
    ended.push_back(pod_name);
  }
  for (const std::string& pod : ended) RETURN_IF_ERROR(DeletePod(pod).status());
  NodeState removed = std::move(it->second);
  nodes_.erase(it);
  Touch(&removed.node);
  Emit(codeco::common::v1::WATCH_EVENT_TYPE_DELETED, &removed.node, nullptr);
  return absl::OkStatus();
}

void EmulatedCluster::Touch(Node* node) { node->set_resource_version(absl::StrCat(++version_)); }

void EmulatedCluster::Touch(Pod* pod) { pod->set_resource_version(absl::StrCat(++version_)); }

void EmulatedCluster::Emit(WatchEventType type, const Node* node, const Pod* pod) {
  WatchEvent event;
  event.type = type;
  event.version = version_;
  if (node != nullptr) event.node = *node;
  if (pod != nullptr) event.pod = *pod;
  history_.push_back(event);
  while (history_.size() > options_.event_history) {
    dropped_through_ = history_.front().version;
    history_.pop_front();
  }
  if (listener_) listener_(event);
}

void EmulatedCluster::AdvanceTo(absl::Time now) {
  if (now < now_) return;
  const absl::Time from = now_;
  now_ = now;
  std::vector<std::pair<std::string, std::string>> failed_restores;  // (pod, why)
  for (auto& [name, pod] : pods_) {
    if (pod->terminal) continue;
    if (pod->pod.phase() == codeco::lms::v1::POD_PHASE_PENDING && pod->process_container >= 0) {
      // A real process: Running once it has loaded (pod_start_delay does
      // not apply; the load is the start time).
      PodProcessStatus status = processes_->Poll(options_.name, name);
      if (status.state == PodProcessStatus::State::kStarting) continue;
      if (status.state != PodProcessStatus::State::kReady) {
        std::string why = status.state == PodProcessStatus::State::kFailed
                              ? status.message
                              : std::string("its process is gone");
        if (!pod->restoring_from.empty()) {
          failed_restores.emplace_back(name, why);
        } else {
          SetPhase(*pod, codeco::lms::v1::POD_PHASE_FAILED,
                   absl::StrCat("redis-server did not start: ", why), now);
        }
        continue;
      }
      pod->started = now;
      const std::string& endpoint = pod->pod.annotations().at(kEndpointAnnotation);
      pod->pod.set_pod_ip(endpoint.substr(0, endpoint.rfind(':')));
      // The process serves its container's first port at the endpoint's
      // port: say so, as a runtime that maps ports would.
      int reach_port = 0;
      if (absl::SimpleAtoi(endpoint.substr(endpoint.rfind(':') + 1), &reach_port) &&
          pod->process_container < pod->pod.containers_size()) {
        auto* ports = pod->pod.mutable_containers(pod->process_container)->mutable_ports();
        if (!ports->empty()) ports->Mutable(0)->set_reach_port(reach_port);
      }
      *pod->pod.mutable_start_time() = ToProtoTimestamp(now);
      SetPhase(*pod, codeco::lms::v1::POD_PHASE_RUNNING, "", now);
      if (!pod->restoring_from.empty()) {
        pod->restoring_from.clear();
        pod->restore_took = now - pod->created;
        if (!pod->restore_request_id.empty()) {
          restores_by_request_[pod->restore_request_id] = RestoreResponse(*pod);
        }
      }
    }
    if (pod->pod.phase() == codeco::lms::v1::POD_PHASE_PENDING) {
      absl::Time start = pod->created + options_.pod_start_delay;
      if (start > now) continue;
      pod->started = start;
      pod->pod.set_pod_ip(absl::StrCat(options_.pod_ip_prefix, ".", pod_ip_counter_ / 250, ".",
                                       pod_ip_counter_ % 250 + 1));
      ++pod_ip_counter_;
      *pod->pod.mutable_start_time() = ToProtoTimestamp(start);
      SetPhase(*pod, codeco::lms::v1::POD_PHASE_RUNNING, "", start);
    }
    if (pod->pod.phase() == codeco::lms::v1::POD_PHASE_RUNNING && pod->job_duration.has_value()) {
      absl::Time done = pod->started + (*pod->job_duration - pod->restored_progress);
      if (done <= now) {
        SetPhase(*pod, codeco::lms::v1::POD_PHASE_SUCCEEDED, "job completed", done);
      }
    }
  }
  for (const auto& [name, why] : failed_restores) DropFailedRestore(name, why);
  Account(from, now);
}

void EmulatedCluster::Account(absl::Time from, absl::Time to) {
  if (to <= from) return;
  const double seconds = absl::ToDoubleSeconds(to - from);
  // Millicore-seconds the pods of each node used over [from, to).
  std::map<std::string, double> pod_use;
  for (auto& [name, pod] : pods_) {
    if (!pod->pod.has_start_time()) continue;  // never ran
    absl::Time begin = std::max(from, pod->started);
    absl::Time end = pod->ended.has_value() ? std::min(to, *pod->ended) : to;
    if (!pod->ended.has_value() && pod->pod.phase() != codeco::lms::v1::POD_PHASE_RUNNING) continue;
    if (end <= begin) continue;
    const double ran = absl::ToDoubleSeconds(end - begin);
    const double millicores = static_cast<double>(RunningUsage(*pod, begin).cpu_millicores);
    for (size_t i = 0; i < pod->cpu_seconds.size(); ++i) {
      pod->cpu_seconds[i] += pod->cpu_share[i] * millicores / 1000 * ran;
    }
    pod_use[pod->pod.node_name()] += millicores * ran;
  }
  for (auto& [name, state] : nodes_) {
    if (state.node.condition() != codeco::lms::v1::NODE_CONDITION_READY) continue;
    const double all = static_cast<double>(state.cpus) * 1000 * seconds;
    const double pods = pod_use.count(name) > 0 ? pod_use[name] : 0;
    const double background = static_cast<double>(state.load.cpu_millicores) * seconds;
    const double user = std::min(pods, all);
    const double system = std::min(background, all - user);
    state.user_seconds += user / 1000;
    state.system_seconds += system / 1000;
    state.idle_seconds += (all - user - system) / 1000;
    // The power model is linear in the (capped) utilization: the mean use
    // over the interval gives its energy.
    state.energy_joules += PowerAt(state.node, (pods + background) / seconds) * seconds;
  }
}

double EmulatedCluster::PowerAt(const Node& node, double cpu_millicores) {
  double capacity = static_cast<double>(node.capacity().cpu_millicores());
  double utilization = capacity > 0 ? std::min(1.0, cpu_millicores / capacity) : 0;
  const auto& energy = node.energy_profile();
  return energy.idle_watts() + (energy.max_watts() - energy.idle_watts()) * utilization;
}

void EmulatedCluster::DropFailedRestore(const std::string& name, const std::string& why) {
  auto it = pods_.find(name);
  if (it == pods_.end()) return;
  std::unique_ptr<PodState> pod = std::move(it->second);
  pods_.erase(it);
  Touch(&pod->pod);
  Emit(codeco::common::v1::WATCH_EVENT_TYPE_DELETED, nullptr, &pod->pod);
  if (!pod->terminal) Release(*pod);
  processes_->Remove(options_.name, name);
  if (!pod->restore_request_id.empty()) restores_by_request_.erase(pod->restore_request_id);
  failed_restores_[name] = absl::FailedPreconditionError(absl::StrCat(
      "archive_path ", pod->restoring_from, ": redis-server could not load it: ", why));
}

void EmulatedCluster::SetPhase(PodState& pod, PodPhase phase, const std::string& message,
                               absl::Time at) {
  pod.pod.set_phase(phase);
  pod.pod.set_message(message);
  bool terminal =
      phase == codeco::lms::v1::POD_PHASE_SUCCEEDED || phase == codeco::lms::v1::POD_PHASE_FAILED;
  Touch(&pod.pod);
  Emit(codeco::common::v1::WATCH_EVENT_TYPE_MODIFIED, nullptr, &pod.pod);
  if (terminal && !pod.terminal) {
    pod.terminal = true;
    pod.ended = at;
    Release(pod);
    if (pod.process_container >= 0) processes_->Stop(options_.name, pod.pod.name());
  }
}

void EmulatedCluster::Release(const PodState& pod) {
  auto it = nodes_.find(pod.pod.node_name());
  if (it == nodes_.end()) return;
  auto* requested = it->second.node.mutable_requested();
  requested->set_cpu_millicores(requested->cpu_millicores() - pod.requests.cpu_millicores);
  requested->set_memory_bytes(requested->memory_bytes() - pod.requests.memory_bytes);
  requested->set_gpu(requested->gpu() - pod.gpu);
  Touch(&it->second.node);
  Emit(codeco::common::v1::WATCH_EVENT_TYPE_MODIFIED, &it->second.node, nullptr);
}

absl::Status EmulatedCluster::ValidatePod(const Pod& pod, const std::string& path) const {
  FieldErrors errors;
  if (!IsDnsSubdomain(pod.name())) {
    errors.Add(path + ".name", "must be a DNS subdomain (a-z, 0-9, '-', '.')");
  }
  if (pod.node_name().empty()) errors.Add(path + ".node_name", "is required (codeco binds pods)");
  if (pod.containers().empty()) errors.Add(path + ".containers", "must list at least one");
  std::set<std::string> names;
  for (int i = 0; i < pod.containers_size(); ++i) {
    const auto& c = pod.containers(i);
    std::string p = absl::StrCat(path, ".containers[", i, "]");
    if (c.name().empty()) {
      errors.Add(p + ".name", "is required");
    } else if (!names.insert(c.name()).second) {
      errors.Add(p + ".name", absl::StrCat("duplicate container name \"", c.name(), "\""));
    }
    if (c.requests().cpu_millicores() < 0)
      errors.Add(p + ".requests.cpu_millicores", "must not be negative");
    if (c.requests().memory_bytes() < 0)
      errors.Add(p + ".requests.memory_bytes", "must not be negative");
    if (c.requests().gpu() < 0) errors.Add(p + ".requests.gpu", "must not be negative");
    for (int j = 0; j < c.ports_size(); ++j) {
      if (c.ports(j).port() < 1 || c.ports(j).port() > 65535) {
        errors.Add(absl::StrCat(p, ".ports[", j, "].port"), "must be 1-65535");
      }
    }
  }
  return errors.ToStatus();
}

absl::StatusOr<std::unique_ptr<EmulatedCluster::PodState>> EmulatedCluster::BuildPod(
    const Pod& pod, const std::string& path) const {
  RETURN_IF_ERROR(ValidatePod(pod, path));
  auto state = std::make_unique<PodState>();
  state->pod = pod;
  const size_t containers = static_cast<size_t>(pod.containers_size());
  state->cpu_seconds.assign(containers, 0);
  for (const auto& c : pod.containers()) {
    state->cpu_share.push_back(static_cast<double>(c.requests().cpu_millicores()));
    state->memory_share.push_back(static_cast<double>(c.requests().memory_bytes()));
  }
  // Shares of the pod's usage by requests; evenly when no container asks.
  for (std::vector<double>* shares : {&state->cpu_share, &state->memory_share}) {
    double total = 0;
    for (double v : *shares) total += v;
    for (double& v : *shares) v = total > 0 ? v / total : 1.0 / static_cast<double>(containers);
  }
  for (int i = 0; i < pod.containers_size(); ++i) {
    const auto& c = pod.containers(i);
    state->requests.cpu_millicores += c.requests().cpu_millicores();
    state->requests.memory_bytes += c.requests().memory_bytes();
    state->gpu += c.requests().gpu();
    if (processes_ != nullptr && IsRedisImage(c.image())) {
      if (state->process_container >= 0) {
        return InvalidFieldError(
            absl::StrCat(path, ".containers[", i, "].image"),
            absl::StrCat("a second Redis container (codef runs one redis-server per pod; "
                         "the first is containers[",
                         state->process_container, "])"));
      }
      state->process_container = i;
    }
  }
  // Only codef says where a process serves (a restored pod may carry its
  // source's endpoint).
  state->pod.mutable_annotations()->erase(kEndpointAnnotation);
  for (auto& container : *state->pod.mutable_containers()) {
    for (auto& port : *container.mutable_ports()) port.clear_reach_port();
  }
  const auto& annotations = pod.annotations();
  std::string annotation_path = absl::StrCat(path, ".annotations[", kDurationAnnotation, "]");
  if (auto it = annotations.find(kDurationAnnotation); it != annotations.end()) {
    absl::StatusOr<int64_t> ns = ParseDurationNanos(it->second);
    if (!ns.ok()) return InvalidFieldError(annotation_path, std::string(ns.status().message()));
    state->job_duration = absl::Nanoseconds(*ns);
  }
  if (auto it = annotations.find(kUsageProfileAnnotation); it != annotations.end()) {
    ASSIGN_OR_RETURN(
        state->profile,
        ParseUsageProfile(it->second,
                          absl::StrCat(path, ".annotations[", kUsageProfileAnnotation, "]"),
                          state->requests, options_.name + "/" + pod.name(), read_file_));
  } else {
    state->profile = MakeConstantProfile(state->requests);
  }
  state->pod.set_phase(codeco::lms::v1::POD_PHASE_PENDING);
  state->pod.set_message("");
  state->pod.set_pod_ip("");
  state->pod.clear_start_time();
  state->created = clock_.Now();
  *state->pod.mutable_create_time() = ToProtoTimestamp(state->created);
  return state;
}

absl::Status EmulatedCluster::CheckAdmissible(const PodState& pod) const {
  const Pod& spec = pod.pod;
  if (pods_.count(spec.name()) > 0) {
    return absl::AlreadyExistsError(absl::StrCat("pod ", spec.name(), " already exists"));
  }
  auto node = nodes_.find(spec.node_name());
  if (node == nodes_.end()) {
    return absl::NotFoundError(
        absl::StrCat("pod.node_name: no node ", spec.node_name(), " in cluster ", options_.name));
  }
  return CheckFits(node->second, pod);
}

absl::Status EmulatedCluster::CheckFits(const NodeState& state, const PodState& pod) const {
  const Node& node = state.node;
  if (node.condition() != codeco::lms::v1::NODE_CONDITION_READY) {
    return absl::FailedPreconditionError(absl::StrCat("node ", node.name(), " is not ready"));
  }
  if (node.unschedulable()) {
    return absl::FailedPreconditionError(absl::StrCat("node ", node.name(), " is cordoned"));
  }
  const auto& alloc = node.allocatable();
  const auto& req = node.requested();
  if (req.cpu_millicores() + pod.requests.cpu_millicores > alloc.cpu_millicores()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node ", node.name(), " lacks cpu: requests ", FormatCpu(pod.requests.cpu_millicores),
        ", free ", FormatCpu(alloc.cpu_millicores() - req.cpu_millicores()), " of ",
        FormatCpu(alloc.cpu_millicores())));
  }
  if (req.memory_bytes() + pod.requests.memory_bytes > alloc.memory_bytes()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node ", node.name(), " lacks memory: requests ", FormatBytes(pod.requests.memory_bytes),
        ", free ", FormatBytes(alloc.memory_bytes() - req.memory_bytes()), " of ",
        FormatBytes(alloc.memory_bytes())));
  }
  if (req.gpu() + pod.gpu > alloc.gpu()) {
    return absl::FailedPreconditionError(absl::StrCat("node ", node.name(), " lacks gpu: requests ",
                                                      pod.gpu, ", free ", alloc.gpu() - req.gpu()));
  }
  return absl::OkStatus();
}

absl::Status EmulatedCluster::StartProcess(PodState& pod, const std::string& state_source) {
  const auto& container = pod.pod.containers(pod.process_container);
  PodProcessSpec spec{.cluster = options_.name,
                      .pod = pod.pod.name(),
                      .container = container.name(),
                      .image = container.image(),
                      .state_source = state_source};
  absl::StatusOr<std::string> endpoint = processes_->Start(spec);
  if (!endpoint.ok()) {
    if (!state_source.empty()) {
      return absl::Status(
          endpoint.status().code(),
          absl::StrCat("archive_path ", state_source, ": ", endpoint.status().message()));
    }
    return absl::Status(
        endpoint.status().code(),
        absl::StrCat("pod.containers[", pod.process_container,
                     "]: cannot start redis-server: ", endpoint.status().message()));
  }
  (*pod.pod.mutable_annotations())[kEndpointAnnotation] = *endpoint;
  return absl::OkStatus();
}

void EmulatedCluster::Bind(std::unique_ptr<PodState> pod) {
  failed_restores_.erase(pod->pod.name());
  NodeState& node = nodes_.at(pod->pod.node_name());
  auto* requested = node.node.mutable_requested();
  requested->set_cpu_millicores(requested->cpu_millicores() + pod->requests.cpu_millicores);
  requested->set_memory_bytes(requested->memory_bytes() + pod->requests.memory_bytes);
  requested->set_gpu(requested->gpu() + pod->gpu);
  Touch(&pod->pod);
  std::string name = pod->pod.name();
  PodState& stored = *(pods_[name] = std::move(pod));
  Emit(codeco::common::v1::WATCH_EVENT_TYPE_ADDED, nullptr, &stored.pod);
  Touch(&node.node);
  Emit(codeco::common::v1::WATCH_EVENT_TYPE_MODIFIED, &node.node, nullptr);
}

absl::StatusOr<Pod> EmulatedCluster::CreatePod(const Pod& pod, const std::string& request_id) {
  if (!request_id.empty()) {
    auto it = created_by_request_.find(request_id);
    if (it != created_by_request_.end()) return it->second;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<PodState> state, BuildPod(pod, "pod"));
  RETURN_IF_ERROR(CheckAdmissible(*state));
  if (state->process_container >= 0) RETURN_IF_ERROR(StartProcess(*state, ""));
  Bind(std::move(state));
  Pod created = pods_.at(pod.name())->pod;
  if (!request_id.empty()) created_by_request_[request_id] = created;
  return created;
}

absl::StatusOr<Pod> EmulatedCluster::GetPod(const std::string& name) const {
  auto it = pods_.find(name);
  if (it == pods_.end()) return absl::NotFoundError(absl::StrCat("no pod ", name));
  return it->second->pod;
}

absl::StatusOr<Pod> EmulatedCluster::DeletePod(const std::string& name) {
  auto it = pods_.find(name);
  if (it == pods_.end()) return absl::NotFoundError(absl::StrCat("no pod ", name));
  std::unique_ptr<PodState> pod = std::move(it->second);
  pods_.erase(it);
  Touch(&pod->pod);
  Emit(codeco::common::v1::WATCH_EVENT_TYPE_DELETED, nullptr, &pod->pod);
  if (!pod->terminal) Release(*pod);
  if (pod->process_container >= 0) processes_->Remove(options_.name, name);
  return pod->pod;
}

Usage EmulatedCluster::PodUsage(const PodState& pod, absl::Time now) const {
  if (pod.pod.phase() != codeco::lms::v1::POD_PHASE_RUNNING) return Usage{};
  return RunningUsage(pod, now);
}

Usage EmulatedCluster::RunningUsage(const PodState& pod, absl::Time at) const {
  Usage usage = pod.profile->At(at, at - pod.started + pod.restored_progress);
  usage.cpu_millicores =
      static_cast<int64_t>(static_cast<double>(usage.cpu_millicores) * load_factor_);
  return usage;
}

Node EmulatedCluster::WithUsage(const NodeState& state) const {
  Node node = state.node;
  auto usage = GetNodeUsage(node.name());
  if (usage.ok()) {
    *node.mutable_usage() = usage->usage();
    node.set_energy_watts(usage->energy_watts());
  }
  *node.mutable_heartbeat_time() = ToProtoTimestamp(now_);
  return node;
}

absl::StatusOr<codeco::lms::v1::NodeUsage> EmulatedCluster::GetNodeUsage(
    const std::string& name) const {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat("no node ", name));
  const Node& node = it->second.node;
  codeco::lms::v1::NodeUsage out;
  out.set_node(name);
  *out.mutable_sample_time() = ToProtoTimestamp(now_);
  int64_t cpu = 0;
  int64_t memory = 0;
  for (const auto& [pod_name, pod] : pods_) {
    if (pod->pod.node_name() != name || pod->pod.phase() != codeco::lms::v1::POD_PHASE_RUNNING) {
      continue;
    }
    Usage u = PodUsage(*pod, now_);
    auto* entry = out.add_pods();
    entry->set_pod(pod_name);
    entry->mutable_usage()->set_cpu_millicores(u.cpu_millicores);
    entry->mutable_usage()->set_memory_bytes(u.memory_bytes);
    cpu += u.cpu_millicores;
    memory += u.memory_bytes;
  }
  if (node.condition() == codeco::lms::v1::NODE_CONDITION_READY) {
    cpu += it->second.load.cpu_millicores;
    memory += it->second.load.memory_bytes;
    out.set_energy_watts(PowerAt(node, static_cast<double>(cpu)));
  }
  out.mutable_usage()->set_cpu_millicores(cpu);
  out.mutable_usage()->set_memory_bytes(memory);
  return out;
}

absl::StatusOr<Node> EmulatedCluster::GetNode(const std::string& name) const {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat("no node ", name));
  return WithUsage(it->second);
}

absl::StatusOr<codeco::lms::v1::ListNodesResponse> EmulatedCluster::ListNodes(
    const codeco::lms::v1::ListNodesRequest& request) const {
  RETURN_IF_ERROR(ValidateSelector(request.label_selector(), "label_selector"));
  if (request.page_size() < 0) return InvalidFieldError("page_size", "must not be negative");
  codeco::lms::v1::ListNodesResponse out;
  int limit = PageSize(request.page_size());
  for (auto it = nodes_.upper_bound(request.page_token()); it != nodes_.end(); ++it) {
    ASSIGN_OR_RETURN(bool match, MatchesSelector(it->second.node.labels(), request.label_selector(),
                                                 "label_selector"));
    if (!match) continue;
    if (out.nodes_size() == limit) {
      out.set_next_page_token(out.nodes(out.nodes_size() - 1).name());
      break;
    }
    *out.add_nodes() = WithUsage(it->second);
  }
  out.set_resource_version(absl::StrCat(version_));
  return out;
}

absl::StatusOr<codeco::lms::v1::ListPodsResponse> EmulatedCluster::ListPods(
    const codeco::lms::v1::ListPodsRequest& request) const {
  RETURN_IF_ERROR(ValidateSelector(request.label_selector(), "label_selector"));
  if (request.page_size() < 0) return InvalidFieldError("page_size", "must not be negative");
  codeco::lms::v1::ListPodsResponse out;
  int limit = PageSize(request.page_size());
  for (auto it = pods_.upper_bound(request.page_token()); it != pods_.end(); ++it) {
    const Pod& pod = it->second->pod;
    if (!request.node_name().empty() && pod.node_name() != request.node_name()) continue;
    if (request.phase() != codeco::lms::v1::POD_PHASE_UNSPECIFIED &&
        pod.phase() != request.phase()) {
      continue;
    }
    ASSIGN_OR_RETURN(bool match,
                     MatchesSelector(pod.labels(), request.label_selector(), "label_selector"));
    if (!match) continue;
    if (out.pods_size() == limit) {
      out.set_next_page_token(out.pods(out.pods_size() - 1).name());
      break;
    }
    *out.add_pods() = pod;
  }
  out.set_resource_version(absl::StrCat(version_));
  return out;
}

void EmulatedCluster::VisitPods(const std::function<void(const Pod&)>& visit) const {
  for (const auto& [name, pod] : pods_) visit(pod->pod);
}

void EmulatedCluster::VisitNodes(const std::function<void(const Node&)>& visit) const {
  for (const auto& [name, node] : nodes_) visit(node.node);
}

absl::StatusOr<std::pair<std::vector<WatchEvent>, int64_t>> EmulatedCluster::EventsSince(
    const std::string& resource_version, bool nodes) const {
  std::vector<WatchEvent> events;
  if (resource_version.empty() || resource_version == "0") {
    if (nodes) {
      for (const auto& [name, node] : nodes_) {
        WatchEvent e;
        e.type = codeco::common::v1::WATCH_EVENT_TYPE_ADDED;
        e.node = WithUsage(node);
        absl::SimpleAtoi(node.node.resource_version(), &e.version);
        events.push_back(std::move(e));
      }
    } else {
      for (const auto& [name, pod] : pods_) {
        WatchEvent e;
        e.type = codeco::common::v1::WATCH_EVENT_TYPE_ADDED;
        e.pod = pod->pod;
        absl::SimpleAtoi(pod->pod.resource_version(), &e.version);
        events.push_back(std::move(e));
      }
    }
    return std::make_pair(std::move(events), version_);
  }
  int64_t from = 0;
  if (!absl::SimpleAtoi(resource_version, &from) || from < 0) {
    return InvalidFieldError("resource_version", absl::StrCat("not a version from this server: \"",
                                                              resource_version, "\""));
  }
  if (from < dropped_through_) {
    return absl::OutOfRangeError(absl::StrCat("resource_version ", from,
                                              " is too old (history starts after ",
                                              dropped_through_, "): list again"));
  }
  for (const WatchEvent& e : history_) {
    if (e.version <= from) continue;
    if (nodes != e.node.has_value()) continue;
    events.push_back(e);
  }
  return std::make_pair(std::move(events), std::max(from, version_));
}

absl::StatusOr<std::pair<std::vector<WatchEvent>, int64_t>> EmulatedCluster::NodeEventsSince(
    const std::string& resource_version) const {
  return EventsSince(resource_version, true);
}

absl::StatusOr<std::pair<std::vector<WatchEvent>, int64_t>> EmulatedCluster::PodEventsSince(
    const std::string& resource_version) const {
  return EventsSince(resource_version, false);
}

absl::StatusOr<int> EmulatedCluster::FailNode(const std::string& name) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat("no node ", name));
  if (it->second.node.condition() == codeco::lms::v1::NODE_CONDITION_NOT_READY) return 0;
  it->second.node.set_condition(codeco::lms::v1::NODE_CONDITION_NOT_READY);
  Touch(&it->second.node);
  Emit(codeco::common::v1::WATCH_EVENT_TYPE_MODIFIED, &it->second.node, nullptr);
  int failed = 0;
  for (auto& [pod_name, pod] : pods_) {
    if (pod->pod.node_name() != name || pod->terminal) continue;
    SetPhase(*pod, codeco::lms::v1::POD_PHASE_FAILED, absl::StrCat("node ", name, " failed"), now_);
    ++failed;
  }
  return failed;
}

absl::Status EmulatedCluster::RecoverNode(const std::string& name) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat("no node ", name));
  if (it->second.node.condition() == codeco::lms::v1::NODE_CONDITION_READY) {
    return absl::OkStatus();
  }
  it->second.node.set_condition(codeco::lms::v1::NODE_CONDITION_READY);
  Touch(&it->second.node);
  Emit(codeco::common::v1::WATCH_EVENT_TYPE_MODIFIED, &it->second.node, nullptr);
  return absl::OkStatus();
}

absl::Status EmulatedCluster::SetPodLoad(const std::string& name, const std::string& profile_text) {
  auto it = pods_.find(name);
  if (it == pods_.end()) return absl::NotFoundError(absl::StrCat("no pod ", name));
  ASSIGN_OR_RETURN(it->second->profile,
                   ParseUsageProfile(profile_text, "usage_profile", it->second->requests,
                                     options_.name + "/" + name, read_file_));
  return absl::OkStatus();
}

absl::Status EmulatedCluster::EndPod(const std::string& name, bool succeeded,
                                     const std::string& message) {
  auto it = pods_.find(name);
  if (it == pods_.end()) return absl::NotFoundError(absl::StrCat("no pod ", name));
  PodState& pod = *it->second;
  if (pod.pod.phase() != codeco::lms::v1::POD_PHASE_RUNNING) {
    return absl::FailedPreconditionError(
        absl::StrCat("pod ", name, " is ",
                     absl::AsciiStrToLower(absl::StripPrefix(
                         codeco::lms::v1::PodPhase_Name(pod.pod.phase()), "POD_PHASE_")),
                     ", not running"));
  }
  const std::string said =
      !message.empty() ? message : (succeeded ? "completed" : "its container failed");
  SetPhase(pod,
           succeeded ? codeco::lms::v1::POD_PHASE_SUCCEEDED : codeco::lms::v1::POD_PHASE_FAILED,
           said, clock_.Now());
  return absl::OkStatus();
}

absl::Status EmulatedCluster::SetLoadFactor(double factor) {
  if (!(factor > 0) || factor > 1000) {
    return InvalidFieldError("load_factor", "must be > 0 and at most 1000");
  }
  load_factor_ = factor;
  return absl::OkStatus();
}

absl::StatusOr<NodeLoad> EmulatedCluster::SetNodeLoad(const std::string& name,
                                                      const NodeLoadChange& change) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat("no node ", name));
  const auto& capacity = it->second.node.capacity();
  NodeLoad load = it->second.load;
  if (change.cpu_fraction.has_value() && change.cpu_millicores.has_value()) {
    return InvalidFieldError("cpu_millicores", "give cpu_fraction or cpu_millicores, not both");
  }
  if (change.cpu_fraction.has_value()) {
    double f = *change.cpu_fraction;
    if (!(f >= 0 && f <= 1)) return InvalidFieldError("cpu_fraction", "must be between 0 and 1");
    load.cpu_millicores = std::llround(f * static_cast<double>(capacity.cpu_millicores()));
  }
  if (change.cpu_millicores.has_value()) {
    if (*change.cpu_millicores < 0 || *change.cpu_millicores > capacity.cpu_millicores()) {
      return InvalidFieldError("cpu_millicores",
                               absl::StrCat("must be between 0 and the node's capacity, ",
                                            FormatCpu(capacity.cpu_millicores())));
    }
    load.cpu_millicores = *change.cpu_millicores;
  }
  if (change.memory_bytes.has_value()) {
    if (*change.memory_bytes < 0 || *change.memory_bytes > capacity.memory_bytes()) {
      return InvalidFieldError("memory_bytes",
                               absl::StrCat("must be between 0 and the node's capacity, ",
                                            FormatBytes(capacity.memory_bytes())));
    }
    load.memory_bytes = *change.memory_bytes;
  }
  it->second.load = load;
  return load;
}

ClusterAccounting EmulatedCluster::Accounting() const {
  ClusterAccounting out;
  out.at = now_;
  for (const auto& [name, state] : nodes_) {
    NodeAccounting a;
    a.name = name;
    a.cpus = state.cpus;
    a.cpu_capacity_millicores = state.node.capacity().cpu_millicores();
    a.ready = state.node.condition() == codeco::lms::v1::NODE_CONDITION_READY;
    a.user_seconds = state.user_seconds;
    a.system_seconds = state.system_seconds;
    a.idle_seconds = state.idle_seconds;
    a.energy_joules = state.energy_joules;
    a.memory_total_bytes = state.node.capacity().memory_bytes();
    absl::StatusOr<codeco::lms::v1::NodeUsage> usage = GetNodeUsage(name);
    if (usage.ok()) {
      a.memory_available_bytes =
          std::max<int64_t>(0, a.memory_total_bytes - usage->usage().memory_bytes());
      a.power_watts = usage->energy_watts();
    }
    out.nodes.push_back(std::move(a));
  }
  for (const auto& [name, pod] : pods_) {
    Usage usage = PodUsage(*pod, now_);
    for (int i = 0; i < pod->pod.containers_size(); ++i) {
      ContainerAccounting c;
      c.pod = name;
      c.container = pod->pod.containers(i).name();
      c.image = pod->pod.containers(i).image();
      c.node = pod->pod.node_name();
      c.phase = pod->pod.phase();
      c.cpu_seconds = pod->cpu_seconds[static_cast<size_t>(i)];
      c.memory_working_set_bytes = std::llround(pod->memory_share[static_cast<size_t>(i)] *
                                                static_cast<double>(usage.memory_bytes));
      out.containers.push_back(std::move(c));
    }
  }
  return out;
}

std::pair<int, int> EmulatedCluster::NodeCounts() const {
  int ready = 0;
  for (const auto& [name, node] : nodes_) {
    if (node.node.condition() == codeco::lms::v1::NODE_CONDITION_READY) ++ready;
  }
  return {static_cast<int>(nodes_.size()), ready};
}

absl::StatusOr<codeco::lms::v1::CheckpointContainerResponse> EmulatedCluster::CheckpointContainer(
    const codeco::lms::v1::CheckpointContainerRequest& request) {
  if (!request.request_id().empty()) {
    auto it = checkpoints_by_request_.find(request.request_id());
    if (it != checkpoints_by_request_.end()) return it->second;
  }
  if (request.pod().empty()) return InvalidFieldError("pod", "is required");
  if (request.container().empty()) return InvalidFieldError("container", "is required");
  auto it = pods_.find(request.pod());
  if (it == pods_.end()) return absl::NotFoundError(absl::StrCat("no pod ", request.pod()));
  const PodState& pod = *it->second;
  int containers = pod.pod.containers_size();
  bool found = false;
  for (const auto& c : pod.pod.containers()) found |= c.name() == request.container();
  if (!found) {
    return absl::NotFoundError(
        absl::StrCat("pod ", request.pod(), " has no container ", request.container()));
  }
  if (pod.pod.phase() != codeco::lms::v1::POD_PHASE_RUNNING) {
    return absl::FailedPreconditionError(
        absl::StrCat("pod ", request.pod(), " is not running; only running containers dump"));
  }
  if (pod.process_container >= 0 &&
      pod.pod.containers(pod.process_container).name() == request.container()) {
    // A real redis-server: a point-in-time save, as a kubelet's checkpoint
    // would be (crash-consistent; no write fence).
    ++checkpoint_counter_;
    ASSIGN_OR_RETURN(PodProcessDump dump,
                     processes_->Dump(options_.name, pod.pod.name(),
                                      absl::StrCat("checkpoint-", pod.pod.name(), "_",
                                                   request.container(), "-", checkpoint_counter_)));
    codeco::lms::v1::CheckpointContainerResponse out;
    out.set_node(pod.pod.node_name());
    out.set_archive_path(dump.path);
    out.set_size_bytes(dump.size_bytes);
    out.set_duration_ns(absl::ToInt64Nanoseconds(dump.took));
    if (!request.request_id().empty()) checkpoints_by_request_[request.request_id()] = out;
    return out;
  }
  ContainerCheckpoint cp;
  ++checkpoint_counter_;
  cp.cluster = options_.name;
  cp.node = pod.pod.node_name();
  cp.pod = pod.pod.name();
  cp.container = request.container();
  cp.archive_path = absl::StrCat("/var/lib/codef/", options_.name, "/checkpoints/checkpoint-",
                                 cp.pod, "_", cp.container, "-", checkpoint_counter_, ".tar");
  cp.image_reference = absl::StrCat("codef.local/checkpoints/", options_.name, "/", cp.pod, "-",
                                    cp.container, ":", checkpoint_counter_);
  auto state = pod.pod.annotations().find(kStateAnnotation);
  if (state != pod.pod.annotations().end()) cp.state = state->second;
  cp.progress_ns = absl::ToInt64Nanoseconds(now_ - pod.started + pod.restored_progress);
  Usage usage = PodUsage(pod, now_);
  cp.size_bytes = usage.memory_bytes / std::max(containers, 1) + (1 << 20);
  ASSIGN_OR_RETURN(cp.archive_path, archives_->Put(cp));
  codeco::lms::v1::CheckpointContainerResponse out;
  out.set_node(cp.node);
  out.set_archive_path(cp.archive_path);
  out.set_size_bytes(cp.size_bytes);
  out.set_duration_ns(50'000'000 +
                      cp.size_bytes * 1'000'000'000 / options_.checkpoint_bytes_per_second);
  if (!request.request_id().empty()) checkpoints_by_request_[request.request_id()] = out;
  return out;
}

absl::StatusOr<codeco::lms::v1::RestoreContainerResponse> EmulatedCluster::RestoreContainer(
    const codeco::lms::v1::RestoreContainerRequest& request) {
  if (!request.request_id().empty()) {
    auto it = restores_by_request_.find(request.request_id());
    if (it != restores_by_request_.end()) return it->second;
  }
  std::string source;
  std::string source_path;
  switch (request.state_source_case()) {
    case codeco::lms::v1::RestoreContainerRequest::kArchivePath:
      source = request.archive_path();
      source_path = "archive_path";
      break;
    case codeco::lms::v1::RestoreContainerRequest::kImageReference:
      source = request.image_reference();
      source_path = "image_reference";
      break;
    default:
      return InvalidFieldError("archive_path", "archive_path or image_reference is required");
  }
  if (source.empty()) return InvalidFieldError(source_path, "is required");
  if (request.container().empty()) return InvalidFieldError("container", "is required");
  const codeco::lms::v1::Container* restored = nullptr;
  for (const auto& c : request.pod().containers()) {
    if (c.name() == request.container()) restored = &c;
  }
  if (restored == nullptr) {
    return InvalidFieldError(
        "container", absl::StrCat("pod.containers has no container \"", request.container(), "\""));
  }
  if (processes_ != nullptr && IsRedisImage(restored->image())) {
    return RestoreProcess(request);
  }
  ASSIGN_OR_RETURN(ContainerCheckpoint cp, archives_->Get(source));
  Pod pod = request.pod();
  (*pod.mutable_annotations())[kStateAnnotation] = cp.state;
  (*pod.mutable_annotations())[kRestoredFromAnnotation] = cp.archive_path;
  (*pod.mutable_annotations())[kRestoredProgressAnnotation] = FormatDurationNanos(cp.progress_ns);
  ASSIGN_OR_RETURN(std::unique_ptr<PodState> state, BuildPod(pod, "pod"));
  state->restored_progress = absl::Nanoseconds(cp.progress_ns);
  RETURN_IF_ERROR(CheckAdmissible(*state));
  // A Redis container beside the restored one starts empty.
  if (state->process_container >= 0) RETURN_IF_ERROR(StartProcess(*state, ""));
  const int64_t restore_ns =
      100'000'000 + cp.size_bytes * 1'000'000'000 / options_.checkpoint_bytes_per_second;
  state->restore_took = absl::Nanoseconds(restore_ns);
  Bind(std::move(state));
  codeco::lms::v1::RestoreContainerResponse out = RestoreResponse(*pods_.at(pod.name()));
  if (!request.request_id().empty()) restores_by_request_[request.request_id()] = out;
  return out;
}

absl::StatusOr<codeco::lms::v1::RestoreContainerResponse> EmulatedCluster::RestoreProcess(
    const codeco::lms::v1::RestoreContainerRequest& request) {
  if (request.state_source_case() != codeco::lms::v1::RestoreContainerRequest::kArchivePath) {
    return InvalidFieldError("image_reference",
                             "a Redis container restores from archive_path (a dump.rdb, or a "
                             "directory holding one): codef pulls no images");
  }
  Pod pod = request.pod();
  (*pod.mutable_annotations())[kRestoredFromAnnotation] = request.archive_path();
  ASSIGN_OR_RETURN(std::unique_ptr<PodState> state, BuildPod(pod, "pod"));
  // Room first: a full node refuses before any process starts.
  RETURN_IF_ERROR(CheckAdmissible(*state));
  RETURN_IF_ERROR(StartProcess(*state, request.archive_path()));
  state->restoring_from = request.archive_path();
  state->restore_request_id = request.request_id();
  Bind(std::move(state));
  codeco::lms::v1::RestoreContainerResponse out = RestoreResponse(*pods_.at(pod.name()));
  if (!request.request_id().empty()) restores_by_request_[request.request_id()] = out;
  return out;
}

codeco::lms::v1::RestoreContainerResponse EmulatedCluster::RestoreResponse(
    const PodState& pod) const {
  codeco::lms::v1::RestoreContainerResponse out;
  *out.mutable_pod() = pod.pod;
  out.set_duration_ns(absl::ToInt64Nanoseconds(pod.restore_took));
  return out;
}

absl::StatusOr<codeco::lms::v1::RestoreContainerResponse> EmulatedCluster::RestoreOutcome(
    const std::string& name) const {
  auto it = pods_.find(name);
  if (it == pods_.end()) {
    auto failed = failed_restores_.find(name);
    if (failed != failed_restores_.end()) return failed->second;
    return absl::NotFoundError(absl::StrCat("no pod ", name));
  }
  const PodState& pod = *it->second;
  if (pod.pod.phase() == codeco::lms::v1::POD_PHASE_FAILED) {
    return absl::FailedPreconditionError(
        absl::StrCat("restored pod ", name, " failed: ", pod.pod.message()));
  }
  return RestoreResponse(pod);
}

}  // namespace codeco::codef
