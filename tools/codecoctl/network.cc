// `codecoctl get costmap|links`: the federation's measured network, from the
// hub NetMA (or one cluster's with --cluster).
#include "network.h"

#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "codeco/common/grpc_status.h"
#include "codeco/netma/v1/netma_service.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "netma/core/alto.h"
#include "run_state.h"

namespace codeco::ctl {
namespace {

namespace pb = codeco::netma::v1;

int Fail(const std::string& message) {
  std::cerr << "codecoctl get: " << message << "\n";
  return 1;
}

// --netma ADDR, else the NetMA of --cluster NAME (default: the hub's) that
// `codecoctl up` started.
absl::StatusOr<std::string> NetmaAddress(const Args& args) {
  if (args.Has("netma")) return args.Get("netma");
  auto state = LoadRunState();
  if (!state.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(state.status().message(), "; pass --netma ADDRESS"));
  }
  if (!args.Has("cluster")) {
    if (state->netma.empty()) {
      return absl::NotFoundError("this federation was started without a hub NetMA");
    }
    return state->netma;
  }
  const std::string name = args.Get("cluster") + "/netma";
  for (const RunProcess& p : state->processes) {
    if (p.name == name) return p.grpc;
  }
  return absl::NotFoundError(absl::StrCat("--cluster: no NetMA of cluster \"",
                                          args.Get("cluster"), "\" in this federation"));
}

absl::StatusOr<std::unique_ptr<pb::NetmaService::Stub>> NetmaStub(const Args& args) {
  auto address = NetmaAddress(args);
  if (!address.ok()) return address.status();
  auto channel = ChannelTo(*address, args);
  if (!channel.ok()) return channel.status();
  return pb::NetmaService::NewStub(*channel);
}

// A cost in the metric's display unit.
std::string FormatCost(pb::CostMetric metric, double cost) {
  switch (metric) {
    case pb::COST_METRIC_DELAY:
      return absl::StrFormat("%.2fms", cost / 1e6);
    case pb::COST_METRIC_BANDWIDTH:
      return absl::StrFormat("%.1fMbps", cost / 1e6);
    case pb::COST_METRIC_LOSS:
      return absl::StrFormat("%.1f%%", cost * 100);
    default:
      return absl::StrFormat("%.3gJ/B", cost);
  }
}

int GetCostMap(const Args& args) {
  const std::string metric_name = args.Get("metric", "delay");
  auto metric = codeco::netma::ParseCostMetricSegment(metric_name);
  if (!metric.ok()) {
    return Fail("--metric: must be delay, bandwidth, loss or energy, not \"" + metric_name + "\"");
  }
  auto stub = NetmaStub(args);
  if (!stub.ok()) return Fail(std::string(stub.status().message()));
  pb::GetCostMapRequest request;
  request.set_metric(*metric);
  request.set_neighborhood_id(args.Get("neighborhood"));
  pb::GetCostMapResponse response;
  auto context = ContextWithTimeout(args, absl::Seconds(10));
  grpc::Status status = (*stub)->GetCostMap(context.get(), request, &response);
  if (!status.ok()) return Fail(status.error_message());
  const pb::CostMap& map = response.cost_map();
  if (args.Get("o") == "json") {
    // The same document NetMA's ALTO HTTP endpoint serves.
    std::cout << codeco::netma::CostMapToAltoJson(map, "networkmap").dump(2) << "\n";
    return 0;
  }
  std::printf("%-14s %-14s %s (%s)\n", "SOURCE", "DESTINATION", "COST",
              codeco::netma::AltoCostMetricName(map.metric()).c_str());
  for (const pb::CostEntry& e : map.entries()) {
    std::printf("%-14s %-14s %s\n", e.source_pid().c_str(), e.destination_pid().c_str(),
                FormatCost(map.metric(), e.cost()).c_str());
  }
  return 0;
}

int GetLinks(const Args& args) {
  auto stub = NetmaStub(args);
  if (!stub.ok()) return Fail(std::string(stub.status().message()));
  absl::StatusOr<pb::ListLinksResponse> listed = ListAllLinks(**stub, args, absl::Seconds(10));
  if (!listed.ok()) return Fail(std::string(listed.status().message()));
  const pb::ListLinksResponse& all = *listed;
  // The virtual links (the hub's NetMA holds them; a member's answers none).
  pb::ListVirtualLinksResponse vlinks;
  pb::ListVirtualLinksRequest vrequest;
  vrequest.set_page_size(1000);
  do {
    pb::ListVirtualLinksResponse page;
    auto context = ContextWithTimeout(args, absl::Seconds(10));
    grpc::Status status = (*stub)->ListVirtualLinks(context.get(), vrequest, &page);
    if (!status.ok()) {
      if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) break;  // not the hub
      return Fail(status.error_message());
    }
    for (const auto& l : page.virtual_links()) *vlinks.add_virtual_links() = l;
    vrequest.set_page_token(page.next_page_token());
  } while (!vrequest.page_token().empty());
  if (args.Get("o") == "json") {
    std::string links_json, vlinks_json;
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    (void)google::protobuf::util::MessageToJsonString(all, &links_json, options);
    (void)google::protobuf::util::MessageToJsonString(vlinks, &vlinks_json, options);
    std::cout << "{\"measured\": " << links_json << ",\n\"virtual\": " << vlinks_json << "}\n";
    return 0;
  }
  std::printf("%-14s %-14s %-10s %-10s %-10s %-12s %-6s %-8s %s\n", "SOURCE", "TARGET", "RTT-EMA",
              "RTT-P50", "RTT-P99", "THROUGHPUT", "LOSS", "AGE", "STATE");
  for (const pb::LinkMetrics& l : all.links()) {
    std::string state = l.failed() ? "Down" : (l.stale() ? "Stale" : "Up");
    std::printf("%-14s %-14s %-10s %-10s %-10s %-12s %-6s %-8s %s\n", l.source_cluster().c_str(),
                l.target_cluster().c_str(),
                absl::StrFormat("%.2fms", static_cast<double>(l.rtt_ema_ns()) / 1e6).c_str(),
                absl::StrFormat("%.2fms", static_cast<double>(l.rtt_p50_ns()) / 1e6).c_str(),
                absl::StrFormat("%.2fms", static_cast<double>(l.rtt_p99_ns()) / 1e6).c_str(),
                absl::StrFormat("%.1fMbps", static_cast<double>(l.throughput_bps()) / 1e6).c_str(),
                absl::StrFormat("%.1f%%", l.loss_ratio() * 100).c_str(),
                absl::StrFormat("%.1fs", static_cast<double>(l.age_ns()) / 1e9).c_str(),
                state.c_str());
  }
  if (vlinks.virtual_links_size() == 0) return 0;
  std::printf("\nVirtual links:\n");
  std::printf("%-20s %-28s %-24s %-10s %-10s %-9s %-9s %s\n", "ID", "APPLICATION/CHANNEL",
              "SOURCE -> TARGET", "CLASS", "HOLDS", "BOUND", "MEASURED", "PHASE");
  for (const pb::VirtualLink& l : vlinks.virtual_links()) {
    std::string phase =
        std::string(absl::StripPrefix(pb::VirtualLinkPhase_Name(l.phase()), "VIRTUAL_LINK_PHASE_"));
    std::printf(
        "%-20s %-28s %-24s %-10s %-10s %-9s %-9s %s\n", l.id().c_str(),
        (l.application() + "/" + l.channel()).c_str(),
        (l.source_cluster() + " -> " + l.target_cluster()).c_str(),
        std::string(absl::StripPrefix(codeco::common::v1::ServiceClass_Name(l.service_class()),
                                      "SERVICE_CLASS_"))
            .c_str(),
        absl::StrFormat("%.1fMbps", static_cast<double>(l.min_bandwidth_bps()) / 1e6).c_str(),
        l.max_delay_ns() == 0
            ? "-"
            : absl::StrFormat("%.1fms", static_cast<double>(l.max_delay_ns()) / 1e6).c_str(),
        l.measured_delay_ns() == 0
            ? "-"
            : absl::StrFormat("%.1fms", static_cast<double>(l.measured_delay_ns()) / 1e6).c_str(),
        phase.c_str());
  }
  return 0;
}

}  // namespace

absl::StatusOr<pb::ListLinksResponse> ListAllLinks(pb::NetmaService::Stub& netma, const Args& args,
                                                   absl::Duration per_call) {
  pb::ListLinksRequest request;
  request.set_page_size(1000);
  pb::ListLinksResponse all;
  do {
    pb::ListLinksResponse page;
    auto context = ContextWithTimeout(args, per_call);
    grpc::Status status = netma.ListLinks(context.get(), request, &page);
    if (!status.ok()) return FromGrpcStatus(status);
    for (const auto& l : page.links()) *all.add_links() = l;
    *all.mutable_local_node() = page.local_node();
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty());
  return all;
}

int RunGetNetwork(const Args& args) {
  const std::string what = args.positional.empty() ? "" : args.positional[0];
  if (what == "costmap") return GetCostMap(args);
  if (what == "links") return GetLinks(args);
  return Fail("usage: codecoctl get costmap [--metric delay|bandwidth|loss|energy] | links");
}

}  // namespace codeco::ctl
