// Missions in codecoctl: the Mission manifest parser (the shipped example,
// errors naming their YAML paths, no crash on mangled input) and the tables
// `get missions` prints, all without a server.
#include "missions.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <random>
#include <sstream>

#include "codeco/common/proto_util.h"

namespace codeco::ctl {
namespace {

constexpr char kMission[] = R"(apiVersion: codeco.io/v1
kind: Mission
metadata:
  name: m
spec:
  placement:
    clusters: [leaf-a1]
    matchExpressions: [{key: region, operator: In, values: [eu-north, eu-south]}]
  workload:
    containers:
      - {name: c, image: img:1}
)";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The error lines of a refused document.
std::string Errors(const std::string& text) {
  absl::StatusOr<acm::v1::Mission> m = ParseMissionManifest(text);
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(m.status().message());
}

// `kMission` with `from` replaced by `to` (which must be there).
std::string Replace(const std::string& from, const std::string& to) {
  std::string text = kMission;
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

TEST_CASE("the camera-analytics example parses into the mission ApplyMission takes") {
  const std::string text =
      ReadAll(std::string(CODECO_EXAMPLES_DIR) + "/missions/camera-analytics.yaml");
  absl::StatusOr<acm::v1::Mission> m = ParseMissionManifest(text);
  INFO(m.status().ToString());
  REQUIRE(m.ok());
  CHECK(m->metadata().name() == "camera-analytics");
  CHECK(m->placement().clusters().empty());
  const auto& labels = m->placement().selector().match_labels();
  CHECK(labels.size() == 2);
  CHECK(labels.at("tier") == "far-edge");
  CHECK(labels.at("region") == "eu-north");
  CHECK(m->workload().replicas() == 1);
  CHECK(m->workload().labels().at("app") == "camera");
  REQUIRE(m->workload().containers_size() == 1);
  const lms::v1::Container& c = m->workload().containers(0);
  CHECK(c.name() == "analytics");
  CHECK(c.image() == "registry.example.org/codeco/camera-analytics:1.0");
  CHECK(c.args_size() == 2);
  CHECK(c.env().at("MODEL") == "yolo-nano");
  CHECK(c.requests().cpu_millicores() == 250);
  CHECK(c.requests().memory_bytes() == 128 << 20);
  CHECK(m->generation() == 0);
  CHECK(m->status().empty());

  // `apply -f` sends it to ApplyMission (not ApplyApplication).
  std::vector<ManifestDocument> docs = SplitManifest(text);
  REQUIRE(docs.size() == 1);
  CHECK(docs[0].kind == kMissionKind);
  CHECK(docs[0].name == "camera-analytics");
  CHECK_FALSE(docs[0].application_model);
}

TEST_CASE("a mission names clusters or selects them with expressions and defaults to 1 replica") {
  absl::StatusOr<acm::v1::Mission> m = ParseMissionManifest(kMission);
  INFO(m.status().ToString());
  REQUIRE(m.ok());
  CHECK(m->placement().clusters(0) == "leaf-a1");
  REQUIRE(m->placement().selector().match_expressions_size() == 1);
  const auto& req = m->placement().selector().match_expressions(0);
  CHECK(req.key() == "region");
  CHECK(req.op() == common::v1::LABEL_SELECTOR_OPERATOR_IN);
  CHECK(req.values_size() == 2);
  CHECK(m->workload().replicas() == 1);
  // Named clusters only: no selector at all.
  absl::StatusOr<acm::v1::Mission> named = ParseMissionManifest(Replace(
      "    matchExpressions: [{key: region, operator: In, values: [eu-north, eu-south]}]\n", ""));
  REQUIRE(named.ok());
  CHECK_FALSE(named->placement().has_selector());
  CHECK(named->placement().clusters_size() == 1);
  for (const auto& [name, op] :
       std::vector<std::pair<std::string, common::v1::LabelSelectorOperator>>{
           {"NotIn", common::v1::LABEL_SELECTOR_OPERATOR_NOT_IN},
           {"Exists", common::v1::LABEL_SELECTOR_OPERATOR_EXISTS},
           {"DoesNotExist", common::v1::LABEL_SELECTOR_OPERATOR_DOES_NOT_EXIST}}) {
    absl::StatusOr<acm::v1::Mission> other =
        ParseMissionManifest(Replace("operator: In", "operator: " + name));
    REQUIRE(other.ok());
    CHECK(other->placement().selector().match_expressions(0).op() == op);
  }
}

TEST_CASE("bad mission documents are refused with their YAML field paths") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {Replace("image: img:1}", "image: img:1, resources: {cpu: abc}}"),
       "spec.workload.containers[0].resources.cpu: \"abc\" is not a valid quantity"},
      {Replace("image: img:1}", "image: img:1, resources: {memory: 12XB}}"),
       "spec.workload.containers[0].resources.memory: "},
      {Replace("image: img:1}", "image: img:1, resources: {cpus: 1}}"),
       "spec.workload.containers[0].resources.cpus: unknown key"},
      {Replace("image: img:1}", "image: img:1, ports: [80]}"),
       "spec.workload.containers[0].ports: unknown key"},
      {Replace("{name: c, image: img:1}", "{name: c}"),
       "spec.workload.containers[0].image: is required"},
      {Replace("  workload:\n", "  workload:\n    replicas: two\n"),
       "spec.workload.replicas: not a whole number: \"two\""},
      {Replace("  workload:\n", "  workload:\n    replicas: 0\n"), "spec.workload.replicas: "},
      {Replace("      - {name: c, image: img:1}\n", "      []\n"),
       "spec.workload.containers: must be a non-empty list"},
      {Replace("operator: In", "operator: in"),
       "spec.placement.matchExpressions[0].operator: must be In, NotIn, Exists or DoesNotExist"},
      {Replace("{key: region, operator: In,", "{operator: In,"),
       "spec.placement.matchExpressions[0].key: is required"},
      {Replace("    clusters: [leaf-a1]\n    matchExpressions: [{key: region, operator: In, "
               "values: [eu-north, eu-south]}]\n",
               "    matchLabels: {}\n"),
       "spec.placement: names no cluster and selects none"},
      {Replace("    clusters: [leaf-a1]\n", "    clusters: leaf-a1\n"),
       "spec.placement.clusters: must be a list of strings"},
      {Replace("    clusters: [leaf-a1]\n", "    selector: {tier: edge}\n"),
       "spec.placement.selector: unknown key"},
      {Replace("kind: Mission", "kind: Missions"), "kind: must be Mission, not \"Missions\""},
      {Replace("apiVersion: codeco.io/v1\n", ""), "apiVersion: is required"},
      {Replace("  name: m\n", "  nme: m\n"), "metadata.name: is required"},
      {Replace("spec:\n", "status: {}\nspec:\n"), "status: unknown key"},
      {"kind: Mission\n  bad: [", "(document): not valid YAML (line"},
      {"- a list", "(document): must be a mapping"},
  };
  for (const auto& [text, expected] : cases) {
    INFO(text);
    const std::string errors = Errors(text);
    INFO(errors);
    CHECK_THAT(errors, Catch::Contains(expected));
  }
  // Every problem at once, one per line.
  std::string text = Replace("{name: c, image: img:1}", "{name: c, cpu: 1}");
  text.replace(text.find("kind: Mission"), 13, "kind: Job");
  const std::string several = Errors(text);
  CHECK_THAT(several, Catch::Contains("kind: must be Mission"));
  CHECK_THAT(several, Catch::Contains("\nspec.workload.containers[0].image: is required"));
  CHECK_THAT(several, Catch::Contains("\nspec.workload.containers[0].cpu: unknown key"));
}

TEST_CASE("mangled mission documents never crash the parser") {
  std::mt19937_64 rng(20270115);
  const std::string alphabet = ":-[]{},\"'#&*!|> \n\tax0.%";
  int refused = 0;
  for (int round = 0; round < 500; ++round) {
    std::string text = kMission;
    for (int edits = 1 + static_cast<int>(rng() % 4); edits > 0; --edits) {
      const size_t at = rng() % text.size();
      if (rng() % 2 == 0) {
        text[at] = alphabet[rng() % alphabet.size()];
      } else {
        text.erase(at, 1 + rng() % 5);
      }
      if (text.empty()) text = "x";
    }
    absl::StatusOr<acm::v1::Mission> m = ParseMissionManifest(text);
    if (!m.ok()) {
      ++refused;
      CHECK(m.status().code() == absl::StatusCode::kInvalidArgument);
    }
  }
  CHECK(refused > 100);
}

TEST_CASE("apply says whether a mission was created configured or left unchanged") {
  acm::v1::ApplyMissionResponse r;
  r.mutable_mission()->mutable_metadata()->set_name("m");
  r.mutable_mission()->set_generation(1);
  r.set_created(true);
  r.set_changed(true);
  CHECK(MissionApplyLine(r) == "mission/m created (generation 1)");
  r.set_created(false);
  r.mutable_mission()->set_generation(2);
  CHECK(MissionApplyLine(r) == "mission/m configured (generation 2)");
  r.set_changed(false);
  CHECK(MissionApplyLine(r) == "mission/m unchanged (generation 2)");
}

TEST_CASE("ages read as kubectl prints them") {
  const absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  CHECK(AgeText(absl::UnixEpoch(), now) == "-");
  CHECK(AgeText(now - absl::Seconds(45), now) == "45s");
  CHECK(AgeText(now - absl::Seconds(119), now) == "119s");
  CHECK(AgeText(now - absl::Minutes(12), now) == "12m");
  CHECK(AgeText(now - absl::Hours(5), now) == "5h");
  CHECK(AgeText(now - absl::Hours(72), now) == "3d");
  CHECK(AgeText(now + absl::Seconds(3), now) == "0s");  // a clock ahead of ours
}

// A status entry of `m`.
void AddStatus(acm::v1::Mission& m, const std::string& cluster, acm::v1::MissionPhase phase,
               int64_t generation, int running, int desired, absl::Time reported,
               const std::string& message = "") {
  acm::v1::MissionClusterStatus* s = m.add_status();
  s->set_mission(m.metadata().name());
  s->set_cluster(cluster);
  s->set_phase(phase);
  s->set_generation(generation);
  s->set_running_pods(running);
  s->set_desired_pods(desired);
  s->set_message(message);
  if (reported != absl::UnixEpoch()) *s->mutable_report_time() = ToProtoTimestamp(reported);
}

// The words of the line of `table` that starts with `first`.
std::vector<std::string> Row(const std::string& table, const std::string& first) {
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> out;
    for (std::string w; words >> w;) out.push_back(w);
    if (!out.empty() && out[0] == first) return out;
  }
  return {};
}

TEST_CASE("get missions counts each mission's clusters by phase") {
  const absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  acm::v1::ListMissionsResponse list;
  acm::v1::Mission& m = *list.add_missions();
  m.mutable_metadata()->set_name("camera-analytics");
  *m.mutable_metadata()->mutable_create_time() = ToProtoTimestamp(now - absl::Minutes(7));
  m.set_generation(2);
  AddStatus(m, "leaf-b1", acm::v1::MISSION_PHASE_RUNNING, 2, 1, 1, now - absl::Seconds(4));
  AddStatus(m, "leaf-a1", acm::v1::MISSION_PHASE_RUNNING, 2, 1, 1, now - absl::Seconds(3));
  AddStatus(m, "leaf-a2", acm::v1::MISSION_PHASE_RUNNING, 1, 1, 1, now - absl::Minutes(3));
  AddStatus(m, "leaf-a3", acm::v1::MISSION_PHASE_PENDING, 0, 0, 0, absl::UnixEpoch());
  AddStatus(m, "leaf-b2", acm::v1::MISSION_PHASE_FAILED, 2, 0, 1, now - absl::Seconds(9),
            "no node fits a pod:\ncpu 250m");
  AddStatus(m, "leaf-b3", acm::v1::MISSION_PHASE_RECEIVED, 2, 0, 1, now - absl::Seconds(2));
  acm::v1::Mission& empty = *list.add_missions();
  empty.mutable_metadata()->set_name("nothing-yet");
  empty.set_generation(1);

  const std::string table = MissionsTable(list, now);
  INFO(table);
  CHECK(Row(table, "NAME") == std::vector<std::string>{"NAME", "GENERATION", "CLUSTERS", "RUNNING",
                                                       "PENDING", "FAILED", "AGE"});
  // leaf-a2 runs generation 1: not running this one.
  CHECK(Row(table, "camera-analytics") ==
        std::vector<std::string>{"camera-analytics", "2", "6", "2/6", "1", "1", "7m"});
  CHECK(Row(table, "nothing-yet") ==
        std::vector<std::string>{"nothing-yet", "1", "0", "0/0", "0", "0", "-"});

  const std::string clusters = MissionClustersTable(m, now);
  INFO(clusters);
  CHECK(Row(clusters, "CLUSTER") ==
        std::vector<std::string>{"CLUSTER", "PHASE", "GENERATION", "PODS", "REPORTED", "MESSAGE"});
  CHECK(Row(clusters, "leaf-a1") ==
        std::vector<std::string>{"leaf-a1", "Running", "2", "1/1", "3s", "ago", "-"});
  CHECK(Row(clusters, "leaf-a2") ==
        std::vector<std::string>{"leaf-a2", "Running", "1", "1/1", "3m", "ago", "-"});
  CHECK(Row(clusters, "leaf-a3") ==
        std::vector<std::string>{"leaf-a3", "Pending", "-", "0/0", "-", "-"});
  CHECK(Row(clusters, "leaf-b2") == std::vector<std::string>{"leaf-b2", "Failed", "2", "0/1", "9s",
                                                             "ago", "no", "node", "fits", "a",
                                                             "pod:", "cpu", "250m"});
  CHECK(Row(clusters, "leaf-b3")[1] == "Received");
  // By cluster name.
  CHECK(clusters.find("leaf-a1") < clusters.find("leaf-a2"));
  CHECK(clusters.find("leaf-a3") < clusters.find("leaf-b1"));
}

}  // namespace
}  // namespace codeco::ctl
