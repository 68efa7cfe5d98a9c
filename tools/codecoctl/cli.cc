#include "cli.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "codeco/common/tls.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "run_state.h"

namespace codeco::ctl {

std::string Args::Get(const std::string& name, const std::string& fallback) const {
  auto it = flags.find(name);
  return it == flags.end() ? fallback : it->second;
}

std::vector<std::string> Args::GetAll(const std::string& name) const {
  auto it = all_values.find(name);
  return it == all_values.end() ? std::vector<std::string>() : it->second;
}

std::string FlagName(const std::string& name) {
  return name.size() == 1 ? "-" + name : "--" + name;
}

absl::StatusOr<Args> ParseArgs(int argc, char** argv, int first,
                               const std::set<std::string>& switches,
                               const std::set<std::string>& valued) {
  Args out;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    // kubectl-style short flags: -f FILE, -o json.
    if (arg.size() == 2 && arg[0] == '-' && std::isalpha(static_cast<unsigned char>(arg[1]))) {
      arg = "-" + arg;
    }
    if (arg.rfind("--", 0) != 0) {
      out.positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (switches.contains(name)) {
      out.flags[name] = has_value ? value : "true";
    } else if (valued.contains(name)) {
      if (!has_value) {
        if (i + 1 >= argc) {
          return absl::InvalidArgumentError(absl::StrCat(FlagName(name), ": needs a value"));
        }
        value = argv[++i];
      }
      out.flags[name] = value;
      out.all_values[name].push_back(value);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(FlagName(name), ": unknown flag"));
    }
  }
  return out;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> ChannelTo(const std::string& address,
                                                         const Args& args) {
  if (args.Has("insecure")) {
    return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  }
  TlsFiles files{args.Get("ca"), args.Get("cert"), args.Get("key")};
  if (files.ca_file.empty() && files.cert_file.empty() && files.key_file.empty()) {
    auto state = LoadRunState();
    if (state.ok() && state->insecure) {
      return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
    }
    if (state.ok()) files = {state->ca_file, state->cert_file, state->key_file};
  }
  auto creds = MakeChannelCredentials(files);
  if (!creds.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        creds.status().message(),
        "\n(give --ca, --cert and --key, or --insecure for plaintext on loopback)"));
  }
  return grpc::CreateChannel(address, *creds);
}

std::unique_ptr<grpc::ClientContext> ContextWithTimeout(const Args& args,
                                                        absl::Duration fallback) {
  absl::Duration timeout = fallback;
  if (args.Has("timeout") && !absl::ParseDuration(args.Get("timeout"), &timeout)) {
    timeout = fallback;
  }
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return context;
}

std::string BinDir() {
  if (const char* dir = std::getenv("CODECO_BIN_DIR"); dir != nullptr && *dir != '\0') return dir;
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

int Fail(const std::string& command, const std::string& message) {
  std::cerr << "codecoctl " << command << ": " << message << "\n";
  return 1;
}

}  // namespace codeco::ctl
