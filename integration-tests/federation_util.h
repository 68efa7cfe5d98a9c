#pragma once
// What the tests over `codecoctl up` share: a private CODECO_HOME that is torn
// down whatever happens, waiting for the clusters' agents, the LMS endpoints
// of the emulated clusters and the pods in them, where ACM says an
// application's services are placed.

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "codeco/lms/v1/lms_service.pb.h"
#include "nlohmann/json.hpp"

namespace codeco::testing {

/// The codecoctl binary of this build.
const std::string& CtlBinary();
/// examples/scenarios/grid5000-five-sites.yaml of this source tree.
const std::string& FiveSiteScenario();
/// The source tree's root.
const std::string& SourceDir();

/// A fresh CODECO_HOME for one test; `codecoctl down` and removal on
/// destruction (kept, for a post-mortem, when CODECO_TEST_KEEP_HOME=1).
struct FederationHome {
  FederationHome();
  ~FederationHome();
  FederationHome(const FederationHome&) = delete;
  FederationHome& operator=(const FederationHome&) = delete;
  /// The state.json `codecoctl up` wrote.
  nlohmann::json State() const;
  /// The directory (CODECO_HOME).
  std::filesystem::path path;
};

/// True while `pid` runs (a zombie does not).
bool Alive(int pid);

/// Waits up to a minute until `count` clusters' agents have registered with
/// the hub ACM and are Ready.
bool WaitUntilClustersReady(size_t count);

/// Each cluster's LMS endpoint, from the table `codecoctl up` prints
/// (CLUSTER TIER REGION NODES IP LMS RELAY).
std::map<std::string, std::string> LmsEndpoints(const std::string& up_output);

/// Each cluster's egress relay (its edge device in the testbed), from the
/// same table.
std::map<std::string, std::string> RelayEndpoints(const std::string& up_output);

/// The status line a CONNECT to `target` through the relay at `relay`
/// answers ("HTTP/1.1 200 Connection established", "HTTP/1.1 403 Forbidden"),
/// after sending `payload` and reading its echo when the tunnel opened
/// (empty when the relay does not answer within 10 s). `echoed` is set to
/// what came back.
std::string ConnectThroughRelay(const std::string& relay, const std::string& target,
                                const std::string& payload, std::string* echoed);

/// The pods of application `app` (every pod when `app` is empty) in the LMS
/// at `lms` (CODEF's: plaintext). Fails the test when the LMS cannot be read.
std::vector<codeco::lms::v1::Pod> PodsOf(const std::string& lms, const std::string& app);

/// The cluster each service of `app` is placed on, as ACM reports it (empty
/// until placed).
std::map<std::string, std::string> PlacedClusters(const std::string& app);

/// The hub's delay cost map (`codecoctl get costmap --metric delay`), or
/// `cluster`'s own when set: one-way delay in nanoseconds per (source,
/// destination); empty when it cannot be read.
std::map<std::pair<std::string, std::string>, double> DelayCostMap(
    const std::string& cluster = "");

/// examples/cams/front-back.yaml (two 50m services and a channel) as
/// application `name`.
std::string FrontBackCam(const std::string& name);

/// examples/cams/sensor-fusion.yaml as application `name`, its channel
/// asking for `min_bandwidth` (e.g. "5Mbps", the example's own).
std::string SensorFusionCam(const std::string& name, const std::string& min_bandwidth = "5Mbps");

/// True in a build with AddressSanitizer or ThreadSanitizer: every process
/// runs several times slower, so what the emulated links measure (RTT above
/// all, throughput, which is bound by the CPU there) is not the emulation's.
bool SanitizedBuild();

/// How far NetMA's RTT of a link may be from the emulated `rtt_ms`: 10 % or
/// 1 ms. Under a sanitizer the relays' instrumented forwarding adds time
/// that NetMA's self probe does not see (measured: up to 2.4 ms on a 12 ms
/// link with 41 processes, 3.2-3.6 ms once the five checkpointers and the
/// registry joined them), so there it is 25 % or 5 ms.
double RttToleranceMs(double rtt_ms);

}  // namespace codeco::testing
