// The codecoctl binary against a real codeco-acm process (hub, no SWM):
// apply, get (apps, revisions, neighborhoods) in every output, rollback,
// watch from a revision until the application is deleted, and the errors
// that name a flag or a field.
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "acm_test_util.h"
#include "codeco/swm/v1/swm_service.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "process.h"
#include "yaml-cpp/yaml.h"

namespace codeco::ctl {
namespace {

namespace fs = std::filesystem;
using codeco::testing::ChildProcess;
using codeco::testing::CommandResult;
using codeco::testing::RunCommand;
using codeco::testing::ScratchDir;

std::string WriteCam(const fs::path& dir, const std::string& name, const std::string& tag) {
  fs::path file = dir / (name + "-" + tag + ".yaml");
  std::ofstream(file) << acm::testing::SmallCam(name, tag);
  return file.string();
}

struct Acm {
  std::unique_ptr<ChildProcess> process;
  std::string address;

  explicit Acm(const fs::path& dir) {
    process = std::make_unique<ChildProcess>(
        std::vector<std::string>{std::string(CODECO_BIN_DIR) + "/codeco-acm", "--role", "hub",
                                 "--insecure", "--listen", "127.0.0.1:0", "--metrics-listen",
                                 "127.0.0.1:0", "--data-dir", (dir / "data").string()},
        (dir / "acm.log").string());
    std::optional<std::string> line = process->ReadLine(absl::Now() + absl::Seconds(60));
    INFO("codeco-acm printed: " << line.value_or("<nothing>"));
    REQUIRE(line.has_value());
    std::smatch m;
    REQUIRE(std::regex_search(*line, m, std::regex("listening on (127\\.0\\.0\\.1:[0-9]+)")));
    address = m[1].str();
  }
};

TEST_CASE("codecoctl applies and lists and rolls back and watches through a real ACM") {
  ScratchDir dir("codecoctl-apps");
  Acm acm(dir.path);
  // HOME in the temp dir: no federation run state leaks in.
  auto ctl = [&](std::vector<std::string> words) {
    std::vector<std::string> argv = {"/usr/bin/env", "HOME=" + dir.path.string(),
                                     std::string(CODECO_BIN_DIR) + "/codecoctl"};
    argv.insert(argv.end(), words.begin(), words.end());
    argv.insert(argv.end(), {"--acm", acm.address, "--insecure"});
    CommandResult result = RunCommand(argv, absl::Seconds(30));
    UNSCOPED_INFO("codecoctl " << absl::StrJoin(words, " ") << " -> " << result.exit_code << "\n"
                               << result.output);
    return result;
  };

  CommandResult r = ctl({"apply", "-f", WriteCam(dir.path, "shop", "1")});
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::Contains("application/shop created (spec revision 1)"));
  REQUIRE(ctl({"apply", "-f", WriteCam(dir.path, "shop", "2")}).exit_code == 0);

  // -o yaml and json read back; the table has the app.
  r = ctl({"get", "apps", "-o", "yaml"});
  REQUIRE(r.exit_code == 0);
  YAML::Node apps = YAML::Load(r.output);
  REQUIRE(apps["applications"][0]["metadata"]["name"].as<std::string>() == "shop");
  REQUIRE(apps["applications"][0]["spec_revision"].as<int>() == 2);
  r = ctl({"get", "apps", "-o", "json"});
  REQUIRE(r.exit_code == 0);
  REQUIRE(YAML::Load(r.output)["applications"][0]["status"]["phase"].as<std::string>() ==
          "APPLICATION_PHASE_PENDING");
  r = ctl({"get", "apps"});
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output,
               Catch::StartsWith("NAME") && Catch::Contains("shop") && Catch::Contains("Pending"));
  r = ctl({"describe", "app", "shop", "-o", "yaml"});
  REQUIRE(r.exit_code == 0);
  REQUIRE(YAML::Load(r.output)["spec"]["services"][0]["image"].as<std::string>() ==
          "registry.example.org/web:2");
  r = ctl({"get", "neighborhoods", "-o", "json"});
  REQUIRE(r.exit_code == 0);  // none without clusters: an empty list, not an error
  r = ctl({"get", "neighborhoods"});
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::StartsWith("ID"));

  // Revisions, then a rollback makes a third one with the first spec.
  r = ctl({"get", "revisions", "shop"});
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::Contains("apply"));
  r = ctl({"rollback", "app", "shop", "--to-revision", "1"});
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::Contains("rolled back to spec revision 1 (now spec revision 3)"));
  r = ctl({"get", "revisions", "shop", "-o", "yaml"});
  REQUIRE(r.exit_code == 0);
  YAML::Node revs = YAML::Load(r.output)["revisions"];
  REQUIRE(revs.size() == 3);
  REQUIRE(revs[0]["change_cause"].as<std::string>() == "rollback to 1");

  // Bad input names the flag or the field; nothing changes.
  r = ctl({"rollback", "app", "shop", "--to-revision", "zero"});
  REQUIRE(r.exit_code != 0);
  REQUIRE_THAT(r.output, Catch::Contains("--to-revision: must be a spec revision"));
  r = ctl({"rollback", "app", "shop", "--to-revision", "9"});
  REQUIRE(r.exit_code != 0);
  REQUIRE_THAT(r.output, Catch::Contains("to_spec_revision"));
  r = ctl({"get", "apps", "-o", "xml"});
  REQUIRE(r.exit_code != 0);
  REQUIRE_THAT(r.output, Catch::Contains("-o: must be table, yaml or json"));
  r = ctl({"watch", "app", "shop", "--from-revison", "1"});
  REQUIRE(r.exit_code != 0);
  REQUIRE_THAT(r.output, Catch::Contains("--from-revison: unknown flag"));
  r = ctl({"delete", "cluster", "atlantis"});
  REQUIRE(r.exit_code != 0);
  REQUIRE_THAT(r.output, Catch::Contains("name: cluster \"atlantis\" is not registered"));
  r = ctl({"delete", "app", "shop", "--force"});
  REQUIRE(r.exit_code != 0);
  REQUIRE_THAT(r.output, Catch::Contains("--force: only applies to delete cluster"));
  r = ctl({"watch", "app", "nope"});
  REQUIRE(r.exit_code != 0);
  REQUIRE_THAT(r.output, Catch::Contains("nope"));

  // A watch from revision 1 replays every later change of shop, one line
  // each in revision order, and ends by itself when shop is deleted.
  std::vector<std::string> argv = {"/usr/bin/env",
                                   "HOME=" + dir.path.string(),
                                   std::string(CODECO_BIN_DIR) + "/codecoctl",
                                   "watch",
                                   "app",
                                   "shop",
                                   "--from-revision",
                                   "1",
                                   "--acm",
                                   acm.address,
                                   "--insecure"};
  ChildProcess watch(argv, (dir.path / "watch.err").string());
  std::vector<std::string> lines;
  auto read = [&] {
    std::optional<std::string> line = watch.ReadLine(absl::Now() + absl::Seconds(30));
    REQUIRE(line.has_value());
    lines.push_back(*line);
    return *line;
  };
  REQUIRE_THAT(read(), Catch::StartsWith("REVISION"));
  REQUIRE_THAT(read(), Catch::StartsWith("2 ") && Catch::Contains("MODIFIED"));  // apply tag 2
  REQUIRE_THAT(read(), Catch::StartsWith("3 ") && Catch::Contains("MODIFIED"));  // rollback
  r = ctl({"delete", "app", "shop"});
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(read(), Catch::StartsWith("4 ") && Catch::Contains("Deleting"));
  REQUIRE_THAT(read(), Catch::StartsWith("5 ") && Catch::Contains("DELETED"));
  REQUIRE_FALSE(watch.ReadLine(absl::Now() + absl::Seconds(30)).has_value());  // EOF: exited
  REQUIRE(watch.Stop(SIGTERM, absl::Now() + absl::Seconds(10)) == 0);
  REQUIRE_THAT(r.output, Catch::Contains("application/shop deleted"));
  REQUIRE(ctl({"describe", "app", "shop"}).exit_code != 0);
}

TEST_CASE("codecoctl applies and deletes the CodecoApps of a CODECO file one by one") {
  ScratchDir dir("codecoctl-apps");
  Acm acm(dir.path);
  auto ctl = [&](std::vector<std::string> words) {
    std::vector<std::string> argv = {"/usr/bin/env", "HOME=" + dir.path.string(),
                                     std::string(CODECO_BIN_DIR) + "/codecoctl"};
    argv.insert(argv.end(), words.begin(), words.end());
    argv.insert(argv.end(), {"--acm", acm.address, "--insecure"});
    CommandResult result = RunCommand(argv, absl::Seconds(30));
    UNSCOPED_INFO("codecoctl " << absl::StrJoin(words, " ") << " -> " << result.exit_code << "\n"
                               << result.output);
    return result;
  };
  const std::string codeco = std::string(ACM_EXAMPLES_DIR) + "/codeco/";
  // Three CodecoApps, one application; the first frontend's channel waits for the backend.
  CommandResult r = ctl({"apply", "-f", codeco + "dummy-backend-frontends.yaml"});
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::Contains("application/dummy-swm-app (codecoapp/acm-frontend-1-1-1) "
                                         "created (spec revision 1)"));
  REQUIRE_THAT(r.output, Catch::Contains("application/dummy-swm-app (codecoapp/acm-backend-1-1) "
                                         "configured (spec revision 2)"));
  REQUIRE_THAT(r.output, Catch::Contains("(spec revision 3)"));
  REQUIRE_THAT(r.output, Catch::Contains("no service \"backend-1-1\" in application "
                                         "\"dummy-swm-app\" yet"));
  r = ctl({"describe", "app", "dummy-swm-app", "-o", "yaml"});
  REQUIRE(YAML::Load(r.output)["spec"]["services"].size() == 3);
  // The CodecoApp is applied, the Services after it are skipped with a warning.
  r = ctl({"apply", "-f", codeco + "bookinfo-fair.yaml"});
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::Contains("application/bookinfo-fair-app "
                                         "(codecoapp/codecoapp-bookinfo-fair) created"));
  REQUIRE_THAT(r.output, Catch::Contains("document 2 (v1/Service productpage) skipped"));
  REQUIRE_THAT(r.output, Catch::Contains("document 3 (v1/Service ratings) skipped"));
  // delete -f: the CodecoApps leave one by one; the last takes the application.
  r = ctl({"delete", "-f", codeco + "dummy-backend-frontends.yaml"});
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::Contains("codecoapp/acm-frontend-1-1-1 deleted: its services "
                                         "left application/dummy-swm-app (spec revision 4)"));
  REQUIRE_THAT(r.output, Catch::Contains("codecoapp/acm-frontend-1-1-2 deleted"));
  r = ctl({"get", "apps"});
  REQUIRE_THAT(r.output, Catch::Contains("bookinfo-fair-app"));
  // A CodecoApp the application does not have: an error naming it.
  r = ctl({"delete", "-f", codeco + "dummy-backend-frontends.yaml"});
  REQUIRE(r.exit_code != 0);
}

TEST_CASE("codecoctl follows and shows ACM's operations") {
  ScratchDir dir("codecoctl-apps");
  Acm acm(dir.path);
  auto ctl = [&](std::vector<std::string> words) {
    std::vector<std::string> argv = {"/usr/bin/env", "HOME=" + dir.path.string(),
                                     std::string(CODECO_BIN_DIR) + "/codecoctl"};
    argv.insert(argv.end(), words.begin(), words.end());
    argv.insert(argv.end(), {"--acm", acm.address, "--insecure"});
    CommandResult result = RunCommand(argv, absl::Seconds(30));
    UNSCOPED_INFO("codecoctl " << absl::StrJoin(words, " ") << " -> " << result.exit_code << "\n"
                               << result.output);
    return result;
  };
  // No cluster and no SWM behind this ACM: the apply's operation never ends, so --wait
  // prints where it stands (plain lines: stdout is not a terminal) and fails
  // when its --timeout ends the stream.
  CommandResult r =
      ctl({"apply", "-f", WriteCam(dir.path, "shop", "1"), "--wait", "--timeout", "2s"});
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains("application/shop created (spec revision 1)"));
  REQUIRE_THAT(r.output, Catch::Contains("apply-shop-1   20%  waiting for a neighborhood"));
  REQUIRE_THAT(r.output, Catch::Contains("--wait: lost operation apply-shop-1"));
  REQUIRE(r.output.find("\r") == std::string::npos);

  r = ctl({"apply", "-f", WriteCam(dir.path, "shop", "2"), "--wait", "-o", "json"});
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains("--wait: prints progress lines"));
  r = ctl({"get", "operation", "apply-shop-1", "-o", "yaml"});
  REQUIRE(r.exit_code == 0);
  YAML::Node op = YAML::Load(r.output);
  REQUIRE(op["kind"].as<std::string>() == "acm.ApplyApplication");
  REQUIRE(op["resource"].as<std::string>() == "applications/shop");
  r = ctl({"get", "operation", "apply-shop-1"});
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::StartsWith("apply-shop-1   20%  waiting for a neighborhood"));

  // A delete's operation is done at once here (nothing placed to release).
  REQUIRE(ctl({"delete", "app", "shop"}).exit_code == 0);
  r = ctl({"get", "operations"});
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::StartsWith("ID"));
  REQUIRE_THAT(r.output, Catch::Contains("acm.DeleteApplication") &&
                             Catch::Contains("done: deleted") &&
                             Catch::Contains("failed: superseded by delete-shop-"));
  r = ctl({"get", "operation", "nope"});
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains("id: no operation \"nope\""));
  r = ctl({"get", "operation"});
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains("usage: codecoctl get"));
}

TEST_CASE("codecoctl follows and shows the hub SWM's operations") {
  ScratchDir dir("codecoctl-apps");
  // A hub swm on its own (plaintext on loopback), as `codecoctl up` starts it.
  ChildProcess swm(
      std::vector<std::string>{std::string(CODECO_BIN_DIR) + "/codeco-swm", "--role", "hub",
                               "--insecure", "--listen", "127.0.0.1:0", "--metrics-listen",
                               "127.0.0.1:0", "--data-dir", (dir.path / "swm-data").string()},
      (dir.path / "swm.log").string());
  std::optional<std::string> line = swm.ReadLine(absl::Now() + absl::Seconds(60));
  INFO("codeco-swm printed: " << line.value_or("<nothing>"));
  REQUIRE(line.has_value());
  std::smatch m;
  REQUIRE(std::regex_search(*line, m, std::regex("listening on (127\\.0\\.0\\.1:[0-9]+)")));
  const std::string address = m[1].str();
  auto ctl = [&](std::vector<std::string> words) {
    std::vector<std::string> argv = {"/usr/bin/env", "HOME=" + dir.path.string(),
                                     std::string(CODECO_BIN_DIR) + "/codecoctl"};
    argv.insert(argv.end(), words.begin(), words.end());
    argv.insert(argv.end(), {"--insecure"});
    CommandResult result = RunCommand(argv, absl::Seconds(30));
    UNSCOPED_INFO("codecoctl " << absl::StrJoin(words, " ") << " -> " << result.exit_code << "\n"
                               << result.output);
    return result;
  };

  // A placement started in PLACE_MODE_RUNNING over a member whose LMS does
  // not answer: its operation ends FAILED (UNAVAILABLE).
  auto stub = swm::v1::SwmService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  swm::v1::PlaceApplicationRequest place;
  place.set_mode(swm::v1::PLACE_MODE_RUNNING);
  auto* spec = place.mutable_application()->mutable_spec();
  spec->set_app_name("shop");
  auto* service = spec->add_services();
  service->set_name("web");
  service->set_image("nginx");
  service->set_replicas(1);
  service->mutable_requests()->set_cpu_millicores(100);
  auto* member = place.mutable_neighborhood()->add_members();
  member->set_cluster("away");
  (*member->mutable_endpoints())["lms"] = "127.0.0.1:1";
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  swm::v1::PlaceApplicationResponse started;
  grpc::Status status = stub->PlaceApplication(&context, place, &started);
  INFO(status.error_message());
  REQUIRE(status.ok());
  const std::string id = started.operation().id();
  REQUIRE(absl::StartsWith(id, "place/shop/started-"));

  // --wait follows it (the same progress lines as apply --wait) and fails with it.
  CommandResult r = ctl({"get", "operation", id, "--from", "swm", "--swm", address, "--wait"});
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains(id + "  100%  FAILED  failed: "));
  REQUIRE_THAT(r.output, Catch::Contains("codecoctl get: operation " + id + " failed: "));
  REQUIRE(r.output.find("\r") == std::string::npos);
  r = ctl({"get", "operation", id, "--from", "swm", "--swm", address, "-o", "yaml"});
  REQUIRE(r.exit_code == 0);
  YAML::Node op = YAML::Load(r.output);
  REQUIRE(op["kind"].as<std::string>() == "swm.PlaceApplication");
  REQUIRE(op["done"].as<bool>());
  r = ctl({"get", "operations", "--from", "swm", "--swm", address});
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::StartsWith("ID"));
  REQUIRE_THAT(r.output, Catch::Contains(id) && Catch::Contains("swm.PlaceApplication"));

  // The flags name what is wrong.
  r = ctl({"get", "operation", id, "--from", "lms", "--swm", address});
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains("--from: acm or swm"));
  r = ctl({"get", "apps", "--from", "swm", "--swm", address});
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains("--from, --swm: only apply to get operations"));
  r = ctl({"get", "operations", "--wait", "--from", "swm", "--swm", address});
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains("--wait: only applies to get operation ID"));
  r = ctl({"get", "operation", "place/none/1", "--from", "swm", "--swm", address});
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains("no operation place/none/1"));

  // Workload migration goes through the same hub SWM: an application it
  // never placed cannot move, and there is no record yet.
  r = ctl({"migrate", "shop/web-0", "--swm", address});
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains("codecoctl migrate: ") &&
                             Catch::Contains("application shop has no placement"));
  r = ctl({"migrate", "shop/web-0", "--node", "n1", "--swm", address});
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains("--node: goes with --to CLUSTER"));
  r = ctl({"migrate", "shop/web-0", "--as", "x", "--swm", address});
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains("--as: only applies to migrate POD --from"));
  r = ctl({"migrate", "shop", "--swm", address});
  REQUIRE(r.exit_code == 2);
  REQUIRE_THAT(r.output, Catch::Contains("usage: codecoctl migrate APP/WORKLOAD"));
  r = ctl({"get", "migrations", "--swm", address});
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.output, Catch::StartsWith("ID"));
  REQUIRE(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  r = ctl({"get", "migration", "shop/1", "--swm", address});
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains("no migration shop/1"));
  r = ctl({"get", "migration", "shop", "--swm", address});
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains("id: must be \"<application>/<number>\""));
  r = ctl({"get", "apps", "--app", "shop", "--swm", address});
  REQUIRE(r.exit_code == 1);
  REQUIRE_THAT(r.output, Catch::Contains("--app: only applies to get migrations"));
}

}  // namespace
}  // namespace codeco::ctl
