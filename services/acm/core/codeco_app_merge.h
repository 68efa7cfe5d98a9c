#pragma once
// One application made of several CodecoApps.
//
// CODECO's CodecoApp names itself (metadata.name) and the application it
// belongs to (spec.appName); CODECO's own experiments apply one backend
// CodecoApp and N frontend CodecoApps under one appName, with channels that
// point from one CodecoApp's services to another's, possibly before the other
// is applied. ACM keeps one Application per appName; every service records the
// CodecoApp that declared it (ServiceSpec.codeco_app):
//   - applying a CodecoApp replaces the services it declared before (in place)
//     and takes the application-wide fields (qosClass, securityClass, ...)
//     from it;
//   - a service name declared by another CodecoApp of the application is an
//     error naming both;
//   - a channel to a service no CodecoApp declares yet is kept, pending: it is
//     not placed (SchedulableSpec drops it) until a CodecoApp declares its
//     target, and the apply says so in a warning;
//   - deleting a CodecoApp (RemoveCodecoApp) removes its services only.
// Pure functions over protos; ApplicationManager calls them.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "acm/core/cam_parser.h"
#include "codeco/acm/v1/application.pb.h"

namespace codeco::acm {

/// An application spec after one CodecoApp was merged into it.
struct MergedSpec {
  /// The application's whole spec.
  v1::ApplicationSpec spec;
  /// What the merge means beyond the document (pending channels, fields that
  /// replaced other CodecoApps' values), one "field.path: ..." each.
  std::vector<std::string> warnings;
};

/// The CodecoApp that declared `service` in application `app_name`: its
/// codeco_app, or the application's own name when that is empty (a spec
/// applied whole, in parsed form or before CodecoApps were merged).
std::string OwnerOf(const v1::ServiceSpec& service, const std::string& app_name);

/// Merges the CodecoApp `cam` into `current` (the stored spec of application
/// cam.spec.app_name(), or nullptr when there is none). INVALID_ARGUMENT,
/// naming the document's path, when `cam` declares a service another
/// CodecoApp of the application declared.
absl::StatusOr<MergedSpec> MergeCodecoApp(const v1::ApplicationSpec* current,
                                          const ParsedCam& cam);

/// `spec` without the services CodecoApp `codeco_app` declared. NOT_FOUND when
/// it declared none. The result may have no service left.
absl::StatusOr<MergedSpec> RemoveCodecoApp(const v1::ApplicationSpec& spec,
                                           const std::string& codeco_app);

/// The spec as the scheduler is asked to place it: pending channels (to a
/// service the application does not have) left out; channel names, unique per
/// sending service in the CAM, made unique in the application
/// ("<from>-<name>" where two services use one name); and a channel's
/// min_bandwidth_bps raised to what frameSize every sendInterval needs
/// (CODECO: a 1K frame every 10 ms is 800 kbit/s) when both are set.
v1::ApplicationSpec SchedulableSpec(const v1::ApplicationSpec& spec);

/// The channels of `spec` whose target service it does not have, as
/// "<from_service>/<channel name> -> <to_service>".
std::vector<std::string> PendingChannels(const v1::ApplicationSpec& spec);

}  // namespace codeco::acm
