// Faults while applications are being applied on the five-site federation
// (`codecoctl up`): the hub ACM, the hub SWM and a managed cluster's SWM
// killed with SIGKILL and restarted, the link to one member cut, the hub SWM
// down for a minute, and, on a replicated hub (state in etcd), the leading
// ACM and SWM replicas and an etcd member killed. After each, every application whose apply was
// acknowledged ends Running exactly once — one pod per service, the pods ACM
// reports, labelled with the plan in force — and no pod is left in any
// cluster that no stored plan owns.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "codeco/common/etcd_client.h"
#include "federation_util.h"
#include "process.h"

namespace codeco::testing {
namespace {

namespace fs = std::filesystem;

// What ACM reports of one application.
struct AppView {
  std::string phase;
  int64_t plan_revision = 0;
  std::set<std::string> pods;  // the pods of its placements, as CLUSTER/POD
};

// Every application ACM knows, by name; nullopt when ACM cannot be read.
std::optional<std::map<std::string, AppView>> Applications() {
  CommandResult r = RunCommand({CtlBinary(), "get", "apps", "-o", "json"}, absl::Seconds(30));
  if (r.exit_code != 0) return std::nullopt;
  nlohmann::json doc = nlohmann::json::parse(r.output, nullptr, false);
  if (doc.is_discarded()) return std::nullopt;
  std::map<std::string, AppView> out;
  for (const auto& a : doc.value("applications", nlohmann::json::array())) {
    AppView view;
    const nlohmann::json status = a.value("status", nlohmann::json::object());
    view.phase = status.value("phase", "");
    // int64 is a string in proto3 JSON.
    if (status.contains("plan_revision")) {
      const auto& revision = status["plan_revision"];
      view.plan_revision =
          revision.is_string() ? std::stoll(revision.get<std::string>()) : revision.get<int64_t>();
    }
    for (const auto& p : status.value("placements", nlohmann::json::array())) {
      if (!p.value("pod", "").empty()) {
        view.pods.insert(p.value("cluster", "") + "/" + p.value("pod", ""));
      }
    }
    out[a["metadata"].value("name", "")] = view;
  }
  return out;
}

// A pod in one of the clusters.
struct SeenPod {
  std::string cluster, name, application, service;
  int64_t plan_revision = 0;
};

std::vector<SeenPod> AllPods(const std::map<std::string, std::string>& lms) {
  std::vector<SeenPod> out;
  for (const auto& [cluster, endpoint] : lms) {
    for (const codeco::lms::v1::Pod& pod : PodsOf(endpoint, "")) {
      auto label = [&](const std::string& key) {
        auto it = pod.labels().find(key);
        return it == pod.labels().end() ? std::string() : it->second;
      };
      std::string revision = label("codeco.io/plan-revision");
      out.push_back({cluster, pod.name(), label("codeco.io/application"),
                     label("codeco.io/service"), revision.empty() ? 0 : std::stoll(revision)});
    }
  }
  return out;
}

// What is wrong with the federation now, one line each; empty when every
// acknowledged application runs exactly once and every pod is owned.
std::vector<std::string> Problems(const std::set<std::string>& acknowledged,
                                  const std::map<std::string, std::string>& lms) {
  std::vector<std::string> problems;
  auto apps = Applications();
  if (!apps) return {"ACM cannot be read"};
  for (const std::string& name : acknowledged) {
    auto it = apps->find(name);
    if (it == apps->end()) {
      problems.push_back(name + ": acknowledged but unknown to ACM");
    } else if (it->second.phase != "APPLICATION_PHASE_RUNNING") {
      problems.push_back(name + ": " + it->second.phase);
    }
  }
  std::map<std::string, std::map<std::string, int>> pods_per_service;
  for (const SeenPod& pod : AllPods(lms)) {
    auto it = apps->find(pod.application);
    const std::string where = pod.cluster + "/" + pod.name;
    if (it == apps->end()) {
      problems.push_back(where + ": pod of no application");
      continue;
    }
    if (pod.plan_revision != it->second.plan_revision) {
      problems.push_back(absl::StrCat(where, ": plan revision ", pod.plan_revision,
                                      " but the plan in force is ", it->second.plan_revision));
    }
    if (!it->second.pods.contains(where)) {
      problems.push_back(where + ": not among the pods ACM reports for " + pod.application);
    }
    ++pods_per_service[pod.application][pod.service];
  }
  for (const std::string& name : acknowledged) {
    const auto& services = pods_per_service[name];
    for (const char* service : {"front", "back"}) {
      auto it = services.find(service);
      int count = it == services.end() ? 0 : it->second;
      if (count != 1) problems.push_back(absl::StrCat(name, "/", service, ": ", count, " pods"));
    }
  }
  return problems;
}

// Waits (up to `limit`) until Problems() is empty; returns the last problems.
std::vector<std::string> WaitUntilConsistent(const std::set<std::string>& acknowledged,
                                             const std::map<std::string, std::string>& lms,
                                             absl::Duration limit) {
  std::vector<std::string> problems;
  for (absl::Time end = absl::Now() + limit; absl::Now() < end;) {
    problems = Problems(acknowledged, lms);
    if (problems.empty()) return problems;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return problems;
}

// Applies `count` applications `prefix-0..` one after the other; before the
// apply of index i, `fault(i)` runs. Returns the names whose apply codecoctl
// acknowledged (exit 0).
template <typename Fault>
std::set<std::string> ApplyLoop(const FederationHome& home, const std::string& prefix, int count,
                                Fault fault) {
  std::set<std::string> acknowledged;
  for (int i = 0; i < count; ++i) {
    fault(i);
    const std::string name = absl::StrCat(prefix, "-", i);
    const fs::path file = home.path / (name + ".yaml");
    std::ofstream(file) << FrontBackCam(name);
    CommandResult apply =
        RunCommand({CtlBinary(), "apply", "-f", file.string()},
                   absl::Seconds(30));
    if (apply.exit_code == 0) acknowledged.insert(name);
    else UNSCOPED_INFO("apply " << name << " not acknowledged: " << apply.output);
  }
  return acknowledged;
}

// Brings the federation up (with `extra` flags) and waits for its six
// clusters; returns the LMS endpoints.
std::map<std::string, std::string> Up(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {CtlBinary(), "up", "--scenario", FiveSiteScenario(),
                                   "--no-prometheus"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  CommandResult up = RunCommand(argv, absl::Minutes(3));
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  std::map<std::string, std::string> lms = LmsEndpoints(up.output);
  REQUIRE(lms.size() >= 6);
  REQUIRE(WaitUntilClustersReady(6));
  return lms;
}

void Restart(const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {CtlBinary(), "restart"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  CommandResult r = RunCommand(argv, absl::Minutes(3));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
}

TEST_CASE("SIGKILL of the hub ACM and SWM and of an MC SWM during applies loses nothing") {
  FederationHome home;
  const auto lms = Up();
  // Every third apply follows a crash, in turn of each process, three times each.
  const std::vector<std::string> victims = {"hub/acm", "hub/swm", "rennes/swm"};
  int crashes = 0;
  std::set<std::string> acknowledged = ApplyLoop(home, "crash", 27, [&](int i) {
    if (i % 3 != 1) return;
    Restart({victims[crashes % victims.size()], "--kill"});
    ++crashes;
  });
  CHECK(crashes == 9);
  INFO("acknowledged " << acknowledged.size() << " of 27");
  REQUIRE(acknowledged.size() >= 18);
  std::vector<std::string> problems = WaitUntilConsistent(acknowledged, lms, absl::Minutes(2));
  for (const auto& p : problems) UNSCOPED_INFO(p);
  CHECK(problems.empty());
}

TEST_CASE("the link to one member cut during applies loses nothing") {
  FederationHome home;
  const auto lms = Up();
  std::set<std::string> acknowledged = ApplyLoop(home, "cut", 10, [&](int i) {
    // Cut the hub from Rennes for the middle applies, then heal it.
    if (i == 3) {
      REQUIRE(RunCommand({CtlBinary(), "fault", "link", "hub", "rennes", "--cut"},
                         absl::Seconds(30)).exit_code == 0);
    }
    if (i == 7) {
      REQUIRE(RunCommand({CtlBinary(), "fault", "link", "hub", "rennes", "--heal"},
                         absl::Seconds(30)).exit_code == 0);
    }
  });
  INFO("acknowledged " << acknowledged.size() << " of 10");
  REQUIRE(acknowledged.size() == 10);  // ACM itself stays reachable
  std::vector<std::string> problems = WaitUntilConsistent(acknowledged, lms, absl::Minutes(2));
  for (const auto& p : problems) UNSCOPED_INFO(p);
  CHECK(problems.empty());
}

TEST_CASE("the hub SWM down for a minute during applies loses nothing") {
  FederationHome home;
  const auto lms = Up();
  // The outage runs beside the applies: ACM acknowledges them and places
  // them once SWM is back.
  std::thread outage;
  std::set<std::string> acknowledged = ApplyLoop(home, "outage", 8, [&](int i) {
    if (i == 2) {
      outage = std::thread([] {
        RunCommand({CtlBinary(), "restart", "hub/swm", "--kill", "--down-for", "60s"},
                   absl::Minutes(3));
      });
      std::this_thread::sleep_for(std::chrono::seconds(2));  // let it go down first
    }
  });
  outage.join();
  INFO("acknowledged " << acknowledged.size() << " of 8");
  REQUIRE(acknowledged.size() == 8);  // ACM takes applies while SWM is away
  std::vector<std::string> problems = WaitUntilConsistent(acknowledged, lms, absl::Minutes(2));
  for (const auto& p : problems) UNSCOPED_INFO(p);
  CHECK(problems.empty());
}

// The pid of the replica of `service` ("hub/acm") that leads now: alive, and
// its output since it started says it serves. Waits up to a minute for one;
// 0 when none leads by then.
int LeaderOf(const FederationHome& home, const std::string& service) {
  for (absl::Time end = absl::Now() + absl::Minutes(1); absl::Now() < end;) {
    const nlohmann::json state = home.State();
    const std::string logs = state.value("run_dir", "") + "/logs/";
    for (const auto& p : state.value("processes", nlohmann::json::array())) {
      const std::string name = p.value("name", "");
      if (name != service && name.rfind(service + "-", 0) != 0) continue;
      const int pid = p.value("pid", 0);
      const std::string out =
          ReadWholeFile(logs + absl::StrReplaceAll(name, {{"/", "-"}}) + ".out");
      if (Alive(pid) && out.find(" listening on ") != std::string::npos) return pid;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return 0;
}

// The name `codecoctl up` gave the process `pid`.
std::string NameOf(const FederationHome& home, int pid) {
  for (const auto& p : home.State().value("processes", nlohmann::json::array())) {
    if (p.value("pid", 0) == pid) return p.value("name", "");
  }
  return "";
}

TEST_CASE("SIGKILL of the leading hub ACM and SWM replicas and of an etcd member loses nothing") {
  FederationHome home;
  const auto lms = Up({"--hub-replicas", "2"});
  {
    // The hub's etcd speaks mutual TLS: a client with a certificate of the
    // run's CA is served, a plaintext one is not.
    const nlohmann::json state = home.State();
    std::vector<std::string> members;
    for (const auto& p : state.value("processes", nlohmann::json::array())) {
      if (!absl::StartsWith(p.value("name", ""), "hub/etcd-")) continue;
      const std::string url = p.value("http", "");
      CHECK(absl::StartsWith(url, "https://"));
      members.push_back(std::string(absl::StripPrefix(url, "https://")));
    }
    REQUIRE(members.size() == 3);
    const TlsFiles operator_tls{.ca_file = state.value("ca_file", ""),
                                .cert_file = state.value("cert_file", ""),
                                .key_file = state.value("key_file", "")};
    CHECK(WaitForEtcd(members, absl::Now() + absl::Seconds(20), operator_tls).ok());
    CHECK_FALSE(WaitForEtcd(members, absl::Now() + absl::Seconds(2)).ok());
  }
  // Before every third apply the leader of the hub ACM or SWM is killed (and
  // restarted, to stand by); a standby must take over. Once, an etcd member
  // is killed and stays down.
  const std::vector<std::string> services = {"hub/acm", "hub/swm"};
  int takeovers = 0;
  std::set<std::string> acknowledged = ApplyLoop(home, "ha", 16, [&](int i) {
    if (i == 8) {
      for (const auto& p : home.State().value("processes", nlohmann::json::array())) {
        if (p.value("name", "") == "hub/etcd-0") kill(p.value("pid", 0), SIGKILL);
      }
      return;
    }
    if (i % 3 != 1) return;
    const std::string& service = services[(i / 3) % services.size()];
    const int leader = LeaderOf(home, service);
    REQUIRE(leader != 0);
    Restart({NameOf(home, leader), "--kill"});
    const int next = LeaderOf(home, service);
    INFO(service << ": no replica took over from pid " << leader);
    REQUIRE(next != 0);
    CHECK(next != leader);
    ++takeovers;
  });
  CHECK(takeovers == 5);
  INFO("acknowledged " << acknowledged.size() << " of 16");
  REQUIRE(acknowledged.size() == 16);  // a leader serves again before each apply
  std::vector<std::string> problems = WaitUntilConsistent(acknowledged, lms, absl::Minutes(2));
  for (const auto& p : problems) UNSCOPED_INFO(p);
  CHECK(problems.empty());
}

}  // namespace
}  // namespace codeco::testing
