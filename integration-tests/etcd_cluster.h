#pragma once
// A real etcd cluster (Debian's etcd-server) on loopback for tests: N members
// with their own data directories under a scratch directory, started
// together, killed and restarted one by one, stopped when the object goes.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "codeco/common/tls.h"
#include "process.h"

namespace codeco::testing {

/// N etcd members on 127.0.0.1 with free client and peer ports.
class EtcdCluster {
 public:
  /// Starts `members` members keeping data and logs under `dir`; call
  /// WaitReady before use. Transactions may hold up to 4096 operations and
  /// requests up to 8 MiB (etcd's defaults are 128 and 1.5 MiB).
  EtcdCluster(const std::filesystem::path& dir, int members);
  /// The same over mutual TLS: every member presents `tls`'s certificate to
  /// clients and peers and accepts only certificates of its CA.
  EtcdCluster(const std::filesystem::path& dir, int members, TlsFiles tls);
  /// Kills every member still running.
  ~EtcdCluster();

  /// OK once the cluster answers a linearizable read (it has a leader);
  /// UNAVAILABLE with the members' last log lines when `deadline` passes.
  absl::Status WaitReady(absl::Time deadline);
  /// Client endpoints, host:port, one per member.
  std::vector<std::string> endpoints() const;
  /// The endpoints joined by ',' (the form store.etcd.endpoints takes).
  std::string endpoints_flag() const;
  /// Kills member `index` with SIGKILL.
  void Kill(int index);
  /// Starts member `index` again on its data directory (it rejoins).
  void Restart(int index);

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    std::unique_ptr<ChildProcess> process;
  };
  void Start(int index, bool rejoin);
  // "https" with TLS, else "http": the members' URLs.
  std::string Scheme() const;

  std::filesystem::path dir_;
  std::vector<Member> members_;
  std::string initial_cluster_;
  TlsFiles tls_;
};

}  // namespace codeco::testing
