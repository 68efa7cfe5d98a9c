// The hub SWM's DataSetLocator (swm/server/mdm_data_sets.h) against the real
// codeco-mdm: a published DataSet answers its clusters, a name MDM does not
// hold answers "no data set", an MDM that is gone answers an error.
#include "swm/server/mdm_data_sets.h"

#include <catch2/catch.hpp>
#include <csignal>
#include <regex>

#include "absl/time/clock.h"
#include "codeco/mdm/v1/mdm_service.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "process.h"

namespace codeco::swm {
namespace {

using codeco::testing::ChildProcess;
using codeco::testing::ReadWholeFile;
using codeco::testing::ScratchDir;

TEST_CASE("MdmDataSets reads the clusters of a data set from the real codeco-mdm") {
  ScratchDir dir("swm-mdm-data-sets");
  const std::string log = (dir.path / "mdm.log").string();
  ChildProcess mdm({std::string(CODECO_BIN_DIR) + "/codeco-mdm", "--role", "hub", "--insecure",
                    "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--data-dir",
                    (dir.path / "data").string()},
                   log);
  std::optional<std::string> line = mdm.ReadLine(absl::Now() + absl::Seconds(60));
  INFO(ReadWholeFile(log));
  REQUIRE(line.has_value());
  std::smatch m;
  REQUIRE(std::regex_search(*line, m, std::regex("listening on (127\\.0\\.0\\.1:[0-9]+)")));
  auto channel = grpc::CreateChannel(m[1].str(), grpc::InsecureChannelCredentials());

  // The data set as a user (or a data connector) publishes it.
  {
    auto stub = mdm::v1::MdmService::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    mdm::v1::PublishEventsRequest request;
    mdm::v1::MetadataEvent* e = request.add_events();
    e->set_op(mdm::v1::METADATA_OP_INSERT);
    e->set_type("DataSet");
    e->set_id("DataSet/traffic-cams");
    e->set_source("data-catalogue");
    auto* clusters = (*e->mutable_properties()->mutable_fields())["clusters"].mutable_list_value();
    clusters->add_values()->set_string_value("lille");
    clusters->add_values()->set_string_value("paris");
    mdm::v1::PublishEventsResponse response;
    grpc::Status status = stub->PublishEvents(&context, request, &response);
    INFO(status.error_message());
    REQUIRE(status.ok());
  }

  MdmDataSets data_sets(channel, absl::Seconds(10));
  absl::StatusOr<std::optional<std::vector<std::string>>> held =
      data_sets.ClustersHolding("traffic-cams");
  REQUIRE(held.ok());
  REQUIRE(held->has_value());
  CHECK(**held == std::vector<std::string>{"lille", "paris"});
  absl::StatusOr<std::optional<std::vector<std::string>>> unknown =
      data_sets.ClustersHolding("eu-west");
  REQUIRE(unknown.ok());
  CHECK_FALSE(unknown->has_value());

  REQUIRE(mdm.Stop(SIGKILL, absl::Now() + absl::Seconds(10)) == 128 + SIGKILL);
  MdmDataSets gone(channel, absl::Seconds(2));
  CHECK(absl::IsUnavailable(gone.ClustersHolding("traffic-cams").status()));
}

}  // namespace
}  // namespace codeco::swm
