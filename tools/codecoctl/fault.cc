// codecoctl fault — inject faults into the emulated federation (CODEF):
//   fault link A B --rtt 50ms | --latency 25ms | --bandwidth 10Mbps | --loss 5% | --cut | --heal
//   fault node CLUSTER/NODE --fail | --recover | --load CPU [--memory BYTES]
//   fault pod CLUSTER/POD --usage-profile PROFILE | --succeed | --fail [--message TEXT]
//   fault cluster NAME --partition | --heal | --load-factor F
//   fault hub --cut | --heal
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli.h"
#include "codeco/codef/v1/codef_service.grpc.pb.h"
#include "codeco/common/quantity.h"
#include "grpcpp/create_channel.h"
#include "run_state.h"

namespace codeco::ctl {
namespace {

using codeco::codef::v1::CodefService;

constexpr char kUsage[] =
    "usage: codecoctl fault link A B [--rtt D | --latency D] [--bandwidth B] [--loss R] "
    "[--cut | --heal]\n"
    "       codecoctl fault node CLUSTER/NODE --fail | --recover | --load CPU [--memory BYTES]\n"
    "       codecoctl fault pod CLUSTER/POD --usage-profile PROFILE | --succeed | --fail "
    "[--message TEXT]\n"
    "       codecoctl fault cluster NAME --partition | --heal | --load-factor F\n"
    "       codecoctl fault hub --cut | --heal\n"
    "  --load: the node's background load (outside its pods), a share of its CPU\n"
    "  capacity (90%) or a CPU quantity (1500m, 2); --load 0 removes it.\n";

int Report(const grpc::Status& status, const std::string& done) {
  if (!status.ok()) {
    std::cerr << "codecoctl fault: " << status.error_message() << "\n";
    return 1;
  }
  std::cout << done << "\n";
  return 0;
}

int Link(CodefService::Stub& stub, const Args& args) {
  if (args.positional.size() != 3) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string& a = args.positional[1];
  const std::string& b = args.positional[2];
  if (args.Has("heal") && !args.Has("rtt") && !args.Has("latency") && !args.Has("bandwidth") &&
      !args.Has("loss")) {
    // Back to the scenario's conditions, both directions.
    auto context = ContextWithTimeout(args, absl::Seconds(10));
    codeco::codef::v1::ResetLinkConditionsRequest request;
    request.set_from_cluster(a);
    request.set_to_cluster(b);
    codeco::codef::v1::ResetLinkConditionsResponse response;
    return Report(stub.ResetLinkConditions(context.get(), request, &response),
                  "link " + a + " <-> " + b + " healed (scenario conditions restored)");
  }
  // Start from what is in force and change only what was asked.
  codeco::codef::v1::LinkConditions conditions;
  {
    auto context = ContextWithTimeout(args, absl::Seconds(10));
    codeco::codef::v1::GetLinkConditionsRequest request;
    request.set_from_cluster(a);
    request.set_to_cluster(b);
    codeco::codef::v1::GetLinkConditionsResponse response;
    grpc::Status status = stub.GetLinkConditions(context.get(), request, &response);
    if (!status.ok()) return Report(status, "");
    conditions = response.conditions();
  }
  if (args.Has("rtt") || args.Has("latency")) {
    bool rtt = args.Has("rtt");
    auto nanos = ParseDurationNanos(args.Get(rtt ? "rtt" : "latency"));
    if (!nanos.ok()) {
      std::cerr << "codecoctl fault: --" << (rtt ? "rtt" : "latency") << ": "
                << nanos.status().message() << "\n";
      return 2;
    }
    conditions.set_one_way_latency_ns(rtt ? *nanos / 2 : *nanos);
  }
  if (args.Has("bandwidth")) {
    auto bps = ParseBandwidthBps(args.Get("bandwidth"));
    if (!bps.ok()) {
      std::cerr << "codecoctl fault: --bandwidth: " << bps.status().message() << "\n";
      return 2;
    }
    conditions.set_bandwidth_bps(*bps);
  }
  if (args.Has("loss")) {
    auto loss = ParseRatio(args.Get("loss"));
    if (!loss.ok()) {
      std::cerr << "codecoctl fault: --loss: " << loss.status().message() << "\n";
      return 2;
    }
    conditions.set_loss_ratio(*loss);
  }
  if (args.Has("cut")) conditions.set_cut(true);
  if (args.Has("heal")) conditions.set_cut(false);
  auto context = ContextWithTimeout(args, absl::Seconds(10));
  codeco::codef::v1::SetLinkConditionsRequest request;
  request.set_from_cluster(a);
  request.set_to_cluster(b);
  *request.mutable_conditions() = conditions;
  request.set_symmetric(true);
  codeco::codef::v1::SetLinkConditionsResponse response;
  const auto& c = conditions;
  return Report(stub.SetLinkConditions(context.get(), request, &response),
                absl::StrCat("link ", a, " <-> ", b, ": rtt ",
                             FormatDurationNanos(2 * c.one_way_latency_ns()), ", bandwidth ",
                             c.bandwidth_bps() == 0 ? "unlimited" : FormatBandwidth(c.bandwidth_bps()),
                             ", loss ", c.loss_ratio() * 100, "%", c.cut() ? ", CUT" : ""));
}

// A load step: the node's background load.
int NodeLoad(CodefService::Stub& stub, const Args& args, const std::string& cluster,
             const std::string& node) {
  codeco::codef::v1::SetNodeLoadRequest request;
  request.set_cluster(cluster);
  request.set_node(node);
  if (args.Has("load")) {
    const std::string text = args.Get("load");
    if (!text.empty() && text.back() == '%') {
      auto share = ParseRatio(text);
      if (!share.ok() || *share < 0 || *share > 1) {
        std::cerr << "codecoctl fault: --load: must be 0%-100% or a CPU quantity (1500m): \""
                  << text << "\"\n";
        return 2;
      }
      request.set_cpu_fraction(*share);
    } else {
      auto millicores = ParseCpuMillicores(text);
      if (!millicores.ok()) {
        std::cerr << "codecoctl fault: --load: " << millicores.status().message() << "\n";
        return 2;
      }
      request.set_cpu_millicores(*millicores);
    }
  }
  if (args.Has("memory")) {
    auto bytes = ParseBytes(args.Get("memory"));
    if (!bytes.ok()) {
      std::cerr << "codecoctl fault: --memory: " << bytes.status().message() << "\n";
      return 2;
    }
    request.set_memory_bytes(*bytes);
  }
  auto context = ContextWithTimeout(args, absl::Seconds(10));
  codeco::codef::v1::SetNodeLoadResponse response;
  grpc::Status status = stub.SetNodeLoad(context.get(), request, &response);
  return Report(status, absl::StrCat("node ", cluster, "/", node, " background load: cpu ",
                                     FormatCpu(response.cpu_millicores()), " of ",
                                     FormatCpu(response.cpu_capacity_millicores()), ", memory ",
                                     FormatBytes(response.memory_bytes())));
}

int Node(CodefService::Stub& stub, const Args& args) {
  size_t slash = args.positional.size() == 2 ? args.positional[1].find('/') : std::string::npos;
  const bool load = args.Has("load") || args.Has("memory");
  if (slash == std::string::npos ||
      int{args.Has("fail")} + int{args.Has("recover")} + int{load} != 1) {
    std::cerr << kUsage;
    return 2;
  }
  std::string cluster = args.positional[1].substr(0, slash);
  std::string node = args.positional[1].substr(slash + 1);
  if (load) return NodeLoad(stub, args, cluster, node);
  auto context = ContextWithTimeout(args, absl::Seconds(10));
  if (args.Has("fail")) {
    codeco::codef::v1::FailNodeRequest request;
    request.set_cluster(cluster);
    request.set_node(node);
    codeco::codef::v1::FailNodeResponse response;
    grpc::Status status = stub.FailNode(context.get(), request, &response);
    return Report(status, absl::StrCat("node ", cluster, "/", node, " failed (",
                                       response.failed_pod_count(), " pods failed)"));
  }
  codeco::codef::v1::RecoverNodeRequest request;
  request.set_cluster(cluster);
  request.set_node(node);
  codeco::codef::v1::RecoverNodeResponse response;
  return Report(stub.RecoverNode(context.get(), request, &response),
                "node " + cluster + "/" + node + " recovered");
}

int Pod(CodefService::Stub& stub, const Args& args) {
  size_t slash = args.positional.size() == 2 ? args.positional[1].find('/') : std::string::npos;
  if (slash == std::string::npos ||
      int{args.Has("usage-profile")} + int{args.Has("succeed")} + int{args.Has("fail")} != 1) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string cluster = args.positional[1].substr(0, slash);
  const std::string pod = args.positional[1].substr(slash + 1);
  if (args.Has("succeed") || args.Has("fail")) {
    codeco::codef::v1::EndPodRequest request;
    request.set_cluster(cluster);
    request.set_pod(pod);
    request.set_succeeded(args.Has("succeed"));
    request.set_message(args.Get("message"));
    auto context = ContextWithTimeout(args, absl::Seconds(10));
    codeco::codef::v1::EndPodResponse response;
    return Report(stub.EndPod(context.get(), request, &response),
                  "pod " + args.positional[1] + (request.succeeded() ? " succeeded" : " failed"));
  }
  codeco::codef::v1::SetPodLoadRequest request;
  request.set_cluster(cluster);
  request.set_pod(pod);
  request.set_usage_profile(args.Get("usage-profile"));
  auto context = ContextWithTimeout(args, absl::Seconds(10));
  codeco::codef::v1::SetPodLoadResponse response;
  return Report(stub.SetPodLoad(context.get(), request, &response),
                "pod " + args.positional[1] + " usage profile: " + request.usage_profile());
}

int Cluster(CodefService::Stub& stub, const Args& args) {
  if (args.positional.size() != 2 ||
      int{args.Has("partition")} + int{args.Has("heal")} + int{args.Has("load-factor")} != 1) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string& name = args.positional[1];
  auto context = ContextWithTimeout(args, absl::Seconds(10));
  if (args.Has("load-factor")) {
    double factor = 0;
    if (!absl::SimpleAtod(args.Get("load-factor"), &factor)) {
      std::cerr << "codecoctl fault: --load-factor: not a number: \"" << args.Get("load-factor")
                << "\"\n";
      return 2;
    }
    codeco::codef::v1::SetClusterLoadRequest request;
    request.set_cluster(name);
    request.set_load_factor(factor);
    codeco::codef::v1::SetClusterLoadResponse response;
    return Report(stub.SetClusterLoad(context.get(), request, &response),
                  absl::StrCat("cluster ", name, ": pods use ", factor, "x their CPU"));
  }
  if (args.Has("partition")) {
    codeco::codef::v1::PartitionClusterRequest request;
    request.set_cluster(name);
    codeco::codef::v1::PartitionClusterResponse response;
    return Report(stub.PartitionCluster(context.get(), request, &response),
                  "cluster " + name + " partitioned");
  }
  codeco::codef::v1::HealClusterRequest request;
  request.set_cluster(name);
  codeco::codef::v1::HealClusterResponse response;
  return Report(stub.HealCluster(context.get(), request, &response), "cluster " + name + " healed");
}

int Hub(CodefService::Stub& stub, const Args& args) {
  if (args.positional.size() != 1 || args.Has("cut") == args.Has("heal")) {
    std::cerr << kUsage;
    return 2;
  }
  auto context = ContextWithTimeout(args, absl::Seconds(10));
  if (args.Has("cut")) {
    codeco::codef::v1::CutHubResponse response;
    return Report(stub.CutHub(context.get(), codeco::codef::v1::CutHubRequest(), &response),
                  "hub cut away from every cluster");
  }
  codeco::codef::v1::HealHubResponse response;
  return Report(stub.HealHub(context.get(), codeco::codef::v1::HealHubRequest(), &response),
                "hub reachable again");
}

}  // namespace

int RunFault(const Args& args) {
  if (args.positional.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  std::string control = args.Get("codef");
  if (control.empty()) {
    auto state = LoadRunState();
    if (!state.ok()) {
      std::cerr << "codecoctl fault: " << state.status().message() << "\n";
      return 2;
    }
    control = state->codef_control;
  }
  auto stub = CodefService::NewStub(
      grpc::CreateChannel(control, grpc::InsecureChannelCredentials()));
  const std::string& what = args.positional[0];
  if (what == "link") return Link(*stub, args);
  if (what == "node") return Node(*stub, args);
  if (what == "pod") return Pod(*stub, args);
  if (what == "cluster") return Cluster(*stub, args);
  if (what == "hub") return Hub(*stub, args);
  std::cerr << "codecoctl fault: unknown target \"" << what << "\"\n" << kUsage;
  return 2;
}

}  // namespace codeco::ctl
