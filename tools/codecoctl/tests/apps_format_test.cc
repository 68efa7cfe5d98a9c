// codecoctl's rendering of ACM resources, without a server: -o parsing, the
// tables, YAML that reads back to the same values, JSON, and watch lines.
#include <catch2/catch.hpp>

#include "cli.h"
#include "yaml-cpp/yaml.h"

namespace codeco::ctl {
namespace {

Args WithOutput(const std::string& value) {
  Args args;
  args.flags["o"] = value;
  return args;
}

acm::v1::Application Bookinfo() {
  acm::v1::Application app;
  app.mutable_metadata()->set_name("bookinfo");
  app.mutable_metadata()->set_revision(12);
  (*app.mutable_metadata()->mutable_labels())["team"] = "books";
  (*app.mutable_metadata()->mutable_labels())["tier"] = "true";  // must stay a string
  app.mutable_metadata()->mutable_create_time()->set_seconds(1'800'000'000);
  app.set_spec_revision(3);
  app.set_cam_yaml("apiVersion: codeco.he-codeco.eu/v1alpha1\nkind: CodecoApp\n");
  auto* spec = app.mutable_spec();
  spec->set_app_name("bookinfo");
  spec->set_qos_class(acm::v1::QOS_CLASS_GOLD);
  for (const char* name : {"productpage", "reviews"}) {
    auto* s = spec->add_services();
    s->set_name(name);
    s->set_replicas(1);
    s->mutable_requests()->set_cpu_millicores(500);
  }
  auto* status = app.mutable_status();
  status->set_phase(acm::v1::APPLICATION_PHASE_DEPLOYING);
  status->set_status(acm::v1::STATUS_LEVEL_WARNING);
  status->set_error_msg("reviews-0: image pull failed\nretrying");
  auto* p = status->add_placements();
  p->set_service("productpage");
  p->set_cluster("rennes");
  p->set_node("worker-1");
  p->set_pod("bookinfo-productpage-0");
  p->set_ready(true);
  p = status->add_placements();
  p->set_service("reviews");
  p->set_cluster("nantes");
  p->set_node("worker-2");
  p->set_pod("bookinfo-reviews-0");
  return app;
}

TEST_CASE(
    "output is a table by default and yaml or json on request and -o names itself when wrong") {
  REQUIRE(*ParseOutput(Args()) == Output::kTable);
  REQUIRE(*ParseOutput(WithOutput("table")) == Output::kTable);
  REQUIRE(*ParseOutput(WithOutput("yaml")) == Output::kYaml);
  REQUIRE(*ParseOutput(WithOutput("json")) == Output::kJson);
  auto bad = ParseOutput(WithOutput("xml"));
  REQUIRE(absl::IsInvalidArgument(bad.status()));
  REQUIRE_THAT(std::string(bad.status().message()),
               Catch::StartsWith("-o: ") && Catch::Contains("\"xml\""));
}

TEST_CASE("bad flags are refused naming the flag") {
  std::vector<std::string> words = {"codecoctl", "watch", "app", "x", "--form-revision", "3"};
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  auto args = ParseArgs(static_cast<int>(argv.size()), argv.data(), 2, {"insecure"},
                        {"o", "from-revision"});
  REQUIRE_FALSE(args.ok());
  REQUIRE_THAT(std::string(args.status().message()), Catch::StartsWith("--form-revision: "));

  std::vector<std::string> short_words = {"codecoctl", "get", "apps", "-o"};
  argv.clear();
  for (auto& w : short_words) argv.push_back(w.data());
  args = ParseArgs(static_cast<int>(argv.size()), argv.data(), 2, {}, {"o"});
  REQUIRE_FALSE(args.ok());
  REQUIRE_THAT(std::string(args.status().message()), Catch::StartsWith("-o: needs a value"));
}

TEST_CASE("YAML output reads back to the same values with enums by name") {
  acm::v1::Application app = Bookinfo();
  YAML::Node doc = YAML::Load(ToYaml(app));
  REQUIRE(doc["metadata"]["name"].as<std::string>() == "bookinfo");
  REQUIRE(doc["metadata"]["revision"].as<int64_t>() == 12);
  REQUIRE(doc["metadata"]["labels"]["tier"].as<std::string>() == "true");
  REQUIRE(doc["metadata"]["labels"]["tier"].Tag() == "!");  // quoted: a string, not a bool
  REQUIRE(doc["metadata"]["create_time"].as<std::string>() == "2027-01-15T08:00:00Z");
  REQUIRE(doc["spec"]["qos_class"].as<std::string>() == "QOS_CLASS_GOLD");
  REQUIRE(doc["spec"]["services"].size() == 2);
  REQUIRE(doc["spec"]["services"][1]["requests"]["cpu_millicores"].as<int64_t>() == 500);
  REQUIRE(doc["status"]["placements"][0]["ready"].as<bool>());
  REQUIRE_FALSE(doc["status"]["placements"][1]["ready"]);  // false is the default: left out
  REQUIRE(doc["status"]["error_msg"].as<std::string>() == app.status().error_msg());
  REQUIRE(doc["cam_yaml"].as<std::string>() == app.cam_yaml());
  // An empty message is an empty map, still a document.
  REQUIRE(YAML::Load(ToYaml(acm::v1::Application())).IsMap());
}

TEST_CASE("JSON output uses proto field names and compact JSON is one line") {
  acm::v1::WatchApplicationResponse event;
  event.set_type(common::v1::WATCH_EVENT_TYPE_MODIFIED);
  *event.mutable_application() = Bookinfo();
  std::string pretty = ToJson(event);
  REQUIRE_THAT(pretty, Catch::Contains("\"spec_revision\"") &&
                           Catch::Contains("\"WATCH_EVENT_TYPE_MODIFIED\""));
  std::string line = WatchLine(event, Output::kJson);
  REQUIRE(line.back() == '\n');
  REQUIRE(line.find('\n') == line.size() - 1);
  YAML::Node parsed = YAML::Load(line);  // JSON is YAML
  REQUIRE(parsed["application"]["metadata"]["name"].as<std::string>() == "bookinfo");
}

TEST_CASE("tables list one row per resource under their headers") {
  acm::v1::ListApplicationsResponse apps;
  *apps.add_applications() = Bookinfo();
  std::string table = AppsTable(apps);
  REQUIRE_THAT(table, Catch::StartsWith("NAME "));
  REQUIRE_THAT(table, Catch::Contains("bookinfo") && Catch::Contains("Deploying") &&
                          Catch::Contains("Warning") && Catch::Contains("1/2") &&
                          Catch::Contains("nantes,rennes"));
  REQUIRE(std::count(table.begin(), table.end(), '\n') == 2);
  // Columns line up: the second column starts at the same offset in every row.
  size_t header = table.find("PHASE");
  size_t row = table.find("Deploying") - (table.find('\n') + 1);
  REQUIRE(header == row);

  acm::v1::ListNeighborhoodsResponse nbs;
  auto* nb = nbs.add_neighborhoods();
  nb->set_id("nb-bookinfo");
  nb->set_application("bookinfo");
  nb->set_revision(2);
  nb->add_members()->set_cluster("nantes");
  nb->add_members()->set_cluster("rennes");
  nb->add_partition_classes("edge/eu-west");
  REQUIRE_THAT(NeighborhoodsTable(nbs), Catch::Contains("nb-bookinfo") &&
                                            Catch::Contains("nantes,rennes") &&
                                            Catch::Contains("edge/eu-west"));

  acm::v1::ListApplicationRevisionsResponse revs;
  auto* r = revs.add_revisions();
  r->set_spec_revision(3);
  r->set_change_cause("rollback to 1");
  REQUIRE_THAT(RevisionsTable(revs), Catch::Contains("rollback to 1"));
  r->set_policy_bundle_version("2026-11-27.1");
  r->set_admission_patch(
      R"([{"op":"add","path":"/intents","value":{"allowedCountries":["DE","FR"]}},)"
      R"({"op":"add","path":"/intents/allowedRegions","value":["fr"]}])");
  REQUIRE_THAT(RevisionsTable(revs),
               Catch::Contains("2026-11-27.1") &&
                   Catch::Contains("/intents/allowedCountries,/intents/allowedRegions"));

  acm::v1::ListClustersResponse clusters;
  auto* c = clusters.add_clusters();
  c->mutable_metadata()->set_name("rennes");
  c->set_health(acm::v1::CLUSTER_HEALTH_UNREACHABLE);
  c->mutable_capacity()->set_node_count(3);
  c->mutable_capacity()->set_ready_node_count(2);
  REQUIRE_THAT(ClustersTable(clusters), Catch::Contains("Unreachable") && Catch::Contains("2/3"));
}

TEST_CASE("get endpoints lists each replica nearest first with its addresses") {
  acm::v1::ResolveServiceResponse resolved;
  resolved.set_name("sessions.session-cache.svc.clusterset.local");
  auto* e = resolved.add_endpoints();
  e->set_cluster("lille");
  e->set_node("worker-1");
  e->set_pod("session-cache-sessions-0");
  e->set_ready(true);
  e->set_locality(acm::v1::ENDPOINT_LOCALITY_SAME_CLUSTER);
  e->add_addresses("127.0.0.1:40123");
  e->add_addresses("127.0.0.1:9121");
  e = resolved.add_endpoints();
  e->set_cluster("nantes");
  e->set_pod("session-cache-sessions-1");
  e->set_locality(acm::v1::ENDPOINT_LOCALITY_REMOTE);
  const std::string table = EndpointsTable(resolved);
  REQUIRE_THAT(table, Catch::StartsWith("CLUSTER") && Catch::Contains("ADDRESSES"));
  REQUIRE_THAT(table, Catch::Contains("lille") && Catch::Contains("same-cluster") &&
                          Catch::Contains("127.0.0.1:40123,127.0.0.1:9121"));
  REQUIRE_THAT(table, Catch::Contains("remote") && Catch::Contains("false"));
  REQUIRE(table.find("lille") < table.find("nantes"));
}

TEST_CASE("describe shows status and every placement") {
  std::string text = DescribeApp(Bookinfo());
  REQUIRE_THAT(text, Catch::Contains("Phase:          Deploying") &&
                         Catch::Contains("bookinfo-reviews-0") &&
                         Catch::Contains("image pull failed"));
}

TEST_CASE("watch lines are one per event in table mode and YAML documents otherwise") {
  acm::v1::WatchApplicationResponse event;
  event.set_type(common::v1::WATCH_EVENT_TYPE_DELETED);
  *event.mutable_application() = Bookinfo();
  std::string line = WatchLine(event, Output::kTable);
  REQUIRE(std::count(line.begin(), line.end(), '\n') == 1);  // the message's newline is flattened
  REQUIRE_THAT(
      line, Catch::StartsWith("12 ") && Catch::Contains("DELETED") && Catch::Contains("bookinfo"));
  // Under the header's titles.
  std::string header = WatchHeader();
  REQUIRE(header.find("APPLICATION") == line.find("bookinfo"));
  REQUIRE(header.find("PHASE") == line.find("Deploying"));
  std::string yaml = WatchLine(event, Output::kYaml);
  REQUIRE_THAT(yaml, Catch::StartsWith("---\n"));
  REQUIRE(YAML::Load(yaml)["type"].as<std::string>() == "WATCH_EVENT_TYPE_DELETED");
}

TEST_CASE("an operation prints as one line: id then percent then phase then done or failed") {
  common::v1::Operation op;
  op.set_id("apply-shop-3");
  op.set_progress_percent(40);
  op.set_phase("neighborhood nb-shop chosen; placing:\nretrying");
  REQUIRE(OperationLine(op) == "apply-shop-3   40%  neighborhood nb-shop chosen; placing: retrying");
  op.set_done(true);
  op.set_progress_percent(100);
  op.set_phase("running");
  REQUIRE(OperationLine(op) == "apply-shop-3  100%  running  done");
  op.mutable_error()->set_code(common::v1::ERROR_CODE_FAILED_PRECONDITION);
  op.mutable_error()->set_message("no node fits web");
  REQUIRE(OperationLine(op) == "apply-shop-3  100%  running  failed: no node fits web");

  acm::v1::ListOperationsResponse ops;
  *ops.add_operations() = op;
  op.set_id("delete-cart-9");
  op.set_kind("acm.DeleteApplication");
  op.clear_error();
  op.set_phase("deleted");
  *ops.add_operations() = op;
  std::string table = OperationsTable(ops);
  REQUIRE_THAT(table, Catch::StartsWith("ID "));
  REQUIRE(std::count(table.begin(), table.end(), '\n') == 3);
  REQUIRE_THAT(table, Catch::Contains("failed: no node fits web") &&
                          Catch::Contains("done: deleted") &&
                          Catch::Contains("acm.DeleteApplication"));
}

TEST_CASE("get migrations shows each move with its reason and the reason it failed") {
  swm::v1::ListMigrationsResponse migrations;
  swm::v1::Migration* done = migrations.add_migrations();
  done->set_id("shop/2");
  done->set_application("shop");
  done->set_workload("back-0");
  done->set_reason(swm::v1::MIGRATION_REASON_NODE_FAILURE);
  done->set_phase(swm::v1::MIGRATION_PHASE_DONE);
  done->mutable_source()->set_cluster("nantes");
  done->mutable_source()->set_node("worker-1");
  done->mutable_target()->set_cluster("lille");
  done->mutable_target()->set_node("worker-0");
  swm::v1::Migration* refused = migrations.add_migrations();
  refused->set_id("shop/1");
  refused->set_application("shop");
  refused->set_workload("back-0");
  refused->set_reason(swm::v1::MIGRATION_REASON_MANUAL);
  refused->set_phase(swm::v1::MIGRATION_PHASE_FAILED);
  refused->mutable_source()->set_cluster("nantes");
  refused->mutable_source()->set_node("worker-1");
  refused->mutable_error()->set_message("no node can take\nworkload back-0");
  const std::string table = MigrationsTable(migrations);
  REQUIRE_THAT(table, Catch::StartsWith("ID "));
  REQUIRE(std::count(table.begin(), table.end(), '\n') == 4);
  REQUIRE_THAT(table, Catch::Contains("shop/back-0") && Catch::Contains("node_failure") &&
                          Catch::Contains("nantes/worker-1") && Catch::Contains("lille/worker-0") &&
                          Catch::Contains("FAILED") && Catch::Contains("manual"));
  // A move that never got a target shows "-"; its error on one line below it.
  REQUIRE_THAT(table, Catch::Contains("nantes/worker-1               -\n"));
  REQUIRE_THAT(table, Catch::Contains("  no node can take workload back-0\n"));
}

TEST_CASE("get migrations says when a move restored a backup and get backups lists them") {
  swm::v1::ListMigrationsResponse migrations;
  swm::v1::Migration* m = migrations.add_migrations();
  m->set_id("shop/3");
  m->set_application("shop");
  m->set_workload("db-0");
  m->set_reason(swm::v1::MIGRATION_REASON_NODE_FAILURE);
  m->set_phase(swm::v1::MIGRATION_PHASE_DONE);
  swm::v1::StateBackup* backup = m->mutable_restored_backup();
  backup->mutable_source()->set_cluster("lille");
  backup->mutable_source()->set_pod("shop-db-0");
  backup->set_image_reference("127.0.0.1:5000/codeco/checkpoints@sha256:ab");
  backup->mutable_take_time()->set_seconds(1'800'000'000);
  REQUIRE_THAT(MigrationsTable(migrations),
               Catch::Contains("  state restored from the backup of pod shop-db-0 taken at "
                               "2027-01-15T08:00:00Z (127.0.0.1:5000/codeco/checkpoints@sha256:ab)"
                               "; writes after it were lost\n"));

  swm::v1::ListStateBackupsResponse backups;
  swm::v1::StateBackupRecord* taken = backups.add_backups();
  taken->set_application("shop");
  taken->set_workload("db-0");
  *taken->mutable_latest() = *backup;
  taken->mutable_latest()->set_state_bytes(4096);
  taken->mutable_last_error()->set_message("redis: connection\nrefused");
  swm::v1::StateBackupRecord* none = backups.add_backups();
  none->set_application("shop");
  none->set_workload("db-1");
  none->set_pending_operation_id("op-7");
  const std::string table = StateBackupsTable(backups);
  REQUIRE(std::count(table.begin(), table.end(), '\n') == 3);
  REQUIRE_THAT(table, Catch::Contains("shop/db-0") && Catch::Contains("lille/shop-db-0") &&
                          Catch::Contains("2027-01-15T08:00:00Z") && Catch::Contains("4096") &&
                          Catch::Contains("last attempt failed: redis: connection refused"));
  REQUIRE_THAT(table, Catch::Contains("- (none yet)") && Catch::Contains("taking one now"));
}

TEST_CASE("a repeatable flag keeps every value in order") {
  std::vector<std::string> words = {"codecoctl", "up",    "--set", "swm.a=1",
                                    "--set=swm.b=2", "--scenario", "x.yaml"};
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  auto args = ParseArgs(static_cast<int>(argv.size()), argv.data(), 2, {}, {"set", "scenario"});
  REQUIRE(args.ok());
  REQUIRE(args->GetAll("set") == std::vector<std::string>{"swm.a=1", "swm.b=2"});
  REQUIRE(args->Get("set") == "swm.b=2");
  REQUIRE(args->GetAll("scenario") == std::vector<std::string>{"x.yaml"});
  REQUIRE(args->GetAll("nothing").empty());
}

TEST_CASE("manifests split at their document markers") {
  // One document: sent whole, comments and all.
  const std::string one = "# a comment\napiVersion: codeco.he-codeco.eu/v1alpha1\nkind: CodecoApp\n"
                          "metadata: {name: part}\nspec: {appName: app}\n";
  std::vector<ManifestDocument> docs = SplitManifest(one);
  REQUIRE(docs.size() == 1);
  REQUIRE(docs[0].text == one);
  REQUIRE(docs[0].name == "part");
  REQUIRE(docs[0].app_name == "app");
  REQUIRE(docs[0].application_model);
  // Leading marker, empty and comment-only documents, a Service, an MCD.
  docs = SplitManifest(
      "---\n# first\n---\nkind: CodecoApp\nmetadata: {name: x}\nspec: {}\n---\n"
      "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n--- \n"
      "apiVersion: fogguru.eu/v1\nkind: MultiClusterDeployment\nmetadata: {name: m}\n...\n"
      "---\n\n");
  REQUIRE(docs.size() == 3);
  REQUIRE(docs[0].index == 1);
  REQUIRE(docs[0].kind == "CodecoApp");
  REQUIRE(docs[0].app_name == "x");  // no appName: the CodecoApp's own name
  REQUIRE(docs[1].kind == "Service");
  REQUIRE(docs[1].api_version == "v1");
  REQUIRE_FALSE(docs[1].application_model);
  REQUIRE(docs[2].kind == "MultiClusterDeployment");
  REQUIRE(docs[2].application_model);
  REQUIRE(docs[2].text.find("kind: MultiClusterDeployment") != std::string::npos);
  // "----" and "---x" are not markers; text that is not YAML goes to ACM as it is.
  docs = SplitManifest("a: \"----\"\n---x: 1\n---\n[unclosed\n");
  REQUIRE(docs.size() == 2);
  REQUIRE(docs[1].application_model);
  REQUIRE(SplitManifest("# nothing\n---\n\n").empty());
}

TEST_CASE("describe names each service's CodecoApp and the pending channels") {
  acm::v1::Application app;
  app.mutable_metadata()->set_name("shop");
  for (const char* name : {"web", "api"}) {
    auto* s = app.mutable_spec()->add_services();
    s->set_name(name);
    s->set_replicas(1);
    s->set_codeco_app(std::string(name) + "-part");
    auto* ch = s->add_channels();
    ch->set_name("to-db");
    ch->set_to_service(std::string(name) == "web" ? "api" : "db");
  }
  std::string text = DescribeApp(app);
  REQUIRE(text.find("codecoapp web-part") != std::string::npos);
  REQUIRE(text.find("Pending channels") != std::string::npos);
  REQUIRE(text.find("  api/to-db -> db\n") != std::string::npos);
  REQUIRE(text.find("web/to-db") == std::string::npos);  // its target exists
}

TEST_CASE("describe shows a service's autoscaling and the autoscaler's measure") {
  acm::v1::Application app;
  app.mutable_metadata()->set_name("shop");
  auto* web = app.mutable_spec()->add_services();
  web->set_name("web");
  web->set_replicas(3);
  web->mutable_autoscaling()->set_min_replicas(1);
  web->mutable_autoscaling()->set_max_replicas(6);
  REQUIRE(DescribeApp(app).find("autoscaling 1-6 at 75% cpu") != std::string::npos);
  REQUIRE(DescribeApp(app).find("Usage:") == std::string::npos);  // nothing measured yet
  auto* m = app.mutable_status()->mutable_app_metrics()->add_services();
  m->set_service("web");
  m->set_ready_replicas(3);
  m->set_cpu_millicores(1200);
  m->set_memory_bytes(3 << 20);
  m->set_cpu_utilization_percent(160);
  std::string text = DescribeApp(app);
  REQUIRE(text.find("Usage:") != std::string::npos);
  REQUIRE(text.find("160%") != std::string::npos);
}

}  // namespace
}  // namespace codeco::ctl
