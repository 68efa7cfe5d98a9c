// codecoctl apply -f FILE [--dry-run] [-o table|yaml|json]
// codecoctl get apps|clusters [-o table|json]
// codecoctl describe app NAME
// codecoctl delete app NAME
#include <fstream>
#include <set>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "codeco/common/proto_util.h"
#include "cli.h"
#include "codeco/acm/v1/acm_service.grpc.pb.h"
#include "codeco/common/quantity.h"
#include "codeco/swm/v1/swm_service.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "run_state.h"

namespace codeco::ctl {
namespace {

using codeco::acm::v1::AcmService;

// "PHASE_RUNNING" -> "Running" for enum names with a prefix.
std::string Pretty(std::string name, const std::string& prefix) {
  if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  for (size_t i = 0; i < name.size(); ++i) {
    name[i] = i == 0 ? name[i] : static_cast<char>(std::tolower(name[i]));
    if (name[i] == '_') name[i] = '-';
  }
  return name;
}

std::string Json(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

// The ACM address: --acm, else the federation's.
absl::StatusOr<std::string> AcmAddress(const Args& args) {
  if (args.Has("acm")) return args.Get("acm");
  auto state = LoadRunState();
  if (!state.ok()) return state.status();
  return state->acm;
}

absl::StatusOr<std::unique_ptr<AcmService::Stub>> AcmStub(const Args& args) {
  auto address = AcmAddress(args);
  if (!address.ok()) return address.status();
  auto channel = ChannelTo(*address, args);
  if (!channel.ok()) return channel.status();
  return AcmService::NewStub(*channel);
}

int Fail(const std::string& command, const std::string& message) {
  std::cerr << "codecoctl " << command << ": " << message << "\n";
  return 1;
}

void PrintPlacements(const acm::v1::Application& app) {
  std::printf("  %-18s %-14s %-12s %-28s %s\n", "SERVICE", "CLUSTER", "NODE", "POD", "READY");
  for (const auto& p : app.status().placements()) {
    std::printf("  %-18s %-14s %-12s %-28s %s\n", p.service().c_str(), p.cluster().c_str(),
                p.node().c_str(), p.pod().c_str(), p.ready() ? "yes" : "no");
  }
}

}  // namespace

int RunApply(const Args& args) {
  std::string file = args.Get("f", args.Get("filename"));
  if (file.empty()) return Fail("apply", "-f FILE is required");
  std::ifstream in(file);
  if (!in) return Fail("apply", "cannot read " + file);
  std::stringstream text;
  text << in.rdbuf();
  auto stub = AcmStub(args);
  if (!stub.ok()) return Fail("apply", std::string(stub.status().message()));
  acm::v1::ApplyApplicationRequest request;
  request.set_cam_yaml(text.str());
  request.set_dry_run(args.Has("dry-run"));
  auto context = ContextWithTimeout(args, absl::Seconds(30));
  acm::v1::ApplyApplicationResponse response;
  grpc::Status status = (*stub)->ApplyApplication(context.get(), request, &response);
  if (!status.ok()) {
    // Field-path errors, one per line, as ACM sent them.
    std::cerr << "codecoctl apply: " << file << " was refused (" << status.error_code() << "):\n"
              << status.error_message() << "\n";
    return 1;
  }
  if (args.Get("o") == "json") {
    std::cout << Json(response) << "\n";
    return 0;
  }
  const auto& app = response.application();
  std::cout << "application/" << app.metadata().name()
            << (args.Has("dry-run") ? " validated (dry run)"
                                    : response.created() ? " created" : " configured")
            << " (spec revision " << app.spec_revision() << ")\n";
  for (const auto& w : response.warnings()) std::cout << "warning: " << w << "\n";
  return 0;
}

int RunGet(const Args& args) {
  if (args.positional.size() != 1) return Fail("get", "usage: codecoctl get apps|clusters");
  const std::string& what = args.positional[0];
  auto stub = AcmStub(args);
  if (!stub.ok()) return Fail("get", std::string(stub.status().message()));
  if (what == "apps" || what == "applications" || what == "app") {
    acm::v1::ListApplicationsRequest request;
    request.set_page_size(1000);
    acm::v1::ListApplicationsResponse response;
    auto context = ContextWithTimeout(args, absl::Seconds(10));
    grpc::Status status = (*stub)->ListApplications(context.get(), request, &response);
    if (!status.ok()) return Fail("get", status.error_message());
    if (args.Get("o") == "json") {
      std::cout << Json(response) << "\n";
      return 0;
    }
    std::printf("%-20s %-11s %-8s %-9s %-6s %s\n", "NAME", "PHASE", "STATUS", "SERVICES", "REV",
                "PLACED ON");
    for (const auto& app : response.applications()) {
      std::set<std::string> clusters;
      for (const auto& p : app.status().placements()) clusters.insert(p.cluster());
      std::string on;
      for (const auto& c : clusters) on += (on.empty() ? "" : ",") + c;
      std::printf("%-20s %-11s %-8s %-9d %-6ld %s\n", app.metadata().name().c_str(),
                  Pretty(acm::v1::ApplicationPhase_Name(app.status().phase()), "APPLICATION_PHASE_")
                      .c_str(),
                  Pretty(acm::v1::StatusLevel_Name(app.status().status()), "STATUS_LEVEL_").c_str(),
                  app.spec().services_size(), static_cast<long>(app.spec_revision()),
                  on.empty() ? "-" : on.c_str());
    }
    return 0;
  }
  if (what == "clusters" || what == "cluster") {
    acm::v1::ListClustersRequest request;
    request.set_page_size(1000);
    acm::v1::ListClustersResponse response;
    auto context = ContextWithTimeout(args, absl::Seconds(10));
    grpc::Status status = (*stub)->ListClusters(context.get(), request, &response);
    if (!status.ok()) return Fail("get", status.error_message());
    if (args.Get("o") == "json") {
      std::cout << Json(response) << "\n";
      return 0;
    }
    std::printf("%-16s %-12s %-9s %-14s %-6s %-10s %-10s\n", "NAME", "HEALTH", "TIER", "REGION",
                "NODES", "FREE CPU", "FREE MEM");
    for (const auto& c : response.clusters()) {
      const auto& cap = c.capacity();
      std::printf("%-16s %-12s %-9s %-14s %-6d %-10s %-10s\n", c.metadata().name().c_str(),
                  Pretty(acm::v1::ClusterHealth_Name(c.health()), "CLUSTER_HEALTH_").c_str(),
                  TierName(c.cluster_labels().tier()).c_str(),
                  c.cluster_labels().region().c_str(), cap.ready_node_count(),
                  FormatCpu(cap.free().cpu_millicores()).c_str(),
                  FormatBytes(cap.free().memory_bytes()).c_str());
    }
    return 0;
  }
  return Fail("get", "unknown resource \"" + what + "\" (apps, clusters)");
}

int RunDescribe(const Args& args) {
  if (args.positional.size() != 2 || args.positional[0] != "app") {
    return Fail("describe", "usage: codecoctl describe app NAME");
  }
  auto stub = AcmStub(args);
  if (!stub.ok()) return Fail("describe", std::string(stub.status().message()));
  acm::v1::GetApplicationRequest request;
  request.set_name(args.positional[1]);
  acm::v1::GetApplicationResponse response;
  auto context = ContextWithTimeout(args, absl::Seconds(10));
  grpc::Status status = (*stub)->GetApplication(context.get(), request, &response);
  if (!status.ok()) return Fail("describe", status.error_message());
  const auto& app = response.application();
  if (args.Get("o") == "json") {
    std::cout << Json(app) << "\n";
    return 0;
  }
  std::printf("Name:           %s\n", app.metadata().name().c_str());
  std::printf("Spec revision:  %ld\n", static_cast<long>(app.spec_revision()));
  std::printf("Phase:          %s\n",
              Pretty(acm::v1::ApplicationPhase_Name(app.status().phase()), "APPLICATION_PHASE_").c_str());
  std::printf("Status:         %s\n",
              Pretty(acm::v1::StatusLevel_Name(app.status().status()), "STATUS_LEVEL_").c_str());
  if (!app.status().error_msg().empty()) std::printf("Message:        %s\n", app.status().error_msg().c_str());
  std::printf("Neighborhood:   %s\n", app.status().neighborhood_id().c_str());
  std::printf("Services:\n");
  for (const auto& s : app.spec().services()) {
    std::printf("  %-18s replicas %-3d cpu %-6s memory %s\n", s.name().c_str(), s.replicas(),
                FormatCpu(s.requests().cpu_millicores()).c_str(),
                FormatBytes(s.requests().memory_bytes()).c_str());
  }
  std::printf("Placement:\n");
  PrintPlacements(app);

  // Channel latencies against their bounds come from SWM's plan.
  auto state = LoadRunState();
  if (state.ok() && !state->swm.empty()) {
    auto channel = ChannelTo(state->swm, args);
    if (channel.ok()) {
      swm::v1::GetAssignmentPlanRequest plan_request;
      plan_request.set_application(app.metadata().name());
      swm::v1::GetAssignmentPlanResponse plan;
      auto plan_context = ContextWithTimeout(args, absl::Seconds(10));
      grpc::Status s = swm::v1::SwmService::NewStub(*channel)->GetAssignmentPlan(
          plan_context.get(), plan_request, &plan);
      if (s.ok() && plan.plan().channels_size() > 0) {
        std::printf("Channels (plan %s):\n", plan.plan().id().c_str());
        std::printf("  %-18s %-30s %-26s %-10s %-10s %s\n", "CHANNEL", "FROM -> TO", "PATH",
                    "EXPECTED", "BOUND", "OK");
        for (const auto& c : plan.plan().channels()) {
          std::string path;
          for (const auto& cl : c.clusters()) path += (path.empty() ? "" : " -> ") + cl;
          std::printf("  %-18s %-30s %-26s %-10s %-10s %s\n", c.channel().c_str(),
                      (c.from_workload() + " -> " + c.to_workload()).c_str(), path.c_str(),
                      FormatDurationNanos(c.expected_latency_ns()).c_str(),
                      c.max_delay_ns() == 0 ? "-" : FormatDurationNanos(c.max_delay_ns()).c_str(),
                      c.satisfied() ? "yes" : "NO");
        }
      }
    }
  }
  return 0;
}

int RunDelete(const Args& args) {
  if (args.positional.size() != 2 || args.positional[0] != "app") {
    return Fail("delete", "usage: codecoctl delete app NAME");
  }
  auto stub = AcmStub(args);
  if (!stub.ok()) return Fail("delete", std::string(stub.status().message()));
  acm::v1::DeleteApplicationRequest request;
  request.set_name(args.positional[1]);
  acm::v1::DeleteApplicationResponse response;
  auto context = ContextWithTimeout(args, absl::Seconds(10));
  grpc::Status status = (*stub)->DeleteApplication(context.get(), request, &response);
  if (!status.ok()) return Fail("delete", status.error_message());
  std::cout << "application/" << args.positional[1] << " deleted\n";
  return 0;
}

}  // namespace codeco::ctl
