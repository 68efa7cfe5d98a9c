#include "acm/core/cam_parser.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "acm/core/application_bounds.h"
#include "acm/core/bounded_yaml.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/quantity.h"
#include "codeco/common/status.h"
#include "yaml-cpp/yaml.h"

namespace codeco::acm {
namespace {

using v1::ApplicationSpec;
using v1::Channel;
using v1::ServiceSpec;

constexpr std::string_view kCodecoApiVersion = "codeco.he-codeco.eu/v1alpha1";
constexpr std::string_view kExtendedApiVersion = "codeco.io/v1";
constexpr std::string_view kMck8sApiVersion = "fogguru.eu/v1";

// Upper bounds beyond which a quantity is taken for a mistake.
constexpr int64_t kMaxCpuMillicores = int64_t{1'000'000} * 1000;  // a million cores
constexpr int64_t kMaxBytes = int64_t{1} << 50;                   // 1 PiB
constexpr int64_t kMaxGpu = 1024;
constexpr int64_t kMaxBandwidthBps = int64_t{10'000'000'000'000};  // 10 Tbit/s
constexpr int64_t kMaxDelayNs = int64_t{3600} * 1'000'000'000;     // 1 hour
constexpr int64_t kMaxRunNs = int64_t{30} * 24 * kMaxDelayNs;       // 30 days (intents.duration)
// A channel's maxDelay: CODECO's own experiments write "1000000" (seconds) to
// mean "no bound", so any value that fits in int64 nanoseconds is taken.
constexpr int64_t kMaxChannelDelayNs = INT64_MAX;
// CODECO caps sendInterval at 10 ms ("The code will cap it at 10ms").
constexpr int64_t kMaxSendIntervalNs = 10'000'000;
// CODECO's default frame size when only a bandwidth is given.
constexpr int64_t kDefaultFrameBytes = 500;
constexpr int64_t kMaxFrameBytes = int64_t{1} << 20;
constexpr int64_t kMaxReplicas = kMaxServiceReplicas;  // one cap, shared with SWM
constexpr int kMaxLocations = 1000;
constexpr size_t kMaxStringBytes = 1024;

// ---------------------------------------------------------------------------
// Field-path helpers.

std::string Child(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", std::string(key));
}
std::string Index(const std::string& path, size_t i) { return absl::StrCat(path, "[", i, "]"); }

bool IsBareNumber(std::string_view text) {
  if (text.empty()) return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) || c == '.';
  });
}

// Reads typed values out of a YAML tree, recording errors with their paths.
class Reader {
 public:
  explicit Reader(FieldErrors& errors) : errors_(errors) {}

  void Error(const std::string& path, const std::string& message) { errors_.Add(path, message); }
  bool ok() const { return errors_.empty(); }

  // Records that `path` was accepted but does not take effect yet, saying why.
  void NotActedOn(const std::string& path, std::string_view why) {
    warnings_.push_back(absl::StrCat(path, ": accepted but not acted on yet (", std::string(why), ")"));
  }
  // Records a remark about `path` that is not an error: what ACM made of it.
  void Warn(const std::string& path, std::string_view what) {
    warnings_.push_back(absl::StrCat(path, ": ", std::string(what)));
  }
  // NotActedOn for the child `key` of `map` when it is present (even null).
  void NotActedOnIfSet(const YAML::Node& map, std::string_view key, const std::string& path,
                       std::string_view why) {
    if (map.IsMap() && map[std::string(key)].IsDefined()) NotActedOn(Child(path, key), why);
  }
  // Records NotActedOn for every key of `map` not in `known`.
  void NotActedOnUnknown(const YAML::Node& map, const std::string& path,
                         std::initializer_list<std::string_view> known, std::string_view why) {
    for (const auto& kv : map) {
      if (!kv.first.IsScalar()) continue;
      const std::string& key = kv.first.Scalar();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        NotActedOn(Child(path, key), why);
      }
    }
  }
  std::vector<std::string>& warnings() { return warnings_; }

  // True when `node` is a mapping; otherwise records an error (unless absent and optional).
  bool IsMap(const YAML::Node& node, const std::string& path) {
    if (node.IsMap()) return true;
    Error(path, "must be a mapping");
    return false;
  }
  bool IsSeq(const YAML::Node& node, const std::string& path) {
    if (node.IsSequence()) return true;
    Error(path, "must be a list");
    return false;
  }

  // Records an error for every key of `map` not in `known`; `hint` is added to the message.
  void KnownKeys(const YAML::Node& map, const std::string& path,
                 absl::Span<const std::string_view> known, const std::string& hint = "") {
    for (const auto& kv : map) {
      if (!kv.first.IsScalar()) {
        Error(path, "keys must be strings");
        continue;
      }
      const std::string& key = kv.first.Scalar();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        Error(Child(path, key), hint.empty() ? "unknown field" : "unknown field" + hint);
      }
    }
  }

  // The child `key` of `map` if present and not null.
  static std::optional<YAML::Node> Field(const YAML::Node& map, std::string_view key) {
    YAML::Node child = map[std::string(key)];
    if (!child.IsDefined() || child.IsNull()) return std::nullopt;
    return child;
  }

  std::optional<std::string> String(const YAML::Node& map, std::string_view key,
                                    const std::string& path, bool required) {
    std::string p = Child(path, key);
    std::optional<YAML::Node> node = Field(map, key);
    if (!node) {
      if (required) Error(p, "required");
      return std::nullopt;
    }
    if (!node->IsScalar()) {
      Error(p, "must be a string");
      return std::nullopt;
    }
    const std::string& text = node->Scalar();
    if (text.size() > kMaxStringBytes) {
      Error(p, absl::StrCat("longer than ", kMaxStringBytes, " bytes"));
      return std::nullopt;
    }
    if (required && text.empty()) {
      Error(p, "must not be empty");
      return std::nullopt;
    }
    return text;
  }

  std::optional<std::string> DnsLabel(const YAML::Node& map, std::string_view key,
                                      const std::string& path, bool required) {
    std::optional<std::string> s = String(map, key, path, required);
    if (s && !IsDnsLabel(*s)) {
      Error(Child(path, key), absl::StrCat("\"", *s,
                                           "\" is not a DNS label (1-63 of a-z, 0-9 and '-', "
                                           "starting and ending alphanumeric)"));
      return std::nullopt;
    }
    return s;
  }

  std::optional<int64_t> Int(const YAML::Node& map, std::string_view key, const std::string& path,
                             int64_t min, int64_t max, bool required = false) {
    std::optional<std::string> s = String(map, key, path, required);
    if (!s) return std::nullopt;
    std::string p = Child(path, key);
    int64_t v = 0;
    if (!absl::SimpleAtoi(*s, &v)) {
      Error(p, absl::StrCat("must be an integer, got \"", *s, "\""));
      return std::nullopt;
    }
    if (v < min || v > max) {
      Error(p, absl::StrCat("must be between ", min, " and ", max, ", got ", v));
      return std::nullopt;
    }
    return v;
  }

  // A percentage 0-100, written as 20, "20" or "20%".
  std::optional<int64_t> Percent(const YAML::Node& map, std::string_view key,
                                 const std::string& path) {
    std::optional<std::string> s = String(map, key, path, false);
    if (!s || s->empty()) return std::nullopt;  // "" is CODECO's "not set"
    std::string text = *s;
    if (!text.empty() && text.back() == '%') text.pop_back();
    int64_t v = 0;
    std::string p = Child(path, key);
    if (!absl::SimpleAtoi(text, &v) || v < 0 || v > 100) {
      Error(p, absl::StrCat("must be a whole percentage 0-100, got \"", *s, "\""));
      return std::nullopt;
    }
    return v;
  }

  std::optional<bool> Bool(const YAML::Node& map, std::string_view key, const std::string& path) {
    std::optional<std::string> s = String(map, key, path, false);
    if (!s) return std::nullopt;
    if (*s == "true") return true;
    if (*s == "false") return false;
    Error(Child(path, key), absl::StrCat("must be true or false, got \"", *s, "\""));
    return std::nullopt;
  }

  // A quantity parsed by `parse`, bounded by [0, max]; `what` names the unit for messages.
  std::optional<int64_t> Quantity(const YAML::Node& map, std::string_view key,
                                  const std::string& path,
                                  absl::StatusOr<int64_t> (*parse)(std::string_view), int64_t max,
                                  bool required = false) {
    std::optional<std::string> s = String(map, key, path, required);
    if (!s) return std::nullopt;
    return CheckQuantity(parse(*s), *s, Child(path, key), max);
  }

  // Quantity for CODECO's optional string fields, where "" means "not set".
  std::optional<int64_t> OptQuantity(const YAML::Node& map, std::string_view key,
                                     const std::string& path,
                                     absl::StatusOr<int64_t> (*parse)(std::string_view),
                                     int64_t max) {
    std::optional<std::string> s = String(map, key, path, false);
    if (!s || s->empty()) return std::nullopt;
    return CheckQuantity(parse(*s), *s, Child(path, key), max);
  }

  // One of CODECO's enumeration values, spelt exactly as its CRD does; ""
  // (legal in CODECO) and absent are both "not set" (nullopt). `also`, when
  // given, admits further values (with `also_what` naming them in the error).
  std::optional<std::string> Enum(const YAML::Node& map, std::string_view key,
                                  const std::string& path,
                                  std::initializer_list<std::string_view> values,
                                  bool (*also)(std::string_view) = nullptr,
                                  std::string_view also_what = "") {
    std::optional<std::string> s = String(map, key, path, false);
    if (!s || s->empty()) return std::nullopt;
    if (std::find(values.begin(), values.end(), *s) != values.end()) return s;
    if (also != nullptr && also(*s)) return s;
    std::string list;
    size_t i = 0;
    for (std::string_view v : values) {
      absl::StrAppend(&list, i == 0 ? "" : (i + 1 == values.size() && also == nullptr) ? " or " : ", ",
                      std::string(v));
      ++i;
    }
    if (also != nullptr) absl::StrAppend(&list, " or ", std::string(also_what));
    Error(Child(path, key), absl::StrCat("must be ", list, ", got \"", *s, "\""));
    return std::nullopt;
  }

  std::optional<int64_t> CheckQuantity(const absl::StatusOr<int64_t>& v, const std::string& text,
                                       const std::string& p, int64_t max) {
    if (!v.ok()) {
      Error(p, std::string(v.status().message()));
      return std::nullopt;
    }
    if (*v > max) {
      Error(p, absl::StrCat("\"", text, "\" is beyond any sensible value"));
      return std::nullopt;
    }
    return *v;
  }

  // A list of strings; a single comma-separated string is accepted when `allow_csv`.
  std::optional<std::vector<std::string>> StringList(const YAML::Node& map, std::string_view key,
                                                     const std::string& path, bool allow_csv) {
    std::optional<YAML::Node> node = Field(map, key);
    if (!node) return std::nullopt;
    std::string p = Child(path, key);
    std::vector<std::string> out;
    if (node->IsScalar() && allow_csv) {
      for (absl::string_view part : absl::StrSplit(node->Scalar(), ',', absl::SkipWhitespace())) {
        out.emplace_back(absl::StripAsciiWhitespace(part));
      }
      return out;
    }
    if (!IsSeq(*node, p)) return std::nullopt;
    for (size_t i = 0; i < node->size(); ++i) {
      const YAML::Node item = (*node)[i];
      if (!item.IsScalar() || item.Scalar().empty()) {
        Error(Index(p, i), "must be a non-empty string");
        continue;
      }
      out.push_back(item.Scalar());
    }
    return out;
  }

  // A mapping of strings to strings (labels, nodeSelector).
  std::map<std::string, std::string> StringMap(const YAML::Node& map, std::string_view key,
                                               const std::string& path) {
    std::map<std::string, std::string> out;
    std::optional<YAML::Node> node = Field(map, key);
    if (!node) return out;
    std::string p = Child(path, key);
    if (!IsMap(*node, p)) return out;
    for (const auto& kv : *node) {
      if (!kv.first.IsScalar() || kv.first.Scalar().empty()) {
        Error(p, "keys must be non-empty strings");
        continue;
      }
      if (!kv.second.IsScalar()) {
        Error(Child(p, kv.first.Scalar()), "must be a string");
        continue;
      }
      out[kv.first.Scalar()] = kv.second.Scalar();
    }
    return out;
  }

 private:
  FieldErrors& errors_;
  std::vector<std::string> warnings_;
};

// ---------------------------------------------------------------------------
// Pieces shared by the document forms.

// Reads a Kubernetes resource list (requests or limits) into `out`.
void ReadResources(Reader& r, const YAML::Node& map, const std::string& path,
                   common::v1::ResourceQuantities& out) {
  if (!r.IsMap(map, path)) return;
  r.KnownKeys(map, path, {"cpu", "memory", "nvidia.com/gpu", "ephemeral-storage"});
  if (auto v = r.Quantity(map, "cpu", path, &ParseCpuMillicores, kMaxCpuMillicores)) {
    out.set_cpu_millicores(*v);
  }
  if (auto v = r.Quantity(map, "memory", path, &ParseBytes, kMaxBytes)) out.set_memory_bytes(*v);
  if (auto v = r.Int(map, "nvidia.com/gpu", path, 0, kMaxGpu)) out.set_gpu(*v);
  if (auto v = r.Quantity(map, "ephemeral-storage", path, &ParseBytes, kMaxBytes)) {
    out.set_ephemeral_storage_bytes(*v);
    if (absl::EndsWith(path, "requests")) {
      r.NotActedOn(Child(path, "ephemeral-storage"), "placement does not count storage");
    }
  }
}

// Adds `add` (one container's) to `sum` (the pod's); a sum past int64 is an
// error on `path` (the containers' resources of that kind) and leaves `sum` as it was.
void AddResources(Reader& r, const std::string& path, const common::v1::ResourceQuantities& add,
                  common::v1::ResourceQuantities& sum) {
  int64_t cpu = 0, memory = 0, gpu = 0, storage = 0;
  bool overflow = false;
  if (__builtin_add_overflow(sum.cpu_millicores(), add.cpu_millicores(), &cpu)) {
    r.Error(Child(path, "cpu"), "the containers' sum is past the largest value");
    overflow = true;
  }
  if (__builtin_add_overflow(sum.memory_bytes(), add.memory_bytes(), &memory)) {
    r.Error(Child(path, "memory"), "the containers' sum is past the largest value");
    overflow = true;
  }
  if (__builtin_add_overflow(sum.gpu(), add.gpu(), &gpu)) {
    r.Error(Child(path, "nvidia.com/gpu"), "the containers' sum is past the largest value");
    overflow = true;
  }
  if (__builtin_add_overflow(sum.ephemeral_storage_bytes(), add.ephemeral_storage_bytes(),
                             &storage)) {
    r.Error(Child(path, "ephemeral-storage"), "the containers' sum is past the largest value");
    overflow = true;
  }
  if (overflow) return;
  sum.set_cpu_millicores(cpu);
  sum.set_memory_bytes(memory);
  sum.set_gpu(gpu);
  sum.set_ephemeral_storage_bytes(storage);
}

// Reads a Kubernetes PodSpec into `service`: image, command, args and env of
// the first container, ports of all, requests and limits summed over all.
void ReadPodSpec(Reader& r, const YAML::Node& pod, const std::string& path, ServiceSpec& service) {
  if (!r.IsMap(pod, path)) return;
  r.NotActedOnUnknown(pod, path, {"containers", "restartPolicy"},
                      "of a pod spec only containers and restartPolicy are read");
  std::string cpath = Child(path, "containers");
  std::optional<YAML::Node> containers = Reader::Field(pod, "containers");
  if (!containers) {
    r.Error(cpath, "required");
    return;
  }
  if (!r.IsSeq(*containers, cpath)) return;
  if (containers->size() == 0) {
    r.Error(cpath, "at least one container is required");
    return;
  }
  std::set<std::string> container_names;
  std::set<int64_t> port_numbers;
  for (size_t i = 0; i < containers->size(); ++i) {
    const YAML::Node c = (*containers)[i];
    std::string p = Index(cpath, i);
    if (!r.IsMap(c, p)) continue;
    r.NotActedOnUnknown(c, p, {"name", "image", "command", "args", "env", "ports", "resources"},
                        "of a container only name, image, command, args, env, ports and "
                        "resources are read");
    if (i > 0) {
      for (std::string_view key : {"image", "command", "args", "env"}) {
        r.NotActedOnIfSet(c, key, p,
                          "a service runs as one container: the first one's image, command, "
                          "args and env; later containers add their ports and resources");
      }
    }
    if (auto name = r.DnsLabel(c, "name", p, true)) {
      if (!container_names.insert(*name).second) {
        r.Error(Child(p, "name"), absl::StrCat("duplicate container name \"", *name, "\""));
      }
    }
    std::optional<std::string> image = r.String(c, "image", p, true);
    if (image && image->find_first_of(" \t\n") != std::string::npos) {
      r.Error(Child(p, "image"), "must not contain whitespace");
    }
    if (i == 0 && image) service.set_image(*image);
    if (i == 0) {
      if (auto cmd = r.StringList(c, "command", p, false)) {
        for (auto& s : *cmd) service.add_command(s);
      }
      if (auto args = r.StringList(c, "args", p, false)) {
        for (auto& s : *args) service.add_args(s);
      }
      if (auto env = Reader::Field(c, "env")) {
        std::string ep = Child(p, "env");
        if (r.IsSeq(*env, ep)) {
          for (size_t e = 0; e < env->size(); ++e) {
            const YAML::Node var = (*env)[e];
            std::string vp = Index(ep, e);
            if (!r.IsMap(var, vp)) continue;
            auto name = r.String(var, "name", vp, true);
            auto value = r.String(var, "value", vp, false);
            if (name) (*service.mutable_env())[*name] = value.value_or("");
          }
        }
      }
    }
    if (auto ports = Reader::Field(c, "ports")) {
      std::string pp = Child(p, "ports");
      if (r.IsSeq(*ports, pp)) {
        for (size_t k = 0; k < ports->size(); ++k) {
          const YAML::Node port = (*ports)[k];
          std::string kp = Index(pp, k);
          if (!r.IsMap(port, kp)) continue;
          auto number = r.Int(port, "containerPort", kp, 1, 65535, true);
          auto name = r.String(port, "name", kp, false);
          auto protocol = r.String(port, "protocol", kp, false);
          if (protocol && *protocol != "TCP" && *protocol != "UDP" && *protocol != "SCTP") {
            r.Error(Child(kp, "protocol"), "must be TCP, UDP or SCTP");
          }
          if (number) {
            if (!port_numbers.insert(*number).second) {
              r.Error(Child(kp, "containerPort"), absl::StrCat("port ", *number, " listed twice"));
              continue;
            }
            v1::ContainerPort* out = service.add_ports();
            out->set_port(static_cast<int32_t>(*number));
            out->set_name(name.value_or(""));
            out->set_protocol(protocol.value_or("TCP"));
          }
        }
      }
    }
    if (auto resources = Reader::Field(c, "resources")) {
      std::string rp = Child(p, "resources");
      if (r.IsMap(*resources, rp)) {
        common::v1::ResourceQuantities requests, limits;
        if (auto req = Reader::Field(*resources, "requests")) {
          ReadResources(r, *req, Child(rp, "requests"), requests);
        }
        if (auto lim = Reader::Field(*resources, "limits")) {
          ReadResources(r, *lim, Child(rp, "limits"), limits);
          // Kubernetes defaults requests to limits when only limits are given.
          if (!Reader::Field(*resources, "requests")) requests = limits;
        }
        std::string lp = Child(rp, "limits");
        if (limits.cpu_millicores() > 0 && limits.cpu_millicores() < requests.cpu_millicores()) {
          r.Error(Child(lp, "cpu"), "must not be less than requests.cpu");
        }
        if (limits.memory_bytes() > 0 && limits.memory_bytes() < requests.memory_bytes()) {
          r.Error(Child(lp, "memory"), "must not be less than requests.memory");
        }
        AddResources(r, Child(rp, "requests"), requests, *service.mutable_requests());
        AddResources(r, Child(rp, "limits"), limits, *service.mutable_limits());
      }
    }
  }
}

// "cluster-affinity" and friends (mck8s spelling) or the enum's own suffix.
std::optional<v1::PlacementPolicy> ParsePlacementPolicy(std::string text) {
  text = absl::AsciiStrToLower(text);
  std::replace(text.begin(), text.end(), '_', '-');
  if (text == "cluster-affinity") return v1::PLACEMENT_POLICY_CLUSTER_AFFINITY;
  if (text == "worst-fit") return v1::PLACEMENT_POLICY_WORST_FIT;
  if (text == "best-fit") return v1::PLACEMENT_POLICY_BEST_FIT;
  if (text == "traffic-aware") return v1::PLACEMENT_POLICY_TRAFFIC_AWARE;
  return std::nullopt;
}

// mck8s bursting and substitution policies: only nearest-first exists.
void CheckNearestFirst(Reader& r, const YAML::Node& map, std::string_view key,
                       const std::string& path) {
  if (auto s = r.String(map, key, path, false); s && *s != "nearest-first") {
    r.Error(Child(path, key), absl::StrCat("must be nearest-first, got \"", *s, "\""));
  }
}

void ReadPlacement(Reader& r, const YAML::Node& map, const std::string& path,
                   v1::Placement& placement) {
  if (!r.IsMap(map, path)) return;
  r.KnownKeys(map, path,
              {"policy", "numberOfLocations", "bursting", "substitution", "preferredClusters"});
  if (auto s = r.String(map, "policy", path, false)) {
    if (auto policy = ParsePlacementPolicy(*s)) {
      placement.set_policy(*policy);
    } else {
      r.Error(Child(path, "policy"),
              "must be cluster-affinity, worst-fit, best-fit or traffic-aware");
    }
  }
  if (auto n = r.Int(map, "numberOfLocations", path, 0, kMaxLocations)) {
    placement.set_number_of_locations(static_cast<int32_t>(*n));
  }
  if (auto b = r.Bool(map, "bursting", path)) placement.set_bursting(*b);
  if (auto b = r.Bool(map, "substitution", path)) placement.set_substitution(*b);
  if (placement.number_of_locations() == 0) {
    r.NotActedOnIfSet(map, "bursting", path,
                      "bursting goes beyond numberOfLocations clusters, and none is set");
  }
  r.NotActedOnIfSet(map, "substitution", path, "SWM's profiles do not switch substitution");
  if (auto list = r.StringList(map, "preferredClusters", path, false)) {
    for (size_t i = 0; i < list->size(); ++i) {
      if (!IsDnsLabel((*list)[i])) {
        r.Error(Index(Child(path, "preferredClusters"), i), "must be a cluster name (DNS label)");
      }
      placement.add_preferred_clusters((*list)[i]);
    }
  }
  if (placement.policy() == v1::PLACEMENT_POLICY_CLUSTER_AFFINITY &&
      placement.preferred_clusters().empty()) {
    r.Error(Child(path, "preferredClusters"), "required by the cluster-affinity policy");
  }
}

void ReadIntents(Reader& r, const YAML::Node& map, const std::string& path, v1::Intents& intents) {
  if (!r.IsMap(map, path)) return;
  r.KnownKeys(map, path,
              {"allowedRegions", "allowedCountries", "origin", "maxLatencyToOrigin", "deadline",
               "duration"});
  if (auto list = r.StringList(map, "allowedRegions", path, false)) {
    for (auto& s : *list) intents.add_allowed_regions(s);
  }
  if (auto list = r.StringList(map, "allowedCountries", path, false)) {
    for (size_t i = 0; i < list->size(); ++i) {
      if (!IsCountryCode((*list)[i])) {
        r.Error(Index(Child(path, "allowedCountries"), i),
                absl::StrCat("\"", (*list)[i], "\" is not an ISO 3166 alpha-2 code such as DE"));
      }
      intents.add_allowed_countries((*list)[i]);
    }
  }
  if (auto s = r.String(map, "origin", path, false)) intents.set_origin(*s);
  if (auto v = r.Quantity(map, "maxLatencyToOrigin", path, &ParseDurationNanos, kMaxDelayNs)) {
    intents.set_max_latency_to_origin_ns(*v);
    if (intents.origin().empty()) {
      r.Error(Child(path, "origin"), "required when maxLatencyToOrigin is set");
    }
  }
  if (auto v = r.Quantity(map, "duration", path, &ParseDurationNanos, kMaxRunNs)) {
    intents.set_expected_duration_ns(*v);
    if (*v <= 0) r.Error(Child(path, "duration"), "must be positive");
  }
  // With a duration, the carbon-aware admission policy schedules the run by
  // the deadline (and says so when it cannot); without one nothing reads it.
  if (!map["duration"].IsDefined()) {
    r.NotActedOnIfSet(map, "deadline", path,
                      "only a delay-tolerant application, with intents.duration, is scheduled "
                      "by its deadline");
  }
  if (auto s = r.String(map, "deadline", path, false)) {
    absl::Time t;
    std::string err;
    if (!absl::ParseTime(absl::RFC3339_full, *s, &t, &err)) {
      r.Error(Child(path, "deadline"),
              absl::StrCat("must be an RFC 3339 time such as 2026-12-01T08:00:00Z: ", err));
    } else {
      *intents.mutable_deadline() = ToProtoTimestamp(t);
    }
  }
}

void ReadAutoscaling(Reader& r, const YAML::Node& map, const std::string& path,
                     v1::Autoscaling& out) {
  if (!r.IsMap(map, path)) return;
  r.KnownKeys(
      map, path,
      {"minReplicas", "maxReplicas", "targetCPUUtilizationPercentage", "scaleDownCooldown"});
  auto min = r.Int(map, "minReplicas", path, 1, kMaxReplicas, true);
  auto max = r.Int(map, "maxReplicas", path, 1, kMaxReplicas, true);
  if (min && max && *max < *min) r.Error(Child(path, "maxReplicas"), "less than minReplicas");
  out.set_min_replicas(static_cast<int32_t>(min.value_or(0)));
  out.set_max_replicas(static_cast<int32_t>(max.value_or(0)));
  if (auto t = r.Int(map, "targetCPUUtilizationPercentage", path, 1, 100)) {
    out.set_target_cpu_utilization_percent(static_cast<int32_t>(*t));
  }
  if (auto d = r.Quantity(map, "scaleDownCooldown", path, &ParseDurationNanos, kMaxDelayNs)) {
    out.set_scale_down_cooldown_ns(*d);
  }
}

// A job's counts, from `map` at `path` (a CodecoApp service's `job`, or an
// mck8s MultiClusterJob's spec, whose other keys the caller checks), with
// the key names of a Kubernetes Job. The service runs JobReplicas pods at once.
void ReadJobCounts(Reader& r, const YAML::Node& map, const std::string& path,
                   ServiceSpec& service) {
  v1::Job& job = *service.mutable_job();
  auto completions = r.Int(map, "completions", path, 1, kMaxReplicas);
  job.set_completions(static_cast<int32_t>(completions.value_or(1)));
  if (auto p = r.Int(map, "parallelism", path, 1, kMaxReplicas)) {
    job.set_parallelism(static_cast<int32_t>(*p));
  }
  if (auto b = r.Int(map, "backoffLimit", path, 0, kMaxReplicas)) {
    job.set_backoff_limit(static_cast<int32_t>(*b));
  }
  service.set_replicas(JobReplicas(job));
}

// A CodecoApp service's `job` block.
void ReadJob(Reader& r, const YAML::Node& map, const std::string& path, ServiceSpec& service) {
  if (!r.IsMap(map, path)) return;
  r.KnownKeys(map, path, {"completions", "parallelism", "backoffLimit"});
  ReadJobCounts(r, map, path, service);
}

// The pod spec's restartPolicy at `path`, read once the service is known to
// be a job or not: a job's pods run to completion (Never; OnFailure runs as
// Never: a failed pod is replaced, not restarted), a service's always restart.
void ReadRestartPolicy(Reader& r, const YAML::Node& pod, const std::string& path,
                       const ServiceSpec& service) {
  if (!pod.IsMap()) return;
  std::optional<std::string> policy = r.String(pod, "restartPolicy", path, false);
  if (!policy) return;
  const std::string field = Child(path, "restartPolicy");
  if (*policy != "Always" && *policy != "OnFailure" && *policy != "Never") {
    r.Error(field, absl::StrCat("must be Always, OnFailure or Never, got \"", *policy, "\""));
  } else if (service.has_job() && *policy == "Always") {
    r.Error(field, "a job's pods run to completion: Never or OnFailure");
  } else if (service.has_job() && *policy == "OnFailure") {
    r.NotActedOn(field,
                 "a job's pods are not restarted in place: a failed pod is replaced "
                 "by a new one, up to backoffLimit");
  } else if (!service.has_job() && *policy != "Always") {
    r.NotActedOn(field,
                 "a service's pods always restart; a job (job block or "
                 "MultiClusterJob) runs pods to completion");
  }
}

// CODECO's nwbandwidth is in Mbit/s when written as a bare number.
absl::StatusOr<int64_t> ParseNwBandwidth(std::string_view text) {
  if (IsBareNumber(text)) return ParseBandwidthBps(std::string(text) + "M");
  return ParseBandwidthBps(text);
}

// CODECO's nwlatency is in milliseconds when written as a bare number.
absl::StatusOr<int64_t> ParseNwLatency(std::string_view text) {
  if (IsBareNumber(text)) return ParseDurationNanos(std::string(text) + "ms");
  return ParseDurationNanos(text);
}

// CODECO's qosClass values, exactly as its CRD enumerates them.
std::optional<v1::QosClass> ParseQosClass(std::string_view text) {
  if (text == "Gold") return v1::QOS_CLASS_GOLD;
  if (text == "Silver") return v1::QOS_CLASS_SILVER;
  if (text == "BestEffort") return v1::QOS_CLASS_BEST_EFFORT;
  return std::nullopt;
}

// CAM files spell profiles in any case, and "energy" for greenness.
std::optional<common::v1::PerformanceProfile> ParseProfile(std::string text) {
  text = absl::AsciiStrToLower(text);
  if (text == "energy") return common::v1::PERFORMANCE_PROFILE_GREENNESS;
  return ParsePerformanceProfile(text);
}

// A regulation name an extended (codeco.io/v1) complianceClass may carry
// besides CODECO's scale, e.g. "gdpr": lower-case letters, digits and '-'.
bool IsRegulationName(std::string_view s) { return IsDnsLabel(s); }

// A channel as read, with the paths needed for cross-reference checks.
struct PendingChannel {
  Channel* channel;
  std::string name_path;    // path of channelName
  std::string target_path;  // path of otherService.serviceName
  std::string port_path;    // path of otherService.port
  std::string app_path;     // path of otherService.appName
  std::string app_name;
  bool named = false;       // channelName was given
};

void ReadChannel(Reader& r, const YAML::Node& ch, const std::string& p, const std::string& from,
                 ServiceSpec& service, std::vector<PendingChannel>& pending) {
  if (!r.IsMap(ch, p)) return;
  r.KnownKeys(ch, p, {"channelName", "otherService", "serviceClass", "advancedChannelSettings"});
  Channel* channel = service.add_channels();
  channel->set_from_service(from);
  PendingChannel pc{channel, Child(p, "channelName"), "", "", "", "", false};
  // CODECO's channelName is optional ("Used as the name for the channel
  // resource"); ResolveChannels names an unnamed channel after its target.
  if (auto name = r.String(ch, "channelName", p, false); name && !name->empty()) {
    if (IsDnsLabel(*name)) {
      channel->set_name(*name);
      pc.named = true;
    } else {
      r.Error(pc.name_path, absl::StrCat("\"", *name,
                                         "\" is not a DNS label (1-63 of a-z, 0-9 and '-', "
                                         "starting and ending alphanumeric)"));
    }
  }
  std::string op = Child(p, "otherService");
  std::optional<YAML::Node> other = Reader::Field(ch, "otherService");
  pc.target_path = Child(op, "serviceName");
  pc.port_path = Child(op, "port");
  pc.app_path = Child(op, "appName");
  if (!other) {
    r.Error(op, "required");
  } else if (r.IsMap(*other, op)) {
    r.KnownKeys(*other, op, {"appName", "serviceName", "port"});
    if (auto app = r.String(*other, "appName", op, false)) pc.app_name = *app;
    if (auto target = r.DnsLabel(*other, "serviceName", op, true)) channel->set_to_service(*target);
    // CODECO's port is optional; 0 means "not given".
    if (auto port = r.Int(*other, "port", op, 1, 65535, false)) {
      channel->set_to_port(static_cast<int32_t>(*port));
    }
    pending.push_back(pc);
  }
  channel->set_service_class(common::v1::SERVICE_CLASS_BESTEFFORT);
  if (auto cls = r.String(ch, "serviceClass", p, false); cls && !cls->empty()) {
    if (*cls == "BESTEFFORT") {
      channel->set_service_class(common::v1::SERVICE_CLASS_BESTEFFORT);
    } else if (*cls == "ASSURED") {
      channel->set_service_class(common::v1::SERVICE_CLASS_ASSURED);
    } else {
      r.Error(Child(p, "serviceClass"),
              absl::StrCat("must be BESTEFFORT or ASSURED, got \"", *cls, "\""));
    }
  }
  const std::string ap = Child(p, "advancedChannelSettings");
  if (auto adv = Reader::Field(ch, "advancedChannelSettings")) {
    if (r.IsMap(*adv, ap)) {
      // "bandwidth" is not a field of CODECO's CRD, yet CODECO's own
      // experiment scripts write it; CODECO's API server drops it, and so do we.
      r.KnownKeys(*adv, ap,
                  {"minBandwidth", "maxDelay", "frameSize", "sendInterval", "bandwidth",
                   "Bandwidth"});
      for (std::string_view key : {"bandwidth", "Bandwidth"}) {
        if ((*adv)[std::string(key)].IsDefined()) {
          r.Warn(Child(ap, key),
                 "not a field of CODECO's CodecoApp: its API server drops it, so it asks for "
                 "nothing; ignored (write minBandwidth to ask for bandwidth)");
        }
      }
      if (auto v = r.OptQuantity(*adv, "minBandwidth", ap, &ParseBandwidthBps, kMaxBandwidthBps)) {
        channel->set_min_bandwidth_bps(*v);
      }
      if (auto v = r.OptQuantity(*adv, "maxDelay", ap, &ParseDurationNanos, kMaxChannelDelayNs)) {
        if (*v == 0) {
          r.Error(Child(ap, "maxDelay"), "must be greater than zero");
        } else {
          channel->set_max_delay_ns(*v);
        }
      }
      if (auto v = r.OptQuantity(*adv, "frameSize", ap, &ParseBytes, kMaxFrameBytes)) {
        channel->set_frame_size_bytes(*v);
      }
      if (auto v = r.OptQuantity(*adv, "sendInterval", ap, &ParseDurationNanos, INT64_MAX)) {
        if (*v > kMaxSendIntervalNs) {
          r.Warn(Child(ap, "sendInterval"),
                 absl::StrCat("capped at 10ms, as CODECO caps it (", *v / 1'000'000,
                              "ms was asked)"));
          channel->set_send_interval_ns(kMaxSendIntervalNs);
        } else {
          channel->set_send_interval_ns(*v);
        }
      }
      // CODECO: "If you specify only the bandwidth but leave framesize and
      // sendinterval blank, the system will request a default framesize of 500 byte".
      if (channel->min_bandwidth_bps() > 0 && channel->frame_size_bytes() == 0 &&
          channel->send_interval_ns() == 0) {
        channel->set_frame_size_bytes(kDefaultFrameBytes);
      }
      if ((channel->frame_size_bytes() > 0) != (channel->send_interval_ns() > 0) &&
          channel->min_bandwidth_bps() == 0) {
        r.Warn(ap, "frameSize and sendInterval ask for bandwidth only together; with one of "
                   "them alone (and no minBandwidth) the channel reserves no bandwidth");
      }
    }
  }
  if (channel->service_class() == common::v1::SERVICE_CLASS_ASSURED &&
      channel->min_bandwidth_bps() == 0 &&
      !(channel->frame_size_bytes() > 0 && channel->send_interval_ns() > 0)) {
    r.Warn(Child(p, "serviceClass"),
           "ASSURED with no minBandwidth (nor frameSize and sendInterval) reserves no "
           "bandwidth; only maxDelay is assured");
  }
}

// Names unnamed channels, checks channel names are unique per sending
// service (as in CODECO, where channelName names the channel of its service),
// and checks targets declared in this document: ports, and otherService.appName.
// A target this document does not declare is left for the application's other
// CodecoApps (see MergeCodecoApp); ParseCam does not refuse it.
void ResolveChannels(Reader& r, const ApplicationSpec& spec,
                     const std::vector<PendingChannel>& pending) {
  std::unordered_map<std::string, const ServiceSpec*> by_name;
  for (const ServiceSpec& s : spec.services()) by_name.emplace(s.name(), &s);
  std::set<std::string> names;  // "<from>/<name>"
  for (const PendingChannel& pc : pending) {
    if (pc.named && !names.insert(absl::StrCat(pc.channel->from_service(), "/",
                                               pc.channel->name())).second) {
      r.Error(pc.name_path, absl::StrCat("duplicate channel name \"", pc.channel->name(),
                                         "\" in service \"", pc.channel->from_service(), "\""));
    }
  }
  for (const PendingChannel& pc : pending) {
    Channel& ch = *pc.channel;
    if (!pc.named && !ch.to_service().empty()) {
      // Named after the target, made unique within the sending service.
      std::string name = ch.to_service();
      for (int k = 2; !names.insert(absl::StrCat(ch.from_service(), "/", name)).second; ++k) {
        std::string suffix = absl::StrCat("-", k);
        name = absl::StrCat(ch.to_service().substr(0, 63 - suffix.size()), suffix);
      }
      ch.set_name(name);
    }
    if (!pc.app_name.empty() && pc.app_name != spec.app_name()) {
      r.Warn(pc.app_path,
             absl::StrCat("names application \"", pc.app_name, "\", not this one (\"",
                          spec.app_name(), "\"); ACM joins channels within one application, so "
                          "the channel leads to service \"", ch.to_service(), "\" of \"",
                          spec.app_name(), "\""));
    }
    if (ch.to_service().empty()) continue;
    auto it = by_name.find(ch.to_service());
    if (it == by_name.end()) continue;  // another CodecoApp's service, or pending
    const ServiceSpec& target = *it->second;
    if (ch.to_port() != 0 && target.ports_size() > 0 &&
        std::none_of(target.ports().begin(), target.ports().end(),
                     [&](const v1::ContainerPort& p) { return p.port() == ch.to_port(); })) {
      r.Warn(pc.port_path,
             absl::StrCat("service \"", target.name(), "\" does not expose port ", ch.to_port(),
                          "; the channel is kept as written (CODECO does not check it either)"));
    }
  }
}

void ReadMetadata(Reader& r, const YAML::Node& root, ParsedCam& out, std::string* name) {
  std::optional<YAML::Node> meta = Reader::Field(root, "metadata");
  if (!meta) {
    r.Error("metadata", "required");
    return;
  }
  if (!r.IsMap(*meta, "metadata")) return;
  if (auto n = r.DnsLabel(*meta, "name", "metadata", true)) *name = *n;
  out.labels = r.StringMap(*meta, "labels", "metadata");
  out.annotations = r.StringMap(*meta, "annotations", "metadata");
  r.NotActedOnIfSet(*meta, "annotations", "metadata",
                    "kept in the stored CAM only; no component reads them");
  r.NotActedOnIfSet(*meta, "namespace", "metadata",
                    "ACM has one namespace: applications are told apart by spec.appName");
  // What `kubectl get -o yaml` adds; documents copied from a cluster carry it.
  for (const auto& kv : *meta) {
    if (!kv.first.IsScalar()) continue;
    const std::string& key = kv.first.Scalar();
    if (key == "name" || key == "labels" || key == "annotations" || key == "namespace") continue;
    r.NotActedOn(Child("metadata", key), "set by a Kubernetes API server, not by the user");
  }
}

// ---------------------------------------------------------------------------
// CodecoApp (CODECO's form and ours).

void ParseCodecoApp(Reader& r, const YAML::Node& root, bool extended, const CamLimits& limits,
                    ParsedCam& out) {
  const std::string ext_hint = " (extensions need apiVersion codeco.io/v1)";
  std::string meta_name;
  ReadMetadata(r, root, out, &meta_name);
  std::optional<YAML::Node> spec_node = Reader::Field(root, "spec");
  if (!spec_node) {
    r.Error("spec", "required");
    return;
  }
  const YAML::Node& s = *spec_node;
  if (!r.IsMap(s, "spec")) return;
  ApplicationSpec& spec = out.spec;
  if (extended) {
    r.KnownKeys(s, "spec",
                {"appName", "qosClass", "securityClass", "complianceClass", "appEnergyLimit",
                 "appFailureTolerance", "performanceProfile", "codecoapp-msspec",
                 "customProfileWeights", "intents", "placement"});
  } else {
    r.KnownKeys(s, "spec",
                {"appName", "qosClass", "securityClass", "complianceClass", "appEnergyLimit",
                 "appFailureTolerance", "performanceProfile", "codecoapp-msspec"},
                ext_hint);
  }
  // The application this CodecoApp belongs to. Several CodecoApps may share
  // one appName (CODECO's experiments apply a backend and N frontends that
  // way); metadata.name names the CodecoApp itself. appName is optional in
  // CODECO's CRD: without one, the CodecoApp is an application of its own.
  out.codeco_app = meta_name;
  if (auto name = r.String(s, "appName", "spec", false); name && !name->empty()) {
    if (IsDnsLabel(*name)) {
      spec.set_app_name(*name);
    } else {
      r.Error("spec.appName", absl::StrCat("\"", *name,
                                           "\" is not a DNS label (1-63 of a-z, 0-9 and '-', "
                                           "starting and ending alphanumeric)"));
    }
  } else {
    spec.set_app_name(meta_name);
  }
  if (auto q = r.Enum(s, "qosClass", "spec", {"Gold", "Silver", "BestEffort"})) {
    spec.set_qos_class(*ParseQosClass(*q));
    r.NotActedOn("spec.qosClass", "no component reads the QoS class");
  }
  if (auto v = r.Enum(s, "securityClass", "spec", {"High", "Good", "Medium", "Low", "None"})) {
    spec.set_security_class(*v);
  }
  if (extended) {
    if (auto v = r.Enum(s, "complianceClass", "spec", {"High", "Medium", "Low"},
                        &IsRegulationName, "a regulation name such as gdpr")) {
      spec.set_compliance_class(*v);
    }
  } else if (auto v = r.Enum(s, "complianceClass", "spec", {"High", "Medium", "Low"})) {
    spec.set_compliance_class(*v);
  }
  if (auto v = r.Percent(s, "appEnergyLimit", "spec")) {
    spec.set_app_energy_limit_percent(static_cast<int32_t>(*v));
    r.NotActedOn("spec.appEnergyLimit", "placement does not bound energy");
  }
  if (auto v = r.Enum(s, "appFailureTolerance", "spec", {"High", "Medium", "Low"})) {
    spec.set_app_failure_tolerance(*v);
    r.NotActedOn("spec.appFailureTolerance", "no component reads it");
  }
  if (auto v = r.String(s, "performanceProfile", "spec", false); v && !v->empty()) {
    if (auto profile = ParseProfile(*v)) {
      spec.set_performance_profile(*profile);
    } else {
      r.Error(
          "spec.performanceProfile",
          absl::StrCat("must be latency, greenness, resilience, cost or custom, got \"", *v, "\""));
    }
  }
  if (extended) {
    if (auto weights = Reader::Field(s, "customProfileWeights")) {
      std::string wp = "spec.customProfileWeights";
      if (spec.performance_profile() != common::v1::PERFORMANCE_PROFILE_CUSTOM) {
        r.Error(wp, "only allowed with performanceProfile: custom");
      } else if (r.IsMap(*weights, wp)) {
        r.KnownKeys(*weights, wp, {"latency", "greenness", "resilience", "cost"});
        for (const auto& kv : *weights) {
          if (!kv.first.IsScalar()) continue;
          const std::string& key = kv.first.Scalar();
          double w = 0;
          if (!kv.second.IsScalar() || !absl::SimpleAtod(kv.second.Scalar(), &w) || !(w >= 0) ||
              w > 1e6) {
            r.Error(Child(wp, key), "must be a number between 0 and 1000000");
            continue;
          }
          (*spec.mutable_custom_profile_weights())[key] = w;
        }
      }
    }
    if (auto intents = Reader::Field(s, "intents")) {
      ReadIntents(r, *intents, "spec.intents", *spec.mutable_intents());
    }
    if (auto placement = Reader::Field(s, "placement")) {
      ReadPlacement(r, *placement, "spec.placement", *spec.mutable_placement());
    }
  }

  const std::string mpath = "spec.codecoapp-msspec";
  std::optional<YAML::Node> ms = Reader::Field(s, "codecoapp-msspec");
  if (!ms) {
    r.Error(mpath, "required");
    return;
  }
  if (!r.IsSeq(*ms, mpath)) return;
  if (ms->size() == 0) {
    r.Error(mpath, "at least one service is required");
    return;
  }
  if (static_cast<int>(ms->size()) > limits.max_services) {
    r.Error(mpath, absl::StrCat("more than ", limits.max_services, " services"));
    return;
  }
  std::vector<PendingChannel> pending;
  std::set<std::string> service_names;
  for (size_t i = 0; i < ms->size(); ++i) {
    const YAML::Node m = (*ms)[i];
    std::string p = Index(mpath, i);
    if (!r.IsMap(m, p)) continue;
    if (extended) {
      r.KnownKeys(m, p,
                  {"serviceName", "podspec", "serviceChannels", "nwbandwidth", "nwlatency",
                   "replicas", "requests", "stateful", "availability", "dataLocality",
                   "nodeSelector", "autoscaling", "job"});
    } else {
      r.KnownKeys(m, p, {"serviceName", "podspec", "serviceChannels", "nwbandwidth", "nwlatency"},
                  ext_hint);
    }
    ServiceSpec* service = spec.add_services();
    service->set_replicas(1);
    if (auto name = r.DnsLabel(m, "serviceName", p, true)) {
      service->set_name(*name);
      if (!service_names.insert(*name).second) {
        r.Error(Child(p, "serviceName"), absl::StrCat("duplicate service name \"", *name, "\""));
      }
    }
    std::optional<YAML::Node> pod = Reader::Field(m, "podspec");
    if (!pod) {
      r.Error(Child(p, "podspec"), "required");
    } else {
      ReadPodSpec(r, *pod, Child(p, "podspec"), *service);
    }
    service->set_codeco_app(out.codeco_app);
    if (auto v = r.OptQuantity(m, "nwbandwidth", p, &ParseNwBandwidth, kMaxBandwidthBps)) {
      service->set_network_bandwidth_bps(*v);
      r.NotActedOn(Child(p, "nwbandwidth"),
                   "placement reads bandwidth from the channels' minBandwidth");
    }
    if (auto v = r.OptQuantity(m, "nwlatency", p, &ParseNwLatency, kMaxDelayNs)) {
      service->set_network_latency_ns(*v);
      r.NotActedOn(Child(p, "nwlatency"), "placement reads latency from the channels' maxDelay");
    }
    if (extended) {
      r.NotActedOnIfSet(m, "nodeSelector", p, "SWM does not filter nodes by label");
    }
    if (extended) {
      if (auto v = r.Int(m, "replicas", p, 0, kMaxReplicas)) {
        service->set_replicas(static_cast<int32_t>(*v));
      }
      if (auto req = Reader::Field(m, "requests")) {
        common::v1::ResourceQuantities requests;
        ReadResources(r, *req, Child(p, "requests"), requests);
        if (service->has_requests() && (service->requests().cpu_millicores() != 0 ||
                                        service->requests().memory_bytes() != 0)) {
          r.Error(Child(p, "requests"),
                  "set requests either here or in podspec resources, not both");
        }
        *service->mutable_requests() = requests;
      }
      if (auto v = r.Bool(m, "stateful", p)) service->set_stateful(*v);
      if (auto v = r.Int(m, "availability", p, 0, 100)) {
        service->set_availability_kpi(static_cast<int32_t>(*v));
      }
      if (auto v = r.String(m, "dataLocality", p, false)) service->set_data_locality(*v);
      for (auto& [k, v] : r.StringMap(m, "nodeSelector", p)) {
        (*service->mutable_node_selector())[k] = v;
      }
      if (auto j = Reader::Field(m, "job")) {
        if (Reader::Field(m, "replicas")) {
          r.Error(Child(p, "replicas"),
                  "a job runs job.parallelism pods at once (job.completions without it): set "
                  "those instead");
        }
        if (Reader::Field(m, "autoscaling")) {
          r.Error(Child(p, "autoscaling"), "a job is not autoscaled");
        }
        if (service->stateful()) r.Error(Child(p, "stateful"), "a job cannot be stateful");
        ReadJob(r, *j, Child(p, "job"), *service);
      }
      if (auto a = Reader::Field(m, "autoscaling")) {
        ReadAutoscaling(r, *a, Child(p, "autoscaling"), *service->mutable_autoscaling());
        const v1::Autoscaling& as = service->autoscaling();
        if (as.max_replicas() > 0 &&
            (service->replicas() < as.min_replicas() || service->replicas() > as.max_replicas())) {
          r.Error(Child(p, "replicas"), "must lie within autoscaling minReplicas..maxReplicas");
        }
        if (as.max_replicas() > 0 && service->requests().cpu_millicores() <= 0) {
          r.NotActedOn(Child(p, "autoscaling"),
                       "the autoscaler scales on CPU used over requests.cpu, which is not set");
        }
      }
    }
    if (pod) ReadRestartPolicy(r, *pod, Child(p, "podspec"), *service);
    if (auto chans = Reader::Field(m, "serviceChannels")) {
      std::string cp = Child(p, "serviceChannels");
      if (r.IsSeq(*chans, cp)) {
        if (static_cast<int>(chans->size()) > limits.max_channels_per_service) {
          r.Error(cp, absl::StrCat("more than ", limits.max_channels_per_service, " channels"));
          continue;
        }
        for (size_t k = 0; k < chans->size(); ++k) {
          ReadChannel(r, (*chans)[k], Index(cp, k), service->name(), *service, pending);
        }
      }
    }
  }
  ResolveChannels(r, spec, pending);
}

// ---------------------------------------------------------------------------
// mck8s MultiClusterDeployment, or with `job` a MultiClusterJob (the same
// placement keys, a Kubernetes Job's counts instead of replicas): one
// service named after the document.

void ParseMultiClusterDeployment(Reader& r, const YAML::Node& root, bool job, ParsedCam& out) {
  std::string name;
  ReadMetadata(r, root, out, &name);
  std::optional<YAML::Node> spec_node = Reader::Field(root, "spec");
  if (!spec_node) {
    r.Error("spec", "required");
    return;
  }
  const YAML::Node& s = *spec_node;
  if (!r.IsMap(s, "spec")) return;
  std::vector<std::string_view> keys = {
      "placementPolicy",    "locations",      "numberOfLocations",
      "enableBursting",     "burstingPolicy", "enableSubstitution",
      "substitutionPolicy", "selector",       "template"};
  if (job) {
    keys.insert(keys.end(), {"completions", "parallelism", "backoffLimit"});
  } else {
    keys.push_back("replicas");
  }
  r.KnownKeys(s, "spec", keys);
  ApplicationSpec& spec = out.spec;
  spec.set_app_name(name);
  out.codeco_app = name;
  ServiceSpec* service = spec.add_services();
  service->set_name(name);
  service->set_codeco_app(name);
  service->set_replicas(1);
  v1::Placement& placement = *spec.mutable_placement();
  if (auto v = r.String(s, "placementPolicy", "spec", false)) {
    if (auto policy = ParsePlacementPolicy(*v)) {
      placement.set_policy(*policy);
    } else {
      r.Error("spec.placementPolicy",
              "must be cluster-affinity, worst-fit, best-fit or traffic-aware");
    }
  }
  if (auto list = r.StringList(s, "locations", "spec", true)) {
    for (size_t i = 0; i < list->size(); ++i) {
      if (!IsDnsLabel((*list)[i])) {
        r.Error(Index("spec.locations", i),
                absl::StrCat("\"", (*list)[i], "\" is not a cluster name (DNS label)"));
      }
      placement.add_preferred_clusters((*list)[i]);
    }
    if (placement.policy() == v1::PLACEMENT_POLICY_UNSPECIFIED) {
      placement.set_policy(v1::PLACEMENT_POLICY_CLUSTER_AFFINITY);
    }
  }
  if (placement.policy() == v1::PLACEMENT_POLICY_CLUSTER_AFFINITY &&
      placement.preferred_clusters().empty()) {
    r.Error("spec.locations", "required by the cluster-affinity policy");
  }
  if (auto n = r.Int(s, "numberOfLocations", "spec", 0, kMaxLocations)) {
    placement.set_number_of_locations(static_cast<int32_t>(*n));
  }
  if (auto b = r.Bool(s, "enableBursting", "spec")) placement.set_bursting(*b);
  if (auto b = r.Bool(s, "enableSubstitution", "spec")) placement.set_substitution(*b);
  CheckNearestFirst(r, s, "burstingPolicy", "spec");
  CheckNearestFirst(r, s, "substitutionPolicy", "spec");
  if (placement.number_of_locations() == 0) {
    for (std::string_view key : {"enableBursting", "burstingPolicy"}) {
      r.NotActedOnIfSet(s, key, "spec",
                        "bursting goes beyond numberOfLocations clusters, and none is set");
    }
  }
  for (std::string_view key : {"enableSubstitution", "substitutionPolicy"}) {
    r.NotActedOnIfSet(s, key, "spec", "SWM's mck8s profiles do not switch substitution");
  }
  r.NotActedOnIfSet(s, "selector", "spec", "the pods are labelled by SWM, not selected");
  if (job) {
    ReadJobCounts(r, s, "spec", *service);
  } else if (auto v = r.Int(s, "replicas", "spec", 0, kMaxReplicas)) {
    service->set_replicas(static_cast<int32_t>(*v));
  }
  std::optional<YAML::Node> tmpl = Reader::Field(s, "template");
  if (!tmpl) {
    r.Error("spec.template", "required");
    return;
  }
  if (!r.IsMap(*tmpl, "spec.template")) return;
  if (auto tmeta = Reader::Field(*tmpl, "metadata")) {
    if (r.IsMap(*tmeta, "spec.template.metadata")) {
      for (auto& [k, v] : r.StringMap(*tmeta, "labels", "spec.template.metadata")) {
        out.labels.emplace(k, v);
      }
    }
  }
  std::optional<YAML::Node> pod = Reader::Field(*tmpl, "spec");
  if (!pod) {
    r.Error("spec.template.spec", "required");
    return;
  }
  ReadPodSpec(r, *pod, "spec.template.spec", *service);
  ReadRestartPolicy(r, *pod, "spec.template.spec", *service);
}

}  // namespace

bool IsCountryCode(std::string_view s) {
  return s.size() == 2 && std::isupper(static_cast<unsigned char>(s[0])) &&
         std::isupper(static_cast<unsigned char>(s[1]));
}

bool IsDnsLabel(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) { return alnum(c) || c == '-'; });
}

absl::StatusOr<ParsedCam> ParseCam(std::string_view yaml, const CamLimits& limits) {
  ASSIGN_OR_RETURN(
      YAML::Node root,
      LoadBoundedYaml(yaml, {limits.max_document_bytes, limits.max_depth, limits.max_nodes},
                      "document"));
  if (!root.IsMap()) return InvalidFieldError("document", "must be a mapping");

  FieldErrors errors;
  Reader r(errors);
  ParsedCam out;
  std::optional<std::string> api = r.String(root, "apiVersion", "", true);
  std::optional<std::string> kind = r.String(root, "kind", "", true);
  if (!api || !kind) return errors.ToStatus();
  try {
    if (*api == kCodecoApiVersion || *api == kExtendedApiVersion) {
      if (*kind != "CodecoApp") {
        return InvalidFieldError(
            "kind", absl::StrCat("must be CodecoApp for ", *api, ", got \"", *kind, "\""));
      }
      out.form = *api == kCodecoApiVersion ? CamForm::kCodecoApp : CamForm::kCodecoAppExtended;
      r.KnownKeys(root, "", {"apiVersion", "kind", "metadata", "spec", "status"});
      ParseCodecoApp(r, root, out.form == CamForm::kCodecoAppExtended, limits, out);
    } else if (*api == kMck8sApiVersion) {
      if (*kind != "MultiClusterDeployment" && *kind != "MultiClusterJob") {
        return InvalidFieldError(
            "kind", absl::StrCat("must be MultiClusterDeployment or MultiClusterJob for ", *api,
                                 ", got \"", *kind, "\""));
      }
      out.form = CamForm::kMultiClusterDeployment;
      r.KnownKeys(root, "", {"apiVersion", "kind", "metadata", "spec", "status"});
      ParseMultiClusterDeployment(r, root, *kind == "MultiClusterJob", out);
    } else {
      return InvalidFieldError("apiVersion",
                               absl::StrCat("must be ", std::string(kCodecoApiVersion), ", ",
                                            std::string(kExtendedApiVersion), " or ",
                                            std::string(kMck8sApiVersion), ", got \"", *api, "\""));
    }
  } catch (const YAML::Exception& e) {
    // The walk only reads a tree already built; a throw here is a yaml-cpp
    // corner case, reported rather than crashing on untrusted input.
    errors.Add("document", absl::StrCat("unreadable YAML: ", e.msg));
  }
  if (Reader::Field(root, "status")) out.warnings.push_back("status: ignored; ACM writes it");
  RETURN_IF_ERROR(errors.ToStatus());
  // The caps shared with SWM, on the spec as read (nothing expanded), named
  // by the document's own keys.
  SpecFieldNames names;
  if (out.form == CamForm::kMultiClusterDeployment) {
    names.services = "spec";
    names.service = [](int) { return std::string("spec"); };
  } else {
    names.services = "spec.codecoapp-msspec";
    names.service = [](int i) { return Index("spec.codecoapp-msspec", i); };
    names.channels = "serviceChannels";
  }
  names.autoscaling_max = "autoscaling.maxReplicas";
  RETURN_IF_ERROR(CheckApplicationBounds(out.spec, names).status());
  for (std::string& w : r.warnings()) out.warnings.push_back(std::move(w));
  return out;
}

int32_t JobReplicas(const v1::Job& job) {
  return job.parallelism() > 0 ? std::min(job.parallelism(), job.completions()) : job.completions();
}

absl::Status ValidateApplicationSpec(const ApplicationSpec& spec, const CamLimits& limits) {
  FieldErrors errors;
  if (!IsDnsLabel(spec.app_name())) errors.Add("spec.app_name", "must be a DNS label");
  if (spec.app_energy_limit_percent() < 0 || spec.app_energy_limit_percent() > 100) {
    errors.Add("spec.app_energy_limit_percent", "must be between 0 and 100");
  }
  if (spec.services_size() == 0) errors.Add("spec.services", "at least one service is required");
  if (spec.services_size() > limits.max_services) {
    errors.Add("spec.services", absl::StrCat("more than ", limits.max_services, " services"));
  }
  std::unordered_map<std::string, const ServiceSpec*> by_name;
  for (int i = 0; i < spec.services_size(); ++i) {
    const ServiceSpec& s = spec.services(i);
    std::string p = Index("spec.services", i);
    if (!IsDnsLabel(s.name())) {
      errors.Add(Child(p, "name"), "must be a DNS label");
    } else if (!by_name.emplace(s.name(), &s).second) {
      errors.Add(Child(p, "name"), absl::StrCat("duplicate service name \"", s.name(), "\""));
    }
    if (s.image().empty()) errors.Add(Child(p, "image"), "required");
    if (s.availability_kpi() < 0 || s.availability_kpi() > 100) {
      errors.Add(Child(p, "availability_kpi"), "must be between 0 and 100");
    }
    for (const char* which : {"requests", "limits"}) {
      const auto& q = std::string_view(which) == "requests" ? s.requests() : s.limits();
      std::string qp = Child(p, which);
      if (q.cpu_millicores() < 0 || q.cpu_millicores() > kMaxCpuMillicores) {
        errors.Add(Child(qp, "cpu_millicores"), "out of range");
      }
      if (q.memory_bytes() < 0 || q.memory_bytes() > kMaxBytes) {
        errors.Add(Child(qp, "memory_bytes"), "out of range");
      }
      if (q.gpu() < 0 || q.gpu() > kMaxGpu) errors.Add(Child(qp, "gpu"), "out of range");
    }
    for (int k = 0; k < s.ports_size(); ++k) {
      if (s.ports(k).port() < 1 || s.ports(k).port() > 65535) {
        errors.Add(Child(Index(Child(p, "ports"), k), "port"), "must be between 1 and 65535");
      }
    }
    const v1::Autoscaling& as = s.autoscaling();
    if (s.has_autoscaling() && as.max_replicas() > 0) {
      const std::string ap = Child(p, "autoscaling");
      if (as.min_replicas() < 0 || as.min_replicas() > as.max_replicas()) {
        errors.Add(Child(ap, "min_replicas"), "must be between 0 and max_replicas");
      }
      if (as.target_cpu_utilization_percent() < 0 || as.target_cpu_utilization_percent() > 100) {
        errors.Add(Child(ap, "target_cpu_utilization_percent"),
                   "must be between 0 (default) and 100");
      }
      if (as.scale_down_cooldown_ns() < 0) {
        errors.Add(Child(ap, "scale_down_cooldown_ns"), "must not be negative");
      }
      const int replicas = s.replicas() > 0 ? s.replicas() : 1;
      if (replicas < as.min_replicas() || replicas > as.max_replicas()) {
        errors.Add(Child(p, "replicas"), "must lie within autoscaling min_replicas..max_replicas");
      }
    }
    if (s.has_job()) {
      const v1::Job& job = s.job();
      const std::string jp = Child(p, "job");
      if (job.completions() < 1 || job.completions() > kMaxReplicas) {
        errors.Add(Child(jp, "completions"), absl::StrCat("must be between 1 and ", kMaxReplicas));
      } else if (s.replicas() != JobReplicas(job)) {
        errors.Add(Child(p, "replicas"),
                   "must equal the job's pods at once: min(parallelism, completions), or "
                   "completions without parallelism");
      }
      if (job.parallelism() < 0 || job.parallelism() > kMaxReplicas) {
        errors.Add(Child(jp, "parallelism"),
                   absl::StrCat("must be between 0 (completions) and ", kMaxReplicas));
      }
      if (job.backoff_limit() < 0 || job.backoff_limit() > kMaxReplicas) {
        errors.Add(Child(jp, "backoff_limit"),
                   absl::StrCat("must be between 0 and ", kMaxReplicas));
      }
      if (s.has_autoscaling() && s.autoscaling().max_replicas() > 0) {
        errors.Add(Child(p, "autoscaling"), "a job is not autoscaled");
      }
      if (s.stateful()) errors.Add(Child(p, "stateful"), "a job cannot be stateful");
    }
  }
  auto one_of = [](const std::string& v, std::initializer_list<std::string_view> values) {
    return v.empty() || std::find(values.begin(), values.end(), v) != values.end();
  };
  if (!one_of(spec.security_class(), {"High", "Good", "Medium", "Low", "None"})) {
    errors.Add("spec.security_class", "must be High, Good, Medium, Low or None");
  }
  if (!one_of(spec.compliance_class(), {"High", "Medium", "Low"}) &&
      !IsRegulationName(spec.compliance_class())) {
    errors.Add("spec.compliance_class", "must be High, Medium, Low or a regulation name such as gdpr");
  }
  if (!one_of(spec.app_failure_tolerance(), {"High", "Medium", "Low"})) {
    errors.Add("spec.app_failure_tolerance", "must be High, Medium or Low");
  }
  if (spec.placement().number_of_locations() < 0 ||
      spec.placement().number_of_locations() > kMaxLocations) {
    errors.Add("spec.placement.number_of_locations",
               absl::StrCat("must be between 0 (as the policy decides) and ", kMaxLocations));
  }
  for (int i = 0; i < spec.services_size(); ++i) {
    const ServiceSpec& s = spec.services(i);
    if (!s.codeco_app().empty() && !IsDnsLabel(s.codeco_app())) {
      errors.Add(Child(Index("spec.services", i), "codeco_app"), "must be a DNS label");
    }
    // Channel names are unique per sending service, as in CODECO. A target
    // no service of the application has yet is a pending channel, not an error.
    std::set<std::string> channel_names;
    for (int k = 0; k < s.channels_size(); ++k) {
      const Channel& ch = s.channels(k);
      std::string p = Index(Child(Index("spec.services", i), "channels"), k);
      if (!IsDnsLabel(ch.name())) {
        errors.Add(Child(p, "name"), "must be a DNS label");
      } else if (!channel_names.insert(ch.name()).second) {
        errors.Add(Child(p, "name"), absl::StrCat("duplicate channel name \"", ch.name(), "\""));
      }
      if (!ch.from_service().empty() && ch.from_service() != s.name()) {
        errors.Add(Child(p, "from_service"), "must be the service that lists the channel");
      }
      if (!IsDnsLabel(ch.to_service())) {
        errors.Add(Child(p, "to_service"), "must be a DNS label");
      }
      if (ch.to_port() < 0 || ch.to_port() > 65535) {
        errors.Add(Child(p, "to_port"), "must be between 0 (not given) and 65535");
      }
      if (ch.min_bandwidth_bps() < 0 || ch.min_bandwidth_bps() > kMaxBandwidthBps) {
        errors.Add(Child(p, "min_bandwidth_bps"), "out of range");
      }
      if (ch.max_delay_ns() < 0) errors.Add(Child(p, "max_delay_ns"), "out of range");
      if (ch.frame_size_bytes() < 0 || ch.frame_size_bytes() > kMaxFrameBytes) {
        errors.Add(Child(p, "frame_size_bytes"), "out of range");
      }
      if (ch.send_interval_ns() < 0 || ch.send_interval_ns() > kMaxSendIntervalNs) {
        errors.Add(Child(p, "send_interval_ns"), "must be between 0 and 10 ms");
      }
    }
  }
  // The caps shared with SWM (replicas, expanded workloads and channels,
  // resource totals); their errors join the others.
  absl::Status bounds = CheckApplicationBounds(spec, ProtoSpecFieldNames("spec")).status();
  if (errors.empty()) return bounds;
  if (bounds.ok()) return errors.ToStatus();
  return absl::InvalidArgumentError(absl::StrCat(errors.ToStatus().message(), "\n",
                                                 bounds.message()));
}

}  // namespace codeco::acm
