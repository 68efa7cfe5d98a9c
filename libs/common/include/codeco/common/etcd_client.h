#pragma once
// A small client of etcd's v3 gRPC API (KV.Range, KV.Txn and leases), the
// transport under EtcdKvStore and LeaderElection. It holds one channel per
// member endpoint and fails over between them: a call that finds its member
// unreachable, without a leader, or too slow moves to the next member and is
// retried until its overall deadline. Every call this client makes is safe to
// repeat (puts of known values, deletes, reads, and guarded transactions).

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "codeco/common/tls.h"
#include "etcd/etcdserverpb/rpc_subset.grpc.pb.h"

namespace codeco {

/// How to reach an etcd cluster.
struct EtcdClientOptions {
  /// Member client endpoints, host:port, at least one. Required.
  std::vector<std::string> endpoints;
  /// TLS to the members (CA, client certificate and key). Empty `ca_file`:
  /// plaintext, accepted only when every endpoint is on loopback.
  TlsFiles tls;
  /// Longest one attempt on one member may take before the next member is
  /// tried. Default: 2 s.
  absl::Duration attempt_timeout = absl::Seconds(2);
  /// Longest a call may take over all its attempts. Default: 10 s.
  absl::Duration call_timeout = absl::Seconds(10);
  /// Largest message sent or received, bytes. etcd's own request limit
  /// (--max-request-bytes, 1.5 MiB by default) applies on top. Default: 64 MiB.
  int max_message_bytes = 64 << 20;
};

/// A thread-safe client of one etcd cluster.
class EtcdClient {
 public:
  /// Creates channels to every endpoint; connects lazily. INVALID_ARGUMENT for
  /// bad options (no endpoint, plaintext off loopback, unreadable TLS files).
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(const EtcdClientOptions& options);

  /// KV.Range.
  absl::StatusOr<etcdserverpb::RangeResponse> Range(const etcdserverpb::RangeRequest& request);
  /// KV.Txn.
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& request);
  /// Lease.LeaseGrant: a new lease living `ttl` (whole seconds, at least 1)
  /// unless renewed; its id.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl);
  /// Lease.LeaseRevoke: ends lease `id` and deletes the keys attached to it.
  absl::Status RevokeLease(int64_t id);
  /// One renewal of lease `id` (a LeaseKeepAlive round trip) taking at most
  /// `timeout` (and at most the call timeout): the seconds the lease now has
  /// left, 0 when it no longer exists.
  absl::StatusOr<int64_t> KeepAlive(int64_t id, absl::Duration timeout);

  /// The endpoints, in the order they are tried.
  const std::vector<std::string>& endpoints() const { return options_.endpoints; }

 private:
  struct Member {
    std::string endpoint;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  };
  EtcdClient() = default;
  /// Runs `attempt(member, context)` on the current member and fails over to
  /// the next on UNAVAILABLE or a timed-out attempt, for up to `timeout`.
  template <typename Attempt>
  absl::Status WithFailover(const char* method, absl::Duration timeout, const Attempt& attempt);

  EtcdClientOptions options_;
  std::vector<Member> members_;
  std::atomic<size_t> current_{0};
};

/// Where Debian installs etcd (package etcd-server).
inline constexpr const char* kEtcdBinary = "/usr/bin/etcd";

/// One member of an etcd cluster on this host, as codeco's testbed
/// (`codecoctl up --hub-replicas`) and its tests run it.
struct EtcdMemberSpec {
  /// Member name, unique in the cluster ("etcd-0").
  std::string name;
  /// Its data directory.
  std::string data_dir;
  /// Client and peer URLs, "http://127.0.0.1:PORT" ("https://" with `tls`).
  std::string client_url;
  std::string peer_url;
  /// Every member as name=peer_url, joined by ','.
  std::string initial_cluster;
  /// A token naming this cluster (members of another one are refused).
  std::string cluster_token;
  /// Rejoin a cluster that already exists (a restarted member).
  bool rejoin = false;
  /// Mutual TLS for clients and peers alike: the member's certificate and
  /// key, and the CA whose certificates it accepts from both (client and
  /// peer certificate authentication on). Empty ca_file: plaintext.
  TlsFiles tls;
};

/// The command line of `member` (kEtcdBinary first): 100 ms heartbeats, 1 s
/// elections, transactions of up to 4096 operations and requests of up to
/// 8 MiB (etcd's defaults are 128 and 1.5 MiB; each KvStore batch is one
/// transaction), warnings only in its log.
std::vector<std::string> EtcdMemberCommand(const EtcdMemberSpec& member);

/// OK once the cluster at `endpoints` answers a linearizable read (it has a
/// leader), reached with `tls` (empty: plaintext, loopback only);
/// DEADLINE_EXCEEDED with the last error when `deadline` passes first.
absl::Status WaitForEtcd(const std::vector<std::string>& endpoints, absl::Time deadline,
                         const TlsFiles& tls = {});

}  // namespace codeco
