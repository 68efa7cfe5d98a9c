// The CodecoApp shim end to end: the codeco-kubeapps binary between a
// stand-in kube-apiserver (services/kubelms/tests; none can run here) serving
// the CodecoApp custom resources, and a real codeco-acm. The test plays
// kubectl: it creates, patches and deletes CodecoApp objects over the API and
// reads ACM over gRPC.
#include <grpcpp/grpcpp.h>
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "codeco/acm/v1/acm_service.grpc.pb.h"
#include "codeco/kube/http_kube_api.h"
#include "nlohmann/json.hpp"
#include "process.h"
#include "stand_in_kube_apiserver.h"

namespace codeco::kubeapps {
namespace {

namespace fs = std::filesystem;
namespace acm = codeco::acm::v1;
using codeco::testing::ChildProcess;
using codeco::testing::ScratchDir;
using json = nlohmann::json;
using kubelms::testing::StandInKubeApiServer;
using kubelms::testing::StandInOptions;

constexpr char kCodecoApps[] = "/apis/codeco.he-codeco.eu/v1alpha1/namespaces/shop/codecoapps";
constexpr char kExtendedApps[] = "/apis/codeco.io/v1/namespaces/lab/codecoapps";

// A YAML document as kubectl sends it: JSON, with YAML's plain scalars typed.
json YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = YamlToJson(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : node) out.push_back(YamlToJson(item));
      return out;
    }
    case YAML::NodeType::Scalar: {
      const std::string text = node.Scalar();
      if (node.Tag() == "!") return text;  // quoted
      int64_t i = 0;
      double d = 0;
      if (absl::SimpleAtoi(text, &i)) return i;
      if (text == "true" || text == "false") return text == "true";
      if (text.find_first_of("0123456789") == 0 && absl::SimpleAtod(text, &d)) return d;
      return text;
    }
    default:
      return nullptr;
  }
}

json ReadCam(const std::string& file) {
  return YamlToJson(YAML::LoadFile(std::string(CODECO_SOURCE_DIR) + "/examples/cams/" + file));
}

// kubectl: calls to the stand-in as a user would make them.
struct Kubectl {
  explicit Kubectl(const StandInKubeApiServer& server)
      : api(kube::KubeEndpoint{.server = server.Url(), .token = server.Token()}, absl::Minutes(1)) {
  }

  std::pair<long, json> Call(const std::string& method, const std::string& path,
                             const json& body = nullptr) {
    auto answer = api.Call(method, path, body.is_null() ? "" : body.dump(), absl::Seconds(10));
    REQUIRE(answer.ok());
    json parsed = json::parse(answer->body, nullptr, false);
    return {answer->status, parsed};
  }

  kube::HttpKubeApi api;
};

// The shim's log while a test runs (shown when a wait times out).
std::string shim_log;  // NOLINT: test-only global

// Waits until `get` returns a value for which `done` holds, or a minute passes.
json WaitFor(const std::function<json()>& get, const std::function<bool(const json&)>& done,
             const std::string& what) {
  json last;
  for (absl::Time end = absl::Now() + absl::Minutes(1); absl::Now() < end;) {
    last = get();
    if (done(last)) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  INFO("waited for " << what << "; last seen: " << last.dump(2) << "\nthe shim's log:\n"
                     << codeco::testing::ReadWholeFile(shim_log));
  FAIL("timed out");
  return last;
}

// The member at `path` ("status", "conditions", ...) of `object`, or null
// when any step is missing (objects and arrays: a number indexes an array).
json At(const json& object, std::initializer_list<std::string> path) {
  const json* at = &object;
  for (const std::string& step : path) {
    if (at->is_object() && at->contains(step)) {
      at = &(*at)[step];
    } else if (at->is_array() && !step.empty() && std::isdigit(step[0]) &&
               std::stoul(step) < at->size()) {
      at = &(*at)[std::stoul(step)];
    } else {
      return nullptr;
    }
  }
  return *at;
}

int64_t ObservedGeneration(const json& object) {
  const json g = At(object, {"status", "observedGeneration"});
  return g.is_number_integer() ? g.get<int64_t>() : 0;
}

std::string Condition(const json& object, const char* field) {
  const json value = At(object, {"status", "conditions", "0", field});
  return value.is_string() ? value.get<std::string>() : "";
}

// A codeco service binary started on loopback, plaintext.
struct Service {
  Service(const std::string& name, const fs::path& dir, std::vector<std::string> extra) {
    std::vector<std::string> argv = {std::string(CODECO_BIN_DIR) + "/codeco-" + name,
                                     "--role",
                                     "hub",
                                     "--insecure",
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--metrics-listen",
                                     "127.0.0.1:0",
                                     "--data-dir",
                                     (dir / name).string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    log = (dir / (name + ".log")).string();
    process = std::make_unique<ChildProcess>(argv, log);
    std::optional<std::string> line = process->ReadLine(absl::Now() + absl::Seconds(30));
    INFO(name << " printed: " << line.value_or("<nothing>") << "\n"
              << codeco::testing::ReadWholeFile(log));
    REQUIRE(line.has_value());
    std::smatch m;
    REQUIRE(std::regex_search(*line, m, std::regex("listening on (127\\.0\\.0\\.1:[0-9]+)")));
    address = m[1];
  }
  std::unique_ptr<ChildProcess> process;
  std::string address;
  std::string log;
};

// The stand-in, ACM and the shim.
struct Setup {
  // Serves both CodecoApp CRDs unless `only_codeco_io`.
  explicit Setup(bool only_codeco_io = false) : scratch("kubeapps-test") {
    StandInOptions options;
    options.custom_resources = {{"codeco.io", "v1", "codecoapps", "CodecoApp"}};
    if (!only_codeco_io) {
      options.custom_resources.push_back(
          {"codeco.he-codeco.eu", "v1alpha1", "codecoapps", "CodecoApp"});
    }
    kube = std::make_unique<StandInKubeApiServer>(options);
    kubectl = std::make_unique<Kubectl>(*kube);
    kubeconfig = scratch.path / "kubeconfig.yaml";
    std::ofstream(kubeconfig) << "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
                              << "clusters:\n- name: stand-in\n  cluster:\n    server: \""
                              << kube->Url() << "\"\n"
                              << "users:\n- name: shim\n  user:\n    token: " << kube->Token()
                              << "\ncontexts:\n- name: test\n  context:\n    cluster: stand-in\n"
                              << "    user: shim\n";
    acm_service = std::make_unique<Service>("acm", scratch.path, std::vector<std::string>{});
    channel = grpc::CreateChannel(acm_service->address, grpc::InsecureChannelCredentials());
    StartShim();
  }

  void StartShim() {
    shim = std::make_unique<Service>(
        "kubeapps", scratch.path,
        std::vector<std::string>{"--federation.hub_acm", acm_service->address, "--set",
                                 "kube.kubeconfig=" + kubeconfig.string(), "--set",
                                 "kubeapps.status_interval=200ms"});
    shim_log = shim->log;
  }

  json Get(const std::string& collection, const std::string& name) {
    auto [code, object] = kubectl->Call("GET", collection + "/" + name);
    return code == 200 ? object : json();
  }

  std::optional<acm::Application> AcmApp(const std::string& name) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    acm::GetApplicationRequest request;
    request.set_name(name);
    acm::GetApplicationResponse response;
    grpc::Status status =
        acm::AcmService::NewStub(channel)->GetApplication(&context, request, &response);
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) return std::nullopt;
    INFO(status.error_message());
    REQUIRE(status.ok());
    return response.application();
  }

  ScratchDir scratch;
  std::unique_ptr<StandInKubeApiServer> kube;
  std::unique_ptr<Kubectl> kubectl;
  fs::path kubeconfig;
  std::unique_ptr<Service> acm_service;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<Service> shim;
};

TEST_CASE("kubectl apply of bookinfo.yaml reaches ACM and the object's status shows ACM's view") {
  Setup setup;
  json bookinfo = ReadCam("bookinfo.yaml");
  bookinfo["metadata"]["namespace"] = "shop";
  auto [code, created] = setup.kubectl->Call("POST", kCodecoApps, bookinfo);
  INFO(created.dump(2));
  REQUIRE(code == 201);

  // The shim puts its finalizer on, applies, and writes the status.
  json applied = WaitFor([&] { return setup.Get(kCodecoApps, "bookinfo"); },
                         [](const json& o) {
                           return ObservedGeneration(o) == 1 && Condition(o, "reason") == "Applied";
                         },
                         "bookinfo applied");
  CHECK(applied["metadata"]["finalizers"] == json::array({"codeco.io/acm"}));
  CHECK(applied["status"]["application"] == "bookinfo");
  CHECK(Condition(applied, "status") == "True");
  std::optional<acm::Application> app = setup.AcmApp("bookinfo");
  REQUIRE(app.has_value());
  CHECK(app->spec().services_size() == 4);
  CHECK(app->metadata().labels().at("app") == "bookinfo");
  const int64_t first_revision = app->spec_revision();
  CHECK(applied["status"]["specRevision"] == first_revision);
  CHECK(!applied["status"].value("phase", "").empty());

  // A spec change is a new generation and a new spec revision in ACM.
  json patch = {{"spec", {{"qosClass", "Silver"}}}};
  REQUIRE(setup.kubectl->Call("PATCH", std::string(kCodecoApps) + "/bookinfo", patch).first == 200);
  json changed = WaitFor([&] { return setup.Get(kCodecoApps, "bookinfo"); },
                         [](const json& o) {
                           return ObservedGeneration(o) == 2 && Condition(o, "reason") == "Applied";
                         },
                         "generation 2 applied");
  app = setup.AcmApp("bookinfo");
  REQUIRE(app.has_value());
  CHECK(app->spec().qos_class() == acm::QOS_CLASS_SILVER);
  CHECK(app->spec_revision() > first_revision);
  CHECK(changed["status"]["specRevision"] == app->spec_revision());

  // A spec ACM refuses: the status names the field, ACM keeps what it had.
  const int64_t kept_revision = app->spec_revision();
  json bad = {{"spec", {{"qosClass", "Platinum"}}}};
  REQUIRE(setup.kubectl->Call("PATCH", std::string(kCodecoApps) + "/bookinfo", bad).first == 200);
  json refused = WaitFor([&] { return setup.Get(kCodecoApps, "bookinfo"); },
                         [](const json& o) {
                           return ObservedGeneration(o) == 3 && Condition(o, "reason") == "Invalid";
                         },
                         "generation 3 refused");
  CHECK(Condition(refused, "status") == "False");
  CHECK_THAT(Condition(refused, "message"), Catch::Contains("qosClass"));
  CHECK(setup.AcmApp("bookinfo")->spec_revision() == kept_revision);

  // kubectl delete: the services leave ACM, then the finalizer, then the object.
  REQUIRE(setup.kubectl->Call("DELETE", std::string(kCodecoApps) + "/bookinfo").first == 200);
  WaitFor([&] { return setup.Get(kCodecoApps, "bookinfo"); },
          [](const json& o) { return o.is_null(); }, "bookinfo gone");
  WaitFor([&] { return json(setup.AcmApp("bookinfo").has_value()); },
          [](const json& present) { return present == false; }, "bookinfo gone from ACM");
}

TEST_CASE("the shim picks up after a SIGKILL and a name already forwarded is refused") {
  Setup setup;
  json shop = ReadCam("shop-extended.yaml");
  shop["metadata"]["namespace"] = "lab";
  const std::string name = shop["metadata"]["name"];
  REQUIRE(setup.kubectl->Call("POST", kExtendedApps, shop).first == 201);
  WaitFor([&] { return setup.Get(kExtendedApps, name); },
          [](const json& o) { return Condition(o, "reason") == "Applied"; }, "applied");

  // The same name in another namespace and resource: not forwarded.
  json twin = ReadCam("bookinfo.yaml");
  twin["metadata"]["name"] = name;
  twin["metadata"]["namespace"] = "shop";
  twin["spec"]["appName"] = "twin";
  REQUIRE(setup.kubectl->Call("POST", kCodecoApps, twin).first == 201);
  json conflict = WaitFor([&] { return setup.Get(kCodecoApps, name); },
                          [](const json& o) { return Condition(o, "reason") == "NameConflict"; },
                          "the twin refused");
  CHECK_THAT(Condition(conflict, "message"), Catch::Contains("metadata.name"));
  CHECK(!setup.AcmApp("twin").has_value());

  // Killed, changes made meanwhile, restarted: the shim catches up.
  REQUIRE(setup.shim->process->Stop(SIGKILL, absl::Now() + absl::Seconds(10)).has_value());
  json patch = {{"spec", {{"qosClass", "Gold"}}}};
  REQUIRE(setup.kubectl->Call("PATCH", std::string(kExtendedApps) + "/" + name, patch).first ==
          200);
  json second = ReadCam("front-back.yaml");
  second["metadata"]["namespace"] = "lab";
  const std::string second_name = second["metadata"]["name"];
  REQUIRE(setup.kubectl->Call("POST", kExtendedApps, second).first == 201);
  setup.StartShim();
  WaitFor([&] { return setup.Get(kExtendedApps, name); },
          [](const json& o) {
            return ObservedGeneration(o) == 2 && Condition(o, "reason") == "Applied";
          },
          "the change made while the shim was down applied");
  WaitFor([&] { return setup.Get(kExtendedApps, second_name); },
          [](const json& o) { return Condition(o, "reason") == "Applied"; },
          "the object created while the shim was down applied");
  std::optional<acm::Application> shop_app = setup.AcmApp(name);
  REQUIRE(shop_app.has_value());
  CHECK(shop_app->spec().qos_class() == acm::QOS_CLASS_GOLD);
  // The restart did not hand the name to the younger twin.
  CHECK(Condition(setup.Get(kCodecoApps, name), "reason") == "NameConflict");
  CHECK(!setup.AcmApp("twin").has_value());

  // The older object goes; the twin gets the name.
  REQUIRE(setup.kubectl->Call("DELETE", std::string(kExtendedApps) + "/" + name).first == 200);
  WaitFor([&] { return setup.Get(kCodecoApps, name); },
          [](const json& o) { return Condition(o, "reason") == "Applied"; },
          "the twin forwarded once the name is free");
  CHECK(setup.AcmApp("twin").has_value());
}

TEST_CASE("a CRD that is not installed does not hold the others back") {
  Setup setup(/*only_codeco_io=*/true);
  json app = ReadCam("front-back.yaml");
  app["metadata"]["namespace"] = "lab";
  REQUIRE(setup.kubectl->Call("POST", kExtendedApps, app).first == 201);
  WaitFor([&] { return setup.Get(kExtendedApps, "front-back"); },
          [](const json& o) { return Condition(o, "reason") == "Applied"; }, "applied");
  CHECK(setup.AcmApp("front-back").has_value());
  CHECK_THAT(codeco::testing::ReadWholeFile(setup.shim->log),
             Catch::Contains("codeco.he-codeco.eu/v1alpha1/codecoapps"));
}

}  // namespace
}  // namespace codeco::kubeapps
