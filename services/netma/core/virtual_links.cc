#include "netma/core/virtual_links.h"

#include <algorithm>
#include <regex>

#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"
#include "google/protobuf/util/message_differencer.h"
#include "google/protobuf/util/time_util.h"
#include "netma/core/alto.h"
#include "netma/core/monitor.h"

namespace codeco::netma {

using codeco::netma::v1::ForwardingRule;
using codeco::netma::v1::LinkMetrics;
using codeco::netma::v1::VirtualLink;
using google::protobuf::util::TimeUtil;

namespace {

constexpr int kDefaultPageSize = 100;
constexpr int kMaxPageSize = 1000;

bool IsDnsLabel(const std::string& s) {
  static const std::regex re("^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$");
  return std::regex_match(s, re);
}

bool IsHostPort(const std::string& s) {
  size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) return false;
  std::string port = s.substr(colon + 1);
  if (port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit)) return false;
  int p = std::stoi(port);
  return p >= 1 && p <= 65535;
}

// Neighborhood scope of a link: its neighborhood, or its application's (one each).
std::string Scope(const VirtualLink& link) {
  return link.neighborhood_id().empty() ? "app:" + link.application() : link.neighborhood_id();
}

std::string Device(const std::string& cluster) { return "ned-" + cluster; }

// The fields a user sets; two creates are the same request when these match.
VirtualLink SpecOf(const VirtualLink& link) {
  VirtualLink spec;
  spec.set_application(link.application());
  spec.set_channel(link.channel());
  spec.set_source_cluster(link.source_cluster());
  spec.set_target_cluster(link.target_cluster());
  spec.set_target_endpoint(link.target_endpoint());
  spec.set_service_class(link.service_class());
  spec.set_min_bandwidth_bps(link.min_bandwidth_bps());
  spec.set_max_delay_ns(link.max_delay_ns());
  spec.set_provisioning(link.provisioning() ==
                                codeco::netma::v1::VIRTUAL_LINK_PROVISIONING_UNSPECIFIED
                            ? codeco::netma::v1::VIRTUAL_LINK_PROVISIONING_PRE_CREATED
                            : link.provisioning());
  spec.set_neighborhood_id(link.neighborhood_id());
  spec.set_managed_by(link.managed_by());
  return spec;
}

absl::Status Validate(const VirtualLink& spec) {
  FieldErrors errors;
  const std::string p = "virtual_link.";
  if (!IsDnsLabel(spec.application())) errors.Add(p + "application", "must be a DNS label");
  if (!IsDnsLabel(spec.channel())) errors.Add(p + "channel", "must be a DNS label");
  if (!IsDnsLabel(spec.source_cluster())) errors.Add(p + "source_cluster", "must be a DNS label");
  if (!IsDnsLabel(spec.target_cluster())) errors.Add(p + "target_cluster", "must be a DNS label");
  if (!spec.source_cluster().empty() && spec.source_cluster() == spec.target_cluster()) {
    errors.Add(p + "target_cluster", "must differ from source_cluster (inter-cluster links only)");
  }
  if (!IsHostPort(spec.target_endpoint())) errors.Add(p + "target_endpoint", "must be host:port");
  if (!codeco::common::v1::ServiceClass_IsValid(spec.service_class())) {
    errors.Add(p + "service_class", "unknown value");
  }
  if (spec.min_bandwidth_bps() < 0) errors.Add(p + "min_bandwidth_bps", "must not be negative");
  if (spec.max_delay_ns() < 0) errors.Add(p + "max_delay_ns", "must not be negative");
  if (spec.managed_by().size() > 63) errors.Add(p + "managed_by", "at most 63 characters");
  if (!codeco::netma::v1::VirtualLinkProvisioning_IsValid(spec.provisioning())) {
    errors.Add(p + "provisioning", "unknown value");
  }
  if (spec.service_class() == codeco::common::v1::SERVICE_CLASS_ASSURED &&
      spec.min_bandwidth_bps() == 0 && spec.max_delay_ns() == 0) {
    errors.Add(p + "service_class", "ASSURED needs min_bandwidth_bps or max_delay_ns");
  }
  return errors.ToStatus();
}

}  // namespace

std::string VirtualLinkId(const VirtualLink& spec) {
  return "vl-" + ContentTag(absl::StrCat(spec.application(), "\n", spec.channel(), "\n",
                                         spec.source_cluster(), "\n", spec.target_cluster()));
}

VirtualLinkController::VirtualLinkController(VirtualLinkRepository& repository, const Clock& clock,
                                             std::vector<std::string> controllers)
    : repository_(repository), clock_(clock) {
  for (std::string& c : controllers) controllers_[std::move(c)] = true;
}

absl::StatusOr<std::string> VirtualLinkController::AssignController(const std::string& scope) {
  auto it = assignments_.find(scope);
  if (it != assignments_.end() && controllers_[it->second]) return it->second;
  // The live instance with the fewest neighborhoods; ties by name.
  std::map<std::string, int> load;
  for (const auto& [id, live] : controllers_) {
    if (live) load[id] = 0;
  }
  if (load.empty()) return absl::UnavailableError("no live virtual-link controller instance");
  for (const auto& [s, id] : assignments_) {
    if (load.count(id)) ++load[id];
  }
  std::string best;
  for (const auto& [id, n] : load) {
    if (best.empty() || n < load[best]) best = id;
  }
  assignments_[scope] = best;
  return best;
}

void VirtualLinkController::Install(VirtualLink& link) const {
  link.clear_forwarding_rules();
  bool assured = link.service_class() == codeco::common::v1::SERVICE_CLASS_ASSURED;
  int priority = assured ? 200 : 100;
  int64_t meter = assured ? link.min_bandwidth_bps() : 0;
  const std::string src = Device(link.source_cluster());
  const std::string dst = Device(link.target_cluster());
  auto add = [&](const std::string& device, std::string match, std::string action) {
    ForwardingRule* r = link.add_forwarding_rules();
    r->set_device(device);
    r->set_match(std::move(match));
    r->set_action(std::move(action));
    r->set_priority(priority);
    r->set_meter_bps(meter);
  };
  const std::string tag = "vlink=" + link.id();
  add(src, tag + " dst=" + link.target_endpoint(), "encrypt; tunnel " + dst);
  add(dst, tag + " from=" + src, "decrypt; deliver " + link.target_endpoint());
  add(dst, tag + " src=" + link.target_endpoint(), "encrypt; tunnel " + src);
  add(src, tag + " from=" + dst, "decrypt; deliver to channel source");
}

absl::StatusOr<VirtualLink> VirtualLinkController::Create(const VirtualLink& spec_in,
                                                          const std::string& request_id) {
  RETURN_IF_ERROR(Validate(spec_in));
  VirtualLink spec = SpecOf(spec_in);
  if (!request_id.empty()) {
    ASSIGN_OR_RETURN(std::optional<std::string> id, repository_.FindByRequestId(request_id));
    if (id.has_value()) {
      ASSIGN_OR_RETURN(std::optional<VirtualLink> existing, repository_.Get(*id));
      if (existing.has_value()) {
        if (!google::protobuf::util::MessageDifferencer::Equals(SpecOf(*existing), spec)) {
          return absl::AlreadyExistsError(absl::StrCat(
              "request_id ", request_id, " was used for a different virtual link ", *id));
        }
        return *existing;
      }
    }
  }
  std::string id = VirtualLinkId(spec);
  ASSIGN_OR_RETURN(std::optional<VirtualLink> existing, repository_.Get(id));
  if (existing.has_value()) {
    if (google::protobuf::util::MessageDifferencer::Equals(SpecOf(*existing), spec)) {
      return *existing;
    }
    return absl::AlreadyExistsError(absl::StrCat(
        "virtual link ", id, " for channel ", spec.application(), "/", spec.channel(), " from ",
        spec.source_cluster(), " to ", spec.target_cluster(), " exists with another spec"));
  }
  if (capacity_ && spec.min_bandwidth_bps() > 0) {
    std::optional<int64_t> capacity =
        capacity_(spec.source_cluster(), spec.target_cluster(), spec.service_class());
    if (capacity.has_value()) {
      ASSIGN_OR_RETURN(int64_t held, HeldBandwidth(spec.source_cluster(), spec.target_cluster(),
                                                   spec.service_class()));
      if (held + spec.min_bandwidth_bps() > *capacity) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "link ", LinkId(spec.source_cluster(), spec.target_cluster()), " has ",
            std::max<int64_t>(0, *capacity - held), " bps of class ",
            codeco::common::v1::ServiceClass_Name(spec.service_class()), " free (", held,
            " of ", *capacity, " bps held by virtual links); channel ", spec.application(), "/",
            spec.channel(), " needs ", spec.min_bandwidth_bps(), " bps"));
      }
    }
  }
  std::string scope = Scope(spec);
  ASSIGN_OR_RETURN(std::string controller, AssignController(scope));
  VirtualLink link = spec;
  link.set_id(id);
  link.set_controller(controller);
  link.set_intent(absl::StrCat("connect ", spec.source_cluster(), " -> ", spec.target_cluster(),
                               " for ", spec.application(), "/", spec.channel(), ": class ",
                               codeco::common::v1::ServiceClass_Name(spec.service_class()),
                               ", min ", spec.min_bandwidth_bps(), " bps, max ",
                               spec.max_delay_ns(), " ns, endpoint ", spec.target_endpoint()));
  auto now = TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(clock_.Now()));
  *link.mutable_create_time() = now;
  *link.mutable_update_time() = now;
  if (spec.provisioning() == codeco::netma::v1::VIRTUAL_LINK_PROVISIONING_ON_DEMAND) {
    link.set_phase(codeco::netma::v1::VIRTUAL_LINK_PHASE_PENDING);
    link.set_message("intent compiled; rules are installed on first use");
  } else {
    Install(link);
    RETURN_IF_ERROR(InstallOnDevices(link));
    link.set_phase(codeco::netma::v1::VIRTUAL_LINK_PHASE_ESTABLISHING);
    link.set_message("rules installed; waiting for a measurement of the path");
  }
  if (absl::Status stored = repository_.Put(link, request_id); !stored.ok()) {
    if (edge_devices_ != nullptr && link.forwarding_rules_size() > 0) {
      (void)edge_devices_->Remove(link.id());
    }
    return stored;
  }
  devices_[scope].insert(Device(spec.source_cluster()));
  devices_[scope].insert(Device(spec.target_cluster()));
  return link;
}

absl::StatusOr<VirtualLink> VirtualLinkController::Activate(const std::string& id) {
  ASSIGN_OR_RETURN(VirtualLink link, Get(id));
  if (link.forwarding_rules_size() > 0) return link;
  ASSIGN_OR_RETURN(std::string controller, AssignController(Scope(link)));
  link.set_controller(controller);
  Install(link);
  RETURN_IF_ERROR(InstallOnDevices(link));
  link.set_phase(codeco::netma::v1::VIRTUAL_LINK_PHASE_ESTABLISHING);
  link.set_message("rules installed on first use; waiting for a measurement of the path");
  *link.mutable_update_time() = TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(clock_.Now()));
  RETURN_IF_ERROR(repository_.Put(link, ""));
  return link;
}

absl::StatusOr<VirtualLink> VirtualLinkController::Get(const std::string& id) const {
  if (id.empty()) return InvalidFieldError("id", "required");
  ASSIGN_OR_RETURN(std::optional<VirtualLink> link, repository_.Get(id));
  if (!link.has_value()) return absl::NotFoundError(absl::StrCat("virtual link ", id));
  return *link;
}

absl::StatusOr<VirtualLinkPage> VirtualLinkController::List(const VirtualLinkQuery& query) const {
  if (query.page_size < 0) return InvalidFieldError("page_size", "must not be negative");
  size_t size = query.page_size == 0 ? kDefaultPageSize : std::min(query.page_size, kMaxPageSize);
  VirtualLinkPage page;
  std::string after = query.page_token;
  // Scan in chunks until the page is full or the store is exhausted.
  while (page.links.size() < size) {
    ASSIGN_OR_RETURN(std::vector<VirtualLink> chunk, repository_.List(after, 256));
    if (chunk.empty()) return page;
    for (VirtualLink& link : chunk) {
      after = link.id();
      if (!query.application.empty() && link.application() != query.application) continue;
      if (!query.cluster.empty() && link.source_cluster() != query.cluster &&
          link.target_cluster() != query.cluster) {
        continue;
      }
      page.links.push_back(std::move(link));
      if (page.links.size() == size) break;
    }
    if (chunk.size() < 256 && page.links.size() < size) return page;
  }
  // Full page: there is a next page only if something after it matches.
  VirtualLinkQuery rest = query;
  rest.page_size = 1;
  rest.page_token = page.links.back().id();
  ASSIGN_OR_RETURN(VirtualLinkPage next, List(rest));
  if (!next.links.empty()) page.next_page_token = page.links.back().id();
  return page;
}

absl::Status VirtualLinkController::ReinstallAll() {
  if (edge_devices_ == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<VirtualLink> all, repository_.List("", 0));
  absl::Status first = absl::OkStatus();
  for (const VirtualLink& link : all) {
    if (link.forwarding_rules_size() == 0) continue;
    absl::Status st = InstallOnDevices(link);
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

absl::StatusOr<VirtualLink> VirtualLinkController::Delete(const std::string& id) {
  ASSIGN_OR_RETURN(VirtualLink link, Get(id));
  if (edge_devices_ != nullptr) {
    if (absl::Status st = edge_devices_->Remove(id); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat("removing virtual link ", id,
                                                  " from the edge devices: ", st.message()));
    }
  }
  RETURN_IF_ERROR(repository_.Delete(id));
  link.clear_forwarding_rules();
  link.set_phase(codeco::netma::v1::VIRTUAL_LINK_PHASE_DELETING);
  link.set_message("rules removed");
  *link.mutable_update_time() = TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(clock_.Now()));
  return link;
}

absl::StatusOr<int> VirtualLinkController::ApplyMeasurements(
    const std::vector<LinkMetrics>& links) {
  std::map<std::string, const LinkMetrics*> by_id;
  for (const LinkMetrics& l : links) by_id[l.link_id()] = &l;
  ASSIGN_OR_RETURN(std::vector<VirtualLink> all, repository_.List("", 0));
  std::vector<VirtualLink> changed;
  auto now = TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(clock_.Now()));
  for (VirtualLink& link : all) {
    if (link.forwarding_rules_size() == 0) continue;  // not installed
    auto it = by_id.find(LinkId(link.source_cluster(), link.target_cluster()));
    if (it == by_id.end() || it->second->rtt_ema_ns() == 0) continue;
    const LinkMetrics& m = *it->second;
    VirtualLink before = link;
    // The newest probe, not an average: a bound is checked probe by probe
    // and the grace period (counted from out_of_bounds_since) filters blips.
    const int64_t rtt = m.rtt_last_ns() > 0 ? m.rtt_last_ns() : m.rtt_ema_ns();
    link.set_measured_delay_ns(rtt / 2);
    link.set_measured_throughput_bps(m.throughput_bps());
    *link.mutable_measure_time() = m.measure_time();
    std::string over;
    if (m.failed()) {
      over = "the inter-cluster link is down";
    } else if (link.max_delay_ns() > 0 && link.measured_delay_ns() > link.max_delay_ns()) {
      over = absl::StrCat("delay ", link.measured_delay_ns(), " ns exceeds ", link.max_delay_ns(),
                          " ns");
    } else if (link.min_bandwidth_bps() > 0 && m.throughput_bps() > 0 &&
               m.throughput_bps() < link.min_bandwidth_bps()) {
      over = absl::StrCat("throughput ", m.throughput_bps(), " bps below ",
                          link.min_bandwidth_bps(), " bps");
    }
    if (over.empty()) {
      link.set_phase(codeco::netma::v1::VIRTUAL_LINK_PHASE_UP);
      link.set_message("within bounds");
      link.clear_out_of_bounds_since();
    } else {
      link.set_phase(m.failed() ? codeco::netma::v1::VIRTUAL_LINK_PHASE_FAILED
                                : codeco::netma::v1::VIRTUAL_LINK_PHASE_DEGRADED);
      link.set_message(over);
      if (!link.has_out_of_bounds_since()) {
        *link.mutable_out_of_bounds_since() = m.has_measure_time() ? m.measure_time() : now;
      }
    }
    if (!google::protobuf::util::MessageDifferencer::Equals(before, link)) {
      *link.mutable_update_time() = now;
      changed.push_back(link);
    }
  }
  if (!changed.empty()) RETURN_IF_ERROR(repository_.PutAll(changed));
  return static_cast<int>(changed.size());
}

absl::Status VirtualLinkController::InstallOnDevices(const VirtualLink& link) const {
  if (edge_devices_ == nullptr) return absl::OkStatus();
  absl::Status st = edge_devices_->Install(link);
  if (st.ok()) return st;
  return absl::Status(st.code(), absl::StrCat("installing virtual link ", link.id(),
                                              " on the edge devices: ", st.message()));
}

absl::StatusOr<std::map<std::string, std::map<int, int64_t>>> VirtualLinkController::HeldByLink()
    const {
  ASSIGN_OR_RETURN(std::vector<VirtualLink> all, repository_.List("", 0));
  std::map<std::string, std::map<int, int64_t>> held;
  for (const VirtualLink& l : all) {
    held[LinkId(l.source_cluster(), l.target_cluster())][l.service_class()] +=
        l.min_bandwidth_bps();
  }
  return held;
}

absl::StatusOr<int64_t> VirtualLinkController::HeldBandwidth(
    const std::string& from, const std::string& to,
    codeco::common::v1::ServiceClass service_class) const {
  ASSIGN_OR_RETURN(auto held, HeldByLink());
  auto link = held.find(LinkId(from, to));
  if (link == held.end()) return 0;
  auto c = link->second.find(service_class);
  return c == link->second.end() ? 0 : c->second;
}

absl::Status VirtualLinkController::AnnotateTopology(
    codeco::netma::v1::NetworkTopology& topology) const {
  ASSIGN_OR_RETURN(auto held, HeldByLink());
  for (auto& link : *topology.mutable_links()) {
    auto it = held.find(link.id());
    if (it == held.end()) continue;
    for (auto& cap : *link.mutable_capabilities()) {
      auto c = it->second.find(cap.service_class());
      if (c != it->second.end()) cap.set_reserved_bandwidth_bps(c->second);
    }
  }
  return absl::OkStatus();
}

absl::Status VirtualLinkController::MarkControllerDown(const std::string& id) {
  auto it = controllers_.find(id);
  if (it == controllers_.end()) return absl::NotFoundError("controller instance " + id);
  it->second = false;
  ASSIGN_OR_RETURN(std::vector<VirtualLink> all, repository_.List("", 0));
  std::vector<VirtualLink> moved;
  absl::Status result = absl::OkStatus();
  auto now = TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(clock_.Now()));
  for (VirtualLink& link : all) {
    if (link.controller() != id) continue;
    absl::StatusOr<std::string> next = AssignController(Scope(link));
    if (!next.ok()) {
      result = next.status();
      link.set_phase(codeco::netma::v1::VIRTUAL_LINK_PHASE_FAILED);
      link.set_message("controller " + id + " is down and no instance is left");
    } else {
      link.set_controller(*next);
      if (link.forwarding_rules_size() > 0) Install(link);  // re-installed by the new instance
      link.set_message(absl::StrCat("edge devices re-associated from ", id, " to ", *next));
    }
    *link.mutable_update_time() = now;
    moved.push_back(std::move(link));
  }
  // Neighborhoods with no link yet move as well.
  for (auto& [scope, instance] : assignments_) {
    if (instance == id) {
      absl::StatusOr<std::string> next = AssignController(scope);
      if (!next.ok()) result = next.status();
    }
  }
  if (!moved.empty()) RETURN_IF_ERROR(repository_.PutAll(moved));
  return result;
}

absl::Status VirtualLinkController::MarkControllerUp(const std::string& id) {
  auto it = controllers_.find(id);
  if (it == controllers_.end()) return absl::NotFoundError("controller instance " + id);
  it->second = true;
  return absl::OkStatus();
}

std::string VirtualLinkController::ControllerOf(const std::string& neighborhood) const {
  auto it = assignments_.find(neighborhood);
  return it == assignments_.end() ? "" : it->second;
}

std::map<std::string, std::string> VirtualLinkController::DeviceAssociations(
    const std::string& neighborhood) const {
  std::map<std::string, std::string> out;
  auto it = devices_.find(neighborhood);
  if (it == devices_.end()) return out;
  std::string controller = ControllerOf(neighborhood);
  for (const std::string& device : it->second) out[device] = controller;
  return out;
}

}  // namespace codeco::netma
