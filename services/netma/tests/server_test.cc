// NetMA over real gRPC on loopback with mTLS certificates from
// scripts/dev-ca.sh: two NetMAs probe each other and exchange summaries; a
// non-member peer is refused; plaintext and wrong-CA peers cannot connect;
// ALTO JSON over HTTP; virtual links on the hub, persisted in RocksDB.
#include <curl/curl.h>

#include "http_get.h"
#include "codeco/common/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "codeco/common/rocksdb_kv_store.h"
#include "codeco/common/tls.h"
#include "grpcpp/create_channel.h"
#include "netma/core/alto.h"
#include "codeco/common/config.h"
#include "netma/server/netma_service.h"
#include "netma/store/kv_virtual_link_repository.h"
#include "prometheus/registry.h"

namespace codeco::netma {
namespace {

namespace fs = std::filesystem;
namespace v1 = codeco::netma::v1;

void Run(const std::string& command) {
  INFO(command);
  REQUIRE(std::system(command.c_str()) == 0);
}

// CA "a" is the federation; CA "b" is foreign.
struct Pki {
  Pki() {
    std::mt19937_64 rng(std::random_device{}());
    dir = fs::temp_directory_path() / ("codeco-netma-pki-" + std::to_string(rng()));
    fs::create_directories(dir);
    for (const char* ca : {"a", "b"}) Run(Script() + " " + (dir / ca).string() + " ca");
    for (const char* cluster : {"mc1", "mc2", "mc3", "hub"}) Issue("a", cluster, "netma");
    Issue("a", "mc2", "acm");
    Issue("a", "hub", "operator");
    Issue("b", "mc2", "netma");
  }
  ~Pki() { fs::remove_all(dir); }
  static std::string Script() { return CODECO_DEV_CA_SCRIPT; }
  void Issue(const std::string& ca, const std::string& cluster, const std::string& service) {
    Run(Script() + " " + (dir / ca).string() + " issue " + cluster + " " + service);
  }
  TlsFiles Files(const std::string& ca, const std::string& cluster,
                 const std::string& service = "netma") const {
    fs::path d = dir / ca;
    return {(d / "ca.crt").string(), (d / cluster / (service + ".crt")).string(),
            (d / cluster / (service + ".key")).string(), absl::Seconds(60)};
  }
  fs::path dir;
};

// One NetMA: its service, a gRPC server, metrics.
struct Node {
  Node(const std::string& cluster, Role role, const TlsFiles* tls,
       std::map<std::string, std::vector<std::string>> neighborhoods, bool run_loop,
       KvStore* external_store = nullptr) {
    store = NewInMemoryKvStore({kVirtualLinksColumnFamily});
    registry = std::make_shared<prometheus::Registry>();
    NetmaServerOptions options;
    options.cluster = cluster;
    options.hub_cluster = "hub";
    options.role = role;
    options.neighborhoods = std::move(neighborhoods);
    options.monitor.probe.interval = absl::Milliseconds(100);
    options.monitor.probe.timeout = absl::Seconds(2);
    options.monitor.probe.bulk_every = 2;
    options.monitor.probe.bulk_bytes = 32 * 1024;
    options.monitor.stale_after = absl::Seconds(30);
    options.summary_interval = absl::Milliseconds(200);
    options.alto_listen = "127.0.0.1:0";
    options.run_loop = run_loop;
    options.channels.insecure = tls == nullptr;
    if (tls != nullptr) options.channels.tls = *tls;
    auto created = NetmaServer::Create(options, external_store ? *external_store : *store,
                                       RealClock::Default(), registry.get());
    REQUIRE(created.ok());
    service = std::move(*created);
    GrpcServerOptions server_options;
    server_options.service = "netma";
    server_options.insecure = tls == nullptr;
    if (tls != nullptr) server_options.tls = *tls;
    server_options.authz = {cluster, "hub"};
    server_options.services = {service.get()};
    auto started = GrpcServer::Start(server_options);
    REQUIRE(started.ok());
    server = std::move(*started);
  }
  ~Node() {
    server->Shutdown(absl::ZeroDuration());
    service.reset();
  }
  std::unique_ptr<KvStore> store;
  std::shared_ptr<prometheus::Registry> registry;
  std::unique_ptr<NetmaServer> service;
  std::unique_ptr<GrpcServer> server;
};

std::unique_ptr<v1::NetmaService::Stub> Stub(const std::string& address, const TlsFiles* tls) {
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (tls != nullptr) {
    auto made = MakeChannelCredentials(*tls);
    REQUIRE(made.ok());
    creds = *made;
  }
  return v1::NetmaService::NewStub(grpc::CreateChannel(address, creds));
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  return context;
}

// Polls `condition` until it holds or 30 s pass.
bool Eventually(const std::function<bool()>& condition) {
  for (absl::Time end = absl::Now() + absl::Seconds(30); absl::Now() < end;) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}

// A one-connection-at-a-time HTTP CONNECT proxy on loopback that records the
// targets it was asked for (stands in for a CODEF egress relay).
class ConnectProxy {
 public:
  ConnectProxy() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(listen(listen_fd_, 8) == 0);
    socklen_t len = sizeof(addr);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    address_ = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    REQUIRE(pipe(wake_) == 0);
    thread_ = std::thread([this] { Run(); });
  }
  ~ConnectProxy() {
    (void)!write(wake_[1], "x", 1);
    thread_.join();
    for (int fd : {listen_fd_, wake_[0], wake_[1]}) close(fd);
  }
  const std::string& address() const { return address_; }
  std::vector<std::string> targets() {
    absl::MutexLock lock(&mu_);
    return targets_;
  }

 private:
  void Run() {
    int client = -1, upstream = -1;
    auto drop = [&] {
      if (client >= 0) close(client);
      if (upstream >= 0) close(upstream);
      client = upstream = -1;
    };
    while (true) {
      std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
      if (upstream >= 0) {
        fds.push_back({client, POLLIN, 0});
        fds.push_back({upstream, POLLIN, 0});
      }
      if (poll(fds.data(), fds.size(), 10000) <= 0) continue;
      if (fds[0].revents) break;
      if (fds[1].revents & POLLIN) {
        drop();
        client = accept(listen_fd_, nullptr, nullptr);
        std::string head;
        char c;
        while (head.find("\r\n\r\n") == std::string::npos && read(client, &c, 1) == 1) head += c;
        // "CONNECT host:port HTTP/1.1"
        std::string target = head.substr(8, head.find(' ', 8) - 8);
        {
          absl::MutexLock lock(&mu_);
          targets_.push_back(target);
        }
        upstream = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        inet_pton(AF_INET, target.substr(0, target.rfind(':')).c_str(), &addr.sin_addr);
        addr.sin_port =
            htons(static_cast<uint16_t>(std::stoi(target.substr(target.rfind(':') + 1))));
        if (connect(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
          drop();
          continue;
        }
        const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        (void)!write(client, ok, sizeof(ok) - 1);
        continue;
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        int from = fds[i].fd;
        int to = from == client ? upstream : client;
        char buf[65536];
        ssize_t n = read(from, buf, sizeof(buf));
        if (n <= 0) {
          drop();
          break;
        }
        for (ssize_t off = 0; off < n;) {
          ssize_t w = write(to, buf + off, static_cast<size_t>(n - off));
          if (w <= 0) break;
          off += w;
        }
      }
    }
    drop();
  }

  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::string address_;
  absl::Mutex mu_;
  std::vector<std::string> targets_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

v1::PeerSummary SummaryFrom(const std::string& cluster, const std::string& nb) {
  v1::PeerSummary summary;
  summary.set_cluster(cluster);
  summary.set_neighborhood_id(nb);
  return summary;
}

TEST_CASE("two NetMAs with mTLS probe each other and exchange summaries and serve ALTO") {
  Pki pki;
  TlsFiles mc1_tls = pki.Files("a", "mc1");
  TlsFiles mc2_tls = pki.Files("a", "mc2");
  std::map<std::string, std::vector<std::string>> nbs = {{"nb1", {"mc1", "mc2"}}};
  Node mc1("mc1", Role::kManagedCluster, &mc1_tls, nbs, true);
  Node mc2("mc2", Role::kManagedCluster, &mc2_tls, nbs, true);
  mc1.service->SetPeers({{"mc2", mc2.server->address()}, {"mc3", "127.0.0.1:1"}});
  mc2.service->SetPeers({{"mc1", mc1.server->address()}});
  auto stub = Stub(mc1.server->address(), &mc2_tls);
  // Reads across neighborhoods are the operator's (and the hub's).
  TlsFiles operator_tls = pki.Files("a", "hub", "operator");
  auto reader = Stub(mc1.server->address(), &operator_tls);

  // mc1 measures mc1->mc2 (RTT and throughput) and learns mc2->mc1 from mc2's summary.
  v1::ListLinksResponse links;
  REQUIRE(Eventually([&] {
    links.Clear();
    auto context = Context();
    if (!reader->ListLinks(context.get(), v1::ListLinksRequest(), &links).ok()) return false;
    bool local = false, remote = false;
    for (const auto& l : links.links()) {
      if (l.link_id() == "mc1->mc2") local = l.sample_count() >= 3 && l.throughput_bps() > 0;
      if (l.link_id() == "mc2->mc1") remote = l.sample_count() >= 3;
    }
    return local && remote;
  }));
  const v1::LinkMetrics& measured = links.links(0);
  REQUIRE(measured.link_id() == "mc1->mc2");
  REQUIRE(measured.rtt_ema_ns() > 0);
  REQUIRE(measured.rtt_p99_ns() >= measured.rtt_p50_ns());
  REQUIRE(measured.loss_ratio() == 0);
  REQUIRE_FALSE(measured.failed());
  REQUIRE(measured.probe_bytes() > 32 * 1024);
  REQUIRE(links.local_node().node() == "mc1");
  REQUIRE(links.local_node().degree() == 1);  // mc3 is not in a shared neighborhood: not probed
  for (const auto& l : links.links()) REQUIRE(l.target_cluster() != "mc3");

  SECTION("topology and cost maps over gRPC") {
    v1::GetNetworkTopologyRequest request;
    request.set_neighborhood_id("nb1");
    v1::GetNetworkTopologyResponse topology;
    auto context = Context();
    REQUIRE(stub->GetNetworkTopology(context.get(), request, &topology).ok());
    REQUIRE(topology.topology().nodes_size() == 2);
    REQUIRE(topology.topology().links_size() == 2);
    REQUIRE(topology.topology().links(0).capabilities_size() == 2);
    // Only members of nb1 read it; a member reads one neighborhood at a time.
    TlsFiles mc3_tls = pki.Files("a", "mc3");
    context = Context();
    grpc::Status denied = Stub(mc1.server->address(), &mc3_tls)
                              ->GetNetworkTopology(context.get(), request, &topology);
    REQUIRE(denied.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    REQUIRE_THAT(denied.error_message(), Catch::Contains("nb1") && Catch::Contains("mc3"));
    context = Context();
    REQUIRE(stub->GetNetworkTopology(context.get(), v1::GetNetworkTopologyRequest(), &topology)
                .error_code() == grpc::StatusCode::PERMISSION_DENIED);

    v1::GetCostMapRequest cost_request;
    cost_request.set_metric(v1::COST_METRIC_DELAY);
    v1::GetCostMapResponse cost;
    context = Context();
    REQUIRE(reader->GetCostMap(context.get(), cost_request, &cost).ok());
    REQUIRE(cost.cost_map().entries_size() == 2);
    v1::GetNetworkMapResponse map;
    context = Context();
    REQUIRE(reader->GetNetworkMap(context.get(), v1::GetNetworkMapRequest(), &map).ok());
    REQUIRE(cost.cost_map().dependent_vtag() == map.network_map().vtag());

    cost_request.set_metric(v1::COST_METRIC_UNSPECIFIED);
    context = Context();
    grpc::Status bad = reader->GetCostMap(context.get(), cost_request, &cost);
    REQUIRE(bad.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    REQUIRE_THAT(bad.error_message(), Catch::Contains("metric"));
  }

  SECTION("ALTO JSON over HTTP with the RFC 7285 media types") {
    std::string base = "http://" + mc1.service->alto_address();
    testing::HttpResponse network = testing::HttpGet(base + "/alto/networkmap");
    REQUIRE(network.status == 200);
    REQUIRE(network.content_type == kAltoNetworkMapMediaType);
    nlohmann::json network_doc = nlohmann::json::parse(network.body);
    REQUIRE(ValidateAltoNetworkMap(network_doc).ok());
    REQUIRE(network_doc["network-map"]["mc2"]["ipv4"][0] == "127.0.0.1/32");
    for (const char* metric : {"delay", "bandwidth", "loss", "energy"}) {
      testing::HttpResponse cost = testing::HttpGet(base + "/alto/costmap/" + metric);
      REQUIRE(cost.status == 200);
      REQUIRE(cost.content_type == kAltoCostMapMediaType);
      nlohmann::json doc = nlohmann::json::parse(cost.body);
      REQUIRE(ValidateAltoCostMap(doc).ok());
      REQUIRE(doc["meta"]["dependent-vtags"][0]["tag"] == network_doc["meta"]["vtag"]["tag"]);
      REQUIRE(doc["cost-map"]["mc1"].contains("mc2"));
    }
    REQUIRE(testing::HttpGet(base + "/alto/costmap/jitter").status == 404);
    REQUIRE(testing::HttpGet(base + "/nothing").status == 404);
  }

  SECTION("Prometheus metrics") {
    std::set<std::string> names;
    for (const auto& family : mc1.registry->Collect()) names.insert(family.name);
    for (const char* name :
         {"codeco_netma_link_rtt_ema_seconds", "codeco_netma_link_rtt_p99_seconds",
          "codeco_netma_link_loss_ratio", "codeco_netma_link_throughput_bits_per_second",
          "codeco_netma_probe_bytes_total", "codeco_netma_node_attribute"}) {
      INFO(name);
      REQUIRE(names.count(name));
    }
  }
}

TEST_CASE("summaries from non-members or impostors or unauthenticated callers are refused") {
  Pki pki;
  TlsFiles mc1_tls = pki.Files("a", "mc1");
  Node mc1("mc1", Role::kManagedCluster, &mc1_tls, {{"nb1", {"mc1", "mc2"}}}, false);
  v1::ExchangeSummaryRequest request;
  v1::ExchangeSummaryResponse response;

  TlsFiles mc3_tls = pki.Files("a", "mc3");
  *request.mutable_summary() = SummaryFrom("mc3", "nb1");
  auto context = Context();
  grpc::Status status =
      Stub(mc1.server->address(), &mc3_tls)->ExchangeSummary(context.get(), request, &response);
  REQUIRE(status.error_code() == grpc::StatusCode::PERMISSION_DENIED);

  TlsFiles mc2_tls = pki.Files("a", "mc2");
  *request.mutable_summary() = SummaryFrom("mc1", "nb1");  // mc2 posing as mc1
  context = Context();
  status =
      Stub(mc1.server->address(), &mc2_tls)->ExchangeSummary(context.get(), request, &response);
  REQUIRE(status.error_code() == grpc::StatusCode::PERMISSION_DENIED);

  TlsFiles mc2_acm = pki.Files("a", "mc2", "acm");  // right cluster, wrong service
  *request.mutable_summary() = SummaryFrom("mc2", "nb1");
  context = Context();
  status =
      Stub(mc1.server->address(), &mc2_acm)->ExchangeSummary(context.get(), request, &response);
  REQUIRE(status.error_code() == grpc::StatusCode::PERMISSION_DENIED);

  context = Context();
  status =
      Stub(mc1.server->address(), &mc2_tls)->ExchangeSummary(context.get(), request, &response);
  REQUIRE(status.ok());
  REQUIRE(response.summary().cluster() == "mc1");
  REQUIRE(response.summary().neighborhood_id() == "nb1");

  Node insecure("mc1", Role::kManagedCluster, nullptr, {{"nb1", {"mc1", "mc2"}}}, false);
  context = Context();
  status =
      Stub(insecure.server->address(), nullptr)->ExchangeSummary(context.get(), request, &response);
  REQUIRE(status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
}

TEST_CASE("plaintext and wrong-CA peers cannot connect or probe") {
  Pki pki;
  TlsFiles mc1_tls = pki.Files("a", "mc1");
  Node mc1("mc1", Role::kManagedCluster, &mc1_tls, {}, false);
  auto context = Context();
  v1::ListLinksResponse links;
  REQUIRE(Stub(mc1.server->address(), nullptr)
              ->ListLinks(context.get(), v1::ListLinksRequest(), &links)
              .error_code() == grpc::StatusCode::UNAVAILABLE);
  TlsFiles foreign = pki.Files("b", "mc2");
  context = Context();
  REQUIRE(Stub(mc1.server->address(), &foreign)
              ->ListLinks(context.get(), v1::ListLinksRequest(), &links)
              .error_code() == grpc::StatusCode::UNAVAILABLE);

  // The real prober fails against the server with either.
  for (bool insecure : {true, false}) {
    auto channels = PeerChannels::Create({.insecure = insecure, .tls = foreign});
    REQUIRE(channels.ok());
    GrpcProber prober(**channels, "");
    ProbeTask task{{"mc1", mc1.server->address()}, 1024, absl::Seconds(2)};
    REQUIRE_FALSE(prober.Probe(task).ok());
  }
  auto made = PeerChannels::Create({.tls = pki.Files("a", "mc2")});
  REQUIRE(made.ok());
  PeerChannels& good = **made;
  GrpcProber prober(good, "");
  auto result = prober.Probe({{"mc1", mc1.server->address()}, 1024, absl::Seconds(5)});
  REQUIRE(result.ok());
  REQUIRE(result->bulk_bytes == 1024);
  REQUIRE(result->rtt > absl::ZeroDuration());
  REQUIRE(prober.ProbeSelf(absl::Seconds(5)).status().code() == absl::StatusCode::kUnimplemented);
  // A NetMA that knows its own address measures its call overhead.
  GrpcProber self_aware(good, mc1.server->address());
  absl::StatusOr<absl::Duration> self = self_aware.ProbeSelf(absl::Seconds(5));
  REQUIRE(self.ok());
  REQUIRE(*self > absl::ZeroDuration());
}

TEST_CASE("probes and exchanges go through the egress relay (HTTP CONNECT) when configured") {
  Pki pki;
  TlsFiles mc1_tls = pki.Files("a", "mc1");
  Node mc1("mc1", Role::kManagedCluster, &mc1_tls, {{"nb1", {"mc1", "mc2"}}}, false);
  ConnectProxy proxy;
  auto made = PeerChannels::Create({.tls = pki.Files("a", "mc2"), .egress_proxy = proxy.address()});
  REQUIRE(made.ok());
  PeerChannels& channels = **made;
  GrpcProber prober(channels, "");
  auto result = prober.Probe({{"mc1", mc1.server->address()}, 4096, absl::Seconds(10)});
  REQUIRE(result.ok());
  REQUIRE(result->bulk_bytes == 4096);
  GrpcSummaryExchange exchange(channels, absl::Seconds(10));
  auto reply = exchange.Exchange({"mc1", mc1.server->address()}, SummaryFrom("mc2", "nb1"));
  REQUIRE(reply.ok());
  REQUIRE(reply->cluster == "mc1");  // from mc1's certificate, through the tunnel
  REQUIRE(reply->summary.cluster() == "mc1");
  REQUIRE_FALSE(proxy.targets().empty());
  for (const std::string& target : proxy.targets()) REQUIRE(target == mc1.server->address());
}

TEST_CASE("peer and neighborhood settings parse strictly") {
  // netma.peers is parsed by the services' one ParseNamedAddresses.
  auto peers = ParseNamedAddresses("netma.peers", "b=127.0.2.1:7001, c=[::1]:7001", "cluster");
  REQUIRE(peers.ok());
  REQUIRE(peers->size() == 2);
  REQUIRE(peers->at("c") == "[::1]:7001");
  auto bad = ParseNamedAddresses("netma.peers", "b=127.0.2.1:7001,C=x:1,d", "cluster");
  REQUIRE(bad.status().code() == absl::StatusCode::kInvalidArgument);
  REQUIRE_THAT(std::string(bad.status().message()), Catch::Contains("netma.peers"));
  REQUIRE_THAT(std::string(bad.status().message()), Catch::Contains("entry 2 \"C=x:1\""));
  REQUIRE_THAT(std::string(bad.status().message()), Catch::Contains("DNS label"));
  REQUIRE_FALSE(ParseNamedAddresses("netma.peers", "b=127.0.2.1:7001,d", "cluster").ok());
  auto nbs = ParseNeighborhoods("netma.neighborhoods", "nb1=a,b;nb2=a,c,d");
  REQUIRE(nbs.ok());
  REQUIRE(nbs->at("nb2").size() == 3);
  REQUIRE_FALSE(ParseNeighborhoods("netma.neighborhoods", "nb1").ok());
  REQUIRE_FALSE(ParseNeighborhoods("netma.neighborhoods", "nb1=a,B_").ok());
}

TEST_CASE("the ALTO HTTP server answers only GET and bounds requests") {
  auto server = HttpServer::Start("127.0.0.1:0", [](const std::string& path) {
    return HttpResponse{200, "text/plain", "path=" + path};
  });
  REQUIRE(server.ok());
  testing::HttpResponse ok = testing::HttpGet("http://" + (*server)->address() + "/x?y=1");
  REQUIRE(ok.status == 200);
  REQUIRE(ok.body == "path=/x");
  CURL* curl = curl_easy_init();
  std::string url = "http://" + (*server)->address() + "/x";
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "a=b");
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
  curl_easy_setopt(
      curl, CURLOPT_WRITEFUNCTION, +[](char*, size_t size, size_t n, void*) { return size * n; });
  REQUIRE(curl_easy_perform(curl) == CURLE_OK);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(curl);
  REQUIRE(status == 405);
  REQUIRE_FALSE(HttpServer::Start("localhost:0", {}).ok());  // numeric hosts only
}

TEST_CASE("virtual links on the hub over gRPC survive a restart") {
  Pki pki;
  TlsFiles hub_tls = pki.Files("a", "hub");
  // Virtual links are the operator's (and the hub SWM's) to create and delete.
  TlsFiles operator_tls = pki.Files("a", "hub", "operator");
  fs::path data = pki.dir / "hub-data";
  v1::VirtualLink spec;
  spec.set_application("shop");
  spec.set_channel("orders");
  spec.set_source_cluster("mc1");
  spec.set_target_cluster("mc2");
  spec.set_target_endpoint("10.0.0.5:8080");
  spec.set_service_class(codeco::common::v1::SERVICE_CLASS_BESTEFFORT);
  std::string id;
  {
    auto store =
        OpenRocksDbKvStore({.path = data.string(), .column_families = {kVirtualLinksColumnFamily}});
    REQUIRE(store.ok());
    Node hub("hub", Role::kHub, &hub_tls, {}, false, store->get());
    auto stub = Stub(hub.server->address(), &operator_tls);
    v1::CreateVirtualLinkRequest create;
    *create.mutable_virtual_link() = spec;
    create.set_request_id("r1");
    v1::CreateVirtualLinkResponse created;
    auto context = Context();
    REQUIRE(stub->CreateVirtualLink(context.get(), create, &created).ok());
    id = created.virtual_link().id();
    REQUIRE(created.virtual_link().forwarding_rules_size() == 4);

    create.mutable_virtual_link()->set_target_endpoint("nope");
    create.set_request_id("r2");
    context = Context();
    grpc::Status bad = stub->CreateVirtualLink(context.get(), create, &created);
    REQUIRE(bad.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    REQUIRE_THAT(bad.error_message(), Catch::Contains("virtual_link.target_endpoint"));

    // The hub serves cost maps too (its view is the whole federation's).
    context = Context();
    v1::GetCostMapRequest cost_request;
    cost_request.set_metric(v1::COST_METRIC_DELAY);
    v1::GetCostMapResponse cost;
    REQUIRE(stub->GetCostMap(context.get(), cost_request, &cost).ok());
    // MC-only RPCs answer FAILED_PRECONDITION on the hub.
    context = Context();
    v1::ExchangeSummaryRequest exchange;
    exchange.mutable_summary()->set_cluster("hub");
    v1::ExchangeSummaryResponse exchanged;
    REQUIRE(Stub(hub.server->address(), &hub_tls)
                ->ExchangeSummary(context.get(), exchange, &exchanged)
                .error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  }
  {
    auto store =
        OpenRocksDbKvStore({.path = data.string(), .column_families = {kVirtualLinksColumnFamily}});
    REQUIRE(store.ok());
    Node hub("hub", Role::kHub, &hub_tls, {}, false, store->get());
    auto stub = Stub(hub.server->address(), &operator_tls);
    v1::GetVirtualLinkRequest get;
    get.set_id(id);
    v1::GetVirtualLinkResponse got;
    auto context = Context();
    REQUIRE(stub->GetVirtualLink(context.get(), get, &got).ok());
    REQUIRE(got.virtual_link().channel() == "orders");
    v1::ListVirtualLinksResponse list;
    context = Context();
    REQUIRE(stub->ListVirtualLinks(context.get(), v1::ListVirtualLinksRequest(), &list).ok());
    REQUIRE(list.virtual_links_size() == 1);
    v1::DeleteVirtualLinkRequest del;
    del.set_id(id);
    v1::DeleteVirtualLinkResponse deleted;
    context = Context();
    REQUIRE(stub->DeleteVirtualLink(context.get(), del, &deleted).ok());
    REQUIRE(deleted.virtual_link().phase() == v1::VIRTUAL_LINK_PHASE_DELETING);
    context = Context();
    REQUIRE(stub->GetVirtualLink(context.get(), get, &got).error_code() ==
            grpc::StatusCode::NOT_FOUND);
  }
  {
    // On an MC, hub-only RPCs answer FAILED_PRECONDITION.
    TlsFiles mc1_tls = pki.Files("a", "mc1");
    Node mc1("mc1", Role::kManagedCluster, &mc1_tls, {}, false);
    v1::CreateVirtualLinkRequest create;
    *create.mutable_virtual_link() = spec;
    v1::CreateVirtualLinkResponse created;
    auto context = Context();
    REQUIRE(Stub(mc1.server->address(), &operator_tls)
                ->CreateVirtualLink(context.get(), create, &created)
                .error_code() == grpc::StatusCode::FAILED_PRECONDITION);
    // And a managed cluster's NetMA may not create one at all.
    context = Context();
    REQUIRE(Stub(mc1.server->address(), &mc1_tls)
                ->CreateVirtualLink(context.get(), create, &created)
                .error_code() == grpc::StatusCode::PERMISSION_DENIED);
  }
}

}  // namespace
}  // namespace codeco::netma
