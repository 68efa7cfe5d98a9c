#include "netma/core/alto.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <regex>
#include <set>

#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"

namespace codeco::netma {

using codeco::netma::v1::CostEntry;
using codeco::netma::v1::CostMap;
using codeco::netma::v1::CostMetric;
using codeco::netma::v1::CostMode;
using codeco::netma::v1::NetworkMap;
using nlohmann::json;

std::string ContentTag(const std::string& data) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

NetworkMap BuildNetworkMap(const std::map<std::string, std::vector<std::string>>& pids) {
  NetworkMap map;
  std::string content;
  for (const auto& [name, endpoints] : pids) {
    auto* pid = map.add_pids();
    pid->set_name(name);
    std::vector<std::string> sorted = endpoints;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    absl::StrAppend(&content, name.size(), ":", name, "=");
    for (const std::string& e : sorted) {
      pid->add_endpoints(e);
      absl::StrAppend(&content, e.size(), ":", e, ",");
    }
    content += ";";
  }
  map.set_vtag(ContentTag(content));
  return map;
}

namespace {

// Larger is better only for bandwidth.
bool HigherIsBetter(CostMetric metric) {
  return metric == codeco::netma::v1::COST_METRIC_BANDWIDTH;
}

double CostOf(const LinkCost& c, CostMetric metric) {
  switch (metric) {
    case codeco::netma::v1::COST_METRIC_DELAY:
      return static_cast<double>(c.delay_ns);
    case codeco::netma::v1::COST_METRIC_BANDWIDTH:
      return static_cast<double>(c.bandwidth_bps);
    case codeco::netma::v1::COST_METRIC_LOSS:
      return c.loss_ratio;
    case codeco::netma::v1::COST_METRIC_ENERGY:
      return c.energy_joules_per_byte;
    default:
      return 0;
  }
}

}  // namespace

absl::StatusOr<CostMap> BuildCostMap(const NetworkMap& network_map,
                                     const std::vector<LinkCost>& costs, CostMetric metric,
                                     CostMode mode, const std::vector<std::string>& source_pids,
                                     const std::vector<std::string>& destination_pids) {
  FieldErrors errors;
  if (metric != codeco::netma::v1::COST_METRIC_DELAY &&
      metric != codeco::netma::v1::COST_METRIC_BANDWIDTH &&
      metric != codeco::netma::v1::COST_METRIC_LOSS &&
      metric != codeco::netma::v1::COST_METRIC_ENERGY) {
    errors.Add("metric", "must be DELAY, BANDWIDTH, LOSS or ENERGY");
  }
  if (mode != codeco::netma::v1::COST_MODE_UNSPECIFIED &&
      mode != codeco::netma::v1::COST_MODE_NUMERICAL &&
      mode != codeco::netma::v1::COST_MODE_ORDINAL) {
    errors.Add("mode", "must be NUMERICAL or ORDINAL");
  }
  std::set<std::string> known;
  for (const auto& pid : network_map.pids()) known.insert(pid.name());
  for (size_t i = 0; i < source_pids.size(); ++i) {
    if (!known.count(source_pids[i])) {
      errors.Add(absl::StrCat("source_pids[", i, "]"), "not a PID of the network map");
    }
  }
  for (size_t i = 0; i < destination_pids.size(); ++i) {
    if (!known.count(destination_pids[i])) {
      errors.Add(absl::StrCat("destination_pids[", i, "]"), "not a PID of the network map");
    }
  }
  RETURN_IF_ERROR(errors.ToStatus());
  if (mode == codeco::netma::v1::COST_MODE_UNSPECIFIED)
    mode = codeco::netma::v1::COST_MODE_NUMERICAL;
  std::set<std::string> sources(source_pids.begin(), source_pids.end());
  std::set<std::string> destinations(destination_pids.begin(), destination_pids.end());

  std::map<std::pair<std::string, std::string>, double> selected;
  for (const LinkCost& c : costs) {
    if (!known.count(c.source) || !known.count(c.destination)) continue;
    if (!sources.empty() && !sources.count(c.source)) continue;
    if (!destinations.empty() && !destinations.count(c.destination)) continue;
    selected[{c.source, c.destination}] = CostOf(c, metric);
  }
  CostMap map;
  map.set_dependent_vtag(network_map.vtag());
  map.set_metric(metric);
  map.set_mode(mode);
  std::vector<double> values;
  for (const auto& [key, value] : selected) values.push_back(value);
  for (const auto& [key, value] : selected) {
    CostEntry* e = map.add_entries();
    e->set_source_pid(key.first);
    e->set_destination_pid(key.second);
    if (mode == codeco::netma::v1::COST_MODE_NUMERICAL) {
      e->set_cost(value);
    } else {
      // Competition ranking over the whole map: 1 + the number of strictly better costs.
      int64_t better = std::count_if(values.begin(), values.end(), [&](double v) {
        return HigherIsBetter(metric) ? v > value : v < value;
      });
      e->set_cost(static_cast<double>(better + 1));
    }
  }
  return map;
}

std::string AltoCostMetricName(CostMetric metric) {
  switch (metric) {
    case codeco::netma::v1::COST_METRIC_DELAY:
      return "delay-ow";
    case codeco::netma::v1::COST_METRIC_BANDWIDTH:
      return "bw-available";
    case codeco::netma::v1::COST_METRIC_LOSS:
      return "lossrate";
    case codeco::netma::v1::COST_METRIC_ENERGY:
      return "priv:codeco-energy-per-byte";
    default:
      return "";
  }
}

namespace {

std::string CostDescription(CostMetric metric) {
  switch (metric) {
    case codeco::netma::v1::COST_METRIC_DELAY:
      return "one-way delay in nanoseconds (half the measured RTT EMA)";
    case codeco::netma::v1::COST_METRIC_BANDWIDTH:
      return "available bandwidth in bits per second (higher is better)";
    case codeco::netma::v1::COST_METRIC_LOSS:
      return "failed-probe share, ratio 0-1";
    case codeco::netma::v1::COST_METRIC_ENERGY:
      return "energy to move one byte at the measured throughput, joules";
    default:
      return "";
  }
}

}  // namespace

absl::StatusOr<CostMetric> ParseCostMetricSegment(const std::string& segment) {
  if (segment == "delay") return codeco::netma::v1::COST_METRIC_DELAY;
  if (segment == "bandwidth") return codeco::netma::v1::COST_METRIC_BANDWIDTH;
  if (segment == "loss") return codeco::netma::v1::COST_METRIC_LOSS;
  if (segment == "energy") return codeco::netma::v1::COST_METRIC_ENERGY;
  return InvalidFieldError("metric", "must be delay, bandwidth, loss or energy, not " + segment);
}

json NetworkMapToAltoJson(const NetworkMap& map, const std::string& resource_id) {
  json network_map = json::object();
  for (const auto& pid : map.pids()) {
    json groups = json::object();
    for (const std::string& endpoint : pid.endpoints()) {
      std::string address = endpoint;
      std::string prefix;
      if (size_t slash = endpoint.find('/'); slash != std::string::npos) {
        address = endpoint.substr(0, slash);
        prefix = endpoint.substr(slash);
      }
      unsigned char buf[16];
      if (inet_pton(AF_INET, address.c_str(), buf) == 1) {
        groups["ipv4"].push_back(address + (prefix.empty() ? "/32" : prefix));
      } else if (inet_pton(AF_INET6, address.c_str(), buf) == 1) {
        groups["ipv6"].push_back(address + (prefix.empty() ? "/128" : prefix));
      }
    }
    network_map[pid.name()] = std::move(groups);
  }
  return json{{"meta", {{"vtag", {{"resource-id", resource_id}, {"tag", map.vtag()}}}}},
              {"network-map", std::move(network_map)}};
}

json CostMapToAltoJson(const CostMap& map, const std::string& network_map_resource_id) {
  json costs = json::object();
  for (const CostEntry& e : map.entries()) {
    if (map.mode() == codeco::netma::v1::COST_MODE_ORDINAL) {
      costs[e.source_pid()][e.destination_pid()] = static_cast<int64_t>(e.cost());
    } else {
      costs[e.source_pid()][e.destination_pid()] = e.cost();
    }
  }
  json cost_type = {
      {"cost-mode", map.mode() == codeco::netma::v1::COST_MODE_ORDINAL ? "ordinal" : "numerical"},
      {"cost-metric", AltoCostMetricName(map.metric())},
      {"description", CostDescription(map.metric())}};
  return json{
      {"meta",
       {{"dependent-vtags",
         json::array({{{"resource-id", network_map_resource_id}, {"tag", map.dependent_vtag()}}})},
        {"cost-type", cost_type}}},
      {"cost-map", std::move(costs)}};
}

namespace {

// RFC 7285 section 10.1 and 10.3: resource ids are 1-64 of [0-9a-zA-Z-:@_.];
// tags 1-64 printable ASCII without space.
bool ValidResourceId(const json& v) {
  static const std::regex re("^[0-9A-Za-z\\-:@_.]{1,64}$");
  return v.is_string() && std::regex_match(v.get<std::string>(), re);
}
bool ValidTag(const json& v) {
  static const std::regex re("^[\\x21-\\x7e]{1,64}$");
  return v.is_string() && std::regex_match(v.get<std::string>(), re);
}
bool ValidPidName(const std::string& name) {
  static const std::regex re("^[0-9A-Za-z\\-:@_.]{1,64}$");
  return std::regex_match(name, re);
}

absl::Status CheckVersionTag(const json& v, const std::string& path) {
  if (!v.is_object()) return InvalidFieldError(path, "must be an object");
  if (!v.contains("resource-id") || !ValidResourceId(v["resource-id"])) {
    return InvalidFieldError(path + ".resource-id", "must be a resource id");
  }
  if (!v.contains("tag") || !ValidTag(v["tag"])) {
    return InvalidFieldError(path + ".tag", "must be 1-64 printable characters");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateAltoNetworkMap(const json& doc) {
  if (!doc.is_object()) return InvalidFieldError("$", "must be an object");
  if (!doc.contains("meta") || !doc["meta"].is_object()) {
    return InvalidFieldError("meta", "must be an object");
  }
  if (!doc["meta"].contains("vtag")) return InvalidFieldError("meta.vtag", "required");
  RETURN_IF_ERROR(CheckVersionTag(doc["meta"]["vtag"], "meta.vtag"));
  if (!doc.contains("network-map") || !doc["network-map"].is_object()) {
    return InvalidFieldError("network-map", "must be an object");
  }
  for (const auto& [pid, groups] : doc["network-map"].items()) {
    std::string path = "network-map." + pid;
    if (!ValidPidName(pid)) return InvalidFieldError(path, "not a valid PID name");
    if (!groups.is_object()) return InvalidFieldError(path, "must be an object");
    for (const auto& [type, prefixes] : groups.items()) {
      if (type != "ipv4" && type != "ipv6") {
        return InvalidFieldError(path + "." + type, "address type must be ipv4 or ipv6");
      }
      if (!prefixes.is_array()) return InvalidFieldError(path + "." + type, "must be an array");
      for (size_t i = 0; i < prefixes.size(); ++i) {
        std::string p = absl::StrCat(path, ".", type, "[", i, "]");
        if (!prefixes[i].is_string()) return InvalidFieldError(p, "must be a string");
        std::string text = prefixes[i].get<std::string>();
        size_t slash = text.find('/');
        std::string address = text.substr(0, slash);
        unsigned char buf[16];
        int family = type == "ipv4" ? AF_INET : AF_INET6;
        if (inet_pton(family, address.c_str(), buf) != 1) {
          return InvalidFieldError(p, "not an " + type + " prefix");
        }
        if (slash != std::string::npos) {
          std::string len = text.substr(slash + 1);
          int max = type == "ipv4" ? 32 : 128;
          if (len.empty() || len.size() > 3 || !std::all_of(len.begin(), len.end(), ::isdigit) ||
              std::stoi(len) > max) {
            return InvalidFieldError(p, "bad prefix length");
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateAltoCostMap(const json& doc) {
  if (!doc.is_object()) return InvalidFieldError("$", "must be an object");
  if (!doc.contains("meta") || !doc["meta"].is_object()) {
    return InvalidFieldError("meta", "must be an object");
  }
  const json& meta = doc["meta"];
  if (!meta.contains("dependent-vtags") || !meta["dependent-vtags"].is_array() ||
      meta["dependent-vtags"].empty()) {
    return InvalidFieldError("meta.dependent-vtags", "must be a non-empty array");
  }
  for (size_t i = 0; i < meta["dependent-vtags"].size(); ++i) {
    RETURN_IF_ERROR(
        CheckVersionTag(meta["dependent-vtags"][i], absl::StrCat("meta.dependent-vtags[", i, "]")));
  }
  if (!meta.contains("cost-type") || !meta["cost-type"].is_object()) {
    return InvalidFieldError("meta.cost-type", "must be an object");
  }
  const json& cost_type = meta["cost-type"];
  if (!cost_type.contains("cost-mode") || !cost_type["cost-mode"].is_string() ||
      (cost_type["cost-mode"] != "numerical" && cost_type["cost-mode"] != "ordinal")) {
    return InvalidFieldError("meta.cost-type.cost-mode", "must be numerical or ordinal");
  }
  if (!cost_type.contains("cost-metric") || !cost_type["cost-metric"].is_string() ||
      cost_type["cost-metric"].get<std::string>().empty()) {
    return InvalidFieldError("meta.cost-type.cost-metric", "required string");
  }
  bool ordinal = cost_type["cost-mode"] == "ordinal";
  if (!doc.contains("cost-map") || !doc["cost-map"].is_object()) {
    return InvalidFieldError("cost-map", "must be an object");
  }
  for (const auto& [src, row] : doc["cost-map"].items()) {
    std::string path = "cost-map." + src;
    if (!ValidPidName(src)) return InvalidFieldError(path, "not a valid PID name");
    if (!row.is_object()) return InvalidFieldError(path, "must be an object");
    for (const auto& [dst, cost] : row.items()) {
      if (!ValidPidName(dst)) return InvalidFieldError(path + "." + dst, "not a valid PID name");
      if (!cost.is_number() || (ordinal && !cost.is_number_integer())) {
        return InvalidFieldError(path + "." + dst,
                                 ordinal ? "must be an integer rank" : "must be a number");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace codeco::netma
