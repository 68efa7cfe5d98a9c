#include "missions.h"

#include <algorithm>
#include <iostream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/quantity.h"
#include "codeco/common/status.h"
#include "run_state.h"
#include "yaml_fields.h"

namespace codeco::ctl {
namespace {

using codef::IndexPath;
using codef::MapReader;
using codef::ReadScalar;

// A list of strings at `path` into `out`.
void ReadStringList(const YAML::Node& node, const std::string& path, FieldErrors* errors,
                    google::protobuf::RepeatedPtrField<std::string>* out) {
  if (!node.IsDefined() || node.IsNull()) return;
  if (!node.IsSequence()) {
    errors->Add(path, "must be a list of strings");
    return;
  }
  for (size_t i = 0; i < node.size(); ++i) {
    std::string value;
    if (ReadScalar(node[i], IndexPath(path, i), errors, &value)) *out->Add() = value;
  }
}

// A mapping of strings at `path` into `out`.
void ReadStringMap(const YAML::Node& node, const std::string& path, FieldErrors* errors,
                   google::protobuf::Map<std::string, std::string>* out) {
  if (!node.IsDefined() || node.IsNull()) return;
  if (!node.IsMap()) {
    errors->Add(path, "must be a mapping of strings");
    return;
  }
  for (const auto& entry : node) {
    std::string key;
    if (!ReadScalar(entry.first, path, errors, &key)) continue;
    std::string value;
    if (ReadScalar(entry.second, codef::JoinPath(path, key), errors, &value)) (*out)[key] = value;
  }
}

// Kubernetes' operator names.
constexpr std::pair<const char*, common::v1::LabelSelectorOperator> kOperators[] = {
    {"In", common::v1::LABEL_SELECTOR_OPERATOR_IN},
    {"NotIn", common::v1::LABEL_SELECTOR_OPERATOR_NOT_IN},
    {"Exists", common::v1::LABEL_SELECTOR_OPERATOR_EXISTS},
    {"DoesNotExist", common::v1::LABEL_SELECTOR_OPERATOR_DOES_NOT_EXIST},
};

void ReadPlacement(const YAML::Node& node, const std::string& path, FieldErrors* errors,
                   acm::v1::MissionPlacement* placement) {
  MapReader map(node, path, errors);
  if (!map.valid()) {
    if (!node.IsDefined() || node.IsNull()) errors->Add(path, "is required");
    return;
  }
  ReadStringList(map.Get("clusters"), map.PathOf("clusters"), errors,
                 placement->mutable_clusters());
  common::v1::LabelSelector selected;
  ReadStringMap(map.Get("matchLabels"), map.PathOf("matchLabels"), errors,
                selected.mutable_match_labels());
  YAML::Node expressions = map.Get("matchExpressions");
  const std::string expressions_path = map.PathOf("matchExpressions");
  if (expressions.IsDefined() && !expressions.IsNull() && !expressions.IsSequence()) {
    errors->Add(expressions_path, "must be a list of {key, operator, values}");
  } else if (expressions.IsSequence()) {
    for (size_t i = 0; i < expressions.size(); ++i) {
      MapReader term(expressions[i], IndexPath(expressions_path, i), errors);
      if (!term.valid()) {
        // MapReader said what is wrong with anything but an empty entry.
        if (expressions[i].IsNull()) errors->Add(term.path(), "must be {key, operator, values}");
        continue;
      }
      common::v1::LabelSelectorRequirement* req = selected.add_match_expressions();
      if (!term.Has("key")) {
        errors->Add(term.PathOf("key"), "is required");
      } else {
        std::string key;
        if (ReadScalar(term.Get("key"), term.PathOf("key"), errors, &key)) req->set_key(key);
      }
      std::string op;
      if (!term.Has("operator")) {
        errors->Add(term.PathOf("operator"), "is required (In, NotIn, Exists or DoesNotExist)");
      } else if (ReadScalar(term.Get("operator"), term.PathOf("operator"), errors, &op)) {
        for (const auto& [name, value] : kOperators) {
          if (op == name) req->set_op(value);
        }
        if (req->op() == common::v1::LABEL_SELECTOR_OPERATOR_UNSPECIFIED) {
          errors->Add(term.PathOf("operator"),
                      absl::StrCat("must be In, NotIn, Exists or DoesNotExist: \"", op, "\""));
        }
      }
      ReadStringList(term.Get("values"), term.PathOf("values"), errors, req->mutable_values());
      term.Finish();
    }
  }
  map.Finish();
  if (!selected.match_labels().empty() || !selected.match_expressions().empty()) {
    *placement->mutable_selector() = std::move(selected);
  } else if (placement->clusters().empty()) {
    errors->Add(path,
                "names no cluster and selects none: give clusters, matchLabels or "
                "matchExpressions");
  }
}

void ReadContainer(const YAML::Node& node, const std::string& path, FieldErrors* errors,
                   lms::v1::Container* container) {
  MapReader map(node, path, errors);
  if (!map.valid()) {
    if (node.IsNull()) errors->Add(path, "must be a container {name, image, ...}");
    return;
  }
  auto required = [&](const std::string& key, std::string* out) {
    if (!map.Has(key)) {
      errors->Add(map.PathOf(key), "is required");
    } else if (ReadScalar(map.Get(key), map.PathOf(key), errors, out) && out->empty()) {
      errors->Add(map.PathOf(key), "must not be empty");
    }
  };
  required("name", container->mutable_name());
  required("image", container->mutable_image());
  ReadStringList(map.Get("command"), map.PathOf("command"), errors, container->mutable_command());
  ReadStringList(map.Get("args"), map.PathOf("args"), errors, container->mutable_args());
  ReadStringMap(map.Get("env"), map.PathOf("env"), errors, container->mutable_env());
  MapReader resources(map.Get("resources"), map.PathOf("resources"), errors);
  if (resources.valid()) {
    int64_t value = 0;
    if (resources.Has("cpu") && codef::ReadParsed(resources.Get("cpu"), resources.PathOf("cpu"),
                                                  errors, ParseCpuMillicores, &value)) {
      container->mutable_requests()->set_cpu_millicores(value);
    }
    if (resources.Has("memory") &&
        codef::ReadParsed(resources.Get("memory"), resources.PathOf("memory"), errors, ParseBytes,
                          &value)) {
      container->mutable_requests()->set_memory_bytes(value);
    }
    resources.Finish();
  }
  map.Finish();
}

void ReadWorkload(const YAML::Node& node, const std::string& path, FieldErrors* errors,
                  acm::v1::MissionWorkload* workload) {
  MapReader map(node, path, errors);
  if (!map.valid()) {
    if (!node.IsDefined() || node.IsNull()) errors->Add(path, "is required");
    return;
  }
  workload->set_replicas(1);
  if (map.Has("replicas")) {
    int64_t replicas = 0;
    if (codef::ReadInt(map.Get("replicas"), map.PathOf("replicas"), errors, &replicas)) {
      if (replicas < 1 || replicas > INT32_MAX) {
        errors->Add(map.PathOf("replicas"), absl::StrCat("must be 1 or more, not ", replicas));
      } else {
        workload->set_replicas(static_cast<int32_t>(replicas));
      }
    }
  }
  ReadStringMap(map.Get("labels"), map.PathOf("labels"), errors, workload->mutable_labels());
  YAML::Node containers = map.Get("containers");
  const std::string containers_path = map.PathOf("containers");
  if (!containers.IsSequence() || containers.size() == 0) {
    errors->Add(containers_path, "must be a non-empty list of containers");
  } else {
    for (size_t i = 0; i < containers.size(); ++i) {
      ReadContainer(containers[i], IndexPath(containers_path, i), errors,
                    workload->add_containers());
    }
  }
  map.Finish();
}

absl::StatusOr<acm::v1::Mission> ParseUnguarded(const std::string& yaml_text) {
  ASSIGN_OR_RETURN(YAML::Node root, codef::ParseYaml(yaml_text, "(document)"));
  if (!root.IsMap()) return InvalidFieldError("(document)", "must be a mapping");
  FieldErrors errors;
  MapReader top(root, "", &errors);
  acm::v1::Mission mission;
  for (const auto& [key, want] :
       {std::pair<std::string, std::string>{"apiVersion", kMissionApiVersion},
        std::pair<std::string, std::string>{"kind", kMissionKind}}) {
    std::string value;
    if (!top.Has(key)) {
      errors.Add(key, absl::StrCat("is required (", want, ")"));
    } else if (ReadScalar(top.Get(key), key, &errors, &value) && value != want) {
      errors.Add(key, absl::StrCat("must be ", want, ", not \"", value, "\""));
    }
  }
  MapReader metadata(top.Get("metadata"), "metadata", &errors);
  if (!metadata.valid()) {
    if (!top.Has("metadata")) errors.Add("metadata", "is required (metadata.name)");
  } else {
    std::string name;
    if (!metadata.Has("name")) {
      errors.Add("metadata.name", "is required");
    } else if (ReadScalar(metadata.Get("name"), "metadata.name", &errors, &name)) {
      mission.mutable_metadata()->set_name(name);
    }
    ReadStringMap(metadata.Get("labels"), "metadata.labels", &errors,
                  mission.mutable_metadata()->mutable_labels());
    metadata.Finish();
  }
  MapReader spec(top.Get("spec"), "spec", &errors);
  if (!spec.valid()) {
    if (!top.Has("spec")) errors.Add("spec", "is required (spec.placement, spec.workload)");
  } else {
    ReadPlacement(spec.Get("placement"), "spec.placement", &errors, mission.mutable_placement());
    ReadWorkload(spec.Get("workload"), "spec.workload", &errors, mission.mutable_workload());
    spec.Finish();
  }
  top.Finish();
  RETURN_IF_ERROR(errors.ToStatus());
  return mission;
}

std::string PhaseText(acm::v1::MissionPhase phase) {
  if (phase == acm::v1::MISSION_PHASE_UNSPECIFIED) return "-";
  return EnumText(acm::v1::MissionPhase_Name(phase), "MISSION_PHASE_");
}

// `text` on one line.
std::string OneLine(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

// The ACM that `get missions` asks: --acm, else --cluster's own, else the hub's.
absl::StatusOr<std::unique_ptr<acm::v1::AcmService::Stub>> MissionsAcm(const Args& args) {
  if (!args.Has("cluster") || args.Has("acm")) return AcmStub(args);
  auto state = LoadRunState();
  if (!state.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(state.status().message(), "; pass --acm ADDRESS"));
  }
  for (const auto& [cluster, address] : ServiceAddresses(*state, "acm")) {
    if (cluster != args.Get("cluster")) continue;
    auto channel = ChannelTo(address, args);
    if (!channel.ok()) return channel.status();
    return acm::v1::AcmService::NewStub(*channel);
  }
  return absl::NotFoundError(absl::StrCat("--cluster: no ACM of cluster \"", args.Get("cluster"),
                                          "\" in this federation"));
}

}  // namespace

absl::StatusOr<acm::v1::Mission> ParseMissionManifest(const std::string& yaml_text) {
  // The readers check node kinds before use; this is the last line of
  // defence so that no input can crash codecoctl.
  try {
    return ParseUnguarded(yaml_text);
  } catch (const YAML::Exception& e) {
    return InvalidFieldError("(document)", absl::StrCat("unreadable YAML: ", e.what()));
  }
}

std::string MissionApplyLine(const acm::v1::ApplyMissionResponse& response) {
  const char* outcome = response.created()   ? "created"
                        : response.changed() ? "configured"
                                             : "unchanged";
  return absl::StrCat("mission/", response.mission().metadata().name(), " ", outcome,
                      " (generation ", response.mission().generation(), ")");
}

std::string AgeText(absl::Time then, absl::Time now) {
  if (then == absl::UnixEpoch()) return "-";
  const int64_t seconds = std::max<int64_t>(0, absl::ToInt64Seconds(now - then));
  if (seconds < 120) return absl::StrCat(seconds, "s");
  if (seconds < 120 * 60) return absl::StrCat(seconds / 60, "m");
  if (seconds < 48 * 3600) return absl::StrCat(seconds / 3600, "h");
  return absl::StrCat(seconds / 86400, "d");
}

std::string MissionsTable(const acm::v1::ListMissionsResponse& missions, absl::Time now) {
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "GENERATION", "CLUSTERS", "RUNNING", "PENDING", "FAILED", "AGE"}};
  for (const acm::v1::Mission& m : missions.missions()) {
    int running = 0, pending = 0, failed = 0;
    for (const acm::v1::MissionClusterStatus& s : m.status()) {
      // Running an older generation is not running this one.
      if (s.phase() == acm::v1::MISSION_PHASE_RUNNING &&
          (s.generation() == 0 || s.generation() >= m.generation())) {
        ++running;
      }
      if (s.phase() == acm::v1::MISSION_PHASE_PENDING) ++pending;
      if (s.phase() == acm::v1::MISSION_PHASE_FAILED) ++failed;
    }
    rows.push_back({m.metadata().name(), absl::StrCat(m.generation()),
                    absl::StrCat(m.status_size()), absl::StrCat(running, "/", m.status_size()),
                    absl::StrCat(pending), absl::StrCat(failed),
                    AgeText(FromProtoTimestamp(m.metadata().create_time()), now)});
  }
  return Columns(rows);
}

std::string MissionClustersTable(const acm::v1::Mission& mission, absl::Time now) {
  std::vector<const acm::v1::MissionClusterStatus*> by_name;
  for (const auto& s : mission.status()) by_name.push_back(&s);
  std::stable_sort(by_name.begin(), by_name.end(),
                   [](const auto* a, const auto* b) { return a->cluster() < b->cluster(); });
  std::vector<std::vector<std::string>> rows = {
      {"CLUSTER", "PHASE", "GENERATION", "PODS", "REPORTED", "MESSAGE"}};
  for (const acm::v1::MissionClusterStatus* s : by_name) {
    const std::string reported = AgeText(FromProtoTimestamp(s->report_time()), now);
    rows.push_back({s->cluster(), PhaseText(s->phase()),
                    s->generation() == 0 ? "-" : absl::StrCat(s->generation()),
                    absl::StrCat(s->running_pods(), "/", s->desired_pods()),
                    reported == "-" ? reported : reported + " ago",
                    s->message().empty() ? "-" : OneLine(s->message())});
  }
  return Columns(rows);
}

bool ApplyMissionDocument(acm::v1::AcmService::Stub& acm, const std::string& file,
                          const ManifestDocument& doc, bool several, const Args& args,
                          Output output) {
  const std::string where =
      absl::StrCat(file, several ? absl::StrCat(" (document ", doc.index, ")") : "");
  absl::StatusOr<acm::v1::Mission> mission = ParseMissionManifest(doc.text);
  if (!mission.ok()) {
    std::cerr << "codecoctl apply: " << where << " is not a valid mission:\n"
              << mission.status().message() << "\n";
    return false;
  }
  const std::string& name = mission->metadata().name();
  if (args.Has("dry-run")) {
    // ApplyMission has no dry run: only this parse ran.
    if (output != Output::kTable) {
      std::cout << Print(*mission, output);
    } else {
      std::cout << "mission/" << name << " parsed (dry run: not sent; the hub ACM checks the "
                << "rest when it is applied)\n";
    }
    return true;
  }
  acm::v1::ApplyMissionRequest request;
  *request.mutable_mission() = *std::move(mission);
  acm::v1::ApplyMissionResponse response;
  auto context = ContextWithTimeout(args, absl::Seconds(30));
  grpc::Status status = acm.ApplyMission(context.get(), request, &response);
  if (!status.ok()) {
    std::cerr << "codecoctl apply: " << where << " (mission/" << name << ") was refused ("
              << status.error_code() << "):\n"
              << status.error_message() << "\n";
    return false;
  }
  if (output != Output::kTable) {
    std::cout << Print(response, output);
    return true;
  }
  std::cout << MissionApplyLine(response) << "\n";
  if (args.Has("wait")) {
    std::cout << "nothing to wait for: its clusters take it with their next heartbeat "
              << "(codecoctl get mission " << name << ")\n";
  }
  return true;
}

bool DeleteMissionNamed(acm::v1::AcmService::Stub& acm, const std::string& name, const Args& args) {
  acm::v1::DeleteMissionRequest request;
  request.set_name(name);
  acm::v1::DeleteMissionResponse response;
  auto context = ContextWithTimeout(args, absl::Seconds(10));
  grpc::Status status = acm.DeleteMission(context.get(), request, &response);
  if (!status.ok()) {
    std::cerr << "codecoctl delete: mission/" << name << ": " << status.error_message() << "\n";
    return false;
  }
  std::cout << "mission/" << name << " deleted (its clusters remove its pods)\n";
  return true;
}

int GetMissions(const Args& args, Output output) {
  if (args.positional.size() > 2) {
    return Fail("get", "usage: codecoctl get missions [NAME] [--cluster C] [-o table|yaml|json]");
  }
  for (const char* flag : {"wait", "from", "swm", "app", "all"}) {
    if (args.Has(flag)) return Fail("get", FlagName(flag) + ": does not apply to get missions");
  }
  auto stub = MissionsAcm(args);
  if (!stub.ok()) return Fail("get", std::string(stub.status().message()));
  if (args.positional.size() == 2) {
    acm::v1::GetMissionRequest request;
    request.set_name(args.positional[1]);
    acm::v1::GetMissionResponse got;
    auto context = ContextWithTimeout(args, absl::Seconds(10));
    grpc::Status status = (*stub)->GetMission(context.get(), request, &got);
    if (!status.ok()) return Fail("get", status.error_message());
    if (output != Output::kTable) {
      std::cout << Print(got.mission(), output);
      return 0;
    }
    acm::v1::ListMissionsResponse one;
    *one.add_missions() = got.mission();
    const absl::Time now = absl::Now();
    std::cout << MissionsTable(one, now) << "\n" << MissionClustersTable(got.mission(), now);
    return 0;
  }
  acm::v1::ListMissionsResponse all;
  acm::v1::ListMissionsRequest request;
  request.set_page_size(1000);
  while (true) {
    acm::v1::ListMissionsResponse page;
    auto context = ContextWithTimeout(args, absl::Seconds(10));
    grpc::Status status = (*stub)->ListMissions(context.get(), request, &page);
    if (!status.ok()) return Fail("get", status.error_message());
    for (auto& m : *page.mutable_missions()) *all.add_missions() = std::move(m);
    if (page.next_page_token().empty()) break;
    request.set_page_token(page.next_page_token());
  }
  std::cout << (output == Output::kTable ? MissionsTable(all, absl::Now()) : Print(all, output));
  return 0;
}

}  // namespace codeco::ctl
