// The real codeco-mdm over gRPC: types, publishing (request_id makes a
// repeat a no-op, one bad event refuses the batch), reading, the graph, a
// watch; and SIGKILL during ingest loses no acknowledged event, while a
// watcher resumes with no gap and no reordering.
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "codeco/mdm/v1/mdm_service.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "mdm_test_util.h"
#include "process.h"

namespace codeco::mdm {
namespace {

namespace fs = std::filesystem;
using codeco::testing::ChildProcess;
using codeco::testing::ReadWholeFile;
using codeco::testing::ScratchDir;

std::chrono::system_clock::time_point In(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

// A codeco-mdm on the loopback, on `data` (kept across restarts).
struct Mdm {
  std::unique_ptr<ChildProcess> process;
  std::unique_ptr<v1::MdmService::Stub> stub;

  Mdm(const fs::path& dir, const std::vector<std::string>& settings = {}) {
    const fs::path log = dir / "mdm.log";
    std::vector<std::string> command = {std::string(CODECO_BIN_DIR) + "/codeco-mdm",
                                        "--role",
                                        "hub",
                                        "--insecure",
                                        "--listen",
                                        "127.0.0.1:0",
                                        "--metrics-listen",
                                        "127.0.0.1:0",
                                        "--data-dir",
                                        (dir / "data").string()};
    for (const std::string& s : settings) command.insert(command.end(), {"--set", s});
    process = std::make_unique<ChildProcess>(command, log.string());
    std::optional<std::string> line = process->ReadLine(absl::Now() + absl::Seconds(60));
    INFO("codeco-mdm printed: " << line.value_or("<nothing>") << "\n" << ReadWholeFile(log));
    REQUIRE(line.has_value());
    std::smatch m;
    REQUIRE(std::regex_search(*line, m, std::regex("listening on (127\\.0\\.0\\.1:[0-9]+)")));
    stub = v1::MdmService::NewStub(
        grpc::CreateChannel(m[1].str(), grpc::InsecureChannelCredentials()));
  }
};

using testing::Type;

void RegisterTypes(v1::MdmService::Stub& stub) {
  for (const v1::TypeDefinition& t :
       {Type("Node", ""), Type("Pod", R"({"type": "object", "required": ["restarts"],
                        "properties": {"restarts": {"type": "integer", "minimum": 0}}})"),
        Type("RUNS_ON", "", "Pod", "Node")}) {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(30)));
    v1::RegisterTypeRequest request;
    *request.mutable_type_definition() = t;
    v1::RegisterTypeResponse response;
    grpc::Status status = stub.RegisterType(&context, request, &response);
    INFO(status.error_message());
    REQUIRE(status.ok());
    CHECK(response.type_definition().version() == 1);
  }
}

v1::MetadataEvent Insert(const std::string& type, const std::string& id, double restarts = -1) {
  v1::MetadataEvent e;
  e.set_op(v1::METADATA_OP_INSERT);
  e.set_type(type);
  e.set_id(id);
  e.set_cluster("edge-1");
  if (restarts >= 0 || type == "Pod") {
    (*e.mutable_properties()->mutable_fields())["restarts"].set_number_value(restarts);
  }
  return e;
}

grpc::Status Publish(v1::MdmService::Stub& stub, const std::vector<v1::MetadataEvent>& events,
                     const std::string& request_id, v1::PublishEventsResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(30)));
  v1::PublishEventsRequest request;
  for (const auto& e : events) *request.add_events() = e;
  request.set_request_id(request_id);
  return stub.PublishEvents(&context, request, response);
}

TEST_CASE("codeco-mdm serves the event log the graph and the types") {
  ScratchDir dir("mdm-service");
  Mdm mdm(dir.path);
  RegisterTypes(*mdm.stub);

  v1::MetadataEvent link = Insert("RUNS_ON", "RUNS_ON/web-0");
  link.set_from_id("Pod/web-0");
  link.set_to_id("Node/n1");
  link.clear_properties();
  const std::vector<v1::MetadataEvent> batch = {Insert("Node", "Node/n1"),
                                                Insert("Pod", "Pod/web-0", 0), link};
  v1::PublishEventsResponse published;
  REQUIRE(Publish(*mdm.stub, batch, "lms-1", &published).ok());
  CHECK(published.first_offset() == 1);
  CHECK(published.last_offset() == 3);
  // The same request again stores nothing new.
  v1::PublishEventsResponse again;
  REQUIRE(Publish(*mdm.stub, batch, "lms-1", &again).ok());
  CHECK(std::vector<int64_t>(again.offsets().begin(), again.offsets().end()) ==
        std::vector<int64_t>{1, 2, 3});
  // One bad event refuses the batch, naming it.
  v1::PublishEventsResponse refused;
  grpc::Status bad =
      Publish(*mdm.stub, {Insert("Node", "Node/n2"), Insert("Pod", "Pod/x", -4)}, "", &refused);
  CHECK(bad.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(bad.error_message(), Catch::StartsWith("events[1].properties.restarts: "));

  {
    grpc::ClientContext context;
    v1::ReadEventsRequest request;
    request.set_page_size(2);
    v1::ReadEventsResponse page;
    REQUIRE(mdm.stub->ReadEvents(&context, request, &page).ok());
    CHECK(page.events_size() == 2);
    CHECK(page.end_offset() == 4);
    REQUIRE_FALSE(page.next_page_token().empty());
    grpc::ClientContext next_context;
    request.set_page_token(page.next_page_token());
    v1::ReadEventsResponse rest;
    REQUIRE(mdm.stub->ReadEvents(&next_context, request, &rest).ok());
    REQUIRE(rest.events_size() == 1);
    CHECK(rest.events(0).id() == "RUNS_ON/web-0");
    CHECK(rest.next_page_token().empty());
  }
  {
    grpc::ClientContext context;
    v1::QueryGraphRequest request;
    request.set_entity_id("Node/n1");
    request.set_depth(1);
    v1::QueryGraphResponse graph;
    REQUIRE(mdm.stub->QueryGraph(&context, request, &graph).ok());
    REQUIRE(graph.entities_size() == 2);
    CHECK(graph.entities(1).id() == "Pod/web-0");
    CHECK(graph.relationships_size() == 1);
  }
  {
    grpc::ClientContext context;
    v1::ListEntitiesRequest request;
    request.set_type("Pod");
    v1::ListEntitiesResponse pods;
    REQUIRE(mdm.stub->ListEntities(&context, request, &pods).ok());
    CHECK(pods.entities_size() == 1);
    // Property predicates: the pod has no restarts, so none has more than 0.
    v1::PropertyPredicate* restarted = request.add_where();
    restarted->set_property("restarts");
    restarted->set_operator_(v1::PREDICATE_OPERATOR_GREATER);
    restarted->mutable_value()->set_number_value(0);
    grpc::ClientContext where_context;
    REQUIRE(mdm.stub->ListEntities(&where_context, request, &pods).ok());
    CHECK(pods.entities_size() == 0);
    restarted->set_operator_(v1::PREDICATE_OPERATOR_LESS_OR_EQUAL);
    grpc::ClientContext where_again;
    REQUIRE(mdm.stub->ListEntities(&where_again, request, &pods).ok());
    CHECK(pods.entities_size() == 1);
    restarted->clear_value();
    grpc::ClientContext bad_where;
    grpc::Status refused = mdm.stub->ListEntities(&bad_where, request, &pods);
    CHECK(refused.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(refused.error_message(), Catch::StartsWith("where[0].value"));
    grpc::ClientContext get_context;
    v1::GetEntityRequest get;
    get.set_id("Pod/none");
    v1::GetEntityResponse entity;
    CHECK(mdm.stub->GetEntity(&get_context, get, &entity).error_code() ==
          grpc::StatusCode::NOT_FOUND);
    grpc::ClientContext types_context;
    v1::ListTypesRequest types_request;
    types_request.set_kind(v1::TYPE_KIND_ENTITY);
    v1::ListTypesResponse types;
    REQUIRE(mdm.stub->ListTypes(&types_context, types_request, &types).ok());
    // Node and Pod, and the built-in DataSet.
    std::set<std::string> names;
    for (const v1::TypeDefinition& t : types.types()) names.insert(t.name());
    CHECK(names == std::set<std::string>{"DataSet", "Node", "Pod"});
  }
  // A watch from the start gets the log, then what comes next.
  grpc::ClientContext watch_context;
  watch_context.set_deadline(In(absl::Seconds(60)));
  v1::WatchEventsRequest watch_request;
  watch_request.set_from_offset(1);
  watch_request.add_types("Node");
  auto watch = mdm.stub->WatchEvents(&watch_context, watch_request);
  v1::WatchEventsResponse seen;
  REQUIRE(watch->Read(&seen));
  REQUIRE(seen.events_size() == 1);
  CHECK(seen.events(0).id() == "Node/n1");
  v1::PublishEventsResponse later;
  REQUIRE(Publish(*mdm.stub, {Insert("Pod", "Pod/web-1", 0), Insert("Node", "Node/n3")}, "", &later)
              .ok());
  REQUIRE(watch->Read(&seen));
  REQUIRE(seen.events_size() == 1);
  CHECK(seen.events(0).id() == "Node/n3");
  CHECK(seen.events(0).offset() == 5);
  watch_context.TryCancel();
  watch->Finish();
  CHECK(mdm.process->Stop(SIGTERM, absl::Now() + absl::Seconds(30)) == 0);
}

TEST_CASE("SIGKILL of codeco-mdm during ingest loses no acknowledged event and a watch resumes") {
  ScratchDir dir("mdm-service");
  std::map<int64_t, std::string> acknowledged;  // offset -> id
  std::vector<int64_t> watched;
  std::vector<v1::MetadataEvent> in_flight;
  {
    Mdm mdm(dir.path);
    RegisterTypes(*mdm.stub);
    std::mutex mu;
    // A watcher from the start, until the server dies.
    grpc::ClientContext watch_context;
    v1::WatchEventsRequest from_start;
    from_start.set_from_offset(1);
    auto watch = mdm.stub->WatchEvents(&watch_context, from_start);
    std::thread watcher([&] {
      v1::WatchEventsResponse r;
      while (watch->Read(&r)) {
        for (const auto& e : r.events()) watched.push_back(e.offset());
      }
    });
    std::thread publisher([&] {
      for (int batch = 0;; ++batch) {
        std::vector<v1::MetadataEvent> events;
        for (int i = 0; i < 50; ++i) {
          events.push_back(Insert("Node", absl::StrCat("Node/", batch, "-", i)));
          events.back().set_event_id(absl::StrCat("e-", batch, "-", i));
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          in_flight = events;
        }
        v1::PublishEventsResponse response;
        if (!Publish(*mdm.stub, events, "", &response).ok()) return;
        std::lock_guard<std::mutex> lock(mu);
        for (int i = 0; i < response.offsets_size(); ++i) {
          acknowledged[response.offsets(i)] = events[static_cast<size_t>(i)].id();
        }
      }
    });
    for (absl::Time end = absl::Now() + absl::Seconds(60); absl::Now() < end;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (acknowledged.size() >= 2000) break;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    REQUIRE(mdm.process->Stop(SIGKILL, absl::Now() + absl::Seconds(10)) == 128 + SIGKILL);
    publisher.join();
    watcher.join();
    watch->Finish();
  }
  REQUIRE(acknowledged.size() >= 2000);

  Mdm restarted(dir.path);
  // Every acknowledged event is there, at its offset.
  std::map<int64_t, std::string> stored;
  int64_t end = 0;
  v1::ReadEventsRequest read;
  read.set_from_offset(1);
  read.set_page_size(1000);
  for (bool more = true; more;) {
    grpc::ClientContext context;
    v1::ReadEventsResponse page;
    REQUIRE(restarted.stub->ReadEvents(&context, read, &page).ok());
    for (const auto& e : page.events()) stored[e.offset()] = e.id();
    end = page.end_offset();
    more = !page.next_page_token().empty();
    read.set_page_token(page.next_page_token());
  }
  for (const auto& [offset, id] : acknowledged) {
    INFO("offset " << offset);
    REQUIRE(stored.count(offset) == 1);
    CHECK(stored[offset] == id);
  }
  CHECK(static_cast<int64_t>(stored.size()) == end - 1);
  // The batch in flight, sent again, is stored once.
  v1::PublishEventsResponse retried;
  REQUIRE(Publish(*restarted.stub, in_flight, "", &retried).ok());
  const int64_t after_retry = retried.last_offset();
  CHECK(after_retry <= end - 1 + static_cast<int64_t>(in_flight.size()));

  // The watch resumes after the last offset it saw: no gap, no reordering.
  const int64_t resume = watched.empty() ? 1 : watched.back() + 1;
  grpc::ClientContext watch_context;
  watch_context.set_deadline(In(absl::Seconds(60)));
  v1::WatchEventsRequest request;
  request.set_from_offset(resume);
  auto watch = restarted.stub->WatchEvents(&watch_context, request);
  v1::WatchEventsResponse r;
  while ((watched.empty() || watched.back() < after_retry) && watch->Read(&r)) {
    for (const auto& e : r.events()) watched.push_back(e.offset());
  }
  watch_context.TryCancel();
  watch->Finish();
  REQUIRE_FALSE(watched.empty());
  for (size_t i = 0; i < watched.size(); ++i) {
    INFO("watched[" << i << "]");
    REQUIRE(watched[i] == static_cast<int64_t>(i) + 1);
  }
  CHECK(watched.back() == after_retry);
  CHECK(restarted.process->Stop(SIGTERM, absl::Now() + absl::Seconds(30)) == 0);
}

TEST_CASE("codeco-mdm compacts its log on a schedule and watchers read what is left") {
  ScratchDir dir("mdm-compaction");
  Mdm mdm(dir.path, {"mdm.compact_interval=1s", "mdm.compact_keep_events=0",
                     "mdm.compact_keep_tombstones=0"});
  RegisterTypes(*mdm.stub);
  // Pod/a inserted three times: only the last insert is its state.
  for (int i = 0; i < 3; ++i) {
    v1::PublishEventsResponse published;
    REQUIRE(Publish(*mdm.stub, {Insert("Pod", "Pod/a", i)}, "", &published).ok());
  }
  std::vector<int64_t> offsets;
  for (absl::Time end = absl::Now() + absl::Seconds(60); absl::Now() < end;) {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(10)));
    v1::ReadEventsRequest request;
    request.set_from_offset(1);
    v1::ReadEventsResponse page;
    REQUIRE(mdm.stub->ReadEvents(&context, request, &page).ok());
    offsets.clear();
    for (const auto& e : page.events()) offsets.push_back(e.offset());
    if (offsets.size() == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  CHECK(offsets == std::vector<int64_t>{3});
  grpc::ClientContext context;
  v1::GetEntityRequest get;
  get.set_id("Pod/a");
  v1::GetEntityResponse entity;
  REQUIRE(mdm.stub->GetEntity(&context, get, &entity).ok());
  CHECK(entity.entity().properties().fields().at("restarts").number_value() == 2);
}

}  // namespace
}  // namespace codeco::mdm
