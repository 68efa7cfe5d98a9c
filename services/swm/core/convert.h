#pragma once
// Translation between the SWM protos (codeco.acm.v1.Application,
// codeco.swm.v1.AssignmentPlan) and the placement core's types. Untrusted
// input is checked here with field paths rooted at the request
// (`application.spec.services[1].replicas: ...`).

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "acm/core/application_bounds.h"
#include "codeco/acm/v1/application.pb.h"
#include "codeco/lms/v1/lms.pb.h"
#include "codeco/swm/v1/plan.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "swm/core/execution.h"
#include "swm/core/solve.h"

namespace codeco::swm {

/// Most replicas one service may ask for in one placement: ACM's cap.
inline constexpr int kMaxReplicas = codeco::acm::kMaxServiceReplicas;

/// The core application of `app`: one Workload per replica named
/// "<service>-<i>" (replicas 0 = unset = 1), the intents copied onto every
/// workload, and each service channel expanded to every (sender replica,
/// receiver replica) pair, each pair needing min_bandwidth / receiver replicas.
/// The spec is first checked against ACM's caps (CheckApplicationBounds: at
/// most kMaxReplicas per service, the workload and channel counts it would
/// expand to, overflow-free request totals), so nothing large is allocated.
/// `clusters` are the neighborhood's: an intent origin with a latency bound
/// must be one of them. INVALID_ARGUMENT lists every bad field.
absl::StatusOr<Application> ToCoreApplication(const codeco::acm::v1::Application& app,
                                              const std::set<std::string>& clusters);

/// The application's name: spec.app_name, else metadata.name.
std::string ApplicationName(const codeco::acm::v1::Application& app);

/// Pod label naming the plan a pod was created by (value: LabelValue of the
/// plan id "<application>/<revision>").
inline constexpr char kPlanLabel[] = "codeco.io/plan";
/// Pod label naming the reservation a pod was created under (value:
/// LabelValue of the reservation id "<application>/<revision>/<cluster>").
inline constexpr char kReservationLabel[] = "codeco.io/reservation";
/// Annotation PodTemplate puts on the pod of a stateful service ("true"):
/// an MC swm holds such a pod rather than move it on its own.
inline constexpr char kStatefulAnnotation[] = "codeco.io/stateful";

/// `id` as a label value: every "/" written "." ("shop/3/edge" ->
/// "shop.3.edge"), so that a reconciler can match pods to plans.
std::string LabelValue(const std::string& id);

/// Sum of the requests of a pod's containers.
Resources PodRequests(const codeco::lms::v1::Pod& pod);

/// True for a pod that has ended (Succeeded or Failed): it holds no room.
bool PodEnded(codeco::lms::v1::PodPhase phase);

/// The LMS pod that runs workload `target` of `app` in `target.cluster`
/// under plan `plan_revision`: one container from the service spec (image,
/// command, args, env, ports, limits; requests = target.requests) and the
/// labels codeco.io/application, /service, /workload, /plan-revision, /plan
/// and /reservation.
codeco::lms::v1::Pod PodTemplate(const codeco::acm::v1::Application& app,
                                 const WorkloadTarget& target, int64_t plan_revision);

/// The AssignmentPlan resource for core `plan` of `app` (placed by `result`).
codeco::swm::v1::AssignmentPlan ToProtoPlan(const AssignmentPlan& plan, const Application& app,
                                            const PlacementResult& result);

/// A Timestamp for `t`.
google::protobuf::Timestamp ToTimestamp(absl::Time t);

}  // namespace codeco::swm
