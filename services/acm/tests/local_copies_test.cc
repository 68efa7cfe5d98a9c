// An MC's local copies: pushes only move forward, bad pushes name the field
// and store nothing, a sync makes the copies exactly the hub's, and a new
// instance over the same store (a restart) has them all.
#include "acm/core/local_copies.h"

#include <catch2/catch.hpp>

#include "codeco/common/kv_store.h"

namespace codeco::acm {
namespace {

v1::Neighborhood Nb(const std::string& app, int64_t revision,
                    std::vector<std::string> members = {"edge-1", "edge-2"}) {
  v1::Neighborhood nb;
  nb.set_id("nb-" + app);
  nb.set_application(app);
  nb.set_revision(revision);
  for (const auto& m : members) nb.add_members()->set_cluster(m);
  return nb;
}

v1::ClusterAssignment Assignment(const std::string& app, int64_t plan_revision,
                                 const std::string& cluster = "edge-1") {
  v1::ClusterAssignment a;
  a.set_application(app);
  a.set_cluster(cluster);
  a.set_plan_revision(plan_revision);
  auto* pod = a.add_pods();
  pod->set_service("web");
  pod->set_pod(app + "-web-0");
  pod->set_node("worker-1");
  return a;
}

TEST_CASE("neighborhood pushes only move forward and a delete removes the copy") {
  auto kv = NewInMemoryKvStore(LocalCopyColumnFamilies());
  LocalCopies copies(*kv, "edge-1");
  v1::PushNeighborhoodRequest push;
  *push.mutable_neighborhood() = Nb("shop", 2);
  auto r = copies.PushNeighborhood(push);
  REQUIRE(r.ok());
  REQUIRE(r->changed());
  REQUIRE(r->stored_revision() == 2);
  *push.mutable_neighborhood() = Nb("shop", 1, {"edge-9"});  // older: ignored
  r = copies.PushNeighborhood(push);
  REQUIRE_FALSE(r->changed());
  REQUIRE(r->stored_revision() == 2);
  REQUIRE(copies.NeighborhoodRevisions()->at("nb-shop") == 2);

  // Bad pushes name the field and store nothing.
  *push.mutable_neighborhood() = Nb("", 3);
  REQUIRE_THAT(std::string(copies.PushNeighborhood(push).status().message()),
               Catch::StartsWith("neighborhood.application"));
  *push.mutable_neighborhood() = Nb("shop", 0);
  REQUIRE_THAT(std::string(copies.PushNeighborhood(push).status().message()),
               Catch::StartsWith("neighborhood.revision"));
  *push.mutable_neighborhood() = Nb("shop", 3, {""});
  REQUIRE_THAT(std::string(copies.PushNeighborhood(push).status().message()),
               Catch::StartsWith("neighborhood.members[0].cluster"));
  REQUIRE(copies.NeighborhoodRevisions()->at("nb-shop") == 2);

  // A restart (a new instance on the same store) has the copy.
  LocalCopies restarted(*kv, "edge-1");
  REQUIRE(restarted.NeighborhoodRevisions()->at("nb-shop") == 2);
  push.set_deleted(true);
  *push.mutable_neighborhood() = Nb("shop", 2);
  r = restarted.PushNeighborhood(push);
  REQUIRE(r->changed());
  REQUIRE(restarted.NeighborhoodRevisions()->empty());
}

TEST_CASE("assignment pushes are for this cluster and only move forward") {
  auto kv = NewInMemoryKvStore(LocalCopyColumnFamilies());
  LocalCopies copies(*kv, "edge-1");
  v1::PushAssignmentRequest push;
  *push.mutable_assignment() = Assignment("shop", 3);
  REQUIRE(copies.PushAssignment(push)->changed());
  *push.mutable_assignment() = Assignment("shop", 2);
  auto r = copies.PushAssignment(push);
  REQUIRE_FALSE(r->changed());
  REQUIRE(r->stored_plan_revision() == 3);
  *push.mutable_assignment() = Assignment("shop", 4, "edge-2");
  auto wrong = copies.PushAssignment(push);
  REQUIRE(absl::IsInvalidArgument(wrong.status()));
  REQUIRE_THAT(std::string(wrong.status().message()), Catch::StartsWith("assignment.cluster"));
  REQUIRE(copies.GetAssignment("shop")->plan_revision() == 3);
  REQUIRE(copies.AssignmentRevisions()->at("shop") == 3);
  REQUIRE(absl::IsNotFound(copies.GetAssignment("nope").status()));
}

TEST_CASE("a sync makes the copies exactly the hub's") {
  auto kv = NewInMemoryKvStore(LocalCopyColumnFamilies());
  LocalCopies copies(*kv, "edge-1");
  REQUIRE(*copies.SyncNeighborhoods({Nb("a", 1), Nb("b", 1)}) == 2);
  REQUIRE(*copies.SyncNeighborhoods({Nb("a", 1), Nb("b", 1)}) == 0);  // nothing new
  REQUIRE(*copies.SyncNeighborhoods({Nb("b", 2)}) == 2);              // b newer, a gone
  auto revs = *copies.NeighborhoodRevisions();
  REQUIRE(revs == std::map<std::string, int64_t>{{"nb-b", 2}});

  REQUIRE(*copies.SyncAssignments({Assignment("a", 1), Assignment("b", 1)}) == 2);
  v1::ClusterAssignment moved = Assignment("a", 1);
  moved.mutable_pods(0)->set_node("worker-2");  // same plan revision, news all the same
  *moved.mutable_issue_time() = google::protobuf::Timestamp();
  moved.mutable_issue_time()->set_seconds(99);
  REQUIRE(*copies.SyncAssignments({moved, Assignment("b", 1)}) == 1);
  REQUIRE(copies.GetAssignment("a")->pods(0).node() == "worker-2");
  moved.mutable_issue_time()->set_seconds(100);  // only the issue time differs: no write
  REQUIRE(*copies.SyncAssignments({moved, Assignment("b", 1)}) == 0);
  REQUIRE(*copies.SyncAssignments({}) == 2);
  REQUIRE(copies.AssignmentRevisions()->empty());
}

TEST_CASE("a cluster's assignments are its pods with their services and channels") {
  v1::Application app;
  app.mutable_metadata()->set_name("shop");
  app.mutable_status()->set_phase(v1::APPLICATION_PHASE_RUNNING);
  app.mutable_status()->set_plan_revision(7);
  app.mutable_status()->set_observed_spec_revision(2);
  app.mutable_status()->set_neighborhood_id("nb-shop");
  for (auto [service, cluster] :
       std::vector<std::pair<std::string, std::string>>{{"web", "edge-1"}, {"db", "edge-2"}}) {
    auto* s = app.mutable_spec()->add_services();
    s->set_name(service);
    auto* p = app.mutable_status()->add_placements();
    p->set_service(service);
    p->set_cluster(cluster);
    p->set_pod("shop-" + service + "-0");
  }
  auto* channel = app.mutable_spec()->mutable_services(0)->add_channels();
  channel->set_name("web-db");
  channel->set_from_service("web");
  channel->set_to_service("db");
  v1::Application elsewhere = app;
  elsewhere.mutable_metadata()->set_name("other");
  elsewhere.mutable_status()->mutable_placements(0)->set_cluster("edge-2");
  v1::Application deleting = app;
  deleting.mutable_metadata()->set_name("gone");
  deleting.mutable_status()->set_phase(v1::APPLICATION_PHASE_DELETING);

  auto out = AssignmentsFor("edge-1", {app, elsewhere, deleting}, google::protobuf::Timestamp());
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].application() == "shop");
  REQUIRE(out[0].plan_revision() == 7);
  REQUIRE(out[0].spec_revision() == 2);
  REQUIRE(out[0].pods_size() == 1);
  REQUIRE(out[0].pods(0).pod() == "shop-web-0");
  REQUIRE(out[0].services_size() == 1);
  REQUIRE(out[0].channels_size() == 1);
}

}  // namespace
}  // namespace codeco::acm
