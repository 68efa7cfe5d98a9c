#pragma once
// ACM's admission chain (docs/policies.md): every applied spec passes the
// policies of the policy bundle in force before it is stored. A policy may
// refuse the spec, naming itself and the field that failed, or change it; each
// change is recorded as an RFC 6902 JSON Patch operation in the spec revision
// and reported back as a warning.
//
// A policy bundle is a versioned YAML document: the built-in policies'
// settings plus their data (regions and their countries, a latency matrix).
// The server loads it from a file, checks its signature first
// (bundle_signature.h) and installs it without a restart; until one is
// installed the built-in defaults apply.
//
// An external OPA-compatible decision endpoint (a webhook) may be set as
// another policy source. It runs first: it is asked with the spec and its
// labels, and allows it, refuses it or patches it; the built-in policies then
// check what it let through.
//
// Built-in policies, in order:
//   residency — applications whose labels match a rule must stay in its
//               countries: an empty allowedCountries is set to them, a country
//               outside them is refused.
//   latency   — with an origin and maxLatencyToOrigin, only regions within that
//               latency of the origin's region (the bundle's matrix) are
//               eligible: allowedRegions is narrowed to them.
//   placeable — some known region must satisfy allowedRegions and
//               allowedCountries (known: the bundle's regions and the
//               registered clusters' region/country labels).
//   carbon    — the scheduling outcome: a delay-tolerant spec (intents.duration
//               and deadline) gets the region and start time with the lowest
//               forecast carbon intensity over its run among the eligible
//               regions the bundle has a carbon series for
//               (carbon_scheduler.h): allowedRegions becomes that region and
//               earliestStartTime the start.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "acm/core/carbon_forecast.h"
#include "acm/core/carbon_series.h"
#include "codeco/acm/v1/application.pb.h"
#include "codeco/common/clock.h"

namespace codeco::acm {

/// A region codeco may place in, and the country it lies in.
struct KnownRegion {
  /// Region name, as in the clusters' `region` label.
  std::string name;
  /// ISO 3166 alpha-2 country code ("" = unknown).
  std::string country;
};

/// A residency rule: applications whose labels include every `selector`
/// pair must run in `countries`.
struct ResidencyRule {
  /// Rule name, for messages.
  std::string name;
  /// Application labels that select it (empty = every application).
  std::map<std::string, std::string> selector;
  /// The countries allowed (ISO 3166 alpha-2).
  std::vector<std::string> countries;
};

/// A parsed policy bundle.
struct PolicyBundle {
  /// The bundle's version, as its author wrote it.
  std::string version;
  /// Regions the bundle declares (beside the registered clusters').
  std::vector<KnownRegion> regions;
  /// Latency between regions, ms, both directions as written (a missing
  /// pair is unknown; a region to itself is 0 unless written).
  std::map<std::string, std::map<std::string, double>> latency_ms;
  /// Residency rules, applied in order.
  std::vector<ResidencyRule> residency;
  /// Whether the latency policy narrows allowedRegions.
  bool latency_enabled = true;
  /// Whether a spec no known region satisfies is refused.
  bool placeable_enabled = true;
  /// Whether the carbon policy schedules delay-tolerant specs.
  bool carbon_enabled = true;
  /// Each region's carbon intensity so far (the carbon policy forecasts
  /// from it); a region without one is not chosen by that policy.
  std::map<std::string, CarbonSeries> carbon;
};

/// Limits on a bundle read from outside.
struct PolicyBundleLimits {
  /// Largest bundle accepted.
  size_t max_bytes = 4u << 20;
  /// Most regions, rules, entries of the latency matrix, and intervals of
  /// one carbon series.
  size_t max_entries = 100000;
  /// Deepest YAML nesting.
  int max_depth = 16;
  /// Most YAML nodes, aliases expanded (a year of half-hourly intensities
  /// is 17,568 nodes per region).
  size_t max_nodes = 400000;
};

/// Parses a bundle document (docs/policies.md). INVALID_ARGUMENT lists every
/// field that is wrong, each with its path.
absl::StatusOr<PolicyBundle> ParsePolicyBundle(const std::string& yaml,
                                               const PolicyBundleLimits& limits = {});

class AdmissionChain;

/// Checks `signature_base64` over the exact `bundle_yaml` with
/// `public_key_pem` (bundle_signature.h), parses the bundle and installs it
/// in `chain`. On any failure nothing changes: the bundle in force stays, and
/// the error names what failed (`signature`, `public_key` or the bundle's
/// field). A bundle whose version is the one in force is installed again
/// (its content may differ; the version is the author's).
absl::Status InstallSignedBundle(AdmissionChain& chain, const std::string& bundle_yaml,
                                 const std::string& signature_base64,
                                 const std::string& public_key_pem,
                                 const PolicyBundleLimits& limits = {});

/// What the chain made of a spec.
struct AdmissionOutcome {
  /// The spec as admitted (the policies' changes applied).
  v1::ApplicationSpec spec;
  /// The changes as an RFC 6902 JSON Patch array ("" when none).
  std::string json_patch;
  /// One line per change, naming the policy and the field.
  std::vector<std::string> warnings;
  /// The version of the bundle in force ("" = built-in defaults).
  std::string bundle_version;
};

/// A registered cluster, as admission sees it (its labels).
struct RegisteredCluster {
  /// Cluster name.
  std::string name;
  /// Its `region` label ("" = none).
  std::string region;
  /// Its `country` label ("" = none).
  std::string country;
};

/// Where an external policy's decisions come from: an OPA-compatible
/// decision endpoint (docs/policies.md). The server implements it over HTTP.
class PolicyDecisionPort {
 public:
  virtual ~PolicyDecisionPort() = default;
  /// Where the decisions come from, for messages (the endpoint's URL).
  virtual std::string Name() const = 0;
  /// Sends `request_json` (`{"input": ...}`) and returns the answer's body.
  /// An error means no decision was had.
  virtual absl::StatusOr<std::string> Query(const std::string& request_json) const = 0;
};

/// An external policy source and what happens when it gives no decision.
struct ExternalPolicy {
  /// The decision endpoint; null: none.
  std::shared_ptr<const PolicyDecisionPort> port;
  /// Without a decision (unreachable, an error answer, no `result`, a patch
  /// that does not apply), true refuses the spec (UNAVAILABLE, so that the
  /// client retries); false admits it as if the source said yes, with a
  /// warning.
  bool refuse_without_decision = true;
};

/// What an external source decided about one spec.
struct ExternalDecision {
  /// Whether it lets the spec in.
  bool allow = false;
  /// Why not, each with the field it names ("spec" when it names none).
  std::vector<std::pair<std::string, std::string>> reasons;
  /// RFC 6902 operations on the spec's JSON, as a JSON array ("" = none).
  std::string patch_json;
  /// Lines it wants told back to the client.
  std::vector<std::string> warnings;
};

/// Reads an OPA Data API answer (`{"result": ...}`): the result is a bool,
/// or an object with `allow` (bool, required), `reasons` (strings, or
/// objects with `field` and `message`), `patch` (RFC 6902 operations) and
/// `warnings` (strings). Any other result field is told back as a warning.
/// INVALID_ARGUMENT naming the field for anything else (an undefined
/// decision, `{}`, included).
absl::StatusOr<ExternalDecision> ParseExternalDecision(const std::string& body);

/// The admission chain. Thread-safe: Install may run while Admit does.
class AdmissionChain {
 public:
  /// Returns the registered clusters.
  using ClusterSource = std::function<std::vector<RegisteredCluster>()>;

  /// `registered` may be empty (no registered clusters known). `clock`
  /// (the carbon policy's now) must outlive the chain; null: the real clock.
  /// `external`: the decision endpoint asked before the built-in policies.
  explicit AdmissionChain(ClusterSource registered = {}, const Clock* clock = nullptr,
                          ExternalPolicy external = {});

  /// Makes `bundle` the one in force for every later Admit, after training
  /// the carbon forecaster on its series up to now (on the caller's thread).
  void Install(PolicyBundle bundle);
  /// The version in force ("" = built-in defaults).
  std::string version() const;

  /// Runs the policies on `spec` with the application's `labels`.
  /// FAILED_PRECONDITION when a policy refuses it; the message starts with
  /// `admission policy "<name>": <field path>: `.
  absl::StatusOr<AdmissionOutcome> Admit(
      const v1::ApplicationSpec& spec,
      const google::protobuf::Map<std::string, std::string>& labels) const;

 private:
  // A bundle in force, with the carbon forecaster trained on its series.
  struct Installed {
    PolicyBundle bundle;
    mutable absl::Mutex forecast_mu;
    mutable SeasonalRegressionForecaster forecaster ABSL_GUARDED_BY(forecast_mu);
  };
  ClusterSource registered_;
  const Clock& clock_;
  ExternalPolicy external_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const Installed> installed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace codeco::acm
