// `codecoctl get metadata`: entities and neighbourhoods of the MDMs' graphs.
#include "metadata.h"

#include <cstring>
#include <iostream>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/status.h"
#include "codeco/mdm/v1/mdm_service.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "run_state.h"

namespace codeco::ctl {
namespace {

namespace pb = codeco::mdm::v1;

int Fail(const std::string& message) {
  std::cerr << "codecoctl get metadata: " << message << "\n";
  return 1;
}

// The properties on one line of JSON.
std::string PropertiesLine(const google::protobuf::Struct& properties) {
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(properties, &json).ok()) return "?";
  return json;
}

std::string Updated(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return "-";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", FromProtoTimestamp(t), absl::UTCTimeZone());
}

// (cluster, address) of each MDM to ask: --mdm, else every one `up` started.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> Targets(const Args& args) {
  if (args.Has("mdm")) {
    return std::vector<std::pair<std::string, std::string>>{{args.Get("mdm"), args.Get("mdm")}};
  }
  auto state = LoadRunState();
  if (!state.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(state.status().message(), "; pass --mdm ADDRESS"));
  }
  std::vector<std::pair<std::string, std::string>> out = ServiceAddresses(*state, "mdm");
  if (out.empty()) return absl::NotFoundError("this federation runs no MDM; pass --mdm ADDRESS");
  return out;
}

}  // namespace

std::string EntitiesTable(const pb::ListEntitiesResponse& entities, size_t properties_width) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "TYPE", "CLUSTER", "SOURCE", "UPDATED", "PROPERTIES"}};
  for (const pb::Entity& e : entities.entities()) {
    std::string properties = PropertiesLine(e.properties());
    if (properties.size() > properties_width && properties_width > 3) {
      properties = properties.substr(0, properties_width - 3) + "...";
    }
    rows.push_back({e.id(), e.type(), e.cluster().empty() ? "-" : e.cluster(),
                    e.source().empty() ? "-" : e.source(), Updated(e.update_time()), properties});
  }
  if (entities.entities().empty()) return "No entities.\n";
  return Columns(rows);
}

std::string NeighbourhoodText(const pb::QueryGraphResponse& graph) {
  if (graph.entities().empty()) return "No entity.\n";
  const pb::Entity& start = graph.entities(0);
  std::string out = absl::StrCat("ID:          ", start.id(), "\nTYPE:        ", start.type(),
                                 "\nCLUSTER:     ", start.cluster().empty() ? "-" : start.cluster(),
                                 "\nSOURCE:      ", start.source().empty() ? "-" : start.source(),
                                 "\nUPDATED:     ", Updated(start.update_time()),
                                 "\nLAST OFFSET: ", start.last_offset(),
                                 "\nPROPERTIES:  ", PropertiesLine(start.properties()), "\n");
  if (graph.relationships().empty()) return out + "\nNo relationships.\n";
  std::vector<std::vector<std::string>> rows = {{"FROM", "RELATIONSHIP", "TO"}};
  for (const pb::Relationship& r : graph.relationships()) {
    rows.push_back({r.from_id(), absl::StrCat("-", r.type(), "->"), r.to_id()});
  }
  absl::StrAppend(&out, "\n", Columns(rows));
  std::vector<std::vector<std::string>> neighbours = {{"NEIGHBOUR", "TYPE", "PROPERTIES"}};
  for (int i = 1; i < graph.entities_size(); ++i) {
    std::string properties = PropertiesLine(graph.entities(i).properties());
    if (properties.size() > 80) properties = properties.substr(0, 77) + "...";
    neighbours.push_back({graph.entities(i).id(), graph.entities(i).type(), properties});
  }
  if (neighbours.size() > 1) absl::StrAppend(&out, "\n", Columns(neighbours));
  if (graph.truncated()) out += "\n(truncated: more entities are in reach)\n";
  return out;
}

namespace {

// A --where value: a number, a boolean, or a string ("quoted" or bare).
google::protobuf::Value WhereValue(absl::string_view text) {
  google::protobuf::Value v;
  text = absl::StripAsciiWhitespace(text);
  double number = 0;
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"') {
    v.set_string_value(std::string(text.substr(1, text.size() - 2)));
  } else if (text == "true" || text == "false") {
    v.set_bool_value(text == "true");
  } else if (absl::SimpleAtod(text, &number)) {
    v.set_number_value(number);
  } else {
    v.set_string_value(std::string(text));
  }
  return v;
}

}  // namespace

absl::StatusOr<mdm::v1::PropertyPredicate> ParseWhere(const std::string& expression) {
  const std::string at = absl::StrCat("--where \"", expression, "\"");
  const absl::string_view text = absl::StripAsciiWhitespace(expression);
  if (text.empty()) return absl::InvalidArgumentError(at + ": empty");
  mdm::v1::PropertyPredicate p;
  auto property = [&](absl::string_view name) -> absl::Status {
    name = absl::StripAsciiWhitespace(name);
    if (name.empty()) return absl::InvalidArgumentError(at + ": no property before the operator");
    p.set_property(std::string(name));
    return absl::OkStatus();
  };
  // Words first ("in", "contains"), then symbols, the two-character ones first.
  for (const auto& [word, op] :
       {std::pair<const char*, pb::PredicateOperator>{" in ", pb::PREDICATE_OPERATOR_IN},
        {" contains ", pb::PREDICATE_OPERATOR_CONTAINS}}) {
    const size_t found = text.find(word);
    if (found == absl::string_view::npos) continue;
    RETURN_IF_ERROR(property(text.substr(0, found)));
    p.set_operator_(op);
    absl::string_view rest = absl::StripAsciiWhitespace(text.substr(found + strlen(word)));
    if (op == pb::PREDICATE_OPERATOR_CONTAINS) {
      *p.mutable_value() = WhereValue(rest);
      return p;
    }
    if (rest.size() < 2 || rest.front() != '(' || rest.back() != ')') {
      return absl::InvalidArgumentError(at + ": want P in (V1,V2,...)");
    }
    for (absl::string_view v : absl::StrSplit(rest.substr(1, rest.size() - 2), ',')) {
      *p.add_values() = WhereValue(v);
    }
    return p;
  }
  for (const auto& [symbol, op] :
       {std::pair<const char*, pb::PredicateOperator>{"<=", pb::PREDICATE_OPERATOR_LESS_OR_EQUAL},
        {">=", pb::PREDICATE_OPERATOR_GREATER_OR_EQUAL},
        {"!=", pb::PREDICATE_OPERATOR_NOT_EQUALS},
        {"==", pb::PREDICATE_OPERATOR_EQUALS},
        {"<", pb::PREDICATE_OPERATOR_LESS},
        {">", pb::PREDICATE_OPERATOR_GREATER},
        {"=", pb::PREDICATE_OPERATOR_EQUALS}}) {
    const size_t found = text.find(symbol);
    if (found == absl::string_view::npos) continue;
    RETURN_IF_ERROR(property(text.substr(0, found)));
    p.set_operator_(op);
    *p.mutable_value() = WhereValue(text.substr(found + strlen(symbol)));
    return p;
  }
  if (text.front() == '!') {
    RETURN_IF_ERROR(property(text.substr(1)));
    p.set_operator_(pb::PREDICATE_OPERATOR_NOT_EXISTS);
    return p;
  }
  RETURN_IF_ERROR(property(text));
  p.set_operator_(pb::PREDICATE_OPERATOR_EXISTS);
  return p;
}

int RunGetMetadata(const Args& args) {
  if (args.positional.size() > 2) {
    return Fail(
        "usage: codecoctl get metadata [ID] [--type T] [--cluster C] [--where EXPR]... "
        "[--depth N]");
  }
  auto output = ParseOutput(args);
  if (!output.ok()) return Fail(std::string(output.status().message()));
  const bool one = args.positional.size() == 2;
  int depth = 1;
  if (args.Has("depth")) {
    if (!one) return Fail("--depth: only applies to get metadata ID");
    if (!absl::SimpleAtoi(args.Get("depth"), &depth) || depth < 1 || depth > 5) {
      return Fail("--depth: a number of hops, 1-5, not \"" + args.Get("depth") + "\"");
    }
  }
  if (one && (args.Has("type") || args.Has("cluster") || args.Has("where"))) {
    return Fail("--type, --cluster, --where: only apply to the list (get metadata without ID)");
  }
  google::protobuf::RepeatedPtrField<pb::PropertyPredicate> where;
  for (const std::string& expression : args.GetAll("where")) {
    absl::StatusOr<pb::PropertyPredicate> predicate = ParseWhere(expression);
    if (!predicate.ok()) return Fail(std::string(predicate.status().message()));
    *where.Add() = *std::move(predicate);
  }
  auto targets = Targets(args);
  if (!targets.ok()) return Fail(std::string(targets.status().message()));

  if (one) {
    // The MDM that holds the entity answers; the others say NOT_FOUND.
    std::string errors;
    for (const auto& [cluster, address] : *targets) {
      auto channel = ChannelTo(address, args);
      if (!channel.ok()) return Fail(std::string(channel.status().message()));
      auto stub = pb::MdmService::NewStub(*channel);
      pb::QueryGraphRequest request;
      request.set_entity_id(args.positional[1]);
      request.set_depth(depth);
      request.set_max_entities(1000);
      pb::QueryGraphResponse response;
      auto context = ContextWithTimeout(args, absl::Seconds(10));
      grpc::Status status = stub->QueryGraph(context.get(), request, &response);
      if (status.ok()) {
        std::cout << (*output == Output::kTable ? NeighbourhoodText(response)
                                                : Print(response, *output));
        return 0;
      }
      if (status.error_code() != grpc::StatusCode::NOT_FOUND) {
        absl::StrAppend(&errors, "; ", cluster, ": ", status.error_message());
      }
    }
    return Fail(absl::StrCat("no MDM holds \"", args.positional[1], "\"", errors));
  }

  pb::ListEntitiesResponse all;
  int failures = 0;
  for (const auto& [cluster, address] : *targets) {
    auto channel = ChannelTo(address, args);
    if (!channel.ok()) return Fail(std::string(channel.status().message()));
    auto stub = pb::MdmService::NewStub(*channel);
    pb::ListEntitiesRequest request;
    request.set_type(args.Get("type"));
    request.set_cluster(args.Get("cluster"));
    *request.mutable_where() = where;
    request.set_page_size(1000);
    while (true) {
      pb::ListEntitiesResponse page;
      auto context = ContextWithTimeout(args, absl::Seconds(10));
      grpc::Status status = stub->ListEntities(context.get(), request, &page);
      if (!status.ok()) {
        std::cerr << "codecoctl get metadata: " << cluster << ": " << status.error_message()
                  << "\n";
        ++failures;
        break;
      }
      for (pb::Entity& e : *page.mutable_entities()) *all.add_entities() = std::move(e);
      if (page.next_page_token().empty()) break;
      request.set_page_token(page.next_page_token());
    }
  }
  std::cout << (*output == Output::kTable ? EntitiesTable(all) : Print(all, *output));
  return failures ? 1 : 0;
}

}  // namespace codeco::ctl
