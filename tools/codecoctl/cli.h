#pragma once
// Shared plumbing of codecoctl commands: argument parsing, and channels to
// the federation `codecoctl up` started (found through the run state).

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"

namespace codeco::ctl {

/// Positional arguments and --flags of one command.
struct Args {
  /// Arguments that are not flags, in order.
  std::vector<std::string> positional;
  /// --name value, --name=value; a flag in `switches` alone means "true".
  std::map<std::string, std::string> flags;

  /// The flag's value or `fallback`.
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  /// True when the flag was given.
  bool Has(const std::string& name) const { return flags.contains(name); }
};

/// Parses argv[first..argc). `switches` are flags that take no value; every
/// flag must be in `switches` or `valued`. Errors name the flag.
absl::StatusOr<Args> ParseArgs(int argc, char** argv, int first,
                               const std::set<std::string>& switches,
                               const std::set<std::string>& valued);

/// A channel to `address`: plaintext with --insecure, mTLS with --ca/--cert/--key,
/// else the identity recorded by `codecoctl up`.
absl::StatusOr<std::shared_ptr<grpc::Channel>> ChannelTo(const std::string& address,
                                                         const Args& args);

/// A context whose deadline is --timeout (default `fallback`) from now.
std::unique_ptr<grpc::ClientContext> ContextWithTimeout(const Args& args, absl::Duration fallback);

/// The directory codecoctl itself lives in (the build's bin/ directory).
std::string BinDir();

/// `codecoctl health`.
int RunHealth(const Args& args);
/// `codecoctl up`.
int RunUp(const Args& args);
/// `codecoctl down`.
int RunDown(const Args& args);
/// `codecoctl fault`.
int RunFault(const Args& args);
/// `codecoctl apply -f FILE`.
int RunApply(const Args& args);
/// `codecoctl get apps|clusters`.
int RunGet(const Args& args);
/// `codecoctl describe app NAME`.
int RunDescribe(const Args& args);
/// `codecoctl delete app NAME`.
int RunDelete(const Args& args);

}  // namespace codeco::ctl
