#include "kubelms/core/kube_objects.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "codeco/common/excerpt.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/quantity.h"
#include "codeco/common/status.h"
#include "nlohmann/json.hpp"

namespace codeco::kubelms {
namespace {

using codeco::common::v1::ResourceQuantities;
using codeco::lms::v1::Node;
using codeco::lms::v1::Pod;
using json = nlohmann::json;

std::string Str(const json& o, const char* key) { return JsonString(o, key); }
const json& Member(const json& o, const char* key) { return JsonMember(o, key); }

// A string-to-string map (labels, annotations): non-string values are skipped.
template <typename Map>
void CopyStringMap(const json& from, Map* to) {
  if (!from.is_object()) return;
  for (auto it = from.begin(); it != from.end(); ++it) {
    if (it->is_string()) (*to)[it.key()] = it->get<std::string>();
  }
}

// Checks the object's kind (when the document names one) and its name.
absl::Status CheckObject(const json& object, const char* kind) {
  if (!object.is_object())
    return absl::InvalidArgumentError(absl::StrCat("a ", kind, " must be a JSON object"));
  const std::string actual = Str(object, "kind");
  if (!actual.empty() && actual != kind) {
    return absl::InvalidArgumentError(absl::StrCat("expected a ", kind, ", got a ", actual));
  }
  if (Str(Member(object, "metadata"), "name").empty()) {
    return absl::InvalidArgumentError(absl::StrCat("a ", kind, " without metadata.name"));
  }
  return absl::OkStatus();
}

void Timestamp(const json& o, const char* key, google::protobuf::Timestamp* out) {
  const std::string text = Str(o, key);
  if (!text.empty()) ParseKubeTime(text, out);
}

// A label key: an optional DNS-subdomain prefix and '/', then a name of at
// most 63 characters of [A-Za-z0-9-_.] that starts and ends alphanumeric.
bool IsLabelName(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

bool IsDnsSubdomain(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  auto lower_alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_alnum(name.front()) || !lower_alnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(),
                     [&](char c) { return lower_alnum(c) || c == '-' || c == '.'; });
}

bool IsLabelKey(std::string_view key) {
  const size_t slash = key.find('/');
  if (slash == std::string_view::npos) return IsLabelName(key);
  return IsDnsSubdomain(key.substr(0, slash)) && IsLabelName(key.substr(slash + 1));
}

bool IsLabelValue(std::string_view value) { return value.empty() || IsLabelName(value); }

absl::Status CheckLabels(const google::protobuf::Map<std::string, std::string>& labels,
                         const std::string& path) {
  for (const auto& [key, value] : labels) {
    if (!IsLabelKey(key)) {
      return InvalidFieldError(absl::StrCat(path, "[", key, "]"),
                               "is not a Kubernetes label key ([prefix/]name, name of at most 63 "
                               "characters [A-Za-z0-9-_.], alphanumeric at both ends)");
    }
    if (!IsLabelValue(value)) {
      return InvalidFieldError(
          absl::StrCat(path, "[", key, "]"),
          absl::StrCat("value \"", PrintableExcerpt(value, 80),
                       "\" is not a Kubernetes label value (at most 63 "
                       "characters [A-Za-z0-9-_.], alphanumeric at both ends)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckQuantities(const ResourceQuantities& q, const std::string& path) {
  const std::pair<const char*, int64_t> fields[] = {
      {"cpu_millicores", q.cpu_millicores()},
      {"memory_bytes", q.memory_bytes()},
      {"gpu", q.gpu()},
      {"ephemeral_storage_bytes", q.ephemeral_storage_bytes()}};
  for (const auto& [name, value] : fields) {
    if (value < 0) return InvalidFieldError(absl::StrCat(path, ".", name), "must not be negative");
  }
  return absl::OkStatus();
}

json QuantitiesToKube(const ResourceQuantities& q, const ResourceNames& names) {
  json out = json::object();
  if (q.cpu_millicores() > 0) out["cpu"] = FormatCpu(q.cpu_millicores());
  // Bytes exactly: "1Gi" style would round.
  if (q.memory_bytes() > 0) out["memory"] = absl::StrCat(q.memory_bytes());
  if (q.ephemeral_storage_bytes() > 0) {
    out["ephemeral-storage"] = absl::StrCat(q.ephemeral_storage_bytes());
  }
  if (q.gpu() > 0 && !names.gpu.empty()) out[names.gpu.front()] = absl::StrCat(q.gpu());
  return out;
}

void MaxInto(ResourceQuantities* into, const ResourceQuantities& q) {
  into->set_cpu_millicores(std::max(into->cpu_millicores(), q.cpu_millicores()));
  into->set_memory_bytes(std::max(into->memory_bytes(), q.memory_bytes()));
  into->set_gpu(std::max(into->gpu(), q.gpu()));
  into->set_ephemeral_storage_bytes(
      std::max(into->ephemeral_storage_bytes(), q.ephemeral_storage_bytes()));
}

codeco::lms::v1::PodPhase PhaseFromKube(const std::string& phase) {
  if (phase == "Pending") return codeco::lms::v1::POD_PHASE_PENDING;
  if (phase == "Running") return codeco::lms::v1::POD_PHASE_RUNNING;
  if (phase == "Succeeded") return codeco::lms::v1::POD_PHASE_SUCCEEDED;
  if (phase == "Failed") return codeco::lms::v1::POD_PHASE_FAILED;
  return codeco::lms::v1::POD_PHASE_UNSPECIFIED;
}

// Why a pod is in its phase, in words: the pod's own reason and message, or
// else the first container that waits or ended with a reason.
std::string PodMessage(const json& status) {
  const std::string message = Str(status, "message");
  const std::string reason = Str(status, "reason");
  if (!message.empty() || !reason.empty()) {
    return reason.empty()    ? message
           : message.empty() ? reason
                             : absl::StrCat(reason, ": ", message);
  }
  for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
    const json& statuses = Member(status, list);
    if (!statuses.is_array()) continue;
    for (const json& c : statuses) {
      const json& state = Member(c, "state");
      for (const char* which : {"waiting", "terminated"}) {
        const json& s = Member(state, which);
        const std::string why = Str(s, "reason");
        if (why.empty() || why == "Completed") continue;
        const std::string text = Str(s, "message");
        return absl::StrCat("container ", Str(c, "name"), " ", which, ": ", why,
                            text.empty() ? "" : ": ", text);
      }
    }
  }
  return "";
}

}  // namespace

absl::StatusOr<ResourceQuantities> QuantitiesFromKube(const json& resources,
                                                      const ResourceNames& names,
                                                      const std::string& path) {
  ResourceQuantities out;
  if (resources.is_null()) return out;
  if (!resources.is_object()) return InvalidFieldError(path, "must be a map of quantities");
  auto quantity = [&](const std::string& key) -> absl::StatusOr<std::string> {
    auto it = resources.find(key);
    if (it == resources.end()) return std::string();
    if (it->is_string()) return it->get<std::string>();
    if (it->is_number_integer()) return absl::StrCat(it->get<int64_t>());
    return InvalidFieldError(absl::StrCat(path, ".", key), "must be a quantity string");
  };
  auto parse = [&](const std::string& key, auto parser, auto setter) -> absl::Status {
    ASSIGN_OR_RETURN(std::string text, quantity(key));
    if (text.empty()) return absl::OkStatus();
    absl::StatusOr<int64_t> value = parser(text);
    if (!value.ok()) {
      return InvalidFieldError(absl::StrCat(path, ".", key), std::string(value.status().message()));
    }
    setter(*value);
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(parse("cpu", ParseCpuMillicores, [&](int64_t v) { out.set_cpu_millicores(v); }));
  RETURN_IF_ERROR(parse("memory", ParseBytes, [&](int64_t v) { out.set_memory_bytes(v); }));
  RETURN_IF_ERROR(parse("ephemeral-storage", ParseBytes,
                        [&](int64_t v) { out.set_ephemeral_storage_bytes(v); }));
  for (const std::string& gpu : names.gpu) {
    RETURN_IF_ERROR(parse(gpu, ParseBytes, [&](int64_t v) { out.set_gpu(out.gpu() + v); }));
  }
  return out;
}

absl::StatusOr<Node> NodeFromKube(const json& node, const ResourceNames& names) {
  RETURN_IF_ERROR(CheckObject(node, "Node"));
  const json& metadata = node["metadata"];
  const json& status = Member(node, "status");
  Node out;
  out.set_name(Str(metadata, "name"));
  out.set_resource_version(Str(metadata, "resourceVersion"));
  CopyStringMap(Member(metadata, "labels"), out.mutable_labels());
  ASSIGN_OR_RETURN(*out.mutable_capacity(),
                   QuantitiesFromKube(Member(status, "capacity"), names, "status.capacity"));
  ASSIGN_OR_RETURN(*out.mutable_allocatable(),
                   QuantitiesFromKube(Member(status, "allocatable"), names, "status.allocatable"));
  const json& spec = Member(node, "spec");
  if (spec.is_object()) {
    auto it = spec.find("unschedulable");
    out.set_unschedulable(it != spec.end() && it->is_boolean() && it->get<bool>());
  }
  out.set_condition(codeco::lms::v1::NODE_CONDITION_NOT_READY);
  const json& conditions = Member(status, "conditions");
  if (conditions.is_array()) {
    for (const json& c : conditions) {
      if (Str(c, "type") != "Ready") continue;
      out.set_condition(Str(c, "status") == "True" ? codeco::lms::v1::NODE_CONDITION_READY
                                                   : codeco::lms::v1::NODE_CONDITION_NOT_READY);
      Timestamp(c, "lastHeartbeatTime", out.mutable_heartbeat_time());
    }
  } else {
    out.set_condition(codeco::lms::v1::NODE_CONDITION_UNSPECIFIED);
  }
  return out;
}

absl::StatusOr<Pod> PodFromKube(const json& pod, const ResourceNames& names) {
  RETURN_IF_ERROR(CheckObject(pod, "Pod"));
  const json& metadata = pod["metadata"];
  const json& spec = Member(pod, "spec");
  const json& status = Member(pod, "status");
  Pod out;
  out.set_name(Str(metadata, "name"));
  out.set_resource_version(Str(metadata, "resourceVersion"));
  CopyStringMap(Member(metadata, "labels"), out.mutable_labels());
  CopyStringMap(Member(metadata, "annotations"), out.mutable_annotations());
  out.mutable_annotations()->erase(kRequestIdAnnotation);
  Timestamp(metadata, "creationTimestamp", out.mutable_create_time());
  out.set_node_name(Str(spec, "nodeName"));
  const std::string restart = Str(spec, "restartPolicy");
  if (restart == "Never") out.set_restart_policy(codeco::lms::v1::RESTART_POLICY_NEVER);
  if (restart == "Always") out.set_restart_policy(codeco::lms::v1::RESTART_POLICY_ALWAYS);
  if (restart == "OnFailure") out.set_restart_policy(codeco::lms::v1::RESTART_POLICY_ON_FAILURE);
  const json& containers = Member(spec, "containers");
  if (containers.is_array()) {
    for (size_t i = 0; i < containers.size(); ++i) {
      const json& c = containers[i];
      const std::string path = absl::StrCat("spec.containers[", i, "]");
      codeco::lms::v1::Container* container = out.add_containers();
      container->set_name(Str(c, "name"));
      container->set_image(Str(c, "image"));
      for (const char* list : {"command", "args"}) {
        const json& words = Member(c, list);
        if (!words.is_array()) continue;
        for (const json& w : words) {
          if (!w.is_string()) continue;
          (std::string_view(list) == "command" ? container->add_command() : container->add_args())
              ->assign(w.get<std::string>());
        }
      }
      const json& env = Member(c, "env");
      if (env.is_array()) {
        // Only literal values: valueFrom (secrets, fields) has no LMS form.
        for (const json& e : env) {
          if (!Str(e, "name").empty() && Member(e, "valueFrom").is_null()) {
            (*container->mutable_env())[Str(e, "name")] = Str(e, "value");
          }
        }
      }
      const json& ports = Member(c, "ports");
      if (ports.is_array()) {
        for (const json& p : ports) {
          auto port = Member(p, "containerPort");
          if (!port.is_number_integer()) continue;
          codeco::lms::v1::ContainerPort* out_port = container->add_ports();
          out_port->set_name(Str(p, "name"));
          out_port->set_port(port.get<int32_t>());
          out_port->set_protocol(Str(p, "protocol").empty() ? "TCP" : Str(p, "protocol"));
        }
      }
      const json& resources = Member(c, "resources");
      ASSIGN_OR_RETURN(
          *container->mutable_requests(),
          QuantitiesFromKube(Member(resources, "requests"), names, path + ".resources.requests"));
      ASSIGN_OR_RETURN(
          *container->mutable_limits(),
          QuantitiesFromKube(Member(resources, "limits"), names, path + ".resources.limits"));
    }
  }
  out.set_phase(PhaseFromKube(Str(status, "phase")));
  out.set_message(PodMessage(status));
  out.set_pod_ip(Str(status, "podIP"));
  Timestamp(status, "startTime", out.mutable_start_time());
  return out;
}

absl::StatusOr<ResourceQuantities> PodRequestsFromKube(const json& pod,
                                                       const ResourceNames& names) {
  const json& spec = Member(pod, "spec");
  ResourceQuantities sum;
  ResourceQuantities largest_init;
  for (const char* list : {"containers", "initContainers"}) {
    const json& containers = Member(spec, list);
    if (!containers.is_array()) continue;
    for (size_t i = 0; i < containers.size(); ++i) {
      ASSIGN_OR_RETURN(
          ResourceQuantities q,
          QuantitiesFromKube(Member(Member(containers[i], "resources"), "requests"), names,
                             absl::StrCat("spec.", list, "[", i, "].resources.requests")));
      if (std::string_view(list) == "containers") {
        AddQuantities(&sum, q);
      } else {
        MaxInto(&largest_init, q);
      }
    }
  }
  MaxInto(&sum, largest_init);
  // Pod overhead (RuntimeClass) counts on top.
  ASSIGN_OR_RETURN(ResourceQuantities overhead,
                   QuantitiesFromKube(Member(spec, "overhead"), names, "spec.overhead"));
  AddQuantities(&sum, overhead);
  return sum;
}

absl::Status ValidatePodForCreate(const Pod& pod, const std::string& path) {
  if (pod.name().empty()) return InvalidFieldError(path + ".name", "is required");
  if (!IsDnsSubdomain(pod.name())) {
    return InvalidFieldError(path + ".name",
                             absl::StrCat("\"", PrintableExcerpt(pod.name(), 80),
                                          "\" is not a DNS-1123 subdomain (at most 253 characters "
                                          "[a-z0-9-.], alphanumeric at both ends)"));
  }
  if (pod.node_name().empty()) {
    return InvalidFieldError(path + ".node_name", "is required (codeco binds pods itself)");
  }
  RETURN_IF_ERROR(CheckLabels(pod.labels(), path + ".labels"));
  for (const auto& [key, value] : pod.annotations()) {
    if (!IsLabelKey(key)) {
      return InvalidFieldError(absl::StrCat(path, ".annotations[", key, "]"),
                               "is not a Kubernetes annotation key ([prefix/]name)");
    }
  }
  if (pod.containers().empty()) return InvalidFieldError(path + ".containers", "must not be empty");
  std::set<std::string> seen;
  for (int i = 0; i < pod.containers_size(); ++i) {
    const auto& c = pod.containers(i);
    const std::string at = absl::StrCat(path, ".containers[", i, "]");
    if (c.name().empty()) return InvalidFieldError(at + ".name", "is required");
    if (c.name().size() > 63 || !IsDnsSubdomain(c.name()) ||
        c.name().find('.') != std::string::npos) {
      return InvalidFieldError(at + ".name", "is not a DNS-1123 label (at most 63 [a-z0-9-])");
    }
    if (!seen.insert(c.name()).second) {
      return InvalidFieldError(at + ".name", absl::StrCat("\"", c.name(), "\" is used twice"));
    }
    if (c.image().empty()) return InvalidFieldError(at + ".image", "is required");
    for (const auto& [name, value] : c.env()) {
      if (name.empty() || name.find('=') != std::string::npos) {
        return InvalidFieldError(absl::StrCat(at, ".env[", name, "]"),
                                 "is not an environment variable name");
      }
    }
    std::set<std::pair<int, std::string>> ports;
    for (int j = 0; j < c.ports_size(); ++j) {
      const auto& p = c.ports(j);
      const std::string port_at = absl::StrCat(at, ".ports[", j, "]");
      if (p.port() < 1 || p.port() > 65535) {
        return InvalidFieldError(port_at + ".port", "must be 1-65535");
      }
      const std::string protocol = p.protocol().empty() ? "TCP" : p.protocol();
      if (protocol != "TCP" && protocol != "UDP" && protocol != "SCTP") {
        return InvalidFieldError(port_at + ".protocol", "must be TCP, UDP or SCTP");
      }
      if (!ports.insert({p.port(), protocol}).second) {
        return InvalidFieldError(port_at + ".port", "is listed twice");
      }
    }
    RETURN_IF_ERROR(CheckQuantities(c.requests(), at + ".requests"));
    RETURN_IF_ERROR(CheckQuantities(c.limits(), at + ".limits"));
  }
  return absl::OkStatus();
}

json PodToKube(const Pod& pod, const std::string& ns, const std::string& request_id,
               const ResourceNames& names) {
  json metadata = {{"name", pod.name()}, {"namespace", ns}};
  if (!pod.labels().empty()) {
    // Sorted: the same pod gives the same manifest.
    metadata["labels"] =
        std::map<std::string, std::string>(pod.labels().begin(), pod.labels().end());
  }
  std::map<std::string, std::string> annotations(pod.annotations().begin(),
                                                 pod.annotations().end());
  if (!request_id.empty()) annotations[kRequestIdAnnotation] = request_id;
  if (!annotations.empty()) metadata["annotations"] = annotations;
  json containers = json::array();
  for (const auto& c : pod.containers()) {
    json container = {{"name", c.name()}, {"image", c.image()}};
    if (!c.command().empty())
      container["command"] = std::vector<std::string>(c.command().begin(), c.command().end());
    if (!c.args().empty())
      container["args"] = std::vector<std::string>(c.args().begin(), c.args().end());
    if (!c.env().empty()) {
      json env = json::array();
      for (const auto& [name, value] :
           std::map<std::string, std::string>(c.env().begin(), c.env().end())) {
        env.push_back({{"name", name}, {"value", value}});
      }
      container["env"] = std::move(env);
    }
    if (!c.ports().empty()) {
      json ports = json::array();
      for (const auto& p : c.ports()) {
        json port = {{"containerPort", p.port()},
                     {"protocol", p.protocol().empty() ? "TCP" : p.protocol()}};
        if (!p.name().empty()) port["name"] = p.name();
        ports.push_back(std::move(port));
      }
      container["ports"] = std::move(ports);
    }
    json requests = QuantitiesToKube(c.requests(), names);
    codeco::common::v1::ResourceQuantities limits = c.limits();
    // Kubernetes takes extended resources (GPUs) only with a limit equal to
    // the request.
    if (limits.gpu() == 0) limits.set_gpu(c.requests().gpu());
    json limit_list = QuantitiesToKube(limits, names);
    json resources = json::object();
    if (!requests.empty()) resources["requests"] = std::move(requests);
    if (!limit_list.empty()) resources["limits"] = std::move(limit_list);
    if (!resources.empty()) container["resources"] = std::move(resources);
    containers.push_back(std::move(container));
  }
  json spec = {{"nodeName", pod.node_name()}, {"containers", std::move(containers)}};
  // Unset is Kubernetes' default, Always.
  if (pod.restart_policy() == codeco::lms::v1::RESTART_POLICY_NEVER) {
    spec["restartPolicy"] = "Never";
  } else if (pod.restart_policy() == codeco::lms::v1::RESTART_POLICY_ALWAYS) {
    spec["restartPolicy"] = "Always";
  } else if (pod.restart_policy() == codeco::lms::v1::RESTART_POLICY_ON_FAILURE) {
    spec["restartPolicy"] = "OnFailure";
  }
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", std::move(metadata)},
          {"spec", std::move(spec)}};
}

absl::StatusOr<std::string> LabelSelectorToKube(const codeco::common::v1::LabelSelector& selector,
                                                const std::string& path) {
  std::vector<std::string> terms;
  const std::map<std::string, std::string> match(selector.match_labels().begin(),
                                                 selector.match_labels().end());
  for (const auto& [key, value] : match) {
    const std::string at = absl::StrCat(path, ".match_labels[", key, "]");
    if (!IsLabelKey(key)) return InvalidFieldError(at, "is not a Kubernetes label key");
    if (!IsLabelValue(value)) return InvalidFieldError(at, "is not a Kubernetes label value");
    terms.push_back(absl::StrCat(key, "=", value));
  }
  for (int i = 0; i < selector.match_expressions_size(); ++i) {
    const auto& e = selector.match_expressions(i);
    const std::string at = absl::StrCat(path, ".match_expressions[", i, "]");
    if (!IsLabelKey(e.key()))
      return InvalidFieldError(at + ".key", "is not a Kubernetes label key");
    for (int j = 0; j < e.values_size(); ++j) {
      if (!IsLabelValue(e.values(j))) {
        return InvalidFieldError(absl::StrCat(at, ".values[", j, "]"),
                                 "is not a Kubernetes label value");
      }
    }
    switch (e.op()) {
      case codeco::common::v1::LABEL_SELECTOR_OPERATOR_IN:
      case codeco::common::v1::LABEL_SELECTOR_OPERATOR_NOT_IN:
        if (e.values().empty()) return InvalidFieldError(at + ".values", "must not be empty");
        terms.push_back(absl::StrCat(
            e.key(),
            e.op() == codeco::common::v1::LABEL_SELECTOR_OPERATOR_IN ? " in (" : " notin (",
            absl::StrJoin(e.values(), ","), ")"));
        break;
      case codeco::common::v1::LABEL_SELECTOR_OPERATOR_EXISTS:
      case codeco::common::v1::LABEL_SELECTOR_OPERATOR_DOES_NOT_EXIST:
        if (!e.values().empty()) return InvalidFieldError(at + ".values", "must be empty");
        terms.push_back(absl::StrCat(
            e.op() == codeco::common::v1::LABEL_SELECTOR_OPERATOR_EXISTS ? "" : "!", e.key()));
        break;
      default:
        return InvalidFieldError(at + ".op", "is required");
    }
  }
  return absl::StrJoin(terms, ",");
}

void AddQuantities(ResourceQuantities* into, const ResourceQuantities& q) {
  into->set_cpu_millicores(into->cpu_millicores() + q.cpu_millicores());
  into->set_memory_bytes(into->memory_bytes() + q.memory_bytes());
  into->set_gpu(into->gpu() + q.gpu());
  into->set_ephemeral_storage_bytes(into->ephemeral_storage_bytes() + q.ephemeral_storage_bytes());
}

}  // namespace codeco::kubelms
