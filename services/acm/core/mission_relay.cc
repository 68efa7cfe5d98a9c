#include "acm/core/mission_relay.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "acm/core/application_manager.h"
#include "acm/core/cam_parser.h"
#include "codeco/common/logging.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/status.h"
#include "google/protobuf/util/message_differencer.h"

namespace codeco::acm {
namespace {

constexpr size_t kMaxMissionName = 40;
constexpr int kMaxReplicas = 100;
constexpr int kMaxContainers = 16;
constexpr int kMaxPlacementClusters = 1000;
constexpr int kMaxSelectorTerms = 32;

absl::Status ValidateSelector(const common::v1::LabelSelector& selector, const std::string& at) {
  if (selector.match_labels_size() + selector.match_expressions_size() > kMaxSelectorTerms) {
    return InvalidFieldError(at, absl::StrCat("more than ", kMaxSelectorTerms, " terms"));
  }
  for (const auto& [key, value] : selector.match_labels()) {
    if (key.empty()) return InvalidFieldError(at + ".match_labels", "a key is empty");
  }
  for (int i = 0; i < selector.match_expressions_size(); ++i) {
    const auto& req = selector.match_expressions(i);
    const std::string path = absl::StrCat(at, ".match_expressions[", i, "]");
    if (req.key().empty()) return InvalidFieldError(path + ".key", "must not be empty");
    switch (req.op()) {
      case common::v1::LABEL_SELECTOR_OPERATOR_IN:
      case common::v1::LABEL_SELECTOR_OPERATOR_NOT_IN:
        if (req.values().empty()) {
          return InvalidFieldError(path + ".values", "In and NotIn need at least one value");
        }
        break;
      case common::v1::LABEL_SELECTOR_OPERATOR_EXISTS:
      case common::v1::LABEL_SELECTOR_OPERATOR_DOES_NOT_EXIST:
        if (!req.values().empty()) {
          return InvalidFieldError(path + ".values", "Exists and DoesNotExist take no values");
        }
        break;
      default:
        return InvalidFieldError(path + ".op", "must be In, NotIn, Exists or DoesNotExist");
    }
  }
  return absl::OkStatus();
}

// The parts of a mission its clusters act on (what moves the generation on).
bool SameSpec(const v1::Mission& a, const v1::Mission& b) {
  using google::protobuf::util::MessageDifferencer;
  return MessageDifferencer::Equals(a.placement(), b.placement()) &&
         MessageDifferencer::Equals(a.workload(), b.workload());
}

// A mission as stored: no status.
v1::Mission Stored(v1::Mission mission) {
  mission.clear_status();
  return mission;
}

// The same state but perhaps for its report time.
bool SameState(const v1::MissionClusterStatus& a, const v1::MissionClusterStatus& b) {
  return a.mission() == b.mission() && a.cluster() == b.cluster() && a.phase() == b.phase() &&
         a.generation() == b.generation() && a.desired_pods() == b.desired_pods() &&
         a.running_pods() == b.running_pods() && a.message() == b.message();
}

bool Newer(const v1::MissionClusterStatus& a, const v1::MissionClusterStatus& b) {
  return FromProtoTimestamp(a.report_time()) > FromProtoTimestamp(b.report_time());
}

}  // namespace

TreeMember TreeMemberOf(const std::string& name,
                        const google::protobuf::Map<std::string, std::string>& labels,
                        const common::v1::ClusterLabels& well_known) {
  TreeMember member{name, labels};
  auto put = [&](const char* key, const std::string& value) {
    if (!value.empty()) member.labels[key] = value;
  };
  put("region", well_known.region());
  put("country", well_known.country());
  put("provider", well_known.provider());
  put("tier", TierName(well_known.tier()));
  return member;
}

TreeMember TreeMemberOf(const v1::Cluster& cluster) {
  return TreeMemberOf(cluster.metadata().name(), cluster.metadata().labels(),
                      cluster.cluster_labels());
}

TreeMember TreeMemberOf(const v1::SubtreeCluster& cluster) {
  return TreeMemberOf(cluster.name(), cluster.labels(), cluster.cluster_labels());
}

bool Addresses(const v1::MissionPlacement& placement, const TreeMember& member) {
  if (std::find(placement.clusters().begin(), placement.clusters().end(), member.name) !=
      placement.clusters().end()) {
    return true;
  }
  const auto& selector = placement.selector();
  if (selector.match_labels().empty() && selector.match_expressions().empty()) return false;
  return MatchesLabels(selector, member.labels);
}

absl::Status ValidateMission(const v1::Mission& mission) {
  v1::Mission stored = mission;
  stored.clear_status();
  if (stored.ByteSizeLong() > kMaxMissionBytes) {
    return InvalidFieldError(
        "mission", absl::StrCat(stored.ByteSizeLong(), " bytes, more than ", kMaxMissionBytes));
  }
  const std::string& name = mission.metadata().name();
  if (!IsDnsLabel(name) || name.size() > kMaxMissionName) {
    return InvalidFieldError(
        "mission.metadata.name",
        absl::StrCat("\"", name.substr(0, 80), "\" is not a DNS label of at most ", kMaxMissionName,
                     " characters"));
  }
  const v1::MissionPlacement& placement = mission.placement();
  const bool by_labels = !placement.selector().match_labels().empty() ||
                         !placement.selector().match_expressions().empty();
  if (placement.clusters().empty() && !by_labels) {
    return InvalidFieldError("mission.placement",
                             "names no cluster and has no selector: it would address nothing");
  }
  if (placement.clusters_size() > kMaxPlacementClusters) {
    return InvalidFieldError("mission.placement.clusters",
                             absl::StrCat("more than ", kMaxPlacementClusters));
  }
  for (int i = 0; i < placement.clusters_size(); ++i) {
    if (!IsDnsLabel(placement.clusters(i))) {
      return InvalidFieldError(
          absl::StrCat("mission.placement.clusters[", i, "]"),
          "\"" + placement.clusters(i).substr(0, 80) + "\" is not a cluster name");
    }
  }
  RETURN_IF_ERROR(ValidateSelector(placement.selector(), "mission.placement.selector"));
  const v1::MissionWorkload& workload = mission.workload();
  if (workload.replicas() < 1 || workload.replicas() > kMaxReplicas) {
    return InvalidFieldError(
        "mission.workload.replicas",
        absl::StrCat("must be 1-", kMaxReplicas, ", got ", workload.replicas()));
  }
  if (workload.containers().empty() || workload.containers_size() > kMaxContainers) {
    return InvalidFieldError("mission.workload.containers",
                             absl::StrCat("must hold 1-", kMaxContainers, " containers"));
  }
  std::set<std::string> names;
  for (int i = 0; i < workload.containers_size(); ++i) {
    const lms::v1::Container& c = workload.containers(i);
    const std::string at = absl::StrCat("mission.workload.containers[", i, "]");
    if (!IsDnsLabel(c.name())) {
      return InvalidFieldError(at + ".name",
                               "\"" + c.name().substr(0, 80) + "\" is not a DNS label");
    }
    if (!names.insert(c.name()).second) {
      return InvalidFieldError(at + ".name", "\"" + c.name() + "\" appears twice");
    }
    if (c.image().empty()) return InvalidFieldError(at + ".image", "must not be empty");
    if (c.requests().cpu_millicores() < 0) {
      return InvalidFieldError(at + ".requests.cpu_millicores", "must not be negative");
    }
    if (c.requests().memory_bytes() < 0) {
      return InvalidFieldError(at + ".requests.memory_bytes", "must not be negative");
    }
  }
  for (const auto& [key, value] : workload.labels()) {
    if (key.empty() || absl::StartsWith(key, "codeco.io/")) {
      return InvalidFieldError("mission.workload.labels",
                               "\"" + key.substr(0, 80) + "\": codeco.io/ keys are reserved");
    }
  }
  return absl::OkStatus();
}

MissionRelay::MissionRelay(KvStore& kv, Clock& clock, bool root, MissionRelayOptions options)
    : kv_(kv), clock_(clock), root_(root), options_(options) {}

absl::StatusOr<std::vector<v1::Mission>> MissionRelay::Load(const KvScanOptions& options) const {
  std::vector<v1::Mission> out;
  absl::Status parse_error;
  RETURN_IF_ERROR(
      kv_.Scan(kMissionFamily, options, [&](std::string_view key, std::string_view value) {
        v1::Mission m;
        if (!m.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
          parse_error = absl::DataLossError(
              absl::StrCat("stored mission ", std::string(key), " does not parse"));
          return false;
        }
        out.push_back(std::move(m));
        return true;
      }));
  RETURN_IF_ERROR(parse_error);
  return out;
}

absl::StatusOr<v1::ApplyMissionResponse> MissionRelay::Apply(
    const v1::ApplyMissionRequest& request) {
  if (!root_) {
    return absl::FailedPreconditionError(
        "missions are authored at the root of the cluster tree (the hub ACM), not at a member");
  }
  RETURN_IF_ERROR(ValidateMission(request.mission()));
  absl::MutexLock write(&write_mu_);
  const std::string& name = request.mission().metadata().name();
  v1::Mission next = Stored(request.mission());
  const google::protobuf::Timestamp now = ToProtoTimestamp(clock_.Now());
  v1::ApplyMissionResponse response;
  absl::StatusOr<std::string> stored = kv_.Get(kMissionFamily, name);
  if (stored.ok()) {
    v1::Mission current;
    if (!current.ParseFromString(*stored)) {
      return absl::DataLossError("stored mission " + name + " does not parse");
    }
    if (SameSpec(current, next)) {
      *response.mutable_mission() = current;
      return response;
    }
    // What the caller may not set is kept from the stored mission.
    *next.mutable_metadata()->mutable_create_time() = current.metadata().create_time();
    next.mutable_metadata()->set_uid(current.metadata().uid());
    next.set_generation(current.generation() + 1);
    next.mutable_metadata()->set_revision(current.metadata().revision() + 1);
  } else if (absl::IsNotFound(stored.status())) {
    absl::StatusOr<std::vector<v1::Mission>> all = Load();
    if (!all.ok()) return all.status();
    if (static_cast<int>(all->size()) >= options_.max_missions) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the tree holds ", all->size(), " missions, the most it takes"));
    }
    *next.mutable_metadata()->mutable_create_time() = now;
    next.mutable_metadata()->set_uid(absl::StrCat(name, "-", absl::ToUnixNanos(clock_.Now())));
    next.set_generation(1);
    next.mutable_metadata()->set_revision(1);
    response.set_created(true);
  } else {
    return stored.status();
  }
  *next.mutable_metadata()->mutable_update_time() = now;
  RETURN_IF_ERROR(kv_.Write(KvWriteBatch().Put(kMissionFamily, name, next.SerializeAsString())));
  response.set_changed(true);
  *response.mutable_mission() = std::move(next);
  return response;
}

absl::Status MissionRelay::Delete(const v1::DeleteMissionRequest& request) {
  if (!root_) {
    return absl::FailedPreconditionError(
        "missions are removed at the root of the cluster tree (the hub ACM), not at a member");
  }
  absl::MutexLock write(&write_mu_);
  absl::StatusOr<std::string> stored = kv_.Get(kMissionFamily, request.name());
  if (absl::IsNotFound(stored.status())) {
    return absl::NotFoundError("mission \"" + request.name().substr(0, 80) + "\" not found");
  }
  RETURN_IF_ERROR(stored.status());
  return kv_.Write(KvWriteBatch().Delete(kMissionFamily, request.name()));
}

MissionRelay::StateMap MissionRelay::NewestStatesLocked() const {
  StateMap newest;
  auto add = [&](const v1::MissionClusterStatus& s) {
    auto [it, inserted] = newest.try_emplace({s.mission(), s.cluster()}, s);
    if (!inserted && Newer(s, it->second)) it->second = s;
  };
  for (const auto& s : own_) add(s);
  for (const auto& [reporter, states] : reported_) {
    for (const auto& s : states) add(s);
  }
  return newest;
}

void MissionRelay::AddStatus(v1::Mission& mission, const std::vector<TreeMember>& known,
                             const StateMap& newest) const {
  std::set<std::string> shown;
  std::vector<const TreeMember*> members;
  if (self_) members.push_back(&*self_);
  for (const TreeMember& member : known) members.push_back(&member);
  for (const TreeMember* each : members) {
    const TreeMember& member = *each;
    if (!Addresses(mission.placement(), member) || !shown.insert(member.name).second) continue;
    auto it = newest.find({mission.metadata().name(), member.name});
    if (it != newest.end()) {
      *mission.add_status() = it->second;
      continue;
    }
    v1::MissionClusterStatus* pending = mission.add_status();
    pending->set_mission(mission.metadata().name());
    pending->set_cluster(member.name);
    pending->set_phase(v1::MISSION_PHASE_PENDING);
    pending->set_desired_pods(mission.workload().replicas());
    pending->set_message("not reported by the cluster yet");
  }
  // Clusters still reporting it that no longer match (or are not known here).
  for (auto it = newest.lower_bound({mission.metadata().name(), ""});
       it != newest.end() && it->first.first == mission.metadata().name(); ++it) {
    if (shown.insert(it->first.second).second) *mission.add_status() = it->second;
  }
  std::sort(mission.mutable_status()->begin(), mission.mutable_status()->end(),
            [](const auto& a, const auto& b) { return a.cluster() < b.cluster(); });
}

absl::StatusOr<v1::GetMissionResponse> MissionRelay::Get(
    const v1::GetMissionRequest& request, const std::vector<TreeMember>& known) const {
  absl::StatusOr<std::string> stored = kv_.Get(kMissionFamily, request.name());
  if (absl::IsNotFound(stored.status())) {
    return absl::NotFoundError("mission \"" + request.name().substr(0, 80) + "\" not found");
  }
  RETURN_IF_ERROR(stored.status());
  v1::GetMissionResponse response;
  if (!response.mutable_mission()->ParseFromString(*stored)) {
    return absl::DataLossError("stored mission " + request.name() + " does not parse");
  }
  absl::ReaderMutexLock lock(&mu_);
  AddStatus(*response.mutable_mission(), known, NewestStatesLocked());
  return response;
}

absl::StatusOr<v1::ListMissionsResponse> MissionRelay::List(
    const v1::ListMissionsRequest& request, const std::vector<TreeMember>& known) const {
  if (request.page_size() < 0) {
    return InvalidFieldError("page_size", "must not be negative");
  }
  const int page = request.page_size() == 0 ? options_.default_page_size
                                            : std::min(request.page_size(), options_.max_page_size);
  ASSIGN_OR_RETURN(std::vector<v1::Mission> missions,
                   Load({.start_after = request.page_token(), .limit = static_cast<size_t>(page)}));
  v1::ListMissionsResponse response;
  {
    absl::ReaderMutexLock lock(&mu_);
    const StateMap newest = NewestStatesLocked();
    for (v1::Mission& m : missions) {
      AddStatus(m, known, newest);
      *response.add_missions() = std::move(m);
    }
  }
  if (response.missions_size() == page) {
    response.set_next_page_token(response.missions(page - 1).metadata().name());
  }
  return response;
}

absl::StatusOr<int> MissionRelay::ReplaceFromUpstream(
    const google::protobuf::RepeatedPtrField<v1::Mission>& missions) {
  if (root_) {
    return absl::FailedPreconditionError(
        "the root of the tree has no upstream to take missions from");
  }
  std::map<std::string, v1::Mission> next;
  for (const v1::Mission& m : missions) {
    if (absl::Status valid = ValidateMission(m); !valid.ok()) {
      log::Warn("a mission from upstream is invalid; skipped",
                {{"mission", m.metadata().name().substr(0, 80)},
                 {"error", std::string(valid.message())}});
      continue;
    }
    if (static_cast<int>(next.size()) >= options_.max_missions) break;
    next[m.metadata().name()] = Stored(m);
  }
  absl::MutexLock write(&write_mu_);
  absl::StatusOr<std::vector<v1::Mission>> current = Load();
  if (!current.ok()) return current.status();
  KvWriteBatch batch;
  int changed = 0;
  for (const v1::Mission& m : *current) {
    auto it = next.find(m.metadata().name());
    if (it == next.end()) {
      batch.Delete(kMissionFamily, m.metadata().name());
      ++changed;
    } else if (google::protobuf::util::MessageDifferencer::Equals(it->second, m)) {
      next.erase(it);
    }
  }
  for (const auto& [name, m] : next) {
    batch.Put(kMissionFamily, name, m.SerializeAsString());
    ++changed;
  }
  if (!batch.empty()) RETURN_IF_ERROR(kv_.Write(batch));
  return changed;
}

absl::StatusOr<std::vector<v1::Mission>> MissionRelay::MissionsFor(
    const std::vector<TreeMember>& members) const {
  absl::StatusOr<std::vector<v1::Mission>> all = Load();
  if (!all.ok()) return all.status();
  std::vector<v1::Mission> out;
  for (v1::Mission& m : *all) {
    for (const TreeMember& member : members) {
      if (Addresses(m.placement(), member)) {
        out.push_back(std::move(m));
        break;
      }
    }
  }
  return out;
}

void MissionRelay::RecordReport(
    const std::string& reporter,
    const google::protobuf::RepeatedPtrField<v1::MissionClusterStatus>& states) {
  bool changed = false;
  {
    absl::MutexLock lock(&mu_);
    std::vector<v1::MissionClusterStatus>& held = reported_[reporter];
    changed = held.size() != static_cast<size_t>(states.size());
    for (int i = 0; !changed && i < states.size(); ++i) changed = !SameState(held[i], states[i]);
    held.assign(states.begin(), states.end());
  }
  if (changed && on_state_change_) on_state_change_();
}

void MissionRelay::ForgetReporter(const std::string& reporter) {
  absl::MutexLock lock(&mu_);
  reported_.erase(reporter);
}

void MissionRelay::RecordOwnStates(TreeMember self, std::vector<v1::MissionClusterStatus> states) {
  absl::MutexLock lock(&mu_);
  self_ = std::move(self);
  own_ = std::move(states);
}

std::vector<v1::MissionClusterStatus> MissionRelay::StatesToRelay() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<v1::MissionClusterStatus> out;
  for (auto& [key, state] : NewestStatesLocked()) out.push_back(state);
  return out;
}

}  // namespace codeco::acm
