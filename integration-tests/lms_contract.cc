#include "lms_contract.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace codeco::testing {
namespace {

using codeco::lms::v1::CreatePodRequest;
using codeco::lms::v1::CreatePodResponse;
using codeco::lms::v1::LmsService;
using codeco::lms::v1::Pod;

// Longest the contract waits for a change it caused.
constexpr absl::Duration kPatience = absl::Seconds(30);
// Labels of the contract's pods.
constexpr char kAppLabel[] = "app.kubernetes.io/name";
constexpr char kAppValue[] = "lms-contract";

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  return context;
}

Pod MakePod(const std::string& name, const std::string& node, const std::string& role) {
  Pod pod;
  pod.set_name(name);
  pod.set_node_name(node);
  (*pod.mutable_labels())[kAppLabel] = kAppValue;
  (*pod.mutable_labels())["contract.codeco.io/role"] = role;
  (*pod.mutable_annotations())["contract.codeco.io/note"] = "made by the LMS contract";
  auto* c = pod.add_containers();
  c->set_name("main");
  c->set_image("registry.example/contract/" + role + ":1.0");
  c->add_args("--serve");
  (*c->mutable_env())["ROLE"] = role;
  auto* port = c->add_ports();
  port->set_name("http");
  port->set_port(8080);
  port->set_protocol("TCP");
  c->mutable_requests()->set_cpu_millicores(100);
  c->mutable_requests()->set_memory_bytes(int64_t{64} << 20);
  return pod;
}

std::unique_ptr<PodWatchReader> WatchPods(LmsService::Stub* stub, const std::string& version) {
  codeco::lms::v1::WatchPodsRequest request;
  request.set_resource_version(version);
  (*request.mutable_label_selector()->mutable_match_labels())[kAppLabel] = kAppValue;
  return std::make_unique<PodWatchReader>(stub, request);
}

// True when `events` hold one of `type` for pod `name` (in `phase` unless
// unspecified).
bool Saw(const std::vector<codeco::lms::v1::WatchPodsResponse>& events,
         codeco::common::v1::WatchEventType type, const std::string& name,
         codeco::lms::v1::PodPhase phase = codeco::lms::v1::POD_PHASE_UNSPECIFIED) {
  return std::any_of(events.begin(), events.end(), [&](const auto& e) {
    return e.type() == type && e.pod().name() == name &&
           (phase == codeco::lms::v1::POD_PHASE_UNSPECIFIED || e.pod().phase() == phase) &&
           !e.resource_version().empty();
  });
}

std::vector<std::string> NodeNames(LmsService::Stub* stub, int page_size,
                                   const codeco::common::v1::LabelSelector& selector) {
  std::vector<std::string> names;
  codeco::lms::v1::ListNodesRequest request;
  request.set_page_size(page_size);
  *request.mutable_label_selector() = selector;
  for (int pages = 0; pages < 10000; ++pages) {
    codeco::lms::v1::ListNodesResponse response;
    grpc::Status s = stub->ListNodes(Context().get(), request, &response);
    INFO(s.error_message());
    REQUIRE(s.ok());
    REQUIRE(!response.resource_version().empty());
    if (page_size > 0) REQUIRE(response.nodes_size() <= page_size);
    for (const auto& n : response.nodes()) names.push_back(n.name());
    if (response.next_page_token().empty()) break;
    request.set_page_token(response.next_page_token());
  }
  return names;
}

std::vector<std::string> PodNames(LmsService::Stub* stub,
                                  codeco::lms::v1::ListPodsRequest request) {
  std::vector<std::string> names;
  for (int pages = 0; pages < 10000; ++pages) {
    codeco::lms::v1::ListPodsResponse response;
    grpc::Status s = stub->ListPods(Context().get(), request, &response);
    INFO(s.error_message());
    REQUIRE(s.ok());
    for (const auto& p : response.pods()) names.push_back(p.name());
    if (response.next_page_token().empty()) break;
    request.set_page_token(response.next_page_token());
  }
  return names;
}

codeco::lms::v1::ListPodsRequest ContractPods() {
  codeco::lms::v1::ListPodsRequest request;
  (*request.mutable_label_selector()->mutable_match_labels())[kAppLabel] = kAppValue;
  return request;
}

void CheckNodes(const LmsUnderTest& lms) {
  LmsService::Stub* stub = lms.stub;
  const std::vector<std::string> all = NodeNames(stub, 0, {});
  REQUIRE(!all.empty());
  REQUIRE(std::is_sorted(all.begin(), all.end()));
  REQUIRE(std::find(all.begin(), all.end(), lms.node) != all.end());
  // One node a page visits the same nodes in the same order.
  REQUIRE(NodeNames(stub, 1, {}) == all);

  codeco::lms::v1::GetNodeRequest get;
  get.set_name(lms.node);
  codeco::lms::v1::GetNodeResponse node;
  grpc::Status s = stub->GetNode(Context().get(), get, &node);
  INFO(s.error_message());
  REQUIRE(s.ok());
  REQUIRE(node.node().name() == lms.node);
  REQUIRE(node.node().condition() == codeco::lms::v1::NODE_CONDITION_READY);
  REQUIRE(!node.node().unschedulable());
  REQUIRE(node.node().allocatable().cpu_millicores() > 0);
  REQUIRE(node.node().allocatable().cpu_millicores() <= node.node().capacity().cpu_millicores());
  REQUIRE(node.node().allocatable().memory_bytes() <= node.node().capacity().memory_bytes());
  REQUIRE(!node.node().resource_version().empty());

  // Label selectors: the node's own labels find it; an absent label finds none.
  codeco::common::v1::LabelSelector own;
  for (const auto& [key, value] : node.node().labels()) (*own.mutable_match_labels())[key] = value;
  const std::vector<std::string> matching = NodeNames(stub, 0, own);
  REQUIRE(std::find(matching.begin(), matching.end(), lms.node) != matching.end());
  codeco::common::v1::LabelSelector absent;
  auto* term = absent.add_match_expressions();
  term->set_key("contract.codeco.io/absent");
  term->set_op(codeco::common::v1::LABEL_SELECTOR_OPERATOR_EXISTS);
  REQUIRE(NodeNames(stub, 0, absent).empty());

  get.set_name("no-such-node");
  REQUIRE(stub->GetNode(Context().get(), get, &node).error_code() == grpc::StatusCode::NOT_FOUND);
  get.set_name("");
  REQUIRE(stub->GetNode(Context().get(), get, &node).error_code() ==
          grpc::StatusCode::INVALID_ARGUMENT);
  codeco::lms::v1::ListNodesRequest negative;
  negative.set_page_size(-1);
  codeco::lms::v1::ListNodesResponse listed;
  REQUIRE(stub->ListNodes(Context().get(), negative, &listed).error_code() ==
          grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace

PodWatchReader::PodWatchReader(LmsService::Stub* stub,
                               const codeco::lms::v1::WatchPodsRequest& request) {
  context_.set_deadline(absl::ToChronoTime(absl::Now() + absl::Minutes(2)));
  reader_ = stub->WatchPods(&context_, request);
  thread_ = std::thread([this] {
    codeco::lms::v1::WatchPodsResponse r;
    while (reader_->Read(&r)) {
      absl::MutexLock lock(&mu_);
      seen_.push_back(r);
    }
    grpc::Status end = reader_->Finish();
    absl::MutexLock lock(&mu_);
    end_ = end;
    done_ = true;
  });
}

PodWatchReader::~PodWatchReader() {
  context_.TryCancel();
  thread_.join();
}

bool PodWatchReader::WaitFor(
    const std::function<bool(const std::vector<codeco::lms::v1::WatchPodsResponse>&)>& found,
    const std::function<void()>& advance) {
  const absl::Time give_up = absl::Now() + kPatience;
  while (absl::Now() < give_up) {
    {
      absl::MutexLock lock(&mu_);
      if (found(seen_)) return true;
      if (done_) return false;
    }
    advance();
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

bool PodWatchReader::Saw(codeco::common::v1::WatchEventType type, const std::string& name) {
  return WaitFor([&](const auto& events) {
    return std::any_of(events.begin(), events.end(),
                       [&](const auto& e) { return e.type() == type && e.pod().name() == name; });
  });
}

grpc::Status PodWatchReader::End() {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&done_), kPatience);
  return done_ ? end_ : grpc::Status(grpc::StatusCode::UNKNOWN, "still open");
}

void CheckLmsContract(const LmsUnderTest& lms) {
  REQUIRE(lms.stub != nullptr);
  LmsService::Stub* stub = lms.stub;
  CheckNodes(lms);

  // The version before the contract's pods exist.
  codeco::lms::v1::ListPodsResponse before;
  REQUIRE(stub->ListPods(Context().get(), ContractPods(), &before).ok());
  REQUIRE(before.pods().empty());
  REQUIRE(!before.resource_version().empty());
  auto from_list = WatchPods(stub, before.resource_version());

  // Creation is checked before anything is made.
  CreatePodResponse created;
  CreatePodRequest create;
  *create.mutable_pod() = MakePod("contract-web", "", "web");
  grpc::Status s = stub->CreatePod(Context().get(), create, &created);
  REQUIRE(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  REQUIRE(s.error_message().rfind("pod.node_name", 0) == 0);
  *create.mutable_pod() = MakePod("contract-web", "no-such-node", "web");
  REQUIRE(stub->CreatePod(Context().get(), create, &created).error_code() ==
          grpc::StatusCode::NOT_FOUND);

  // A pod, created once even when the call is retried.
  *create.mutable_pod() = MakePod("contract-web", lms.node, "web");
  create.set_request_id("contract-create-1");
  s = stub->CreatePod(Context().get(), create, &created);
  INFO(s.error_message());
  REQUIRE(s.ok());
  REQUIRE(created.pod().name() == "contract-web");
  REQUIRE(created.pod().node_name() == lms.node);
  REQUIRE(created.pod().labels().at("contract.codeco.io/role") == "web");
  REQUIRE(created.pod().annotations().at("contract.codeco.io/note") == "made by the LMS contract");
  REQUIRE(created.pod().containers_size() == 1);
  REQUIRE(created.pod().containers(0).image() == "registry.example/contract/web:1.0");
  REQUIRE(created.pod().containers(0).requests().cpu_millicores() == 100);
  REQUIRE(created.pod().containers(0).env().at("ROLE") == "web");
  REQUIRE(created.pod().containers(0).ports(0).port() == 8080);
  REQUIRE((created.pod().phase() == codeco::lms::v1::POD_PHASE_PENDING ||
           created.pod().phase() == codeco::lms::v1::POD_PHASE_RUNNING));
  REQUIRE(!created.pod().resource_version().empty());
  CreatePodResponse retried;
  s = stub->CreatePod(Context().get(), create, &retried);
  INFO(s.error_message());
  REQUIRE(s.ok());
  REQUIRE(retried.pod().name() == "contract-web");
  create.set_request_id("contract-create-2");
  REQUIRE(stub->CreatePod(Context().get(), create, &retried).error_code() ==
          grpc::StatusCode::ALREADY_EXISTS);

  // It starts; the watch from the list's version sees it come and run.
  REQUIRE(from_list->WaitFor(
      [](const auto& e) {
        return Saw(e, codeco::common::v1::WATCH_EVENT_TYPE_ADDED, "contract-web");
      },
      lms.advance));
  const bool ran = from_list->WaitFor(
      [](const auto& e) {
        return Saw(e, codeco::common::v1::WATCH_EVENT_TYPE_MODIFIED, "contract-web",
                   codeco::lms::v1::POD_PHASE_RUNNING) ||
               Saw(e, codeco::common::v1::WATCH_EVENT_TYPE_ADDED, "contract-web",
                   codeco::lms::v1::POD_PHASE_RUNNING);
      },
      lms.advance);

  REQUIRE(ran);
  codeco::lms::v1::GetPodRequest get;
  get.set_name("contract-web");
  codeco::lms::v1::GetPodResponse got;
  REQUIRE(stub->GetPod(Context().get(), get, &got).ok());
  REQUIRE(got.pod().phase() == codeco::lms::v1::POD_PHASE_RUNNING);
  REQUIRE(got.pod().node_name() == lms.node);
  get.set_name("no-such-pod");
  REQUIRE(stub->GetPod(Context().get(), get, &got).error_code() == grpc::StatusCode::NOT_FOUND);

  // The node counts what its pods request.
  codeco::lms::v1::GetNodeRequest node_request;
  node_request.set_name(lms.node);
  codeco::lms::v1::GetNodeResponse node;
  REQUIRE(stub->GetNode(Context().get(), node_request, &node).ok());
  REQUIRE(node.node().requested().cpu_millicores() >= 100);

  // A second pod; lists filter by node, labels and phase, and page.
  *create.mutable_pod() = MakePod("contract-db", lms.node, "db");
  create.set_request_id("");
  s = stub->CreatePod(Context().get(), create, &created);
  INFO(s.error_message());
  REQUIRE(s.ok());
  const std::vector<std::string> both = {"contract-db", "contract-web"};
  REQUIRE(PodNames(stub, ContractPods()) == both);
  auto paged = ContractPods();
  paged.set_page_size(1);
  REQUIRE(PodNames(stub, paged) == both);
  auto on_node = ContractPods();
  on_node.set_node_name(lms.node);
  REQUIRE(PodNames(stub, on_node) == both);
  on_node.set_node_name("no-such-node");
  REQUIRE(PodNames(stub, on_node).empty());
  auto web = ContractPods();
  (*web.mutable_label_selector()->mutable_match_labels())["contract.codeco.io/role"] = "web";
  REQUIRE(PodNames(stub, web) == std::vector<std::string>{"contract-web"});
  auto not_web = ContractPods();
  auto* term = not_web.mutable_label_selector()->add_match_expressions();
  term->set_key("contract.codeco.io/role");
  term->set_op(codeco::common::v1::LABEL_SELECTOR_OPERATOR_NOT_IN);
  term->add_values("web");
  REQUIRE(PodNames(stub, not_web) == std::vector<std::string>{"contract-db"});
  auto failed = ContractPods();
  failed.set_phase(codeco::lms::v1::POD_PHASE_FAILED);
  REQUIRE(PodNames(stub, failed).empty());

  // A watch from nothing starts with what exists.
  auto from_nothing = WatchPods(stub, "");
  REQUIRE(from_nothing->WaitFor(
      [](const auto& e) {
        return Saw(e, codeco::common::v1::WATCH_EVENT_TYPE_ADDED, "contract-web") &&
               Saw(e, codeco::common::v1::WATCH_EVENT_TYPE_ADDED, "contract-db");
      },
      lms.advance));

  // Usage of the node.
  codeco::lms::v1::GetNodeUsageRequest usage_request;
  usage_request.set_node(lms.node);
  codeco::lms::v1::GetNodeUsageResponse usage;
  s = stub->GetNodeUsage(Context().get(), usage_request, &usage);
  INFO(s.error_message());
  REQUIRE(s.ok());
  REQUIRE(usage.usage().node() == lms.node);
  usage_request.set_node("no-such-node");
  REQUIRE(stub->GetNodeUsage(Context().get(), usage_request, &usage).error_code() ==
          grpc::StatusCode::NOT_FOUND);

  // Deletion: answered with the pod, then gone; the watches see it go.
  for (const std::string& name : both) {
    codeco::lms::v1::DeletePodRequest del;
    del.set_name(name);
    codeco::lms::v1::DeletePodResponse deleted;
    s = stub->DeletePod(Context().get(), del, &deleted);
    INFO(s.error_message());
    REQUIRE(s.ok());
    REQUIRE(deleted.pod().name() == name);
  }
  REQUIRE(from_list->WaitFor(
      [](const auto& e) {
        return Saw(e, codeco::common::v1::WATCH_EVENT_TYPE_DELETED, "contract-web") &&
               Saw(e, codeco::common::v1::WATCH_EVENT_TYPE_DELETED, "contract-db");
      },
      lms.advance));
  get.set_name("contract-web");
  REQUIRE(stub->GetPod(Context().get(), get, &got).error_code() == grpc::StatusCode::NOT_FOUND);
  codeco::lms::v1::DeletePodRequest again;
  again.set_name("contract-web");
  codeco::lms::v1::DeletePodResponse deleted;
  REQUIRE(stub->DeletePod(Context().get(), again, &deleted).error_code() ==
          grpc::StatusCode::NOT_FOUND);
  REQUIRE(PodNames(stub, ContractPods()).empty());
}

}  // namespace codeco::testing
