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

/// A fresh CODECO_HOME for one test; `codecoctl down` and removal on destruction.
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

/// The pods of application `app` (every pod when `app` is empty) in the LMS
/// at `lms` (CODEF's: plaintext). Fails the test when the LMS cannot be read.
std::vector<codeco::lms::v1::Pod> PodsOf(const std::string& lms, const std::string& app);

/// The cluster each service of `app` is placed on, as ACM reports it (empty
/// until placed).
std::map<std::string, std::string> PlacedClusters(const std::string& app);

}  // namespace codeco::testing
