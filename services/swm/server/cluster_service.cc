#include "swm/server/cluster_service.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "codeco/common/grpc_status.h"
#include "codeco/common/logging.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/serve_on_executor.h"
#include "codeco/common/status.h"
#include "codeco/common/watch_stream.h"
#include "swm/server/remote_cluster.h"

namespace codeco::swm {
namespace {

namespace pb = codeco::swm::v1;

// One WatchClusterView stream: the newest view whenever the feed publishes
// one, in pages of at most kViewPage nodes.
constexpr int kViewPage = 500;

class ClusterViewWatch final : public WatchStream<pb::WatchClusterViewResponse> {
 public:
  // Streams `feed`'s views, or ends at once with `refused` when it is not OK.
  ClusterViewWatch(ClusterViewFeed& feed, std::string cluster, bool solves_own_l2,
                   std::atomic<int>& watchers, int max_watchers, const absl::Status& refused)
      : feed_(feed),
        cluster_(std::move(cluster)),
        solves_own_l2_(solves_own_l2),
        watchers_(watchers) {
    if (!refused.ok()) {
      Fail(ToGrpcStatus(refused));
      return;
    }
    if (watchers_.fetch_add(1) >= max_watchers) {
      watchers_.fetch_sub(1);
      Fail(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "too many WatchClusterView streams open; retry later"));
      return;
    }
    counted_ = true;
    handle_ = feed_.Subscribe([this] { Poke(); });
    Start();
  }

 private:
  absl::StatusOr<Batch> Next() override {
    Batch batch;
    std::shared_ptr<const ClusterViewSnapshot> view = feed_.Current();
    if (view == nullptr) return batch;
    if (sent_ && view->version.incarnation() == last_.incarnation() &&
        view->version.revision() == last_.revision()) {
      return batch;
    }
    size_t i = 0;
    do {
      pb::WatchClusterViewResponse page;
      page.set_cluster(cluster_);
      *page.mutable_view_version() = view->version;
      for (int n = 0; i < view->nodes.size() && n < kViewPage; ++i, ++n) {
        *page.add_nodes() = view->nodes[i];
      }
      page.set_last_page(i == view->nodes.size());
      page.set_solves_own_l2(solves_own_l2_);
      batch.messages.push_back(std::move(page));
    } while (i < view->nodes.size());
    last_ = view->version;
    sent_ = true;
    return batch;
  }
  void Closed() override {
    if (!counted_) return;
    feed_.Unsubscribe(handle_);
    watchers_.fetch_sub(1);
  }

  ClusterViewFeed& feed_;
  const std::string cluster_;
  const bool solves_own_l2_;
  std::atomic<int>& watchers_;
  bool counted_ = false;
  int handle_ = 0;
  pb::ViewVersion last_;  // under the stream's lock (Next runs under it)
  bool sent_ = false;
};

}  // namespace

SwmClusterServiceImpl::SwmClusterServiceImpl(KvStore& store, const Clock& clock,
                                             std::unique_ptr<LmsPodRuntime> lms,
                                             ClusterServiceOptions options)
    : clock_(clock),
      lms_(std::move(lms)),
      options_(std::move(options)),
      reservations_(store, clock, *lms_,
                    [this] {
                      ClusterReservationsOptions r = options_.reservations;
                      r.cluster = options_.cluster;
                      return r;
                    }()),
      view_feed_(reservations_, clock, options_.view_feed),
      registry_(NewDefaultRegistry()),
      own_l2_(options_.exact_l2.max_nodes > 0
                  ? std::unique_ptr<L2Solver>(std::make_unique<milp::ExactL2Solver>(
                        registry_, options_.recommendations.get(), options_.exact_l2))
                  : std::make_unique<InProcessL2Solver>(registry_, options_.recommendations.get())),
      local_(clock, options_.local),
      executor_(options_.threads, options_.max_queued) {
  if (options_.local_interval > absl::ZeroDuration()) {
    local_thread_ = std::thread([this] { LocalLoop(); });
  }
}

SwmClusterServiceImpl::~SwmClusterServiceImpl() {
  stop_local_.Notify();
  if (local_thread_.joinable()) local_thread_.join();
}

std::string SwmClusterServiceImpl::NotServed(const std::string& asked) const {
  return absl::StrCat("this swm serves cluster \"", options_.cluster, "\", not \"", asked, "\"");
}

void SwmClusterServiceImpl::HubSeen() {
  absl::MutexLock lock(&local_mu_);
  local_.HubSeen();
}

void SwmClusterServiceImpl::LocalLoop() {
  while (!stop_local_.WaitForNotificationWithTimeout(options_.local_interval)) {
    // Probes are on the wall clock (gRPC deadlines); a slow hub gets at
    // most one interval, so the loop keeps its pace.
    if (options_.probe_hub &&
        options_.probe_hub(absl::Now() + std::min(options_.local_interval, absl::Seconds(5)))) {
      HubSeen();
    }
    absl::StatusOr<std::vector<pb::LocalDecision>> made = LocalPass();
    if (!made.ok()) {
      log::Warn("local pass failed",
                {{"cluster", options_.cluster}, {"error", std::string(made.status().message())}});
    }
  }
}

absl::StatusOr<std::vector<pb::LocalDecision>> SwmClusterServiceImpl::LocalPass() {
  std::vector<pb::LocalDecision> made;
  ASSIGN_OR_RETURN(int finished, reservations_.FinishLocalMoves());
  if (finished > 0) view_feed_.Changed();
  ASSIGN_OR_RETURN(std::vector<Node> nodes, reservations_.NodesWithHolds());
  ASSIGN_OR_RETURN(std::vector<LocalPod> pods, reservations_.CommittedPods());
  std::vector<LocalMove> moves;
  {
    absl::MutexLock lock(&local_mu_);
    moves = local_.Decide(nodes, pods);
    // A pod no longer held is logged again if it is held again.
    std::set<std::string> still;
    for (const LocalMove& m : moves) {
      if (m.to_node.empty()) still.insert(m.pod.pod + "@" + m.pod.node);
    }
    for (auto it = held_logged_.begin(); it != held_logged_.end();) {
      it = still.count(*it) ? std::next(it) : held_logged_.erase(it);
    }
    for (const LocalMove& m : moves) {
      if (!m.to_node.empty() || !held_logged_.insert(m.pod.pod + "@" + m.pod.node).second) continue;
      log::Warn("pod held on a failed node while the hub is away",
                {{"cluster", options_.cluster}, {"pod", m.pod.pod}, {"reason", m.reason}});
    }
  }
  absl::Status first = absl::OkStatus();
  for (const LocalMove& m : moves) {
    if (m.to_node.empty()) continue;
    absl::StatusOr<pb::LocalDecision> d = reservations_.MoveLocally(m);
    if (!d.ok()) {
      // The others still move; a decision left MOVING is finished next pass.
      if (first.ok()) first = d.status();
      continue;
    }
    log::Info("moved a pod on the cluster's own while the hub is away", {{"decision", d->id()},
                                                                         {"pod", d->pod()},
                                                                         {"from", d->from_node()},
                                                                         {"to", d->to_node()},
                                                                         {"reason", d->reason()}});
    made.push_back(*std::move(d));
  }
  if (!made.empty()) view_feed_.Changed();
  RETURN_IF_ERROR(first);
  return made;
}

absl::StatusOr<pb::ListLocalDecisionsResponse> SwmClusterServiceImpl::ListDecisions(
    const pb::ListLocalDecisionsRequest& request) {
  FieldErrors errors;
  if (request.cluster() != options_.cluster) {
    errors.Add("cluster", NotServed(request.cluster()));
  }
  if (request.page_size() < 0) errors.Add("page_size", "must not be negative");
  int64_t after = 0;
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &after) || after <= 0)) {
    errors.Add("page_token", "is not a token this service handed out");
  }
  RETURN_IF_ERROR(errors.ToStatus());
  const int page = request.page_size() == 0 ? 500 : std::min(request.page_size(), 500);
  ASSIGN_OR_RETURN(std::vector<pb::LocalDecision> decisions,
                   reservations_.LocalDecisions(request.include_settled(), after, page + 1));
  pb::ListLocalDecisionsResponse response;
  for (int i = 0; i < static_cast<int>(decisions.size()) && i < page; ++i) {
    *response.add_decisions() = std::move(decisions[i]);
  }
  if (static_cast<int>(decisions.size()) > page) {
    const std::string& last = response.decisions(page - 1).id();
    response.set_next_page_token(last.substr(last.rfind('/') + 1));
  }
  absl::MutexLock lock(&local_mu_);
  response.set_hub_away(local_.HubAway());
  *response.mutable_hub_last_seen() = ToProtoTimestamp(local_.hub_last_seen());
  return response;
}

grpc::ServerUnaryReactor* SwmClusterServiceImpl::ListLocalDecisions(
    grpc::CallbackServerContext* context, const pb::ListLocalDecisionsRequest* request,
    pb::ListLocalDecisionsResponse* response) {
  return Run(context, [this, request, response] {
    absl::StatusOr<pb::ListLocalDecisionsResponse> listed = ListDecisions(*request);
    if (listed.ok()) *response = std::move(*listed);
    return listed.status();
  });
}

grpc::ServerUnaryReactor* SwmClusterServiceImpl::SettleLocalDecisions(
    grpc::CallbackServerContext* context, const pb::SettleLocalDecisionsRequest* request,
    pb::SettleLocalDecisionsResponse* response) {
  return Run(context, [this, request, response] {
    FieldErrors errors;
    if (request->cluster() != options_.cluster) {
      errors.Add("cluster", NotServed(request->cluster()));
    }
    if (request->verdicts_size() > 1000) errors.Add("verdicts", "at most 1000 per call");
    RETURN_IF_ERROR(errors.ToStatus());
    absl::StatusOr<std::vector<pb::LocalDecision>> settled = reservations_.SettleLocalDecisions(
        {request->verdicts().begin(), request->verdicts().end()});
    if (!settled.ok()) return settled.status();
    for (pb::LocalDecision& d : *settled) *response->add_decisions() = std::move(d);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* SwmClusterServiceImpl::Run(grpc::CallbackServerContext* context,
                                                     std::function<absl::Status()> work) {
  // Only the hub's swm may call this service (authz.cc): a call is an answer.
  HubSeen();
  return ServeOnExecutor(executor_, context,
                         [work = std::move(work)](absl::Time) { return work(); });
}

absl::StatusOr<pb::SolveClusterResponse> SwmClusterServiceImpl::Solve(
    const pb::SolveClusterRequest& request) {
  const absl::Time start = clock_.Now();
  if (request.cluster() != options_.cluster) {
    return InvalidFieldError("cluster", "this swm solves for cluster \"" + options_.cluster +
                                            "\", not \"" + request.cluster() + "\"");
  }
  ASSIGN_OR_RETURN(std::vector<Node> nodes, reservations_.NodesWithHolds());
  ASSIGN_OR_RETURN(
      std::unique_ptr<McSolve> solve,
      FromSolveClusterRequest(request, Cluster{.name = options_.cluster, .nodes = nodes},
                              options_.intra_cluster_latency_ns));
  absl::StatusOr<L2Result> result;
  if (options_.l2 != nullptr) {
    result = options_.l2->Solve(solve->request);
  } else {
    absl::MutexLock lock(&l2_mu_);
    result = own_l2_->Solve(solve->request);
  }
  if (!result.ok()) return result.status();
  pb::SolveClusterResponse response = ToSolveClusterResponse(*solve, *result);
  response.set_solve_duration_ns(absl::ToInt64Nanoseconds(clock_.Now() - start));
  return response;
}

grpc::ServerUnaryReactor* SwmClusterServiceImpl::SolveCluster(
    grpc::CallbackServerContext* context, const pb::SolveClusterRequest* request,
    pb::SolveClusterResponse* response) {
  return Run(context, [this, request, response] {
    absl::StatusOr<pb::SolveClusterResponse> solved = Solve(*request);
    if (solved.ok()) *response = std::move(*solved);
    return solved.status();
  });
}

grpc::ServerUnaryReactor* SwmClusterServiceImpl::Reserve(grpc::CallbackServerContext* context,
                                                         const pb::ReserveRequest* request,
                                                         pb::ReserveResponse* response) {
  return Run(context, [this, request, response] {
    absl::StatusOr<pb::Reservation> r = reservations_.Reserve(*request);
    if (r.ok()) *response->mutable_reservation() = std::move(*r);
    *response->mutable_view_version() = view_feed_.Changed();
    return r.status();
  });
}

grpc::ServerUnaryReactor* SwmClusterServiceImpl::Commit(grpc::CallbackServerContext* context,
                                                        const pb::CommitRequest* request,
                                                        pb::CommitResponse* response) {
  return Run(context, [this, request, response] {
    absl::StatusOr<pb::Reservation> r = reservations_.Commit(request->reservation_id());
    if (r.ok()) *response->mutable_reservation() = std::move(*r);
    *response->mutable_view_version() = view_feed_.Changed();
    return r.status();
  });
}

grpc::ServerUnaryReactor* SwmClusterServiceImpl::Release(grpc::CallbackServerContext* context,
                                                         const pb::ReleaseRequest* request,
                                                         pb::ReleaseResponse* response) {
  return Run(context, [this, request, response] {
    FieldErrors errors;
    for (int i = 0; i < request->pods_size(); ++i) {
      if (request->pods(i).empty()) errors.Add(absl::StrCat("pods[", i, "]"), "must not be empty");
    }
    RETURN_IF_ERROR(errors.ToStatus());
    absl::StatusOr<std::optional<pb::Reservation>> r = reservations_.Release(
        request->reservation_id(), {request->pods().begin(), request->pods().end()});
    if (r.ok() && r->has_value()) *response->mutable_reservation() = std::move(**r);
    *response->mutable_view_version() = view_feed_.Changed();
    return r.status();
  });
}

absl::StatusOr<pb::GetClusterViewResponse> SwmClusterServiceImpl::View(
    const pb::GetClusterViewRequest& request) {
  FieldErrors errors;
  if (request.cluster() != options_.cluster) {
    errors.Add("cluster", NotServed(request.cluster()));
  }
  if (request.page_size() < 0) errors.Add("page_size", "must not be negative");
  RETURN_IF_ERROR(errors.ToStatus());
  // Taken before the read: every change counted in it is in the nodes.
  const pb::ViewVersion view_version = view_feed_.Version();
  ASSIGN_OR_RETURN(std::vector<Node> nodes, reservations_.NodesWithHolds());
  std::sort(nodes.begin(), nodes.end(),
            [](const Node& a, const Node& b) { return a.name < b.name; });
  const size_t page = request.page_size() == 0 ? 500 : static_cast<size_t>(request.page_size());
  pb::GetClusterViewResponse response;
  response.set_cluster(options_.cluster);
  *response.mutable_view_version() = view_version;
  response.set_solves_own_l2(SolvesOwnL2());
  // The token is the last node name of the previous page.
  auto it =
      std::upper_bound(nodes.begin(), nodes.end(), request.page_token(),
                       [](const std::string& token, const Node& n) { return token < n.name; });
  if (request.page_token().empty()) it = nodes.begin();
  for (; it != nodes.end() && static_cast<size_t>(response.nodes_size()) < page; ++it) {
    *response.add_nodes() = ToClusterNode(*it);
  }
  if (it != nodes.end() && response.nodes_size() > 0) {
    response.set_next_page_token(response.nodes(response.nodes_size() - 1).name());
  }
  return response;
}

grpc::ServerUnaryReactor* SwmClusterServiceImpl::GetClusterView(
    grpc::CallbackServerContext* context, const pb::GetClusterViewRequest* request,
    pb::GetClusterViewResponse* response) {
  return Run(context, [this, request, response] {
    absl::StatusOr<pb::GetClusterViewResponse> view = View(*request);
    if (view.ok()) *response = std::move(*view);
    return view.status();
  });
}

}  // namespace codeco::swm

namespace codeco::swm {

grpc::ServerWriteReactor<pb::WatchClusterViewResponse>* SwmClusterServiceImpl::WatchClusterView(
    grpc::CallbackServerContext* context, const pb::WatchClusterViewRequest* request) {
  HubSeen();
  absl::Status refused = absl::OkStatus();
  if (request->cluster() != options_.cluster) {
    refused = InvalidFieldError("cluster", NotServed(request->cluster()));
  }
  return new ClusterViewWatch(view_feed_, options_.cluster, SolvesOwnL2(), view_watchers_,
                              options_.max_view_watchers, refused);
}

}  // namespace codeco::swm
