#include "acm/core/codeco_app_merge.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"
#include "google/protobuf/util/message_differencer.h"

namespace codeco::acm {
namespace {

using google::protobuf::util::MessageDifferencer;
using v1::ApplicationSpec;
using v1::Channel;
using v1::ServiceSpec;

// The path of service `i` of a parsed document, in the document's own words.
std::string ServicePath(const ParsedCam& cam, int i) {
  if (cam.form == CamForm::kMultiClusterDeployment) return "metadata.name";
  return absl::StrCat("spec.codecoapp-msspec[", i, "]");
}

// `spec` with no services: the application-wide fields only.
ApplicationSpec WithoutServices(const ApplicationSpec& spec) {
  ApplicationSpec out = spec;
  out.clear_services();
  return out;
}

std::set<std::string> ServiceNames(const ApplicationSpec& spec) {
  std::set<std::string> names;
  for (const ServiceSpec& s : spec.services()) names.insert(s.name());
  return names;
}

// Warnings for the channels of services *not* owned by `owner` that lead to a
// service `before` had and `after` has not (removed by owner's change).
void WarnOrphaned(const ApplicationSpec& before, const ApplicationSpec& after,
                  const std::string& owner, std::vector<std::string>& warnings) {
  const std::set<std::string> had = ServiceNames(before);
  const std::set<std::string> has = ServiceNames(after);
  for (const ServiceSpec& s : after.services()) {
    if (OwnerOf(s, after.app_name()) == owner) continue;
    for (const Channel& ch : s.channels()) {
      if (had.count(ch.to_service()) && !has.count(ch.to_service())) {
        warnings.push_back(absl::StrCat(
            "application ", after.app_name(), ": channel \"", ch.name(), "\" of service \"",
            s.name(), "\" (CodecoApp \"", OwnerOf(s, after.app_name()), "\") leads to \"",
            ch.to_service(), "\", which CodecoApp \"", owner,
            "\" no longer declares; it waits, unplaced, until a CodecoApp declares it"));
      }
    }
  }
}

}  // namespace

std::string OwnerOf(const ServiceSpec& service, const std::string& app_name) {
  return service.codeco_app().empty() ? app_name : service.codeco_app();
}

absl::StatusOr<MergedSpec> MergeCodecoApp(const ApplicationSpec* current, const ParsedCam& cam) {
  MergedSpec out;
  const std::string& app = cam.spec.app_name();
  const std::string owner = cam.codeco_app.empty() ? app : cam.codeco_app;
  if (current == nullptr) {
    out.spec = cam.spec;
  } else {
    // Services another CodecoApp declared keep their place; this CodecoApp's
    // services replace its earlier ones where the first of those stood.
    std::map<std::string, std::string> owner_of;
    for (const ServiceSpec& s : current->services()) owner_of[s.name()] = OwnerOf(s, app);
    FieldErrors errors;
    for (int i = 0; i < cam.spec.services_size(); ++i) {
      auto it = owner_of.find(cam.spec.services(i).name());
      if (it != owner_of.end() && it->second != owner) {
        errors.Add(cam.form == CamForm::kMultiClusterDeployment
                       ? "metadata.name"
                       : absl::StrCat(ServicePath(cam, i), ".serviceName"),
                   absl::StrCat("service \"", it->first, "\" of application \"", app,
                                "\" is declared by CodecoApp \"", it->second,
                                "\"; a service belongs to one CodecoApp"));
      }
    }
    RETURN_IF_ERROR(errors.ToStatus());
    out.spec = WithoutServices(cam.spec);
    bool placed = false;
    bool others = false;
    for (const ServiceSpec& s : current->services()) {
      if (OwnerOf(s, app) != owner) {
        *out.spec.add_services() = s;
        others = true;
      } else if (!placed) {
        for (const ServiceSpec& mine : cam.spec.services()) *out.spec.add_services() = mine;
        placed = true;
      }
    }
    if (!placed) {
      for (const ServiceSpec& mine : cam.spec.services()) *out.spec.add_services() = mine;
    }
    if (others && !MessageDifferencer::Equals(WithoutServices(*current), WithoutServices(cam.spec))) {
      out.warnings.push_back(absl::StrCat(
          "spec: application \"", app, "\" takes its application-wide fields (qosClass, "
          "securityClass, complianceClass, appEnergyLimit, appFailureTolerance, "
          "performanceProfile, ...) from CodecoApp \"", owner,
          "\", the last one applied; they differ from those its other CodecoApps set"));
    }
    WarnOrphaned(*current, out.spec, owner, out.warnings);
  }
  // This CodecoApp's channels whose target no CodecoApp of the application declares yet.
  const std::set<std::string> names = ServiceNames(out.spec);
  for (int i = 0; i < cam.spec.services_size(); ++i) {
    const ServiceSpec& s = cam.spec.services(i);
    for (int k = 0; k < s.channels_size(); ++k) {
      const Channel& ch = s.channels(k);
      if (names.count(ch.to_service())) continue;
      out.warnings.push_back(absl::StrCat(
          ServicePath(cam, i), ".serviceChannels[", k, "].otherService.serviceName: no service \"",
          ch.to_service(), "\" in application \"", app,
          "\" yet; the channel waits, unplaced, until a CodecoApp of it declares one"));
    }
  }
  return out;
}

absl::StatusOr<MergedSpec> RemoveCodecoApp(const ApplicationSpec& spec,
                                           const std::string& codeco_app) {
  MergedSpec out;
  out.spec = WithoutServices(spec);
  bool found = false;
  for (const ServiceSpec& s : spec.services()) {
    if (OwnerOf(s, spec.app_name()) == codeco_app) {
      found = true;
    } else {
      *out.spec.add_services() = s;
    }
  }
  if (!found) {
    return absl::NotFoundError(absl::StrCat("codeco_app: application \"", spec.app_name(),
                                            "\" has no service declared by CodecoApp \"",
                                            codeco_app, "\""));
  }
  WarnOrphaned(spec, out.spec, codeco_app, out.warnings);
  return out;
}

ApplicationSpec SchedulableSpec(const ApplicationSpec& spec) {
  ApplicationSpec out = spec;
  const std::set<std::string> names = ServiceNames(spec);
  // How many services use each channel name.
  std::map<std::string, int> uses;
  for (const ServiceSpec& s : spec.services()) {
    for (const Channel& ch : s.channels()) {
      if (names.count(ch.to_service())) ++uses[ch.name()];
    }
  }
  std::set<std::string> taken;
  for (const auto& [name, n] : uses) {
    if (n == 1) taken.insert(name);
  }
  for (ServiceSpec& s : *out.mutable_services()) {
    google::protobuf::RepeatedPtrField<Channel> kept;
    for (Channel& ch : *s.mutable_channels()) {
      if (!names.count(ch.to_service())) continue;  // pending
      if (uses[ch.name()] > 1) {
        std::string name = absl::StrCat(s.name(), "-", ch.name());
        for (int k = 2; !taken.insert(name).second; ++k) {
          name = absl::StrCat(s.name(), "-", ch.name(), "-", k);
        }
        ch.set_name(name);
      }
      if (ch.frame_size_bytes() > 0 && ch.send_interval_ns() > 0) {
        // bits per second = bytes * 8 / interval; in 128 bits, then capped.
        const __int128 bps = static_cast<__int128>(ch.frame_size_bytes()) * 8 * 1'000'000'000 /
                             ch.send_interval_ns();
        const int64_t need = bps > INT64_MAX ? INT64_MAX : static_cast<int64_t>(bps);
        if (need > ch.min_bandwidth_bps()) ch.set_min_bandwidth_bps(need);
      }
      *kept.Add() = std::move(ch);
    }
    s.mutable_channels()->Swap(&kept);
  }
  return out;
}

std::vector<std::string> PendingChannels(const ApplicationSpec& spec) {
  std::vector<std::string> out;
  const std::set<std::string> names = ServiceNames(spec);
  for (const ServiceSpec& s : spec.services()) {
    for (const Channel& ch : s.channels()) {
      if (!names.count(ch.to_service())) {
        out.push_back(absl::StrCat(s.name(), "/", ch.name(), " -> ", ch.to_service()));
      }
    }
  }
  return out;
}

}  // namespace codeco::acm
