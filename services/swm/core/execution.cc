#include "swm/core/execution.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"

namespace codeco::swm {

std::string PhaseName(PlanPhase p) {
  switch (p) {
    case PlanPhase::kIdle:
      return "Idle";
    case PlanPhase::kPlacing:
      return "Placing";
    case PlanPhase::kReserving:
      return "Reserving";
    case PlanPhase::kCommitting:
      return "Committing";
    case PlanPhase::kDone:
      return "Done";
    case PlanPhase::kRolledBack:
      return "RolledBack";
  }
  return "Unknown";
}

std::string ActionTypeName(ActionType t) {
  switch (t) {
    case ActionType::kCreatePod:
      return "CreatePod";
    case ActionType::kDeletePod:
      return "DeletePod";
    case ActionType::kCreateChannel:
      return "CreateChannel";
    case ActionType::kDeleteChannel:
      return "DeleteChannel";
  }
  return "Unknown";
}

std::string ActionResultName(ActionResult r) {
  switch (r) {
    case ActionResult::kPending:
      return "Pending";
    case ActionResult::kRunning:
      return "Running";
    case ActionResult::kSucceeded:
      return "Succeeded";
    case ActionResult::kFailed:
      return "Failed";
    case ActionResult::kSkipped:
      return "Skipped";
    case ActionResult::kRolledBack:
      return "RolledBack";
  }
  return "Unknown";
}

AssignmentPlan BuildPlan(const Application& app, const PlacementResult& result, int64_t revision) {
  AssignmentPlan plan{.application = app.name,
                      .revision = revision,
                      .phase = PlanPhase::kPlacing,
                      .unplaced = result.unplaced,
                      .channels = result.channels};
  for (const Workload& w : app.workloads) {
    auto it = result.placements.find(w.name);
    if (it == result.placements.end()) continue;
    WorkloadTarget t{.workload = w.name,
                     .service = w.service,
                     .cluster = it->second.cluster,
                     .node = it->second.node,
                     .pod = app.name + "-" + w.name,
                     .requests = w.requests};
    plan.actions.push_back(PlanAction{.index = static_cast<int>(plan.actions.size()),
                                      .type = ActionType::kCreatePod,
                                      .cluster = t.cluster,
                                      .workload = t.workload,
                                      .node = t.node,
                                      .pod = t.pod});
    plan.targets.push_back(std::move(t));
  }
  std::map<std::string, const Channel*> channels;
  for (const Channel& c : app.channels) channels[c.name] = &c;
  for (ChannelResult& ch : plan.channels) {
    auto c = channels.find(ch.channel);
    auto to = c == channels.end() ? result.placements.end() : result.placements.find(c->second->to);
    if (c != channels.end()) ch.service_class = c->second->service_class;
    if (to != result.placements.end()) {
      ch.target_endpoint =
          ChannelEndpoint(app.name + "-" + c->second->to, to->second.cluster, c->second->to_port);
    }
    plan.actions.push_back(PlanAction{.index = static_cast<int>(plan.actions.size()),
                                      .type = ActionType::kCreateChannel,
                                      .cluster = ch.path.front(),
                                      .channel = ch.channel});
  }
  return plan;
}

std::string ChannelEndpoint(const std::string& pod, const std::string& cluster, int port) {
  return absl::StrCat(pod, ".", cluster, ":", port > 0 ? port : 80);
}

std::string VirtualLinkRequestId(const std::string& application, int64_t revision,
                                 const std::string& channel) {
  return absl::StrCat(application, "/", revision, "/channel/", channel);
}

InMemoryPodRuntime::InMemoryPodRuntime(std::vector<Node> nodes) : nodes_(std::move(nodes)) {
  for (Node& n : nodes_) n.allocated = Resources{};
}

absl::StatusOr<std::vector<Node>> InMemoryPodRuntime::ListNodes() {
  absl::MutexLock lock(&mu_);
  return nodes_;
}

absl::StatusOr<std::vector<PodInfo>> InMemoryPodRuntime::ListPods() {
  absl::MutexLock lock(&mu_);
  std::vector<PodInfo> pods;
  for (const auto& [name, p] : pods_) pods.push_back(p);
  return pods;
}

absl::Status InMemoryPodRuntime::CreatePod(const PodInfo& pod) {
  absl::MutexLock lock(&mu_);
  if (pods_.count(pod.name)) return absl::AlreadyExistsError("pod " + pod.name + " exists");
  for (Node& n : nodes_) {
    if (n.name != pod.node) continue;
    if (!n.Free().Fits(pod.requests)) {
      return absl::ResourceExhaustedError("node " + n.name + " has no room for " + pod.name);
    }
    n.allocated += pod.requests;
    pods_[pod.name] = pod;
    return absl::OkStatus();
  }
  return absl::NotFoundError("no node " + pod.node);
}

absl::Status InMemoryPodRuntime::DeletePod(const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = pods_.find(name);
  if (it == pods_.end()) return absl::NotFoundError("no pod " + name);
  for (Node& n : nodes_) {
    if (n.name == it->second.node) n.allocated -= it->second.requests;
  }
  pods_.erase(it);
  return absl::OkStatus();
}

void ReservationLedger::ExpireLocked() {
  absl::Time now = clock_.Now();
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (!it->second.committed && it->second.deadline <= now) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

Resources ReservationLedger::Held(const std::string& node) {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  Resources held;
  for (const auto& [id, e] : entries_) {
    for (size_t i = 0; i < e.items.size(); ++i) {
      if (e.items[i].node == node && !e.seen[i]) held += e.items[i].requests;
    }
  }
  return held;
}

absl::Status ReservationLedger::Add(const std::string& id,
                                    const std::vector<ReservationItem>& items,
                                    absl::Duration lease) {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  if (entries_.count(id)) return absl::AlreadyExistsError("reservation " + id + " exists");
  entries_[id] = Entry{items, std::vector<bool>(items.size(), false), clock_.Now() + lease};
  return absl::OkStatus();
}

bool ReservationLedger::Contains(const std::string& id) {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  return entries_.count(id) > 0;
}

absl::StatusOr<std::vector<ReservationItem>> ReservationLedger::Items(const std::string& id) {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  auto it = entries_.find(id);
  if (it == entries_.end()) return absl::NotFoundError("no reservation " + id);
  return it->second.items;
}

bool ReservationLedger::IsCommitted(const std::string& id) {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  auto it = entries_.find(id);
  return it != entries_.end() && it->second.committed;
}

absl::Status ReservationLedger::MarkCommitted(const std::string& id) {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  auto it = entries_.find(id);
  if (it == entries_.end()) return absl::NotFoundError("no reservation " + id);
  it->second.committed = true;
  return absl::OkStatus();
}

void ReservationLedger::Remove(const std::string& id) {
  absl::MutexLock lock(&mu_);
  entries_.erase(id);
}

size_t ReservationLedger::RemoveItems(const std::string& id, const std::set<std::string>& pods) {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  auto it = entries_.find(id);
  if (it == entries_.end()) return 0;
  Entry& e = it->second;
  std::vector<ReservationItem> items;
  std::vector<bool> seen;
  for (size_t i = 0; i < e.items.size(); ++i) {
    if (pods.count(e.items[i].pod)) continue;
    items.push_back(std::move(e.items[i]));
    seen.push_back(e.seen[i]);
  }
  e.items = std::move(items);
  e.seen = std::move(seen);
  return e.items.size();
}

void ReservationLedger::ObservePods(const std::set<std::string>& pods) {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  for (auto& [id, e] : entries_) {
    if (!e.committed) continue;
    for (size_t i = 0; i < e.items.size(); ++i) {
      if (pods.count(e.items[i].pod)) e.seen[i] = true;
    }
  }
}

size_t ReservationLedger::size() {
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  size_t n = 0;
  for (const auto& [id, e] : entries_) {
    if (std::find(e.seen.begin(), e.seen.end(), false) != e.seen.end()) ++n;
  }
  return n;
}

LocalClusterExecutor::LocalClusterExecutor(const Clock& clock, PodRuntime& runtime)
    : runtime_(runtime), ledger_(clock) {}

absl::Status LocalClusterExecutor::Reserve(const std::string& id,
                                           const std::vector<ReservationItem>& items,
                                           absl::Duration lease) {
  absl::MutexLock lock(&mu_);
  if (ledger_.Contains(id)) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<Node> nodes, runtime_.ListNodes());
  std::map<std::string, Resources> want;
  for (const ReservationItem& item : items) want[item.node] += item.requests;
  for (const auto& [node_name, need] : want) {
    const Node* node = nullptr;
    for (const Node& n : nodes) {
      if (n.name == node_name) node = &n;
    }
    if (node == nullptr) return absl::FailedPreconditionError("no node " + node_name);
    Resources room = node->capacity - node->allocated - ledger_.Held(node_name);
    if (!node->schedulable || !room.Fits(need)) {
      return absl::FailedPreconditionError("node " + node_name + " has no room left");
    }
  }
  return ledger_.Add(id, items, lease);
}

absl::Status LocalClusterExecutor::Commit(const std::string& id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<ReservationItem>> items = ledger_.Items(id);
  if (!items.ok()) {
    return absl::FailedPreconditionError("reservation " + id + " expired or was released");
  }
  if (ledger_.IsCommitted(id)) return absl::OkStatus();
  for (const ReservationItem& item : *items) {
    absl::Status st = runtime_.CreatePod(PodInfo{item.pod, item.node, item.requests});
    if (!st.ok() && !absl::IsAlreadyExists(st)) {
      return absl::Status(st.code(), "creating pod " + item.pod + ": " + std::string(st.message()));
    }
  }
  return ledger_.MarkCommitted(id);
}

absl::Status LocalClusterExecutor::Release(const std::string& id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<ReservationItem>> items = ledger_.Items(id);
  if (!items.ok()) return absl::OkStatus();
  for (const ReservationItem& item : *items) {
    absl::Status st = runtime_.DeletePod(item.pod);
    if (!st.ok() && !absl::IsNotFound(st)) return st;
  }
  ledger_.Remove(id);
  return absl::OkStatus();
}

absl::Status LocalClusterExecutor::ReleasePods(const std::string& id,
                                              const std::vector<std::string>& pods) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<ReservationItem>> items = ledger_.Items(id);
  if (!items.ok()) return absl::OkStatus();
  const std::set<std::string> named(pods.begin(), pods.end());
  std::set<std::string> gone;
  absl::Status failed = absl::OkStatus();
  for (const ReservationItem& item : *items) {
    if (!named.count(item.pod)) continue;
    absl::Status st = runtime_.DeletePod(item.pod);
    if (!st.ok() && !absl::IsNotFound(st)) {
      failed = absl::Status(st.code(), "deleting pod " + item.pod + ": " + std::string(st.message()));
      break;
    }
    gone.insert(item.pod);
  }
  if (ledger_.RemoveItems(id, gone) == 0) ledger_.Remove(id);
  return failed;
}

absl::Status LocalClusterExecutor::Sync() {
  ASSIGN_OR_RETURN(std::vector<PodInfo> pods, runtime_.ListPods());
  std::set<std::string> names;
  for (const PodInfo& p : pods) names.insert(p.name);
  ledger_.ObservePods(names);
  return absl::OkStatus();
}

std::string ReservationId(const AssignmentPlan& plan, const std::string& cluster) {
  return absl::StrCat(plan.application, "/", plan.revision, "/", cluster);
}

PlanExecutor::PlanExecutor(std::map<std::string, ClusterExecutor*> clusters, absl::Duration lease)
    : clusters_(std::move(clusters)), lease_(lease) {}

absl::Status PlanExecutor::ReserveAll(AssignmentPlan& plan) {
  if (plan.phase != PlanPhase::kPlacing) {
    return absl::FailedPreconditionError("plan is " + PhaseName(plan.phase) + ", not Placing");
  }
  std::map<std::string, std::vector<ReservationItem>> by_cluster;
  for (const WorkloadTarget& t : plan.targets) {
    by_cluster[t.cluster].push_back(ReservationItem{t.pod, t.node, t.requests, t.workload});
  }
  for (const auto& [cluster, items] : by_cluster) {
    if (!clusters_.count(cluster)) {
      return absl::FailedPreconditionError("no executor for cluster " + cluster);
    }
  }
  plan.phase = PlanPhase::kReserving;
  if (observer_) {
    absl::Status written = observer_(plan);
    if (!written.ok()) {
      return absl::Status(written.code(),
                          "before reserving: " + std::string(written.message()));
    }
  }
  for (const auto& [cluster, items] : by_cluster) {
    touched_.push_back(cluster);
    absl::Status st = clusters_[cluster]->Reserve(ReservationId(plan, cluster), items, lease_);
    if (!st.ok()) {
      return absl::AbortedError("reserve in " + cluster + ": " + std::string(st.message()));
    }
  }
  return absl::OkStatus();
}

void PlanExecutor::RollBack(AssignmentPlan& plan, const std::string& why) {
  std::string release_errors;
  for (const std::string& id : created_links_) {
    absl::Status st = links_->Delete(id, links_deadline_);
    if (!st.ok()) {
      absl::StrAppend(&release_errors, "; deleting virtual link ", id,
                      " failed (the hub's reconciler deletes it): ", st.message());
    }
  }
  created_links_.clear();
  for (ChannelResult& ch : plan.channels) ch.virtual_link_id.clear();
  for (const std::string& cluster : touched_) {
    absl::Status st = clusters_[cluster]->Release(ReservationId(plan, cluster));
    if (!st.ok()) {
      absl::StrAppend(&release_errors, "; release in ", cluster,
                      " failed (lease will expire): ", st.message());
    }
  }
  for (PlanAction& a : plan.actions) {
    if (a.result == ActionResult::kSucceeded) {
      a.result = ActionResult::kRolledBack;
    } else if (a.result != ActionResult::kFailed) {
      a.result = ActionResult::kSkipped;
    }
  }
  plan.phase = PlanPhase::kRolledBack;
  plan.error = why + release_errors;
}

absl::Status PlanExecutor::Reserve(AssignmentPlan& plan) {
  absl::Status st = ReserveAll(plan);
  if (!st.ok() && plan.phase == PlanPhase::kReserving) RollBack(plan, std::string(st.message()));
  return st;
}

absl::Status PlanExecutor::Execute(AssignmentPlan& plan) {
  RETURN_IF_ERROR(Reserve(plan));
  return Commit(plan);
}

absl::Status PlanExecutor::Commit(AssignmentPlan& plan) {
  if (plan.phase != PlanPhase::kReserving) {
    return absl::FailedPreconditionError("plan is " + PhaseName(plan.phase) + ", not Reserving");
  }
  plan.phase = PlanPhase::kCommitting;
  if (observer_) {
    absl::Status written = observer_(plan);
    if (!written.ok()) {
      std::string why = "before committing: " + std::string(written.message());
      RollBack(plan, why);
      return absl::Status(written.code(), why);
    }
  }
  for (const std::string& cluster : touched_) {
    for (PlanAction& a : plan.actions) {
      if (a.type == ActionType::kCreatePod && a.cluster == cluster)
        a.result = ActionResult::kRunning;
    }
    absl::Status commit = clusters_[cluster]->Commit(ReservationId(plan, cluster));
    for (PlanAction& a : plan.actions) {
      if (a.type != ActionType::kCreatePod || a.cluster != cluster) continue;
      a.result = commit.ok() ? ActionResult::kSucceeded : ActionResult::kFailed;
      if (!commit.ok()) a.error = std::string(commit.message());
    }
    if (!commit.ok()) {
      std::string why = "commit in " + cluster + ": " + std::string(commit.message());
      RollBack(plan, why);
      return absl::AbortedError(why);
    }
  }
  if (absl::Status channels = CreateChannels(plan); !channels.ok()) {
    RollBack(plan, std::string(channels.message()));
    return absl::AbortedError(plan.error);
  }
  plan.phase = PlanPhase::kDone;
  return absl::OkStatus();
}

absl::Status PlanExecutor::CreateChannels(AssignmentPlan& plan) {
  std::map<std::string, ChannelResult*> by_name;
  for (ChannelResult& ch : plan.channels) by_name[ch.channel] = &ch;
  for (PlanAction& a : plan.actions) {
    if (a.type != ActionType::kCreateChannel) continue;
    auto it = by_name.find(a.channel);
    if (it == by_name.end()) continue;
    ChannelResult& ch = *it->second;
    // Channels inside one cluster need no virtual link.
    if (ch.path.size() < 2) {
      a.result = ActionResult::kSkipped;
      continue;
    }
    if (links_ == nullptr) {
      a.result = ActionResult::kSkipped;
      a.error = "no network manager (NetMA) is configured: no virtual link was set up";
      continue;
    }
    VirtualLinkSpec spec{.application = plan.application,
                         .channel = ch.channel,
                         .source_cluster = ch.path[0],
                         .target_cluster = ch.path[1],
                         .target_endpoint = ch.target_endpoint,
                         .neighborhood_id = neighborhood_id_,
                         .service_class = ch.service_class,
                         .min_bandwidth_bps = ch.min_bandwidth_bps,
                         .max_delay_ns = ch.max_delay_ns};
    a.result = ActionResult::kRunning;
    absl::StatusOr<std::string> id = links_->Create(
        spec, VirtualLinkRequestId(plan.application, plan.revision, ch.channel), links_deadline_);
    if (!id.ok()) {
      a.result = ActionResult::kFailed;
      a.error = std::string(id.status().message());
      return absl::Status(id.status().code(),
                          absl::StrCat("virtual link for channel ", ch.channel, " from ",
                                       ch.path[0], " to ", ch.path[1], ": ",
                                       id.status().message()));
    }
    created_links_.push_back(*id);
    ch.virtual_link_id = *id;
    a.result = ActionResult::kSucceeded;
  }
  return absl::OkStatus();
}

}  // namespace codeco::swm
