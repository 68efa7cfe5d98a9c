#include "federation_plan.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "codeco/common/ports.h"
#include "launcher.h"
#include "run_state.h"

namespace codeco::ctl {
namespace {

bool HasPair(const std::vector<std::string>& args, const std::string& flag,
             const std::string& value) {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag && args[i + 1] == value) return true;
  }
  return false;
}

const std::vector<ClusterEndpoint> kClusters = {
    {"hub", true, "127.0.1.1", "", "127.0.1.1:7300"},
    {"rennes", false, "127.0.2.1", "127.0.2.1:7100", "127.0.2.1:7300"},
    {"nantes", false, "127.0.3.1", "127.0.3.1:7100", ""},
};

TEST_CASE("the hub runs its four services on its own IP with mTLS") {
  auto hub = PlanHub(kClusters, {false, "/run/certs"}, "/run/data");
  REQUIRE(hub.size() == HubServices().size());
  REQUIRE(hub.back().name == "hub/acm");
  REQUIRE(hub.back().binary == "codeco-acm");
  REQUIRE(HasPair(hub.back().args, "--role", "hub"));
  REQUIRE(HasPair(hub.back().args, "--listen", "127.0.1.1:0"));
  REQUIRE(HasPair(hub.back().args, "--data-dir", "/run/data/hub/acm"));
  REQUIRE(HasPair(hub.back().args, "--tls.cert-file", "/run/certs/hub/acm.crt"));
  REQUIRE(HasPair(hub.back().args, "--network.egress-proxy", "127.0.1.1:7300"));
  REQUIRE(std::find(hub.back().args.begin(), hub.back().args.end(), "--insecure") == hub.back().args.end());
  // The hub is its own hub cluster: no flag.
  REQUIRE(std::find(hub.back().args.begin(), hub.back().args.end(), "--federation.hub-cluster") ==
          hub.back().args.end());
}

TEST_CASE("managed clusters register with the hub and use their LMS and relay") {
  auto mcs = PlanManagedClusters(kClusters, "127.0.1.1:4000", {true, ""}, "/d");
  REQUIRE(mcs.size() == 2 * ManagedClusterServices().size());
  for (const auto& spec : mcs) {
    INFO(spec.name);
    REQUIRE_FALSE(spec.hub);
    REQUIRE(HasPair(spec.args, "--role", "mc"));
    REQUIRE(HasPair(spec.args, "--federation.hub-acm", "127.0.1.1:4000"));
    // Whom the MC authorizes hub and operator callers against.
    REQUIRE(HasPair(spec.args, "--federation.hub-cluster", "hub"));
    REQUIRE(std::find(spec.args.begin(), spec.args.end(), "--insecure") != spec.args.end());
  }
  REQUIRE(mcs[0].name == "rennes/acm");
  REQUIRE(HasPair(mcs[0].args, "--federation.lms", "127.0.2.1:7100"));
  REQUIRE(HasPair(mcs[0].args, "--network.egress-proxy", "127.0.2.1:7300"));
  // A cluster without a relay calls peers directly.
  const auto& nantes = mcs[ManagedClusterServices().size()];
  REQUIRE(nantes.cluster == "nantes");
  REQUIRE(std::find(nantes.args.begin(), nantes.args.end(), "--network.egress-proxy") ==
          nantes.args.end());
}

TEST_CASE("the run state round-trips through its file") {
  std::random_device rd;
  auto home = std::filesystem::temp_directory_path() / ("codeco-home-" + std::to_string(rd()));
  setenv("CODECO_HOME", home.c_str(), 1);
  REQUIRE(LoadRunState().status().code() == absl::StatusCode::kNotFound);
  RunState state;
  state.scenario = "/x/five.yaml";
  state.acm = "127.0.1.1:4000";
  state.insecure = true;
  state.processes = {{"codef", 42, "/bin/codef", "127.0.0.1:1", ""},
                     {"hub/acm", 43, "/bin/codeco-acm", "127.0.1.1:4000", "http://m"}};
  REQUIRE(SaveRunState(state).ok());
  auto loaded = LoadRunState();
  REQUIRE(loaded.ok());
  REQUIRE(loaded->acm == "127.0.1.1:4000");
  REQUIRE(loaded->insecure);
  REQUIRE(loaded->processes.size() == 2);
  REQUIRE(loaded->processes[1].pid == 43);
  REQUIRE(loaded->processes[1].http == "http://m");
  RemoveRunState();
  REQUIRE(LoadRunState().status().code() == absl::StatusCode::kNotFound);
  std::filesystem::remove_all(home);
}

TEST_CASE("every NetMA probes every other cluster and the hub SWM plans with the hub NetMA") {
  std::vector<ClusterEndpoint> clusters = kClusters;
  clusters[0].netma_address = "127.0.1.1:7401";
  clusters[1].netma_address = "127.0.2.1:7402";
  clusters[2].netma_address = "127.0.3.1:7403";
  clusters[1].swm_address = "127.0.2.1:7502";
  auto hub = PlanHub(clusters, {true, ""}, "/d");
  auto mcs = PlanManagedClusters(clusters, "127.0.1.1:4000", {true, ""}, "/d");
  const ProcessSpec* hub_netma = nullptr;
  const ProcessSpec* hub_swm = nullptr;
  const ProcessSpec* nantes_netma = nullptr;
  for (const auto& spec : hub) {
    if (spec.service == "netma") hub_netma = &spec;
    if (spec.service == "swm") hub_swm = &spec;
  }
  for (const auto& spec : mcs) {
    if (spec.name == "nantes/netma") nantes_netma = &spec;
    if (spec.name == "rennes/swm") {
      REQUIRE_FALSE(HasPair(spec.args, "--set", "swm.netma=127.0.2.1:7402"));
      REQUIRE(HasPair(spec.args, "--listen", "127.0.2.1:7502"));
    }
    if (spec.name == "nantes/swm") REQUIRE(HasPair(spec.args, "--listen", "127.0.3.1:0"));
  }
  REQUIRE(hub_netma != nullptr);
  REQUIRE(hub_swm != nullptr);
  REQUIRE(nantes_netma != nullptr);
  REQUIRE(HasPair(hub_netma->args, "--listen", "127.0.1.1:7401"));
  REQUIRE(HasPair(hub_netma->args, "--netma.peers", "rennes=127.0.2.1:7402,nantes=127.0.3.1:7403"));
  REQUIRE(HasPair(nantes_netma->args, "--listen", "127.0.3.1:7403"));
  REQUIRE(HasPair(nantes_netma->args, "--netma.peers", "hub=127.0.1.1:7401,rennes=127.0.2.1:7402"));
  REQUIRE(HasPair(nantes_netma->args, "--netma.neighborhoods", "federation=hub,rennes,nantes"));
  REQUIRE(HasPair(hub_swm->args, "--set", "swm.netma=127.0.1.1:7401"));
  // The hub SWM is told no member: each MC's agent registers its own
  // endpoints with ACM (only those chosen before start), and the hub SWM reads
  // them from the neighborhood.
  for (const auto& arg : hub_swm->args) REQUIRE(arg.find("swm.cluster_endpoints") == std::string::npos);
  bool rennes_acm = false;
  for (const auto& spec : mcs) {
    if (spec.name == "rennes/acm") {
      rennes_acm = true;
      REQUIRE(HasPair(spec.args, "--set", "acm.advertise=swm=127.0.2.1:7502,netma=127.0.2.1:7402"));
    }
    if (spec.name == "nantes/acm") {
      REQUIRE(HasPair(spec.args, "--set", "acm.advertise=netma=127.0.3.1:7403"));
    }
  }
  REQUIRE(rennes_acm);
}

TEST_CASE("a cluster's checkpointer is advertised for the hub's stateful moves") {
  std::vector<ClusterEndpoint> clusters = kClusters;
  clusters[1].checkpointer_address = "127.0.2.1:7901";
  auto mcs = PlanManagedClusters(clusters, "127.0.1.1:4000", {true, ""}, "/d");
  bool advertised = false;
  for (const auto& spec : mcs) {
    if (spec.name != clusters[1].name + "/acm") continue;
    advertised = HasPair(spec.args, "--set", "acm.advertise=checkpointer=127.0.2.1:7901");
  }
  CHECK(advertised);
}

TEST_CASE("a chosen PDLC address is advertised and followed by the cluster's own SWM") {
  std::vector<ClusterEndpoint> clusters = kClusters;
  clusters[1].pdlc_address = "127.0.2.1:7802";
  auto mcs = PlanManagedClusters(clusters, "127.0.1.1:4000", {true, ""}, "/d");
  // One PDLC alone trains no federated model.
  for (const auto& spec : mcs) {
    for (const auto& arg : spec.args) REQUIRE(arg.find("pdlc.federation") == std::string::npos);
  }
  clusters[2].pdlc_address = "127.0.3.1:7803";
  mcs = PlanManagedClusters(clusters, "127.0.1.1:4000", {true, ""}, "/d");
  int seen = 0;
  for (const auto& spec : mcs) {
    INFO(spec.name);
    if (spec.name == "rennes/pdlc") seen += HasPair(spec.args, "--listen", "127.0.2.1:7802");
    if (spec.name == "rennes/acm") seen += HasPair(spec.args, "--set", "acm.advertise=pdlc=127.0.2.1:7802");
    if (spec.name == "rennes/swm") seen += HasPair(spec.args, "--set", "swm.pdlc_endpoints=rennes=127.0.2.1:7802");
    if (spec.name == "nantes/swm") seen += HasPair(spec.args, "--set", "swm.pdlc_endpoints=nantes=127.0.3.1:7803");
    // Both PDLCs train together; rennes's (the first) aggregates.
    if (spec.name == "rennes/pdlc" || spec.name == "nantes/pdlc") {
      seen += HasPair(spec.args, "--set", "pdlc.federation.aggregator=rennes=127.0.2.1:7802");
      seen += HasPair(spec.args, "--set", "pdlc.federation.members=rennes,nantes");
      seen += HasPair(spec.args, "--set", "pdlc.federation.neighborhood=federation");
    }
    // Each asks the other for bids in its auctions.
    if (spec.name == "rennes/pdlc") seen += HasPair(spec.args, "--set", "pdlc.auction.peers=nantes=127.0.3.1:7803");
    if (spec.name == "nantes/pdlc") seen += HasPair(spec.args, "--set", "pdlc.auction.peers=rennes=127.0.2.1:7802");
  }
  CHECK(seen == 12);
  // The hub's SWM runs the auction only when asked to.
  int auctions = 0;
  for (bool on : {false, true}) {
    for (const auto& spec : PlanHub(clusters, {true, ""}, "/d", on)) {
      auctions += HasPair(spec.args, "--set", "swm.pdlc_auction=true");
    }
  }
  CHECK(auctions == 1);
}

// The value of `flag` in `args` ("" when absent).
std::string FlagValue(const std::vector<std::string>& args, const std::string& flag) {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag) return args[i + 1];
  }
  return "";
}

// hub <- region <- site <- leaf, plus `loner` (no parent) and `direct` (under the hub).
std::vector<ClusterEndpoint> Tree() {
  std::vector<ClusterEndpoint> clusters = {
      {"hub", true, "127.0.1.1"},   {"region", false, "127.0.2.1"}, {"site", false, "127.0.3.1"},
      {"leaf", false, "127.0.4.1"}, {"loner", false, "127.0.5.1"},  {"direct", false, "127.0.6.1"}};
  for (size_t i = 1; i < clusters.size(); ++i) {
    clusters[i].acm_address = absl::StrCat(clusters[i].service_ip, ":7600");
  }
  clusters[2].parent = "region";
  clusters[3].parent = "site";
  clusters[5].parent = "hub";
  return clusters;
}

TEST_CASE("in a layered tree a cluster's ACM agent reports to its parent's ACM") {
  const std::vector<ClusterEndpoint> clusters = Tree();
  const std::string hub_acm = "127.0.1.1:4000";
  auto mcs =
      PlanManagedClusters(clusters, hub_acm, {true, ""}, "/d", codef::FederationMode::kLayered);
  std::map<std::string, std::string> reports_to;  // "<cluster>/<service>" -> --federation.hub-acm
  for (const auto& spec : mcs) reports_to[spec.name] = FlagValue(spec.args, "--federation.hub-acm");
  CHECK(reports_to["region/acm"] == hub_acm);  // no parent: the hub
  CHECK(reports_to["site/acm"] == "127.0.2.1:7600");
  CHECK(reports_to["leaf/acm"] == "127.0.3.1:7600");
  CHECK(reports_to["loner/acm"] == hub_acm);
  CHECK(reports_to["direct/acm"] == hub_acm);  // the hub as parent: the hub ACM
  // The cluster's other services keep the hub's ACM (SWM probes it to tell the hub away).
  for (const char* service : {"swm", "pdlc", "netma", "mdm", "checkpointer"}) {
    INFO(service);
    CHECK(reports_to[absl::StrCat("leaf/", service)] == hub_acm);
  }
  for (const auto& spec : mcs) {
    // The parent is still registered as the tree's shape, and the parent's ACM
    // listens where its children were told.
    if (spec.name == "leaf/acm") CHECK(HasPair(spec.args, "--set", "acm.parent=site"));
    if (spec.name == "site/acm") CHECK(HasPair(spec.args, "--listen", "127.0.3.1:7600"));
  }
  CHECK(ReportingAcm(clusters[3], clusters, hub_acm, codef::FederationMode::kLayered) ==
        "127.0.3.1:7600");
}

TEST_CASE("in a flat federation every agent reports to the hub whatever its parent") {
  const std::vector<ClusterEndpoint> clusters = Tree();
  for (const auto& spec : PlanManagedClusters(clusters, "127.0.1.1:4000", {true, ""}, "/d")) {
    INFO(spec.name);
    CHECK(FlagValue(spec.args, "--federation.hub-acm") == "127.0.1.1:4000");
  }
  CHECK(CheckReportingTree(clusters, codef::FederationMode::kFlat).ok());
  std::vector<ClusterEndpoint> broken = clusters;
  broken[2].acm_address.clear();
  CHECK(CheckReportingTree(broken, codef::FederationMode::kFlat).ok());
}

TEST_CASE("a layered tree needs every managed parent on a fixed ACM address") {
  std::vector<ClusterEndpoint> clusters = Tree();
  CHECK(CheckReportingTree(clusters, codef::FederationMode::kLayered).ok());
  clusters[2].acm_address.clear();  // site: leaf's parent
  absl::Status s = CheckReportingTree(clusters, codef::FederationMode::kLayered);
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()), Catch::Contains("cluster leaf: its parent site"));
  // Without it, the plan falls back to the hub rather than an empty address.
  CHECK(ReportingAcm(clusters[3], clusters, "h:1", codef::FederationMode::kLayered) == "h:1");
  clusters = Tree();
  clusters[3].parent = "gone";
  s = CheckReportingTree(clusters, codef::FederationMode::kLayered);
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()), Catch::Contains("\"gone\" is not a cluster"));
}

TEST_CASE("without chosen NetMA addresses NetMA gets an ephemeral port and no peers") {
  auto hub = PlanHub(kClusters, {true, ""}, "/d");
  for (const auto& spec : hub) {
    INFO(spec.name);
    REQUIRE(HasPair(spec.args, "--listen", "127.0.1.1:0"));
    REQUIRE(std::find(spec.args.begin(), spec.args.end(), "--netma.peers") == spec.args.end());
  }
}

TEST_CASE("FreePort from a base skips ports in use and stays in its range") {
  // Hold the first free port at or above 27400 on 127.0.0.1.
  absl::StatusOr<int> first = FreePort("127.0.0.1", 27400);
  REQUIRE(first.ok());
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(*first));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  absl::StatusOr<int> next = FreePort("127.0.0.1", 27400);
  close(fd);
  REQUIRE(next.ok());
  CHECK(*next > *first);
  CHECK(*next < 27400 + 1000);
  CHECK(FreePort("not-an-ip", 27400).status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace codeco::ctl
