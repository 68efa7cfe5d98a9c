// Authorization (authz.h): the federation policy covers every method of
// every service compiled into the binary; GrpcServer rejects a call the
// policy denies before its handler runs, with PERMISSION_DENIED naming the
// method and the caller; handlers see the caller through CallerOf and the
// Require* bindings; a server with a method the policy does not list refuses
// to start; plaintext servers trust every caller.
#include "codeco/common/authz.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "codeco/acm/v1/acm_service.grpc.pb.h"
#include "codeco/checkpointer/v1/checkpointer_service.pb.h"
#include "codeco/codef/v1/codef_service.pb.h"
#include "codeco/common/server.h"
#include "codeco/common/tls.h"
#include "codeco/lms/v1/lms_service.pb.h"
#include "codeco/mdm/v1/mdm_service.pb.h"
#include "codeco/netma/v1/netma_service.pb.h"
#include "codeco/pdlc/v1/pdlc_service.pb.h"
#include "codeco/swm/v1/swm_service.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor_database.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"

namespace codeco {
namespace {

namespace fs = std::filesystem;
namespace acm = codeco::acm::v1;

// The descriptors of the codeco contracts and health. Naming a request
// message of each contract links its generated code into this binary (a
// static library's unused objects are left out), so the check below sees
// every service a codeco server can serve.
void LinkEveryContract() {
  for (const google::protobuf::Descriptor* d :
       {codeco::acm::v1::ApplyApplicationRequest::descriptor(),
        codeco::swm::v1::PlaceApplicationRequest::descriptor(),
        codeco::netma::v1::GetNetworkTopologyRequest::descriptor(),
        codeco::pdlc::v1::IngestMetricsRequest::descriptor(),
        codeco::mdm::v1::PublishEventsRequest::descriptor(),
        codeco::checkpointer::v1::CreateCheckpointRequest::descriptor(),
        codeco::lms::v1::ListNodesRequest::descriptor(),
        codeco::codef::v1::ListClustersRequest::descriptor(),
        grpc::health::v1::HealthCheckRequest::descriptor()}) {
    REQUIRE(d->file()->service_count() > 0);
  }
}

// The services of every proto file in this binary's generated pool, but for
// etcd's API (etcdserverpb), which codeco calls and never serves.
std::vector<std::string> AllServiceNames() {
  LinkEveryContract();
  std::vector<std::string> files;
  REQUIRE(
      google::protobuf::DescriptorPool::internal_generated_database()->FindAllFileNames(&files));
  std::vector<std::string> out;
  for (const std::string& name : files) {
    const google::protobuf::FileDescriptor* file =
        google::protobuf::DescriptorPool::generated_pool()->FindFileByName(name);
    if (file == nullptr || file->package() == "etcdserverpb") continue;
    for (int i = 0; i < file->service_count(); ++i) out.push_back(file->service(i)->full_name());
  }
  return out;
}

TEST_CASE("the federation policy has an entry for every method of every service in the binary") {
  std::vector<std::string> services = AllServiceNames();
  std::set<std::string> names(services.begin(), services.end());
  // The binary links all codeco contracts and the health service.
  for (const char* expected :
       {"codeco.acm.v1.AcmService", "codeco.swm.v1.SwmService", "codeco.netma.v1.NetmaService",
        "codeco.pdlc.v1.PdlcService", "codeco.mdm.v1.MdmService",
        "codeco.checkpointer.v1.CheckpointerService", "codeco.lms.v1.LmsService",
        "codeco.codef.v1.CodefService", "grpc.health.v1.Health"}) {
    INFO(expected);
    REQUIRE(names.count(expected));
  }
  std::vector<std::string> missing = MethodsWithoutPolicy(FederationAuthzPolicy(), services);
  INFO("methods without a policy entry: " << missing.size());
  for (const std::string& m : missing) INFO(m);
  REQUIRE(missing.empty());
  // Reflection is served by grpc++_reflection, whose descriptors this binary may lack.
  REQUIRE(FederationAuthzPolicy().count(
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"));
  // And the check itself finds a gap.
  AuthzPolicy partial = FederationAuthzPolicy();
  partial.erase("/codeco.acm.v1.AcmService/Heartbeat");
  REQUIRE(MethodsWithoutPolicy(partial, {"codeco.acm.v1.AcmService"}) ==
          std::vector<std::string>{"/codeco.acm.v1.AcmService/Heartbeat"});
  REQUIRE(MethodsWithoutPolicy(partial, {"no.such.Service"}) ==
          std::vector<std::string>{"no.such.Service"});
}

TEST_CASE("callers are classified against the hub cluster") {
  REQUIRE(ClassifyCaller({"hub", "operator"}, "hub") == CallerKind::kOperator);
  REQUIRE(ClassifyCaller({"hub", "acm"}, "hub") == CallerKind::kHub);
  REQUIRE(ClassifyCaller({"mc1", "operator"}, "hub") == CallerKind::kMember);
  REQUIRE(ClassifyCaller({"mc1", "acm"}, "hub") == CallerKind::kMember);
}

TEST_CASE("Authorize applies the principals of a method and denies unknown methods") {
  AuthzPolicy policy = {
      {"/s.S/Op", {Operator()}},
      {"/s.S/Hub", {HubService("swm")}},
      {"/s.S/Member", {MemberService("acm")}},
      {"/s.S/Local", {LocalService("swm")}},
      {"/s.S/Any", {AnyPeer()}},
  };
  AuthzServer server{"mc1", "hub"};
  auto ok = [&](const char* method, SpiffeIdentity who) {
    return Authorize(policy, server, method, who).ok();
  };
  REQUIRE(ok("/s.S/Op", {"hub", "operator"}));
  REQUIRE_FALSE(ok("/s.S/Op", {"mc1", "operator"}));
  REQUIRE_FALSE(ok("/s.S/Op", {"hub", "acm"}));
  REQUIRE(ok("/s.S/Hub", {"hub", "swm"}));
  REQUIRE_FALSE(ok("/s.S/Hub", {"hub", "acm"}));
  REQUIRE_FALSE(ok("/s.S/Hub", {"mc1", "swm"}));
  REQUIRE_FALSE(ok("/s.S/Hub", {"hub", "operator"}));
  REQUIRE(ok("/s.S/Member", {"mc2", "acm"}));
  REQUIRE_FALSE(ok("/s.S/Member", {"hub", "acm"}));
  REQUIRE(ok("/s.S/Local", {"mc1", "swm"}));
  REQUIRE_FALSE(ok("/s.S/Local", {"mc2", "swm"}));
  REQUIRE_FALSE(ok("/s.S/Local", {"mc1", "acm"}));
  REQUIRE(ok("/s.S/Any", {"mc9", "whatever"}));
  absl::Status denied = Authorize(policy, server, "/s.S/Nothing", {"hub", "operator"});
  REQUIRE(denied.code() == absl::StatusCode::kPermissionDenied);
  REQUIRE_THAT(std::string(denied.message()), Catch::Contains("/s.S/Nothing"));
  denied = Authorize(policy, server, "/s.S/Op", {"mc1", "acm"});
  REQUIRE_THAT(std::string(denied.message()),
               Catch::Contains("/s.S/Op") && Catch::Contains("spiffe://codeco/cluster/mc1/acm"));
}

void Run(const std::string& command) {
  INFO(command);
  REQUIRE(std::system((command + " >/dev/null").c_str()) == 0);
}

// A scratch CA with certificates issued on demand.
struct Pki {
  Pki() {
    std::random_device rd;
    dir = fs::temp_directory_path() / ("codeco-authz-" + std::to_string(rd()));
    Run(std::string(CODECO_DEV_CA_SCRIPT) + " " + dir.string() + " ca");
  }
  ~Pki() { fs::remove_all(dir); }
  TlsFiles Files(const std::string& cluster, const std::string& service) {
    if (!fs::exists(dir / cluster / (service + ".crt"))) {
      Run(std::string(CODECO_DEV_CA_SCRIPT) + " " + dir.string() + " issue " + cluster + " " +
          service);
    }
    return {(dir / "ca.crt").string(), (dir / cluster / (service + ".crt")).string(),
            (dir / cluster / (service + ".key")).string(), absl::Seconds(60)};
  }
  fs::path dir;
};

// An ACM double: counts the calls its handlers see and answers Heartbeat with
// the RequireOwnCluster binding, GetCluster with the caller CallerOf reports.
class CountingAcm final : public acm::AcmService::CallbackService {
 public:
  std::atomic<int> apply_calls{0};

  grpc::ServerUnaryReactor* ApplyApplication(grpc::CallbackServerContext* context,
                                             const acm::ApplyApplicationRequest*,
                                             acm::ApplyApplicationResponse*) override {
    ++apply_calls;
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const acm::HeartbeatRequest* request,
                                      acm::HeartbeatResponse*) override {
    absl::Status s =
        RequireOwnCluster(*context, "hub", "Heartbeat", "cluster_name", request->cluster_name());
    auto* reactor = context->DefaultReactor();
    reactor->Finish(
        s.ok() ? grpc::Status::OK
               : grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message())));
    return reactor;
  }
  grpc::ServerUnaryReactor* GetCluster(grpc::CallbackServerContext* context,
                                       const acm::GetClusterRequest*,
                                       acm::GetClusterResponse* response) override {
    absl::StatusOr<Caller> caller = CallerOf(*context, "hub");
    auto* reactor = context->DefaultReactor();
    if (caller.ok()) {
      response->mutable_cluster()->mutable_metadata()->set_name(
          absl::StrCat(CallerKindName(caller->kind), " ", caller->Describe()));
    }
    reactor->Finish(caller.ok() ? grpc::Status::OK
                                : grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                                               std::string(caller.status().message())));
    return reactor;
  }
};

std::unique_ptr<acm::AcmService::Stub> StubAs(const std::string& address, const TlsFiles* tls) {
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (tls != nullptr) {
    auto made = MakeChannelCredentials(*tls);
    REQUIRE(made.ok());
    creds = *made;
  }
  return acm::AcmService::NewStub(grpc::CreateChannel(address, creds));
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  return context;
}

TEST_CASE("an mTLS server rejects a denied call before its handler runs") {
  Pki pki;
  CountingAcm service;
  GrpcServerOptions options;
  options.service = "acm";
  options.tls = pki.Files("hub", "acm");
  options.services = {&service};
  options.authz = {"hub", "hub"};
  auto server = GrpcServer::Start(options);
  REQUIRE(server.ok());
  const std::string address = (*server)->address();
  TlsFiles op = pki.Files("hub", "operator");
  TlsFiles mc1 = pki.Files("mc1", "acm");
  TlsFiles mc2 = pki.Files("mc2", "acm");

  SECTION("a managed cluster cannot apply an application; the handler never runs") {
    acm::ApplyApplicationResponse response;
    auto context = Context();
    grpc::Status status =
        StubAs(address, &mc1)
            ->ApplyApplication(context.get(), acm::ApplyApplicationRequest(), &response);
    REQUIRE(status.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    REQUIRE_THAT(status.error_message(),
                 Catch::Contains("/codeco.acm.v1.AcmService/ApplyApplication") &&
                     Catch::Contains("spiffe://codeco/cluster/mc1/acm"));
    REQUIRE(service.apply_calls == 0);

    context = Context();
    REQUIRE(StubAs(address, &op)
                ->ApplyApplication(context.get(), acm::ApplyApplicationRequest(), &response)
                .ok());
    REQUIRE(service.apply_calls == 1);
  }
  SECTION("a cluster heartbeats for itself only") {
    acm::HeartbeatRequest request;
    request.set_cluster_name("mc1");
    acm::HeartbeatResponse response;
    auto context = Context();
    REQUIRE(StubAs(address, &mc1)->Heartbeat(context.get(), request, &response).ok());
    context = Context();
    grpc::Status status = StubAs(address, &mc2)->Heartbeat(context.get(), request, &response);
    REQUIRE(status.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    REQUIRE_THAT(status.error_message(), Catch::Contains("cluster_name") && Catch::Contains("mc2"));
    // The operator may not heartbeat at all (the table says so).
    context = Context();
    REQUIRE(StubAs(address, &op)->Heartbeat(context.get(), request, &response).error_code() ==
            grpc::StatusCode::PERMISSION_DENIED);
  }
  SECTION("handlers see who calls") {
    acm::GetClusterRequest request;
    request.set_name("mc1");
    acm::GetClusterResponse response;
    auto context = Context();
    REQUIRE(StubAs(address, &op)->GetCluster(context.get(), request, &response).ok());
    REQUIRE(response.cluster().metadata().name() ==
            "operator spiffe://codeco/cluster/hub/operator");
    context = Context();
    TlsFiles hub_swm = pki.Files("hub", "swm");
    REQUIRE(StubAs(address, &hub_swm)->GetCluster(context.get(), request, &response).ok());
    REQUIRE(response.cluster().metadata().name() == "hub spiffe://codeco/cluster/hub/swm");
    // Several calls on one connection (gRPC shares its AuthContext between them).
    auto member = StubAs(address, &mc1);
    for (int i = 0; i < 3; ++i) {
      context = Context();
      REQUIRE(member->GetCluster(context.get(), request, &response).ok());
      REQUIRE(response.cluster().metadata().name() == "member spiffe://codeco/cluster/mc1/acm");
    }
  }
  SECTION("an unknown method is denied, not unimplemented") {
    grpc::GenericStub generic(grpc::CreateChannel(address, *MakeChannelCredentials(op)));
    auto context = Context();
    grpc::Slice empty_message("");
    grpc::ByteBuffer request(&empty_message, 1), response;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    grpc::Status status;
    generic.UnaryCall(context.get(), "/codeco.acm.v1.AcmService/NoSuchMethod", {}, &request,
                      &response, [&](grpc::Status s) {
                        std::lock_guard<std::mutex> lock(mu);
                        status = s;
                        done = true;
                        cv.notify_all();
                      });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    REQUIRE(status.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    REQUIRE_THAT(status.error_message(), Catch::Contains("NoSuchMethod"));
  }
}

TEST_CASE("a server refuses to start with a served method the policy does not list") {
  Pki pki;
  CountingAcm service;
  AuthzPolicy partial = FederationAuthzPolicy();
  partial.erase("/codeco.acm.v1.AcmService/Heartbeat");
  GrpcServerOptions options;
  options.service = "acm";
  options.tls = pki.Files("hub", "acm");
  options.services = {&service};
  options.authz = {"hub", "hub"};
  options.authz_policy = &partial;
  auto server = GrpcServer::Start(options);
  REQUIRE(server.status().code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE_THAT(std::string(server.status().message()),
               Catch::Contains("/codeco.acm.v1.AcmService/Heartbeat"));

  options.authz_policy = nullptr;
  options.authz.hub_cluster = "";
  server = GrpcServer::Start(options);
  REQUIRE(server.status().code() == absl::StatusCode::kInvalidArgument);
  REQUIRE_THAT(std::string(server.status().message()), Catch::Contains("federation.hub_cluster"));
}

TEST_CASE("a plaintext server trusts every caller") {
  CountingAcm service;
  GrpcServerOptions options;
  options.service = "acm";
  options.insecure = true;
  options.services = {&service};
  auto server = GrpcServer::Start(options);
  REQUIRE(server.ok());
  auto stub = StubAs((*server)->address(), nullptr);
  acm::HeartbeatRequest request;
  request.set_cluster_name("anyone");
  acm::HeartbeatResponse response;
  auto context = Context();
  REQUIRE(stub->Heartbeat(context.get(), request, &response).ok());
  acm::GetClusterResponse cluster;
  context = Context();
  REQUIRE(stub->GetCluster(context.get(), acm::GetClusterRequest(), &cluster).ok());
  REQUIRE(cluster.cluster().metadata().name() == "operator plaintext caller");
}

}  // namespace
}  // namespace codeco
