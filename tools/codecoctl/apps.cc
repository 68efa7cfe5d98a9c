// The application commands of codecoctl, all through the hub ACM:
//   apply -f FILE [--dry-run] [-o table|yaml|json]   (every CodecoApp or MCD document of FILE;
//                                                     Mission documents: missions.cc)
//   get apps|clusters|tree|neighborhoods [--cluster C]|revisions NAME|missions [NAME]
//       [-o table|yaml|json]
//   describe app NAME [-o table|yaml|json]
//   delete app NAME | mission NAME | -f FILE | cluster NAME [--force]
//   rollback app NAME --to-revision N [-o table|yaml|json]
//   watch app NAME | apps [--from-revision N] [-o table|yaml|json]
// and the rendering they share (tables, YAML, JSON), kept free of I/O so the
// tests call it directly.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "cli.h"
#include "cluster_tree.h"
#include "codeco/acm/v1/acm_service.grpc.pb.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/quantity.h"
#include "codeco/swm/v1/swm_service.grpc.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "google/protobuf/util/json_util.h"
#include "missions.h"
#include "operation_wait.h"
#include "run_state.h"
#include "yaml-cpp/yaml.h"

namespace codeco::ctl {
namespace {

using acm::v1::AcmService;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

std::string PhaseName(acm::v1::ApplicationPhase phase) {
  if (phase == acm::v1::APPLICATION_PHASE_UNSPECIFIED) return "-";
  return EnumText(acm::v1::ApplicationPhase_Name(phase), "APPLICATION_PHASE_");
}

std::string LevelName(acm::v1::StatusLevel level) {
  if (level == acm::v1::STATUS_LEVEL_UNSPECIFIED) return "-";
  return EnumText(acm::v1::StatusLevel_Name(level), "STATUS_LEVEL_");
}

std::string TimeText(const google::protobuf::Timestamp& ts) {
  if (ts.seconds() == 0 && ts.nanos() == 0) return "-";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", FromProtoTimestamp(ts), absl::UTCTimeZone());
}

// "ready/wanted" pods of an application: wanted is the larger of the
// replicas the spec asks for and the placements the status lists.
std::string ReadyText(const acm::v1::Application& app) {
  int wanted = 0;
  for (const auto& s : app.spec().services()) wanted += s.replicas();
  int ready = 0;  // a job's pod that succeeded counts as ready: its work is done
  for (const auto& p : app.status().placements()) ready += p.ready() || p.succeeded() ? 1 : 0;
  wanted = std::max(wanted, app.status().placements_size());
  return absl::StrCat(ready, "/", wanted);
}

// A string YAML would read back as something else (bool, null, number) or
// that plain style cannot carry: emitted double-quoted.
bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  std::string lower = absl::AsciiStrToLower(s);
  static const std::set<std::string> kSpecial = {"true", "false", "yes", "no", "on",
                                                 "off",  "null",  "~",   "y",  "n"};
  if (kSpecial.contains(lower)) return true;
  double number;
  if (absl::SimpleAtod(s, &number)) return true;
  if (s.front() == ' ' || s.back() == ' ' || s.find('\n') != std::string::npos) return true;
  return false;
}

void EmitString(YAML::Emitter& out, const std::string& s) {
  // A block keeps multi-line text (a CAM) readable; "|" reads back with one
  // final newline, so only text that ends in exactly one uses it.
  if (s.find('\n') != std::string::npos && s.back() == '\n' &&
      (s.size() < 2 || s[s.size() - 2] != '\n') && s.find('\t') == std::string::npos) {
    out << YAML::Literal << s;
  } else if (NeedsQuotes(s)) {
    out << YAML::DoubleQuoted << s;
  } else {
    out << s;
  }
}

void EmitMessage(YAML::Emitter& out, const Message& message);

// One value of `field` (element `index` when repeated, else -1).
void EmitValue(YAML::Emitter& out, const Message& message, const FieldDescriptor* field,
               int index) {
  const Reflection* r = message.GetReflection();
  const bool rep = index >= 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      out << (rep ? r->GetRepeatedInt32(message, field, index) : r->GetInt32(message, field));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      out << (rep ? r->GetRepeatedInt64(message, field, index) : r->GetInt64(message, field));
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      out << (rep ? r->GetRepeatedUInt32(message, field, index) : r->GetUInt32(message, field));
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      out << (rep ? r->GetRepeatedUInt64(message, field, index) : r->GetUInt64(message, field));
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      out << (rep ? r->GetRepeatedDouble(message, field, index) : r->GetDouble(message, field));
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      out << (rep ? r->GetRepeatedFloat(message, field, index) : r->GetFloat(message, field));
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      out << (rep ? r->GetRepeatedBool(message, field, index) : r->GetBool(message, field));
      break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* value =
          rep ? r->GetRepeatedEnum(message, field, index) : r->GetEnum(message, field);
      out << value->name();
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string s =
          rep ? r->GetRepeatedString(message, field, index) : r->GetString(message, field);
      if (field->type() == FieldDescriptor::TYPE_BYTES) {
        out << YAML::Binary(reinterpret_cast<const unsigned char*>(s.data()), s.size());
      } else {
        EmitString(out, s);
      }
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      EmitMessage(
          out, rep ? r->GetRepeatedMessage(message, field, index) : r->GetMessage(message, field));
      break;
  }
}

// The scalar key of a map entry, as text.
std::string MapKey(const Message& entry) {
  const FieldDescriptor* key = entry.GetDescriptor()->map_key();
  const Reflection* r = entry.GetReflection();
  switch (key->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      return r->GetString(entry, key);
    case FieldDescriptor::CPPTYPE_BOOL:
      return r->GetBool(entry, key) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(r->GetInt32(entry, key));
    case FieldDescriptor::CPPTYPE_INT64:
      return absl::StrCat(r->GetInt64(entry, key));
    case FieldDescriptor::CPPTYPE_UINT32:
      return absl::StrCat(r->GetUInt32(entry, key));
    default:
      return absl::StrCat(r->GetUInt64(entry, key));
  }
}

void EmitMessage(YAML::Emitter& out, const Message& message) {
  const auto* descriptor = message.GetDescriptor();
  const std::string& type = descriptor->full_name();
  if (type == "google.protobuf.Timestamp") {
    out << TimeText(static_cast<const google::protobuf::Timestamp&>(message));
    return;
  }
  if (type == "google.protobuf.Duration") {
    const auto& d = static_cast<const google::protobuf::Duration&>(message);
    out << absl::FormatDuration(absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos()));
    return;
  }
  if (type == "google.protobuf.Any") {
    // The packed type is not known here; name it (-o json shows the content).
    const Reflection* r = message.GetReflection();
    out << YAML::BeginMap << YAML::Key << "type_url" << YAML::Value
        << r->GetString(message, descriptor->FindFieldByName("type_url")) << YAML::EndMap;
    return;
  }
  std::vector<const FieldDescriptor*> fields;
  message.GetReflection()->ListFields(message, &fields);
  out << YAML::BeginMap;
  for (const FieldDescriptor* field : fields) {
    out << YAML::Key << field->name() << YAML::Value;
    const Reflection* r = message.GetReflection();
    if (field->is_map()) {
      // Keys in order, so the output is stable.
      std::vector<std::pair<std::string, int>> entries;
      for (int i = 0; i < r->FieldSize(message, field); ++i) {
        entries.emplace_back(MapKey(r->GetRepeatedMessage(message, field, i)), i);
      }
      std::sort(entries.begin(), entries.end());
      const FieldDescriptor* value = field->message_type()->map_value();
      out << YAML::BeginMap;
      for (const auto& [key, i] : entries) {
        out << YAML::Key;
        EmitString(out, key);
        out << YAML::Value;
        EmitValue(out, r->GetRepeatedMessage(message, field, i), value, -1);
      }
      out << YAML::EndMap;
    } else if (field->is_repeated()) {
      out << YAML::BeginSeq;
      for (int i = 0; i < r->FieldSize(message, field); ++i) EmitValue(out, message, field, i);
      out << YAML::EndSeq;
    } else {
      EmitValue(out, message, field, -1);
    }
  }
  out << YAML::EndMap;
}

}  // namespace

std::string EnumText(std::string name, const std::string& prefix) {
  if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  for (size_t i = 0; i < name.size(); ++i) {
    name[i] = i == 0 ? name[i] : static_cast<char>(std::tolower(name[i]));
    if (name[i] == '_') name[i] = '-';
  }
  return name;
}

std::string Columns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string Print(const Message& message, Output output) {
  return output == Output::kJson ? ToJson(message) + "\n" : ToYaml(message);
}

absl::StatusOr<std::unique_ptr<AcmService::Stub>> AcmStub(const Args& args) {
  std::string address = args.Get("acm");
  if (!args.Has("acm")) {
    auto state = LoadRunState();
    if (!state.ok()) return state.status();
    address = state->acm;
  }
  auto channel = ChannelTo(address, args);
  if (!channel.ok()) return channel.status();
  return AcmService::NewStub(*channel);
}

namespace {

// "app NAME" (or "application NAME") positional arguments; empty on misuse.
std::string AppName(const Args& args) {
  if (args.positional.size() != 2) return "";
  const std::string& kind = args.positional[0];
  if (kind != "app" && kind != "application" && kind != "apps") return "";
  return args.positional[1];
}

// A --flag holding a whole number >= `min`; the error names the flag.
absl::StatusOr<int64_t> IntFlag(const Args& args, const std::string& name, int64_t min,
                                const std::string& what) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(args.Get(name), &value) || value < min) {
    return absl::InvalidArgumentError(
        absl::StrCat(FlagName(name), ": must be ", what, ", not \"", args.Get(name), "\""));
  }
  return value;
}

// The channels of `app` with their expected latency against the bound, from
// SWM's plan when the federation's SWM is known; empty otherwise.
std::string PlanChannels(const acm::v1::Application& app, const Args& args) {
  auto state = LoadRunState();
  if (!state.ok() || state->swm.empty()) return "";
  auto channel = ChannelTo(state->swm, args);
  if (!channel.ok()) return "";
  swm::v1::GetAssignmentPlanRequest request;
  request.set_application(app.metadata().name());
  swm::v1::GetAssignmentPlanResponse plan;
  auto context = ContextWithTimeout(args, absl::Seconds(10));
  grpc::Status s =
      swm::v1::SwmService::NewStub(*channel)->GetAssignmentPlan(context.get(), request, &plan);
  if (!s.ok() || plan.plan().channels_size() == 0) return "";
  // The lifecycle phase of each channel, as ACM recorded it from SWM.
  std::map<std::string, const acm::v1::ChannelStatus*> observed;
  for (const auto& c : app.status().channels()) observed[c.name()] = &c;
  std::vector<std::vector<std::string>> rows = {{"CHANNEL", "FROM -> TO", "PATH", "EXPECTED",
                                                 "BOUND", "STATUS", "MEASURED", "VIRTUAL LINK"}};
  std::vector<std::string> messages;
  for (const auto& c : plan.plan().channels()) {
    auto it = observed.find(c.channel());
    const acm::v1::ChannelStatus* st = it == observed.end() ? nullptr : it->second;
    std::string phase =
        st == nullptr
            ? "-"
            : std::string(absl::StripPrefix(acm::v1::ChannelPhase_Name(st->phase()), "CHANNEL_PHASE_"));
    rows.push_back({c.channel(), c.from_workload() + " -> " + c.to_workload(),
                    absl::StrJoin(c.clusters(), " -> "),
                    FormatDurationNanos(c.expected_latency_ns()),
                    c.max_delay_ns() == 0 ? "-" : FormatDurationNanos(c.max_delay_ns()), phase,
                    st == nullptr || st->delay_ns() <= 0 ? "-"
                                                         : FormatDurationNanos(st->delay_ns()),
                    c.virtual_link_id().empty() ? "-" : c.virtual_link_id()});
    if (st != nullptr && !st->message().empty()) {
      messages.push_back(absl::StrCat(c.channel(), ": ", st->message()));
    }
  }
  std::string out = absl::StrCat("Channels (plan ", plan.plan().id(), "):\n");
  std::istringstream lines(Columns(rows));
  for (std::string line; std::getline(lines, line);) out += "  " + line + "\n";
  for (const std::string& m : messages) out += "  " + m + "\n";
  return out;
}

// `delete cluster NAME [--force]`: UnregisterCluster, which drains it first.
int DeleteCluster(const std::string& name, const Args& args) {
  auto stub = AcmStub(args);
  if (!stub.ok()) return Fail("delete", std::string(stub.status().message()));
  acm::v1::UnregisterClusterRequest request;
  request.set_name(name);
  request.set_force(args.Has("force"));
  acm::v1::UnregisterClusterResponse response;
  auto context = ContextWithTimeout(args, absl::Seconds(60));
  grpc::Status status = (*stub)->UnregisterCluster(context.get(), request, &response);
  if (!status.ok()) return Fail("delete", status.error_message());
  std::cout << "cluster/" << name << " drained and removed (" << response.operation().phase()
            << ")\n";
  return 0;
}

}  // namespace

std::string OperationLine(const common::v1::Operation& op) {
  std::string state;
  if (op.done()) {
    state = op.has_error() && op.error().code() != common::v1::ERROR_CODE_UNSPECIFIED
                ? absl::StrCat("failed: ", op.error().message())
                : "done";
  }
  std::string phase = op.phase();
  std::replace(phase.begin(), phase.end(), '\n', ' ');
  std::replace(state.begin(), state.end(), '\n', ' ');
  return absl::StrCat(op.id(), "  ", absl::StrFormat("%3d%%", op.progress_percent()), "  ", phase,
                      state.empty() ? "" : "  ", state);
}

std::string OperationsTable(const acm::v1::ListOperationsResponse& operations) {
  std::string out = absl::StrFormat("%-32s  %-24s  %-24s  %-4s  %s\n", "ID", "KIND", "RESOURCE",
                                    "%", "STATE");
  for (const auto& op : operations.operations()) {
    std::string state = !op.done() ? op.phase()
                        : op.has_error() && op.error().code() != 0
                            ? absl::StrCat("failed: ", op.error().message())
                            : absl::StrCat("done: ", op.phase());
    std::replace(state.begin(), state.end(), '\n', ' ');
    absl::StrAppend(&out, absl::StrFormat("%-32s  %-24s  %-24s  %3d%%  %s\n", op.id(), op.kind(),
                                          op.resource(), op.progress_percent(), state));
  }
  return out;
}

std::string MigrationsTable(const swm::v1::ListMigrationsResponse& migrations) {
  std::string out = absl::StrFormat("%-20s  %-28s  %-16s  %-12s  %-28s  %s\n", "ID", "WORKLOAD",
                                    "REASON", "PHASE", "FROM", "TO");
  auto where = [](const swm::v1::WorkloadTarget& t) {
    return t.cluster().empty() ? std::string("-") : absl::StrCat(t.cluster(), "/", t.node());
  };
  for (const auto& m : migrations.migrations()) {
    std::string reason = swm::v1::MigrationReason_Name(m.reason());
    reason = std::string(absl::StripPrefix(reason, "MIGRATION_REASON_"));
    std::string phase = swm::v1::MigrationPhase_Name(m.phase());
    phase = std::string(absl::StripPrefix(phase, "MIGRATION_PHASE_"));
    absl::StrAppend(&out, absl::StrFormat("%-20s  %-28s  %-16s  %-12s  %-28s  %s\n", m.id(),
                                          absl::StrCat(m.application(), "/", m.workload()),
                                          absl::AsciiStrToLower(reason), phase,
                                          where(m.source()), where(m.target())));
    if (m.has_restored_backup()) {
      const swm::v1::StateBackup& b = m.restored_backup();
      absl::StrAppend(&out, "  state restored from the backup of pod ", b.source().pod(),
                      " taken at ", TimeText(b.take_time()), " (", b.image_reference(),
                      "); writes after it were lost\n");
    }
    if (m.has_error() && !m.error().message().empty()) {
      std::string why = m.error().message();
      std::replace(why.begin(), why.end(), '\n', ' ');
      absl::StrAppend(&out, "  ", why, "\n");
    }
  }
  return out;
}

std::string StateBackupsTable(const swm::v1::ListStateBackupsResponse& backups) {
  std::string out = absl::StrFormat("%-32s  %-44s  %-20s  %10s  %s\n", "WORKLOAD", "OF POD",
                                    "TAKEN", "BYTES", "NEXT");
  for (const swm::v1::StateBackupRecord& r : backups.backups()) {
    const swm::v1::StateBackup& b = r.latest();
    std::string next = "-";
    if (!r.pending_operation_id().empty()) {
      next = "taking one now";
    } else if (r.has_last_error()) {
      next = "last attempt failed: " + r.last_error().message();
      std::replace(next.begin(), next.end(), '\n', ' ');
    }
    absl::StrAppend(
        &out, absl::StrFormat("%-32s  %-44s  %-20s  %10d  %s\n",
                              absl::StrCat(r.application(), "/", r.workload()),
                              r.has_latest()
                                  ? absl::StrCat(b.source().cluster(), "/", b.source().pod())
                                  : std::string("- (none yet)"),
                              TimeText(b.take_time()), b.state_bytes(), next));
  }
  return out;
}

absl::StatusOr<Output> ParseOutput(const Args& args) {
  if (!args.Has("o")) return Output::kTable;
  const std::string value = args.Get("o");
  if (value == "table" || value == "wide") return Output::kTable;
  if (value == "yaml") return Output::kYaml;
  if (value == "json") return Output::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("-o: must be table, yaml or json, not \"", value, "\""));
}

std::string ToJson(const Message& message, bool compact) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = !compact;
  options.preserve_proto_field_names = true;
  auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) return absl::StrCat("{\"error\": \"", status.ToString(), "\"}");
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::vector<ManifestDocument> SplitManifest(const std::string& text) {
  // Cut at lines that are a document marker: "---" alone or before content.
  std::vector<std::string> chunks(1);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    const size_t end = eol == std::string::npos ? text.size() : eol + 1;
    absl::string_view line(text.data() + pos, end - pos);
    const bool marker = absl::StartsWith(line, "---") &&
                        (line.size() == 3 || line[3] == ' ' || line[3] == '\t' ||
                         line[3] == '\n' || line[3] == '\r');
    if (marker) {
      chunks.emplace_back();
      absl::string_view rest = line.substr(3);
      // Content after the marker on its line ("--- {...}") stays with its document.
      if (!absl::StripAsciiWhitespace(rest).empty()) chunks.back().append(rest.data(), rest.size());
    } else {
      chunks.back().append(line.data(), line.size());
    }
    pos = end;
  }
  // Nothing but blanks and comments: no document.
  auto empty = [](const std::string& chunk) {
    for (absl::string_view line : absl::StrSplit(chunk, '\n')) {
      absl::string_view t = absl::StripAsciiWhitespace(line);
      if (!t.empty() && t[0] != '#' && t != "...") return false;
    }
    return true;
  };
  std::vector<ManifestDocument> docs;
  int index = 0;
  for (std::string& chunk : chunks) {
    if (empty(chunk)) continue;
    ManifestDocument doc;
    doc.index = ++index;
    doc.text = std::move(chunk);
    docs.push_back(std::move(doc));
  }
  if (docs.size() == 1) docs[0].text = text;  // one document: sent exactly as written
  for (ManifestDocument& doc : docs) {
    try {
      YAML::Node root = YAML::Load(doc.text);
      if (!root.IsMap()) continue;
      auto scalar = [](const YAML::Node& n) {
        return n.IsDefined() && n.IsScalar() ? n.Scalar() : std::string();
      };
      doc.api_version = scalar(root["apiVersion"]);
      doc.kind = scalar(root["kind"]);
      if (root["metadata"].IsMap()) doc.name = scalar(root["metadata"]["name"]);
      doc.app_name = doc.name;
      if (doc.kind == "CodecoApp" && root["spec"].IsMap()) {
        std::string app = scalar(root["spec"]["appName"]);
        if (!app.empty()) doc.app_name = app;
      }
      doc.application_model = doc.kind == "CodecoApp" || doc.kind == "MultiClusterDeployment" ||
                              doc.kind == "MultiClusterJob" || doc.kind.empty();
    } catch (const YAML::Exception&) {
      // Not readable here: ACM says what is wrong with it.
    }
  }
  return docs;
}

std::string ToYaml(const Message& message) {
  YAML::Emitter out;
  EmitMessage(out, message);
  return std::string(out.c_str()) + "\n";
}

std::string AppsTable(const acm::v1::ListApplicationsResponse& apps) {
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "PHASE", "STATUS", "READY", "REV", "PLACED ON"}};
  for (const auto& app : apps.applications()) {
    std::set<std::string> clusters;
    for (const auto& p : app.status().placements()) clusters.insert(p.cluster());
    rows.push_back({app.metadata().name(), PhaseName(app.status().phase()),
                    LevelName(app.status().status()), ReadyText(app),
                    absl::StrCat(app.spec_revision()),
                    clusters.empty() ? "-" : absl::StrJoin(clusters, ",")});
  }
  return Columns(rows);
}

// "62s until 2026-11-29T04:20:11Z" for a cluster's last hub outage; "-" for none.
std::string HubOutageText(const acm::v1::Cluster& c) {
  if (!c.has_last_hub_outage()) return "-";
  const auto& o = c.last_hub_outage();
  const absl::Duration lasted =
      FromProtoTimestamp(o.end_time()) - FromProtoTimestamp(o.start_time());
  return absl::StrCat(absl::FormatDuration(absl::Trunc(lasted, absl::Seconds(1))), " until ",
                      TimeText(o.end_time()));
}

std::string ClustersTable(const acm::v1::ListClustersResponse& clusters) {
  std::vector<std::vector<std::string>> rows = {{"NAME", "HEALTH", "TIER", "REGION", "NODES",
                                                 "FREE CPU", "FREE MEM", "LAST HEARTBEAT",
                                                 "LAST HUB OUTAGE"}};
  for (const auto& c : clusters.clusters()) {
    const auto& cap = c.capacity();
    rows.push_back({c.metadata().name(),
                    EnumText(acm::v1::ClusterHealth_Name(c.health()), "CLUSTER_HEALTH_"),
                    TierName(c.cluster_labels().tier()),
                    c.cluster_labels().region().empty() ? "-" : c.cluster_labels().region(),
                    absl::StrCat(cap.ready_node_count(), "/", cap.node_count()),
                    FormatCpu(cap.free().cpu_millicores()), FormatBytes(cap.free().memory_bytes()),
                    TimeText(c.last_heartbeat_time()), HubOutageText(c)});
  }
  return Columns(rows);
}

std::string NeighborhoodsTable(const acm::v1::ListNeighborhoodsResponse& neighborhoods) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "APPLICATION", "REV", "MEMBERS", "CLASSES", "UPDATED"}};
  for (const auto& nb : neighborhoods.neighborhoods()) {
    std::vector<std::string> members;
    for (const auto& m : nb.members()) members.push_back(m.cluster());
    rows.push_back(
        {nb.id(), nb.application(), absl::StrCat(nb.revision()),
         members.empty() ? "-" : absl::StrJoin(members, ","),
         nb.partition_classes().empty() ? "-" : absl::StrJoin(nb.partition_classes(), ","),
         TimeText(nb.update_time())});
  }
  return Columns(rows);
}

std::string EndpointsTable(const acm::v1::ResolveServiceResponse& resolved) {
  std::vector<std::vector<std::string>> rows = {
      {"CLUSTER", "NODE", "POD", "READY", "LOCALITY", "ADDRESSES"}};
  for (const auto& e : resolved.endpoints()) {
    const char* locality = "-";
    switch (e.locality()) {
      case acm::v1::ENDPOINT_LOCALITY_SAME_CLUSTER:
        locality = "same-cluster";
        break;
      case acm::v1::ENDPOINT_LOCALITY_SAME_REGION:
        locality = "same-region";
        break;
      case acm::v1::ENDPOINT_LOCALITY_REMOTE:
        locality = "remote";
        break;
      default:
        break;
    }
    rows.push_back({e.cluster(), e.node().empty() ? "-" : e.node(), e.pod(),
                    e.ready() ? "true" : "false", locality,
                    e.addresses().empty() ? "-" : absl::StrJoin(e.addresses(), ",")});
  }
  return Columns(rows);
}

// The spec paths an admission patch changed, e.g. "/intents/allowedCountries".
std::string PatchedPaths(const std::string& json_patch) {
  if (json_patch.empty()) return "-";
  nlohmann::json ops = nlohmann::json::parse(json_patch, nullptr, false);
  if (!ops.is_array()) return "(unreadable patch)";
  std::vector<std::string> paths;
  for (const auto& op : ops) {
    if (!op.is_object() || !op.contains("path") || !op["path"].is_string()) continue;
    if (op.contains("value") && op["value"].is_object() && op["path"] == "/intents") {
      for (const auto& [field, value] : op["value"].items()) paths.push_back("/intents/" + field);
    } else {
      paths.push_back(op["path"].get<std::string>());
    }
  }
  return paths.empty() ? "-" : absl::StrJoin(paths, ",");
}

std::string RevisionsTable(const acm::v1::ListApplicationRevisionsResponse& revisions) {
  std::vector<std::vector<std::string>> rows = {
      {"REVISION", "CREATED", "CAUSE", "REQUEST ID", "POLICY BUNDLE", "ADMISSION CHANGED"}};
  for (const auto& r : revisions.revisions()) {
    rows.push_back({absl::StrCat(r.spec_revision()), TimeText(r.create_time()),
                    r.change_cause().empty() ? "-" : r.change_cause(),
                    r.request_id().empty() ? "-" : r.request_id(),
                    r.policy_bundle_version().empty() ? "-" : r.policy_bundle_version(),
                    PatchedPaths(r.admission_patch())});
  }
  return Columns(rows);
}

std::string DescribeApp(const acm::v1::Application& app) {
  const auto& status = app.status();
  std::string out;
  absl::StrAppendFormat(&out, "Name:           %s\n", app.metadata().name());
  absl::StrAppendFormat(&out, "Revision:       %d\n", app.metadata().revision());
  absl::StrAppendFormat(&out, "Spec revision:  %d\n", app.spec_revision());
  absl::StrAppendFormat(&out, "Phase:          %s\n", PhaseName(status.phase()));
  absl::StrAppendFormat(&out, "Status:         %s\n", LevelName(status.status()));
  if (!status.error_msg().empty()) {
    absl::StrAppendFormat(&out, "Message:        %s\n", status.error_msg());
  }
  absl::StrAppendFormat(&out, "Neighborhood:   %s\n",
                        status.neighborhood_id().empty() ? "-" : status.neighborhood_id());
  absl::StrAppendFormat(&out, "Ready:          %s\n", ReadyText(app));
  out += "Services:\n";
  std::set<std::string> names;
  for (const auto& s : app.spec().services()) names.insert(s.name());
  std::vector<std::string> pending;
  for (const auto& s : app.spec().services()) {
    // The CodecoApp that declared it, when the application has several.
    std::string from = s.codeco_app().empty() || s.codeco_app() == app.metadata().name()
                           ? ""
                           : "  codecoapp " + s.codeco_app();
    const acm::v1::Autoscaling& as = s.autoscaling();
    const std::string autoscaling =
        as.max_replicas() > 0
            ? absl::StrFormat("  autoscaling %d-%d at %d%% cpu", std::max(1, as.min_replicas()),
                              as.max_replicas(),
                              as.target_cpu_utilization_percent() > 0
                                  ? as.target_cpu_utilization_percent()
                                  : 75)
            : "";
    std::string job;
    if (s.has_job()) {
      int succeeded = 0, failed = 0;
      for (const auto& j : status.jobs()) {
        if (j.service() != s.name()) continue;
        succeeded = j.succeeded_pods_size();
        failed = j.failed_pods_size();
      }
      job = absl::StrFormat("  job %d/%d succeeded, %d failed", succeeded, s.job().completions(),
                            failed);
    }
    absl::StrAppendFormat(&out, "  %-18s replicas %-3d cpu %-6s memory %s%s%s%s\n", s.name(),
                          s.replicas(), FormatCpu(s.requests().cpu_millicores()),
                          FormatBytes(s.requests().memory_bytes()), autoscaling, job, from);
    for (const auto& ch : s.channels()) {
      if (!names.count(ch.to_service())) {
        pending.push_back(absl::StrCat(s.name(), "/", ch.name(), " -> ", ch.to_service()));
      }
    }
  }
  if (!pending.empty()) {
    out += "Pending channels (no CodecoApp declares their target yet; not placed):\n";
    for (const std::string& p : pending) out += "  " + p + "\n";
  }
  out += "Placement:\n";
  std::vector<std::vector<std::string>> rows = {{"SERVICE", "CLUSTER", "NODE", "POD", "READY"}};
  for (const auto& p : status.placements()) {
    rows.push_back({p.service(), p.cluster(), p.node().empty() ? "-" : p.node(),
                    p.pod().empty() ? "-" : p.pod(),
                    p.succeeded() ? "succeeded" : (p.ready() ? "yes" : "no")});
  }
  std::istringstream lines(Columns(rows));
  for (std::string line; std::getline(lines, line);) out += "  " + line + "\n";
  if (status.app_metrics().services_size() > 0) {
    // The autoscaler's measure (applications with an autoscaled service).
    out += "Usage:\n";
    std::vector<std::vector<std::string>> usage = {
        {"SERVICE", "READY", "CPU", "MEMORY", "CPU/REQUESTS"}};
    for (const auto& m : status.app_metrics().services()) {
      usage.push_back({m.service(), absl::StrCat(m.ready_replicas()),
                       FormatCpu(m.cpu_millicores()), FormatBytes(m.memory_bytes()),
                       absl::StrCat(m.cpu_utilization_percent(), "%")});
    }
    std::istringstream usage_lines(Columns(usage));
    for (std::string line; std::getline(usage_lines, line);) out += "  " + line + "\n";
  }
  return out;
}

std::string WatchHeader() {
  return Columns(
      {{"REVISION", "EVENT   ", "APPLICATION", "PHASE     ", "STATUS ", "READY", "MESSAGE"}});
}

std::string WatchLine(const acm::v1::WatchApplicationResponse& event, Output output) {
  switch (output) {
    case Output::kJson:
      return ToJson(event, /*compact=*/true) + "\n";
    case Output::kYaml:
      return "---\n" + ToYaml(event);
    case Output::kTable:
      break;
  }
  const auto& app = event.application();
  std::string type = EnumText(common::v1::WatchEventType_Name(event.type()), "WATCH_EVENT_TYPE_");
  // The same widths as WatchHeader, so lines stay under their titles.
  std::string message = app.status().error_msg();
  std::replace(message.begin(), message.end(), '\n', ' ');
  return absl::StrFormat("%-8d  %-8s  %-11s  %-10s  %-7s  %-5s  %s\n", app.metadata().revision(),
                         absl::AsciiStrToUpper(type), app.metadata().name(),
                         PhaseName(app.status().phase()), LevelName(app.status().status()),
                         ReadyText(app), message);
}

// Follows ACM's operation `first` (see WaitForOperation).
static int WaitForAcmOperation(AcmService::Stub& stub, const common::v1::Operation& first,
                               const Args& args, const std::string& command) {
  return WaitForOperation<acm::v1::WatchOperationRequest, acm::v1::WatchOperationResponse>(
      stub, first, args, command);
}

absl::StatusOr<std::unique_ptr<swm::v1::SwmService::Stub>> SwmStub(const Args& args) {
  std::string address = args.Get("swm");
  if (address.empty()) {
    auto state = LoadRunState();
    if (!state.ok()) return state.status();
    if (state->swm.empty()) {
      return absl::FailedPreconditionError("the federation has no hub SWM; give --swm ADDR");
    }
    address = state->swm;
  }
  auto channel = ChannelTo(address, args);
  if (!channel.ok()) return channel.status();
  return swm::v1::SwmService::NewStub(*channel);
}

// `get operations|operation ID --from swm`: the hub SWM's operations
// (placements, removals); --wait follows one until done.
static int GetSwmOperations(const Args& args, Output output) {
  auto stub = SwmStub(args);
  if (!stub.ok()) return Fail("get", std::string(stub.status().message()));
  const std::string& what = args.positional[0];
  if (what == "operations") {
    acm::v1::ListOperationsResponse all;  // the same shape: one table for both services
    swm::v1::ListOperationsRequest request;
    request.set_page_size(1000);
    while (true) {
      swm::v1::ListOperationsResponse page;
      auto context = ContextWithTimeout(args, absl::Seconds(10));
      grpc::Status status = (*stub)->ListOperations(context.get(), request, &page);
      if (!status.ok()) return Fail("get", status.error_message());
      for (auto& op : *page.mutable_operations()) *all.add_operations() = std::move(op);
      if (page.next_page_token().empty()) break;
      request.set_page_token(page.next_page_token());
    }
    std::cout << (output == Output::kTable ? OperationsTable(all) : Print(all, output));
    return 0;
  }
  swm::v1::GetOperationRequest request;
  request.set_id(args.positional[1]);
  swm::v1::GetOperationResponse got;
  auto context = ContextWithTimeout(args, absl::Seconds(10));
  grpc::Status status = (*stub)->GetOperation(context.get(), request, &got);
  if (!status.ok()) return Fail("get", status.error_message());
  if (args.Has("wait")) {
    return WaitForOperation<swm::v1::WatchOperationRequest, swm::v1::WatchOperationResponse>(
        **stub, got.operation(), args, "get");
  }
  std::cout << (output == Output::kTable ? OperationLine(got.operation()) + "\n"
                                         : Print(got.operation(), output));
  return 0;
}

// `get migrations [--app NAME]` and `get migration ID`: the hub SWM's
// workload moves.
static int GetSwmMigrations(const Args& args, Output output) {
  auto stub = SwmStub(args);
  if (!stub.ok()) return Fail("get", std::string(stub.status().message()));
  if (args.positional.size() == 2) {
    swm::v1::GetMigrationRequest request;
    request.set_id(args.positional[1]);
    swm::v1::GetMigrationResponse got;
    auto context = ContextWithTimeout(args, absl::Seconds(10));
    grpc::Status status = (*stub)->GetMigration(context.get(), request, &got);
    if (!status.ok()) return Fail("get", status.error_message());
    swm::v1::ListMigrationsResponse one;
    *one.add_migrations() = got.migration();
    std::cout << (output == Output::kTable ? MigrationsTable(one) : Print(got.migration(), output));
    return 0;
  }
  swm::v1::ListMigrationsResponse all;
  swm::v1::ListMigrationsRequest request;
  request.set_application(args.Get("app"));
  request.set_page_size(1000);
  while (true) {
    swm::v1::ListMigrationsResponse page;
    auto context = ContextWithTimeout(args, absl::Seconds(10));
    grpc::Status status = (*stub)->ListMigrations(context.get(), request, &page);
    if (!status.ok()) return Fail("get", status.error_message());
    for (auto& m : *page.mutable_migrations()) *all.add_migrations() = std::move(m);
    if (page.next_page_token().empty()) break;
    request.set_page_token(page.next_page_token());
  }
  std::cout << (output == Output::kTable ? MigrationsTable(all) : Print(all, output));
  return 0;
}

// `get backups [--app NAME]`: the hub SWM's backups of stateful workloads,
// newest per workload (what a move off a failed node would restore).
static int GetSwmStateBackups(const Args& args, Output output) {
  auto stub = SwmStub(args);
  if (!stub.ok()) return Fail("get", std::string(stub.status().message()));
  swm::v1::ListStateBackupsResponse all;
  swm::v1::ListStateBackupsRequest request;
  request.set_application(args.Get("app"));
  request.set_page_size(1000);
  while (true) {
    swm::v1::ListStateBackupsResponse page;
    auto context = ContextWithTimeout(args, absl::Seconds(10));
    grpc::Status status = (*stub)->ListStateBackups(context.get(), request, &page);
    if (!status.ok()) return Fail("get", status.error_message());
    for (auto& b : *page.mutable_backups()) *all.add_backups() = std::move(b);
    if (page.next_page_token().empty()) break;
    request.set_page_token(page.next_page_token());
  }
  std::cout << (output == Output::kTable ? StateBackupsTable(all) : Print(all, output));
  return 0;
}

// Reads FILE (-f) into its documents; a message on failure.
static absl::StatusOr<std::vector<ManifestDocument>> ReadManifest(const std::string& file) {
  if (file.empty()) return absl::InvalidArgumentError("-f FILE is required");
  std::ifstream in(file);
  if (!in) return absl::InvalidArgumentError("-f: cannot read " + file);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<ManifestDocument> docs = SplitManifest(text.str());
  if (docs.empty()) return absl::InvalidArgumentError("-f: " + file + " holds no document");
  return docs;
}

// Says that document `doc` of `file` is not applied, and why.
static void SayNotAModel(const std::string& file, const ManifestDocument& doc) {
  std::cout << "warning: " << file << ": document " << doc.index << " ("
            << (doc.api_version.empty() ? "" : doc.api_version + "/") << doc.kind
            << (doc.name.empty() ? "" : " " + doc.name)
            << ") skipped: codecoctl applies CodecoApp, MultiClusterDeployment and "
               "MultiClusterJob documents (ACM runs their services and connects them through "
               "their channels) and Mission documents (a workload for the clusters of a tree)\n";
}

int RunApply(const Args& args) {
  std::string file = args.Get("f", args.Get("filename"));
  auto output = ParseOutput(args);
  if (!output.ok()) return Fail("apply", std::string(output.status().message()));
  if (args.Has("wait") && *output != Output::kTable) {
    return Fail("apply", "--wait: prints progress lines, so it goes with -o table only");
  }
  auto docs = ReadManifest(file);
  if (!docs.ok()) return Fail("apply", std::string(docs.status().message()));
  auto stub = AcmStub(args);
  if (!stub.ok()) return Fail("apply", std::string(stub.status().message()));
  const bool several = docs->size() > 1;
  int failed = 0;
  // In file order: CodecoApps sharing an appName join one application as
  // each arrives (channels to a later one wait for it).
  for (const ManifestDocument& doc : *docs) {
    if (doc.kind == kMissionKind) {
      if (!ApplyMissionDocument(**stub, file, doc, several, args, *output)) ++failed;
      continue;
    }
    if (!doc.application_model) {
      SayNotAModel(file, doc);
      continue;
    }
    acm::v1::ApplyApplicationRequest request;
    request.set_cam_yaml(doc.text);
    request.set_dry_run(args.Has("dry-run"));
    auto context = ContextWithTimeout(args, absl::Seconds(30));
    acm::v1::ApplyApplicationResponse response;
    grpc::Status status = (*stub)->ApplyApplication(context.get(), request, &response);
    if (!status.ok()) {
      // Field-path errors, one per line, as ACM sent them.
      std::cerr << "codecoctl apply: " << file
                << (several ? absl::StrCat(" (document ", doc.index, ")") : "")
                << " was refused (" << status.error_code() << "):\n"
                << status.error_message() << "\n";
      ++failed;
      continue;
    }
    if (*output != Output::kTable) {
      std::cout << Print(response, *output);
      continue;
    }
    const auto& app = response.application();
    std::cout << "application/" << app.metadata().name()
              << (doc.name.empty() || doc.name == app.metadata().name()
                      ? ""
                      : " (codecoapp/" + doc.name + ")")
              << (args.Has("dry-run")  ? " validated (dry run)"
                  : response.created() ? " created"
                                       : " configured")
              << " (spec revision " << app.spec_revision() << ")\n";
    for (const auto& w : response.warnings()) std::cout << "warning: " << w << "\n";
    if (!args.Has("wait") || args.Has("dry-run")) continue;
    if (!response.has_operation()) {
      std::cout << "nothing to wait for: the spec did not change\n";
      continue;
    }
    if (WaitForAcmOperation(**stub, response.operation(), args, "apply") != 0) ++failed;
  }
  return failed == 0 ? 0 : 1;
}

int RunGet(const Args& args) {
  constexpr char kUsage[] =
      "usage: codecoctl get apps|clusters|tree|neighborhoods|revisions NAME|operations|"
      "operation ID|migrations|migration ID|backups|endpoints SERVICE.APP|missions [NAME]";
  if (args.positional.empty()) return Fail("get", kUsage);
  const std::string& what = args.positional[0];
  if (what == "missions" || what == "mission") {
    auto output = ParseOutput(args);
    if (!output.ok()) return Fail("get", std::string(output.status().message()));
    return GetMissions(args, *output);
  }
  const bool revisions = what == "revisions" || what == "revision";
  const bool endpoints = what == "endpoints" || what == "endpoint";
  const bool named =
      revisions || endpoints || what == "operation" || what == "op" || what == "migration";
  if (args.positional.size() != (named ? 2u : 1u)) return Fail("get", kUsage);
  if (args.Has("cluster") && what.rfind("neighborhood", 0) != 0 && !endpoints) {
    return Fail("get",
                "--cluster: only applies to get neighborhoods, get endpoints and get missions");
  }
  if (args.Has("all") && !endpoints) return Fail("get", "--all: only applies to get endpoints");
  auto output = ParseOutput(args);
  if (!output.ok()) return Fail("get", std::string(output.status().message()));
  const bool migrations = what == "migrations" || what == "migration";
  if (args.Has("app") && what != "migrations" && what != "backups") {
    return Fail("get", "--app: only applies to get migrations and get backups");
  }
  if (what == "backups") {
    if (args.Has("wait") || args.Has("from")) {
      return Fail("get", "--wait, --from: do not apply to get backups (read from the hub SWM)");
    }
    return GetSwmStateBackups(args, *output);
  }
  if (migrations) {
    // Workload moves are the hub SWM's records.
    if (args.Has("wait") || args.Has("from")) {
      return Fail("get", "--wait, --from: do not apply to get migrations (read from the hub SWM)");
    }
    return GetSwmMigrations(args, *output);
  }
  const bool operation = what == "operation" || what == "op";
  if (args.Has("wait") && !operation) {
    return Fail("get", "--wait: only applies to get operation ID");
  }
  if (args.Has("wait") && *output != Output::kTable) {
    return Fail("get", "--wait: prints progress lines, so it goes with -o table only");
  }
  const std::string from = args.Has("from") ? args.Get("from") : "acm";
  if (from != "acm" && from != "swm") {
    return Fail("get", "--from: acm or swm, not \"" + from + "\"");
  }
  if ((args.Has("from") || args.Has("swm")) && !operation && what != "operations") {
    return Fail("get", "--from, --swm: only apply to get operations and get operation ID");
  }
  if (args.Has("swm") && from != "swm") return Fail("get", "--swm: goes with --from swm");
  if (from == "swm") return GetSwmOperations(args, *output);
  auto stub = AcmStub(args);
  if (!stub.ok()) return Fail("get", std::string(stub.status().message()));

  // Every page, gathered into the first response.
  auto list_all = [&](auto call, auto request, auto* all, auto items) -> grpc::Status {
    while (true) {
      request.set_page_size(1000);
      std::remove_pointer_t<decltype(all)> page;
      auto context = ContextWithTimeout(args, absl::Seconds(10));
      grpc::Status status = ((**stub).*call)(context.get(), request, &page);
      if (!status.ok()) return status;
      for (auto& item : *items(page)) *items(*all)->Add() = std::move(item);
      if (page.next_page_token().empty()) return grpc::Status::OK;
      request.set_page_token(page.next_page_token());
    }
  };

  if (endpoints) {
    acm::v1::ResolveServiceRequest request;
    request.set_name(args.positional[1]);
    request.set_from_cluster(args.Get("cluster"));
    request.set_include_not_ready(args.Has("all"));
    acm::v1::ResolveServiceResponse resolved;
    auto context = ContextWithTimeout(args, absl::Seconds(10));
    grpc::Status status = (*stub)->ResolveService(context.get(), request, &resolved);
    if (!status.ok()) return Fail("get", status.error_message());
    std::cout << (*output == Output::kTable ? EndpointsTable(resolved) : Print(resolved, *output));
    return 0;
  }
  if (what == "apps" || what == "applications" || what == "app") {
    acm::v1::ListApplicationsResponse all;
    grpc::Status status =
        list_all(&AcmService::Stub::ListApplications, acm::v1::ListApplicationsRequest(), &all,
                 [](auto& r) { return r.mutable_applications(); });
    if (!status.ok()) return Fail("get", status.error_message());
    std::cout << (*output == Output::kTable ? AppsTable(all) : Print(all, *output));
    return 0;
  }
  if (what == "clusters" || what == "cluster") {
    acm::v1::ListClustersResponse all;
    grpc::Status status = list_all(&AcmService::Stub::ListClusters, acm::v1::ListClustersRequest(),
                                   &all, [](auto& r) { return r.mutable_clusters(); });
    if (!status.ok()) return Fail("get", status.error_message());
    std::cout << (*output == Output::kTable ? ClustersTable(all) : Print(all, *output));
    return 0;
  }
  if (what == "tree") {
    acm::v1::ListClustersResponse all;
    grpc::Status status = list_all(&AcmService::Stub::ListClusters, acm::v1::ListClustersRequest(),
                                   &all, [](auto& r) { return r.mutable_clusters(); });
    if (!status.ok()) return Fail("get", status.error_message());
    const std::vector<ClusterTreeNode> tree = BuildClusterTree(all);
    // JSON is YAML too: -o yaml prints the same document.
    std::cout << (*output == Output::kTable ? ClusterTreeTable(tree)
                                            : ClusterTreeJson(tree).dump(2) + "\n");
    return 0;
  }
  if (what == "neighborhoods" || what == "neighborhood" || what == "nb") {
    acm::v1::ListNeighborhoodsRequest request;
    request.set_cluster(args.Get("cluster"));
    acm::v1::ListNeighborhoodsResponse all;
    grpc::Status status = list_all(&AcmService::Stub::ListNeighborhoods, request, &all,
                                   [](auto& r) { return r.mutable_neighborhoods(); });
    if (!status.ok()) return Fail("get", status.error_message());
    std::cout << (*output == Output::kTable ? NeighborhoodsTable(all) : Print(all, *output));
    return 0;
  }
  if (what == "operations") {
    acm::v1::ListOperationsResponse all;
    grpc::Status status =
        list_all(&AcmService::Stub::ListOperations, acm::v1::ListOperationsRequest(), &all,
                 [](auto& r) { return r.mutable_operations(); });
    if (!status.ok()) return Fail("get", status.error_message());
    std::cout << (*output == Output::kTable ? OperationsTable(all) : Print(all, *output));
    return 0;
  }
  if (what == "operation" || what == "op") {
    acm::v1::GetOperationRequest request;
    request.set_id(args.positional[1]);
    acm::v1::GetOperationResponse got;
    auto context = ContextWithTimeout(args, absl::Seconds(10));
    grpc::Status status = (*stub)->GetOperation(context.get(), request, &got);
    if (!status.ok()) return Fail("get", status.error_message());
    if (args.Has("wait")) return WaitForAcmOperation(**stub, got.operation(), args, "get");
    std::cout << (*output == Output::kTable ? OperationLine(got.operation()) + "\n"
                                            : Print(got.operation(), *output));
    return 0;
  }
  if (revisions) {
    acm::v1::ListApplicationRevisionsRequest request;
    request.set_name(args.positional[1]);
    acm::v1::ListApplicationRevisionsResponse all;
    grpc::Status status = list_all(&AcmService::Stub::ListApplicationRevisions, request, &all,
                                   [](auto& r) { return r.mutable_revisions(); });
    if (!status.ok()) return Fail("get", status.error_message());
    std::cout << (*output == Output::kTable ? RevisionsTable(all) : Print(all, *output));
    return 0;
  }
  return Fail("get", "unknown resource \"" + what +
                         "\" (apps, clusters, tree, neighborhoods, revisions NAME, missions)");
}

int RunDescribe(const Args& args) {
  std::string name = AppName(args);
  if (name.empty()) return Fail("describe", "usage: codecoctl describe app NAME");
  auto output = ParseOutput(args);
  if (!output.ok()) return Fail("describe", std::string(output.status().message()));
  auto stub = AcmStub(args);
  if (!stub.ok()) return Fail("describe", std::string(stub.status().message()));
  acm::v1::GetApplicationRequest request;
  request.set_name(name);
  acm::v1::GetApplicationResponse response;
  auto context = ContextWithTimeout(args, absl::Seconds(10));
  grpc::Status status = (*stub)->GetApplication(context.get(), request, &response);
  if (!status.ok()) return Fail("describe", status.error_message());
  if (*output != Output::kTable) {
    std::cout << Print(response.application(), *output);
    return 0;
  }
  std::cout << DescribeApp(response.application()) << PlanChannels(response.application(), args);
  return 0;
}

// `delete -f FILE`: each CodecoApp of FILE leaves its application (only its
// services go while other CodecoApps of the application remain); each
// Mission of FILE is deleted.
static int DeleteManifest(const Args& args) {
  const std::string file = args.Get("f", args.Get("filename"));
  auto docs = ReadManifest(file);
  if (!docs.ok()) return Fail("delete", std::string(docs.status().message()));
  auto stub = AcmStub(args);
  if (!stub.ok()) return Fail("delete", std::string(stub.status().message()));
  int failed = 0;
  for (const ManifestDocument& doc : *docs) {
    if (doc.kind == kMissionKind && !doc.name.empty()) {
      if (!DeleteMissionNamed(**stub, doc.name, args)) ++failed;
      continue;
    }
    if (!doc.application_model) {
      SayNotAModel(file, doc);
      continue;
    }
    if (doc.app_name.empty() || doc.name.empty()) {
      std::cerr << "codecoctl delete: " << file << ": document " << doc.index
                << " has no metadata.name\n";
      ++failed;
      continue;
    }
    acm::v1::DeleteApplicationRequest request;
    request.set_name(doc.app_name);
    request.set_codeco_app(doc.name);
    acm::v1::DeleteApplicationResponse response;
    auto context = ContextWithTimeout(args, absl::Seconds(10));
    grpc::Status status = (*stub)->DeleteApplication(context.get(), request, &response);
    if (!status.ok()) {
      std::cerr << "codecoctl delete: codecoapp/" << doc.name << ": " << status.error_message()
                << "\n";
      ++failed;
      continue;
    }
    acm::v1::GetApplicationRequest get;
    get.set_name(doc.app_name);
    acm::v1::GetApplicationResponse still;
    auto get_context = ContextWithTimeout(args, absl::Seconds(10));
    grpc::Status s = (*stub)->GetApplication(get_context.get(), get, &still);
    if (s.ok() && still.application().status().phase() != acm::v1::APPLICATION_PHASE_DELETING) {
      std::cout << "codecoapp/" << doc.name << " deleted: its services left application/"
                << doc.app_name << " (spec revision " << still.application().spec_revision()
                << ")\n";
    } else if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
      std::cout << "codecoapp/" << doc.name << " deleted, and application/" << doc.app_name
                << " with it\n";
    } else {
      std::cout << "codecoapp/" << doc.name << " deleted; application/" << doc.app_name
                << " deleting (its pods are being released)\n";
    }
  }
  return failed == 0 ? 0 : 1;
}

int RunDelete(const Args& args) {
  if (args.positional.size() == 2 &&
      (args.positional[0] == "cluster" || args.positional[0] == "clusters")) {
    return DeleteCluster(args.positional[1], args);
  }
  if (args.Has("force")) return Fail("delete", "--force: only applies to delete cluster");
  if (args.Has("f") || args.Has("filename")) return DeleteManifest(args);
  if (args.positional.size() == 2 &&
      (args.positional[0] == "mission" || args.positional[0] == "missions")) {
    auto stub = AcmStub(args);
    if (!stub.ok()) return Fail("delete", std::string(stub.status().message()));
    return DeleteMissionNamed(**stub, args.positional[1], args) ? 0 : 1;
  }
  std::string name = AppName(args);
  if (name.empty()) {
    return Fail("delete",
                "usage: codecoctl delete app NAME | mission NAME | -f FILE | cluster NAME");
  }
  auto stub = AcmStub(args);
  if (!stub.ok()) return Fail("delete", std::string(stub.status().message()));
  acm::v1::DeleteApplicationRequest request;
  request.set_name(name);
  acm::v1::DeleteApplicationResponse response;
  auto context = ContextWithTimeout(args, absl::Seconds(10));
  grpc::Status status = (*stub)->DeleteApplication(context.get(), request, &response);
  if (!status.ok()) return Fail("delete", status.error_message());
  // The record goes once the scheduler has released the pods; say which it is.
  acm::v1::GetApplicationRequest get;
  get.set_name(name);
  acm::v1::GetApplicationResponse still;
  auto get_context = ContextWithTimeout(args, absl::Seconds(10));
  grpc::Status s = (*stub)->GetApplication(get_context.get(), get, &still);
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
    std::cout << "application/" << name << " deleted\n";
  } else {
    std::cout << "application/" << name << " deleting (its pods are being released";
    if (s.ok() && !still.application().status().error_msg().empty()) {
      std::cout << ": " << still.application().status().error_msg();
    }
    std::cout << ")\n";
  }
  return 0;
}

int RunRollback(const Args& args) {
  std::string name = AppName(args);
  if (name.empty()) return Fail("rollback", "usage: codecoctl rollback app NAME --to-revision N");
  if (!args.Has("to-revision")) return Fail("rollback", "--to-revision: required");
  auto to = IntFlag(args, "to-revision", 1, "a spec revision (1 or more)");
  if (!to.ok()) return Fail("rollback", std::string(to.status().message()));
  auto output = ParseOutput(args);
  if (!output.ok()) return Fail("rollback", std::string(output.status().message()));
  auto stub = AcmStub(args);
  if (!stub.ok()) return Fail("rollback", std::string(stub.status().message()));
  acm::v1::RollbackApplicationRequest request;
  request.set_name(name);
  request.set_to_spec_revision(*to);
  acm::v1::RollbackApplicationResponse response;
  auto context = ContextWithTimeout(args, absl::Seconds(30));
  grpc::Status status = (*stub)->RollbackApplication(context.get(), request, &response);
  if (!status.ok()) return Fail("rollback", status.error_message());
  if (*output != Output::kTable) {
    std::cout << Print(response, *output);
    return 0;
  }
  std::cout << "application/" << name << " rolled back to spec revision " << *to
            << " (now spec revision " << response.application().spec_revision() << ")\n";
  return 0;
}

int RunWatch(const Args& args) {
  constexpr char kUsage[] = "usage: codecoctl watch app NAME | apps [--from-revision N]";
  std::string name;
  if (args.positional.size() == 1 &&
      (args.positional[0] == "apps" || args.positional[0] == "applications")) {
    name = "";  // every application
  } else {
    name = AppName(args);
    if (name.empty()) return Fail("watch", kUsage);
  }
  int64_t from = 0;
  if (args.Has("from-revision")) {
    auto parsed = IntFlag(args, "from-revision", 0, "a revision (0 or more)");
    if (!parsed.ok()) return Fail("watch", std::string(parsed.status().message()));
    from = *parsed;
  }
  auto output = ParseOutput(args);
  if (!output.ok()) return Fail("watch", std::string(output.status().message()));
  auto stub = AcmStub(args);
  if (!stub.ok()) return Fail("watch", std::string(stub.status().message()));
  if (!name.empty() && from == 0) {
    // A typo should fail, not wait forever for an application that never comes.
    acm::v1::GetApplicationRequest get;
    get.set_name(name);
    acm::v1::GetApplicationResponse got;
    auto context = ContextWithTimeout(args, absl::Seconds(10));
    grpc::Status s = (*stub)->GetApplication(context.get(), get, &got);
    if (!s.ok()) return Fail("watch", s.error_message());
  }
  if (*output == Output::kTable) std::cout << WatchHeader() << std::flush;
  // Reconnects after a lost connection (e.g. ACM restarted) from the last
  // revision seen, so no change is missed or shown twice. Ctrl-C ends it.
  absl::Duration backoff = absl::Milliseconds(250);
  while (true) {
    grpc::ClientContext context;
    acm::v1::WatchApplicationRequest request;
    request.set_name(name);
    request.set_from_revision(from);
    auto reader = (*stub)->WatchApplication(&context, request);
    acm::v1::WatchApplicationResponse event;
    while (reader->Read(&event)) {
      backoff = absl::Milliseconds(250);
      std::cout << WatchLine(event, *output) << std::flush;
      from = std::max(from, event.application().metadata().revision());
      if (!name.empty() && event.type() == common::v1::WATCH_EVENT_TYPE_DELETED) {
        context.TryCancel();
        reader->Finish().IgnoreError();
        return 0;
      }
    }
    grpc::Status status = reader->Finish();
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE) {
      return Fail("watch", status.ok() ? "the server ended the stream" : status.error_message());
    }
    std::cerr << "codecoctl watch: " << status.error_message() << "; resuming from revision "
              << from << "\n";
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(backoff));
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

}  // namespace codeco::ctl
