// codecoctl — the command-line client of codeco.
//
//   codecoctl health ADDRESS [--service NAME] [--timeout 5s]
//                    [--insecure | --ca FILE --cert FILE --key FILE]
//
// More commands (apply, get, describe, watch, up, down, fault) arrive with
// the issues that build what they talk to.
#include <cstring>
#include <iostream>
#include <map>
#include <string>

#include "absl/time/time.h"
#include "codeco/common/tls.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace {

constexpr char kUsage[] =
    "usage: codecoctl <command> [args]\n"
    "\n"
    "commands:\n"
    "  health ADDRESS [--service NAME] [--timeout 5s] [--insecure | --ca F --cert F --key F]\n"
    "      Asks any codeco service for its gRPC health (grpc.health.v1.Health/Check).\n"
    "      Prints SERVING or NOT_SERVING; exits 0 only when SERVING.\n";

// Flags of the form --name value or --name=value after the positionals.
struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;
};

bool ParseArgs(int argc, char** argv, int first, Args* out, std::string* error) {
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      out->positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (name == "insecure") {
      value = "true";
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      *error = "--" + name + " needs a value";
      return false;
    }
    out->flags[name] = value;
  }
  return true;
}

int Health(const Args& args) {
  if (args.positional.size() != 1) {
    std::cerr << "codecoctl health: expected one ADDRESS (host:port)\n" << kUsage;
    return 2;
  }
  for (const auto& [name, value] : args.flags) {
    if (name != "service" && name != "timeout" && name != "insecure" && name != "ca" &&
        name != "cert" && name != "key") {
      std::cerr << "codecoctl health: unknown flag --" << name << "\n";
      return 2;
    }
  }
  const std::string& address = args.positional[0];
  absl::Duration timeout = absl::Seconds(5);
  if (auto it = args.flags.find("timeout"); it != args.flags.end()) {
    if (!absl::ParseDuration(it->second, &timeout) || timeout <= absl::ZeroDuration()) {
      std::cerr << "codecoctl health: --timeout: not a positive duration: " << it->second << "\n";
      return 2;
    }
  }
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (args.flags.contains("insecure")) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    auto get = [&](const char* key) {
      auto it = args.flags.find(key);
      return it == args.flags.end() ? std::string() : it->second;
    };
    auto tls = codeco::MakeChannelCredentials({get("ca"), get("cert"), get("key")});
    if (!tls.ok()) {
      std::cerr << "codecoctl health: " << tls.status().message()
                << "\n(give --ca, --cert and --key, or --insecure for plaintext on loopback)\n";
      return 2;
    }
    creds = *tls;
  }
  auto stub = grpc::health::v1::Health::NewStub(grpc::CreateChannel(address, creds));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::health::v1::HealthCheckRequest request;
  if (auto it = args.flags.find("service"); it != args.flags.end()) request.set_service(it->second);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) {
    std::cerr << "codecoctl health: " << address << ": " << status.error_message() << " (code "
              << status.error_code() << ")\n";
    return 1;
  }
  std::cout << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status())
            << "\n";
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "help") == 0) {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  Args args;
  std::string error;
  if (!ParseArgs(argc, argv, 2, &args, &error)) {
    std::cerr << "codecoctl " << command << ": " << error << "\n";
    return 2;
  }
  if (command == "health") return Health(args);
  std::cerr << "codecoctl: unknown command \"" << command << "\"\n" << kUsage;
  return 2;
}
