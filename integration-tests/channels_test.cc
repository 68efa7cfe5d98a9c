// Channels end to end on the five-site federation (`codecoctl up`): an
// application whose channel crosses clusters gets one virtual link from NetMA
// and its channel runs; degrading the link past the channel's bound makes the
// channel OOQOS and the trigger shows in `codecoctl watch app`; channels that
// together exceed a link's bandwidth never share it; deleting the application
// deletes its virtual link, after which the relay (the edge device) refuses
// the channel's traffic. Timings are reported (WARN), never asserted.

#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "federation_util.h"
#include "nlohmann/json.hpp"
#include "process.h"

namespace {

namespace fs = std::filesystem;
using codeco::testing::CommandResult;
using codeco::testing::CtlBinary;
using codeco::testing::FederationHome;
using codeco::testing::FiveSiteScenario;
using codeco::testing::PlacedClusters;
using codeco::testing::RunCommand;
using codeco::testing::WaitUntilClustersReady;

const std::string& kCtl = CtlBinary();

void Apply(const FederationHome& home, const std::string& name, const std::string& bandwidth) {
  fs::path file = home.path / (name + ".yaml");
  std::ofstream(file) << codeco::testing::SensorFusionCam(name, bandwidth);
  CommandResult apply = RunCommand({kCtl, "apply", "-f", file.string()}, absl::Seconds(30));
  INFO(apply.output);
  REQUIRE(apply.exit_code == 0);
}

// The application `name` as `codecoctl get apps -o json` shows it (null if absent).
nlohmann::json App(const std::string& name) {
  CommandResult r = RunCommand({kCtl, "get", "apps", "-o", "json"}, absl::Seconds(30));
  nlohmann::json doc = nlohmann::json::parse(r.output, nullptr, false);
  if (r.exit_code != 0 || doc.is_discarded()) return nullptr;
  for (const auto& a : doc.value("applications", nlohmann::json::array())) {
    if (a["metadata"].value("name", "") == name) return a;
  }
  return nullptr;
}

// The phase of channel `channel` of `app` ("" while not reported).
std::string ChannelPhase(const std::string& app, const std::string& channel) {
  nlohmann::json a = App(app);
  if (a.is_null()) return "";
  for (const auto& c : a["status"].value("channels", nlohmann::json::array())) {
    if (c.value("name", "") == channel) return c.value("phase", "");
  }
  return "";
}

// Waits up to `timeout` until channel `channel` of `app` is in `phase`;
// the seconds it took, or -1.
double WaitForChannel(const std::string& app, const std::string& channel, const std::string& phase,
                      absl::Duration timeout) {
  const absl::Time start = absl::Now();
  for (absl::Time end = start + timeout; absl::Now() < end;) {
    if (ChannelPhase(app, channel) == phase) return absl::ToDoubleSeconds(absl::Now() - start);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return -1;
}

// `codecoctl get links -o json`:
// {"measured": ListLinksResponse, "virtual": ListVirtualLinksResponse}.
nlohmann::json Links() {
  CommandResult r = RunCommand({kCtl, "get", "links", "-o", "json"}, absl::Seconds(30));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  nlohmann::json doc = nlohmann::json::parse(r.output, nullptr, false);
  REQUIRE_FALSE(doc.is_discarded());
  return doc;
}

// The virtual links of `app`.
std::vector<nlohmann::json> VirtualLinks(const std::string& app) {
  std::vector<nlohmann::json> out;
  for (const auto& l : Links()["virtual"].value("virtualLinks", nlohmann::json::array())) {
    if (l.value("application", "") == app) out.push_back(l);
  }
  return out;
}

int64_t Int(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return 0;
  return j[key].is_string() ? std::stoll(j[key].get<std::string>()) : j[key].get<int64_t>();
}

// The newest measured throughput of link lille -> `target`, in bits/s (0
// when not measured).
int64_t LinkCapacity(const std::string& target) {
  for (const auto& l : Links()["measured"].value("links", nlohmann::json::array())) {
    if (l.value("sourceCluster", "") == "lille" && l.value("targetCluster", "") == target) {
      return Int(l, "throughputBps");
    }
  }
  return 0;
}

// Waits until Lille's links to the two clusters close enough to it
// (luxembourg, nancy-cloud) are measured, throughput included, and their
// delay in the hub's cost map is within the channels' 8 ms; returns how many
// are by `timeout`.
int WaitLilleLinksWithinBound(absl::Duration timeout) {
  int measured = 0;
  for (absl::Time end = absl::Now() + timeout; measured < 2 && absl::Now() < end;) {
    measured = 0;
    const auto delays = codeco::testing::DelayCostMap();
    for (const auto& l : Links()["measured"].value("links", nlohmann::json::array())) {
      const std::string target = l.value("targetCluster", "");
      if (l.value("sourceCluster", "") != "lille" ||
          (target != "luxembourg" && target != "nancy-cloud") || Int(l, "throughputBps") == 0) {
        continue;
      }
      auto delay = delays.find({"lille", target});
      if (delay != delays.end() && delay->second < 8e6) ++measured;
    }
    if (measured < 2) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return measured;
}

// Waits until both services of `app` are placed, or it FAILED; the placement.
std::map<std::string, std::string> WaitPlacedOrFailed(const std::string& app, std::string* error) {
  for (absl::Time end = absl::Now() + absl::Seconds(90); absl::Now() < end;) {
    std::map<std::string, std::string> placed = PlacedClusters(app);
    if (placed.size() == 2) return placed;
    nlohmann::json a = App(app);
    if (!a.is_null() && a["status"].value("phase", "") == "APPLICATION_PHASE_FAILED") {
      *error = a["status"].value("error_msg", "");
      return {};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  *error = "neither placed nor failed after 90 s";
  return {};
}

}  // namespace

TEST_CASE("channels get virtual links and go OOQOS when their link degrades past the bound") {
  FederationHome home;
  CommandResult up = RunCommand({kCtl, "up", "--scenario", FiveSiteScenario(), "--no-prometheus"},
                                absl::Minutes(3));
  INFO(up.output);
  REQUIRE(up.exit_code == 0);
  REQUIRE(WaitUntilClustersReady(6));
  // The hub plans with NetMA's measurements: wait until Lille's links to the
  // two clusters close enough to it are measured, throughput included, and
  // their delay in the hub's cost map is within the channel's 8 ms (the first
  // probes, taken while 41 processes start, carry their noise).
  REQUIRE(WaitLilleLinksWithinBound(absl::Minutes(3)) == 2);

  // 1. The channel crosses clusters: one virtual link, and the channel RUNNING.
  Apply(home, "sensor-fusion", "5Mbps");
  std::string error;
  std::map<std::string, std::string> placed = WaitPlacedOrFailed("sensor-fusion", &error);
  INFO(error);
  REQUIRE(placed.size() == 2);
  REQUIRE(placed["sensor"] == "lille");
  const std::string fusion = placed["fusion"];
  REQUIRE(fusion != "lille");
  const double running_s =
      WaitForChannel("sensor-fusion", "readings", "CHANNEL_PHASE_RUNNING", absl::Seconds(90));
  REQUIRE(running_s >= 0);
  std::vector<nlohmann::json> vlinks = VirtualLinks("sensor-fusion");
  REQUIRE(vlinks.size() == 1);
  CHECK(vlinks[0].value("channel", "") == "readings");
  CHECK(vlinks[0].value("sourceCluster", "") == "lille");
  CHECK(vlinks[0].value("targetCluster", "") == fusion);
  CHECK(vlinks[0].value("targetEndpoint", "") == "sensor-fusion-fusion-0." + fusion + ":9000");
  CHECK(vlinks[0].value("managedBy", "") == "swm");
  CHECK(Int(vlinks[0], "minBandwidthBps") == 5'000'000);
  const std::string vlink_id = vlinks[0].value("id", "");
  // Lille's relay (its edge device) carries the channel's traffic now, and
  // only to the endpoint the link names.
  const std::map<std::string, std::string> relays = codeco::testing::RelayEndpoints(up.output);
  REQUIRE(relays.count("lille") == 1);
  const std::string endpoint = "sensor-fusion-fusion-0." + fusion + ":9000";
  std::string echoed;
  CHECK_THAT(
      codeco::testing::ConnectThroughRelay(relays.at("lille"), endpoint, "reading 1\n", &echoed),
      Catch::StartsWith("HTTP/1.1 200"));
  CHECK(echoed == "reading 1\n");
  CHECK_THAT(codeco::testing::ConnectThroughRelay(
                 relays.at("lille"), "sensor-fusion-fusion-1." + fusion + ":9000", "x", &echoed),
             Catch::StartsWith("HTTP/1.1 403"));
  CommandResult describe =
      RunCommand({kCtl, "describe", "app", "sensor-fusion"}, absl::Seconds(30));
  INFO(describe.output);
  CHECK_THAT(describe.output, Catch::Contains("RUNNING") && Catch::Contains(vlink_id));
  CommandResult table = RunCommand({kCtl, "get", "links"}, absl::Seconds(30));
  INFO(table.output);
  CHECK_THAT(table.output,
             Catch::Contains("Virtual links:") && Catch::Contains("sensor-fusion/readings"));
  WARN("channel readings lille -> " << fusion << " RUNNING " << running_s
                                    << " s after it was placed");

  // 2. The link degraded past the channel's 8 ms: OOQOS, and the trigger
  // shows in `codecoctl watch app` (its message and the DEGRADED phase).
  codeco::testing::ChildProcess watch({kCtl, "watch", "app", "sensor-fusion"},
                                      (home.path / "watch.err").string());
  CommandResult degrade =
      RunCommand({kCtl, "fault", "link", "lille", fusion, "--rtt", "60ms"}, absl::Seconds(30));
  INFO(degrade.output);
  REQUIRE(degrade.exit_code == 0);
  const double ooqos_s =
      WaitForChannel("sensor-fusion", "readings", "CHANNEL_PHASE_OOQOS", absl::Seconds(90));
  REQUIRE(ooqos_s >= 0);
  WARN("channel readings OOQOS " << ooqos_s
                                 << " s after its link degraded (NetMA probes every 5 s)");
  bool seen = false;
  for (absl::Time end = absl::Now() + absl::Seconds(30); !seen && absl::Now() < end;) {
    std::optional<std::string> line = watch.ReadLine(end);
    if (!line.has_value()) break;
    seen = line->find("channel readings OOQOS") != std::string::npos &&
           line->find("adaptation triggered") != std::string::npos &&
           line->find("Degraded") != std::string::npos;
  }
  CHECK(seen);
  watch.Stop(SIGTERM, absl::Now() + absl::Seconds(5));
  // The hub's adaptation loop acts on the OOQOS channel within a tick or
  // two (it moves fusion so that the channel meets its bound: LINK_FAILURE),
  // so the application may be running again already; the watch line above
  // showed it DEGRADED.
  CommandResult moves =
      RunCommand({kCtl, "get", "migrations", "--app", "sensor-fusion"}, absl::Seconds(30));
  WARN("moves of sensor-fusion by now:\n" << moves.output);

  // Healed: the channel runs again.
  REQUIRE(
      RunCommand({kCtl, "fault", "link", "lille", fusion, "--heal"}, absl::Seconds(30)).exit_code ==
      0);
  const double healed_s =
      WaitForChannel("sensor-fusion", "readings", "CHANNEL_PHASE_RUNNING", absl::Seconds(90));
  CHECK(healed_s >= 0);
  WARN("channel readings RUNNING again " << healed_s << " s after the link healed");

  // 3. Two channels that together exceed a link's measured bandwidth never
  // share it: the second goes over the other link close enough to Lille, or
  // is refused with the link named.
  // Under a sanitizer the bulk probes are bound by the instrumented relays'
  // CPU (measured from 8 to 391 Mbps on the same testbed), so no
  // bandwidth can be chosen that one link surely holds once and not twice;
  // there this part is left to the plain build and the core tests.
  std::vector<std::string> bandwidth_apps;
  if (codeco::testing::SanitizedBuild()) {
    WARN("sanitizer build: the link bandwidth part is checked in the plain build only");
  } else {
    // The hub's delay for the healed link keeps the 60 ms fault for a few
    // probes after the channel reads RUNNING again (the cost map averages
    // them): wait until both links are within the bound again, as at the
    // start, so that the sizing below is about bandwidth.
    REQUIRE(WaitLilleLinksWithinBound(absl::Minutes(2)) == 2);
    // Each probe measures the links afresh, and one probe can read a
    // quarter below the last: a first channel sized from one reading that
    // the next reading cannot hold is refused rightly. Then the test sizes
    // it again from the newer reading (at most three times).
    std::map<std::string, std::string> first;
    int64_t each = 0;
    std::string error_first;
    for (int attempt = 1; attempt <= 3 && first.empty(); ++attempt) {
      // Sized from the smaller link: fits either, so the greedy solve's
      // choice of link does not decide whether the first is placed.
      const int64_t capacity = std::min(LinkCapacity("luxembourg"), LinkCapacity("nancy-cloud"));
      REQUIRE(capacity > 0);
      each = capacity * 3 / 4;
      const std::string name = absl::StrCat("bw-first-", attempt);
      bandwidth_apps.push_back(name);
      Apply(home, name, absl::StrCat(each / 1000, "kbps"));
      first = WaitPlacedOrFailed(name, &error_first);
      if (first.empty()) {
        WARN(name << " of " << each / 1'000'000 << " Mbps refused (" << error_first
                  << "); sized again from the newer measurement");
        // Refused for the link's bandwidth, or because a link's newest
        // measurement is still over the channel's delay bound right after
        // step 2 healed it: either is right, and the next try reads afresh.
        REQUIRE_THAT(error_first, Catch::Contains("link lille -> ") ||
                                      Catch::Contains("channel readings: latency"));
      }
    }
    INFO("bw-first: " << error_first);
    REQUIRE(first.size() == 2);
    bandwidth_apps.push_back("bw-second");
    Apply(home, "bw-second", absl::StrCat(each / 1000, "kbps"));
    std::string refused;
    std::map<std::string, std::string> second = WaitPlacedOrFailed("bw-second", &refused);
    if (second.empty()) {
      // Refused for the bandwidth the first holds, or because the other
      // link's newest measurement is over the channel's delay bound (right
      // after step 2 healed it, a probe can still read it slow).
      CHECK_THAT(refused,
                 Catch::Contains("link lille -> ") || Catch::Contains("channel readings: latency"));
    } else if (second["fusion"] == first["fusion"]) {
      // Sharing a link is right only when its newest measurement holds both.
      const int64_t shared = LinkCapacity(first["fusion"]);
      INFO("both over lille -> " << first["fusion"] << ", measured " << shared << " bps");
      CHECK(2 * each <= shared);
    }
    WARN("two channels of " << each / 1'000'000 << " Mbps each: first over lille -> "
                            << first["fusion"] << ", second "
                            << (second.empty() ? "refused: " + refused
                                               : "over lille -> " + second["fusion"]));
  }

  // 4. Deleting the applications deletes their virtual links.
  bandwidth_apps.push_back("sensor-fusion");
  for (const std::string& name : bandwidth_apps) {
    if (App(name).is_null()) continue;
    REQUIRE(RunCommand({kCtl, "delete", "app", name}, absl::Seconds(30)).exit_code == 0);
  }
  size_t left = 1;
  for (absl::Time end = absl::Now() + absl::Seconds(60); left > 0 && absl::Now() < end;) {
    left = 0;
    for (const std::string& name : bandwidth_apps) left += VirtualLinks(name).size();
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  CHECK(left == 0);
  // And the relay refuses the channel's traffic again.
  CHECK_THAT(codeco::testing::ConnectThroughRelay(relays.at("lille"), endpoint, "x", &echoed),
             Catch::StartsWith("HTTP/1.1 403"));
}
