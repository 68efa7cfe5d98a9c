#pragma once
// What a cluster does about the missions addressed to it: each mission runs
// `replicas` pods of its containers, named <mission>-<generation>-<index>
// and labelled codeco.io/mission and codeco.io/mission-generation. A pass
// compares those with the pods the cluster's LMS reports and plans the
// difference: a missing pod is created on the ready, schedulable node with
// the most free CPU after it lands (requests must fit CPU and memory); the
// pods of an older generation, of a mission no longer addressed here, and
// pods that ended (Failed, Succeeded) are deleted. It also says where each
// mission stands (MissionClusterStatus). Pure: the ACM agent lists pods and
// nodes, runs the plan against the LMS and reports the states up.

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "codeco/acm/v1/mission.pb.h"
#include "codeco/lms/v1/lms.pb.h"

namespace codeco::acm {

/// Pod label naming the mission a pod runs for.
inline constexpr char kMissionLabel[] = "codeco.io/mission";
/// Pod label holding the mission generation the pod runs.
inline constexpr char kMissionGenerationLabel[] = "codeco.io/mission-generation";

/// One pass's plan for a cluster's mission pods.
struct MissionPodPlan {
  /// Pods to create (node_name set).
  std::vector<lms::v1::Pod> create;
  /// Names of pods to delete.
  std::vector<std::string> remove;
  /// The state of every mission addressed to the cluster, as of this pass
  /// (before the plan runs: a pod it creates counts once it runs).
  std::vector<v1::MissionClusterStatus> states;
};

/// Plans the mission pods of `cluster`: `missions` are those addressed to
/// it; `pods` and `nodes` are everything its LMS reports.
MissionPodPlan PlanMissionPods(const std::string& cluster, const std::vector<v1::Mission>& missions,
                               const std::vector<lms::v1::Pod>& pods,
                               const std::vector<lms::v1::Node>& nodes, absl::Time now);

}  // namespace codeco::acm
