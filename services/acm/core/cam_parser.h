#pragma once
// The CAM parser: turns the YAML a user hands ACM into a validated
// codeco.acm.v1.ApplicationSpec. Three document forms are accepted (see
// docs/cam.md):
//   apiVersion codeco.he-codeco.eu/v1alpha1, kind CodecoApp  -- CODECO's CRD, unchanged
//   apiVersion codeco.io/v1,                 kind CodecoApp  -- the same plus our extensions
//   apiVersion fogguru.eu/v1,                kind MultiClusterDeployment -- mck8s
// Every error names the field path of the YAML it is about, e.g.
// `spec.codecoapp-msspec[2].serviceChannels[0].otherService.serviceName: no service "db"
// in this application`. Untrusted input is bounded before any tree is built:
// document size, nesting depth and the node count after alias expansion;
// the parsed spec is then checked, unexpanded, against the caps ACM shares
// with SWM (acm/core/application_bounds.h). Fields accepted but not acted on
// yet come back as ParsedCam::warnings, one per field path, and so do the
// readings a CODECO document needs explained (a sendInterval capped at 10 ms,
// a port the target does not expose, an otherService.appName naming another
// application). A channel to a service this document does not declare is not
// an error: another CodecoApp of the same appName may declare it
// (MergeCodecoApp in acm/core/codeco_app_merge.h).

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "codeco/acm/v1/application.pb.h"

namespace codeco::acm {

/// Bounds on an untrusted CAM document.
struct CamLimits {
  /// Largest accepted document, bytes. Default: 1 MiB.
  size_t max_document_bytes = size_t{1} << 20;
  /// Deepest accepted nesting of mappings and sequences. Default: 32.
  int max_depth = 32;
  /// Most YAML nodes, counted with every alias expanded. Default: 100000.
  size_t max_nodes = 100000;
  /// Most services in one application. Default: 256.
  int max_services = 256;
  /// Most channels declared by one service. Default: 256.
  int max_channels_per_service = 256;
};

/// Which document form a CAM was written in.
enum class CamForm {
  /// CODECO's CodecoApp CRD (codeco.he-codeco.eu/v1alpha1).
  kCodecoApp,
  /// CodecoApp with codeco.io/v1 extensions.
  kCodecoAppExtended,
  /// mck8s MultiClusterDeployment (fogguru.eu/v1).
  kMultiClusterDeployment,
};

/// A parsed and validated CAM.
struct ParsedCam {
  /// The document form.
  CamForm form = CamForm::kCodecoApp;
  /// The application spec: its services only those this document declares.
  v1::ApplicationSpec spec;
  /// metadata.name: the CodecoApp (or MultiClusterDeployment) itself. Several
  /// CodecoApps may share one spec.app_name; each service records its
  /// document in ServiceSpec.codeco_app.
  std::string codeco_app;
  /// metadata.labels.
  std::map<std::string, std::string> labels;
  /// metadata.annotations.
  std::map<std::string, std::string> annotations;
  /// Non-fatal remarks (e.g. fields read but not acted on).
  std::vector<std::string> warnings;
};

/// Parses and validates `yaml`. INVALID_ARGUMENT lists every error found,
/// one "field.path: message" per line, the first error first.
absl::StatusOr<ParsedCam> ParseCam(std::string_view yaml, const CamLimits& limits = {});

/// Validates a spec given in parsed (proto) form, naming proto field paths
/// under `spec.` (e.g. `spec.services[1].channels[0].to_service`), including
/// the caps shared with SWM (CheckApplicationBounds).
absl::Status ValidateApplicationSpec(const v1::ApplicationSpec& spec, const CamLimits& limits = {});

/// How many pods `job` runs at once (its service's replicas):
/// min(parallelism, completions), or completions without a parallelism.
int32_t JobReplicas(const v1::Job& job);

/// True if `name` is an RFC 1123 DNS label (1-63 of [a-z0-9-], alphanumeric at both ends).
bool IsDnsLabel(std::string_view name);
/// True if `s` looks like an ISO 3166 alpha-2 country code: two capital letters, e.g. "DE".
bool IsCountryCode(std::string_view s);

}  // namespace codeco::acm
