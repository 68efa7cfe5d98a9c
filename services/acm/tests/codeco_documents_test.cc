// CodecoApp documents as CODECO's team writes them (examples/cams/codeco/):
// the parser takes them unchanged and gives them CODECO's meaning, and several
// CodecoApps with one appName make one application.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "acm/core/application_manager.h"
#include "acm/core/cam_parser.h"
#include "acm/core/codeco_app_merge.h"
#include "acm/store/kv_application_store.h"
#include "codeco/common/clock.h"
#include "codeco/common/kv_store.h"
#include "google/protobuf/util/message_differencer.h"

namespace codeco::acm {
namespace {

namespace fs = std::filesystem;
using v1::ApplicationSpec;

std::string ReadExample(const std::string& name) {
  std::ifstream in(fs::path(ACM_EXAMPLES_DIR) / "codeco" / name);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The CodecoApp documents of a multi-document file, in order.
std::vector<std::string> CodecoApps(const std::string& file) {
  std::vector<std::string> out;
  for (absl::string_view doc : absl::StrSplit(ReadExample(file), "\n---\n")) {
    if (absl::StrContains(doc, "kind: CodecoApp")) out.emplace_back(doc);
  }
  return out;
}

ParsedCam Parse(const std::string& yaml) {
  absl::StatusOr<ParsedCam> cam = ParseCam(yaml);
  INFO(cam.status().ToString());
  REQUIRE(cam.ok());
  return *std::move(cam);
}

const v1::ServiceSpec& Service(const ApplicationSpec& spec, const std::string& name) {
  for (const auto& s : spec.services()) {
    if (s.name() == name) return s;
  }
  FAIL("no service " << name);
  return spec.services(0);
}

// True if some warning starts with `path` + ": ".
bool Warned(const std::vector<std::string>& warnings, const std::string& path) {
  for (const std::string& w : warnings) {
    if (absl::StartsWith(w, path + ": ")) return true;
  }
  return false;
}

TEST_CASE("every CodecoApp of examples/cams/codeco parses unchanged") {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(ACM_EXAMPLES_DIR) / "codeco")) {
    if (entry.path().extension() != ".yaml") continue;
    for (const std::string& doc : CodecoApps(entry.path().filename().string())) {
      INFO(entry.path());
      ParsedCam cam = Parse(doc);
      REQUIRE(ValidateApplicationSpec(cam.spec).ok());
      ++count;
    }
  }
  REQUIRE(count >= 6);
}

TEST_CASE("codeco bookinfo: its own name and appName and CODECO's units and defaults") {
  ParsedCam cam = Parse(CodecoApps("bookinfo-fair.yaml").at(0));
  const ApplicationSpec& spec = cam.spec;
  REQUIRE(cam.codeco_app == "codecoapp-bookinfo-fair");
  REQUIRE(spec.app_name() == "bookinfo-fair-app");
  REQUIRE(spec.qos_class() == v1::QOS_CLASS_BEST_EFFORT);
  REQUIRE(spec.security_class() == "Good");
  REQUIRE(spec.compliance_class() == "High");
  REQUIRE(spec.app_failure_tolerance().empty());  // "" is CODECO's "not set"
  REQUIRE(spec.performance_profile() == common::v1::PERFORMANCE_PROFILE_GREENNESS);
  REQUIRE(spec.services_size() == 6);
  for (const auto& s : spec.services()) REQUIRE(s.codeco_app() == "codecoapp-bookinfo-fair");
  // limits without requests: requests = limits, as Kubernetes does.
  const v1::ServiceSpec& details = Service(spec, "details");
  REQUIRE(details.requests().cpu_millicores() == 1000);
  REQUIRE(details.requests().memory_bytes() == 2LL << 30);
  // ASSURED with only maxDelay "10s": accepted, no bandwidth, said so.
  REQUIRE(details.channels(0).service_class() == common::v1::SERVICE_CLASS_ASSURED);
  REQUIRE(details.channels(0).max_delay_ns() == 10'000'000'000LL);
  REQUIRE(details.channels(0).min_bandwidth_bps() == 0);
  REQUIRE(Warned(cam.warnings, "spec.codecoapp-msspec[0].serviceChannels[0].serviceClass"));
  // One channelName in three services: legal, the name is per service.
  for (const char* reviews : {"reviews-v1", "reviews-v2", "reviews-v3"}) {
    REQUIRE(Service(spec, reviews).channels(0).name() == "ratings");
  }
  REQUIRE(Warned(cam.warnings, "metadata.namespace"));
  REQUIRE(Warned(cam.warnings, "spec.codecoapp-msspec[0].podspec.schedulerName"));
  REQUIRE(Warned(cam.warnings, "spec.qosClass"));
  REQUIRE_FALSE(Warned(cam.warnings, "spec.appFailureTolerance"));  // empty: nothing to say

  // As SWM is asked: channel names unique in the application.
  ApplicationSpec placed = SchedulableSpec(spec);
  std::set<std::string> names;
  for (const auto& s : placed.services()) {
    for (const auto& ch : s.channels()) REQUIRE(names.insert(ch.name()).second);
  }
  REQUIRE(names.count("reviews-v2-ratings") == 1);
  REQUIRE(names.count("details") == 1);  // used once: kept as written
}

TEST_CASE("codeco quantities: maxDelay and sendInterval in seconds and the 10 ms cap") {
  ParsedCam cam = Parse(CodecoApps("dummy-backend-frontends.yaml").at(1));
  const v1::Channel& ch = Service(cam.spec, "backend-1-1").channels(0);
  REQUIRE(ch.max_delay_ns() == 300'000LL * 1'000'000'000);  // "300000" seconds
  REQUIRE(ch.min_bandwidth_bps() == 5);                      // "5" bit/s
  REQUIRE(ch.frame_size_bytes() == 100);                     // "100" bytes
  REQUIRE(ch.send_interval_ns() == 10'000'000);              // "10" s, capped at 10 ms
  REQUIRE(ch.to_port() == 9090);
  REQUIRE(Warned(cam.warnings,
                 "spec.codecoapp-msspec[0].serviceChannels[0].advancedChannelSettings.sendInterval"));
  // 100 bytes every 10 ms is 80 kbit/s: what placement reserves.
  ApplicationSpec with_target = cam.spec;
  v1::ServiceSpec* shared = with_target.add_services();
  shared->set_name("front-end-shared-1-1");
  REQUIRE(SchedulableSpec(with_target).services(0).channels(0).min_bandwidth_bps() == 80'000);
  // Only minBandwidth: CODECO's default frame of 500 bytes.
  ParsedCam bw = Parse(absl::StrReplaceAll(CodecoApps("dummy-backend-frontends.yaml").at(1),
                                           {{"        frameSize: \"100\"\n", ""},
                                            {"        sendInterval: \"10\"\n", ""}}));
  REQUIRE(Service(bw.spec, "backend-1-1").channels(0).frame_size_bytes() == 500);
  REQUIRE(Service(bw.spec, "backend-1-1").channels(0).send_interval_ns() == 0);
}

TEST_CASE("codeco perfapp: kubectl metadata and another appName and bandwidth are explained") {
  ParsedCam cam = Parse(CodecoApps("perfapp-postgres.yaml").at(0));
  REQUIRE(cam.spec.app_name() == "perfapp-pg-swmapp");
  for (const char* key : {"metadata.generation", "metadata.resourceVersion", "metadata.uid",
                          "metadata.namespace"}) {
    INFO(key);
    REQUIRE(Warned(cam.warnings, key));
  }
  const std::string c0 = "spec.codecoapp-msspec[0].serviceChannels[0]";
  REQUIRE(Warned(cam.warnings, c0 + ".otherService.appName"));
  REQUIRE(Warned(cam.warnings, c0 + ".advancedChannelSettings.bandwidth"));
  REQUIRE(Warned(cam.warnings, "spec.codecoapp-msspec[1].podspec.containers[0].readinessProbe"));
  // The channel leads to the service of this application.
  REQUIRE(Service(cam.spec, "postgres-test").channels(0).to_service() == "perfapp-test");
  REQUIRE(Service(cam.spec, "postgres-test").channels(0).min_bandwidth_bps() == 0);
}

TEST_CASE("codeco skupper: a port the target does not expose is kept with a warning") {
  ParsedCam cam = Parse(CodecoApps("skupper-hello.yaml").at(0));
  REQUIRE(Warned(cam.warnings, "spec.codecoapp-msspec[0].serviceChannels[0].otherService.port"));
  REQUIRE(Service(cam.spec, "backend").channels(0).to_port() == 9090);
  REQUIRE(Service(cam.spec, "front-end").channels(0).max_delay_ns() == 1'000'000'000);
}

TEST_CASE("codeco pause pod: a channel to its own service and a nanosecond bound") {
  // As CODECO's pod start-up experiment writes one CodecoApp per pause pod
  // (gkoukis/CODECO-paper-kp1.1-2, custom-startup-times): ASSURED, "bandwidth"
  // rather than minBandwidth, maxDelay "1ns", the channel back to itself.
  ParsedCam cam = Parse(R"(apiVersion: codeco.he-codeco.eu/v1alpha1
kind: CodecoApp
metadata:
  name: pause-pod-1-1
  namespace: pause-ns
spec:
  appName: acm-swm-app
  performanceProfile: Greenness
  appEnergyLimit: "20"
  appFailureTolerance: ""
  codecoapp-msspec:
  - podspec:
      schedulerName: qos-scheduler
      containers:
      - name: pause
        image: k8s.gcr.io/pause:3.1
        ports:
        - containerPort: 8080
          protocol: TCP
    serviceName: pause-service
    serviceChannels:
    - channelName: pause-channel
      serviceClass: ASSURED
      advancedChannelSettings:
        bandwidth: "5M"
        #frameSize: "100"
        maxDelay: "1ns"
        #sendInterval: "10"
      otherService:
        appName: acm-swm-app
        serviceName: pause-service
        port: 8080
  complianceClass: High
  qosClass: Gold
  securityClass: Good
)");
  const v1::Channel& ch = cam.spec.services(0).channels(0);
  REQUIRE(ch.to_service() == "pause-service");
  REQUIRE(ch.max_delay_ns() == 1);
  REQUIRE(ch.min_bandwidth_bps() == 0);  // "bandwidth" asks for nothing, as in CODECO
  REQUIRE(Warned(cam.warnings,
                 "spec.codecoapp-msspec[0].serviceChannels[0].advancedChannelSettings.bandwidth"));
  REQUIRE(Warned(cam.warnings, "spec.codecoapp-msspec[0].serviceChannels[0].serviceClass"));
  REQUIRE(PendingChannels(cam.spec).empty());
  REQUIRE(SchedulableSpec(cam.spec).services(0).channels_size() == 1);
}

// A minimal CodecoApp; REPLACE pairs edit it.
std::string Small(std::vector<std::pair<std::string, std::string>> edits = {}) {
  return absl::StrReplaceAll(R"(apiVersion: codeco.he-codeco.eu/v1alpha1
kind: CodecoApp
metadata:
  name: part
spec:
  appName: app
  qosClass: Gold
  securityClass: Good
  complianceClass: High
  appFailureTolerance: High
  codecoapp-msspec:
  - serviceName: a
    podspec:
      containers:
      - name: a
        image: registry.example.org/a:1
)",
                             edits);
}

TEST_CASE("codeco enumerations take CODECO's values and refuse others with the path") {
  for (const char* q : {"Gold", "Silver", "BestEffort"}) {
    REQUIRE(ParseCam(Small({{"qosClass: Gold", std::string("qosClass: ") + q}})).ok());
  }
  for (const char* s : {"High", "Good", "Medium", "Low", "None", "\"\""}) {
    REQUIRE(ParseCam(Small({{"securityClass: Good", std::string("securityClass: ") + s}})).ok());
  }
  for (const char* c : {"High", "Medium", "Low", "\"\""}) {
    REQUIRE(ParseCam(Small({{"complianceClass: High", std::string("complianceClass: ") + c}}))
                .ok());
    REQUIRE(ParseCam(Small({{"appFailureTolerance: High",
                             std::string("appFailureTolerance: ") + c}}))
                .ok());
  }
  struct Bad {
    std::string from, to, path;
  };
  for (const Bad& bad : std::vector<Bad>{
           {"qosClass: Gold", "qosClass: gold", "spec.qosClass"},
           {"qosClass: Gold", "qosClass: Bronze", "spec.qosClass"},
           {"securityClass: Good", "securityClass: high", "spec.securityClass"},
           {"complianceClass: High", "complianceClass: gdpr", "spec.complianceClass"},
           {"appFailureTolerance: High", "appFailureTolerance: None", "spec.appFailureTolerance"},
       }) {
    absl::StatusOr<ParsedCam> cam = ParseCam(Small({{bad.from, bad.to}}));
    INFO(bad.to);
    REQUIRE(cam.status().code() == absl::StatusCode::kInvalidArgument);
    REQUIRE(absl::StartsWith(cam.status().message(), bad.path + ": must be "));
  }
  // codeco.io/v1 also takes a regulation name for complianceClass.
  REQUIRE(ParseCam(Small({{"codeco.he-codeco.eu/v1alpha1", "codeco.io/v1"},
                          {"complianceClass: High", "complianceClass: gdpr"}}))
              .ok());
}

TEST_CASE("codeco appName: optional and not tied to metadata.name") {
  ParsedCam none = Parse(Small({{"  appName: app\n", ""}}));
  REQUIRE(none.spec.app_name() == "part");  // an application of its own
  ParsedCam empty = Parse(Small({{"appName: app", "appName: \"\""}}));
  REQUIRE(empty.spec.app_name() == "part");
  ParsedCam other = Parse(Small());
  REQUIRE(other.spec.app_name() == "app");
  REQUIRE(other.codeco_app == "part");
}

TEST_CASE("codeco channels: optional name and own service and targets elsewhere") {
  ParsedCam cam = Parse(Small({{"        image: registry.example.org/a:1\n",
                                "        image: registry.example.org/a:1\n"
                                "    serviceChannels:\n"
                                "    - otherService: {serviceName: b}\n"
                                "    - otherService: {serviceName: b, port: 80}\n"
                                "    - otherService: {serviceName: a}\n"}}));
  const v1::ServiceSpec& a = cam.spec.services(0);
  REQUIRE(a.channels_size() == 3);
  REQUIRE(a.channels(0).name() == "b");  // named after the target
  REQUIRE(a.channels(1).name() == "b-2");
  REQUIRE(a.channels(0).to_port() == 0);  // not given
  REQUIRE(a.channels(2).to_service() == "a");  // to its own service: replicas talk
  REQUIRE(ValidateApplicationSpec(cam.spec).ok());
  // "b" is declared nowhere: pending, and left out of what SWM is asked.
  REQUIRE(PendingChannels(cam.spec) == std::vector<std::string>{"a/b -> b", "a/b-2 -> b"});
  REQUIRE(SchedulableSpec(cam.spec).services(0).channels_size() == 1);
}

TEST_CASE("codeco merge: several CodecoApps make one application with channels across them") {
  std::vector<std::string> docs = CodecoApps("dummy-backend-frontends.yaml");
  REQUIRE(docs.size() == 3);
  ParsedCam front1 = Parse(docs[0]), back = Parse(docs[1]), front2 = Parse(docs[2]);

  // The first frontend arrives alone: its channel to the backend waits.
  absl::StatusOr<MergedSpec> m1 = MergeCodecoApp(nullptr, front1);
  REQUIRE(m1.ok());
  REQUIRE(m1->spec.app_name() == "dummy-swm-app");
  REQUIRE(Warned(m1->warnings,
                 "spec.codecoapp-msspec[0].serviceChannels[0].otherService.serviceName"));
  REQUIRE(SchedulableSpec(m1->spec).services(0).channels_size() == 0);

  // The backend joins: the frontend's channel takes effect; the backend's
  // own channel to a frontend no CodecoApp declares waits.
  absl::StatusOr<MergedSpec> m2 = MergeCodecoApp(&m1->spec, back);
  REQUIRE(m2.ok());
  REQUIRE(m2->spec.services_size() == 2);
  REQUIRE(SchedulableSpec(m2->spec).services(0).channels_size() == 1);
  REQUIRE(PendingChannels(m2->spec) ==
          std::vector<std::string>{"backend-1-1/frontend -> front-end-shared-1-1"});

  absl::StatusOr<MergedSpec> m3 = MergeCodecoApp(&m2->spec, front2);
  REQUIRE(m3.ok());
  REQUIRE(m3->spec.services_size() == 3);
  std::vector<std::string> owners;
  for (const auto& s : m3->spec.services()) owners.push_back(s.codeco_app());
  REQUIRE(owners == std::vector<std::string>{"acm-frontend-1-1-1", "acm-backend-1-1",
                                             "acm-frontend-1-1-2"});

  // Applying one again changes nothing; changing it replaces its services in place.
  absl::StatusOr<MergedSpec> again = MergeCodecoApp(&m3->spec, front1);
  REQUIRE(again.ok());
  REQUIRE(google::protobuf::util::MessageDifferencer::Equals(again->spec, m3->spec));
  ParsedCam renamed = Parse(absl::StrReplaceAll(
      docs[0], {{"serviceName: front-end-1-1-1", "serviceName: front-end-one"}}));
  absl::StatusOr<MergedSpec> replaced = MergeCodecoApp(&m3->spec, renamed);
  REQUIRE(replaced.ok());
  REQUIRE(replaced->spec.services(0).name() == "front-end-one");
  REQUIRE(replaced->spec.services_size() == 3);

  // A service of another CodecoApp cannot be declared again.
  ParsedCam thief = Parse(absl::StrReplaceAll(
      docs[2], {{"name: acm-frontend-1-1-2", "name: thief"}}));
  absl::StatusOr<MergedSpec> stolen = MergeCodecoApp(&m3->spec, thief);
  REQUIRE(stolen.status().code() == absl::StatusCode::kInvalidArgument);
  REQUIRE(absl::StartsWith(stolen.status().message(), "spec.codecoapp-msspec[0].serviceName: "));

  // Removing the backend leaves the frontends, their channels waiting again.
  absl::StatusOr<MergedSpec> rest = RemoveCodecoApp(m3->spec, "acm-backend-1-1");
  REQUIRE(rest.ok());
  REQUIRE(rest->spec.services_size() == 2);
  REQUIRE(rest->warnings.size() == 2);
  REQUIRE(RemoveCodecoApp(rest->spec, "acm-backend-1-1").status().code() ==
          absl::StatusCode::kNotFound);
}

struct Fixture {
  std::unique_ptr<KvStore> kv = NewInMemoryKvStore(ApplicationColumnFamilies());
  KvApplicationStore store{*kv, {.max_events = 1000}};
  InMemoryPlacementScheduler scheduler;
  SimulatedClock clock{absl::FromUnixSeconds(1'800'000'000)};
  ApplicationManager manager{store, scheduler, clock};

  v1::ApplyApplicationResponse Apply(const std::string& yaml) {
    v1::ApplyApplicationRequest request;
    request.set_cam_yaml(yaml);
    absl::StatusOr<v1::ApplyApplicationResponse> response = manager.Apply(request);
    INFO(response.status().ToString());
    REQUIRE(response.ok());
    return *response;
  }
};

TEST_CASE("codeco apply: CodecoApps join their application and delete takes one out") {
  Fixture f;
  std::vector<std::string> docs = CodecoApps("dummy-backend-frontends.yaml");
  v1::ApplyApplicationResponse first = f.Apply(docs[0]);
  REQUIRE(first.created());
  REQUIRE(first.application().metadata().name() == "dummy-swm-app");
  bool waits = false;
  for (const auto& w : first.warnings()) waits |= absl::StrContains(w, "waits, unplaced");
  REQUIRE(waits);
  // The scheduler is asked without the pending channel.
  REQUIRE(f.scheduler.requests().back().spec().services(0).channels_size() == 0);

  v1::ApplyApplicationResponse second = f.Apply(docs[1]);
  REQUIRE_FALSE(second.created());
  REQUIRE(second.application().spec_revision() == 2);
  REQUIRE(second.application().spec().services_size() == 2);
  const v1::Application sent = f.scheduler.requests().back();
  REQUIRE(sent.spec().services(0).channels_size() == 1);  // front-end -> backend now placed
  REQUIRE(sent.spec().services(1).channels_size() == 0);  // backend -> shared frontend waits
  REQUIRE(f.Apply(docs[2]).application().spec().services_size() == 3);
  // Labels of sibling CodecoApps add up.
  REQUIRE(f.Apply(docs[2]).application().metadata().labels().at("run") == "1");

  // Deleting one CodecoApp removes its services only: a new spec revision.
  v1::DeleteApplicationRequest del;
  del.set_name("dummy-swm-app");
  del.set_codeco_app("acm-frontend-1-1-1");
  REQUIRE(f.manager.Delete(del).ok());
  v1::GetApplicationRequest get;
  get.set_name("dummy-swm-app");
  absl::StatusOr<v1::GetApplicationResponse> got = f.manager.Get(get);
  REQUIRE(got.ok());
  REQUIRE(got->application().spec().services_size() == 2);
  REQUIRE(got->application().spec_revision() == 4);
  REQUIRE(got->application().status().phase() == v1::APPLICATION_PHASE_PENDING);
  REQUIRE(f.scheduler.releases().empty());
  // An unknown CodecoApp: NOT_FOUND.
  del.set_codeco_app("nobody");
  REQUIRE(f.manager.Delete(del).status().code() == absl::StatusCode::kNotFound);
  // The last CodecoApps going take the application with them.
  del.set_codeco_app("acm-backend-1-1");
  REQUIRE(f.manager.Delete(del).ok());
  del.set_codeco_app("acm-frontend-1-1-2");
  REQUIRE(f.manager.Delete(del).ok());
  REQUIRE(f.scheduler.releases().size() == 1);
}

TEST_CASE("codeco apply: rollback restores the whole application and not one CodecoApp") {
  Fixture f;
  std::vector<std::string> docs = CodecoApps("dummy-backend-frontends.yaml");
  f.Apply(docs[0]);
  f.Apply(docs[1]);
  f.Apply(docs[2]);
  v1::RollbackApplicationRequest rollback;
  rollback.set_name("dummy-swm-app");
  rollback.set_to_spec_revision(2);
  absl::StatusOr<v1::RollbackApplicationResponse> r = f.manager.Rollback(rollback);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  REQUIRE(r->application().spec().services_size() == 2);
  REQUIRE(r->application().cam_yaml() == docs[1]);
}

}  // namespace
}  // namespace codeco::acm
