// `codecoctl get metadata`: entities and neighbourhoods of the MDMs' graphs.
#include "metadata.h"

#include <iostream>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "codeco/common/proto_util.h"
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

int RunGetMetadata(const Args& args) {
  if (args.positional.size() > 2) {
    return Fail("usage: codecoctl get metadata [ID] [--type T] [--cluster C] [--depth N]");
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
  if (one && (args.Has("type") || args.Has("cluster"))) {
    return Fail("--type, --cluster: only apply to the list (get metadata without ID)");
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
