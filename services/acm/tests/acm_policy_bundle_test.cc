// codeco-acm with a signed policy bundle (acm.policy_bundle): a CAM no
// region can satisfy is refused naming the policy and the field; a bundle
// update changes the decision without a restart; a bundle with a bad
// signature is refused and the previous one stays in force. And with an
// OPA-compatible webhook (acm.policy_webhook): it refuses or patches specs,
// and without it nothing is admitted.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "acm_test_util.h"
#include "codeco/acm/v1/acm_service.grpc.pb.h"
#include "ed25519_signer.h"
#include "grpcpp/create_channel.h"
#include "process.h"

namespace codeco::acm {
namespace {

namespace fs = std::filesystem;
using codeco::testing::ChildProcess;
using codeco::testing::ReadWholeFile;
using codeco::testing::ScratchDir;
using testing::Ed25519Signer;
using testing::In;

const char* kBundle = R"(apiVersion: codeco.io/v1
kind: PolicyBundle
version: "VERSION"
regions:
  - {name: fr, country: FR}
  - {name: de, country: DE}
  - {name: us-east, country: US}
policies:
  residency:
    rules:
      - name: gdpr
        selector: {codeco.io/data-class: personal}
        countries: [COUNTRIES]
)";

const char* kCam = R"(apiVersion: codeco.io/v1
kind: CodecoApp
metadata:
  name: NAME
  labels: {codeco.io/data-class: personal}
spec:
  appName: NAME
  intents: {allowedCountries: [WHERE]}
  codecoapp-msspec:
    - serviceName: web
      podspec:
        containers: [{name: web, image: "registry.example.org/web:1"}]
)";

std::string Bundle(const std::string& version, const std::string& countries) {
  return absl::StrReplaceAll(kBundle, {{"VERSION", version}, {"COUNTRIES", countries}});
}

std::string Cam(const std::string& name, const std::string& where) {
  return absl::StrReplaceAll(kCam, {{"NAME", name}, {"WHERE", where}});
}

// Writes `bytes` to `path` whole (a rename, so a reader never sees half).
void WriteFile(const fs::path& path, const std::string& bytes) {
  const fs::path tmp = path.string() + ".tmp";
  std::ofstream(tmp, std::ios::binary | std::ios::trunc) << bytes;
  fs::rename(tmp, path);
}

// A hub codeco-acm on the loopback, plaintext, on `dir`/data with the
// `settings` (key=value, each passed with --set); its log is `dir`/acm.log.
struct PlaintextAcm {
  std::unique_ptr<ChildProcess> process;
  std::unique_ptr<v1::AcmService::Stub> stub;

  PlaintextAcm(const fs::path& dir, const std::vector<std::string>& settings) {
    const fs::path log = dir / "acm.log";
    std::vector<std::string> argv = {std::string(CODECO_BIN_DIR) + "/codeco-acm",
                                     "--role",
                                     "hub",
                                     "--insecure",
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--metrics-listen",
                                     "127.0.0.1:0",
                                     "--data-dir",
                                     (dir / "data").string()};
    for (const std::string& s : settings) argv.insert(argv.end(), {"--set", s});
    process = std::make_unique<ChildProcess>(argv, log.string());
    std::optional<std::string> line = process->ReadLine(absl::Now() + absl::Seconds(60));
    INFO("codeco-acm printed: " << line.value_or("<nothing>") << "\n" << ReadWholeFile(log));
    REQUIRE(line.has_value());
    std::smatch m;
    REQUIRE(std::regex_search(*line, m, std::regex("listening on (127\\.0\\.0\\.1:[0-9]+)")));
    stub = v1::AcmService::NewStub(
        grpc::CreateChannel(m[1].str(), grpc::InsecureChannelCredentials()));
  }
};

TEST_CASE("codeco-acm follows its signed policy bundle without a restart") {
  ScratchDir dir("acm-policy");
  Ed25519Signer signer, stranger;
  const fs::path bundle = dir.path / "bundle.yaml";
  const fs::path signature = dir.path / "bundle.yaml.sig";
  const fs::path key = dir.path / "policy.pub";
  WriteFile(key, signer.PublicPem());
  const std::string v1 = Bundle("v1", "DE, FR");
  WriteFile(signature, signer.Sign(v1));
  WriteFile(bundle, v1);

  const fs::path log = dir.path / "acm.log";
  PlaintextAcm running(
      dir.path, {"acm.policy_bundle=" + bundle.string(), "acm.policy_bundle_key=" + key.string(),
                 "acm.policy_reload_interval=100ms"});
  ChildProcess& acm = *running.process;
  auto& stub = running.stub;
  auto apply = [&](const std::string& yaml, v1::ApplyApplicationResponse* response,
                   bool dry_run = false) {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(30)));
    v1::ApplyApplicationRequest request;
    request.set_cam_yaml(yaml);
    request.set_dry_run(dry_run);
    return stub->ApplyApplication(&context, request, response);
  };
  // Waits until the log holds a line with every one of `parts`.
  auto wait_for_log = [&](std::initializer_list<const char*> parts) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      std::istringstream lines(ReadWholeFile(log));
      for (std::string l; std::getline(lines, l);) {
        bool all = true;
        for (const char* p : parts) all = all && absl::StrContains(l, p);
        if (all) return true;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  };

  // v1 in force: personal data stays in DE or FR, and no region is in JP.
  v1::ApplyApplicationResponse response;
  grpc::Status us = apply(Cam("shop", "US"), &response);
  CHECK(us.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(absl::StrContains(us.error_message(),
                          "admission policy \"residency\": spec.intents.allowedCountries[0]: "
                          "\"US\" is outside rule \"gdpr\"'s countries (DE, FR)"));
  grpc::Status japan =
      apply(absl::StrReplaceAll(Cam("sushi", "JP"), {{"personal", "public"}}), &response);
  CHECK(japan.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(absl::StrContains(japan.error_message(),
                          "admission policy \"placeable\": spec.intents.allowedCountries: no "
                          "known region satisfies"));

  // v2 allows US, but signed by a stranger: refused, v1 stays.
  const std::string v2 = Bundle("v2", "DE, FR, US");
  WriteFile(signature, stranger.Sign(v2));
  WriteFile(bundle, v2);
  REQUIRE(wait_for_log({"policy bundle refused", "does not verify", "v1"}));
  CHECK(apply(Cam("shop", "US"), &response).error_code() == grpc::StatusCode::FAILED_PRECONDITION);

  // Signed properly: in force within a reload interval, no restart.
  WriteFile(signature, signer.Sign(v2));
  REQUIRE(wait_for_log({"policy bundle installed", "v2"}));
  grpc::Status allowed = apply(Cam("shop", "US"), &response);
  INFO(allowed.error_message());
  REQUIRE(allowed.ok());
  CHECK(response.created());

  grpc::ClientContext context;
  v1::ListApplicationRevisionsRequest list;
  list.set_name("shop");
  v1::ListApplicationRevisionsResponse revisions;
  REQUIRE(stub->ListApplicationRevisions(&context, list, &revisions).ok());
  REQUIRE(revisions.revisions_size() == 1);
  CHECK(revisions.revisions(0).policy_bundle_version() == "v2");
  CHECK(acm.Stop(SIGTERM, absl::Now() + absl::Seconds(30)).has_value());
}

// An OPA-compatible decision endpoint on the loopback: answers each
// `POST <path>` with what `decide` makes of its body, one connection at a
// time, until destroyed. (OPA itself is not packaged for Debian 12; this
// speaks its Data API, which is all codeco-acm relies on.)
class DecisionEndpoint {
 public:
  using Decide = std::function<std::string(const std::string& path, const std::string& body)>;
  explicit DecisionEndpoint(Decide decide) : decide_(std::move(decide)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(listener_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(::listen(listener_, 16) == 0);
    socklen_t len = sizeof(addr);
    REQUIRE(::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~DecisionEndpoint() {
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

 private:
  void Serve() {
    for (;;) {
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      std::string in;
      char buf[4096];
      size_t header_end = std::string::npos, length = 0;
      while (true) {
        const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
        if (header_end == std::string::npos &&
            (header_end = in.find("\r\n\r\n")) != std::string::npos) {
          std::smatch m;
          const std::string headers = in.substr(0, header_end);
          if (std::regex_search(headers, m,
                                std::regex("Content-Length: *([0-9]+)", std::regex::icase))) {
            length = std::stoul(m[1]);
          }
        }
        if (header_end != std::string::npos && in.size() >= header_end + 4 + length) break;
      }
      const std::string path =
          in.substr(in.find(' ') + 1, in.find(' ', in.find(' ') + 1) - in.find(' ') - 1);
      const std::string body = header_end == std::string::npos ? "" : in.substr(header_end + 4);
      const std::string answer = decide_(path, body);
      const std::string out =
          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
          "Connection: close\r\nContent-Length: " +
          std::to_string(answer.size()) + "\r\n\r\n" + answer;
      (void)!::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
      ::close(fd);
    }
  }

  Decide decide_;
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
};

TEST_CASE("codeco-acm asks an OPA-compatible webhook before its built-in policies") {
  ScratchDir dir("acm-policy");
  // The organisation's policy: no data in the US; a spec without a QoS class
  // gets Silver.
  std::mutex mu;
  std::vector<std::string> paths;
  auto endpoint = std::make_unique<DecisionEndpoint>([&](const std::string& path,
                                                         const std::string& body) {
    {
      std::lock_guard<std::mutex> lock(mu);
      paths.push_back(path);
    }
    const nlohmann::json input = nlohmann::json::parse(body).at("input");
    const nlohmann::json countries = input["spec"]
                                         .value("intents", nlohmann::json::object())
                                         .value("allowedCountries", nlohmann::json::array());
    for (const auto& c : countries) {
      if (c == "US") {
        return nlohmann::json{{"result",
                               {{"allow", false},
                                {"reasons",
                                 {{{"field", "spec.intents.allowedCountries"},
                                   {"message", "US is outside the organisation's countries"}}}}}}}
            .dump();
      }
    }
    nlohmann::json result = {{"allow", true}};
    if (!input["spec"].contains("qosClass")) {
      result["patch"] = {{{"op", "add"}, {"path", "/qosClass"}, {"value", "QOS_CLASS_SILVER"}}};
    }
    return nlohmann::json{{"result", result}}.dump();
  });

  PlaintextAcm running(dir.path, {"acm.policy_webhook=" + endpoint->Url("/v1/data/codeco/admit")});
  ChildProcess& acm = *running.process;
  auto& stub = running.stub;
  auto apply = [&](const std::string& yaml, v1::ApplyApplicationResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(30)));
    v1::ApplyApplicationRequest request;
    request.set_cam_yaml(yaml);
    return stub->ApplyApplication(&context, request, response);
  };

  // Refused by the webhook, naming it and the field.
  v1::ApplyApplicationResponse response;
  grpc::Status us = apply(Cam("shop", "US"), &response);
  CHECK(us.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK_THAT(us.error_message(),
             Catch::Contains("admission policy \"webhook\": spec.intents.allowedCountries: US "
                             "is outside the organisation's countries (decided by http://"));

  // Patched: the change is kept with the revision and told back.
  grpc::Status fr = apply(Cam("shop", "FR"), &response);
  INFO(fr.error_message());
  REQUIRE(fr.ok());
  CHECK(response.application().spec().qos_class() == v1::QOS_CLASS_SILVER);
  bool told = false;
  for (const std::string& w : response.warnings()) told = told || absl::StrContains(w, "/qosClass");
  CHECK(told);
  {
    grpc::ClientContext context;
    v1::ListApplicationRevisionsRequest list;
    list.set_name("shop");
    v1::ListApplicationRevisionsResponse revisions;
    REQUIRE(stub->ListApplicationRevisions(&context, list, &revisions).ok());
    REQUIRE(revisions.revisions_size() == 1);
    CHECK(revisions.revisions(0).admission_patch() ==
          R"([{"op":"add","path":"/qosClass","value":"QOS_CLASS_SILVER"}])");
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    REQUIRE(paths.size() == 2);
    CHECK(paths[0] == "/v1/data/codeco/admit");
  }

  // The webhook gone: no decision, so the apply is refused UNAVAILABLE
  // (retryable) and nothing is stored.
  endpoint.reset();
  grpc::Status gone = apply(Cam("cart", "FR"), &response);
  CHECK(gone.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK_THAT(gone.error_message(),
             Catch::Contains("admission policy \"webhook\": no decision from http://127.0.0.1:"));
  grpc::ClientContext context;
  v1::GetApplicationRequest get;
  get.set_name("cart");
  v1::GetApplicationResponse app;
  CHECK(stub->GetApplication(&context, get, &app).error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(acm.Stop(SIGTERM, absl::Now() + absl::Seconds(30)).has_value());
}

}  // namespace
}  // namespace codeco::acm
