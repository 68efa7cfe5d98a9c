// Every CAM field that is accepted but does not take effect yet comes back as
// a warning naming its path; fields that take effect give none.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/str_replace.h"
#include "acm/core/cam_parser.h"

namespace codeco::acm {
namespace {

namespace fs = std::filesystem;

// The paths the warnings of `yaml` name (the text before the first ": ").
std::set<std::string> WarnedPaths(const std::string& yaml) {
  absl::StatusOr<ParsedCam> cam = ParseCam(yaml);
  INFO(cam.status().ToString());
  REQUIRE(cam.ok());
  std::set<std::string> paths;
  for (const std::string& w : cam->warnings) {
    REQUIRE(w.find("not acted on yet") != std::string::npos);
    paths.insert(w.substr(0, w.find(": ")));
  }
  return paths;
}

// A codeco.io/v1 CAM using only fields that take effect; EXTRA is spliced
// into the spec, SERVICE into the first service, CHANNEL into its channel,
// CONTAINER into its container and POD into its pod spec.
std::string EffectiveCam(const std::string& extra = "", const std::string& service = "",
                         const std::string& channel = "", const std::string& container = "",
                         const std::string& pod = "") {
  return absl::StrReplaceAll(R"(apiVersion: codeco.io/v1
kind: CodecoApp
metadata:
  name: app
  labels: {team: a}
spec:
  appName: app
  securityClass: High
  complianceClass: gdpr
  performanceProfile: custom
  customProfileWeights: {latency: 2}
  intents:
    allowedRegions: [eu-west]
    allowedCountries: [DE]
    origin: c1
    maxLatencyToOrigin: 30ms
  placement:
    policy: cluster-affinity
    preferredClusters: [c1]
EXTRA
  codecoapp-msspec:
    - serviceName: web
      replicas: 2
      availability: 99
      dataLocality: eu-west
SERVICE
      podspec:
POD
        containers:
          - name: web
            image: registry.example.org/web:1
            command: [/web]
            args: [--port, "8080"]
            env: [{name: A, value: b}]
CONTAINER
            ports:
              - containerPort: 8080
            resources:
              requests: {cpu: 500m, memory: 512Mi, nvidia.com/gpu: 1}
              limits: {cpu: "1", memory: 1Gi}
      serviceChannels:
        - channelName: web-db
          otherService: {appName: app, serviceName: db, port: 5432}
          serviceClass: ASSURED
          advancedChannelSettings:
            minBandwidth: 100Mbps
            maxDelay: 5ms
CHANNEL
    - serviceName: db
      podspec:
        containers:
          - name: db
            image: registry.example.org/db:1
            ports:
              - containerPort: 5432
      requests: {cpu: "2", memory: 4Gi}
)",
                             {{"EXTRA\n", extra},
                              {"SERVICE\n", service},
                              {"CHANNEL\n", channel},
                              {"CONTAINER\n", container},
                              {"POD\n", pod}});
}

TEST_CASE("warnings: fields that take effect give none") {
  REQUIRE(WarnedPaths(EffectiveCam()).empty());
}

TEST_CASE("warnings: application-level fields not acted on") {
  REQUIRE(WarnedPaths(EffectiveCam("  qosClass: Gold\n  appEnergyLimit: 20%\n"
                                   "  appFailureTolerance: Low\n")) ==
          std::set<std::string>{"spec.qosClass", "spec.appEnergyLimit",
                                "spec.appFailureTolerance"});
}

TEST_CASE("warnings: intents and placement fields not acted on") {
  std::string cam = absl::StrReplaceAll(
      EffectiveCam(), {{"    maxLatencyToOrigin: 30ms\n",
                        "    maxLatencyToOrigin: 30ms\n    deadline: \"2026-12-01T08:00:00Z\"\n"},
                       {"    preferredClusters: [c1]\n",
                        "    preferredClusters: [c1]\n    numberOfLocations: 2\n"
                        "    bursting: true\n    substitution: false\n"}});
  // numberOfLocations and bursting take effect (SWM spreads and bursts).
  REQUIRE(WarnedPaths(cam) ==
          std::set<std::string>{"spec.intents.deadline", "spec.placement.substitution"});
  // Bursting goes beyond numberOfLocations: without it, it does nothing.
  std::string alone = absl::StrReplaceAll(
      EffectiveCam(),
      {{"    preferredClusters: [c1]\n", "    preferredClusters: [c1]\n    bursting: true\n"}});
  REQUIRE(WarnedPaths(alone) == std::set<std::string>{"spec.placement.bursting"});
}

TEST_CASE("warnings: service fields not acted on (stateful and autoscaling are)") {
  const std::string p = "spec.codecoapp-msspec[0]";
  REQUIRE(WarnedPaths(EffectiveCam("",
                                   "      stateful: true\n"
                                   "      nodeSelector: {disk: ssd}\n"
                                   "      nwbandwidth: \"10\"\n"
                                   "      nwlatency: \"5\"\n"
                                   "      autoscaling: {minReplicas: 1, maxReplicas: 4}\n")) ==
          std::set<std::string>{p + ".nodeSelector", p + ".nwbandwidth", p + ".nwlatency"});
  // The autoscaler scales on CPU over requests: none, no autoscaling.
  const std::string no_requests = absl::StrReplaceAll(
      EffectiveCam("", "      autoscaling: {minReplicas: 1, maxReplicas: 4}\n"),
      {{"              requests: {cpu: 500m, memory: 512Mi, nvidia.com/gpu: 1}\n",
        "              requests: {memory: 512Mi}\n"}});
  REQUIRE(WarnedPaths(no_requests) == std::set<std::string>{p + ".autoscaling"});
}

TEST_CASE("warnings: frameSize and sendInterval take effect") {
  // Together they ask for bandwidth (frameSize every sendInterval), so they
  // are acted on: no warning (SchedulableSpec, codeco_documents_test).
  REQUIRE(WarnedPaths(EffectiveCam("", "", "            frameSize: 1Ki\n"
                                           "            sendInterval: 10ms\n"))
              .empty());
}

TEST_CASE("warnings: pod spec and container fields not read") {
  const std::string pod = "spec.codecoapp-msspec[0].podspec";
  std::string cam = EffectiveCam("", "", "", "            volumeMounts: [{name: v, mountPath: /v}]\n",
                                 "        volumes: [{name: v}]\n");
  cam = absl::StrReplaceAll(
      cam, {{"              limits: {cpu: \"1\", memory: 1Gi}\n",
             "              limits: {cpu: \"1\", memory: 1Gi}\n"
             "          - name: sidecar\n"
             "            image: registry.example.org/sidecar:1\n"
             "            resources:\n"
             "              requests: {cpu: 100m, ephemeral-storage: 1Gi}\n"}});
  REQUIRE(WarnedPaths(cam) ==
          std::set<std::string>{pod + ".volumes", pod + ".containers[0].volumeMounts",
                                pod + ".containers[1].image",
                                pod + ".containers[1].resources.requests.ephemeral-storage"});
}

TEST_CASE("warnings: metadata annotations") {
  std::string cam = absl::StrReplaceAll(
      EffectiveCam(), {{"  labels: {team: a}\n", "  labels: {team: a}\n  annotations: {x: y}\n"}});
  REQUIRE(WarnedPaths(cam) == std::set<std::string>{"metadata.annotations"});
}

TEST_CASE("warnings: mck8s fields not acted on") {
  const std::string mcd = R"(apiVersion: fogguru.eu/v1
kind: MultiClusterDeployment
metadata:
  name: web
spec:
  placementPolicy: worst-fit
  numberOfLocations: 2
  enableBursting: true
  burstingPolicy: nearest-first
  enableSubstitution: true
  substitutionPolicy: nearest-first
  selector: {matchLabels: {app: web}}
  replicas: 3
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: registry.example.org/web:1
)";
  REQUIRE(WarnedPaths(mcd) == std::set<std::string>{"spec.enableSubstitution",
                                                    "spec.substitutionPolicy", "spec.selector"});
  REQUIRE(WarnedPaths(absl::StrReplaceAll(mcd, {{"  numberOfLocations: 2\n", ""}})) ==
          std::set<std::string>{"spec.enableBursting", "spec.burstingPolicy",
                                "spec.enableSubstitution", "spec.substitutionPolicy",
                                "spec.selector"});
}

TEST_CASE("warnings: the extended example names what it asks for in vain") {
  std::ifstream in(fs::path(ACM_EXAMPLES_DIR) / "shop-extended.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  std::set<std::string> paths = WarnedPaths(ss.str());
  REQUIRE(paths.count("spec.qosClass") == 1);
  REQUIRE(paths.count("spec.intents.deadline") == 1);
  REQUIRE(paths.count("spec.placement.numberOfLocations") == 0);
  REQUIRE(paths.count("spec.codecoapp-msspec[0].autoscaling") == 0);
  REQUIRE(paths.count("spec.codecoapp-msspec[1].stateful") == 0);
  REQUIRE(paths.count("spec.codecoapp-msspec[0].replicas") == 0);
  REQUIRE(paths.count("spec.performanceProfile") == 0);
}

}  // namespace
}  // namespace codeco::acm
