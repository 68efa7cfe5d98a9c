#include "simulation.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "emulated_links.h"
#include "absl/strings/str_join.h"
#include "codeco/common/clock.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/quantity.h"
#include "codeco/common/status.h"
#include "emulated_cluster.h"
#include "federation.h"
#include "link_control.h"
#include "recorder.h"
#include "swm/core/placement_service.h"
#include "swm/core/solve.h"
#include "swm/core/convert.h"
#include "acm/core/cam_parser.h"

namespace codeco::codef {
namespace {

// Latency between two nodes of one cluster as the scheduler assumes it (the
// scenario has no intra-cluster figure); the placement bench uses the same.
constexpr int64_t kIntraClusterLatencyNs = 100'000;
// The metric families the report is built from.
const char* const kReportMetrics[] = {"pending_pods", "node_usage", "node_energy"};
// Label put on every pod of the task stream: the task it runs.
constexpr char kTaskLabel[] = "codef.codeco.io/task";

// Collects the terminal pod events of one cluster. Called with the cluster's
// lock held, so it only records; the driver acts on them afterwards. The run
// is single-threaded.
class TerminalPodCollector final : public EventSubscriber {
 public:
  struct Terminal {
    std::string pod;
    bool succeeded = false;
  };
  void OnEvent(const WatchEvent& event) override {
    if (!event.pod.has_value()) return;
    auto phase = event.pod->phase();
    if (swm::PodEnded(phase)) {
      terminal_.push_back({event.pod->name(), phase == codeco::lms::v1::POD_PHASE_SUCCEEDED});
    }
  }
  std::vector<Terminal> Drain() { return std::exchange(terminal_, {}); }

 private:
  std::vector<Terminal> terminal_;
};

// A node of the emulated LMS as the scheduler sees it.
swm::Node ToSwmNode(const codeco::lms::v1::Node& node) {
  return swm::Node{.name = node.name(),
                   .capacity = {node.allocatable().cpu_millicores(),
                                node.allocatable().memory_bytes(), node.allocatable().gpu()},
                   .allocated = {node.requested().cpu_millicores(), node.requested().memory_bytes(),
                                 node.requested().gpu()},
                   .labels = {node.labels().begin(), node.labels().end()},
                   .schedulable = node.condition() == codeco::lms::v1::NODE_CONDITION_READY &&
                                  !node.unschedulable()};
}

// The emulated LMS of one cluster as SWM's PodRuntime port (what the hub's
// LmsPodRuntime is over gRPC): the pods of a plan are created from the
// templates registered for the placement.
class EmulatedPodRuntime final : public swm::PodRuntime {
 public:
  explicit EmulatedPodRuntime(SynchronizedCluster& lms) : lms_(lms) {}
  absl::StatusOr<std::vector<swm::Node>> ListNodes() override {
    std::vector<swm::Node> nodes;
    lms_.Run([&](EmulatedCluster& c) {
      c.VisitNodes([&](const codeco::lms::v1::Node& node) { nodes.push_back(ToSwmNode(node)); });
      return 0;
    });
    return nodes;
  }
  absl::StatusOr<std::vector<swm::PodInfo>> ListPods() override {
    std::vector<swm::PodInfo> pods;
    lms_.Run([&](EmulatedCluster& c) {
      c.VisitPods([&](const codeco::lms::v1::Pod& pod) {
        pods.push_back(swm::PodInfo{pod.name(), pod.node_name(), swm::PodRequests(pod)});
      });
      return 0;
    });
    return pods;
  }
  absl::Status CreatePod(const swm::PodInfo& info) override {
    codeco::lms::v1::Pod pod;
    std::string request_id = "swm/" + info.name;
    if (auto it = templates_.find(info.name); it != templates_.end()) {
      pod = it->second.first;
      request_id = it->second.second;
    }
    pod.set_name(info.name);
    pod.set_node_name(info.node);
    if (pod.containers().empty()) pod.add_containers()->set_name("main");
    // What was placed is what the pod requests (as the hub's LMS runtime does).
    auto* requests = pod.mutable_containers(0)->mutable_requests();
    requests->set_cpu_millicores(info.requests.cpu_millis);
    requests->set_memory_bytes(info.requests.memory_bytes);
    requests->set_gpu(info.requests.gpu);
    return lms_.Run([&](EmulatedCluster& c) { return c.CreatePod(pod, request_id).status(); });
  }
  absl::Status DeletePod(const std::string& name) override {
    return lms_.Run([&](EmulatedCluster& c) { return c.DeletePod(name).status(); });
  }
  // The pods of the emulated LMS that carry the plan labels.
  std::vector<swm::LabelledPod> LabelledPods() {
    std::vector<swm::LabelledPod> out;
    lms_.Run([&](EmulatedCluster& c) {
      c.VisitPods([&](const codeco::lms::v1::Pod& pod) {
        auto reservation = pod.labels().find(swm::kReservationLabel);
        if (reservation == pod.labels().end()) return;
        auto plan = pod.labels().find(swm::kPlanLabel);
        out.push_back({pod.name(), plan == pod.labels().end() ? "" : plan->second,
                       reservation->second});
      });
      return 0;
    });
    return out;
  }
  void SetTemplate(const codeco::lms::v1::Pod& pod, const std::string& request_id) {
    templates_[pod.name()] = {pod, request_id};
  }
  void ClearTemplate(const std::string& name) { templates_.erase(name); }

 private:
  SynchronizedCluster& lms_;
  std::map<std::string, std::pair<codeco::lms::v1::Pod, std::string>> templates_;
};

// One emulated cluster as the hub drives it: its LMS and its reservations.
struct SimCluster {
  SimCluster(const Clock& clock, SynchronizedCluster& lms, swm::ClusterLabels labels)
      : runtime(lms), executor(clock, runtime), labels(std::move(labels)) {}
  EmulatedPodRuntime runtime;
  swm::LocalClusterExecutor executor;
  swm::ClusterLabels labels;
};

// Every cluster is solved in process by the hub's L2.
class InProcessOnly final : public swm::L2Solver {
 public:
  explicit InProcessOnly(swm::L2Solver& local) : local_(local) {}
  absl::StatusOr<swm::L2Result> Solve(const swm::L2Request& request) override {
    return local_.Solve(request);
  }

 private:
  swm::L2Solver& local_;
};

// The members of the simulated hub's placements: the emulated clusters the
// hub's link reaches.
class SimMembers final : public swm::MemberPort {
 public:
  SimMembers(std::map<std::string, std::unique_ptr<SimCluster>>& clusters,
             std::function<bool(const std::string&)> reachable)
      : clusters_(clusters), reachable_(std::move(reachable)) {}
  absl::Status Connect(const std::vector<swm::MemberRef>& members, absl::Time) override {
    for (size_t i = 0; i < members.size(); ++i) {
      if (!clusters_.count(members[i].cluster)) {
        return absl::FailedPreconditionError(
            absl::StrCat("neighborhood.members[", i, "].endpoints: cluster ", members[i].cluster,
                         " has no LMS"));
      }
    }
    return absl::OkStatus();
  }
  std::vector<absl::StatusOr<swm::MemberView>> ReadMembers(const std::vector<std::string>& names,
                                                           absl::Time) override {
    std::vector<absl::StatusOr<swm::MemberView>> out;
    for (const std::string& name : names) {
      if (!reachable_(name)) {
        out.push_back(absl::UnavailableError("the hub's link to " + name + " is cut"));
        continue;
      }
      SimCluster& c = *clusters_.at(name);
      absl::StatusOr<std::vector<swm::Node>> nodes = c.runtime.ListNodes();
      if (!nodes.ok()) {
        out.push_back(nodes.status());
        continue;
      }
      // Live holds count as allocated, as an MC's GetClusterView reports them.
      for (swm::Node& n : *nodes) n.allocated += c.executor.ledger().Held(n.name);
      out.push_back(swm::MemberView{.labels = c.labels, .nodes = std::move(*nodes)});
    }
    return out;
  }
  std::unique_ptr<swm::L2Solver> SolverFor(const std::vector<std::string>&,
                                           swm::L2Solver& local) override {
    return std::make_unique<InProcessOnly>(local);
  }
  absl::Status Commit(const std::string& cluster, const std::string& id, absl::Time) override {
    auto it = clusters_.find(cluster);
    if (it == clusters_.end()) return absl::NotFoundError("no cluster " + cluster);
    return it->second->executor.Commit(id);
  }
  std::map<std::string, absl::Status> RemovePods(const std::string& cluster, const std::string& id,
                                                 const std::vector<std::string>& pods,
                                                 const std::string&, absl::Time) override {
    std::map<std::string, absl::Status> out;
    auto it = clusters_.find(cluster);
    bool all_gone = true;
    for (const std::string& pod : pods) {
      absl::Status st = it == clusters_.end() ? absl::NotFoundError("no cluster " + cluster)
                                              : it->second->runtime.DeletePod(pod);
      if (!st.ok() && !absl::IsNotFound(st)) all_gone = false;
      out.emplace(pod, st);
    }
    if (all_gone && it != clusters_.end()) (void)it->second->executor.ReleasePods(id, pods);
    return out;
  }
  void Touched(const std::vector<std::string>& names) override {
    for (const std::string& name : names) {
      if (auto it = clusters_.find(name); it != clusters_.end()) (void)it->second->executor.Sync();
    }
  }
  std::vector<std::string> KnownClusters() override {
    std::vector<std::string> out;
    for (const auto& [name, c] : clusters_) out.push_back(name);
    return out;
  }
  absl::StatusOr<std::vector<swm::LabelledPod>> ListLabelledPods(const std::string& cluster,
                                                                 absl::Time) override {
    auto it = clusters_.find(cluster);
    if (it == clusters_.end()) return absl::NotFoundError("no cluster " + cluster);
    return it->second->runtime.LabelledPods();
  }
  absl::Status DeletePod(const std::string& cluster, const swm::LabelledPod& pod,
                         absl::Time) override {
    auto it = clusters_.find(cluster);
    if (it == clusters_.end()) return absl::NotFoundError("no cluster " + cluster);
    return it->second->runtime.DeletePod(pod.name);
  }

 private:
  std::map<std::string, std::unique_ptr<SimCluster>>& clusters_;
  std::function<bool(const std::string&)> reachable_;
};

// A cluster's executor for one plan: the plan's pod templates registered
// with the emulated LMS while it lives.
class SimPlanExecutor final : public swm::ClusterExecutor {
 public:
  SimPlanExecutor(SimCluster& cluster, std::vector<codeco::lms::v1::Pod> pods,
                  const std::string& request_prefix)
      : cluster_(cluster) {
    for (const codeco::lms::v1::Pod& pod : pods) {
      cluster_.runtime.SetTemplate(pod, request_prefix + pod.name());
      names_.push_back(pod.name());
    }
  }
  ~SimPlanExecutor() override {
    for (const std::string& name : names_) cluster_.runtime.ClearTemplate(name);
  }
  absl::Status Reserve(const std::string& id, const std::vector<swm::ReservationItem>& items,
                       absl::Duration lease) override {
    return cluster_.executor.Reserve(id, items, lease);
  }
  absl::Status Commit(const std::string& id) override { return cluster_.executor.Commit(id); }
  absl::Status Release(const std::string& id) override { return cluster_.executor.Release(id); }

 private:
  SimCluster& cluster_;
  std::vector<std::string> names_;
};

// The executors of one CAM application's placement.
class SimExecutors final : public swm::ExecutorFactory {
 public:
  SimExecutors(std::map<std::string, std::unique_ptr<SimCluster>>& clusters,
               const acm::v1::Application& app)
      : clusters_(clusters), app_(app) {}
  absl::StatusOr<std::unique_ptr<swm::ClusterExecutor>> ExecutorFor(
      const std::string& cluster, const swm::AssignmentPlan& plan, absl::Time) override {
    auto it = clusters_.find(cluster);
    if (it == clusters_.end()) return absl::NotFoundError("no cluster " + cluster);
    std::vector<codeco::lms::v1::Pod> pods;
    for (const swm::WorkloadTarget& t : plan.targets) {
      if (t.cluster == cluster) pods.push_back(swm::PodTemplate(app_, t, plan.revision));
    }
    return std::unique_ptr<swm::ClusterExecutor>(std::make_unique<SimPlanExecutor>(
        *it->second, std::move(pods),
        absl::StrCat("swm/", plan.application, "/", plan.revision, "/")));
  }

 private:
  std::map<std::string, std::unique_ptr<SimCluster>>& clusters_;
  const acm::v1::Application& app_;
};

absl::Status CheckPolicy(const std::string& policy) {
  if (policy == kKubefedPolicy) return absl::OkStatus();
  if (swm::BuiltinProfile(policy).ok() && !policy.empty()) return absl::OkStatus();
  return InvalidFieldError("policy", absl::StrCat("unknown policy \"", policy, "\" (one of ",
                                                  absl::StrJoin(SimulationPolicies(), ", "), ")"));
}

// One simulated run: the state the event loop works on.
class Simulation {
 public:
  Simulation(const Scenario& scenario, const SimulationOptions& options)
      : scenario_(scenario),
        options_(options),
        kubefed_(options.policy == kKubefedPolicy),
        // KubeFed leaves the node choice to the member cluster's scheduler,
        // whose default (least allocated) is worst-fit.
        profile_(kubefed_ ? "mck8s-worst-fit" : options.policy) {}

  absl::StatusOr<SimulationResult> Run(const FileReader& read_file) {
    const absl::Time start = clock_.Now();
    ASSIGN_OR_RETURN(federation_,
                     Federation::Create(scenario_, clock_, &links_, &archives_, read_file));
    // The hub's orchestration of CAM applications: SWM's PlacementService
    // over the emulated clusters, under the virtual clock.
    for (const ClusterSpec& spec : scenario_.clusters) {
      SynchronizedCluster* lms = federation_->FindLms(spec.name);
      if (lms == nullptr) continue;
      sim_clusters_[spec.name] = std::make_unique<SimCluster>(clock_, *lms, LabelsOf(spec));
    }
    sim_members_ = std::make_unique<SimMembers>(
        sim_clusters_, [this](const std::string& cluster) { return Reachable(cluster); });
    sim_links_ = std::make_unique<EmulatedLinks>(*federation_);
    placement_ = std::make_unique<swm::PlacementService>(
        clock_, *sim_members_, sim_links_.get(), plans_, l2_, registry_,
        swm::PlacementServiceOptions{.intra_cluster_latency_ns = kIntraClusterLatencyNs});
    int64_t end_ns = absl::ToInt64Nanoseconds(options_.duration);
    if (end_ns == 0) end_ns = scenario_.duration_ns;
    const int64_t tick_ns = absl::ToInt64Nanoseconds(options_.tick);
    const int64_t interval_ns = scenario_.record.interval_ns;
    if (interval_ns <= 0) return InvalidFieldError("record.interval", "must be positive");

    // Which clusters the tasks may use, and their capacity.
    for (const ClusterSpec& cluster : scenario_.clusters) {
      if (cluster.nodes.empty() || IsCloud(cluster.name)) continue;
      if (scenario_.workloads.task_stream.has_value() &&
          !scenario_.workloads.task_stream->clusters.empty() &&
          std::find(scenario_.workloads.task_stream->clusters.begin(),
                    scenario_.workloads.task_stream->clusters.end(),
                    cluster.name) == scenario_.workloads.task_stream->clusters.end()) {
        continue;
      }
      result_.placement_clusters.push_back(cluster.name);
      for (const NodeSpec& node : cluster.nodes) {
        result_.placement_capacity_millicores += node.cpu_millicores;
      }
    }
    RETURN_IF_ERROR(SetUpCloud());
    RETURN_IF_ERROR(SetUpDeployments());
    if (options_.adaptation.has_value()) {
      if (options_.adaptation->probe_interval <= absl::ZeroDuration()) {
        return InvalidFieldError("adaptation.probe_interval", "must be positive");
      }
      RETURN_IF_ERROR(swm::ValidateMigrationGovernorOptions(options_.adaptation->governor));
      governor_ = std::make_unique<swm::MigrationGovernor>(clock_, options_.adaptation->governor);
    }
    if (scenario_.workloads.task_stream.has_value()) {
      std::vector<std::string> managed;
      for (const ClusterSpec& cluster : scenario_.clusters) managed.push_back(cluster.name);
      tasks_ = GenerateTasks(*scenario_.workloads.task_stream, managed);
    } else {
      result_.notes.push_back("no workloads.task_stream: nothing to place");
    }
    RETURN_IF_ERROR(LoadCams(read_file));
    attempts_.assign(tasks_.size(), 0);
    result_.tasks.generated = static_cast<int64_t>(tasks_.size());

    // Watch every cluster's pods for completions and failures.
    for (const std::string& name : federation_->ClusterNames()) {
      SynchronizedCluster* lms = federation_->FindLms(name);
      if (lms == nullptr) continue;
      auto collector = std::make_unique<TerminalPodCollector>();
      RETURN_IF_ERROR(lms->Subscribe(/*nodes=*/false, "", collector.get()).status());
      collectors_.push_back(std::move(collector));
    }

    RecordSpec record = scenario_.record;
    for (const char* metric : kReportMetrics) {
      if (std::find(record.metrics.begin(), record.metrics.end(), metric) == record.metrics.end()) {
        record.metrics.push_back(metric);
      }
    }
    Recorder recorder(record, federation_.get());

    // Fault times (and the ends of load surges) the clock must stop at.
    std::set<int64_t> fault_times;
    for (const FaultSpec& fault : scenario_.faults) {
      fault_times.insert(fault.at_ns);
      if ((fault.action == FaultAction::kLoadSurge || fault.action == FaultAction::kNodeLoad) &&
          fault.duration_ns > 0) {
        fault_times.insert(fault.at_ns + fault.duration_ns);
      }
    }

    federation_->StartTimeline(start);
    int64_t next_tick = 0;
    int64_t next_sample = 0;
    // Runtime adaptation's probes (none without it).
    int64_t next_probe = options_.adaptation.has_value() ? 0 : end_ns + 1;
    int64_t last_sample = -1;
    size_t next_arrival = 0;
    while (true) {
      int64_t now_ns = std::min({next_tick, next_sample, next_probe, end_ns});
      if (!fault_times.empty()) now_ns = std::min(now_ns, *fault_times.begin());
      clock_.SetTime(start + absl::Nanoseconds(now_ns));
      BillCloud(now_ns);
      for (std::string& line : federation_->Tick()) result_.events.push_back(std::move(line));
      while (!fault_times.empty() && *fault_times.begin() <= now_ns) {
        fault_times.erase(fault_times.begin());
      }
      HandleTerminalPods();
      if (now_ns == next_tick) {
        while (next_arrival < tasks_.size() && tasks_[next_arrival].at_ns <= now_ns) {
          queue_.push_back(next_arrival++);
          ++result_.tasks.arrived;
        }
        RETURN_IF_ERROR(PlaceDueCams(now_ns));
        BringUpCloudNodes(now_ns);
        RETURN_IF_ERROR(ScheduleCycle());
        RETURN_IF_ERROR(RescheduleFromCloud());
        AutoscaleCloud(now_ns);
        RETURN_IF_ERROR(RunDeployments(now_ns));
        next_tick += tick_ns;
      }
      if (now_ns == next_probe) {
        RETURN_IF_ERROR(Adapt(now_ns));
        next_probe += absl::ToInt64Nanoseconds(options_.adaptation->probe_interval);
      }
      if (now_ns == next_sample || (now_ns == end_ns && last_sample != end_ns)) {
        UnplacedPods unplaced{.count = static_cast<int64_t>(queue_.size())};
        for (size_t task : queue_) unplaced.cpu_millicores += tasks_[task].cpu_millicores;
        for (const auto& [file, text] : recorder.Sample(clock_.Now(), start, unplaced)) {
          result_.csv[file] += text;
        }
        last_sample = now_ns;
        if (now_ns == next_sample) next_sample += interval_ns;
      }
      if (now_ns >= end_ns) break;
    }
    result_.tasks.waiting_at_end = static_cast<int64_t>(queue_.size());
    SummarizeMoves();
    for (DeploymentState& d : deployments_) {
      if (d.follow.has_value()) result_.follows.push_back(*std::exchange(d.follow, std::nullopt));
    }
    result_.simulated = absl::Nanoseconds(end_ns);
    result_.generated_tasks = tasks_;
    if (!options_.keep_metrics.empty()) {
      for (auto it = result_.csv.begin(); it != result_.csv.end();) {
        std::string metric = it->first.substr(0, it->first.size() - 4);  // drop ".csv"
        bool keep = std::find(options_.keep_metrics.begin(), options_.keep_metrics.end(), metric) !=
                    options_.keep_metrics.end();
        it = keep ? std::next(it) : result_.csv.erase(it);
      }
    }
    return std::move(result_);
  }

 private:
  // One multi-cluster deployment as the run drives it.
  struct DeploymentState {
    const SimDeployment* spec = nullptr;
    std::unique_ptr<acm::ReplicaAutoscaler> autoscaler;
    std::map<std::string, swm::Placement> replicas;  // pod -> where
    int seq = 0;                                     // last replica number used
    bool started = false;                            // initial replicas made
    size_t traffic_index = 0;                        // the traffic entry in force
    std::optional<FollowRecord> follow;              // the traffic period being followed
  };

  // The placement clusters (those the tasks may use) that `view` holds:
  // the ones the hub reaches.
  std::vector<std::string> PlacementClustersIn(const swm::Federation& view) const {
    std::vector<std::string> out;
    for (const std::string& name : result_.placement_clusters) {
      if (view.FindCluster(name) != nullptr) out.push_back(name);
    }
    return out;
  }

  bool IsCloud(const std::string& cluster) const {
    return options_.cloud.has_value() && options_.cloud->cluster == cluster;
  }

  // Cloud bursting: checks the options, empties the cloud cluster (nothing
  // is provisioned yet) and builds the autoscaler with the flavor's size.
  absl::Status SetUpCloud() {
    if (!options_.cloud.has_value()) return absl::OkStatus();
    const CloudBurstOptions& cloud = *options_.cloud;
    const ClusterSpec* spec = scenario_.FindCluster(cloud.cluster);
    if (spec == nullptr || spec == &scenario_.hub) {
      return InvalidFieldError("cloud.cluster",
                               absl::StrCat("no managed cluster \"", cloud.cluster, "\""));
    }
    if (spec->nodes.empty()) {
      return InvalidFieldError("cloud.cluster", absl::StrCat("cluster ", cloud.cluster,
                                                             " has no node entry to copy"));
    }
    if (scenario_.workloads.task_stream.has_value()) {
      const auto& fixed = scenario_.workloads.task_stream->clusters;
      if (std::find(fixed.begin(), fixed.end(), cloud.cluster) != fixed.end()) {
        return InvalidFieldError(
            "cloud.cluster", absl::StrCat(cloud.cluster, " is one of task_stream.clusters; the "
                                                         "cloud must be a cluster of its own"));
      }
    }
    cloud_flavor_ = spec->nodes.front();
    swm::CloudAutoscalerOptions autoscaler = cloud.autoscaler;
    autoscaler.node_capacity = {cloud_flavor_.cpu_millicores, cloud_flavor_.memory_bytes,
                                cloud_flavor_.gpu};
    RETURN_IF_ERROR(swm::ValidateCloudAutoscalerOptions(autoscaler));
    cloud_autoscaler_ = std::make_unique<swm::CloudAutoscaler>(clock_, autoscaler);
    cloud_lms_ = federation_->FindLms(cloud.cluster);
    if (cloud_lms_ == nullptr) {
      return InvalidFieldError("cloud.cluster", absl::StrCat(cloud.cluster, " has no LMS"));
    }
    std::vector<std::string> nodes;
    cloud_lms_->Run([&](EmulatedCluster& c) {
      c.VisitNodes([&](const codeco::lms::v1::Node& n) { nodes.push_back(n.name()); });
      return 0;
    });
    for (const std::string& node : nodes) {
      RETURN_IF_ERROR(cloud_lms_->Run([&](EmulatedCluster& c) { return c.RemoveNode(node); }));
    }
    return absl::OkStatus();
  }

  // Cloud nodes, booting ones included.
  int CloudNodeCount() const { return static_cast<int>(cloud_ready_.size() + booting_.size()); }

  // Adds the CPU-time of the cloud's nodes since the last call.
  void BillCloud(int64_t now_ns) {
    if (!options_.cloud.has_value()) return;
    const double hours = static_cast<double>(now_ns - billed_until_ns_) / 3.6e12;
    result_.cloud.cpu_hours +=
        hours * CloudNodeCount() * static_cast<double>(cloud_flavor_.cpu_millicores) / 1000;
    billed_until_ns_ = now_ns;
  }

  // Nodes whose boot has ended join the cloud cluster.
  void BringUpCloudNodes(int64_t now_ns) {
    if (!options_.cloud.has_value()) return;
    for (auto it = booting_.begin(); it != booting_.end();) {
      if (it->second > now_ns) {
        ++it;
        continue;
      }
      NodeSpec node = cloud_flavor_;
      node.name = it->first;
      absl::Status added = cloud_lms_->Run([&](EmulatedCluster& c) { return c.AddNode(node); });
      if (added.ok()) cloud_ready_.insert(it->first);
      it = booting_.erase(it);
    }
  }

  // One decision of the cloud provisioner and autoscaler, carried out.
  void AutoscaleCloud(int64_t now_ns) {
    if (!options_.cloud.has_value()) return;
    swm::CloudObservation observation;
    observation.cluster_exists = cloud_exists_;
    std::map<std::string, swm::CloudNode> nodes;
    cloud_lms_->Run([&](EmulatedCluster& c) {
      c.VisitNodes([&](const codeco::lms::v1::Node& n) {
        nodes[n.name()] = swm::CloudNode{.name = n.name(), .ready = true};
      });
      c.VisitPods([&](const codeco::lms::v1::Pod& pod) {
        auto it = nodes.find(pod.node_name());
        if (it == nodes.end() || swm::PodEnded(pod.phase())) return;
        ++it->second.pods;
        it->second.allocated += swm::PodRequests(pod);
      });
      return 0;
    });
    for (auto& [name, node] : nodes) observation.nodes.push_back(std::move(node));
    for (const auto& [name, ready_ns] : booting_) {
      observation.nodes.push_back(swm::CloudNode{.name = name, .ready = false});
    }
    for (size_t task : queue_) {
      observation.pending.push_back({tasks_[task].cpu_millicores, tasks_[task].memory_bytes, 0});
    }
    const swm::Federation view = Snapshot();
    for (const std::string& name : result_.placement_clusters) {
      const swm::Cluster* cluster = view.FindCluster(name);
      if (cluster == nullptr) continue;
      for (const swm::Node& node : cluster->nodes) {
        if (!node.schedulable) continue;
        observation.fixed_capacity += node.capacity;
        observation.fixed_allocated += node.allocated;
      }
    }
    const swm::CloudScaling scaling = cloud_autoscaler_->Decide(observation);
    if (scaling.Empty()) return;
    const std::string at = FormatDurationNanos(now_ns);
    if (scaling.add_nodes > 0) {
      // A new cluster's nodes come up with it; nodes added to a running
      // cluster boot on their own.
      const bool new_cluster = scaling.create_cluster || !cloud_exists_;
      const int64_t ready_ns =
          now_ns + absl::ToInt64Nanoseconds(new_cluster ? options_.cloud->autoscaler.provisioning_delay
                                                        : options_.cloud->autoscaler.node_boot_delay);
      for (int i = 0; i < scaling.add_nodes; ++i) {
        booting_.emplace(absl::StrCat(options_.cloud->cluster, "-node-", ++cloud_node_seq_),
                         ready_ns);
      }
      if (new_cluster) ++result_.cloud.clusters_ordered;
      cloud_exists_ = true;
      result_.cloud.nodes_ordered += scaling.add_nodes;
      if (result_.cloud.first_order_ns < 0) result_.cloud.first_order_ns = now_ns;
      result_.cloud.peak_nodes = std::max(result_.cloud.peak_nodes, CloudNodeCount());
      result_.events.push_back(absl::StrCat("at ", at, ": cloud ", options_.cloud->cluster,
                                            new_cluster ? ": ordered with " : ": ordered ",
                                            scaling.add_nodes, scaling.add_nodes == 1 ? " node (" : " nodes (",
                                            scaling.reason, ")"));
    }
    std::vector<std::string> removing = scaling.remove_nodes;
    if (scaling.delete_cluster) {
      removing.assign(cloud_ready_.begin(), cloud_ready_.end());
      result_.cloud.nodes_removed += static_cast<int>(booting_.size());
      booting_.clear();
    }
    for (const std::string& node : removing) {
      absl::Status removed = cloud_lms_->Run([&](EmulatedCluster& c) { return c.RemoveNode(node); });
      if (!removed.ok()) {
        result_.events.push_back(absl::StrCat("at ", at, ": cloud node ", node,
                                              " not removed: ", removed.message()));
        continue;
      }
      cloud_ready_.erase(node);
      ++result_.cloud.nodes_removed;
    }
    if (!removing.empty() && !scaling.delete_cluster) {
      result_.events.push_back(absl::StrCat("at ", at, ": cloud ", options_.cloud->cluster,
                                            ": removed ", removing.size(),
                                            removing.size() == 1 ? " node (" : " nodes (",
                                            scaling.reason, ")"));
    }
    if (scaling.delete_cluster && cloud_ready_.empty()) {
      cloud_exists_ = false;
      result_.events.push_back(absl::StrCat("at ", at, ": cloud ", options_.cloud->cluster,
                                            ": removed (", scaling.reason, ")"));
    }
  }

  // The re-scheduler: once nothing is pending, long-running tasks on the
  // cloud go back to a fixed cluster with room (a new pod there, then the
  // cloud's one deleted), so the cloud can shrink; with reschedule_jobs,
  // running jobs too, carrying their progress. Pods on the cloud's least
  // allocated nodes go first: those nodes empty soonest.
  absl::Status RescheduleFromCloud() {
    if (!options_.cloud.has_value() || !options_.cloud->reschedule || !queue_.empty() ||
        cloud_ready_.empty()) {
      return absl::OkStatus();
    }
    struct OnCloud {
      std::string pod;
      size_t task;
      int64_t node_allocated;  // millicores requested on its node
      int64_t left_ns;         // a job's time left (0 for a long-running task)
    };
    std::vector<OnCloud> on_cloud;
    cloud_lms_->Run([&](EmulatedCluster& c) {
      std::map<std::string, int64_t> allocated;
      c.VisitNodes([&](const codeco::lms::v1::Node& n) {
        allocated[n.name()] = n.requested().cpu_millicores();
      });
      c.VisitPods([&](const codeco::lms::v1::Pod& pod) {
        auto it = live_.find(pod.name());
        if (it == live_.end() || pod.phase() != codeco::lms::v1::POD_PHASE_RUNNING) return;
        const GeneratedTask& task = tasks_[it->second];
        int64_t left_ns = 0;
        if (!task.long_running) {
          if (!options_.cloud->reschedule_jobs) return;
          auto d = pod.annotations().find(kDurationAnnotation);
          absl::StatusOr<int64_t> duration =
              d == pod.annotations().end() ? absl::NotFoundError("") : ParseDurationNanos(d->second);
          if (!duration.ok()) return;
          const int64_t ran_ns =
              absl::ToInt64Nanoseconds(clock_.Now() - FromProtoTimestamp(pod.start_time()));
          left_ns = *duration - ran_ns;
          if (left_ns < absl::ToInt64Nanoseconds(absl::Minutes(1))) return;
        }
        on_cloud.push_back({pod.name(), it->second, allocated[pod.node_name()], left_ns});
      });
      return 0;
    });
    if (on_cloud.empty()) return absl::OkStatus();
    std::stable_sort(on_cloud.begin(), on_cloud.end(), [](const OnCloud& a, const OnCloud& b) {
      return a.node_allocated < b.node_allocated;
    });
    swm::Federation view = Snapshot();
    const std::vector<std::string> fixed = PlacementClustersIn(view);
    const int64_t move_ns = absl::ToInt64Nanoseconds(options_.cloud->job_move_delay);
    for (const OnCloud& moving : on_cloud) {
      ++attempts_[moving.task];
      // The new pod's run time is what the job has left; a job that stays
      // keeps the run time its pod has.
      std::optional<int64_t> kept;
      if (auto it = job_left_ns_.find(moving.task); it != job_left_ns_.end()) kept = it->second;
      if (moving.left_ns > 0) job_left_ns_[moving.task] = moving.left_ns + move_ns;
      absl::StatusOr<bool> placed = PlaceTask(moving.task, view, fixed, profile_);
      if (!placed.ok()) return placed.status();
      if (!*placed) {
        --attempts_[moving.task];
        if (kept.has_value()) {
          job_left_ns_[moving.task] = *kept;
        } else {
          job_left_ns_.erase(moving.task);
        }
        continue;
      }
      live_.erase(moving.pod);
      where_.erase(moving.pod);
      RETURN_IF_ERROR(
          cloud_lms_->Run([&](EmulatedCluster& c) { return c.DeletePod(moving.pod).status(); }));
      ++result_.cloud.moved_back;
    }
    return absl::OkStatus();
  }

  // One probe of runtime adaptation: observe, then act on what the
  // governor confirms (see AdaptationOptions).
  absl::Status Adapt(int64_t now_ns) {
    // Observe every placement cluster and its Ready nodes.
    std::map<std::string, double> share;  // "cluster/node" -> CPU in use / capacity
    for (const std::string& cluster : result_.placement_clusters) {
      const bool reachable = Reachable(cluster);
      governor_->ObserveHealth(cluster, reachable);
      if (!reachable) continue;
      SynchronizedCluster* lms = federation_->FindLms(cluster);
      if (lms == nullptr) continue;
      lms->Run([&](EmulatedCluster& c) {
        std::vector<std::pair<std::string, int64_t>> ready;  // node, CPU capacity
        c.VisitNodes([&](const codeco::lms::v1::Node& n) {
          if (n.condition() == codeco::lms::v1::NODE_CONDITION_READY &&
              n.capacity().cpu_millicores() > 0) {
            ready.emplace_back(n.name(), n.capacity().cpu_millicores());
          }
        });
        for (const auto& [node, capacity] : ready) {
          absl::StatusOr<codeco::lms::v1::NodeUsage> usage = c.GetNodeUsage(node);
          if (!usage.ok()) continue;
          share[cluster + "/" + node] = static_cast<double>(usage->usage().cpu_millicores()) /
                                        static_cast<double>(capacity);
        }
        return 0;
      });
    }
    for (const auto& [subject, value] : share) governor_->ObserveUtilization(subject, value);

    // Pods a moved task left on a cluster the hub could not reach go once
    // it is reachable again.
    for (auto it = stale_pods_.begin(); it != stale_pods_.end();) {
      const auto& [pod, cluster] = *it;
      SynchronizedCluster* lms = federation_->FindLms(cluster);
      if (!Reachable(cluster) || lms == nullptr) {
        ++it;
        continue;
      }
      (void)lms->Run([&](EmulatedCluster& c) { return c.DeletePod(pod).status(); });
      it = stale_pods_.erase(it);
    }

    swm::Federation view = Snapshot();
    std::vector<std::string> healthy = PlacementClustersIn(view);
    std::erase_if(healthy, [&](const std::string& name) { return governor_->Failed(name); });
    RememberUnreachable(view);
    // Long-running tasks by where they run.
    std::map<std::string, std::vector<std::string>> pods_on;  // cluster or cluster/node -> pods
    for (const auto& [pod, at] : where_) {
      auto task = live_.find(pod);
      if (task == live_.end() || !tasks_[task->second].long_running) continue;
      pods_on[at.cluster].push_back(pod);
      pods_on[at.cluster + "/" + at.node].push_back(pod);
    }
    // Failures: every long-running task off a failed cluster.
    for (const std::string& cluster : result_.placement_clusters) {
      if (!governor_->Failed(cluster)) continue;
      for (const std::string& pod : pods_on[cluster]) {
        ASSIGN_OR_RETURN(bool moved, Move(pod, swm::MoveTrigger::kFailure, view, healthy, now_ns));
        if (moved) stale_pods_.emplace(pod, cluster);
      }
    }
    // Overloads: one task off each overloaded node per probe.
    for (const auto& [subject, value] : share) {
      if (!governor_->Overloaded(subject)) continue;
      std::vector<std::string>& pods = pods_on[subject];
      if (pods.empty()) continue;
      std::string largest = *std::max_element(
          pods.begin(), pods.end(), [&](const std::string& a, const std::string& b) {
            return tasks_[live_.at(a)].cpu_millicores < tasks_[live_.at(b)].cpu_millicores;
          });
      ASSIGN_OR_RETURN(bool moved,
                       Move(largest, swm::MoveTrigger::kOverload, view, healthy, now_ns, value));
      (void)moved;
    }
    // Failback: tasks a failure moved go home once it has been healthy long
    // enough, as room and the governor allow (tried again every probe).
    for (const std::string& subject : governor_->Recovered()) failback_due_.insert(subject);
    for (auto due = failback_due_.begin(); due != failback_due_.end();) {
      const std::string home = *due;
      if (governor_->Failed(home)) {
        due = failback_due_.erase(due);  // failed again: the next recovery brings it back
        continue;
      }
      std::vector<std::string> home_pods;
      for (const auto& [pod, at] : where_) {
        auto task = live_.find(pod);
        if (task == live_.end()) continue;
        auto from = failed_over_from_.find(task->second);
        if (from != failed_over_from_.end() && from->second == home) home_pods.push_back(pod);
      }
      size_t moved_home = 0;
      for (const std::string& pod : home_pods) {
        ASSIGN_OR_RETURN(bool moved, Move(pod, swm::MoveTrigger::kFailback, view, {home}, now_ns));
        moved_home += moved ? 1 : 0;
      }
      due = moved_home == home_pods.size() ? failback_due_.erase(due) : std::next(due);
    }
    return absl::OkStatus();
  }

  // Adds to `view` the clusters the hub cannot reach, with no schedulable
  // node, and their links as the scenario configures them: what the hub
  // last knew of them. Placement policies that measure from a workload's
  // preferred cluster (mck8s's bursting to the nearest) still can when that
  // cluster is the one that failed.
  void RememberUnreachable(swm::Federation& view) const {
    std::vector<std::string> added;
    for (const ClusterSpec& spec : scenario_.clusters) {
      if (view.FindCluster(spec.name) != nullptr || IsCloud(spec.name)) continue;
      swm::Cluster cluster{
          .name = spec.name, .labels = LabelsOf(spec), .intra_latency_ns = kIntraClusterLatencyNs};
      for (const NodeSpec& node : spec.nodes) {
        cluster.nodes.push_back(swm::Node{
            .name = node.name,
            .capacity = {node.cpu_millicores, node.memory_bytes, node.gpu},
            .labels = {node.labels.begin(), node.labels.end()},
            .schedulable = false});
      }
      view.AddCluster(std::move(cluster));
      added.push_back(spec.name);
    }
    for (const std::string& name : added) {
      for (const swm::Cluster& other : view.clusters()) {
        if (other.name == name) continue;
        for (const auto& [from, to] : {std::pair{name, other.name}, std::pair{other.name, name}}) {
          std::optional<LinkSpec> link = scenario_.LinkBetween(from, to);
          if (!link.has_value()) continue;
          view.AddLink(SchedulerLink(from, to, link->one_way_latency_ns, link->bandwidth_bps));
        }
      }
    }
  }

  // Moves the task of live pod `pod` to `targets` (the node it is on is
  // left out) if the governor admits it: a new pod there, the old one
  // deleted (or, on a cluster the hub cannot reach, deleted later by the
  // caller). `source_share` is the CPU share of its node, for the gain.
  absl::StatusOr<bool> Move(const std::string& pod, swm::MoveTrigger trigger,
                            swm::Federation& view, const std::vector<std::string>& targets,
                            int64_t now_ns, double source_share = 0) {
    const size_t task = live_.at(pod);
    const swm::Placement from = where_.at(pod);
    // Never back onto the node it leaves: the node is left out of the
    // choice, then put back as it was.
    swm::Node* leaving = nullptr;
    bool was_schedulable = false;
    if (swm::Cluster* c = view.MutableCluster(from.cluster)) {
      const int i = c->NodeIndex(from.node);
      if (i >= 0) {
        leaving = &c->nodes[i];
        was_schedulable = std::exchange(leaving->schedulable, false);
      }
    }
    ++attempts_[task];
    absl::StatusOr<std::optional<swm::Placement>> chosen =
        ChooseNode(task, view, targets, profile_);
    if (leaving != nullptr) leaving->schedulable = was_schedulable;
    ASSIGN_OR_RETURN(std::optional<swm::Placement> to, std::move(chosen));
    if (!to.has_value()) {
      --attempts_[task];
      return false;
    }
    double gain = 0;
    if (trigger == swm::MoveTrigger::kOverload) {
      const swm::Cluster* c = view.FindCluster(to->cluster);
      const int i = c == nullptr ? -1 : c->NodeIndex(to->node);
      if (i >= 0) {
        const swm::Node& n = c->nodes[i];
        const double after = static_cast<double>(n.allocated.cpu_millis +
                                                 tasks_[task].cpu_millicores) /
                             static_cast<double>(std::max<int64_t>(1, n.capacity.cpu_millis));
        gain = 100 * (source_share - after);
      }
    }
    absl::Status admitted =
        governor_->Admit({.workload = tasks_[task].name, .trigger = trigger, .gain = gain});
    if (!admitted.ok()) {
      --attempts_[task];
      ++result_.adaptation.held_back;
      return false;
    }
    if (!CreateTaskPod(task, *to, view, profile_)) {
      --attempts_[task];
      return false;
    }
    live_.erase(pod);
    where_.erase(pod);
    if (trigger == swm::MoveTrigger::kFailure) failed_over_from_[task] = from.cluster;
    if (trigger == swm::MoveTrigger::kFailback) failed_over_from_.erase(task);
    if (Reachable(from.cluster)) {
      if (SynchronizedCluster* lms = federation_->FindLms(from.cluster)) {
        (void)lms->Run([&](EmulatedCluster& c) { return c.DeletePod(pod).status(); });
      }
    }
    result_.adaptation.migrations.push_back(
        {.at_ns = now_ns,
         .task = tasks_[task].name,
         .trigger = swm::MoveTriggerName(trigger),
         .from = from.cluster + "/" + from.node,
         .to = to->cluster + "/" + to->node});
    result_.events.push_back(absl::StrCat("at ", FormatDurationNanos(now_ns), ": moved ",
                                          tasks_[task].name, " from ", from.cluster, "/",
                                          from.node, " to ", to->cluster, "/", to->node, " (",
                                          swm::MoveTriggerName(trigger), ")"));
    return true;
  }

  // The most moves of one task within any hour of the run, all of them and
  // those for load or placement only.
  void SummarizeMoves() {
    auto most_in_an_hour = [&](bool load_only) {
      std::map<std::string, std::vector<int64_t>> by_task;
      for (const MigrationRecord& m : result_.adaptation.migrations) {
        const bool forced = m.trigger == swm::MoveTriggerName(swm::MoveTrigger::kFailure) ||
                            m.trigger == swm::MoveTriggerName(swm::MoveTrigger::kFailback);
        if (!load_only || !forced) by_task[m.task].push_back(m.at_ns);
      }
      const int64_t hour = absl::ToInt64Nanoseconds(absl::Hours(1));
      int most = 0;
      for (const auto& [task, times] : by_task) {
        size_t first = 0;
        for (size_t last = 0; last < times.size(); ++last) {
          while (times[last] - times[first] >= hour) ++first;
          most = std::max(most, static_cast<int>(last - first + 1));
        }
      }
      return most;
    };
    result_.adaptation.max_moves_per_task_hour = most_in_an_hour(false);
    result_.adaptation.max_load_moves_per_task_hour = most_in_an_hour(true);
  }

  // Checks the deployments and builds their autoscalers.
  absl::Status SetUpDeployments() {
    std::set<std::string> names;
    for (size_t i = 0; i < options_.deployments.size(); ++i) {
      const SimDeployment& d = options_.deployments[i];
      const std::string path = absl::StrCat("deployments[", i, "]");
      if (d.name.empty() || !names.insert(d.name).second) {
        return InvalidFieldError(path + ".name", "must be set and unique");
      }
      if (d.cpu_millicores <= 0) return InvalidFieldError(path + ".cpu_millicores", "must be positive");
      if (d.memory_bytes < 0) return InvalidFieldError(path + ".memory_bytes", "must not be negative");
      if (d.traffic.empty() || d.traffic.front().at_ns != 0) {
        return InvalidFieldError(path + ".traffic", "must start at 0");
      }
      for (size_t k = 0; k < d.traffic.size(); ++k) {
        const std::string tpath = absl::StrCat(path, ".traffic[", k, "]");
        if (k > 0 && d.traffic[k].at_ns <= d.traffic[k - 1].at_ns) {
          return InvalidFieldError(tpath + ".at_ns", "must come after the entry before");
        }
        if (std::find(result_.placement_clusters.begin(), result_.placement_clusters.end(),
                      d.traffic[k].cluster) == result_.placement_clusters.end()) {
          return InvalidFieldError(tpath + ".cluster",
                                   absl::StrCat("\"", d.traffic[k].cluster,
                                                "\" is not a cluster the tasks may use"));
        }
        if (d.traffic[k].cpu_millicores < 0) {
          return InvalidFieldError(tpath + ".cpu_millicores", "must not be negative");
        }
      }
      absl::Status autoscaling = acm::ValidateReplicaAutoscalerOptions(d.autoscaling);
      if (!autoscaling.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ".", autoscaling.message()));
      }
      deployments_.push_back(DeploymentState{
          .spec = &d, .autoscaler = std::make_unique<acm::ReplicaAutoscaler>(clock_, d.autoscaling)});
    }
    return absl::OkStatus();
  }

  // Latency the users at `users` see to `cluster` (0 inside it; a cluster
  // without a link is as far as can be).
  static int64_t LatencyFrom(const swm::Federation& view, const std::string& users,
                             const std::string& cluster) {
    if (users == cluster) return 0;
    const swm::Link* link = view.FindLink(users, cluster);
    return link == nullptr ? std::numeric_limits<int64_t>::max() : link->latency_ns;
  }

  // Where a replica of `d` would go with `users` preferred; nullopt when no
  // node has room.
  absl::StatusOr<std::optional<swm::Placement>> ChooseReplicaNode(const SimDeployment& d,
                                                                  const std::string& users,
                                                                  const swm::Federation& view) {
    return PlaceOne(ReplicaApplication(d, users), view, PlacementClustersIn(view));
  }

  // One replica of `d` as the scheduler places it, `users` preferred.
  static swm::Application ReplicaApplication(const SimDeployment& d, const std::string& users) {
    swm::Application app{.name = d.name, .profile = "mck8s-cluster-affinity"};
    app.workloads.push_back(swm::Workload{.name = "replica",
                                          .service = d.name,
                                          .requests = {d.cpu_millicores, d.memory_bytes, 0},
                                          .preferred_clusters = {users}});
    return app;
  }

  // Creates a replica of `state` on `at` and counts it in `view`; false when
  // the LMS refuses it.
  bool CreateReplica(DeploymentState& state, const swm::Placement& at, swm::Federation& view) {
    const SimDeployment& d = *state.spec;
    codeco::lms::v1::Pod pod;
    pod.set_name(absl::StrCat(d.name, "-", ++state.seq));
    pod.set_node_name(at.node);
    (*pod.mutable_labels())["codef.codeco.io/deployment"] = d.name;
    auto* container = pod.add_containers();
    container->set_name(d.name);
    container->mutable_requests()->set_cpu_millicores(d.cpu_millicores);
    container->mutable_requests()->set_memory_bytes(d.memory_bytes);
    SynchronizedCluster* lms = federation_->FindLms(at.cluster);
    if (lms == nullptr ||
        !lms->Run([&](EmulatedCluster& c) { return c.CreatePod(pod, pod.name()).status(); }).ok()) {
      return false;
    }
    state.replicas[pod.name()] = at;
    swm::PlacementResult placed;
    placed.placements["replica"] = at;
    swm::ApplyPlacement(ReplicaApplication(d, at.cluster), placed, view);
    return true;
  }

  // Deletes replica `pod` of `state` (by value: callers pass map keys).
  void DeleteReplica(DeploymentState& state, std::string pod) {
    const swm::Placement at = state.replicas.at(pod);
    state.replicas.erase(pod);
    if (SynchronizedCluster* lms = federation_->FindLms(at.cluster)) {
      (void)lms->Run([&](EmulatedCluster& c) { return c.DeletePod(pod).status(); });
    }
  }

  // One cycle of every deployment: follow the traffic, scale, record.
  absl::Status RunDeployments(int64_t now_ns) {
    for (DeploymentState& state : deployments_) {
      const SimDeployment& d = *state.spec;
      size_t k = 0;
      while (k + 1 < d.traffic.size() && d.traffic[k + 1].at_ns <= now_ns) ++k;
      const SimDeployment::Traffic& traffic = d.traffic[k];
      if (!state.follow.has_value() || state.traffic_index != k) {
        if (state.follow.has_value()) result_.follows.push_back(*state.follow);
        state.follow = FollowRecord{.deployment = d.name, .at_ns = traffic.at_ns,
                                    .cluster = traffic.cluster};
        state.traffic_index = k;
      }
      // Replicas whose pod failed or is gone are dropped (scaling replaces them).
      for (auto it = state.replicas.begin(); it != state.replicas.end();) {
        SynchronizedCluster* lms = federation_->FindLms(it->second.cluster);
        bool alive = lms != nullptr && lms->Run([&](EmulatedCluster& c) {
          absl::StatusOr<codeco::lms::v1::Pod> pod = c.GetPod(it->first);
          return pod.ok() && !swm::PodEnded(pod->phase());
        });
        it = alive ? std::next(it) : state.replicas.erase(it);
      }
      swm::Federation view = Snapshot();
      // Follow: replicas move to where the scheduler would put them now, if nearer the users.
      std::vector<std::pair<std::string, swm::Placement>> replicas(state.replicas.begin(),
                                                                   state.replicas.end());
      for (const auto& [pod, at] : replicas) {
        if (at.cluster == traffic.cluster) continue;
        ASSIGN_OR_RETURN(std::optional<swm::Placement> to,
                         ChooseReplicaNode(d, traffic.cluster, view));
        if (!to.has_value() ||
            LatencyFrom(view, traffic.cluster, to->cluster) >=
                LatencyFrom(view, traffic.cluster, at.cluster)) {
          continue;
        }
        if (CreateReplica(state, *to, view)) DeleteReplica(state, pod);
      }
      // Scale on the traffic's CPU spread over the replicas.
      const int current = static_cast<int>(state.replicas.size());
      const double utilization =
          current == 0 ? (traffic.cpu_millicores > 0 ? 1e6 : 0)
                       : static_cast<double>(traffic.cpu_millicores) /
                             static_cast<double>(current * d.cpu_millicores);
      const int desired = state.started ? state.autoscaler->Desired(current, utilization)
                                        : std::max(d.initial_replicas, d.autoscaling.min_replicas);
      state.started = true;
      for (int n = current; n < desired; ++n) {
        ASSIGN_OR_RETURN(std::optional<swm::Placement> to,
                         ChooseReplicaNode(d, traffic.cluster, view));
        if (!to.has_value() || !CreateReplica(state, *to, view)) break;
      }
      while (static_cast<int>(state.replicas.size()) > desired) {
        auto farthest = std::max_element(
            state.replicas.begin(), state.replicas.end(), [&](const auto& a, const auto& b) {
              return LatencyFrom(view, traffic.cluster, a.second.cluster) <
                     LatencyFrom(view, traffic.cluster, b.second.cluster);
            });
        DeleteReplica(state, farthest->first);
      }
      FollowRecord& follow = *state.follow;
      follow.peak_replicas = std::max(follow.peak_replicas, static_cast<int>(state.replicas.size()));
      const bool all_there =
          !state.replicas.empty() &&
          std::all_of(state.replicas.begin(), state.replicas.end(),
                      [&](const auto& r) { return r.second.cluster == traffic.cluster; });
      if (all_there && follow.followed_after_ns < 0) follow.followed_after_ns = now_ns - follow.at_ns;
    }
    return absl::OkStatus();
  }

  // Completed jobs leave; failed pods' tasks are queued again.
  void HandleTerminalPods() {
    for (const auto& collector : collectors_) {
      for (const TerminalPodCollector::Terminal& t : collector->Drain()) {
        auto it = live_.find(t.pod);
        if (it == live_.end()) continue;
        size_t task = it->second;
        live_.erase(it);
        where_.erase(t.pod);
        if (t.succeeded) {
          ++result_.tasks.completed;
        } else {
          ++result_.tasks.pods_failed;
          ++attempts_[task];
          job_left_ns_.erase(task);  // a failed job starts over, its full duration
          queue_.push_back(task);
        }
      }
    }
  }

  // The hub reaches a cluster through their link; without one (or with it
  // cut, the cluster partitioned or the hub cut) it cannot place there.
  bool Reachable(const std::string& cluster) const {
    absl::StatusOr<LinkProperties> link = federation_->GetLink(scenario_.hub.name, cluster);
    return link.ok() && !link->cut;
  }

  // A scenario cluster's labels as the scheduler sees them.
  static swm::ClusterLabels LabelsOf(const ClusterSpec& spec) {
    return {.region = spec.labels.region(),
            .country = spec.labels.country(),
            .tier = spec.labels.tier() == codeco::common::v1::TIER_UNSPECIFIED
                        ? ""
                        : TierName(spec.labels.tier()),
            .provider = spec.labels.provider()};
  }

  // The scheduler's view of the reachable clusters, read from their LMS.
  swm::Federation Snapshot() const {
    swm::Federation view;
    std::vector<std::string> included;
    for (const ClusterSpec& spec : scenario_.clusters) {
      SynchronizedCluster* lms = federation_->FindLms(spec.name);
      if (lms == nullptr || !Reachable(spec.name)) continue;
      swm::Cluster cluster{
          .name = spec.name, .labels = LabelsOf(spec), .intra_latency_ns = kIntraClusterLatencyNs};
      lms->Run([&](EmulatedCluster& c) {
        c.VisitNodes(
            [&](const codeco::lms::v1::Node& node) { cluster.nodes.push_back(ToSwmNode(node)); });
        return 0;
      });
      view.AddCluster(std::move(cluster));
      included.push_back(spec.name);
    }
    for (const std::string& from : included) {
      for (const std::string& to : included) {
        if (from == to) continue;
        if (auto link = EmulatedLink(*federation_, from, to)) view.AddLink(*std::move(link));
      }
    }
    return view;
  }

  static bool AnyNodeFits(const swm::Federation& view, const std::vector<std::string>& clusters,
                          const swm::Resources& requests) {
    for (const std::string& name : clusters) {
      const swm::Cluster* cluster = view.FindCluster(name);
      if (cluster == nullptr) continue;
      for (const swm::Node& node : cluster->nodes) {
        if (node.schedulable && node.Free().Fits(requests)) return true;
      }
    }
    return false;
  }

  std::string PodName(size_t task) const {
    return attempts_[task] == 0 ? tasks_[task].name
                                : absl::StrCat(tasks_[task].name, "-r", attempts_[task]);
  }

  // Reads and validates the scenario's CAM files (an application each).
  absl::Status LoadCams(const FileReader& read_file) {
    for (size_t i = 0; i < scenario_.workloads.cams.size(); ++i) {
      const CamRef& ref = scenario_.workloads.cams[i];
      const std::string field = absl::StrCat("workloads.cams[", i, "]");
      if (!read_file) return InvalidFieldError(field, "no file reader to load " + ref.file);
      absl::StatusOr<std::string> text = read_file(ref.file);
      if (!text.ok()) return InvalidFieldError(field, std::string(text.status().message()));
      absl::StatusOr<acm::ParsedCam> parsed = acm::ParseCam(*text);
      if (!parsed.ok()) {
        return InvalidFieldError(field, absl::StrCat(ref.file, ": ", parsed.status().message()));
      }
      PendingCam cam{.at_ns = ref.at_ns, .file = ref.file};
      *cam.app.mutable_spec() = parsed->spec;
      cam.app.mutable_metadata()->set_name(parsed->spec.app_name());
      cams_.push_back(std::move(cam));
    }
    return absl::OkStatus();
  }

  // Places every CAM application that is due and not placed yet, whole or
  // not at all (a placement that leaves a workload out waits for the next
  // tick), on every managed cluster the hub reaches, through SWM's
  // PlacementService: the plan is reserved in every target cluster,
  // committed (pods created from the application's templates) and stored,
  // as the hub does; its pods are long-running.
  absl::Status PlaceDueCams(int64_t now_ns) {
    for (PendingCam& cam : cams_) {
      if (cam.placed || cam.at_ns > now_ns) continue;
      std::set<std::string> neighborhood;
      swm::PlaceRequest request;
      for (const ClusterSpec& spec : scenario_.clusters) {
        if (!sim_clusters_.count(spec.name) || !Reachable(spec.name)) continue;
        neighborhood.insert(spec.name);
        request.members.push_back(swm::MemberRef{.cluster = spec.name});
      }
      if (neighborhood.empty()) continue;
      absl::StatusOr<swm::Application> app = swm::ToCoreApplication(cam.app, neighborhood);
      if (!app.ok()) {
        return InvalidFieldError("workloads.cams", absl::StrCat(cam.file, ": ",
                                                                app.status().message()));
      }
      app->profile = profile_;
      const std::string name = swm::ApplicationName(cam.app);
      request.app = *app;
      request.spec_revision = cam.app.spec_revision();
      SimExecutors executors(sim_clusters_, cam.app);
      request.executors = &executors;
      absl::StatusOr<codeco::common::v1::Operation> op = placement_->Place(request);
      if (absl::IsFailedPrecondition(op.status()) || absl::IsAborted(op.status())) {
        if (!cam.reported_waiting) {
          std::string why(op.status().message());
          absl::StatusOr<std::optional<swm::v1::AssignmentPlan>> stored = plans_.Latest(name);
          if (stored.ok() && stored->has_value() && !(*stored)->unplaced().empty()) {
            why = absl::StrCat((*stored)->unplaced(0).workload(), ": ",
                               (*stored)->unplaced(0).reason());
          }
          result_.notes.push_back(
              absl::StrCat("application ", name, " (", cam.file, ") waits: ", why));
          cam.reported_waiting = true;
        }
        continue;
      }
      if (!op.ok()) {
        return absl::InternalError(
            absl::StrCat("scheduler failed on ", name, ": ", op.status().message()));
      }
      swm::v1::AssignmentPlan plan;
      if (!op->result().UnpackTo(&plan)) {
        return absl::InternalError("placement of " + name + " answered no plan");
      }
      std::map<std::string, const swm::v1::WorkloadTarget*> target_of;
      for (const swm::v1::WorkloadTarget& t : plan.targets()) target_of[t.workload()] = &t;
      std::vector<std::string> where;
      for (const swm::Workload& w : app->workloads) {
        auto it = target_of.find(w.name);
        if (it == target_of.end()) continue;
        where.push_back(
            absl::StrCat(w.name, " on ", it->second->cluster(), "/", it->second->node()));
      }
      cam.placed = true;
      ++result_.applications_placed;
      result_.notes.push_back(absl::StrCat("application ", name, " placed at ", now_ns / 1'000'000'000,
                                           " s: ", absl::StrJoin(where, ", ")));
    }
    return absl::OkStatus();
  }

  // How pods are spread over the cloud's nodes: codeco's autoscaler packs
  // them (most allocated first) so nodes empty and can go; mck8s's leaves
  // the choice to the run's policy.
  std::string CloudProfile() const {
    return options_.cloud->autoscaler.policy == swm::CloudScalingPolicy::kPacked
               ? "mck8s-best-fit"
               : profile_;
  }

  // Where the scheduler would put task `index` on `neighborhood` of `view`
  // with `profile` (nothing is created): nullopt when no node has room.
  absl::StatusOr<std::optional<swm::Placement>> ChooseNode(
      size_t index, const swm::Federation& view, const std::vector<std::string>& neighborhood,
      const std::string& profile) {
    return PlaceOne(TaskApplication(index, profile), view, neighborhood);
  }

  // Where the scheduler would put the one workload of `app` on
  // `neighborhood` of `view` (nothing is created): nullopt when no node has
  // room; INTERNAL when the scheduler fails.
  absl::StatusOr<std::optional<swm::Placement>> PlaceOne(
      const swm::Application& app, const swm::Federation& view,
      const std::vector<std::string>& neighborhood) {
    if (neighborhood.empty()) return std::nullopt;
    const swm::Workload& workload = app.workloads.front();
    // Every built-in profile filters with NodeResourcesFit: when no node
    // of the neighborhood has room, the scheduler cannot place it, so it
    // is not asked (the result is the same, much sooner).
    if (!AnyNodeFits(view, neighborhood, workload.requests)) return std::nullopt;
    ++result_.tasks.scheduler_calls;
    absl::StatusOr<swm::PlacementResult> placed = coordinator_.Place(app, view, neighborhood);
    if (!placed.ok()) {
      return absl::InternalError(absl::StrCat("scheduler failed on ", app.name, ": ",
                                              placed.status().message()));
    }
    auto at = placed->placements.find(workload.name);
    if (at == placed->placements.end()) return std::nullopt;
    return at->second;
  }

  swm::Resources TaskRequests(size_t index) const {
    return {tasks_[index].cpu_millicores, tasks_[index].memory_bytes, 0};
  }

  // The one-workload application the scheduler places for task `index`.
  swm::Application TaskApplication(size_t index, const std::string& profile) const {
    swm::Application app{.name = PodName(index), .profile = profile};
    app.workloads.push_back(swm::Workload{.name = "task",
                                          .service = "task",
                                          .requests = TaskRequests(index),
                                          .preferred_clusters = {tasks_[index].cluster},
                                          .run_to_completion = !tasks_[index].long_running});
    return app;
  }

  // Creates task `index`'s pod on `at` and counts it in `view`: false when
  // the LMS refused it (a stale view).
  bool CreateTaskPod(size_t index, const swm::Placement& at, swm::Federation& view,
                     const std::string& profile) {
    const GeneratedTask& task = tasks_[index];
    const std::string pod_name = PodName(index);
    codeco::lms::v1::Pod pod;
    pod.set_name(pod_name);
    pod.set_node_name(at.node);
    (*pod.mutable_labels())[kTaskLabel] = task.name;
    if (!task.long_running) {
      auto left = job_left_ns_.find(index);
      (*pod.mutable_annotations())[kDurationAnnotation] =
          absl::StrCat(left == job_left_ns_.end() ? task.duration_ns : left->second, "ns");
    }
    auto* container = pod.add_containers();
    container->set_name("task");
    container->mutable_requests()->set_cpu_millicores(task.cpu_millicores);
    container->mutable_requests()->set_memory_bytes(task.memory_bytes);
    SynchronizedCluster* lms = federation_->FindLms(at.cluster);
    absl::StatusOr<codeco::lms::v1::Pod> created =
        lms == nullptr ? absl::NotFoundError("no LMS")
                       : lms->Run([&](EmulatedCluster& c) { return c.CreatePod(pod, pod_name); });
    if (!created.ok()) {
      ++result_.tasks.rejected_by_lms;
      return false;
    }
    swm::PlacementResult placed;
    placed.placements["task"] = at;
    swm::ApplyPlacement(TaskApplication(index, profile), placed, view);
    live_[pod_name] = index;
    where_[pod_name] = at;
    ++result_.tasks.pods_created;
    return true;
  }

  // Places task `index` on `neighborhood` of `view` with `profile` and
  // creates its pod: true once bound, false when no node has room (or the
  // LMS refused it: a stale view).
  absl::StatusOr<bool> PlaceTask(size_t index, swm::Federation& view,
                                 const std::vector<std::string>& neighborhood,
                                 const std::string& profile) {
    ASSIGN_OR_RETURN(std::optional<swm::Placement> at,
                     ChooseNode(index, view, neighborhood, profile));
    return at.has_value() && CreateTaskPod(index, *at, view, profile);
  }

  // Offers every queued task to the scheduler, oldest first.
  absl::Status ScheduleCycle() {
    HandleTerminalPods();
    if (queue_.empty()) return absl::OkStatus();
    swm::Federation view = Snapshot();
    const std::vector<std::string> placeable = PlacementClustersIn(view);
    // The cloud takes what the fixed clusters cannot, once it has nodes.
    const bool cloud_up = options_.cloud.has_value() && !cloud_ready_.empty() &&
                          view.FindCluster(options_.cloud->cluster) != nullptr;
    std::deque<size_t> still_waiting;
    for (size_t index : queue_) {
      const GeneratedTask& task = tasks_[index];
      std::vector<std::string> neighborhood;
      if (kubefed_) {
        if (view.FindCluster(task.cluster) != nullptr) neighborhood = {task.cluster};
      } else {
        neighborhood = placeable;
      }
      ASSIGN_OR_RETURN(bool placed, PlaceTask(index, view, neighborhood, profile_));
      if (!placed && cloud_up) {
        ASSIGN_OR_RETURN(placed, PlaceTask(index, view, {options_.cloud->cluster}, CloudProfile()));
        if (placed) ++result_.cloud.pods_placed;
      }
      if (!placed) still_waiting.push_back(index);
    }
    queue_ = std::move(still_waiting);
    return absl::OkStatus();
  }

  const Scenario& scenario_;
  const SimulationOptions& options_;
  const bool kubefed_;
  const std::string profile_;
  SimulatedClock clock_;
  InMemoryLinkControl links_;
  InMemoryCheckpointArchiveStore archives_;
  std::vector<std::unique_ptr<TerminalPodCollector>> collectors_;
  // Declared after the collectors: destroyed first, so no event reaches a
  // destroyed collector.
  std::unique_ptr<Federation> federation_;
  swm::PluginRegistry registry_ = swm::NewDefaultRegistry();
  swm::InProcessL2Solver l2_{registry_, nullptr};
  swm::Coordinator coordinator_{l2_, registry_, nullptr};
  // SWM's orchestration of the CAM applications (built once the federation is).
  std::map<std::string, std::unique_ptr<SimCluster>> sim_clusters_;
  swm::InMemoryPlanRepository plans_;
  std::unique_ptr<SimMembers> sim_members_;
  std::unique_ptr<EmulatedLinks> sim_links_;
  std::unique_ptr<swm::PlacementService> placement_;
  std::vector<GeneratedTask> tasks_;
  std::vector<int> attempts_;
  /// A CAM application of the scenario, and whether it is placed.
  struct PendingCam {
    int64_t at_ns = 0;               ///< When it is applied.
    std::string file;                ///< Where it came from.
    acm::v1::Application app;        ///< The parsed application.
    bool placed = false;             ///< Its pods exist.
    bool reported_waiting = false;   ///< A note already says why it waits.
  };
  std::vector<PendingCam> cams_;
  std::deque<size_t> queue_;
  std::map<std::string, size_t> live_;
  // Where each live pod of the task stream is bound.
  std::map<std::string, swm::Placement> where_;
  SimulationResult result_;
  // Cloud bursting (options_.cloud): the autoscaler, the node it orders,
  // the cloud's LMS, its Ready nodes, the nodes booting (name -> when
  // Ready, ns from the start), whether the cluster is ordered.
  std::unique_ptr<swm::CloudAutoscaler> cloud_autoscaler_;
  NodeSpec cloud_flavor_;
  SynchronizedCluster* cloud_lms_ = nullptr;
  std::set<std::string> cloud_ready_;
  std::map<std::string, int64_t> booting_;
  bool cloud_exists_ = false;
  int cloud_node_seq_ = 0;
  int64_t billed_until_ns_ = 0;
  // Jobs moved with their progress: task -> run time left for its next pod.
  std::map<size_t, int64_t> job_left_ns_;
  // Runtime adaptation (options_.adaptation): the governor, the cluster each
  // failed-over task came from, and pods left on unreachable clusters
  // (pod -> cluster) to delete once they are back.
  std::unique_ptr<swm::MigrationGovernor> governor_;
  std::map<size_t, std::string> failed_over_from_;
  // Recovered clusters whose failed-over tasks are not all home yet.
  std::set<std::string> failback_due_;
  // The multi-cluster deployments (options_.deployments).
  std::vector<DeploymentState> deployments_;
  std::map<std::string, std::string> stale_pods_;
};

}  // namespace

std::vector<std::string> SimulationPolicies() {
  return {kKubefedPolicy,        "codeco",
          "mck8s-worst-fit",     "mck8s-best-fit",
          "mck8s-traffic-aware", "mck8s-cluster-affinity",
          "lcm-two-tier"};
}

absl::StatusOr<SimulationResult> RunSimulation(const Scenario& scenario,
                                               const SimulationOptions& options,
                                               const FileReader& read_file) {
  RETURN_IF_ERROR(CheckPolicy(options.policy));
  if (options.tick <= absl::ZeroDuration()) return InvalidFieldError("tick", "must be positive");
  if (options.duration < absl::ZeroDuration()) {
    return InvalidFieldError("duration", "must not be negative");
  }
  if (options.duration == absl::ZeroDuration() && scenario.duration_ns <= 0) {
    return InvalidFieldError("duration",
                             "simulate mode needs the scenario's duration (or a --duration)");
  }
  Simulation simulation(scenario, options);
  return simulation.Run(read_file);
}

DemandFloor ComputeDemandFloor(const std::vector<GeneratedTask>& tasks, int64_t capacity_millicores,
                               absl::Duration interval, absl::Duration until) {
  DemandFloor floor;
  if (interval <= absl::ZeroDuration()) return floor;
  const int64_t step = absl::ToInt64Nanoseconds(interval);
  const int64_t end = absl::ToInt64Nanoseconds(until);
  int samples = 0;
  for (int64_t now = 0; now <= end; now += step) {
    double demand = 0;
    for (const GeneratedTask& task : tasks) {
      bool running =
          task.at_ns <= now && (task.long_running || task.at_ns + task.duration_ns > now);
      if (running) demand += static_cast<double>(task.cpu_millicores);
    }
    double capacity = static_cast<double>(capacity_millicores);
    double share = demand > capacity ? (demand - capacity) / demand : 0;
    floor.peak_demand_cpus = std::max(floor.peak_demand_cpus, demand / 1000);
    floor.floor_peak = std::max(floor.floor_peak, share);
    floor.floor_mean += share;
    ++samples;
  }
  if (samples > 0) floor.floor_mean /= samples;

  // The pooled queue, by events at each sample.
  std::vector<const GeneratedTask*> arrivals;
  for (const GeneratedTask& task : tasks) arrivals.push_back(&task);
  std::stable_sort(arrivals.begin(), arrivals.end(),
                   [](const GeneratedTask* a, const GeneratedTask* b) {
                     return a->at_ns < b->at_ns;
                   });
  std::multimap<int64_t, int64_t> running;  // end (INT64_MAX: never) -> millicores
  std::deque<const GeneratedTask*> waiting;
  int64_t used = 0;
  size_t next = 0;
  samples = 0;
  for (int64_t now = 0; now <= end; now += step) {
    while (!running.empty() && running.begin()->first <= now) {
      used -= running.begin()->second;
      running.erase(running.begin());
    }
    while (next < arrivals.size() && arrivals[next]->at_ns <= now) {
      waiting.push_back(arrivals[next++]);
    }
    int64_t waiting_cpu = 0;
    for (auto it = waiting.begin(); it != waiting.end();) {
      const GeneratedTask& task = **it;
      if (used + task.cpu_millicores <= capacity_millicores) {
        used += task.cpu_millicores;
        running.emplace(task.long_running ? std::numeric_limits<int64_t>::max()
                                          : now + task.duration_ns,
                        task.cpu_millicores);
        it = waiting.erase(it);
      } else {
        waiting_cpu += task.cpu_millicores;
        ++it;
      }
    }
    const double live = static_cast<double>(waiting_cpu + used);
    const double share = live > 0 ? static_cast<double>(waiting_cpu) / live : 0;
    floor.pooled_peak = std::max(floor.pooled_peak, share);
    floor.pooled_mean += share;
    ++samples;
  }
  if (samples > 0) floor.pooled_mean /= samples;
  return floor;
}

}  // namespace codeco::codef
