#pragma once
// The policy plugins (mck8s, the stateful-LCM study, CODECO) and the PDLC
// recommendation port. docs/placement.md lists what each plugin does.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "swm/core/framework.h"

namespace codeco::swm {

/// PDLC's advice for one application and performance profile: scores 0-100.
struct Recommendations {
  std::map<std::string, double> cluster_scores;                       ///< cluster -> score.
  std::map<std::pair<std::string, std::string>, double> node_scores;  ///< (cluster, node) -> score.
  /// The neighborhood auction's winner for the application (empty: no
  /// auction, or no cluster bid above 0). L1 visits it first. (The bids
  /// themselves, when an auction ran, are the clusters' cluster_scores.)
  std::string advised_cluster;
};

/// The PDLC port. PDLC only advises; "no recommendations" (nullopt) is a
/// valid answer and leaves every candidate's recommendation score at 0. An
/// error fails the placement: a source that cannot reach PDLC answers
/// nullopt (or what it last knew) instead.
class RecommendationSource;

/// Port: where the data sets a workload's dataLocality may name live (MDM's
/// graph in the binary: the DataSet entities, docs/mdm.md).
class DataSetLocator {
 public:
  virtual ~DataSetLocator() = default;
  /// The clusters holding data set `name`; nullopt when no data set has that
  /// name (dataLocality then names a region or cluster). An error when it
  /// cannot tell (MDM unreachable).
  virtual absl::StatusOr<std::optional<std::vector<std::string>>> ClustersHolding(
      const std::string& name) = 0;
};

class RecommendationSource {
 public:
  virtual ~RecommendationSource() = default;
  /// Recommendations for `app` under its performance profile (and custom
  /// weights), if any.
  virtual absl::StatusOr<std::optional<Recommendations>> Get(const Application& app) = 0;
};

/// Recommendations kept in memory, set by whoever receives PDLC's pushes
/// (and by tests). Thread-safe.
class InMemoryRecommendationSource final : public RecommendationSource {
 public:
  /// Stores `recs` for (application, profile), replacing earlier ones.
  void Set(const std::string& application, const std::string& performance_profile,
           Recommendations recs);
  /// The recommendations Set for (app.name, app.performance_profile).
  absl::StatusOr<std::optional<Recommendations>> Get(const Application& app) override;

 private:
  absl::Mutex mu_;
  std::map<std::pair<std::string, std::string>, Recommendations> recs_ ABSL_GUARDED_BY(mu_);
};

/// The registry of every plugin of this file, filled in one place.
PluginRegistry NewDefaultRegistry();

/// Checks every channel between workload `w` placed at `at` and its already
/// placed peers: latency within max_delay, a direct link between different
/// clusters, and the link's free bandwidth of the channel's class. A peer not
/// placed yet whose data pins it (LocatedClusters) must have one of its
/// clusters within max_delay of `at`, where the view has the links to tell.
/// At Level::kCluster `at.node` is empty and intra-cluster latency is assumed.
PluginStatus CheckChannels(const CycleState& state, const Workload& w, const Placement& at);

/// Whether `w`'s data allows it in `cluster` (of `region`): one of its data
/// set's clusters, else the cluster or region data_locality names (anywhere
/// when it names none). The AllowedLocations filter's rule.
bool DataMayLiveIn(const Workload& w, const std::string& cluster, const std::string& region);

/// The clusters `w` may run in by where its data is: its data set's clusters,
/// the cluster data_locality names, or that region's clusters. Empty when
/// the data pins it nowhere, or to a cluster `topology` does not show.
std::vector<const Cluster*> LocatedClusters(const Federation& topology, const Workload& w);

/// Latency from `origin` cluster's gateway to a workload in `cluster`
/// (nullopt when no direct link exists).
std::optional<int64_t> OriginLatencyNs(const Federation& topology, const std::string& origin,
                                       const std::string& cluster);

/// Built-in profiles by name: "codeco" (default), "mck8s-worst-fit",
/// "mck8s-best-fit", "mck8s-traffic-aware", "mck8s-cluster-affinity",
/// "lcm-two-tier". NOT_FOUND for another name.
absl::StatusOr<Profile> BuiltinProfile(const std::string& name);

}  // namespace codeco::swm
