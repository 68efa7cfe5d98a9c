// codecoctl health [ADDRESS] [--service NAME] [--all] [--timeout 5s]
//                  [--insecure | --ca F --cert F --key F]
#include <iostream>

#include "cli.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "run_state.h"

namespace codeco::ctl {
namespace {

using grpc::health::v1::HealthCheckResponse;

// Checks one address; prints a line; true when SERVING.
bool CheckOne(const std::string& label, const std::string& address, const Args& args) {
  auto channel = ChannelTo(address, args);
  if (!channel.ok()) {
    std::cerr << "codecoctl health: " << channel.status().message() << "\n";
    return false;
  }
  auto context = ContextWithTimeout(args, absl::Seconds(5));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(args.Get("service"));
  HealthCheckResponse response;
  grpc::Status status =
      grpc::health::v1::Health::NewStub(*channel)->Check(context.get(), request, &response);
  std::string prefix = label.empty() ? "" : label + "  ";
  if (!status.ok()) {
    std::cout << prefix << "UNREACHABLE  " << address << ": " << status.error_message() << "\n";
    return false;
  }
  std::cout << prefix << HealthCheckResponse::ServingStatus_Name(response.status())
            << (label.empty() ? "" : "  " + address) << "\n";
  return response.status() == HealthCheckResponse::SERVING;
}

}  // namespace

int RunHealth(const Args& args) {
  if (args.Has("all")) {
    auto state = LoadRunState();
    if (!state.ok()) {
      std::cerr << "codecoctl health: " << state.status().message() << "\n";
      return 2;
    }
    bool all = true;
    for (const auto& p : state->processes) {
      if (p.grpc.empty()) continue;
      char label[64];
      std::snprintf(label, sizeof label, "%-24s", p.name.c_str());
      Args process_args = args;
      if (p.plaintext) process_args.flags["insecure"] = "true";
      all = CheckOne(label, p.grpc, process_args) && all;
    }
    return all ? 0 : 1;
  }
  std::string address;
  if (args.positional.size() == 1) {
    address = args.positional[0];
  } else if (args.positional.empty()) {
    auto state = LoadRunState();
    if (!state.ok()) {
      std::cerr << "codecoctl health: give an ADDRESS (host:port), or start a federation with "
                   "codecoctl up\n";
      return 2;
    }
    address = state->acm;
  } else {
    std::cerr << "codecoctl health: expected at most one ADDRESS\n";
    return 2;
  }
  return CheckOne("", address, args) ? 0 : 1;
}

}  // namespace codeco::ctl
