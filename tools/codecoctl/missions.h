#pragma once
// Missions of a cluster tree (codeco.acm.v1.Mission) in codecoctl:
//   apply -f FILE        a document of kind Mission goes to the hub ACM's ApplyMission
//   get missions [NAME] [--cluster C] [-o table|yaml|json]
//   delete mission NAME  (and the Mission documents of delete -f FILE)
// The manifest parser and the tables are pure functions, tested without a
// server; the rest only calls the ACM and prints.

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cli.h"
#include "codeco/acm/v1/acm_service.grpc.pb.h"
#include "codeco/acm/v1/mission.pb.h"

namespace codeco::ctl {

/// The `kind` of a mission document.
inline constexpr char kMissionKind[] = "Mission";
/// The `apiVersion` a mission document must have.
inline constexpr char kMissionApiVersion[] = "codeco.io/v1";

/// A Mission document as ApplyMission takes it:
///   apiVersion: codeco.io/v1, kind: Mission, metadata: {name, labels},
///   spec.placement: {clusters, matchLabels, matchExpressions: [{key,
///     operator: In|NotIn|Exists|DoesNotExist, values}]} (at least one),
///   spec.workload: {replicas (default 1), labels, containers: [{name, image,
///     command, args, env, resources: {cpu, memory}}]}.
/// INVALID_ARGUMENT listing every problem on its own line, each starting with
/// its YAML path (`spec.workload.containers[0].resources.cpu: ...`); unknown
/// keys are errors. Ranges (replicas 1-100, name length, ...) are the hub's to
/// check.
absl::StatusOr<acm::v1::Mission> ParseMissionManifest(const std::string& yaml_text);

/// "mission/NAME created|configured|unchanged (generation N)".
std::string MissionApplyLine(const acm::v1::ApplyMissionResponse& response);

/// How long ago `then` was, as kubectl prints ages ("45s", "12m", "5h",
/// "3d"); "-" for the Unix epoch (an unset timestamp).
std::string AgeText(absl::Time then, absl::Time now);

/// `get missions`: NAME, GENERATION, CLUSTERS (status entries: clusters
/// addressed or still reporting), RUNNING (clusters running every pod of the
/// current generation / CLUSTERS), PENDING, FAILED, AGE.
std::string MissionsTable(const acm::v1::ListMissionsResponse& missions, absl::Time now);

/// One row per cluster of `mission`'s status, by name: CLUSTER, PHASE,
/// GENERATION, PODS (running/desired), REPORTED (age of the report), MESSAGE.
std::string MissionClustersTable(const acm::v1::Mission& mission, absl::Time now);

/// `apply -f`: document `doc` (kind Mission) of `file` parsed and sent to
/// ApplyMission (with --dry-run only parsed); prints the outcome, or the
/// response as -o asks. False when it was not applied (the reason on stderr).
bool ApplyMissionDocument(acm::v1::AcmService::Stub& acm, const std::string& file,
                          const ManifestDocument& doc, bool several, const Args& args,
                          Output output);

/// `delete mission NAME`, `delete -f`: DeleteMission; prints the outcome.
/// False when the ACM refused (the reason on stderr).
bool DeleteMissionNamed(acm::v1::AcmService::Stub& acm, const std::string& name, const Args& args);

/// `get missions [NAME] [--cluster C]`: the hub ACM's missions (with
/// --cluster, that cluster's own ACM: the missions relayed to it, with its
/// subtree's status; --acm ADDR asks any ACM). Returns the exit code.
int GetMissions(const Args& args, Output output);

}  // namespace codeco::ctl
