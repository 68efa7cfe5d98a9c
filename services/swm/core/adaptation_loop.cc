#include "swm/core/adaptation_loop.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace codeco::swm {
namespace {

namespace pb = codeco::swm::v1;

// "cluster" of a place "cluster" or "cluster/node".
std::string ClusterOf(const std::string& place) { return place.substr(0, place.find('/')); }

// "node" of a place "cluster/node" ("" for a cluster).
std::string NodeOf(const std::string& place) {
  const size_t slash = place.find('/');
  return slash == std::string::npos ? "" : place.substr(slash + 1);
}

// "MANUAL" for MIGRATION_REASON_MANUAL.
std::string ReasonName(pb::MigrationReason reason) {
  return std::string(absl::StripPrefix(pb::MigrationReason_Name(reason), "MIGRATION_REASON_"));
}

}  // namespace

AdaptationLoop::AdaptationLoop(const Clock& clock, const PlanRepository& plans,
                               HealthSource& health, MoveExecutor& mover,
                               MigrationGovernorOptions options)
    : clock_(clock), plans_(plans), health_(health), mover_(mover), governor_(clock, options),
      retry_after_(options.failure_grace) {}

void AdaptationLoop::RestoreHomes(const std::vector<pb::AssignmentPlan>& live,
                                  AdaptationTick& tick) {
  // Enough for any application's recent history; older moves are not read.
  constexpr int64_t kMostRead = 200;
  for (const pb::AssignmentPlan& plan : live) {
    std::set<std::string> undecided;
    for (const pb::WorkloadTarget& t : plan.targets()) undecided.insert(t.workload());
    absl::StatusOr<std::optional<pb::Migration>> newest = plans_.NewestMigration(plan.application());
    if (!newest.ok()) {
      tick.held.push_back(absl::StrCat("reading the migrations of ", plan.application(), ": ",
                                       newest.status().message()));
      return;  // tried again next tick
    }
    if (!newest->has_value()) continue;
    const int64_t last = MigrationNumber((*newest)->id());
    for (int64_t n = last; n > std::max<int64_t>(0, last - kMostRead) && !undecided.empty(); --n) {
      absl::StatusOr<pb::Migration> m =
          plans_.GetMigration(absl::StrCat(plan.application(), "/", n));
      if (!m.ok()) continue;
      // Only a move that happened decides where a workload belongs.
      if (m->phase() != pb::MIGRATION_PHASE_DONE &&
          m->phase() != pb::MIGRATION_PHASE_CUTTING_OVER) {
        continue;
      }
      if (!undecided.erase(m->workload())) continue;
      const pb::WorkloadTarget& from = m->source();
      std::string place;
      if (m->reason() == pb::MIGRATION_REASON_CLUSTER_FAILURE) place = from.cluster();
      if (m->reason() == pb::MIGRATION_REASON_NODE_FAILURE ||
          m->reason() == pb::MIGRATION_REASON_LOCAL_RESCHEDULE) {
        place = absl::StrCat(from.cluster(), "/", from.node());
      }
      if (place.empty()) continue;  // moved since for another reason
      homes_[absl::StrCat(plan.application(), "/", m->workload())] = place;
      governor_.RestoreFailed(place);
    }
  }
  homes_restored_ = true;
}

bool AdaptationLoop::SettleLocalDecisions(const std::map<std::string, ClusterHealth>& seen,
                                          absl::Time deadline, AdaptationTick& tick) {
  bool adopted = false;
  for (const auto& [cluster, health] : seen) {
    if (!health.reachable) continue;
    absl::StatusOr<std::vector<pb::LocalDecision>> unsettled =
        local_decisions_->Unsettled(cluster, deadline);
    if (!unsettled.ok()) {
      tick.held.push_back(
          absl::StrCat("local decisions of ", cluster, ": ", unsettled.status().message()));
      continue;
    }
    std::vector<pb::LocalDecisionVerdict> verdicts;
    for (const pb::LocalDecision& d : *unsettled) {
      if (d.state() != pb::LOCAL_DECISION_STATE_PENDING) continue;  // still moving its pod
      absl::StatusOr<pb::LocalDecisionVerdict> verdict = mover_.Adopt(d, deadline);
      if (!verdict.ok()) {
        tick.held.push_back(
            absl::StrCat("local decision ", d.id(), ": ", verdict.status().message()));
        continue;
      }
      if (verdict->state() == pb::LOCAL_DECISION_STATE_ADOPTED) {
        adopted = true;
        // Off a failed node, as a NODE_FAILURE evacuation: back once it recovers.
        const std::string home = absl::StrCat(d.cluster(), "/", d.from_node());
        homes_[absl::StrCat(d.application(), "/", d.workload())] = home;
        governor_.RestoreFailed(home);
      }
      tick.settled.push_back(absl::StrCat(
          d.id(), ": ",
          absl::StripPrefix(pb::LocalDecisionState_Name(verdict->state()), "LOCAL_DECISION_STATE_"),
          ": ", verdict->note()));
      verdicts.push_back(*std::move(verdict));
    }
    if (verdicts.empty()) continue;
    // Not recorded there: the next tick asks again, and adopting twice
    // finds the plan already moved (ADOPTED again, nothing written).
    if (absl::Status st = local_decisions_->Settle(cluster, verdicts, deadline); !st.ok()) {
      tick.held.push_back(
          absl::StrCat("settling the local decisions of ", cluster, ": ", st.message()));
    }
  }
  return adopted;
}

AdaptationTick AdaptationLoop::Tick(absl::Time probe_deadline, absl::Duration move_timeout) {
  AdaptationTick tick;
  absl::StatusOr<std::vector<pb::AssignmentPlan>> live = plans_.LivePlans();
  if (!live.ok()) {
    tick.held.push_back(absl::StrCat("reading plans: ", live.status().message()));
    return tick;
  }
  if (!homes_restored_) RestoreHomes(*live, tick);
  // Where every placed workload runs ("<app>/<workload>" -> target).
  std::map<std::string, std::pair<std::string, pb::WorkloadTarget>> placed;
  // Each application's placed plan (its channels' paths).
  std::map<std::string, const pb::AssignmentPlan*> plan_of;
  std::set<std::string> clusters;
  auto index_plans = [&] {
    placed.clear();
    plan_of.clear();
    for (const pb::AssignmentPlan& plan : *live) {
      if (plan.phase() != pb::PLAN_PHASE_DONE) continue;
      plan_of[plan.application()] = &plan;
      for (const pb::WorkloadTarget& t : plan.targets()) {
        placed[absl::StrCat(plan.application(), "/", t.workload())] = {plan.application(), t};
        clusters.insert(t.cluster());
      }
    }
  };
  index_plans();
  for (const auto& [key, home] : homes_) clusters.insert(ClusterOf(home));

  // Observe: a cluster that does not answer, a node not ready or gone (the
  // members that run nothing are asked too, and only answer for the hub).
  std::set<std::string> probed = clusters;
  for (const std::string& c : health_.AllMembers()) probed.insert(c);
  const std::map<std::string, ClusterHealth> seen =
      health_.Read(std::vector<std::string>(probed.begin(), probed.end()), probe_deadline);
  // No member answers at all: the hub is the one cut off (its own uplink),
  // not every cluster at once, and nothing could be moved anyway. Nothing
  // is observed, so a hub that comes back does not evacuate clusters that
  // ran on their own all along (their grace starts from what it sees then).
  if (!clusters.empty() && std::none_of(seen.begin(), seen.end(),
                                        [](const auto& entry) { return entry.second.reachable; })) {
    tick.held.push_back(absl::StrCat("none of the ", probed.size(),
                                     " members answers: the hub counts itself cut off and moves "
                                     "nothing"));
    return tick;
  }
  // The members' own moves first, so that a pod a member already moved off
  // a failed node is not moved again.
  if (local_decisions_ != nullptr && SettleLocalDecisions(seen, absl::Now() + move_timeout, tick)) {
    live = plans_.LivePlans();
    if (!live.ok()) {
      tick.held.push_back(absl::StrCat("reading plans: ", live.status().message()));
      return tick;
    }
    index_plans();
  }
  std::set<std::string> places;
  for (const std::string& cluster : clusters) {
    auto it = seen.find(cluster);
    const bool reachable = it != seen.end() && it->second.reachable;
    governor_.ObserveHealth(cluster, reachable);
    places.insert(cluster);
    if (!reachable) continue;
    for (const auto& [node, ready] : it->second.node_ready) {
      governor_.ObserveHealth(cluster + "/" + node, ready);
      places.insert(cluster + "/" + node);
    }
  }
  auto observe_gone = [&](const std::string& place) {
    auto it = seen.find(ClusterOf(place));
    if (it == seen.end() || !it->second.reachable || places.count(place)) return;
    governor_.ObserveHealth(place, false);  // a reachable cluster that lost the node
    places.insert(place);
  };
  for (const auto& [key, at] : placed) observe_gone(at.second.cluster() + "/" + at.second.node());
  for (const auto& [key, home] : homes_) {
    if (!NodeOf(home).empty()) observe_gone(home);
  }
  for (const std::string& place : places) {
    if (governor_.Failed(place)) {
      if (failed_.insert(place).second) tick.failed.push_back(place);
    } else {
      failed_.erase(place);
    }
  }

  const absl::Time now = clock_.Now();
  // Runs one move; false when it did not happen (the reason is in `held`).
  auto move = [&](const std::string& key, const std::string& app, const pb::WorkloadTarget& from,
                  const std::string& to, pb::MigrationReason reason) {
    if (auto wait = retry_at_.find(key); wait != retry_at_.end() && now < wait->second) {
      return false;
    }
    // Deadlines are the callers' (gRPC's), on the wall clock.
    absl::StatusOr<pb::Migration> m = mover_.Move(app, from.workload(), ClusterOf(to), NodeOf(to),
                                                  reason, absl::Now() + move_timeout);
    if (!m.ok()) {
      // Each refusal is stored (a FAILED migration): the wait doubles from
      // one grace, up to an hour, so a long outage costs a few records.
      const int failures = ++failed_moves_[key];
      retry_at_[key] = now + std::min(retry_after_ * (int64_t{1} << std::min(failures - 1, 20)),
                                      std::max(retry_after_, absl::Hours(1)));
      tick.held.push_back(absl::StrCat(key, " (", ReasonName(reason), "): ", m.status().message()));
      return false;
    }
    retry_at_.erase(key);
    failed_moves_.erase(key);
    tick.moved.push_back(absl::StrCat(m->id(), ": ", key, " ", from.cluster(), "/", from.node(),
                                      " -> ", m->target().cluster(), "/", m->target().node(), " (",
                                      ReasonName(reason), ")"));
    return true;
  };

  // Evacuate the failed places; failures bypass gain, cooldown and budget.
  for (const auto& [key, at] : placed) {
    const auto& [app, target] = at;
    const std::string node_place = target.cluster() + "/" + target.node();
    std::string place;
    pb::MigrationReason reason = pb::MIGRATION_REASON_UNSPECIFIED;
    if (governor_.Failed(target.cluster())) {
      place = target.cluster();
      reason = pb::MIGRATION_REASON_CLUSTER_FAILURE;
    } else if (governor_.Failed(node_place)) {
      place = node_place;
      reason = pb::MIGRATION_REASON_NODE_FAILURE;
    } else {
      continue;
    }
    if (absl::Status admitted = governor_.Admit({.workload = key, .trigger = MoveTrigger::kFailure});
        !admitted.ok()) {
      tick.held.push_back(absl::StrCat(key, ": ", admitted.message()));
      continue;
    }
    if (move(key, app, target, "", reason)) homes_.emplace(key, place);  // the first place it left
  }

  // Moves the first of `keys` ("<app>/<workload>") that may go, stateless
  // ones first (no state to carry: they move cheaper, and as well), each
  // under the governor's cooldown and budget for `trigger`; one held back
  // is asked again one grace later, not every tick (`about` says why, in
  // `held`).
  auto move_one_of = [&](std::vector<std::string> keys, MoveTrigger trigger,
                         pb::MigrationReason reason, const std::string& about) {
    std::stable_partition(keys.begin(), keys.end(), [&](const std::string& key) {
      auto at = placed.find(key);
      return at == placed.end() ||
             !mover_.KeepsState(at->second.first, at->second.second.service());
    });
    for (const std::string& key : keys) {
      auto at = placed.find(key);
      if (at == placed.end()) continue;
      if (auto wait = retry_at_.find(key); wait != retry_at_.end() && now < wait->second) continue;
      const MoveProposal proposal{.workload = key, .trigger = trigger};
      if (absl::Status allowed = governor_.Allows(proposal); !allowed.ok()) {
        retry_at_[key] = now + retry_after_;
        tick.held.push_back(absl::StrCat(key, " (", about, "): ", allowed.message()));
        continue;
      }
      // Cooldown and budget count a move once it happened.
      if (move(key, at->second.first, at->second.second, "", reason)) {
        governor_.Record(proposal);
        return;
      }
    }
  };

  // Channels out of QoS: move the workload the channel goes to (its peers
  // stay), else the one it comes from — a stateless one before one that
  // keeps state; the solve re-checks the channel against the links as
  // measured now.
  std::vector<OutOfQosChannel> out_of_qos;
  if (channels_ != nullptr) out_of_qos = channels_->OutOfQos();
  for (const OutOfQosChannel& c : out_of_qos) {
    auto plan = plan_of.find(c.application);
    // Measured under an older plan: the move that made the newer one may
    // have fixed it; the tracker reports the newer plan's state next.
    if (plan == plan_of.end() || plan->second->plan_revision() != c.plan_revision) continue;
    const pb::ChannelPath* path = nullptr;
    for (const pb::ChannelPath& p : plan->second->channels()) {
      if (p.channel() == c.channel) path = &p;
    }
    if (path == nullptr) continue;
    move_one_of({absl::StrCat(c.application, "/", path->to_workload()),
                 absl::StrCat(c.application, "/", path->from_workload())},
                MoveTrigger::kLinkFailure, pb::MIGRATION_REASON_LINK_FAILURE,
                "channel " + c.channel);
  }

  // Forecast breaches: a node advised for longer than the overload grace
  // (the governor's hysteresis: advised counts as fully loaded, not advised
  // as idle) sheds one workload per tick, a stateless one first, until the
  // advisory stops; the solve never puts it back on that node.
  if (breaches_ != nullptr) {
    std::set<std::string> now_advised;
    for (const BreachAdvisory& a : breaches_->BreachesAhead()) {
      now_advised.insert(absl::StrCat(a.cluster, "/", a.node));
    }
    advised_.insert(now_advised.begin(), now_advised.end());
    for (auto node = advised_.begin(); node != advised_.end();) {
      const bool on = now_advised.count(*node) > 0;
      governor_.ObserveUtilization(*node, on ? 1.0 : 0.0);
      node = on || governor_.Overloaded(*node) ? std::next(node) : advised_.erase(node);
    }
    for (const std::string& node : advised_) {
      if (!governor_.Overloaded(node) || governor_.Failed(node)) continue;
      std::vector<std::string> there;
      for (const auto& [key, at] : placed) {
        if (at.second.cluster() + "/" + at.second.node() == node) there.push_back(key);
      }
      move_one_of(std::move(there), MoveTrigger::kForecastBreach,
                  pb::MIGRATION_REASON_FORECAST_BREACH, "breach ahead on " + node);
    }
  }

  // Failback: home once the place has been healthy for the failback grace.
  for (const std::string& place : governor_.Recovered()) {
    failing_back_.insert(place);
    tick.recovered.push_back(place);
  }
  for (auto place = failing_back_.begin(); place != failing_back_.end();) {
    bool pending = false;
    for (auto home = homes_.begin(); home != homes_.end();) {
      if (home->second != *place) {
        ++home;
        continue;
      }
      auto at = placed.find(home->first);
      const bool there =
          at != placed.end() && at->second.second.cluster() == ClusterOf(*place) &&
          (NodeOf(*place).empty() || at->second.second.node() == NodeOf(*place));
      if (at == placed.end() || there) {  // removed since, or home already
        home = homes_.erase(home);
        continue;
      }
      const MoveProposal proposal{.workload = home->first, .trigger = MoveTrigger::kFailback};
      if (absl::Status allowed = governor_.Allows(proposal); !allowed.ok()) {
        tick.held.push_back(absl::StrCat(home->first, ": ", allowed.message()));
        pending = true;
        ++home;
        continue;
      }
      if (move(home->first, at->second.first, at->second.second, *place,
               pb::MIGRATION_REASON_FAILBACK)) {
        governor_.Record(proposal);
        home = homes_.erase(home);
      } else {
        pending = true;
        ++home;
      }
    }
    place = pending ? std::next(place) : failing_back_.erase(place);
  }

  PullBack(plan_of, move, tick);
  return tick;
}

void AdaptationLoop::PullBack(
    const std::map<std::string, const pb::AssignmentPlan*>& plan_of,
    const std::function<bool(const std::string&, const std::string&, const pb::WorkloadTarget&,
                             const std::string&, pb::MigrationReason)>& move,
    AdaptationTick& tick) {
  const absl::Time now = clock_.Now();
  for (const auto& [app, plan] : plan_of) {
    // The replicas of each service, by replica number ("web-3" -> 3).
    std::map<std::string, std::vector<std::pair<int64_t, const pb::WorkloadTarget*>>> replicas;
    for (const pb::WorkloadTarget& t : plan->targets()) {
      int64_t number = replicas[t.service()].size();
      const size_t dash = t.workload().rfind('-');
      if (dash != std::string::npos) {
        (void)absl::SimpleAtoi(absl::string_view(t.workload()).substr(dash + 1), &number);
      }
      replicas[t.service()].push_back({number, &t});
    }
    for (auto& [service, list] : replicas) {
      const LocationSpread rule = mover_.LocationsOf(app, service);
      if (rule.max_locations <= 0 || !rule.bursting) continue;
      std::stable_sort(list.begin(), list.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      // Home: the clusters of the lowest-numbered replicas, N of them (the
      // placement spreads to N clusters before it bursts).
      std::vector<std::string> home;
      for (const auto& [number, t] : list) {
        if (static_cast<int>(home.size()) == rule.max_locations) break;
        if (std::find(home.begin(), home.end(), t->cluster()) == home.end()) {
          home.push_back(t->cluster());
        }
      }
      // The highest-numbered replica away from home goes first.
      for (auto it = list.rbegin(); it != list.rend(); ++it) {
        const pb::WorkloadTarget& away = *it->second;
        if (std::find(home.begin(), home.end(), away.cluster()) != home.end()) continue;
        const std::string key = absl::StrCat(app, "/", away.workload());
        if (auto wait = retry_at_.find(key); wait != retry_at_.end() && now < wait->second) break;
        // Cooldown and budget count only a move that happened: the home
        // clusters may still be full.
        const MoveProposal proposal{.workload = key, .trigger = MoveTrigger::kFailback};
        if (absl::Status allowed = governor_.Allows(proposal); !allowed.ok()) {
          retry_at_[key] = now + retry_after_;
          tick.held.push_back(absl::StrCat(key, " (back from a burst): ", allowed.message()));
          break;
        }
        // Each refusal tries the next home cluster.
        auto failures = failed_moves_.find(key);
        const std::string& to =
            home[(failures == failed_moves_.end() ? 0 : failures->second) % home.size()];
        if (move(key, app, away, to, pb::MIGRATION_REASON_RESCHEDULE)) governor_.Record(proposal);
        break;  // one per service per tick
      }
    }
  }
}

}  // namespace codeco::swm
