#include "swm/core/convert.h"

#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "acm/core/application_bounds.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/status.h"

namespace codeco::swm {
namespace {

namespace acm = codeco::acm::v1;
namespace pb = codeco::swm::v1;

bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}

void CheckQuantities(const codeco::common::v1::ResourceQuantities& q, const std::string& path,
                     FieldErrors& errors) {
  if (q.cpu_millicores() < 0) errors.Add(path + ".cpu_millicores", "must not be negative");
  if (q.memory_bytes() < 0) errors.Add(path + ".memory_bytes", "must not be negative");
  if (q.gpu() < 0) errors.Add(path + ".gpu", "must not be negative");
}

// The built-in scheduling profile for an mck8s placement policy.
std::string ProfileFor(acm::PlacementPolicy policy) {
  switch (policy) {
    case acm::PLACEMENT_POLICY_CLUSTER_AFFINITY:
      return "mck8s-cluster-affinity";
    case acm::PLACEMENT_POLICY_WORST_FIT:
      return "mck8s-worst-fit";
    case acm::PLACEMENT_POLICY_BEST_FIT:
      return "mck8s-best-fit";
    case acm::PLACEMENT_POLICY_TRAFFIC_AWARE:
      return "mck8s-traffic-aware";
    default:
      return "";
  }
}

int Replicas(const acm::ServiceSpec& s) { return s.replicas() == 0 ? 1 : s.replicas(); }

pb::PlanPhase ToProto(PlanPhase p) {
  switch (p) {
    case PlanPhase::kIdle:
      return pb::PLAN_PHASE_IDLE;
    case PlanPhase::kPlacing:
      return pb::PLAN_PHASE_PLACING;
    case PlanPhase::kReserving:
      return pb::PLAN_PHASE_RESERVING;
    case PlanPhase::kCommitting:
      return pb::PLAN_PHASE_COMMITTING;
    case PlanPhase::kDone:
      return pb::PLAN_PHASE_DONE;
    case PlanPhase::kRolledBack:
      return pb::PLAN_PHASE_ROLLED_BACK;
  }
  return pb::PLAN_PHASE_UNSPECIFIED;
}

pb::ActionType ToProto(ActionType t) {
  switch (t) {
    case ActionType::kCreatePod:
      return pb::ACTION_TYPE_CREATE_POD;
    case ActionType::kDeletePod:
      return pb::ACTION_TYPE_DELETE_POD;
    case ActionType::kCreateChannel:
      return pb::ACTION_TYPE_CREATE_CHANNEL;
    case ActionType::kDeleteChannel:
      return pb::ACTION_TYPE_DELETE_CHANNEL;
  }
  return pb::ACTION_TYPE_UNSPECIFIED;
}

pb::ActionResult ToProto(ActionResult r) {
  switch (r) {
    case ActionResult::kPending:
      return pb::ACTION_RESULT_PENDING;
    case ActionResult::kRunning:
      return pb::ACTION_RESULT_RUNNING;
    case ActionResult::kSucceeded:
      return pb::ACTION_RESULT_SUCCEEDED;
    case ActionResult::kFailed:
      return pb::ACTION_RESULT_FAILED;
    case ActionResult::kSkipped:
      return pb::ACTION_RESULT_SKIPPED;
    case ActionResult::kRolledBack:
      return pb::ACTION_RESULT_ROLLED_BACK;
  }
  return pb::ACTION_RESULT_UNSPECIFIED;
}

}  // namespace

google::protobuf::Timestamp ToTimestamp(absl::Time t) { return ToProtoTimestamp(t); }

std::string ApplicationName(const acm::Application& app) {
  return app.spec().app_name().empty() ? app.metadata().name() : app.spec().app_name();
}

absl::StatusOr<Application> ToCoreApplication(const acm::Application& app,
                                              const std::set<std::string>& clusters) {
  FieldErrors errors;
  const acm::ApplicationSpec& spec = app.spec();
  const std::string name = ApplicationName(app);
  if (name.empty()) {
    errors.Add("application.spec.app_name", "is required");
  } else if (!IsDnsLabel(name)) {
    errors.Add("application.spec.app_name", "must be a DNS label (a-z, 0-9, '-', at most 63)");
  }
  if (!spec.app_name().empty() && !app.metadata().name().empty() &&
      spec.app_name() != app.metadata().name()) {
    errors.Add("application.spec.app_name",
               "must equal metadata.name \"" + app.metadata().name() + "\"");
  }
  if (spec.services().empty()) errors.Add("application.spec.services", "must list a service");
  const acm::Intents& intents = spec.intents();
  if (intents.max_latency_to_origin_ns() < 0) {
    errors.Add("application.spec.intents.max_latency_to_origin_ns", "must not be negative");
  }
  if (spec.placement().number_of_locations() < 0) {
    errors.Add("application.spec.placement.number_of_locations", "must not be negative");
  }
  if (intents.max_latency_to_origin_ns() > 0 && !clusters.count(intents.origin())) {
    errors.Add("application.spec.intents.origin",
               "must name a neighborhood cluster when max_latency_to_origin_ns is set");
  }

  for (const auto& [profile, weight] : spec.custom_profile_weights()) {
    const std::string path = absl::StrCat("application.spec.custom_profile_weights[\"", profile.substr(0, 64), "\"]");
    const auto parsed = ParsePerformanceProfile(profile);
    if (!parsed.has_value() || *parsed == codeco::common::v1::PERFORMANCE_PROFILE_CUSTOM) {
      errors.Add(path, "must be latency, greenness, resilience or cost");
    } else if (!(weight >= 0) || !std::isfinite(weight)) {
      errors.Add(path, "must be a finite number >= 0");
    }
  }
  Application out{.name = name,
                  .profile = ProfileFor(spec.placement().policy()),
                  .performance_profile = PerformanceProfileName(spec.performance_profile()),
                  .custom_profile_weights = {spec.custom_profile_weights().begin(),
                                             spec.custom_profile_weights().end()}};
  std::map<std::string, int> replicas;
  for (int i = 0; i < spec.services_size(); ++i) {
    const acm::ServiceSpec& s = spec.services(i);
    std::string path = absl::StrCat("application.spec.services[", i, "]");
    if (!IsDnsLabel(s.name())) {
      errors.Add(path + ".name", "must be a DNS label (a-z, 0-9, '-', at most 63)");
    } else if (!replicas.emplace(s.name(), Replicas(s)).second) {
      errors.Add(path + ".name", "duplicate service \"" + s.name() + "\"");
    }
    CheckQuantities(s.limits(), path + ".limits", errors);
    if (s.availability_kpi() < 0 || s.availability_kpi() > 100) {
      errors.Add(path + ".availability_kpi", "must be 0-100");
    }
  }
  // ACM's caps (replicas, expanded workloads and channels, overflow-checked
  // request totals; requests' signs too) before anything is expanded.
  absl::Status bounds =
      codeco::acm::CheckApplicationBounds(spec, codeco::acm::ProtoSpecFieldNames("application.spec"))
          .status();
  if (!bounds.ok()) {
    if (errors.empty()) return bounds;
    return absl::InvalidArgumentError(
        absl::StrCat(errors.ToStatus().message(), "\n", bounds.message()));
  }
  if (!errors.empty()) return errors.ToStatus();

  for (const acm::ServiceSpec& s : spec.services()) {
    for (int r = 0; r < Replicas(s); ++r) {
      Workload w{
          .name = absl::StrCat(s.name(), "-", r),
          .service = s.name(),
          .requests = {s.requests().cpu_millicores(), s.requests().memory_bytes(),
                       s.requests().gpu()},
          .stateful = s.stateful(),
          .availability_kpi = s.availability_kpi(),
          .allowed_regions = {intents.allowed_regions().begin(), intents.allowed_regions().end()},
          .allowed_countries = {intents.allowed_countries().begin(),
                                intents.allowed_countries().end()},
          .data_locality = s.data_locality(),
          .preferred_clusters = {spec.placement().preferred_clusters().begin(),
                                 spec.placement().preferred_clusters().end()},
          .max_locations = spec.placement().number_of_locations(),
          .bursting = spec.placement().bursting(),
          .run_to_completion = s.has_job()};
      if (intents.max_latency_to_origin_ns() > 0) {
        w.origin_cluster = intents.origin();
        w.max_latency_to_origin_ns = intents.max_latency_to_origin_ns();
      }
      out.workloads.push_back(std::move(w));
    }
  }

  std::set<std::string> autoscaled;
  for (const acm::ServiceSpec& s : spec.services()) {
    if (s.autoscaling().max_replicas() > 0) autoscaled.insert(s.name());
  }
  std::set<std::string> channel_names;
  for (int i = 0; i < spec.services_size(); ++i) {
    const acm::ServiceSpec& s = spec.services(i);
    for (int j = 0; j < s.channels_size(); ++j) {
      const acm::Channel& c = s.channels(j);
      std::string path = absl::StrCat("application.spec.services[", i, "].channels[", j, "]");
      if (c.name().empty()) errors.Add(path + ".name", "is required");
      if (!c.name().empty() && !channel_names.insert(c.name()).second) {
        errors.Add(path + ".name", "duplicate channel \"" + c.name() + "\"");
      }
      if (!c.from_service().empty() && c.from_service() != s.name()) {
        errors.Add(path + ".from_service", "must be the listing service \"" + s.name() + "\"");
      }
      auto to = replicas.find(c.to_service());
      if (to == replicas.end()) {
        errors.Add(path + ".to_service", "unknown service \"" + c.to_service() + "\"");
      }
      if (c.min_bandwidth_bps() < 0)
        errors.Add(path + ".min_bandwidth_bps", "must not be negative");
      if (c.max_delay_ns() < 0) errors.Add(path + ".max_delay_ns", "must not be negative");
      if (to == replicas.end() || c.name().empty()) continue;
      int senders = Replicas(s);
      int receivers = to->second;
      // One replica to one: the channel keeps its spec name, unless either
      // end autoscales (then names stay those of the replica pair, so a
      // scale in place never renames a channel).
      bool single = senders == 1 && receivers == 1 && !autoscaled.count(s.name()) &&
                    !autoscaled.count(c.to_service());
      for (int a = 0; a < senders; ++a) {
        for (int b = 0; b < receivers; ++b) {
          if (c.to_service() == s.name() && a == b) continue;
          out.channels.push_back(Channel{
              .name = single ? c.name() : absl::StrCat(c.name(), "-", a, "-", b),
              .from = absl::StrCat(s.name(), "-", a),
              .to = absl::StrCat(c.to_service(), "-", b),
              // Rounded up, without the overflow of (bandwidth + receivers - 1).
              .min_bandwidth_bps = c.min_bandwidth_bps() / receivers +
                                   (c.min_bandwidth_bps() % receivers != 0 ? 1 : 0),
              .max_delay_ns = c.max_delay_ns(),
              .service_class = c.service_class() == codeco::common::v1::SERVICE_CLASS_ASSURED
                                   ? ServiceClass::kAssured
                                   : ServiceClass::kBestEffort,
              .to_port = c.to_port()});
        }
      }
    }
  }
  if (!errors.empty()) return errors.ToStatus();
  absl::Status valid = out.Validate();
  if (!valid.ok()) {
    return absl::InvalidArgumentError("application (as workloads): " +
                                      std::string(valid.message()));
  }
  return out;
}

std::string LabelValue(const std::string& id) { return absl::StrReplaceAll(id, {{"/", "."}}); }

codeco::lms::v1::Pod PodTemplate(const acm::Application& app, const WorkloadTarget& target,
                                 int64_t plan_revision) {
  codeco::lms::v1::Pod pod;
  pod.set_name(target.pod);
  const std::string app_name = ApplicationName(app);
  auto& labels = *pod.mutable_labels();
  labels["codeco.io/application"] = app_name;
  labels["codeco.io/service"] = target.service;
  labels["codeco.io/workload"] = target.workload;
  labels["codeco.io/plan-revision"] = absl::StrCat(plan_revision);
  labels[kPlanLabel] = LabelValue(absl::StrCat(app_name, "/", plan_revision));
  labels[kReservationLabel] =
      LabelValue(absl::StrCat(app_name, "/", plan_revision, "/", target.cluster));
  pod.set_node_name(target.node);
  auto* c = pod.add_containers();
  c->set_name(target.service);
  c->mutable_requests()->set_cpu_millicores(target.requests.cpu_millis);
  c->mutable_requests()->set_memory_bytes(target.requests.memory_bytes);
  c->mutable_requests()->set_gpu(target.requests.gpu);
  for (const acm::ServiceSpec& s : app.spec().services()) {
    if (s.name() != target.service) continue;
    c->set_image(s.image());
    c->mutable_command()->CopyFrom(s.command());
    c->mutable_args()->CopyFrom(s.args());
    c->mutable_env()->insert(s.env().begin(), s.env().end());
    for (const acm::ContainerPort& p : s.ports()) {
      auto* port = c->add_ports();
      port->set_name(p.name());
      port->set_port(p.port());
      port->set_protocol(p.protocol());
    }
    *c->mutable_limits() = s.limits();
    // A job's pod ends when its container exits, and is not started again.
    if (s.has_job()) pod.set_restart_policy(codeco::lms::v1::RESTART_POLICY_NEVER);
    if (s.stateful()) (*pod.mutable_annotations())[kStatefulAnnotation] = "true";
  }
  return pod;
}

pb::AssignmentPlan ToProtoPlan(const AssignmentPlan& plan, const Application& app,
                               const PlacementResult& result) {
  pb::AssignmentPlan out;
  out.set_id(absl::StrCat(plan.application, "/", plan.revision));
  out.set_application(plan.application);
  out.set_plan_revision(plan.revision);
  out.set_phase(ToProto(plan.phase));
  for (const std::string& c : result.visit_order) out.add_visited_clusters(c);
  for (const WorkloadTarget& t : plan.targets) {
    pb::WorkloadTarget* w = out.add_targets();
    w->set_workload(t.workload);
    w->set_service(t.service);
    w->set_cluster(t.cluster);
    w->set_node(t.node);
    w->set_pod(t.pod);
    w->set_reservation(ReservationId(plan, t.cluster));
  }
  std::map<std::string, const Channel*> channels;
  for (const Channel& c : app.channels) channels[c.name] = &c;
  for (const ChannelResult& r : plan.channels) {
    pb::ChannelPath* p = out.add_channels();
    p->set_channel(r.channel);
    if (auto it = channels.find(r.channel); it != channels.end()) {
      p->set_from_workload(it->second->from);
      p->set_to_workload(it->second->to);
      p->set_service_class(it->second->service_class == ServiceClass::kAssured
                               ? codeco::common::v1::SERVICE_CLASS_ASSURED
                               : codeco::common::v1::SERVICE_CLASS_BESTEFFORT);
    }
    for (const std::string& c : r.path) p->add_clusters(c);
    p->set_expected_latency_ns(r.expected_latency_ns);
    p->set_max_delay_ns(r.max_delay_ns);
    p->set_min_bandwidth_bps(r.min_bandwidth_bps);
    p->set_satisfied(r.satisfied);
    p->set_target_endpoint(r.target_endpoint);
    p->set_virtual_link_id(r.virtual_link_id);
  }
  for (const PlanAction& a : plan.actions) {
    pb::PlanAction* p = out.add_actions();
    p->set_index(a.index);
    p->set_type(ToProto(a.type));
    p->set_cluster(a.cluster);
    p->set_workload(a.workload);
    p->set_node(a.node);
    p->set_pod(a.pod);
    p->set_channel(a.channel);
    p->set_result(ToProto(a.result));
    if (!a.error.empty()) {
      p->mutable_error()->set_code(codeco::common::v1::ERROR_CODE_ABORTED);
      p->mutable_error()->set_message(a.error);
    }
  }
  for (const auto& [workload, reason] : plan.unplaced) {
    pb::UnplacedWorkload* u = out.add_unplaced();
    u->set_workload(workload);
    u->set_reason(reason);
  }
  if (!plan.error.empty()) {
    out.mutable_error()->set_code(codeco::common::v1::ERROR_CODE_ABORTED);
    out.mutable_error()->set_message(plan.error);
  }
  return out;
}

bool PodEnded(codeco::lms::v1::PodPhase phase) {
  return phase == codeco::lms::v1::POD_PHASE_SUCCEEDED ||
         phase == codeco::lms::v1::POD_PHASE_FAILED;
}

Resources PodRequests(const codeco::lms::v1::Pod& pod) {
  Resources sum;
  for (const codeco::lms::v1::Container& c : pod.containers()) {
    sum +=
        Resources{c.requests().cpu_millicores(), c.requests().memory_bytes(), c.requests().gpu()};
  }
  return sum;
}

}  // namespace codeco::swm
