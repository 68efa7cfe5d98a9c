// mTLS with certificates from scripts/dev-ca.sh: a client with a certificate
// from the federation CA connects and is identified by its SPIFFE ID; a
// client with no certificate, a foreign CA's certificate or plaintext is
// refused; rotated files are picked up without a restart.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "codeco/common/server.h"
#include "codeco/common/tls.h"
#include "codeco/lms/v1/lms_service.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace codeco {
namespace {

namespace fs = std::filesystem;
using grpc::health::v1::Health;

// A test double of the LMS service whose ListNodes answers with the caller's
// verified identity in next_page_token, so the test can see PeerIdentity work.
class IdentityEcho final : public codeco::lms::v1::LmsService::CallbackService {
  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* context,
                                      const codeco::lms::v1::ListNodesRequest*,
                                      codeco::lms::v1::ListNodesResponse* response) override {
    auto* reactor = context->DefaultReactor();
    auto identity = PeerIdentity(*context->auth_context());
    if (identity.ok()) {
      response->set_next_page_token(identity->cluster + "/" + identity->service);
      reactor->Finish(grpc::Status::OK);
    } else {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                   std::string(identity.status().message())));
    }
    return reactor;
  }
};

void Run(const std::string& command) {
  INFO(command);
  REQUIRE(std::system(command.c_str()) == 0);
}

// A scratch directory with CA "a" (the federation), CA "b" (foreign) and CA "c"
// (the one rotated to).
struct Pki {
  Pki() {
    std::random_device rd;
    dir = fs::temp_directory_path() / ("codeco-pki-" + std::to_string(rd()));
    fs::create_directories(dir);
    for (const char* ca : {"a", "b", "c"}) {
      Run(std::string(CODECO_DEV_CA_SCRIPT) + " " + (dir / ca).string() + " ca");
    }
    Issue("a", "hub", "acm");
    Issue("a", "mc1", "swm");
    Issue("b", "mc9", "swm");
    Issue("c", "hub", "acm");
    Issue("c", "mc2", "netma");
  }
  ~Pki() { fs::remove_all(dir); }

  void Issue(const std::string& ca, const std::string& cluster, const std::string& service) {
    Run(std::string(CODECO_DEV_CA_SCRIPT) + " " + (dir / ca).string() + " issue " + cluster + " " +
        service);
  }

  TlsFiles Files(const std::string& ca, const std::string& cluster,
                 const std::string& service) const {
    fs::path d = dir / ca;
    return {(d / "ca.crt").string(), (d / cluster / (service + ".crt")).string(),
            (d / cluster / (service + ".key")).string(), absl::Seconds(1)};
  }

  fs::path dir;
};

std::shared_ptr<grpc::Channel> TlsChannel(const std::string& address, const TlsFiles& files) {
  auto creds = MakeChannelCredentials(files);
  REQUIRE(creds.ok());
  return grpc::CreateChannel(address, *creds);
}

grpc::Status CheckHealth(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  return Health::NewStub(channel)->Check(&context, request, &response);
}

std::unique_ptr<GrpcServer> StartTlsServer(const TlsFiles& files, grpc::Service* service) {
  GrpcServerOptions options;
  options.service = "test";
  options.tls = files;
  // The LMS of cluster mc1 (its own services may call it), in a federation whose hub is "hub".
  options.authz = {"mc1", "hub"};
  if (service != nullptr) options.services = {service};
  auto server = GrpcServer::Start(options);
  REQUIRE(server.ok());
  return std::move(*server);
}

void CopyAtomically(const fs::path& from, const fs::path& to) {
  fs::path tmp = to;
  tmp += ".tmp";
  fs::copy_file(from, tmp, fs::copy_options::overwrite_existing);
  fs::rename(tmp, to);
}

TEST_CASE("a client with a certificate from the CA connects and is identified") {
  Pki pki;
  IdentityEcho echo;
  auto server = StartTlsServer(pki.Files("a", "hub", "acm"), &echo);
  auto channel = TlsChannel(server->address(), pki.Files("a", "mc1", "swm"));
  REQUIRE(CheckHealth(channel).ok());

  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  codeco::lms::v1::ListNodesResponse response;
  REQUIRE(codeco::lms::v1::LmsService::NewStub(channel)
              ->ListNodes(&context, codeco::lms::v1::ListNodesRequest(), &response)
              .ok());
  REQUIRE(response.next_page_token() == "mc1/swm");
}

TEST_CASE("clients without a certificate from a foreign CA or in plaintext are refused") {
  Pki pki;
  auto server = StartTlsServer(pki.Files("a", "hub", "acm"), nullptr);

  SECTION("no client certificate") {
    grpc::SslCredentialsOptions ssl;
    std::ifstream ca(pki.Files("a", "hub", "acm").ca_file);
    ssl.pem_root_certs.assign(std::istreambuf_iterator<char>(ca), {});
    auto channel = grpc::CreateChannel(server->address(), grpc::SslCredentials(ssl));
    REQUIRE(CheckHealth(channel).error_code() == grpc::StatusCode::UNAVAILABLE);
  }
  SECTION("certificate from a foreign CA") {
    TlsFiles foreign = pki.Files("b", "mc9", "swm");
    foreign.ca_file = pki.Files("a", "hub", "acm").ca_file;  // trusts the server, but is not trusted
    REQUIRE(CheckHealth(TlsChannel(server->address(), foreign)).error_code() ==
            grpc::StatusCode::UNAVAILABLE);
  }
  SECTION("client that trusts another CA does not accept the server") {
    REQUIRE(CheckHealth(TlsChannel(server->address(), pki.Files("b", "mc9", "swm"))).error_code() ==
            grpc::StatusCode::UNAVAILABLE);
  }
  SECTION("plaintext") {
    auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
    REQUIRE(CheckHealth(channel).error_code() == grpc::StatusCode::UNAVAILABLE);
  }
}

TEST_CASE("rotated certificate files take effect without a restart") {
  Pki pki;
  // The server reads its files from a directory we rotate in place.
  fs::path live = pki.dir / "live";
  fs::create_directories(live);
  TlsFiles a = pki.Files("a", "hub", "acm");
  TlsFiles c = pki.Files("c", "hub", "acm");
  TlsFiles files{(live / "ca.crt").string(), (live / "tls.crt").string(),
                 (live / "tls.key").string(), absl::Seconds(1)};
  CopyAtomically(a.ca_file, files.ca_file);
  CopyAtomically(a.cert_file, files.cert_file);
  CopyAtomically(a.key_file, files.key_file);
  auto server = StartTlsServer(files, nullptr);

  REQUIRE(CheckHealth(TlsChannel(server->address(), pki.Files("a", "mc1", "swm"))).ok());
  REQUIRE(CheckHealth(TlsChannel(server->address(), pki.Files("c", "mc2", "netma"))).error_code() ==
          grpc::StatusCode::UNAVAILABLE);

  // Rotate the whole identity to CA "c": key first, then certificate, then CA.
  CopyAtomically(c.key_file, files.key_file);
  CopyAtomically(c.cert_file, files.cert_file);
  CopyAtomically(c.ca_file, files.ca_file);

  // Wait (bounded) for the watcher to pick the files up; each try is a new channel.
  bool rotated = false;
  for (absl::Time end = absl::Now() + absl::Seconds(20); !rotated && absl::Now() < end;) {
    rotated = CheckHealth(TlsChannel(server->address(), pki.Files("c", "mc2", "netma"))).ok();
    if (!rotated) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  REQUIRE(rotated);
  REQUIRE(CheckHealth(TlsChannel(server->address(), pki.Files("a", "mc1", "swm"))).error_code() ==
          grpc::StatusCode::UNAVAILABLE);
}

TEST_CASE("SPIFFE IDs parse strictly") {
  auto id = ParseSpiffeId("spiffe://codeco/cluster/edge-1/netma");
  REQUIRE(id.ok());
  REQUIRE(id->cluster == "edge-1");
  REQUIRE(id->service == "netma");
  REQUIRE(SpiffeId("edge-1", "netma") == "spiffe://codeco/cluster/edge-1/netma");
  REQUIRE_FALSE(ParseSpiffeId("spiffe://other/cluster/a/b").ok());
  REQUIRE_FALSE(ParseSpiffeId("spiffe://codeco/cluster/a").ok());
  REQUIRE_FALSE(ParseSpiffeId("spiffe://codeco/cluster/a/b/c").ok());
  REQUIRE_FALSE(ParseSpiffeId("spiffe://codeco/cluster/A_B/acm").ok());
}

TEST_CASE("TLS file problems are reported by key") {
  TlsFiles missing{"/nonexistent/ca.crt", "", "/nonexistent/key"};
  std::string error(CheckTlsFiles(missing).message());
  REQUIRE_THAT(error, Catch::Contains("tls.ca_file: cannot read /nonexistent/ca.crt"));
  REQUIRE_THAT(error, Catch::Contains("tls.cert_file: required"));
  REQUIRE_THAT(error, Catch::Contains("tls.key_file: cannot read"));
}

}  // namespace
}  // namespace codeco
