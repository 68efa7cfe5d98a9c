#include "scenario.h"
#include "codeco/common/proto_util.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codeco/common/quantity.h"
#include "codeco/common/status.h"
#include "yaml_fields.h"

namespace codeco::codef {
namespace {

namespace fs = std::filesystem;
using codeco::common::v1::Tier;

// Scenario files are hand-written; anything larger is a mistake.
constexpr size_t kMaxScenarioBytes = 4 << 20;
constexpr int64_t kMaxNodesPerEntry = 1000;
constexpr int64_t kMaxTasks = 10'000'000;
// 127.0.1.1 is the hub; managed clusters take 127.0.2.1 .. 127.0.254.1.
constexpr size_t kMaxManagedClusters = 253;

const std::vector<std::string> kRecordableMetrics = {
    "node_usage", "node_energy", "pod_phases", "pending_pods", "link_conditions", "placement"};

bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-')) return false;
  }
  return s.front() != '-' && s.back() != '-';
}

// Reads a required-or-optional DNS-label name.
void ReadName(MapReader& map, const std::string& key, bool required, FieldErrors* errors,
              std::string* out) {
  YAML::Node node = map.Get(key);
  if (!node.IsDefined()) {
    if (required) errors->Add(map.PathOf(key), "is required");
    return;
  }
  std::string value;
  if (!ReadScalar(node, map.PathOf(key), errors, &value)) return;
  if (!IsDnsLabel(value)) {
    errors->Add(map.PathOf(key),
                absl::StrCat("must be a DNS label (a-z, 0-9, '-', at most 63): \"", value, "\""));
    return;
  }
  *out = value;
}

void ReadStringMap(const YAML::Node& node, const std::string& path, FieldErrors* errors,
                   std::map<std::string, std::string>* out) {
  if (!node.IsDefined() || node.IsNull()) return;
  if (!node.IsMap()) {
    errors->Add(path, "must be a mapping of strings");
    return;
  }
  for (const auto& entry : node) {
    std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "?";
    std::string value;
    if (ReadScalar(entry.second, JoinPath(path, key), errors, &value)) (*out)[key] = value;
  }
}

void ReadLabels(const YAML::Node& node, const std::string& path, FieldErrors* errors,
                codeco::common::v1::ClusterLabels* labels) {
  MapReader map(node, path, errors);
  std::string text;
  if (map.Has("region") && ReadScalar(map.Get("region"), map.PathOf("region"), errors, &text)) {
    labels->set_region(text);
  }
  if (map.Has("country") && ReadScalar(map.Get("country"), map.PathOf("country"), errors, &text)) {
    if (text.size() != 2 || !absl::ascii_isupper(text[0]) || !absl::ascii_isupper(text[1])) {
      errors->Add(map.PathOf("country"),
                  absl::StrCat("must be an ISO 3166-1 alpha-2 code such as FR: \"", text, "\""));
    } else {
      labels->set_country(text);
    }
  }
  if (map.Has("provider") &&
      ReadScalar(map.Get("provider"), map.PathOf("provider"), errors, &text)) {
    labels->set_provider(text);
  }
  if (map.Has("tier") && ReadScalar(map.Get("tier"), map.PathOf("tier"), errors, &text)) {
    if (Tier tier = codeco::ParseTier(text); tier != Tier::TIER_UNSPECIFIED) {
      labels->set_tier(tier);
    } else {
      errors->Add(map.PathOf("tier"),
                  absl::StrCat("must be far-edge, edge or cloud: \"", text, "\""));
    }
  }
  double value = 0;
  if (map.Has("latitude") &&
      ReadDouble(map.Get("latitude"), map.PathOf("latitude"), errors, &value)) {
    if (value < -90 || value > 90) {
      errors->Add(map.PathOf("latitude"), "must be between -90 and 90");
    } else {
      labels->set_latitude(value);
    }
  }
  if (map.Has("longitude") &&
      ReadDouble(map.Get("longitude"), map.PathOf("longitude"), errors, &value)) {
    if (value < -180 || value > 180) {
      errors->Add(map.PathOf("longitude"), "must be between -180 and 180");
    } else {
      labels->set_longitude(value);
    }
  }
  map.Finish();
}

// A non-negative number at `key`, when present.
bool ReadNonNegative(MapReader& map, const std::string& key, FieldErrors* errors, double* out) {
  if (!map.Has(key)) return false;
  double value = 0;
  if (!ReadDouble(map.Get(key), map.PathOf(key), errors, &value)) return false;
  if (value < 0) {
    errors->Add(map.PathOf(key), "must not be negative");
    return false;
  }
  *out = value;
  return true;
}

void ReadEnergy(const YAML::Node& node, const std::string& path, FieldErrors* errors,
                codeco::common::v1::EnergyProfile* energy) {
  MapReader map(node, path, errors);
  double value = 0;
  if (ReadNonNegative(map, "idle_watts", errors, &value)) energy->set_idle_watts(value);
  if (ReadNonNegative(map, "max_watts", errors, &value)) energy->set_max_watts(value);
  if (ReadNonNegative(map, "joules_per_byte", errors, &value)) energy->set_joules_per_byte(value);
  if (ReadNonNegative(map, "carbon_intensity_g_per_kwh", errors, &value)) {
    energy->set_carbon_intensity_g_per_kwh(value);
  }
  if (energy->max_watts() < energy->idle_watts()) {
    errors->Add(map.PathOf("max_watts"), "must not be below idle_watts");
  }
  map.Finish();
}

void ReadNodes(const YAML::Node& node, const std::string& path, bool required, FieldErrors* errors,
               ClusterSpec* cluster) {
  if (!node.IsDefined() || node.IsNull()) {
    if (required) errors->Add(path, "is required (at least one node)");
    return;
  }
  if (!node.IsSequence()) {
    errors->Add(path, "must be a list of nodes");
    return;
  }
  if (required && node.size() == 0) errors->Add(path, "must list at least one node");
  std::set<std::string> names;
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string entry_path = IndexPath(path, i);
    MapReader map(node[i], entry_path, errors);
    if (!map.valid()) {
      if (!node[i].IsMap()) continue;
    }
    NodeSpec spec;
    ReadName(map, "name", true, errors, &spec.name);
    int64_t count = 1;
    if (map.Has("count") && ReadInt(map.Get("count"), map.PathOf("count"), errors, &count)) {
      if (count < 1 || count > kMaxNodesPerEntry) {
        errors->Add(map.PathOf("count"), absl::StrCat("must be 1 to ", kMaxNodesPerEntry));
        count = 1;
      }
    }
    MapReader capacity(map.Get("capacity"), map.PathOf("capacity"), errors);
    if (!map.Has("capacity")) errors->Add(map.PathOf("capacity"), "is required");
    if (capacity.valid()) {
      if (!capacity.Has("cpu")) {
        errors->Add(capacity.PathOf("cpu"), "is required");
      } else if (ReadParsed(capacity.Get("cpu"), capacity.PathOf("cpu"), errors, ParseCpuMillicores,
                            &spec.cpu_millicores) &&
                 spec.cpu_millicores <= 0) {
        errors->Add(capacity.PathOf("cpu"), "must be > 0");
      }
      if (!capacity.Has("memory")) {
        errors->Add(capacity.PathOf("memory"), "is required");
      } else if (ReadParsed(capacity.Get("memory"), capacity.PathOf("memory"), errors, ParseBytes,
                            &spec.memory_bytes) &&
                 spec.memory_bytes <= 0) {
        errors->Add(capacity.PathOf("memory"), "must be > 0");
      }
      if (capacity.Has("gpu") &&
          ReadInt(capacity.Get("gpu"), capacity.PathOf("gpu"), errors, &spec.gpu) && spec.gpu < 0) {
        errors->Add(capacity.PathOf("gpu"), "must not be negative");
      }
      capacity.Finish();
    }
    ReadStringMap(map.Get("labels"), map.PathOf("labels"), errors, &spec.labels);
    codeco::common::v1::EnergyProfile energy = cluster->energy;
    if (map.Has("energy")) ReadEnergy(map.Get("energy"), map.PathOf("energy"), errors, &energy);
    spec.idle_watts = energy.idle_watts();
    spec.max_watts = energy.max_watts();
    spec.carbon_intensity_g_per_kwh = energy.carbon_intensity_g_per_kwh();
    map.Finish();
    if (spec.name.empty()) continue;
    for (int64_t k = 1; k <= count; ++k) {
      NodeSpec copy = spec;
      if (count > 1) copy.name = absl::StrCat(spec.name, "-", k);
      if (!names.insert(copy.name).second) {
        errors->Add(map.PathOf("name"), absl::StrCat("duplicate node name \"", copy.name, "\""));
        break;
      }
      cluster->nodes.push_back(std::move(copy));
    }
  }
}

void ReadCluster(const YAML::Node& node, const std::string& path, bool is_hub, FieldErrors* errors,
                 ClusterSpec* cluster) {
  MapReader map(node, path, errors);
  if (!map.valid()) {
    if (!node.IsDefined() || node.IsNull()) errors->Add(path, "is required");
    return;
  }
  ReadName(map, "name", true, errors, &cluster->name);
  ReadLabels(map.Get("labels"), map.PathOf("labels"), errors, &cluster->labels);
  if (!is_hub) ReadName(map, "parent", false, errors, &cluster->parent);
  // Cluster energy comes first: nodes inherit it.
  if (map.Has("energy")) {
    ReadEnergy(map.Get("energy"), map.PathOf("energy"), errors, &cluster->energy);
  }
  cluster->pod_start_delay_ns = 500'000'000;
  if (map.Has("pod_start_delay")) {
    ReadParsed(map.Get("pod_start_delay"), map.PathOf("pod_start_delay"), errors,
               ParseDurationNanos, &cluster->pod_start_delay_ns);
  }
  ReadNodes(map.Get("nodes"), map.PathOf("nodes"), !is_hub, errors, cluster);
  map.Finish();
}

// Reads rtt (halved) or latency (one-way) into `one_way`; false when neither.
bool ReadLatency(MapReader& map, FieldErrors* errors, int64_t* one_way) {
  bool has_rtt = map.Has("rtt");
  bool has_latency = map.Has("latency");
  if (has_rtt && has_latency) {
    errors->Add(map.PathOf("latency"), "give rtt or latency (one-way), not both");
    return true;
  }
  int64_t value = 0;
  if (has_rtt) {
    if (ReadParsed(map.Get("rtt"), map.PathOf("rtt"), errors, ParseDurationNanos, &value)) {
      *one_way = value / 2;
    }
    return true;
  }
  if (has_latency) {
    if (ReadParsed(map.Get("latency"), map.PathOf("latency"), errors, ParseDurationNanos, &value)) {
      *one_way = value;
    }
    return true;
  }
  return false;
}

void ReadLinkProperties(MapReader& map, FieldErrors* errors, LinkSpec* link) {
  if (map.Has("bandwidth")) {
    ReadParsed(map.Get("bandwidth"), map.PathOf("bandwidth"), errors, ParseBandwidthBps,
               &link->bandwidth_bps);
  }
  if (map.Has("loss")) ReadRatio(map.Get("loss"), map.PathOf("loss"), errors, &link->loss);
}

using ClusterNames = std::set<std::string>;

bool CheckClusterRef(const std::string& name, const std::string& path, const ClusterNames& clusters,
                     FieldErrors* errors) {
  if (clusters.count(name) == 0) {
    errors->Add(path, absl::StrCat("unknown cluster \"", name, "\""));
    return false;
  }
  return true;
}

// Reads the two ends of a link: `between: [a, b]` or `from: a` + `to: b`.
bool ReadLinkEnds(MapReader& map, const ClusterNames& clusters, FieldErrors* errors,
                  std::string* from, std::string* to, bool* has_between) {
  *has_between = map.Has("between");
  bool has_from = map.Has("from") || map.Has("to");
  if (*has_between && has_from) {
    errors->Add(map.PathOf("between"), "give between or from/to, not both");
    return false;
  }
  if (*has_between) {
    YAML::Node between = map.Get("between");
    if (!between.IsSequence() || between.size() != 2) {
      errors->Add(map.PathOf("between"), "must be a list of two cluster names");
      return false;
    }
    bool ok = ReadScalar(between[0], IndexPath(map.PathOf("between"), 0), errors, from);
    ok = ReadScalar(between[1], IndexPath(map.PathOf("between"), 1), errors, to) && ok;
    if (!ok) return false;
    ok = CheckClusterRef(*from, IndexPath(map.PathOf("between"), 0), clusters, errors);
    ok = CheckClusterRef(*to, IndexPath(map.PathOf("between"), 1), clusters, errors) && ok;
    if (ok && *from == *to) {
      errors->Add(map.PathOf("between"), "the two ends must differ");
      return false;
    }
    return ok;
  }
  bool ok = true;
  for (const auto& [key, out] : {std::pair<std::string, std::string*>{"from", from},
                                 std::pair<std::string, std::string*>{"to", to}}) {
    if (!map.Has(key)) {
      errors->Add(map.PathOf(key), "is required (or use between)");
      ok = false;
      continue;
    }
    if (!ReadScalar(map.Get(key), map.PathOf(key), errors, out) ||
        !CheckClusterRef(*out, map.PathOf(key), clusters, errors)) {
      ok = false;
    }
  }
  if (ok && *from == *to) {
    errors->Add(map.PathOf("to"), "must differ from from");
    return false;
  }
  return ok;
}

void ReadLinks(const YAML::Node& node, const std::string& path, const ClusterNames& clusters,
               FieldErrors* errors, Scenario* scenario) {
  MapReader map(node, path, errors);
  if (!map.valid()) return;
  bool symmetric = true;
  if (map.Has("symmetric")) {
    ReadBool(map.Get("symmetric"), map.PathOf("symmetric"), errors, &symmetric);
  }
  if (map.Has("default")) {
    MapReader def(map.Get("default"), map.PathOf("default"), errors);
    LinkSpec link;
    if (!ReadLatency(def, errors, &link.one_way_latency_ns)) {
      errors->Add(def.PathOf("rtt"), "is required (or latency)");
    }
    ReadLinkProperties(def, errors, &link);
    def.Finish();
    scenario->default_link = link;
  }
  YAML::Node matrix = map.Get("matrix");
  if (matrix.IsDefined() && !matrix.IsNull() && !matrix.IsSequence()) {
    errors->Add(map.PathOf("matrix"), "must be a list of links");
  } else if (matrix.IsSequence()) {
    std::set<std::pair<std::string, std::string>> seen;
    for (size_t i = 0; i < matrix.size(); ++i) {
      MapReader entry(matrix[i], IndexPath(map.PathOf("matrix"), i), errors);
      if (!entry.valid()) continue;
      LinkSpec link;
      bool has_between = false;
      bool ends_ok = ReadLinkEnds(entry, clusters, errors, &link.from, &link.to, &has_between);
      bool entry_symmetric = has_between ? symmetric : false;
      if (entry.Has("symmetric")) {
        ReadBool(entry.Get("symmetric"), entry.PathOf("symmetric"), errors, &entry_symmetric);
      }
      if (!ReadLatency(entry, errors, &link.one_way_latency_ns)) {
        errors->Add(entry.PathOf("rtt"), "is required (or latency)");
      }
      ReadLinkProperties(entry, errors, &link);
      entry.Finish();
      if (!ends_ok) continue;
      std::vector<LinkSpec> directed = {link};
      if (entry_symmetric) {
        LinkSpec reverse = link;
        std::swap(reverse.from, reverse.to);
        directed.push_back(reverse);
      }
      for (const LinkSpec& d : directed) {
        if (!seen.insert({d.from, d.to}).second) {
          errors->Add(entry.path(), absl::StrCat("duplicate link from ", d.from, " to ", d.to));
          break;
        }
        scenario->links.push_back(d);
      }
    }
  }
  map.Finish();
}

bool ReadDistribution(const YAML::Node& node, const std::string& path,
                      const std::function<absl::StatusOr<int64_t>(std::string_view)>& parse,
                      FieldErrors* errors, Distribution* out) {
  if (!node.IsDefined()) {
    errors->Add(path, "is required");
    return false;
  }
  auto read_value = [&](const YAML::Node& n, const std::string& p, double* v) {
    int64_t parsed = 0;
    if (!ReadParsed(n, p, errors, parse, &parsed)) return false;
    *v = static_cast<double>(parsed);
    return true;
  };
  if (node.IsScalar()) {
    out->kind = Distribution::Kind::kConstant;
    return read_value(node, path, &out->value);
  }
  MapReader map(node, path, errors);
  if (!map.valid()) return false;
  std::string kind;
  if (!map.Has("distribution")) {
    errors->Add(map.PathOf("distribution"),
                "is required (constant, uniform, exponential, lognormal or choice)");
    map.Finish();
    return false;
  }
  ReadScalar(map.Get("distribution"), map.PathOf("distribution"), errors, &kind);
  auto required = [&](const std::string& key, double* v) {
    if (!map.Has(key)) {
      errors->Add(map.PathOf(key), absl::StrCat("is required for a ", kind, " distribution"));
      return false;
    }
    return read_value(map.Get(key), map.PathOf(key), v);
  };
  auto clamps = [&]() {
    if (map.Has("min")) read_value(map.Get("min"), map.PathOf("min"), &out->min);
    if (map.Has("max")) read_value(map.Get("max"), map.PathOf("max"), &out->max);
    if (out->max > 0 && out->max < out->min) errors->Add(map.PathOf("max"), "must be >= min");
  };
  bool ok = true;
  if (kind == "constant") {
    out->kind = Distribution::Kind::kConstant;
    ok = required("value", &out->value);
  } else if (kind == "uniform") {
    out->kind = Distribution::Kind::kUniform;
    ok = required("min", &out->min);
    ok = required("max", &out->max) && ok;
    if (ok && out->max < out->min) {
      errors->Add(map.PathOf("max"), "must be >= min");
      ok = false;
    }
  } else if (kind == "exponential") {
    out->kind = Distribution::Kind::kExponential;
    ok = required("mean", &out->value);
    if (ok && out->value <= 0) {
      errors->Add(map.PathOf("mean"), "must be > 0");
      ok = false;
    }
    clamps();
  } else if (kind == "lognormal") {
    out->kind = Distribution::Kind::kLogNormal;
    ok = required("median", &out->value);
    if (ok && out->value <= 0) {
      errors->Add(map.PathOf("median"), "must be > 0");
      ok = false;
    }
    if (!map.Has("sigma")) {
      errors->Add(map.PathOf("sigma"), "is required for a lognormal distribution");
      ok = false;
    } else if (ReadDouble(map.Get("sigma"), map.PathOf("sigma"), errors, &out->sigma) &&
               out->sigma < 0) {
      errors->Add(map.PathOf("sigma"), "must not be negative");
      ok = false;
    }
    clamps();
  } else if (kind == "choice") {
    out->kind = Distribution::Kind::kChoice;
    YAML::Node values = map.Get("values");
    if (!values.IsSequence() || values.size() == 0) {
      errors->Add(map.PathOf("values"), "must be a non-empty list");
      ok = false;
    } else {
      for (size_t i = 0; i < values.size(); ++i) {
        double v = 0;
        if (read_value(values[i], IndexPath(map.PathOf("values"), i), &v)) {
          out->choices.push_back(v);
        } else {
          ok = false;
        }
      }
    }
    if (map.Has("weights")) {
      YAML::Node weights = map.Get("weights");
      if (!weights.IsSequence() || weights.size() != values.size()) {
        errors->Add(map.PathOf("weights"), "must be a list as long as values");
        ok = false;
      } else {
        double total = 0;
        for (size_t i = 0; i < weights.size(); ++i) {
          double w = 0;
          if (ReadDouble(weights[i], IndexPath(map.PathOf("weights"), i), errors, &w)) {
            if (w < 0) errors->Add(IndexPath(map.PathOf("weights"), i), "must not be negative");
            out->weights.push_back(w);
            total += w;
          }
        }
        if (total <= 0) {
          errors->Add(map.PathOf("weights"), "must not all be zero");
          ok = false;
        }
      }
    } else {
      out->weights.assign(out->choices.size(), 1.0);
    }
  } else if (!kind.empty()) {
    errors->Add(map.PathOf("distribution"),
                absl::StrCat("must be constant, uniform, exponential, lognormal or choice: \"",
                             kind, "\""));
    ok = false;
  }
  map.Finish();
  return ok;
}

void ReadTaskStream(const YAML::Node& node, const std::string& path,
                    const std::vector<std::string>& managed, FieldErrors* errors,
                    TaskStreamSpec* spec) {
  MapReader map(node, path, errors);
  if (!map.valid()) return;
  if (!map.Has("count")) {
    errors->Add(map.PathOf("count"), "is required");
  } else if (ReadInt(map.Get("count"), map.PathOf("count"), errors, &spec->count) &&
             (spec->count < 1 || spec->count > kMaxTasks)) {
    errors->Add(map.PathOf("count"), absl::StrCat("must be 1 to ", kMaxTasks));
  }
  if (map.Has("start")) {
    ReadParsed(map.Get("start"), map.PathOf("start"), errors, ParseDurationNanos, &spec->start_ns);
  }
  if (!map.Has("window")) {
    errors->Add(map.PathOf("window"), "is required (the arrival window, e.g. 60m)");
  } else {
    ReadParsed(map.Get("window"), map.PathOf("window"), errors, ParseDurationNanos,
               &spec->window_ns);
  }
  ReadDistribution(map.Get("duration"), map.PathOf("duration"), ParseDurationNanos, errors,
                   &spec->duration);
  ReadDistribution(map.Get("cpu"), map.PathOf("cpu"), ParseCpuMillicores, errors, &spec->cpu);
  ReadDistribution(map.Get("memory"), map.PathOf("memory"), ParseBytes, errors, &spec->memory);
  if (map.Has("long_running_after")) {
    ReadParsed(map.Get("long_running_after"), map.PathOf("long_running_after"), errors,
               ParseDurationNanos, &spec->long_running_after_ns);
  }
  if (map.Has("locations")) {
    YAML::Node locations = map.Get("locations");
    if (!locations.IsMap()) {
      errors->Add(map.PathOf("locations"), "must map cluster names to weights");
    } else {
      double total = 0;
      for (const auto& entry : locations) {
        std::string name = entry.first.IsScalar() ? entry.first.Scalar() : "?";
        std::string entry_path = JoinPath(map.PathOf("locations"), name);
        if (std::find(managed.begin(), managed.end(), name) == managed.end()) {
          errors->Add(entry_path, absl::StrCat("unknown managed cluster \"", name, "\""));
          continue;
        }
        double weight = 0;
        if (!ReadDouble(entry.second, entry_path, errors, &weight)) continue;
        if (weight < 0) {
          errors->Add(entry_path, "must not be negative");
          continue;
        }
        total += weight;
        spec->locations.emplace_back(name, weight);
      }
      if (total <= 0) errors->Add(map.PathOf("locations"), "weights must not all be zero");
    }
  }
  if (map.Has("clusters")) {
    YAML::Node clusters = map.Get("clusters");
    if (!clusters.IsSequence() || clusters.size() == 0) {
      errors->Add(map.PathOf("clusters"), "must be a non-empty list of managed cluster names");
    } else {
      for (size_t i = 0; i < clusters.size(); ++i) {
        std::string entry_path = IndexPath(map.PathOf("clusters"), i);
        std::string name;
        if (!ReadScalar(clusters[i], entry_path, errors, &name)) continue;
        if (std::find(managed.begin(), managed.end(), name) == managed.end()) {
          errors->Add(entry_path, absl::StrCat("unknown managed cluster \"", name, "\""));
        } else if (std::find(spec->clusters.begin(), spec->clusters.end(), name) !=
                   spec->clusters.end()) {
          errors->Add(entry_path, absl::StrCat("duplicate cluster \"", name, "\""));
        } else {
          spec->clusters.push_back(name);
        }
      }
    }
  }
  if (map.Has("seed")) {
    int64_t seed = 0;
    if (ReadInt(map.Get("seed"), map.PathOf("seed"), errors, &seed)) {
      spec->seed = static_cast<uint64_t>(seed);
    }
  }
  map.Finish();
}

void ReadWorkloads(const YAML::Node& node, const std::string& path,
                   const std::vector<std::string>& managed, const std::string& base_dir,
                   FieldErrors* errors, WorkloadSpec* workloads) {
  MapReader map(node, path, errors);
  if (!map.valid()) return;
  YAML::Node cams = map.Get("cams");
  if (cams.IsDefined() && !cams.IsNull() && !cams.IsSequence()) {
    errors->Add(map.PathOf("cams"), "must be a list");
  } else if (cams.IsSequence()) {
    for (size_t i = 0; i < cams.size(); ++i) {
      std::string entry_path = IndexPath(map.PathOf("cams"), i);
      CamRef ref;
      if (cams[i].IsScalar()) {
        ref.file = cams[i].Scalar();
      } else {
        MapReader entry(cams[i], entry_path, errors);
        if (!entry.valid()) continue;
        if (!entry.Has("file")) {
          errors->Add(entry.PathOf("file"), "is required");
        } else {
          ReadScalar(entry.Get("file"), entry.PathOf("file"), errors, &ref.file);
        }
        if (entry.Has("at")) {
          ReadParsed(entry.Get("at"), entry.PathOf("at"), errors, ParseDurationNanos, &ref.at_ns);
        }
        entry.Finish();
      }
      if (ref.file.empty()) continue;
      if (!base_dir.empty() && fs::path(ref.file).is_relative()) {
        ref.file = (fs::path(base_dir) / ref.file).lexically_normal().string();
      }
      workloads->cams.push_back(ref);
    }
  }
  if (map.Has("task_stream")) {
    TaskStreamSpec spec;
    ReadTaskStream(map.Get("task_stream"), map.PathOf("task_stream"), managed, errors, &spec);
    workloads->task_stream = spec;
  }
  map.Finish();
}

struct FaultKeywords {
  const char* name;
  FaultAction action;
};
constexpr FaultKeywords kFaultActions[] = {
    {"link_degrade", FaultAction::kLinkDegrade},
    {"link_cut", FaultAction::kLinkCut},
    {"link_heal", FaultAction::kLinkHeal},
    {"node_fail", FaultAction::kNodeFail},
    {"node_recover", FaultAction::kNodeRecover},
    {"cluster_partition", FaultAction::kClusterPartition},
    {"cluster_heal", FaultAction::kClusterHeal},
    {"hub_cut", FaultAction::kHubCut},
    {"hub_heal", FaultAction::kHubHeal},
    {"load_surge", FaultAction::kLoadSurge},
    {"node_load", FaultAction::kNodeLoad},
};

// node_load's cpu ("90%" of the capacity, or a quantity: "1500m", "2"),
// memory and duration.
bool ReadNodeLoad(MapReader& map, const NodeSpec& node, FieldErrors* errors, FaultSpec* fault) {
  bool ok = true;
  if (!map.Has("cpu") && !map.Has("memory")) {
    errors->Add(map.path(), "node_load needs cpu or memory");
    ok = false;
  }
  if (map.Has("cpu")) {
    std::string text;
    if (!ReadScalar(map.Get("cpu"), map.PathOf("cpu"), errors, &text)) {
      ok = false;
    } else if (!text.empty() && text.back() == '%') {
      absl::StatusOr<double> share = ParseRatio(text);
      if (!share.ok() || *share < 0 || *share > 1) {
        errors->Add(map.PathOf("cpu"),
                    absl::StrCat("must be 0%-100% or a CPU quantity: \"", text, "\""));
        ok = false;
      } else {
        fault->cpu_fraction = *share;
      }
    } else {
      absl::StatusOr<int64_t> millicores = ParseCpuMillicores(text);
      if (!millicores.ok()) {
        errors->Add(map.PathOf("cpu"), std::string(millicores.status().message()));
        ok = false;
      } else if (*millicores > node.cpu_millicores) {
        errors->Add(map.PathOf("cpu"), absl::StrCat("is more than the node's capacity, ",
                                                    FormatCpu(node.cpu_millicores)));
        ok = false;
      } else {
        fault->cpu_millicores = *millicores;
      }
    }
  }
  if (map.Has("memory")) {
    int64_t bytes = 0;
    if (!ReadParsed(map.Get("memory"), map.PathOf("memory"), errors, ParseBytes, &bytes)) {
      ok = false;
    } else if (bytes > node.memory_bytes) {
      errors->Add(map.PathOf("memory"), absl::StrCat("is more than the node's capacity, ",
                                                     FormatBytes(node.memory_bytes)));
      ok = false;
    } else {
      fault->memory_bytes = bytes;
    }
  }
  if (map.Has("duration")) {
    ok = ReadParsed(map.Get("duration"), map.PathOf("duration"), errors, ParseDurationNanos,
                    &fault->duration_ns) &&
         ok;
  }
  return ok;
}

void ReadFault(const YAML::Node& node, const std::string& path, const Scenario& scenario,
               const ClusterNames& clusters, FieldErrors* errors, std::vector<FaultSpec>* out) {
  MapReader map(node, path, errors);
  if (!map.valid()) {
    if (!node.IsMap()) errors->Add(path, "must be a mapping");
    return;
  }
  FaultSpec fault;
  bool ok = true;
  if (!map.Has("at")) {
    errors->Add(map.PathOf("at"), "is required");
    ok = false;
  } else if (!ReadParsed(map.Get("at"), map.PathOf("at"), errors, ParseDurationNanos,
                         &fault.at_ns)) {
    ok = false;
  } else if (scenario.duration_ns > 0 && fault.at_ns > scenario.duration_ns) {
    errors->Add(map.PathOf("at"), "is after the end of the scenario (duration)");
    ok = false;
  }
  std::string action;
  if (!map.Has("action")) {
    errors->Add(map.PathOf("action"), "is required");
    map.Finish();
    return;
  }
  if (!ReadScalar(map.Get("action"), map.PathOf("action"), errors, &action)) {
    map.Finish();
    return;
  }
  bool known = false;
  for (const auto& k : kFaultActions) {
    if (action == k.name) {
      fault.action = k.action;
      known = true;
    }
  }
  if (!known) {
    errors->Add(map.PathOf("action"),
                absl::StrCat("unknown action \"", action,
                             "\" (link_degrade, link_cut, link_heal, node_fail, node_recover, "
                             "cluster_partition, cluster_heal, hub_cut, hub_heal, load_surge, "
                             "node_load)"));
    return;  // Keys depend on the action: no unknown-key report.
  }
  auto read_cluster = [&](bool allow_hub) {
    if (!map.Has("cluster")) {
      errors->Add(map.PathOf("cluster"), "is required");
      return false;
    }
    if (!ReadScalar(map.Get("cluster"), map.PathOf("cluster"), errors, &fault.cluster) ||
        !CheckClusterRef(fault.cluster, map.PathOf("cluster"), clusters, errors)) {
      return false;
    }
    if (!allow_hub && fault.cluster == scenario.hub.name) {
      errors->Add(map.PathOf("cluster"), "is the hub: use hub_cut / hub_heal");
      return false;
    }
    return true;
  };
  switch (fault.action) {
    case FaultAction::kLinkDegrade:
    case FaultAction::kLinkCut:
    case FaultAction::kLinkHeal: {
      bool has_between = false;
      ok = ReadLinkEnds(map, clusters, errors, &fault.from, &fault.to, &has_between) && ok;
      fault.symmetric = has_between;
      if (map.Has("symmetric")) {
        ReadBool(map.Get("symmetric"), map.PathOf("symmetric"), errors, &fault.symmetric);
      }
      if (fault.action == FaultAction::kLinkDegrade) {
        int64_t one_way = 0;
        if (ReadLatency(map, errors, &one_way)) fault.one_way_latency_ns = one_way;
        if (map.Has("bandwidth")) {
          int64_t bps = 0;
          if (ReadParsed(map.Get("bandwidth"), map.PathOf("bandwidth"), errors, ParseBandwidthBps,
                         &bps)) {
            fault.bandwidth_bps = bps;
          }
        }
        if (map.Has("loss")) {
          double loss = 0;
          if (ReadRatio(map.Get("loss"), map.PathOf("loss"), errors, &loss)) fault.loss = loss;
        }
        if (!map.Has("rtt") && !map.Has("latency") && !map.Has("bandwidth") && !map.Has("loss")) {
          errors->Add(map.path(), "link_degrade needs rtt, latency, bandwidth or loss");
          ok = false;
        }
      }
      break;
    }
    case FaultAction::kNodeFail:
    case FaultAction::kNodeRecover:
    case FaultAction::kNodeLoad: {
      std::string ref;
      if (!map.Has("node")) {
        errors->Add(map.PathOf("node"), "is required (CLUSTER/NODE)");
        ok = false;
        break;
      }
      if (!ReadScalar(map.Get("node"), map.PathOf("node"), errors, &ref)) {
        ok = false;
        break;
      }
      size_t slash = ref.find('/');
      if (slash == std::string::npos) {
        errors->Add(map.PathOf("node"), absl::StrCat("must be CLUSTER/NODE: \"", ref, "\""));
        ok = false;
        break;
      }
      fault.cluster = ref.substr(0, slash);
      fault.node = ref.substr(slash + 1);
      const ClusterSpec* cluster = scenario.FindCluster(fault.cluster);
      if (cluster == nullptr) {
        errors->Add(map.PathOf("node"), absl::StrCat("unknown cluster \"", fault.cluster, "\""));
        ok = false;
        break;
      }
      auto found = std::find_if(cluster->nodes.begin(), cluster->nodes.end(),
                                [&](const NodeSpec& n) { return n.name == fault.node; });
      if (found == cluster->nodes.end()) {
        errors->Add(map.PathOf("node"),
                    absl::StrCat("cluster ", fault.cluster, " has no node \"", fault.node, "\""));
        ok = false;
        break;
      }
      if (fault.action == FaultAction::kNodeLoad) {
        ok = ReadNodeLoad(map, *found, errors, &fault) && ok;
      }
      break;
    }
    case FaultAction::kClusterPartition:
    case FaultAction::kClusterHeal:
      ok = read_cluster(false) && ok;
      break;
    case FaultAction::kHubCut:
    case FaultAction::kHubHeal:
      break;
    case FaultAction::kLoadSurge: {
      ok = read_cluster(true) && ok;
      if (!map.Has("factor")) {
        errors->Add(map.PathOf("factor"), "is required");
        ok = false;
      } else if (ReadDouble(map.Get("factor"), map.PathOf("factor"), errors, &fault.factor) &&
                 fault.factor <= 0) {
        errors->Add(map.PathOf("factor"), "must be > 0");
        ok = false;
      }
      if (map.Has("duration")) {
        ReadParsed(map.Get("duration"), map.PathOf("duration"), errors, ParseDurationNanos,
                   &fault.duration_ns);
      }
      break;
    }
  }
  map.Finish();
  if (ok) out->push_back(fault);
}

void ReadRecord(MapReader& root, const std::string& base_dir, FieldErrors* errors,
                RecordSpec* record) {
  record->interval_ns = 10'000'000'000;
  record->metrics = kRecordableMetrics;
  MapReader map(root.Get("record"), root.PathOf("record"), errors);
  if (map.valid()) {
    if (map.Has("interval") &&
        ReadParsed(map.Get("interval"), map.PathOf("interval"), errors, ParseDurationNanos,
                   &record->interval_ns) &&
        record->interval_ns <= 0) {
      errors->Add(map.PathOf("interval"), "must be > 0");
    }
    if (map.Has("metrics")) {
      YAML::Node metrics = map.Get("metrics");
      record->metrics.clear();
      if (!metrics.IsSequence()) {
        errors->Add(map.PathOf("metrics"), "must be a list");
      } else {
        for (size_t i = 0; i < metrics.size(); ++i) {
          std::string name;
          if (!ReadScalar(metrics[i], IndexPath(map.PathOf("metrics"), i), errors, &name)) {
            continue;
          }
          if (std::find(kRecordableMetrics.begin(), kRecordableMetrics.end(), name) ==
              kRecordableMetrics.end()) {
            errors->Add(IndexPath(map.PathOf("metrics"), i),
                        absl::StrCat("unknown metric \"", name,
                                     "\" (node_usage, node_energy, pod_phases, pending_pods, "
                                     "link_conditions, placement)"));
            continue;
          }
          record->metrics.push_back(name);
        }
      }
    }
    map.Finish();
  }
  MapReader output(root.Get("output"), root.PathOf("output"), errors);
  record->output_dir = "results";
  if (output.valid()) {
    if (output.Has("dir")) {
      ReadScalar(output.Get("dir"), output.PathOf("dir"), errors, &record->output_dir);
    }
    if (output.Has("report")) {
      ReadBool(output.Get("report"), output.PathOf("report"), errors, &record->report);
    }
    output.Finish();
  }
  if (!base_dir.empty() && fs::path(record->output_dir).is_relative()) {
    record->output_dir = (fs::path(base_dir) / record->output_dir).lexically_normal().string();
  }
}

// Reports a parent chain that loops back on itself.
void CheckParents(const Scenario& scenario, FieldErrors* errors) {
  for (size_t i = 0; i < scenario.clusters.size(); ++i) {
    const ClusterSpec& cluster = scenario.clusters[i];
    if (cluster.parent.empty()) continue;
    std::string path = absl::StrCat("federation.clusters[", i, "].parent");
    if (cluster.parent == cluster.name) {
      errors->Add(path, "a cluster cannot be its own parent");
      continue;
    }
    if (scenario.FindCluster(cluster.parent) == nullptr) {
      errors->Add(path, absl::StrCat("unknown cluster \"", cluster.parent, "\""));
      continue;
    }
    std::set<std::string> visited = {cluster.name};
    const ClusterSpec* at = &cluster;
    while (at != nullptr && !at->parent.empty()) {
      if (!visited.insert(at->parent).second) {
        errors->Add(path, "parents form a cycle");
        break;
      }
      at = scenario.FindCluster(at->parent);
    }
  }
}

}  // namespace

const char* FaultActionName(FaultAction action) {
  for (const auto& k : kFaultActions) {
    if (k.action == action) return k.name;
  }
  return "?";
}

const char* FederationModeName(FederationMode mode) {
  return mode == FederationMode::kLayered ? "layered" : "flat";
}

const ClusterSpec* Scenario::FindCluster(const std::string& cluster_name) const {
  if (hub.name == cluster_name) return &hub;
  for (const ClusterSpec& c : clusters) {
    if (c.name == cluster_name) return &c;
  }
  return nullptr;
}

std::optional<LinkSpec> Scenario::LinkBetween(const std::string& from,
                                              const std::string& to) const {
  for (const LinkSpec& link : links) {
    if (link.from == from && link.to == to) return link;
  }
  if (!default_link.has_value()) return std::nullopt;
  LinkSpec link = *default_link;
  link.from = from;
  link.to = to;
  return link;
}

namespace {

absl::StatusOr<Scenario> ParseScenarioUnguarded(const std::string& yaml_text,
                                                const std::string& base_dir) {
  if (yaml_text.size() > kMaxScenarioBytes) {
    return InvalidFieldError("(root)",
                             absl::StrCat("scenario larger than ", kMaxScenarioBytes, " bytes"));
  }
  ASSIGN_OR_RETURN(YAML::Node root, ParseYaml(yaml_text, "(root)"));
  FieldErrors errors;
  Scenario scenario;
  if (!root.IsMap()) return InvalidFieldError("(root)", "must be a mapping");
  MapReader top(root, "", &errors);
  ReadName(top, "name", true, &errors, &scenario.name);
  if (top.Has("description")) {
    ReadScalar(top.Get("description"), "description", &errors, &scenario.description);
  }
  if (top.Has("duration")) {
    ReadParsed(top.Get("duration"), "duration", &errors, ParseDurationNanos, &scenario.duration_ns);
  }

  MapReader federation(top.Get("federation"), "federation", &errors);
  if (!federation.valid()) {
    if (!top.Has("federation")) errors.Add("federation", "is required");
  } else {
    ReadCluster(federation.Get("hub"), "federation.hub", true, &errors, &scenario.hub);
    if (federation.Has("mode")) {
      std::string mode;
      if (ReadScalar(federation.Get("mode"), "federation.mode", &errors, &mode)) {
        if (mode == FederationModeName(FederationMode::kFlat)) {
          scenario.mode = FederationMode::kFlat;
        } else if (mode == FederationModeName(FederationMode::kLayered)) {
          scenario.mode = FederationMode::kLayered;
        } else {
          errors.Add("federation.mode",
                     absl::StrCat("must be flat (every cluster reports to the hub) or layered "
                                  "(a cluster with a parent reports to its parent): \"",
                                  mode, "\""));
        }
      }
    }
    YAML::Node clusters = federation.Get("clusters");
    if (!clusters.IsSequence() || clusters.size() == 0) {
      errors.Add("federation.clusters", "must be a non-empty list of clusters");
    } else if (clusters.size() > kMaxManagedClusters) {
      errors.Add("federation.clusters", absl::StrCat("at most ", kMaxManagedClusters,
                                                     " clusters (one loopback /24 "
                                                     "address each)"));
    } else {
      for (size_t i = 0; i < clusters.size(); ++i) {
        ClusterSpec cluster;
        std::string path = IndexPath("federation.clusters", i);
        ReadCluster(clusters[i], path, false, &errors, &cluster);
        if (!cluster.name.empty() && scenario.FindCluster(cluster.name) != nullptr) {
          errors.Add(JoinPath(path, "name"),
                     absl::StrCat("duplicate cluster name \"", cluster.name, "\""));
          continue;
        }
        scenario.clusters.push_back(std::move(cluster));
      }
    }
    federation.Finish();
  }
  CheckParents(scenario, &errors);

  ClusterNames names;
  std::vector<std::string> managed;
  if (!scenario.hub.name.empty()) names.insert(scenario.hub.name);
  for (const ClusterSpec& c : scenario.clusters) {
    if (c.name.empty()) continue;
    names.insert(c.name);
    managed.push_back(c.name);
  }
  if (top.Has("links")) ReadLinks(top.Get("links"), "links", names, &errors, &scenario);
  if (top.Has("workloads")) {
    ReadWorkloads(top.Get("workloads"), "workloads", managed, base_dir, &errors,
                  &scenario.workloads);
  }
  YAML::Node faults = top.Get("faults");
  if (faults.IsDefined() && !faults.IsNull() && !faults.IsSequence()) {
    errors.Add("faults", "must be a list");
  } else if (faults.IsSequence()) {
    for (size_t i = 0; i < faults.size(); ++i) {
      ReadFault(faults[i], IndexPath("faults", i), scenario, names, &errors, &scenario.faults);
    }
    std::stable_sort(scenario.faults.begin(), scenario.faults.end(),
                     [](const FaultSpec& a, const FaultSpec& b) { return a.at_ns < b.at_ns; });
  }
  ReadRecord(top, base_dir, &errors, &scenario.record);
  top.Finish();
  RETURN_IF_ERROR(errors.ToStatus());
  return scenario;
}

}  // namespace

absl::StatusOr<Scenario> ParseScenario(const std::string& yaml_text, const std::string& base_dir) {
  // The readers check node kinds before use; this is the last line of
  // defence so that no input can crash the caller.
  try {
    return ParseScenarioUnguarded(yaml_text, base_dir);
  } catch (const YAML::Exception& e) {
    return InvalidFieldError("(root)", absl::StrCat("unreadable YAML: ", e.what()));
  }
}

absl::StatusOr<Scenario> LoadScenarioFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read scenario file ", path));
  std::string text;
  char buffer[8192];
  while (in.read(buffer, sizeof(buffer)) || in.gcount() > 0) {
    text.append(buffer, in.gcount());
    if (text.size() > kMaxScenarioBytes) {
      return InvalidFieldError("(root)",
                               absl::StrCat("scenario larger than ", kMaxScenarioBytes, " bytes"));
    }
  }
  std::string base_dir = fs::path(path).parent_path().string();
  ASSIGN_OR_RETURN(Scenario scenario, ParseScenario(text, base_dir));
  FieldErrors errors;
  for (size_t i = 0; i < scenario.workloads.cams.size(); ++i) {
    std::error_code ec;
    if (!fs::is_regular_file(scenario.workloads.cams[i].file, ec)) {
      errors.Add(absl::StrCat("workloads.cams[", i, "].file"),
                 absl::StrCat("no such file: ", scenario.workloads.cams[i].file));
    }
  }
  RETURN_IF_ERROR(errors.ToStatus());
  return scenario;
}

namespace {

double Sample(const Distribution& d, std::mt19937_64& rng) {
  double v = 0;
  switch (d.kind) {
    case Distribution::Kind::kConstant:
      return d.value;
    case Distribution::Kind::kUniform:
      return std::uniform_real_distribution<double>(d.min, d.max)(rng);
    case Distribution::Kind::kExponential:
      v = std::exponential_distribution<double>(1.0 / d.value)(rng);
      break;
    case Distribution::Kind::kLogNormal:
      v = std::lognormal_distribution<double>(std::log(d.value), d.sigma)(rng);
      break;
    case Distribution::Kind::kChoice: {
      std::discrete_distribution<size_t> pick(d.weights.begin(), d.weights.end());
      return d.choices[pick(rng)];
    }
  }
  v = std::max(v, d.min);
  if (d.max > 0) v = std::min(v, d.max);
  return v;
}

int64_t ToInt(double v) {
  if (v <= 0) return 0;
  if (v >= 9.2e18) return INT64_MAX;
  return static_cast<int64_t>(std::llround(v));
}

}  // namespace

std::vector<GeneratedTask> GenerateTasks(const TaskStreamSpec& spec,
                                         const std::vector<std::string>& managed_clusters) {
  std::vector<GeneratedTask> tasks;
  std::mt19937_64 rng(spec.seed);
  std::vector<std::string> names;
  std::vector<double> weights;
  if (spec.locations.empty()) {
    names = managed_clusters;
    weights.assign(names.size(), 1.0);
  } else {
    for (const auto& [name, weight] : spec.locations) {
      names.push_back(name);
      weights.push_back(weight);
    }
  }
  if (names.empty()) return tasks;
  std::discrete_distribution<size_t> location(weights.begin(), weights.end());
  std::uniform_real_distribution<double> arrival(0, static_cast<double>(spec.window_ns));
  tasks.reserve(spec.count);
  for (int64_t i = 0; i < spec.count; ++i) {
    GeneratedTask task;
    task.at_ns = spec.start_ns + ToInt(arrival(rng));
    task.cluster = names[location(rng)];
    task.duration_ns = std::max<int64_t>(1, ToInt(Sample(spec.duration, rng)));
    task.cpu_millicores = std::max<int64_t>(1, ToInt(Sample(spec.cpu, rng)));
    task.memory_bytes = std::max<int64_t>(1, ToInt(Sample(spec.memory, rng)));
    task.long_running =
        spec.long_running_after_ns > 0 && task.duration_ns >= spec.long_running_after_ns;
    tasks.push_back(std::move(task));
  }
  std::stable_sort(tasks.begin(), tasks.end(), [](const GeneratedTask& a, const GeneratedTask& b) {
    return a.at_ns < b.at_ns;
  });
  for (size_t i = 0; i < tasks.size(); ++i) tasks[i].name = absl::StrFormat("task-%05d", i);
  return tasks;
}

}  // namespace codeco::codef
