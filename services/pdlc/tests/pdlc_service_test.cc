// codeco.pdlc.v1.PdlcService over real gRPC on loopback, with the loop that
// refreshes and trains: samples in through IngestMetrics, scores, forecasts
// and advisories out.
#include <catch2/catch.hpp>

#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"
#include "codeco/common/server.h"
#include "google/protobuf/util/time_util.h"
#include "grpcpp/create_channel.h"
#include "pdlc/server/pdlc_loop.h"
#include "pdlc/server/pdlc_service.h"
#include "pdlc/store/kv_telemetry_store.h"

namespace codeco::pdlc {
namespace {

using google::protobuf::util::TimeUtil;
constexpr int64_t kMinute = 60'000;

// Forecasts the last value plus 3 points per 5 minutes, with a spread.
class TrendForecaster : public UsageForecaster {
 public:
  std::string name() const override { return "trend"; }
  size_t window() const override { return 2; }
  absl::Status Train(const std::vector<UsageSeries>& history) override {
    size_t samples = 0;
    for (const auto& s : history) samples += s.size();
    return samples >= 12 ? absl::OkStatus() : absl::FailedPreconditionError("too little history");
  }
  std::vector<UsageForecast> Predict(const std::vector<ForecastOrigin>& origins) const override {
    std::vector<UsageForecast> out(origins.size());
    for (size_t i = 0; i < origins.size(); ++i) {
      for (size_t h = 0; h < kHorizonCount; ++h) {
        out[i].cpu_percent[h] = origins[i].series->cpu_percent[origins[i].end - 1] + 3.0 * kHorizonSteps[h];
        out[i].mem_percent[h] = origins[i].series->mem_percent[origins[i].end - 1];
        out[i].cpu_log_spread[h] = 0.05;
      }
    }
    return out;
  }
};

// A fixed inventory: the port as a cluster without an LMS would fill it.
class StaticInventory : public NodeInventorySource {
 public:
  absl::StatusOr<std::vector<NodeContext>> ListNodes() override { return nodes; }
  std::vector<NodeContext> nodes;
};

struct Served {
  Served() : kv(NewInMemoryKvStore({"telemetry"})), clock(absl::FromUnixMillis(10'000 * 5 * kMinute)) {
    store = *NewKvTelemetryStore(*kv);
    advisor = std::make_unique<Advisor>(*store, std::make_unique<TrendForecaster>(),
                                        AdvisorOptions{.cluster = "edge-1", .breach_threshold_percent = 80});
    service = std::make_unique<PdlcServiceImpl>(*advisor, *store, [this] { return absl::ToUnixMillis(clock.Now()); });
    GrpcServerOptions options;
    options.service = "pdlc";
    options.insecure = true;
    options.services = {service.get()};
    auto started = GrpcServer::Start(options);
    REQUIRE(started.ok());
    server = *std::move(started);
    stub = v1::PdlcService::NewStub(grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
    for (const char* name : {"n1", "n2"}) {
      NodeContext c;
      c.node = name;
      c.cpu_capacity_millicores = 4000;
      c.memory_capacity_bytes = 8e9;
      c.watts_per_core = name == std::string("n1") ? 30 : 10;
      c.carbon_g_per_kwh = 300;
      inventory.nodes.push_back(c);
    }
  }
  // IngestMetrics of one node's cpu and memory fractions at each minute of [from, to).
  v1::IngestMetricsResponse Ingest(const std::string& node, int64_t from_ms, int64_t to_ms, double cpu,
                                   const std::string& id) {
    v1::IngestMetricsRequest request;
    request.set_request_id(id);
    for (int64_t t = from_ms; t < to_ms; t += kMinute) {
      for (auto [metric, value] : {std::pair{kNodeCpuMetric, cpu}, {kNodeMemoryMetric, 0.4}}) {
        v1::MetricSample* s = request.add_samples();
        s->set_subject_kind(v1::SUBJECT_KIND_NODE);
        s->set_subject(node);
        s->set_metric(metric);
        s->set_value(value);
        *s->mutable_sample_time() = TimeUtil::MillisecondsToTimestamp(t);
      }
    }
    grpc::ClientContext context;
    v1::IngestMetricsResponse response;
    REQUIRE(stub->IngestMetrics(&context, request, &response).ok());
    return response;
  }
  std::unique_ptr<KvStore> kv;
  SimulatedClock clock;
  std::unique_ptr<TelemetryStore> store;
  std::unique_ptr<Advisor> advisor;
  std::unique_ptr<PdlcServiceImpl> service;
  std::unique_ptr<GrpcServer> server;
  std::unique_ptr<v1::PdlcService::Stub> stub;
  StaticInventory inventory;
};

TEST_CASE("IngestMetrics stores good samples once and names every bad one") {
  Served s;
  const int64_t now = absl::ToUnixMillis(s.clock.Now());
  v1::IngestMetricsRequest request;
  request.set_request_id("batch-1");
  auto add = [&](v1::SubjectKind kind, const std::string& subject, double value, bool timed) {
    v1::MetricSample* sample = request.add_samples();
    sample->set_subject_kind(kind);
    sample->set_subject(subject);
    sample->set_metric(kNodeCpuMetric);
    sample->set_value(value);
    if (timed) *sample->mutable_sample_time() = TimeUtil::MillisecondsToTimestamp(now);
  };
  add(v1::SUBJECT_KIND_NODE, "n1", 0.5, true);
  add(v1::SUBJECT_KIND_CLUSTER, "c", 0.5, true);
  add(v1::SUBJECT_KIND_NODE, "n1", std::nan(""), true);
  add(v1::SUBJECT_KIND_NODE, "n2", 0.5, false);
  add(v1::SUBJECT_KIND_NODE, "bad name!", 0.5, true);
  add(v1::SUBJECT_KIND_NODE, "n2", 0.7, true);
  (*request.mutable_samples(5)->mutable_labels())["app"] = "x";
  grpc::ClientContext context;
  v1::IngestMetricsResponse response;
  REQUIRE(s.stub->IngestMetrics(&context, request, &response).ok());
  CHECK(response.accepted_count() == 2);
  CHECK(response.rejected_count() == 4);
  std::vector<std::string> subjects;
  for (const auto& r : response.rejections()) subjects.push_back(r.subject());
  CHECK(subjects == std::vector<std::string>{"samples[1].subject_kind", "samples[2].value", "samples[3].sample_time",
                                             "samples[4].subject", "samples[5].labels"});
  // The same batch again is stored once.
  grpc::ClientContext again;
  v1::IngestMetricsResponse retry;
  REQUIRE(s.stub->IngestMetrics(&again, request, &retry).ok());
  CHECK(retry.accepted_count() == 2);
  auto stored = s.store->ReadRaw({SubjectKind::kNode, "n1", kNodeCpuMetric}, 0, now + 1);
  REQUIRE(stored.ok());
  CHECK(stored->size() == 1);
  // No request id: refused.
  request.clear_request_id();
  grpc::ClientContext no_id;
  CHECK(s.stub->IngestMetrics(&no_id, request, &response).error_message().find("request_id") == 0);
}

TEST_CASE("a load step shows in the next recommendation and the forecasts follow training") {
  Served s;
  const int64_t now = absl::ToUnixMillis(s.clock.Now());
  s.Ingest("n1", now - 60 * kMinute, now, 0.2, "n1-history");
  s.Ingest("n2", now - 60 * kMinute, now, 0.2, "n2-history");
  PdlcLoop loop(*s.advisor, *s.store, nullptr, &s.inventory, s.clock, {});
  const LoopReport first = loop.RunOnce(s.clock.Now());
  CHECK(first.nodes == 2);
  CHECK(first.trained);
  CHECK(first.training.ok());

  auto recommend = [&](common::v1::PerformanceProfile profile) {
    v1::GetRecommendationRequest request;
    request.set_performance_profile(profile);
    grpc::ClientContext context;
    v1::GetRecommendationResponse response;
    grpc::Status status = s.stub->GetRecommendation(&context, request, &response);
    REQUIRE(status.ok());
    return response.recommendation();
  };
  const v1::Recommendation before = recommend(common::v1::PERFORMANCE_PROFILE_LATENCY);
  CHECK(before.cluster() == "edge-1");
  REQUIRE(before.node_scores_size() == 2);
  CHECK(before.node_scores(0).components().at("cpu_headroom") == Approx(80 - 3));  // forecast 23 % at 5 min
  CHECK(before.advisories_size() == 0);
  CHECK(before.model_version().find("local-1") == 0);
  CHECK(before.forecasts_size() == 2 * 2 * 5);

  // A load step on n1: the next pass (one refresh interval later) sees it.
  s.clock.Advance(absl::Minutes(1));
  s.Ingest("n1", now, now + kMinute + 1, 0.78, "n1-step");
  loop.RunOnce(s.clock.Now());
  const v1::Recommendation after = recommend(common::v1::PERFORMANCE_PROFILE_LATENCY);
  CHECK(after.node_scores(0).components().at("cpu_headroom") < 25);
  CHECK(after.node_scores(0).score() < before.node_scores(0).score());
  // Greenness prefers n2 (less energy per core).
  const v1::Recommendation green = recommend(common::v1::PERFORMANCE_PROFILE_GREENNESS);
  CHECK(green.node_scores(1).score() > green.node_scores(0).score());
}

TEST_CASE("bad recommendation and forecast requests name the field") {
  Served s;
  PdlcLoop loop(*s.advisor, *s.store, nullptr, &s.inventory, s.clock, {});
  loop.RunOnce(s.clock.Now());
  auto error_of = [&](const v1::GetRecommendationRequest& request) {
    grpc::ClientContext context;
    v1::GetRecommendationResponse response;
    return s.stub->GetRecommendation(&context, request, &response).error_message();
  };
  v1::GetRecommendationRequest request;
  request.set_performance_profile(common::v1::PERFORMANCE_PROFILE_CUSTOM);
  (*request.mutable_custom_weights())["speed"] = 1;
  CHECK(error_of(request).find("custom_weights[\"speed\"]: not a criterion") == 0);
  request.set_performance_profile(common::v1::PERFORMANCE_PROFILE_GREENNESS);
  CHECK(error_of(request).find("custom_weights: only used with the CUSTOM") == 0);
  request.clear_custom_weights();
  request.set_horizon_ns(int64_t{31} * 60'000'000'000);
  CHECK(error_of(request).find("horizon_ns:") == 0);
  request.set_horizon_ns(0);
  request.add_nodes("n9");
  CHECK(error_of(request).find("nodes: \"n9\"") == 0);
  request.clear_nodes();
  request.mutable_workload_requests()->set_gpu(1);
  CHECK(error_of(request).find("workload_requests:") == 0);

  v1::ListForecastsRequest list;
  list.set_page_token("zz");
  grpc::ClientContext context;
  v1::ListForecastsResponse response;
  CHECK(s.stub->ListForecasts(&context, list, &response).error_message().find("page_token") == 0);
}

TEST_CASE("ListForecasts pages through every node metric and horizon") {
  Served s;
  const int64_t now = absl::ToUnixMillis(s.clock.Now());
  s.Ingest("n1", now - 60 * kMinute, now, 0.5, "a");
  s.Ingest("n2", now - 60 * kMinute, now, 0.5, "b");
  PdlcLoop loop(*s.advisor, *s.store, nullptr, &s.inventory, s.clock, {});
  REQUIRE(loop.RunOnce(s.clock.Now()).training.ok());
  std::vector<v1::Forecast> all;
  std::string token;
  do {
    v1::ListForecastsRequest request;
    request.set_page_size(7);
    request.set_page_token(token);
    grpc::ClientContext context;
    v1::ListForecastsResponse response;
    REQUIRE(s.stub->ListForecasts(&context, request, &response).ok());
    all.insert(all.end(), response.forecasts().begin(), response.forecasts().end());
    token = response.next_page_token();
  } while (!token.empty());
  REQUIRE(all.size() == 20);
  CHECK(all[0].subject() == "n1");
  CHECK(all[0].metric() == "cpu_percent");
  CHECK(all[0].horizon_ns() == int64_t{5} * 60'000'000'000);
  CHECK(all[0].predicted_value() == Approx(53));
  CHECK(all[0].lower_bound() < 53);
  CHECK(all[0].upper_bound() > 53);
  CHECK(all[0].confidence() == Approx(0.8));
  v1::ListForecastsRequest memory;
  memory.set_subject("n2");
  memory.set_metric("memory_percent");
  grpc::ClientContext context;
  v1::ListForecastsResponse response;
  REQUIRE(s.stub->ListForecasts(&context, memory, &response).ok());
  CHECK(response.forecasts_size() == 5);
}

TEST_CASE("WatchRecommendations streams every profile after each refresh and refuses bad profiles") {
  Served s;
  const int64_t now = absl::ToUnixMillis(s.clock.Now());
  s.Ingest("n1", now - 60 * kMinute, now, 0.2, "n1-history");
  s.Ingest("n2", now - 60 * kMinute, now, 0.2, "n2-history");
  PdlcLoop loop(*s.advisor, *s.store, nullptr, &s.inventory, s.clock, {});
  loop.RunOnce(s.clock.Now());

  grpc::ClientContext context;
  v1::WatchRecommendationsRequest request;
  request.add_performance_profiles(common::v1::PERFORMANCE_PROFILE_GREENNESS);
  request.add_performance_profiles(common::v1::PERFORMANCE_PROFILE_LATENCY);
  request.set_scores_only(true);
  auto reader = s.stub->WatchRecommendations(&context, request);
  // The refresh that already happened comes at once.
  v1::WatchRecommendationsResponse first;
  REQUIRE(reader->Read(&first));
  REQUIRE(first.recommendations_size() == 2);
  CHECK(first.recommendations(0).performance_profile() == common::v1::PERFORMANCE_PROFILE_GREENNESS);
  CHECK(first.recommendations(1).performance_profile() == common::v1::PERFORMANCE_PROFILE_LATENCY);
  CHECK(first.recommendations(0).cluster() == "edge-1");
  REQUIRE(first.recommendations(0).node_scores_size() == 2);
  CHECK(first.recommendations(0).forecasts_size() == 0);  // scores only
  CHECK(first.recommendations(0).node_scores(0).components().empty());
  const double before = first.recommendations(1).cluster_score();

  // A load step on both nodes; the next refresh is streamed with lower scores.
  s.clock.Advance(absl::Minutes(1));
  s.Ingest("n1", now, now + kMinute + 1, 0.9, "n1-step");
  s.Ingest("n2", now, now + kMinute + 1, 0.9, "n2-step");
  loop.RunOnce(s.clock.Now());
  v1::WatchRecommendationsResponse next;
  REQUIRE(reader->Read(&next));
  REQUIRE(next.recommendations_size() == 2);
  CHECK(next.recommendations(1).cluster_score() < before - 20);
  context.TryCancel();
  while (reader->Read(&next)) {
  }
  reader->Finish();

  auto error_of = [&](std::vector<common::v1::PerformanceProfile> profiles) {
    grpc::ClientContext c;
    v1::WatchRecommendationsRequest r;
    for (auto p : profiles) r.add_performance_profiles(p);
    auto refused = s.stub->WatchRecommendations(&c, r);
    v1::WatchRecommendationsResponse m;
    CHECK_FALSE(refused->Read(&m));
    grpc::Status status = refused->Finish();
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    return status.error_message();
  };
  CHECK(error_of({common::v1::PERFORMANCE_PROFILE_CUSTOM}).find("performance_profiles[0]: CUSTOM") == 0);
  CHECK(error_of({common::v1::PERFORMANCE_PROFILE_COST, common::v1::PERFORMANCE_PROFILE_COST})
            .find("performance_profiles[1]: listed twice") == 0);
  CHECK(error_of({static_cast<common::v1::PerformanceProfile>(99)}).find("performance_profiles[0]") == 0);
}

}  // namespace
}  // namespace codeco::pdlc
