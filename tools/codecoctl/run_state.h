#pragma once
// What `codecoctl up` started, saved as JSON so later commands (`down`,
// `health`, `get`, ...) find the federation without flags. The file is
// $CODECO_HOME/state.json (CODECO_HOME defaults to ~/.codeco).

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace codeco::ctl {

/// One started process.
struct RunProcess {
  /// "<cluster>/<service>", "codef" or "prometheus".
  std::string name;
  /// Process id.
  pid_t pid = 0;
  /// Text its command line contains (the binary path), to recognise it.
  std::string command;
  /// Its gRPC address (empty for non-gRPC processes).
  std::string grpc;
  /// Its metrics or HTTP address (may be empty).
  std::string http;
  /// True when its gRPC endpoint is plaintext (CODEF's loopback control API).
  bool plaintext = false;
  /// The command line it was started with (`codecoctl restart` reuses it).
  std::vector<std::string> argv;
};

/// A running federation.
struct RunState {
  /// Scenario file it was started from.
  std::string scenario;
  /// Directory with data, logs, configs and certificates of this run.
  std::string run_dir;
  /// Where the hub ACM listens (the user-facing API).
  std::string acm;
  /// Where the hub SWM listens (assignment plans).
  std::string swm;
  /// Where the hub NetMA listens (the federation's measured network).
  std::string netma;
  /// CODEF's control API address.
  std::string codef_control;
  /// Prometheus URL, empty when not started.
  std::string prometheus;
  /// The checkpoint registry, "host:port" (plain HTTP), empty when not started.
  std::string registry;
  /// Plaintext services (development) instead of mTLS.
  bool insecure = false;
  /// Client identity for codecoctl (empty when insecure).
  std::string ca_file, cert_file, key_file;
  /// Every started process, in start order.
  std::vector<RunProcess> processes;
};

/// $CODECO_HOME, or ~/.codeco.
std::string CodecoHome();
/// The state file path.
std::string StateFilePath();
/// Writes `state` atomically (temp file + rename).
absl::Status SaveRunState(const RunState& state);
/// Reads the state file; NOT_FOUND when no federation is up.
absl::StatusOr<RunState> LoadRunState();
/// Removes the state file.
void RemoveRunState();
/// (cluster, gRPC address) of every "<cluster>/<service>" process of
/// `state`, in start order.
std::vector<std::pair<std::string, std::string>> ServiceAddresses(const RunState& state,
                                                                  const std::string& service);

}  // namespace codeco::ctl
