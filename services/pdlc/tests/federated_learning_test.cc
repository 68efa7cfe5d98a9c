// Federated training over real gRPC on loopback: an aggregator serving
// FederatedLearningService and peers (FederatedPeer) in threads. Checks that
//  (a) the global model every peer applies equals plain FedAvg of the peers'
//      weights to 1e-6;
//  (b) one peer's masked update, as the aggregator receives it, is
//      uncorrelated with that peer's weights;
//  (c) a peer that stops after joining does not block the round: the
//      survivors' FedAvg comes out;
//  (d) every message on the wire, recorded by a client interceptor on every
//      peer's channel and a server interceptor on the aggregator, is one of
//      the service's messages and carries no telemetry: no node or metric
//      name, no sample value, only keys, masked vectors, seeds, ids, counts.
//
// Each peer's "local model" is a test double trained (deterministically)
// from a usage series of its own, so the test knows the telemetry that must
// not travel. The aggregator's clock is simulated; the test moves it past the
// collection deadline once the survivors have submitted.

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "codeco/common/clock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/client_interceptor.h"
#include "grpcpp/support/server_interceptor.h"
#include "pdlc/core/telemetry.h"
#include "pdlc/server/federated_peer.h"
#include "pdlc/server/federated_service.h"

namespace codeco::pdlc {
namespace {

using grpc::experimental::InterceptionHookPoints;

constexpr char kModel[] = "lstm-cpu-mem";
constexpr char kNeighborhood[] = "nbh-fl";
constexpr size_t kWeights = 4000;

// One message seen on the wire.
struct WireMessage {
  std::string side;   // "client" or "server"
  std::string type;   // full protobuf type name
  std::string bytes;  // serialized
  std::unique_ptr<google::protobuf::Message> copy;
};

// Every message of every recorded call, from any thread.
class Wire {
 public:
  void Record(const std::string& side, const google::protobuf::Message& message) {
    WireMessage m{side, message.GetTypeName(), message.SerializeAsString(), {}};
    m.copy.reset(message.New());
    m.copy->CopyFrom(message);
    absl::MutexLock lock(&mu_);
    messages_.push_back(std::move(m));
  }
  // A message gRPC had already serialized: parsed as `type`, a message of
  // the method being called.
  void RecordBytes(const std::string& side, const google::protobuf::Descriptor* type,
                   const grpc::ByteBuffer& buffer) {
    std::vector<grpc::Slice> slices;
    REQUIRE(buffer.Dump(&slices).ok());
    std::string bytes;
    for (const grpc::Slice& s : slices)
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    REQUIRE(type != nullptr);
    std::unique_ptr<google::protobuf::Message> copy(
        google::protobuf::MessageFactory::generated_factory()->GetPrototype(type)->New());
    REQUIRE(copy->ParseFromString(bytes));
    absl::MutexLock lock(&mu_);
    messages_.push_back({side, type->full_name(), std::move(bytes), std::move(copy)});
  }
  // Calls `f` on every message recorded.
  template <typename F>
  void ForEach(F f) {
    absl::MutexLock lock(&mu_);
    for (const WireMessage& m : messages_) f(m);
  }

 private:
  absl::Mutex mu_;
  std::vector<WireMessage> messages_ ABSL_GUARDED_BY(mu_);
};

// The type of the message `side` sends in `method` ("/pkg.Service/Method").
const google::protobuf::Descriptor* SentType(const std::string& side, const char* method) {
  std::string name(method);
  const size_t slash = name.rfind('/');
  REQUIRE(slash != std::string::npos);
  name = name.substr(1, slash - 1) + "." + name.substr(slash + 1);
  const google::protobuf::MethodDescriptor* m =
      google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(name);
  REQUIRE(m != nullptr);
  return side == "server" ? m->output_type() : m->input_type();
}

class RecordingInterceptor : public grpc::experimental::Interceptor {
 public:
  RecordingInterceptor(Wire& wire, std::string side, const char* method)
      : wire_(wire), side_(std::move(side)), method_(method) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      if (const void* m = methods->GetSendMessage()) {
        wire_.Record(side_, *static_cast<const google::protobuf::Message*>(m));
      } else if (grpc::ByteBuffer* b = methods->GetSerializedSendMessage()) {
        wire_.RecordBytes(side_, SentType(side_, method_), *b);
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      if (void* m = methods->GetRecvMessage()) {
        wire_.Record(side_, *static_cast<const google::protobuf::Message*>(m));
      }
    }
    methods->Proceed();
  }

 private:
  Wire& wire_;
  const std::string side_;
  const char* method_;
};

class ClientRecorder : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit ClientRecorder(Wire& wire) : wire_(wire) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return new RecordingInterceptor(wire_, "client", info->method());
  }

 private:
  Wire& wire_;
};

class ServerRecorder : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit ServerRecorder(Wire& wire) : wire_(wire) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RecordingInterceptor(wire_, "server", info->method());
  }

 private:
  Wire& wire_;
};

// A peer's local model: trained from its cluster's usage series (node names,
// metric names, sample values: the telemetry that must not travel).
class FakeLocalModel : public WeightsSource {
 public:
  FakeLocalModel(const std::string& cluster, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> usage(0.05, 0.95);
    for (int n = 0; n < 3; ++n) {
      const std::string node = cluster + "-worker-" + std::to_string(n);
      nodes.push_back(node);
      for (int i = 0; i < 200; ++i) samples.push_back(usage(rng));
    }
    // "Training": weights depend on the series and on the peer.
    double mean = 0;
    for (double v : samples) mean += v / static_cast<double>(samples.size());
    std::uniform_real_distribution<float> noise(-1.0f, 1.0f);
    weights.resize(kWeights);
    for (size_t k = 0; k < kWeights; ++k) {
      weights[k] =
          static_cast<float>(0.5 * std::sin(0.01 * static_cast<double>(k) + mean)) + noise(rng);
    }
    sample_count = samples.size() + seed;  // distinct FedAvg weights
  }
  absl::StatusOr<LocalWeights> Snapshot() override { return LocalWeights{weights, sample_count}; }
  absl::Status Apply(const std::vector<float>& global, uint64_t round) override {
    absl::MutexLock lock(&mu);
    applied = global;
    applied_round = round;
    return absl::OkStatus();
  }

  std::vector<std::string> nodes;
  std::vector<double> samples;
  std::vector<float> weights;
  uint64_t sample_count = 0;
  absl::Mutex mu;
  std::vector<float> applied ABSL_GUARDED_BY(mu);
  uint64_t applied_round ABSL_GUARDED_BY(mu) = 0;
};

// The aggregator on 127.0.0.1:0 with a recording server interceptor.
struct Aggregator {
  explicit Aggregator(std::set<std::string> members)
      : clock(absl::FromUnixMillis(1'700'000'000'000)) {
    FederatedRoundOptions options;
    options.model_name = kModel;
    options.neighborhood = kNeighborhood;
    options.members = std::move(members);
    options.join_window_ms = 60'000;
    options.collection_window_ms = 120'000;
    options.reveal_window_ms = 60'000;
    absl::StatusOr<FederatedRounds> rounds = FederatedRounds::Create(options);
    REQUIRE(rounds.ok());
    service = std::make_unique<FederatedLearningServiceImpl>(
        *std::move(rounds), [this] { return absl::ToUnixMillis(clock.Now()); }, "hub");
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service.get());
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(std::make_unique<ServerRecorder>(wire));
    builder.experimental().SetInterceptorCreators(std::move(creators));
    server = builder.BuildAndStart();
    REQUIRE(server);
    REQUIRE(port > 0);
    address = "127.0.0.1:" + std::to_string(port);
  }
  ~Aggregator() { server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2)); }

  // A channel whose every message lands in `wire`.
  std::shared_ptr<grpc::Channel> Channel() {
    std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> creators;
    creators.push_back(std::make_unique<ClientRecorder>(wire));
    return grpc::experimental::CreateCustomChannelWithInterceptors(
        address, grpc::InsecureChannelCredentials(), grpc::ChannelArguments(), std::move(creators));
  }

  v1::Round GetRound(int64_t round) {
    auto stub = v1::FederatedLearningService::NewStub(Channel());
    v1::GetRoundRequest request;
    request.set_model_name(kModel);
    request.set_neighborhood_id(kNeighborhood);
    request.set_round(round);
    grpc::ClientContext context;
    v1::GetRoundResponse response;
    REQUIRE(stub->GetRound(&context, request, &response).ok());
    return response.round();
  }

  Wire wire;
  SimulatedClock clock;
  std::unique_ptr<FederatedLearningServiceImpl> service;
  std::unique_ptr<grpc::Server> server;
  std::string address;
};

// Waits (polling) until `done` holds; false after 30 s.
template <typename F>
bool WaitFor(F done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return done();
}

FederatedPeerOptions PeerOptions(const std::string& cluster) {
  FederatedPeerOptions options;
  options.peer_id = cluster;
  options.model_name = kModel;
  options.neighborhood = kNeighborhood;
  options.poll_interval = absl::Milliseconds(10);
  options.call_timeout = absl::Seconds(5);
  return options;
}

std::vector<double> PlainFedAvg(const std::vector<FakeLocalModel*>& models) {
  std::vector<double> sum(kWeights, 0.0);
  double total = 0;
  for (const FakeLocalModel* m : models) {
    for (size_t k = 0; k < kWeights; ++k)
      sum[k] += static_cast<double>(m->sample_count) * m->weights[k];
    total += static_cast<double>(m->sample_count);
  }
  for (double& v : sum) v /= total;
  return sum;
}

double MaxError(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (size_t k = 0; k < got.size(); ++k) worst = std::max(worst, std::fabs(got[k] - want[k]));
  return worst;
}

double Pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double mx = 0, my = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    mx += x[i] / n;
    my += y[i] / n;
  }
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxy / std::sqrt(sxx * syy);
}

// (d): every recorded message is one of the service's, has only fields of
// the protocol (no float or double field at all), its strings are ids, and
// its bytes hold no node name, metric name or sample value.
void CheckNoTelemetry(Wire& wire, const std::vector<FakeLocalModel*>& models,
                      const std::set<std::string>& peer_ids) {
  std::set<std::string> service_types;
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          v1::FederatedLearningService::service_full_name());
  REQUIRE(service != nullptr);
  for (int i = 0; i < service->method_count(); ++i) {
    service_types.insert(service->method(i)->input_type()->full_name());
    service_types.insert(service->method(i)->output_type()->full_name());
  }
  std::set<std::string> allowed_strings(peer_ids.begin(), peer_ids.end());
  allowed_strings.insert({kModel, kNeighborhood, kFloat32LeFormat, ""});
  std::vector<std::string> forbidden = {kNodeCpuMetric, kNodeMemoryMetric};
  // Sample values as doubles, and every two consecutive samples as float32
  // (a single float32 is only 4 bytes: it turns up in kilobytes of random
  // masks or weights by chance, two in a row do not).
  for (const FakeLocalModel* m : models) {
    forbidden.insert(forbidden.end(), m->nodes.begin(), m->nodes.end());
    for (size_t i = 0; i < m->samples.size(); ++i) {
      std::string raw(sizeof(double), '\0');
      std::memcpy(raw.data(), &m->samples[i], sizeof(double));
      forbidden.push_back(raw);
      if (i + 1 < m->samples.size()) {
        forbidden.push_back(EncodeFloat32Le(
            {static_cast<float>(m->samples[i]), static_cast<float>(m->samples[i + 1])}));
      }
    }
  }

  size_t count = 0;
  std::set<std::string> seen_types;
  wire.ForEach([&](const WireMessage& m) {
    ++count;
    INFO(m.side << " " << m.type);
    REQUIRE(m.copy != nullptr);  // every message was recorded parsed
    CHECK(service_types.count(m.type) == 1);
    seen_types.insert(m.type);
    for (const std::string& f : forbidden) CHECK(m.bytes.find(f) == std::string::npos);

    // Walk the fields.
    std::vector<const google::protobuf::Message*> stack = {m.copy.get()};
    while (!stack.empty()) {
      const google::protobuf::Message* msg = stack.back();
      stack.pop_back();
      const google::protobuf::Reflection* r = msg->GetReflection();
      std::vector<const google::protobuf::FieldDescriptor*> fields;
      r->ListFields(*msg, &fields);
      for (const google::protobuf::FieldDescriptor* f : fields) {
        INFO("field " << f->full_name());
        CHECK(f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE);
        CHECK(f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_FLOAT);
        const int n = f->is_repeated() ? r->FieldSize(*msg, f) : 1;
        for (int i = 0; i < n; ++i) {
          if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
            stack.push_back(f->is_repeated() ? &r->GetRepeatedMessage(*msg, f, i)
                                             : &r->GetMessage(*msg, f));
          } else if (f->type() == google::protobuf::FieldDescriptor::TYPE_STRING) {
            const std::string v =
                f->is_repeated() ? r->GetRepeatedString(*msg, f, i) : r->GetString(*msg, f);
            CHECK(allowed_strings.count(v) == 1);
          } else if (f->type() == google::protobuf::FieldDescriptor::TYPE_BYTES) {
            const std::string v =
                f->is_repeated() ? r->GetRepeatedString(*msg, f, i) : r->GetString(*msg, f);
            if (f->name() == "weights") {
              // The global model: the FedAvg weights and nothing else.
              CHECK(f->containing_type()->full_name() == "codeco.pdlc.v1.GlobalModel");
              CHECK(v.size() == kWeights * 4);
            } else {
              CHECK((f->name() == "public_key" || f->name() == "seed"));
              CHECK(v.size() == 32);
            }
          }
        }
      }
    }
  });
  CHECK(count > 0);
  // The whole protocol was exercised.
  for (const char* type :
       {"codeco.pdlc.v1.JoinRoundRequest", "codeco.pdlc.v1.GetRoundResponse",
        "codeco.pdlc.v1.SubmitMaskedUpdateRequest", "codeco.pdlc.v1.GetGlobalModelResponse"}) {
    CHECK(seen_types.count(type) == 1);
  }
}

TEST_CASE(
    "Four peers train over gRPC with exact FedAvg and masked updates and no telemetry on the wire",
    "[pdlc][federated][grpc]") {
  const std::vector<std::string> ids = {"c-1", "c-2", "c-3", "c-4"};
  Aggregator aggregator({ids.begin(), ids.end()});
  std::vector<std::unique_ptr<FakeLocalModel>> models;
  std::vector<std::unique_ptr<FederatedPeer>> peers;
  for (size_t i = 0; i < ids.size(); ++i) {
    models.push_back(std::make_unique<FakeLocalModel>(ids[i], static_cast<uint32_t>(10 + i)));
    peers.push_back(
        std::make_unique<FederatedPeer>(aggregator.Channel(), *models.back(), PeerOptions(ids[i])));
  }
  std::vector<absl::StatusOr<PeerRoundResult>> results(ids.size(), absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ids.size(); ++i) {
    threads.emplace_back(
        [&, i] { results[i] = peers[i]->RunRound(absl::Now() + absl::Seconds(60)); });
  }
  for (std::thread& t : threads) t.join();

  std::vector<FakeLocalModel*> all;
  for (auto& m : models) all.push_back(m.get());
  const std::vector<double> want = PlainFedAvg(all);
  for (size_t i = 0; i < ids.size(); ++i) {
    INFO(ids[i]);
    REQUIRE(results[i].ok());
    CHECK(results[i]->round == 1);
    CHECK(results[i]->state == v1::ROUND_STATE_FINISHED);
    CHECK(results[i]->applied);
    CHECK(results[i]->contributors == ids);
    absl::MutexLock lock(&models[i]->mu);
    CHECK(models[i]->applied_round == 1);
    CHECK(MaxError(models[i]->applied, want) < 1e-6);  // (a)
  }

  // (b) What the aggregator received from c-2, decoded as if it were a plain
  // encoding, next to c-2's weights. Masked elements are uniform mod 2^64,
  // so the sample correlation over 4000 pairs is about N(0, 1/4000): sd
  // 0.016; 0.1 is over 6 sd (a chance below 1e-9 of failing by accident).
  std::vector<double> seen, weights;
  aggregator.wire.ForEach([&](const WireMessage& m) {
    if (m.side != "server" || m.type != "codeco.pdlc.v1.SubmitMaskedUpdateRequest") return;
    const auto& submit = static_cast<const v1::SubmitMaskedUpdateRequest&>(*m.copy);
    if (submit.peer_id() != "c-2" || !seen.empty()) return;
    for (int k = 0; k < static_cast<int>(kWeights); ++k)
      seen.push_back(DecodeFixedPoint(submit.masked_elements(k)));
  });
  REQUIRE(seen.size() == kWeights);
  for (float w : models[1]->weights) weights.push_back(w);
  CHECK(std::fabs(Pearson(seen, weights)) < 0.1);

  CheckNoTelemetry(aggregator.wire, all, {ids.begin(), ids.end()});  // (d)
}

TEST_CASE("A peer that stops after joining does not block the round", "[pdlc][federated][grpc]") {
  const std::vector<std::string> ids = {"c-1", "c-2", "c-3", "c-4"};
  Aggregator aggregator({ids.begin(), ids.end()});
  std::vector<std::unique_ptr<FakeLocalModel>> models;
  std::vector<std::unique_ptr<FederatedPeer>> peers;
  for (size_t i = 0; i < 3; ++i) {
    models.push_back(std::make_unique<FakeLocalModel>(ids[i], static_cast<uint32_t>(20 + i)));
    peers.push_back(
        std::make_unique<FederatedPeer>(aggregator.Channel(), *models.back(), PeerOptions(ids[i])));
  }
  std::vector<absl::StatusOr<PeerRoundResult>> results(3, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < 3; ++i) {
    threads.emplace_back(
        [&, i] { results[i] = peers[i]->RunRound(absl::Now() + absl::Seconds(60)); });
  }

  // c-4 joins with a key of its own and then goes away.
  absl::StatusOr<X25519KeyPair> key = X25519KeyPair::Generate();
  REQUIRE(key.ok());
  {
    auto stub = v1::FederatedLearningService::NewStub(aggregator.Channel());
    v1::JoinRoundRequest join;
    join.set_model_name(kModel);
    join.set_neighborhood_id(kNeighborhood);
    join.set_peer_id("c-4");
    join.set_public_key(key->public_key());
    join.set_weight_count(kWeights);
    grpc::ClientContext context;
    v1::JoinRoundResponse response;
    REQUIRE(stub->JoinRound(&context, join, &response).ok());
    CHECK(response.round().round() == 1);
  }
  // Once the three survivors are in, collection waits only for its deadline.
  REQUIRE(WaitFor([&] {
    const v1::Round r = aggregator.GetRound(1);
    return r.state() == v1::ROUND_STATE_COLLECTING && r.submitted_count() == 3;
  }));
  aggregator.clock.Advance(absl::Seconds(121));
  for (std::thread& t : threads) t.join();

  const v1::Round round = aggregator.GetRound(1);
  CHECK(round.state() == v1::ROUND_STATE_FINISHED);
  CHECK(
      std::vector<std::string>(round.dropped_peer_ids().begin(), round.dropped_peer_ids().end()) ==
      std::vector<std::string>{"c-4"});
  std::vector<FakeLocalModel*> survivors;
  for (auto& m : models) survivors.push_back(m.get());
  const std::vector<double> want = PlainFedAvg(survivors);
  for (size_t i = 0; i < 3; ++i) {
    INFO(ids[i]);
    REQUIRE(results[i].ok());
    CHECK(results[i]->state == v1::ROUND_STATE_FINISHED);
    CHECK(results[i]->applied);
    CHECK(results[i]->contributors == std::vector<std::string>{"c-1", "c-2", "c-3"});
    absl::MutexLock lock(&models[i]->mu);
    CHECK(MaxError(models[i]->applied, want) < 1e-6);  // (c)
  }
  CheckNoTelemetry(aggregator.wire, survivors, {ids.begin(), ids.end()});  // (d), seeds included
  bool saw_reveal = false;
  aggregator.wire.ForEach([&](const WireMessage& m) {
    saw_reveal = saw_reveal || m.type == "codeco.pdlc.v1.RevealSeedsRequest";
  });
  CHECK(saw_reveal);
}

TEST_CASE("The service binds peers and names bad fields", "[pdlc][federated][grpc]") {
  Aggregator aggregator({"c-1", "c-2"});
  auto stub = v1::FederatedLearningService::NewStub(aggregator.Channel());
  auto call_join = [&](v1::JoinRoundRequest join) {
    grpc::ClientContext context;
    v1::JoinRoundResponse response;
    return stub->JoinRound(&context, join, &response);
  };
  v1::JoinRoundRequest join;
  join.set_model_name(kModel);
  join.set_neighborhood_id(kNeighborhood);
  join.set_peer_id("c-1");
  join.set_public_key(std::string(32, '\x01'));
  join.set_weight_count(10);

  v1::JoinRoundRequest other_model = join;
  other_model.set_model_name("other");
  grpc::Status s = call_join(other_model);
  CHECK(s.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(s.error_message().find("model_name") != std::string::npos);
  v1::JoinRoundRequest other_neighborhood = join;
  other_neighborhood.set_neighborhood_id("nbh-x");
  CHECK(call_join(other_neighborhood).error_code() == grpc::StatusCode::NOT_FOUND);
  v1::JoinRoundRequest stranger = join;
  stranger.set_peer_id("c-9");
  CHECK(call_join(stranger).error_code() == grpc::StatusCode::PERMISSION_DENIED);
  v1::JoinRoundRequest negative = join;
  negative.set_weight_count(-1);
  s = call_join(negative);
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(s.error_message().find("weight_count") != std::string::npos);
  REQUIRE(call_join(join).ok());
  CHECK(call_join(join).ok());  // re-sent

  v1::RevealSeedsRequest reveal;
  reveal.set_model_name(kModel);
  reveal.set_neighborhood_id(kNeighborhood);
  reveal.set_round(1);
  reveal.set_peer_id("c-1");
  reveal.add_reveals()->set_seed("short");
  grpc::ClientContext context;
  v1::RevealSeedsResponse response;
  s = stub->RevealSeeds(&context, reveal, &response);
  CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(s.error_message().find("reveals[0].seed") != std::string::npos);

  v1::GetGlobalModelRequest get;
  get.set_model_name(kModel);
  get.set_neighborhood_id(kNeighborhood);
  grpc::ClientContext get_context;
  v1::GetGlobalModelResponse model;
  CHECK(stub->GetGlobalModel(&get_context, get, &model).error_code() ==
        grpc::StatusCode::NOT_FOUND);
}

TEST_CASE("Peer loops meet in rounds at multiples of the interval", "[pdlc][federated][grpc]") {
  Aggregator aggregator({"c-1", "c-2"});
  std::vector<std::unique_ptr<FakeLocalModel>> models;
  std::vector<std::unique_ptr<FederatedPeerLoop>> loops;
  for (const char* id : {"c-1", "c-2"}) {
    models.push_back(
        std::make_unique<FakeLocalModel>(id, static_cast<uint32_t>(models.size() + 30)));
    loops.push_back(std::make_unique<FederatedPeerLoop>(
        std::make_unique<FederatedPeer>(aggregator.Channel(), *models.back(), PeerOptions(id)),
        absl::Milliseconds(300)));
  }
  // However their loops started, both peers are in each round.
  auto applied_round = [](FakeLocalModel& m) {
    absl::MutexLock lock(&m.mu);
    return m.applied_round;
  };
  REQUIRE(
      WaitFor([&] { return applied_round(*models[0]) >= 2 && applied_round(*models[1]) >= 2; }));
  for (auto& loop : loops) loop->Stop();  // cancels a round in progress
  const v1::Round first = aggregator.GetRound(1);
  CHECK(first.state() == v1::ROUND_STATE_FINISHED);
  CHECK(first.participants_size() == 2);
}

// A model with a weight vector that "trains" by adding one to each weight.
class CountingForecaster : public UsageForecaster {
 public:
  std::string name() const override { return "counting"; }
  size_t window() const override { return 1; }
  absl::Status Train(const std::vector<UsageSeries>& history) override {
    if (history.empty()) return absl::FailedPreconditionError("no history");
    for (float& w : weights) w += 1.0f;
    windows = history.size() * 10;
    return absl::OkStatus();
  }
  std::vector<UsageForecast> Predict(const std::vector<ForecastOrigin>& origins) const override {
    return std::vector<UsageForecast>(origins.size());
  }
  std::vector<float> weights = {0.0f, 0.5f};
  size_t windows = 0;
};

TEST_CASE("The shared forecaster contributes only fresh local training", "[pdlc][federated]") {
  auto model = std::make_unique<CountingForecaster>();
  CountingForecaster* raw = model.get();
  SharedWeightsForecaster shared(
      std::move(model), {.weights = [raw] { return raw->weights; },
                         .set_weights =
                             [raw](const std::vector<float>& w) {
                               if (w.size() != raw->weights.size())
                                 return absl::InvalidArgumentError("size");
                               raw->weights = w;
                               return absl::OkStatus();
                             },
                         .trained_samples = [raw] { return static_cast<uint64_t>(raw->windows); }});
  CHECK(shared.name() == "counting");
  // Nothing trained yet: nothing to contribute.
  CHECK(shared.Snapshot().status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(shared.Train({}).code() == absl::StatusCode::kFailedPrecondition);
  CHECK(shared.Snapshot().status().code() == absl::StatusCode::kFailedPrecondition);

  REQUIRE(shared.Train(std::vector<UsageSeries>(3)).ok());
  absl::StatusOr<LocalWeights> local = shared.Snapshot();
  REQUIRE(local.ok());
  CHECK(local->weights == std::vector<float>{1.0f, 1.5f});
  CHECK(local->sample_count == 30);

  // A global model of the wrong size is refused and changes nothing.
  CHECK(shared.Apply({1.0f}, 1).code() == absl::StatusCode::kInvalidArgument);
  CHECK(shared.Snapshot().ok());
  // Applied: the local model is the global one, with nothing new to contribute.
  REQUIRE(shared.Apply({7.0f, 8.0f}, 1).ok());
  CHECK(raw->weights == std::vector<float>{7.0f, 8.0f});
  CHECK(shared.Snapshot().status().code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(shared.Train(std::vector<UsageSeries>(1)).ok());  // fine-tunes from the global model
  CHECK(shared.Snapshot()->weights == std::vector<float>{8.0f, 9.0f});
}

TEST_CASE("Weights travel as little-endian float32", "[pdlc][federated]") {
  const std::vector<float> weights = {1.0f, -0.25f, 3.5e-7f};
  const std::string bytes = EncodeFloat32Le(weights);
  REQUIRE(bytes.size() == 12);
  CHECK(bytes.substr(0, 4) == std::string("\x00\x00\x80\x3f", 4));
  CHECK(*DecodeFloat32Le(bytes, "weights") == weights);
  absl::Status odd = DecodeFloat32Le("abcde", "model.weights").status();
  CHECK(odd.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(odd.message()).find("model.weights") != std::string::npos);
}

}  // namespace
}  // namespace codeco::pdlc
