#include "acm/core/admission.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "acm/core/bounded_yaml.h"
#include "acm/core/bundle_signature.h"
#include "acm/core/cam_parser.h"
#include "acm/core/carbon_scheduler.h"
#include "codeco/common/excerpt.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/quantity.h"
#include "codeco/common/status.h"
#include "google/protobuf/util/json_util.h"

namespace codeco::acm {
namespace {

// Reads the bundle's fields, recording every error with its path.
class BundleReader {
 public:
  BundleReader(FieldErrors& errors, const PolicyBundleLimits& limits)
      : errors_(errors), limits_(limits) {}

  void Read(const YAML::Node& root, PolicyBundle& out) {
    if (!root.IsMap()) {
      errors_.Add("bundle", "must be a YAML mapping");
      return;
    }
    Known(root, "",
          {"apiVersion", "kind", "version", "regions", "latencyMs", "policies", "carbon"});
    if (Scalar(root, "apiVersion", "") != "codeco.io/v1") {
      errors_.Add("apiVersion", "must be codeco.io/v1");
    }
    if (Scalar(root, "kind", "") != "PolicyBundle") errors_.Add("kind", "must be PolicyBundle");
    out.version = Scalar(root, "version", "");
    if (out.version.empty() || out.version.size() > 128) {
      errors_.Add("version", "required, 1-128 characters");
    }
    if (const YAML::Node regions = root["regions"]) ReadRegions(regions, out);
    if (const YAML::Node latency = root["latencyMs"]) ReadLatency(latency, out);
    if (const YAML::Node policies = root["policies"]) ReadPolicies(policies, out);
    if (const YAML::Node carbon = root["carbon"]) ReadCarbon(carbon, out);
  }

 private:
  std::string Scalar(const YAML::Node& map, const std::string& key, const std::string& path) {
    const YAML::Node n = map[key];
    if (!n) return "";
    if (!n.IsScalar()) {
      errors_.Add(Path(path, key), "must be a string");
      return "";
    }
    return n.Scalar();
  }
  // A scalar's number, or -1 when it is not one (every number read here
  // must be 0 or more).
  static double Number(const YAML::Node& node) {
    if (!node.IsScalar()) return -1;
    try {
      return node.as<double>();
    } catch (const YAML::Exception&) {
      return -1;
    }
  }
  static std::string Path(const std::string& parent, const std::string& key) {
    return parent.empty() ? key : absl::StrCat(parent, ".", key);
  }
  void Known(const YAML::Node& map, const std::string& path,
             std::initializer_list<const char*> keys) {
    for (const auto& kv : map) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return key == k; })) {
        errors_.Add(Path(path, key), "unknown field");
      }
    }
  }
  bool Count(size_t n, const std::string& path) {
    if (n > limits_.max_entries) {
      errors_.Add(path, absl::StrCat("more than ", limits_.max_entries, " entries"));
      return false;
    }
    return true;
  }
  bool Enabled(const YAML::Node& map, const std::string& path) {
    const YAML::Node n = map["enabled"];
    if (!n) return true;
    if (!n.IsScalar() || (n.Scalar() != "true" && n.Scalar() != "false")) {
      errors_.Add(Path(path, "enabled"), "must be true or false");
      return true;
    }
    return n.Scalar() == "true";
  }

  void ReadRegions(const YAML::Node& regions, PolicyBundle& out) {
    if (!regions.IsSequence()) {
      errors_.Add("regions", "must be a list");
      return;
    }
    if (!Count(regions.size(), "regions")) return;
    std::set<std::string> seen;
    for (size_t i = 0; i < regions.size(); ++i) {
      const std::string path = absl::StrCat("regions[", i, "]");
      if (!regions[i].IsMap()) {
        errors_.Add(path, "must be a mapping with name and country");
        continue;
      }
      Known(regions[i], path, {"name", "country"});
      KnownRegion r{Scalar(regions[i], "name", path), Scalar(regions[i], "country", path)};
      if (r.name.empty()) errors_.Add(Path(path, "name"), "required");
      if (!seen.insert(r.name).second) errors_.Add(Path(path, "name"), "given twice");
      if (!r.country.empty() && !IsCountryCode(r.country)) {
        errors_.Add(Path(path, "country"), "must be an ISO 3166 alpha-2 code such as FR");
      }
      out.regions.push_back(std::move(r));
    }
  }

  void ReadLatency(const YAML::Node& latency, PolicyBundle& out) {
    if (!latency.IsMap()) {
      errors_.Add("latencyMs", "must map each region to {region: ms}");
      return;
    }
    size_t entries = 0;
    for (const auto& from : latency) {
      const std::string a = from.first.IsScalar() ? from.first.Scalar() : "";
      const std::string path = Path("latencyMs", a);
      if (!from.second.IsMap()) {
        errors_.Add(path, "must map regions to milliseconds");
        continue;
      }
      for (const auto& to : from.second) {
        if (!Count(++entries, "latencyMs")) return;
        const std::string b = to.first.IsScalar() ? to.first.Scalar() : "";
        const double ms = Number(to.second);
        if (!std::isfinite(ms) || ms < 0 || ms > 1e6) {
          errors_.Add(Path(path, b), "must be a latency in milliseconds, 0 or more");
          continue;
        }
        // A pair written once holds both ways; written twice, each way as written.
        out.latency_ms[a][b] = ms;
        if (!latency[b] || !latency[b][a]) out.latency_ms[b][a] = ms;
      }
    }
  }

  // carbon: {regions: {<region>: {start: RFC 3339, step: 30m, gPerKwh: [..]}}}
  void ReadCarbon(const YAML::Node& carbon, PolicyBundle& out) {
    if (!carbon.IsMap()) {
      errors_.Add("carbon", "must be a mapping");
      return;
    }
    Known(carbon, "carbon", {"regions"});
    const YAML::Node regions = carbon["regions"];
    if (!regions) return;
    if (!regions.IsMap()) {
      errors_.Add("carbon.regions", "must map regions to their series");
      return;
    }
    for (const auto& kv : regions) {
      const std::string region = kv.first.IsScalar() ? kv.first.Scalar() : "";
      const std::string path = Path("carbon.regions", region);
      if (!kv.second.IsMap()) {
        errors_.Add(path, "must have start, step and gPerKwh");
        continue;
      }
      Known(kv.second, path, {"start", "step", "gPerKwh"});
      CarbonSeries series;
      series.region = region;
      std::string err;
      const std::string start = Scalar(kv.second, "start", path);
      if (!absl::ParseTime(absl::RFC3339_full, start, &series.start, &err)) {
        errors_.Add(Path(path, "start"), "must be an RFC 3339 time such as 2026-11-20T00:00:00Z");
      }
      absl::StatusOr<int64_t> step = ParseDurationNanos(Scalar(kv.second, "step", path));
      if (!step.ok() || *step < int64_t{60} * 1'000'000'000 ||
          absl::Hours(24) % absl::Nanoseconds(*step) != absl::ZeroDuration()) {
        errors_.Add(Path(path, "step"), "must be a duration of 1m or more that divides a day");
      } else {
        series.step = absl::Nanoseconds(*step);
      }
      const YAML::Node values = kv.second["gPerKwh"];
      if (!values || !values.IsSequence() || values.size() == 0) {
        errors_.Add(Path(path, "gPerKwh"), "required: the intensities, oldest first");
        continue;
      }
      if (!Count(values.size(), Path(path, "gPerKwh"))) continue;
      for (size_t i = 0; i < values.size(); ++i) {
        const double v = Number(values[i]);
        if (!std::isfinite(v) || v < 0 || v > 5000) {
          errors_.Add(absl::StrCat(path, ".gPerKwh[", i, "]"),
                      "must be an intensity in 0..5000 gCO2eq/kWh");
          break;
        }
        series.g_per_kwh.push_back(v);
      }
      out.carbon[region] = std::move(series);
    }
  }

  // policies.<name>: {enabled: true|false}, kept in `enabled` when present.
  void ReadSwitch(const YAML::Node& policies, const std::string& name, bool& enabled) {
    const YAML::Node policy = policies[name];
    if (!policy) return;
    const std::string path = Path("policies", name);
    if (!policy.IsMap()) {
      errors_.Add(path, "must be a mapping");
      return;
    }
    Known(policy, path, {"enabled"});
    enabled = Enabled(policy, path);
  }

  void ReadPolicies(const YAML::Node& policies, PolicyBundle& out) {
    if (!policies.IsMap()) {
      errors_.Add("policies", "must be a mapping");
      return;
    }
    Known(policies, "policies", {"residency", "latency", "placeable", "carbon"});
    ReadSwitch(policies, "carbon", out.carbon_enabled);
    ReadSwitch(policies, "latency", out.latency_enabled);
    ReadSwitch(policies, "placeable", out.placeable_enabled);
    const YAML::Node residency = policies["residency"];
    if (!residency) return;
    if (!residency.IsMap()) {
      errors_.Add("policies.residency", "must be a mapping");
      return;
    }
    Known(residency, "policies.residency", {"rules"});
    const YAML::Node rules = residency["rules"];
    if (!rules) return;
    if (!rules.IsSequence()) {
      errors_.Add("policies.residency.rules", "must be a list");
      return;
    }
    if (!Count(rules.size(), "policies.residency.rules")) return;
    for (size_t i = 0; i < rules.size(); ++i) {
      const std::string path = absl::StrCat("policies.residency.rules[", i, "]");
      if (!rules[i].IsMap()) {
        errors_.Add(path, "must be a mapping");
        continue;
      }
      Known(rules[i], path, {"name", "selector", "countries"});
      ResidencyRule rule;
      rule.name = Scalar(rules[i], "name", path);
      if (rule.name.empty()) errors_.Add(Path(path, "name"), "required");
      if (const YAML::Node sel = rules[i]["selector"]) {
        if (!sel.IsMap()) {
          errors_.Add(Path(path, "selector"), "must map label keys to values");
        } else {
          for (const auto& kv : sel) {
            if (!kv.first.IsScalar() || !kv.second.IsScalar()) {
              errors_.Add(Path(path, "selector"), "must map label keys to values");
              continue;
            }
            rule.selector[kv.first.Scalar()] = kv.second.Scalar();
          }
        }
      }
      const YAML::Node countries = rules[i]["countries"];
      if (!countries || !countries.IsSequence() || countries.size() == 0) {
        errors_.Add(Path(path, "countries"), "required: a list of ISO 3166 alpha-2 codes");
      } else if (Count(countries.size(), Path(path, "countries"))) {
        for (size_t c = 0; c < countries.size(); ++c) {
          const std::string code = countries[c].IsScalar() ? countries[c].Scalar() : "";
          if (!IsCountryCode(code)) {
            errors_.Add(absl::StrCat(path, ".countries[", c, "]"),
                        "must be an ISO 3166 alpha-2 code such as DE");
          }
          rule.countries.push_back(code);
        }
      }
      out.residency.push_back(std::move(rule));
    }
  }

  FieldErrors& errors_;
  const PolicyBundleLimits& limits_;
};

absl::Status Refuse(const std::string& policy, const std::string& field,
                    const std::string& message) {
  return absl::FailedPreconditionError(
      absl::StrCat("admission policy \"", policy, "\": ", field, ": ", message));
}

// Records changes to the spec's intents as JSON Patch operations.
class Patch {
 public:
  explicit Patch(bool had_intents) : intents_exist_(had_intents) {}
  void SetIntentsField(const std::string& json_name, const nlohmann::json& value) {
    if (!intents_exist_) {
      ops_.push_back({{"op", "add"}, {"path", "/intents"}, {"value", {{json_name, value}}}});
      intents_exist_ = true;
      return;
    }
    ops_.push_back({{"op", "add"}, {"path", "/intents/" + json_name}, {"value", value}});
  }
  // Records `ops` as they were applied; `intents_exist` tells whether the
  // spec has intents after them.
  void Append(const nlohmann::json& ops, bool intents_exist) {
    for (const nlohmann::json& op : ops) ops_.push_back(op);
    intents_exist_ = intents_exist;
  }
  std::string Json() const { return ops_.empty() ? "" : ops_.dump(); }

 private:
  bool intents_exist_;
  nlohmann::json ops_ = nlohmann::json::array();
};

std::string Listed(const std::vector<std::string>& items, size_t most = 20) {
  if (items.size() <= most) return absl::StrJoin(items, ", ");
  std::vector<std::string> head(items.begin(), items.begin() + static_cast<long>(most));
  return absl::StrCat(absl::StrJoin(head, ", "), " and ", items.size() - most, " more");
}

// True when `list` is empty (no constraint) or holds `value`.
template <typename List>
bool Allows(const List& list, const std::string& value) {
  return list.empty() || std::find(list.begin(), list.end(), value) != list.end();
}

// Whether `intents` let an application run in `country` ("" = unknown,
// which no allowedCountries admits), and in `region` of that country.
bool CountryAllowed(const v1::Intents& intents, const std::string& country) {
  return intents.allowed_countries().empty() ||
         (!country.empty() && Allows(intents.allowed_countries(), country));
}
bool RegionAllowed(const v1::Intents& intents, const std::string& region,
                   const std::string& country) {
  return Allows(intents.allowed_regions(), region) && CountryAllowed(intents, country);
}

// The country of `region` as known, or "".
std::string CountryOf(const std::map<std::string, std::string>& region_country,
                      const std::string& region) {
  auto it = region_country.find(region);
  return it == region_country.end() ? "" : it->second;
}

// The region a registered cluster stands for: its label, or (without one)
// a region of its own named after it.
const std::string& RegionOf(const RegisteredCluster& cluster) {
  return cluster.region.empty() ? cluster.name : cluster.region;
}

// The carbon policy: a delay-tolerant spec (duration and deadline) gets the
// region and start with the lowest forecast emissions among the eligible
// regions with a carbon series. Refuses a run that cannot end by its
// deadline; warns when it cannot act.
absl::Status ScheduleCarbon(const PolicyBundle& bundle, SeasonalRegressionForecaster& forecaster,
                            absl::Time now,
                            const std::map<std::string, std::string>& region_country,
                            const std::vector<RegisteredCluster>& clusters, v1::Intents& intents,
                            Patch& patch, std::vector<std::string>& warnings) {
  auto not_acted_on = [&](const std::string& field, const std::string& why) {
    warnings.push_back(
        absl::StrCat("admission policy \"carbon\": ", field, ": not acted on (", why, ")"));
    return absl::OkStatus();
  };
  if (!bundle.carbon_enabled) return not_acted_on("spec.intents.deadline", "policy disabled");
  if (!intents.has_deadline()) return not_acted_on("spec.intents.duration", "no deadline");
  if (intents.expected_duration_ns() <= 0) {
    return not_acted_on("spec.intents.deadline", "no intents.duration");
  }
  CarbonJob job;
  job.duration = absl::Nanoseconds(intents.expected_duration_ns());
  job.release = now;
  job.deadline = FromProtoTimestamp(intents.deadline());
  if (now + job.duration > job.deadline) {
    return Refuse("carbon", "spec.intents.deadline",
                  absl::StrCat("a ", absl::FormatDuration(job.duration), " run started now (",
                               absl::FormatTime(absl::RFC3339_sec, now, absl::UTCTimeZone()),
                               ") ends after it"));
  }
  if (bundle.carbon.empty()) {
    return not_acted_on("spec.intents.deadline", "the policy bundle has no carbon series");
  }
  std::set<std::string> with_clusters;
  for (const RegisteredCluster& c : clusters) with_clusters.insert(RegionOf(c));
  std::vector<CarbonRegionOption> options;
  for (const auto& [region, series] : bundle.carbon) {
    if (!RegionAllowed(intents, region, CountryOf(region_country, region))) continue;
    if (!with_clusters.empty() && !with_clusters.count(region)) continue;  // nowhere to run
    const int64_t known = series.IntervalsBefore(now);
    if (known == 0) continue;
    const int64_t need = WholeSteps(
        job.deadline - series.TimeOf(known) + series.step - absl::Nanoseconds(1), series.step);
    const int horizon = static_cast<int>(std::clamp<int64_t>(need, 1, kMaxCarbonHorizon));
    absl::StatusOr<CarbonForecast> f = forecaster.Forecast(
        region, absl::MakeConstSpan(series.g_per_kwh).subspan(0, static_cast<size_t>(known)),
        series.step, horizon);
    if (!f.ok()) continue;
    options.push_back({region, series.TimeOf(known), series.step, std::move(f->g_per_kwh)});
  }
  if (options.empty()) {
    return not_acted_on("spec.intents.deadline",
                        "no eligible region has a carbon series up to now and a cluster");
  }
  absl::StatusOr<CarbonChoice> choice = ChooseRegionAndStart(job, now, options);
  if (!choice.ok()) {
    return not_acted_on("spec.intents.deadline", std::string(choice.status().message()));
  }
  intents.clear_allowed_regions();
  intents.add_allowed_regions(choice->region);
  patch.SetIntentsField("allowedRegions", std::vector<std::string>{choice->region});
  std::string when = "now";
  if (choice->start > now) {
    *intents.mutable_earliest_start_time() = ToProtoTimestamp(choice->start);
    when = absl::FormatTime(absl::RFC3339_sec, choice->start, absl::UTCTimeZone());
    patch.SetIntentsField("earliestStartTime", when);
  }
  warnings.push_back(absl::StrFormat(
      "admission policy \"carbon\": runs in %s from %s, forecast %.0f gCO2eq/kWh over its "
      "run (spec.intents.allowedRegions, earliestStartTime)",
      choice->region, when, choice->mean_g_per_kwh));
  return absl::OkStatus();
}

// Reads a list of strings at `path`.
absl::Status Strings(const nlohmann::json& list, const std::string& path,
                     std::vector<std::string>& out) {
  if (!list.is_array()) return InvalidFieldError(path, "must be an array of strings");
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string()) {
      return InvalidFieldError(absl::StrCat(path, "[", i, "]"), "must be a string");
    }
    out.push_back(list[i].get<std::string>());
  }
  return absl::OkStatus();
}

constexpr char kExternalPolicy[] = "webhook";

// Asks `external` about `out.spec`: refuses as it decides, or applies its
// patch to `out.spec` and records it in `patch`.
absl::Status AskExternal(const ExternalPolicy& external,
                         const google::protobuf::Map<std::string, std::string>& labels,
                         AdmissionOutcome& out, Patch& patch) {
  const std::string source = external.port->Name();
  std::string spec_json;
  if (!google::protobuf::util::MessageToJsonString(out.spec, &spec_json).ok()) {
    return absl::InternalError("the spec does not convert to JSON");
  }
  const nlohmann::json spec_doc = nlohmann::json::parse(spec_json);
  nlohmann::json input = {{"spec", spec_doc},
                          {"labels", nlohmann::json::object()},
                          {"policyBundleVersion", out.bundle_version}};
  for (const auto& [k, v] : labels) input["labels"][k] = v;
  const std::string request = nlohmann::json{{"input", std::move(input)}}.dump();

  // Whatever keeps a decision from being had goes through here.
  auto without_decision = [&](const absl::Status& why) -> absl::Status {
    if (!external.refuse_without_decision) {
      out.warnings.push_back(absl::StrCat("admission policy \"", kExternalPolicy,
                                          "\": no decision from ", source, " (", why.message(),
                                          "); admitted without it"));
      return absl::OkStatus();
    }
    return absl::UnavailableError(absl::StrCat("admission policy \"", kExternalPolicy,
                                               "\": no decision from ", source, ": ",
                                               why.message()));
  };
  absl::StatusOr<std::string> body = external.port->Query(request);
  if (!body.ok()) return without_decision(body.status());
  absl::StatusOr<ExternalDecision> decision = ParseExternalDecision(*body);
  if (!decision.ok()) return without_decision(decision.status());
  for (const std::string& w : decision->warnings) {
    out.warnings.push_back(
        absl::StrCat("admission policy \"", kExternalPolicy, "\" (", source, "): ", w));
  }
  if (!decision->allow) {
    if (decision->reasons.empty()) {
      return Refuse(kExternalPolicy, "spec", absl::StrCat("refused by ", source));
    }
    std::vector<std::string> rest;
    for (size_t i = 1; i < decision->reasons.size(); ++i) {
      rest.push_back(absl::StrCat(decision->reasons[i].first, ": ", decision->reasons[i].second));
    }
    return Refuse(kExternalPolicy, decision->reasons[0].first,
                  absl::StrCat(decision->reasons[0].second,
                               rest.empty() ? "" : absl::StrCat("; ", absl::StrJoin(rest, "; ")),
                               " (decided by ", source, ")"));
  }
  if (decision->patch_json.empty()) return absl::OkStatus();

  // The patch applies to the spec's JSON, and what it makes must be a
  // valid spec of the same application.
  const nlohmann::json ops = nlohmann::json::parse(decision->patch_json);
  v1::ApplicationSpec patched;
  try {
    const std::string text = spec_doc.patch(ops).dump();
    google::protobuf::util::JsonParseOptions strict;
    const auto parsed = google::protobuf::util::JsonStringToMessage(text, &patched, strict);
    if (!parsed.ok()) {
      return without_decision(InvalidFieldError(
          "result.patch", absl::StrCat("makes a spec that does not read: ", parsed.ToString())));
    }
  } catch (const nlohmann::json::exception& e) {
    return without_decision(
        InvalidFieldError("result.patch", absl::StrCat("does not apply: ", e.what())));
  }
  if (patched.app_name() != out.spec.app_name()) {
    return without_decision(InvalidFieldError("result.patch", "must not change appName"));
  }
  if (absl::Status valid = ValidateApplicationSpec(patched); !valid.ok()) {
    return without_decision(InvalidFieldError(
        "result.patch", absl::StrCat("makes an invalid spec: ", valid.message())));
  }
  std::vector<std::string> paths;
  for (const nlohmann::json& op : ops) paths.push_back(op.value("path", ""));
  out.warnings.push_back(absl::StrCat("admission policy \"", kExternalPolicy, "\" (", source,
                                      "): changed ", Listed(paths)));
  out.spec = std::move(patched);
  patch.Append(ops, out.spec.has_intents());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ExternalDecision> ParseExternalDecision(const std::string& body) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception&) {
    return InvalidFieldError("answer", absl::StrCat("is not JSON: ", PrintableExcerpt(body)));
  }
  if (!doc.is_object()) return InvalidFieldError("answer", "must be a JSON object");
  if (!doc.contains("result")) {
    return InvalidFieldError("result", "is missing: the decision is undefined");
  }
  const nlohmann::json& result = doc["result"];
  ExternalDecision decision;
  if (result.is_boolean()) {
    decision.allow = result.get<bool>();
    return decision;
  }
  if (!result.is_object()) return InvalidFieldError("result", "must be a boolean or an object");
  if (!result.contains("allow") || !result["allow"].is_boolean()) {
    return InvalidFieldError("result.allow", "is required and must be a boolean");
  }
  decision.allow = result["allow"].get<bool>();
  for (const auto& [key, value] : result.items()) {
    if (key == "allow") continue;
    if (key == "warnings") {
      RETURN_IF_ERROR(Strings(value, "result.warnings", decision.warnings));
    } else if (key == "reasons") {
      if (!value.is_array()) return InvalidFieldError("result.reasons", "must be an array");
      for (size_t i = 0; i < value.size(); ++i) {
        const std::string path = absl::StrCat("result.reasons[", i, "]");
        const nlohmann::json& r = value[i];
        if (r.is_string()) {
          decision.reasons.emplace_back("spec", r.get<std::string>());
        } else if (r.is_object() && r.contains("message") && r["message"].is_string() &&
                   (!r.contains("field") || r["field"].is_string())) {
          const std::string field = r.value("field", "");
          decision.reasons.emplace_back(field.empty() ? "spec" : field,
                                        r["message"].get<std::string>());
        } else {
          return InvalidFieldError(
              path, "must be a string or an object with a string message (and field)");
        }
      }
    } else if (key == "patch") {
      if (!value.is_array()) return InvalidFieldError("result.patch", "must be an array");
      for (size_t i = 0; i < value.size(); ++i) {
        const nlohmann::json& op = value[i];
        if (!op.is_object() || !op.contains("op") || !op["op"].is_string() ||
            !op.contains("path") || !op["path"].is_string()) {
          return InvalidFieldError(absl::StrCat("result.patch[", i, "]"),
                                   "must be an object with string op and path");
        }
      }
      if (!value.empty()) decision.patch_json = value.dump();
    } else {
      decision.warnings.push_back(absl::StrCat("result.", key, ": not a decision field; ignored"));
    }
  }
  if (!decision.allow && !decision.patch_json.empty()) {
    decision.warnings.push_back("result.patch: ignored, the spec is refused");
    decision.patch_json.clear();
  }
  return decision;
}

// A bundle over `limits.max_bytes` is refused before anything reads it.
absl::Status CheckBundleSize(const std::string& yaml, const PolicyBundleLimits& limits) {
  if (yaml.size() <= limits.max_bytes) return absl::OkStatus();
  return InvalidFieldError(
      "bundle", absl::StrCat("is ", yaml.size(), " bytes, over the limit of ", limits.max_bytes));
}

absl::StatusOr<PolicyBundle> ParsePolicyBundle(const std::string& yaml,
                                               const PolicyBundleLimits& limits) {
  RETURN_IF_ERROR(CheckBundleSize(yaml, limits));
  ASSIGN_OR_RETURN(
      YAML::Node root,
      LoadBoundedYaml(yaml, {limits.max_bytes, limits.max_depth, limits.max_nodes}, "bundle"));
  FieldErrors errors;
  PolicyBundle bundle;
  BundleReader(errors, limits).Read(root, bundle);
  RETURN_IF_ERROR(errors.ToStatus());
  return bundle;
}

absl::Status InstallSignedBundle(AdmissionChain& chain, const std::string& bundle_yaml,
                                 const std::string& signature_base64,
                                 const std::string& public_key_pem,
                                 const PolicyBundleLimits& limits) {
  RETURN_IF_ERROR(CheckBundleSize(bundle_yaml, limits));
  RETURN_IF_ERROR(VerifyBundleSignature(bundle_yaml, signature_base64, public_key_pem));
  ASSIGN_OR_RETURN(PolicyBundle bundle, ParsePolicyBundle(bundle_yaml, limits));
  chain.Install(std::move(bundle));
  return absl::OkStatus();
}

AdmissionChain::AdmissionChain(ClusterSource registered, const Clock* clock,
                               ExternalPolicy external)
    : registered_(std::move(registered)),
      clock_(clock != nullptr ? *clock : RealClock::Default()),
      external_(std::move(external)),
      installed_(std::make_shared<const Installed>()) {}

void AdmissionChain::Install(PolicyBundle bundle) {
  auto installed = std::make_shared<Installed>();
  installed->bundle = std::move(bundle);
  {
    // Trained here, on the installing thread, so that the first admission
    // does not pay for a year of history.
    absl::MutexLock forecast_lock(&installed->forecast_mu);
    const absl::Time now = clock_.Now();
    for (const auto& [region, series] : installed->bundle.carbon) {
      const int64_t known = series.IntervalsBefore(now);
      if (known == 0) continue;
      installed->forecaster
          .Forecast(region,
                    absl::MakeConstSpan(series.g_per_kwh).subspan(0, static_cast<size_t>(known)),
                    series.step, 1)
          .IgnoreError();
    }
  }
  absl::MutexLock lock(&mu_);
  installed_ = std::move(installed);
}

std::string AdmissionChain::version() const {
  absl::MutexLock lock(&mu_);
  return installed_->bundle.version;
}

absl::StatusOr<AdmissionOutcome> AdmissionChain::Admit(
    const v1::ApplicationSpec& spec,
    const google::protobuf::Map<std::string, std::string>& labels) const {
  std::shared_ptr<const Installed> installed;
  {
    absl::MutexLock lock(&mu_);
    installed = installed_;
  }
  const PolicyBundle* bundle = &installed->bundle;
  AdmissionOutcome out;
  out.spec = spec;
  out.bundle_version = bundle->version;
  Patch patch(spec.has_intents());
  // external: the organisation's own decision endpoint, before the built-ins
  if (external_.port != nullptr) RETURN_IF_ERROR(AskExternal(external_, labels, out, patch));
  const bool had_intents = out.spec.has_intents();
  v1::Intents& intents = *out.spec.mutable_intents();

  // What codeco knows of regions: the bundle's, then the registered clusters'.
  std::map<std::string, std::string> region_country;
  for (const KnownRegion& r : bundle->regions) region_country[r.name] = r.country;
  std::vector<RegisteredCluster> clusters;
  if (registered_) clusters = registered_();
  for (const RegisteredCluster& c : clusters) {
    // A cluster without a region label stands for a region of its own.
    std::string& country = region_country[RegionOf(c)];
    if (country.empty()) country = c.country;
  }

  // residency
  for (const ResidencyRule& rule : bundle->residency) {
    const bool selected =
        std::all_of(rule.selector.begin(), rule.selector.end(), [&](const auto& kv) {
          auto it = labels.find(kv.first);
          return it != labels.end() && it->second == kv.second;
        });
    if (!selected) continue;
    if (intents.allowed_countries().empty()) {
      for (const std::string& c : rule.countries) intents.add_allowed_countries(c);
      patch.SetIntentsField("allowedCountries", rule.countries);
      out.warnings.push_back(absl::StrCat("admission policy \"residency\" (rule \"", rule.name,
                                          "\"): spec.intents.allowedCountries set to ",
                                          Listed(rule.countries)));
      continue;
    }
    for (int i = 0; i < intents.allowed_countries_size(); ++i) {
      const std::string& c = intents.allowed_countries(i);
      if (std::find(rule.countries.begin(), rule.countries.end(), c) == rule.countries.end()) {
        return Refuse("residency", absl::StrCat("spec.intents.allowedCountries[", i, "]"),
                      absl::StrCat("\"", c, "\" is outside rule \"", rule.name, "\"'s countries (",
                                   Listed(rule.countries), ")"));
      }
    }
  }

  // latency
  if (bundle->latency_enabled && intents.max_latency_to_origin_ns() > 0 &&
      !intents.origin().empty() && !bundle->latency_ms.empty()) {
    std::string origin_region;
    for (const RegisteredCluster& c : clusters) {
      if (c.name == intents.origin()) origin_region = c.region;
    }
    if (origin_region.empty() &&
        (region_country.count(intents.origin()) || bundle->latency_ms.count(intents.origin()))) {
      origin_region = intents.origin();
    }
    if (origin_region.empty()) {
      out.warnings.push_back(
          absl::StrCat("admission policy \"latency\": spec.intents.origin: \"", intents.origin(),
                       "\" is neither a registered cluster with a region label nor a known region; "
                       "the policy did not narrow the regions"));
    } else {
      const double max_ms = static_cast<double>(intents.max_latency_to_origin_ns()) / 1e6;
      std::set<std::string> candidates;
      for (const auto& [name, country] : region_country) candidates.insert(name);
      for (const auto& [from, row] : bundle->latency_ms) {
        candidates.insert(from);
        for (const auto& [to, ms] : row) candidates.insert(to);
      }
      std::vector<std::pair<double, std::string>> eligible;
      std::pair<double, std::string> nearest_outside{-1, ""};
      auto row = bundle->latency_ms.find(origin_region);
      for (const std::string& r : candidates) {
        std::optional<double> ms;
        if (row != bundle->latency_ms.end() && row->second.count(r)) ms = row->second.at(r);
        if (!ms && r == origin_region) ms = 0;
        if (!ms) continue;
        const bool allowed = RegionAllowed(intents, r, CountryOf(region_country, r));
        if (*ms <= max_ms && allowed) {
          eligible.emplace_back(*ms, r);
        } else if (allowed && (nearest_outside.first < 0 || *ms < nearest_outside.first)) {
          nearest_outside = {*ms, r};
        }
      }
      if (eligible.empty()) {
        std::string nearest =
            nearest_outside.first >= 0
                ? absl::StrCat("; the nearest allowed region is ", nearest_outside.second, " at ",
                               nearest_outside.first, " ms")
                : "";
        return Refuse("latency", "spec.intents.maxLatencyToOrigin",
                      absl::StrCat("no allowed region lies within ", max_ms, " ms of ",
                                   origin_region, " (the origin's region)", nearest));
      }
      std::sort(eligible.begin(), eligible.end());
      std::vector<std::string> names;
      for (const auto& [ms, r] : eligible) names.push_back(r);
      std::vector<std::string> sorted_before(intents.allowed_regions().begin(),
                                             intents.allowed_regions().end());
      std::vector<std::string> sorted_names = names;
      std::sort(sorted_before.begin(), sorted_before.end());
      std::sort(sorted_names.begin(), sorted_names.end());
      if (sorted_before != sorted_names) {
        intents.clear_allowed_regions();
        for (const std::string& r : names) intents.add_allowed_regions(r);
        patch.SetIntentsField("allowedRegions", names);
        out.warnings.push_back(
            absl::StrCat("admission policy \"latency\": spec.intents.allowedRegions set to ",
                         Listed(names), " (within ", max_ms, " ms of ", origin_region, ")"));
      }
    }
  }

  // placeable
  if (bundle->placeable_enabled && !region_country.empty() &&
      (!intents.allowed_regions().empty() || !intents.allowed_countries().empty())) {
    bool any = false, any_country = false;
    std::vector<std::string> known;
    for (const auto& [name, country] : region_country) {
      known.push_back(country.empty() ? name : absl::StrCat(name, " (", country, ")"));
      any_country = any_country || CountryAllowed(intents, country);
      any = any || RegionAllowed(intents, name, country);
    }
    if (!any) {
      const bool countries_fail = !intents.allowed_countries().empty() && !any_country;
      return Refuse(
          "placeable",
          countries_fail ? "spec.intents.allowedCountries" : "spec.intents.allowedRegions",
          absl::StrCat("no known region satisfies allowedRegions [",
                       absl::StrJoin(intents.allowed_regions(), ", "), "] and allowedCountries [",
                       absl::StrJoin(intents.allowed_countries(), ", "),
                       "]; known regions: ", Listed(known)));
    }
  }
  // carbon
  if (intents.has_deadline() || intents.expected_duration_ns() > 0) {
    absl::MutexLock lock(&installed->forecast_mu);
    RETURN_IF_ERROR(ScheduleCarbon(*bundle, installed->forecaster, clock_.Now(), region_country,
                                   clusters, intents, patch, out.warnings));
  }
  if (!had_intents && out.spec.intents().ByteSizeLong() == 0) out.spec.clear_intents();
  out.json_patch = patch.Json();
  return out;
}

}  // namespace codeco::acm
