#include "etcd_cluster.h"

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codeco/common/etcd_client.h"
#include "codeco/common/ports.h"

namespace codeco::testing {

EtcdCluster::EtcdCluster(const std::filesystem::path& dir, int members)
    : EtcdCluster(dir, members, TlsFiles{}) {}

EtcdCluster::EtcdCluster(const std::filesystem::path& dir, int members, TlsFiles tls)
    : dir_(dir), tls_(std::move(tls)) {
  const std::string scheme = Scheme();
  // 64 ports a process: tests running at once (consecutive pids) look in
  // ranges of their own, and FreePort skips what others hold.
  int next_port = 20000 + static_cast<int>((getpid() % 300) * 64);
  auto free_port = [&next_port] {
    absl::StatusOr<int> port = FreePort("127.0.0.1", next_port);
    if (!port.ok()) throw std::runtime_error(std::string(port.status().message()));
    next_port = *port + 1;
    return *port;
  };
  std::vector<std::string> peers;
  for (int i = 0; i < members; ++i) {
    Member member;
    member.name = absl::StrCat("m", i);
    member.client_port = free_port();
    member.peer_port = free_port();
    peers.push_back(absl::StrCat(member.name, "=", scheme, "://127.0.0.1:", member.peer_port));
    members_.push_back(std::move(member));
  }
  initial_cluster_ = absl::StrJoin(peers, ",");
  for (int i = 0; i < members; ++i) Start(i, /*rejoin=*/false);
}

std::string EtcdCluster::Scheme() const { return tls_.ca_file.empty() ? "http" : "https"; }

EtcdCluster::~EtcdCluster() {
  for (Member& member : members_) {
    if (member.process) member.process->Stop(SIGKILL, absl::Now() + absl::Seconds(5));
  }
}

void EtcdCluster::Start(int index, bool rejoin) {
  Member& member = members_[index];
  const std::string scheme = Scheme();
  member.process = std::make_unique<ChildProcess>(
      EtcdMemberCommand({.name = member.name,
                         .data_dir = (dir_ / member.name).string(),
                         .client_url = absl::StrCat(scheme, "://127.0.0.1:", member.client_port),
                         .peer_url = absl::StrCat(scheme, "://127.0.0.1:", member.peer_port),
                         .initial_cluster = initial_cluster_,
                         .cluster_token = dir_.filename().string(),
                         .rejoin = rejoin,
                         .tls = tls_}),
      (dir_ / (member.name + ".log")).string());
}

absl::Status EtcdCluster::WaitReady(absl::Time deadline) {
  absl::Status ready = WaitForEtcd(endpoints(), deadline, tls_);
  if (ready.ok()) return ready;
  std::string logs;
  for (const Member& member : members_) {
    std::string log = ReadWholeFile(dir_ / (member.name + ".log"));
    if (log.size() > 600) log = log.substr(log.size() - 600);
    absl::StrAppend(&logs, "\n--- ", member.name, ": ", log);
  }
  return absl::Status(ready.code(), absl::StrCat(ready.message(), logs));
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (const Member& member : members_) {
    out.push_back(absl::StrCat("127.0.0.1:", member.client_port));
  }
  return out;
}

std::string EtcdCluster::endpoints_flag() const { return absl::StrJoin(endpoints(), ","); }

void EtcdCluster::Kill(int index) {
  Member& member = members_[index];
  if (member.process) member.process->Stop(SIGKILL, absl::Now() + absl::Seconds(5));
  member.process.reset();
}

void EtcdCluster::Restart(int index) {
  Kill(index);
  Start(index, /*rejoin=*/true);
}

}  // namespace codeco::testing
