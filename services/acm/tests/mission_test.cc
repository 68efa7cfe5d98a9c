// Missions of a cluster tree: the root stores them and moves their
// generation only on a change; a relay holds exactly what its upstream sent
// (and keeps it across a restart); a placement addresses clusters by name
// or labels; states from below are shown (PENDING until reported, the
// newest report winning); and a cluster's pass creates, replaces and
// removes mission pods on the nodes with room.
#include <catch2/catch.hpp>

#include "acm/core/cluster_registry.h"
#include "acm/core/mission_relay.h"
#include "acm/core/mission_runner.h"
#include "codeco/common/kv_store.h"
#include "codeco/common/proto_util.h"

namespace codeco::acm {
namespace {

v1::Mission MissionFor(const std::string& name, std::map<std::string, std::string> labels,
                       int replicas = 1, int64_t cpu = 250) {
  v1::Mission m;
  m.mutable_metadata()->set_name(name);
  for (const auto& [k, v] : labels)
    (*m.mutable_placement()->mutable_selector()->mutable_match_labels())[k] = v;
  m.mutable_workload()->set_replicas(replicas);
  lms::v1::Container* c = m.mutable_workload()->add_containers();
  c->set_name("app");
  c->set_image("registry.local/app:1");
  c->mutable_requests()->set_cpu_millicores(cpu);
  c->mutable_requests()->set_memory_bytes(64 << 20);
  return m;
}

TreeMember Leaf(const std::string& name, const std::string& region) {
  common::v1::ClusterLabels labels;
  labels.set_region(region);
  labels.set_tier(common::v1::TIER_FAR_EDGE);
  return TreeMemberOf(name, {}, labels);
}

v1::ApplyMissionRequest Apply(v1::Mission m) {
  v1::ApplyMissionRequest r;
  *r.mutable_mission() = std::move(m);
  return r;
}

lms::v1::Node Node(const std::string& name, int64_t free_cpu, bool ready = true) {
  lms::v1::Node n;
  n.set_name(name);
  n.set_condition(ready ? lms::v1::NODE_CONDITION_READY : lms::v1::NODE_CONDITION_NOT_READY);
  n.mutable_allocatable()->set_cpu_millicores(4000);
  n.mutable_allocatable()->set_memory_bytes(8LL << 30);
  n.mutable_requested()->set_cpu_millicores(4000 - free_cpu);
  return n;
}

lms::v1::Pod MissionPod(const std::string& name, const std::string& mission, int64_t generation,
                        const std::string& node, lms::v1::PodPhase phase) {
  lms::v1::Pod p;
  p.set_name(name);
  (*p.mutable_labels())[kMissionLabel] = mission;
  (*p.mutable_labels())[kMissionGenerationLabel] = std::to_string(generation);
  p.set_node_name(node);
  p.set_phase(phase);
  return p;
}

TEST_CASE("the root stores a mission and moves its generation only when it changes") {
  auto kv = NewInMemoryKvStore({kMissionFamily});
  SimulatedClock clock(absl::FromUnixSeconds(1000));
  MissionRelay root(*kv, clock, /*root=*/true);

  auto created = root.Apply(Apply(MissionFor("camera", {{"tier", "far-edge"}})));
  REQUIRE(created.ok());
  CHECK(created->created());
  CHECK(created->changed());
  CHECK(created->mission().generation() == 1);

  auto again = root.Apply(Apply(MissionFor("camera", {{"tier", "far-edge"}})));
  REQUIRE(again.ok());
  CHECK_FALSE(again->created());
  CHECK_FALSE(again->changed());
  CHECK(again->mission().generation() == 1);

  clock.Advance(absl::Seconds(5));
  auto grown = root.Apply(Apply(MissionFor("camera", {{"tier", "far-edge"}}, 2)));
  REQUIRE(grown.ok());
  CHECK(grown->changed());
  CHECK(grown->mission().generation() == 2);
  CHECK(grown->mission().metadata().uid() == created->mission().metadata().uid());
  CHECK(FromProtoTimestamp(grown->mission().metadata().create_time()) ==
        absl::FromUnixSeconds(1000));

  v1::DeleteMissionRequest del;
  del.set_name("camera");
  CHECK(root.Delete(del).ok());
  CHECK(absl::IsNotFound(root.Delete(del)));
}

TEST_CASE("a bad mission is refused naming its field and nothing is stored") {
  auto kv = NewInMemoryKvStore({kMissionFamily});
  SimulatedClock clock;
  MissionRelay root(*kv, clock, /*root=*/true);
  struct Case {
    std::function<void(v1::Mission&)> spoil;
    std::string field;
  };
  std::vector<Case> cases = {
      {[](v1::Mission& m) { m.mutable_metadata()->set_name("Bad_Name"); }, "mission.metadata.name"},
      {[](v1::Mission& m) { m.mutable_placement()->Clear(); }, "mission.placement"},
      {[](v1::Mission& m) { m.mutable_placement()->add_clusters("no such/name"); },
       "mission.placement.clusters[0]"},
      {[](v1::Mission& m) { m.mutable_workload()->set_replicas(0); }, "mission.workload.replicas"},
      {[](v1::Mission& m) { m.mutable_workload()->clear_containers(); },
       "mission.workload.containers"},
      {[](v1::Mission& m) { m.mutable_workload()->mutable_containers(0)->clear_image(); },
       "mission.workload.containers[0].image"},
      {[](v1::Mission& m) {
         m.mutable_workload()->mutable_containers(0)->mutable_requests()->set_cpu_millicores(-1);
       },
       "mission.workload.containers[0].requests.cpu_millicores"},
      {[](v1::Mission& m) { (*m.mutable_workload()->mutable_labels())["codeco.io/x"] = "y"; },
       "mission.workload.labels"},
      {[](v1::Mission& m) {
         (*m.mutable_workload()->mutable_containers(0)->mutable_env())["BLOB"] =
             std::string(kMaxMissionBytes, 'x');
       },
       "mission: "},
      {[](v1::Mission& m) {
         auto* e = m.mutable_placement()->mutable_selector()->add_match_expressions();
         e->set_key("region");
         e->set_op(common::v1::LABEL_SELECTOR_OPERATOR_IN);
       },
       "mission.placement.selector.match_expressions[0].values"},
  };
  for (const Case& c : cases) {
    v1::Mission m = MissionFor("camera", {{"tier", "far-edge"}});
    c.spoil(m);
    auto applied = root.Apply(Apply(m));
    INFO(c.field);
    REQUIRE(absl::IsInvalidArgument(applied.status()));
    CHECK(applied.status().message().find(c.field) != std::string_view::npos);
  }
  auto listed = root.List({}, {});
  REQUIRE(listed.ok());
  CHECK(listed->missions().empty());
}

TEST_CASE("the root refuses a mission past its limit and still takes changes") {
  auto kv = NewInMemoryKvStore({kMissionFamily});
  SimulatedClock clock;
  MissionRelay root(*kv, clock, /*root=*/true, {.max_missions = 2});
  REQUIRE(root.Apply(Apply(MissionFor("a", {{"tier", "edge"}}))).ok());
  REQUIRE(root.Apply(Apply(MissionFor("b", {{"tier", "edge"}}))).ok());
  CHECK(absl::IsResourceExhausted(root.Apply(Apply(MissionFor("c", {{"tier", "edge"}}))).status()));
  CHECK(root.Apply(Apply(MissionFor("b", {{"tier", "cloud"}}))).ok());
}

TEST_CASE("a placement addresses clusters by name and by labels") {
  v1::Mission m = MissionFor("camera", {{"tier", "far-edge"}, {"region", "eu-north"}});
  CHECK(Addresses(m.placement(), Leaf("leaf-a1", "eu-north")));
  CHECK_FALSE(Addresses(m.placement(), Leaf("leaf-c1", "eu-south")));
  m.mutable_placement()->add_clusters("leaf-c1");
  CHECK(Addresses(m.placement(), Leaf("leaf-c1", "eu-south")));
  // match_expressions: NotIn.
  v1::Mission not_south = MissionFor("x", {});
  auto* e = not_south.mutable_placement()->mutable_selector()->add_match_expressions();
  e->set_key("region");
  e->set_op(common::v1::LABEL_SELECTOR_OPERATOR_NOT_IN);
  e->add_values("eu-south");
  CHECK(Addresses(not_south.placement(), Leaf("leaf-a1", "eu-north")));
  CHECK_FALSE(Addresses(not_south.placement(), Leaf("leaf-c1", "eu-south")));
}

TEST_CASE("a relay holds exactly what its upstream sent and keeps it across a restart") {
  auto kv = NewInMemoryKvStore({kMissionFamily});
  SimulatedClock clock;
  google::protobuf::RepeatedPtrField<v1::Mission> sent;
  *sent.Add() = MissionFor("camera", {{"tier", "far-edge"}});
  *sent.Add() = MissionFor("sensor", {{"region", "eu-north"}});
  {
    MissionRelay relay(*kv, clock, /*root=*/false);
    CHECK(absl::IsFailedPrecondition(relay.Apply(Apply(MissionFor("x", {{"a", "b"}}))).status()));
    auto changed = relay.ReplaceFromUpstream(sent);
    REQUIRE(changed.ok());
    CHECK(*changed == 2);
    auto same = relay.ReplaceFromUpstream(sent);
    REQUIRE(same.ok());
    CHECK(*same == 0);
  }
  MissionRelay restarted(*kv, clock, /*root=*/false);
  auto held = restarted.MissionsFor({Leaf("leaf-a1", "eu-north")});
  REQUIRE(held.ok());
  CHECK(held->size() == 2);
  auto south = restarted.MissionsFor({Leaf("leaf-c1", "eu-south")});
  REQUIRE(south.ok());
  REQUIRE(south->size() == 1);
  CHECK((*south)[0].metadata().name() == "camera");
  // The upstream withdrew one.
  sent.RemoveLast();
  auto withdrawn = restarted.ReplaceFromUpstream(sent);
  REQUIRE(withdrawn.ok());
  CHECK(*withdrawn == 1);
  CHECK(restarted.MissionsFor({Leaf("leaf-a1", "eu-north")})->size() == 1);
}

TEST_CASE(
    "the root shows each addressed cluster PENDING until it reports and the newest report wins") {
  auto kv = NewInMemoryKvStore({kMissionFamily});
  SimulatedClock clock(absl::FromUnixSeconds(100));
  MissionRelay root(*kv, clock, /*root=*/true);
  REQUIRE(root.Apply(Apply(MissionFor("camera", {{"region", "eu-north"}}))).ok());
  std::vector<TreeMember> known = {Leaf("leaf-a1", "eu-north"), Leaf("leaf-a2", "eu-north"),
                                   Leaf("leaf-c1", "eu-south")};
  auto state = [](const std::string& cluster, v1::MissionPhase phase, int64_t at) {
    v1::MissionClusterStatus s;
    s.set_mission("camera");
    s.set_cluster(cluster);
    s.set_phase(phase);
    *s.mutable_report_time() = ToProtoTimestamp(absl::FromUnixSeconds(at));
    return s;
  };
  google::protobuf::RepeatedPtrField<v1::MissionClusterStatus> from_site_a, from_elsewhere;
  *from_site_a.Add() = state("leaf-a1", v1::MISSION_PHASE_RUNNING, 200);
  *from_site_a.Add() = state("leaf-a2", v1::MISSION_PHASE_RECEIVED, 200);
  *from_elsewhere.Add() = state("leaf-a2", v1::MISSION_PHASE_RUNNING, 150);  // older
  root.RecordReport("site-a", from_site_a);
  root.RecordReport("region", from_elsewhere);

  v1::GetMissionRequest get;
  get.set_name("camera");
  auto got = root.Get(get, known);
  REQUIRE(got.ok());
  REQUIRE(got->mission().status_size() == 2);  // leaf-c1 is not addressed
  CHECK(got->mission().status(0).cluster() == "leaf-a1");
  CHECK(got->mission().status(0).phase() == v1::MISSION_PHASE_RUNNING);
  CHECK(got->mission().status(1).phase() == v1::MISSION_PHASE_RECEIVED);

  root.ForgetReporter("site-a");
  root.ForgetReporter("region");
  got = root.Get(get, known);
  REQUIRE(got.ok());
  REQUIRE(got->mission().status_size() == 2);
  CHECK(got->mission().status(0).phase() == v1::MISSION_PHASE_PENDING);
  CHECK(got->mission().status(1).phase() == v1::MISSION_PHASE_PENDING);
}

TEST_CASE("a relay sends up its own states and those from below") {
  auto kv = NewInMemoryKvStore({kMissionFamily});
  SimulatedClock clock;
  MissionRelay relay(*kv, clock, /*root=*/false);
  v1::MissionClusterStatus own;
  own.set_mission("camera");
  own.set_cluster("site-a");
  relay.RecordOwnStates(Leaf("site-a", "eu-west"), {own});
  google::protobuf::RepeatedPtrField<v1::MissionClusterStatus> below;
  below.Add()->set_mission("camera");
  below.Mutable(0)->set_cluster("leaf-a1");
  relay.RecordReport("leaf-a1", below);
  auto up = relay.StatesToRelay();
  REQUIRE(up.size() == 2);
  CHECK(up[0].cluster() == "leaf-a1");
  CHECK(up[1].cluster() == "site-a");
}

TEST_CASE("a heartbeat's tree report is checked before anything is recorded") {
  v1::HeartbeatRequest beat;
  beat.set_cluster_name("site-a");
  v1::SubtreeCluster* leaf = beat.add_subtree();
  leaf->set_name("leaf-a1");
  leaf->set_parent("site-a");
  v1::MissionClusterStatus* s = beat.add_mission_status();
  s->set_mission("camera");
  s->set_cluster("leaf-a1");
  CHECK(ValidateTreeReport(beat).ok());
  s->set_cluster("leaf-zz");
  CHECK(ValidateTreeReport(beat).message().find("mission_status[0].cluster") != std::string::npos);
  s->set_cluster("leaf-a1");
  beat.add_subtree()->CopyFrom(*leaf);
  CHECK(ValidateTreeReport(beat).message().find("subtree[1].name") != std::string::npos);
}

TEST_CASE("a cluster's pass creates mission pods where they fit and reports where it stands") {
  v1::Mission m = MissionFor("camera", {{"tier", "far-edge"}}, /*replicas=*/2, /*cpu=*/1000);
  m.set_generation(3);
  std::vector<lms::v1::Node> nodes = {Node("n1", 1500), Node("n2", 3000), Node("n3", 4000, false)};
  MissionPodPlan plan = PlanMissionPods("leaf-a1", {m}, {}, nodes, absl::FromUnixSeconds(5));
  REQUIRE(plan.create.size() == 2);
  // Most free CPU after landing: n2 first (2000 left), then n2 again (1000) vs n1 (500).
  CHECK(plan.create[0].node_name() == "n2");
  CHECK(plan.create[1].node_name() == "n2");
  CHECK(plan.create[0].name() == "camera-3-0");
  CHECK(plan.create[0].labels().at(kMissionLabel) == "camera");
  CHECK(plan.create[0].labels().at(kMissionGenerationLabel) == "3");
  REQUIRE(plan.states.size() == 1);
  CHECK(plan.states[0].phase() == v1::MISSION_PHASE_RECEIVED);
  CHECK(plan.states[0].desired_pods() == 2);

  // Both run: RUNNING, nothing to do.
  std::vector<lms::v1::Pod> pods = {
      MissionPod("camera-3-0", "camera", 3, "n2", lms::v1::POD_PHASE_RUNNING),
      MissionPod("camera-3-1", "camera", 3, "n2", lms::v1::POD_PHASE_RUNNING)};
  plan = PlanMissionPods("leaf-a1", {m}, pods, nodes, absl::FromUnixSeconds(6));
  CHECK(plan.create.empty());
  CHECK(plan.remove.empty());
  CHECK(plan.states[0].phase() == v1::MISSION_PHASE_RUNNING);
  CHECK(plan.states[0].running_pods() == 2);

  // A failed pod goes (and is created again next pass); an old generation
  // and a withdrawn mission's pod go; a pod of another owner stays.
  pods[1].set_phase(lms::v1::POD_PHASE_FAILED);
  pods.push_back(MissionPod("camera-2-0", "camera", 2, "n1", lms::v1::POD_PHASE_RUNNING));
  pods.push_back(MissionPod("old-1-0", "old", 1, "n1", lms::v1::POD_PHASE_RUNNING));
  lms::v1::Pod app_pod;
  app_pod.set_name("shop-web-0");
  (*app_pod.mutable_labels())["codeco.io/application"] = "shop";
  pods.push_back(app_pod);
  plan = PlanMissionPods("leaf-a1", {m}, pods, nodes, absl::FromUnixSeconds(7));
  std::set<std::string> removed(plan.remove.begin(), plan.remove.end());
  CHECK(removed == std::set<std::string>{"camera-3-1", "camera-2-0", "old-1-0"});
  CHECK(plan.states[0].running_pods() == 1);
}

TEST_CASE("a mission pod no node has room for waits and says why") {
  v1::Mission m = MissionFor("camera", {{"tier", "far-edge"}}, 1, /*cpu=*/3000);
  m.set_generation(1);
  MissionPodPlan plan =
      PlanMissionPods("leaf-a1", {m}, {}, {Node("n1", 1000)}, absl::FromUnixSeconds(5));
  CHECK(plan.create.empty());
  REQUIRE(plan.states.size() == 1);
  CHECK(plan.states[0].phase() == v1::MISSION_PHASE_RECEIVED);
  CHECK(plan.states[0].message().find("no ready node has room for 3 CPU") != std::string::npos);
}

}  // namespace
}  // namespace codeco::acm
