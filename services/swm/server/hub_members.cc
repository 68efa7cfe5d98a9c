#include "swm/server/hub_members.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "codeco/common/call_deadline.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/logging.h"
#include "codeco/common/status.h"
#include "swm/core/convert.h"

namespace codeco::swm {

namespace pb = codeco::swm::v1;

// A cluster the hub drives through its LMS: the pod templates of the plan's
// pods are registered with the LMS runtime for the placement's duration, and
// the cluster's long-lived LocalClusterExecutor (its ledger) does the work.
class LmsPlanExecutor final : public ClusterExecutor {
 public:
  LmsPlanExecutor(std::shared_ptr<LmsPodRuntime> runtime,
                  std::shared_ptr<LocalClusterExecutor> local, PodTemplates templates,
                  std::string request_prefix)
      : runtime_(std::move(runtime)), local_(std::move(local)), templates_(std::move(templates)) {
    for (const auto& [pod, pod_template] : templates_) {
      runtime_->SetPodTemplate(pod_template, absl::StrCat(request_prefix, pod));
    }
  }
  ~LmsPlanExecutor() override {
    for (const auto& [pod, pod_template] : templates_) runtime_->ClearPodTemplate(pod);
  }
  absl::Status Reserve(const std::string& reservation_id, const std::vector<ReservationItem>& items,
                       absl::Duration lease) override {
    return local_->Reserve(reservation_id, items, lease);
  }
  absl::Status Commit(const std::string& reservation_id) override {
    return local_->Commit(reservation_id);
  }
  absl::Status Release(const std::string& reservation_id) override {
    return local_->Release(reservation_id);
  }

 private:
  std::shared_ptr<LmsPodRuntime> runtime_;
  std::shared_ptr<LocalClusterExecutor> local_;
  PodTemplates templates_;
};

// The executors of one placement: pod templates from the application.
class HubExecutorFactory final : public ExecutorFactory {
 public:
  HubExecutorFactory(HubMemberPort& port, const codeco::acm::v1::Application& app)
      : port_(port), app_(app) {}
  absl::StatusOr<std::unique_ptr<ClusterExecutor>> ExecutorFor(const std::string& cluster,
                                                               const AssignmentPlan& plan,
                                                               absl::Time deadline) override {
    PodTemplates templates;
    for (const WorkloadTarget& t : plan.targets) {
      if (t.cluster == cluster) templates[t.pod] = PodTemplate(app_, t, plan.revision);
    }
    HubMemberPort::Rig rig;
    {
      absl::MutexLock lock(&port_.mu_);
      auto it = port_.rigs_.find(cluster);
      if (it == port_.rigs_.end()) {
        return absl::FailedPreconditionError("cluster " + cluster + " is not a connected member");
      }
      rig = it->second;
    }
    if (rig.mc != nullptr) {
      // The MC gets every pod's template in its ReserveRequest and creates
      // the pods itself on Commit.
      return std::unique_ptr<ClusterExecutor>(std::make_unique<RemoteClusterExecutor>(
          rig.mc, port_.options_.mc_timeout, std::move(templates),
          [&views = port_.views_, cluster](const pb::ViewVersion& version) {
            views.Saw(cluster, version);
          }));
    }
    rig.runtime->SetDeadline(deadline);
    return std::unique_ptr<ClusterExecutor>(std::make_unique<LmsPlanExecutor>(
        rig.runtime, rig.local, std::move(templates),
        absl::StrCat("swm/", plan.application, "/", plan.revision, "/")));
  }

 private:
  HubMemberPort& port_;
  const codeco::acm::v1::Application& app_;
};

HubMemberPort::HubMemberPort(PlanStore& plans, const Clock& clock, PeerChannels& channels,
                             PeerChannels* mc_channels, std::shared_ptr<ClusterDirectory> directory,
                             HubMemberOptions options)
    : plans_(plans),
      clock_(clock),
      channels_(channels),
      mc_channels_(mc_channels != nullptr ? *mc_channels : channels),
      directory_(std::move(directory)),
      options_(std::move(options)),
      views_(options_.views) {}

std::unique_ptr<ExecutorFactory> HubMemberPort::ExecutorsFor(
    const codeco::acm::v1::Application& app) {
  return std::make_unique<HubExecutorFactory>(*this, app);
}

void HubMemberPort::ClearDeadlines() {
  absl::MutexLock lock(&mu_);
  for (auto& [name, rig] : rigs_) {
    if (rig.runtime != nullptr) rig.runtime->SetDeadline(absl::InfiniteFuture());
  }
}

absl::StatusOr<HubMemberPort::Rig*> HubMemberPort::RigForLms(const std::string& cluster,
                                                             const std::string& lms) {
  auto it = rigs_.find(cluster);
  if (it != rigs_.end() && it->second.mc == nullptr && it->second.lms == lms) return &it->second;
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, channels_.Get(lms));
  Rig rig;
  rig.lms = lms;
  rig.runtime = std::make_shared<LmsPodRuntime>(
      std::move(channel),
      LmsPodRuntimeOptions{.cluster = cluster, .call_timeout = options_.lms_timeout});
  rig.local = std::make_shared<LocalClusterExecutor>(clock_, *rig.runtime);
  Rig& stored = rigs_[cluster];
  stored = std::move(rig);
  // Remembered so that a restarted hub can still remove what it placed there.
  absl::StatusOr<std::optional<std::string>> saved = plans_.LmsEndpoint(cluster);
  if (!saved.ok() || saved->value_or("") != lms) {
    absl::Status st = plans_.SaveLmsEndpoint(cluster, lms);
    if (!st.ok()) {
      log::Warn("cannot remember a cluster's LMS endpoint",
                {{"cluster", cluster}, {"error", std::string(st.message())}});
    }
  }
  return &stored;
}

absl::StatusOr<HubMemberPort::Rig*> HubMemberPort::RigForMc(const std::string& cluster,
                                                            const std::string& swm) {
  auto it = rigs_.find(cluster);
  if (it != rigs_.end() && it->second.mc_address == swm) return &it->second;
  Rig rig;
  rig.mc_address = swm;
  ASSIGN_OR_RETURN(rig.mc, mc_channels_.Get(swm));
  views_.Watch(cluster, swm, rig.mc);
  Rig& stored = rigs_[cluster];
  stored = std::move(rig);
  absl::StatusOr<std::optional<std::string>> saved = plans_.SwmEndpoint(cluster);
  if (!saved.ok() || saved->value_or("") != swm) {
    absl::Status st = plans_.SaveSwmEndpoint(cluster, swm);
    if (!st.ok()) {
      log::Warn("cannot remember a cluster's swm endpoint",
                {{"cluster", cluster}, {"error", std::string(st.message())}});
    }
  }
  return &stored;
}

absl::StatusOr<HubMemberPort::Rig*> HubMemberPort::RigForKnown(const std::string& cluster) {
  if (auto it = rigs_.find(cluster); it != rigs_.end()) return &it->second;
  ASSIGN_OR_RETURN(std::optional<std::string> swm, plans_.SwmEndpoint(cluster));
  if (!swm.has_value()) {
    if (auto mc = options_.cluster_endpoints.find(cluster);
        mc != options_.cluster_endpoints.end()) {
      swm = mc->second;
    }
  }
  if (swm.has_value() && !swm->empty()) return RigForMc(cluster, *swm);
  std::string lms;
  if (directory_ != nullptr) {
    absl::StatusOr<std::vector<ClusterEndpoint>> listed = directory_->ListClusters();
    if (listed.ok()) {
      for (const ClusterEndpoint& c : *listed) {
        if (c.name == cluster) lms = c.lms;
      }
    }
  }
  if (lms.empty()) {
    ASSIGN_OR_RETURN(std::optional<std::string> saved, plans_.LmsEndpoint(cluster));
    lms = saved.value_or("");
  }
  if (lms.empty()) return absl::UnavailableError("no LMS endpoint known for cluster " + cluster);
  return RigForLms(cluster, lms);
}

absl::Status HubMemberPort::Connect(const std::vector<MemberRef>& members, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  // How each member is reached: through its MC swm (the neighborhood's
  // endpoints["swm"], which ACM copies from its registry, else
  // swm.cluster_endpoints), or, for a cluster without one, through its LMS
  // (endpoints["lms"], else the testbed directory).
  std::map<std::string, ClusterEndpoint> known;
  bool need_directory = false;
  for (const MemberRef& member : members) {
    if (!member.endpoints.count("swm") && !options_.cluster_endpoints.count(member.cluster)) {
      need_directory = true;
    }
  }
  if (directory_ != nullptr && need_directory) {
    absl::StatusOr<std::vector<ClusterEndpoint>> listed = directory_->ListClusters();
    if (!listed.ok()) {
      return absl::UnavailableError("cluster directory: " + std::string(listed.status().message()));
    }
    for (ClusterEndpoint& c : *listed) known[c.name] = std::move(c);
  }
  for (size_t i = 0; i < members.size(); ++i) {
    const std::string& name = members[i].cluster;
    std::string swm;
    std::string lms = known.count(name) ? known[name].lms : "";
    if (auto it = members[i].endpoints.find("swm"); it != members[i].endpoints.end()) {
      swm = it->second;
    } else if (auto mc = options_.cluster_endpoints.find(name);
               mc != options_.cluster_endpoints.end()) {
      swm = mc->second;
    }
    if (auto it = members[i].endpoints.find("lms"); it != members[i].endpoints.end()) {
      lms = it->second;
    }
    if (swm.empty() && lms.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "neighborhood.members[", i, "].endpoints: no swm or LMS endpoint known for cluster ",
          name, (known.count(name) ? " (it has no nodes)" : " (unknown cluster)")));
    }
    absl::StatusOr<Rig*> rig = swm.empty() ? RigForLms(name, lms) : RigForMc(name, swm);
    if (!rig.ok()) {
      return absl::Status(rig.status().code(),
                          absl::StrCat("cluster ", name, ": ", rig.status().message()));
    }
    if ((*rig)->runtime != nullptr) (*rig)->runtime->SetDeadline(deadline);
    if (known.count(name)) {
      directory_labels_[name] = known[name].labels;
    } else {
      directory_labels_.erase(name);
    }
  }
  return absl::OkStatus();
}

std::vector<absl::StatusOr<MemberView>> HubMemberPort::ReadMembers(
    const std::vector<std::string>& clusters, absl::Time deadline) {
  return Read(clusters, deadline, /*watched=*/true);
}

std::vector<absl::StatusOr<MemberView>> HubMemberPort::ProbeMembers(
    const std::vector<std::string>& clusters, absl::Time deadline) {
  return Read(clusters, deadline, /*watched=*/false);
}

std::vector<absl::StatusOr<MemberView>> HubMemberPort::Read(const std::vector<std::string>& clusters,
                                                            absl::Time deadline, bool watched) {
  struct Read {
    std::optional<Rig> rig;
    std::string name;
    std::optional<ClusterLabels> labels;
    absl::StatusOr<std::vector<Node>> nodes = absl::UnknownError("not read");
    bool solves_own_l2 = false;  // an MC swm's view asked for SolveCluster
  };
  std::vector<Read> reads(clusters.size());
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < clusters.size(); ++i) {
      reads[i].name = clusters[i];
      auto it = rigs_.find(clusters[i]);
      if (it == rigs_.end()) {
        reads[i].nodes = absl::FailedPreconditionError("not a connected member");
        continue;
      }
      reads[i].rig = it->second;
      if (auto l = directory_labels_.find(clusters[i]); l != directory_labels_.end()) {
        reads[i].labels = l->second;
      }
    }
  }
  // Concurrently (a few at a time): a member with an swm through its
  // GetClusterView, the others through their LMS.
  const absl::Duration mc_timeout = options_.mc_timeout;
  auto read_one = [this, mc_timeout, deadline, watched](Read& read) {
    if (!read.rig.has_value()) return;
    if (read.rig->mc != nullptr) {
      // The watched copy once it counts the hub's own last change there;
      // else (stream down or late, or a probe) the member's GetClusterView.
      std::optional<McView> copy =
          watched ? views_.Fresh(read.name, deadline) : std::optional<McView>();
      absl::StatusOr<McView> view =
          copy.has_value() ? absl::StatusOr<McView>(std::move(*copy))
                           : ReadClusterView(read.rig->mc, read.name, mc_timeout, deadline);
      if (view.ok()) {
        read.nodes = std::move(view->nodes);
        read.solves_own_l2 = view->solves_own_l2;
      } else {
        read.nodes = view.status();
      }
    } else {
      read.nodes = read.rig->runtime->ListNodes();
    }
  };
  // A watched member that is fresh already costs no call: taken here, the
  // others read on the pool.
  std::vector<Read*> remote;
  for (Read& read : reads) {
    if (watched && read.rig.has_value() && read.rig->mc != nullptr) {
      std::optional<McView> copy = views_.Fresh(read.name, /*until=*/absl::InfinitePast());
      if (copy.has_value()) {
        read.nodes = std::move(copy->nodes);
        read.solves_own_l2 = copy->solves_own_l2;
        continue;
      }
    }
    remote.push_back(&read);
  }
  absl::BlockingCounter done(static_cast<int>(remote.size()));
  for (Read* pending : remote) {
    Read& read = *pending;
    bool queued = readers_.Submit([&read, &done, &read_one] {
      read_one(read);
      done.DecrementCount();
    });
    if (!queued) {
      read_one(read);
      done.DecrementCount();
    }
  }
  done.Wait();
  {
    // Which members solve their own L2, as their views just said.
    absl::MutexLock lock(&mu_);
    for (const Read& read : reads) {
      if (read.nodes.ok()) solves_own_l2_[read.name] = read.solves_own_l2;
    }
  }
  std::vector<absl::StatusOr<MemberView>> out;
  out.reserve(reads.size());
  for (Read& read : reads) {
    if (!read.nodes.ok()) {
      out.push_back(read.nodes.status());
      continue;
    }
    // A member's labels: the directory's (testbed), else its nodes' own.
    ClusterLabels labels = read.labels.has_value() ? *read.labels : LabelsFromNodes(*read.nodes);
    out.push_back(MemberView{.labels = std::move(labels), .nodes = std::move(*read.nodes)});
  }
  return out;
}

std::unique_ptr<L2Solver> HubMemberPort::SolverFor(const std::vector<std::string>& neighborhood,
                                                   L2Solver& local) {
  absl::MutexLock lock(&mu_);
  // An MC member's L2 is solved here, on the view just read, with the same
  // node-level framework its swm runs (its Reserve re-checks every node);
  // only a member whose view asks for it (an L2 set on that swm) or that
  // the hub has not read yet is asked with SolveCluster.
  std::map<std::string, std::shared_ptr<grpc::Channel>> mcs;
  for (const std::string& name : neighborhood) {
    auto it = rigs_.find(name);
    if (it == rigs_.end() || it->second.mc == nullptr) continue;
    auto own = solves_own_l2_.find(name);
    if (options_.member_l2 == MemberL2::kMember || own == solves_own_l2_.end() || own->second) {
      mcs[name] = it->second.mc;
    }
  }
  return std::make_unique<RemoteL2Solver>(std::move(mcs), local, options_.mc_timeout);
}

absl::StatusOr<HubMemberPort::Rig> HubMemberPort::KnownRig(const std::string& cluster) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Rig * rig, RigForKnown(cluster));
  return *rig;
}

absl::StatusOr<std::vector<pb::LocalDecision>> HubMemberPort::Unsettled(const std::string& cluster,
                                                                        absl::Time deadline) {
  ASSIGN_OR_RETURN(Rig rig, KnownRig(cluster));
  std::vector<pb::LocalDecision> out;
  if (rig.mc == nullptr) return out;  // the hub drives its LMS: nothing is decided there
  std::unique_ptr<pb::SwmService::Stub> stub = pb::SwmService::NewStub(rig.mc);
  pb::ListLocalDecisionsRequest request;
  request.set_cluster(cluster);
  do {
    pb::ListLocalDecisionsResponse response;
    absl::Status st = FromGrpcStatus(stub->ListLocalDecisions(
        OutgoingContext(options_.mc_timeout, deadline).get(), request, &response));
    if (!st.ok()) {
      return absl::Status(st.code(), absl::StrCat("swm of cluster ", cluster,
                                                  ": ListLocalDecisions: ", st.message()));
    }
    for (pb::LocalDecision& d : *response.mutable_decisions()) out.push_back(std::move(d));
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  return out;
}

absl::Status HubMemberPort::Settle(const std::string& cluster,
                                   const std::vector<pb::LocalDecisionVerdict>& verdicts,
                                   absl::Time deadline) {
  ASSIGN_OR_RETURN(Rig rig, KnownRig(cluster));
  if (rig.mc == nullptr || verdicts.empty()) return absl::OkStatus();
  std::unique_ptr<pb::SwmService::Stub> stub = pb::SwmService::NewStub(rig.mc);
  constexpr size_t kPerCall = 1000;  // the member's limit
  for (size_t from = 0; from < verdicts.size(); from += kPerCall) {
    pb::SettleLocalDecisionsRequest request;
    request.set_cluster(cluster);
    for (size_t i = from; i < verdicts.size() && i < from + kPerCall; ++i) {
      *request.add_verdicts() = verdicts[i];
    }
    pb::SettleLocalDecisionsResponse response;
    absl::Status st = FromGrpcStatus(stub->SettleLocalDecisions(
        OutgoingContext(options_.mc_timeout, deadline).get(), request, &response));
    if (!st.ok()) {
      return absl::Status(st.code(), absl::StrCat("swm of cluster ", cluster,
                                                  ": SettleLocalDecisions: ", st.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status HubMemberPort::Commit(const std::string& cluster, const std::string& reservation_id,
                                   absl::Time deadline) {
  ASSIGN_OR_RETURN(Rig rig, KnownRig(cluster));
  if (rig.mc != nullptr) {
    RemoteClusterExecutor remote(
        rig.mc, options_.mc_timeout, {},
        [this, cluster](const pb::ViewVersion& version) { views_.Saw(cluster, version); });
    return remote.Commit(reservation_id);
  }
  rig.runtime->SetDeadline(deadline);
  absl::Status st = rig.local->Commit(reservation_id);
  rig.runtime->SetDeadline(absl::InfiniteFuture());
  return st;
}

std::map<std::string, absl::Status> HubMemberPort::RemovePods(const std::string& cluster,
                                                              const std::string& reservation_id,
                                                              const std::vector<std::string>& pods,
                                                              const std::string& reason,
                                                              absl::Time deadline) {
  std::map<std::string, absl::Status> out;
  // Nothing to remove (and an empty list would mean every pod to an MC).
  if (pods.empty()) return out;
  absl::StatusOr<Rig> rig = KnownRig(cluster);
  if (!rig.ok()) {
    for (const std::string& pod : pods) out.emplace(pod, rig.status());
    return out;
  }
  if (rig->mc != nullptr) {
    // The cluster's own swm deletes these pods of the reservation, drops
    // their items (releasing the reservation once none is left: a removal
    // naming all its pods) and says which it deleted.
    RemoteClusterExecutor remote(
        rig->mc, options_.mc_timeout, {},
        [this, cluster](const pb::ViewVersion& version) { views_.Saw(cluster, version); });
    absl::StatusOr<std::optional<pb::Reservation>> report =
        remote.ReleaseReporting(reservation_id, reason, pods);
    std::set<std::string> deleted;
    if (report.ok() && report->has_value()) {
      deleted.insert((*report)->deleted_pods().begin(), (*report)->deleted_pods().end());
    }
    for (const std::string& pod : pods) {
      if (!report.ok()) {
        out.emplace(pod, absl::Status(report.status().code(),
                                      absl::StrCat("swm of cluster ", cluster,
                                                   ": Release: ", report.status().message())));
      } else if (deleted.count(pod)) {
        out.emplace(pod, absl::OkStatus());
      } else {
        out.emplace(pod, absl::NotFoundError("already gone"));
      }
    }
    return out;
  }
  // A cluster the hub drives: delete the pods through its LMS, then drop
  // the gone ones from the reservation (nothing is held for them), which
  // is forgotten once none of its pods is left.
  rig->runtime->SetDeadline(deadline);
  std::vector<std::string> gone;
  for (const std::string& pod : pods) {
    absl::Status deleted = rig->runtime->DeletePod(pod);
    if (deleted.ok() || absl::IsNotFound(deleted)) gone.push_back(pod);
    out.emplace(pod, deleted);
  }
  if (!gone.empty()) {
    absl::Status released = rig->local->ReleasePods(reservation_id, gone);
    if (!released.ok()) {
      log::Warn("cannot drop removed pods from their reservation",
                {{"cluster", cluster},
                 {"reservation", reservation_id},
                 {"error", std::string(released.message())}});
    }
  }
  rig->runtime->SetDeadline(absl::InfiniteFuture());
  return out;
}

void HubMemberPort::Touched(const std::vector<std::string>& clusters) {
  std::vector<std::pair<std::string, std::shared_ptr<LocalClusterExecutor>>> locals;
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& name : clusters) {
      auto it = rigs_.find(name);
      if (it == rigs_.end() || it->second.local == nullptr) continue;  // an MC watches its pods
      locals.emplace_back(name, it->second.local);
    }
  }
  for (const auto& [name, local] : locals) {
    absl::Status synced = local->Sync();
    if (!synced.ok()) {
      log::Warn("cannot read pods after a plan",
                {{"cluster", name}, {"error", std::string(synced.message())}});
    }
  }
}

std::vector<std::string> HubMemberPort::KnownClusters() {
  std::set<std::string> names;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, rig] : rigs_) names.insert(name);
  }
  absl::StatusOr<std::vector<std::string>> saved = plans_.LmsClusters();
  if (saved.ok()) names.insert(saved->begin(), saved->end());
  if (directory_ != nullptr) {
    absl::StatusOr<std::vector<ClusterEndpoint>> listed = directory_->ListClusters();
    if (listed.ok()) {
      for (const ClusterEndpoint& c : *listed) {
        if (!c.lms.empty()) names.insert(c.name);
      }
    }
  }
  return std::vector<std::string>(names.begin(), names.end());
}

absl::StatusOr<std::vector<LabelledPod>> HubMemberPort::ListLabelledPods(const std::string& cluster,
                                                                         absl::Time deadline) {
  ASSIGN_OR_RETURN(Rig rig, KnownRig(cluster));
  if (rig.mc != nullptr) {
    return absl::UnimplementedError("cluster " + cluster + " keeps its pods through its own swm");
  }
  rig.runtime->SetDeadline(deadline);
  absl::StatusOr<std::vector<codeco::lms::v1::Pod>> pods = rig.runtime->ListPodsLabelled("", "");
  rig.runtime->SetDeadline(absl::InfiniteFuture());
  if (!pods.ok()) return pods.status();
  std::vector<LabelledPod> out;
  for (const codeco::lms::v1::Pod& p : *pods) {
    auto reservation = p.labels().find(kReservationLabel);
    if (reservation == p.labels().end()) continue;
    auto plan = p.labels().find(kPlanLabel);
    out.push_back(LabelledPod{.name = p.name(),
                              .plan = plan == p.labels().end() ? "" : plan->second,
                              .reservation = reservation->second});
  }
  return out;
}

absl::Status HubMemberPort::DeletePod(const std::string& cluster, const LabelledPod& pod,
                                      absl::Time deadline) {
  ASSIGN_OR_RETURN(Rig rig, KnownRig(cluster));
  if (rig.mc != nullptr) {
    return absl::UnimplementedError("cluster " + cluster + " keeps its pods through its own swm");
  }
  rig.runtime->SetDeadline(deadline);
  absl::Status st = rig.runtime->DeletePod(pod.name);
  rig.runtime->SetDeadline(absl::InfiniteFuture());
  return st;
}

}  // namespace codeco::swm
