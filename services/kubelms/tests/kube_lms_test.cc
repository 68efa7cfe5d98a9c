// The Kubernetes LMS adapter end to end: codeco.lms.v1 over gRPC, served by
// KubeLmsService, calling a stand-in kube-apiserver over HTTP with a bearer
// token (stand_in_kube_apiserver.h). No kube-apiserver can run here; the stand-in
// answers in kube-apiserver's shapes, and the adapter passes the same LMS
// contract as CODEF's emulator (integration-tests/lms_contract.h).
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "codeco/common/clock.h"
#include "codeco/common/server.h"
#include "codeco/kube/http_kube_api.h"
#include "kubelms/server/kube_lms_service.h"
#include "lms_contract.h"
#include "stand_in_kube_apiserver.h"

namespace codeco::kubelms {
namespace {

namespace fs = std::filesystem;
using codeco::lms::v1::LmsService;
using kube::HttpKubeApi;
using kube::KubeEndpoint;
using kube::LoadKubeconfig;
using testing::StandInKubeApiServer;
using testing::StandInOptions;

constexpr char kNamespace[] = "codeco-workloads";

fs::path Scratch() {
  std::random_device rd;
  fs::path dir = fs::temp_directory_path() / absl::StrCat("kubelms-test-", rd(), rd());
  fs::create_directories(dir);
  return dir;
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  return context;
}

// The adapter served on loopback in front of a stand-in kube-apiserver.
struct Adapter {
  explicit Adapter(StandInOptions fake_options = {}, KubeLmsOptions lms_options = {},
                   std::string token = "")
      : scratch(Scratch()) {
    if (fake_options.dump_dir == "scratch") {
      fake_options.dump_dir = (scratch / "served").string();
      fs::create_directories(fake_options.dump_dir);
    }
    fake = std::make_unique<StandInKubeApiServer>(fake_options);
    KubeEndpoint endpoint;
    endpoint.server = fake->Url();
    endpoint.token = token.empty() ? fake->Token() : token;
    lms_options.ns = kNamespace;
    // Quick retries keep the tests short; the policy is the same.
    lms_options.kube.watch_backoff.initial = absl::Milliseconds(20);
    lms_options.kube.watch_backoff.max = absl::Milliseconds(200);
    lms_options.restore_poll = absl::Milliseconds(20);
    service = std::make_unique<KubeLmsService>(
        std::make_unique<HttpKubeApi>(endpoint, absl::Minutes(2)), &clock, lms_options, 4, 64);
    GrpcServerOptions options;
    options.service = "kubelms";
    options.insecure = true;
    options.services = {service.get()};
    auto started = GrpcServer::Start(options);
    REQUIRE(started.ok());
    server = std::move(*started);
    stub = LmsService::NewStub(
        grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  }
  ~Adapter() {
    server.reset();
    service.reset();
    fake.reset();
    std::error_code ignored;
    fs::remove_all(scratch, ignored);
  }

  // The first ready, schedulable node.
  std::string ReadyNode() {
    codeco::lms::v1::ListNodesResponse nodes;
    REQUIRE(stub->ListNodes(Context().get(), {}, &nodes).ok());
    for (const auto& n : nodes.nodes()) {
      if (n.condition() == codeco::lms::v1::NODE_CONDITION_READY && !n.unschedulable()) {
        return n.name();
      }
    }
    FAIL("the stand-in has no ready schedulable node");
    return "";
  }

  grpc::Status Create(const std::string& name, const std::string& node, int64_t cpu = 100,
                      const std::string& image = "registry.example/app:1") {
    codeco::lms::v1::CreatePodRequest request;
    auto* pod = request.mutable_pod();
    pod->set_name(name);
    pod->set_node_name(node);
    (*pod->mutable_labels())["app"] = "kubelms-test";
    auto* c = pod->add_containers();
    c->set_name("main");
    c->set_image(image);
    c->mutable_requests()->set_cpu_millicores(cpu);
    codeco::lms::v1::CreatePodResponse response;
    return stub->CreatePod(Context().get(), request, &response);
  }

  codeco::lms::v1::Pod WaitRunning(const std::string& name) {
    codeco::lms::v1::GetPodRequest request;
    request.set_name(name);
    codeco::lms::v1::GetPodResponse response;
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (absl::Now() < give_up) {
      if (stub->GetPod(Context().get(), request, &response).ok() &&
          response.pod().phase() == codeco::lms::v1::POD_PHASE_RUNNING) {
        return response.pod();
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    FAIL("pod " << name << " did not run");
    return {};
  }

  fs::path scratch;
  RealClock clock;
  std::unique_ptr<StandInKubeApiServer> fake;
  std::unique_ptr<KubeLmsService> service;
  std::unique_ptr<GrpcServer> server;
  std::unique_ptr<LmsService::Stub> stub;
};

// A pod watch from `version`.
std::unique_ptr<codeco::testing::PodWatchReader> WatchPods(LmsService::Stub* stub,
                                                           const std::string& version) {
  codeco::lms::v1::WatchPodsRequest request;
  request.set_resource_version(version);
  return std::make_unique<codeco::testing::PodWatchReader>(stub, request);
}

int CountRequests(const StandInKubeApiServer& fake, const std::string& part) {
  int n = 0;
  for (const std::string& r : fake.Requests()) n += absl::StrContains(r, part) ? 1 : 0;
  return n;
}

TEST_CASE("the Kubernetes adapter passes the LMS contract against a stand-in kube-apiserver") {
  StandInOptions options;
  options.dump_dir = "scratch";
  Adapter adapter(options);
  codeco::testing::CheckLmsContract({.stub = adapter.stub.get(), .node = adapter.ReadyNode()});
  // Every document the stand-in served has kube-apiserver's shape, by the
  // official Kubernetes client's models.
  const fs::path log = adapter.scratch / "check.log";
  const std::string check = absl::StrCat(
      KUBELMS_CHECK_JSON, " ", (adapter.scratch / "served").string(), " >", log.string(), " 2>&1");
  const int rc = std::system(check.c_str());
  std::ifstream in(log);
  INFO(check << "\n" << std::string(std::istreambuf_iterator<char>(in), {}));
  CHECK(rc == 0);
  // What the adapter did in Kubernetes terms.
  CHECK(CountRequests(*adapter.fake, "POST /api/v1/namespaces/codeco-workloads/pods") >= 2);
  CHECK(CountRequests(*adapter.fake, "watch=true") >= 2);
  CHECK(CountRequests(*adapter.fake, "allowWatchBookmarks=true") >= 2);
}

TEST_CASE("a pod watch resumes where the apiserver ended it and reports 410 Gone") {
  Adapter adapter;
  const std::string node = adapter.ReadyNode();
  codeco::lms::v1::ListPodsResponse list;
  REQUIRE(adapter.stub->ListPods(Context().get(), {}, &list).ok());
  auto watch = WatchPods(adapter.stub.get(), list.resource_version());
  REQUIRE(adapter.Create("first", node).ok());
  REQUIRE(watch->Saw(codeco::common::v1::WATCH_EVENT_TYPE_ADDED, "first"));
  const int watches = CountRequests(*adapter.fake, "watch=true");

  // The apiserver ends its watches (its request timeout): the adapter
  // watches again from the last version and nothing is missed.
  adapter.fake->SendBookmarks();
  adapter.fake->EndWatches();
  REQUIRE(adapter.Create("second", node).ok());
  REQUIRE(watch->Saw(codeco::common::v1::WATCH_EVENT_TYPE_ADDED, "second"));
  CHECK(CountRequests(*adapter.fake, "watch=true") > watches);

  // History compacted past the version: the client must list again.
  adapter.fake->ExpireHistory();
  adapter.fake->EndWatches();
  const grpc::Status end = watch->End();
  INFO(end.error_message());
  CHECK(end.error_code() == grpc::StatusCode::OUT_OF_RANGE);
  CHECK(absl::StrContains(end.error_message(), "list again"));
}

TEST_CASE("a watch rides out apiserver failures and unary calls report them") {
  Adapter adapter;
  const std::string node = adapter.ReadyNode();
  codeco::lms::v1::ListPodsResponse list;
  REQUIRE(adapter.stub->ListPods(Context().get(), {}, &list).ok());
  auto watch = WatchPods(adapter.stub.get(), list.resource_version());
  REQUIRE(adapter.Create("before", node).ok());
  REQUIRE(watch->Saw(codeco::common::v1::WATCH_EVENT_TYPE_ADDED, "before"));
  const int watches = CountRequests(*adapter.fake, "watch=true");
  // The next two watch requests fail; the third goes through and nothing
  // made meanwhile is missed.
  adapter.fake->FailNext("GET", "/api/v1/namespaces/codeco-workloads/pods", 503, 2);
  adapter.fake->EndWatches();
  REQUIRE(adapter.Create("later", node).ok());
  REQUIRE(watch->Saw(codeco::common::v1::WATCH_EVENT_TYPE_ADDED, "later"));
  CHECK(CountRequests(*adapter.fake, "watch=true") >= watches + 3);

  adapter.fake->FailNext("GET", "/api/v1/namespaces/codeco-workloads/pods/later", 500, 1);
  codeco::lms::v1::GetPodRequest get;
  get.set_name("later");
  codeco::lms::v1::GetPodResponse got;
  grpc::Status s = adapter.stub->GetPod(Context().get(), get, &got);
  CHECK(s.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK(absl::StrContains(s.error_message(), "HTTP 500"));
  CHECK(adapter.stub->GetPod(Context().get(), get, &got).ok());
}

TEST_CASE("a token kube-apiserver refuses is UNAUTHENTICATED") {
  Adapter adapter({}, {}, "not-the-token");
  codeco::lms::v1::ListNodesResponse nodes;
  grpc::Status s = adapter.stub->ListNodes(Context().get(), {}, &nodes);
  CHECK(s.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(absl::StrContains(s.error_message(), "kube-apiserver GET /api/v1/nodes"));
}

TEST_CASE("pods are refused on nodes that are cordoned or not ready or too small") {
  Adapter adapter;
  codeco::lms::v1::ListNodesResponse nodes;
  REQUIRE(adapter.stub->ListNodes(Context().get(), {}, &nodes).ok());
  std::string cordoned;
  for (const auto& n : nodes.nodes()) {
    if (n.unschedulable()) cordoned = n.name();
  }
  REQUIRE(!cordoned.empty());
  grpc::Status s = adapter.Create("on-cordoned", cordoned);
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(absl::StrContains(s.error_message(), "cordoned"));

  const std::string node = adapter.ReadyNode();
  s = adapter.Create("too-big", node, 1'000'000);
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(absl::StrContains(s.error_message(), "lacks cpu"));

  adapter.fake->SetNodeReady(node, false);
  s = adapter.Create("on-not-ready", node);
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(absl::StrContains(s.error_message(), "not ready"));
  codeco::lms::v1::GetNodeRequest get;
  get.set_name(node);
  codeco::lms::v1::GetNodeResponse got;
  REQUIRE(adapter.stub->GetNode(Context().get(), get, &got).ok());
  CHECK(got.node().condition() == codeco::lms::v1::NODE_CONDITION_NOT_READY);
}

TEST_CASE("a pod of a node not ready stays Terminating unless its delete is forced") {
  Adapter adapter;
  const std::string node = adapter.ReadyNode();
  REQUIRE(adapter.Create("stuck", node).ok());
  REQUIRE(adapter.Create("forced", node).ok());
  adapter.WaitRunning("stuck");
  adapter.WaitRunning("forced");
  adapter.fake->SetNodeReady(node, false);

  codeco::lms::v1::DeletePodRequest del;
  del.set_name("stuck");
  codeco::lms::v1::DeletePodResponse deleted;
  REQUIRE(adapter.stub->DeletePod(Context().get(), del, &deleted).ok());
  codeco::lms::v1::GetPodRequest get;
  get.set_name("stuck");
  codeco::lms::v1::GetPodResponse got;
  // No kubelet confirms: the name is still taken.
  CHECK(adapter.stub->GetPod(Context().get(), get, &got).ok());

  del.set_name("forced");
  del.set_force(true);
  del.set_grace_period_ns(1'000'000'000);
  CHECK(adapter.stub->DeletePod(Context().get(), del, &deleted).error_code() ==
        grpc::StatusCode::INVALID_ARGUMENT);
  del.set_grace_period_ns(0);
  REQUIRE(adapter.stub->DeletePod(Context().get(), del, &deleted).ok());
  CHECK(CountRequests(*adapter.fake, "forced?gracePeriodSeconds=0") == 1);
  get.set_name("forced");
  CHECK(adapter.stub->GetPod(Context().get(), get, &got).error_code() ==
        grpc::StatusCode::NOT_FOUND);
}

TEST_CASE("checkpoints go through the node proxy and restores start from a checkpoint image") {
  Adapter adapter;
  const std::string node = adapter.ReadyNode();
  REQUIRE(adapter.Create("redis", node).ok());
  adapter.WaitRunning("redis");

  codeco::lms::v1::CheckpointContainerRequest checkpoint;
  checkpoint.set_pod("redis");
  checkpoint.set_container("main");
  checkpoint.set_request_id("ckpt-1");
  codeco::lms::v1::CheckpointContainerResponse dumped;
  grpc::Status s = adapter.stub->CheckpointContainer(Context().get(), checkpoint, &dumped);
  INFO(s.error_message());
  REQUIRE(s.ok());
  CHECK(dumped.node() == node);
  CHECK(absl::StartsWith(dumped.archive_path(), "/var/lib/kubelet/checkpoints/checkpoint-redis_"));
  CHECK(CountRequests(*adapter.fake, "POST /api/v1/nodes/" + node +
                                         "/proxy/checkpoint/codeco-workloads/redis/main") == 1);
  // A retried call gets the same archive, without a second dump.
  codeco::lms::v1::CheckpointContainerResponse again;
  REQUIRE(adapter.stub->CheckpointContainer(Context().get(), checkpoint, &again).ok());
  CHECK(again.archive_path() == dumped.archive_path());
  CHECK(CountRequests(*adapter.fake, "/proxy/checkpoint/") == 1);
  checkpoint.set_container("nope");
  checkpoint.set_request_id("");
  CHECK(adapter.stub->CheckpointContainer(Context().get(), checkpoint, &again).error_code() ==
        grpc::StatusCode::NOT_FOUND);

  codeco::lms::v1::RestoreContainerRequest restore;
  auto* pod = restore.mutable_pod();
  pod->set_name("redis-restored");
  pod->set_node_name(node);
  auto* c = pod->add_containers();
  c->set_name("main");
  c->set_image("redis:7");
  restore.set_container("main");
  restore.set_archive_path(dumped.archive_path());
  codeco::lms::v1::RestoreContainerResponse restored;
  s = adapter.stub->RestoreContainer(Context().get(), restore, &restored);
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(absl::StrContains(s.error_message(), "image_reference"));

  restore.set_image_reference("registry.example/checkpoints/redis:ckpt-1");
  s = adapter.stub->RestoreContainer(Context().get(), restore, &restored);
  INFO(s.error_message());
  REQUIRE(s.ok());
  CHECK(restored.pod().phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  CHECK(restored.pod().containers(0).image() == "registry.example/checkpoints/redis:ckpt-1");

  // A checkpoint image the node cannot start: an error, and no pod left.
  adapter.fake->SetImageFailure("registry.example/checkpoints/broken:1",
                                "restore failed: criu exited 1");
  pod->set_name("broken");
  restore.set_image_reference("registry.example/checkpoints/broken:1");
  s = adapter.stub->RestoreContainer(Context().get(), restore, &restored);
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(absl::StrContains(s.error_message(), "criu exited 1"));
  codeco::lms::v1::GetPodRequest get;
  get.set_name("broken");
  codeco::lms::v1::GetPodResponse got;
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (adapter.stub->GetPod(Context().get(), get, &got).ok() && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  CHECK(adapter.stub->GetPod(Context().get(), get, &got).error_code() ==
        grpc::StatusCode::NOT_FOUND);
}

TEST_CASE("node usage comes from metrics.k8s.io") {
  Adapter adapter;
  const std::string node = adapter.ReadyNode();
  REQUIRE(adapter.Create("busy", node).ok());
  adapter.WaitRunning("busy");
  adapter.fake->SetPodUsage(kNamespace, "busy", "250m", "64Mi");
  codeco::lms::v1::GetNodeUsageRequest request;
  request.set_node(node);
  codeco::lms::v1::GetNodeUsageResponse usage;
  grpc::Status s = adapter.stub->GetNodeUsage(Context().get(), request, &usage);
  INFO(s.error_message());
  REQUIRE(s.ok());
  CHECK(usage.usage().usage().cpu_millicores() > 0);
  CHECK(usage.usage().sample_time().seconds() > 0);
  REQUIRE(usage.usage().pods_size() == 1);
  CHECK(usage.usage().pods(0).pod() == "busy");
  CHECK(usage.usage().pods(0).usage().cpu_millicores() == 250);
  CHECK(usage.usage().pods(0).usage().memory_bytes() == int64_t{64} << 20);
}

TEST_CASE("a kubeconfig gives the adapter its server and credentials or names what is wrong") {
  Adapter adapter;
  const fs::path dir = adapter.scratch;
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  // The stand-in speaks plain HTTP on loopback (which a kubeconfig may
  // name); the CA travels all the same.
  const std::string ca_pem = "-----BEGIN CERTIFICATE-----\nMIIBdummy\n-----END CERTIFICATE-----\n";
  const std::string ca_data = absl::Base64Escape(ca_pem);
  auto config = [&](const std::string& cluster, const std::string& user) {
    return absl::StrCat(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "contexts: [{name: c, context: {cluster: k, user: u, namespace: team-a}}]\n"
        "clusters: [{name: k, cluster: {",
        cluster, "}}]\nusers: [{name: u, user: {", user, "}}]\n");
  };
  // certificate-authority-data and a token.
  auto endpoint = LoadKubeconfig(
      write("good.yaml", config(absl::StrCat("server: \"", adapter.fake->Url(),
                                             "/\", certificate-authority-data: ", ca_data),
                                absl::StrCat("token: ", adapter.fake->Token()))),
      "");
  REQUIRE(endpoint.ok());
  CHECK(endpoint->ns == "team-a");
  CHECK(endpoint->server == adapter.fake->Url());
  CHECK(endpoint->ca_pem == ca_pem);
  // Without the CA (meaningless over http): the adapter reaches the stand-in.
  endpoint->ca_pem.clear();
  HttpKubeApi api(*endpoint, absl::Minutes(1));
  auto answer = api.Call("GET", "/api/v1/nodes", "", absl::Seconds(10));
  REQUIRE(answer.ok());
  CHECK(answer->status == 200);

  // Relative files are the kubeconfig's neighbours.
  write("token", adapter.fake->Token() + "\n");
  auto relative =
      LoadKubeconfig(write("files.yaml", config(absl::StrCat("server: \"", adapter.fake->Url(),
                                                             "\", certificate-authority: ca.crt"),
                                                "tokenFile: token")),
                     "c");
  REQUIRE(relative.ok());
  CHECK(relative->ca_file == (dir / "ca.crt").string());
  CHECK(relative->token_file == (dir / "token").string());

  auto refused = [&](const std::string& cluster, const std::string& user) {
    auto loaded = LoadKubeconfig(write("bad.yaml", config(cluster, user)), "");
    REQUIRE(!loaded.ok());
    return std::string(loaded.status().message());
  };
  CHECK(absl::StrContains(
      refused("server: \"https://k:6443\", insecure-skip-tls-verify: true", "token: t"),
      "cluster.insecure-skip-tls-verify"));
  CHECK(absl::StrContains(refused("server: \"https://k:6443\"", "exec: {command: aws}"),
                          "user.exec"));
  CHECK(absl::StrContains(refused("server: \"http://k.example:8080\"", "token: t"),
                          "cluster.server"));
  CHECK(absl::StrContains(refused("server: \"https://k:6443\"", "client-certificate: c.crt"),
                          "user.client-key"));
  CHECK(absl::StrContains(refused("server: \"https://k:6443\"", "username: admin"), "user"));
  auto missing =
      LoadKubeconfig(write("ctx.yaml", config("server: \"https://k:6443\"", "token: t")), "other");
  REQUIRE(!missing.ok());
  CHECK(absl::StrContains(missing.status().message(), "contexts"));
}

}  // namespace
}  // namespace codeco::kubelms
