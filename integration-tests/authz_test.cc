// Authorization across all six service binaries with mTLS certificates from
// scripts/dev-ca.sh: every method of every service is called with every
// identity of a small federation (hub "hub", managed clusters "mc1" and
// "mc2"). The identities the table below names for a method must get
// anything but PERMISSION_DENIED; every other identity must get
// PERMISSION_DENIED. The table is written out here independently of
// libs/common/src/authz.cc, and every method the servers serve must have a row.
#include <signal.h>

#include <catch2/catch.hpp>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <regex>
#include <set>
#include <thread>
#include <vector>

#include "codeco/acm/v1/acm_service.pb.h"
#include "codeco/checkpointer/v1/checkpointer_service.pb.h"
#include "codeco/lms/v1/lms_service.pb.h"
#include "codeco/mdm/v1/mdm_service.pb.h"
#include "codeco/netma/v1/netma_service.pb.h"
#include "codeco/pdlc/v1/federated_learning.pb.h"
#include "codeco/pdlc/v1/pdlc_service.pb.h"
#include "codeco/swm/v1/swm_service.pb.h"
#include "google/protobuf/descriptor.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "grpcpp/support/client_callback.h"
#include "process.h"

namespace codeco::testing {
namespace {

namespace fs = std::filesystem;

void Run(const std::string& command) {
  INFO(command);
  REQUIRE(std::system((command + " >/dev/null").c_str()) == 0);
}

// Every identity the test calls with, "cluster/service".
const std::vector<std::string> kIdentities = {
    "hub/operator", "hub/acm", "hub/swm", "hub/netma", "hub/pdlc", "hub/mdm",
    "hub/kubeapps", "mc1/acm", "mc1/swm", "mc1/netma", "mc1/pdlc", "mc1/mdm",
    "mc1/operator", "mc2/acm", "mc2/swm", "mc2/netma", "mc2/pdlc", "mc2/checkpointer"};

using Who = std::set<std::string>;

Who Union(std::initializer_list<Who> parts) {
  Who out;
  for (const Who& p : parts) out.insert(p.begin(), p.end());
  return out;
}

const Who kOperator = {"hub/operator"};
const Who kHub = {"hub/acm", "hub/swm", "hub/netma", "hub/pdlc", "hub/mdm", "hub/kubeapps"};
const Who kReaders = Union({kOperator, kHub});
const Who kMc1 = {"mc1/acm", "mc1/swm", "mc1/netma", "mc1/pdlc", "mc1/mdm", "mc1/operator"};
const Who kMembers =
    Union({kMc1, {"mc2/acm", "mc2/swm", "mc2/netma", "mc2/pdlc", "mc2/checkpointer"}});
const Who kEveryone(kIdentities.begin(), kIdentities.end());

// A service binary under test and where it runs.
struct Server {
  std::string binary;   // "acm"
  std::string role;     // "hub" or "mc"
  std::string cluster;  // "hub" or "mc1"
  const google::protobuf::ServiceDescriptor* grpc_service;
  std::vector<std::string> extra_args;
  // A second contract the binary serves (null: none).
  const google::protobuf::ServiceDescriptor* second_service;
};

// The contract a server serves, from one of its request messages (which
// also links the generated code, and so the descriptor, into this binary).
const google::protobuf::ServiceDescriptor* ServiceOf(const google::protobuf::Descriptor* request,
                                                     const std::string& name) {
  return request->file()->FindServiceByName(name);
}

std::vector<Server> Servers() {
  return {
      {"acm",
       "hub",
       "hub",
       ServiceOf(acm::v1::ApplyApplicationRequest::descriptor(), "AcmService"),
       {},
       nullptr},
      {"swm",
       "hub",
       "hub",
       ServiceOf(swm::v1::PlaceApplicationRequest::descriptor(), "SwmService"),
       {},
       nullptr},
      {"netma",
       "hub",
       "hub",
       ServiceOf(netma::v1::GetNetworkTopologyRequest::descriptor(), "NetmaService"),
       {"--set", "netma.neighborhoods=nb1=hub,mc1"},
       nullptr},
      {"mdm",
       "hub",
       "hub",
       ServiceOf(mdm::v1::PublishEventsRequest::descriptor(), "MdmService"),
       {},
       nullptr},
      // mc1's PDLC is its neighborhood's aggregator: it serves the federated rounds.
      {"pdlc",
       "mc",
       "mc1",
       ServiceOf(pdlc::v1::IngestMetricsRequest::descriptor(), "PdlcService"),
       {"--set", "pdlc.federation.neighborhood=nb1", "--set",
        "pdlc.federation.aggregator=mc1=127.0.0.1:9"},
       ServiceOf(pdlc::v1::JoinRoundRequest::descriptor(), "FederatedLearningService")},
      {"checkpointer",
       "mc",
       "mc1",
       ServiceOf(checkpointer::v1::CreateCheckpointRequest::descriptor(), "CheckpointerService"),
       // An LMS address it never needs to reach: the calls are refused or
       // answered before any reaches the LMS.
       {"--federation.lms", "127.0.0.1:9", "--federation.lms-plaintext"},
       nullptr},
      // The Kubernetes LMS adapter, with a kube-apiserver nothing serves.
      {"kubelms",
       "mc",
       "mc1",
       ServiceOf(lms::v1::ListNodesRequest::descriptor(), "LmsService"),
       {"--set", std::string("kube.kubeconfig=") + CODECO_SOURCE_DIR +
                     "/integration-tests/testdata/unreachable-kubeconfig.yaml"},
       nullptr},
  };
}

std::string Serialize(const google::protobuf::Message& m) { return m.SerializeAsString(); }

// Requests whose fields a binding reads; every other method gets an empty message.
std::map<std::string, std::string> BoundRequests() {
  std::map<std::string, std::string> out;
  const std::string acm = "/codeco.acm.v1.AcmService/";
  {
    acm::v1::RegisterClusterRequest r;
    r.mutable_cluster()->mutable_metadata()->set_name("mc1");
    out[acm + "RegisterCluster"] = Serialize(r);
  }
  {
    acm::v1::HeartbeatRequest r;
    r.set_cluster_name("mc1");
    out[acm + "Heartbeat"] = Serialize(r);
  }
  {
    acm::v1::GetClusterRequest r;
    r.set_name("mc1");
    out[acm + "GetCluster"] = Serialize(r);
  }
  {
    acm::v1::ListNeighborhoodsRequest r;
    r.set_cluster("mc1");
    out[acm + "ListNeighborhoods"] = Serialize(r);
  }
  const std::string netma = "/codeco.netma.v1.NetmaService/";
  {
    netma::v1::GetNetworkTopologyRequest r;
    r.set_neighborhood_id("nb1");
    out[netma + "GetNetworkTopology"] = Serialize(r);
  }
  {
    netma::v1::GetNetworkMapRequest r;
    r.set_neighborhood_id("nb1");
    out[netma + "GetNetworkMap"] = Serialize(r);
  }
  {
    netma::v1::GetCostMapRequest r;
    r.set_neighborhood_id("nb1");
    r.set_metric(netma::v1::COST_METRIC_DELAY);
    out[netma + "GetCostMap"] = Serialize(r);
  }
  // Federated rounds: a peer acts only as its own cluster (peer_id).
  const std::string federated = "/codeco.pdlc.v1.FederatedLearningService/";
  {
    pdlc::v1::JoinRoundRequest r;
    r.set_model_name("lstm-cpu-mem");
    r.set_neighborhood_id("nb1");
    r.set_peer_id("mc1");
    out[federated + "JoinRound"] = Serialize(r);
  }
  {
    pdlc::v1::SubmitMaskedUpdateRequest r;
    r.set_model_name("lstm-cpu-mem");
    r.set_neighborhood_id("nb1");
    r.set_round(1);
    r.set_peer_id("mc1");
    out[federated + "SubmitMaskedUpdate"] = Serialize(r);
  }
  {
    pdlc::v1::RevealSeedsRequest r;
    r.set_model_name("lstm-cpu-mem");
    r.set_neighborhood_id("nb1");
    r.set_round(1);
    r.set_peer_id("mc1");
    out[federated + "RevealSeeds"] = Serialize(r);
  }
  // An auction's bid is asked only by the auctioneer's own PDLC.
  {
    pdlc::v1::RequestBidRequest r;
    r.set_auction_id("a1");
    r.set_neighborhood_id("nb1");
    r.set_auctioneer_cluster("mc1");
    r.mutable_workload()->set_name("shop/web");
    out["/codeco.pdlc.v1.PdlcService/RequestBid"] = Serialize(r);
  }
  return out;
}

// Method -> the identities that may call it (with the request above).
std::map<std::string, Who> ExpectedPolicy() {
  std::map<std::string, Who> p;
  auto add = [&p](const std::string& service, std::initializer_list<const char*> methods,
                  const Who& who) {
    for (const char* m : methods) p["/" + service + "/" + m] = who;
  };
  add("grpc.health.v1.Health", {"Check", "Watch"}, kEveryone);
  add("grpc.reflection.v1alpha.ServerReflection", {"ServerReflectionInfo"}, kEveryone);

  const std::string acm = "codeco.acm.v1.AcmService";
  add(acm, {"RollbackApplication", "UnregisterCluster"}, kOperator);
  add(acm, {"ApplyApplication", "DeleteApplication"}, Union({kOperator, {"hub/kubeapps"}}));
  add(acm, {"ApplyMission", "DeleteMission"}, kOperator);
  add(acm, {"GetMission", "ListMissions"}, kReaders);
  add(acm,
      {"ListApplications", "WatchApplication", "ListApplicationRevisions", "ListClusters",
       "GetOperation", "ListOperations", "WatchOperation"},
      kReaders);
  // Unknown application: member agents get NOT_FOUND (as GetNeighborhood).
  add(acm, {"GetApplication"}, Union({kReaders, {"mc1/acm", "mc2/acm"}}));
  // Any member service may resolve a name (bound to the application's
  // neighborhood in the handler, after the name is read).
  add(acm, {"ResolveService"}, Union({kReaders, kMembers}));
  add(acm, {"RegisterCluster", "Heartbeat"}, {"mc1/acm"});  // mc2 may not speak for mc1
  add(acm, {"GetCluster"}, Union({kReaders, {"mc1/acm"}}));
  // Unknown neighborhood: members get NOT_FOUND (the binding needs the members).
  add(acm, {"GetNeighborhood"}, Union({kReaders, kMembers}));
  add(acm, {"ListNeighborhoods"}, Union({kReaders, kMc1}));  // filtered by mc1
  add(acm, {"PushNeighborhood", "PushAssignment"}, {"hub/acm"});

  const std::string swm = "codeco.swm.v1.SwmService";
  add(swm, {"PlaceApplication", "ReleaseApplication"}, {"hub/acm"});
  add(swm,
      {"GetAssignmentPlan", "ListAssignmentPlans", "GetMigration", "ListMigrations",
       "ListStateBackups", "GetOperation", "ListOperations", "WatchOperation", "WatchChannels"},
      kReaders);
  add(swm, {"MigrateWorkload"}, {"hub/operator", "hub/swm", "hub/acm"});
  add(swm,
      {"SolveCluster", "GetClusterView", "WatchClusterView", "Reserve", "Commit", "Release",
       "ListLocalDecisions", "SettleLocalDecisions"},
      {"hub/swm"});

  const std::string netma = "codeco.netma.v1.NetmaService";
  add(netma, {"GetNetworkTopology", "GetNetworkMap", "GetCostMap"}, Union({kReaders, kMc1}));
  add(netma, {"ListLinks", "GetVirtualLink", "ListVirtualLinks", "GetOperation"}, kReaders);
  add(netma, {"CreateVirtualLink", "DeleteVirtualLink"}, {"hub/operator", "hub/swm"});
  add(netma, {"ExchangeSummary", "ProbeBulk"}, {"hub/netma", "mc1/netma", "mc2/netma"});

  const std::string pdlc = "codeco.pdlc.v1.PdlcService";  // served by mc1
  add(pdlc, {"IngestMetrics"}, kMc1);
  add(pdlc, {"GetRecommendation", "ListForecasts", "WatchRecommendations"},
      {"hub/operator", "hub/swm", "mc1/swm"});
  add(pdlc, {"RunAuction"}, {"hub/swm"});
  add(pdlc, {"RequestBid"}, {"mc1/pdlc"});  // mc2 may not ask as mc1
  add(pdlc, {"GetOperation"}, Union({kReaders, kMc1}));
  // mc1 aggregates: a peer joins, submits and reveals only as itself (mc2/pdlc
  // is refused by the binding); the operator, the hub and peers read.
  const std::string federated = "codeco.pdlc.v1.FederatedLearningService";
  add(federated, {"JoinRound", "SubmitMaskedUpdate", "RevealSeeds"}, {"mc1/pdlc"});
  add(federated, {"GetRound", "GetGlobalModel"}, Union({kReaders, {"mc1/pdlc", "mc2/pdlc"}}));

  const std::string mdm = "codeco.mdm.v1.MdmService";
  add(mdm, {"PublishEvents"}, Union({kHub, kMembers}));
  add(mdm, {"ReadEvents", "WatchEvents", "GetEntity", "ListEntities", "QueryGraph"},
      Union({kReaders, {"mc1/pdlc", "mc2/pdlc"}}));
  add(mdm, {"RegisterType"}, kOperator);
  add(mdm, {"ListTypes"}, Union({kReaders, kMembers}));

  const std::string checkpointer = "codeco.checkpointer.v1.CheckpointerService";  // mc1
  add(checkpointer, {"CreateCheckpoint", "DeleteCheckpoint", "MigrateContainer"},
      {"hub/operator", "hub/swm", "mc1/swm"});
  // A migration's source checkpointer (mc2's) restores here and follows the operation.
  add(checkpointer, {"RestoreCheckpoint"},
      {"hub/operator", "hub/swm", "mc1/swm", "mc2/checkpointer"});
  add(checkpointer, {"GetOperation", "WatchOperation"},
      Union({kReaders, {"mc1/swm", "mc2/checkpointer"}}));
  add(checkpointer, {"GetCheckpoint", "ListCheckpoints"}, Union({kReaders, {"mc1/swm"}}));

  // The LMS (mc1's Kubernetes adapter): the cluster's own services and the operator.
  add("codeco.lms.v1.LmsService",
      {"ListNodes", "GetNode", "WatchNodes", "CreatePod", "GetPod", "ListPods", "DeletePod",
       "WatchPods", "GetNodeUsage", "CheckpointContainer", "RestoreContainer"},
      Union({kOperator, kMc1}));
  return p;
}

// One call of any method (unary or streaming) with raw request bytes: sends the
// request, half-closes, and ends at the first response message (cancelling
// the rest of a stream) or at the status. `deadline` bounds an open stream.
// The last 4 KiB of a server's log, for a failure message.
std::string LogTail(const fs::path& log) {
  std::ifstream in(log, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > 4096 ? text.substr(text.size() - 4096) : text;
}

class OneCall final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  struct Outcome {
    bool got_message = false;
    grpc::Status status;
  };

  static Outcome Do(grpc::GenericStub& stub, const std::string& method, const std::string& bytes,
                    absl::Duration deadline) {
    OneCall call;
    call.context_.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    // A connection attempt that fails while the machine is loaded (the
    // sanitizer suite runs two federations at once) is retried within the
    // deadline rather than read as the method's answer.
    call.context_.set_wait_for_ready(true);
    grpc::Slice slice(bytes);
    call.request_ = grpc::ByteBuffer(&slice, 1);
    stub.PrepareBidiStreamingCall(&call.context_, method, {}, &call);
    call.StartWrite(&call.request_);
    call.StartWritesDone();
    call.StartRead(&call.response_);
    call.StartCall();
    std::unique_lock<std::mutex> lock(call.mu_);
    call.cv_.wait(lock, [&] { return call.done_; });
    return call.outcome_;
  }

  void OnReadDone(bool ok) override {
    if (ok) {
      std::lock_guard<std::mutex> lock(mu_);
      outcome_.got_message = true;
      context_.TryCancel();
    }
  }
  void OnDone(const grpc::Status& status) override {
    std::lock_guard<std::mutex> lock(mu_);
    outcome_.status = status;
    done_ = true;
    cv_.notify_all();
  }

 private:
  grpc::ClientContext context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Outcome outcome_;
};

std::shared_ptr<grpc::ChannelCredentials> Credentials(const fs::path& certs,
                                                      const std::string& identity) {
  const std::string cluster = identity.substr(0, identity.find('/'));
  const std::string service = identity.substr(identity.find('/') + 1);
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      (certs / cluster / (service + ".key")).string(),
      (certs / cluster / (service + ".crt")).string(), (certs / "ca.crt").string(), 60);
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  return grpc::experimental::TlsCredentials(options);
}

struct Running {
  Server spec;
  std::unique_ptr<ChildProcess> process;
  std::string address;
};

Running Start(const Server& spec, const fs::path& work) {
  const fs::path certs = work / "certs";
  const std::string base = (certs / spec.cluster / spec.binary).string();
  std::vector<std::string> argv = {std::string(CODECO_BIN_DIR) + "/codeco-" + spec.binary,
                                   "--role",
                                   spec.role,
                                   "--cluster",
                                   spec.cluster,
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--metrics-listen",
                                   "127.0.0.1:0",
                                   "--data-dir",
                                   (work / spec.binary).string(),
                                   "--tls.ca-file",
                                   (certs / "ca.crt").string(),
                                   "--tls.cert-file",
                                   base + ".crt",
                                   "--tls.key-file",
                                   base + ".key"};
  if (spec.role == "mc") argv.insert(argv.end(), {"--set", "federation.hub_cluster=hub"});
  argv.insert(argv.end(), spec.extra_args.begin(), spec.extra_args.end());
  Running out{spec, std::make_unique<ChildProcess>(argv, (work / (spec.binary + ".log")).string()),
              ""};
  std::optional<std::string> line = out.process->ReadLine(absl::Now() + absl::Seconds(60));
  INFO("codeco-" << spec.binary << " printed: " << line.value_or("<nothing>") << " (see "
                 << (work / (spec.binary + ".log")).string() << ")");
  REQUIRE(line.has_value());
  std::smatch m;
  REQUIRE(std::regex_search(*line, m, std::regex("listening on (\\S+) .*mtls")));
  out.address = m[1];
  return out;
}

TEST_CASE("every method of every service admits exactly the identities its policy names") {
  std::random_device rd;
  fs::path work = fs::temp_directory_path() / ("codeco-authz-it-" + std::to_string(rd()));
  fs::create_directories(work);
  const std::string script = CODECO_DEV_CA_SCRIPT;
  const fs::path certs = work / "certs";
  Run(script + " " + certs.string() + " ca");
  for (const std::string& id : kIdentities) {
    Run(script + " " + certs.string() + " issue " + id.substr(0, id.find('/')) + " " +
        id.substr(id.find('/') + 1));
  }
  const std::vector<Server> specs = Servers();
  for (const Server& s : specs) {
    if (!fs::exists(certs / s.cluster / (s.binary + ".crt"))) {
      Run(script + " " + certs.string() + " issue " + s.cluster + " " + s.binary);
    }
  }

  std::vector<Running> servers;
  for (const Server& s : specs) servers.push_back(Start(s, work));

  const std::map<std::string, Who> expected = ExpectedPolicy();
  const std::map<std::string, std::string> requests = BoundRequests();
  std::map<std::string, std::shared_ptr<grpc::ChannelCredentials>> creds;
  for (const std::string& id : kIdentities) creds[id] = Credentials(certs, id);

  // Every (server, identity) pair calls its methods on a thread of its own:
  // a permitted stream that stays open waits out its short deadline, and
  // one after the other those waits would add up to most of the test.
  struct Call {
    const Running* server;
    std::string id;
    std::string method;
    bool allowed = false;
    OneCall::Outcome outcome;
  };
  std::vector<std::vector<Call>> batches;
  for (const Running& server : servers) {
    std::vector<std::string> methods;
    std::vector<const google::protobuf::ServiceDescriptor*> contracts = {
        grpc::health::v1::HealthCheckRequest::descriptor()->file()->service(0),
        server.spec.grpc_service};
    if (server.spec.second_service != nullptr) contracts.push_back(server.spec.second_service);
    for (const google::protobuf::ServiceDescriptor* d : contracts) {
      REQUIRE(d != nullptr);
      for (int i = 0; i < d->method_count(); ++i) {
        methods.push_back("/" + d->full_name() + "/" + d->method(i)->name());
      }
    }
    methods.push_back("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo");
    for (const std::string& id : kIdentities) {
      std::vector<Call> batch;
      for (const std::string& method : methods) {
        auto row = expected.find(method);
        INFO("no row in this test for " << method);
        REQUIRE(row != expected.end());
        batch.push_back({&server, id, method, row->second.count(id) > 0, {}});
      }
      batches.push_back(std::move(batch));
    }
  }
  {
    std::vector<std::thread> callers;
    for (std::vector<Call>& batch : batches) {
      callers.emplace_back([&batch, &creds, &requests] {
        grpc::GenericStub stub(
            grpc::CreateChannel(batch[0].server->address, creds.at(batch[0].id)));
        for (Call& call : batch) {
          auto request = requests.find(call.method);
          const std::string bytes = request == requests.end() ? "" : request->second;
          // A permitted stream may stay open: it ends at its first message
          // or this short deadline; a denial comes at once (the long
          // deadline only guards a stuck server).
          call.outcome = OneCall::Do(stub, call.method, bytes,
                                     call.allowed ? absl::Seconds(3) : absl::Seconds(30));
        }
      });
    }
    for (std::thread& caller : callers) caller.join();
  }
  int calls = 0;
  for (const std::vector<Call>& batch : batches) {
    for (const Call& call : batch) {
      ++calls;
      const OneCall::Outcome& outcome = call.outcome;
      const std::string& method = call.method;
      INFO(call.server->spec.binary << " " << method << " as " << call.id << ": "
                                    << outcome.status.error_code() << " "
                                    << outcome.status.error_message());
      if (call.allowed) {
        REQUIRE((outcome.got_message ||
                 outcome.status.error_code() != grpc::StatusCode::PERMISSION_DENIED));
      } else {
        REQUIRE_FALSE(outcome.got_message);
        REQUIRE(outcome.status.error_code() == grpc::StatusCode::PERMISSION_DENIED);
        // Names the caller (and the method: in full from the table, by name from a binding).
        REQUIRE_THAT(outcome.status.error_message(),
                     Catch::Contains("spiffe://codeco/cluster/" + call.id) &&
                         Catch::Contains(method.substr(method.rfind('/') + 1)));
      }
    }
  }
  INFO("calls made: " << calls);
  REQUIRE(calls > 1000);

  for (Running& s : servers) {
    const std::optional<int> exit_code = s.process->Stop(SIGTERM, absl::Now() + absl::Seconds(60));
    INFO("codeco-" << s.spec.binary << " (" << s.spec.cluster << ") exit "
                   << (exit_code.has_value() ? std::to_string(*exit_code) : "none by 60 s")
                   << "; its log ends:\n"
                   << LogTail(work / (s.spec.binary + ".log")));
    REQUIRE(exit_code == 0);
  }
  fs::remove_all(work);
}

}  // namespace
}  // namespace codeco::testing
