// Two codeco-netma processes with mTLS certificates from scripts/dev-ca.sh,
// each on its own loopback address, probe each other and exchange summaries;
// a third process with a foreign CA's certificate cannot probe them. Both
// stop cleanly on SIGTERM.
#include "process.h"

#include "codeco/common/ports.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <regex>
#include <thread>

#include "codeco/common/tls.h"
#include "codeco/netma/v1/netma_service.grpc.pb.h"
#include "grpcpp/create_channel.h"

namespace codeco::netma {
namespace {

namespace fs = std::filesystem;
namespace v1 = codeco::netma::v1;
using codeco::testing::ChildProcess;

void Run(const std::string& command) {
  INFO(command);
  REQUIRE(std::system(command.c_str()) == 0);
}

// A port that is free on 127.0.0.1 now (the processes bind it on other
// loopback addresses, so a race with an unrelated listener is unlikely).
int FreePort() {
  absl::StatusOr<int> port = codeco::FreePort("127.0.0.1");
  REQUIRE(port.ok());
  return *port;
}

struct Cluster {
  std::string name;
  std::string ip;
  std::string ca;
};

std::unique_ptr<ChildProcess> Start(const fs::path& dir, const Cluster& c, int port,
                                    const std::string& peers, std::string* address) {
  fs::path tls = dir / c.ca / c.name;
  std::vector<std::string> argv = {CODECO_NETMA_BIN,
                                   "--role",
                                   "mc",
                                   "--cluster",
                                   c.name,
                                   "--listen",
                                   c.ip + ":" + std::to_string(port),
                                   "--metrics-listen",
                                   c.ip + ":0",
                                   "--data-dir",
                                   (dir / ("data-" + c.name)).string(),
                                   "--tls.ca-file",
                                   (dir / c.ca / "ca.crt").string(),
                                   "--tls.cert-file",
                                   (tls / "netma.crt").string(),
                                   "--tls.key-file",
                                   (tls / "netma.key").string(),
                                   "--set",
                                   "federation.hub_cluster=hub",
                                   "--set",
                                   "netma.peers=" + peers,
                                   "--set",
                                   "netma.neighborhoods=nb1=mc1,mc2,mc3",
                                   "--set",
                                   "netma.probe_interval=200ms",
                                   "--set",
                                   "netma.summary_interval=300ms",
                                   "--set",
                                   "netma.bulk_every=2",
                                   "--set",
                                   "netma.alto_listen=" + c.ip + ":0"};
  auto process = std::make_unique<ChildProcess>(argv, (dir / (c.name + ".log")).string());
  std::optional<std::string> line = process->ReadLine(absl::Now() + absl::Seconds(30));
  INFO("netma " << c.name << " printed: " << line.value_or("<nothing>"));
  REQUIRE(line.has_value());
  std::smatch m;
  REQUIRE(std::regex_search(*line, m, std::regex("listening on (\\S+) ")));
  *address = m[1];
  return process;
}

v1::ListLinksResponse ListLinks(const std::string& address, const TlsFiles& tls) {
  auto creds = MakeChannelCredentials(tls);
  REQUIRE(creds.ok());
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::ListLinksResponse response;
  (void)v1::NetmaService::NewStub(grpc::CreateChannel(address, *creds))
      ->ListLinks(&context, v1::ListLinksRequest(), &response);
  return response;
}

const v1::LinkMetrics* Find(const v1::ListLinksResponse& links, const std::string& id) {
  for (const auto& l : links.links()) {
    if (l.link_id() == id) return &l;
  }
  return nullptr;
}

TEST_CASE("two netma processes with mTLS probe each other but a foreign-CA peer cannot") {
  std::mt19937_64 rng(std::random_device{}());
  fs::path dir = fs::temp_directory_path() / ("codeco-netma-proc-" + std::to_string(rng()));
  fs::create_directories(dir);
  const std::string script = CODECO_DEV_CA_SCRIPT;
  Cluster mc1{"mc1", "127.0.41.1", "a"}, mc2{"mc2", "127.0.42.1", "a"},
      mc3{"mc3", "127.0.43.1", "b"};
  for (const char* ca : {"a", "b"}) Run(script + " " + (dir / ca).string() + " ca");
  for (const Cluster& c : {mc1, mc2, mc3}) {
    Run(script + " " + (dir / c.ca).string() + " issue " + c.name + " netma " + c.ip);
  }
  // The links are read as each CA's operator (reads across neighborhoods are the operator's).
  for (const char* ca : {"a", "b"}) Run(script + " " + (dir / ca).string() + " operator hub");
  int port = FreePort();
  auto addr = [&](const Cluster& c) { return c.ip + ":" + std::to_string(port); };
  std::string a1, a2, a3;
  std::string all = "mc1=" + addr(mc1) + ",mc2=" + addr(mc2) + ",mc3=" + addr(mc3);
  // mc1 starts last, once mc2 and mc3 listen (Start waits for that): every
  // probe mc1 makes meets a running peer, so mc1->mc2 has no loss however long
  // a process takes to start (seconds under ThreadSanitizer). The other way
  // round, mc1's first probes to a peer still starting failed and counted.
  auto p2 = Start(dir, mc2, port, all, &a2);
  auto p3 = Start(dir, mc3, port, all, &a3);
  auto p1 = Start(dir, mc1, port, all, &a1);
  TlsFiles client_a{(dir / "a/ca.crt").string(), (dir / "a/hub/operator.crt").string(),
                    (dir / "a/hub/operator.key").string()};
  TlsFiles client_b{(dir / "b/ca.crt").string(), (dir / "b/hub/operator.crt").string(),
                    (dir / "b/hub/operator.key").string()};

  bool converged = false;
  v1::ListLinksResponse links;
  for (absl::Time end = absl::Now() + absl::Seconds(60); !converged && absl::Now() < end;) {
    links = ListLinks(a1, client_a);
    const v1::LinkMetrics* to2 = Find(links, "mc1->mc2");
    const v1::LinkMetrics* from2 = Find(links, "mc2->mc1");
    const v1::LinkMetrics* to3 = Find(links, "mc1->mc3");
    converged = to2 != nullptr && to2->sample_count() >= 3 && to2->throughput_bps() > 0 &&
                from2 != nullptr && from2->sample_count() >= 3 && to3 != nullptr && to3->failed();
    if (!converged) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  INFO(links.DebugString());
  REQUIRE(converged);
  REQUIRE(Find(links, "mc1->mc2")->loss_ratio() == 0);
  REQUIRE(Find(links, "mc1->mc3")->loss_ratio() == 1);  // foreign CA: every probe fails
  REQUIRE(links.local_node().degree() == 1);
  REQUIRE(links.local_node().node_net_failures() >= 1);

  // mc3 (foreign CA) sees mc1 and mc2 as down too.
  v1::ListLinksResponse seen_by_3 = ListLinks(a3, client_b);
  for (const auto& l : seen_by_3.links()) REQUIRE(l.rtt_ema_ns() == 0);

  for (auto* p : {p1.get(), p2.get(), p3.get()}) {
    REQUIRE(p->Stop(SIGTERM, absl::Now() + absl::Seconds(20)) == 0);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace codeco::netma
