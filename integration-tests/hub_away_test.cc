// The hub out of reach while nodes fail (DESIGN.md "Hub away", issue 17), on
// the five-site federation (`codecoctl up`): every link of the hub is cut
// and one node fails in each of two managed clusters. Each cluster's own swm
// moves the pods of its failed node to its other nodes (local decisions);
// once the hub is back it adopts them into its plans, and ACM's view — where
// every pod runs, node included — matches what the clusters run, with no
// workload running twice.
//
// Time is scaled ten to one: the cut lasts 60 s for the ten minutes,
// and the graces are a tenth of their defaults (swm.hub_away_after 3 s for
// 30 s, swm.failure_grace 6 s for 60 s, swm.adapt_interval 1 s for 10 s).
// Nothing fails on timing: every wait is on a condition, with a generous
// limit; the figures are printed for docs/benchmarks.md.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "federation_util.h"
#include "process.h"

namespace codeco::testing {
namespace {

namespace fs = std::filesystem;

// "CLUSTER/POD" -> node, for every pod of the applications in `apps`.
using PodNodes = std::map<std::string, std::string>;

// Where the clusters run the pods of `apps` (pods that ended are left out).
PodNodes ClusterPods(const std::map<std::string, std::string>& lms,
                     const std::set<std::string>& apps, std::vector<std::string>* twice = nullptr) {
  PodNodes out;
  std::map<std::string, int> per_service;
  for (const auto& [cluster, endpoint] : lms) {
    for (const codeco::lms::v1::Pod& pod : PodsOf(endpoint, "")) {
      auto app = pod.labels().find("codeco.io/application");
      if (app == pod.labels().end() || !apps.count(app->second)) continue;
      if (pod.phase() == codeco::lms::v1::POD_PHASE_FAILED ||
          pod.phase() == codeco::lms::v1::POD_PHASE_SUCCEEDED) {
        continue;
      }
      out[cluster + "/" + pod.name()] = pod.node_name();
      ++per_service[app->second + "/" + pod.labels().at("codeco.io/service")];
    }
  }
  if (twice != nullptr) {
    for (const auto& [service, count] : per_service) {
      if (count > 1) twice->push_back(absl::StrCat(service, " runs ", count, " pods"));
    }
  }
  return out;
}

// Where ACM says the pods of `apps` run, and the applications not Running;
// nullopt when ACM cannot be read.
std::optional<PodNodes> AcmPods(const std::set<std::string>& apps,
                                std::vector<std::string>& not_running) {
  CommandResult r = RunCommand({CtlBinary(), "get", "apps", "-o", "json"}, absl::Seconds(30));
  if (r.exit_code != 0) return std::nullopt;
  nlohmann::json doc = nlohmann::json::parse(r.output, nullptr, false);
  if (doc.is_discarded()) return std::nullopt;
  PodNodes out;
  for (const auto& a : doc.value("applications", nlohmann::json::array())) {
    const std::string name = a["metadata"].value("name", "");
    if (!apps.count(name)) continue;
    const nlohmann::json status = a.value("status", nlohmann::json::object());
    if (status.value("phase", "") != "APPLICATION_PHASE_RUNNING") {
      not_running.push_back(name + ": " + status.value("phase", ""));
    }
    for (const auto& p : status.value("placements", nlohmann::json::array())) {
      if (p.value("pod", "").empty()) continue;
      out[p.value("cluster", "") + "/" + p.value("pod", "")] = p.value("node", "");
    }
  }
  return out;
}

// What differs between ACM's view and the clusters, one line each.
std::vector<std::string> Differences(const std::map<std::string, std::string>& lms,
                                     const std::set<std::string>& apps) {
  std::vector<std::string> out;
  const PodNodes running = ClusterPods(lms, apps, &out);
  std::optional<PodNodes> seen = AcmPods(apps, out);
  if (!seen.has_value()) return {"ACM cannot be read"};
  for (const auto& [pod, node] : running) {
    auto it = seen->find(pod);
    if (it == seen->end()) {
      out.push_back(pod + " runs on " + node + " but ACM does not report it");
    } else if (it->second != node) {
      out.push_back(pod + " runs on " + node + " but ACM says " + it->second);
    }
  }
  for (const auto& [pod, node] : *seen) {
    if (!running.count(pod)) out.push_back(pod + " reported by ACM on " + node + " runs nowhere");
  }
  return out;
}

// Runs `codecoctl ARGS...`, failing the test when it does not succeed.
void Ctl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {CtlBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult r = RunCommand(argv, absl::Seconds(30));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
}

TEST_CASE(
    "with the hub cut away failed nodes' pods move inside their clusters and the hub adopts them") {
  FederationHome home;
  CommandResult up =
      RunCommand({CtlBinary(), "up", "--scenario", FiveSiteScenario(), "--no-prometheus", "--set",
                  "swm.adapt_interval=1s", "--set", "swm.failure_grace=6s", "--set-members",
                  "swm.adapt_interval=1s", "--set-members", "swm.failure_grace=6s", "--set-members",
                  "swm.hub_away_after=3s"},
                 absl::Minutes(3));
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  const std::map<std::string, std::string> lms = LmsEndpoints(up.output);
  REQUIRE(lms.size() >= 6);
  REQUIRE(WaitUntilClustersReady(6));

  std::set<std::string> apps;
  for (int i = 0; i < 8; ++i) {
    const std::string name = absl::StrCat("edge-", i);
    const fs::path file = home.path / (name + ".yaml");
    std::ofstream(file) << FrontBackCam(name);
    Ctl({"apply", "-f", file.string()});
    apps.insert(name);
  }
  std::vector<std::string> differences;
  for (absl::Time end = absl::Now() + absl::Minutes(2); absl::Now() < end;) {
    differences = Differences(lms, apps);
    if (differences.empty() && ClusterPods(lms, apps).size() == 2 * apps.size()) break;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  for (const auto& d : differences) UNSCOPED_INFO(d);
  REQUIRE(differences.empty());

  // The two clusters holding most pods; in each, the node holding most.
  const PodNodes before = ClusterPods(lms, apps);
  std::map<std::string, std::map<std::string, std::set<std::string>>> by_node;
  for (const auto& [pod, node] : before) {
    by_node[pod.substr(0, pod.find('/'))][node].insert(pod);
  }
  std::vector<std::pair<size_t, std::string>> busiest;
  for (const auto& [cluster, nodes] : by_node) {
    size_t pods = 0;
    for (const auto& [node, on] : nodes) pods += on.size();
    busiest.push_back({pods, cluster});
  }
  std::sort(busiest.rbegin(), busiest.rend());
  REQUIRE(busiest.size() >= 2);
  std::map<std::string, std::string> failed;  // "CLUSTER/POD" -> the node it must leave
  std::vector<std::string> failed_nodes;
  for (int i = 0; i < 2; ++i) {
    const std::string& cluster = busiest[i].second;
    std::string node;
    size_t most = 0;
    for (const auto& [n, on] : by_node[cluster]) {
      if (on.size() > most) most = on.size(), node = n;
    }
    failed_nodes.push_back(cluster + "/" + node);
    for (const std::string& pod : by_node[cluster][node]) failed[pod] = node;
  }

  // The hub goes away; then the nodes fail.
  const absl::Time cut_at = absl::Now();
  Ctl({"fault", "hub", "--cut"});
  std::this_thread::sleep_for(std::chrono::seconds(2));
  for (const std::string& node : failed_nodes) Ctl({"fault", "node", node, "--fail"});
  const absl::Time failed_at = absl::Now();

  // Each pod of a failed node runs again on another node of its cluster,
  // decided there: the hub is still away.
  std::vector<std::string> waiting;
  absl::Time moved_at = absl::InfiniteFuture();
  for (absl::Time end = cut_at + absl::Seconds(60); absl::Now() < end;) {
    const PodNodes now = ClusterPods(lms, apps);
    waiting.clear();
    for (const auto& [pod, node] : failed) {
      auto it = now.find(pod);
      if (it == now.end() || it->second == node) waiting.push_back(pod);
    }
    if (waiting.empty()) {
      moved_at = absl::Now();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  for (const auto& w : waiting) UNSCOPED_INFO(w << " still waits for a node");
  REQUIRE(waiting.empty());
  std::vector<std::string> twice;
  const PodNodes during = ClusterPods(lms, apps, &twice);
  for (const auto& t : twice) UNSCOPED_INFO(t);
  CHECK(twice.empty());
  CHECK(during.size() == 2 * apps.size());
  for (const auto& [pod, node] : before) CHECK(during.count(pod));  // same names, same clusters

  // PDLC and NetMA of a cluster with a failed node work on local data: its
  // scores (the failed node among them) and its own measured cost map.
  const std::string cluster = failed_nodes[0].substr(0, failed_nodes[0].find('/'));
  CommandResult scores = RunCommand(
      {CtlBinary(), "get", "scores", "--cluster", cluster, "-o", "json"}, absl::Seconds(30));
  INFO(scores.output);
  CHECK(scores.exit_code == 0);
  CHECK_THAT(scores.output, Catch::Contains(failed_nodes[0].substr(cluster.size() + 1)));
  const auto delays = DelayCostMap(cluster);
  CHECK(std::count_if(delays.begin(), delays.end(), [&](const auto& entry) {
          return entry.first.first == cluster && entry.second > 0;
        }) >= 4);  // to its four peers edge-to-edge, the hub's link cut

  // The cut lasts its scaled ten minutes; then the hub is back.
  const absl::Duration left = cut_at + absl::Seconds(60) - absl::Now();
  if (left > absl::ZeroDuration()) absl::SleepFor(left);
  Ctl({"fault", "hub", "--heal"});
  const absl::Time healed_at = absl::Now();
  // ACM's view matches the clusters, and the hub's plans took every local
  // move (one LOCAL_RESCHEDULE migration each) and made no other.
  absl::Time matched_at = absl::InfiniteFuture();
  absl::Time adopted_at = absl::InfiniteFuture();
  size_t adopted = 0;
  std::vector<std::string> others;
  for (absl::Time end = healed_at + absl::Minutes(3); absl::Now() < end;) {
    differences = Differences(lms, apps);
    if (differences.empty() && matched_at == absl::InfiniteFuture()) matched_at = absl::Now();
    adopted = 0;
    others.clear();
    for (const std::string& app : apps) {
      CommandResult r = RunCommand({CtlBinary(), "get", "migrations", "--app", app, "-o", "json"},
                                   absl::Seconds(30));
      REQUIRE(r.exit_code == 0);
      nlohmann::json doc = nlohmann::json::parse(r.output, nullptr, false);
      REQUIRE_FALSE(doc.is_discarded());
      for (const auto& m : doc.value("migrations", nlohmann::json::array())) {
        if (m.value("reason", "") == "MIGRATION_REASON_LOCAL_RESCHEDULE") {
          ++adopted;
        } else {
          others.push_back(m.value("id", "") + " " + m.value("reason", ""));
        }
      }
    }
    if (adopted == failed.size() && adopted_at == absl::InfiniteFuture()) adopted_at = absl::Now();
    if (differences.empty() && adopted == failed.size()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  for (const auto& d : differences) UNSCOPED_INFO(d);
  CHECK(differences.empty());
  CHECK(adopted == failed.size());
  // Each cluster's agent reported the outage it lived through.
  CommandResult clusters =
      RunCommand({CtlBinary(), "get", "clusters", "-o", "json"}, absl::Seconds(30));
  REQUIRE(clusters.exit_code == 0);
  const nlohmann::json listed = nlohmann::json::parse(clusters.output, nullptr, false);
  REQUIRE_FALSE(listed.is_discarded());
  size_t outages = 0;
  for (const auto& c : listed.value("clusters", nlohmann::json::array())) {
    if (c.contains("last_hub_outage")) ++outages;
  }
  CHECK(outages == lms.size());
  for (const auto& o : others) UNSCOPED_INFO("the hub also moved " << o);
  CHECK(others.empty());
  const absl::Time converged_at = std::max(matched_at, adopted_at);
  std::cout << "hub away: " << failed.size() << " pods on " << failed_nodes.size()
            << " failed nodes ran again in their clusters "
            << absl::FormatDuration(moved_at - failed_at) << " after the failures (hub away after "
            << "3s, failure grace 6s); after the heal ACM's view matched the clusters in "
            << absl::FormatDuration(matched_at - healed_at) << " and the hub's plans took the "
            << adopted << " local moves in " << absl::FormatDuration(adopted_at - healed_at)
            << " (both: " << absl::FormatDuration(converged_at - healed_at) << ")" << std::endl;
}

}  // namespace
}  // namespace codeco::testing
