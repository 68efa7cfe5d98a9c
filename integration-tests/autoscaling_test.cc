// Replica counts changed in place on the five-site federation (`codecoctl
// up`): a changed `replicas` (an apply by hand) adds replicas through SWM's
// pipeline with every other pod left running, and the hub ACM's
// multi-cluster autoscaler scales a service up when its replicas' CPU rises
// over their requests (`codecoctl fault pod --usage-profile`) and down
// again after its cooldown once it falls; a change of the image, for
// comparison, is a redeploy (every pod anew). A CAM's numberOfLocations
// holds each service to that many clusters: mck8s's example spreads over
// two, and replicas one cluster cannot hold wait, named, and are placed
// again on a timer. An mck8s MultiClusterJob runs its pods to completion,
// two at a time: a pod that ends (`codecoctl fault pod --succeed | --fail`)
// leaves its slot to the next one while the job needs pods, and the job
// fails once more pods failed than its backoffLimit. Timings are reported (WARN), never asserted.

#include <catch2/catch.hpp>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "federation_util.h"
#include "nlohmann/json.hpp"
#include "process.h"

namespace {

using codeco::testing::CommandResult;
using codeco::testing::CtlBinary;
using codeco::testing::FederationHome;
using codeco::testing::FiveSiteScenario;
using codeco::testing::RunCommand;

// What ACM says of elastic-web.
struct Seen {
  int64_t spec_revision = 0;
  int64_t observed_spec_revision = 0;
  std::string phase;
  int web_replicas = 0;  // the spec's
  // service -> "cluster/pod" of each placement
  std::map<std::string, std::set<std::string>> pods;
  std::string error;
};

int64_t Int(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return 0;
  if (j[key].is_number()) return j[key].get<int64_t>();
  int64_t v = 0;
  return absl::SimpleAtoi(j[key].get<std::string>(), &v) ? v : 0;
}

Seen Look() {
  Seen seen;
  CommandResult r = RunCommand({CtlBinary(), "get", "apps", "-o", "json"}, absl::Seconds(30));
  nlohmann::json doc = nlohmann::json::parse(r.output, nullptr, false);
  if (r.exit_code != 0 || doc.is_discarded()) return seen;
  nlohmann::json app;
  for (const auto& a : doc.value("applications", nlohmann::json::array())) {
    if (a["metadata"].value("name", "") == "elastic-web") app = a;
  }
  if (app.is_null()) return seen;
  seen.spec_revision = Int(app, "spec_revision");
  const nlohmann::json status = app.value("status", nlohmann::json::object());
  seen.observed_spec_revision = Int(status, "observed_spec_revision");
  seen.phase = status.value("phase", "");
  seen.error = status.value("error_msg", "");
  for (const auto& s : app["spec"].value("services", nlohmann::json::array())) {
    if (s.value("name", "") == "web") seen.web_replicas = static_cast<int>(Int(s, "replicas"));
  }
  for (const auto& p : status.value("placements", nlohmann::json::array())) {
    seen.pods[p.value("service", "")].insert(p.value("cluster", "") + "/" + p.value("pod", ""));
  }
  return seen;
}

// Waits up to `timeout` for `done`; the last look.
Seen WaitFor(const std::function<bool(const Seen&)>& done, absl::Duration timeout) {
  Seen seen;
  for (absl::Time end = absl::Now() + timeout; absl::Now() < end;) {
    seen = Look();
    if (done(seen)) return seen;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return seen;
}

bool RunningAt(const Seen& s, int64_t spec_revision, size_t webs) {
  return s.spec_revision == spec_revision && s.observed_spec_revision == spec_revision &&
         s.phase == "APPLICATION_PHASE_RUNNING" && s.pods.count("web") &&
         s.pods.at("web").size() == webs;
}

std::string Describe(const Seen& s) {
  std::string out = absl::StrCat("spec revision ", s.spec_revision, " (observed ",
                                 s.observed_spec_revision, "), ", s.phase, ", web replicas ",
                                 s.web_replicas, ", error '", s.error, "', pods:");
  for (const auto& [service, pods] : s.pods) {
    for (const std::string& p : pods) absl::StrAppend(&out, " ", service, "=", p);
  }
  return out;
}

// examples/cams/elastic-web.yaml with `replicas` web replicas and a
// scale-down cooldown of `cooldown`, written into `home`.
std::string ElasticWeb(const FederationHome& home, int replicas, const std::string& cooldown) {
  std::ifstream in(codeco::testing::SourceDir() + "/examples/cams/elastic-web.yaml");
  std::string yaml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(absl::StrContains(yaml, "      replicas: 2\n"));
  yaml = absl::StrReplaceAll(
      yaml, {{"      replicas: 2\n", absl::StrCat("      replicas: ", replicas, "\n")},
             {"scaleDownCooldown: 10m", "scaleDownCooldown: " + cooldown},
             {"targetCPUUtilizationPercentage: 80", "targetCPUUtilizationPercentage: 100"}});
  const std::string path = (home.path / absl::StrCat("elastic-web-", replicas, ".yaml")).string();
  std::ofstream(path) << yaml;
  return path;
}

TEST_CASE("replicas scale in place by hand and with the load while the other pods keep running") {
  if (codeco::testing::SanitizedBuild()) {
    // CI time: the code runs under the sanitizers in swm_placement_service_test
    // ([scale]), acm_core_test (the autoscaler) and acm_server_test.
    WARN("skipped under a sanitizer");
    return;
  }
  FederationHome home;
  CommandResult up = RunCommand({CtlBinary(), "up", "--scenario", FiveSiteScenario(),
                                 "--no-prometheus", "--set", "acm.autoscale_interval=2s"},
                                absl::Minutes(3));
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  REQUIRE(codeco::testing::WaitUntilClustersReady(6));

  // Two web replicas using what they request (the target is 100 %): no change.
  CommandResult apply =
      RunCommand({CtlBinary(), "apply", "-f", ElasticWeb(home, 2, "15s")}, absl::Minutes(1));
  INFO(apply.output);
  REQUIRE(apply.exit_code == 0);
  Seen seen = WaitFor([](const Seen& s) { return RunningAt(s, 1, 2); }, absl::Minutes(2));
  INFO(Describe(seen));
  REQUIRE(RunningAt(seen, 1, 2));
  const std::set<std::string> first_webs = seen.pods["web"];
  const std::set<std::string> cache = seen.pods["cache"];

  // 1. By hand: three replicas. One is added; the others keep their pods.
  absl::Time start = absl::Now();
  apply = RunCommand({CtlBinary(), "apply", "-f", ElasticWeb(home, 3, "15s")}, absl::Minutes(1));
  INFO(apply.output);
  REQUIRE(apply.exit_code == 0);
  seen = WaitFor([](const Seen& s) { return RunningAt(s, 2, 3); }, absl::Minutes(2));
  INFO(Describe(seen));
  REQUIRE(RunningAt(seen, 2, 3));
  const double by_hand_s = absl::ToDoubleSeconds(absl::Now() - start);
  for (const std::string& pod : first_webs) CHECK(seen.pods["web"].count(pod) == 1);
  CHECK(seen.pods["cache"] == cache);
  const std::set<std::string> three_webs = seen.pods["web"];

  // 2. The load: every replica at twice its request. The autoscaler wants
  // ceil(3 x 2 / 1) = 6, within its maximum 4.
  start = absl::Now();
  for (const std::string& at : three_webs) {
    CommandResult load = RunCommand({CtlBinary(), "fault", "pod", at, "--usage-profile",
                                     "{type: constant, cpu: 400m, memory: 64Mi}"},
                                    absl::Seconds(30));
    INFO(load.output);
    REQUIRE(load.exit_code == 0);
  }
  seen =
      WaitFor([](const Seen& s) { return s.web_replicas == 4 && RunningAt(s, s.spec_revision, 4); },
              absl::Minutes(2));
  INFO(Describe(seen));
  REQUIRE(seen.web_replicas == 4);
  REQUIRE(RunningAt(seen, seen.spec_revision, 4));
  const double scaled_up_s = absl::ToDoubleSeconds(absl::Now() - start);
  for (const std::string& pod : three_webs) CHECK(seen.pods["web"].count(pod) == 1);
  CHECK(seen.pods["cache"] == cache);
  const int64_t up_revision = seen.spec_revision;

  // 3. The load falls to a quarter of the requests: after the 15 s
  // cooldown the replicas go, highest first, down towards the minimum.
  start = absl::Now();
  for (const std::string& at : seen.pods["web"]) {
    CommandResult calm = RunCommand({CtlBinary(), "fault", "pod", at, "--usage-profile",
                                     "{type: constant, cpu: 50m, memory: 64Mi}"},
                                    absl::Seconds(30));
    INFO(calm.output);
    REQUIRE(calm.exit_code == 0);
  }
  seen = WaitFor(
      [&](const Seen& s) {
        return s.spec_revision > up_revision && s.web_replicas < 4 &&
               RunningAt(s, s.spec_revision, static_cast<size_t>(s.web_replicas));
      },
      absl::Minutes(2));
  INFO(Describe(seen));
  REQUIRE(seen.web_replicas < 4);
  const double scaled_down_s = absl::ToDoubleSeconds(absl::Now() - start);
  CHECK(seen.pods["cache"] == cache);
  // What stays is what ran first.
  for (const std::string& pod : seen.pods["web"]) CHECK(three_webs.count(pod) == 1);

  // The history says why.
  CommandResult history =
      RunCommand({CtlBinary(), "get", "revisions", "elastic-web"}, absl::Seconds(30));
  INFO(history.output);
  CHECK(absl::StrContains(history.output, "autoscaled: web 3 -> 4"));
  CHECK(absl::StrContains(history.output, "autoscaled: web 4 -> "));
  // SWM recorded each replica added and removed.
  CommandResult migrations =
      RunCommand({CtlBinary(), "get", "migrations", "--app", "elastic-web"}, absl::Seconds(30));
  INFO(migrations.output);
  CHECK(absl::StrContains(migrations.output, "scale_up"));
  CHECK(absl::StrContains(migrations.output, "scale_down"));

  // 4. For comparison, a change beyond the replica counts (the image): SWM
  // refuses to scale it in place and ACM redeploys it, every pod anew.
  const std::set<std::string> before_redeploy = seen.pods["web"];
  const int64_t before_revision = seen.spec_revision;
  const std::string image_changed = (home.path / "elastic-web-image.yaml").string();
  {
    std::ifstream in(ElasticWeb(home, seen.web_replicas, "15s"));
    std::string yaml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(image_changed) << absl::StrReplaceAll(yaml, {{"nginx:1.25", "nginx:1.27"}});
  }
  start = absl::Now();
  apply = RunCommand({CtlBinary(), "apply", "-f", image_changed}, absl::Minutes(1));
  INFO(apply.output);
  REQUIRE(apply.exit_code == 0);
  const size_t webs = before_redeploy.size();
  seen = WaitFor([&](const Seen& s) { return RunningAt(s, before_revision + 1, webs); },
                 absl::Minutes(2));
  INFO(Describe(seen));
  REQUIRE(RunningAt(seen, before_revision + 1, webs));
  const double redeploy_s = absl::ToDoubleSeconds(absl::Now() - start);
  // Every pod anew: SWM released the placement before placing it again (a
  // pod's name, "<app>-<workload>", comes back when it lands where it was).
  CommandResult swm_operations =
      RunCommand({CtlBinary(), "get", "operations", "--from", "swm"}, absl::Seconds(30));
  INFO(swm_operations.output);
  CHECK(absl::StrContains(swm_operations.output, "release/elastic-web/"));

  WARN("by hand 2 -> 3 running after "
       << by_hand_s << " s; load x2: 3 -> 4 running after " << scaled_up_s
       << " s (autoscale interval 2 s); load /4: " << seen.web_replicas << " replicas after "
       << scaled_down_s << " s (cooldown 15 s); an image change redeployed " << webs
       << " web replicas and the cache, running after " << redeploy_s << " s");
  RunCommand({CtlBinary(), "down"}, absl::Minutes(1));
}

// A CAM `name` of `replicas` replicas of `cpu` each on one location,
// bursting or not, written into `home`.
std::string OneLocation(const FederationHome& home, const std::string& name, int replicas,
                        const std::string& cpu, bool bursting) {
  const std::string yaml = absl::StrReplaceAll(R"(apiVersion: codeco.io/v1
kind: CodecoApp
metadata:
  name: NAME
spec:
  appName: NAME
  placement:
    policy: worst-fit
    numberOfLocations: 1
    bursting: BURSTING
  codecoapp-msspec:
    - serviceName: web
      replicas: REPLICAS
      podspec:
        containers:
          - name: web
            image: docker.io/library/nginx:1.25
            resources:
              requests:
                cpu: CPU
                memory: 64Mi
)",
                                               {{"NAME", name},
                                                {"BURSTING", bursting ? "true" : "false"},
                                                {"REPLICAS", absl::StrCat(replicas)},
                                                {"CPU", cpu}});
  const std::string path = (home.path / absl::StrCat(name, "-", replicas, ".yaml")).string();
  std::ofstream(path) << yaml;
  return path;
}

// `codecoctl describe app NAME`: cluster -> replicas of `service_name`
// placed there, and the Phase and Message lines.
struct Described {
  std::map<std::string, int> replicas_in;
  std::string phase;
  std::string message;
  std::string output;
};

Described DescribeApp(const std::string& name, const std::string& service_name = "web") {
  Described d;
  d.output = RunCommand({CtlBinary(), "describe", "app", name}, absl::Seconds(30)).output;
  std::istringstream lines(d.output);
  bool placement = false;
  for (std::string line; std::getline(lines, line);) {
    if (absl::StartsWith(line, "Phase:")) d.phase = line;
    if (absl::StartsWith(line, "Message:")) d.message = line;
    if (absl::StartsWith(line, "Placement:")) placement = true;
    if (absl::StartsWith(line, "Channels")) placement = false;
    std::istringstream row(line);
    std::string service, cluster;
    if (placement && row >> service >> cluster && service == service_name) {
      ++d.replicas_in[cluster];
    }
  }
  return d;
}

TEST_CASE("numberOfLocations holds a service to its clusters and waiting replicas are retried") {
  if (codeco::testing::SanitizedBuild()) {
    // CI time: the rule runs under the sanitizers in swm_core_test and the
    // retry in acm_core_test.
    WARN("skipped under a sanitizer");
    return;
  }
  FederationHome home;
  CommandResult up = RunCommand({CtlBinary(), "up", "--scenario", FiveSiteScenario(),
                                 "--no-prometheus", "--set", "acm.unplaced_retry_interval=2s"},
                                absl::Minutes(3));
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  REQUIRE(codeco::testing::WaitUntilClustersReady(6));

  // The mck8s example: five replicas over exactly two clusters.
  CommandResult mcd =
      RunCommand({CtlBinary(), "apply", "-f",
                  codeco::testing::SourceDir() + "/examples/cams/mcd-traffic-aware.yaml", "--wait"},
                 absl::Minutes(2));
  INFO(mcd.output);
  REQUIRE(mcd.exit_code == 0);
  Described spread = DescribeApp("mcd-app-1", "mcd-app-1");
  INFO(spread.output);
  CHECK(spread.replicas_in.size() == 2);
  // It goes: the cluster "grow" lands in holds only "grow".
  REQUIRE(RunCommand({CtlBinary(), "delete", "app", "mcd-app-1"}, absl::Seconds(60)).exit_code ==
          0);
  bool gone = false;
  for (absl::Time end = absl::Now() + absl::Seconds(60); !gone && absl::Now() < end;) {
    gone = !absl::StrContains(RunCommand({CtlBinary(), "get", "apps"}, absl::Seconds(30)).output,
                              "mcd-app-1");
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  REQUIRE(gone);

  // "grow": ten replicas of 500m on one location, no bursting.
  CommandResult applied = RunCommand(
      {CtlBinary(), "apply", "-f", OneLocation(home, "grow", 10, "500m", false), "--wait"},
      absl::Minutes(2));
  INFO(applied.output);
  REQUIRE(applied.exit_code == 0);
  const std::map<std::string, int> first = DescribeApp("grow").replicas_in;
  REQUIRE(first.size() == 1);
  const std::string at = first.begin()->first;
  // Eighty (40 CPU, more than any one cluster holds): those that fit run
  // there, the others wait, named, and are tried again; none goes elsewhere.
  CommandResult scaled = RunCommand(
      {CtlBinary(), "apply", "-f", OneLocation(home, "grow", 80, "500m", false), "--wait"},
      absl::Minutes(3));
  INFO(scaled.output);
  Described waiting;
  for (absl::Time end = absl::Now() + absl::Seconds(60); absl::Now() < end;) {
    waiting = DescribeApp("grow");
    if (absl::StrContains(waiting.message, "attempt 3")) break;  // tried again twice
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  INFO(waiting.output);
  REQUIRE(waiting.replicas_in.size() == 1);
  CHECK(waiting.replicas_in.count(at) == 1);
  CHECK(waiting.replicas_in[at] > 10);
  CHECK(waiting.replicas_in[at] < 80);
  CHECK(absl::StrContains(waiting.phase, "Degraded"));
  CHECK(absl::StrContains(waiting.message, "replicas not placed, found no node (tried again at"));
  CHECK(absl::StrContains(waiting.message, "attempt 3"));
  CHECK(absl::StrContains(waiting.message, "numberOfLocations 1: service web already runs in " +
                                               at + " and bursting is off"));
  // Back to what fits: Running.
  CommandResult back = RunCommand(
      {CtlBinary(), "apply", "-f", OneLocation(home, "grow", 10, "500m", false), "--wait"},
      absl::Minutes(2));
  INFO(back.output);
  REQUIRE(back.exit_code == 0);
  Described fits;
  for (absl::Time end = absl::Now() + absl::Seconds(60); absl::Now() < end;) {
    fits = DescribeApp("grow");
    if (absl::StrContains(fits.phase, "Running")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  INFO(fits.output);
  CHECK(fits.replicas_in == std::map<std::string, int>{{at, 10}});
  CHECK(absl::StrContains(fits.phase, "Running"));
  RunCommand({CtlBinary(), "down"}, absl::Minutes(1));
}

// "cluster/pod" of each placement of `app`, from `codecoctl get apps -o json`.
std::vector<std::string> PodsOf(const std::string& app) {
  std::vector<std::string> pods;
  CommandResult r = RunCommand({CtlBinary(), "get", "apps", "-o", "json"}, absl::Seconds(30));
  nlohmann::json doc = nlohmann::json::parse(r.output, nullptr, false);
  if (doc.is_discarded()) return pods;
  for (const auto& a : doc.value("applications", nlohmann::json::array())) {
    if (a["metadata"].value("name", "") != app) continue;
    for (const auto& p : a["status"].value("placements", nlohmann::json::array())) {
      pods.push_back(p.value("cluster", "") + "/" + p.value("pod", ""));
    }
  }
  return pods;
}

// Waits up to a minute for `app`'s phase line to contain `phase`.
Described WaitForPhase(const std::string& app, const std::string& phase) {
  Described d;
  for (absl::Time end = absl::Now() + absl::Seconds(60); absl::Now() < end;) {
    d = DescribeApp(app, app);
    if (absl::StrContains(d.phase, phase)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  return d;
}

TEST_CASE(
    "a MultiClusterJob runs its pods to completion two at a time and fails past its backoffLimit") {
  if (codeco::testing::SanitizedBuild()) {
    // CI time: the job's status and its next pods run under the sanitizers
    // in acm_core_test.
    WARN("skipped under a sanitizer");
    return;
  }
  FederationHome home;
  CommandResult up = RunCommand(
      {CtlBinary(), "up", "--scenario", FiveSiteScenario(), "--no-prometheus"}, absl::Minutes(3));
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  REQUIRE(codeco::testing::WaitUntilClustersReady(6));
  // Three completions, two pods at a time, one failure tolerated.
  const std::string example = codeco::testing::SourceDir() + "/examples/cams/mcj-batch.yaml";
  CommandResult applied =
      RunCommand({CtlBinary(), "apply", "-f", example, "--wait"}, absl::Minutes(2));
  INFO(applied.output);
  REQUIRE(applied.exit_code == 0);
  const absl::Time started = absl::Now();
  REQUIRE(absl::StrContains(WaitForPhase("batch-render", "Running").phase, "Running"));
  std::vector<std::string> pods = PodsOf("batch-render");
  REQUIRE(pods.size() == 2);
  auto end_pod = [](const std::string& pod, const std::string& how) {
    CommandResult ended = RunCommand({CtlBinary(), "fault", "pod", pod, how}, absl::Seconds(30));
    INFO(ended.output);
    REQUIRE(ended.exit_code == 0);
  };
  // A failure within the limit: a new pod takes the failed one's slot.
  end_pod(pods[0], "--fail");
  Described retried;
  std::vector<std::string> now;
  for (absl::Time end = absl::Now() + absl::Seconds(60); absl::Now() < end;) {
    retried = DescribeApp("batch-render", "batch-render");
    now = PodsOf("batch-render");
    if (now.size() == 2 && std::find(now.begin(), now.end(), pods[0]) == now.end()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  INFO(retried.output);
  CHECK(absl::StrContains(retried.output, "job 0/3 succeeded, 1 failed"));
  REQUIRE(now.size() == 2);
  REQUIRE(std::find(now.begin(), now.end(), pods[0]) == now.end());
  // The new pod runs before it can end.
  REQUIRE(absl::StrContains(WaitForPhase("batch-render", "Running").phase, "Running"));
  // Both running pods succeed: the third completion gets its own pod.
  for (const std::string& pod : now) end_pod(pod, "--succeed");
  Described third;
  std::vector<std::string> last;
  for (absl::Time end = absl::Now() + absl::Seconds(60); absl::Now() < end;) {
    third = DescribeApp("batch-render", "batch-render");
    last = PodsOf("batch-render");
    if (absl::StrContains(third.output, "job 2/3 succeeded") &&
        std::any_of(last.begin(), last.end(), [&](const std::string& p) {
          return std::find(now.begin(), now.end(), p) == now.end();
        })) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  INFO(third.output);
  std::string next;
  for (const std::string& p : last) {
    if (std::find(now.begin(), now.end(), p) == now.end()) next = p;
  }
  REQUIRE_FALSE(next.empty());
  // Running once the new pod has started.
  REQUIRE(absl::StrContains(WaitForPhase("batch-render", "Running").phase, "Running"));
  end_pod(next, "--succeed");
  Described done = WaitForPhase("batch-render", "Succeeded");
  INFO(done.output);
  CHECK(absl::StrContains(done.phase, "Succeeded"));
  CHECK(absl::StrContains(done.output, "job 3/3 succeeded, 1 failed"));
  WARN("apply to Succeeded, pods ended by hand, one retried: " << absl::Now() - started);

  // A second job whose pods fail twice: past backoffLimit 1, it fails.
  std::ifstream in(example);
  std::string yaml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  yaml = absl::StrReplaceAll(yaml, {{"name: batch-render", "name: batch-fail"}});
  const std::string path = (home.path / "batch-fail.yaml").string();
  std::ofstream(path) << yaml;
  REQUIRE(RunCommand({CtlBinary(), "apply", "-f", path, "--wait"}, absl::Minutes(2)).exit_code ==
          0);
  REQUIRE(absl::StrContains(WaitForPhase("batch-fail", "Running").phase, "Running"));
  std::vector<std::string> failing = PodsOf("batch-fail");
  REQUIRE(failing.size() == 2);
  REQUIRE(
      RunCommand({CtlBinary(), "fault", "pod", failing[0], "--fail", "--message", "exit code 3"},
                 absl::Seconds(30))
          .exit_code == 0);
  REQUIRE(
      RunCommand({CtlBinary(), "fault", "pod", failing[1], "--fail", "--message", "exit code 4"},
                 absl::Seconds(30))
          .exit_code == 0);
  Described failed = WaitForPhase("batch-fail", "Failed");
  INFO(failed.output);
  CHECK(absl::StrContains(failed.phase, "Failed"));
  CHECK(absl::StrContains(
      failed.message, "job batch-fail failed: 2 of its pods failed, more than its backoffLimit 1"));
  CHECK(absl::StrContains(failed.message, "exit code 3"));
  RunCommand({CtlBinary(), "down"}, absl::Minutes(1));
}

}  // namespace
