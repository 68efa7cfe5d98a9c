// Kubernetes objects <-> LMS messages (kubelms/core/kube_objects.h), on
// documents in the shape kube-apiserver serves.
#include "kubelms/core/kube_objects.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "codeco/common/url.h"
#include "nlohmann/json.hpp"

namespace codeco::kubelms {
namespace {

using json = nlohmann::json;

const json kNode = json::parse(R"({
  "kind": "Node", "apiVersion": "v1",
  "metadata": {"name": "edge-1", "resourceVersion": "4711",
               "labels": {"kubernetes.io/hostname": "edge-1", "topology.kubernetes.io/zone": "z1"}},
  "spec": {"unschedulable": true, "taints": [{"key": "k", "effect": "NoSchedule"}]},
  "status": {
    "capacity": {"cpu": "4", "memory": "16333420Ki", "nvidia.com/gpu": "1", "pods": "110",
                 "ephemeral-storage": "41186748Ki"},
    "allocatable": {"cpu": "3900m", "memory": "16231020Ki", "nvidia.com/gpu": "1", "pods": "110"},
    "conditions": [
      {"type": "MemoryPressure", "status": "False"},
      {"type": "Ready", "status": "True", "lastHeartbeatTime": "2024-05-01T10:00:00Z"}]}})");

const json kPod = json::parse(R"({
  "kind": "Pod", "apiVersion": "v1",
  "metadata": {"name": "web", "namespace": "codeco", "resourceVersion": "99",
               "creationTimestamp": "2024-05-01T10:00:00Z",
               "labels": {"app": "web"},
               "annotations": {"lms.codeco.io/request-id": "r1", "note": "x"}},
  "spec": {"nodeName": "edge-1",
    "initContainers": [{"name": "init", "image": "busybox",
                        "resources": {"requests": {"cpu": "2", "memory": "10Mi"}}}],
    "containers": [
      {"name": "main", "image": "nginx:1.25", "command": ["nginx"], "args": ["-g", "daemon off;"],
       "env": [{"name": "A", "value": "1"},
               {"name": "SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
       "ports": [{"name": "http", "containerPort": 80}],
       "resources": {"requests": {"cpu": "500m", "memory": "128Mi"},
                     "limits": {"cpu": "1", "memory": "256Mi"}}},
      {"name": "side", "image": "envoy", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}]},
  "status": {"phase": "Pending", "podIP": "10.244.1.7", "startTime": "2024-05-01T10:00:02Z",
    "containerStatuses": [{"name": "main", "state": {"waiting": {"reason": "ImagePullBackOff",
                                                                  "message": "Back-off pulling"}}}]}})");

TEST_CASE("a v1 Node becomes an LMS node with quantities conditions and cordon") {
  auto node = NodeFromKube(kNode, {});
  REQUIRE(node.ok());
  CHECK(node->name() == "edge-1");
  CHECK(node->resource_version() == "4711");
  CHECK(node->labels().at("topology.kubernetes.io/zone") == "z1");
  CHECK(node->capacity().cpu_millicores() == 4000);
  CHECK(node->allocatable().cpu_millicores() == 3900);
  CHECK(node->capacity().memory_bytes() == int64_t{16333420} * 1024);
  CHECK(node->capacity().gpu() == 1);
  CHECK(node->capacity().ephemeral_storage_bytes() == int64_t{41186748} * 1024);
  CHECK(node->condition() == codeco::lms::v1::NODE_CONDITION_READY);
  CHECK(node->heartbeat_time().seconds() == 1714557600);
  CHECK(node->unschedulable());

  json not_ready = kNode;
  not_ready["status"]["conditions"][1]["status"] = "Unknown";
  CHECK(NodeFromKube(not_ready, {})->condition() == codeco::lms::v1::NODE_CONDITION_NOT_READY);
  json bad = kNode;
  bad["status"]["capacity"]["cpu"] = "four";
  auto refused = NodeFromKube(bad, {});
  REQUIRE(!refused.ok());
  CHECK(absl::StartsWith(refused.status().message(), "status.capacity.cpu: "));
  CHECK(!NodeFromKube(json::parse(R"({"kind":"Pod","metadata":{"name":"x"}})"), {}).ok());
  CHECK(!NodeFromKube(json::parse(R"({"kind":"Node","metadata":{}})"), {}).ok());
}

TEST_CASE("a v1 Pod becomes an LMS pod and says why it waits") {
  auto pod = PodFromKube(kPod, {});
  REQUIRE(pod.ok());
  CHECK(pod->name() == "web");
  CHECK(pod->node_name() == "edge-1");
  CHECK(pod->phase() == codeco::lms::v1::POD_PHASE_PENDING);
  CHECK(pod->message() == "container main waiting: ImagePullBackOff: Back-off pulling");
  CHECK(pod->pod_ip() == "10.244.1.7");
  CHECK(pod->create_time().seconds() == 1714557600);
  CHECK(pod->start_time().seconds() == 1714557602);
  // The adapter's own bookkeeping stays hidden.
  CHECK(pod->annotations().count(kRequestIdAnnotation) == 0);
  CHECK(pod->annotations().at("note") == "x");
  REQUIRE(pod->containers_size() == 2);
  const auto& main = pod->containers(0);
  CHECK(main.command(0) == "nginx");
  CHECK(main.args(1) == "daemon off;");
  // Only literal values: a secret reference has no LMS form.
  CHECK(main.env().size() == 1);
  CHECK(main.env().at("A") == "1");
  CHECK(main.ports(0).port() == 80);
  CHECK(main.ports(0).protocol() == "TCP");
  CHECK(main.requests().cpu_millicores() == 500);
  CHECK(main.limits().memory_bytes() == int64_t{256} << 20);

  // What the pod asks of its node: containers summed, the largest init
  // container when larger.
  auto requests = PodRequestsFromKube(kPod, {});
  REQUIRE(requests.ok());
  CHECK(requests->cpu_millicores() == 2000);
  CHECK(requests->memory_bytes() == int64_t{192} << 20);

  json running = kPod;
  running["status"] = {{"phase", "Running"}};
  CHECK(PodFromKube(running, {})->phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  running["status"] = {{"phase", "Failed"}, {"reason", "Evicted"}, {"message", "low memory"}};
  CHECK(PodFromKube(running, {})->message() == "Evicted: low memory");
}

codeco::lms::v1::Pod GoodPod() {
  codeco::lms::v1::Pod pod;
  pod.set_name("web-1");
  pod.set_node_name("edge-1");
  (*pod.mutable_labels())["codeco.io/application"] = "shop";
  auto* c = pod.add_containers();
  c->set_name("main");
  c->set_image("nginx:1.25");
  (*c->mutable_env())["B"] = "2";
  (*c->mutable_env())["A"] = "1";
  c->mutable_requests()->set_cpu_millicores(250);
  c->mutable_requests()->set_memory_bytes(100'000'000);
  c->mutable_requests()->set_gpu(1);
  auto* port = c->add_ports();
  port->set_port(8080);
  return pod;
}

TEST_CASE("a pod to create is checked field by field") {
  REQUIRE(ValidatePodForCreate(GoodPod(), "pod").ok());
  auto refused = [](const std::function<void(codeco::lms::v1::Pod&)>& change) {
    codeco::lms::v1::Pod pod = GoodPod();
    change(pod);
    absl::Status s = ValidatePodForCreate(pod, "pod");
    REQUIRE(s.code() == absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  CHECK(absl::StartsWith(refused([](auto& p) { p.clear_name(); }), "pod.name: is required"));
  CHECK(absl::StartsWith(refused([](auto& p) { p.set_name("Web_1"); }), "pod.name: "));
  CHECK(absl::StartsWith(refused([](auto& p) { p.clear_node_name(); }), "pod.node_name: "));
  CHECK(absl::StartsWith(refused([](auto& p) { p.clear_containers(); }), "pod.containers: "));
  CHECK(absl::StartsWith(refused([](auto& p) { p.mutable_containers(0)->clear_image(); }),
                         "pod.containers[0].image: "));
  CHECK(absl::StartsWith(refused([](auto& p) { *p.add_containers() = p.containers(0); }),
                         "pod.containers[1].name: "));
  CHECK(absl::StartsWith(
      refused([](auto& p) { p.mutable_containers(0)->mutable_ports(0)->set_port(0); }),
      "pod.containers[0].ports[0].port: "));
  CHECK(absl::StartsWith(
      refused([](auto& p) { p.mutable_containers(0)->mutable_ports(0)->set_protocol("HTTP"); }),
      "pod.containers[0].ports[0].protocol: "));
  CHECK(absl::StartsWith(
      refused([](auto& p) { p.mutable_containers(0)->mutable_requests()->set_cpu_millicores(-1); }),
      "pod.containers[0].requests.cpu_millicores: "));
  CHECK(absl::StartsWith(refused([](auto& p) { (*p.mutable_labels())["bad key!"] = "x"; }),
                         "pod.labels[bad key!]: "));
  CHECK(absl::StartsWith(refused([](auto& p) { (*p.mutable_labels())["ok"] = "bad value!"; }),
                         "pod.labels[ok]: "));
}

TEST_CASE("a pod is written as the v1 Pod Kubernetes takes") {
  const json manifest = PodToKube(GoodPod(), "codeco", "req-7", {});
  CHECK(manifest["metadata"]["namespace"] == "codeco");
  CHECK(manifest["metadata"]["annotations"][kRequestIdAnnotation] == "req-7");
  CHECK(manifest["spec"]["nodeName"] == "edge-1");
  const json& c = manifest["spec"]["containers"][0];
  CHECK(c["env"] == json::parse(R"([{"name":"A","value":"1"},{"name":"B","value":"2"}])"));
  CHECK(c["resources"]["requests"]["cpu"] == "250m");
  // Bytes exactly, not rounded to a binary unit.
  CHECK(c["resources"]["requests"]["memory"] == "100000000");
  // GPUs are an extended resource: Kubernetes wants the limit equal to the request.
  CHECK(c["resources"]["limits"]["nvidia.com/gpu"] == "1");
  CHECK(c["ports"][0] == json::parse(R"({"containerPort":8080,"protocol":"TCP"})"));
  // And reads back as it was written.
  json stored = manifest;
  stored["metadata"]["resourceVersion"] = "1";
  auto back = PodFromKube(stored, {});
  REQUIRE(back.ok());
  CHECK(back->containers(0).requests().memory_bytes() == 100'000'000);
  CHECK(back->containers(0).requests().gpu() == 1);
  CHECK(back->labels().at("codeco.io/application") == "shop");
  // A service's pod leaves restartPolicy to Kubernetes (Always).
  CHECK_FALSE(manifest["spec"].contains("restartPolicy"));
  CHECK(back->restart_policy() == codeco::lms::v1::RESTART_POLICY_UNSPECIFIED);
}

TEST_CASE("a job's pod is written with restartPolicy Never and reads back so") {
  codeco::lms::v1::Pod job = GoodPod();
  job.set_restart_policy(codeco::lms::v1::RESTART_POLICY_NEVER);
  json manifest = PodToKube(job, "codeco", "req-8", {});
  CHECK(manifest["spec"]["restartPolicy"] == "Never");
  manifest["metadata"]["resourceVersion"] = "1";
  auto back = PodFromKube(manifest, {});
  REQUIRE(back.ok());
  CHECK(back->restart_policy() == codeco::lms::v1::RESTART_POLICY_NEVER);
  manifest["spec"]["restartPolicy"] = "OnFailure";
  CHECK(PodFromKube(manifest, {})->restart_policy() == codeco::lms::v1::RESTART_POLICY_ON_FAILURE);
}

TEST_CASE("label selectors are written in the API's query syntax and checked") {
  codeco::common::v1::LabelSelector selector;
  (*selector.mutable_match_labels())["tier"] = "edge";
  (*selector.mutable_match_labels())["app"] = "web";
  auto* in = selector.add_match_expressions();
  in->set_key("zone");
  in->set_op(codeco::common::v1::LABEL_SELECTOR_OPERATOR_IN);
  in->add_values("a");
  in->add_values("b");
  auto* absent = selector.add_match_expressions();
  absent->set_key("example.com/gpu");
  absent->set_op(codeco::common::v1::LABEL_SELECTOR_OPERATOR_DOES_NOT_EXIST);
  auto text = LabelSelectorToKube(selector, "label_selector");
  REQUIRE(text.ok());
  CHECK(*text == "app=web,tier=edge,zone in (a,b),!example.com/gpu");

  codeco::common::v1::LabelSelector injection;
  (*injection.mutable_match_labels())["app"] = "web,tier!=x";
  auto refused = LabelSelectorToKube(injection, "label_selector");
  REQUIRE(!refused.ok());
  CHECK(absl::StartsWith(refused.status().message(), "label_selector.match_labels[app]: "));
  codeco::common::v1::LabelSelector empty_in;
  auto* term = empty_in.add_match_expressions();
  term->set_key("zone");
  term->set_op(codeco::common::v1::LABEL_SELECTOR_OPERATOR_IN);
  CHECK(absl::StartsWith(LabelSelectorToKube(empty_in, "s").status().message(),
                         "s.match_expressions[0].values: "));
  CHECK(PercentEncode("a b/c=d,e") == "a%20b%2Fc%3Dd%2Ce");
}

TEST_CASE("kube-apiserver errors become statuses with its words") {
  auto status = [](long code, const std::string& body) {
    return StatusFromKube(code, body, "GET /api/v1/nodes/x");
  };
  absl::Status missing = status(404, R"({"kind":"Status","apiVersion":"v1","metadata":{},
      "status":"Failure","message":"nodes \"x\" not found","reason":"NotFound",
      "details":{"name":"x","kind":"nodes"},"code":404})");
  CHECK(missing.code() == absl::StatusCode::kNotFound);
  CHECK(missing.message() ==
        "kube-apiserver GET /api/v1/nodes/x: HTTP 404 NotFound: nodes \"x\" not found");
  CHECK(status(409, R"({"kind":"Status","reason":"AlreadyExists","code":409})").code() ==
        absl::StatusCode::kAlreadyExists);
  CHECK(status(409, R"({"kind":"Status","reason":"Conflict","code":409})").code() ==
        absl::StatusCode::kAborted);
  absl::Status invalid = status(422, R"({"kind":"Status","reason":"Invalid",
      "message":"Pod \"x\" is invalid",
      "details":{"causes":[{"reason":"FieldValueRequired","message":"Required value",
                             "field":"spec.containers[0].image"}]},"code":422})");
  CHECK(invalid.code() == absl::StatusCode::kInvalidArgument);
  CHECK(absl::StrContains(invalid.message(), "spec.containers[0].image: Required value"));
  CHECK(status(410, R"({"kind":"Status","reason":"Expired","code":410})").code() ==
        absl::StatusCode::kOutOfRange);
  CHECK(status(429, "{}").code() == absl::StatusCode::kUnavailable);
  CHECK(status(503, "<html>busy</html>").code() == absl::StatusCode::kUnavailable);
  CHECK(absl::StrContains(status(503, "<html>busy</html>").message(), "<html>busy</html>"));
  CHECK(status(401, "").code() == absl::StatusCode::kUnauthenticated);
  CHECK(status(403, "").code() == absl::StatusCode::kPermissionDenied);
}

TEST_CASE("quantities as metrics-server reports them round up to whole units") {
  auto q =
      QuantitiesFromKube(json::parse(R"({"cpu":"163478036n","memory":"1452088Ki"})"), {}, "usage");
  REQUIRE(q.ok());
  CHECK(q->cpu_millicores() == 164);
  CHECK(q->memory_bytes() == int64_t{1452088} * 1024);
  auto bad = QuantitiesFromKube(json::parse(R"({"memory":[1]})"), {}, "usage");
  REQUIRE(!bad.ok());
  CHECK(absl::StartsWith(bad.status().message(), "usage.memory: "));
}

}  // namespace
}  // namespace codeco::kubelms
